//! Approvals: a run pauses before a chosen atom, its state is a snapshot (bytes you may store
//! anywhere), and it resumes — here in a fresh runner, as another process would — once a person
//! decides. The journal of host calls then replays the run offline.
//! `cargo run -p ajs --example approvals`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ajs::{
    replay, Approvals, AtomDecl, Capabilities, Decision, GatedRunner, MemoryNonceStore, NonceStore,
    Options, Policy, RunSettings, Runner,
};
use serde_json::json;

const AGENT: &str = "function refund({ order: 'A1', amount: 10 }) {\n\
                       let sent = sendRefund({ order, amount })\n\
                       return { order, sent }\n\
                     }";

fn options(sent: Arc<AtomicUsize>) -> Options {
    let caps = Capabilities::default().host_fn_sync(
        AtomDecl::new("sendRefund"),
        move |_ctx, input: serde_json::Value| {
            sent.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ajs::HostError>(json!({ "ok": true, "amount": input["amount"] }))
        },
    );
    Options {
        capabilities: caps,
        ..Options::default()
    }
}

fn gated(sent: Arc<AtomicUsize>, nonces: Arc<dyn NonceStore>) -> GatedRunner {
    let approvals = Approvals::default()
        .policy("sendRefund", Policy::Pause)
        .suspend(true)
        // snapshots are sealed with this key: a tampered or foreign one is refused
        .key(b"a secret of this service".to_vec())
        // and used once: the store remembers spent snapshots (FileNonceStore across restarts)
        .nonce_store(nonces);
    let settings = RunSettings {
        journal: true,
        ..RunSettings::default()
    };
    GatedRunner::new(Runner::default(), options(sent), approvals, settings)
        .expect("pause with suspend is decidable")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let sent = Arc::new(AtomicUsize::new(0));
    let nonces: Arc<dyn NonceStore> = Arc::new(MemoryNonceStore::new());
    let args = json!({ "order": "B7", "amount": 25 });

    // 1. start: the run stops before `sendRefund`, nothing was sent
    let first = gated(sent.clone(), nonces.clone());
    let program = Runner::compile_agent(AGENT, &first.options).expect("the agent compiles");
    let stopped = first
        .start(&program, &args)
        .await
        .suspended()
        .expect("paused before sendRefund");
    let call = &stopped.pending[0];
    println!(
        "paused: {}({}) — snapshot of {} bytes",
        call.atom,
        call.input.display(),
        stopped.snapshot.len()
    );
    assert_eq!(sent.load(Ordering::SeqCst), 0);

    // 2. a person approves; a fresh runner (another process) resumes from the bytes
    let second = gated(sent.clone(), nonces.clone());
    let report = second
        .resume(&program, &stopped.snapshot, vec![Decision::approve(call)])
        .await
        .expect("the snapshot and the decision are accepted")
        .finished()
        .expect("the run finishes");
    let result = report
        .outcome
        .clone()
        .into_result()
        .expect("the run succeeds");
    println!("finished: {}", result.display());
    assert_eq!(sent.load(Ordering::SeqCst), 1, "sent exactly once");

    // the same snapshot cannot be resumed twice (its nonce is spent)
    let again = second
        .resume(&program, &stopped.snapshot, vec![Decision::approve(call)])
        .await;
    println!(
        "resumed twice: {}",
        again.err().map_or("accepted?!".into(), |e| e.to_string())
    );

    // 3. replay the journal offline: no capability is called, the result is the same
    let journal = report.journal.expect("journaling was on");
    let replayed = replay(
        &program,
        &args,
        &journal,
        &Runner::default(),
        &second.options,
    )
    .await
    .expect("the journal matches the program and arguments");
    assert_eq!(replayed.result, result);
    assert_eq!(sent.load(Ordering::SeqCst), 1, "replay sent nothing");
    println!("replayed {} host call(s) offline", journal.entries.len());
}
