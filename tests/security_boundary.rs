//! Holds copies, not references; hostile capability returns; the fetch policy; quotas; errors are
//! values; catchable vs run-ending failures (reference §9, scenarios 29–49).

use crate::adversarial_common as adv;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use adv::{
    caps, eval, failed, fails_with, fetch_returning, fuel, nested_array, nested_object, ok_json,
};
use ajs::{Capabilities, ErrorKind, FetchPolicy, JsValue, Options, Runner};
use serde_json::json;

const FETCH: &str = "return httpFetch({ url: 'https://api.example.com/x' })";

fn boundary_refusal(v: JsValue, what: &str) {
    boundary_refusal_with(move || v.clone(), what);
}

/// `make` builds the value on every call (a derived `Clone` of a very deep value would overflow
/// the test's own stack).
fn boundary_refusal_with(make: impl Fn() -> JsValue + Send + Sync + Clone + 'static, what: &str) {
    let m2 = make.clone();
    let c = Capabilities::default().with_fetch(move |_| {
        let v = m2();
        async move { Ok(v) }
    });
    let out = eval(FETCH, json!({}), caps(c, 1000.0));
    let (m, k) = failed(&out, what);
    assert_eq!(k, ErrorKind::Boundary, "{what}: {m}");
    // Not catchable: a guest `try` cannot swallow it.
    let code = "try { return httpFetch({ url: 'https://api.example.com/x' }) } catch (e) { return 'caught' }";
    let c = Capabilities::default().with_fetch(move |_| {
        let v = make();
        async move { Ok(v) }
    });
    let out = eval(code, json!({}), caps(c, 1000.0));
    let (m2, k2) = failed(&out, what);
    assert_eq!(k2, ErrorKind::Boundary, "{what} in try: {m2}");
}

/// Scenarios 33–36: oversized, deeply nested and huge-keyed capability returns are refused and
/// end the run; a guest `try` cannot catch the refusal.
#[test]
fn hostile_capability_returns_are_refused() {
    boundary_refusal(JsValue::String("x".repeat(5 << 20)), "5 MB string");
    boundary_refusal(
        JsValue::Array(vec![JsValue::String("x".repeat(5 << 20))]),
        "5 MB string under an array",
    );
    boundary_refusal(
        JsValue::Array(
            (0..1_000_000)
                .map(|i| JsValue::Number(i as f64 + 0.123_456_789))
                .collect(),
        ),
        "1 M floats over 4 MB of JSON",
    );
    let mut huge_key = indexmap::IndexMap::new();
    huge_key.insert("k".repeat(5 << 20), JsValue::Number(1.0));
    boundary_refusal(JsValue::Object(huge_key), "a 5 MB key");
    let mut many = indexmap::IndexMap::new();
    for i in 0..400_000 {
        many.insert(format!("key-number-{i}"), JsValue::Number(1.0));
    }
    boundary_refusal(JsValue::Object(many), "400 k keys");
    boundary_refusal_with(|| nested_array(100_000), "100 000-deep arrays");
    boundary_refusal_with(|| nested_object(100_000), "100 000-deep objects");
}

/// Scenario 33 with a custom membrane cap; scenario 34: ordinary data crosses.
#[test]
fn membrane_budget_is_configurable_and_clean_data_crosses() {
    let small = Options {
        membrane_max_bytes: 1000,
        ..caps(fetch_returning(JsValue::String("x".repeat(4000))), 1000.0)
    };
    let out = eval(FETCH, json!({}), small);
    assert_eq!(
        failed(&out, "4000 chars under 1000 bytes").1,
        ErrorKind::Boundary
    );
    let floats = JsValue::Array(
        (0..200_000)
            .map(|i| JsValue::Number(i as f64 * 0.5))
            .collect(),
    );
    let out = eval(
        "let r = httpFetch({ url: 'https://api.example.com/x' })\nreturn r.length",
        json!({}),
        caps(fetch_returning(floats), 1000.0),
    );
    assert_eq!(ok_json(&out, "200k floats"), Some(json!(200_000)));
    let out = eval(
        "let r = httpFetch({ url: 'https://api.example.com/x' })\nreturn r",
        json!({}),
        caps(fetch_returning(nested_array(50)), 1000.0),
    );
    ok_json(&out, "50 deep");
}

/// Scenario 37, 38: a capability's return is a fresh copy; the guest mutating it cannot affect
/// the host's value or the next call.
#[test]
fn capability_returns_and_context_are_copies() {
    let host = Arc::new(Mutex::new(vec![JsValue::String("sale".into())]));
    let h2 = host.clone();
    let c = Capabilities::default().with_fetch(move |_| {
        let v = JsValue::Array(h2.lock().unwrap().clone());
        async move { Ok(v) }
    });
    let code = "let a = httpFetch({ url: 'https://api.example.com/' })\na.push('x')\nlet b = httpFetch({ url: 'https://api.example.com/' })\nreturn [a, b]";
    let out = eval(code, json!({}), caps(c, 100.0));
    assert_eq!(
        ok_json(&out, "copies"),
        Some(json!([["sale", "x"], ["sale"]]))
    );
    assert_eq!(host.lock().unwrap().len(), 1);
    // Context: the host's value is untouched (the API takes it by value and copies it).
    let ctx = json!({ "tags": ["sale"] });
    let out = eval(
        "tags.push('clearance')\nreturn tags",
        ctx.clone(),
        fuel(100.0),
    );
    assert_eq!(ok_json(&out, "ctx"), Some(json!(["sale", "clearance"])));
    assert_eq!(ctx, json!({ "tags": ["sale"] }));
    // What a capability receives is a copy too: mutating the guest value after the call does not
    // reach the host's received value.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let c = Capabilities::default().with_fetch(move |call| {
        s2.lock().unwrap().push(call.body.clone());
        async { Ok(JsValue::Null) }
    });
    let code = "let b = [1]\nhttpFetch({ url: 'https://api.example.com/', method: 'POST', body: b })\nb.push(2)\nreturn b";
    let opts = Options {
        fetch_policy: Some(FetchPolicy {
            methods: vec!["POST".into()],
            ..FetchPolicy::default()
        }),
        ..caps(c, 100.0)
    };
    let out = eval(code, json!({}), opts);
    assert_eq!(ok_json(&out, "body copy"), Some(json!([1, 2])));
    assert_eq!(seen.lock().unwrap()[0].to_json(), Some(json!([1])));
}

/// Scenarios 29–32, 37 (in Rust): a capability can only return `JsValue`, plain data by type —
/// functions, getters, Map/Set, class instances and host references cannot be expressed; the
/// closest hostile values (non-finite numbers, lone surrogates, odd keys) cross as data.
#[test]
fn capability_returns_are_plain_data_by_type() {
    let mut m = indexmap::IndexMap::new();
    m.insert("".to_string(), JsValue::Number(f64::NAN));
    m.insert("\u{0}".to_string(), JsValue::Number(f64::INFINITY));
    m.insert("length".to_string(), JsValue::Number(-1.0));
    m.insert("\u{FEFF}k".to_string(), JsValue::String("\u{FFFF}".into()));
    let out = eval(
        "let r = httpFetch({ url: 'https://api.example.com/' })\nreturn [typeof r[''], r.length, Object.keys(r).length]",
        json!({}),
        caps(fetch_returning(JsValue::Object(m)), 100.0),
    );
    assert_eq!(ok_json(&out, "odd keys"), Some(json!(["number", -1, 4])));
    // A `__proto__` key from a capability: refused or plain, never a prototype.
    let mut m = indexmap::IndexMap::new();
    let mut admin = indexmap::IndexMap::new();
    admin.insert("isAdmin".to_string(), JsValue::Bool(true));
    m.insert("__proto__".to_string(), JsValue::Object(admin));
    let out = eval(
        "let r = httpFetch({ url: 'https://api.example.com/' })\nreturn r.isAdmin",
        json!({}),
        caps(fetch_returning(JsValue::Object(m)), 100.0),
    );
    assert!(out.error.is_some() || out.result == JsValue::Undefined);
}

/// Scenario 40: method, header and scheme admission applies before a custom `fetch` runs, and
/// its refusals are catchable.
#[test]
fn fetch_policy_fences_a_custom_capability() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let c = Capabilities::default().with_fetch(move |_| {
        c2.fetch_add(1, Ordering::SeqCst);
        async { Ok(JsValue::Null) }
    });
    for (code, needle) in [
        ("httpFetch({ url: 'https://api.example.com/', method: 'POST' })", "method 'POST' is not allowed"),
        ("httpFetch({ url: 'https://api.example.com/', headers: { 'x-forwarded-host': 'evil' } })", "header 'x-forwarded-host' is not allowed"),
        ("httpFetch({ url: 'https://api.example.com/', headers: { Cookie: 'a=1' } })", "not allowed"),
        ("httpFetch({ url: 'https://api.example.com/', headers: { 'X-Agent-Depth': '0' } })", "not allowed"),
        ("httpFetch({ url: 'file:///etc/passwd' })", "Fetch blocked"),
        ("httpFetch({ url: 'gopher://x/' })", "Fetch blocked"),
    ] {
        let out = eval(code, json!({}), caps(c.clone(), 100.0));
        fails_with(&out, code, needle);
        let caught = format!("try {{ return {code} }} catch (e) {{ return 'caught' }}");
        let out = eval(&caught, json!({}), caps(c.clone(), 100.0));
        assert_eq!(ok_json(&out, &caught), Some(json!("caught")));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the capability ran for a refused request"
    );
}

/// Scenario 42: the domain allowlist (with `*.` wildcard) fences the capability too; scenario 39
/// adapted: with neither a capability nor a domain list, nothing is fetched.
#[test]
fn domain_allowlist_and_no_default_network() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let c = Capabilities::default().with_fetch(move |_| {
        c2.fetch_add(1, Ordering::SeqCst);
        async { Ok(JsValue::String("ok".into())) }
    });
    let opts = |c: Capabilities| Options {
        fetch_policy: Some(FetchPolicy {
            domains: Some(vec!["*.example.com".into()]),
            ..FetchPolicy::default()
        }),
        ..caps(c, 100.0)
    };
    for url in [
        "https://example.com/",
        "https://a.b.example.com/x",
        "https://API.EXAMPLE.COM/",
    ] {
        let code = format!("httpFetch({{ url: '{url}' }})");
        assert_eq!(
            ok_json(&eval(&code, json!({}), opts(c.clone())), &code),
            Some(json!("ok"))
        );
    }
    for url in [
        "https://example.com.evil.net/",
        "https://evilexample.com/",
        "https://127.0.0.1/",
        "https://169.254.169.254/latest/meta-data",
        "https://example.com@evil.net/",
        "http://[::1]/",
    ] {
        let code = format!("httpFetch({{ url: '{url}' }})");
        fails_with(
            &eval(&code, json!({}), opts(c.clone())),
            &code,
            "Fetch blocked",
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // No capability and no domains: blocked, catchable.
    let out = eval(
        "httpFetch({ url: 'http://127.0.0.1/' })",
        json!({}),
        fuel(100.0),
    );
    let (m, k) = failed(&out, "no network");
    assert!(m.starts_with("Fetch blocked"), "{m}");
    assert_eq!(k, ErrorKind::Guest);
    let out = eval("llmPredict({ prompt: 'hi' })", json!({}), fuel(1000.0));
    assert_eq!(failed(&out, "no llm").1, ErrorKind::Guest);
}

/// Scenario 41: `X-Agent-Depth` increments, the capability sees it, and a run at depth 10 is
/// refused before the capability runs.
#[test]
fn agent_depth_increments_and_caps() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let c = Capabilities::default().with_fetch(move |call| {
        s2.lock().unwrap().push(call.headers.clone());
        async { Ok(JsValue::Null) }
    });
    let opts = caps(c, 100.0);
    let ctx = serde_json::Map::new();
    let rt = adv::rt();
    let runner = Runner {
        depth: 3,
        ..Runner::default()
    };
    let out = rt.block_on(runner.run_eval(
        "httpFetch({ url: 'https://api.example.com/' })",
        &ctx,
        &opts,
    ));
    assert!(out.error.is_none(), "{:?}", out.error);
    let headers = seen.lock().unwrap()[0].clone();
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "X-Agent-Depth" && v == "4"),
        "{headers:?}"
    );
    let runner = Runner {
        depth: 10,
        ..Runner::default()
    };
    let out = rt.block_on(runner.run_eval(
        "httpFetch({ url: 'https://api.example.com/' })",
        &ctx,
        &opts,
    ));
    assert!(
        failed(&out, "depth 10").0.contains("depth"),
        "{:?}",
        out.error
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// Scenario 46: quotas allow N calls and refuse the N+1th before the capability runs; the
/// refusal ends the run (decision 4).
#[test]
fn quotas_refuse_before_the_capability() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let c = Capabilities::default().with_fetch(move |_| {
        c2.fetch_add(1, Ordering::SeqCst);
        async { Ok(JsValue::Null) }
    });
    let runner = Runner {
        quotas: [("httpFetch".to_string(), 3)].into_iter().collect(),
        ..Runner::default()
    };
    let code = "let i = 0\nwhile (i < 10) {\n  try { httpFetch({ url: 'https://api.example.com/' }) } catch (e) { }\n  i++\n}\nreturn i";
    let out = adv::rt().block_on(runner.run_eval(
        code,
        &serde_json::Map::new(),
        &caps(c.clone(), 1000.0),
    ));
    let (m, k) = failed(&out, "quota");
    assert_eq!(k, ErrorKind::Quota, "{m}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // 0 forbids the atom.
    let runner = Runner {
        quotas: [("httpFetch".to_string(), 0)].into_iter().collect(),
        ..Runner::default()
    };
    let out = adv::rt().block_on(runner.run_eval(code, &serde_json::Map::new(), &caps(c, 1000.0)));
    assert_eq!(failed(&out, "quota 0").1, ErrorKind::Quota);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// Scenarios 47, 49 and the seed's "errors are values": every failure is in `error`, `result` is
/// `undefined` after it, and the catchable/run-ending split is as decision 4 says.
#[test]
fn errors_are_values_and_catchability_follows_decision_4() {
    let throwing = Capabilities::default()
        .with_fetch(|_| async { Err("network down".to_string()) })
        .with_llm(|_, _| async { Ok(JsValue::Null) });
    // Catchable: capability throws, missing capability, forbidden property, heap, Error(), type
    // errors; `e` is the message string.
    for (code, want) in [
        ("httpFetch({ url: 'https://a.example/' })", "network down"),
        ("Error('boom')", "boom"),
        (
            "({})['__proto__']",
            "Security Error: Access to '__proto__' is forbidden",
        ),
        ("[1] + 1", "Cannot use '+' on an array"),
        ("'x'.repeat(5e7)", "Heap limit exceeded"),
        ("JSON.parse('{')", ""),
    ] {
        let guarded = format!("try {{ return {code} }} catch (e) {{ return 'caught: ' + e }}");
        let out = eval(&guarded, json!({}), caps(throwing.clone(), 1e6));
        let v = ok_json(&out, &guarded).unwrap_or_else(|| panic!("`{code}` gave undefined"));
        assert!(
            v.as_str()
                .is_some_and(|s| s.starts_with("caught: ") && s.contains(want)),
            "`{code}` → {v}"
        );
        let out = eval(
            &format!("return {code}"),
            json!({}),
            caps(throwing.clone(), 1e6),
        );
        let (_, k) = failed(&out, code);
        assert_eq!(k, ErrorKind::Guest, "`{code}`");
    }
    // After a failed step, later steps do not run.
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    let c = Capabilities::default().with_fetch(move |_| {
        s2.fetch_add(1, Ordering::SeqCst);
        async { Ok(JsValue::Null) }
    });
    let out = eval(
        "Error('stop')\nhttpFetch({ url: 'https://a.example/' })\nreturn 1",
        json!({}),
        caps(c, 100.0),
    );
    fails_with(&out, "stop", "stop");
    assert_eq!(seen.load(Ordering::SeqCst), 0);
    // Run-ending: fuel, timeout, call depth, boundary — a `try` does not catch them.
    let out = eval(
        "try { while (true) {} } catch (e) { return 'caught' }",
        json!({}),
        fuel(10.0),
    );
    assert_eq!(failed(&out, "fuel").1, ErrorKind::OutOfFuel);
    let out = eval(
        "try { while (true) {} } catch (e) { return 'caught' }",
        json!({}),
        Options {
            fuel: 1e12,
            timeout_ms: 50,
            ..Options::default()
        },
    );
    assert_eq!(failed(&out, "timeout").1, ErrorKind::Timeout);
    let out = adv::agent(
        "function d(n) { try { return d(n + 1) } catch (e) { return 0 } }\nfunction main() { return { v: d(0) } }",
        json!({}),
        fuel(1e6),
    );
    let k = failed(&out, "depth").1;
    assert!(
        k == ErrorKind::CallDepth || k == ErrorKind::OutOfFuel,
        "{k:?}"
    );
    // A capability returning null or undefined is data.
    let c = Capabilities::default().with_fetch(|_| async { Ok(JsValue::Undefined) });
    let out = eval(
        "httpFetch({ url: 'https://a.example/' }) ?? 'none'",
        json!({}),
        caps(c, 100.0),
    );
    assert_eq!(ok_json(&out, "undefined"), Some(json!("none")));
}

/// Scenario 49: a flaky capability retried by a guest loop.
#[test]
fn a_guest_can_retry_a_flaky_capability() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let c = Capabilities::default().with_fetch(move |_| {
        let k = n2.fetch_add(1, Ordering::SeqCst);
        async move {
            if k < 2 {
                Err(format!("flaky {k}"))
            } else {
                Ok(JsValue::String("ok".into()))
            }
        }
    });
    let code = "let tries = 0\nwhile (tries < 5) {\n  tries++\n  try { return [tries, httpFetch({ url: 'https://a.example/' })] } catch (e) { }\n}\nreturn 'gave up'";
    assert_eq!(
        ok_json(&eval(code, json!({}), caps(c, 100.0)), code),
        Some(json!([3, "ok"]))
    );
}
