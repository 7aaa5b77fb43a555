//! The driver: runs the stackless VM slice by slice, performs host calls, enforces the
//! wall-clock limit over the whole run (waiting included), the host's cancellation, the shared
//! quota ledger and the boundary on what comes back.
//!
//! A host call is one future: the capability's, or the built-in fetch client's. It is awaited
//! under the earlier of the run's deadline and the atom's own timeout, and raced against the
//! cancellation token. When the run ends first the future is dropped, which closes the built-in
//! client's connection (a capability sees its own future dropped).

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ajs_bytecode::VerifiedProgram;
use ajs_io::{admit, FetchRequest, DEPTH_HEADER};
#[cfg(feature = "http")]
use ajs_io::{encode_body, structured_not_json, HttpClient, HttpError, HttpRequest, LlmClient};
use ajs_vm::{
    ErrorKind, HostArg, HostCall, JsValue, LogLine, RunError, SpareVm, Step, Vm, VmOptions,
    MAX_BOUNDARY_DEPTH,
};

use crate::answer::Room;
#[cfg(feature = "http")]
use crate::answer::{guest_value, parse_json, AnswerError};
use crate::approvals::{ApprovalHandler, Journal, PendingCall, Policy, ReplayMismatch, Verdict};
use crate::atom_inputs::{fetch_headers, ResponseType};
use crate::capabilities::{AtomDecl, FetchCall, QuotaLedger};
use crate::host_fn::HostContext;
use crate::{Options, Outcome};
use futures_util::FutureExt;

/// Milli-fuel per slice: between slices the driver checks the deadline and the cancellation
/// token, and lets other tasks run.
pub const SLICE_MILLI: u64 = 200_000;

pub use ajs_vm::CANCELLED_MESSAGE;

/// What a run needs besides the program and the options.
pub(crate) struct RunEnv<'a> {
    /// Incoming agent depth.
    pub depth: u32,
    /// Per-atom call limits (the runner's `quotas`).
    pub quotas: &'a HashMap<String, u32>,
    /// Counters shared across runs, checked against `quotas`.
    pub ledger: Option<&'a Arc<QuotaLedger>>,
    /// The run's id, drawn when a host function first asks for it.
    pub run_id: OnceLock<u64>,
}

impl RunEnv<'_> {
    /// The context a host atom's call runs in.
    fn host_context(&self, atom: &str, options: &Options) -> HostContext {
        HostContext {
            run_id: crate::host_fn::run_id(&self.run_id),
            atom: atom.to_string(),
            depth: self.depth,
            cancel: options.cancel.clone(),
            quotas: Arc::new(self.quotas.clone()),
            ledger: self.ledger.cloned(),
        }
    }
}

/// The run-ending error of a host function that panicked (the panic is caught, the caller's
/// task goes on).
fn host_panic(atom: &str, payload: &(dyn std::any::Any + Send)) -> RunError {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-text payload");
    RunError::new(
        ErrorKind::HostPanic,
        format!("The host function behind '{atom}' panicked: {what}"),
    )
}

enum HostErr {
    /// A catchable guest error (the capability threw, the request failed).
    Catch(String),
    /// Ends the run (only the built-in clients' answers do).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    End(RunError),
}

type CallFuture = Pin<Box<dyn Future<Output = Result<JsValue, HostErr>> + Send + 'static>>;

use ajs_vm::interrupt::{cancelled_error, timeout_error};

fn quota_error(atom: &str, limit: u32) -> RunError {
    let calls = if limit == 1 { "call" } else { "calls" };
    RunError::new(
        ErrorKind::Quota,
        format!("Quota exceeded for '{atom}': {limit} {calls} allowed"),
    )
}

fn boundary_error(atom: &str, why: &str) -> RunError {
    RunError::new(
        ErrorKind::Boundary,
        format!("Capability boundary rejected the return of '{atom}': {why}"),
    )
}

/// A writer that only counts bytes.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `serde_json::Value::Array(values).to_string()`, without cloning or building it.
pub(crate) fn json_array_len(values: &[serde_json::Value]) -> usize {
    let mut c = Count(0);
    for v in values {
        // writing to a counter cannot fail
        let _ = serde_json::to_writer(&mut c, v);
    }
    c.0 + 2 + values.len().saturating_sub(1)
}

/// An upper bound on `json_array_len(values)` when every value is a scalar or a string (no
/// walk, no formatting), `None` otherwise: lets a call with small plain arguments skip the exact
/// count. (`SafeFunction`'s argument check computes the same bound in its one pass.)
#[cfg(test)]
pub(crate) fn json_len_bound(values: &[serde_json::Value]) -> Option<usize> {
    let mut n = 2 + values.len();
    for v in values {
        n += scalar_len_bound(v)?;
    }
    Some(n)
}

/// An upper bound on the JSON length of a scalar or a string, `None` for an array or object.
pub(crate) fn scalar_len_bound(v: &serde_json::Value) -> Option<usize> {
    Some(match v {
        serde_json::Value::Null | serde_json::Value::Bool(_) => 5,
        // at most 20 digits or 17 significant digits with a sign, a point and an exponent
        serde_json::Value::Number(_) => 26,
        // every byte escaped at worst as \u00XX
        serde_json::Value::String(s) => 2 + 6 * s.len(),
        _ => return None,
    })
}

/// An upper bound on the JSON length of an object entry `"key":value` with a comma, when the
/// value is a scalar or a string (`None` otherwise).
#[inline]
pub(crate) fn entry_len_bound(key: &str, v: &serde_json::Value) -> Option<usize> {
    Some(2 + 2 + 6 * key.len() + scalar_len_bound(v)?)
}

/// Like [`json_object_len`] when that is certainly at most `limit` (every value a scalar or a
/// string, bounded without formatting): 0; else the exact length.
pub(crate) fn json_object_len_within<'a>(
    entries: impl Iterator<Item = (&'a String, &'a serde_json::Value)> + Clone,
    limit: usize,
) -> usize {
    let mut bound = Some(2usize);
    for (k, v) in entries.clone() {
        bound = bound.and_then(|b| Some(b + entry_len_bound(k, v)?));
    }
    match bound {
        Some(b) if b <= limit => 0,
        _ => json_object_len(entries),
    }
}

/// The length of the JSON text of an object with these entries, without building it.
pub(crate) fn json_object_len<'a, K: serde::Serialize + ?Sized + 'a>(
    entries: impl Iterator<Item = (&'a K, &'a serde_json::Value)>,
) -> usize {
    let mut c = Count(0);
    let mut n = 0usize;
    for (k, v) in entries {
        let _ = serde_json::to_writer(&mut c, k);
        let _ = serde_json::to_writer(&mut c, v);
        n += 1;
    }
    // braces, a colon per entry, commas between entries
    c.0 + 2 + n + n.saturating_sub(1)
}

pub(crate) fn finish(vm: &Vm, r: Result<JsValue, RunError>) -> Outcome {
    let log = vm.log().to_vec();
    match r {
        Ok(v) => Outcome {
            result: v,
            fuel_used: vm.fuel_used(),
            error: None,
            log,
            warnings: Vec::new(),
        },
        Err(e) => {
            let pos = e.pos.or_else(|| vm.position());
            let mut o = Outcome::failed(e.message, e.kind, pos, vm.fuel_used());
            o.log = log;
            o
        }
    }
}

thread_local! {
    /// A finished run's VM, released (nothing of its run left), kept for the next run on this
    /// thread: its vectors' capacity saves the allocations of a small run.
    static SPARE: Cell<Option<SpareVm>> = const { Cell::new(None) };
}

/// A VM ready to run `program`: the thread's spare one started (nothing of its last run
/// survives its release), or a new one.
/// `seed`, when given, replaces `opts.random_seed`.
pub(crate) fn start_vm<'a>(
    program: &VerifiedProgram,
    args: impl IntoIterator<Item = HostArg<'a>>,
    opts: &VmOptions,
    seed: Option<u64>,
) -> Result<Box<Vm>, RunError> {
    let mut vm = match SPARE.try_with(Cell::take).ok().flatten() {
        Some(spare) => match spare.start(program, args, opts) {
            Ok((vm, previous)) => {
                // the previous run's program (an `Eval`'s, when nothing else holds it) is built
                // in by the next compile
                #[cfg(feature = "compiler")]
                if let Some(p) = previous {
                    crate::compilers::recycle(p);
                }
                #[cfg(not(feature = "compiler"))]
                drop(previous);
                vm
            }
            Err((e, vm)) => {
                recycle(vm);
                return Err(e);
            }
        },
        None => Box::new(Vm::new_with(program.clone(), args, opts)?),
    };
    if let Some(s) = seed {
        vm.set_random_seed(s);
    }
    Ok(vm)
}

/// Releases a finished run's VM and keeps it as the thread's spare (unless it grew large).
pub(crate) fn recycle(vm: Box<Vm>) {
    if let Some(spare) = vm.into_spare() {
        let _ = SPARE.try_with(move |s| s.set(Some(spare)));
    }
}

/// The outcome of a run that finished with `v`; its VM goes back to the thread's spare.
/// (Inlined: the outcome is then built straight from the run's last step, not moved through
/// a `Result` and a call's arguments.)
#[inline(always)]
fn finish_done(vm: Box<Vm>, v: JsValue) -> Outcome {
    let (fuel_used, log) = hand_back(vm);
    Outcome {
        result: v,
        fuel_used,
        error: None,
        log,
        warnings: Vec::new(),
    }
}

/// What an outcome needs from a finished run's VM (its fuel used and its log), read before the
/// VM goes back to the thread's spare.
#[inline(always)]
fn hand_back(mut vm: Box<Vm>) -> (f64, Vec<LogLine>) {
    let fuel_used = vm.fuel_used();
    let log = vm.take_log();
    recycle(vm);
    (fuel_used, log)
}

/// The outcome of a run that failed with `e`; its VM goes back to the thread's spare.
fn finish_failed(vm: Box<Vm>, mut e: RunError) -> Outcome {
    if e.pos.is_none() {
        e.pos = vm.position();
    }
    let (fuel_used, log) = hand_back(vm);
    let mut o = Outcome::failed(e.message, e.kind, e.pos, fuel_used);
    o.log = log;
    o
}

/// A run in progress: finished within its first slice, or the driver's loop (boxed, so that the
/// futures of `call` and `run` stay small: a run that needs no host moves little memory).
pub(crate) enum Run<'a> {
    /// Finished (taken by the first poll).
    Done(Option<Outcome>),
    /// Running on.
    Driving(Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>),
}

fn polled_after_end() -> Outcome {
    Outcome::failed(
        "the run was polled after it ended",
        ErrorKind::Input,
        None,
        0.0,
    )
}

impl Future for Run<'_> {
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Outcome> {
        match self.get_mut() {
            Run::Done(o) => std::task::Poll::Ready(o.take().unwrap_or_else(polled_after_end)),
            Run::Driving(f) => f.as_mut().poll(cx),
        }
    }
}

/// A run that `start` begins on the first poll (the work before any await: checks, compile,
/// the VM's start and first slice). Until then the future holds only `start`'s borrows, and
/// the outcome of a run done within that poll goes straight out, never stored in the future:
/// a few words to move around, where an `async fn` would carry the outcome's space.
pub(crate) struct Lazy<'a, F> {
    start: Option<F>,
    driving: Option<Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>>,
}

pub(crate) fn lazy<'a, F: FnOnce() -> Run<'a>>(start: F) -> Lazy<'a, F> {
    Lazy {
        start: Some(start),
        driving: None,
    }
}

impl<'a, F: FnOnce() -> Run<'a> + Unpin> Future for Lazy<'a, F> {
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Outcome> {
        let this = self.get_mut();
        if let Some(start) = this.start.take() {
            match start() {
                Run::Done(o) => return std::task::Poll::Ready(o.unwrap_or_else(polled_after_end)),
                Run::Driving(f) => this.driving = Some(f),
            }
        }
        match &mut this.driving {
            Some(f) => {
                let r = f.as_mut().poll(cx);
                if r.is_ready() {
                    this.driving = None;
                }
                r
            }
            None => std::task::Poll::Ready(polled_after_end()),
        }
    }
}

/// Starts a verified program and runs it to its end: the start and the first slice run here,
/// synchronously (call it from the async function whose first poll should do that work), and
/// a run that ends within that slice (a formula) is done without any boxed future. Otherwise
/// the driver's loop takes over from that slice's step.
pub(crate) fn run_program<'a, 'b>(
    program: &VerifiedProgram,
    args: impl IntoIterator<Item = HostArg<'b>>,
    vm_opts: &VmOptions,
    seed: Option<u64>,
    options: &'a Options,
    env: RunEnv<'a>,
) -> Run<'a> {
    let done = |o| Run::Done(Some(o));
    if options.cancel.as_ref().is_some_and(|t| t.is_cancelled()) {
        return done(Outcome::failed(
            CANCELLED_MESSAGE,
            ErrorKind::Cancelled,
            None,
            0.0,
        ));
    }
    let mut vm = match start_vm(program, args, vm_opts, seed) {
        Ok(vm) => vm,
        Err(e) => return done(Outcome::failed(e.message, e.kind, e.pos, 0.0)),
    };
    // `drive` ends a run with no time left before its first slice (a fresh run always has
    // time: `timeout_ms` is at least 1)
    let first = if options.timeout_ms == 0 {
        None
    } else {
        match vm.run(SLICE_MILLI) {
            Step::Done(v) => return done(finish_done(vm, v)),
            Step::Failed(e) => return done(finish_failed(vm, e)),
            step => Some(step),
        }
    };
    // the run's clock starts here, after its first slice (see `Options::timeout_ms`)
    let start = Instant::now();
    Run::Driving(Box::pin(async move {
        let mut ctl = Control::default();
        match drive_from(vm, first, start, options, &env, &mut ctl).await {
            DriveEnd::Finished(o, vm) => {
                recycle(vm);
                o
            }
            DriveEnd::Suspended { .. } => Outcome::failed(
                "the run stopped for a decision nobody can give",
                ErrorKind::Input,
                None,
                0.0,
            ),
        }
    }))
}

/// The message of a synchronous run of a program that calls atoms.
pub const SYNC_ATOMS_MESSAGE: &str = "This code calls atoms (host operations), which need the async API: use call(...).await or run().await instead of the _sync variant";

/// Runs a verified program that calls no atom to its end on the caller's thread, with no async
/// runtime: the same fuel, heap, timeout (checked between slices) and cancellation as
/// [`run_program`], nothing else. A program that calls atoms is refused before it starts.
pub(crate) fn run_program_sync<'a>(
    program: &VerifiedProgram,
    args: impl IntoIterator<Item = HostArg<'a>>,
    vm_opts: &VmOptions,
    seed: Option<u64>,
    options: &Options,
) -> Outcome {
    if !program.atoms.is_empty() {
        return Outcome::failed(SYNC_ATOMS_MESSAGE, ErrorKind::Input, None, 0.0);
    }
    let cancelled = || options.cancel.as_ref().is_some_and(|t| t.is_cancelled());
    if cancelled() {
        return Outcome::failed(CANCELLED_MESSAGE, ErrorKind::Cancelled, None, 0.0);
    }
    let mut vm = match start_vm(program, args, vm_opts, seed) {
        Ok(vm) => vm,
        Err(e) => return Outcome::failed(e.message, e.kind, e.pos, 0.0),
    };
    // the run's clock starts after its first slice (see `Options::timeout_ms`)
    let mut deadline = None;
    loop {
        let e = match vm.run(SLICE_MILLI) {
            Step::Done(v) => return finish_done(vm, v),
            Step::Failed(e) => e,
            Step::Yield => {
                let now = Instant::now();
                let until = *deadline.get_or_insert_with(|| {
                    let until = deadline_at(now, options.timeout_ms);
                    vm.set_deadline(until);
                    until
                });
                if now >= until {
                    timeout_error(options.timeout_ms)
                } else if cancelled() {
                    cancelled_error()
                } else {
                    continue;
                }
            }
            // unreachable for a program without atoms (the verifier checks atom indices)
            Step::Host(_) | Step::Blocked => RunError::new(ErrorKind::Input, SYNC_ATOMS_MESSAGE),
        };
        return finish_failed(vm, e);
    }
}

/// `ms` after `now` (out of line: a run that ends within its first slice, the common case,
/// never needs it, and inlined its arithmetic is hoisted before that slice).
#[cold]
#[inline(never)]
fn deadline_at(now: Instant, ms: u64) -> Instant {
    after(now, Duration::from_millis(ms))
}

/// How a run is steered besides its options: approval policies, suspension, the journal being
/// recorded or replayed, caps.
#[derive(Default)]
pub(crate) struct Control<'a> {
    pub policies: Option<&'a HashMap<String, Policy>>,
    pub handler: Option<&'a ApprovalHandler>,
    pub can_suspend: bool,
    pub key: Option<&'a [u8]>,
    /// the journal being recorded
    pub journal: Option<Journal>,
    /// the journal being replayed, and the next entry
    pub replay: Option<(&'a Journal, usize)>,
    pub max_calls: Option<u32>,
    pub max_output_bytes: Option<usize>,
    /// bytes the journal holds, and the most it may hold (`maxJournalBytes`)
    pub journal_held: usize,
    pub max_journal_bytes: usize,
    /// a replay divergence that ended the run
    pub mismatch: Option<ReplayMismatch>,
    /// the run-time warnings so far (decision 39), each once
    pub warnings: Vec<String>,
}

pub(crate) enum DriveEnd {
    Finished(Outcome, Box<Vm>),
    Suspended {
        snapshot: Vec<u8>,
        pending: Vec<PendingCall>,
    },
}

pub(crate) fn denied(atom: &str) -> String {
    format!("Call to '{atom}' denied by policy")
}

impl Control<'_> {
    /// Records a host call in the journal being recorded (if any).
    fn record(
        &mut self,
        index: u32,
        call: &HostCall,
        answer: &Result<JsValue, String>,
        fuel: u64,
        deferred: bool,
    ) -> Result<(), RunError> {
        match &mut self.journal {
            Some(j) => j.record(
                index,
                call,
                answer,
                fuel,
                deferred,
                &mut self.journal_held,
                self.max_journal_bytes,
            ),
            None => Ok(()),
        }
    }

    /// Notes the warnings of a call about to be decided (inputs its atom ignores), each once
    /// and at most [`crate::capabilities::MAX_RUN_WARNINGS`] in all.
    fn note(&mut self, caps: &crate::Capabilities, atom: &str, input: &JsValue) {
        let room = crate::capabilities::MAX_RUN_WARNINGS.saturating_sub(self.warnings.len());
        if room == 0 {
            return;
        }
        for w in caps.input_warnings(atom, input, room) {
            if self.warnings.len() < crate::capabilities::MAX_RUN_WARNINGS
                && !self.warnings.contains(&w)
            {
                self.warnings.push(w);
            }
        }
    }

    /// The policy of `atom` (atoms not listed are allowed).
    fn policy(&self, atom: &str) -> Policy {
        self.policies
            .and_then(|p| p.get(atom))
            .copied()
            .unwrap_or_default()
    }
}

/// What a verdict makes of a call to `atom`: `None` to perform it, or the guest's answer.
pub(crate) fn verdict_answer(v: Verdict, atom: &str) -> Option<Result<JsValue, String>> {
    match v {
        Verdict::Approve => None,
        Verdict::Deny => Some(Err(denied(atom))),
        Verdict::Result(v) => Some(Ok(v)),
    }
}

/// `start + d`, or a date about a century away when that is past what `Instant` can hold (a
/// host may set any `timeout_ms`: `u64::MAX` means "no timeout", not a panic).
pub(crate) fn after(start: Instant, d: Duration) -> Instant {
    start
        .checked_add(d)
        .or_else(|| start.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(start)
}

/// Performs one host call under the run's deadline and cancellation. `Ok(answer)` is what the
/// guest receives; `Err` ends the run.
pub(crate) async fn perform(
    call: HostCall,
    options: &Options,
    env: &RunEnv<'_>,
    deadline: Instant,
    room: &Room,
) -> Result<Result<JsValue, String>, RunError> {
    let cancel = options.cancel.clone();
    if cancel.as_ref().is_some_and(|t| t.is_cancelled()) {
        return Err(cancelled_error());
    }
    let atom = call.atom.clone();
    if let (Some(ledger), Some(&limit)) = (env.ledger, env.quotas.get(&atom)) {
        if !ledger.try_take(&atom, limit) {
            return Err(quota_error(&atom, limit));
        }
    }
    let host_atom = options.capabilities.atoms.contains_key(&atom);
    let dispatched = std::panic::catch_unwind(AssertUnwindSafe(|| {
        dispatch(call, options, env.depth, room)
    }))
    .map_err(|p| host_panic(&atom, p.as_ref()))?;
    match dispatched {
        Err(refusal) => Ok(Err(refusal)),
        Ok((fut, own_timeout)) => {
            let fut = AssertUnwindSafe(fut).catch_unwind();
            let fut: Pin<Box<dyn Future<Output = _> + Send>> = if host_atom {
                Box::pin(env.host_context(&atom, options).scope(fut))
            } else {
                Box::pin(fut)
            };
            let own_deadline = after(Instant::now(), own_timeout);
            let until = deadline.min(own_deadline);
            let waited = tokio::time::timeout_at(until.into(), fut);
            let r = match &cancel {
                Some(token) => tokio::select! {
                    biased;
                    () = token.cancelled() => return Err(cancelled_error()),
                    r = waited => r,
                },
                None => waited.await,
            };
            let r = match r {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(p)) => return Err(host_panic(&atom, p.as_ref())),
                Err(elapsed) => Err(elapsed),
            };
            match r {
                Ok(Ok(v)) => match check_boundary(&atom, &v, options.membrane_max_bytes) {
                    Ok(()) => Ok(Ok(v)),
                    Err(e) => {
                        drop_deep(v);
                        Err(e)
                    }
                },
                Ok(Err(HostErr::Catch(m))) => Ok(Err(m)),
                Ok(Err(HostErr::End(e))) => Err(e),
                Err(_) if until == deadline || Instant::now() >= deadline => {
                    Err(timeout_error(options.timeout_ms))
                }
                Err(_) => Ok(Err(format!(
                    "Atom '{atom}' timed out after {}ms",
                    own_timeout.as_millis()
                ))),
            }
        }
    }
}

/// The pending calls of a stopped run, as the host sees them.
pub(crate) fn pending_of(vm: &Vm) -> Vec<PendingCall> {
    vm.pending_calls()
        .into_iter()
        .map(|p| PendingCall {
            id: p.id,
            input_hash: ajs_vm::value_hash(&p.call.input),
            atom: p.call.atom,
            input: p.call.input,
            deferred: p.deferred,
        })
        .collect()
}

/// Runs a VM (fresh or restored) until it ends or stops for a decision.
///
/// The VM is boxed and the host-call paths are boxed futures, so that this future stays small:
/// a run that makes no host call (a formula) moves little memory on its way through.
pub(crate) async fn drive(
    vm: Box<Vm>,
    options: &Options,
    env: &RunEnv<'_>,
    ctl: &mut Control<'_>,
) -> DriveEnd {
    drive_from(vm, None, Instant::now(), options, env, ctl).await
}

/// [`drive`] from `first`, the step of a slice the caller has run already (`None`: none), with
/// the run's time counted from `start`.
async fn drive_from(
    mut vm: Box<Vm>,
    mut first: Option<Step>,
    start: Instant,
    options: &Options,
    env: &RunEnv<'_>,
    ctl: &mut Control<'_>,
) -> DriveEnd {
    let before = vm.elapsed_ms();
    let remaining = options.timeout_ms.saturating_sub(before);
    let deadline = after(start, Duration::from_millis(remaining));
    vm.set_interrupt(options.interrupt(Some(deadline)));
    let cancel = options.cancel.clone();
    let is_cancelled = || cancel.as_ref().is_some_and(|t| t.is_cancelled());
    macro_rules! end {
        ($r:expr) => {{
            let mut o = finish(&vm, $r);
            o.warnings = std::mem::take(&mut ctl.warnings);
            return DriveEnd::Finished(o, vm);
        }};
    }
    if first.is_none() {
        if remaining == 0 {
            end!(Err(timeout_error(options.timeout_ms)));
        }
        if is_cancelled() {
            end!(Err(cancelled_error()));
        }
    }
    loop {
        let step = match first.take() {
            Some(step) => step,
            None => vm.run(SLICE_MILLI),
        };
        match step {
            Step::Done(v) => {
                if let Some(max) = ctl.max_output_bytes {
                    let n = v.json_len();
                    if n > max {
                        end!(Err(RunError::new(
                            ErrorKind::Boundary,
                            format!(
                                "Output is {n} bytes, over the {max}-byte limit (maxOutputBytes)"
                            ),
                        )));
                    }
                }
                end!(Ok(v))
            }
            Step::Failed(e) => end!(Err(e)),
            Step::Yield => {
                if Instant::now() >= deadline {
                    end!(Err(timeout_error(options.timeout_ms)));
                }
                if is_cancelled() {
                    end!(Err(cancelled_error()));
                }
                tokio::task::yield_now().await;
            }
            Step::Blocked => match Box::pin(unblock(&mut vm, options, env, ctl, deadline)).await {
                Ok(Unblock::Continue) => {}
                Ok(Unblock::Suspend) => return suspend(vm, ctl, before, start),
                Err(e) => end!(Err(e)),
            },
            Step::Host(call) => {
                ctl.note(&options.capabilities, &call.atom, &call.input);
                let index = vm.awaiting_call_id().unwrap_or(0);
                if let Some(max) = ctl.max_calls {
                    if vm.host_calls() > max {
                        end!(Err(max_calls_error(max)));
                    }
                }
                let fuel = vm.fuel_used_milli();
                if let Some((journal, next)) = &mut ctl.replay {
                    let answer = match journal.check(*next, &call, fuel) {
                        Ok(a) => a,
                        Err(m) => {
                            let e = RunError::new(ErrorKind::Input, m.to_string());
                            ctl.mismatch = Some(m);
                            end!(Err(e));
                        }
                    };
                    *next += 1;
                    if let Err(e) = vm.resume(answer) {
                        end!(Err(e));
                    }
                    continue;
                }
                let policy = ctl.policy(&call.atom);
                let answer = match policy {
                    Policy::Allow => None,
                    Policy::Deny => Some(Err(denied(&call.atom))),
                    Policy::Pause | Policy::Collect => {
                        if let Some(handler) = ctl.handler {
                            let pending = pending_of(&vm).into_iter().next();
                            match pending {
                                Some(p) => verdict_answer(handler(p).await, &call.atom),
                                None => Some(Err(denied(&call.atom))),
                            }
                        } else if policy == Policy::Pause {
                            return suspend(vm, ctl, before, start);
                        } else {
                            if let Err(e) = vm.defer() {
                                end!(Err(e));
                            }
                            continue;
                        }
                    }
                };
                let answer = match answer {
                    Some(a) => a,
                    None => match Box::pin(perform(
                        call.clone(),
                        options,
                        env,
                        deadline,
                        &Room::new(vm.answer_room()),
                    ))
                    .await
                    {
                        Ok(a) => a,
                        Err(e) => end!(Err(e)),
                    },
                };
                if let Err(e) = ctl.record(index, &call, &answer, fuel, false) {
                    end!(Err(e));
                }
                if let Err(e) = vm.resume(answer) {
                    end!(Err(e));
                }
            }
        }
    }
}

fn max_calls_error(max: u32) -> RunError {
    let calls = if max == 1 { "call" } else { "calls" };
    RunError::new(
        ErrorKind::Quota,
        format!("Host call limit exceeded: {max} {calls} allowed (maxCalls)"),
    )
}

/// What the driver does once a blocked run's calls are answered.
enum Unblock {
    /// Every call is settled: run on.
    Continue,
    /// Some call needs a decision nobody here can give: suspend.
    Suspend,
}

/// Answers the calls a blocked run waits on — the calls of a `parallel(...)` and the calls
/// collected for a decision. Each is replayed from the journal, or decided by its atom's policy
/// (asking the handler for `pause` and `collect`); the allowed ones are performed together, at
/// most `max_concurrent_calls` at a time. Calls left for a decision suspend the run (after the
/// allowed ones have settled, so nothing runs twice).
async fn unblock(
    vm: &mut Vm,
    options: &Options,
    env: &RunEnv<'_>,
    ctl: &mut Control<'_>,
    deadline: Instant,
) -> Result<Unblock, RunError> {
    let pending = pending_of(vm);
    if pending.is_empty() {
        return Err(RunError::new(
            ErrorKind::Input,
            "the run is blocked on no host call",
        ));
    }
    let fuel = vm.fuel_used_milli();
    for p in &pending {
        ctl.note(&options.capabilities, &p.atom, &p.input);
    }
    if let Some((journal, next)) = &mut ctl.replay {
        for p in pending {
            let call = HostCall {
                atom: p.atom,
                input: p.input,
            };
            let answer = match journal.check(p.id as usize, &call, fuel) {
                Ok(a) => a,
                Err(m) => {
                    let e = RunError::new(ErrorKind::Input, m.to_string());
                    ctl.mismatch = Some(m);
                    return Err(e);
                }
            };
            *next += 1;
            vm.settle(p.id, answer)?;
        }
        return Ok(Unblock::Continue);
    }
    if let Some(max) = ctl.max_calls {
        if vm.host_calls() > max {
            return Err(max_calls_error(max));
        }
    }
    let mut run = Vec::new();
    let mut undecided = false;
    for p in pending {
        let answer = match ctl.policy(&p.atom) {
            Policy::Allow => None,
            Policy::Deny => Some(Err(denied(&p.atom))),
            Policy::Pause | Policy::Collect => match ctl.handler {
                Some(handler) => verdict_answer(handler(p.clone()).await, &p.atom),
                None => {
                    undecided = true;
                    continue;
                }
            },
        };
        match answer {
            None => run.push(p),
            Some(a) => settle_recorded(vm, ctl, &p, a, fuel)?,
        }
    }
    let room = Room::new(vm.answer_room());
    let answers = perform_all(&run, options, env, deadline, &room).await?;
    for (p, a) in run.iter().zip(answers) {
        settle_recorded(vm, ctl, p, a, fuel)?;
    }
    if undecided {
        if !ctl.can_suspend {
            return Err(RunError::new(
                ErrorKind::Input,
                "the run needs a deferred host result and may not suspend",
            ));
        }
        return Ok(Unblock::Suspend);
    }
    Ok(Unblock::Continue)
}

/// Settles a deferred or queued call, recording it in the journal.
fn settle_recorded(
    vm: &mut Vm,
    ctl: &mut Control<'_>,
    p: &PendingCall,
    answer: Result<JsValue, String>,
    fuel: u64,
) -> Result<(), RunError> {
    if ctl.journal.is_some() {
        let call = HostCall {
            atom: p.atom.clone(),
            input: p.input.clone(),
        };
        ctl.record(p.id, &call, &answer, fuel, true)?;
    }
    vm.settle(p.id, answer)
}

/// Performs host calls concurrently, at most `options.max_concurrent_calls` in flight, each
/// under the run's deadline, quotas and cancellation. The answers come back in the calls'
/// order; the first run-ending error (in that order) ends them all. Their answers share `room`
/// (they are all held until the last one is in).
pub(crate) async fn perform_all(
    calls: &[PendingCall],
    options: &Options,
    env: &RunEnv<'_>,
    deadline: Instant,
    room: &Room,
) -> Result<Vec<Result<JsValue, String>>, RunError> {
    use futures_util::stream::{self, StreamExt};
    // built first, so the stream holds plain futures (no closure borrowing across awaits)
    let mut futures = Vec::with_capacity(calls.len());
    for p in calls {
        let call = HostCall {
            atom: p.atom.clone(),
            input: p.input.clone(),
        };
        futures.push(perform(call, options, env, deadline, room));
    }
    let mut answers = stream::iter(futures).buffered(options.max_concurrent_calls.max(1));
    let mut out = Vec::with_capacity(calls.len());
    while let Some(a) = answers.next().await {
        out.push(a?);
    }
    Ok(out)
}

fn suspend(mut vm: Box<Vm>, ctl: &mut Control<'_>, before: u64, start: Instant) -> DriveEnd {
    let spent = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    vm.set_elapsed_ms(before.saturating_add(spent));
    if let Some(j) = &ctl.journal {
        vm.set_host_data(j.to_bytes());
    }
    let pending = pending_of(&vm);
    DriveEnd::Suspended {
        snapshot: vm.snapshot_with(ctl.key),
        pending,
    }
}

/// Bytes of `s` as a JSON string literal (quotes and escapes included).
fn json_str_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

/// Checks a capability's return before it crosses into the guest: no deeper than
/// [`MAX_BOUNDARY_DEPTH`], and no larger than `max` bytes of JSON text (`membraneMaxBytes`).
/// Iterative, so a hostile depth cannot overflow the host stack, and stops as soon as the
/// budget is passed.
pub(crate) fn check_boundary(atom: &str, v: &JsValue, max: usize) -> Result<(), RunError> {
    let mut size = 0usize;
    let mut stack: Vec<(&JsValue, usize)> = vec![(v, 0)];
    while let Some((v, depth)) = stack.pop() {
        if depth > MAX_BOUNDARY_DEPTH {
            return Err(boundary_error(
                atom,
                &format!("capability return nests deeper than {MAX_BOUNDARY_DEPTH} levels"),
            ));
        }
        size += match v {
            // Inside an array `undefined` is written `null`; at the top or as a property it is
            // dropped (over-counting a dropped property by 4 bytes is harmless).
            JsValue::Undefined => usize::from(depth > 0) * 4,
            JsValue::Null => 4,
            JsValue::Bool(b) => 4 + usize::from(!*b),
            JsValue::Number(n) if n.is_finite() => v.display().len(),
            JsValue::Number(_) => 4,
            JsValue::String(s) => json_str_len(s),
            JsValue::Array(items) => 2 + items.len().saturating_sub(1),
            JsValue::Object(m) => {
                let mut n = 2 + m.len().saturating_sub(1);
                for k in m.keys() {
                    n += json_str_len(k) + 1;
                    if size.saturating_add(n) > max {
                        break;
                    }
                }
                n
            }
        };
        // children are stacked only once their container fits, so the walk's own memory stays
        // within the budget's worth of values
        if size <= max {
            match v {
                JsValue::Array(items) => stack.extend(items.iter().map(|x| (x, depth + 1))),
                JsValue::Object(m) => stack.extend(m.values().map(|x| (x, depth + 1))),
                _ => {}
            }
        }
        if size > max {
            return Err(boundary_error(
                atom,
                &format!(
                    "capability return exceeds the {max}-byte membrane budget (membraneMaxBytes)"
                ),
            ));
        }
    }
    Ok(())
}

/// Drops a value without recursion (a refused return may be nested arbitrarily deep).
pub(crate) fn drop_deep(v: JsValue) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            JsValue::Array(items) => stack.extend(items),
            JsValue::Object(m) => stack.extend(m.into_values()),
            _ => {}
        }
    }
}

/// Whether JSON data nests deeper than `limit` (checked before any recursive walk of host
/// input: context, arguments).
#[inline]
pub(crate) fn json_too_deep(v: &serde_json::Value, limit: usize) -> bool {
    matches!(
        v,
        serde_json::Value::Array(_) | serde_json::Value::Object(_)
    ) && json_nests_deeper(v, limit)
}

fn json_nests_deeper(v: &serde_json::Value, limit: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        if depth > limit {
            return true;
        }
        match v {
            serde_json::Value::Array(a) => stack.extend(a.iter().map(|x| (x, depth + 1))),
            serde_json::Value::Object(m) => stack.extend(m.values().map(|x| (x, depth + 1))),
            _ => {}
        }
    }
    false
}

fn field<'a>(input: &'a JsValue, name: &str) -> Option<&'a JsValue> {
    match input {
        JsValue::Object(m) => m.get(name),
        _ => None,
    }
}

#[cfg(feature = "http")]
fn default_http_client() -> HttpClient {
    static CLIENT: OnceLock<HttpClient> = OnceLock::new();
    CLIENT.get_or_init(HttpClient::new).clone()
}

fn catchable<F>(f: F) -> CallFuture
where
    F: Future<Output = Result<JsValue, String>> + Send + 'static,
{
    Box::pin(async move { f.await.map_err(HostErr::Catch) })
}

/// Turns a host call into the future to await and the atom's own timeout, or an immediate
/// (catchable) refusal.
fn dispatch(
    call: HostCall,
    options: &Options,
    depth: u32,
    room: &Room,
) -> Result<(CallFuture, Duration), String> {
    let caps = &options.capabilities;
    let decl = caps
        .decl(&call.atom)
        .ok_or_else(|| format!("Capability '{}' missing", call.atom))?;
    decl.check_input(&call.input)?;
    match call.atom.as_str() {
        "httpFetch" => http_fetch(call.input, &decl, options, depth, room),
        "llmPredict" => {
            #[cfg(feature = "http")]
            if let Some(client) = &caps.llm_client {
                return llm_predict(client.clone(), &call.input, &decl, room);
            }
            let Some(llm) = &caps.llm else {
                return Err("Capability 'llm.predict' missing".into());
            };
            let prompt = match field(&call.input, "prompt") {
                Some(JsValue::String(s)) => s.clone(),
                _ => return Err("llmPredict: missing required input 'prompt'".into()),
            };
            let opts = field(&call.input, "options")
                .cloned()
                .unwrap_or(JsValue::Undefined);
            Ok((catchable(llm(prompt, opts)), decl.timeout))
        }
        name => match caps.atoms.get(name) {
            Some(f) => Ok((catchable(f(call.input)), decl.timeout)),
            None => Err(format!("Capability '{name}' missing")),
        },
    }
}

/// The run-ending error of an answer over its room: `what` names it.
#[cfg(feature = "http")]
fn answer_over(atom: &str, what: &str, room: &Room, instead: &str) -> RunError {
    boundary_error(
        atom,
        &format!(
            "{what}, parsed, would take more than the {} bytes the run's heap has room for (maxHeapBytes); raise maxHeapBytes or {instead}",
            room.total()
        ),
    )
}

/// `llmPredict` by the built-in model client: structured answers are parsed within `room`.
#[cfg(feature = "http")]
fn llm_predict(
    client: std::sync::Arc<LlmClient>,
    input: &JsValue,
    decl: &AtomDecl,
    room: &Room,
) -> Result<(CallFuture, Duration), String> {
    let prompt = match field(input, "prompt") {
        Some(JsValue::String(s)) => s.clone(),
        _ => return Err("llmPredict: missing required input 'prompt'".into()),
    };
    let options = field(input, "options").and_then(JsValue::to_json);
    let room = room.clone();
    let fut = async move {
        let answer = client
            .predict_text(&prompt, options.as_ref())
            .await
            .map_err(HostErr::Catch)?;
        if !answer.structured {
            return Ok(JsValue::String(answer.content));
        }
        parse_json(answer.content.as_bytes(), &room).map_err(|e| match e {
            AnswerError::Invalid(m) => HostErr::Catch(structured_not_json(&m)),
            AnswerError::Over => HostErr::End(answer_over(
                "llmPredict",
                "the model's structured answer",
                &room,
                "ask for less",
            )),
        })
    };
    Ok((Box::pin(fut), decl.timeout))
}

fn http_fetch(
    input: JsValue,
    decl: &AtomDecl,
    options: &Options,
    depth: u32,
    room: &Room,
) -> Result<(CallFuture, Duration), String> {
    let caps = &options.capabilities;
    let url = match field(&input, "url") {
        Some(JsValue::String(s)) => s.clone(),
        _ => return Err("httpFetch: missing required input 'url'".into()),
    };
    let method = match field(&input, "method") {
        Some(JsValue::String(s)) => s.to_ascii_uppercase(),
        _ => "GET".to_string(),
    };
    let headers = fetch_headers(&input)?;
    let body = field(&input, "body").cloned().unwrap_or(JsValue::Undefined);
    let response_type = ResponseType::of(&input)?;
    let req = FetchRequest {
        url,
        method,
        headers,
    };
    let policy = options.fetch_policy.clone().unwrap_or_default();
    admit(&req, &policy, caps.fetch.is_some(), depth)?;
    let mut headers = req.headers;
    headers.push((DEPTH_HEADER.to_string(), (depth + 1).to_string()));
    if let Some(fetch) = &caps.fetch {
        let fut = fetch(FetchCall {
            url: req.url,
            method: req.method,
            headers,
            body,
        });
        return Ok((catchable(fut), decl.timeout));
    }
    // No capability: admission passed, so `fetchPolicy.domains` is set. The built-in client.
    let (url, method) = (req.url, req.method);
    builtin_fetch(
        url,
        method,
        headers,
        body,
        response_type,
        &policy,
        decl,
        options,
        room,
    )
}

/// Without the built-in client, a fetch that no capability serves is a catchable refusal.
#[cfg(not(feature = "http"))]
#[allow(clippy::too_many_arguments)]
fn builtin_fetch(
    _: String,
    _: String,
    _: Vec<(String, String)>,
    _: JsValue,
    _: ResponseType,
    _: &ajs_io::FetchPolicy,
    _: &AtomDecl,
    _: &Options,
    _: &Room,
) -> Result<(CallFuture, Duration), String> {
    Err(NO_BUILTIN_FETCH.into())
}

/// The refusal of [`builtin_fetch`] in a build without the `http` feature.
#[cfg(not(feature = "http"))]
const NO_BUILTIN_FETCH: &str = "httpFetch: this build has no built-in HTTP client (the `http` feature of ajs is off); the host must give a fetch capability";

/// The built-in client's request: the guest's body encoded, the answer parsed within `room`.
#[cfg(feature = "http")]
#[allow(clippy::too_many_arguments)]
fn builtin_fetch(
    url: String,
    method: String,
    mut headers: Vec<(String, String)>,
    body: JsValue,
    response_type: ResponseType,
    policy: &ajs_io::FetchPolicy,
    decl: &AtomDecl,
    options: &Options,
    room: &Room,
) -> Result<(CallFuture, Duration), String> {
    let caps = &options.capabilities;
    let mut client = caps
        .http_client
        .clone()
        .unwrap_or_else(default_http_client)
        .max_body_bytes(options.membrane_max_bytes);
    client.request_timeout = decl.timeout;
    let json_body = body.to_json();
    let (bytes, content_type) = encode_body(json_body.as_ref());
    if let Some(ct) = content_type {
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            headers.push(("content-type".into(), ct.into()));
        }
    }
    let request = HttpRequest {
        url,
        method,
        headers,
        body: bytes,
        screen: Some(policy.address_screen()?),
    };
    let room = room.clone();
    let fut = async move {
        match client.send(request).await {
            Ok(resp) => match guest_value(&resp, response_type, &room) {
                Ok(v) => Ok(v),
                Err(AnswerError::Invalid(m)) => Err(HostErr::Catch(m)),
                Err(AnswerError::Over) => Err(HostErr::End(answer_over(
                    "httpFetch",
                    "the response body",
                    &room,
                    "fetch less",
                ))),
            },
            Err(HttpError::Failed(m)) => Err(HostErr::Catch(m)),
            Err(e @ HttpError::TooLarge { .. }) => {
                Err(HostErr::End(boundary_error("httpFetch", &e.to_string())))
            }
        }
    };
    Ok((Box::pin(fut), decl.timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_array_len_matches_the_text() {
        for args in [
            vec![],
            vec![serde_json::json!(20)],
            vec![
                serde_json::json!({"a": [1, "x\"é"], "b": null}),
                serde_json::json!("s"),
                serde_json::json!(2.5),
            ],
        ] {
            let text = serde_json::Value::Array(args.clone()).to_string();
            assert_eq!(json_array_len(&args), text.len());
        }
    }

    #[test]
    fn json_len_bound_is_an_upper_bound() {
        let args = vec![
            serde_json::json!(-1.2345678901234567e-300),
            serde_json::json!(u64::MAX),
            serde_json::json!("\u{1}\"é😀"),
            serde_json::json!(null),
            serde_json::json!(false),
        ];
        assert!(json_len_bound(&args).unwrap() >= json_array_len(&args));
        assert_eq!(json_len_bound(&[serde_json::json!([1])]), None);
    }

    #[test]
    fn json_object_len_matches_the_text() {
        for v in [
            serde_json::json!({}),
            serde_json::json!({ "a": 1 }),
            serde_json::json!({ "a\"é": [1, "x"], "b": null, "c": { "d": 2.5 } }),
        ] {
            let serde_json::Value::Object(m) = &v else {
                unreachable!()
            };
            assert_eq!(json_object_len(m.iter()), v.to_string().len());
        }
    }

    #[test]
    fn boundary_size_matches_json_text() {
        let v = JsValue::from_json(&serde_json::json!({
            "a": [1, 2.5, "x\"y\n", null, true, false, {"k": -0.001}],
            "é": "😀",
        }));
        let exact = v.json_len();
        assert!(check_boundary("t", &v, exact).is_ok());
        assert!(check_boundary("t", &v, exact - 1).is_err());
    }

    #[test]
    fn deep_values_are_refused_without_recursion() {
        let mut v = JsValue::Null;
        for _ in 0..200_000 {
            v = JsValue::Array(vec![v]);
        }
        let e = check_boundary("deep", &v, usize::MAX).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Boundary);
        assert!(e.message.starts_with(
            "Capability boundary rejected the return of 'deep': capability return nests deeper"
        ));
        drop_deep(v);
        let mut j = serde_json::Value::Null;
        for _ in 0..2000 {
            j = serde_json::Value::Array(vec![j]);
        }
        assert!(json_too_deep(&j, MAX_BOUNDARY_DEPTH));
        assert!(!json_too_deep(
            &serde_json::json!([[1]]),
            MAX_BOUNDARY_DEPTH
        ));
        // serde_json drops recursively; 2000 levels are fine on a test thread.
    }
}
