//! The workspace's integration tests, one test binary (`ajs_tests`): each file under `tests/` is a
//! module. Run one file's tests by its module name:
//! `cargo test --release -p ajs --test ajs_tests behaviour::`.
#![forbid(unsafe_code)]

// shared helpers
mod adversarial_common;
mod capabilities_support;
mod common;

mod agents;
mod approvals_gated;
mod approvals_replay;
mod artifacts;
mod behaviour;
mod builtins2_fuel;
mod builtins2_semantics;
mod builtins_fuel;
mod callbacks;
mod capabilities_atoms;
mod capabilities_http;
mod capabilities_llm;
mod compiler_compile;
mod compiler_robust;
mod constant_operands;
mod deps;
mod differential_gen;
mod docs_examples;
mod fuel_golden;
mod golden_bytecode;
mod limits;
mod manifest;
mod mutation;
mod object_props;
mod parallel;
mod refusal_catalogue;
mod schema;
mod security_boundary;
mod security_claims;
mod security_escape;
mod security_fuzz_corpus;
mod security_isolation;
mod security_limits;
mod snapshots_vm;
mod sync_api;
mod syntax;
mod vm_reuse;
