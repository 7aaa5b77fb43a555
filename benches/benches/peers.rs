//! The same programs in ajs and in the engines a Rust user would pick instead, each with its
//! resource limit switched on: rquickjs (interrupt handler + memory limit), boa_engine (loop
//! iteration and recursion limits), rhai (`max_operations`). Every measured iteration goes from
//! source to result on an engine (runtime, context) created once, except the `fresh sandbox` rows.
//!
//! Run: `cd benches && cargo bench --bench peers` (see benches/README.md and docs/PERFORMANCE.md).

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use ajs::{Eval, JsValue, Options, Runner, SafeFunction};
use ajs_benches::{agent_8k_js, ajs_run, qjs_runtime, runtime, AGENT_8K, PROGRAMS};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::json;

/// The peers' budgets: generous, but on.
const BOA_LOOP_LIMIT: u64 = 100_000_000;
const RHAI_MAX_OPS: u64 = 1_000_000_000;

fn boa_context() -> boa_engine::Context {
    let mut ctx = boa_engine::Context::default();
    ctx.runtime_limits_mut()
        .set_loop_iteration_limit(BOA_LOOP_LIMIT);
    ctx.runtime_limits_mut().set_recursion_limit(10_000);
    ctx
}

fn rhai_engine() -> rhai::Engine {
    let mut e = rhai::Engine::new();
    e.set_max_operations(RHAI_MAX_OPS);
    e.set_max_call_levels(1000);
    e
}

fn rhai_num(d: rhai::Dynamic) -> f64 {
    if let Ok(i) = d.as_int() {
        i as f64
    } else {
        d.as_float().expect("number")
    }
}

fn programs(c: &mut Criterion) {
    let rt = runtime();
    let qrt = qjs_runtime();
    let qctx = rquickjs::Context::full(&qrt).expect("quickjs context");
    let mut boa = boa_context();
    let rhai = rhai_engine();
    for p in PROGRAMS {
        let mut g = c.benchmark_group(p.name);
        g.sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        let (v, fuel) = ajs_run(&rt, p);
        assert_eq!(v, p.expect, "ajs {}", p.name);
        println!("FUEL {}: {fuel}", p.name);
        g.bench_function(BenchmarkId::from_parameter("ajs"), |b| {
            b.iter(|| black_box(ajs_run(&rt, black_box(p))))
        });
        qctx.with(|ctx| {
            let v: f64 = ctx.eval(p.js).expect("quickjs");
            assert_eq!(v, p.expect, "quickjs {}", p.name);
            g.bench_function(BenchmarkId::from_parameter("quickjs"), |b| {
                b.iter(|| {
                    let v: f64 = ctx.eval(black_box(p.js)).expect("quickjs");
                    black_box(v)
                })
            });
        });
        let v = boa
            .eval(boa_engine::Source::from_bytes(p.js))
            .expect("boa")
            .as_number()
            .expect("number");
        assert_eq!(v, p.expect, "boa {}", p.name);
        g.bench_function(BenchmarkId::from_parameter("boa"), |b| {
            b.iter(|| black_box(boa.eval(boa_engine::Source::from_bytes(black_box(p.js)))))
        });
        if let Some(src) = p.rhai {
            let v = rhai_num(rhai.eval::<rhai::Dynamic>(src).expect("rhai"));
            assert_eq!(v, p.expect, "rhai {}", p.name);
            g.bench_function(BenchmarkId::from_parameter("rhai"), |b| {
                b.iter(|| black_box(rhai.eval::<rhai::Dynamic>(black_box(src))))
            });
        }
        g.finish();
    }
}

fn fresh_sandbox(c: &mut Criterion) {
    let mut g = c.benchmark_group("a + b, fresh sandbox");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let rt = runtime();
    let context = json!({ "a": 1, "b": 2 });
    let out = rt.block_on(Eval::new("a + b").context(context.clone()).run());
    assert_eq!(out.result, JsValue::Number(3.0));
    println!("FUEL a + b: {}", out.fuel_used);
    g.bench_function(BenchmarkId::from_parameter("ajs"), |b| {
        b.iter(|| {
            black_box(
                rt.block_on(
                    Eval::new(black_box("a + b"))
                        .context(black_box(context.clone()))
                        .run(),
                ),
            )
        })
    });
    // the same, through the synchronous API (no async runtime; for code that calls no atom)
    g.bench_function(BenchmarkId::from_parameter("ajs_sync"), |b| {
        b.iter(|| {
            black_box(
                Eval::new(black_box("a + b"))
                    .context(black_box(context.clone()))
                    .run_sync(),
            )
        })
    });
    // the async API awaited inside a running task, as a service's handler does (one `block_on`
    // for the whole batch of iterations)
    g.bench_function(BenchmarkId::from_parameter("ajs_task"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    let e = Eval::new(black_box("a + b")).context(black_box(context.clone()));
                    black_box(e.run().await);
                }
                t.elapsed()
            })
        })
    });
    g.bench_function(BenchmarkId::from_parameter("quickjs"), |b| {
        b.iter(|| {
            let qrt = qjs_runtime();
            let ctx = rquickjs::Context::full(&qrt).expect("context");
            ctx.with(|ctx| {
                let glob = ctx.globals();
                glob.set("a", 1).unwrap();
                glob.set("b", 2).unwrap();
                let v: f64 = ctx.eval(black_box("a + b")).expect("eval");
                black_box(v)
            })
        })
    });
    g.bench_function(BenchmarkId::from_parameter("boa"), |b| {
        b.iter(|| {
            let mut ctx = boa_context();
            ctx.register_global_property(
                boa_engine::js_string!("a"),
                1,
                boa_engine::property::Attribute::all(),
            )
            .unwrap();
            ctx.register_global_property(
                boa_engine::js_string!("b"),
                2,
                boa_engine::property::Attribute::all(),
            )
            .unwrap();
            black_box(ctx.eval(boa_engine::Source::from_bytes(black_box("a + b"))))
        })
    });
    // rhai: a reused engine (its documented pattern), a fresh scope each time.
    let engine = rhai_engine();
    g.bench_function(BenchmarkId::from_parameter("rhai"), |b| {
        b.iter(|| {
            let mut scope = rhai::Scope::new();
            scope.push("a", 1_i64);
            scope.push("b", 2_i64);
            black_box(engine.eval_with_scope::<i64>(&mut scope, black_box("a + b")))
        })
    });
    g.finish();
}

fn precompiled_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("a + b, precompiled function call");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let rt = runtime();
    let add = SafeFunction::new(&["a", "b"], "return a + b", Options::default()).expect("compiles");
    let args = [json!(20), json!(22)];
    assert_eq!(rt.block_on(add.call(&args)).result, JsValue::Number(42.0));
    g.bench_function(BenchmarkId::from_parameter("ajs"), |b| {
        b.iter(|| black_box(rt.block_on(add.call(black_box(&args)))))
    });
    g.bench_function(BenchmarkId::from_parameter("ajs_sync"), |b| {
        b.iter(|| black_box(add.call_sync(black_box(&args))))
    });
    // the async API as a service's handler uses it: awaited inside a running task (one
    // `block_on` for the whole batch of iterations, not one per call)
    g.bench_function(BenchmarkId::from_parameter("ajs_task"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    black_box(add.call(black_box(&args)).await);
                }
                t.elapsed()
            })
        })
    });
    let qrt = qjs_runtime();
    let qctx = rquickjs::Context::full(&qrt).expect("context");
    qctx.with(|ctx| {
        let f: rquickjs::Function = ctx.eval("(function (a, b) { return a + b })").unwrap();
        g.bench_function(BenchmarkId::from_parameter("quickjs"), |b| {
            b.iter(|| {
                let v: f64 = f.call((black_box(20), black_box(22))).unwrap();
                black_box(v)
            })
        });
    });
    let mut boa = boa_context();
    let f = boa
        .eval(boa_engine::Source::from_bytes(
            "(function (a, b) { return a + b })",
        ))
        .unwrap();
    let f = f.as_callable().unwrap().clone();
    g.bench_function(BenchmarkId::from_parameter("boa"), |b| {
        b.iter(|| {
            black_box(f.call(
                &boa_engine::JsValue::undefined(),
                &[black_box(20).into(), black_box(22).into()],
                &mut boa,
            ))
        })
    });
    let engine = rhai_engine();
    let ast = engine.compile("fn add(a, b) { a + b }").unwrap();
    g.bench_function(BenchmarkId::from_parameter("rhai"), |b| {
        b.iter(|| {
            let mut scope = rhai::Scope::new();
            black_box(engine.call_fn::<i64>(&mut scope, &ast, "add", (black_box(20_i64), 22_i64)))
        })
    });
    g.finish();
}

fn compile_8k(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile 8 KB agent");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let opts = Options::default();
    Runner::compile_agent(AGENT_8K, &opts).expect("the agent compiles");
    g.bench_function(BenchmarkId::from_parameter("ajs"), |b| {
        b.iter(|| black_box(Runner::compile_agent(black_box(AGENT_8K), &opts)))
    });
    // (the same program with a plain destructuring signature: see `agent_8k_js`)
    let js: String = agent_8k_js();
    let js = js.as_str();
    let qrt = qjs_runtime();
    let qctx = rquickjs::Context::full(&qrt).expect("context");
    qctx.with(|ctx| {
        rquickjs::Module::declare(ctx.clone(), "agent", js).expect("quickjs compiles");
        g.bench_function(BenchmarkId::from_parameter("quickjs"), |b| {
            b.iter(|| {
                black_box(rquickjs::Module::declare(
                    ctx.clone(),
                    "agent",
                    black_box(js),
                ))
                .is_ok()
            })
        });
    });
    let mut boa = boa_context();
    g.bench_function(BenchmarkId::from_parameter("boa"), |b| {
        b.iter(|| {
            let s = boa_engine::Script::parse(
                boa_engine::Source::from_bytes(black_box(js)),
                None,
                &mut boa,
            )
            .expect("boa parses");
            black_box(s.codeblock(&mut boa).is_ok())
        })
    });
    g.finish();
}

criterion_group!(peers, programs, fresh_sandbox, precompiled_call, compile_8k);
criterion_main!(peers);
