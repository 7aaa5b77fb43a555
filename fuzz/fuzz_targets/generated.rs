//! A structured generator: an `arbitrary`-derived AST of AJS statements and expressions (with
//! hostile property names, memory-growing methods, callbacks, spreads, JSON text, capability
//! calls) printed to source → compile → run, as a function body or as an agent with a (possibly
//! recursive) helper. Invariants in `support/src/harness.rs`.
#![forbid(unsafe_code)]
#![no_main]

use ajs_fuzz_support::{ast, harness};

use ajs_compiler::Mode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|program: ast::Program| {
    let src = program.to_source();
    let mode = if program.as_agent {
        Mode::Agent
    } else {
        Mode::FunctionBody
    };
    harness::compile_run_mode(&src, mode);
});
