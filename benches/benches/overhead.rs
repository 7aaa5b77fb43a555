//! Fixed costs of the facade: (a) an `Eval` from source to result, (b) one call of a compiled
//! `SafeFunction`.

#![forbid(unsafe_code)]

use ajs::{Eval, JsValue, Options, SafeFunction};
use ajs_benches::runtime;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

fn eval_from_source(c: &mut Criterion) {
    // Created once, outside the measured loop.
    let rt = runtime();
    let context = json!({ "a": 1, "b": 2 });
    // Check once that the work measured is the work meant.
    let out = rt.block_on(Eval::new("a + b").context(context.clone()).run());
    assert_eq!(out.result, JsValue::Number(3.0), "{:?}", out.error);
    c.bench_function("eval a + b (compile + run)", |b| {
        b.iter(|| {
            let out = rt.block_on(
                Eval::new(black_box("a + b"))
                    .context(black_box(context.clone()))
                    .run(),
            );
            black_box(out)
        })
    });
}

fn safe_function_call(c: &mut Criterion) {
    let rt = runtime();
    let add = SafeFunction::new(&["a", "b"], "return a + b", Options::default()).expect("compiles");
    let args = [json!(20), json!(22)];
    let out = rt.block_on(add.call(&args));
    assert_eq!(out.result, JsValue::Number(42.0), "{:?}", out.error);
    c.bench_function("safe function call a + b", |b| {
        b.iter(|| black_box(rt.block_on(add.call(black_box(&args)))))
    });
}

fn sync_variants(c: &mut Criterion) {
    let context = json!({ "a": 1, "b": 2 });
    c.bench_function("eval a + b (compile + run), run_sync", |b| {
        b.iter(|| {
            black_box(
                Eval::new(black_box("a + b"))
                    .context(black_box(context.clone()))
                    .run_sync(),
            )
        })
    });
    let add = SafeFunction::new(&["a", "b"], "return a + b", Options::default()).expect("compiles");
    let args = [json!(20), json!(22)];
    assert_eq!(add.call_sync(&args).result, JsValue::Number(42.0));
    c.bench_function("safe function call a + b, call_sync", |b| {
        b.iter(|| black_box(add.call_sync(black_box(&args))))
    });
}

criterion_group!(
    overhead,
    eval_from_source,
    safe_function_call,
    sync_variants
);
criterion_main!(overhead);
