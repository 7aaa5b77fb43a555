//! What the fuzz targets run, shared with the stable-toolchain replay test
//! (`tests/security_fuzz_corpus.rs`), so a corpus file runs the same way under `cargo fuzz` and
//! under `cargo test`: the harness and its invariants, and the structured program generator.
#![forbid(unsafe_code)]

pub mod ast;
pub mod harness;
