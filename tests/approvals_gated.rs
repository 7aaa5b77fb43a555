//! Approval policies, suspension and resumption through the facade (issue 7): a paused run is
//! data, resumed in a fresh runner from bytes; budgets continue; tampered, foreign and used
//! snapshots are refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ajs::{
    Approvals, Capabilities, ConfigError, Decision, ErrorKind, GatedRunner, JsValue,
    MemoryNonceStore, Options, Policy, ResumeError, RunResult, RunSettings, Runner, SnapshotError,
    Verdict, VerifiedProgram,
};
use serde_json::json;

const AGENT: &str = "function main({ topic: 'x' }) {\n  let a = llmPredict({ prompt: 'outline ' + topic })\n  console.log('first done')\n  let b = llmPredict({ prompt: 'write ' + a })\n  let n = 0\n  while (n < 50) { n = n + 1 }\n  return { a, b, n }\n}";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn options(calls: Arc<AtomicUsize>) -> Options {
    Options {
        capabilities: Capabilities::default().with_llm(move |p: String, _o: JsValue| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(JsValue::String(p.to_uppercase()))
            }
        }),
        ..Options::default()
    }
}

fn program(src: &str, o: &Options) -> VerifiedProgram {
    Runner::compile_agent(src, o).unwrap()
}

/// A gated runner where llmPredict's `pause` applies from the second call on is modelled by
/// pausing every call and approving the first one in-process via a result decision.
fn gated(calls: Arc<AtomicUsize>, approvals: Approvals) -> GatedRunner {
    GatedRunner::new(
        Runner::default(),
        options(calls),
        approvals,
        RunSettings::default(),
    )
    .unwrap()
}

#[test]
fn pause_resume_in_a_fresh_runner_matches_the_unpaused_run() {
    let rt = rt();
    // unpaused
    let calls = Arc::new(AtomicUsize::new(0));
    let plain = gated(calls.clone(), Approvals::default());
    let p = program(AGENT, &plain.options);
    let r = rt.block_on(plain.start(&p, &json!({ "topic": "cats" })));
    let plain_report = r.finished().unwrap();
    assert!(plain_report.outcome.error.is_none());
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // paused at every llmPredict; the first is approved, the run pauses again at the second
    let calls = Arc::new(AtomicUsize::new(0));
    let approvals = || {
        Approvals::default()
            .policy("llmPredict", Policy::Pause)
            .suspend(true)
            .key(b"k".to_vec())
    };
    let first = gated(calls.clone(), approvals());
    let s = rt
        .block_on(first.start(&p, &json!({ "topic": "cats" })))
        .suspended()
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0, "paused before the call");
    assert_eq!(s.pending.len(), 1);
    assert_eq!(s.pending[0].atom, "llmPredict");
    let bytes = s.snapshot.clone();
    drop(first);
    // "another process": a fresh runner and a freshly compiled program
    let second = gated(calls.clone(), approvals());
    let p2 = program(AGENT, &second.options);
    let s2 = rt
        .block_on(second.resume(&p2, &bytes, vec![Decision::approve(&s.pending[0])]))
        .unwrap()
        .suspended()
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        s2.pending[0].input,
        json!({ "prompt": "write OUTLINE CATS" }).into()
    );
    let third = gated(calls.clone(), approvals());
    let done = rt
        .block_on(third.resume(&p2, &s2.snapshot, vec![Decision::approve(&s2.pending[0])]))
        .unwrap()
        .finished()
        .unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "each call made once in total"
    );
    assert_eq!(done.outcome.result, plain_report.outcome.result);
    assert_eq!(done.outcome.fuel_used, plain_report.outcome.fuel_used);
    assert_eq!(done.outcome.log.len(), 1, "nothing ran twice");
}

#[test]
fn a_result_decision_answers_without_running_and_deny_is_catchable() {
    let rt = rt();
    let calls = Arc::new(AtomicUsize::new(0));
    let g = gated(
        calls.clone(),
        Approvals::default()
            .policy("llmPredict", Policy::Pause)
            .suspend(true),
    );
    let p = program(AGENT, &g.options);
    let s = rt
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .suspended()
        .unwrap();
    let s = rt
        .block_on(g.resume(
            &p,
            &s.snapshot,
            vec![Decision::result(
                &s.pending[0],
                JsValue::String("given".into()),
            )],
        ))
        .unwrap()
        .suspended()
        .unwrap();
    assert_eq!(
        s.pending[0].input,
        json!({ "prompt": "write given" }).into()
    );
    let out = rt
        .block_on(g.resume(&p, &s.snapshot, vec![Decision::deny(&s.pending[0])]))
        .unwrap()
        .finished()
        .unwrap()
        .outcome;
    assert_eq!(
        out.error.unwrap().message,
        "Call to 'llmPredict' denied by policy"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // deny: the call never runs; a guest try catches it
    let g = gated(
        calls.clone(),
        Approvals::default().policy("llmPredict", Policy::Deny),
    );
    let src = "function main({ q: 'x' }) {\n  try { llmPredict({ prompt: q }) } catch (e) { return { e } }\n  return { e: null }\n}";
    let p = program(src, &g.options);
    let out = rt
        .block_on(g.start(&p, &json!({})))
        .finished()
        .unwrap()
        .outcome;
    assert_eq!(
        out.result.to_json().unwrap(),
        json!({ "e": "Call to 'llmPredict' denied by policy" })
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[test]
fn an_approval_handler_decides_in_process() {
    let rt = rt();
    let calls = Arc::new(AtomicUsize::new(0));
    let g = gated(
        calls.clone(),
        Approvals::default()
            .policy("llmPredict", Policy::Pause)
            .handler(|c: ajs::PendingCall| async move {
                if c.input == json!({ "prompt": "outline t" }).into() {
                    Verdict::Approve
                } else {
                    Verdict::Result(JsValue::String("by hand".into()))
                }
            }),
    );
    let p = program(AGENT, &g.options);
    let out = rt
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .finished()
        .unwrap()
        .outcome;
    assert_eq!(
        out.result.to_json().unwrap(),
        json!({ "a": "OUTLINE T", "b": "by hand", "n": 50 })
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_gated_atom_with_no_way_to_decide_is_refused_when_built() {
    for policy in [Policy::Pause, Policy::Collect] {
        let e = GatedRunner::new(
            Runner::default(),
            Options::default(),
            Approvals::default().policy("sendEmail", policy),
            RunSettings::default(),
        )
        .unwrap_err();
        assert!(matches!(&e, ConfigError::Undecidable { atom, .. } if atom == "sendEmail"));
        assert!(e.to_string().contains("'sendEmail'"), "{e}");
    }
    assert!(GatedRunner::new(
        Runner::default(),
        Options::default(),
        Approvals::default().policy("sendEmail", Policy::Deny),
        RunSettings::default(),
    )
    .is_ok());
}

#[test]
fn collect_defers_until_the_value_is_needed() {
    let rt = rt();
    let calls = Arc::new(AtomicUsize::new(0));
    let src2 = "function main({ topic: 'x' }) {\n  let a = llmPredict({ prompt: 'one ' + topic })\n  let b = llmPredict({ prompt: 'two ' + topic })\n  console.log('both issued')\n  return { s: a + '|' + b }\n}";
    let g = gated(
        calls.clone(),
        Approvals::default()
            .policy("llmPredict", Policy::Collect)
            .suspend(true),
    );
    let p = program(src2, &g.options);
    let s = rt
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .suspended()
        .unwrap();
    assert_eq!(s.pending.len(), 2, "both collected before the use");
    assert!(s.pending.iter().all(|c| c.deferred));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let ds = s.pending.iter().map(Decision::approve).collect();
    let out = rt
        .block_on(g.resume(&p, &s.snapshot, ds))
        .unwrap()
        .finished()
        .unwrap()
        .outcome;
    assert_eq!(out.result.to_json().unwrap(), json!({ "s": "ONE T|TWO T" }));
    assert_eq!(out.log.len(), 1, "ran once");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn tampered_foreign_used_and_mismatched_snapshots_are_refused() {
    let rt = rt();
    let calls = Arc::new(AtomicUsize::new(0));
    let store = Arc::new(MemoryNonceStore::new());
    let g = gated(
        calls.clone(),
        Approvals::default()
            .policy("llmPredict", Policy::Pause)
            .suspend(true)
            .nonce_store(store),
    );
    let p = program(AGENT, &g.options);
    let s = rt
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .suspended()
        .unwrap();
    let ok = vec![Decision::approve(&s.pending[0])];
    // one byte edited
    let mut bad = s.snapshot.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    assert_eq!(
        rt.block_on(g.resume(&p, &bad, ok.clone())).unwrap_err(),
        ResumeError::Snapshot(SnapshotError::Integrity)
    );
    // another program
    let other = program(&AGENT.replace("50", "51"), &g.options);
    assert_eq!(
        rt.block_on(g.resume(&other, &s.snapshot, ok.clone()))
            .unwrap_err(),
        ResumeError::Snapshot(SnapshotError::ForeignProgram)
    );
    // a decision for another input
    let mut wrong = ok.clone();
    wrong[0].input_hash = "00".into();
    assert!(matches!(
        rt.block_on(g.resume(&p, &s.snapshot, wrong)).unwrap_err(),
        ResumeError::Decision(_)
    ));
    // no decision
    assert!(matches!(
        rt.block_on(g.resume(&p, &s.snapshot, vec![])).unwrap_err(),
        ResumeError::Decision(_)
    ));
    assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing ran");
    // first resume works, the second is refused
    assert!(matches!(
        rt.block_on(g.resume(&p, &s.snapshot, ok.clone())).unwrap(),
        RunResult::Suspended(_)
    ));
    assert_eq!(
        rt.block_on(g.resume(&p, &s.snapshot, ok)).unwrap_err(),
        ResumeError::Snapshot(SnapshotError::AlreadyUsed)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn budgets_continue_across_a_suspension() {
    let rt = rt();
    let calls = Arc::new(AtomicUsize::new(0));
    // fuel: enough for the first call and not for the second (100 fuel each)
    let mut g = gated(
        calls.clone(),
        Approvals::default()
            .policy("llmPredict", Policy::Pause)
            .suspend(true),
    );
    g.options.fuel = 150.0;
    let p = program(AGENT, &g.options);
    let s = rt
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .suspended()
        .unwrap();
    // resuming under a runner with a bigger budget does not give the run more fuel
    let mut rich = g.clone();
    rich.options.fuel = 100_000.0;
    let out = rt
        .block_on(rich.resume(&p, &s.snapshot, vec![Decision::approve(&s.pending[0])]))
        .unwrap()
        .finished()
        .unwrap()
        .outcome;
    assert_eq!(out.error.unwrap().kind, ErrorKind::OutOfFuel);

    // time: a run that already spent its time cannot continue
    let mut g = gated(
        calls.clone(),
        Approvals::default()
            .policy("llmPredict", Policy::Pause)
            .suspend(true),
    );
    g.options.timeout_ms = 50;
    let slow = "function main({ n: 1 }) {\n  let i = 0\n  let t = Date.now()\n  while (Date.now() - t < 80) { i = i + 1 }\n  let a = llmPredict({ prompt: 'p' })\n  return { a }\n}";
    g.options.fuel = 1e9;
    g.options.timeout_ms = 10_000;
    let p = program(slow, &g.options);
    let s = rt.block_on(g.start(&p, &json!({}))).suspended().unwrap();
    g.options.timeout_ms = 60;
    let out = rt
        .block_on(g.resume(&p, &s.snapshot, vec![Decision::approve(&s.pending[0])]))
        .unwrap()
        .finished()
        .unwrap()
        .outcome;
    assert_eq!(out.error.unwrap().kind, ErrorKind::Timeout);
}

#[test]
fn quotas_continue_across_a_suspension() {
    let rt = rt();
    let calls = Arc::new(AtomicUsize::new(0));
    let g = GatedRunner::new(
        Runner {
            quotas: [("llmPredict".to_string(), 1)].into(),
            ..Runner::default()
        },
        options(calls.clone()),
        Approvals::default()
            .policy("llmPredict", Policy::Pause)
            .suspend(true),
        RunSettings::default(),
    )
    .unwrap();
    let p = program(AGENT, &g.options);
    let s = rt
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .suspended()
        .unwrap();
    let out = rt
        .block_on(g.resume(&p, &s.snapshot, vec![Decision::approve(&s.pending[0])]))
        .unwrap()
        .finished()
        .unwrap()
        .outcome;
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Quota);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
