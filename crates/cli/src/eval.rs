//! `ajs eval CODE`: run a snippet and print its outcome as one JSON line.

use std::process::ExitCode;

use ajs::{Eval, Options};
use ajs_runner::cli::{at_least_one, fuel};
use ajs_runner::exit::{outcome_code, print_json, Usage, REFUSED};
use ajs_runner::outcome_json;
use clap::Args;
use serde_json::{json, Map, Value};

use crate::{parse_context, read_stdin, runtime};

/// `eval`'s arguments.
#[derive(Args)]
#[command(
    about = "Run a snippet and print its outcome as one JSON line",
    long_about = "Runs a snippet (one expression, or statements with a `return`) and prints its \
outcome as one JSON line, the body `POST /run` answers with:
{\"result\": …, \"fuelUsed\": …, \"error\": {\"message\", \"kind\", \"line\"?, \"column\"?}, \"log\"?: […]}.

Exit codes: 0 the run succeeded, 1 the run failed (guest error, fuel, timeout…), 2 bad usage,
3 input refused (a compile error, source over --max-source-bytes, a context too large)."
)]
pub struct EvalArgs {
    /// The code to run; '-' reads it from stdin.
    #[arg(value_name = "CODE", allow_hyphen_values = true, value_parser = code_arg)]
    code: String,
    /// The context: a JSON object whose keys the code reads as names.
    #[arg(long, value_name = "JSON", value_parser = parse_context)]
    context: Option<Map<String, Value>>,
    /// The fuel budget (default 1000).
    #[arg(long, value_name = "N", value_parser = fuel, allow_negative_numbers = true)]
    fuel: Option<f64>,
    /// The wall-clock limit in milliseconds (default: the library's, `ajs::DEFAULT_TIMEOUT_MS`).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    timeout_ms: Option<u64>,
    /// The source size cap in UTF-8 bytes (default 8192; at least 1).
    #[arg(long, value_name = "BYTES", value_parser = at_least_one::<usize>)]
    max_source_bytes: Option<usize>,
    /// Include the guest's console lines in the outcome: "log": [{"level", "message"}].
    #[arg(long)]
    log: bool,
}

/// CODE may start with `-` (`ajs eval -1`); a `--name` in its place is an unknown option.
fn code_arg(v: &str) -> Result<String, String> {
    if v.starts_with("--") && v.len() > 2 {
        return Err(format!("unknown option '{v}'"));
    }
    Ok(v.to_string())
}

/// `ajs eval`.
pub fn cmd_eval(a: &EvalArgs) -> Result<ExitCode, Usage> {
    let mut options = Options::default();
    if let Some(f) = a.fuel {
        options.fuel = f;
    }
    if let Some(t) = a.timeout_ms {
        options.timeout_ms = t;
    }
    if let Some(m) = a.max_source_bytes {
        options.max_source_bytes = m;
    }
    options.validate().map_err(|e| Usage(e.to_string()))?;
    let code = if a.code == "-" {
        let max = options.max_source_bytes;
        let refused = |message: String| {
            let mut out =
                json!({ "fuelUsed": 0, "error": { "message": message, "kind": "input" } });
            if a.log {
                out["log"] = json!([]);
            }
            Ok(print_json(&out, REFUSED))
        };
        let Some(bytes) = read_stdin(max)? else {
            // the same outcome as a long CODE argument, without reading the rest
            return refused(format!(
                "Source on stdin is over the {max}-byte limit (maxSourceBytes); raise it with --max-source-bytes"
            ));
        };
        match String::from_utf8(bytes) {
            Ok(code) => code,
            Err(_) => return refused("The code on stdin is not valid UTF-8".into()),
        }
    } else {
        a.code.clone()
    };
    let eval = Eval {
        code,
        context: a.context.clone().unwrap_or_default(),
        options,
    };
    let out = runtime()?.block_on(eval.run());
    Ok(print_json(&outcome_json(&out, a.log), outcome_code(&out)))
}
