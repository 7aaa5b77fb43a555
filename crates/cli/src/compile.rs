//! `ajs compile` (source → artifact) and `ajs disasm` (artifact or source → listing).
//!
//! Neither runs anything: they print their errors on stderr, and exit 0 when done, 2 on bad
//! usage (a file that cannot be read included), 3 when the input is refused (a compile error,
//! an artifact the loader refuses, a file over its cap), 1 when the output cannot be written.

use std::process::ExitCode;

use ajs::Options;
use ajs_runner::cli::{at_least_one, read_capped, ReadError};
use ajs_runner::exit::{write_stdout, Usage, REFUSED, RUN_FAILED};
use clap::Args;

use crate::parse_context;

/// Largest agent source `ajs compile` reads unless `--max-source-bytes` says otherwise.
pub(crate) const DEFAULT_COMPILE_SOURCE_BYTES: usize = 1024 * 1024;

/// `compile`'s arguments.
#[derive(Args)]
#[command(
    about = "Compile an agent program into a versioned artifact",
    long_about = "Compiles an agent program into a versioned artifact (format version, cost-table \
version, instruction-set fingerprint). Errors go to stderr. Exit codes: 0 written, 1 an output \
cannot be written, 2 bad usage, 3 the source is refused (a compile error, over its size cap)."
)]
pub struct CompileArgs {
    /// The agent source file.
    #[arg(value_name = "AGENT.ajs")]
    file: String,
    /// The artifact to write (default: AGENT with the extension .ajsb).
    #[arg(short = 'o', long = "out", value_name = "OUT.ajsb")]
    out: Option<String>,
    /// Move the span table to a sidecar file (OUT.spans, or --spans PATH) that `exec --spans`
    /// takes back.
    #[arg(long)]
    strip: bool,
    /// Where --strip writes the span sidecar.
    #[arg(long, value_name = "PATH", requires = "strip")]
    spans: Option<String>,
    /// Host atoms besides httpFetch and llmPredict, comma-separated; a runner refuses an
    /// artifact calling an atom it does not provide.
    #[arg(long, value_name = "a,b")]
    atoms: Option<String>,
    /// The source size cap in bytes (default 1 MiB; at least 1).
    #[arg(long, value_name = "BYTES", value_parser = at_least_one::<usize>)]
    max_source_bytes: Option<usize>,
}

/// `disasm`'s arguments.
#[derive(Args)]
#[command(
    about = "Print the disassembly of an artifact or of AJS source",
    long_about = "Prints the disassembly of a compiled artifact (a file starting with `AJSB`) or \
of AJS source, compiled as an Eval snippet whose context declares the given names (or, with \
--params, as a function body with these parameters). Exit codes: 0 printed, 1 the compiled \
program does not verify, 2 bad usage, 3 the input is refused."
)]
pub struct DisasmArgs {
    /// The artifact or source file; '-' reads stdin.
    #[arg(value_name = "FILE")]
    file: String,
    /// The Eval context whose keys the source reads (a JSON object).
    #[arg(long, value_name = "JSON", value_parser = parse_context, conflicts_with = "params")]
    context: Option<serde_json::Map<String, serde_json::Value>>,
    /// Compile the source as a function body with these parameters, comma-separated.
    #[arg(long, value_name = "a,b")]
    params: Option<String>,
}

pub(crate) fn names(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A refusal of `prog`'s input, on stderr.
pub(crate) fn refused(prog: &str, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("ajs {prog}: {message}");
    ExitCode::from(REFUSED)
}

/// A file read: bytes, bad usage (unreadable) or a refusal (over its cap).
pub(crate) fn read(
    prog: &str,
    r: Result<Vec<u8>, ReadError>,
) -> Result<Result<Vec<u8>, ExitCode>, Usage> {
    match r {
        Ok(b) => Ok(Ok(b)),
        Err(ReadError::Unreadable(m)) => Err(Usage(m)),
        Err(e @ ReadError::TooLarge(_)) => Ok(Err(refused(prog, e))),
    }
}

/// `ajs compile`.
pub fn cmd_compile(a: &CompileArgs) -> Result<ExitCode, Usage> {
    let mut options = Options {
        max_source_bytes: a.max_source_bytes.unwrap_or(DEFAULT_COMPILE_SOURCE_BYTES),
        ..Options::default()
    };
    for atom in names(a.atoms.as_deref().unwrap_or("")) {
        // Only the name matters to the compiler; the runner provides the real atom.
        options.capabilities = options.capabilities.with_atom(&atom, |_| async {
            Err("not available at compile time".to_string())
        });
    }
    let file = &a.file;
    let out = a.out.clone().unwrap_or_else(|| {
        let path = std::path::Path::new(file);
        path.with_extension("ajsb").to_string_lossy().into_owned()
    });
    let spans = a.spans.clone().unwrap_or_else(|| format!("{out}.spans"));
    let bytes = read(
        "compile",
        read_capped(
            file,
            options.max_source_bytes,
            "--max-source-bytes; raise it to compile a longer program",
        ),
    )?;
    let source = match bytes.map(String::from_utf8) {
        Ok(Ok(s)) => s,
        Ok(Err(_)) => return Ok(refused("compile", format!("{file} is not UTF-8"))),
        Err(code) => return Ok(code),
    };
    let program = match ajs::Runner::compile_agent_with_warnings(&source, &options) {
        Ok((p, warnings)) => {
            for w in warnings {
                eprintln!(
                    "{}",
                    w.to_string()
                        .replace(" at <source>:", &format!(" at {file}:"))
                );
            }
            p
        }
        Err(ajs::CreateError::Compile(e)) => {
            let message = e
                .to_string()
                .replace(" at <source>:", &format!(" at {file}:"));
            return Ok(refused("compile", message));
        }
        Err(e) => return Ok(refused("compile", format!("{file}: {e}"))),
    };
    let write = |path: &str, bytes: &[u8]| {
        std::fs::write(path, bytes).map_err(|e| {
            eprintln!("ajs compile: cannot write {path}: {e}");
            ExitCode::from(RUN_FAILED)
        })
    };
    let written = if a.strip {
        let (artifact, sidecar) = ajs::manifest::stripped_artifact_bytes(&program);
        write(&out, &artifact).and_then(|()| match sidecar {
            Some(s) => write(&spans, &s),
            None => Ok(()),
        })
    } else {
        write(&out, &ajs::manifest::artifact_bytes(&program))
    };
    Ok(written.map_or_else(|code| code, |()| ExitCode::SUCCESS))
}

/// Prints a listing; a closed stdout is not an error.
fn print_listing(text: &str, code: ExitCode) -> ExitCode {
    match write_stdout(text) {
        Ok(()) => code,
        Err(e) => {
            eprintln!("ajs disasm: cannot write to stdout: {e}");
            ExitCode::from(RUN_FAILED)
        }
    }
}

/// `ajs disasm`.
pub fn cmd_disasm(a: &DisasmArgs) -> Result<ExitCode, Usage> {
    let (mode, externals) = match (&a.params, &a.context) {
        (Some(p), _) => (ajs_compiler::Mode::FunctionBody, names(p)),
        (None, Some(c)) => (ajs_compiler::Mode::Eval, c.keys().cloned().collect()),
        (None, None) => (ajs_compiler::Mode::Eval, Vec::new()),
    };
    let file = &a.file;
    let limit = "MAX_ARTIFACT_BYTES, the largest artifact any loader accepts";
    let bytes = if file == "-" {
        match crate::read_stdin(ajs::MAX_ARTIFACT_BYTES)? {
            Some(b) => b,
            None => {
                return Ok(refused(
                    "disasm",
                    format!(
                        "stdin is over the {}-byte limit ({limit})",
                        ajs::MAX_ARTIFACT_BYTES
                    ),
                ))
            }
        }
    } else {
        match read("disasm", read_capped(file, ajs::MAX_ARTIFACT_BYTES, limit))? {
            Ok(b) => b,
            Err(code) => return Ok(code),
        }
    };
    if bytes.starts_with(&ajs_bytecode::program::MAGIC) {
        return Ok(match ajs::load_artifact(&bytes, None) {
            Ok(program) => print_listing(&program.disassemble(), ExitCode::SUCCESS),
            Err(e) => refused("disasm", format!("{file}: {e}")),
        });
    }
    let Ok(source) = String::from_utf8(bytes) else {
        return Ok(refused(
            "disasm",
            format!("{file} is neither an ajs artifact nor UTF-8 source"),
        ));
    };
    let atoms = ["httpFetch".to_string(), "llmPredict".to_string()];
    let source_name = if file == "-" {
        "<stdin>"
    } else {
        file.as_str()
    };
    let opts = ajs_compiler::CompileOptions {
        mode,
        externals: &externals,
        atoms: &atoms,
        source_name,
    };
    match ajs_compiler::compile(&source, &opts) {
        Ok(program) => {
            let listing = program.disassemble();
            let code = match program.verify() {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ajs disasm: the compiled program does not verify: {e}");
                    ExitCode::from(RUN_FAILED)
                }
            };
            Ok(print_listing(&listing, code))
        }
        Err(e) => Ok(refused("disasm", e)),
    }
}
