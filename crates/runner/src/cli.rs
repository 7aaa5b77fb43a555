//! The `exec` and `serve` commands, shared by `ajs` and `ajs-run`.

use std::collections::HashMap;
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use crate::config::{LogFormat, ServerConfig};
pub use crate::exit::Usage;
use crate::exit::{outcome_code, print_json, refuse, RUN_FAILED};
use crate::output::outcome_json;
use crate::server::Server;

/// The environment variable that asks `ajs` and `ajs-run` to print their peak RSS on exit.
pub const PEAK_RSS_ENV: &str = "AJS_REPORT_PEAK_RSS";

/// When [`PEAK_RSS_ENV`] is set, prints `ajs-peak-rss-bytes=N` (the kernel's `VmHWM`) as the
/// last line on stderr: how the memory tests read a child's peak, which its parent cannot see
/// once it has exited.
pub fn report_peak_rss() {
    if std::env::var_os(PEAK_RSS_ENV).is_none() {
        return;
    }
    let kb = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        });
    match kb {
        Some(kb) => eprintln!("ajs-peak-rss-bytes={}", kb * 1024),
        None => eprintln!("ajs-peak-rss-bytes=unknown"),
    }
}

/// Largest configuration file read (`--config`).
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// It could not be opened or read (the message names the file).
    Unreadable(String),
    /// It is larger than its cap (the message names the file and the limit).
    TooLarge(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Unreadable(m) | ReadError::TooLarge(m) => f.write_str(m),
        }
    }
}

impl From<ReadError> for String {
    fn from(e: ReadError) -> String {
        e.to_string()
    }
}

/// Reads a file of at most `max` bytes, refusing a larger one without reading it all.
/// `limit` names the limit and how to raise it, for the message.
///
/// # Errors
/// The file cannot be read, or is larger than `max`: the message names the file and the limit.
pub fn read_capped(path: &str, max: usize, limit: &str) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let unreadable = |e: std::io::Error| ReadError::Unreadable(format!("cannot read {path}: {e}"));
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let too_large =
        || ReadError::TooLarge(format!("{path} is over the {max}-byte limit ({limit})"));
    // a regular file says its size: a larger one is refused unread, a smaller one read into
    // one allocation of its size
    let known = file
        .metadata()
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len());
    if known.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(known.map_or(0, |n| n as usize + 1));
    file.take(max as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(unreadable)?;
    if buf.len() > max {
        return Err(too_large());
    }
    Ok(buf)
}

/// Reads an artifact or span sidecar file: at most [`ajs::MAX_ARTIFACT_BYTES`].
///
/// # Errors
/// As [`read_capped`].
pub fn read_artifact(path: &str) -> Result<Vec<u8>, ReadError> {
    read_capped(
        path,
        ajs::MAX_ARTIFACT_BYTES,
        "MAX_ARTIFACT_BYTES, the largest artifact any loader accepts; is it an artifact `ajs compile` wrote?",
    )
}

/// A file a run needs, read or refused: unreadable is bad usage (the command line names a file
/// that is not there), over its cap is input refused (`tooLarge`).
pub enum Input {
    /// The bytes.
    Read(Vec<u8>),
    /// Already reported: end with this code.
    Ended(ExitCode),
}

impl Input {
    /// Sorts a read's result into bytes, a usage error or a printed refusal.
    ///
    /// # Errors
    /// [`Usage`] when the file cannot be read.
    pub fn from_read(r: Result<Vec<u8>, ReadError>) -> Result<Input, Usage> {
        match r {
            Ok(b) => Ok(Input::Read(b)),
            Err(ReadError::Unreadable(m)) => Err(Usage(m)),
            Err(ReadError::TooLarge(m)) => Ok(Input::Ended(refuse("tooLarge", m))),
        }
    }
}

/// Parses a limit that must be at least 1 (a limit of 0 is refused, never "unlimited").
///
/// # Errors
/// Not a whole number, or 0.
pub fn at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(v: &str) -> Result<T, String> {
    match v.trim().parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        Ok(_) => Err("must be at least 1 (a limit of 0 is refused: there is no unlimited)".into()),
        Err(_) => Err("expects a whole number of at least 1".into()),
    }
}

/// Parses a JSON value.
///
/// # Errors
/// The parser's message.
pub fn json_value(v: &str) -> Result<Value, String> {
    serde_json::from_str(v).map_err(|e| format!("not valid JSON: {e}"))
}

/// Parses a fuel budget (any number; [`ajs::Options::validate`] then checks its range).
///
/// # Errors
/// Not a number.
pub fn fuel(v: &str) -> Result<f64, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("expects a number of fuel, not '{v}'"))
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `exec`: load a compiled artifact through the verifier and run it.
#[derive(Args, Debug)]
#[command(
    about = "Run a compiled artifact (`ajs compile`) and print its outcome as one JSON line",
    long_about = "Loads a compiled artifact (`ajs compile`) through the verifier and runs it with \
the arguments; prints the outcome as one JSON line, the body `POST /run` answers with:
{\"result\": …, \"fuelUsed\": …, \"error\": {\"message\", \"kind\", \"line\"?, \"column\"?}, \"log\"?: […]},
or {\"error\": {\"kind\", \"message\"}} when the artifact is refused before it runs.

Exit codes: 0 the run succeeded, 1 the run failed (guest error, fuel, timeout…), 2 bad usage,
3 input refused (artifact refused, an atom this runner does not provide, arguments refused)."
)]
pub struct ExecArgs {
    /// The artifact file `ajs compile` wrote.
    #[arg(value_name = "ARTIFACT")]
    pub artifact: String,
    /// The arguments: a JSON object keyed by parameter name.
    #[arg(long, value_name = "JSON", value_parser = json_value)]
    pub args: Option<Value>,
    /// The fuel budget (default: the configuration's `limits.defaultFuel`).
    #[arg(long, value_name = "N", value_parser = fuel, allow_negative_numbers = true)]
    pub fuel: Option<f64>,
    /// The wall-clock limit in milliseconds (default: `limits.defaultTimeoutMs`).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub timeout_ms: Option<u64>,
    /// Most calls per atom, a JSON object: '{"httpFetch": 5}'.
    #[arg(long, value_name = "JSON")]
    pub quotas: Option<String>,
    /// Hosts `httpFetch` may reach, comma-separated (api.example.com,*.example.com).
    #[arg(long, value_name = "HOSTS")]
    pub fetch_domains: Option<String>,
    /// Methods `httpFetch` may use besides GET and HEAD, comma-separated (POST,PUT).
    #[arg(long, value_name = "METHODS")]
    pub fetch_methods: Option<String>,
    /// The span sidecar `compile --strip` wrote, for error positions.
    #[arg(long, value_name = "PATH")]
    pub spans: Option<String>,
    /// A serve configuration (fetch policy, model, quotas, limits); JSON, or TOML for *.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<String>,
    /// Include the guest's console lines in the outcome: "log": [{"level", "message"}].
    #[arg(long)]
    pub log: bool,
}

/// `exec ARTIFACT …`: prints one JSON line; the exit code as in [`crate::exit`].
///
/// # Errors
/// [`Usage`] on bad usage (exit code 2).
pub fn exec(a: &ExecArgs) -> Result<ExitCode, Usage> {
    let mut config = match &a.config {
        Some(path) => ServerConfig::load(path).map_err(Usage)?,
        None => ServerConfig::default(),
    };
    if let Some(q) = &a.quotas {
        config.quotas = serde_json::from_str::<HashMap<String, u32>>(q).map_err(|e| {
            Usage(format!(
                "--quotas must be a JSON object of atom name to count: {e}"
            ))
        })?;
    }
    if let Some(d) = &a.fetch_domains {
        config.fetch.domains = Some(list(d));
    }
    if let Some(m) = &a.fetch_methods {
        config.fetch.methods = list(m);
    }
    let mut options = config.base_options();
    if let Some(f) = a.fuel {
        options.fuel = f;
    }
    if let Some(t) = a.timeout_ms {
        options.timeout_ms = t;
    }
    options.validate().map_err(|e| Usage(e.to_string()))?;
    let bytes = match Input::from_read(read_artifact(&a.artifact))? {
        Input::Read(b) => b,
        Input::Ended(code) => return Ok(code),
    };
    let spans = match &a.spans {
        Some(path) => match Input::from_read(read_artifact(path))? {
            Input::Read(b) => Some(b),
            Input::Ended(code) => return Ok(code),
        },
        None => None,
    };
    let program = match ajs::load_artifact(&bytes, spans.as_deref()) {
        Ok(p) => p,
        Err(e) => return Ok(refuse("artifactRefused", format!("Artifact refused: {e}"))),
    };
    if let Err(m) = config.admit_program(&program, &options) {
        return Ok(refuse("atomRefused", m));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("cannot start the async runtime: {e}")))?;
    let runner = config.runner(0);
    let run_args = a
        .args
        .clone()
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let out = rt.block_on(runner.run_program(&program, &run_args, &options));
    Ok(print_json(&outcome_json(&out, a.log), outcome_code(&out)))
}

/// Installs the `tracing` subscriber writing one line per event to stderr.
pub fn init_logging(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Resolves when the process receives SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// `serve`: the `POST /run` endpoint.
#[derive(Args, Debug)]
#[command(
    about = "Serve POST /run (docs/deployment.md) until SIGINT or SIGTERM",
    long_about = "Serves POST /run (see docs/deployment.md) until SIGINT or SIGTERM, then \
finishes the requests in flight. Exits 0 after a clean shutdown, 1 when the address cannot be \
bound, 2 on bad usage (a configuration that cannot be read or is out of range)."
)]
pub struct ServeArgs {
    /// The configuration; JSON, or TOML when the name ends in .toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<String>,
    /// The address to listen on (overrides the configuration's `listen`).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
}

/// `serve [--config FILE] [--listen ADDR]`.
///
/// # Errors
/// [`Usage`] on bad usage (exit code 2).
pub fn serve(prog: &str, a: &ServeArgs) -> Result<ExitCode, Usage> {
    let mut config = match &a.config {
        Some(path) => ServerConfig::load(path).map_err(Usage)?,
        None => ServerConfig::default(),
    };
    if let Some(listen) = &a.listen {
        config.listen = listen.clone();
    }
    init_logging(config.log_format);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("cannot start the async runtime: {e}")))?;
    let code = rt.block_on(async {
        let server = match Server::bind(config).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{prog} serve: {e}");
                return ExitCode::from(RUN_FAILED);
            }
        };
        tracing::info!(addr = %server.local_addr(), "listening; POST /run");
        server.run(shutdown_signal()).await;
        ExitCode::SUCCESS
    });
    Ok(code)
}
