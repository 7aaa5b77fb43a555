//! The AJS instruction set and the `Program` artifact.
//!
//! This crate is shared by the compiler (which emits [`Op`]s) and the VM (which runs them). It
//! depends on no parser and no runtime. Its three parts:
//! - [`isa`]: every opcode declared once, with operands and fuel cost;
//! - [`natives`]: every builtin function and method a program may call;
//! - [`program`]: the artifact, its versioned encoding, and the verifier.
//!
//! ```
//! use ajs_bytecode::{isa::*, program::*};
//! let code = vec![Op::LoadConst { dst: Dst(0), k: Const(0) }, Op::Return { src: Src(0) }];
//! let (code, _) = insert_charges(&code, &[(); 2]);
//! let p = Program {
//!     functions: vec![Function { name: "f".into(), params: vec![], nregs: 1, code }],
//!     constants: vec![Constant::Number(42.0)],
//!     atoms: vec![],
//!     entry: 0,
//!     debug: None,
//!     signature: None,
//! };
//! let bytes = p.to_bytes();
//! let loaded = Program::from_bytes(&bytes).expect("verifies");
//! assert_eq!(loaded.functions[0].code.len(), 3);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod isa;
pub mod natives;
pub mod program;

pub use isa::{Op, ISA_HASH};
pub use natives::NativeId;
pub use program::{
    artifact_fingerprint, take_released, widen, CompactString, Constant, DebugInfo, Entry,
    Function, LoadError, ParamSpec, Program, Signature, SourcePos, StrUnits, TypeSpec,
    VerifiedProgram,
};
