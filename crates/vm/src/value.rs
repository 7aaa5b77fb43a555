//! Guest values (inside a VM) and host values (plain data crossing the boundary).

use indexmap::IndexMap;

use crate::heap::Gc;
use crate::number::number_to_string;

/// A guest value: 16 bytes, `Copy`; strings, arrays and objects live in the run's heap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// `undefined`.
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number.
    Num(f64),
    /// A string (heap cell).
    Str(Gc),
    /// An array (heap cell).
    Arr(Gc),
    /// A plain object (heap cell).
    Obj(Gc),
    /// A host result not settled yet (reserved for deferred approvals and concurrent host calls).
    Pending(u32),
}

impl Value {
    /// The heap cell this value refers to, if any.
    #[inline]
    pub fn gc(&self) -> Option<Gc> {
        match *self {
            Value::Str(g) | Value::Arr(g) | Value::Obj(g) => Some(g),
            _ => None,
        }
    }
}

/// A host value: plain data, owned, outside any VM. What goes in (context, arguments, capability
/// results) and what comes out (results). JavaScript values are kept as they are (`undefined`,
/// `NaN`, `-0`); [`JsValue::to_json`] applies `JSON.stringify`'s rules.
#[derive(Clone, Debug, PartialEq)]
pub enum JsValue {
    /// `undefined`.
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number.
    Number(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<JsValue>),
    /// A plain object, keys in JavaScript's order.
    Object(IndexMap<String, JsValue>),
}

/// Deepest nesting that crosses the boundary.
pub const MAX_BOUNDARY_DEPTH: usize = 1000;

impl JsValue {
    /// Copies JSON data in.
    pub fn from_json(v: &serde_json::Value) -> JsValue {
        match v {
            serde_json::Value::Null => JsValue::Null,
            serde_json::Value::Bool(b) => JsValue::Bool(*b),
            serde_json::Value::Number(n) => JsValue::Number(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => JsValue::String(s.clone()),
            serde_json::Value::Array(a) => {
                JsValue::Array(a.iter().map(JsValue::from_json).collect())
            }
            serde_json::Value::Object(o) => JsValue::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), JsValue::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Converts by `JSON.stringify`'s rules: `NaN` and infinities become `null`, `undefined`
    /// inside an array becomes `null`, an `undefined` property is dropped. A top-level
    /// `undefined` gives `None`.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        Some(match self {
            JsValue::Undefined => return None,
            JsValue::Null => serde_json::Value::Null,
            JsValue::Bool(b) => serde_json::Value::Bool(*b),
            JsValue::Number(n) => {
                if n.is_finite() {
                    if *n == n.trunc() && n.abs() < 9.007_199_254_740_992e15 {
                        serde_json::Value::Number(serde_json::Number::from(*n as i64))
                    } else {
                        serde_json::Number::from_f64(*n)
                            .map_or(serde_json::Value::Null, serde_json::Value::Number)
                    }
                } else {
                    serde_json::Value::Null
                }
            }
            JsValue::String(s) => serde_json::Value::String(s.clone()),
            JsValue::Array(a) => serde_json::Value::Array(
                a.iter()
                    .map(|v| v.to_json().unwrap_or(serde_json::Value::Null))
                    .collect(),
            ),
            JsValue::Object(o) => serde_json::Value::Object(
                o.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.to_json()?)))
                    .collect(),
            ),
        })
    }

    /// Size in bytes of the JSON text of this value (what `argsMaxBytes` measures), counted by
    /// a walk: no copy of the value or its text is made.
    pub fn json_len(&self) -> usize {
        if matches!(self, JsValue::Undefined) {
            return 0;
        }
        let mut n = Count(0);
        // writing to a counter cannot fail
        let _ = serde_json::to_writer(&mut n, &Json(self));
        n.0
    }

    /// The value as JavaScript's `String()` would print a primitive; arrays and objects as JSON.
    pub fn display(&self) -> String {
        match self {
            JsValue::Undefined => "undefined".into(),
            JsValue::Null => "null".into(),
            JsValue::Bool(b) => b.to_string(),
            JsValue::Number(n) => number_to_string(*n),
            JsValue::String(s) => s.clone(),
            other => serde_json::to_string(&Json(other)).unwrap_or_default(),
        }
    }
}

/// A writer that only counts bytes.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Serializes by [`JsValue::to_json`]'s rules (a top-level `undefined` as `null`) without
/// building a `serde_json::Value` first: `serde_json::to_writer(w, &value)` writes a large result
/// with no second copy of it.
impl serde::Serialize for JsValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&Json(self), s)
    }
}

/// A host value serialized by [`JsValue::to_json`]'s rules without building the JSON value.
struct Json<'a>(&'a JsValue);

impl serde::Serialize for Json<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            JsValue::Undefined | JsValue::Null => s.serialize_unit(),
            JsValue::Bool(b) => s.serialize_bool(*b),
            JsValue::Number(n) if !n.is_finite() => s.serialize_unit(),
            JsValue::Number(n) if *n == n.trunc() && n.abs() < 9.007_199_254_740_992e15 => {
                s.serialize_i64(*n as i64)
            }
            JsValue::Number(n) => s.serialize_f64(*n),
            JsValue::String(x) => s.serialize_str(x),
            JsValue::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&Json(v))?;
                }
                seq.end()
            }
            JsValue::Object(m) => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in m {
                    if !matches!(v, JsValue::Undefined) {
                        map.serialize_entry(k, &Json(v))?;
                    }
                }
                map.end()
            }
        }
    }
}

/// Reads any self-describing data (JSON text, a `serde_json::Value`, another format's value):
/// a unit or `None` is `null`, every number an `f64`, a map's keys as strings in their order.
impl<'de> serde::Deserialize<'de> for JsValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JsValue, D::Error> {
        d.deserialize_any(JsValueVisitor)
    }
}

struct JsValueVisitor;

impl<'de> serde::de::Visitor<'de> for JsValueVisitor {
    type Value = JsValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("plain data (null, a boolean, a number, a string, an array or a map)")
    }
    fn visit_unit<E>(self) -> Result<JsValue, E> {
        Ok(JsValue::Null)
    }
    fn visit_none<E>(self) -> Result<JsValue, E> {
        Ok(JsValue::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<JsValue, D::Error> {
        serde::Deserialize::deserialize(d)
    }
    fn visit_bool<E>(self, b: bool) -> Result<JsValue, E> {
        Ok(JsValue::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n as f64))
    }
    fn visit_u64<E>(self, n: u64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n as f64))
    }
    fn visit_f64<E>(self, n: f64) -> Result<JsValue, E> {
        Ok(JsValue::Number(n))
    }
    fn visit_str<E>(self, s: &str) -> Result<JsValue, E> {
        Ok(JsValue::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<JsValue, E> {
        Ok(JsValue::String(s))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<JsValue, A::Error> {
        // a hostile size hint does not reserve memory
        let mut v = Vec::with_capacity(a.size_hint().unwrap_or(0).min(1024));
        while let Some(x) = a.next_element()? {
            v.push(x);
        }
        Ok(JsValue::Array(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<JsValue, A::Error> {
        let mut m = IndexMap::new();
        while let Some((k, v)) = a.next_entry::<String, JsValue>()? {
            m.insert(k, v);
        }
        Ok(JsValue::Object(m))
    }
}

impl From<serde_json::Value> for JsValue {
    fn from(v: serde_json::Value) -> JsValue {
        JsValue::from_json(&v)
    }
}

#[cfg(test)]
mod tests {
    use super::JsValue;

    /// The walk measures and writes exactly what `to_json` and `serde_json` would.
    #[test]
    fn json_len_and_display_match_the_json_value() {
        let v: JsValue = serde_json::json!({
            "a": [1, -2.5, 1e21, 9007199254740992u64, null, "x\"\n\u{1}é😀", true],
            "": {}, "k": [[], [{}]]
        })
        .into();
        let mut m = indexmap::IndexMap::new();
        m.insert("u".to_string(), JsValue::Undefined);
        m.insert("n".to_string(), JsValue::Number(f64::NAN));
        m.insert("z".to_string(), JsValue::Number(-0.0));
        m.insert("v".to_string(), v);
        m.insert(
            "arr".to_string(),
            JsValue::Array(vec![JsValue::Undefined, JsValue::Number(f64::INFINITY)]),
        );
        let v = JsValue::Object(m);
        let text = v.to_json().unwrap().to_string();
        assert_eq!(v.display(), text);
        assert_eq!(serde_json::to_string(&v).unwrap(), text);
        assert_eq!(v.json_len(), text.len());
        assert_eq!(JsValue::Undefined.json_len(), 0);
        assert_eq!(JsValue::Number(0.1).json_len(), 3);
    }

    /// Deserializing reads back what serializing wrote (by `JSON.stringify`'s rules).
    #[test]
    fn a_value_round_trips_through_serde() {
        let v: JsValue = serde_json::json!({ "b": [1, 2.5, null, "x"], "a": { "t": true } }).into();
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<JsValue>(&text).unwrap(), v);
        assert_eq!(text, r#"{"b":[1,2.5,null,"x"],"a":{"t":true}}"#);
        assert_eq!(
            serde_json::from_str::<JsValue>("[18446744073709551615, -1]").unwrap(),
            JsValue::Array(vec![
                JsValue::Number(1.8446744073709552e19),
                JsValue::Number(-1.0)
            ])
        );
    }

    #[test]
    fn a_value_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<super::Value>(), 16);
    }
}
