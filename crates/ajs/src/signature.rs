//! Checking an agent's arguments against its entry's signature (decision 8).

use ajs_bytecode::{TypeSpec, VerifiedProgram};
use ajs_vm::JsValue;

use crate::json_kind;

fn matches(ty: &TypeSpec, v: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (ty, v) {
        (TypeSpec::Any, _) => true,
        (TypeSpec::String, J::String(_)) => true,
        (TypeSpec::Number, J::Number(_)) => true,
        (TypeSpec::Boolean, J::Bool(_)) => true,
        (TypeSpec::Null, J::Null) => true,
        (TypeSpec::Array(t), J::Array(items)) => items.iter().all(|i| matches(t, i)),
        (TypeSpec::Object(props), J::Object(m)) => props
            .iter()
            .all(|(k, t)| m.get(k.as_str()).is_none_or(|x| matches(t, x))),
        _ => false,
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
                if !matches(&p.ty, v) {
                    return Err(format!(
                        "Argument '{}' must be {}, got {}",
                        p.name,
                        p.ty.describe(),
                        json_kind(v)
                    ));
                }
                out.push(JsValue::from_json(v));
            }
        }
    }
    Ok(out)
}
