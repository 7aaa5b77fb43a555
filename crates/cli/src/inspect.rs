//! `ajs inspect` (source or artifact → its manifest as JSON, docs/manifest.md).
//!
//! It runs nothing: exit 0 when printed, 2 on bad usage (a file that cannot be read included), 3
//! when the input is refused (a compile error, an artifact the loader refuses, a file over its
//! cap), 1 when stdout cannot be written.

use std::process::ExitCode;

use ajs::{Options, ProgramManifest};
use ajs_runner::cli::{at_least_one, read_capped};
use ajs_runner::exit::{write_stdout, Usage, RUN_FAILED};
use clap::Args;

use crate::compile::{names, read, refused, DEFAULT_COMPILE_SOURCE_BYTES};

/// `inspect`'s arguments.
#[derive(Args)]
#[command(
    about = "Print the manifest of an agent program or artifact as JSON",
    long_about = "Prints what an agent program or a compiled artifact may do, before it runs: its \
parameters, the atoms it calls (each call site, whether it is in a loop or a callback, the most \
calls one run makes, httpFetch's literal URL or URL prefix and method, whether llmPredict asks for a \
response format), a sound fuel bound (null for data-dependent loops), recursion and where atoms' \
data can flow (docs/manifest.md). Exit codes: 0 printed, 1 stdout cannot be written, 2 bad usage, \
3 the input is refused (a compile error, an artifact the loader refuses)."
)]
pub struct InspectArgs {
    /// The agent source or artifact (`ajs compile`'s output); '-' reads stdin.
    #[arg(value_name = "FILE")]
    file: String,
    /// Host atoms besides httpFetch and llmPredict the source may call, comma-separated.
    #[arg(long, value_name = "a,b")]
    atoms: Option<String>,
    /// The source size cap in bytes (default 1 MiB; at least 1).
    #[arg(long, value_name = "BYTES", value_parser = at_least_one::<usize>)]
    max_source_bytes: Option<usize>,
}

/// `ajs inspect`.
pub fn cmd_inspect(a: &InspectArgs) -> Result<ExitCode, Usage> {
    let mut options = Options {
        max_source_bytes: a.max_source_bytes.unwrap_or(DEFAULT_COMPILE_SOURCE_BYTES),
        ..Options::default()
    };
    for atom in names(a.atoms.as_deref().unwrap_or("")) {
        // Only the name matters to the compiler.
        options.capabilities = options.capabilities.with_atom(&atom, |_| async {
            Err("not available at compile time".to_string())
        });
    }
    let file = &a.file;
    let cap = ajs::MAX_ARTIFACT_BYTES.max(options.max_source_bytes);
    let bytes = if file == "-" {
        match crate::read_stdin(cap)? {
            Some(b) => b,
            None => {
                return Ok(refused(
                    "inspect",
                    format!("stdin is over the {cap}-byte limit"),
                ))
            }
        }
    } else {
        match read(
            "inspect",
            read_capped(
                file,
                cap,
                "--max-source-bytes for a source; MAX_ARTIFACT_BYTES for an artifact",
            ),
        )? {
            Ok(b) => b,
            Err(code) => return Ok(code),
        }
    };
    let program = if bytes.starts_with(&ajs_bytecode::program::MAGIC) {
        match ajs::load_artifact(&bytes, None) {
            Ok(p) => p,
            Err(e) => return Ok(refused("inspect", format!("{file}: {e}"))),
        }
    } else {
        if bytes.len() > options.max_source_bytes {
            return Ok(refused(
                "inspect",
                format!(
                    "{file} is {} bytes, over the {}-byte source limit (--max-source-bytes)",
                    bytes.len(),
                    options.max_source_bytes
                ),
            ));
        }
        let Ok(source) = String::from_utf8(bytes) else {
            return Ok(refused(
                "inspect",
                format!("{file} is neither an ajs artifact nor UTF-8 source"),
            ));
        };
        match ajs::Runner::compile_agent(&source, &options) {
            Ok(p) => p,
            Err(e) => {
                let message = e
                    .to_string()
                    .replace(" at <source>:", &format!(" at {file}:"));
                return Ok(refused("inspect", message));
            }
        }
    };
    let mut text = program.manifest().to_json_pretty();
    text.push('\n');
    Ok(match write_stdout(&text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ajs inspect: cannot write to stdout: {e}");
            ExitCode::from(RUN_FAILED)
        }
    })
}
