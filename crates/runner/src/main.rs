//! `ajs-run`: runs compiled AJS artifacts and serves them; contains no parser.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use ajs_runner::cli::{self, ExecArgs, ServeArgs};
use clap::{Parser, Subcommand};

/// jemalloc, configured at build time (.cargo/config.toml) to return freed pages to the OS
/// at once: a run peaks at what it holds, and a server's RSS falls back after a burst.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Run compiled AJS artifacts (no parser in this binary).
#[derive(Parser)]
#[command(
    name = "ajs-run",
    version,
    args_override_self = true,
    after_help = "Exit codes: 0 the run succeeded, 1 the run failed, 2 bad usage, 3 input refused \
(artifact refused, atom not provided, arguments refused). See docs/cli.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

// parsed once per process: the variants' sizes do not matter
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    Exec(ExecArgs),
    Serve(ServeArgs),
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
        Some(Command::Exec(a)) => cli::exec(a),
        Some(Command::Serve(a)) => cli::serve("ajs-run", a),
    };
    cli::report_peak_rss();
    result.unwrap_or_else(|u| {
        u.report(
            <Cli as clap::CommandFactory>::command(),
            cli.command.as_ref().map(Command::name),
        )
    })
}

impl Command {
    /// The subcommand's name, for messages.
    fn name(&self) -> &'static str {
        match self {
            Command::Exec(_) => "exec",
            Command::Serve(_) => "serve",
        }
    }
}
