//! The AJS virtual machine: runs verified bytecode with fuel, a bounded heap and no I/O.
//!
//! It links no parser and no async runtime. A run is a [`Vm`] value: [`Vm::run`] executes a
//! slice and returns a [`Step`] — `Done`, `Failed`, `Yield` (the slice is spent) or `Host` (the
//! program called an atom; the driver performs it and calls [`Vm::resume`]).
//!
//! ```
//! use ajs_bytecode::isa::*;
//! use ajs_bytecode::{Constant, Function, Program};
//! use ajs_vm::{JsValue, Step, Vm, VmOptions};
//!
//! let code = [Op::Add { dst: Dst(2), a: Src(0), b: Src(1) }, Op::Return { src: Src(2) }];
//! let (code, _) = insert_charges(&code, &[(); 2]);
//! let program = Program {
//!     functions: vec![Function { name: "f".into(), params: vec!["a".into(), "b".into()], nregs: 3, code }],
//!     constants: vec![], atoms: vec![], entry: 0, debug: None, signature: None,
//! }.verify().unwrap();
//! let mut vm = Vm::new(program, &[JsValue::Number(1.0), JsValue::Number(2.0)], VmOptions::default()).unwrap();
//! assert_eq!(vm.run(u64::MAX), Step::Done(JsValue::Number(3.0)));
//! assert!(vm.fuel_used() > 0.0 && vm.fuel_used() < 1.0);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod alloc;
mod atoms;
mod builtins;
mod dates;
mod error;
mod extras;
mod heap;
pub mod interrupt;
mod json;
mod machine;
pub mod manifest;
mod memory;
mod method_hints;
mod natives;
mod number;
mod ops;
mod price;
mod regex_engine;
mod regexp;
mod schema;
pub mod setup;
mod spread;
mod value;

pub use ajs_bytecode::isa::MILLI;
pub use error::{ErrorKind, RunError};
pub use interrupt::{Interrupt, CANCELLED_MESSAGE};
pub use machine::snapshot::{
    hex, program_fingerprint, snapshot_id, value_hash, SnapshotError, SNAPSHOT_MAGIC,
    SNAPSHOT_VERSION,
};
pub use machine::{
    system_clock, AtomSpec, HostArg, HostCall, LogLevel, LogLine, PendingHostCall, SpareVm, Step,
    TraceStep, Vm, VmOptions, DEFAULT_FUEL, DEFAULT_MAX_CALL_DEPTH, DEFAULT_MAX_HEAP_BYTES,
    DEFAULT_MAX_LOG_BYTES, DEFAULT_MAX_LOG_LINES, DEFAULT_MAX_PARALLEL_ITEMS, MAX_MESSAGE_BYTES,
    MAX_PARALLEL_NESTING, MAX_TRACE_STEPS, MILLI_PER_ELEMENT, UNITS_PER_MILLI,
};
pub use number::{number_to_string, string_to_number};
pub use value::{JsValue, Value, MAX_BOUNDARY_DEPTH};
