//! `ajs run` (with approval policies, snapshots and a journal), `ajs resume` and `ajs replay`.
//!
//! A suspended run is written as an [`ajs::Bundle`]: the artifact, the approval policies, the
//! settings that continue (fuel, timeout, caps) and the snapshot, under one HMAC with
//! `--key-env` (a SHA-256 without). `resume` needs nothing else, in any process; the policies
//! and settings stay in force.

use std::process::ExitCode;

use ajs::{
    Approvals, Bundle, BundleError, BundleKey, BundleSettings, Decision, GatedRunner, Journal,
    Policy, RunResult, RunSettings, Runner,
};
use ajs_runner::cli::{fuel, json_value, read_capped, Input};
use ajs_runner::config::ServerConfig;
use ajs_runner::exit::{outcome_code, print_json, refusal_json, refuse, Usage, RUN_FAILED};
use ajs_runner::outcome_json;
use clap::{ArgGroup, Args};
use serde_json::{json, Value};

use crate::runtime;

const EXIT_CODES: &str = "Exit codes: 0 the run finished without error or is suspended, 1 the \
run failed, 2 bad usage, 3 input refused (a compile error, arguments refused by the signature, a \
snapshot or journal refused, a file over its cap).";

/// `run`'s arguments.
#[derive(Args)]
#[command(
    about = "Compile and run an agent, with approval policies, snapshots and a journal",
    long_about = "Compiles and runs an agent and prints its outcome as one JSON line (the body \
POST /run answers with). With a pause or collect policy the run stops before the gated call: the \
pending calls are printed as JSON ({\"status\": \"suspended\", \"pending\": […]}) and the run is \
saved to --snapshot-out (default run.snap). --journal-out records every host call.",
    after_help = EXIT_CODES
)]
pub struct RunArgs {
    /// The agent source file.
    #[arg(value_name = "AGENT.ajs")]
    file: String,
    /// The arguments: a JSON object keyed by parameter name.
    #[arg(long, value_name = "JSON", value_parser = json_value)]
    args: Option<Value>,
    /// Approval policies, atom=pause|deny|collect|allow, comma-separated (repeatable).
    #[arg(long, value_name = "atom=policy,…", action = clap::ArgAction::Append)]
    policy: Vec<String>,
    /// Where a suspended run is saved (default run.snap).
    #[arg(long, value_name = "FILE")]
    snapshot_out: Option<String>,
    /// Record every host call in this journal file.
    #[arg(long, value_name = "FILE")]
    journal_out: Option<String>,
    /// A serve configuration (fetch policy, model, quotas, limits).
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    /// The fuel budget (default: the configuration's `limits.defaultFuel`).
    #[arg(long, value_name = "N", value_parser = fuel, allow_negative_numbers = true)]
    fuel: Option<f64>,
    /// The wall-clock limit in milliseconds (default: `limits.defaultTimeoutMs`).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    timeout_ms: Option<u64>,
    /// The environment variable holding the key that signs snapshots.
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
    /// Include the guest's console lines in the outcome: "log": [{"level", "message"}].
    #[arg(long)]
    log: bool,
}

/// `resume`'s arguments.
#[derive(Args)]
#[command(
    about = "Continue a saved run, approving or denying its pending calls",
    long_about = "Continues a saved run in this process, approving or denying every pending call \
(or deciding each: --decisions '[{\"id\": 0, \"approve\": true}]'). Budgets continue where they \
were. With --nonce-dir every snapshot resumes once: its id is recorded in DIR (shared by every \
process that resumes runs), and a second resume of it is refused.",
    after_help = EXIT_CODES,
    group(ArgGroup::new("decision").required(true).args(["approve", "deny", "decisions"]))
)]
pub struct ResumeArgs {
    /// The saved run (`run --snapshot-out`).
    #[arg(value_name = "SNAPSHOT")]
    file: String,
    /// Approve every pending call.
    #[arg(long)]
    approve: bool,
    /// Deny every pending call.
    #[arg(long)]
    deny: bool,
    /// One decision per pending call: '[{"id": 0, "approve": true}]'.
    #[arg(long, value_name = "JSON")]
    decisions: Option<String>,
    /// A serve configuration (fetch policy, model, quotas, limits).
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    /// Where a run suspended again is saved (default run.snap).
    #[arg(long, value_name = "FILE")]
    snapshot_out: Option<String>,
    /// Record every host call in this journal file.
    #[arg(long, value_name = "FILE")]
    journal_out: Option<String>,
    /// The environment variable holding the key that signs snapshots.
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
    /// Resume every snapshot once: record its id in DIR and refuse a second resume.
    #[arg(long, value_name = "DIR")]
    nonce_dir: Option<String>,
    /// Include the guest's console lines in the outcome: "log": [{"level", "message"}].
    #[arg(long)]
    log: bool,
}

/// `replay`'s arguments.
#[derive(Args)]
#[command(
    about = "Re-run an agent offline against a journal",
    long_about = "Re-runs an agent offline against a journal: no capability is called; the \
first call that differs ends the run with {\"error\": {\"kind\": \"replayMismatch\", …}} (exit 1).",
    after_help = EXIT_CODES
)]
pub struct ReplayArgs {
    /// The agent source file.
    #[arg(value_name = "AGENT.ajs")]
    file: String,
    /// The journal (`run --journal-out`).
    #[arg(long, value_name = "FILE")]
    journal: String,
    /// The arguments: a JSON object keyed by parameter name.
    #[arg(long, value_name = "JSON", value_parser = json_value)]
    args: Option<Value>,
    /// A serve configuration (fetch policy, model, quotas, limits).
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    /// Include the guest's console lines in the outcome: "log": [{"level", "message"}].
    #[arg(long)]
    log: bool,
}

struct Common {
    config: ServerConfig,
    fuel: Option<f64>,
    timeout: Option<u64>,
    key: Option<BundleKey>,
    snapshot_out: Option<String>,
    journal_out: Option<String>,
    nonce_dir: Option<String>,
}

impl Common {
    fn new(config: Option<&String>, key_env: Option<&String>) -> Result<Common, Usage> {
        let config = match config {
            Some(path) => ServerConfig::load(path).map_err(Usage)?,
            None => ServerConfig::default(),
        };
        let key = match key_env {
            Some(var) => {
                let bytes = std::env::var(var).map_err(|_| {
                    Usage(format!(
                        "--key-env: the environment variable {var} is not set"
                    ))
                })?;
                Some(BundleKey::new(bytes).map_err(|e| Usage(format!("--key-env {var}: {e}")))?)
            }
            None => None,
        };
        Ok(Common {
            config,
            fuel: None,
            timeout: None,
            key,
            snapshot_out: None,
            journal_out: None,
            nonce_dir: None,
        })
    }
}

fn policies(text: &str) -> Result<Vec<(String, Policy)>, Usage> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (atom, policy) = p
                .split_once('=')
                .ok_or_else(|| Usage(format!("--policy takes atom=policy pairs, got '{p}'")))?;
            let policy: Policy = policy.trim().parse().map_err(Usage)?;
            Ok((atom.trim().to_string(), policy))
        })
        .collect()
}

/// A gated runner for `run` (settings from the flags and the configuration) or `resume` (the
/// settings the saved run was started with).
fn gated(
    c: &Common,
    policies: &[(String, Policy)],
    journal: bool,
    saved: Option<&BundleSettings>,
) -> Result<GatedRunner, Usage> {
    let mut options = c.config.command_options();
    if let Some(f) = c.fuel {
        options.fuel = f;
    }
    if let Some(t) = c.timeout {
        options.timeout_ms = t;
    }
    let mut settings = RunSettings {
        journal,
        ..RunSettings::default()
    };
    if let Some(saved) = saved {
        saved.apply(&mut options, &mut settings);
        // a journal is kept on resume only when asked for (the snapshot holds the run's)
        settings.journal = journal;
    }
    let mut approvals = Approvals::default().suspend(true);
    for (atom, p) in policies {
        approvals = approvals.policy(atom.clone(), *p);
    }
    if let Some(k) = &c.key {
        approvals = approvals.key(k.as_bytes());
    }
    if let Some(dir) = &c.nonce_dir {
        let store = ajs::FileNonceStore::new(dir)
            .map_err(|e| Usage(format!("--nonce-dir: cannot use {dir}: {e}")))?;
        approvals = approvals.nonce_store(std::sync::Arc::new(store));
    }
    GatedRunner::new(c.config.runner(0), options, approvals, settings)
        .map_err(|e| Usage(e.to_string()))
}

fn write(path: &str, bytes: &[u8]) -> Result<(), Usage> {
    std::fs::write(path, bytes).map_err(|e| Usage(format!("cannot write {path}: {e}")))
}

/// Reads a saved run or a journal: at most an artifact and four times the heap ceiling (what a
/// run's state or its recorded host calls can hold).
fn read_saved(path: &str, c: &Common) -> Result<Input, Usage> {
    let max =
        ajs::MAX_ARTIFACT_BYTES.saturating_add(c.config.limits.max_heap_bytes.saturating_mul(4));
    Input::from_read(read_capped(
        path,
        max,
        "MAX_ARTIFACT_BYTES + 4 x limits.maxHeapBytes; raise maxHeapBytes in the --config file",
    ))
}

/// Compiles an agent file: the program, or the exit code of its printed refusal.
fn compile(path: &str, c: &Common) -> Result<Result<ajs::VerifiedProgram, ExitCode>, Usage> {
    let bytes = match Input::from_read(read_capped(
        path,
        c.config.limits.max_source_bytes,
        "limits.maxSourceBytes; raise it in the --config file",
    ))? {
        Input::Read(b) => b,
        Input::Ended(code) => return Ok(Err(code)),
    };
    let Ok(source) = String::from_utf8(bytes) else {
        return Ok(Err(refuse("compileError", format!("{path} is not UTF-8"))));
    };
    Ok(
        match Runner::compile_agent_with_warnings(&source, &c.config.base_options()) {
            Ok((p, warnings)) => {
                for w in warnings {
                    eprintln!(
                        "{}",
                        w.to_string()
                            .replace(" at <source>:", &format!(" at {path}:"))
                    );
                    shown().push(w.message);
                }
                Ok(p)
            }
            Err(e) => Err(refuse("compileError", e.to_string())),
        },
    )
}

/// The compile-time warnings already printed: the run's own copies are left out of its
/// outcome (decision 39: a compile-time warning where the literal is visible, a run-time one
/// otherwise).
static SHOWN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn shown() -> std::sync::MutexGuard<'static, Vec<String>> {
    SHOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Prints how a gated run ended and saves what was asked; the exit code.
fn report(
    result: RunResult,
    program: &ajs::VerifiedProgram,
    runner: &GatedRunner,
    c: &Common,
    log: bool,
) -> Result<ExitCode, Usage> {
    match result {
        RunResult::Finished(r) => {
            if let (Some(path), Some(j)) = (&c.journal_out, &r.journal) {
                write(path, &j.to_bytes())?;
            } else if c.journal_out.is_some() {
                return Err(Usage("the run produced no journal".into()));
            }
            let mut outcome = r.outcome.clone();
            {
                let shown = shown();
                outcome.warnings.retain(|w| !shown.contains(w));
            }
            Ok(print_json(
                &outcome_json(&outcome, log),
                outcome_code(&outcome),
            ))
        }
        RunResult::Suspended(s) => {
            let path = c.snapshot_out.clone().unwrap_or_else(|| "run.snap".into());
            let bundle = Bundle::of(runner, program, s.snapshot);
            write(&path, &bundle.seal(c.key.as_ref()))?;
            let pending: Vec<Value> = s
                .pending
                .iter()
                .map(|p| json!({ "id": p.id, "atom": p.atom, "input": p.input.to_json(), "inputHash": p.input_hash }))
                .collect();
            Ok(print_json(
                &json!({ "status": "suspended", "snapshot": path, "pending": pending }),
                0,
            ))
        }
    }
}

/// `ajs run`.
pub fn cmd_run(a: &RunArgs) -> Result<ExitCode, Usage> {
    let mut c = Common::new(a.config.as_ref(), a.key_env.as_ref())?;
    c.fuel = a.fuel;
    c.timeout = a.timeout_ms;
    c.snapshot_out = a.snapshot_out.clone();
    c.journal_out = a.journal_out.clone();
    let policy_text = a.policy.join(",");
    let pol = policies(&policy_text)?;
    let run_args = a.args.clone().unwrap_or_else(|| json!({}));
    let program = match compile(&a.file, &c)? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let runner = gated(&c, &pol, c.journal_out.is_some(), None)?;
    let result = runtime()?.block_on(runner.start(&program, &run_args));
    report(result, &program, &runner, &c, a.log)
}

/// Why a saved run was refused, saying which flag to change.
fn bundle_refusal(e: &BundleError) -> String {
    match e {
        BundleError::KeyRequired => format!("{e} (--key-env VAR)"),
        BundleError::NotKeyed => format!("{e} (resume without --key-env)"),
        _ => e.to_string(),
    }
}

/// `ajs resume`.
pub fn cmd_resume(a: &ResumeArgs) -> Result<ExitCode, Usage> {
    let mut c = Common::new(a.config.as_ref(), a.key_env.as_ref())?;
    c.snapshot_out = a.snapshot_out.clone();
    c.journal_out = a.journal_out.clone();
    c.nonce_dir = a.nonce_dir.clone();
    let explicit: Option<Vec<Value>> = match &a.decisions {
        Some(v) => Some(
            serde_json::from_str(v)
                .map_err(|e| Usage(format!("--decisions is not valid JSON: {e}")))?,
        ),
        None => None,
    };
    let file = &a.file;
    let bundle = match read_saved(file, &c)? {
        Input::Read(b) => b,
        Input::Ended(code) => return Ok(code),
    };
    let refused = |m: &str| Ok(refuse("snapshotRefused", format!("{file}: {m}")));
    let saved = match Bundle::open(&bundle, c.key.as_ref()) {
        Ok(b) => b,
        Err(e) => return refused(&bundle_refusal(&e)),
    };
    let snapshot = &saved.snapshot[..];
    let program = match ajs::load_artifact(&saved.artifact, None) {
        Ok(p) => p,
        Err(e) => return refused(&format!("artifact refused: {e}")),
    };
    let runner = gated(
        &c,
        &saved.policies,
        c.journal_out.is_some(),
        Some(&saved.settings),
    )?;
    // the pending calls come from the snapshot itself
    let calls = match runner.pending(&program, snapshot) {
        Ok(c) => c,
        Err(e) => return refused(&format!("snapshot refused: {e}")),
    };
    let mut decisions = Vec::new();
    for call in &calls {
        let approve = match &explicit {
            None => a.approve,
            Some(list) => list
                .iter()
                .find(|d| d["id"].as_u64() == Some(call.id as u64))
                .and_then(|d| d["approve"].as_bool())
                .ok_or_else(|| {
                    Usage(format!(
                        "--decisions has no decision for pending call {}",
                        call.id
                    ))
                })?,
        };
        decisions.push(if approve {
            Decision::approve(call)
        } else {
            Decision::deny(call)
        });
    }
    let result = runtime()?.block_on(runner.resume(&program, snapshot, decisions));
    match result {
        Ok(r) => report(r, &program, &runner, &c, a.log),
        Err(ajs::ResumeError::Decision(m)) => Err(Usage(m)),
        Err(e) => refused(&e.to_string()),
    }
}

/// `ajs replay`.
pub fn cmd_replay(a: &ReplayArgs) -> Result<ExitCode, Usage> {
    let c = Common::new(a.config.as_ref(), None)?;
    let run_args = a.args.clone().unwrap_or_else(|| json!({}));
    let path = &a.journal;
    let bytes = match read_saved(path, &c)? {
        Input::Read(b) => b,
        Input::Ended(code) => return Ok(code),
    };
    let Some(journal) = Journal::from_bytes(&bytes) else {
        return Ok(refuse("journalRefused", format!("{path}: not a journal")));
    };
    let program = match compile(&a.file, &c)? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let options = c.config.base_options();
    match runtime()?.block_on(ajs::replay(
        &program,
        &run_args,
        &journal,
        &c.config.runner(0),
        &options,
    )) {
        Ok(out) => Ok(print_json(&outcome_json(&out, a.log), outcome_code(&out))),
        Err(ajs::ReplayError::Journal(m)) => Ok(refuse("journalRefused", format!("{path}: {m}"))),
        Err(e @ ajs::ReplayError::Mismatch(_)) => Ok(print_json(
            &refusal_json("replayMismatch", e.to_string()),
            RUN_FAILED,
        )),
    }
}
