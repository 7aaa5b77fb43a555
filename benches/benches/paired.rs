//! Paired ratios against QuickJS: the rows of `peers` where the two engines are closest, timed
//! in alternation, so that a change in the machine's speed during the run (this VM's speed moves
//! by tens of percent between runs and within one) slows both sides of a pair alike.
//!
//! For each program: both engines warm up, then in each of `ROUNDS` rounds each engine runs a
//! batch of `k` iterations (`k` picked so that a batch takes about `BATCH_TARGET`), the engine
//! that goes first alternating from round to round. A round's ratio is QuickJS's time over
//! ours (above 1: ajs is faster). Printed: the median time of an iteration in each engine, and
//! the median, lower and upper quartile of the rounds' ratios. The programs run exactly as in
//! `peers` (from source to result, limits on, through the facade), so the two benches agree.
//!
//! Run: `cd benches && cargo bench --bench paired` (about a minute; see docs/PERFORMANCE.md).

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use ajs::{Options, Runner, SafeFunction};
use ajs_benches::{agent_8k_js, ajs_run, qjs_runtime, runtime, AGENT_8K, PROGRAMS};
use serde_json::json;

/// Rounds per program (odd: the median is a round's ratio).
const ROUNDS: usize = 101;
/// About how long one batch of one engine takes.
const BATCH_TARGET: Duration = Duration::from_millis(8);

/// One program in both engines: each closure runs one iteration (generic, not `dyn`: a
/// nanosecond row is not paying for an indirect call).
struct Pair<'a, A: FnMut(), Q: FnMut()> {
    name: &'a str,
    ajs: A,
    quickjs: Q,
}

fn time_batch(mut f: impl FnMut(), k: usize) -> Duration {
    let t = Instant::now();
    for _ in 0..k {
        f();
    }
    t.elapsed()
}

/// Iterations per batch: enough that the slower engine's batch takes about `BATCH_TARGET`
/// (both run the same number, so a round compares the same work).
fn batch_size<A: FnMut(), Q: FnMut()>(p: &mut Pair<A, Q>) -> usize {
    let mut k = 1;
    loop {
        let t = time_batch(&mut p.ajs, k).max(time_batch(&mut p.quickjs, k));
        if t >= BATCH_TARGET / 4 || k >= 1 << 24 {
            let per = t.as_secs_f64() / k as f64;
            return ((BATCH_TARGET.as_secs_f64() / per).ceil() as usize).max(1);
        }
        k *= 2;
    }
}

fn quartiles(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}

fn fmt(secs: f64) -> String {
    match secs {
        s if s >= 1e-3 => format!("{:.2} ms", s * 1e3),
        s if s >= 1e-6 => format!("{:.2} µs", s * 1e6),
        s => format!("{:.0} ns", s * 1e9),
    }
}

fn measure<A: FnMut(), Q: FnMut()>(mut p: Pair<A, Q>) {
    // warm up both (caches, allocators, the thread's spare VM and program)
    for _ in 0..3 {
        time_batch(&mut p.ajs, 1);
        time_batch(&mut p.quickjs, 1);
    }
    let k = batch_size(&mut p);
    let (mut ours, mut theirs, mut ratios) = (vec![], vec![], vec![]);
    for round in 0..ROUNDS {
        let (a, q) = if round % 2 == 0 {
            let a = time_batch(&mut p.ajs, k);
            (a, time_batch(&mut p.quickjs, k))
        } else {
            let q = time_batch(&mut p.quickjs, k);
            (time_batch(&mut p.ajs, k), q)
        };
        let (a, q) = (a.as_secs_f64() / k as f64, q.as_secs_f64() / k as f64);
        ours.push(a);
        theirs.push(q);
        ratios.push(q / a);
    }
    let (_, a, _) = quartiles(ours);
    let (_, q, _) = quartiles(theirs);
    let (lo, mid, hi) = quartiles(ratios);
    println!(
        "| {} | {} | {} | {mid:.2} | {lo:.2}–{hi:.2} | {k} |",
        p.name,
        fmt(a),
        fmt(q)
    );
}

fn main() {
    // `cargo bench` passes `--bench` (and a filter, when given: a program runs when its name
    // contains it)
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_default();
    let wanted = |name: &str| name.contains(filter.as_str());
    println!("Paired with QuickJS: {ROUNDS} rounds a program, batches of about {BATCH_TARGET:?}");
    println!();
    println!("| program | ajs | QuickJS | QuickJS / ajs (median) | quartiles | batch |");
    println!("|---|---|---|---|---|---|");
    let rt = runtime();
    let qrt = qjs_runtime();
    let qctx = rquickjs::Context::full(&qrt).expect("quickjs context");
    qctx.with(|ctx| {
        for p in PROGRAMS.iter().filter(|p| wanted(p.name)) {
            let (v, _) = ajs_run(&rt, p);
            assert_eq!(v, p.expect, "ajs {}", p.name);
            let v: f64 = ctx.eval(p.js).expect("quickjs");
            assert_eq!(v, p.expect, "quickjs {}", p.name);
            measure(Pair {
                name: p.name,
                ajs: || {
                    black_box(ajs_run(&rt, black_box(p)));
                },
                quickjs: || {
                    let v: f64 = ctx.eval(black_box(p.js)).expect("quickjs");
                    black_box(v);
                },
            });
        }
        let name = "a + b, precompiled function call (ajs `_sync` API)";
        if wanted(name) {
            let add = SafeFunction::new(&["a", "b"], "return a + b", Options::default())
                .expect("compiles");
            let args = [json!(20), json!(22)];
            let f: rquickjs::Function = ctx.eval("(function (a, b) { return a + b })").unwrap();
            measure(Pair {
                name,
                ajs: || {
                    black_box(add.call_sync(black_box(&args)));
                },
                quickjs: || {
                    let v: f64 = f.call((black_box(20), black_box(22))).unwrap();
                    black_box(v);
                },
            });
        }
        let name = "compile 8 KB agent";
        if wanted(name) {
            let opts = Options::default();
            Runner::compile_agent(AGENT_8K, &opts).expect("the agent compiles");
            let js = agent_8k_js();
            rquickjs::Module::declare(ctx.clone(), "agent", js.as_str()).expect("compiles");
            measure(Pair {
                name,
                ajs: || {
                    black_box(Runner::compile_agent(black_box(AGENT_8K), &opts)).ok();
                },
                quickjs: || {
                    let m = rquickjs::Module::declare(ctx.clone(), "agent", black_box(js.as_str()));
                    black_box(m.is_ok());
                },
            });
        }
    });
}
