//! Atoms declared with shapes, costs and timeouts; the shared quota ledger; host cancellation;
//! the boundary on capability returns.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ajs::{
    AtomDecl, CancellationToken, Capabilities, ErrorKind, Eval, InputType, JsValue, Options,
    Outcome, QuotaLedger, Runner,
};
use serde_json::json;

async fn eval(code: &str, options: Options) -> Outcome {
    Eval::new(code).options(options).run().await
}

fn with(caps: Capabilities) -> Options {
    Options {
        capabilities: caps,
        ..Options::default()
    }
}

fn res(out: &Outcome) -> serde_json::Value {
    if let Some(e) = &out.error {
        panic!("run failed: {}", e.message);
    }
    out.result.to_json().unwrap_or(serde_json::Value::Null)
}

#[tokio::test]
async fn declared_inputs_are_checked_with_catchable_errors_naming_them() {
    let caps = Capabilities::default().register_atom(
        AtomDecl::new("lookup")
            .required("id", InputType::Number)
            .optional("fields", InputType::Array),
        |input: JsValue| async move { Ok(input) },
    );
    let o = with(caps);
    let out = eval("return lookup({ id: 4, extra: true }).id", o.clone()).await;
    assert_eq!(res(&out), json!(4));
    for (code, msg) in [
        (
            "lookup({ fields: [] })",
            "lookup: missing required input 'id'",
        ),
        (
            "lookup({ id: '4' })",
            "lookup: input 'id' must be a number, got string",
        ),
        (
            "lookup({ id: 1, fields: 'a' })",
            "lookup: input 'fields' must be an array, got string",
        ),
        (
            "lookup(5)",
            "lookup: takes one object of named inputs, got number",
        ),
        (
            "httpFetch({ method: 'GET' })",
            "httpFetch: missing required input 'url'",
        ),
        (
            "httpFetch({ url: 5 })",
            "httpFetch: input 'url' must be a string, got number",
        ),
        (
            "llmPredict({ prompt: ['a'] })",
            "llmPredict: input 'prompt' must be a string, got array",
        ),
    ] {
        let code = format!("try {{ {code}\n return 'no error' }} catch (e) {{ return e }}");
        let out = eval(&code, o.clone()).await;
        assert_eq!(res(&out), json!(msg), "{code}");
    }
    // Uncaught, it is a guest error (catchable kind).
    let out = eval("return lookup({})", o).await;
    assert_eq!(out.error.unwrap().kind, ErrorKind::Guest);
}

#[tokio::test]
async fn declared_costs_and_the_with_atom_default() {
    let caps = Capabilities::default()
        .with_atom("cheap", |v: JsValue| async move { Ok(v) })
        .register_atom(
            AtomDecl::new("pricey").fuel(40.0),
            |v: JsValue| async move { Ok(v) },
        );
    let o = with(caps.clone());
    let base = eval("return 1", o.clone()).await.fuel_used;
    let cheap = eval("cheap({})\nreturn 1", o.clone()).await.fuel_used;
    let pricey = eval("pricey({})\nreturn 1", o.clone()).await.fuel_used;
    assert!((cheap - base - 1.0).abs() < 0.5, "{base} {cheap}");
    assert!((pricey - base - 40.0).abs() < 0.5, "{base} {pricey}");
    assert_eq!(caps.decl("cheap").unwrap().fuel, 1.0);
    assert_eq!(caps.decl("httpFetch").unwrap().fuel, 5.0);
    assert_eq!(
        caps.decl("httpFetch").unwrap().timeout,
        Duration::from_secs(30)
    );
    assert_eq!(caps.decl("llmPredict").unwrap().fuel, 100.0);
    assert_eq!(
        caps.decl("llmPredict").unwrap().timeout,
        Duration::from_secs(120)
    );
    assert!(caps.decl("nope").is_none());
}

#[tokio::test]
async fn each_atom_has_its_own_timeout() {
    let caps = Capabilities::default().register_atom(
        AtomDecl::new("slow").timeout(Duration::from_millis(50)),
        |_v: JsValue| async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(JsValue::Null)
        },
    );
    let start = Instant::now();
    let out = eval(
        "try { slow({}) } catch (e) { return 'caught: ' + e }",
        with(caps),
    )
    .await;
    assert_eq!(res(&out), json!("caught: Atom 'slow' timed out after 50ms"));
    assert!(start.elapsed() < Duration::from_secs(2));
}

fn llm_caps(calls: Arc<AtomicUsize>) -> Capabilities {
    Capabilities::default().with_llm(move |p: String, _o: JsValue| {
        let calls = calls.clone();
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Ok(JsValue::String(p.to_uppercase()))
        }
    })
}

const FOUR_CALLS: &str = "function summarize({ texts: ['a'] }) {\n  let out = []\n  let i = 0\n  while (i < texts.length) {\n    out.push(llmPredict({ prompt: texts[i] }))\n    i = i + 1\n  }\n  return { out }\n}";

#[tokio::test]
async fn quota_per_run_ends_the_run() {
    let calls = Arc::new(AtomicUsize::new(0));
    let runner = Runner {
        quotas: [("llmPredict".to_string(), 3)].into(),
        ..Runner::default()
    };
    let out = runner
        .run_agent(
            FOUR_CALLS,
            &json!({ "texts": ["a", "b", "c", "d"] }),
            &with(llm_caps(calls.clone())),
        )
        .await;
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Quota);
    assert_eq!(
        e.message,
        "Quota exceeded for 'llmPredict': 3 calls allowed"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_shared_ledger_caps_calls_across_runs() {
    let calls = Arc::new(AtomicUsize::new(0));
    let ledger = Arc::new(QuotaLedger::new());
    let runner = Runner {
        quotas: [("llmPredict".to_string(), 3)].into(),
        ledger: Some(ledger.clone()),
        ..Runner::default()
    };
    let o = with(llm_caps(calls.clone()));
    let out = runner
        .run_agent(FOUR_CALLS, &json!({ "texts": ["a", "b"] }), &o)
        .await;
    assert!(out.error.is_none());
    let out = runner
        .run_agent(FOUR_CALLS, &json!({ "texts": ["a", "b"] }), &o)
        .await;
    assert_eq!(
        out.error.unwrap().message,
        "Quota exceeded for 'llmPredict': 3 calls allowed"
    );
    assert_eq!(ledger.used("llmPredict"), 3);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_runs_never_both_take_the_last_slot() {
    for _ in 0..20 {
        let calls = Arc::new(AtomicUsize::new(0));
        let ledger = Arc::new(QuotaLedger::new());
        let runner = Runner {
            quotas: [("llmPredict".to_string(), 5)].into(),
            ledger: Some(ledger.clone()),
            ..Runner::default()
        };
        let o = with(llm_caps(calls.clone()));
        let mut handles = Vec::new();
        for _ in 0..8 {
            let (runner, o) = (runner.clone(), o.clone());
            handles.push(tokio::spawn(async move {
                runner
                    .run_eval(
                        "llmPredict({ prompt: 'x' })\nreturn 1",
                        &serde_json::Map::new(),
                        &o,
                    )
                    .await
            }));
        }
        let mut ok = 0;
        for h in handles {
            let out = h.await.unwrap();
            match out.error {
                None => ok += 1,
                Some(e) => assert_eq!(e.kind, ErrorKind::Quota),
            }
        }
        assert_eq!(ok, 5);
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        assert_eq!(ledger.used("llmPredict"), 5);
    }
}

#[tokio::test]
async fn cancellation_stops_a_computing_run_and_a_waiting_one() {
    let token = CancellationToken::new();
    let o = Options {
        fuel: 1e12,
        cancel: Some(token.clone()),
        ..Options::default()
    };
    let t = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        t.cancel();
    });
    let out = eval("let i = 0\nwhile (true) { i = i + 1 }\nreturn i", o.clone()).await;
    let e = out.error.unwrap();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Cancelled, "Execution cancelled by the host")
    );
    // An already-cancelled token refuses to start.
    let out = eval("return 1", o).await;
    assert_eq!(out.error.unwrap().kind, ErrorKind::Cancelled);
    // A run waiting on a capability: the capability's future is dropped.
    let dropped = Arc::new(AtomicUsize::new(0));
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = dropped.clone();
    let token = CancellationToken::new();
    let caps = Capabilities::default().with_atom("wait", move |_v: JsValue| {
        let guard = OnDrop(d.clone());
        async move {
            let _g = guard;
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(JsValue::Null)
        }
    });
    let o = Options {
        capabilities: caps,
        cancel: Some(token.clone()),
        ..Options::default()
    };
    let t = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        t.cancel();
    });
    let out = eval("try { wait({}) } catch (e) { return 'caught' }", o).await;
    assert_eq!(out.error.unwrap().kind, ErrorKind::Cancelled);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn oversized_and_deep_returns_end_the_run_even_inside_try() {
    let caps = Capabilities::default()
        .with_atom("big", |_v: JsValue| async move {
            Ok(JsValue::String("x".repeat(2000)))
        })
        .with_atom("deep", |_v: JsValue| async move {
            let mut v = JsValue::Null;
            for _ in 0..100_000 {
                v = JsValue::Array(vec![v]);
            }
            Ok(v)
        });
    let o = Options {
        membrane_max_bytes: 1000,
        ..with(caps)
    };
    let out = eval(
        "try { big({}) \n return 'got' } catch (e) { return 'caught' }",
        o.clone(),
    )
    .await;
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Boundary);
    assert_eq!(
        e.message,
        "Capability boundary rejected the return of 'big': capability return exceeds the 1000-byte membrane budget (membraneMaxBytes)"
    );
    let o = Options {
        membrane_max_bytes: ajs::DEFAULT_MEMBRANE_MAX_BYTES,
        ..o
    };
    let out = eval(
        "try { deep({}) \n return 'got' } catch (e) { return 'caught' }",
        o,
    )
    .await;
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Boundary);
    assert_eq!(
        e.message,
        "Capability boundary rejected the return of 'deep': capability return nests deeper than 1000 levels"
    );
}

#[tokio::test]
async fn deep_context_is_refused_not_a_crash() {
    let mut v = serde_json::Value::Null;
    for _ in 0..1500 {
        v = serde_json::Value::Array(vec![v]);
    }
    // Built and dropped without serde_json's recursive `to_value`/drop (which would overflow a
    // test thread's stack on their own).
    let mut ctx = serde_json::Map::new();
    ctx.insert("x".into(), v);
    let eval = Eval {
        code: "return x.length".into(),
        context: ctx,
        options: Options::default(),
    };
    let out = eval.run().await;
    std::mem::forget(eval);
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Input);
    assert!(
        e.message
            .starts_with("Context nested deeper than 1000 levels"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn the_run_log_is_returned() {
    let out = eval(
        "console.log('hello')\nconsole.warn('careful')\nreturn 1",
        Options::default(),
    )
    .await;
    assert_eq!(out.log.len(), 2);
}

#[derive(serde::Deserialize)]
struct Order {
    sku: String,
    qty: u32,
    note: Option<String>,
}

#[derive(serde::Serialize)]
struct Quote {
    sku: String,
    total: f64,
    run: u64,
    depth: u32,
    atom: String,
}

/// Issue 31: a typed host function takes and returns serde types, sees the run's context, and
/// its `HostError` (or an input that does not fit its type) is a catchable guest error.
#[tokio::test]
async fn typed_host_functions_take_serde_types_and_see_their_run() {
    use ajs::{HostContext, HostError};
    let caps = Capabilities::default().host_fn(
        AtomDecl::new("quote").fuel(2.0),
        |ctx: HostContext, o: Order| async move {
            if o.qty == 0 {
                return Err(HostError::new("qty must be positive"));
            }
            let _: u32 = "12".parse::<u32>()?; // any std error converts with `?`
            assert!(!ctx.is_cancelled() && o.note.is_none());
            Ok(Quote {
                total: f64::from(o.qty) * 2.5,
                sku: o.sku,
                run: ctx.run_id(),
                depth: ctx.depth(),
                atom: ctx.atom().to_string(),
            })
        },
    );
    let runner = Runner {
        depth: 3,
        ..Runner::default()
    };
    let code = "let a = quote({ sku: 'A', qty: 4 })\nlet b = quote({ sku: 'B', qty: 1 })\n\
                return [a, b.run === a.run]";
    let out = runner
        .run_eval(code, &serde_json::Map::new(), &with(caps.clone()))
        .await;
    let v = res(&out);
    assert_eq!(v[0]["total"], json!(10));
    assert_eq!(
        (&v[0]["depth"], &v[0]["atom"]),
        (&json!(3), &json!("quote"))
    );
    assert_eq!(v[1], json!(true), "one run, one id");
    assert!(v[0]["run"].as_u64().unwrap() > 0);
    // another run, another id
    let again = res(&runner
        .run_eval(code, &serde_json::Map::new(), &with(caps.clone()))
        .await);
    assert_ne!(again[0]["run"], v[0]["run"]);
    for (call, want) in [
        ("quote({ sku: 'A', qty: 0 })", "qty must be positive"),
        (
            "quote({ sku: 'A' })",
            "quote: invalid input: missing field `qty`",
        ),
        ("quote({ sku: 'A', qty: -1 })", "quote: invalid input"),
        ("quote('A')", "quote: invalid input: invalid type"),
    ] {
        let code = format!("try {{ return {call} }} catch (e) {{ return 'caught: ' + e }}");
        let v = res(&eval(&code, with(caps.clone())).await);
        let s = v.as_str().unwrap_or_default();
        assert!(s.starts_with("caught: ") && s.contains(want), "{call}: {v}");
    }
    // the answer crosses the same boundary as any atom's
    let big = Capabilities::default().host_fn_sync(AtomDecl::new("big"), |_, n: usize| {
        Ok::<_, HostError>(vec!["x".repeat(1000); n])
    });
    let small = Options {
        membrane_max_bytes: 10_000,
        ..with(big)
    };
    let ok = eval("big(5).length", small.clone()).await;
    assert_eq!(res(&ok), json!(5));
    let e = eval("big(50).length", small)
        .await
        .into_result()
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Boundary, "{e}");
}

/// Issue 31: a host function that panics (while called or while awaited) ends the run with a
/// `HostPanic` error; the caller does not panic, and the next run is unaffected.
#[tokio::test]
async fn a_panicking_host_function_is_a_run_error_not_the_callers_panic() {
    let caps = Capabilities::default()
        .host_fn_sync(AtomDecl::new("boom"), |_, _: JsValue| -> Result<u8, _> {
            panic!("host bug")
        })
        .register_atom(AtomDecl::new("early"), |_: JsValue| -> ajs::HostFuture {
            panic!("panicked before its future")
        })
        .with_fetch(|_| async move { panic!("fetch bug") });
    let o = with(caps);
    for (code, atom, what) in [
        (
            "try { return boom({}) } catch (e) { return 1 }",
            "boom",
            "host bug",
        ),
        ("early({})", "early", "panicked before its future"),
        (
            "httpFetch({ url: 'https://x.example/' })",
            "httpFetch",
            "fetch bug",
        ),
    ] {
        let e = eval(code, o.clone()).await.into_result().unwrap_err();
        assert_eq!(
            (e.kind, e.kind.catchable()),
            (ErrorKind::HostPanic, false),
            "{e}"
        );
        assert!(e.message.contains(atom) && e.message.contains(what), "{e}");
    }
    assert_eq!(res(&eval("1 + 1", o).await), json!(2));
}
