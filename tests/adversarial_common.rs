//! Helpers for the adversarial suites (`tests/security_*.rs`).
#![allow(dead_code)]

use ajs::{Capabilities, ErrorKind, Eval, JsValue, Options, Outcome, Runner};
use serde_json::Value;

/// A fresh current-thread runtime.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Options with a fuel budget.
pub fn fuel(f: f64) -> Options {
    Options {
        fuel: f,
        ..Options::default()
    }
}

/// Options with capabilities and a fuel budget.
pub fn caps(c: Capabilities, f: f64) -> Options {
    Options {
        fuel: f,
        capabilities: c,
        ..Options::default()
    }
}

/// `Eval` with options.
pub fn eval(code: &str, context: Value, options: Options) -> Outcome {
    rt().block_on(Eval::new(code).context(context).options(options).run())
}

/// An agent program through the runner.
pub fn agent(source: &str, args: Value, options: Options) -> Outcome {
    rt().block_on(Runner::default().run_agent(source, &args, &options))
}

/// A snippet through a runner with a heap ceiling.
pub fn eval_heap(code: &str, context: Value, options: Options, max_heap_bytes: usize) -> Outcome {
    let runner = Runner {
        max_heap_bytes,
        ..Runner::default()
    };
    let ctx = match context {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    rt().block_on(runner.run_eval(code, &ctx, &options))
}

/// The result as JSON, panicking with the error if the run failed.
pub fn ok_json(out: &Outcome, what: &str) -> Option<Value> {
    if let Some(e) = &out.error {
        panic!("`{what}` failed: {} ({:?})", e.message, e.kind);
    }
    out.result.to_json()
}

/// The error (message and kind), panicking if the run succeeded. Checks decision 15 too: after
/// an error `result` is `undefined`.
pub fn failed(out: &Outcome, what: &str) -> (String, ErrorKind) {
    let e = out
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("`{what}` succeeded with {:?}", out.result));
    assert_eq!(
        out.result,
        JsValue::Undefined,
        "`{what}`: result after an error"
    );
    (e.message.clone(), e.kind)
}

/// Asserts the run failed with a message containing `needle`.
pub fn fails_with(out: &Outcome, what: &str, needle: &str) -> ErrorKind {
    let (m, k) = failed(out, what);
    assert!(
        m.contains(needle),
        "`{what}`: expected `{needle}`, got `{m}`"
    );
    k
}

/// Is it the seed's forbidden-property error?
pub fn is_security_error(m: &str) -> bool {
    m.starts_with("Security Error: Access to '")
}

/// A fetch capability that answers `v` for every request.
pub fn fetch_returning(v: JsValue) -> Capabilities {
    Capabilities::default().with_fetch(move |_| {
        let v = v.clone();
        async move { Ok(v) }
    })
}

/// A value nested `depth` arrays deep.
pub fn nested_array(depth: usize) -> JsValue {
    let mut v = JsValue::Number(1.0);
    for _ in 0..depth {
        v = JsValue::Array(vec![v]);
    }
    v
}

/// A value nested `depth` objects deep (key `k`).
pub fn nested_object(depth: usize) -> JsValue {
    let mut v = JsValue::Number(1.0);
    for _ in 0..depth {
        let mut m = indexmap::IndexMap::new();
        m.insert("k".to_string(), v);
        v = JsValue::Object(m);
    }
    v
}
