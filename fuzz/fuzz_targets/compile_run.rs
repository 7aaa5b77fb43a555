//! Arbitrary text → compile (Eval rules and function-body rules) → verify → artifact round trip →
//! run under a small budget. Invariants in `support/src/harness.rs`: no panic anywhere; compiler
//! output always verifies; fuel and heap within limits; the run ends within bounded slices.
#![forbid(unsafe_code)]
#![no_main]

use ajs_fuzz_support::harness;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    harness::compile_run(data);
});
