//! Fuel before work for the second batch of builtins: 100× the input costs at least 10× the fuel,
//! and a large input on a small budget ends `Out of Fuel`.

use crate::common;

use ajs::{ErrorKind, Options};
use serde_json::{json, Value};

fn ctx(n: usize) -> Value {
    let xs: Vec<Value> = (0..n).map(|i| json!((i * 7919) % 1000)).collect();
    let words: Vec<Value> = (0..n)
        .map(|i| json!(format!("w{}", (i * 31) % 997)))
        .collect();
    json!({ "s": "ab1 cd2 ".repeat(n / 8), "xs": xs, "ws": words, "n": n })
}

const CASES: &[(&str, &str)] = &[
    ("xs.sort().length", "xs.length"),
    ("xs.toSorted().length", "xs.length"),
    ("ws.sort().length", "ws.length"),
    ("s.substr(1).length", "s.length"),
    ("s.normalize('NFD').length", "s.length"),
    ("/\\d/.test(s + '!')", "s.length"),
    ("s.search(/!/)", "s.length"),
    ("s.match(/\\d/g).length", "s.length"),
    ("s.matchAll(/(\\d)/g).length", "s.length"),
    ("s.replace(/\\d/g, '$&$&').length", "s.length"),
    ("s.replaceAll(/ /g, '-').length", "s.length"),
    ("s.split(/\\s+/).length", "s.length"),
    ("Set(xs).size", "xs.length"),
    ("Set(ws).union(ws).size", "ws.length"),
    ("Set(xs).intersection(xs).size", "xs.length"),
    ("template({ tmpl: s, vars: {} }).length", "s.length"),
    (
        "regexMatch({ pattern: '!', value: s.slice(0, 99000) })",
        "s.slice(0, 99000).length",
    ),
    ("split({ str: s, sep: ' ' }).length", "s.length"),
    ("join({ list: xs, sep: ',' }).length", "xs.length"),
    ("jsonStringify({ value: xs }).length", "xs.length"),
    (
        "keys({ obj: Object.fromEntries(ws.map((w, i) => [w + i, i])) }).length",
        "Object.fromEntries(ws.map((w, i) => [w + i, i])).w0",
    ),
    ("hash({ value: s })", "s.length"),
];

fn fuel(code: &str, ctx: &Value) -> f64 {
    let out = common::eval(code, ctx.clone());
    if let Some(e) = &out.error {
        panic!("`{code}` failed: {}", e.message);
    }
    out.fuel_used
}

#[test]
fn a_hundred_times_the_input_costs_at_least_ten_times_the_fuel() {
    let mut failures = Vec::new();
    let opts = Options {
        fuel: 1e7,
        ..Default::default()
    };
    let fuel = |code: &str, c: &Value| {
        let out = common::eval_with(code, c.clone(), opts.clone());
        if let Some(e) = &out.error {
            panic!("`{code}` failed: {}", e.message);
        }
        out.fuel_used
    };
    for &(code, base) in CASES {
        let (small, large) = (ctx(1_000), ctx(100_000));
        let m_small = fuel(code, &small) - fuel(base, &small);
        let m_large = fuel(code, &large) - fuel(base, &large);
        if !(m_large > 0.0 && m_large >= 10.0 * m_small) {
            failures.push(format!(
                "{code}: marginal {m_small} at 1k, {m_large} at 100k"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_small_budget_stops_every_builtin_on_a_large_input() {
    let mut failures = Vec::new();
    for &(code, base) in CASES {
        let big = ctx(250_000);
        let rich = Options {
            fuel: 1e7,
            ..Default::default()
        };
        let b = common::eval_with(base, big.clone(), rich).fuel_used;
        let budget = b + 0.1;
        let opts = Options {
            fuel: budget,
            ..Default::default()
        };
        let out = common::eval_with(code, big, opts);
        match out.error {
            Some(e) if e.kind == ErrorKind::OutOfFuel => {}
            other => failures.push(format!("{code}: {other:?} {:?}", out.result)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn sorting_200k_numbers_costs_more_than_50_times_sorting_2k() {
    let rich = Options {
        fuel: 1e7,
        ..Default::default()
    };
    let cost = |n: usize| {
        let c = ctx(n);
        let a = common::eval_with("xs.sort().length", c.clone(), rich.clone()).fuel_used;
        let b = common::eval_with("xs.length", c, rich.clone()).fuel_used;
        a - b
    };
    let (small, large) = (cost(2_000), cost(200_000));
    assert!(large > 50.0 * small, "2k: {small}, 200k: {large}");
}

#[test]
fn regex_work_is_charged_before_matching() {
    // a long input on a tiny budget ends before the engine runs
    let opts = Options {
        fuel: 5.0,
        ..Default::default()
    };
    let out = common::eval_with(
        "s.replace(/(\\w+) (\\w+)/g, '$2 $1').length",
        ctx(2_000_000),
        opts,
    );
    assert_eq!(out.error.map(|e| e.kind), Some(ErrorKind::OutOfFuel));
    let _ = fuel("1", &json!({}));
}
