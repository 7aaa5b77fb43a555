//! The replay journal, tracing and caps (issue 7).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ajs::{
    replay, Approvals, Capabilities, Decision, ErrorKind, GatedRunner, Journal, JsValue, Options,
    Policy, ReplayError, RunSettings, Runner,
};
use serde_json::json;

const AGENT: &str = "function main({ topic: 'x' }) {\n  let a = llmPredict({ prompt: 'outline ' + topic })\n  let b = llmPredict({ prompt: 'write ' + a })\n  let r = Math.random()\n  let t = Date.now()\n  console.log('r', r, t)\n  return { a, b, r, t }\n}";

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

fn runner(settings: RunSettings, approvals: Approvals) -> GatedRunner {
    GatedRunner::new(
        Runner::default(),
        options(Arc::new(AtomicUsize::new(0))),
        approvals,
        settings,
    )
    .unwrap()
}

fn journaled() -> (ajs::VerifiedProgram, ajs::Outcome, Journal) {
    let g = runner(
        RunSettings {
            journal: true,
            ..RunSettings::default()
        },
        Approvals::default(),
    );
    let p = Runner::compile_agent(AGENT, &g.options).unwrap();
    let r = rt()
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .finished()
        .unwrap();
    assert!(r.outcome.error.is_none(), "{:?}", r.outcome.error);
    let j = r.journal.unwrap();
    assert_eq!(j.entries.len(), 2);
    assert_eq!(j.clock.len(), 1, "the clock reading is journaled");
    (p, r.outcome, j)
}

#[test]
fn a_journal_replays_clean_offline_and_survives_bytes() {
    let (p, out, j) = journaled();
    let j = Journal::from_bytes(&j.to_bytes()).unwrap();
    assert_eq!(j.verify(), Ok(()));
    // no capability at all
    let replayed = rt()
        .block_on(replay(
            &p,
            &json!({ "topic": "t" }),
            &j,
            &Runner::default(),
            &Options::default(),
        ))
        .unwrap();
    assert_eq!(replayed.result, out.result, "same randomness and time");
    assert_eq!(replayed.fuel_used, out.fuel_used);
}

#[test]
fn a_changed_result_ends_in_replay_mismatch_naming_the_call() {
    let (p, _, j) = journaled();
    let replay_with = |j: &Journal| {
        rt().block_on(replay(
            &p,
            &json!({ "topic": "t" }),
            j,
            &Runner::default(),
            &Options::default(),
        ))
    };
    // edited in place: the chain names the altered call
    let mut bad = j.clone();
    bad.entries[1].result = Ok(JsValue::String("forged".into()));
    match replay_with(&bad).unwrap_err() {
        ReplayError::Mismatch(m) => {
            assert_eq!((m.index, m.atom.as_str()), (1, "llmPredict"));
            assert!(m
                .to_string()
                .starts_with("ReplayMismatch at call #1 ('llmPredict')"));
        }
        other => panic!("{other:?}"),
    }
    // edited and resealed: the run diverges at the next call, whose input now differs
    let mut bad = j.clone();
    bad.entries[0].result = Ok(JsValue::String("forged".into()));
    bad.reseal();
    match replay_with(&bad).unwrap_err() {
        ReplayError::Mismatch(m) => {
            assert_eq!(m.index, 1);
            assert!(m.detail.contains("input"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    // other arguments
    assert!(matches!(
        rt().block_on(replay(
            &p,
            &json!({ "topic": "u" }),
            &j,
            &Runner::default(),
            &Options::default()
        )),
        Err(ReplayError::Journal(_))
    ));
}

#[test]
fn a_journal_continues_through_a_suspension() {
    let g = runner(
        RunSettings {
            journal: true,
            ..RunSettings::default()
        },
        Approvals::default()
            .policy("llmPredict", Policy::Pause)
            .suspend(true),
    );
    let p = Runner::compile_agent(AGENT, &g.options).unwrap();
    let rt = rt();
    let mut s = rt
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .suspended()
        .unwrap();
    let report = loop {
        let ds = s.pending.iter().map(Decision::approve).collect();
        match rt.block_on(g.resume(&p, &s.snapshot, ds)).unwrap() {
            ajs::RunResult::Suspended(next) => s = next,
            ajs::RunResult::Finished(r) => break r,
        }
    };
    let j = report.journal.unwrap();
    assert_eq!(j.entries.len(), 2);
    let replayed = rt
        .block_on(replay(
            &p,
            &json!({ "topic": "t" }),
            &j,
            &Runner::default(),
            &Options::default(),
        ))
        .unwrap();
    assert_eq!(replayed.result, report.outcome.result);
}

/// A runner that traces every step, with no approvals.
fn traced() -> GatedRunner {
    runner(
        RunSettings {
            trace: true,
            ..RunSettings::default()
        },
        Approvals::default(),
    )
}

#[test]
fn trace_returns_every_step() {
    let g = traced();
    let p = Runner::compile_agent(AGENT, &g.options).unwrap();
    let r = rt()
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .finished()
        .unwrap();
    assert!(r.trace.len() > 10);
    assert!(r.trace.iter().any(|s| s.op == "CallAtom"));
    assert!(r.trace.iter().all(|s| s.fuel_after >= s.fuel_before));
    assert!(r.trace.iter().any(|s| s.pos.is_some()));
    let last = r.trace.last().unwrap();
    assert_eq!(
        last.fuel_after as f64 / 1000.0,
        r.outcome.fuel_used,
        "the trace accounts for all fuel"
    );
}

/// A helper call is one step of the trace, also the first call at each new depth (where the
/// VM grows its call stack before making it).
#[test]
fn trace_records_each_call_once() {
    let g = traced();
    let p = Runner::compile_agent(
        "function f(n) { if (n < 1) { return 0 } return f(n - 1) + 1 }\nfunction main() { return { v: f(40) } }",
        &g.options,
    )
    .unwrap();
    let r = rt().block_on(g.start(&p, &json!({}))).finished().unwrap();
    assert_eq!(r.outcome.result.to_json(), Some(json!({ "v": 40 })));
    let calls = r.trace.iter().filter(|s| s.op == "Call").count();
    let returns = r.trace.iter().filter(|s| s.op == "Return").count();
    assert_eq!(
        (calls, returns),
        (41, 42),
        "one step per call and per return"
    );
}

#[test]
fn caps_on_calls_output_and_log_lines() {
    let rt = rt();
    let g = runner(
        RunSettings {
            max_calls: Some(1),
            ..RunSettings::default()
        },
        Approvals::default(),
    );
    let p = Runner::compile_agent(AGENT, &g.options).unwrap();
    let out = rt
        .block_on(g.start(&p, &json!({ "topic": "t" })))
        .finished()
        .unwrap()
        .outcome;
    let e = out.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Quota);
    assert_eq!(
        e.message,
        "Host call limit exceeded: 1 call allowed (maxCalls)"
    );

    let g = runner(
        RunSettings {
            max_output_bytes: Some(1000),
            ..RunSettings::default()
        },
        Approvals::default(),
    );
    let src = "function main({ n: 1 }) {\n  return { s: 'x'.repeat(2000) }\n}";
    let p = Runner::compile_agent(src, &g.options).unwrap();
    let out = rt
        .block_on(g.start(&p, &json!({})))
        .finished()
        .unwrap()
        .outcome;
    assert_eq!(
        out.error.unwrap().message,
        "Output is 2008 bytes, over the 1000-byte limit (maxOutputBytes)"
    );

    let g = runner(
        RunSettings {
            max_log_lines: Some(50),
            ..RunSettings::default()
        },
        Approvals::default(),
    );
    let src = "function main({ n: 1 }) {\n  let i = 0\n  while (i < 500) { console.log(i)\n i = i + 1 }\n  return {}\n}";
    let p = Runner::compile_agent(src, &g.options).unwrap();
    let r = rt.block_on(g.start(&p, &json!({}))).finished().unwrap();
    assert_eq!((r.outcome.log.len(), r.log_dropped), (50, 450));
}
