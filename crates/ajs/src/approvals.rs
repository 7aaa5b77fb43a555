//! Approvals, snapshots and replay (issue 7).
//!
//! A [`GatedRunner`] puts a policy in front of chosen atoms: `allow`, `deny` (the call never
//! runs; the guest gets a catchable `Call to 'x' denied by policy`), `pause` (the run stops
//! before the call and returns it for a decision) and `collect` (the call is deferred; the run
//! goes on until it needs the result, then stops with every collected call pending). A stopped
//! run is data: [`Suspended::snapshot`] holds the whole VM state and its budgets, and
//! [`GatedRunner::resume`] continues it — in this process or another — exactly where it stopped.
//!
//! Every host call can be recorded in a [`Journal`], a hash chain starting from the program's
//! fingerprint and the arguments; [`replay`] re-runs the program offline against it.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ajs_bytecode::VerifiedProgram;
use ajs_vm::{
    hex, program_fingerprint, value_hash, ErrorKind, HostCall, JsValue, RunError, SnapshotError,
    TraceStep, Vm, MAX_BOUNDARY_DEPTH,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::driver::{self, Control, DriveEnd, RunEnv};
use crate::{json_kind, Options, Outcome, Runner};

/// What happens when the guest calls an atom.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// The call runs (the default).
    #[default]
    Allow,
    /// The call never runs; the guest gets a catchable `Call to 'x' denied by policy`.
    Deny,
    /// The run stops before the call and returns it for a decision.
    Pause,
    /// The call is deferred; the run stops when it needs the result, with every collected call
    /// pending.
    Collect,
}

impl Policy {
    /// The policy's name, as [`str::parse`] reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Allow => "allow",
            Policy::Deny => "deny",
            Policy::Pause => "pause",
            Policy::Collect => "collect",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "allow" => Ok(Policy::Allow),
            "deny" => Ok(Policy::Deny),
            "pause" => Ok(Policy::Pause),
            "collect" => Ok(Policy::Collect),
            other => Err(format!(
                "unknown policy '{other}' (allow, deny, pause or collect)"
            )),
        }
    }
}

/// A host call waiting for a decision.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingCall {
    /// The call's number in the run (0 for the first host call).
    pub id: u32,
    /// The atom.
    pub atom: String,
    /// Its input, as the guest gave it.
    pub input: JsValue,
    /// SHA-256 of the input (hex); a decision must repeat it.
    pub input_hash: String,
    /// Collected (deferred) rather than paused.
    pub deferred: bool,
}

/// What the host decides about one call.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Run the call (exactly the one shown).
    Approve,
    /// Do not run it; the guest gets `Call to 'x' denied by policy`.
    Deny,
    /// Do not run it; the guest receives this value as its result.
    Result(JsValue),
}

/// A decision about a pending call, bound to the call's id and input hash.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// [`PendingCall::id`].
    pub id: u32,
    /// [`PendingCall::input_hash`].
    pub input_hash: String,
    /// The verdict.
    pub verdict: Verdict,
}

impl Decision {
    /// Approves `call`.
    pub fn approve(call: &PendingCall) -> Decision {
        Decision {
            id: call.id,
            input_hash: call.input_hash.clone(),
            verdict: Verdict::Approve,
        }
    }
    /// Denies `call`.
    pub fn deny(call: &PendingCall) -> Decision {
        Decision {
            id: call.id,
            input_hash: call.input_hash.clone(),
            verdict: Verdict::Deny,
        }
    }
    /// Answers `call` with `value` without running it.
    pub fn result(call: &PendingCall, value: JsValue) -> Decision {
        Decision {
            id: call.id,
            input_hash: call.input_hash.clone(),
            verdict: Verdict::Result(value),
        }
    }
}

/// An in-process approval callback: asked for every gated call, the run waits for its verdict.
pub type ApprovalHandler =
    Arc<dyn Fn(PendingCall) -> Pin<Box<dyn Future<Output = Verdict> + Send>> + Send + Sync>;

/// Makes snapshots single-use: `consume` answers `true` the first time it sees an id.
pub trait NonceStore: Send + Sync {
    /// Marks `id` used; `false` if it already was.
    fn consume(&self, id: &str) -> bool;
}

/// A [`NonceStore`] in memory (one process).
#[derive(Debug, Default)]
pub struct MemoryNonceStore {
    used: Mutex<HashSet<String>>,
}

impl MemoryNonceStore {
    /// An empty store.
    pub fn new() -> MemoryNonceStore {
        MemoryNonceStore::default()
    }
}

impl NonceStore for MemoryNonceStore {
    fn consume(&self, id: &str) -> bool {
        self.used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string())
    }
}

/// A [`NonceStore`] in a directory: each used snapshot id is a file created there with
/// `create_new`, which the file system makes atomic, so a snapshot is single-use across
/// processes (and machines sharing the directory). It fails closed: an id it cannot record is
/// treated as used.
///
/// ```
/// use ajs::{FileNonceStore, NonceStore};
/// let dir = std::env::temp_dir().join(format!("ajs-nonce-doc-{}", std::process::id()));
/// let store = FileNonceStore::new(&dir).unwrap();
/// assert!(store.consume("ab12"));
/// assert!(!store.consume("ab12"));
/// assert!(!store.consume("../escape"), "only hex ids are accepted");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct FileNonceStore {
    dir: std::path::PathBuf,
}

impl FileNonceStore {
    /// A store in `dir`, created if missing.
    ///
    /// # Errors
    /// The I/O error when the directory cannot be created.
    pub fn new(dir: impl Into<std::path::PathBuf>) -> std::io::Result<FileNonceStore> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(FileNonceStore { dir })
    }
}

impl NonceStore for FileNonceStore {
    fn consume(&self, id: &str) -> bool {
        if id.is_empty() || id.len() > 128 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return false;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.dir.join(id))
            .is_ok()
    }
}

/// How gated calls are decided.
#[derive(Clone, Default)]
pub struct Approvals {
    /// Policy per atom; atoms not listed are allowed.
    pub policies: HashMap<String, Policy>,
    /// Decides gated calls in-process (the run waits).
    pub handler: Option<ApprovalHandler>,
    /// Whether a run may stop and return a snapshot for a decision.
    pub suspend: bool,
    /// HMAC key for snapshots (without one they carry a SHA-256).
    pub key: Option<Vec<u8>>,
    /// Makes snapshots single-use.
    pub nonce_store: Option<Arc<dyn NonceStore>>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("policies", &self.policies)
            .field("handler", &self.handler.is_some())
            .field("suspend", &self.suspend)
            .field("key", &self.key.is_some())
            .field("nonce_store", &self.nonce_store.is_some())
            .finish()
    }
}

impl Approvals {
    /// Sets an atom's policy.
    pub fn policy(mut self, atom: impl Into<String>, policy: Policy) -> Approvals {
        self.policies.insert(atom.into(), policy);
        self
    }
    /// Lets runs suspend.
    pub fn suspend(mut self, yes: bool) -> Approvals {
        self.suspend = yes;
        self
    }
    /// Sets the approval handler from an async closure.
    pub fn handler<F, Fut>(mut self, f: F) -> Approvals
    where
        F: Fn(PendingCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Verdict> + Send + 'static,
    {
        self.handler = Some(Arc::new(move |c| Box::pin(f(c))));
        self
    }
    /// Sets the snapshot HMAC key.
    pub fn key(mut self, key: impl Into<Vec<u8>>) -> Approvals {
        self.key = Some(key.into());
        self
    }
    /// Sets the nonce store.
    pub fn nonce_store(mut self, store: Arc<dyn NonceStore>) -> Approvals {
        self.nonce_store = Some(store);
        self
    }
}

/// What a run records and caps besides the options.
#[derive(Clone, Debug, Default)]
pub struct RunSettings {
    /// Record a [`Journal`] of host calls.
    pub journal: bool,
    /// Record every step ([`Report::trace`]).
    pub trace: bool,
    /// Most steps kept in the trace (default 100 000 when 0; at most
    /// [`ajs_vm::MAX_TRACE_STEPS`]); later steps are counted in `trace_dropped`.
    pub trace_cap: usize,
    /// Most host calls in total (`maxCalls`); the next one ends the run.
    pub max_calls: Option<u32>,
    /// Largest result, in JSON bytes (`maxOutputBytes`).
    pub max_output_bytes: Option<usize>,
    /// Log lines kept; the rest are counted (`maxLogLines`).
    pub max_log_lines: Option<usize>,
    /// Bytes the journal may hold (`maxJournalBytes`, default [`DEFAULT_MAX_JOURNAL_BYTES`]):
    /// the host call whose entry would pass it ends the run.
    pub max_journal_bytes: Option<usize>,
    /// Bytes of log text kept (`maxLogBytes`, default [`ajs_vm::DEFAULT_MAX_LOG_BYTES`]): a
    /// line past it is cut with a marker, later lines are counted as dropped.
    pub max_log_bytes: Option<usize>,
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct Report {
    /// Result, fuel, error and log.
    pub outcome: Outcome,
    /// The host calls made, when journaling.
    pub journal: Option<Journal>,
    /// Every step, when tracing (steps before a suspension are not carried over).
    pub trace: Vec<TraceStep>,
    /// Steps past the trace cap.
    pub trace_dropped: u64,
    /// Log lines past `maxLogLines` or `maxLogBytes`.
    pub log_dropped: u64,
}

/// A run stopped for decisions.
#[derive(Clone, Debug)]
pub struct Suspended {
    /// The whole run state; give it to [`GatedRunner::resume`].
    pub snapshot: Vec<u8>,
    /// The calls to decide.
    pub pending: Vec<PendingCall>,
}

/// How a gated run ended, for now.
#[derive(Clone, Debug)]
pub enum RunResult {
    /// The run ended (with a result or an error).
    Finished(Box<Report>),
    /// The run stopped for decisions.
    Suspended(Suspended),
}

impl RunResult {
    /// The report, if the run finished.
    pub fn finished(self) -> Option<Report> {
        match self {
            RunResult::Finished(r) => Some(*r),
            RunResult::Suspended(_) => None,
        }
    }
    /// The suspension, if the run stopped.
    pub fn suspended(self) -> Option<Suspended> {
        match self {
            RunResult::Suspended(s) => Some(s),
            RunResult::Finished(_) => None,
        }
    }
}

/// A gated runner refused at construction.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A gated atom with no way to decide.
    #[error("Atom '{atom}' is gated by the '{policy}' policy, but the runner has no approval handler and may not suspend")]
    Undecidable {
        /// The atom.
        atom: String,
        /// The policy.
        policy: &'static str,
    },
    /// An option is out of range.
    #[error(transparent)]
    Option(#[from] crate::OptionError),
}

/// Why a resume was refused (nothing ran).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ResumeError {
    /// The snapshot was refused.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The decisions do not match the pending calls.
    #[error("{0}")]
    Decision(String),
}

/// A replay that diverged from its journal.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("ReplayMismatch at call #{index} ('{atom}'): {detail}")]
pub struct ReplayMismatch {
    /// The call's index in the run.
    pub index: u32,
    /// The atom the replay called (or the journal expected).
    pub atom: String,
    /// What differs.
    pub detail: String,
}

/// Why a replay failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReplayError {
    /// The run diverged from the journal.
    #[error(transparent)]
    Mismatch(#[from] ReplayMismatch),
    /// The journal is not for this program and these arguments, or its chain is broken.
    #[error("{0}")]
    Journal(String),
}

/// A runner with approval policies, snapshots, journal, tracing and caps.
#[derive(Clone, Debug)]
pub struct GatedRunner {
    /// Quotas, heap ceiling, depth, ledger.
    pub runner: Runner,
    /// Limits and capabilities.
    pub options: Options,
    /// Policies and how they are decided.
    pub approvals: Approvals,
    /// Journal, trace, caps.
    pub settings: RunSettings,
}

impl GatedRunner {
    /// Builds a gated runner.
    ///
    /// # Errors
    /// [`ConfigError::Undecidable`] naming the first (by name) atom under `pause` or `collect`
    /// when there is no handler and runs may not suspend; [`ConfigError::Option`] for an option
    /// out of range.
    pub fn new(
        runner: Runner,
        options: Options,
        approvals: Approvals,
        settings: RunSettings,
    ) -> Result<GatedRunner, ConfigError> {
        options.validate()?;
        runner.validate()?;
        if approvals.handler.is_none() && !approvals.suspend {
            let mut gated: Vec<(&String, &Policy)> = approvals
                .policies
                .iter()
                .filter(|(_, p)| matches!(p, Policy::Pause | Policy::Collect))
                .collect();
            gated.sort_by(|a, b| a.0.cmp(b.0));
            if let Some((atom, p)) = gated.first() {
                return Err(ConfigError::Undecidable {
                    atom: (*atom).clone(),
                    policy: p.as_str(),
                });
            }
        }
        Ok(GatedRunner {
            runner,
            options,
            approvals,
            settings,
        })
    }

    fn env(&self) -> RunEnv<'_> {
        RunEnv {
            depth: self.runner.depth,
            quotas: &self.runner.quotas,
            ledger: self.runner.ledger.as_ref(),
            run_id: Default::default(),
        }
    }

    fn control(&self, journal: Option<Journal>) -> Control<'_> {
        let journal_held = journal.as_ref().map_or(0, Journal::held_bytes);
        Control {
            policies: Some(&self.approvals.policies),
            handler: self.approvals.handler.as_ref(),
            can_suspend: self.approvals.suspend,
            key: self.approvals.key.as_deref(),
            journal,
            replay: None,
            max_calls: self.settings.max_calls,
            max_output_bytes: self.settings.max_output_bytes,
            journal_held,
            max_journal_bytes: self.max_journal_bytes(),
            mismatch: None,
            warnings: Vec::new(),
        }
    }

    fn max_journal_bytes(&self) -> usize {
        self.settings
            .max_journal_bytes
            .unwrap_or(DEFAULT_MAX_JOURNAL_BYTES)
    }

    fn vm_options(&self) -> ajs_vm::VmOptions {
        let mut o = self
            .options
            .vm_options(&self.runner.quotas, self.runner.max_heap_bytes);
        if let Some(n) = self.settings.max_log_lines {
            o.max_log_lines = n;
        }
        if let Some(n) = self.settings.max_log_bytes {
            o.max_log_bytes = n;
        }
        o
    }

    /// The calls a saved run is waiting on, read from its snapshot (for showing them to whoever
    /// decides, in any process).
    ///
    /// # Errors
    /// [`ResumeError`] when the snapshot is refused.
    pub fn pending(
        &self,
        program: &VerifiedProgram,
        snapshot: &[u8],
    ) -> Result<Vec<PendingCall>, ResumeError> {
        let vm = Vm::restore(program.clone(), snapshot, self.approvals.key.as_deref())?;
        Ok(driver::pending_of(&vm))
    }

    /// Runs an agent program with `args` (an object keyed by parameter name) until it ends or
    /// stops for decisions.
    pub async fn start(&self, program: &VerifiedProgram, args: &serde_json::Value) -> RunResult {
        let values = match prepare_args(program, args, &self.options) {
            Ok(v) => v,
            Err(o) => return RunResult::Finished(plain_report(*o)),
        };
        let vm = match Vm::new(program.clone(), &values, self.vm_options()) {
            Ok(vm) => vm,
            Err(e) => {
                return RunResult::Finished(plain_report(Outcome::failed(
                    e.message, e.kind, e.pos, 0.0,
                )))
            }
        };
        let journal = self
            .settings
            .journal
            .then(|| Journal::new(program, &values, vm.random_seed()));
        self.go(vm, self.control(journal)).await
    }

    async fn go(&self, mut vm: Vm, mut ctl: Control<'_>) -> RunResult {
        if self.settings.trace {
            let cap = match self.settings.trace_cap {
                0 => 100_000,
                n => n,
            };
            vm.set_trace(Some(cap.min(ajs_vm::MAX_TRACE_STEPS)));
        }
        let env = self.env();
        match driver::drive(Box::new(vm), &self.options, &env, &mut ctl).await {
            DriveEnd::Suspended { snapshot, pending } => {
                RunResult::Suspended(Suspended { snapshot, pending })
            }
            DriveEnd::Finished(outcome, mut vm) => {
                let (trace, trace_dropped) = vm.take_trace();
                let outcome = agent_contract(outcome);
                let journal = ctl.journal.take().map(|mut j| {
                    j.clock = vm.clock_readings().to_vec();
                    j.outcome = Some(outcome_hash(&outcome));
                    j
                });
                RunResult::Finished(Box::new(Report {
                    outcome,
                    journal,
                    trace,
                    trace_dropped,
                    log_dropped: vm.log_dropped(),
                }))
            }
        }
    }

    /// Continues a suspended run from its snapshot with a decision for every pending call.
    /// Approving runs exactly the call that was shown (its input hash must match); nothing that
    /// ran before the snapshot runs again, and fuel, quotas and time continue from where they
    /// were.
    ///
    /// # Errors
    /// [`ResumeError`] when the snapshot is refused (tampered, foreign, another cost version,
    /// wrong key, already used) or the decisions do not match the pending calls; nothing ran.
    pub async fn resume(
        &self,
        program: &VerifiedProgram,
        snapshot: &[u8],
        decisions: Vec<Decision>,
    ) -> Result<RunResult, ResumeError> {
        let mut vm = Vm::restore(program.clone(), snapshot, self.approvals.key.as_deref())?;
        let pending = driver::pending_of(&vm);
        let mut by_id: HashMap<u32, Decision> = HashMap::new();
        for d in decisions {
            if by_id.insert(d.id, d).is_some() {
                return Err(ResumeError::Decision("two decisions for one call".into()));
            }
        }
        for p in &pending {
            let Some(d) = by_id.get(&p.id) else {
                return Err(ResumeError::Decision(format!(
                    "No decision for pending call #{} ('{}')",
                    p.id, p.atom
                )));
            };
            if d.input_hash != p.input_hash {
                return Err(ResumeError::Decision(format!(
                    "The decision for call #{} ('{}') is for another input (input hash mismatch)",
                    p.id, p.atom
                )));
            }
        }
        if let Some(id) = by_id
            .keys()
            .find(|id| !pending.iter().any(|p| p.id == **id))
        {
            return Err(ResumeError::Decision(format!("Call #{id} is not pending")));
        }
        if let Some(store) = &self.approvals.nonce_store {
            let id = ajs_vm::snapshot_id(snapshot).unwrap_or_default();
            if !store.consume(&id) {
                return Err(SnapshotError::AlreadyUsed.into());
            }
        }
        let mut journal = if self.settings.journal {
            match Journal::from_bytes(vm.host_data()) {
                Some(j) => Some(j),
                None => {
                    return Err(ResumeError::Decision(
                        "the snapshot holds no journal".into(),
                    ))
                }
            }
        } else {
            None
        };
        let env = self.env();
        let start = Instant::now();
        let remaining = self.options.timeout_ms.saturating_sub(vm.elapsed_ms());
        let deadline = crate::driver::after(start, std::time::Duration::from_millis(remaining));
        let mut held = journal.as_ref().map_or(0, Journal::held_bytes);
        // approved calls run together (as a `parallel(...)` would); the others are answered
        let mut answers: Vec<Option<Result<JsValue, String>>> = Vec::with_capacity(pending.len());
        let mut approved = Vec::new();
        for p in &pending {
            let verdict = by_id.remove(&p.id).map_or(Verdict::Deny, |d| d.verdict);
            let answer = driver::verdict_answer(verdict, &p.atom);
            if answer.is_none() {
                approved.push(p.clone());
            }
            answers.push(answer);
        }
        let room = crate::answer::Room::new(vm.answer_room());
        let mut performed =
            match driver::perform_all(&approved, &self.options, &env, deadline, &room).await {
                Ok(a) => a.into_iter(),
                Err(e) => {
                    let o = driver::finish(&vm, Err(e));
                    return Ok(RunResult::Finished(plain_report(o)));
                }
            };
        for (p, answer) in pending.into_iter().zip(answers) {
            let answer = match answer {
                Some(a) => a,
                None => performed
                    .next()
                    .unwrap_or_else(|| Err(driver::denied(&p.atom))),
            };
            if let Some(j) = &mut journal {
                let call = HostCall {
                    atom: p.atom.clone(),
                    input: p.input.clone(),
                };
                let limit = self.max_journal_bytes();
                let fuel = vm.fuel_used_milli();
                if let Err(e) = j.record(p.id, &call, &answer, fuel, p.deferred, &mut held, limit) {
                    let o = driver::finish(&vm, Err(e));
                    return Ok(RunResult::Finished(plain_report(o)));
                }
            }
            let r = if p.deferred {
                vm.settle(p.id, answer)
            } else {
                vm.resume(answer)
            };
            if let Err(e) = r {
                let o = driver::finish(&vm, Err(e));
                return Ok(RunResult::Finished(plain_report(o)));
            }
        }
        let spent = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        vm.set_elapsed_ms(vm.elapsed_ms().saturating_add(spent));
        Ok(self.go(vm, self.control(journal)).await)
    }
}

fn plain_report(outcome: Outcome) -> Box<Report> {
    Box::new(Report {
        outcome,
        journal: None,
        trace: Vec::new(),
        trace_dropped: 0,
        log_dropped: 0,
    })
}

/// An agent's entry must return an object, `null` or nothing.
fn agent_contract(mut out: Outcome) -> Outcome {
    if out.error.is_none() {
        let kind = match &out.result {
            JsValue::Object(_) | JsValue::Null | JsValue::Undefined => None,
            JsValue::Array(_) => Some("array"),
            JsValue::String(_) => Some("string"),
            JsValue::Number(_) => Some("number"),
            JsValue::Bool(_) => Some("boolean"),
        };
        if let Some(k) = kind {
            let log = std::mem::take(&mut out.log);
            let fuel = out.fuel_used;
            out = Outcome::failed(
                format!("Agent must return an object, got {k}; wrap the value: return {{ result: value }}"),
                ErrorKind::Guest,
                None,
                fuel,
            );
            out.log = log;
        }
    }
    out
}

/// Checks an agent's arguments as `Runner::run_program` does.
fn prepare_args(
    program: &VerifiedProgram,
    args: &serde_json::Value,
    options: &Options,
) -> Result<Vec<JsValue>, Box<Outcome>> {
    let refuse = |m: String| Box::new(Outcome::failed(m, ErrorKind::Input, None, 0.0));
    let empty = serde_json::Map::new();
    let obj = match args {
        serde_json::Value::Object(m) => m,
        serde_json::Value::Null => &empty,
        other => {
            return Err(refuse(format!(
                "Arguments must be an object keyed by parameter name, got {}",
                json_kind(other)
            )))
        }
    };
    if driver::json_too_deep(args, MAX_BOUNDARY_DEPTH) {
        return Err(refuse(format!(
            "Arguments nested deeper than {MAX_BOUNDARY_DEPTH} levels cannot cross the boundary"
        )));
    }
    let size = args.to_string().len();
    if size > options.args_max_bytes {
        return Err(refuse(format!(
            "Arguments are {size} bytes, over the {}-byte limit (argsMaxBytes)",
            options.args_max_bytes
        )));
    }
    crate::signature::check_args(program, obj).map_err(refuse)
}

// ---- the journal ----

/// One recorded host call.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalEntry {
    /// The call's number in the run.
    pub index: u32,
    /// The atom.
    pub atom: String,
    /// Its input.
    pub input: JsValue,
    /// SHA-256 of the input (hex).
    pub input_hash: String,
    /// What the guest received: a value, or the message of a catchable error.
    pub result: Result<JsValue, String>,
    /// Fuel used when the call was made (milli-fuel); for a collected call, when it was settled.
    pub fuel_milli: u64,
    /// Collected (deferred) rather than answered at once.
    pub deferred: bool,
    /// The chain hash through this entry (hex).
    pub hash: String,
}

/// Every host call of a run, in a hash chain that starts from the program's fingerprint, the
/// arguments and the randomness seed; plus the clock readings.
#[derive(Clone, Debug, PartialEq)]
pub struct Journal {
    /// SHA-256 of the program's bytes (hex).
    pub program: String,
    /// SHA-256 of the arguments (hex).
    pub args: String,
    /// The seed of `Math.random`, `random` and `uuid`.
    pub random_seed: u64,
    /// Every clock reading (`Date()`, `Date.now()`), in order.
    pub clock: Vec<f64>,
    /// The calls, in the order they were answered.
    pub entries: Vec<JournalEntry>,
    /// SHA-256 of the run's outcome (result or error), once it finished.
    pub outcome: Option<String>,
}

/// Default cap on the bytes a run's journal holds (`maxJournalBytes`): 64 MiB.
pub const DEFAULT_MAX_JOURNAL_BYTES: usize = 64 << 20;

/// Bytes a journal entry holds: the entry, its two hashes, and the values (every node, string
/// and key).
fn entry_bytes(atom: &str, input: &JsValue, result: &Result<JsValue, String>) -> usize {
    let result = match result {
        Ok(v) => value_bytes(v),
        Err(m) => m.len(),
    };
    std::mem::size_of::<JournalEntry>() + 2 * 64 + atom.len() + value_bytes(input) + result
}

/// Bytes a host value holds: a `JsValue` per node, its strings' and keys' bytes, and a key
/// and hash per property.
fn value_bytes(v: &JsValue) -> usize {
    let node = std::mem::size_of::<JsValue>();
    let mut n = 0usize;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        n = n.saturating_add(node);
        match v {
            JsValue::String(s) => n = n.saturating_add(s.len()),
            JsValue::Array(a) => stack.extend(a.iter()),
            JsValue::Object(m) => {
                for (k, x) in m {
                    n = n.saturating_add(k.len() + std::mem::size_of::<(usize, String)>());
                    stack.push(x);
                }
            }
            _ => {}
        }
    }
    n
}

fn outcome_hash(o: &Outcome) -> String {
    match &o.error {
        None => format!("ok:{}", value_hash(&o.result)),
        Some(e) => format!("err:{}", hex(&Sha256::digest(e.message.as_bytes()))),
    }
}

fn args_hash(args: &[JsValue]) -> String {
    value_hash(&JsValue::Array(args.to_vec()))
}

fn result_hash(r: &Result<JsValue, String>) -> String {
    match r {
        Ok(v) => format!("ok:{}", value_hash(v)),
        Err(m) => format!("err:{}", hex(&Sha256::digest(m.as_bytes()))),
    }
}

impl Journal {
    fn new(program: &VerifiedProgram, args: &[JsValue], random_seed: u64) -> Journal {
        Journal {
            program: hex(&program_fingerprint(program)),
            args: args_hash(args),
            random_seed,
            clock: Vec::new(),
            entries: Vec::new(),
            outcome: None,
        }
    }

    /// The chain's starting hash.
    pub fn head(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"ajs-journal-v1");
        h.update(self.program.as_bytes());
        h.update(self.args.as_bytes());
        h.update(self.random_seed.to_le_bytes());
        hex(&h.finalize())
    }

    fn link(prev: &str, e: &JournalEntry) -> String {
        let mut h = Sha256::new();
        h.update(prev.as_bytes());
        h.update(e.index.to_le_bytes());
        h.update((e.atom.len() as u64).to_le_bytes());
        h.update(e.atom.as_bytes());
        h.update(e.input_hash.as_bytes());
        h.update(result_hash(&e.result).as_bytes());
        h.update(e.fuel_milli.to_le_bytes());
        h.update([u8::from(e.deferred)]);
        hex(&h.finalize())
    }

    /// Appends the entry of a host call, unless it would take the bytes the journal holds
    /// (`held`, kept up to date) past `limit`.
    ///
    /// # Errors
    /// A run-ending `Boundary` error naming `maxJournalBytes`; nothing is recorded.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        &mut self,
        index: u32,
        call: &HostCall,
        result: &Result<JsValue, String>,
        fuel: u64,
        deferred: bool,
        held: &mut usize,
        limit: usize,
    ) -> Result<(), RunError> {
        let bytes = entry_bytes(&call.atom, &call.input, result);
        if held.saturating_add(bytes) > limit {
            return Err(RunError::new(
                ErrorKind::Boundary,
                format!(
                    "Journal is over the {limit}-byte limit (maxJournalBytes): the run's host calls carry more data than it may record; pass less to atoms or raise maxJournalBytes"
                ),
            ));
        }
        *held += bytes;
        let prev = self
            .entries
            .last()
            .map_or_else(|| self.head(), |e| e.hash.clone());
        let mut e = JournalEntry {
            index,
            atom: call.atom.clone(),
            input: call.input.clone(),
            input_hash: value_hash(&call.input),
            result: result.clone(),
            fuel_milli: fuel,
            deferred,
            hash: String::new(),
        };
        e.hash = Journal::link(&prev, &e);
        self.entries.push(e);
        Ok(())
    }

    /// Bytes the entries hold in memory, as [`RunSettings::max_journal_bytes`] counts them.
    pub fn held_bytes(&self) -> usize {
        self.entries
            .iter()
            .map(|e| entry_bytes(&e.atom, &e.input, &e.result))
            .sum()
    }

    /// Recomputes every entry's input hash and chain hash (for building a journal by hand; a
    /// journal edited and resealed still has to match the replay call by call).
    pub fn reseal(&mut self) {
        let mut prev = self.head();
        for e in &mut self.entries {
            e.input_hash = value_hash(&e.input);
            e.hash = Journal::link(&prev, e);
            prev = e.hash.clone();
        }
    }

    /// Checks the chain: every entry's hash follows from the previous one and its content.
    ///
    /// # Errors
    /// The position of the first broken link.
    pub fn verify(&self) -> Result<(), usize> {
        let mut prev = self.head();
        for (i, e) in self.entries.iter().enumerate() {
            if value_hash(&e.input) != e.input_hash || Journal::link(&prev, e) != e.hash {
                return Err(i);
            }
            prev = e.hash.clone();
        }
        Ok(())
    }

    /// Checks the replay's call `index` against the journal; the recorded answer if it matches.
    pub(crate) fn check(
        &self,
        position: usize,
        call: &HostCall,
        fuel: u64,
    ) -> Result<Result<JsValue, String>, ReplayMismatch> {
        let Some(e) = self.entries.iter().find(|e| e.index == position as u32) else {
            return Err(ReplayMismatch {
                index: position as u32,
                atom: call.atom.clone(),
                detail: "the journal records no such call".into(),
            });
        };
        let mismatch = |detail: String| ReplayMismatch {
            index: e.index,
            atom: call.atom.clone(),
            detail,
        };
        if e.atom != call.atom {
            return Err(mismatch(format!(
                "the journal records a call to '{}'",
                e.atom
            )));
        }
        if e.input_hash != value_hash(&call.input) {
            return Err(mismatch("the input differs from the journal's".into()));
        }
        if (!e.deferred && e.fuel_milli != fuel) || (e.deferred && e.fuel_milli < fuel) {
            return Err(mismatch(format!(
                "fuel at the call is {fuel} milli-fuel, the journal has {}",
                e.fuel_milli
            )));
        }
        Ok(e.result.clone())
    }

    /// The journal as bytes (postcard; values flattened, so decoding never recurses).
    pub fn to_bytes(&self) -> Vec<u8> {
        let wire = Wire {
            program: self.program.clone(),
            args: self.args.clone(),
            random_seed: self.random_seed,
            clock: self.clock.clone(),
            outcome: self.outcome.clone(),
            entries: self
                .entries
                .iter()
                .map(|e| WireEntry {
                    index: e.index,
                    atom: e.atom.clone(),
                    input: flatten(&e.input),
                    input_hash: e.input_hash.clone(),
                    ok: e.result.is_ok(),
                    result: match &e.result {
                        Ok(v) => flatten(v),
                        Err(m) => vec![Node::S(m.clone())],
                    },
                    fuel_milli: e.fuel_milli,
                    deferred: e.deferred,
                    hash: e.hash.clone(),
                })
                .collect(),
        };
        let mut out = b"AJSJ".to_vec();
        out.extend(postcard::to_allocvec(&wire).unwrap_or_default());
        out
    }

    /// Reads [`Journal::to_bytes`]; `None` when the bytes are not a journal.
    pub fn from_bytes(bytes: &[u8]) -> Option<Journal> {
        let body = bytes.strip_prefix(b"AJSJ")?;
        let wire: Wire = postcard::from_bytes(body).ok()?;
        let mut entries = Vec::with_capacity(wire.entries.len());
        for e in wire.entries {
            let result = if e.ok {
                Ok(unflatten(&e.result)?)
            } else {
                match unflatten(&e.result)? {
                    JsValue::String(m) => Err(m),
                    _ => return None,
                }
            };
            entries.push(JournalEntry {
                index: e.index,
                atom: e.atom,
                input: unflatten(&e.input)?,
                input_hash: e.input_hash,
                result,
                fuel_milli: e.fuel_milli,
                deferred: e.deferred,
                hash: e.hash,
            });
        }
        Some(Journal {
            program: wire.program,
            args: wire.args,
            random_seed: wire.random_seed,
            clock: wire.clock,
            entries,
            outcome: wire.outcome,
        })
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    program: String,
    args: String,
    random_seed: u64,
    clock: Vec<f64>,
    entries: Vec<WireEntry>,
    outcome: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct WireEntry {
    index: u32,
    atom: String,
    input: Vec<Node>,
    input_hash: String,
    ok: bool,
    result: Vec<Node>,
    fuel_milli: u64,
    deferred: bool,
    hash: String,
}

/// A value in post-order: children before their parent.
#[derive(Serialize, Deserialize)]
enum Node {
    U,
    N,
    B(bool),
    Num(f64),
    S(String),
    A(u32),
    O(Vec<String>),
}

fn flatten(v: &JsValue) -> Vec<Node> {
    let mut out = Vec::new();
    let mut stack: Vec<(&JsValue, bool)> = vec![(v, false)];
    while let Some((v, done)) = stack.pop() {
        match v {
            JsValue::Array(a) if !done => {
                stack.push((v, true));
                stack.extend(a.iter().rev().map(|x| (x, false)));
            }
            JsValue::Object(m) if !done => {
                stack.push((v, true));
                stack.extend(m.values().rev().map(|x| (x, false)));
            }
            JsValue::Array(a) => out.push(Node::A(a.len() as u32)),
            JsValue::Object(m) => out.push(Node::O(m.keys().cloned().collect())),
            JsValue::Undefined => out.push(Node::U),
            JsValue::Null => out.push(Node::N),
            JsValue::Bool(b) => out.push(Node::B(*b)),
            JsValue::Number(n) => out.push(Node::Num(*n)),
            JsValue::String(s) => out.push(Node::S(s.clone())),
        }
    }
    out
}

fn unflatten(nodes: &[Node]) -> Option<JsValue> {
    let mut stack: Vec<(JsValue, usize)> = Vec::new();
    for n in nodes {
        let item = match n {
            Node::U => (JsValue::Undefined, 0),
            Node::N => (JsValue::Null, 0),
            Node::B(b) => (JsValue::Bool(*b), 0),
            Node::Num(x) => (JsValue::Number(*x), 0),
            Node::S(s) => (JsValue::String(s.clone()), 0),
            Node::A(k) => {
                let k = *k as usize;
                let at = stack.len().checked_sub(k)?;
                let kids: Vec<(JsValue, usize)> = stack.split_off(at);
                let depth = 1 + kids.iter().map(|x| x.1).max().unwrap_or(0);
                (
                    JsValue::Array(kids.into_iter().map(|x| x.0).collect()),
                    depth,
                )
            }
            Node::O(keys) => {
                let at = stack.len().checked_sub(keys.len())?;
                let kids = stack.split_off(at);
                let depth = 1 + kids.iter().map(|x| x.1).max().unwrap_or(0);
                (
                    JsValue::Object(
                        keys.iter()
                            .cloned()
                            .zip(kids.into_iter().map(|x| x.0))
                            .collect(),
                    ),
                    depth,
                )
            }
        };
        if item.1 > MAX_BOUNDARY_DEPTH {
            return None;
        }
        stack.push(item);
    }
    (stack.len() == 1)
        .then(|| stack.pop().map(|x| x.0))
        .flatten()
}

/// Re-runs an agent program offline against `journal`: no capability is called; every host
/// call is checked (atom, input, fuel) against the journal and answered with its recorded
/// result; time and randomness come from the journal. The first difference ends the run.
///
/// # Errors
/// [`ReplayError::Journal`] when the journal is for another program or arguments, or its chain
/// is broken; [`ReplayError::Mismatch`] naming the first call that differs.
pub async fn replay(
    program: &VerifiedProgram,
    args: &serde_json::Value,
    journal: &Journal,
    runner: &Runner,
    options: &Options,
) -> Result<Outcome, ReplayError> {
    if journal.program != hex(&program_fingerprint(program)) {
        return Err(ReplayError::Journal(
            "the journal is for another program".into(),
        ));
    }
    if let Err(i) = journal.verify() {
        let e = &journal.entries[i];
        return Err(ReplayMismatch {
            index: e.index,
            atom: e.atom.clone(),
            detail: "the journal's record of this call was altered (hash chain broken)".into(),
        }
        .into());
    }
    let values = match prepare_args(program, args, options) {
        Ok(v) => v,
        Err(o) => return Ok(*o),
    };
    if args_hash(&values) != journal.args {
        return Err(ReplayError::Journal(
            "the journal is for other arguments".into(),
        ));
    }
    let mut vm_opts = options.vm_options(&runner.quotas, runner.max_heap_bytes);
    vm_opts.random_seed = journal.random_seed;
    let mut vm =
        Vm::new(program.clone(), &values, vm_opts).map_err(|e| ReplayError::Journal(e.message))?;
    vm.set_clock_replay(journal.clock.clone());
    let env = RunEnv {
        depth: runner.depth,
        quotas: &runner.quotas,
        ledger: None,
        run_id: Default::default(),
    };
    let mut ctl = Control {
        replay: Some((journal, 0)),
        ..Control::default()
    };
    let end = driver::drive(Box::new(vm), options, &env, &mut ctl).await;
    if let Some(m) = ctl.mismatch.take() {
        return Err(m.into());
    }
    match end {
        DriveEnd::Finished(outcome, vm) => {
            let used = ctl.replay.map_or(0, |r| r.1);
            if used < journal.entries.len() {
                let e = &journal.entries[used];
                return Err(ReplayMismatch {
                    index: e.index,
                    atom: e.atom.clone(),
                    detail: "the replay ended before this recorded call".into(),
                }
                .into());
            }
            if vm.clock_readings().len() > journal.clock.len() {
                return Err(ReplayError::Journal(
                    "the replay read the clock more often than the journal records".into(),
                ));
            }
            let outcome = agent_contract(outcome);
            if let Some(want) = &journal.outcome {
                if *want != outcome_hash(&outcome) {
                    return Err(ReplayError::Journal(
                        "the replay's outcome differs from the journal's".into(),
                    ));
                }
            }
            Ok(outcome)
        }
        DriveEnd::Suspended { .. } => Err(ReplayError::Journal("a replay cannot suspend".into())),
    }
}
