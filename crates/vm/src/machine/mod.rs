//! The interpreter: a stackless register machine run in slices.

use std::collections::HashMap;
use std::sync::Arc;

use ajs_bytecode::isa::MILLI;
use ajs_bytecode::{Constant, SourcePos, VerifiedProgram};

use crate::error::{ErrorKind, Fault, OpResult, RunError};
use crate::heap::{Heap, Key};
use crate::ops::TYPE_NAMES;
use crate::setup::atoms_of;
use crate::value::{JsValue, Value, MAX_BOUNDARY_DEPTH};

mod dispatch;
pub(crate) mod export;
mod frames;
mod general;
mod host;
mod journal;
mod meter;
pub(crate) mod parallel;
mod props;
pub(crate) mod snapshot;
#[cfg(test)]
mod tests;
mod trace;
mod window;

pub(crate) use frames::MAX_FRAMES;
use frames::{Frame, Frames};
pub(crate) use general::js_pow;
#[cfg(test)]
pub(crate) use general::js_rem;
use host::HostCalls;
use journal::Journal;
pub(crate) use meter::Meter;
pub(crate) use props::{array_index, ordered_keys};
use trace::Trace;
pub use trace::MAX_TRACE_STEPS;
use window::{first_registers, window_of, SMALL_WINDOW};
pub(crate) use window::{WINDOW, WINDOW_FILL};

pub use export::{DEFAULT_MAX_LOG_BYTES, MAX_MESSAGE_BYTES};
pub use parallel::{DEFAULT_MAX_PARALLEL_ITEMS, MAX_PARALLEL_NESTING};

/// Default fuel budget: 1000 fuel.
pub const DEFAULT_FUEL: u64 = 1000 * MILLI;
/// Default live-heap ceiling: 64 MiB.
pub const DEFAULT_MAX_HEAP_BYTES: usize = 64 * 1024 * 1024;
/// Default cap on nested calls.
pub const DEFAULT_MAX_CALL_DEPTH: usize = 256;
/// Default number of log lines kept.
pub const DEFAULT_MAX_LOG_LINES: usize = 1000;
/// Code units per milli-fuel of a regex scan (regexp.rs only; strings: `price::MILLI_PER_UNIT`).
pub const UNITS_PER_MILLI: u64 = 8;
/// Milli-fuel charged per array element or object key a builtin touches (a copy, a trace).
pub const MILLI_PER_ELEMENT: u64 = 96;

/// What a host operation costs and how often it may be called.
#[derive(Clone, Debug, PartialEq)]
pub struct AtomSpec {
    /// Fuel charged per call, in milli-fuel.
    pub cost: u64,
    /// Most calls per run (`None`: unlimited).
    pub quota: Option<u32>,
}

/// Limits and sources for one run. Every limit has a documented default.
#[derive(Clone, Debug)]
pub struct VmOptions {
    /// Fuel budget in milli-fuel (default [`DEFAULT_FUEL`]).
    pub fuel: u64,
    /// Live-heap ceiling in bytes (default [`DEFAULT_MAX_HEAP_BYTES`]).
    pub max_heap_bytes: usize,
    /// Nested-call cap (default [`DEFAULT_MAX_CALL_DEPTH`]).
    pub max_call_depth: usize,
    /// Log lines kept; later lines are counted, not stored (default [`DEFAULT_MAX_LOG_LINES`]).
    pub max_log_lines: usize,
    /// Bytes of log text kept: a line past it is cut with a marker, later lines are counted,
    /// not stored (default [`DEFAULT_MAX_LOG_BYTES`]).
    pub max_log_bytes: usize,
    /// The atoms this runner provides, by name. A program calling any other is refused.
    pub atoms: HashMap<String, AtomSpec>,
    /// Seed of the host randomness source behind `Math.random()`, `random` and `uuid`.
    pub random_seed: u64,
    /// The host clock behind `Date()` and `Date.now()`: epoch milliseconds (default: the system
    /// clock). Inject a fixed source to replay a run.
    pub clock: fn() -> f64,
    /// Most items one `parallel(...)` call may hold (default [`DEFAULT_MAX_PARALLEL_ITEMS`]).
    pub max_parallel_items: usize,
    /// The deadline and cancellation a long native checks as it goes (see [`crate::interrupt`]).
    pub interrupt: crate::interrupt::Interrupt,
}

/// The system clock: epoch milliseconds.
pub fn system_clock() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_millis() as f64)
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            fuel: DEFAULT_FUEL,
            max_heap_bytes: DEFAULT_MAX_HEAP_BYTES,
            max_call_depth: DEFAULT_MAX_CALL_DEPTH,
            max_log_lines: DEFAULT_MAX_LOG_LINES,
            max_log_bytes: DEFAULT_MAX_LOG_BYTES,
            atoms: HashMap::new(),
            random_seed: 0x9E37_79B9_7F4A_7C15,
            clock: system_clock,
            max_parallel_items: DEFAULT_MAX_PARALLEL_ITEMS,
            interrupt: crate::interrupt::Interrupt::default(),
        }
    }
}

/// Log severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// `console.log` / `console.info`.
    Info,
    /// `console.warn`.
    Warn,
    /// `console.error`.
    Error,
}

/// One line of the run's log.
#[derive(Clone, Debug, PartialEq)]
pub struct LogLine {
    /// Severity.
    pub level: LogLevel,
    /// The text.
    pub message: String,
}

/// A host call the VM is waiting on.
#[derive(Clone, Debug, PartialEq)]
pub struct HostCall {
    /// The atom's name.
    pub atom: String,
    /// Its input, copied out of the guest.
    pub input: JsValue,
}

/// What a slice of execution ended with.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// The run finished with this value.
    Done(JsValue),
    /// The run needs the host: perform the call, then [`Vm::resume`].
    Host(HostCall),
    /// The slice is spent; nothing is wrong. Run the next slice when ready.
    Yield,
    /// The run ended with an error.
    Failed(RunError),
    /// The run needs the result of a deferred host call (see [`Vm::defer`]): an instruction would
    /// read a [`Value::Pending`], or the run would end with deferred calls never settled. Settle
    /// every call of [`Vm::pending_calls`] with [`Vm::settle`], then run again; the instruction
    /// is executed then, once.
    Blocked,
}

/// One executed instruction, recorded when tracing is on ([`Vm::set_trace`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStep {
    /// The instruction's name.
    pub op: &'static str,
    /// Fuel used before it, in milli-fuel.
    pub fuel_before: u64,
    /// Fuel used after it, in milli-fuel.
    pub fuel_after: u64,
    /// Where in the user's source, when known.
    pub pos: Option<SourcePos>,
}

/// A host call that has not been answered: the one the run is stopped at, or a deferred one.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingHostCall {
    /// The call's number in the run (0 for the first host call).
    pub id: u32,
    /// The atom and its input.
    pub call: HostCall,
    /// Whether it was deferred ([`Vm::defer`]) rather than being the call the run stopped at.
    pub deferred: bool,
}

#[derive(Clone, Copy, Debug)]
struct TryEntry {
    frame: u32,
    /// in the program's code of all functions, as a frame's pc
    handler: u32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Status {
    Running,
    AwaitingHost {
        dst: u32,
        id: u32,
        atom: u16,
        input: Value,
    },
    Finished,
}

/// The index in `TYPE_NAMES` of a string constant that is one of them.
fn type_name_index(units: &[u16]) -> Option<usize> {
    if !(6..=9).contains(&units.len()) {
        return None;
    }
    TYPE_NAMES
        .iter()
        .position(|n| n.len() == units.len() && n.bytes().zip(units).all(|(b, &u)| b as u16 == u))
}

pub(crate) const FORBIDDEN: [&str; 3] = ajs_bytecode::FORBIDDEN_NAMES;

// `get_member` tests a key's length before comparing it with the forbidden names
const _: () = {
    let mut i = 0;
    while i < FORBIDDEN.len() {
        assert!(FORBIDDEN[i].len() == 9 || FORBIDDEN[i].len() == 11);
        i += 1;
    }
};

/// A virtual machine holding one run's whole state: frames, registers, heap, fuel, log.
#[derive(Debug)]
pub struct Vm {
    pub(crate) program: VerifiedProgram,
    pub(crate) heap: Heap,
    /// the program's constants as this run's values (shared, so that the dispatch loop can
    /// hold them in a local: their address and length stay in registers or on its stack)
    consts: Arc<Vec<Value>>,
    /// the constant equal to each name `typeof` gives (`TYPE_NAMES`), or `undefined` when the
    /// program has none: `typeof x === 'number'` then makes no string
    typeof_consts: [Value; TYPE_NAMES.len()],
    /// the string constants as property keys, made the first time an object literal uses one
    /// (then shared by every object built from it)
    const_keys: Vec<Option<Key>>,
    pub(crate) regs: Vec<Value>,
    frames: Frames,
    tries: Vec<TryEntry>,
    /// the fuel budget and what is left of it
    pub(crate) meter: Meter,
    /// the message of the guest error a handler is about to `Catch`
    handling: Option<String>,
    status: Status,
    pub(crate) log: Vec<LogLine>,
    pub(crate) log_dropped: u64,
    max_log_lines: usize,
    /// bytes of the log's text, and their cap
    log_bytes: usize,
    max_log_bytes: usize,
    max_call_depth: usize,
    /// the atoms' counters, deferred calls, call ids and a delivered error
    hosts: HostCalls,
    pub(crate) rng: u64,
    pub(crate) clock: fn() -> f64,
    /// compiled regexes by (translated pattern), so a literal in a loop compiles once
    pub(crate) regex_cache: crate::regex_engine::RegexCache,
    /// the run's deadline and cancellation, for natives that check them as they go
    pub(crate) interrupt: crate::interrupt::Interrupt,
    /// the seed, clock readings, elapsed time and host data a replay needs
    journal: Journal,
    /// executed instructions, when tracing
    trace: Trace,
    /// open `parallel(...)` batches, innermost last
    batches: Vec<parallel::Batch>,
    max_parallel_items: usize,
}

/// A released VM ([`Vm::into_spare`]) kept for a later run: nothing of its last run is left in
/// it, and nothing can change it before [`SpareVm::start`] begins the next one, so a start sets
/// only what its program, arguments and options decide (a [`Vm::restart`] also clears the
/// previous run's state, which this one already had cleared).
#[derive(Debug)]
pub struct SpareVm(Box<Vm>);

impl SpareVm {
    /// Starts a run of `program` with `args`, as [`Vm::new_with`] would build it (keeping only
    /// the capacity of the vectors). Returns the VM and the program of its last run when that
    /// was another one (drop it, or reuse its allocations as `ajs_compiler::Compiler::recycle` does); the
    /// same program is kept, not cloned again.
    ///
    /// # Errors
    /// As [`Vm::new`], with the VM, its run ended (release it, or restart it).
    #[allow(clippy::type_complexity)]
    pub fn start<'a>(
        self,
        program: &VerifiedProgram,
        args: impl IntoIterator<Item = HostArg<'a>>,
        opts: &VmOptions,
    ) -> Result<(Box<Vm>, Option<VerifiedProgram>), (RunError, Box<Vm>)> {
        let mut vm = self.0;
        let table = match atoms_of(program, opts) {
            Ok(t) => t,
            Err(e) => return Err((e, vm)),
        };
        // the same program (one `SafeFunction` called again): the same allocation
        let previous = if std::ptr::eq::<ajs_bytecode::Program>(&*vm.program, &**program) {
            None
        } else {
            Some(std::mem::replace(&mut vm.program, program.clone()))
        };
        match vm.begin(args, opts, table) {
            Ok(()) => Ok((vm, previous)),
            Err(e) => Err((e, vm)),
        }
    }
}

enum Exit {
    #[cfg_attr(ajs_unmetered, allow(dead_code))]
    Yield,
    Blocked,
    Done(Value),
    Host(u16, Value, u32),
}

/// One argument of a run, borrowed from the host and copied into the guest heap.
#[derive(Clone, Copy, Debug)]
pub enum HostArg<'a> {
    /// `undefined` (a missing argument).
    Undefined,
    /// A host value.
    Value(&'a JsValue),
    /// JSON data, copied in as [`JsValue::from_json`] would (without building the `JsValue`).
    Json(&'a serde_json::Value),
}

impl HostArg<'_> {
    /// The guest value of an argument that needs no heap (`undefined`, `null`, a boolean, a
    /// number), as the importer would make it; `None` for the others.
    #[inline]
    fn scalar(&self) -> Option<Value> {
        Some(match *self {
            HostArg::Undefined | HostArg::Value(JsValue::Undefined) => Value::Undefined,
            HostArg::Value(JsValue::Null) | HostArg::Json(serde_json::Value::Null) => Value::Null,
            HostArg::Value(JsValue::Bool(b)) | HostArg::Json(serde_json::Value::Bool(b)) => {
                Value::Bool(*b)
            }
            HostArg::Value(JsValue::Number(n)) => Value::Num(*n),
            HostArg::Json(serde_json::Value::Number(n)) => {
                Value::Num(n.as_f64().unwrap_or(f64::NAN))
            }
            _ => return None,
        })
    }
}

/// Most register slots, frames and heap cells a VM may hold in reserve for its next run
/// ([`Vm::release`]); a run that grew past them is not worth keeping.
const KEEP_CAPACITY: usize = 4096;

impl Vm {
    /// Prepares a run of the program's entry function with `args` (one per entry parameter,
    /// missing ones are `undefined`), copied into the guest heap.
    ///
    /// # Errors
    /// A [`RunError`] of kind `Input` when the program needs an atom the options do not provide;
    /// of kind `Guest` with the heap message when the arguments alone exceed the heap ceiling.
    pub fn new(
        program: VerifiedProgram,
        args: &[JsValue],
        opts: VmOptions,
    ) -> Result<Vm, RunError> {
        Vm::new_with(program, args.iter().map(HostArg::Value), &opts)
    }

    /// [`Vm::new`] with the arguments given one by one as [`HostArg`]s (JSON data is copied in
    /// directly) and the options borrowed.
    ///
    /// # Errors
    /// As [`Vm::new`].
    pub fn new_with<'a>(
        program: VerifiedProgram,
        args: impl IntoIterator<Item = HostArg<'a>>,
        opts: &VmOptions,
    ) -> Result<Vm, RunError> {
        let table = atoms_of(&program, opts)?;
        // an empty VM, as `Vm::clear` leaves one, which `begin` starts as it starts a spare
        // one (the limits it sets from the options are taken from them here too)
        let mut vm = Vm {
            heap: Heap::new(0),
            consts: Arc::new(Vec::with_capacity(program.constants.len())),
            typeof_consts: [Value::Undefined; TYPE_NAMES.len()],
            const_keys: Vec::new(),
            regs: Vec::new(),
            frames: Frames::default(),
            tries: Vec::new(),
            meter: Meter::new(0),
            handling: None,
            status: Status::Finished,
            log: Vec::new(),
            log_dropped: 0,
            max_log_lines: opts.max_log_lines,
            log_bytes: 0,
            max_log_bytes: opts.max_log_bytes,
            max_call_depth: opts.max_call_depth.max(1),
            hosts: HostCalls::default(),
            rng: 0,
            clock: opts.clock,
            regex_cache: Default::default(),
            interrupt: crate::interrupt::Interrupt::default(),
            journal: Journal::default(),
            trace: Trace::default(),
            batches: Vec::new(),
            max_parallel_items: opts.max_parallel_items,
            program,
        };
        vm.begin(args, opts, table)?;
        Ok(vm)
    }

    /// Starts a new run in this VM, as [`Vm::new_with`] would build it, keeping only the
    /// capacity of its vectors (registers, frames, heap cells, constants): nothing of the
    /// previous run (heap, registers, fuel, quotas, log, trace, pending calls, clock readings,
    /// host data) survives. Every field is reset here by name, so a field added to the VM
    /// without a reset does not compile.
    ///
    /// Returns the program of the previous run, which the VM held until now: drop it, or, when
    /// it was the last handle, reuse its allocations (`ajs_compiler::Compiler::recycle`).
    ///
    /// # Errors
    /// As [`Vm::new`]; the VM is then left holding the failed start (release or restart it).
    pub fn restart<'a>(
        &mut self,
        program: VerifiedProgram,
        args: impl IntoIterator<Item = HostArg<'a>>,
        opts: &VmOptions,
    ) -> Result<VerifiedProgram, RunError> {
        let table = match atoms_of(&program, opts) {
            Ok(t) => t,
            Err(e) => {
                self.release();
                return Err(e);
            }
        };
        self.clear();
        let previous = std::mem::replace(&mut self.program, program);
        self.begin(args, opts, table)?;
        Ok(previous)
    }

    /// Drops the data the finished run holds (its heap, registers, log, trace, pending calls)
    /// and keeps the vectors' capacity for [`Vm::restart`]; the program (shared, immutable)
    /// stays until the next restart replaces it. Returns
    /// whether the VM is worth keeping: `false` when the run grew its vectors past a few
    /// thousand entries (drop it instead).
    pub fn release(&mut self) -> bool {
        self.clear();
        self.regs.capacity() <= KEEP_CAPACITY
            && self.frames.capacity() <= KEEP_CAPACITY
            && self.consts.capacity() <= KEEP_CAPACITY
            && self.heap.capacity() <= KEEP_CAPACITY
            && self.log.capacity() <= KEEP_CAPACITY
    }

    /// Releases the VM ([`Vm::release`]) and keeps it for another run as a [`SpareVm`], or
    /// `None` when it is not worth keeping.
    #[inline]
    pub fn into_spare(mut self: Box<Self>) -> Option<SpareVm> {
        if self.release() {
            Some(SpareVm(self))
        } else {
            None
        }
    }

    /// Every field a run changes back to what [`Vm::new_with`] makes (the vectors keep their
    /// capacity), and the run ended: what [`Vm::begin`] starts from. The program stays, and so
    /// do the limits every start sets from its options. Every field by name: one added without
    /// a reset does not compile.
    #[inline]
    fn clear(&mut self) {
        let Vm {
            // shared and immutable; the next start keeps or replaces it
            program: _,
            heap,
            consts,
            typeof_consts,
            const_keys,
            regs,
            frames,
            tries,
            meter,
            handling,
            status,
            log,
            log_dropped,
            log_bytes,
            // set by every start, from its options
            max_log_lines: _,
            max_log_bytes: _,
            max_call_depth: _,
            hosts,
            rng,
            // set by every start, from its options
            clock: _,
            regex_cache,
            // set by every start, from its options
            interrupt: _,
            journal,
            trace,
            batches,
            // set by every start, from its options
            max_parallel_items: _,
        } = self;
        // (a small run leaves most of these empty: each is tested before it is cleared, where
        // a clear of a vector of values that need dropping, or the drop of an option, costs a
        // load, a store and a test)
        heap.reset(0);
        if !consts.is_empty() {
            Arc::make_mut(consts).clear();
        }
        *typeof_consts = [Value::Undefined; TYPE_NAMES.len()];
        clear_vec(const_keys);
        regs.clear();
        frames.clear();
        tries.clear();
        meter.clear();
        clear_option(handling);
        *status = Status::Finished;
        clear_vec(log);
        *log_dropped = 0;
        *log_bytes = 0;
        hosts.clear();
        *rng = 0;
        regex_cache.clear();
        journal.clear();
        trace.clear();
        clear_vec(batches);
    }

    /// Starts a run of `self.program` on a cleared VM ([`Vm::clear`]): sets what the options
    /// and the program decide, then copies the arguments in. `table`: the atoms' costs and
    /// quotas (`None`: the program calls none; the cleared vectors stay empty). On an error the
    /// run is ended. (Always inlined: with `new_with` as a third caller LLVM stopped inlining
    /// it into `SpareVm::start`, on every `call_sync`'s path.)
    #[inline(always)]
    fn begin<'a>(
        &mut self,
        args: impl IntoIterator<Item = HostArg<'a>>,
        opts: &VmOptions,
        table: Option<(Vec<u64>, Vec<Option<u32>>)>,
    ) -> Result<(), RunError> {
        let Vm {
            program,
            heap,
            regs,
            frames,
            meter,
            status,
            max_log_lines,
            max_log_bytes,
            max_call_depth,
            hosts,
            rng,
            clock,
            journal,
            max_parallel_items,
            interrupt,
            // as a new VM has them, after `clear`
            consts: _,
            typeof_consts: _,
            const_keys: _,
            tries: _,
            handling: _,
            log: _,
            log_dropped: _,
            log_bytes: _,
            regex_cache: _,
            trace: _,
            batches: _,
        } = self;
        heap.set_limit(opts.max_heap_bytes);
        let nregs = program.functions[program.entry as usize].nregs as usize;
        // (empty already; cleared here so that the fill of the small window has a known
        // length, which the compiler unrolls: 32 stores)
        regs.clear();
        match first_registers(program, nregs) {
            SMALL_WINDOW => regs.resize(SMALL_WINDOW, Value::Undefined),
            n => regs.resize(n, Value::Undefined),
        }
        frames.push(Frame {
            func: program.entry,
            opened: true,
            pc: program.flat_pc(program.entry as usize, 0),
            base: 0,
            ret: 0,
        });
        *meter = Meter::new(opts.fuel);
        *status = Status::Running;
        *max_log_lines = opts.max_log_lines;
        *max_log_bytes = opts.max_log_bytes;
        *max_call_depth = opts.max_call_depth.max(1);
        if let Some((cost, quota)) = table {
            hosts.atoms.used.resize(cost.len(), 0);
            hosts.atoms.cost = cost;
            hosts.atoms.quota = quota;
        }
        *rng = opts.random_seed | 1;
        *clock = opts.clock;
        journal.random_seed = opts.random_seed;
        *max_parallel_items = opts.max_parallel_items;
        interrupt.clone_from(&opts.interrupt);
        let r = match self.charge_start(nregs) {
            Ok(()) => self.load(args),
            Err(e) => Err(e),
        };
        if r.is_err() {
            self.status = Status::Finished;
        }
        r
    }

    /// Materialises the constants and copies the arguments in (the last step of a start;
    /// inlined there, so that its result is not returned through memory).
    #[inline(always)]
    fn load<'a>(&mut self, args: impl IntoIterator<Item = HostArg<'a>>) -> Result<(), RunError> {
        let program = &self.program;
        let nparams = program.functions[program.entry as usize].params.len();
        for i in 0..program.constants.len() {
            let v = match &self.program.constants[i] {
                Constant::Number(n) => Value::Num(*n),
                Constant::String(s) => {
                    let t = type_name_index(s);
                    let units = Box::<[u16]>::from(s.as_slice());
                    let v = Value::Str(self.alloc_str_raw(units).map_err(fault_to_error)?);
                    if let Some(t) = t {
                        self.typeof_consts[t] = v;
                    }
                    v
                }
            };
            Arc::make_mut(&mut self.consts).push(v);
        }
        // (the indices zipped with the arguments rather than `take` and `enumerate`: one count
        // fewer per argument)
        for (i, a) in (0..nparams).zip(args) {
            // a number, a boolean or null is the common argument: no call into the importer
            let v = match a.scalar() {
                Some(v) => v,
                None => match a {
                    HostArg::Undefined => Ok(Value::Undefined),
                    HostArg::Value(v) => self.import(v, 0),
                    HostArg::Json(v) => self.import_json(v, 0),
                }
                .map_err(fault_to_error)?,
            };
            // the verifier checked that the entry has a register per parameter
            if let Some(r) = self.regs.get_mut(i) {
                *r = v;
            }
        }
        Ok(())
    }

    /// Live heap bytes as accounted.
    pub fn heap_bytes(&self) -> usize {
        self.heap.live_bytes()
    }

    /// Real heap bytes as counted (cells, capacities, keys, the heap's vectors) and their
    /// ceiling.
    pub fn heap_real_bytes(&self) -> (usize, usize) {
        (self.heap.real_bytes(), self.heap.real_limit())
    }

    /// Both heap counts recomputed from the cells (estimated, real): equal to
    /// [`Vm::heap_bytes`] and [`Vm::heap_real_bytes`] unless an allocation site miscounts.
    pub fn heap_recount(&self) -> (usize, usize) {
        (self.heap.recount(), self.heap.recount_real())
    }

    /// Garbage collections run so far.
    pub fn collections(&self) -> u64 {
        self.heap.collections()
    }

    /// The run's log so far.
    pub fn log(&self) -> &[LogLine] {
        &self.log
    }

    /// Reseeds the run's randomness (`Math.random()`, `random`, `uuid`) as if it had started
    /// with `random_seed: seed`: for a host that keeps one [`VmOptions`] for many runs and draws
    /// each run's seed itself. Call it before the run's first slice.
    pub fn set_random_seed(&mut self, seed: u64) {
        self.rng = seed | 1;
        self.journal.random_seed = seed;
    }

    /// Takes the run's log out of the VM (for a finished run: what [`Vm::log`] held, without
    /// copying its lines); the VM's log is empty afterwards.
    pub fn take_log(&mut self) -> Vec<LogLine> {
        std::mem::take(&mut self.log)
    }

    /// Log lines dropped past `max_log_lines`.
    pub fn log_dropped(&self) -> u64 {
        self.log_dropped
    }

    /// Calls made so far to each atom of the program, by name.
    pub fn atom_calls(&self) -> Vec<(String, u32)> {
        self.program
            .atoms
            .iter()
            .cloned()
            .zip(self.hosts.atoms.used.iter().copied())
            .collect()
    }

    /// The source position of the instruction the run is at (the failing one after an error).
    pub fn position(&self) -> Option<SourcePos> {
        let f = self.frames.last()?;
        let func = f.func as usize;
        self.program
            .span(func, self.program.local_pc(func, f.pc) as usize)
    }

    /// Delivers the answer to the pending host call: `Ok(value)` is copied into the guest,
    /// `Err(message)` is raised as a guest error the program may catch.
    ///
    /// # Errors
    /// A run-ending [`RunError`] of kind `Boundary` if the value cannot be copied in (too deep);
    /// an `Input` error when no host call is pending.
    pub fn resume(&mut self, answer: Result<JsValue, String>) -> Result<(), RunError> {
        let Status::AwaitingHost { dst, .. } = self.status else {
            return Err(RunError::new(
                ErrorKind::Input,
                "resume called while no host call is pending",
            ));
        };
        self.status = Status::Running;
        match answer {
            Ok(v) => match self.import(&v, 0) {
                Ok(val) => {
                    self.regs[dst as usize] = val;
                    Ok(())
                }
                Err(Fault::Guest(msg)) => {
                    self.pending_raise(msg);
                    Ok(())
                }
                Err(Fault::Fatal(e)) => {
                    self.status = Status::Finished;
                    Err(e)
                }
            },
            Err(msg) => {
                self.pending_raise(msg);
                Ok(())
            }
        }
    }

    fn pending_raise(&mut self, msg: String) {
        self.hosts.raise_on_run = Some(msg);
    }

    /// Runs until the program finishes, fails, needs the host, or has spent `slice` milli-fuel.
    ///
    /// Every charge counts towards the slice: the instructions' own and the work of builtins.
    /// The slice ends at the first block entered after it is spent, so a slice spends at most
    /// one block's or one builtin call's charge more than `slice`.
    pub fn run(&mut self, slice: u64) -> Step {
        match self.status {
            Status::Finished => {
                return Step::Failed(RunError::new(ErrorKind::Input, "the run has already ended"))
            }
            Status::AwaitingHost { .. } => {
                return Step::Failed(RunError::new(
                    ErrorKind::Input,
                    "the run is waiting for a host answer (call resume)",
                ))
            }
            Status::Running => {}
        }
        let window = window_of(&self.program);
        let slow = !self.hosts.deferred.is_empty() || self.trace.is_on() || window.is_none();
        // An error delivered by `resume` is raised at the call site.
        // (tested first: `take` would store `None` back on every run)
        if self.hosts.raise_on_run.is_some() {
            if let Some(msg) = self.hosts.raise_on_run.take() {
                if let Err(e) = self.unwind(msg) {
                    return self.fail(e);
                }
            }
        }
        let mut slice_left = slice;
        loop {
            let r = if slow {
                self.exec::<true, WINDOW>(&mut slice_left)
            } else if window == Some(SMALL_WINDOW) {
                self.exec::<false, SMALL_WINDOW>(&mut slice_left)
            } else {
                self.exec::<false, WINDOW>(&mut slice_left)
            };
            if slow {
                self.close_trace();
            }
            match r {
                Ok(Exit::Yield) => return Step::Yield,
                Ok(Exit::Blocked) => {
                    self.trim_registers();
                    return Step::Blocked;
                }
                Ok(Exit::Done(v)) => {
                    self.status = Status::Finished;
                    return match self.export(v, || "Result".into()) {
                        Ok(j) => Step::Done(j),
                        Err(e) => self.fail(e),
                    };
                }
                Ok(Exit::Host(atom, input, dst)) => {
                    let name = self.program.atoms[atom as usize].clone();
                    match self.export(input, || format!("The input of '{name}'")) {
                        Ok(j) => {
                            let id = self.hosts.next_call_id;
                            self.hosts.next_call_id = self.hosts.next_call_id.saturating_add(1);
                            self.status = Status::AwaitingHost {
                                dst,
                                id,
                                atom,
                                input,
                            };
                            self.trim_registers();
                            return Step::Host(HostCall {
                                atom: name,
                                input: j,
                            });
                        }
                        Err(e) => return self.fail(e),
                    }
                }
                Err(Fault::Guest(msg)) => {
                    if let Err(e) = self.unwind(msg) {
                        return self.fail(e);
                    }
                }
                Err(Fault::Fatal(e)) => return self.fail(e),
            }
        }
    }

    /// A run waiting for the host keeps only its live registers (the dispatch loop grows the
    /// file back to its window past the running frame's base when the run goes on), so that a
    /// suspended run holds little memory.
    fn trim_registers(&mut self) {
        let live = self.live_top();
        if self.regs.capacity() > live + WINDOW_FILL {
            self.regs.truncate(live);
            self.regs.shrink_to_fit();
        }
    }

    fn fail(&mut self, mut e: RunError) -> Step {
        self.status = Status::Finished;
        if e.pos.is_none() {
            e.pos = self.position();
        }
        Step::Failed(e)
    }

    /// Hands a guest error to the innermost handler, or ends the run with it.
    fn unwind(&mut self, msg: String) -> Result<(), RunError> {
        match self.tries.pop() {
            None => {
                let mut e = RunError::new(ErrorKind::Guest, msg);
                e.pos = self.position();
                Err(e)
            }
            Some(t) => {
                if !self.batches.is_empty() {
                    self.par_unwind(t.frame, self.tries.len() as u32);
                }
                self.frames.truncate(t.frame as usize + 1);
                let live = self.live_top();
                self.regs.truncate(live);
                if let Some(f) = self.frames.last_mut() {
                    f.pc = t.handler;
                }
                self.handling = Some(msg);
                Ok(())
            }
        }
    }
}

/// Empties `v`, tested first: the clear of an empty vector of values that need dropping is
/// skipped (the common case at the end of a small run).
#[inline(always)]
fn clear_vec<T>(v: &mut Vec<T>) {
    if !v.is_empty() {
        v.clear();
    }
}

/// Sets `o` to `None`, tested first: the drop of an empty option is skipped.
#[inline(always)]
pub(super) fn clear_option<T>(o: &mut Option<T>) {
    if o.is_some() {
        *o = None;
    }
}

/// Refuses a value nested deeper than [`MAX_BOUNDARY_DEPTH`] at the boundary.
pub(crate) fn boundary_depth(depth: usize) -> OpResult<()> {
    if depth > MAX_BOUNDARY_DEPTH {
        return Err(Fault::Fatal(RunError::new(
            ErrorKind::Boundary,
            format!(
                "value nested deeper than {MAX_BOUNDARY_DEPTH} levels cannot cross the boundary"
            ),
        )));
    }
    Ok(())
}

/// The error of a call stack that disagrees with itself, the register file or the code: a
/// `Call` that finds no slot it has just grown, a `Return` whose caller's registers are gone
/// (never: the register file only grows during a slice), a pc past the code (never: verified).
/// An error, not a panic.
#[cold]
pub(super) fn malformed_frames() -> RunError {
    RunError::new(
        ErrorKind::Input,
        "malformed run: the call stack and the registers disagree",
    )
}

pub(super) fn fault_to_error(f: Fault) -> RunError {
    match f {
        Fault::Guest(m) => RunError::new(ErrorKind::Guest, m),
        Fault::Fatal(e) => e,
    }
}
