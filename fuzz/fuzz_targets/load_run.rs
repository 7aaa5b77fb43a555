//! Arbitrary bytes → load/verify → run under a small budget. Invariants (in `support/src/harness.rs`,
//! shared with the stable replay test): no panic; fuel and heap stay within their limits; the run
//! ends within a bounded number of slices.
#![forbid(unsafe_code)]
#![no_main]

use ajs_fuzz_support::harness;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    harness::load_run(data);
});
