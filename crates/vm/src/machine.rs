//! The interpreter: a stackless register machine run in slices.

use std::collections::HashMap;
use std::sync::Arc;

use ajs_bytecode::isa::{Cmp, Count, Op, Right, MILLI};
use ajs_bytecode::{Constant, Entry, NativeId, SourcePos, VerifiedProgram};

use crate::error::{guest, ErrorKind, Fault, OpResult, RunError};
use crate::heap::{prop_bytes, Cell, Gc, Heap, Key, PropMap};
use crate::memory;
use crate::ops::{type_index, TYPE_NAMES};
use crate::setup::atoms_of;
use crate::value::{JsValue, Value, MAX_BOUNDARY_DEPTH};

#[path = "export.rs"]
pub(crate) mod export;
#[path = "parallel.rs"]
pub(crate) mod parallel;
#[path = "snapshot.rs"]
pub(crate) mod snapshot;

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

#[derive(Clone, Copy, Debug, PartialEq)]
struct Deferred {
    id: u32,
    atom: u16,
    input: Value,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    func: u16,
    /// Whether this frame may have a `try` or a parallel batch open (set when it opens one,
    /// always set on the entry frame; cleared only when the slow path pops it, and not written
    /// by a call, so a slot above frames an unwind dropped may keep it for its next frame,
    /// which then returns the slow way once): its `Return` then takes the slow path, which
    /// closes them, and the others return without looking at either list.
    opened: bool,
    /// in the program's code of all functions (`VerifiedProgram::code`), not the function's
    /// own (snapshots and source positions name it in the function's code); the running
    /// frame's is kept in a local, and written (`save_pc!`) before anything can read it, so a
    /// call does not write its callee's
    pc: u32,
    base: u32,
    /// the caller's register (from its base) receiving the result
    ret: u32,
}

impl Frame {
    /// A spare slot's contents (never read: slots above the depth are dead).
    const DEAD: Frame = Frame {
        func: 0,
        opened: false,
        pc: 0,
        base: 0,
        ret: 0,
    };
}

/// The call stack: `slots[..depth]` are the live frames, innermost last; the slots above are
/// spare (dead frames, overwritten by the next calls). A call writes its frame into the slot
/// above the caller's, found together with the caller's in one bounds check: `slots` never
/// grows past the run's depth limit (it grows only in `Call`'s cold path, which tests the
/// limit, or holds a snapshot's checked frames), so a slot above the caller's exists only
/// below the limit, and the limit, a `Vec`'s capacity test and the caller's frame need no
/// test of their own. Indexed from [`Frames::top`], in `u32`.
#[derive(Clone, Debug, Default)]
struct Frames {
    slots: Vec<Frame>,
    depth: usize,
}

impl Frames {
    fn live(&self) -> &[Frame] {
        self.slots.get(..self.depth).unwrap_or(&[])
    }

    fn len(&self) -> usize {
        self.depth
    }

    fn iter(&self) -> std::slice::Iter<'_, Frame> {
        self.live().iter()
    }

    fn get(&self, i: usize) -> Option<&Frame> {
        self.live().get(i)
    }

    // (one bounds check: `depth <= slots.len()` always holds, so the slot below the depth is
    // the top frame; `base!()` runs this for every instruction run out of line)
    fn last(&self) -> Option<&Frame> {
        self.slots.get(self.depth.wrapping_sub(1))
    }

    fn last_mut(&mut self) -> Option<&mut Frame> {
        self.slots.get_mut(self.depth.wrapping_sub(1))
    }

    /// Pushes `f` (dropping the spare slots: a push outside a call sets the stack up).
    fn push(&mut self, f: Frame) {
        self.slots.truncate(self.depth);
        self.slots.push(f);
        self.depth = self.slots.len();
    }

    fn pop(&mut self) -> Option<Frame> {
        let f = *self.last()?;
        self.depth -= 1;
        Some(f)
    }

    fn truncate(&mut self, n: usize) {
        self.depth = self.depth.min(n);
    }

    fn clear(&mut self) {
        self.slots.clear();
        self.depth = 0;
    }

    fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// The top frame's index, wrapped in `u32` (`u32::MAX` when there is none): a range from
    /// it to `+ 2` does not overflow a 64-bit `usize`, so taking two frames from it is one
    /// bounds check (the compiler knows the range's start is below its end). Exact: a run
    /// holds at most `MAX_FRAMES`.
    #[inline]
    fn top(&self) -> usize {
        self.top_but(0)
    }

    /// The index of the frame `n` below the top, wrapped in `u32` as [`Frames::top`].
    #[inline]
    fn top_but(&self, n: u32) -> usize {
        (self.depth as u32).wrapping_sub(1 + n) as usize
    }

    /// One more spare slot, when the depth limit allows it (`Call`'s cold path).
    fn grow(&mut self, max_depth: usize) -> bool {
        // (below `u32::MAX` frames, so that `top` is exact)
        if self.depth >= max_depth || self.depth >= MAX_FRAMES {
            return false;
        }
        self.slots.truncate(self.depth);
        self.slots.push(Frame::DEAD);
        true
    }
}

/// One more spare frame slot (`Call`'s cold path), or the call depth error of a call to
/// `callee`.
#[cold]
#[inline(never)]
fn grow_frames(
    frames: &mut Frames,
    max_depth: usize,
    program: &VerifiedProgram,
    callee: u16,
) -> Result<(), RunError> {
    if frames.grow(max_depth) {
        return Ok(());
    }
    let name = &program.functions[callee as usize].name;
    Err(RunError::new(
        ErrorKind::CallDepth,
        format!(
            "Maximum helper call depth ({max_depth}) exceeded — likely infinite recursion in '{name}'"
        ),
    ))
}

/// Most frames a run may hold, whatever its depth limit (see `Frames::top`; a run of this
/// many frames would not fit in memory anyway).
pub(crate) const MAX_FRAMES: usize = u32::MAX as usize - 1;

impl From<Vec<Frame>> for Frames {
    fn from(slots: Vec<Frame>) -> Frames {
        let depth = slots.len();
        Frames { slots, depth }
    }
}

/// The fuel a run has left, kept as `floor + room` (wrapping): the dispatch loop sets the
/// floor at the fuel where its slice ends, so that a block pays its `Charge` with one
/// subtraction and one sign test of `room` (fuel and slice checked at once). Signed: a
/// builtin's charge may take the fuel below the floor (the next block then yields).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fuel {
    floor: u64,
    room: i64,
}

impl Fuel {
    fn new(left: u64) -> Fuel {
        Fuel {
            floor: 0,
            room: left as i64,
        }
    }

    /// The fuel left, in milli-fuel.
    #[inline]
    pub(crate) fn left(&self) -> u64 {
        self.floor.wrapping_add(self.room as u64)
    }

    /// Sets the fuel left (the floor stays).
    #[inline]
    pub(crate) fn set(&mut self, left: u64) {
        self.room = left.wrapping_sub(self.floor) as i64;
    }

    /// Moves the floor (the fuel left stays).
    fn set_floor(&mut self, floor: u64) {
        let left = self.left();
        self.floor = floor;
        self.set(left);
    }
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

/// Registers a call always fills with `undefined` (a fixed-size copy; a bigger window is filled
/// to its size).
pub(crate) const WINDOW_FILL: usize = 8;

/// Fresh registers for a call's window.
static UNDEFINED: [Value; WINDOW_FILL] = [Value::Undefined; WINDOW_FILL];

/// Registers the dispatch loop's fast path sees from a frame's base: a fixed-size window, so
/// that an access (its index masked) needs no bounds check. A program with a function of more
/// registers runs on the slow path (checked accesses). A power of two.
pub(crate) const WINDOW: usize = 256;

/// The window of a program whose functions all have at most this many registers (most
/// formulas and rules): a run starts by growing the register file to one window, so a small
/// window keeps that cheap. A power of two.
const SMALL_WINDOW: usize = 32;

const _: () = assert!(
    WINDOW_FILL == Entry::SMALL_REGS as usize
        && WINDOW.is_power_of_two()
        && SMALL_WINDOW.is_power_of_two()
        && WINDOW >= SMALL_WINDOW
        && SMALL_WINDOW >= WINDOW_FILL
);

/// The `W` registers from `base`, the register file grown to hold them first (out of line: rare,
/// and its loop would otherwise be inlined at every place the dispatch loop derives its window).
#[cold]
#[inline(never)]
fn grown_window<const W: usize>(regs: &mut Vec<Value>, base: usize) -> &mut [Value; W] {
    regs.resize(base + W, Value::Undefined);
    match (&mut regs[base..base + W]).try_into() {
        Ok(w) => w,
        Err(_) => unreachable!("the slice is W long"),
    }
}

/// The window the dispatch loop reads `program`'s registers through: `SMALL_WINDOW` or
/// `WINDOW`, or `None` when a function has more registers than that (the checked slow path).
fn window_of(program: &VerifiedProgram) -> Option<usize> {
    match program.max_registers() {
        n if n <= SMALL_WINDOW => Some(SMALL_WINDOW),
        n if n <= WINDOW => Some(WINDOW),
        _ => None,
    }
}

/// How many registers a run of `program` starts with: its entry's `nregs`, or its window if
/// that is more (so that the first slice need not grow the file).
#[inline]
fn first_registers(program: &VerifiedProgram, nregs: usize) -> usize {
    nregs.max(window_of(program).unwrap_or(0))
}

/// The `W` registers from `base`, the register file grown to hold them first (registers past
/// the live frames are dead: growing it changes nothing a run can see).
#[inline(always)]
fn fixed_window<const W: usize>(regs: &mut Vec<Value>, base: usize) -> &mut [Value] {
    let end = base + W;
    // (the file's length tested once: the slice taken where the test holds, no second test
    // after an out-of-line growth)
    let w: &mut [Value; W] = if regs.len() >= end {
        match (&mut regs[base..end]).try_into() {
            Ok(w) => w,
            Err(_) => unreachable!("the slice is W long"),
        }
    } else {
        grown_window::<W>(regs, base)
    };
    w
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

pub(crate) const FORBIDDEN: [&str; 3] = ["constructor", "__proto__", "prototype"];

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
    fuel_budget: u64,
    pub(crate) fuel: Fuel,
    /// an error delivered by `resume`, raised when the run continues
    raise_on_run: Option<String>,
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
    atom_cost: Vec<u64>,
    atom_quota: Vec<Option<u32>>,
    atom_used: Vec<u32>,
    pub(crate) rng: u64,
    pub(crate) clock: fn() -> f64,
    /// compiled regexes by (translated pattern), so a literal in a loop compiles once
    pub(crate) regex_cache: crate::regex_engine::RegexCache,
    /// the run's deadline and cancellation, for natives that check them as they go
    pub(crate) interrupt: crate::interrupt::Interrupt,
    /// host calls deferred by [`Vm::defer`], not settled yet
    deferred: Vec<Deferred>,
    /// host calls issued so far (the next call's id)
    next_call_id: u32,
    /// wall-clock milliseconds the run has spent before this process (set by the driver)
    elapsed_ms: u64,
    /// the seed the run's randomness started from
    random_seed: u64,
    /// every clock reading, in order (journaled)
    clock_log: Vec<f64>,
    /// readings to answer the clock with instead of `clock` (replay)
    clock_replay: Option<Vec<f64>>,
    /// opaque host data carried through snapshots (the facade's journal)
    host_data: Vec<u8>,
    /// executed instructions, when tracing
    trace: Option<Vec<TraceStep>>,
    trace_cap: usize,
    trace_dropped: u64,
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
    /// was another one (drop it, or reuse its allocations as `ajs_compiler::recycle` does); the
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
    #[cfg_attr(feature = "unmetered", allow(dead_code))]
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

/// The binary operators with a register or a constant right operand (`Add` / `AddK`, …).
#[derive(Clone, Copy)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Lt,
    Le,
    Gt,
    Ge,
    StrictEq,
    StrictNe,
}

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
            fuel_budget: 0,
            fuel: Fuel::new(0),
            raise_on_run: None,
            handling: None,
            status: Status::Finished,
            log: Vec::new(),
            log_dropped: 0,
            max_log_lines: opts.max_log_lines,
            log_bytes: 0,
            max_log_bytes: opts.max_log_bytes,
            max_call_depth: opts.max_call_depth.max(1),
            atom_used: Vec::new(),
            atom_cost: Vec::new(),
            atom_quota: Vec::new(),
            rng: 0,
            clock: opts.clock,
            regex_cache: Default::default(),
            interrupt: crate::interrupt::Interrupt::default(),
            deferred: Vec::new(),
            next_call_id: 0,
            elapsed_ms: 0,
            random_seed: 0,
            clock_log: Vec::new(),
            clock_replay: None,
            host_data: Vec::new(),
            trace: None,
            trace_cap: 0,
            trace_dropped: 0,
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
    /// it was the last handle, reuse its allocations (`ajs_compiler::recycle`).
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
            fuel_budget,
            fuel,
            raise_on_run,
            handling,
            status,
            log,
            log_dropped,
            log_bytes,
            // set by every start, from its options
            max_log_lines: _,
            max_log_bytes: _,
            max_call_depth: _,
            atom_cost,
            atom_quota,
            atom_used,
            rng,
            // set by every start, from its options
            clock: _,
            regex_cache,
            // set by every start, from its options
            interrupt: _,
            deferred,
            next_call_id,
            elapsed_ms,
            random_seed,
            clock_log,
            clock_replay,
            host_data,
            trace,
            trace_cap,
            trace_dropped,
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
        *fuel_budget = 0;
        *fuel = Fuel::new(0);
        clear_option(raise_on_run);
        clear_option(handling);
        *status = Status::Finished;
        clear_vec(log);
        *log_dropped = 0;
        *log_bytes = 0;
        atom_cost.clear();
        atom_quota.clear();
        atom_used.clear();
        *rng = 0;
        regex_cache.clear();
        deferred.clear();
        *next_call_id = 0;
        *elapsed_ms = 0;
        *random_seed = 0;
        clock_log.clear();
        clear_option(clock_replay);
        host_data.clear();
        clear_option(trace);
        *trace_cap = 0;
        *trace_dropped = 0;
        clear_vec(batches);
    }

    /// Starts a run of `self.program` on a cleared VM ([`Vm::clear`]): sets what the options
    /// and the program decide, then copies the arguments in. `table`: the atoms' costs and
    /// quotas (`None`: the program calls none; the cleared vectors stay empty). On an error the
    /// run is ended. (Always inlined: with `new_with` as a third caller LLVM stopped inlining
    /// it into `SpareVm::start`, and a `call_sync` cost 1,091 -> 1,131 instructions.)
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
            fuel_budget,
            fuel,
            status,
            max_log_lines,
            max_log_bytes,
            max_call_depth,
            atom_cost,
            atom_quota,
            atom_used,
            rng,
            clock,
            random_seed,
            max_parallel_items,
            interrupt,
            // as a new VM has them, after `clear`
            consts: _,
            typeof_consts: _,
            const_keys: _,
            tries: _,
            raise_on_run: _,
            handling: _,
            log: _,
            log_dropped: _,
            log_bytes: _,
            regex_cache: _,
            deferred: _,
            next_call_id: _,
            elapsed_ms: _,
            clock_log: _,
            clock_replay: _,
            host_data: _,
            trace: _,
            trace_cap: _,
            trace_dropped: _,
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
        *fuel_budget = opts.fuel;
        *fuel = Fuel::new(opts.fuel);
        *status = Status::Running;
        *max_log_lines = opts.max_log_lines;
        *max_log_bytes = opts.max_log_bytes;
        *max_call_depth = opts.max_call_depth.max(1);
        if let Some((cost, quota)) = table {
            atom_used.resize(cost.len(), 0);
            *atom_cost = cost;
            *atom_quota = quota;
        }
        *rng = opts.random_seed | 1;
        *clock = opts.clock;
        *random_seed = opts.random_seed;
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

    /// Fuel spent so far, in milli-fuel.
    pub fn fuel_used_milli(&self) -> u64 {
        self.fuel_budget - self.fuel.left()
    }

    /// Fuel spent so far, in fuel.
    pub fn fuel_used(&self) -> f64 {
        self.fuel_used_milli() as f64 / MILLI as f64
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
        self.random_seed = seed;
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
            .zip(self.atom_used.iter().copied())
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
        self.raise_on_run = Some(msg);
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
        let slow = !self.deferred.is_empty() || self.trace.is_some() || window.is_none();
        // An error delivered by `resume` is raised at the call site.
        // (tested first: `take` would store `None` back on every run)
        if self.raise_on_run.is_some() {
            if let Some(msg) = self.raise_on_run.take() {
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
                            let id = self.next_call_id;
                            self.next_call_id = self.next_call_id.saturating_add(1);
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
fn clear_option<T>(o: &mut Option<T>) {
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
fn malformed_frames() -> RunError {
    RunError::new(
        ErrorKind::Input,
        "malformed run: the call stack and the registers disagree",
    )
}

fn fault_to_error(f: Fault) -> RunError {
    match f {
        Fault::Guest(m) => RunError::new(ErrorKind::Guest, m),
        Fault::Fatal(e) => e,
    }
}

impl Vm {
    #[inline(never)]
    fn exec<const SLOW: bool, const W: usize>(&mut self, slice_left: &mut u64) -> OpResult<Exit> {
        // The slice ends when the fuel falls to the floor `exec_slice` sets (see `Fuel`): a
        // block entered inline pays its `Charge` with one subtraction and a sign test (fuel
        // and slice checked at once); the work builtins charge counts towards the slice too.
        let start_fuel = self.fuel.left();
        let result = self.exec_slice::<SLOW, W>(start_fuel, *slice_left);
        *slice_left = slice_left.saturating_sub(start_fuel - self.fuel.left());
        result
    }

    #[inline(always)]
    fn exec_slice<const SLOW: bool, const W: usize>(
        &mut self,
        start_fuel: u64,
        slice: u64,
    ) -> OpResult<Exit> {
        // (a slice of more than `i64::MAX` milli-fuel yields once that is spent: never, in
        // practice; so the room fits in an `i64`)
        let floor = start_fuel
            .saturating_sub(slice)
            .max(start_fuel.saturating_sub(i64::MAX as u64));
        self.fuel.set_floor(floor);
        let prog = self.program.clone();
        let consts = self.consts.clone();
        let consts = &consts[..];
        let Some(&Frame { pc, base, .. }) = self.frames.last() else {
            return Ok(Exit::Done(Value::Undefined));
        };
        // every function's code, in one array: a call or return only moves the pc
        let code = prog.code();
        let entries = prog.entries();
        // the running frame, kept in locals (`Call` and `Return` switch them)
        let mut pc = pc as usize;
        // (slow loop only: the instruction at `pc` is dispatched again, and was traced already:
        // a `Call` that grew the frame stack first)
        let mut again = false;
        // The running frame's registers. On the fast path a fixed window of `W` registers
        // (every function of the program has at most that many, see `Vm::run`), indexed with a
        // mask, so a register access needs no bounds check; on the slow path the rest of the
        // register file, checked. Derived again after anything that may touch the register file
        // (a frame switch, an instruction run out of line, a builtin).
        //
        // The running frame's base is not kept in a local (it would be carried through every
        // iteration of the loop): `base!()` reads it from the frame, where only calls, returns
        // and the out-of-line paths need it.
        macro_rules! base {
            () => {
                self.frames.last().map_or(0, |f| f.base as usize)
            };
        }
        macro_rules! window_at {
            ($base:expr) => {
                if SLOW {
                    &mut self.regs[$base..]
                } else {
                    fixed_window::<W>(&mut self.regs, $base)
                }
            };
        }
        macro_rules! window {
            () => {
                window_at!(base!())
            };
        }
        let mut w: &mut [Value] = window_at!(base as usize);
        macro_rules! save_pc {
            () => {
                if let Some(f) = self.frames.last_mut() {
                    f.pc = pc as u32;
                }
            };
        }
        // register `i` of the running frame (`r!` for an operand)
        macro_rules! ri {
            ($i:expr) => {
                w[if SLOW { $i } else { $i & (W - 1) }]
            };
        }
        macro_rules! r {
            ($x:expr) => {
                ri!($x.0 as usize)
            };
        }
        macro_rules! k {
            ($k:expr) => {
                consts[$k.0 as usize]
            };
        }
        // `pc` is a block head, its `Charge`: pays it here, saving a dispatch, unless the
        // run may stop there (the slice is spent or the fuel too low: the `Charge` then runs as
        // an instruction and stops the run at its own pc). Not when tracing (every instruction
        // is traced).
        macro_rules! enter_block {
            () => {
                #[cfg(not(feature = "unmetered"))]
                if !SLOW {
                    if let Some(&Op::Charge { amount }) = code.get(pc) {
                        let room = self.fuel.room.wrapping_sub(amount.0 as i64);
                        if room >= 0 {
                            self.fuel.room = room;
                            pc += 1;
                        }
                    }
                }
                #[cfg(feature = "unmetered")]
                if let Some(&Op::Charge { .. }) = code.get(pc) {
                    pc += 1;
                }
            };
        }
        let result: OpResult<Exit> = 'run: loop {
            macro_rules! tryop {
                ($e:expr) => {
                    match $e {
                        Ok(v) => v,
                        Err(f) => {
                            save_pc!();
                            break 'run Err(f);
                        }
                    }
                };
            }
            // back in `frame` (a caller a return resumes): its window and saved pc
            macro_rules! switch_to {
                ($frame:expr) => {
                    pc = $frame.pc as usize;
                    // (not grown: the caller's window was there when it made the call, and the
                    // register file only grows during a slice; one bounds check, and no call that
                    // would spill the result held meanwhile)
                    let b = $frame.base as usize;
                    let caller = if SLOW {
                        self.regs.get_mut(b..)
                    } else {
                        self.regs.get_mut(b..b.wrapping_add(W))
                    };
                    w = match caller {
                        Some(w) => w,
                        None => break 'run Err(Fault::Fatal(malformed_frames())),
                    };
                };
            }
            // Everything not handled inline below runs in `exec_other` (out of line, so that
            // this loop stays small): the pc is saved first, so its errors need no more.
            macro_rules! other {
                () => {{
                    save_pc!();
                    let done = self.exec_other(code[pc], base!());
                    w = window!();
                    if let Err(f) = done {
                        break 'run Err(f);
                    }
                }};
            }
            // When the instruction after a comparison branches on its result (a loop or `if`
            // test), the branch is taken here too: the same two steps, one dispatch. The branch
            // is not a block head (the verifier puts a `Charge` at every head), so it is paid for.
            macro_rules! branch_on {
                ($dst:expr, $t:expr) => {
                    if !SLOW {
                        match code.get(pc + 1) {
                            Some(&Op::JumpIfFalse { cond, target }) if cond.0 == $dst.0 => {
                                pc = if $t { pc + 2 } else { target.0 as usize };
                                enter_block!();
                                continue;
                            }
                            Some(&Op::JumpIfTrue { cond, target }) if cond.0 == $dst.0 => {
                                pc = if $t { target.0 as usize } else { pc + 2 };
                                enter_block!();
                                continue;
                            }
                            _ => {}
                        }
                    }
                };
            }
            macro_rules! num_op {
                ($dst:expr, $x:expr, $y:expr, |$a:ident, $b:ident| $e:expr) => {
                    match ($x, $y) {
                        (Value::Num($a), Value::Num($b)) => r!($dst) = Value::Num($e),
                        _ => other!(),
                    }
                };
            }
            macro_rules! cmp_op {
                ($dst:expr, $x:expr, $y:expr, |$a:ident, $b:ident| $e:expr) => {
                    match ($x, $y) {
                        (Value::Num($a), Value::Num($b)) => {
                            let t = $e;
                            r!($dst) = Value::Bool(t);
                            branch_on!($dst, t);
                        }
                        _ => other!(),
                    }
                };
            }
            // (never past the code: the verifier checked that no function falls off its end
            // and that every target is inside it. Tested here, rather than by indexing, which
            // would panic instead: the loop's registers were allocated worse around the panic's
            // path, every instruction reloading the code's address, once `Call` stopped
            // copying its argument; `while` 111.0 -> 107.0 M instructions, fib 49.54 -> 47.84
            // M, array 9.25 -> 8.80 M)
            let Some(&op) = code.get(pc) else {
                break 'run Err(Fault::Fatal(malformed_frames()));
            };
            if SLOW {
                let blocked = self.blocks_on_pending(&op, base!());
                // a `ParEnd` still waiting for its calls is traced once, when it completes, and
                // an instruction dispatched again once, the first time
                if self.trace.is_some()
                    && !(blocked
                        || again
                        || (matches!(op, Op::ParEnd { .. }) && self.par_waiting()))
                {
                    let func = self.frames.last().map_or(0, |f| f.func as usize);
                    let pos = prog.span(func, prog.local_pc(func, pc as u32) as usize);
                    self.trace_step(op.name(), pos);
                }
                again = false;
                if blocked {
                    save_pc!();
                    break 'run Ok(Exit::Blocked);
                }
                w = window!();
            }
            // A fused compare-and-branch: two numbers compared inline, the branch taken when the
            // comparison is `$when` (both ways lead a block); anything else compared out of line
            // by `other!()`, like every other instruction's general case, which leaves in the
            // frame the pc to go on at. (Its own slow path in each arm, deriving the window again
            // there, made LLVM lose the window's length: the `while` loop went 113 -> 137 M
            // instructions.)
            macro_rules! cmp_jump {
                ($x:expr, $y:expr, $target:expr, $when:expr, |$a:ident, $b:ident| $e:expr) => {{
                    if let (Value::Num($a), Value::Num($b)) = ($x, $y) {
                        pc = if ($e) == $when { $target.get() as usize } else { pc + 1 };
                        enter_block!();
                        continue;
                    }
                    other!();
                    pc = self.frames.last().map_or(0, |f| f.pc as usize);
                    continue;
                }};
            }
            match op {
                #[cfg(feature = "unmetered")]
                Op::Charge { .. } => {}
                #[cfg(not(feature = "unmetered"))]
                Op::Charge { amount } => {
                    let room = self.fuel.room.wrapping_sub(amount.0 as i64);
                    if room >= 0 {
                        self.fuel.room = room;
                    } else {
                        // the slice is spent, or the fuel is short, or this block's charge
                        // crosses the slice's end (paid: the next block yields)
                        let (amount, left) = (amount.0 as u64, self.fuel.left());
                        if start_fuel - left >= slice || self.fuel.room < 0 {
                            save_pc!();
                            break 'run Ok(Exit::Yield);
                        }
                        if amount > left {
                            self.fuel.set(0);
                            save_pc!();
                            break 'run Err(Fault::Fatal(RunError::out_of_fuel()));
                        }
                        self.fuel.set(left - amount);
                    }
                }
                Op::Move { dst, src } => r!(dst) = r!(src),
                Op::LoadConst { dst, k } => r!(dst) = k!(k),
                Op::LoadUndef { dst } => r!(dst) = Value::Undefined,
                Op::LoadNull { dst } => r!(dst) = Value::Null,
                Op::LoadTrue { dst } => r!(dst) = Value::Bool(true),
                Op::LoadFalse { dst } => r!(dst) = Value::Bool(false),
                Op::Add { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| x + y),
                Op::Sub { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| x - y),
                Op::Mul { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| x * y),
                Op::Div { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| x / y),
                Op::Mod { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| js_rem(x, y)),
                Op::AddK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| x + y),
                Op::SubK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| x - y),
                Op::AddI { dst, a, i } => num_op!(dst, r!(a), Value::Num(i.get()), |x, y| x + y),
                Op::SubI { dst, a, i } => num_op!(dst, r!(a), Value::Num(i.get()), |x, y| x - y),
                Op::MulK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| x * y),
                Op::DivK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| x / y),
                Op::ModK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| js_rem(x, y)),
                Op::MulI { dst, a, i } => num_op!(dst, r!(a), Value::Num(i.get()), |x, y| x * y),
                Op::ModI { dst, a, i } => {
                    num_op!(dst, r!(a), Value::Num(i.get()), |x, y| js_rem(x, y))
                }
                Op::Lt { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x < y),
                Op::Le { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x <= y),
                Op::Gt { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x > y),
                Op::Ge { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x >= y),
                Op::StrictEq { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x == y),
                Op::StrictNe { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x != y),
                Op::LtK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x < y),
                Op::LeK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x <= y),
                Op::GtK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x > y),
                Op::GeK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x >= y),
                Op::StrictEqK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x == y),
                Op::StrictNeK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x != y),
                Op::StrictEqI { dst, a, i } => {
                    cmp_op!(dst, r!(a), Value::Num(i.get()), |x, y| x == y)
                }
                Op::StrictNeI { dst, a, i } => {
                    cmp_op!(dst, r!(a), Value::Num(i.get()), |x, y| x != y)
                }
                Op::JumpIfLt { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, true, |x, y| x < y)
                }
                Op::JumpUnlessLt { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, false, |x, y| x < y)
                }
                Op::JumpIfLtK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, true, |x, y| x < y)
                }
                Op::JumpUnlessLtK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, false, |x, y| x < y)
                }
                Op::JumpIfLe { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, true, |x, y| x <= y)
                }
                Op::JumpUnlessLe { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, false, |x, y| x <= y)
                }
                Op::JumpIfLeK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, true, |x, y| x <= y)
                }
                Op::JumpUnlessLeK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, false, |x, y| x <= y)
                }
                Op::JumpIfGt { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, true, |x, y| x > y)
                }
                Op::JumpUnlessGt { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, false, |x, y| x > y)
                }
                Op::JumpIfGtK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, true, |x, y| x > y)
                }
                Op::JumpUnlessGtK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, false, |x, y| x > y)
                }
                Op::JumpIfGe { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, true, |x, y| x >= y)
                }
                Op::JumpUnlessGe { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, false, |x, y| x >= y)
                }
                Op::JumpIfGeK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, true, |x, y| x >= y)
                }
                Op::JumpUnlessGeK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, false, |x, y| x >= y)
                }
                Op::JumpIfStrictEq { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, true, |x, y| x == y)
                }
                Op::JumpIfStrictEqK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, true, |x, y| x == y)
                }
                Op::JumpIfStrictNe { a, b, target } => {
                    cmp_jump!(r!(a), r!(b), target, true, |x, y| x != y)
                }
                Op::JumpIfStrictNeK { a, k, target } => {
                    cmp_jump!(r!(a), k!(k), target, true, |x, y| x != y)
                }
                Op::JumpIfLtI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, true, |x, y| x < y)
                }
                Op::JumpUnlessLtI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, false, |x, y| x < y)
                }
                Op::JumpIfLeI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, true, |x, y| x <= y)
                }
                Op::JumpUnlessLeI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, false, |x, y| x <= y)
                }
                Op::JumpIfGtI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, true, |x, y| x > y)
                }
                Op::JumpUnlessGtI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, false, |x, y| x > y)
                }
                Op::JumpIfGeI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, true, |x, y| x >= y)
                }
                Op::JumpUnlessGeI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, false, |x, y| x >= y)
                }
                Op::JumpIfStrictEqI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, true, |x, y| x == y)
                }
                Op::JumpIfStrictNeI { a, i, target } => {
                    cmp_jump!(r!(a), Value::Num(i.get()), target, true, |x, y| x != y)
                }
                Op::Jump { target } => {
                    pc = target.0 as usize;
                    enter_block!();
                    continue;
                }
                Op::JumpIfTrue { cond, target } => {
                    let t = match r!(cond) {
                        Value::Bool(t) => t,
                        v => {
                            let t = self.truthy(v);
                            w = window!();
                            t
                        }
                    };
                    if t {
                        pc = target.0 as usize;
                        continue;
                    }
                }
                Op::JumpIfFalse { cond, target } => {
                    let t = match r!(cond) {
                        Value::Bool(t) => t,
                        v => {
                            let t = self.truthy(v);
                            w = window!();
                            t
                        }
                    };
                    if !t {
                        pc = target.0 as usize;
                        continue;
                    }
                }
                Op::JumpIfNullish { src, target } => {
                    if matches!(r!(src), Value::Null | Value::Undefined) {
                        pc = target.0 as usize;
                        continue;
                    }
                }
                Op::JumpIfNotNullish { src, target } => {
                    if !matches!(r!(src), Value::Null | Value::Undefined) {
                        pc = target.0 as usize;
                        continue;
                    }
                }
                Op::Return { src } => {
                    let n = self.frames.depth;
                    // the common case: back to a caller from a frame that opened no handler
                    // or batch (the entry frame is marked as if it had); the two frames in one
                    // bounds check (`None` when there is no caller)
                    let below = self.frames.top_but(1);
                    if let Some(&[caller, done]) =
                        self.frames.slots.get(below..below.wrapping_add(2))
                    {
                        if done.opened {
                            // (the slow path below)
                        } else {
                            self.frames.depth = n - 1;
                            // (the result read here, not before the frames: read first, it was
                            // live into the slow path, where calls are, and was kept on the
                            // stack; fib 52.09 -> 51.61 M instructions)
                            let v = r!(src);
                            switch_to!(caller);
                            // (through the caller's window: the verifier checked `dst`
                            // against the caller's registers)
                            ri!(done.ret as usize) = v;
                            continue;
                        }
                    }
                    let v = r!(src);
                    let depth = n.saturating_sub(1);
                    while self.tries.last().is_some_and(|t| t.frame as usize >= depth) {
                        self.tries.pop();
                    }
                    if !self.batches.is_empty() {
                        self.par_return(depth as u32);
                    }
                    if depth == 0 {
                        if SLOW && !self.deferred.is_empty() {
                            // the run would end with deferred calls never settled
                            save_pc!();
                            break 'run Ok(Exit::Blocked);
                        }
                        break 'run Ok(Exit::Done(v));
                    }
                    // (its slot's flag cleared: a call reusing the slot does not write it)
                    if let Some(f) = self.frames.last_mut() {
                        f.opened = false;
                    }
                    let Some(done) = self.frames.pop() else {
                        break 'run Ok(Exit::Done(v));
                    };
                    let Some(&caller) = self.frames.last() else {
                        break 'run Ok(Exit::Done(v));
                    };
                    switch_to!(caller);
                    ri!(done.ret as usize) = v;
                    continue;
                }
                Op::GetIndex { dst, obj, key } => {
                    // an array element by a number in range: the common case, inline
                    if let (Value::Arr(g), Value::Num(n)) = (r!(obj), r!(key)) {
                        if let Cell::Arr(items) = self.heap.get(g) {
                            let i = n as usize;
                            if i as f64 == n {
                                if let Some(&v) = items.get(i) {
                                    r!(dst) = v;
                                    pc += 1;
                                    continue;
                                }
                            }
                        }
                    }
                    other!()
                }
                Op::ArrayLen { dst, arr, .. } => match r!(arr) {
                    Value::Arr(g) => {
                        let n = match self.heap.get(g) {
                            Cell::Arr(a) => a.len(),
                            _ => 0,
                        };
                        r!(dst) = Value::Num(n as f64);
                    }
                    _ => other!(),
                },
                Op::CallNative {
                    dst,
                    native,
                    base: b,
                    argc: Count(2),
                } if native.0 == NativeId::Push as u16 => {
                    // `arr.push(x)`: the common case, inline (charged as the native does)
                    match ri!(b.0 as usize) {
                        Value::Arr(g) => {
                            let x = ri!(b.0 as usize + 1);
                            tryop!(self.charge(MILLI_PER_ELEMENT));
                            let n = tryop!(self.arr_extend(g, &[x], &[x]));
                            w = window!();
                            r!(dst) = Value::Num(n as f64);
                        }
                        _ => other!(),
                    }
                }
                Op::Call {
                    dst,
                    func: callee,
                    base: b,
                    argc,
                } => {
                    // (the callee's start and registers, from the entries kept in a local
                    // before the loop: fib 51.61 -> 51.12 M instructions, `while` unchanged;
                    // under an earlier allocation the local cost `while` 112.0 -> 114.0 M)
                    let f = entries[callee.0 as usize];
                    // the caller's frame and the slot above it, in one bounds check (see
                    // `Frames`: the slot exists only below the depth limit)
                    let top = self.frames.top();
                    let Some(pair) = self.frames.slots.get_mut(top..top.wrapping_add(2)) else {
                        // one more spare slot, and this `Call` again (nothing written yet; no
                        // operand is live across the growth, so that the hot path need not
                        // keep them in registers a call preserves)
                        if let Err(e) =
                            grow_frames(&mut self.frames, self.max_call_depth, &prog, callee.0)
                        {
                            save_pc!();
                            break 'run Err(Fault::Fatal(e));
                        }
                        // (traced once: the slow loop does not trace it again)
                        again = SLOW;
                        continue;
                    };
                    let [caller, slot] = pair else {
                        save_pc!();
                        break 'run Err(Fault::Fatal(malformed_frames()));
                    };
                    // the pc the return resumes at
                    caller.pc = pc as u32 + 1;
                    // The callee's window starts at its arguments, inside the caller's: they
                    // are its first registers, in place, not copied. The caller's registers
                    // from there up are its temporaries, dead across the call (the compiler
                    // allocates them as a stack: see `Op::Call`; the verifier does not prove
                    // it, and a program that breaks it only overwrites its own registers).
                    // Not copying the argument took fib(25) from 1.5x to 1.9x QuickJS's speed
                    // (paired), far more than its instructions (50.39 -> 49.54 M): the copy
                    // read as one 16-byte load the value the instruction before had just
                    // written as its tag and its number, a load the CPU cannot forward from
                    // those two stores and waits for.
                    let new_base = caller.base as usize + b.0 as usize;
                    // the callee's registers after its arguments: `undefined` (the verifier
                    // checked argc == params <= nregs)
                    let (argc, nregs) = (argc.0 as usize, f.nregs as usize);
                    // (its pc not written: nothing reads the running frame's pc before
                    // `save_pc!` writes it, the pc being kept in a local until then)
                    // (nor its `opened`: a spare slot's is clear, unless an unwind dropped the
                    // frame that set it, and then its return takes the slow path once, which
                    // is all the flag does)
                    slot.func = callee.0;
                    slot.base = new_base as u32;
                    slot.ret = dst.0 as u32;
                    self.frames.depth = top.wrapping_add(2);
                    pc = f.start as usize;
                    // (`unary`: the callee has one parameter, so `argc` is 1, and at most
                    // `WINDOW_FILL` registers; `small`: at most two parameters. One test for the
                    // usual call. A fixed-size fill through the callee's window, no call; what
                    // it writes above the callee's registers is the caller's dead registers or
                    // the dead file above them. The base as the frame holds it, in `u32`: the
                    // window's end then cannot overflow, one test fewer.)
                    if !SLOW && f.unary {
                        w = window_at!(new_base as u32 as usize);
                        w[1..WINDOW_FILL].copy_from_slice(&UNDEFINED[1..]);
                    } else if !SLOW && f.small {
                        w = window_at!(new_base as u32 as usize);
                        if argc == 2 {
                            w[2..WINDOW_FILL].copy_from_slice(&UNDEFINED[2..]);
                        } else {
                            w[..WINDOW_FILL].copy_from_slice(&UNDEFINED);
                        }
                    } else {
                        self.call_registers(new_base, argc, nregs);
                        w = window_at!(new_base);
                    }
                    enter_block!();
                    continue;
                }
                Op::CallAtom { dst, atom, arg } => {
                    let input = r!(arg);
                    tryop!(self.take_atom(atom.0 as usize));
                    pc += 1;
                    save_pc!();
                    let ret = base!() + dst.0 as usize;
                    break 'run Ok(Exit::Host(atom.0, input, ret as u32));
                }
                Op::ParEnd { dst, settled } => match tryop!(self.par_end(settled.0 != 0)) {
                    Some(v) => {
                        w = window!();
                        r!(dst) = v
                    }
                    None => {
                        save_pc!();
                        break 'run Ok(Exit::Blocked);
                    }
                },
                Op::Throw { src } => {
                    let v = r!(src);
                    let msg = self.message_of(v);
                    save_pc!();
                    break 'run Err(Fault::Guest(msg));
                }
                Op::Pow { .. }
                | Op::Eq { .. }
                | Op::Ne { .. }
                | Op::Neg { .. }
                | Op::Pos { .. }
                | Op::Not { .. }
                | Op::TypeOf { .. }
                | Op::Concat { .. }
                | Op::NewArray { .. }
                | Op::ArrayAppend { .. }
                | Op::NewObject { .. }
                | Op::InitProp { .. }
                | Op::GetProp { .. }
                | Op::ArrayExtend { .. }
                | Op::ObjectAssign { .. }
                | Op::InitIndex { .. }
                | Op::Destructurable { .. }
                | Op::ObjectRest { .. }
                | Op::CallNativeArray { .. }
                | Op::CallNative { .. }
                | Op::ParBegin {}
                | Op::ParCall { .. }
                | Op::ParValue { .. }
                | Op::TryEnter { .. }
                | Op::TryExit {}
                | Op::Catch { .. } => other!(),
            }
            pc += 1;
        };
        #[cfg(feature = "unmetered")]
        let _ = (start_fuel, slice, floor);
        result
    }

    /// The instructions `exec` does not handle inline: those that never change control flow
    /// (and the general cases of the ones it handles inline for numbers, arrays and `push`).
    #[inline(never)]
    fn exec_other(&mut self, op: Op, base: usize) -> OpResult<()> {
        macro_rules! r {
            ($x:expr) => {
                self.regs[base + $x.0 as usize]
            };
        }
        macro_rules! run {
            ($b:expr, $n:expr) => {
                base + $b.0 as usize..base + $b.0 as usize + $n as usize
            };
        }
        macro_rules! k {
            ($k:expr) => {
                self.consts[$k.0 as usize]
            };
        }
        match op {
            Op::Add { dst, a, b } => r!(dst) = self.binary(Bin::Add, r!(a), r!(b))?,
            Op::Sub { dst, a, b } => r!(dst) = self.binary(Bin::Sub, r!(a), r!(b))?,
            Op::Mul { dst, a, b } => r!(dst) = self.binary(Bin::Mul, r!(a), r!(b))?,
            Op::Div { dst, a, b } => r!(dst) = self.binary(Bin::Div, r!(a), r!(b))?,
            Op::Mod { dst, a, b } => r!(dst) = self.binary(Bin::Mod, r!(a), r!(b))?,
            Op::Lt { dst, a, b } => r!(dst) = self.binary(Bin::Lt, r!(a), r!(b))?,
            Op::Le { dst, a, b } => r!(dst) = self.binary(Bin::Le, r!(a), r!(b))?,
            Op::Gt { dst, a, b } => r!(dst) = self.binary(Bin::Gt, r!(a), r!(b))?,
            Op::Ge { dst, a, b } => r!(dst) = self.binary(Bin::Ge, r!(a), r!(b))?,
            Op::StrictEq { dst, a, b } => r!(dst) = self.binary(Bin::StrictEq, r!(a), r!(b))?,
            Op::StrictNe { dst, a, b } => r!(dst) = self.binary(Bin::StrictNe, r!(a), r!(b))?,
            Op::AddK { dst, a, k } => r!(dst) = self.binary(Bin::Add, r!(a), k!(k))?,
            Op::SubK { dst, a, k } => r!(dst) = self.binary(Bin::Sub, r!(a), k!(k))?,
            Op::AddI { dst, a, i } => {
                r!(dst) = self.binary(Bin::Add, r!(a), Value::Num(i.get()))?
            }
            Op::SubI { dst, a, i } => {
                r!(dst) = self.binary(Bin::Sub, r!(a), Value::Num(i.get()))?
            }
            Op::MulK { dst, a, k } => r!(dst) = self.binary(Bin::Mul, r!(a), k!(k))?,
            Op::DivK { dst, a, k } => r!(dst) = self.binary(Bin::Div, r!(a), k!(k))?,
            Op::ModK { dst, a, k } => r!(dst) = self.binary(Bin::Mod, r!(a), k!(k))?,
            Op::LtK { dst, a, k } => r!(dst) = self.binary(Bin::Lt, r!(a), k!(k))?,
            Op::LeK { dst, a, k } => r!(dst) = self.binary(Bin::Le, r!(a), k!(k))?,
            Op::GtK { dst, a, k } => r!(dst) = self.binary(Bin::Gt, r!(a), k!(k))?,
            Op::GeK { dst, a, k } => r!(dst) = self.binary(Bin::Ge, r!(a), k!(k))?,
            Op::StrictEqK { dst, a, k } => r!(dst) = self.binary(Bin::StrictEq, r!(a), k!(k))?,
            Op::StrictNeK { dst, a, k } => r!(dst) = self.binary(Bin::StrictNe, r!(a), k!(k))?,
            Op::MulI { dst, a, i } => {
                r!(dst) = self.binary(Bin::Mul, r!(a), Value::Num(i.get()))?
            }
            Op::ModI { dst, a, i } => {
                r!(dst) = self.binary(Bin::Mod, r!(a), Value::Num(i.get()))?
            }
            Op::StrictEqI { dst, a, i } => {
                r!(dst) = self.binary(Bin::StrictEq, r!(a), Value::Num(i.get()))?
            }
            Op::StrictNeI { dst, a, i } => {
                r!(dst) = self.binary(Bin::StrictNe, r!(a), Value::Num(i.get()))?
            }
            // a fused compare-and-branch of anything but two numbers: the pc it goes on at
            Op::JumpIfLt { .. }
            | Op::JumpUnlessLt { .. }
            | Op::JumpIfLtK { .. }
            | Op::JumpUnlessLtK { .. }
            | Op::JumpIfLe { .. }
            | Op::JumpUnlessLe { .. }
            | Op::JumpIfLeK { .. }
            | Op::JumpUnlessLeK { .. }
            | Op::JumpIfGt { .. }
            | Op::JumpUnlessGt { .. }
            | Op::JumpIfGtK { .. }
            | Op::JumpUnlessGtK { .. }
            | Op::JumpIfGe { .. }
            | Op::JumpUnlessGe { .. }
            | Op::JumpIfGeK { .. }
            | Op::JumpUnlessGeK { .. }
            | Op::JumpIfStrictEq { .. }
            | Op::JumpIfStrictEqK { .. }
            | Op::JumpIfStrictNe { .. }
            | Op::JumpIfStrictNeK { .. }
            | Op::JumpIfLtI { .. }
            | Op::JumpUnlessLtI { .. }
            | Op::JumpIfLeI { .. }
            | Op::JumpUnlessLeI { .. }
            | Op::JumpIfGtI { .. }
            | Op::JumpUnlessGtI { .. }
            | Op::JumpIfGeI { .. }
            | Op::JumpUnlessGeI { .. }
            | Op::JumpIfStrictEqI { .. }
            | Op::JumpIfStrictNeI { .. } => {
                let to = self.compare_slow(op, base)?;
                if let Some(f) = self.frames.last_mut() {
                    f.pc = to.unwrap_or(f.pc + 1);
                }
            }
            Op::Pow { dst, a, b } => {
                let (x, y) = self.num_pair(r!(a), r!(b), "**")?;
                r!(dst) = Value::Num(js_pow(x, y));
            }
            Op::Eq { dst, a, b } => r!(dst) = Value::Bool(self.eq_paid(r!(a), r!(b), true)?),
            Op::Ne { dst, a, b } => r!(dst) = Value::Bool(!self.eq_paid(r!(a), r!(b), true)?),
            Op::Neg { dst, src } => {
                let n = self.number_paid(r!(src), "-")?;
                r!(dst) = Value::Num(-n);
            }
            Op::Pos { dst, src } => {
                let n = self.number_paid(r!(src), "+")?;
                r!(dst) = Value::Num(n);
            }
            Op::Not { dst, src } => r!(dst) = Value::Bool(!self.truthy(r!(src))),
            Op::TypeOf { dst, src } => {
                let t = type_index(r!(src));
                r!(dst) = match self.typeof_consts[t] {
                    Value::Undefined => self.str_value(TYPE_NAMES[t])?,
                    name => name,
                };
            }
            Op::Concat {
                dst,
                base: b,
                count,
            } => {
                let parts: smallvec::SmallVec<[Value; 8]> =
                    self.regs[run!(b, count.0)].iter().copied().collect();
                r!(dst) = self.template(&parts)?;
            }
            Op::NewArray {
                dst,
                base: b,
                count,
            } => {
                let n = count.0 as usize;
                self.charge(n as u64 * MILLI_PER_ELEMENT)?;
                self.reserve_arr(n, &[])?;
                let items = self.regs[run!(b, n)].to_vec();
                let g = self.heap.insert(Cell::Arr(items));
                r!(dst) = Value::Arr(g);
            }
            Op::ArrayAppend {
                arr,
                base: b,
                count,
            } => {
                let n = count.0 as usize;
                self.charge(n as u64 * MILLI_PER_ELEMENT)?;
                let Value::Arr(g) = r!(arr) else {
                    return guest("ArrayAppend on a non-array");
                };
                let items: smallvec::SmallVec<[Value; 16]> =
                    self.regs[run!(b, n)].iter().copied().collect();
                self.arr_extend(g, &items, &[])?;
            }
            Op::NewObject { dst } => {
                self.reserve(16, &[])?;
                let g = self.heap.insert(Cell::Obj(PropMap::default()));
                r!(dst) = Value::Obj(g);
            }
            Op::InitProp { obj, key, val } => {
                let (o, v) = (r!(obj), r!(val));
                let Value::Str(kg) = self.consts[key.0 as usize] else {
                    return guest("property key is not a string");
                };
                self.set_prop(o, kg, Some(key.0 as usize), v)?;
            }
            Op::GetProp { dst, obj, key } => {
                let o = r!(obj);
                let k = self.consts[key.0 as usize];
                r!(dst) = self.get_member(o, k)?;
            }
            Op::GetIndex { dst, obj, key } => {
                let (o, k) = (r!(obj), r!(key));
                r!(dst) = self.get_member(o, k)?;
            }
            Op::ArrayExtend { arr, src } => {
                let (a, v) = (r!(arr), r!(src));
                self.spread_into_array(a, v)?;
            }
            Op::ObjectAssign { obj, src } => {
                let (o, v) = (r!(obj), r!(src));
                self.spread_into_object(o, v)?;
            }
            Op::InitIndex { obj, key, val } => {
                let (o, k, v) = (r!(obj), r!(key), r!(val));
                self.init_index(o, k, v)?;
            }
            Op::Destructurable { dst, src, array } => {
                let v = r!(src);
                r!(dst) = self.destructurable(v, array.0 == 1)?;
            }
            Op::ObjectRest {
                dst,
                src,
                base: b,
                count,
            } => {
                let keys: smallvec::SmallVec<[Value; 8]> =
                    self.regs[run!(b, count.0)].iter().copied().collect();
                let v = r!(src);
                r!(dst) = self.object_rest(v, &keys)?;
            }
            Op::CallNativeArray { dst, native, args } => {
                let id = NativeId::from_u16(native.0).unwrap_or(NativeId::MathAbs);
                let a = r!(args);
                r!(dst) = self.call_native_array(id, a)?;
            }
            Op::ArrayLen { dst, arr, method } => {
                let a = r!(arr);
                if let Value::Arr(_) = a {
                    r!(dst) = Value::Num(self.length_of(a) as f64);
                    return Ok(());
                }
                let m = match self.consts[method.0 as usize] {
                    Value::Str(g) => String::from_utf16_lossy(self.units(g)),
                    _ => String::new(),
                };
                return match a {
                    Value::Null => guest(format!("Cannot call method '{m}' on null")),
                    Value::Undefined => guest(format!("Cannot call method '{m}' on undefined")),
                    other => guest(format!(
                        "'{m}' is not a function on a {}",
                        self.kind_name(other)
                    )),
                };
            }
            Op::CallNative {
                dst,
                native,
                base: b,
                argc,
            } => {
                let args: smallvec::SmallVec<[Value; 8]> =
                    self.regs[run!(b, argc.0)].iter().copied().collect();
                let id = NativeId::from_u16(native.0).unwrap_or(NativeId::MathAbs);
                r!(dst) = self.call_native(id, &args)?;
            }
            Op::ParBegin {} => self.par_begin()?,
            Op::ParCall { atom, arg } => {
                self.take_atom(atom.0 as usize)?;
                let input = r!(arg);
                let id = self.next_call_id;
                self.next_call_id = self.next_call_id.saturating_add(1);
                self.par_push(parallel::ParItem::Queued {
                    id,
                    atom: atom.0,
                    input,
                })?;
            }
            Op::ParValue { src } => {
                let v = r!(src);
                self.par_push(parallel::ParItem::Ready(v))?;
            }
            Op::TryEnter { handler } => {
                if let Some(f) = self.frames.last_mut() {
                    f.opened = true;
                }
                self.tries.push(TryEntry {
                    frame: self.frames.len() as u32 - 1,
                    handler: handler.0,
                });
            }
            Op::TryExit {} => {
                let depth = self.frames.len() as u32 - 1;
                if self.tries.last().is_some_and(|t| t.frame == depth) {
                    self.tries.pop();
                }
            }
            Op::Catch { dst } => {
                let msg = self.handling.take().unwrap_or_default();
                let units: Vec<u16> = msg.encode_utf16().collect();
                r!(dst) = self.alloc_str(units)?;
            }
            // handled by `exec` (control flow); never sent here
            Op::Charge { .. }
            | Op::Move { .. }
            | Op::LoadConst { .. }
            | Op::LoadUndef { .. }
            | Op::LoadNull { .. }
            | Op::LoadTrue { .. }
            | Op::LoadFalse { .. }
            | Op::Jump { .. }
            | Op::JumpIfTrue { .. }
            | Op::JumpIfFalse { .. }
            | Op::JumpIfNullish { .. }
            | Op::JumpIfNotNullish { .. }
            | Op::Return { .. }
            | Op::Call { .. }
            | Op::CallAtom { .. }
            | Op::ParEnd { .. }
            | Op::Throw { .. } => {}
        }
        Ok(())
    }

    /// A fused compare-and-branch of anything but two numbers: its target when it jumps.
    #[inline(never)]
    fn compare_slow(&mut self, op: Op, base: usize) -> OpResult<Option<u32>> {
        let Some(f) = op.fused() else {
            return Ok(None);
        };
        let y = match f.right {
            Right::Reg(b) => self.regs.get(base + b.0 as usize).copied(),
            Right::Const(k) => self.consts.get(k.0 as usize).copied(),
            Right::Int(i) => Some(Value::Num(i.get())),
        };
        let (Some(&x), Some(y)) = (self.regs.get(base + f.a.0 as usize), y) else {
            return Ok(None);
        };
        let bin = match f.cmp {
            Cmp::Lt => Bin::Lt,
            Cmp::Le => Bin::Le,
            Cmp::Gt => Bin::Gt,
            Cmp::Ge => Bin::Ge,
            Cmp::StrictEq => Bin::StrictEq,
        };
        let t = matches!(self.binary(bin, x, y)?, Value::Bool(true));
        Ok((t == f.when).then_some(f.target.get()))
    }

    /// A binary operator on two values, the general case (`exec` handles numbers inline).
    fn binary(&mut self, op: Bin, x: Value, y: Value) -> OpResult<Value> {
        Ok(match op {
            Bin::Add => match (x, y) {
                (Value::Num(x), Value::Num(y)) => Value::Num(x + y),
                _ => self.add_slow(x, y)?,
            },
            Bin::Sub => {
                let (x, y) = self.num_pair(x, y, "-")?;
                Value::Num(x - y)
            }
            Bin::Mul => {
                let (x, y) = self.num_pair(x, y, "*")?;
                Value::Num(x * y)
            }
            Bin::Div => {
                let (x, y) = self.num_pair(x, y, "/")?;
                Value::Num(x / y)
            }
            Bin::Mod => {
                let (x, y) = self.num_pair(x, y, "%")?;
                Value::Num(js_rem(x, y))
            }
            Bin::Lt => Value::Bool(self.compare(x, y, "<")?.is_some_and(|o| o.is_lt())),
            Bin::Le => Value::Bool(self.compare(x, y, "<=")?.is_some_and(|o| o.is_le())),
            Bin::Gt => Value::Bool(self.compare(x, y, ">")?.is_some_and(|o| o.is_gt())),
            Bin::Ge => Value::Bool(self.compare(x, y, ">=")?.is_some_and(|o| o.is_ge())),
            Bin::StrictEq => Value::Bool(self.eq_paid(x, y, false)?),
            Bin::StrictNe => Value::Bool(!self.eq_paid(x, y, false)?),
        })
    }

    /// Checks the atom's per-run quota, charges its fuel and counts the call.
    fn take_atom(&mut self, i: usize) -> OpResult<()> {
        if let Some(q) = self.atom_quota[i] {
            if self.atom_used[i] >= q {
                let name = &self.program.atoms[i];
                let calls = if q == 1 { "call" } else { "calls" };
                return Err(Fault::Fatal(RunError::new(
                    ErrorKind::Quota,
                    format!("Quota exceeded for '{name}': {q} {calls} allowed"),
                )));
            }
        }
        self.charge(self.atom_cost[i])?;
        self.atom_used[i] += 1;
        Ok(())
    }

    /// Charges size-proportional work before it is done.
    pub(crate) fn charge(&mut self, milli: u64) -> OpResult<()> {
        let left = self.fuel.left();
        if milli > left {
            self.fuel.set(0);
            return Err(Fault::Fatal(RunError::out_of_fuel()));
        }
        self.fuel.set(left - milli);
        Ok(())
    }

    /// Charges for touching `units` UTF-16 code units.
    pub(crate) fn charge_units(&mut self, units: usize) -> OpResult<()> {
        self.charge((units as u64).saturating_mul(crate::price::MILLI_PER_UNIT))
    }

    /// Collects everything unreachable from the run's roots — registers, constants, deferred
    /// and awaited host-call inputs — and `extra` (values only a Rust local holds).
    pub(crate) fn collect_garbage(&mut self, extra: &[Value]) {
        let awaiting = match self.status {
            Status::AwaitingHost { input, .. } => Some(input),
            _ => None,
        };
        let top = self.live_top();
        let roots = self.regs[..top]
            .iter()
            .chain(self.consts.iter())
            .chain(extra.iter())
            .chain(self.deferred.iter().map(|d| &d.input))
            .chain(awaiting.iter())
            .chain(parallel::roots(&self.batches));
        self.heap.collect(roots);
    }

    /// The registers of the frames on the stack: the register file above them holds the windows
    /// of returned calls (dead; overwritten by the next call), which are neither roots nor
    /// saved. (A caller's registers above a call's arguments are dead too, but are kept: the
    /// verifier does not prove it, and a frame's whole window stays rooted.)
    pub(crate) fn live_regs(&self) -> &[Value] {
        &self.regs[..self.live_top()]
    }

    /// The end of [`Vm::live_regs`]: the highest end of a frame's registers (not always the
    /// running frame's: a callee's window starts at its arguments, inside its caller's, and
    /// may end below the caller's).
    pub(crate) fn live_top(&self) -> usize {
        let funcs = &self.program.functions;
        let top = self
            .frames
            .iter()
            .map(|f| f.base as usize + funcs[f.func as usize].nregs as usize)
            .max()
            .unwrap_or(0);
        top.min(self.regs.len())
    }

    /// The code units of a string value.
    pub(crate) fn units(&self, g: Gc) -> &[u16] {
        self.heap.str_units(g)
    }

    pub(crate) fn set_prop(
        &mut self,
        o: Value,
        key: Gc,
        constant: Option<usize>,
        v: Value,
    ) -> OpResult<()> {
        let Value::Obj(og) = o else {
            return guest("property definition on a non-object");
        };
        let at = match self.heap.get(og) {
            Cell::Obj(m) => prop_index(m, self.units(key)),
            _ => None,
        };
        match at {
            // an existing property: replaced in place, by position (no hashing, no new key)
            Some(i) => {
                if let Some(Cell::Obj(m)) = self.heap.get_mut(og) {
                    if let Some((_, slot)) = m.get_index_mut(i) {
                        *slot = v;
                    }
                }
            }
            None => {
                let k = match constant {
                    Some(i) => self.const_key(i, key),
                    None => self.units(key).into(),
                };
                let real = memory::key_real(k.len());
                let growth = if self.heap.has_room_for_prop(og) {
                    0
                } else {
                    self.heap.growth(og, 1)
                };
                self.reserve_real(prop_bytes(k.len()), growth + real, &[])?;
                self.heap.grow(prop_bytes(k.len()));
                self.heap.grow_real(real);
                // (`prop_index` found no such key)
                if growth == 0 {
                    if let Some(Cell::Obj(m)) = self.heap.get_mut(og) {
                        m.insert_new(k, v);
                    }
                } else {
                    self.heap.mutate(og, |c| {
                        if let Cell::Obj(m) = c {
                            m.insert_new(k, v);
                        }
                    });
                }
            }
        }
        Ok(())
    }

    /// Constant `i` (the string `g`) as a property key, made once per run.
    fn const_key(&mut self, i: usize, g: Gc) -> Key {
        if let Some(Some(k)) = self.const_keys.get(i) {
            return k.clone();
        }
        let k: Key = self.units(g).into();
        if self.const_keys.len() <= i {
            self.const_keys.resize(i + 1, None);
        }
        self.const_keys[i] = Some(k.clone());
        k
    }

    /// `o[k]`, null-safe, with the forbidden-name check on every path.
    fn get_member(&mut self, o: Value, k: Value) -> OpResult<Value> {
        match k {
            Value::Str(kg) => {
                let key = self.units(kg);
                // the forbidden names are 9 and 11 units long
                if matches!(key.len(), 9 | 11) {
                    for f in FORBIDDEN {
                        if key.iter().copied().eq(f.encode_utf16()) {
                            return guest(format!("Security Error: Access to '{f}' is forbidden"));
                        }
                    }
                }
                match o {
                    Value::Obj(og) => match self.heap.get(og) {
                        Cell::Obj(m) => Ok(prop_index(m, key)
                            .and_then(|i| m.get_index(i))
                            .map_or(Value::Undefined, |(_, v)| *v)),
                        Cell::Set(_) | Cell::Date(_) | Cell::Regex(_) => {
                            let key = String::from_utf16_lossy(key);
                            self.special_member(og, &key)
                        }
                        _ => Ok(Value::Undefined),
                    },
                    Value::Arr(_) | Value::Str(_) => {
                        if key.iter().copied().eq("length".encode_utf16()) {
                            return Ok(Value::Num(self.length_of(o) as f64));
                        }
                        match array_index(key) {
                            Some(i) => self.element(o, i),
                            None => Ok(self.array_extra(o, kg)),
                        }
                    }
                    _ => Ok(Value::Undefined),
                }
            }
            Value::Num(n) => match o {
                Value::Arr(_) | Value::Str(_) => {
                    if n >= 0.0 && n.fract() == 0.0 && n < 4_294_967_295.0 {
                        self.element(o, n as usize)
                    } else {
                        Ok(Value::Undefined)
                    }
                }
                Value::Obj(_) => {
                    let s = crate::number::number_to_string(n);
                    let kv = self.str_value(&s)?;
                    self.get_member(o, kv)
                }
                _ => Ok(Value::Undefined),
            },
            Value::Arr(_) | Value::Obj(_) => guest(format!(
                "Cannot use an {} as a property key; use a string or a number",
                self.kind_name(k)
            )),
            Value::Bool(_) | Value::Null | Value::Undefined => {
                let s = match k {
                    Value::Bool(b) => b.to_string(),
                    Value::Null => "null".into(),
                    _ => "undefined".into(),
                };
                let kv = self.str_value(&s)?;
                self.get_member(o, kv)
            }
            Value::Pending(_) => {
                guest("a host result that has not settled cannot be used as a property key")
            }
        }
    }

    /// A property of an array besides its elements and `length` (a match result's `index`,
    /// `input`, `groups`), or `undefined`.
    fn array_extra(&self, o: Value, key: Gc) -> Value {
        let Value::Arr(g) = o else {
            return Value::Undefined;
        };
        match self.heap.extras(g).map(|x| self.heap.get(x)) {
            Some(Cell::Obj(m)) => prop_index(m, self.units(key))
                .and_then(|i| m.get_index(i))
                .map_or(Value::Undefined, |(_, v)| *v),
            _ => Value::Undefined,
        }
    }

    pub(crate) fn length_of(&self, v: Value) -> usize {
        match v {
            Value::Str(g) => self.units(g).len(),
            Value::Arr(g) => match self.heap.get(g) {
                Cell::Arr(a) => a.len(),
                _ => 0,
            },
            _ => 0,
        }
    }

    fn element(&mut self, o: Value, i: usize) -> OpResult<Value> {
        match o {
            Value::Arr(g) => Ok(match self.heap.get(g) {
                Cell::Arr(a) => a.get(i).copied().unwrap_or(Value::Undefined),
                _ => Value::Undefined,
            }),
            Value::Str(g) => match self.units(g).get(i).copied() {
                Some(u) => self.alloc_str(vec![u]),
                None => Ok(Value::Undefined),
            },
            _ => Ok(Value::Undefined),
        }
    }
}

/// The position of `key` among `m`'s properties (a small object's keys are compared in order, a
/// larger object's map is hashed: see [`PropMap`]).
#[inline]
pub(crate) fn prop_index(m: &PropMap, key: &[u16]) -> Option<usize> {
    m.get_index_of(key)
}

/// Keys in JavaScript's order: array-index keys ascending, then the rest in insertion order.
pub(crate) fn ordered_keys(m: &PropMap) -> Vec<&[u16]> {
    let mut idx: Vec<(u32, &[u16])> = Vec::new();
    let mut rest: Vec<&[u16]> = Vec::new();
    for k in m.keys() {
        match array_index(k) {
            Some(i) => idx.push((i as u32, k)),
            None => rest.push(k),
        }
    }
    idx.sort_by_key(|p| p.0);
    idx.into_iter().map(|p| p.1).chain(rest).collect()
}

/// The array index a canonical numeric key names (`"0"`, `"17"`; not `"01"` or `"-1"`).
pub(crate) fn array_index(k: &[u16]) -> Option<usize> {
    if k.is_empty() || k.len() > 10 || (k.len() > 1 && k[0] == b'0' as u16) {
        return None;
    }
    let mut n: u64 = 0;
    for &c in k {
        if !(b'0' as u16..=b'9' as u16).contains(&c) {
            return None;
        }
        n = n * 10 + (c - b'0' as u16) as u64;
    }
    (n < 4_294_967_295).then_some(n as usize)
}

/// JavaScript's `%`.
#[inline]
pub(crate) fn js_rem(x: f64, y: f64) -> f64 {
    // integers (the common case) by integer remainder, which is exact; the sign follows `x`
    let (i, j) = (x as i64, y as i64);
    if i as f64 == x
        && j as f64 == y
        && j != 0
        && i.unsigned_abs() < 1 << 53
        && j.unsigned_abs() < 1 << 53
    {
        let r = i % j;
        return if r == 0 && x.is_sign_negative() {
            -0.0
        } else {
            r as f64
        };
    }
    if y == 0.0 || x.is_infinite() || x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if y.is_infinite() {
        return x;
    }
    x % y
}

/// JavaScript's `**`.
pub(crate) fn js_pow(x: f64, y: f64) -> f64 {
    if y.is_nan() {
        return f64::NAN;
    }
    if (x == 1.0 || x == -1.0) && y.is_infinite() {
        return f64::NAN;
    }
    x.powf(y)
}
