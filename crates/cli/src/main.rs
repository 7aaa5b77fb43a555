//! `ajs`: run AJS snippets, conformance cases and disassemble programs.

#![forbid(unsafe_code)]

mod cases;
mod cases_parallel;
mod compile;
mod eval;
mod gated;
mod inspect;
mod matchers;
mod scripted;

use std::io::Read;
use std::process::ExitCode;

use ajs_runner::cli::{ExecArgs, ServeArgs};
use ajs_runner::exit::Usage;
use clap::{Parser, Subcommand};
use serde_json::{Map, Value};

/// jemalloc, configured at build time (.cargo/config.toml) to return freed pages to the OS
/// at once: a run peaks at what it holds, and `ajs serve`'s RSS falls back after a burst.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Run untrusted AJS code in a fuel-metered VM.
#[derive(Parser)]
#[command(
    name = "ajs",
    version,
    args_override_self = true,
    after_help = "Run commands (eval, exec, run, resume, replay) print one JSON line, the shape \
POST /run answers with. Exit codes: 0 the run succeeded, 1 the run failed (guest error, fuel, \
timeout…), 2 bad usage, 3 input refused (compile error, artifact refused, arguments refused). \
See docs/cli.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    Eval(eval::EvalArgs),
    Cases(cases_parallel::CasesArgs),
    Disasm(compile::DisasmArgs),
    Compile(compile::CompileArgs),
    Inspect(inspect::InspectArgs),
    Exec(ExecArgs),
    Serve(ServeArgs),
    Run(gated::RunArgs),
    Resume(gated::ResumeArgs),
    Replay(gated::ReplayArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(std::env::args_os()) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let result = match &cli.command {
        None => {
            let help = <Cli as clap::CommandFactory>::command().render_help();
            Ok(ajs_runner::exit::write_stdout(&help.to_string())
                .map_or(ExitCode::from(ajs_runner::exit::RUN_FAILED), |()| {
                    ExitCode::SUCCESS
                }))
        }
        Some(Command::Eval(a)) => eval::cmd_eval(a),
        Some(Command::Cases(a)) => cases_parallel::cmd_cases(a),
        Some(Command::Disasm(a)) => compile::cmd_disasm(a),
        Some(Command::Compile(a)) => compile::cmd_compile(a),
        Some(Command::Inspect(a)) => inspect::cmd_inspect(a),
        Some(Command::Exec(a)) => ajs_runner::cli::exec(a),
        Some(Command::Serve(a)) => ajs_runner::cli::serve("ajs", a),
        Some(Command::Run(a)) => gated::cmd_run(a),
        Some(Command::Resume(a)) => gated::cmd_resume(a),
        Some(Command::Replay(a)) => gated::cmd_replay(a),
    };
    ajs_runner::cli::report_peak_rss();
    result.unwrap_or_else(|u| {
        u.report(
            <Cli as clap::CommandFactory>::command(),
            cli.command.as_ref().map(Command::name),
        )
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, Usage> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("cannot start the async runtime: {e}")))
}

/// Parses `--context`: a JSON object.
fn parse_context(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!("--context must be a JSON object, not {other}")),
        Err(e) => Err(format!("--context is not valid JSON: {e}")),
    }
}

/// Reads stdin, at most `max` bytes; `None` when it holds more.
fn read_stdin(max: usize) -> Result<Option<Vec<u8>>, Usage> {
    let mut buf = Vec::new();
    std::io::stdin()
        .take(max as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Usage(format!("cannot read stdin: {e}")))?;
    Ok((buf.len() <= max).then_some(buf))
}

impl Command {
    /// The subcommand's name, for messages.
    fn name(&self) -> &'static str {
        match self {
            Command::Eval(_) => "eval",
            Command::Cases(_) => "cases",
            Command::Disasm(_) => "disasm",
            Command::Compile(_) => "compile",
            Command::Inspect(_) => "inspect",
            Command::Exec(_) => "exec",
            Command::Serve(_) => "serve",
            Command::Run(_) => "run",
            Command::Resume(_) => "resume",
            Command::Replay(_) => "replay",
        }
    }
}
