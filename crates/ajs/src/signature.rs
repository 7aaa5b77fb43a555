//! Checking an agent's arguments against its entry's signature (decision 8).

use ajs_bytecode::{TypeSpec, VerifiedProgram};
use ajs_vm::JsValue;

use crate::json_kind;

/// Where `v` first fails `ty`: the path inside it (`""` for `v` itself, else `[0].total`,
/// `["a b"]`), what the example asks for there, and the value found. `None` when it matches.
fn mismatch<'v>(
    ty: &TypeSpec,
    v: &'v serde_json::Value,
) -> Option<(String, &'v serde_json::Value, String)> {
    use serde_json::Value as J;
    match (ty, v) {
        (TypeSpec::Any, _)
        | (TypeSpec::String, J::String(_))
        | (TypeSpec::Number, J::Number(_))
        | (TypeSpec::Boolean, J::Bool(_))
        | (TypeSpec::Null, J::Null) => None,
        (TypeSpec::Array(t), J::Array(items)) => items.iter().enumerate().find_map(|(i, x)| {
            mismatch(t, x).map(|(path, got, want)| (format!("[{i}]{path}"), got, want))
        }),
        (TypeSpec::Object(props), J::Object(m)) => props.iter().find_map(|(k, t)| {
            let x = m.get(k.as_str())?;
            mismatch(t, x).map(|(path, got, want)| (format!("{}{path}", key_path(k)), got, want))
        }),
        _ => Some((String::new(), v, ty.describe())),
    }
}

/// `.key` for a key written as a JavaScript identifier, else `["key"]`.
fn key_path(k: &str) -> String {
    let mut chars = k.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        format!(".{k}")
    } else {
        format!("[{}]", serde_json::Value::from(k))
    }
}

/// The entry's arguments in parameter order, or the message refusing them.
pub(crate) fn check_args(
    program: &VerifiedProgram,
    args: &serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<JsValue>, String> {
    let entry = &program.functions[program.entry as usize];
    let Some(sig) = &program.signature else {
        // not an agent program: pass arguments by parameter name
        return Ok(entry
            .params
            .iter()
            .map(|p| {
                args.get(p.as_str())
                    .map_or(JsValue::Undefined, JsValue::from_json)
            })
            .collect());
    };
    let unknown: Vec<&String> = args
        .keys()
        .filter(|k| !sig.params.iter().any(|p| p.name == **k))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|k| format!("'{k}'")).collect();
        let takes: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
        return Err(format!(
            "Unknown argument{} {} ({} takes: {})",
            if names.len() == 1 { "" } else { "s" },
            names.join(", "),
            sig.name,
            if takes.is_empty() {
                "no arguments".to_string()
            } else {
                takes.join(", ")
            }
        ));
    }
    let mut out = Vec::with_capacity(sig.params.len());
    for p in &sig.params {
        match args.get(p.name.as_str()) {
            None if p.required => {
                return Err(format!(
                    "Missing required argument '{}' ({})",
                    p.name,
                    p.ty.describe()
                ));
            }
            None => out.push(JsValue::Undefined),
            // null leaves an optional parameter to its default
            Some(serde_json::Value::Null) if !p.required => out.push(JsValue::Null),
            Some(v) => {
                if let Some((path, got, want)) = mismatch(&p.ty, v) {
                    let kind = json_kind(got);
                    return Err(if path.is_empty() {
                        format!("Argument '{}' must be {want}, got {kind}", p.name)
                    } else {
                        // the path inside the argument, as the program would write it
                        format!(
                            "Argument '{0}': {0}{path} must be {want}, got {kind}",
                            p.name
                        )
                    });
                }
                out.push(JsValue::from_json(v));
            }
        }
    }
    Ok(out)
}
