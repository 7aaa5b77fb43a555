//! The `Program` artifact: functions, constants, atoms, a strippable span table; its versioned
//! encoding; and the verifier every program passes before a VM will run it.

pub use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::isa::{Op, Operand};

mod artifact;
mod disasm;
mod error;
mod signature;
#[cfg(test)]
mod tests;
mod verified;
mod verify;

pub use artifact::MAX_MANIFEST_BYTES;
pub use error::{artifact_fingerprint, CodeFault, LoadError};
pub use signature::{ParamSpec, Signature, TypeSpec, MAX_TYPE_DEPTH};
pub use verified::{Entry, VerifiedProgram};

/// First bytes of every artifact.
pub const MAGIC: [u8; 4] = *b"AJSB";
/// Version of the artifact layout: 2 adds the manifest section after the program. An artifact
/// of version 1 (no manifest) still loads (its manifest is computed when asked for).
pub const FORMAT_VERSION: u16 = 2;
/// The oldest artifact layout this build still reads.
pub const OLDEST_FORMAT_VERSION: u16 = 1;
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
/// per-thread cache. Compared, printed (`Debug`) and encoded as its
/// units: the encoding is that of a `Vec<u16>`.
pub type StrUnits = SmallVec<[u16; 8]>;

/// The units of `bytes` read as Latin-1 (each byte one unit: an ASCII string's units).
/// (A short string is widened into a fixed array first: collected into the `SmallVec`, each
/// unit would go through its `Extend`'s capacity test.)
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

impl Program {
    /// The source position of instruction `pc` of function `func`, when spans are present.
    pub fn span(&self, func: usize, pc: usize) -> Option<SourcePos> {
        self.debug.as_ref()?.spans.get(func)?.get(pc).copied()
    }
}
