//! How `ajs` and `ajs-run` end: their exit codes and their one JSON line on stdout.
//!
//! Every run command prints exactly one JSON line in the shape `POST /run` answers with: the
//! outcome ([`crate::output::outcome_json`]) when the program ran, or `{ "error": { "kind",
//! "message" } }` when its input was refused before anything ran. Bad usage prints a message on
//! stderr and nothing on stdout.

use std::io::Write;
use std::process::ExitCode;

use ajs::{ErrorKind, Outcome};
use serde_json::{json, Value};

/// The run succeeded (or, for `ajs cases`, every case passed).
pub const SUCCESS: u8 = 0;
/// The run failed: a guest error, out of fuel, timeout, quota, cancelled… (or a case failed, or
/// an output could not be written).
pub const RUN_FAILED: u8 = 1;
/// Bad usage: an unknown option, a missing argument, a value out of range (clap's code too).
pub const USAGE: u8 = 2;
/// The input was refused before anything ran: a compile error, an artifact, snapshot or journal
/// the loader refuses, arguments refused by the program's signature, a file over its size cap.
pub const REFUSED: u8 = 3;

/// Bad command-line usage: the message, printed to stderr with [`USAGE`].
#[derive(Debug)]
pub struct Usage(pub String);

impl Usage {
    /// Prints the message the way clap prints its own usage errors (`error: …`, the usage line
    /// of `subcommand` in `command`, where to find help) on stderr; the exit code [`USAGE`].
    pub fn report(&self, mut command: clap::Command, subcommand: Option<&str>) -> ExitCode {
        command.build();
        let command = match subcommand.and_then(|s| command.find_subcommand_mut(s)) {
            Some(sub) => sub,
            None => &mut command,
        };
        let _ = command
            .error(clap::error::ErrorKind::ValueValidation, &self.0)
            .print();
        ExitCode::from(USAGE)
    }
}

/// The exit code of a run's outcome: [`SUCCESS`], [`REFUSED`] for input refused before the run
/// (kind `input`), [`RUN_FAILED`] for every other error.
pub fn outcome_code(out: &Outcome) -> u8 {
    match out.error.as_ref().map(|e| e.kind) {
        None => SUCCESS,
        Some(ErrorKind::Input) => REFUSED,
        Some(_) => RUN_FAILED,
    }
}

/// Prints `value` as one line on stdout and returns `code`. A closed stdout (the reader went
/// away: `ajs eval 1 | head -c0`) is not an error; another write error is reported on stderr
/// and ends with [`RUN_FAILED`].
pub fn print_json(value: &Value, code: u8) -> ExitCode {
    match write_stdout(&format!("{value}\n")) {
        Ok(()) => ExitCode::from(code),
        Err(e) => {
            eprintln!("cannot write to stdout: {e}");
            ExitCode::from(RUN_FAILED)
        }
    }
}

/// Prints a refusal, `{ "error": { "kind", "message" } }` (a `POST /run` 4xx body), and returns
/// [`REFUSED`].
pub fn refuse(kind: &str, message: impl Into<String>) -> ExitCode {
    print_json(&refusal_json(kind, message), REFUSED)
}

/// A refusal's JSON: `{ "error": { "kind", "message" } }`.
pub fn refusal_json(kind: &str, message: impl Into<String>) -> Value {
    json!({ "error": { "kind": kind, "message": message.into() } })
}

/// Writes `text` to stdout and flushes it; a closed stdout (`BrokenPipe`) counts as written.
///
/// # Errors
/// Any other write error.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}
