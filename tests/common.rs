//! Helpers shared by the workspace-level suites.
#![allow(dead_code)]

use ajs::{Eval, Options, Outcome};
use serde_json::Value;

/// Runs a snippet with `Eval` on a fresh current-thread runtime.
pub fn eval(code: &str, context: Value) -> Outcome {
    eval_with(code, context, Options::default())
}

/// Runs a snippet with options.
pub fn eval_with(code: &str, context: Value, options: Options) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(Eval::new(code).context(context).options(options).run())
}

/// The result as JSON (`None` for undefined), panicking with the error if the run failed.
pub fn ok(code: &str, context: Value) -> Option<Value> {
    let out = eval(code, context);
    if let Some(e) = &out.error {
        panic!("`{code}` failed: {}", e.message);
    }
    out.result.to_json()
}

/// The error message, panicking if the run succeeded.
pub fn err(code: &str, context: Value) -> String {
    let out = eval(code, context);
    match out.error {
        Some(e) => e.message,
        None => panic!("`{code}` succeeded with {:?}", out.result),
    }
}
