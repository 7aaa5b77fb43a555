//! The `Program` artifact: functions, constants, atoms, a strippable span table; its versioned
//! encoding; and the verifier every program passes before a VM will run it.

use std::cell::Cell;
use std::sync::Arc;

pub use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use thiserror::Error;

use crate::isa::{DecodeFault, Flow, Op, Operand, ISA_HASH};
use crate::natives::NativeId;

/// First bytes of every artifact.
pub const MAGIC: [u8; 4] = *b"AJSB";
/// Version of the artifact layout.
pub const FORMAT_VERSION: u16 = 1;
/// Version of the fuel cost table (bumped whenever any cost changes).
pub const COST_VERSION: u16 = 2;
/// First bytes of a span sidecar (the span table `--strip` moves out of an artifact).
pub const SPANS_MAGIC: [u8; 4] = *b"AJSS";
/// Most functions a program may hold.
pub const MAX_FUNCTIONS: usize = u16::MAX as usize;
/// Most constants a program may hold.
pub const MAX_CONSTANTS: usize = u16::MAX as usize;
/// Most instructions one function may hold, and a whole program too (a verified program runs
/// out of one array of all its functions' code, see [`VerifiedProgram::code`]).
pub const MAX_CODE_LEN: usize = 1 << 24;
/// Most registers one function may use.
pub const MAX_REGISTERS: u16 = u16::MAX;
/// Largest artifact, and largest span sidecar, a loader accepts: far more than the compiler
/// makes of the largest source it takes, so a reader can refuse a larger file unread.
pub const MAX_ARTIFACT_BYTES: usize = 64 * 1024 * 1024;

/// Registers a function may declare beyond those its code names (setting up a frame this
/// small costs no more than the call's own fuel covers); a larger frame must be named.
pub const FREE_REGISTERS: u16 = 32;

/// A constant of the pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Constant {
    /// A number.
    Number(f64),
    /// A string, as UTF-16 code units.
    String(StrUnits),
}

/// The UTF-16 code units of a string constant: up to eight units are kept in the value itself,
/// a longer string in one allocation. Most constants are short (property keys, short
/// messages), so that most cost no allocation to build, and none a miss of the allocator's
/// per-thread cache (~170 instructions each). Compared, printed (`Debug`) and encoded as its
/// units: the encoding is that of a `Vec<u16>`.
pub type StrUnits = SmallVec<[u16; 8]>;

/// The units of `bytes` read as Latin-1 (each byte one unit: an ASCII string's units).
/// (A short string is widened into a fixed array first: collected into the `SmallVec`, each
/// unit went through its `Extend`'s capacity test, ~6 k instructions per compile of the 8 KB
/// agent.)
#[inline]
pub fn widen(bytes: &[u8]) -> StrUnits {
    const INLINE: usize = 8;
    if bytes.len() <= INLINE {
        let mut units = [0u16; INLINE];
        for (u, &b) in units.iter_mut().zip(bytes) {
            *u = u16::from(b);
        }
        let mut s = StrUnits::from_buf(units);
        s.truncate(bytes.len());
        s
    } else {
        StrUnits::from_vec(bytes.iter().map(|&b| u16::from(b)).collect())
    }
}

/// One function of a program.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// Its name (`<eval>` for a snippet).
    pub name: CompactString,
    /// Parameter names; argument `i` arrives in register `i`.
    pub params: Vec<CompactString>,
    /// Registers in its frame (parameters included).
    pub nregs: u16,
    /// The instructions.
    pub code: Vec<Op>,
}

impl Function {
    /// One past the highest register its code names (a run `base..base + count` included).
    pub fn registers_named(&self) -> u32 {
        let mut hi = 0u32;
        let mut base = 0u32;
        for op in &self.code {
            op.operands(|o| match o {
                Operand::Read(r) | Operand::Write(r) => hi = hi.max(u32::from(r) + 1),
                Operand::Base(b) => {
                    base = u32::from(b);
                    hi = hi.max(base);
                }
                Operand::Count(c) => hi = hi.max(base + u32::from(c)),
                _ => {}
            });
        }
        hi
    }

    /// The first `Call` that breaks the calling convention (see [`Op::Call`]): after it, a
    /// register at or above its `base`, other than its `dst`, is read before it is written (on
    /// some path, a `try` handler counted as reachable from everything between its `TryEnter`
    /// and it), though the callee's registers overwrote it. Its pc and the register. The
    /// compiler's code never does (it asserts this of every function in debug builds); the
    /// verifier does not check it: a function that breaks it only reads its own registers
    /// changed. `None` also when the function is too big to check here (more than 2^24
    /// instructions times registers).
    pub fn call_clobber(&self) -> Option<(usize, u16)> {
        let (code, nregs) = (&self.code[..], self.nregs as usize);
        let words = nregs.div_ceil(64).max(1);
        if code.len().saturating_mul(words * 64) > 1 << 24 {
            return None;
        }
        // the handlers each instruction may throw to
        let mut handlers: Vec<Vec<usize>> = vec![Vec::new(); code.len()];
        for (pc, op) in code.iter().enumerate() {
            if let (Op::TryEnter { .. }, Some(h)) = (op, op.jump_target()) {
                let h = h as usize;
                for hs in handlers.iter_mut().take(h).skip(pc + 1) {
                    hs.push(h);
                }
            }
        }
        // the registers live before each instruction (backward, to a fixed point)
        let mut live = vec![0u64; code.len() * words];
        let mut out = vec![0u64; words];
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        let mut changed = true;
        while changed {
            changed = false;
            for pc in (0..code.len()).rev() {
                let op = &code[pc];
                // live after it: before its successors (its handlers, the next instruction, its
                // target; a `TryEnter`'s is its handler, reached from the region instead)
                out.fill(0);
                let next = (!op.is_terminator()).then_some(pc + 1);
                let target = match op {
                    Op::TryEnter { .. } => None,
                    _ => op.jump_target().map(|t| t as usize),
                };
                for &s in handlers[pc].iter().chain(&next).chain(&target) {
                    if let Some(l) = live.get(s * words..(s + 1) * words) {
                        for (o, l) in out.iter_mut().zip(l) {
                            *o |= l;
                        }
                    }
                }
                reads.clear();
                writes.clear();
                let mut run: Option<u16> = None;
                op.operands(|o| match o {
                    Operand::Read(r) => reads.push(r),
                    Operand::Write(r) => writes.push(r),
                    Operand::Base(r) => run = Some(r),
                    Operand::Count(n) => {
                        if let Some(b) = run.take() {
                            reads.extend((0..n as u16).map(|i| b.saturating_add(i)));
                        }
                    }
                    _ => {}
                });
                if let Op::Call { dst, base, .. } = *op {
                    for r in base.0 as usize..nregs {
                        if r != dst.0 as usize && out[r / 64] >> (r % 64) & 1 == 1 {
                            return Some((pc, r as u16));
                        }
                    }
                }
                for &r in &writes {
                    if let Some(w) = out.get_mut(r as usize / 64) {
                        *w &= !(1 << (r % 64));
                    }
                }
                for &r in &reads {
                    if let Some(w) = out.get_mut(r as usize / 64) {
                        *w |= 1 << (r % 64);
                    }
                }
                let slot = &mut live[pc * words..(pc + 1) * words];
                if slot != &out[..] {
                    slot.copy_from_slice(&out);
                    changed = true;
                }
            }
        }
        None
    }
}

/// A position in the user's source: line 1-based, column 0-based (UTF-16 units).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SourcePos {
    /// Line, from 1.
    pub line: u32,
    /// Column, from 0.
    pub col: u32,
}

/// The side table mapping instructions to source positions; strippable.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct DebugInfo {
    /// Per function, per instruction.
    pub spans: Vec<Vec<SourcePos>>,
}

/// Most levels of nesting of a [`TypeSpec`] an artifact may hold (as many as the brackets of
/// a source the compiler takes): a loader refuses a deeper one as it reads it, before its
/// recursion could exhaust the stack.
pub const MAX_TYPE_DEPTH: u32 = 256;

/// The type an agent parameter is checked against, inferred from its example value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum TypeSpec {
    /// Anything.
    Any,
    /// A string.
    String,
    /// A number.
    Number,
    /// A boolean.
    Boolean,
    /// `null`.
    Null,
    /// An array whose elements all match.
    Array(Box<TypeSpec>),
    /// An object with (at least) these typed keys.
    Object(Vec<(CompactString, TypeSpec)>),
}

/// [`TypeSpec`] as the wire holds it (the same variants in the same order, so the same
/// encoding): its nested types read through `TypeSpec`'s own `Deserialize`, which counts the
/// depth.
#[derive(Deserialize)]
enum WireTypeSpec {
    Any,
    String,
    Number,
    Boolean,
    Null,
    Array(Box<TypeSpec>),
    Object(Vec<(CompactString, TypeSpec)>),
}

thread_local! {
    /// How many [`TypeSpec`]s the current thread is reading inside one another.
    static TYPE_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Whether the current thread's reading refused a type for its depth (the decoder's error
    /// does not carry the message).
    static TYPE_TOO_DEEP: Cell<bool> = const { Cell::new(false) };
}

/// The message of a decoding error `e`: the depth limit's when that was why.
fn decode_detail(e: postcard::Error) -> String {
    if TYPE_TOO_DEEP.with(|c| c.replace(false)) {
        format!("a parameter type nested deeper than {MAX_TYPE_DEPTH} levels (MAX_TYPE_DEPTH); recompile the program")
    } else {
        e.to_string()
    }
}

impl<'de> Deserialize<'de> for TypeSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let depth = TYPE_DEPTH.with(Cell::get);
        if depth >= MAX_TYPE_DEPTH {
            TYPE_TOO_DEEP.with(|c| c.set(true));
            return Err(serde::de::Error::custom("parameter type nested too deep"));
        }
        TYPE_DEPTH.with(|c| c.set(depth + 1));
        let wire = WireTypeSpec::deserialize(d);
        TYPE_DEPTH.with(|c| c.set(depth));
        Ok(match wire? {
            WireTypeSpec::Any => TypeSpec::Any,
            WireTypeSpec::String => TypeSpec::String,
            WireTypeSpec::Number => TypeSpec::Number,
            WireTypeSpec::Boolean => TypeSpec::Boolean,
            WireTypeSpec::Null => TypeSpec::Null,
            WireTypeSpec::Array(t) => TypeSpec::Array(t),
            WireTypeSpec::Object(props) => TypeSpec::Object(props),
        })
    }
}

impl TypeSpec {
    /// How the type reads in messages (`string`, `array of number`, …).
    pub fn describe(&self) -> String {
        match self {
            TypeSpec::Any => "any value".into(),
            TypeSpec::String => "a string".into(),
            TypeSpec::Number => "a number".into(),
            TypeSpec::Boolean => "a boolean".into(),
            TypeSpec::Null => "null".into(),
            TypeSpec::Array(t) if **t == TypeSpec::Any => "an array".into(),
            TypeSpec::Array(t) => format!(
                "an array of {}",
                t.describe()
                    .trim_start_matches("a ")
                    .trim_start_matches("an ")
            ),
            TypeSpec::Object(_) => "an object".into(),
        }
    }
}

/// One parameter of an agent's entry function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// Its name (the key of the arguments object).
    pub name: CompactString,
    /// Whether the caller must pass it.
    pub required: bool,
    /// The type its example value implies.
    pub ty: TypeSpec,
}

/// The entry function's parameters, for checking a run's arguments before it starts.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Signature {
    /// The entry's name.
    pub name: CompactString,
    /// Its parameters, in order (argument `i` arrives in register `i`).
    pub params: Vec<ParamSpec>,
}

/// A compiled program. Build one with the compiler or [`Program::from_bytes`]; run it only after
/// [`Program::verify`].
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The functions; `entry` indexes the one a run starts in.
    pub functions: Vec<Function>,
    /// The constant pool.
    pub constants: Vec<Constant>,
    /// Names of the atoms (host operations) the program calls; `CallAtom` indexes this.
    pub atoms: Vec<String>,
    /// Index of the entry function.
    pub entry: u16,
    /// Source positions, unless stripped.
    pub debug: Option<DebugInfo>,
    /// For an agent program: the entry's parameters and their types.
    pub signature: Option<Signature>,
}

#[derive(Serialize, Deserialize)]
struct WireFunction {
    name: String,
    params: Vec<String>,
    nregs: u16,
    code: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct WireProgram {
    functions: Vec<WireFunction>,
    constants: Vec<Constant>,
    atoms: Vec<String>,
    entry: u16,
    debug: Option<DebugInfo>,
    signature: Option<Signature>,
}

/// Why a program was refused. Every variant says where.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum LoadError {
    /// More bytes than any artifact has.
    #[error("artifact is {0} bytes, over the {MAX_ARTIFACT_BYTES}-byte limit of any artifact (MAX_ARTIFACT_BYTES); this is not an artifact `ajs compile` wrote")]
    TooLarge(usize),
    /// The bytes do not start with the artifact magic.
    #[error("not an ajs artifact (bad magic at offset 0)")]
    BadMagic,
    /// The header is cut off.
    #[error("artifact header truncated at offset {0}")]
    Truncated(usize),
    /// Another artifact layout.
    #[error(
        "artifact format version {found} is not supported (this build reads version {expected})"
    )]
    FormatVersion {
        /// In the artifact.
        found: u16,
        /// Supported here.
        expected: u16,
    },
    /// Another cost table.
    #[error("artifact cost-table version {found} does not match this build's cost table version {expected}")]
    CostVersion {
        /// In the artifact.
        found: u16,
        /// Supported here.
        expected: u16,
    },
    /// Another instruction set.
    #[error("artifact instruction-set fingerprint {found:016x} does not match this build's {expected:016x}")]
    IsaMismatch {
        /// In the artifact.
        found: u64,
        /// This build's.
        expected: u64,
    },
    /// The body does not decode.
    #[error("malformed artifact body at offset {offset}: {detail}")]
    Malformed {
        /// Byte offset in the artifact.
        offset: usize,
        /// What was wrong.
        detail: String,
    },
    /// A function's code is invalid.
    #[error(
        "invalid code in function {func} at instruction {pc} (code byte offset {offset}): {fault}"
    )]
    Code {
        /// Function index.
        func: usize,
        /// Instruction index.
        pc: usize,
        /// Byte offset inside the function's encoded code.
        offset: usize,
        /// What was wrong.
        fault: CodeFault,
    },
    /// A program-level table is invalid.
    #[error("invalid program: {0}")]
    Program(String),
    /// A span sidecar that is malformed or belongs to another artifact.
    #[error("span sidecar refused: {0}")]
    Spans(String),
}

/// A 64-bit FNV-1a fingerprint of an artifact's bytes; a span sidecar records the fingerprint of
/// the stripped artifact it belongs to.
pub fn artifact_fingerprint(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What is wrong with one instruction.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CodeFault {
    /// Not an opcode.
    #[error("unknown opcode 0x{0:02x}")]
    UnknownOpcode(u8),
    /// Cut off.
    #[error("instruction truncated")]
    Truncated,
    /// Register past the frame.
    #[error("register r{reg} outside the frame of {nregs} registers")]
    Register {
        /// The register.
        reg: u32,
        /// Frame size.
        nregs: u16,
    },
    /// Constant index out of range.
    #[error("constant k{0} does not exist")]
    Constant(u16),
    /// Property key constant is not a string.
    #[error("constant k{0} is not a string")]
    KeyNotString(u16),
    /// Jump past the code.
    #[error("jump target @{0} outside the function")]
    Target(u32),
    /// Unknown native.
    #[error("unknown native {0}")]
    Native(u16),
    /// Native called with a count outside its arity.
    #[error("native {name} called with {count} arguments (allowed {min}..={max})")]
    NativeArity {
        /// Native.
        name: &'static str,
        /// Given.
        count: u8,
        /// Min.
        min: u8,
        /// Max.
        max: u8,
    },
    /// Unknown function.
    #[error("function fn{0} does not exist")]
    Func(u16),
    /// Call with the wrong argument count.
    #[error("call passes {given} arguments to a function of {expected} parameters")]
    CallArity {
        /// Given.
        given: u8,
        /// Expected.
        expected: usize,
    },
    /// Unknown atom.
    #[error("atom {0} does not exist")]
    Atom(u16),
    /// A basic block does not open with the right charge.
    #[error("basic block does not open with its fuel charge (expected Charge {expected})")]
    Charge {
        /// The charge the block's instructions add up to.
        expected: u32,
    },
    /// A charge in the middle of a block.
    #[error("fuel charge in the middle of a basic block")]
    StrayCharge,
    /// The last instruction can fall through past the end.
    #[error("control can run past the end of the function")]
    FallsOffEnd,
    /// A `Catch` that is not the start of a handler.
    #[error("Catch outside a handler entry")]
    StrayCatch,
}

/// What the verifier sees of one instruction (see `Program::inspect`).
struct Inspected {
    /// Whether every operand is valid.
    fit: bool,
    /// Its cost ([`Op::cost`]).
    cost: u32,
    /// What its check is besides its operands.
    flow: Flow,
}

impl Program {
    /// Serializes the program: header (magic, format version, cost version, instruction-set
    /// fingerprint), then the body.
    pub fn to_bytes(&self) -> Vec<u8> {
        let wire = WireProgram {
            functions: self
                .functions
                .iter()
                .map(|f| {
                    let mut code = Vec::with_capacity(f.code.len() * 5);
                    for op in &f.code {
                        op.encode(&mut code);
                    }
                    WireFunction {
                        name: f.name.to_string(),
                        params: f.params.iter().map(|p| p.to_string()).collect(),
                        nregs: f.nregs,
                        code,
                    }
                })
                .collect(),
            constants: self.constants.clone(),
            atoms: self.atoms.clone(),
            entry: self.entry,
            debug: self.debug.clone(),
            signature: self.signature.clone(),
        };
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&COST_VERSION.to_le_bytes());
        out.extend_from_slice(&ISA_HASH.to_le_bytes());
        // Serializing plain owned data to a Vec cannot fail.
        if let Ok(body) = postcard::to_stdvec(&wire) {
            out.extend_from_slice(&body);
        }
        out
    }

    /// Decodes an artifact and verifies it.
    ///
    /// # Errors
    /// [`LoadError`] naming what is wrong and where; nothing from a refused artifact ever runs.
    pub fn from_bytes(bytes: &[u8]) -> Result<VerifiedProgram, LoadError> {
        const HEADER: usize = 4 + 2 + 2 + 8;
        if bytes.len() > MAX_ARTIFACT_BYTES {
            return Err(LoadError::TooLarge(bytes.len()));
        }
        if bytes.len() < 4 || bytes[..4] != MAGIC {
            return Err(if bytes.len() < 4 {
                LoadError::Truncated(bytes.len())
            } else {
                LoadError::BadMagic
            });
        }
        if bytes.len() < HEADER {
            return Err(LoadError::Truncated(bytes.len()));
        }
        let format = u16::from_le_bytes([bytes[4], bytes[5]]);
        if format != FORMAT_VERSION {
            return Err(LoadError::FormatVersion {
                found: format,
                expected: FORMAT_VERSION,
            });
        }
        let cost = u16::from_le_bytes([bytes[6], bytes[7]]);
        if cost != COST_VERSION {
            return Err(LoadError::CostVersion {
                found: cost,
                expected: COST_VERSION,
            });
        }
        let mut h = [0u8; 8];
        h.copy_from_slice(&bytes[8..16]);
        let isa = u64::from_le_bytes(h);
        if isa != ISA_HASH {
            return Err(LoadError::IsaMismatch {
                found: isa,
                expected: ISA_HASH,
            });
        }
        TYPE_TOO_DEEP.with(|c| c.set(false));
        let (wire, rest): (WireProgram, &[u8]) = postcard::take_from_bytes(&bytes[HEADER..])
            .map_err(|e| LoadError::Malformed {
                offset: HEADER,
                detail: decode_detail(e),
            })?;
        if !rest.is_empty() {
            return Err(LoadError::Malformed {
                offset: bytes.len() - rest.len(),
                detail: format!("{} trailing bytes", rest.len()),
            });
        }
        let mut functions = Vec::with_capacity(wire.functions.len());
        for (fi, wf) in wire.functions.into_iter().enumerate() {
            let mut code = Vec::new();
            let mut at = 0;
            while at < wf.code.len() {
                if code.len() >= MAX_CODE_LEN {
                    return Err(LoadError::Program(format!(
                        "function {fi} has more than {MAX_CODE_LEN} instructions"
                    )));
                }
                match Op::decode(&wf.code[at..]) {
                    Ok((op, len)) => {
                        code.push(op);
                        at += len;
                    }
                    Err(f) => {
                        let fault = match f {
                            DecodeFault::UnknownOpcode(b) => CodeFault::UnknownOpcode(b),
                            DecodeFault::Truncated => CodeFault::Truncated,
                        };
                        return Err(LoadError::Code {
                            func: fi,
                            pc: code.len(),
                            offset: at,
                            fault,
                        });
                    }
                }
            }
            functions.push(Function {
                name: wf.name.into(),
                params: wf.params.into_iter().map(CompactString::from).collect(),
                nregs: wf.nregs,
                code,
            });
        }
        let p = Program {
            functions,
            constants: wire.constants,
            atoms: wire.atoms,
            entry: wire.entry,
            debug: wire.debug,
            signature: wire.signature,
        };
        p.verify()
    }

    /// Removes the span table (for deployment); error positions are then unknown.
    pub fn strip(&mut self) {
        self.debug = None;
    }

    /// Serializes the program without its span table, and the span table (if any) as a sidecar
    /// bound to those exact artifact bytes: `SPANS_MAGIC`, format version, the artifact's
    /// [`artifact_fingerprint`], then the table.
    pub fn to_stripped_bytes(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        let mut stripped = self.clone();
        let debug = stripped.debug.take();
        let artifact = stripped.to_bytes();
        let sidecar = debug.map(|d| {
            let mut out = Vec::new();
            out.extend_from_slice(&SPANS_MAGIC);
            out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
            out.extend_from_slice(&artifact_fingerprint(&artifact).to_le_bytes());
            if let Ok(body) = postcard::to_stdvec(&d) {
                out.extend_from_slice(&body);
            }
            out
        });
        (artifact, sidecar)
    }

    /// Loads a stripped artifact together with its span sidecar (see
    /// [`Program::to_stripped_bytes`]): the artifact is verified as by [`Program::from_bytes`],
    /// then the sidecar must name this artifact's fingerprint and match its code exactly.
    ///
    /// # Errors
    /// [`LoadError`]; [`LoadError::Spans`] when the sidecar is malformed or belongs elsewhere.
    pub fn from_bytes_with_spans(
        artifact: &[u8],
        sidecar: &[u8],
    ) -> Result<VerifiedProgram, LoadError> {
        const HEADER: usize = 4 + 2 + 8;
        let program = Program::from_bytes(artifact)?;
        if sidecar.len() > MAX_ARTIFACT_BYTES {
            return Err(LoadError::Spans(format!(
                "the sidecar is {} bytes, over the {MAX_ARTIFACT_BYTES}-byte limit (MAX_ARTIFACT_BYTES)",
                sidecar.len()
            )));
        }
        if sidecar.len() < HEADER || sidecar[..4] != SPANS_MAGIC {
            return Err(LoadError::Spans("not a span sidecar (bad magic)".into()));
        }
        let format = u16::from_le_bytes([sidecar[4], sidecar[5]]);
        if format != FORMAT_VERSION {
            return Err(LoadError::Spans(format!(
                "format version {format} is not supported (this build reads version {FORMAT_VERSION})"
            )));
        }
        let mut h = [0u8; 8];
        h.copy_from_slice(&sidecar[6..14]);
        let found = u64::from_le_bytes(h);
        let expected = artifact_fingerprint(artifact);
        if found != expected {
            return Err(LoadError::Spans(format!(
                "it belongs to artifact {found:016x}, not this one ({expected:016x})"
            )));
        }
        let debug: DebugInfo = postcard::from_bytes(&sidecar[HEADER..])
            .map_err(|e| LoadError::Spans(format!("malformed table: {e}")))?;
        if program.debug.is_some() {
            return Err(LoadError::Spans(
                "the artifact already carries a span table".into(),
            ));
        }
        let mut p = program.program().clone();
        p.debug = Some(debug);
        p.verify()
    }

    /// The source position of instruction `pc` of function `func`, when spans are present.
    pub fn span(&self, func: usize, pc: usize) -> Option<SourcePos> {
        self.debug.as_ref()?.spans.get(func)?.get(pc).copied()
    }

    /// Checks everything the VM relies on: indices in range, frames large enough, jump targets
    /// inside their function, every basic block opened by its exact fuel charge, no fall-through
    /// past the end, native arities and call arities.
    ///
    /// # Errors
    /// [`LoadError`] naming the function, instruction and byte offset at fault.
    pub fn verify(self) -> Result<VerifiedProgram, LoadError> {
        if self.functions.is_empty() {
            return Err(LoadError::Program("no functions".into()));
        }
        if self.functions.len() > MAX_FUNCTIONS
            || self.constants.len() > MAX_CONSTANTS
            || self.atoms.len() > u16::MAX as usize
        {
            return Err(LoadError::Program(
                "too many functions, constants or atoms".into(),
            ));
        }
        // (every function runs out of one array of all the program's code, see `Flat`, with
        // its jump targets in that array: they must fit the 24-bit fused branch targets)
        let total: usize = self.functions.iter().map(|f| f.code.len()).sum();
        if total > MAX_CODE_LEN {
            return Err(LoadError::Program(format!(
                "the program has {total} instructions in all, more than {MAX_CODE_LEN}"
            )));
        }
        // every run looks each atom up in its host's table: a name listed twice would make that
        // uncharged work grow past the host's own atoms
        if self.atoms.len() > 1 {
            let mut names: Vec<&str> = self.atoms.iter().map(String::as_str).collect();
            names.sort_unstable();
            if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                return Err(LoadError::Program(format!(
                    "the atom '{}' is listed twice; an atom is listed once (recompile the program)",
                    w[0]
                )));
            }
        }
        if self.entry as usize >= self.functions.len() {
            return Err(LoadError::Program(format!(
                "entry fn{} does not exist",
                self.entry
            )));
        }
        // every agent run checks its arguments' names against the signature's
        if let Some(sig) = &self.signature {
            let entry = self.functions[self.entry as usize].params.len();
            if sig.params.len() > entry {
                return Err(LoadError::Program(format!(
                    "the signature lists {} parameters but the entry function takes {entry}; recompile the program",
                    sig.params.len()
                )));
            }
        }
        if let Some(d) = &self.debug {
            if d.spans.len() != self.functions.len()
                || d.spans
                    .iter()
                    .zip(&self.functions)
                    .any(|(s, f)| s.len() != f.code.len())
            {
                return Err(LoadError::Program(
                    "span table does not match the code".into(),
                ));
            }
        }
        for (fi, f) in self.functions.iter().enumerate() {
            if f.params.len() > f.nregs as usize || f.params.len() > u8::MAX as usize {
                return Err(LoadError::Program(format!(
                    "function {fi} has more parameters than registers"
                )));
            }
            if f.code.len() > MAX_CODE_LEN {
                return Err(LoadError::Program(format!("function {fi} is too long")));
            }
            // every call fills the callee's frame, uncharged: a frame must be no larger than
            // its code (or its parameters) need
            if f.nregs > FREE_REGISTERS {
                let named = f.registers_named().max(f.params.len() as u32);
                if u32::from(f.nregs) > named {
                    return Err(LoadError::Program(format!(
                        "function {fi} declares {} registers but its code names only {named}; a frame larger than its code needs is refused (recompile the program)",
                        f.nregs
                    )));
                }
            }
            self.verify_function(f)
                .map_err(|(pc, fault)| LoadError::Code {
                    func: fi,
                    pc,
                    offset: f.code[..pc.min(f.code.len())]
                        .iter()
                        .map(|o| {
                            let mut v = Vec::new();
                            o.encode(&mut v);
                            v.len()
                        })
                        .sum(),
                    fault,
                })?;
        }
        let most = self.functions.iter().map(|f| f.nregs).max().unwrap_or(0);
        let shared = new_shared(self);
        Ok(VerifiedProgram(shared, most))
    }

    /// Checks one function's code in one pass over it. The faults of the first kind (operands,
    /// arities) are reported at once, in pc order; then a stray `Catch`; then the block faults
    /// (a leader without its `Charge`, a `Charge` with a wrong amount), which the pass only
    /// notes: their first, by the old precedence, is found by [`first_block_fault`], out of line.
    fn verify_function(&self, f: &Function) -> Result<(), (usize, CodeFault)> {
        let code = &f.code[..];
        match code.last() {
            None => return Err((0, CodeFault::FallsOffEnd)),
            Some(op) if !op.is_terminator() => {
                return Err((code.len() - 1, CodeFault::FallsOffEnd))
            }
            _ => {}
        }
        let (nregs, len) = (f.nregs, code.len());
        // whether a leader at `t` is all right: a `Charge`, or past the end (the instruction
        // after the last, which ends a block, is no leader)
        let opens_block = |t: usize| code.get(t).is_none_or(|op| matches!(op, Op::Charge { .. }));
        // Whether some leader (instruction 0, a jump target, an instruction after one that ends
        // a block) is not a `Charge`: a leader is checked by the instruction that makes it one.
        let mut bad_leader = !opens_block(0);
        // Whether some `Charge`'s amount is not its block's cost; the amount of the `Charge`
        // opening the current block and its block's costs so far (before the first `Charge`
        // nothing is open: then instruction 0 is a bad leader anyway).
        let mut bad_amount = false;
        let (mut open_amount, mut sum) = (0u32, 0u32);
        // (`try` is rare: these allocate only for a function that has one)
        // the slot after each handler's `Charge`, where a `Catch` may stand
        let mut catch_slots: Vec<usize> = Vec::new();
        // every `Catch`, in pc order
        let mut catches: Vec<usize> = Vec::new();
        for (pc, op) in code.iter().enumerate() {
            let seen = self.inspect(op, nregs, len);
            if !seen.fit {
                // only a fault takes the full check, which names it
                self.check_operands(op, nregs, len)
                    .map_err(|fault| (pc, fault))?;
            }
            sum += seen.cost;
            if seen.flow == Flow::Plain {
                // (most instructions: nothing more to check)
                continue;
            }
            match seen.flow {
                Flow::Plain => {}
                // (it closes the block before it and opens its own)
                Flow::Charge => {
                    bad_amount |= sum != open_amount;
                    let amount = match *op {
                        Op::Charge { amount } => amount.0,
                        _ => 0,
                    };
                    (open_amount, sum) = (amount, 0);
                }
                Flow::Branch | Flow::TryEnter => {
                    // (the target is inside the function: its operand fits)
                    let t = op.jump_target().unwrap_or(0) as usize;
                    bad_leader |= !opens_block(t) || !opens_block(pc + 1);
                    // The handler block is `Charge; Catch`: the Catch position.
                    if seen.flow == Flow::TryEnter && t + 1 < len {
                        catch_slots.push(t + 1);
                    }
                }
                Flow::End => bad_leader |= !opens_block(pc + 1),
                Flow::Catch => catches.push(pc),
                Flow::Call => {
                    if let Op::Call { func, argc, .. } = *op {
                        // (the function exists: its operand fits)
                        let expected = self
                            .functions
                            .get(func.0 as usize)
                            .map_or(0, |g| g.params.len());
                        if argc.0 as usize != expected {
                            return Err((
                                pc,
                                CodeFault::CallArity {
                                    given: argc.0,
                                    expected,
                                },
                            ));
                        }
                    }
                }
                Flow::CallNative => {
                    // (the native exists: its operand fits)
                    if let Op::CallNative { native, argc, .. } = *op {
                        if let Some(n) = NativeId::from_u16(native.0) {
                            let (min, max) = n.arity();
                            if argc.0 < min || argc.0 > max {
                                return Err((
                                    pc,
                                    CodeFault::NativeArity {
                                        name: n.js_name(),
                                        count: argc.0,
                                        min,
                                        max,
                                    },
                                ));
                            }
                        }
                    }
                }
            }
        }
        if !catches.is_empty() {
            catch_slots.sort_unstable();
            if let Some(&pc) = catches
                .iter()
                .find(|&&pc| catch_slots.binary_search(&pc).is_err())
            {
                return Err((pc, CodeFault::StrayCatch));
            }
        }
        bad_amount |= sum != open_amount;
        if bad_leader || bad_amount {
            return Err(first_block_fault(code));
        }
        Ok(())
    }

    /// What the verifier sees of `op` in one dispatch on it ([`Op::inspect`]): whether every
    /// operand is valid ([`Self::check_operands`] finds no fault), its cost and flow. (The few
    /// instructions whose flow needs an operand read it again: carrying it out of every arm costs
    /// more than that.) (A small callback the compiler inlines into each
    /// instruction's arm, where the kind of each operand is known, so that the usual instruction
    /// costs a few comparisons.)
    #[inline(always)]
    fn inspect(&self, op: &Op, nregs: u16, len: usize) -> Inspected {
        let (constants, nfuncs, natoms) = (&self.constants, self.functions.len(), self.atoms.len());
        let mut fit = true;
        let mut base = 0u32;
        let (cost, flow) = op.inspect(|o| {
            fit &= match o {
                Operand::Read(r) | Operand::Write(r) => r < nregs,
                Operand::Base(b) => {
                    base = b as u32;
                    base <= nregs as u32
                }
                Operand::Count(c) => base + c as u32 <= nregs as u32,
                Operand::Const(k) => (k as usize) < constants.len(),
                Operand::Key(k) => matches!(constants.get(k as usize), Some(Constant::String(_))),
                Operand::Target(t) => (t as usize) < len,
                Operand::Imm(_) | Operand::Int(_) => true,
                Operand::Native(n) => NativeId::from_u16(n).is_some(),
                Operand::Func(n) => (n as usize) < nfuncs,
                Operand::Atom(n) => (n as usize) < natoms,
            }
        });
        Inspected { fit, cost, flow }
    }

    /// The first fault of `op`'s operands, in declaration order.
    #[inline(never)]
    fn check_operands(&self, op: &Op, nregs: u16, len: usize) -> Result<(), CodeFault> {
        let mut fault = None;
        let mut base = 0u32;
        op.operands(|o| {
            if fault.is_some() {
                return;
            }
            let f = match o {
                // the common case first: a register in range
                Operand::Read(r) | Operand::Write(r) if r < nregs => return,
                Operand::Base(b) => {
                    base = b as u32;
                    (base > nregs as u32).then_some(CodeFault::Register { reg: base, nregs })
                }
                Operand::Count(c) => (base + c as u32 > nregs as u32).then(|| {
                    // c > 0 here: base <= nregs was checked with the Base operand
                    CodeFault::Register {
                        reg: (base + c as u32).saturating_sub(1),
                        nregs,
                    }
                }),
                o => self.check_operand(o, nregs, len),
            };
            if f.is_some() {
                fault = f;
            }
        });
        fault.map_or(Ok(()), Err)
    }

    #[inline]
    fn check_operand(&self, o: Operand, nregs: u16, len: usize) -> Option<CodeFault> {
        let reg = |r: u32| {
            if r < nregs as u32 {
                None
            } else {
                Some(CodeFault::Register { reg: r, nregs })
            }
        };
        match o {
            Operand::Read(r) | Operand::Write(r) => reg(r as u32),
            Operand::Base(_) | Operand::Count(_) => None,
            Operand::Const(k) => {
                (k as usize >= self.constants.len()).then_some(CodeFault::Constant(k))
            }
            Operand::Key(k) => match self.constants.get(k as usize) {
                None => Some(CodeFault::Constant(k)),
                Some(Constant::String(_)) => None,
                Some(_) => Some(CodeFault::KeyNotString(k)),
            },
            Operand::Target(t) => (t as usize >= len).then_some(CodeFault::Target(t)),
            Operand::Imm(_) | Operand::Int(_) => None,
            Operand::Native(n) => NativeId::from_u16(n)
                .is_none()
                .then_some(CodeFault::Native(n)),
            Operand::Func(n) => (n as usize >= self.functions.len()).then_some(CodeFault::Func(n)),
            Operand::Atom(n) => (n as usize >= self.atoms.len()).then_some(CodeFault::Atom(n)),
        }
    }

    /// A readable listing of every function.
    pub fn disassemble(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for (i, c) in self.constants.iter().enumerate() {
            match c {
                Constant::Number(n) => {
                    let _ = writeln!(s, "k{i:<5} number {n:?}");
                }
                Constant::String(u) => {
                    let _ = writeln!(s, "k{i:<5} string {:?}", String::from_utf16_lossy(u));
                }
            }
        }
        for (i, a) in self.atoms.iter().enumerate() {
            let _ = writeln!(s, "atom{i:<2} {a}");
        }
        for (fi, f) in self.functions.iter().enumerate() {
            let entry = if fi == self.entry as usize {
                " (entry)"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "\nfn{fi} {}({}) regs={}{entry}",
                f.name,
                f.params.join(", "),
                f.nregs
            );
            for (pc, op) in f.code.iter().enumerate() {
                let pos = self
                    .span(fi, pc)
                    .map(|p| format!("  ; {}:{}", p.line, p.col))
                    .unwrap_or_default();
                let _ = writeln!(s, "{pc:>5}  {op}{pos}");
            }
        }
        s
    }
}

/// The first block fault of `code`, a function's code whose operands and arities are valid and
/// which has a block fault (see [`Program::verify_function`]): every basic block must open with
/// `Charge{sum of the costs of the instructions up to the next Charge}`, where jump targets and
/// the instructions after a branch or a terminator are block heads. The first leader without its
/// `Charge` is reported before any wrong amount, then the first wrong amount. (This is the
/// verifier's former second pass over the charges, kept as it was: only a refused program takes
/// it, and it reports that program's fault exactly as the verifier always has.)
#[cold]
#[inline(never)]
fn first_block_fault(code: &[Op]) -> (usize, CodeFault) {
    let leaders = crate::isa::leaders(code);
    let mut wrong_amount = None;
    // the Charge opening the current run of instructions: its pc, amount and the sum so far
    let mut open: Option<(usize, u32, u32)> = None;
    for (pc, op) in code.iter().enumerate() {
        if let Op::Charge { amount } = *op {
            if let Some((at, amount, sum)) = open {
                if amount != sum && wrong_amount.is_none() {
                    wrong_amount = Some((at, CodeFault::Charge { expected: sum }));
                }
            }
            open = Some((pc, amount.0, 0));
            continue;
        }
        if leaders.get(pc).copied().unwrap_or(false) {
            return (pc, CodeFault::Charge { expected: 0 });
        }
        match &mut open {
            Some((_, _, sum)) => *sum += op.cost(),
            None => {
                if wrong_amount.is_none() {
                    wrong_amount = Some((pc, CodeFault::StrayCharge));
                }
            }
        }
    }
    if let Some((at, amount, sum)) = open {
        if amount != sum && wrong_amount.is_none() {
            wrong_amount = Some((at, CodeFault::Charge { expected: sum }));
        }
    }
    // (the caller saw a fault: `None` would mean its pass and this one disagree; report the
    // function's first instruction rather than accept)
    wrong_amount.unwrap_or((0, CodeFault::Charge { expected: 0 }))
}

/// Where a function starts in a verified program's [`VerifiedProgram::code`], and its
/// registers: what a call needs of its callee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// the index of its first instruction (a `Charge`) in the program's code
    pub start: u32,
    /// its registers
    pub nregs: u16,
    /// whether it has at most two parameters and at most [`Entry::SMALL_REGS`] registers (a
    /// call's usual case, tested once)
    pub small: bool,
    /// whether it is [`Entry::small`] with one parameter (the usual call, tested once)
    pub unary: bool,
}

impl Entry {
    /// The most registers of a [`Entry::small`] function.
    pub const SMALL_REGS: u16 = 8;

    fn of(start: u32, f: &Function) -> Entry {
        Entry {
            start,
            nregs: f.nregs,
            small: f.params.len() <= 2 && f.nregs <= Entry::SMALL_REGS,
            unary: f.params.len() == 1 && f.nregs <= Entry::SMALL_REGS,
        }
    }
}

/// Every function's code of a verified program in one array, in function order, each jump
/// target (and `try` handler) moved by its function's start: a VM runs a call or a return
/// without switching code.
#[derive(Debug)]
struct Flat {
    /// (empty when the program has one function: its code is used as it is)
    code: Vec<Op>,
    entries: Vec<Entry>,
    /// the string constants: how many, and their code units in all
    text: (usize, usize),
}

impl Flat {
    /// (the verifier has checked the functions: their targets are inside them, and their
    /// code fits [`MAX_CODE_LEN`] in all)
    fn of(program: &Program) -> Flat {
        let mut flat = Flat {
            code: Vec::new(),
            entries: Vec::new(),
            text: (0, 0),
        };
        flat.fill(program);
        flat
    }

    /// [`Flat::of`] built in this one's vectors (emptied first).
    fn fill(&mut self, program: &Program) {
        let Flat {
            code,
            entries,
            text,
        } = self;
        *text = program
            .constants
            .iter()
            .fold((0, 0), |(n, units), c| match c {
                Constant::String(s) => (n + 1, units + s.len()),
                Constant::Number(_) => (n, units),
            });
        let functions = &program.functions[..];
        code.clear();
        entries.clear();
        if let [f] = functions {
            // one function's own code is that array already (see `VerifiedProgram::code`): a
            // snippet or a `SafeFunction` body is not copied
            entries.push(Entry::of(0, f));
            return;
        }
        let total = functions.iter().map(|f| f.code.len()).sum();
        code.reserve(total);
        entries.reserve(functions.len());
        for f in functions {
            let start = code.len() as u32;
            entries.push(Entry::of(start, f));
            // copied whole, then only the instructions with a target moved (the first
            // function's stay: it starts at 0)
            code.extend_from_slice(&f.code);
            if start != 0 {
                for op in &mut code[start as usize..] {
                    // (the flow is a table lookup; only a branch takes `map_target`'s dispatch)
                    if matches!(op.inspect(|_| {}).1, Flow::Branch | Flow::TryEnter) {
                        op.map_target(|t| t + start);
                    }
                }
            }
        }
    }
}

/// A verified program's shared part, in a new allocation.
fn new_shared(program: Program) -> Arc<(Program, Flat)> {
    let flat = Flat::of(&program);
    Arc::new((program, flat))
}

/// A program without functions, constants or anything else (allocates nothing).
const EMPTY: Program = Program {
    functions: Vec::new(),
    constants: Vec::new(),
    atoms: Vec::new(),
    entry: 0,
    debug: None,
    signature: None,
};

/// A program that passed [`Program::verify`]; the only kind a VM accepts. Cheap to clone.
#[derive(Clone, Debug)]
pub struct VerifiedProgram(Arc<(Program, Flat)>, u16);

impl VerifiedProgram {
    /// The verified program.
    pub fn program(&self) -> &Program {
        &self.0 .0
    }

    /// All its functions' code in one array: function `i` starts at `entries()[i].start`, and
    /// every jump target and `try` handler is an index in this array (inside its function).
    #[inline]
    pub fn code(&self) -> &[Op] {
        let (program, flat) = &*self.0;
        match &program.functions[..] {
            [only] => &only.code,
            _ => &flat.code,
        }
    }

    /// Where each function starts in [`VerifiedProgram::code`], and its registers.
    #[inline]
    pub fn entries(&self) -> &[Entry] {
        &self.0 .1.entries
    }

    /// The index in function `func`'s own code of the instruction at `pc` in
    /// [`VerifiedProgram::code`] (0 for a function that does not exist).
    #[inline]
    pub fn local_pc(&self, func: usize, pc: u32) -> u32 {
        pc.saturating_sub(self.entries().get(func).map_or(0, |e| e.start))
    }

    /// The index in [`VerifiedProgram::code`] of instruction `pc` of function `func`'s own code.
    #[inline]
    pub fn flat_pc(&self, func: usize, pc: u32) -> u32 {
        pc.saturating_add(self.entries().get(func).map_or(0, |e| e.start))
    }

    /// Its string constants: how many, and their UTF-16 code units in all (what a run's start
    /// copies into its heap).
    #[inline]
    pub fn string_constants(&self) -> (usize, usize) {
        self.0 .1.text
    }

    /// The most registers any of its functions has.
    #[inline]
    pub fn max_registers(&self) -> usize {
        self.1 as usize
    }

    /// The program itself when this is its last handle (so that its allocations can be reused,
    /// as `ajs_compiler::Compiler::recycle` does); otherwise this handle back.
    ///
    /// # Errors
    /// `self`, when another handle to the program exists.
    #[inline]
    pub fn try_into_program(mut self) -> Result<Program, VerifiedProgram> {
        // (a shared program, the common case, costs one load here)
        if Arc::strong_count(&self.0) != 1 {
            return Err(self);
        }
        let Some((program, _)) = Arc::get_mut(&mut self.0) else {
            return Err(self);
        };
        Ok(std::mem::replace(program, EMPTY))
    }
}

impl std::ops::Deref for VerifiedProgram {
    type Target = Program;
    fn deref(&self) -> &Program {
        &self.0 .0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::{insert_charges, Dst, Imm, Src, Target, Target24};

    fn function(code: &[Op]) -> Function {
        Function {
            name: CompactString::default(),
            params: Vec::new(),
            nregs: 2,
            code: insert_charges(code, &vec![(); code.len()]).0,
        }
    }

    /// `call_clobber` finds a register at or above a call's base read after the call, along
    /// the fall-through, a jump and a `try` handler, and accepts the registers below the base,
    /// the result, and registers written again before they are read.
    #[test]
    fn call_clobber_finds_registers_read_after_a_call() {
        use crate::isa::{Base, Count, Func};
        let call = |dst: u16, base: u16| Op::Call {
            dst: Dst(dst),
            func: Func(0),
            base: Base(base),
            argc: Count(1),
        };
        let f = |nregs: u16, code: Vec<Op>| Function {
            name: CompactString::default(),
            params: vec!["n".into()],
            nregs,
            code,
        };
        let ret = |r: u16| Op::Return { src: Src(r) };
        let mv = |d: u16, s: u16| Op::Move {
            dst: Dst(d),
            src: Src(s),
        };
        // r0 (below the base) and the result r1 read after: fine
        let ok = f(
            4,
            vec![
                mv(2, 0),
                call(1, 2),
                Op::Add {
                    dst: Dst(3),
                    a: Src(0),
                    b: Src(1),
                },
                ret(3),
            ],
        );
        assert_eq!(ok.call_clobber(), None);
        // r3 (above the base) written before the call and read after
        let bad = f(4, vec![mv(3, 0), mv(2, 0), call(1, 2), ret(3)]);
        assert_eq!(bad.call_clobber(), Some((2, 3)));
        // the argument register itself read after the call
        let arg = f(4, vec![mv(2, 0), call(1, 2), ret(2)]);
        assert_eq!(arg.call_clobber(), Some((1, 2)));
        // written again before it is read: fine
        let rewritten = f(4, vec![mv(3, 0), mv(2, 0), call(1, 2), mv(3, 1), ret(3)]);
        assert_eq!(rewritten.call_clobber(), None);
        // read after a jump
        let jumped = f(
            4,
            vec![
                mv(3, 0),
                mv(2, 0),
                call(1, 2),
                Op::Jump { target: Target(5) },
                ret(0),
                ret(3),
            ],
        );
        assert_eq!(jumped.call_clobber(), Some((2, 3)));
        // read in a `try` handler the call may throw to
        let handler = f(
            4,
            vec![
                mv(3, 0),
                Op::TryEnter { handler: Target(6) },
                mv(2, 0),
                call(1, 2),
                Op::TryExit {},
                ret(1),
                Op::Catch { dst: Dst(2) },
                ret(3),
            ],
        );
        assert_eq!(handler.call_clobber(), Some((3, 3)));
    }

    fn program_of(functions: Vec<Function>) -> Program {
        Program {
            functions,
            constants: Vec::new(),
            atoms: Vec::new(),
            entry: 0,
            debug: None,
            signature: None,
        }
    }

    /// String constants (a `SmallVec` of units) and names (a `CompactString`), short and long,
    /// encode and print as the `Vec<u16>` and `String` they were declared as before: the
    /// artifact format did not change with them.
    #[test]
    fn inline_strings_encode_as_vectors_and_strings() {
        for n in [0, 1, 7, 8, 9, 23, 24, 25, 40] {
            let v: Vec<u16> = (0..n as u16).map(|u| u.wrapping_mul(40_503)).collect();
            let c = Constant::String(StrUnits::from_slice(&v));
            let old = OldConstant::String(v.clone());
            let encoded = postcard::to_stdvec(&c).expect("encodes");
            assert_eq!(encoded, postcard::to_stdvec(&old).expect("encodes"));
            assert_eq!(
                postcard::from_bytes::<Constant>(&encoded).expect("decodes"),
                c
            );
            assert_eq!(format!("{c:?}"), format!("{old:?}"));
            let bytes: Vec<u8> = v.iter().map(|&u| u as u8).collect();
            let wide: Vec<u16> = bytes.iter().map(|&b| u16::from(b)).collect();
            assert_eq!(widen(&bytes).as_slice(), &wide[..]);
            // (a two-byte character across the inline limit)
            let text: String = "aé".chars().cycle().take(n).collect();
            let name = CompactString::from(text.as_str());
            let encoded = postcard::to_stdvec(&name).expect("encodes");
            assert_eq!(encoded, postcard::to_stdvec(&text).expect("encodes"));
            assert_eq!(
                postcard::from_bytes::<CompactString>(&encoded).expect("decodes"),
                name
            );
            assert_eq!(format!("{name:?} {name}"), format!("{text:?} {text}"));
        }
        /// `Constant` as it was declared with a vector.
        #[derive(Debug, Serialize)]
        enum OldConstant {
            #[allow(dead_code)]
            Number(f64),
            String(Vec<u16>),
        }
    }

    /// A verified program's code is every function's, in order, with each jump target and
    /// `try` handler moved by its function's start.
    #[test]
    fn verified_code_is_all_functions_relocated() {
        let f0 = function(&[Op::LoadUndef { dst: Dst(0) }, Op::Return { src: Src(0) }]);
        let f1 = function(&[
            Op::TryEnter { handler: Target(4) },
            Op::JumpIfNullish {
                src: Src(0),
                target: Target(3),
            },
            Op::JumpIfLt {
                a: Src(0),
                b: Src(1),
                target: Target24::new(3),
            },
            Op::TryExit {},
            Op::Return { src: Src(0) },
        ]);
        let (c0, c1) = (f0.code.clone(), f1.code.clone());
        let v = program_of(vec![f0, f1]).verify().unwrap();
        let start = c0.len() as u32;
        assert_eq!(
            v.entries(),
            &[
                Entry {
                    start: 0,
                    nregs: 2,
                    small: true,
                    unary: false
                },
                Entry {
                    start,
                    nregs: 2,
                    small: true,
                    unary: false
                }
            ]
        );
        assert_eq!(&v.code()[..c0.len()], &c0[..]);
        let moved: Vec<Op> = c1
            .iter()
            .map(|&op| {
                let mut op = op;
                op.map_target(|t| t + start);
                op
            })
            .collect();
        assert_eq!(&v.code()[c0.len()..], &moved[..]);
        assert_ne!(moved, c1);
        assert_eq!(v.local_pc(1, start + 3), 3);
        assert_eq!(v.flat_pc(1, 3), start + 3);
    }

    /// The last handle of a verified program gives the program back, exactly as it was; a
    /// handle while another one exists does not, and the other still reads it.
    #[test]
    fn only_the_last_handle_gives_the_program_back() {
        let one = || {
            program_of(vec![function(&[
                Op::LoadUndef { dst: Dst(0) },
                Op::Return { src: Src(0) },
            ])])
        };
        let v = one().verify().unwrap();
        let held = v.clone();
        let v = v.try_into_program().unwrap_err();
        drop(v);
        assert_eq!(held.code(), one().verify().unwrap().code());
        assert_eq!(held.try_into_program().unwrap(), one());
    }

    /// A program whose functions hold more than [`MAX_CODE_LEN`] instructions in all is refused
    /// (its targets in the one array of all its code would not fit the 24-bit ones).
    #[test]
    fn too_much_code_in_all_is_refused() {
        let half = MAX_CODE_LEN / 2;
        let long = |n: usize| Function {
            name: CompactString::default(),
            params: Vec::new(),
            nregs: 1,
            code: vec![Op::LoadUndef { dst: Dst(0) }; n],
        };
        let e = program_of(vec![long(half), long(half + 1)])
            .verify()
            .unwrap_err();
        assert!(
            matches!(&e, LoadError::Program(m) if m.contains("instructions in all")),
            "{e}"
        );
    }

    /// The verifier's inline operand check agrees with the full one on every instruction the
    /// decoder can produce from random bytes, against tables of several sizes.
    #[test]
    fn inline_operand_check_matches_the_full_one() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let program = |nconst: usize, nfuncs: usize, natoms: usize| Program {
            functions: (0..nfuncs.max(1))
                .map(|_| Function {
                    name: CompactString::default(),
                    params: Vec::new(),
                    nregs: 0,
                    code: Vec::new(),
                })
                .collect(),
            constants: (0..nconst)
                .map(|k| {
                    if k % 3 == 0 {
                        Constant::Number(k as f64)
                    } else {
                        Constant::String(vec![b'a' as u16; k % 5].into())
                    }
                })
                .collect(),
            atoms: (0..natoms).map(|a| a.to_string()).collect(),
            entry: 0,
            debug: None,
            signature: None,
        };
        let programs = [program(0, 1, 0), program(7, 3, 2), program(300, 20, 5)];
        let mut checked = 0;
        for _ in 0..200_000 {
            let mut bytes = [0u8; 16];
            for chunk in bytes.chunks_mut(8) {
                chunk.copy_from_slice(&next().to_le_bytes()[..chunk.len()]);
            }
            // small operand values, so that both verdicts occur
            for b in bytes.iter_mut().skip(1) {
                if *b & 0x80 != 0 {
                    *b &= 0x0f;
                }
            }
            let Ok((op, _)) = Op::decode(&bytes) else {
                continue;
            };
            let r = next();
            let p = &programs[(r % 3) as usize];
            let nregs = (r >> 8) as u16 % 40;
            let len = (r >> 24) as usize % 40;
            assert_eq!(
                p.inspect(&op, nregs, len).fit,
                p.check_operands(&op, nregs, len).is_ok(),
                "{op:?} nregs {nregs} len {len}"
            );
            checked += 1;
        }
        assert!(checked > 10_000);
    }

    /// TEST-ONLY REFERENCE: the per-function check as it was before the one-pass verifier
    /// (commit 1fe75a6: an operand and arity pass that marks block leaders and `Catch` slots,
    /// the stray-`Catch` check, then a second pass over the charges), kept to compare the
    /// verifier's verdicts against. Not used outside the tests.
    fn reference_verify_function(p: &Program, f: &Function) -> Result<(), (usize, CodeFault)> {
        let code = &f.code;
        match code.last() {
            None => return Err((0, CodeFault::FallsOffEnd)),
            Some(op) if !op.is_terminator() => {
                return Err((code.len() - 1, CodeFault::FallsOffEnd))
            }
            _ => {}
        }
        let nregs = f.nregs;
        const LEADER: u8 = 1;
        const HANDLER: u8 = 2;
        let mut marks = vec![0u8; code.len()];
        marks[0] = LEADER;
        let mut any_catch = false;
        for (pc, op) in code.iter().enumerate() {
            p.check_operands(op, nregs, code.len())
                .map_err(|fault| (pc, fault))?;
            match *op {
                Op::CallNative { native, argc, .. } => {
                    if let Some(n) = NativeId::from_u16(native.0) {
                        let (min, max) = n.arity();
                        if argc.0 < min || argc.0 > max {
                            return Err((
                                pc,
                                CodeFault::NativeArity {
                                    name: n.js_name(),
                                    count: argc.0,
                                    min,
                                    max,
                                },
                            ));
                        }
                    }
                }
                Op::Call { func, argc, .. } => {
                    let expected = p.functions[func.0 as usize].params.len();
                    if argc.0 as usize != expected {
                        return Err((
                            pc,
                            CodeFault::CallArity {
                                given: argc.0,
                                expected,
                            },
                        ));
                    }
                }
                Op::TryEnter { handler } => {
                    if let Some(slot) = marks.get_mut(handler.0 as usize + 1) {
                        *slot |= HANDLER;
                    }
                }
                Op::Catch { .. } => any_catch = true,
                _ => {}
            }
            if let Some(t) = op.jump_target() {
                if let Some(slot) = marks.get_mut(t as usize) {
                    *slot |= LEADER;
                }
            }
            if op.ends_block() {
                if let Some(slot) = marks.get_mut(pc + 1) {
                    *slot |= LEADER;
                }
            }
        }
        if any_catch {
            for (pc, op) in code.iter().enumerate() {
                if matches!(op, Op::Catch { .. }) && marks[pc] & HANDLER == 0 {
                    return Err((pc, CodeFault::StrayCatch));
                }
            }
        }
        let mut wrong_amount = None;
        let mut open: Option<(usize, u32, u32)> = None;
        for (pc, op) in code.iter().enumerate() {
            if let Op::Charge { amount } = *op {
                if let Some((at, amount, sum)) = open {
                    if amount != sum && wrong_amount.is_none() {
                        wrong_amount = Some((at, CodeFault::Charge { expected: sum }));
                    }
                }
                open = Some((pc, amount.0, 0));
                continue;
            }
            if marks[pc] & LEADER != 0 {
                return Err((pc, CodeFault::Charge { expected: 0 }));
            }
            match &mut open {
                Some((_, _, sum)) => *sum += op.cost(),
                None => {
                    if wrong_amount.is_none() {
                        wrong_amount = Some((pc, CodeFault::StrayCharge));
                    }
                }
            }
        }
        if let Some((at, amount, sum)) = open {
            if amount != sum && wrong_amount.is_none() {
                wrong_amount = Some((at, CodeFault::Charge { expected: sum }));
            }
        }
        match wrong_amount {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The one-pass verifier gives every function the verdict of the reference (the verifier
    /// before it, [`reference_verify_function`]) — the same fault at the same pc, or none — on
    /// random functions: charged ones (mostly valid) and then broken by a few edits (an
    /// operand, a target, a charge amount, an instruction moved, dropped or added, a `try`
    /// piece), with a fixed seed.
    #[test]
    fn verdicts_match_the_reference_verifier() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let below = |n: usize, next: &mut dyn FnMut() -> u64| (next() % n.max(1) as u64) as usize;
        let random_op = |next: &mut dyn FnMut() -> u64| loop {
            let mut bytes = [0u8; 16];
            for chunk in bytes.chunks_mut(8) {
                chunk.copy_from_slice(&next().to_le_bytes());
            }
            // small operands (most bytes 0), so that most fit
            for b in bytes.iter_mut().skip(1) {
                *b = if next().is_multiple_of(4) {
                    *b & 0x07
                } else {
                    0
                };
            }
            if let Ok((op, _)) = Op::decode(&bytes) {
                return op;
            }
        };
        let mut verdicts = std::collections::BTreeMap::<String, usize>::new();
        for round in 0..20_000 {
            let nfuncs = 1 + below(8, &mut next);
            let mut functions = Vec::new();
            for _ in 0..nfuncs {
                let nregs = below(9, &mut next) as u16;
                let len = 1 + below(40, &mut next);
                let mut code: Vec<Op> = (0..len)
                    .map(|_| random_op(&mut next))
                    .filter(|op| !matches!(op, Op::Charge { .. }))
                    .collect();
                code.push(Op::Return { src: Src(0) });
                let n = code.len() as u32;
                for op in &mut code {
                    op.map_registers(&|r| r % nregs.max(1));
                    op.map_target(|t| t % n);
                }
                let mut code = insert_charges(&code, &vec![(); code.len()]).0;
                for _ in 0..below(4, &mut next) {
                    let len = code.len();
                    if len == 0 {
                        break;
                    }
                    let pc = below(len, &mut next);
                    match below(7, &mut next) {
                        0 => code[pc] = random_op(&mut next),
                        1 => {
                            let t = below(len + 2, &mut next) as u32;
                            code[pc].map_target(|_| t);
                        }
                        2 => {
                            if let Op::Charge { amount } = &mut code[pc] {
                                amount.0 = amount.0.wrapping_add(100);
                            }
                        }
                        3 => code.swap(pc, below(len, &mut next)),
                        4 => {
                            code.remove(pc);
                        }
                        5 => code.insert(pc, random_op(&mut next)),
                        _ => {
                            let op = match below(3, &mut next) {
                                0 => Op::Catch { dst: Dst(0) },
                                1 => Op::TryEnter {
                                    handler: Target(below(len, &mut next) as u32),
                                },
                                _ => Op::Charge {
                                    amount: Imm(100 * below(4, &mut next) as u32),
                                },
                            };
                            code.insert(pc, op);
                        }
                    }
                }
                functions.push(Function {
                    name: CompactString::default(),
                    params: vec![CompactString::default(); below(3, &mut next).min(nregs as usize)],
                    nregs,
                    code,
                });
            }
            let mut p = program_of(functions);
            p.constants = (0..4 + below(5, &mut next))
                .map(|k| {
                    if k % 4 != 3 {
                        Constant::String(Vec::new().into())
                    } else {
                        Constant::Number(0.0)
                    }
                })
                .collect();
            p.atoms = (0..4 + below(5, &mut next))
                .map(|a| a.to_string())
                .collect();
            for f in &p.functions {
                let want = reference_verify_function(&p, f);
                let got = p.verify_function(f);
                assert_eq!(got, want, "round {round}: {:?}", f.code);
                let name = match &got {
                    Ok(()) => "ok".to_string(),
                    Err((_, fault)) => format!("{fault:?}")
                        .split([' ', '('])
                        .next()
                        .unwrap()
                        .into(),
                };
                *verdicts.entry(name).or_default() += 1;
            }
        }
        // both verdicts, and the block faults, occur
        for kind in ["ok", "Charge", "StrayCatch", "Register", "Target"] {
            assert!(
                verdicts.get(kind).copied().unwrap_or(0) > 20,
                "{verdicts:?}"
            );
        }
    }
}
