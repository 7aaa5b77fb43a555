//! `Eval::run_sync` and `SafeFunction::call_sync`: the same answers, fuel and limits as the async
//! API, on the caller's thread, for code that calls no atom.

use ajs::{CancellationToken, ErrorKind, Eval, JsValue, Options, SafeFunction};
use serde_json::json;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn sync_and_async_agree_on_results_fuel_and_errors() {
    let rt = rt();
    for (code, ctx) in [
        ("a + b", json!({ "a": 1, "b": 2 })),
        (
            "let s = 0\nlet i = 0\nwhile (i < 1000) { s = s + i; i = i + 1 }\nreturn s",
            json!({}),
        ),
        (
            "xs.map(x => x * 2).filter(x => x > 2)",
            json!({ "xs": [1, 2, 3] }),
        ),
        ("Error('nope')", json!({})),
        ("a.b.c()", json!({ "a": {} })),
        ("let", json!({})),
    ] {
        let e = Eval::new(code).context(ctx);
        let a = rt.block_on(e.run());
        let s = e.run_sync();
        assert_eq!(a.result, s.result, "{code}");
        assert_eq!(a.fuel_used, s.fuel_used, "{code}");
        assert_eq!(a.error, s.error, "{code}");
    }
    let f = SafeFunction::new(
        &["n"],
        "let t = 1\nwhile (n > 1) { t = t * n; n = n - 1 }\nreturn t",
        Options::default(),
    )
    .unwrap();
    for n in [0, 5, 20] {
        let a = rt.block_on(f.call(&[json!(n)]));
        let s = f.call_sync(&[json!(n)]);
        assert_eq!((a.result.clone(), a.fuel_used), (s.result, s.fuel_used));
    }
    assert_eq!(f.call_sync(&[json!(5)]).result, JsValue::Number(120.0));
}

#[test]
fn sync_runs_keep_every_limit() {
    // fuel
    let out = Eval::new("while (true) {}\nreturn 1").fuel(50.0).run_sync();
    assert_eq!(out.error.unwrap().kind, ErrorKind::OutOfFuel);
    // wall clock, checked between slices
    let out = Eval::new("while (true) {}\nreturn 1")
        .fuel(1e12)
        .timeout_ms(50)
        .run_sync();
    assert_eq!(out.error.unwrap().kind, ErrorKind::Timeout);
    // cancellation
    let token = CancellationToken::new();
    token.cancel();
    let f = SafeFunction::new(
        &["x"],
        "return x",
        Options {
            cancel: Some(token),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        f.call_sync(&[json!(1)]).error.unwrap().kind,
        ErrorKind::Cancelled
    );
    // argument size
    let f = SafeFunction::new(
        &["s"],
        "return s.length",
        Options {
            args_max_bytes: 10,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(f.call_sync(&[json!("abc")]).result, JsValue::Number(3.0));
    let e = f.call_sync(&[json!("a much longer string")]).error.unwrap();
    assert!(e.message.contains("argsMaxBytes"), "{}", e.message);
}

#[test]
fn code_that_calls_atoms_is_sent_to_the_async_api() {
    let out = Eval::new("httpFetch({ url: 'https://example.com' })").run_sync();
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Input);
    assert!(e.message.contains("need the async API"), "{}", e.message);
    let f = SafeFunction::new(
        &["p"],
        "return llmPredict({ prompt: p })",
        Options::default(),
    )
    .unwrap();
    let e = f.call_sync(&[json!("hi")]).error.unwrap();
    assert!(e.message.contains("need the async API"), "{}", e.message);
}

#[test]
fn the_largest_timeout_means_no_timeout_not_a_panic() {
    // past every slice, where the deadline is computed
    let code = "let i = 0\nwhile (i < 5000) { i = i + 1 }\nreturn i";
    let out = Eval::new(code).fuel(1e6).timeout_ms(u64::MAX).run_sync();
    assert_eq!(out.result, JsValue::Number(5000.0), "{:?}", out.error);
    let out = rt().block_on(Eval::new(code).fuel(1e6).timeout_ms(u64::MAX).run());
    assert_eq!(out.result, JsValue::Number(5000.0), "{:?}", out.error);
}

/// Issue 31: every failure is an `ajs::Error` (a Rust error) whose kind tells compile errors,
/// refused input, the heap limit, a guest's own error and the run-ending ones apart; the wire
/// names stay as they were.
#[test]
fn errors_are_rust_errors_with_distinct_kinds() {
    fn err(out: ajs::Outcome) -> ajs::Error {
        out.into_result().expect_err("the run fails")
    }
    let e = err(Eval::new("let x = 1\nreturn x +* 2").run_sync());
    assert_eq!(
        (e.kind, e.line(), e.kind.name()),
        (ErrorKind::Compile, Some(2), "input")
    );
    assert!(
        e.message.ends_with(&format!(":2:{}", e.column().unwrap())),
        "{e}"
    );
    let small = Options {
        args_max_bytes: 8,
        ..Options::default()
    };
    let e = err(Eval::new("a")
        .context(json!({ "a": "a long string" }))
        .options(small)
        .run_sync());
    assert_eq!(e.kind, ErrorKind::Input, "{e}");
    let e = err(Eval::new("1").fuel(-1.0).run_sync());
    assert_eq!(e.kind, ErrorKind::Input, "{e}");
    let e = err(Eval::new("'x'.repeat(1e8)").fuel(1e9).run_sync());
    assert_eq!(
        (e.kind, e.kind.name()),
        (ErrorKind::HeapLimit, "guest"),
        "{e}"
    );
    let e = err(Eval::new("Error('Heap limit')").run_sync());
    assert_eq!(e.kind, ErrorKind::Guest, "{e}");
    let e = err(Eval::new("while (true) {}\nreturn 1").fuel(10.0).run_sync());
    assert_eq!(
        (e.kind, e.to_string()),
        (ErrorKind::OutOfFuel, "Out of Fuel".into())
    );
    let cancel = CancellationToken::new();
    cancel.cancel();
    let options = Options {
        cancel: Some(cancel),
        ..Options::default()
    };
    let e = err(Eval::new("1").options(options).run_sync());
    assert_eq!(e.kind, ErrorKind::Cancelled, "{e}");
    assert_eq!(e.kind.to_string(), "cancelled by the host");
    let e: ajs::Error = SafeFunction::new(&["a"], "return a +", Options::default())
        .unwrap_err()
        .into();
    assert_eq!((e.kind, e.line()), (ErrorKind::Compile, Some(1)));
    // usable with `?` in a function returning a boxed error
    fn run() -> Result<JsValue, Box<dyn std::error::Error + Send + Sync + 'static>> {
        Ok(Eval::new("Error('no')").run_sync().into_result()?)
    }
    assert!(run().unwrap_err().to_string().contains("no"));
}

/// A catch binding's `e.message` is warned in an Eval outcome's `warnings` (decision 39), by
/// `run` and `run_sync` alike; the run goes on.
#[test]
fn eval_outcomes_carry_the_catch_binding_warning() {
    let code = "try { Error('x') } catch (e) {\n  return [e.message, e]\n}";
    let want = vec![
        "'e' is the caught error's message string, so e.message is undefined; write e instead of e.message at <source>:2:10".to_string(),
    ];
    let out = rt().block_on(Eval::new(code).run());
    assert_eq!(out.warnings, want);
    assert_eq!(out.result.to_json(), Some(json!([null, "x"])));
    let out = Eval::new(code).run_sync();
    assert_eq!(out.warnings, want);
    // the message itself: nothing to say
    let out = Eval::new("try { Error('x') } catch (e) { return e }").run_sync();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(out.result.to_json(), Some(json!("x")));
}
