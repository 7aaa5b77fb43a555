//! `filter(data, schemaOrExample)` and `Schema.fromExample / response / isValid` (decision 21):
//! JSON Schema from example values, validation, and stripping data to a schema's shape. The work
//! runs on a plain-data copy and is paid per node before anything is allocated in the guest heap.

use ajs_bytecode::NativeId;
use indexmap::IndexMap;

use crate::error::{guest, ErrorKind, Fault, OpResult};
use crate::machine::Vm;
use crate::value::{JsValue, Value};

const SCHEMA_TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "null", "array", "object",
];
const SCHEMA_KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "description",
    "$schema",
    "title",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "default",
    "format",
    "nullable",
];

fn obj(pairs: Vec<(&str, JsValue)>) -> JsValue {
    JsValue::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn s(v: &str) -> JsValue {
    JsValue::String(v.to_string())
}

/// The JSON Schema an example implies: integers are `integer`, every object key is required and
/// no other key is allowed.
pub(crate) fn from_example(v: &JsValue) -> JsValue {
    match v {
        JsValue::String(_) => obj(vec![("type", s("string"))]),
        JsValue::Number(n) if n.fract() == 0.0 && n.is_finite() => {
            obj(vec![("type", s("integer"))])
        }
        JsValue::Number(_) => obj(vec![("type", s("number"))]),
        JsValue::Bool(_) => obj(vec![("type", s("boolean"))]),
        JsValue::Null | JsValue::Undefined => obj(vec![("type", s("null"))]),
        JsValue::Array(items) => obj(vec![
            ("type", s("array")),
            (
                "items",
                items
                    .first()
                    .map_or(JsValue::Object(IndexMap::new()), from_example),
            ),
        ]),
        JsValue::Object(m) => obj(vec![
            ("type", s("object")),
            (
                "properties",
                JsValue::Object(
                    m.iter()
                        .map(|(k, v)| (k.clone(), from_example(v)))
                        .collect(),
                ),
            ),
            ("required", JsValue::Array(m.keys().map(|k| s(k)).collect())),
            ("additionalProperties", JsValue::Bool(false)),
        ]),
    }
}

/// Whether `v` reads as a JSON Schema rather than an example value.
fn is_schema(v: &JsValue) -> bool {
    let JsValue::Object(m) = v else { return false };
    let typed = match m.get("type") {
        Some(JsValue::String(t)) => SCHEMA_TYPES.contains(&t.as_str()),
        Some(JsValue::Array(ts)) => ts
            .iter()
            .all(|t| matches!(t, JsValue::String(t) if SCHEMA_TYPES.contains(&t.as_str()))),
        _ => false,
    };
    typed && m.keys().all(|k| SCHEMA_KEYS.contains(&k.as_str()))
}

fn schema_of(v: &JsValue) -> JsValue {
    if is_schema(v) {
        v.clone()
    } else {
        from_example(v)
    }
}

fn type_matches(t: &str, v: &JsValue) -> bool {
    match (t, v) {
        ("string", JsValue::String(_))
        | ("boolean", JsValue::Bool(_))
        | ("null", JsValue::Null) => true,
        ("number", JsValue::Number(n)) => n.is_finite(),
        ("integer", JsValue::Number(n)) => n.is_finite() && n.fract() == 0.0,
        ("array", JsValue::Array(_)) | ("object", JsValue::Object(_)) => true,
        _ => false,
    }
}

fn kind(v: &JsValue) -> &'static str {
    match v {
        JsValue::Undefined => "undefined",
        JsValue::Null => "null",
        JsValue::Bool(_) => "boolean",
        JsValue::Number(_) => "number",
        JsValue::String(_) => "string",
        JsValue::Array(_) => "array",
        JsValue::Object(_) => "object",
    }
}

/// Validates `v` against `schema` and returns it stripped to the schema's properties.
pub(crate) fn filter(v: &JsValue, schema: &JsValue, path: &str) -> Result<JsValue, String> {
    let JsValue::Object(sm) = schema else {
        return Ok(v.clone());
    };
    if let Some(t) = sm.get("type") {
        let ok = match t {
            JsValue::String(t) => type_matches(t, v),
            JsValue::Array(ts) => ts
                .iter()
                .any(|t| matches!(t, JsValue::String(t) if type_matches(t, v))),
            _ => true,
        };
        if !ok {
            let want = match t {
                JsValue::String(t) => t.clone(),
                other => other.display(),
            };
            return Err(format!("{path}: expected {want}, got {}", kind(v)));
        }
    }
    if let Some(JsValue::Array(allowed)) = sm.get("enum") {
        if !allowed.iter().any(|a| a == v) {
            return Err(format!("{path}: value is not one of the allowed values"));
        }
    }
    match v {
        JsValue::Object(m) => {
            let props = match sm.get("properties") {
                Some(JsValue::Object(p)) => Some(p),
                _ => None,
            };
            if let Some(JsValue::Array(req)) = sm.get("required") {
                for r in req {
                    if let JsValue::String(r) = r {
                        if !m.contains_key(r) || matches!(m.get(r), Some(JsValue::Undefined)) {
                            return Err(format!("{path}: Missing {r}"));
                        }
                    }
                }
            }
            let Some(props) = props else {
                return Ok(v.clone());
            };
            let mut out = IndexMap::new();
            for (k, x) in m {
                match props.get(k) {
                    Some(ps) => {
                        out.insert(k.clone(), filter(x, ps, &format!("{path}.{k}"))?);
                    }
                    None if matches!(sm.get("additionalProperties"), Some(JsValue::Bool(true))) => {
                        out.insert(k.clone(), x.clone());
                    }
                    None => {} // stripped
                }
            }
            Ok(JsValue::Object(out))
        }
        JsValue::Array(items) => match sm.get("items") {
            Some(is) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, x) in items.iter().enumerate() {
                    out.push(filter(x, is, &format!("{path}[{i}]"))?);
                }
                Ok(JsValue::Array(out))
            }
            None => Ok(v.clone()),
        },
        other => Ok(other.clone()),
    }
}

fn nodes(v: &JsValue) -> u64 {
    let mut n = 0u64;
    let mut stack = vec![v];
    while let Some(x) = stack.pop() {
        n += 1;
        match x {
            JsValue::Array(a) => stack.extend(a.iter()),
            JsValue::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    n
}

impl Vm {
    /// `filter`, `Schema.fromExample`, `Schema.response`, `Schema.isValid`.
    pub(crate) fn schema_native(&mut self, id: NativeId, args: &[Value]) -> OpResult<Value> {
        let arg = |i: usize| args.get(i).copied().unwrap_or(Value::Undefined);
        // (a copy within the copy budget, paid for; a refusal the guest may catch, but a
        // value past the budget, or the fuel, ends the run)
        let plain = |vm: &mut Vm, v: Value| {
            vm.export(v, || format!("The data of {}", id.js_name()))
                .map_err(|e| match e.kind {
                    ErrorKind::OutOfFuel => Fault::Fatal(e),
                    _ if Vm::is_copy_limit(&e) => Fault::Fatal(e),
                    _ => Fault::Guest(e.message),
                })
        };
        let out = match id {
            NativeId::SchemaFromExample => {
                let ex = plain(self, arg(0))?;
                self.charge(nodes(&ex).saturating_mul(crate::price::MILLI_PER_SCHEMA_NODE))?;
                from_example(&ex)
            }
            NativeId::SchemaResponse => {
                let name = match arg(0) {
                    Value::Str(g) => String::from_utf16_lossy(self.units(g)),
                    _ => {
                        return guest(
                            "Schema.response(name, schemaOrExample): name must be a string",
                        )
                    }
                };
                let ex = plain(self, arg(1))?;
                self.charge(nodes(&ex).saturating_mul(crate::price::MILLI_PER_SCHEMA_NODE))?;
                obj(vec![
                    ("type", s("json_schema")),
                    (
                        "json_schema",
                        obj(vec![
                            ("name", JsValue::String(name)),
                            ("strict", JsValue::Bool(true)),
                            ("schema", schema_of(&ex)),
                        ]),
                    ),
                ])
            }
            NativeId::Filter | NativeId::SchemaIsValid => {
                let data = plain(self, arg(0))?;
                let ex = plain(self, arg(1))?;
                self.charge(
                    (nodes(&data) + 2 * nodes(&ex))
                        .saturating_mul(crate::price::MILLI_PER_CHECKED_NODE),
                )?;
                let result = filter(&data, &schema_of(&ex), "root");
                match (id, result) {
                    (NativeId::SchemaIsValid, r) => JsValue::Bool(r.is_ok()),
                    (_, Ok(v)) => v,
                    (_, Err(m)) => return guest(m),
                }
            }
            _ => return guest("not a schema builtin"),
        };
        self.import(&out, 0)
    }
}
