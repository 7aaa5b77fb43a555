//! Per-run fixed costs, measured without criterion: `cargo run --release -p ajs --example
//! overhead [ROUNDS] [WHICH]` prints the median over `ROUNDS` rounds (default 200) of 1,000 runs
//! each: `Eval("a + b")` from source, and one call of a compiled `SafeFunction`, each through the
//! async API (on a current-thread tokio runtime, `block_on` per run), the async API awaited
//! inside a running task (one `block_on` per 1,000 runs, as a service's handler awaits it) and the
//! `_sync` API. `WHICH` (`eval`, `eval_task`, `eval_sync`, `call`, `call_task`, `call_sync`)
//! measures only that row, for profiling.

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::Instant;

use ajs::{Eval, JsValue, Options, SafeFunction};
use serde_json::json;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let rounds: usize = argv.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    let only = argv.next().unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let context = json!({ "a": 1, "b": 2 });
    let out = rt.block_on(Eval::new("a + b").context(context.clone()).run());
    assert_eq!(out.result, JsValue::Number(3.0));
    let add = SafeFunction::new(&["a", "b"], "return a + b", Options::default()).expect("compiles");
    let args = [json!(20), json!(22)];
    assert_eq!(add.call_sync(&args).result, JsValue::Number(42.0));
    let per = 1000;
    // each row runs `per` times
    type Row<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let rows: Vec<Row> = vec![
        (
            "eval",
            Box::new(|| {
                for _ in 0..per {
                    let e = Eval::new(black_box("a + b")).context(black_box(context.clone()));
                    black_box(rt.block_on(e.run()));
                }
            }),
        ),
        (
            "eval_task",
            Box::new(|| {
                rt.block_on(async {
                    for _ in 0..per {
                        let e = Eval::new(black_box("a + b")).context(black_box(context.clone()));
                        black_box(e.run().await);
                    }
                })
            }),
        ),
        (
            "eval_sync",
            Box::new(|| {
                for _ in 0..per {
                    let e = Eval::new(black_box("a + b")).context(black_box(context.clone()));
                    black_box(e.run_sync());
                }
            }),
        ),
        (
            "call",
            Box::new(|| {
                for _ in 0..per {
                    black_box(rt.block_on(add.call(black_box(&args))));
                }
            }),
        ),
        (
            "call_task",
            Box::new(|| {
                rt.block_on(async {
                    for _ in 0..per {
                        black_box(add.call(black_box(&args)).await);
                    }
                })
            }),
        ),
        (
            "call_sync",
            Box::new(|| {
                for _ in 0..per {
                    black_box(add.call_sync(black_box(&args)));
                }
            }),
        ),
    ];
    for (name, f) in &rows {
        if !only.is_empty() && only != *name {
            continue;
        }
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            f();
            times.push(t.elapsed().as_nanos() as f64 / per as f64);
        }
        println!("{name:<10} a + b: {:>6.0} ns", median(times));
    }
}
