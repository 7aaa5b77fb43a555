//! Concurrent host calls (issue 7, item 5): `parallel([...])` runs its atom calls together under
//! the run's quotas, policies, journal and timeout, and returns their results in order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ajs::{
    replay, Approvals, AtomDecl, Capabilities, Decision, ErrorKind, Eval, GatedRunner, JsValue,
    Options, Outcome, Policy, ReplayError, RunSettings, Runner,
};
use serde_json::json;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn num(v: &JsValue, key: &str) -> f64 {
    match v {
        JsValue::Object(m) => match m.get(key) {
            Some(JsValue::Number(n)) => *n,
            _ => 0.0,
        },
        _ => 0.0,
    }
}

/// Counts calls per atom and the most calls in flight at once.
#[derive(Clone, Default)]
struct Probe {
    calls: Arc<AtomicUsize>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

impl Probe {
    /// `slow({ n, ms })`: answers `n * 10` after `ms` milliseconds; `n < 0` fails.
    fn caps(&self) -> Capabilities {
        let p = self.clone();
        Capabilities::default()
            .register_atom(
                AtomDecl::new("slow").timeout(Duration::from_secs(20)),
                move |input: JsValue| {
                    let p = p.clone();
                    async move {
                        p.calls.fetch_add(1, Ordering::SeqCst);
                        let now = p.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        p.max_in_flight.fetch_max(now, Ordering::SeqCst);
                        let ms = num(&input, "ms");
                        tokio::time::sleep(Duration::from_millis(ms as u64)).await;
                        p.in_flight.fetch_sub(1, Ordering::SeqCst);
                        let n = num(&input, "n");
                        if n < 0.0 {
                            return Err(format!("slow: n is negative ({n})"));
                        }
                        Ok(JsValue::Number(n * 10.0))
                    }
                },
            )
            .with_atom("echo", |v: JsValue| async move { Ok(v) })
    }

    fn options(&self) -> Options {
        Options {
            capabilities: self.caps(),
            fuel: 100_000.0,
            ..Options::default()
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn eval(code: &str, options: Options) -> Outcome {
    rt().block_on(Eval::new(code).options(options).run())
}

fn ok(out: &Outcome) -> serde_json::Value {
    if let Some(e) = &out.error {
        panic!("run failed: {}", e.message);
    }
    out.result.to_json().unwrap_or(serde_json::Value::Null)
}

#[test]
fn calls_overlap_and_results_keep_the_items_order() {
    // Three calls that can only finish if they are in flight together: each waits on a
    // three-party barrier (run one at a time, the first would wait until its atom timeout).
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let caps = Capabilities::default().register_atom(
        AtomDecl::new("meet").timeout(Duration::from_secs(10)),
        move |input: JsValue| {
            let b = barrier.clone();
            async move {
                b.wait().await;
                Ok(input)
            }
        },
    );
    let o = Options {
        capabilities: caps,
        ..Options::default()
    };
    let out = eval(
        "return parallel([meet({ i: 0 }), meet({ i: 1 }), meet({ i: 2 })]).map(r => r.i)",
        o,
    );
    assert_eq!(ok(&out), json!([0, 1, 2]));

    // the slowest call first: the results still come back in the items' order
    let p = Probe::default();
    let out = eval(
        "return parallel([slow({ n: 1, ms: 60 }), 'plain', slow({ n: 2, ms: 1 }), slow({ n: 3, ms: 20 })])",
        p.options(),
    );
    assert_eq!(ok(&out), json!([10, "plain", 20, 30]));
    assert_eq!(p.calls(), 3);
    assert_eq!(p.max_in_flight.load(Ordering::SeqCst), 3);
}

#[test]
fn a_mapped_list_fans_out_under_the_concurrency_cap() {
    let p = Probe::default();
    let mut o = p.options();
    o.max_concurrent_calls = 2;
    let out = eval(
        "let ns = [1, 2, 3, 4, 5, 6]\nreturn parallel(ns.map(n => slow({ n, ms: 5 })))",
        o,
    );
    assert_eq!(ok(&out), json!([10, 20, 30, 40, 50, 60]));
    assert_eq!(p.calls(), 6);
    assert_eq!(
        p.max_in_flight.load(Ordering::SeqCst),
        2,
        "never more than the cap"
    );

    // block bodies, conditional items and plain values
    let p = Probe::default();
    let out = eval(
        "return parallel([1, 2, 3, 4].map((n, i) => {\n  if (n === 4) { return 'skip' }\n  return n % 2 ? slow({ n, ms: 1 }) : echo({ i })\n}))",
        p.options(),
    );
    assert_eq!(ok(&out), json!([10, { "i": 1 }, 30, "skip"]));
    assert_eq!(p.calls(), 2);
}

#[test]
fn a_failed_call_is_catchable_and_settled_mode_keeps_every_outcome() {
    let p = Probe::default();
    let out = eval(
        "try {\n  parallel([slow({ n: 1, ms: 1 }), slow({ n: -1, ms: 1 }), slow({ n: -2, ms: 1 })])\n  return 'no'\n} catch (e) {\n  return e\n}",
        p.options(),
    );
    assert_eq!(
        ok(&out),
        json!("slow: n is negative (-1)"),
        "the first failure by position"
    );
    assert_eq!(p.calls(), 3, "every call of the batch ran");

    let out = eval(
        "return parallel([slow({ n: 1, ms: 1 }), slow({ n: -1, ms: 1 }), 7], { settled: true })",
        p.options(),
    );
    assert_eq!(
        ok(&out),
        json!([
            { "ok": true, "value": 10 },
            { "ok": false, "error": "slow: n is negative (-1)" },
            { "ok": true, "value": 7 }
        ])
    );

    // uncaught: a guest error at the parallel call
    let out = eval("return parallel([slow({ n: -5, ms: 0 })])", p.options());
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Guest);
    assert_eq!(e.message, "slow: n is negative (-5)");
}

#[test]
fn fuel_quotas_and_item_caps_apply_to_every_queued_call() {
    let p = Probe::default();
    // each call costs its atom's fuel (1 by default) when it is queued
    let one = eval("return parallel([slow({ n: 1, ms: 0 })])", p.options());
    let three = eval(
        "return parallel([slow({ n: 1, ms: 0 }), slow({ n: 1, ms: 0 }), slow({ n: 1, ms: 0 })])",
        p.options(),
    );
    assert!(
        three.fuel_used - one.fuel_used >= 2.0,
        "{} vs {}",
        three.fuel_used,
        one.fuel_used
    );

    // a per-run quota ends the run before any call of the batch is made
    let p = Probe::default();
    let mut quotas = std::collections::HashMap::new();
    quotas.insert("slow".to_string(), 2u32);
    let runner = Runner {
        quotas,
        ..Runner::default()
    };
    let out = rt().block_on(runner.run_agent(
        "function main() { return parallel([1, 2, 3].map(n => slow({ n, ms: 0 }))) }",
        &json!({}),
        &p.options(),
    ));
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Quota, "{}", e.message);
    assert_eq!(p.calls(), 0);

    // too many items: a catchable guest error naming the option
    let mut o = p.options();
    o.max_parallel_items = 10;
    let out = eval(
        "let xs = []\nwhile (xs.length < 11) { xs.push(xs.length) }\ntry { parallel(xs.map(x => slow({ n: x, ms: 0 }))) } catch (e) { return e }",
        o,
    );
    assert_eq!(
        ok(&out),
        json!("parallel() takes at most 10 items (maxParallelItems); split the list")
    );
    assert_eq!(p.calls(), 0, "nothing ran");

    // fuel runs out while queueing: nothing ran
    let mut o = p.options();
    o.fuel = 3.0;
    let out = eval(
        "return parallel([1, 2, 3, 4, 5].map(n => slow({ n, ms: 0 })))",
        o,
    );
    assert_eq!(out.error.unwrap().kind, ErrorKind::OutOfFuel);
    assert_eq!(p.calls(), 0);
}

#[test]
fn unwinding_drops_open_batches_and_batches_nest() {
    let p = Probe::default();
    // an item's input throws: the batch is abandoned, again and again, and later ones work
    let out = eval(
        "let caught = 0\nlet i = 0\nwhile (i < 200) {\n  i = i + 1\n  try { parallel([slow({ n: 1, ms: 0 }), slow({ n: Error('boom'), ms: 0 })]) } catch (e) { caught = caught + 1 }\n}\nreturn [caught, parallel([slow({ n: 4, ms: 0 })])]",
        p.options(),
    );
    assert_eq!(ok(&out), json!([200, [40]]));
    assert_eq!(p.calls(), 1, "abandoned batches made no calls");

    // a parallel inside an item's input runs first, then the outer batch
    let p = Probe::default();
    let out = eval(
        "return parallel([echo({ inner: parallel([slow({ n: 1, ms: 0 }), slow({ n: 2, ms: 0 })]) }), slow({ n: 3, ms: 0 })])",
        p.options(),
    );
    assert_eq!(ok(&out), json!([{ "inner": [10, 20] }, 30]));
}

#[test]
fn compile_errors_say_what_to_write() {
    let o = Probe::default().options();
    for (code, want) in [
        ("parallel(xs)", "parallel() takes an array of atom calls"),
        ("parallel()", "parallel() takes an array of atom calls"),
        (
            "parallel([...xs])",
            "spread is not supported inside parallel([...])",
        ),
        (
            "parallel([], { fast: true })",
            "unknown parallel() option 'fast'",
        ),
        (
            "parallel([], { settled: x })",
            "parallel()'s options are an object literal",
        ),
        (
            "parallel([], {}, 1)",
            "parallel() takes the items and at most one options object",
        ),
        (
            "parallel(xs.filter(x => x))",
            "parallel() takes an array of atom calls",
        ),
        ("Promise.all([])", "use parallel([...])"),
    ] {
        let out = eval(code, o.clone());
        let e = out.error.unwrap_or_else(|| panic!("{code} compiled"));
        assert!(e.message.contains(want), "{code}: {}", e.message);
    }
}

const AGENT: &str = "function main({ ids: [1] }) {\n  let first = slow({ n: 0, ms: 0 })\n  let rs = parallel(ids.map(id => id === 2 ? echo({ id }) : slow({ n: id, ms: 2 })))\n  let n = 0\n  while (n < 20) { n = n + 1 }\n  return { first, rs, n }\n}";

fn gated(p: &Probe, approvals: Approvals, settings: RunSettings) -> GatedRunner {
    GatedRunner::new(Runner::default(), p.options(), approvals, settings).unwrap()
}

#[test]
fn paused_items_suspend_after_the_allowed_ones_ran_and_resume_exactly() {
    let args = json!({ "ids": [1, 2, 3] });
    let p = Probe::default();
    let plain = gated(&p, Approvals::default(), RunSettings::default());
    let program = Runner::compile_agent(AGENT, &plain.options).unwrap();
    let unpaused = rt()
        .block_on(plain.start(&program, &args))
        .finished()
        .unwrap();
    assert_eq!(
        ok(&unpaused.outcome),
        json!({ "first": 0, "rs": [10, { "id": 2 }, 30], "n": 20 })
    );
    assert_eq!(p.calls(), 3);

    // `echo` is paused; the two `slow` calls of the batch run, then the run suspends
    let p = Probe::default();
    let approvals = || {
        Approvals::default()
            .policy("echo", Policy::Pause)
            .suspend(true)
    };
    let first = gated(&p, approvals(), RunSettings::default());
    let s = rt()
        .block_on(first.start(&program, &args))
        .suspended()
        .unwrap();
    assert_eq!(p.calls(), 3, "the first call and the two allowed items ran");
    assert_eq!(s.pending.len(), 1);
    assert_eq!(s.pending[0].atom, "echo");
    assert_eq!(s.pending[0].input, json!({ "id": 2 }).into());

    // a new runner, as in another process
    let second = gated(&p, approvals(), RunSettings::default());
    let done = rt()
        .block_on(second.resume(
            &program,
            &s.snapshot,
            vec![Decision::approve(&s.pending[0])],
        ))
        .unwrap()
        .finished()
        .unwrap();
    assert_eq!(ok(&done.outcome), ok(&unpaused.outcome));
    assert_eq!(done.outcome.fuel_used, unpaused.outcome.fuel_used);
    assert_eq!(p.calls(), 3, "no call ran twice");

    // deny is a catchable failure of that item
    let p = Probe::default();
    let deny = gated(
        &p,
        Approvals::default().policy("echo", Policy::Deny),
        RunSettings::default(),
    );
    let program2 = Runner::compile_agent(
        "function main() { return { rs: parallel([slow({ n: 1, ms: 0 }), echo({})], { settled: true }) } }",
        &deny.options,
    )
    .unwrap();
    let r = rt()
        .block_on(deny.start(&program2, &json!({})))
        .finished()
        .unwrap();
    assert_eq!(
        ok(&r.outcome),
        json!({ "rs": [{ "ok": true, "value": 10 }, { "ok": false, "error": "Call to 'echo' denied by policy" }] })
    );
}

#[test]
fn a_parallel_run_replays_clean_and_a_changed_result_is_a_mismatch() {
    let args = json!({ "ids": [1, 2, 3] });
    let p = Probe::default();
    let g = gated(
        &p,
        Approvals::default(),
        RunSettings {
            journal: true,
            ..RunSettings::default()
        },
    );
    let program = Runner::compile_agent(AGENT, &g.options).unwrap();
    let r = rt().block_on(g.start(&program, &args)).finished().unwrap();
    let journal = r.journal.unwrap();
    assert_eq!(journal.entries.len(), 4);
    let ids: Vec<u32> = journal.entries.iter().map(|e| e.index).collect();
    assert_eq!(ids, vec![0, 1, 2, 3], "recorded in call order");
    // the atoms' declarations are needed; their implementations are never called
    let before = p.calls();
    let replayed = rt()
        .block_on(replay(
            &program,
            &args,
            &journal,
            &Runner::default(),
            &p.options(),
        ))
        .unwrap();
    assert_eq!(p.calls(), before, "a replay makes no call");
    assert_eq!(replayed.result, r.outcome.result);
    assert_eq!(replayed.fuel_used, r.outcome.fuel_used);

    let mut bad = journal.clone();
    bad.entries[2].result = Ok(JsValue::Number(99.0));
    match rt().block_on(replay(
        &program,
        &args,
        &bad,
        &Runner::default(),
        &p.options(),
    )) {
        Err(ReplayError::Mismatch(m)) => assert_eq!(m.index, 2),
        other => panic!("{other:?}"),
    }
}

/// Hand-written bytecode (an artifact may come from anyone): unbalanced batch instructions end
/// the run with an error, never a panic, and an endless `ParBegin` loop hits the nesting cap.
#[test]
fn malformed_batch_bytecode_is_an_error_not_a_panic() {
    use ajs_bytecode::isa::*;
    use ajs_bytecode::{Function, Program};
    use ajs_vm::{Step, Vm, VmOptions};
    let run = |code: &[Op], nregs: u16| {
        let (code, _) = insert_charges(code, &vec![(); code.len()]);
        let program = Program {
            functions: vec![Function {
                name: "f".into(),
                params: vec![],
                nregs,
                code,
            }],
            constants: vec![],
            atoms: vec![],
            entry: 0,
            debug: None,
            signature: None,
        }
        .verify()
        .unwrap();
        let mut vm = Vm::new(program, &[], VmOptions::default()).unwrap();
        vm.run(u64::MAX)
    };
    let end = Op::ParEnd {
        dst: Dst(0),
        settled: Imm(0),
    };
    match run(&[end, Op::Return { src: Src(0) }], 1) {
        Step::Failed(e) => assert!(e.message.contains("malformed program"), "{}", e.message),
        other => panic!("{other:?}"),
    }
    match run(
        &[Op::ParValue { src: Src(0) }, Op::Return { src: Src(0) }],
        1,
    ) {
        Step::Failed(e) => assert!(e.message.contains("malformed program"), "{}", e.message),
        other => panic!("{other:?}"),
    }
    // ParBegin forever
    match run(&[Op::ParBegin {}, Op::Jump { target: Target(0) }], 1) {
        Step::Failed(e) => assert!(e.message.contains("nested more than 64"), "{}", e.message),
        other => panic!("{other:?}"),
    }
    // a batch left open by a returning frame is dropped; a plain batch works
    let ok = [
        Op::LoadTrue { dst: Dst(1) },
        Op::ParBegin {},
        Op::ParValue { src: Src(1) },
        Op::ParValue { src: Src(1) },
        end,
        Op::ParBegin {},
        Op::Return { src: Src(0) },
    ];
    assert_eq!(
        run(&ok, 2),
        Step::Done(JsValue::Array(vec![
            JsValue::Bool(true),
            JsValue::Bool(true)
        ]))
    );
}

#[test]
fn a_traced_batch_records_its_end_once() {
    let p = Probe::default();
    let g = gated(
        &p,
        Approvals::default(),
        RunSettings {
            trace: true,
            ..RunSettings::default()
        },
    );
    let program = Runner::compile_agent(
        "function main() { return { rs: parallel([slow({ n: 1, ms: 0 }), slow({ n: 2, ms: 0 })]) } }",
        &g.options,
    )
    .unwrap();
    let r = rt()
        .block_on(g.start(&program, &json!({})))
        .finished()
        .unwrap();
    assert_eq!(ok(&r.outcome), json!({ "rs": [10, 20] }));
    let ops: Vec<&str> = r.trace.iter().map(|t| t.op).collect();
    assert_eq!(ops.iter().filter(|o| **o == "ParEnd").count(), 1, "{ops:?}");
    assert_eq!(
        ops.iter().filter(|o| **o == "ParCall").count(),
        2,
        "{ops:?}"
    );
    // fuel is monotone along the trace and ends at the run's fuel
    assert!(r
        .trace
        .windows(2)
        .all(|w| w[0].fuel_after <= w[1].fuel_before));
}
