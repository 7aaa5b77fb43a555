//! The `exec` and `serve` commands, shared by `ajs` and `ajs-run`.

use std::collections::HashMap;
use std::process::ExitCode;

use serde_json::Value;

use crate::config::{LogFormat, ServerConfig};
use crate::output::outcome_json;
use crate::server::Server;

/// Help for `exec`.
pub const EXEC_USAGE: &str =
    "  exec ARTIFACT [--args JSON] [--fuel N] [--timeout-ms N] [--quotas JSON]
       [--fetch-domains a,b] [--fetch-methods POST,…] [--spans PATH] [--config FILE] [--log]
      Loads a compiled artifact (`ajs compile`) through the verifier and runs it with the
      arguments (a JSON object keyed by parameter name); prints the outcome as one JSON line:
      {\"result\": …, \"fuelUsed\": …, \"error\": {\"message\", \"kind\", \"line\"?, \"column\"?},
      \"log\"?: […]}. --spans takes the sidecar `compile --strip` wrote, for error positions;
      --config takes a serve configuration (fetch policy, model, quotas, limits). Exits 0 when
      the program ran (even if it failed), 1 when the artifact is refused, 2 on bad usage.
";

/// Help for `serve`.
pub const SERVE_USAGE: &str = "  serve [--config FILE] [--listen ADDR]
      Serves POST /run (see docs/deployment.md) until SIGINT or SIGTERM, then finishes the
      requests in flight. FILE is JSON, or TOML when it ends in .toml.
";

/// Bad usage: the message.
pub struct Usage(pub String);

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

/// Reads a file of at most `max` bytes, refusing a larger one without reading it all.
/// `limit` names the limit and how to raise it, for the message.
///
/// # Errors
/// The file cannot be read, or is larger than `max`: the message names the file and the limit.
pub fn read_capped(path: &str, max: usize, limit: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let too_large = || format!("{path} is over the {max}-byte limit ({limit})");
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
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    if buf.len() > max {
        return Err(too_large());
    }
    Ok(buf)
}

/// Reads an artifact or span sidecar file: at most [`ajs::MAX_ARTIFACT_BYTES`].
///
/// # Errors
/// As [`read_capped`].
pub fn read_artifact(path: &str) -> Result<Vec<u8>, String> {
    read_capped(
        path,
        ajs::MAX_ARTIFACT_BYTES,
        "MAX_ARTIFACT_BYTES, the largest artifact any loader accepts; is it an artifact `ajs compile` wrote?",
    )
}

/// Command-line arguments split into positional arguments, `--name value` options and flags.
pub struct Parsed {
    /// Positional arguments, in order.
    pub positional: Vec<String>,
    /// `--name value` or `--name=value` options, in order.
    pub options: Vec<(String, String)>,
    /// Flags (options without a value) that were given.
    pub flags: Vec<String>,
}

/// Splits `args`: `valued` names take a value (`--name value` or `--name=value`), `flags` do not;
/// `--` ends the options; any other `--name` is an error.
///
/// # Errors
/// [`Usage`] naming an unknown option or one missing its value.
pub fn parse(args: &[String], valued: &[&str], flags: &[&str]) -> Result<Parsed, Usage> {
    let mut p = Parsed {
        positional: Vec::new(),
        options: Vec::new(),
        flags: Vec::new(),
    };
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            p.positional.extend(args[i + 1..].iter().cloned());
            break;
        }
        if a.starts_with("--") && a.len() > 2 {
            let (name, inline) = match a.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (a.clone(), None),
            };
            if flags.contains(&name.as_str()) && inline.is_none() {
                p.flags.push(name);
            } else if valued.contains(&name.as_str()) {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        args.get(i)
                            .cloned()
                            .ok_or_else(|| Usage(format!("option '{name}' needs a value")))?
                    }
                };
                p.options.push((name, value));
            } else {
                return Err(Usage(format!("unknown option '{name}'")));
            }
        } else {
            p.positional.push(a.clone());
        }
        i += 1;
    }
    Ok(p)
}

fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, Usage> {
    v.trim()
        .parse()
        .map_err(|_| Usage(format!("{name} expects a non-negative number, not '{v}'")))
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `exec ARTIFACT …`.
///
/// # Errors
/// [`Usage`] on bad usage (exit code 2).
pub fn exec(prog: &str, args: &[String]) -> Result<ExitCode, Usage> {
    let p = parse(
        args,
        &[
            "--args",
            "--fuel",
            "--timeout-ms",
            "--quotas",
            "--fetch-domains",
            "--fetch-methods",
            "--spans",
            "--config",
        ],
        &["--log"],
    )?;
    let file = match p.positional.as_slice() {
        [f] => f.clone(),
        [] => return Err(Usage("exec needs an ARTIFACT file".into())),
        more => {
            return Err(Usage(format!(
                "exec takes one ARTIFACT argument, got {}",
                more.len()
            )))
        }
    };
    let mut config = ServerConfig::default();
    if let Some((_, path)) = p.options.iter().find(|(n, _)| n == "--config") {
        config = ServerConfig::load(path).map_err(Usage)?;
    }
    let mut run_args = Value::Object(serde_json::Map::new());
    let mut fuel = None;
    let mut timeout = None;
    let mut spans_path = None;
    for (name, value) in &p.options {
        match name.as_str() {
            "--args" => {
                run_args = serde_json::from_str(value)
                    .map_err(|e| Usage(format!("--args is not valid JSON: {e}")))?;
            }
            "--fuel" => fuel = Some(num::<f64>(name, value)?),
            "--timeout-ms" => timeout = Some(num::<u64>(name, value)?),
            "--quotas" => {
                config.quotas =
                    serde_json::from_str::<HashMap<String, u32>>(value).map_err(|e| {
                        Usage(format!(
                            "--quotas must be a JSON object of atom name to count: {e}"
                        ))
                    })?;
            }
            "--fetch-domains" => config.fetch.domains = Some(list(value)),
            "--fetch-methods" => config.fetch.methods = list(value),
            "--spans" => spans_path = Some(value.clone()),
            _ => {}
        }
    }
    let mut options = config.command_options();
    if let Some(f) = fuel {
        options.fuel = f;
    }
    if let Some(t) = timeout {
        options.timeout_ms = t;
    }
    options.validate().map_err(|e| Usage(e.to_string()))?;
    let read = |path: &str| {
        read_artifact(path).map_err(|e| {
            eprintln!("{prog} exec: {e}");
        })
    };
    let Ok(bytes) = read(&file) else {
        return Ok(ExitCode::from(1));
    };
    let spans = match &spans_path {
        Some(path) => match read(path) {
            Ok(s) => Some(s),
            Err(()) => return Ok(ExitCode::from(1)),
        },
        None => None,
    };
    let program = match ajs::load_artifact(&bytes, spans.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{prog} exec: {file}: artifact refused: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    if let Err(m) = config.admit_program(&program, &options) {
        eprintln!("{prog} exec: {file}: {m}");
        return Ok(ExitCode::from(1));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("cannot start the async runtime: {e}")))?;
    let runner = config.runner(0);
    let out = rt.block_on(runner.run_program(&program, &run_args, &options));
    println!(
        "{}",
        outcome_json(&out, p.flags.iter().any(|f| f == "--log"))
    );
    Ok(ExitCode::SUCCESS)
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

/// `serve [--config FILE] [--listen ADDR]`.
///
/// # Errors
/// [`Usage`] on bad usage (exit code 2).
pub fn serve(prog: &str, args: &[String]) -> Result<ExitCode, Usage> {
    let p = parse(args, &["--config", "--listen"], &[])?;
    if let Some(extra) = p.positional.first() {
        return Err(Usage(format!(
            "serve takes no positional argument, got '{extra}'"
        )));
    }
    let mut config = ServerConfig::default();
    for (name, value) in &p.options {
        if name == "--config" {
            config = ServerConfig::load(value).map_err(Usage)?;
        }
    }
    for (name, value) in &p.options {
        if name == "--listen" {
            config.listen = value.clone();
        }
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
                return ExitCode::from(1);
            }
        };
        tracing::info!(addr = %server.local_addr(), "listening; POST /run");
        server.run(shutdown_signal()).await;
        ExitCode::SUCCESS
    });
    Ok(code)
}
