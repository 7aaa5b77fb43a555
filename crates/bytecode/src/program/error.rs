//! Why a program was refused: load errors and the faults of one instruction.

use thiserror::Error;

use super::MAX_ARTIFACT_BYTES;

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
    /// The manifest the artifact carries is not the one its program has (it was edited, or
    /// written by other manifest rules).
    #[error("the artifact's manifest does not match its program ({0}); recompile it with `ajs compile`, which writes the manifest the program has")]
    Manifest(String),
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
