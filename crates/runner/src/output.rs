//! The outcome as JSON, the same for `POST /run` and every command that runs code (`exec`,
//! `eval`, `run`, `resume`, `replay`).

use ajs::{LogLine, Outcome};
use serde_json::{json, Value};

/// [`Outcome::to_json`] (`result`, `fuelUsed`, `error.message`) plus `error.kind` (see
/// `ErrorKind::name`), `error.line` / `error.column` when the span table is present, and `log`
/// (`[{ level, message }]`) when `with_log` is set.
pub fn outcome_json(out: &Outcome, with_log: bool) -> Value {
    let mut v = out.to_json();
    if let (Some(e), Some(Value::Object(err))) = (&out.error, v.get_mut("error")) {
        err.insert("kind".into(), json!(e.kind.name()));
        if let Some(pos) = e.pos {
            err.insert("line".into(), json!(pos.line));
            err.insert("column".into(), json!(pos.col));
        }
    }
    if with_log {
        if let Value::Object(m) = &mut v {
            m.insert("log".into(), log_json(&out.log));
        }
    }
    v
}

fn log_json(log: &[LogLine]) -> Value {
    Value::Array(
        log.iter()
            .map(|l| {
                let level = match l.level {
                    ajs::LogLevel::Info => "info",
                    ajs::LogLevel::Warn => "warn",
                    ajs::LogLevel::Error => "error",
                };
                json!({ "level": level, "message": l.message })
            })
            .collect(),
    )
}
