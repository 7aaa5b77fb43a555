//! Run code nobody trusts: `Eval` and `SafeFunction` over the fuel-metered AJS VM.
//!
//! The cargo feature `compiler` (on by default) brings the AJS compiler and with it `Eval`,
//! `SafeFunction`, [`Runner::compile_agent`], `run_agent` and `run_eval`. Without it (
//! `default-features = false`) the crate links no parser and runs only compiled artifacts:
//! [`load_artifact`], then [`Runner::run_program`].
//!
//! Three promises: **it halts** (every step costs fuel; a wall-clock timeout backs it up), **it
//! reaches nothing it was not handed** (the only way out is a capability the host injects) and
//! **it holds copies, not references** (data crosses the boundary as plain values).
//!
//! ```
//! # #[cfg(feature = "compiler")]
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use ajs::{Eval, SafeFunction, Options};
//! use serde_json::json;
//!
//! let out = Eval::new("a + b").context(json!({ "a": 1, "b": 2 })).run().await;
//! assert_eq!(out.result, ajs::JsValue::Number(3.0));
//! assert!(out.fuel_used > 0.0 && out.error.is_none());
//!
//! let add = SafeFunction::new(&["a", "b"], "return a + b", Options::default()).unwrap();
//! assert_eq!(add.call(&[json!(20), json!(22)]).await.result, ajs::JsValue::Number(42.0));
//! # });
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// The embedding guide (`docs/embedding.md`): its examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/embedding.md")]
pub struct EmbeddingGuide;

mod answer;
mod approvals;
mod atom_inputs;
mod bundle;
mod capabilities;
#[cfg(feature = "compiler")]
mod compilers;
mod driver;
mod error;
#[cfg(feature = "compiler")]
mod eval_warnings;
mod host_fn;
pub mod manifest;
mod signature;
pub mod store;

use std::collections::HashMap;
use std::sync::Arc;

pub use ajs_bytecode::program::MAX_ARTIFACT_BYTES;
pub use ajs_bytecode::{LoadError, Program, SourcePos, VerifiedProgram};
#[cfg(feature = "compiler")]
pub use ajs_compiler::{AtomInputs, CompileError, Warning};
pub use ajs_io::{FetchPolicy, LlmConfig, SAFE_RESPONSE_HEADERS};
#[cfg(feature = "http")]
pub use ajs_io::{HttpClient, LlmClient};
pub use ajs_vm::{ErrorKind as RunErrorKind, JsValue, LogLevel, LogLine, RunError};
pub use ajs_vm::{SnapshotError, TraceStep, DEFAULT_MAX_LOG_BYTES, MAX_TRACE_STEPS};
pub use approvals::{
    replay, ApprovalHandler, Approvals, ConfigError, Decision, FileNonceStore, GatedRunner,
    Journal, JournalEntry, MemoryNonceStore, NonceStore, PendingCall, Policy, ReplayError,
    ReplayMismatch, Report, ResumeError, RunResult, RunSettings, Suspended, Verdict,
    DEFAULT_MAX_JOURNAL_BYTES,
};
pub use bundle::{
    Bundle, BundleError, BundleKey, BundleSettings, BUNDLE_MAGIC, BUNDLE_VERSION, MIN_KEY_BYTES,
};
pub use capabilities::{
    AtomDecl, AtomFn, Capabilities, FetchCall, FetchFn, HostFuture, InputField, InputType, LlmFn,
    QuotaLedger, DEFAULT_ATOM_FUEL, DEFAULT_ATOM_TIMEOUT, MAX_RUN_WARNINGS,
};
pub use driver::CANCELLED_MESSAGE;
pub use error::{Error, ErrorInfo, ErrorKind};
pub use host_fn::{from_value, to_value, HostContext, HostError, ValueError};
pub use manifest::{Manifest, ProgramManifest};
pub use tokio_util::sync::CancellationToken;

#[cfg(feature = "compiler")]
use ajs_compiler::{CompileOptions, Mode};
use ajs_vm::{AtomSpec, HostArg, VmOptions, MILLI};

/// Default fuel budget (1000 fuel).
pub const DEFAULT_FUEL: f64 = 1000.0;
/// Default wall-clock limit: 4 minutes.
pub const DEFAULT_TIMEOUT_MS: u64 = 240_000;
/// Default source size cap in UTF-8 bytes.
pub const DEFAULT_MAX_SOURCE_BYTES: usize = 8192;
/// Default cap on the context or arguments copied in (JSON bytes).
pub const DEFAULT_ARGS_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Default cap on a capability's return (JSON bytes).
pub const DEFAULT_MEMBRANE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Smallest heap ceiling a runner accepts.
pub const MIN_HEAP_BYTES: usize = 64 * 1024;
/// Fuel cost of one `httpFetch`.
pub const HTTP_FETCH_FUEL: f64 = 5.0;
/// Fuel cost of one `llmPredict`.
pub const LLM_PREDICT_FUEL: f64 = 100.0;
/// Fuel cost of a host-registered atom.
pub const HOST_ATOM_FUEL: f64 = 1.0;
/// `httpFetch`'s own timeout.
pub const HTTP_FETCH_TIMEOUT_MS: u64 = 30_000;
/// `llmPredict`'s own timeout.
pub const LLM_PREDICT_TIMEOUT_MS: u64 = 120_000;
/// Default cap on the host calls of one `parallel(...)` in flight at once.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 16;
pub use ajs_vm::DEFAULT_MAX_PARALLEL_ITEMS;

/// Options shared by [`Eval`], [`SafeFunction`] and [`Runner`].
#[derive(Clone, Debug)]
pub struct Options {
    /// The work budget, in fuel (default 1000). Per call for a `SafeFunction`.
    pub fuel: f64,
    /// Wall-clock limit in milliseconds over the whole run, waiting included (default 4 min).
    /// Checked between slices of 200 fuel and around host calls; the clock starts when the
    /// run's first slice ends, so a run that finishes within it (a formula) never reads the
    /// clock, and a run may overshoot by up to one slice at its start and one at its end.
    pub timeout_ms: u64,
    /// Source size cap in UTF-8 bytes, checked before compiling; 0 disables (default 8192).
    pub max_source_bytes: usize,
    /// Cap on the JSON size of the context (`Eval`) or arguments (default 4 MiB).
    pub args_max_bytes: usize,
    /// Cap on the JSON size of a capability's return (default 4 MiB).
    pub membrane_max_bytes: usize,
    /// Rules for `httpFetch`.
    pub fetch_policy: Option<FetchPolicy>,
    /// The capabilities the code may use.
    pub capabilities: Capabilities,
    /// The host's way to stop a run: cancelling the token ends every run holding it with kind
    /// `Cancelled` (`Execution cancelled by the host`), dropping any host call in flight. Not
    /// catchable by the guest.
    pub cancel: Option<CancellationToken>,
    /// The clock behind `Date()` and `Date.now()`, in epoch milliseconds (decision 27; default
    /// the system clock). Inject a fixed source for deterministic tests.
    pub clock: fn() -> f64,
    /// The seed of the randomness behind `Math.random()`, `random` and `uuid` (decision 27;
    /// default a fresh random seed per run). Fix it for deterministic tests.
    pub random_seed: Option<u64>,
    /// Most items one `parallel(...)` may hold (default 1000); more is a catchable guest error.
    pub max_parallel_items: usize,
    /// Most host calls of one `parallel(...)` the driver keeps in flight at once (default 16);
    /// the others wait for a free slot. Every call still counts against quotas, `maxCalls` and
    /// the run's timeout.
    pub max_concurrent_calls: usize,
}

impl Default for Options {
    #[inline]
    fn default() -> Self {
        Options {
            fuel: DEFAULT_FUEL,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_source_bytes: DEFAULT_MAX_SOURCE_BYTES,
            args_max_bytes: DEFAULT_ARGS_MAX_BYTES,
            membrane_max_bytes: DEFAULT_MEMBRANE_MAX_BYTES,
            fetch_policy: None,
            capabilities: Capabilities::default(),
            cancel: None,
            clock: ajs_vm::system_clock,
            random_seed: None,
            max_parallel_items: DEFAULT_MAX_PARALLEL_ITEMS,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
        }
    }
}

/// An option outside its allowed range (decision 25).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("Invalid option {field}: {value} ({bound})")]
pub struct OptionError {
    /// The option's name as users write it.
    pub field: &'static str,
    /// The value given.
    pub value: String,
    /// The allowed range.
    pub bound: &'static str,
}

impl Options {
    /// Checks every option against its bound.
    ///
    /// # Errors
    /// [`OptionError`] naming the field, the value and the bound.
    pub fn validate(&self) -> Result<(), OptionError> {
        if !self.fuel.is_finite() || self.fuel < 0.0 {
            return Err(OptionError {
                field: "fuel",
                value: self.fuel.to_string(),
                bound: "must be a finite number >= 0",
            });
        }
        if self.timeout_ms == 0 {
            return Err(OptionError {
                field: "timeoutMs",
                value: "0".into(),
                bound: "must be at least 1",
            });
        }
        if self.max_concurrent_calls == 0 {
            return Err(OptionError {
                field: "maxConcurrentCalls",
                value: "0".into(),
                bound: "must be at least 1",
            });
        }
        if let Some(Err((field, message))) = self.fetch_policy.as_ref().map(FetchPolicy::validate) {
            return Err(OptionError {
                field: if field == "domains" {
                    "fetchPolicy.domains"
                } else {
                    "fetchPolicy.allowAddresses"
                },
                value: message,
                bound: "the forms are listed in docs/capabilities.md, 'The allowlist'",
            });
        }
        Ok(())
    }

    fn fuel_milli(&self) -> u64 {
        (self.fuel * MILLI as f64).round().min(1e18) as u64
    }

    fn atom_names(&self) -> Vec<String> {
        self.capabilities.atom_names()
    }

    fn vm_options(&self, quotas: &HashMap<String, u32>, max_heap_bytes: usize) -> VmOptions {
        self.vm_options_for(&self.atom_names(), quotas, max_heap_bytes)
    }

    /// Like `vm_options`, with only the atoms a program uses (`program.atoms`): a program that
    /// calls none builds no map (the per-run cost of a small snippet).
    #[inline]
    fn vm_options_for(
        &self,
        used: &[String],
        quotas: &HashMap<String, u32>,
        max_heap_bytes: usize,
    ) -> VmOptions {
        let mut atoms = no_atoms();
        let offered = if used.is_empty() {
            Vec::new()
        } else {
            self.atom_names()
        };
        for name in offered.into_iter().filter(|n| used.contains(n)) {
            let fuel = self
                .capabilities
                .decl(&name)
                .map_or(HOST_ATOM_FUEL, |d| d.fuel);
            let quota = quotas.get(&name).copied();
            atoms.insert(
                name,
                AtomSpec {
                    cost: (fuel.max(0.0) * MILLI as f64).round() as u64,
                    quota,
                },
            );
        }
        // every field written out: `..VmOptions::default()` would build (and drop) a second map
        VmOptions {
            fuel: self.fuel_milli(),
            max_heap_bytes,
            max_call_depth: ajs_vm::DEFAULT_MAX_CALL_DEPTH,
            max_log_lines: ajs_vm::DEFAULT_MAX_LOG_LINES,
            max_log_bytes: ajs_vm::DEFAULT_MAX_LOG_BYTES,
            atoms,
            random_seed: self.random_seed.unwrap_or_else(random_seed),
            clock: self.clock,
            max_parallel_items: self.max_parallel_items,
            interrupt: self.interrupt(None),
        }
    }

    /// The run's interrupt for the VM's natives: `timeout_ms` from `deadline` (`None`: from
    /// when a native first checks, until the driver starts the run's clock) and `cancel`.
    pub(crate) fn interrupt(&self, deadline: Option<std::time::Instant>) -> ajs_vm::Interrupt {
        let cancel = self.cancel.clone().map(|t| {
            std::sync::Arc::new(move || t.is_cancelled()) as ajs_vm::interrupt::CancelCheck
        });
        let mut i = ajs_vm::Interrupt::new(self.timeout_ms, cancel);
        i.deadline = deadline;
        i
    }
}

/// Loads a compiled artifact (`ajs compile`'s output) through the verifier, with its span sidecar
/// when given. Refuses another format or cost-table version (naming both), another instruction
/// set, and anything that does not verify (fuel charges are recomputed, never trusted), and an
/// embedded manifest that is not the program's (recomputed, never trusted); nothing from a
/// refused artifact runs.
///
/// # Errors
/// [`LoadError`] saying what is wrong and where.
pub fn load_artifact(bytes: &[u8], spans: Option<&[u8]>) -> Result<VerifiedProgram, LoadError> {
    // the manifest is the artifact's own program's (without the sidecar's spans)
    let (program, embedded) = Program::from_bytes_and_manifest(bytes)?;
    manifest::check(&program, embedded.as_deref())?;
    match spans {
        Some(s) => Program::from_bytes_with_spans(bytes, s),
        None => Ok(program),
    }
}

/// A fresh seed per run: a per-thread random start (from the OS, through `RandomState`)
/// stepped by SplitMix64, so seeds never repeat within a thread and differ between threads and
/// processes, without hashing on every run.
fn random_seed() -> u64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static NEXT: Cell<u64> = Cell::new({
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0);
            h.finish()
        });
    }
    NEXT.with(|n| {
        let x = n.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        n.set(x);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// What every run returns: `{ result, fuelUsed, error }`. After an error `result` is
/// `undefined` (decision 15).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The value produced (JavaScript values kept as they are).
    pub result: JsValue,
    /// Fuel spent, in fuel.
    pub fuel_used: f64,
    /// The error, if the run failed.
    pub error: Option<ErrorInfo>,
    /// The run's log (`console.*`), which `Eval` and `SafeFunction` users may ignore.
    pub log: Vec<LogLine>,
    /// Run-time warnings (decision 39), each once: an atom input the atom does not declare
    /// (decision 29: ignored), an `llmPredict` option the model client does not read.
    pub warnings: Vec<String>,
}

impl Outcome {
    pub(crate) fn failed(
        message: impl Into<String>,
        kind: impl Into<ErrorKind>,
        pos: Option<SourcePos>,
        fuel_used: f64,
    ) -> Outcome {
        let message = message.into();
        let kind = kind.into().classified(&message);
        Outcome {
            result: JsValue::Undefined,
            fuel_used,
            error: Some(Error { message, kind, pos }),
            log: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The result, or the error as a Rust error (the fuel used and the log are dropped; read
    /// them from the outcome first when needed).
    ///
    /// ```
    /// # #[cfg(feature = "compiler")] {
    /// use ajs::{Eval, ErrorKind, JsValue};
    /// assert_eq!(Eval::new("1 + 2").run_sync().into_result(), Ok(JsValue::Number(3.0)));
    /// let e = Eval::new("while (true) {}\nreturn 1").fuel(10.0).run_sync().into_result().unwrap_err();
    /// assert_eq!((e.kind, e.message.as_str()), (ErrorKind::OutOfFuel, "Out of Fuel"));
    /// # }
    /// ```
    ///
    /// # Errors
    /// The run's [`Error`] when it failed.
    pub fn into_result(self) -> Result<JsValue, Error> {
        match self.error {
            None => Ok(self.result),
            Some(e) => Err(e),
        }
    }

    /// `{ "result": …, "fuelUsed": …, "error": { "message": … } }` by `JSON.stringify`'s rules;
    /// `result` omitted when undefined, `error` when there is none (decision 28).
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        if let Some(r) = self.result.to_json() {
            m.insert("result".into(), r);
        }
        m.insert(
            "fuelUsed".into(),
            JsValue::Number(self.fuel_used)
                .to_json()
                .unwrap_or(serde_json::Value::Null),
        );
        if let Some(e) = &self.error {
            m.insert("error".into(), serde_json::json!({ "message": e.message }));
        }
        if !self.warnings.is_empty() {
            m.insert("warnings".into(), serde_json::json!(self.warnings));
        }
        serde_json::Value::Object(m)
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

#[cfg(feature = "compiler")]
fn source_check(source: &str, opts: &Options) -> Result<(), String> {
    if opts.max_source_bytes != 0 && source.len() > opts.max_source_bytes {
        return Err(format!(
            "Source is {} bytes, over the {}-byte limit (maxSourceBytes)",
            source.len(),
            opts.max_source_bytes
        ));
    }
    Ok(())
}

fn too_deep(what: &str) -> Outcome {
    Outcome::failed(
        format!(
            "{what} nested deeper than {} levels cannot cross the boundary",
            ajs_vm::MAX_BOUNDARY_DEPTH
        ),
        ErrorKind::Input,
        None,
        0.0,
    )
}

#[cfg(feature = "compiler")]
fn compile_error(e: CompileError) -> Outcome {
    let pos = SourcePos {
        line: e.line,
        col: e.column,
    };
    Outcome::failed(e.to_string(), ErrorKind::Compile, Some(pos), 0.0)
}

#[cfg(feature = "compiler")]
/// Runs a snippet once (the seed's `Eval`). The code sees only the context, as variables.
#[derive(Clone, Debug, Default)]
pub struct Eval {
    /// The snippet.
    pub code: String,
    /// Values the code sees as variables, copied in (only the names it uses).
    pub context: serde_json::Map<String, serde_json::Value>,
    /// Limits and capabilities.
    pub options: Options,
}

#[cfg(feature = "compiler")]
impl Eval {
    /// A snippet with an empty context and default options.
    pub fn new(code: impl Into<String>) -> Eval {
        Eval {
            code: code.into(),
            ..Eval::default()
        }
    }

    /// Sets the context (a JSON object; anything else means an empty context).
    pub fn context(mut self, context: serde_json::Value) -> Eval {
        self.context = match context {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        self
    }

    /// Sets the context from any `Serialize` value that is a map or a struct (its fields become
    /// the code's variables).
    ///
    /// ```
    /// #[derive(serde::Serialize)]
    /// struct Cart { price: f64, qty: u32 }
    /// let eval = ajs::Eval::new("price * qty").context_of(&Cart { price: 2.5, qty: 4 }).unwrap();
    /// assert_eq!(eval.run_sync().into_result(), Ok(ajs::JsValue::Number(10.0)));
    /// assert!(ajs::Eval::new("1").context_of(&[1, 2]).is_err());
    /// ```
    ///
    /// # Errors
    /// [`ValueError`] when the value is not a map or cannot be written as JSON data.
    pub fn context_of<T: serde::Serialize + ?Sized>(
        mut self,
        context: &T,
    ) -> Result<Eval, ValueError> {
        match serde_json::to_value(context) {
            Ok(serde_json::Value::Object(m)) => {
                self.context = m;
                Ok(self)
            }
            Ok(other) => Err(ValueError(format!(
                "the context must be a map or a struct, got {}",
                json_kind(&other)
            ))),
            Err(e) => Err(ValueError(e.to_string())),
        }
    }

    /// Sets all options.
    pub fn options(mut self, options: Options) -> Eval {
        self.options = options;
        self
    }

    /// Sets the fuel budget.
    pub fn fuel(mut self, fuel: f64) -> Eval {
        self.options.fuel = fuel;
        self
    }

    /// Sets the wall-clock limit.
    pub fn timeout_ms(mut self, ms: u64) -> Eval {
        self.options.timeout_ms = ms;
        self
    }

    /// Compiles and runs. Never panics and never returns `Err`: every failure is in `error`.
    pub fn run(&self) -> impl std::future::Future<Output = Outcome> + Send + '_ {
        driver::lazy(move || default_runner().start_eval(&self.code, &self.context, &self.options))
    }

    /// Compiles and runs on this thread without an async runtime — for code that calls no atom
    /// (a formula, a rule): the same result, fuel, limits, timeout and cancellation as
    /// [`Eval::run`], at a fraction of the fixed cost. Code that calls atoms gets an `Input`
    /// error naming the async API instead.
    ///
    /// ```
    /// use ajs::{Eval, JsValue};
    /// let out = Eval::new("a + b").context(serde_json::json!({ "a": 1, "b": 2 })).run_sync();
    /// assert_eq!(out.result, JsValue::Number(3.0));
    /// let out = Eval::new("httpFetch({ url: 'https://example.com' })").run_sync();
    /// assert!(out.error.unwrap().message.contains("need the async API"));
    /// ```
    pub fn run_sync(&self) -> Outcome {
        default_runner().run_eval_sync(&self.code, &self.context, &self.options)
    }
}

#[cfg(feature = "compiler")]
/// A function body compiled once and called many times (the seed's `SafeFunction`). Each call
/// gets the full budget.
#[derive(Clone, Debug)]
pub struct SafeFunction {
    program: VerifiedProgram,
    /// For each parameter of the compiled entry, the index of the argument it receives.
    arg_index: Vec<Option<usize>>,
    options: Options,
    /// The VM options of every call, built once (a call only draws its own seed).
    vm_opts: VmOptions,
}

#[cfg(feature = "compiler")]
/// Why a `SafeFunction` could not be created.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CreateError {
    /// An option is out of range.
    #[error(transparent)]
    Option(#[from] OptionError),
    /// The body is over `maxSourceBytes`.
    #[error("{0}")]
    SourceTooLarge(String),
    /// The body does not compile.
    #[error(transparent)]
    Compile(#[from] CompileError),
}

#[cfg(feature = "compiler")]
impl SafeFunction {
    /// Compiles `body` with parameter names `params`.
    ///
    /// # Errors
    /// [`CreateError`] when an option is invalid, the body is too large or does not compile.
    pub fn new<S: AsRef<str>>(
        params: &[S],
        body: &str,
        options: Options,
    ) -> Result<SafeFunction, CreateError> {
        options.validate()?;
        source_check(body, &options).map_err(CreateError::SourceTooLarge)?;
        let params: Vec<String> = params.iter().map(|p| p.as_ref().to_string()).collect();
        let atoms = options.atom_names();
        let program = compilers::with(|kept| {
            kept.compiler.compile(
                body,
                &CompileOptions {
                    mode: Mode::FunctionBody,
                    externals: &params,
                    atoms: &atoms,
                    source_name: "<source>",
                },
            )
        })?;
        let program = program.verify().map_err(|e| {
            CreateError::Compile(CompileError {
                message: format!("internal compiler error: {e}"),
                source_name: "<source>".into(),
                line: 1,
                column: 0,
            })
        })?;
        let arg_index = program.functions[program.entry as usize]
            .params
            .iter()
            .map(|w| params.iter().position(|p| p == w))
            .collect();
        let vm_opts =
            options.vm_options_for(&program.atoms, no_quotas(), ajs_vm::DEFAULT_MAX_HEAP_BYTES);
        Ok(SafeFunction {
            program,
            arg_index,
            options,
            vm_opts,
        })
    }

    /// The compiled program (for disassembly or artifacts).
    pub fn program(&self) -> &VerifiedProgram {
        &self.program
    }

    /// Calls the function; arguments are copied in under the parameter names (extra ones are
    /// ignored, missing ones are `undefined`).
    pub fn call<'a>(
        &'a self,
        args: &'a [serde_json::Value],
    ) -> impl std::future::Future<Output = Outcome> + Send + 'a {
        driver::lazy(move || {
            let seed = match self.prepare(args) {
                Ok(s) => s,
                Err(o) => return driver::Run::Done(Some(*o)),
            };
            let env = driver::RunEnv {
                depth: 0,
                quotas: no_quotas(),
                ledger: None,
                run_id: Default::default(),
            };
            driver::run_program(
                &self.program,
                self.args(args),
                &self.vm_opts,
                seed,
                &self.options,
                env,
            )
        })
    }

    /// Calls the function on this thread without an async runtime — for code that calls no
    /// atom (a formula, a rule): the same result, fuel, limits, timeout and cancellation as
    /// [`SafeFunction::call`], at a fraction of the fixed cost. Code that calls atoms gets an
    /// `Input` error naming the async API instead.
    ///
    /// ```
    /// use ajs::{JsValue, Options, SafeFunction};
    /// let price = SafeFunction::new(&["qty", "unit"], "return qty * unit * (qty > 10 ? 0.9 : 1)", Options::default()).unwrap();
    /// let out = price.call_sync(&[serde_json::json!(20), serde_json::json!(2.5)]);
    /// assert_eq!(out.result, JsValue::Number(45.0));
    /// ```
    pub fn call_sync(&self, args: &[serde_json::Value]) -> Outcome {
        match self.prepare(args) {
            Ok(seed) => driver::run_program_sync(
                &self.program,
                self.args(args),
                &self.vm_opts,
                seed,
                &self.options,
            ),
            Err(o) => *o,
        }
    }

    /// [`SafeFunction::call`] with the arguments from any `Serialize` value that is a sequence:
    /// a tuple (`&(4, "x")`), a `Vec`, an array. Anything else is refused with an `Input` error.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use ajs::{JsValue, Options, SafeFunction};
    /// let f = SafeFunction::new(&["name", "n"], "return name + n", Options::default()).unwrap();
    /// assert_eq!(f.call_with(&("pen", 2)).await.result, JsValue::String("pen2".into()));
    /// assert_eq!(f.call_with_sync(&["a", "b"]).result, JsValue::String("ab".into()));
    /// # });
    /// ```
    pub async fn call_with<A: serde::Serialize + ?Sized>(&self, args: &A) -> Outcome {
        match serde_args(args) {
            Ok(a) => self.call(&a).await,
            Err(o) => *o,
        }
    }

    /// [`SafeFunction::call_sync`] with the arguments from any `Serialize` sequence (see
    /// [`SafeFunction::call_with`]).
    pub fn call_with_sync<A: serde::Serialize + ?Sized>(&self, args: &A) -> Outcome {
        match serde_args(args) {
            Ok(a) => self.call_sync(&a),
            Err(o) => *o,
        }
    }

    /// The argument each parameter of the entry receives (copied in by the VM).
    fn args<'a>(
        &'a self,
        args: &'a [serde_json::Value],
    ) -> impl Iterator<Item = HostArg<'a>> + Send + 'a {
        self.arg_index.iter().map(move |i| {
            i.and_then(|i| args.get(i))
                .map_or(HostArg::Undefined, HostArg::Json)
        })
    }

    /// Checks the arguments' depth and size; the seed of one call's randomness when the options
    /// fix none (`None`: the one in `vm_opts`). (Inlined: its answer is then not returned
    /// through memory.)
    #[inline]
    fn prepare(&self, args: &[serde_json::Value]) -> Result<Option<u64>, Box<Outcome>> {
        // one pass: the depth of every argument, and a bound on the size of plain ones
        let mut bound = Some(2 + args.len());
        for a in args {
            match driver::scalar_len_bound(a) {
                // a scalar or a string: nothing nested
                Some(n) => bound = bound.map(|b| b + n),
                None => {
                    if driver::json_too_deep(a, ajs_vm::MAX_BOUNDARY_DEPTH) {
                        return Err(Box::new(too_deep("Arguments")));
                    }
                    bound = None;
                }
            }
        }
        let limit = self.options.args_max_bytes;
        let small = bound.is_some_and(|b| b <= limit);
        let size = if small {
            0
        } else {
            driver::json_array_len(args)
        };
        if size > limit {
            return Err(Box::new(Outcome::failed(
                format!(
                    "Arguments are {size} bytes, over the {}-byte limit (argsMaxBytes)",
                    self.options.args_max_bytes
                ),
                ErrorKind::Input,
                None,
                0.0,
            )));
        }
        // the call's own seed; every other option is `vm_opts` as built once
        Ok(match self.options.random_seed {
            Some(_) => None,
            None => Some(random_seed()),
        })
    }
}

/// A `Serialize` sequence as call arguments, or the refusal of anything else.
#[cfg(feature = "compiler")]
fn serde_args<A: serde::Serialize + ?Sized>(
    args: &A,
) -> Result<Vec<serde_json::Value>, Box<Outcome>> {
    let refuse = |m: String| Box::new(Outcome::failed(m, ErrorKind::Input, None, 0.0));
    match serde_json::to_value(args) {
        Ok(serde_json::Value::Array(a)) => Ok(a),
        Ok(other) => Err(refuse(format!(
            "Arguments must be a sequence (a tuple, a Vec or an array), got {}",
            json_kind(&other)
        ))),
        Err(e) => Err(refuse(format!("Arguments could not be converted: {e}"))),
    }
}

/// The runner behind `Eval` (no quotas, the default heap ceiling), shared.
#[cfg(feature = "compiler")]
fn default_runner() -> &'static Runner {
    static DEFAULT: std::sync::OnceLock<Runner> = std::sync::OnceLock::new();
    DEFAULT.get_or_init(Runner::default)
}

/// An empty atom map: no allocation, and a hasher copied from a shared one rather than seeded
/// per map (the keys are the host's atom names, never the guest's).
fn no_atoms() -> HashMap<String, ajs_vm::AtomSpec> {
    static STATE: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    HashMap::with_hasher(
        STATE
            .get_or_init(std::collections::hash_map::RandomState::new)
            .clone(),
    )
}

/// An empty quota map, shared (a `SafeFunction` call has no quotas).
fn no_quotas() -> &'static HashMap<String, u32> {
    static EMPTY: std::sync::OnceLock<HashMap<String, u32>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(HashMap::new)
}

/// Contexts with at most this many keys are searched by comparing keys (cheaper than hashing).
#[cfg(feature = "compiler")]
const SCAN_KEYS: usize = 16;

/// The context's value under `key`: a scan of a small context, a hash lookup otherwise.
#[cfg(feature = "compiler")]
fn context_get<'c>(
    context: &'c serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'c serde_json::Value> {
    if context.len() <= SCAN_KEYS {
        context
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v)
    } else {
        context.get(key)
    }
}

/// Calls `f` with the context's keys as owned strings (what the compiler takes), written into
/// the reused buffer `keys`, so a run does not allocate a string per key. A buffer that grew
/// past a few kilobytes is not kept.
#[cfg(feature = "compiler")]
fn with_context_keys<R>(
    keys: &mut Vec<String>,
    context: &serde_json::Map<String, serde_json::Value>,
    f: impl FnOnce(&[String]) -> R,
) -> R {
    /// Most bytes (the strings' and the vector's capacity) the buffer may keep between runs.
    const KEEP_BYTES: usize = 4096;
    keys.truncate(context.len());
    let mut bytes = 0;
    for (i, k) in context.keys().enumerate() {
        match keys.get_mut(i) {
            Some(s) => {
                s.clear();
                s.push_str(k);
                bytes += s.capacity();
            }
            None => {
                bytes += k.len();
                keys.push(k.clone());
            }
        }
    }
    let r = f(keys);
    if bytes + keys.capacity() * std::mem::size_of::<String>() > KEEP_BYTES {
        *keys = Vec::new();
    }
    r
}

/// The context values an `Eval`'s parameters receive (`None`: the key is absent), held inline
/// for up to 8 parameters.
#[cfg(feature = "compiler")]
type Found<'c> = smallvec::SmallVec<[Option<&'c serde_json::Value>; 8]>;

/// The run's arguments: each found context value as JSON, an absent key as `undefined`.
#[cfg(feature = "compiler")]
fn found_args<'a>(found: &'a Found<'_>) -> impl Iterator<Item = HostArg<'a>> {
    found
        .iter()
        .map(|a| a.map_or(HostArg::Undefined, HostArg::Json))
}

/// The agent runner: like `Eval`, plus per-atom quotas, a heap ceiling of your choosing and the
/// incoming agent depth.
#[derive(Clone, Debug)]
pub struct Runner {
    /// Most calls per atom per run.
    pub quotas: HashMap<String, u32>,
    /// Live-heap ceiling in bytes (default 64 MiB).
    pub max_heap_bytes: usize,
    /// The incoming `X-Agent-Depth` (0 for a run nobody else started).
    pub depth: u32,
    /// Call counters shared with other runs: when set, every call of an atom listed in
    /// `quotas` also takes a slot in the ledger, and the run ends with `Quota exceeded for
    /// '<atom>': N calls allowed` once the ledger's count reaches the quota, whichever run
    /// made the earlier calls.
    pub ledger: Option<Arc<QuotaLedger>>,
}

impl Default for Runner {
    fn default() -> Self {
        Runner {
            quotas: HashMap::new(),
            max_heap_bytes: ajs_vm::DEFAULT_MAX_HEAP_BYTES,
            depth: 0,
            ledger: None,
        }
    }
}

impl Runner {
    /// Checks the runner's own options.
    ///
    /// # Errors
    /// [`OptionError`] naming the field.
    pub fn validate(&self) -> Result<(), OptionError> {
        if self.max_heap_bytes < MIN_HEAP_BYTES {
            return Err(OptionError {
                field: "maxHeapBytes",
                value: self.max_heap_bytes.to_string(),
                bound: "must be at least 65536",
            });
        }
        Ok(())
    }

    #[cfg(feature = "compiler")]
    /// Compiles an agent program (top-level functions, the last one the entry).
    ///
    /// # Errors
    /// [`CreateError`] when an option is invalid, the source is too large or does not compile.
    pub fn compile_agent(source: &str, options: &Options) -> Result<VerifiedProgram, CreateError> {
        // (no warnings asked: the compile sets up no warning sink)
        Runner::compile_agent_checked(source, options, false).map(|(p, _)| p)
    }

    #[cfg(feature = "compiler")]
    /// [`Runner::compile_agent`], with the compile-time warnings (decision 39) beside the
    /// program: atom calls whose written-out input names an input the atom does not declare.
    ///
    /// # Errors
    /// As [`Runner::compile_agent`].
    pub fn compile_agent_with_warnings(
        source: &str,
        options: &Options,
    ) -> Result<(VerifiedProgram, Vec<Warning>), CreateError> {
        Runner::compile_agent_checked(source, options, true)
    }

    #[cfg(feature = "compiler")]
    /// [`Runner::compile_agent`], with the compile-time warnings when `warn`.
    fn compile_agent_checked(
        source: &str,
        options: &Options,
        warn: bool,
    ) -> Result<(VerifiedProgram, Vec<Warning>), CreateError> {
        options.validate()?;
        source_check(source, options).map_err(CreateError::SourceTooLarge)?;
        let atoms = options.atom_names();
        let opts = CompileOptions {
            mode: Mode::Agent,
            externals: &[],
            atoms: &atoms,
            source_name: "<source>",
        };
        let (program, warnings) = if warn {
            let inputs = options.capabilities.atom_inputs();
            compilers::with(|kept| kept.compiler.compile_with_warnings(source, &opts, &inputs))?
        } else {
            let program = compilers::with(|kept| kept.compiler.compile(source, &opts))?;
            (program, Vec::new())
        };
        let program = program.verify().map_err(|e| {
            CreateError::Compile(CompileError {
                message: format!("internal compiler error: {e}"),
                source_name: "<source>".into(),
                line: 1,
                column: 0,
            })
        })?;
        Ok((program, warnings))
    }

    #[cfg(feature = "compiler")]
    /// Compiles and runs an agent program with `args` (a JSON object keyed by parameter name).
    pub async fn run_agent(
        &self,
        source: &str,
        args: &serde_json::Value,
        options: &Options,
    ) -> Outcome {
        match Runner::compile_agent(source, options) {
            Ok(p) => self.run_program(&p, args, options).await,
            Err(CreateError::Compile(e)) => compile_error(e),
            Err(e) => Outcome::failed(e.to_string(), ErrorKind::Input, None, 0.0),
        }
    }

    /// Runs a compiled agent program (for example one loaded from an artifact) with `args`,
    /// checked against the entry's signature. The entry must return an object, `null` or nothing.
    pub async fn run_program(
        &self,
        program: &VerifiedProgram,
        args: &serde_json::Value,
        options: &Options,
    ) -> Outcome {
        if let Err(e) = options.validate().and_then(|_| self.validate()) {
            return Outcome::failed(e.to_string(), ErrorKind::Input, None, 0.0);
        }
        let empty = serde_json::Map::new();
        let obj = match args {
            serde_json::Value::Object(m) => m,
            serde_json::Value::Null => &empty,
            other => {
                return Outcome::failed(
                    format!(
                        "Arguments must be an object keyed by parameter name, got {}",
                        json_kind(other)
                    ),
                    ErrorKind::Input,
                    None,
                    0.0,
                )
            }
        };
        if driver::json_too_deep(args, ajs_vm::MAX_BOUNDARY_DEPTH) {
            return too_deep("Arguments");
        }
        // the JSON text's length without writing it (`null` is 4 bytes)
        let size = match args {
            serde_json::Value::Object(m) => {
                driver::json_object_len_within(m.iter(), options.args_max_bytes)
            }
            _ => 4,
        };
        if size > options.args_max_bytes {
            return Outcome::failed(
                format!(
                    "Arguments are {size} bytes, over the {}-byte limit (argsMaxBytes)",
                    options.args_max_bytes
                ),
                ErrorKind::Input,
                None,
                0.0,
            );
        }
        let values = match signature::check_args(program, obj) {
            Ok(v) => v,
            Err(m) => return Outcome::failed(m, ErrorKind::Input, None, 0.0),
        };
        let run = {
            // scoped: the options are read at the start only, not kept across the await
            let vm_opts = options.vm_options_for(&program.atoms, &self.quotas, self.max_heap_bytes);
            let args = values.iter().map(HostArg::Value);
            driver::run_program(program, args, &vm_opts, None, options, self.env())
        };
        let mut out = run.await;
        if out.error.is_none() {
            let kind = match &out.result {
                JsValue::Object(_) | JsValue::Null | JsValue::Undefined => None,
                JsValue::Array(_) => Some("array"),
                JsValue::String(_) => Some("string"),
                JsValue::Number(_) => Some("number"),
                JsValue::Bool(_) => Some("boolean"),
            };
            if let Some(k) = kind {
                let fuel = out.fuel_used;
                let log = std::mem::take(&mut out.log);
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

    #[cfg(feature = "compiler")]
    /// Compiles and runs a snippet by `Eval`'s rules under this runner's quotas and heap ceiling.
    pub async fn run_eval(
        &self,
        code: &str,
        context: &serde_json::Map<String, serde_json::Value>,
        options: &Options,
    ) -> Outcome {
        self.start_eval(code, context, options).await
    }

    #[cfg(feature = "compiler")]
    /// The synchronous start of [`Runner::run_eval`]: checks, compile, the VM's first slice.
    /// The program and the arguments are dropped before any await (the future stays small).
    fn start_eval<'a>(
        &'a self,
        code: &str,
        context: &serde_json::Map<String, serde_json::Value>,
        options: &'a Options,
    ) -> driver::Run<'a> {
        self.prepare_eval(
            code,
            context,
            options,
            |program, found, vm_opts, warnings| {
                let run = driver::run_program(
                    program,
                    found_args(found),
                    vm_opts,
                    None,
                    options,
                    self.env(),
                );
                eval_warnings::add_to_run(run, warnings)
            },
            |o| driver::Run::Done(Some(o)),
        )
    }

    #[cfg(feature = "compiler")]
    /// [`Runner::run_eval`] on this thread without an async runtime, for code that calls no atom
    /// (see [`Eval::run_sync`]).
    pub fn run_eval_sync(
        &self,
        code: &str,
        context: &serde_json::Map<String, serde_json::Value>,
        options: &Options,
    ) -> Outcome {
        self.prepare_eval(
            code,
            context,
            options,
            |program, found, vm_opts, warnings| {
                let mut o =
                    driver::run_program_sync(program, found_args(found), vm_opts, None, options);
                eval_warnings::add(&mut o, warnings);
                o
            },
            |o| o,
        )
    }

    #[cfg(feature = "compiler")]
    /// Checks the options and the source, compiles, looks up the context keys the code uses
    /// (checking their depth and size), then hands the program, their values and the VM options
    /// to `run`; a refusal goes to `refused` instead. (A continuation rather than a returned
    /// tuple: the run's result is built where the caller wants it, with nothing large moved.)
    fn prepare_eval<'c, R>(
        &self,
        code: &str,
        context: &'c serde_json::Map<String, serde_json::Value>,
        options: &Options,
        run: impl FnOnce(&VerifiedProgram, &Found<'c>, &VmOptions, Vec<String>) -> R,
        refused: impl FnOnce(Outcome) -> R,
    ) -> R {
        let fail = |m: String| Outcome::failed(m, ErrorKind::Input, None, 0.0);
        if let Err(e) = options.validate().and_then(|_| self.validate()) {
            return refused(fail(e.to_string()));
        }
        if let Err(m) = source_check(code, options) {
            return refused(fail(m));
        }
        let atoms = options.capabilities.atom_names_cow();
        let program = compilers::with(|kept| {
            let compilers::Kept { compiler, keys } = kept;
            with_context_keys(keys, context, |externals| {
                let opts = CompileOptions {
                    mode: Mode::Eval,
                    externals,
                    atoms: &atoms,
                    source_name: "<source>",
                };
                // (atom inputs are checked at run time for Eval: no compile-time inputs here)
                let compiled = if eval_warnings::may_warn(code) {
                    compiler.compile_with_warnings(code, &opts, &AtomInputs::default())
                } else {
                    compiler.compile(code, &opts).map(|p| (p, Vec::new()))
                };
                let (program, warnings) = compiled.map_err(|e| Box::new(compile_error(e)))?;
                // verified here, so that only the (small) verified program moves out
                program
                    .verify()
                    .map(|p| (p, warnings))
                    .map_err(|e| Box::new(fail(format!("internal compiler error: {e}"))))
            })
        });
        let (program, warnings) = match program {
            Ok(p) => p,
            Err(o) => return refused(*o),
        };
        // one lookup per key the code uses: depth, size and the copy all work from it
        let used = &program.functions[program.entry as usize].params;
        let found: Found = used.iter().map(|n| context_get(context, n)).collect();
        let entries = || {
            used.iter()
                .zip(found.iter())
                .filter_map(|(n, v)| Some((n, (*v)?)))
        };
        // one pass: the depth of every value, and a bound on the size of plain ones
        let mut bound = Some(2usize);
        for (n, v) in entries() {
            if driver::json_too_deep(v, ajs_vm::MAX_BOUNDARY_DEPTH) {
                return refused(too_deep("Context"));
            }
            bound = bound.and_then(|b| Some(b + driver::entry_len_bound(n, v)?));
        }
        let size = match bound {
            Some(b) if b <= options.args_max_bytes => 0,
            _ => driver::json_object_len(entries()),
        };
        if size > options.args_max_bytes {
            return refused(fail(format!(
                "Context is {size} bytes, over the {}-byte limit (argsMaxBytes)",
                options.args_max_bytes
            )));
        }
        let vm_opts = options.vm_options_for(&program.atoms, &self.quotas, self.max_heap_bytes);
        run(&program, &found, &vm_opts, eval_warnings::lines(warnings))
    }

    /// Checks, before anything runs, that every atom the program calls (`Program::atoms`) is
    /// one these options provide: `httpFetch`, `llmPredict` or a registered host atom.
    ///
    /// # Errors
    /// `This program calls the atom 'NAME', which this runner does not provide`.
    pub fn check_atoms(program: &Program, options: &Options) -> Result<(), String> {
        match program
            .atoms
            .iter()
            .find(|a| options.capabilities.decl(a).is_none())
        {
            Some(a) => Err(format!(
                "This program calls the atom '{a}', which this runner does not provide"
            )),
            None => Ok(()),
        }
    }

    fn env(&self) -> driver::RunEnv<'_> {
        driver::RunEnv {
            depth: self.depth,
            quotas: &self.quotas,
            ledger: self.ledger.as_ref(),
            run_id: Default::default(),
        }
    }
}
