//! Wall-clock and structural limits.

use crate::common;

use std::time::{Duration, Instant};

use ajs::{ErrorKind, Options};
use serde_json::json;

#[test]
fn a_computing_run_stops_at_its_timeout() {
    let opts = Options {
        fuel: 1e12,
        timeout_ms: 100,
        ..Default::default()
    };
    let start = Instant::now();
    let out = common::eval_with(
        "let i = 0\nwhile (true) { i = i + 1 }\nreturn i",
        json!({}),
        opts,
    );
    let took = start.elapsed();
    let e = out.error.expect("timeout");
    assert!(
        e.message.starts_with("Execution timeout after 100ms"),
        "{}",
        e.message
    );
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert!(out.fuel_used > 0.0);
}

#[test]
fn a_waiting_run_stops_at_its_timeout() {
    let caps = ajs::Capabilities::default().with_fetch(|_| async {
        std::future::pending::<()>().await;
        Ok(ajs::JsValue::Null)
    });
    let opts = Options {
        timeout_ms: 50,
        capabilities: caps,
        ..Default::default()
    };
    let start = Instant::now();
    let out = common::eval_with(
        "return httpFetch({ url: 'https://api.example.com/' })",
        json!({}),
        opts,
    );
    assert!(out
        .error
        .unwrap()
        .message
        .starts_with("Execution timeout after 50ms"));
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[test]
fn invalid_options_are_refused_naming_the_field() {
    let out = common::eval_with(
        "1",
        json!({}),
        Options {
            fuel: -1.0,
            ..Default::default()
        },
    );
    assert!(out.error.unwrap().message.contains("fuel"));
    let out = common::eval_with(
        "1",
        json!({}),
        Options {
            timeout_ms: 0,
            ..Default::default()
        },
    );
    assert!(out.error.unwrap().message.contains("timeoutMs"));
    let out = common::eval_with(
        "1",
        json!({}),
        Options {
            fuel: f64::NAN,
            ..Default::default()
        },
    );
    assert!(out.error.is_some());
}

#[test]
fn deeply_nested_source_is_refused_not_crashing() {
    let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    let out = common::eval(&deep, json!({}));
    assert!(out.error.is_some());
    let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    let out = common::eval(&deep, json!({}));
    assert!(out.error.is_some());
}

#[test]
fn cyclic_results_fail_cleanly() {
    let out = common::eval("let a = []\na.push(a)\nreturn a", json!({}));
    assert!(out.error.unwrap().message.contains("circular"));
}

#[test]
fn a_capability_return_over_the_cap_ends_the_run_inside_try() {
    let caps = ajs::Capabilities::default()
        .with_fetch(|_| async { Ok(ajs::JsValue::String("x".repeat(5_000_000))) });
    let opts = Options {
        capabilities: caps,
        ..Default::default()
    };
    let out = common::eval_with(
        "try {\n  let r = httpFetch({ url: 'https://api.example.com/' })\n  return 'got it'\n} catch (e) {\n  return 'caught'\n}",
        json!({}),
        opts,
    );
    let e = out.error.expect("boundary");
    assert!(
        e.message
            .starts_with("Capability boundary rejected the return of 'httpFetch'"),
        "{}",
        e.message
    );
    assert_eq!(e.kind, ErrorKind::Boundary);
}

#[test]
fn time_and_randomness_come_from_host_sources() {
    fn fixed_clock() -> f64 {
        1_700_000_000_000.0
    }
    let opts = Options {
        clock: fixed_clock,
        random_seed: Some(42),
        ..Default::default()
    };
    let code = "return [Date.now(), Date().year, Math.random(), uuid()]";
    let a = common::eval_with(code, json!({}), opts.clone());
    let b = common::eval_with(code, json!({}), opts);
    assert!(a.error.is_none(), "{:?}", a.error);
    assert_eq!(a.result, b.result, "the same sources give the same run");
    let j = a.result.to_json().unwrap();
    assert_eq!(j[0], json!(1_700_000_000_000u64));
    assert_eq!(j[1], json!(2023));
    let c = common::eval_with(
        code,
        json!({}),
        Options {
            clock: fixed_clock,
            random_seed: Some(7),
            ..Default::default()
        },
    );
    assert_ne!(
        c.result.to_json().unwrap()[2],
        j[2],
        "another seed, another draw"
    );
}
