//! The `ajs` command's tests, one test binary (`cli_tests`): each file here is a module. Run one
//! file's tests by its module name: `cargo test --release -p ajs-cli --test cli_tests serve::`.
#![forbid(unsafe_code)]

mod cli;
mod corpus;
mod fleet;
mod gated;
mod memory_bounds;
mod serve;
