//! `ajs run` (with approval policies, snapshots and a journal), `ajs resume` and `ajs replay`.
//!
//! A suspended run is written as a *bundle*: magic `AJSR`, the artifact's length (u32 LE), the
//! artifact, the approval policies' length (u32 LE) and text (`atom=policy,…`), then the
//! snapshot. `resume` needs nothing else, in any process; the policies stay in force.

use std::process::ExitCode;

use ajs::{Approvals, Decision, GatedRunner, Journal, Policy, RunResult, RunSettings, Runner};
use ajs_runner::config::ServerConfig;
use serde_json::{json, Value};

use crate::{parse_args, parse_num, runtime, Usage};

const BUNDLE_MAGIC: &[u8; 4] = b"AJSR";

/// Usage text of the three commands.
pub const USAGE: &str = "\
  ajs run AGENT.ajs [--args JSON] [--policy atom=pause|deny|collect|allow,…] [--snapshot-out FILE]
          [--journal-out FILE] [--config FILE] [--fuel N] [--timeout-ms N] [--key-env VAR]
      Compiles and runs an agent. With a pause or collect policy the run stops before the gated
      call: the pending calls are printed as JSON ({\"status\": \"suspended\", \"pending\": […]}) and
      the run is saved to --snapshot-out (default run.snap). --journal-out records every host call.
  ajs resume SNAPSHOT (--approve | --deny | --decisions JSON) [--config FILE] [--snapshot-out FILE]
          [--journal-out FILE] [--key-env VAR] [--nonce-dir DIR]
      Continues a saved run in this process, approving or denying every pending call (or deciding
      each: --decisions '[{\"id\": 0, \"approve\": true}]'). Budgets continue where they were.
      With --nonce-dir every snapshot resumes once: its id is recorded in DIR (shared by every
      process that resumes runs), and a second resume of it is refused.
  ajs replay AGENT.ajs --journal FILE [--args JSON] [--config FILE]
      Re-runs an agent offline against a journal: no capability is called; the first call that
      differs ends the run with ReplayMismatch (exit 1).
";

struct Common {
    config: ServerConfig,
    fuel: Option<f64>,
    timeout: Option<u64>,
    key: Option<Vec<u8>>,
    snapshot_out: Option<String>,
    journal_out: Option<String>,
    nonce_dir: Option<String>,
}

fn common(options: &[(String, String)]) -> Result<Common, Usage> {
    let mut c = Common {
        config: ServerConfig::default(),
        fuel: None,
        timeout: None,
        key: None,
        snapshot_out: None,
        journal_out: None,
        nonce_dir: None,
    };
    for (name, value) in options {
        match name.as_str() {
            "--config" => c.config = ServerConfig::load(value).map_err(Usage)?,
            "--fuel" => c.fuel = Some(parse_num(name, value)?),
            "--timeout-ms" => c.timeout = Some(parse_num(name, value)?),
            "--key-env" => {
                let k = std::env::var(value).map_err(|_| {
                    Usage(format!(
                        "--key-env: the environment variable {value} is not set"
                    ))
                })?;
                c.key = Some(k.into_bytes());
            }
            "--snapshot-out" => c.snapshot_out = Some(value.clone()),
            "--journal-out" => c.journal_out = Some(value.clone()),
            "--nonce-dir" => c.nonce_dir = Some(value.clone()),
            _ => {}
        }
    }
    Ok(c)
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

fn gated(c: &Common, policies: &[(String, Policy)], journal: bool) -> Result<GatedRunner, Usage> {
    let mut options = c.config.command_options();
    if let Some(f) = c.fuel {
        options.fuel = f;
    }
    if let Some(t) = c.timeout {
        options.timeout_ms = t;
    }
    let mut approvals = Approvals::default().suspend(true);
    for (atom, p) in policies {
        approvals = approvals.policy(atom.clone(), *p);
    }
    if let Some(k) = &c.key {
        approvals = approvals.key(k.clone());
    }
    if let Some(dir) = &c.nonce_dir {
        let store = ajs::FileNonceStore::new(dir)
            .map_err(|e| Usage(format!("--nonce-dir: cannot use {dir}: {e}")))?;
        approvals = approvals.nonce_store(std::sync::Arc::new(store));
    }
    let settings = RunSettings {
        journal,
        ..RunSettings::default()
    };
    GatedRunner::new(c.config.runner(0), options, approvals, settings)
        .map_err(|e| Usage(e.to_string()))
}

fn write(path: &str, bytes: &[u8]) -> Result<(), Usage> {
    std::fs::write(path, bytes).map_err(|e| Usage(format!("cannot write {path}: {e}")))
}

/// Reads a saved run or a journal: at most an artifact and four times the heap ceiling (what a
/// run's state or its recorded host calls can hold).
fn read_saved(path: &str, c: &Common) -> Result<Vec<u8>, Usage> {
    let max =
        ajs::MAX_ARTIFACT_BYTES.saturating_add(c.config.limits.max_heap_bytes.saturating_mul(4));
    ajs_runner::cli::read_capped(
        path,
        max,
        "MAX_ARTIFACT_BYTES + 4 x limits.maxHeapBytes; raise maxHeapBytes in the --config file",
    )
    .map_err(Usage)
}

fn compile(path: &str, c: &Common) -> Result<Option<ajs::VerifiedProgram>, Usage> {
    let bytes = ajs_runner::cli::read_capped(
        path,
        c.config.limits.max_source_bytes,
        "limits.maxSourceBytes; raise it in the --config file",
    )
    .map_err(Usage)?;
    let source = String::from_utf8(bytes).map_err(|_| Usage(format!("{path} is not UTF-8")))?;
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
            Ok(Some(p))
        }
        Err(e) => {
            println!(
                "{}",
                json!({ "fuelUsed": 0, "error": { "message": e.to_string() } })
            );
            Ok(None)
        }
    }
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
    policy_text: &str,
    c: &Common,
    journal_wanted: bool,
) -> Result<ExitCode, Usage> {
    match result {
        RunResult::Finished(r) => {
            if let (Some(path), Some(j)) = (&c.journal_out, &r.journal) {
                write(path, &j.to_bytes())?;
            } else if journal_wanted && c.journal_out.is_some() {
                return Err(Usage("the run produced no journal".into()));
            }
            let mut outcome = r.outcome.clone();
            let shown = shown();
            outcome.warnings.retain(|w| !shown.contains(w));
            println!("{}", outcome.to_json());
        }
        RunResult::Suspended(s) => {
            let path = c.snapshot_out.clone().unwrap_or_else(|| "run.snap".into());
            let artifact = program.to_bytes();
            let mut bundle = BUNDLE_MAGIC.to_vec();
            bundle.extend_from_slice(&(artifact.len() as u32).to_le_bytes());
            bundle.extend_from_slice(&artifact);
            bundle.extend_from_slice(&(policy_text.len() as u32).to_le_bytes());
            bundle.extend_from_slice(policy_text.as_bytes());
            bundle.extend_from_slice(&s.snapshot);
            write(&path, &bundle)?;
            let pending: Vec<Value> = s
                .pending
                .iter()
                .map(|p| json!({ "id": p.id, "atom": p.atom, "input": p.input.to_json(), "inputHash": p.input_hash }))
                .collect();
            println!(
                "{}",
                json!({ "status": "suspended", "snapshot": path, "pending": pending })
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ajs run`.
pub fn cmd_run(args: &[String]) -> Result<ExitCode, Usage> {
    let p = parse_args(
        args,
        &[
            "--args",
            "--policy",
            "--snapshot-out",
            "--journal-out",
            "--config",
            "--fuel",
            "--timeout-ms",
            "--key-env",
        ],
    )?;
    let [file] = p.positional.as_slice() else {
        return Err(Usage("run takes one AGENT file".into()));
    };
    let c = common(&p.options)?;
    let mut run_args = json!({});
    let mut policy_text = String::new();
    for (name, value) in &p.options {
        match name.as_str() {
            "--args" => {
                run_args = serde_json::from_str(value)
                    .map_err(|e| Usage(format!("--args is not valid JSON: {e}")))?
            }
            "--policy" => {
                if !policy_text.is_empty() {
                    policy_text.push(',');
                }
                policy_text.push_str(value);
            }
            _ => {}
        }
    }
    let pol = policies(&policy_text)?;
    let Some(program) = compile(file, &c)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let runner = gated(&c, &pol, c.journal_out.is_some())?;
    let result = runtime()?.block_on(runner.start(&program, &run_args));
    report(result, &program, &policy_text, &c, c.journal_out.is_some())
}

/// `ajs resume`.
pub fn cmd_resume(args: &[String]) -> Result<ExitCode, Usage> {
    let p = ajs_runner::cli::parse(
        args,
        &[
            "--decisions",
            "--snapshot-out",
            "--journal-out",
            "--config",
            "--key-env",
            "--nonce-dir",
        ],
        &["--approve", "--deny"],
    )
    .map_err(|e| Usage(e.0))?;
    let approve_all = p.flags.iter().any(|f| f == "--approve");
    let deny_all = p.flags.iter().any(|f| f == "--deny");
    let [file] = p.positional.as_slice() else {
        return Err(Usage("resume takes one SNAPSHOT file".into()));
    };
    let c = common(&p.options)?;
    let bundle = read_saved(file, &c)?;
    let refused = |m: &str| {
        eprintln!("ajs resume: {file}: {m}");
        Ok(ExitCode::from(1))
    };
    if bundle.len() < 8 || &bundle[..4] != BUNDLE_MAGIC {
        return refused("not a saved run (bad magic)");
    }
    let n = u32::from_le_bytes([bundle[4], bundle[5], bundle[6], bundle[7]]) as usize;
    let Some(artifact) = bundle.get(8..8 + n) else {
        return refused("truncated");
    };
    let Some(len) = bundle.get(8 + n..12 + n) else {
        return refused("truncated");
    };
    let m = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let Some(policy_bytes) = bundle.get(12 + n..12 + n + m) else {
        return refused("truncated");
    };
    let Ok(policy_text) = std::str::from_utf8(policy_bytes) else {
        return refused("bad policy text");
    };
    let policy_text = policy_text.to_string();
    let Ok(pol) = policies(&policy_text) else {
        return refused("bad policy text");
    };
    let snapshot = &bundle[12 + n + m..];
    let program = match ajs::Program::from_bytes(artifact) {
        Ok(p) => p,
        Err(e) => return refused(&format!("artifact refused: {e}")),
    };
    let runner = gated(&c, &pol, c.journal_out.is_some())?;
    // the pending calls come from the snapshot itself
    let calls = match runner.pending(&program, snapshot) {
        Ok(c) => c,
        Err(e) => return refused(&format!("snapshot refused: {e}")),
    };
    let explicit: Option<Vec<Value>> = match p.options.iter().find(|(n, _)| n == "--decisions") {
        Some((_, v)) => Some(
            serde_json::from_str(v)
                .map_err(|e| Usage(format!("--decisions is not valid JSON: {e}")))?,
        ),
        None => None,
    };
    if [approve_all, deny_all, explicit.is_some()]
        .iter()
        .filter(|b| **b)
        .count()
        != 1
    {
        return Err(Usage(
            "resume needs exactly one of --approve, --deny or --decisions".into(),
        ));
    }
    let mut decisions = Vec::new();
    for call in &calls {
        let approve = match &explicit {
            None => approve_all,
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
        Ok(r) => report(r, &program, &policy_text, &c, c.journal_out.is_some()),
        Err(e) => refused(&e.to_string()),
    }
}

/// `ajs replay`.
pub fn cmd_replay(args: &[String]) -> Result<ExitCode, Usage> {
    let p = parse_args(args, &["--args", "--journal", "--config"])?;
    let [file] = p.positional.as_slice() else {
        return Err(Usage("replay takes one AGENT file".into()));
    };
    let c = common(&p.options)?;
    let mut run_args = json!({});
    let mut journal_path = None;
    for (name, value) in &p.options {
        match name.as_str() {
            "--args" => {
                run_args = serde_json::from_str(value)
                    .map_err(|e| Usage(format!("--args is not valid JSON: {e}")))?
            }
            "--journal" => journal_path = Some(value.clone()),
            _ => {}
        }
    }
    let path = journal_path.ok_or_else(|| Usage("replay needs --journal FILE".into()))?;
    let bytes = read_saved(&path, &c)?;
    let Some(journal) = Journal::from_bytes(&bytes) else {
        eprintln!("ajs replay: {path}: not a journal");
        return Ok(ExitCode::from(1));
    };
    let Some(program) = compile(file, &c)? else {
        return Ok(ExitCode::from(1));
    };
    let options = c.config.base_options();
    match runtime()?.block_on(ajs::replay(
        &program,
        &run_args,
        &journal,
        &c.config.runner(0),
        &options,
    )) {
        Ok(out) => {
            println!("{}", out.to_json());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("{}", json!({ "error": { "message": e.to_string() } }));
            Ok(ExitCode::from(1))
        }
    }
}
