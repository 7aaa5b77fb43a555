//! Load and run compiled AJS artifacts: the library behind `ajs-run` (and `ajs exec` / `ajs
//! serve`).
//!
//! Built without the `source` feature (the default), this crate links no parser: it accepts
//! only artifacts that `ajs compile` wrote, loaded through the verifier. See
//! `docs/deployment.md` for the split deployment, the server's configuration and its request
//! and response formats.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod cli;
pub mod config;
pub mod exit;
mod manifest_routes;
pub mod output;
pub mod runs;
mod runs_api;
pub mod server;

pub use config::{FetchConfig, Limits, LogFormat, ModelConfig, ServerConfig};
pub use output::outcome_json;
pub use server::Server;
