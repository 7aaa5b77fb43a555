//! `ajs-run`: runs compiled AJS artifacts and serves them; contains no parser.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use ajs_runner::cli;

/// jemalloc, configured at build time (.cargo/config.toml) to return freed pages to the OS
/// at once: a run peaks at what it holds, and a server's RSS falls back after a burst.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn usage() -> String {
    format!(
        "ajs-run: run compiled AJS artifacts (no parser in this binary)\n\nUsage:\n{}{}  ajs-run --help\n      Shows this text.\n",
        cli::EXEC_USAGE.replace("  exec", "  ajs-run exec"),
        cli::SERVE_USAGE.replace("  serve", "  ajs-run serve")
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("--help" | "-h" | "help") => {
            print!("{}", usage());
            Ok(ExitCode::SUCCESS)
        }
        Some("exec") => cli::exec("ajs-run", &args[1..]),
        Some("serve") => cli::serve("ajs-run", &args[1..]),
        Some(other) => Err(cli::Usage(format!("unknown command '{other}'"))),
    };
    cli::report_peak_rss();
    match result {
        Ok(code) => code,
        Err(cli::Usage(msg)) => {
            eprintln!("ajs-run: {msg}\nRun 'ajs-run --help' for usage.");
            ExitCode::from(2)
        }
    }
}
