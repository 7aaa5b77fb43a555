//! The server's configuration file (JSON, or TOML when the file name ends in `.toml`).
//!
//! Everything a run may reach is declared here, not in the request: the fetch policy, the model
//! endpoint (and the *name* of the environment variable holding its key), quotas and limits.

use std::collections::HashMap;
use std::time::Duration;

use ajs::{Capabilities, FetchPolicy, LlmClient, LlmConfig, Options, Runner};
use serde::Deserialize;

pub use crate::server::cors::CorsConfig;

/// `serve`'s run timeout when neither the request nor `limits.defaultTimeoutMs` names one.
pub const SERVE_DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// The whole configuration. Every field has a default; unknown fields are refused.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on (default `127.0.0.1:8080`; port 0 picks a free one).
    pub listen: String,
    /// Whether `POST /run` accepts `source` as well as `artifact` (default false; needs a
    /// build with the compiler: `ajs serve`, or `ajs-runner` built with the `source` feature).
    pub accept_source: bool,
    /// The `httpFetch` policy. Without `domains`, every fetch is refused.
    pub fetch: FetchConfig,
    /// The model behind `llmPredict`; without it `llmPredict` fails (catchably) in the guest.
    pub model: Option<ModelConfig>,
    /// Most calls per atom per run, e.g. `{ "httpFetch": 5, "llmPredict": 2 }`.
    pub quotas: HashMap<String, u32>,
    /// Atoms refused outright: a program calling one is refused (400) before it runs. To have
    /// such calls decided by a person instead, list them in `[approvals]`.
    pub approval_required: Vec<String>,
    /// Request and run limits.
    pub limits: Limits,
    /// `text` (default: one `key=value` line per request) or `json` (one JSON object a line).
    pub log_format: LogFormat,
    /// Web origins whose pages may call the server from a browser (default none: a request
    /// carrying an `Origin` header is refused with 403).
    pub cors: CorsConfig,
    /// Approvals over HTTP (`[approvals]`): gated atoms, the run store, the key and token.
    pub approvals: Option<crate::runs::ApprovalsConfig>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8080".into(),
            accept_source: false,
            fetch: FetchConfig::default(),
            model: None,
            quotas: HashMap::new(),
            approval_required: Vec::new(),
            limits: Limits::default(),
            log_format: LogFormat::Text,
            cors: CorsConfig::default(),
            approvals: None,
        }
    }
}

/// Log line format.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `key=value` text.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The `httpFetch` admission policy.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FetchConfig {
    /// Allowed hosts and ports (decision 35): `api.example.com` (the scheme's default port
    /// only), `api.example.com:8443`, `api.example.com:*`, `*.example.com`, `10.0.0.5:8080`,
    /// `[::1]:*`; setting it turns on the built-in client. An entry that could never match is
    /// refused when the configuration is loaded.
    pub domains: Option<Vec<String>>,
    /// Methods allowed besides GET and HEAD (e.g. `["POST"]`).
    pub methods: Vec<String>,
    /// Request headers allowed besides the built-in list.
    pub headers: Vec<String>,
    /// Address ranges (`10.0.0.0/8`, `127.0.0.1`) an allowed name may resolve to although they
    /// are loopback, private, link-local or unspecified (default none: such a name is refused).
    pub allow_addresses: Vec<String>,
}

/// An OpenAI-compatible chat-completions endpoint.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelConfig {
    /// API base, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Name of the environment variable holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Limit on one call (default 120 000 ms).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// Request and run limits.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body in bytes (default 1 MiB); larger ones get 413.
    pub max_request_bytes: usize,
    /// Runs at once (default 16); a request beyond that gets 503 at once (no queue). Each run
    /// holds its slot from the first byte of its request body to the last of its answer, so the
    /// server's memory is bounded by this times a run's (see docs/deployment.md).
    pub max_concurrent_runs: usize,
    /// Threads running guest code (default: the machine's cores, at most `maxConcurrentRuns`).
    /// They are not the threads serving connections, so a run burning its whole budget never
    /// delays `GET /healthz` or another request's I/O.
    pub run_threads: Option<usize>,
    /// Longest wait for a request's body once its headers are in (default 30 000 ms); a slower
    /// client gets 408 and frees its run slot.
    pub request_read_timeout_ms: u64,
    /// Fuel when the request names none (default 1000).
    pub default_fuel: f64,
    /// Most fuel a request may ask for (default 100 000); more is a 400.
    pub max_fuel: f64,
    /// Timeout when the request names none (default [`SERVE_DEFAULT_TIMEOUT_MS`], 30 000 ms,
    /// for `serve`; `ajs run` and `exec` use the library's [`ajs::DEFAULT_TIMEOUT_MS`], 4
    /// minutes, unless this is set).
    pub default_timeout_ms: Option<u64>,
    /// Longest timeout a request may ask for (default 120 000 ms); longer is a 400.
    pub max_timeout_ms: u64,
    /// Live-heap ceiling per run (default 64 MiB).
    pub max_heap_bytes: usize,
    /// Cap on the arguments' JSON size (default 1 MiB).
    pub args_max_bytes: usize,
    /// Source size cap when source is accepted (default 64 KiB).
    pub max_source_bytes: usize,
    /// On SIGINT/SIGTERM, how long in-flight requests may take to finish (default 30 000 ms).
    pub shutdown_grace_ms: u64,
    /// Most items one `parallel(...)` may hold (default 1000).
    pub max_parallel_items: usize,
    /// Most host calls of one `parallel(...)` in flight at once (default 16).
    pub max_concurrent_calls: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: 1024 * 1024,
            max_concurrent_runs: 16,
            run_threads: None,
            request_read_timeout_ms: 30_000,
            default_fuel: ajs::DEFAULT_FUEL,
            max_fuel: 100_000.0,
            default_timeout_ms: None,
            max_timeout_ms: 120_000,
            max_heap_bytes: 64 * 1024 * 1024,
            args_max_bytes: 1024 * 1024,
            max_source_bytes: 64 * 1024,
            shutdown_grace_ms: 30_000,
            max_parallel_items: ajs::DEFAULT_MAX_PARALLEL_ITEMS,
            max_concurrent_calls: ajs::DEFAULT_MAX_CONCURRENT_CALLS,
        }
    }
}

impl ServerConfig {
    /// Parses a configuration: TOML when `toml` is true, JSON otherwise.
    ///
    /// # Errors
    /// The parser's message (unknown fields included).
    pub fn parse(text: &str, toml: bool) -> Result<ServerConfig, String> {
        let c: ServerConfig = if toml {
            toml::from_str(text).map_err(|e| e.to_string())?
        } else {
            serde_json::from_str(text).map_err(|e| e.to_string())?
        };
        c.check()?;
        Ok(c)
    }

    /// Reads and parses a configuration file (TOML if its name ends in `.toml`).
    ///
    /// # Errors
    /// Why it could not be read or parsed, naming the file.
    pub fn load(path: &str) -> Result<ServerConfig, String> {
        let bytes = crate::cli::read_capped(
            path,
            crate::cli::MAX_CONFIG_BYTES,
            "MAX_CONFIG_BYTES: a configuration is a few kilobytes; is this the right file?",
        )
        .map_err(String::from)?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{path} is not UTF-8"))?;
        ServerConfig::parse(&text, path.ends_with(".toml")).map_err(|e| format!("{path}: {e}"))
    }

    /// Checks the values against their bounds.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn check(&self) -> Result<(), String> {
        let l = &self.limits;
        if l.max_concurrent_runs == 0 {
            return Err("limits.maxConcurrentRuns must be at least 1".into());
        }
        if l.run_threads == Some(0) {
            return Err("limits.runThreads must be at least 1 (or absent: one per core)".into());
        }
        if l.request_read_timeout_ms == 0 {
            return Err("limits.requestReadTimeoutMs must be at least 1".into());
        }
        if l.max_concurrent_calls == 0 {
            return Err("limits.maxConcurrentCalls must be at least 1".into());
        }
        if !(l.default_fuel.is_finite() && l.default_fuel >= 0.0 && l.default_fuel <= l.max_fuel) {
            return Err("limits.defaultFuel must be between 0 and limits.maxFuel".into());
        }
        if l.default_timeout_ms
            .is_some_and(|t| t == 0 || t > l.max_timeout_ms)
        {
            return Err("limits.defaultTimeoutMs must be between 1 and limits.maxTimeoutMs".into());
        }
        if l.max_source_bytes == 0 {
            // the library reads 0 as "no cap": a configuration never means that by accident
            return Err(
                "limits.maxSourceBytes must be at least 1 (a limit of 0 is refused: there is no unlimited)"
                    .into(),
            );
        }
        self.cors.check()?;
        if let Err((field, message)) = self.fetch_policy().validate() {
            return Err(format!("fetch.{field}: {message}"));
        }
        if l.max_heap_bytes < ajs::MIN_HEAP_BYTES {
            return Err(format!(
                "limits.maxHeapBytes must be at least {}",
                ajs::MIN_HEAP_BYTES
            ));
        }
        if let Some(a) = &self.approvals {
            a.check()?;
        }
        if self.accept_source && !cfg!(feature = "source") {
            return Err(
                "acceptSource is true but this build has no compiler (use `ajs serve`)".into(),
            );
        }
        Ok(())
    }

    /// The options a `serve` run starts from: [`ServerConfig::command_options`] with `serve`'s
    /// own default timeout ([`SERVE_DEFAULT_TIMEOUT_MS`] unless `limits.defaultTimeoutMs`).
    pub fn base_options(&self) -> Options {
        Options {
            timeout_ms: self
                .limits
                .default_timeout_ms
                .unwrap_or(SERVE_DEFAULT_TIMEOUT_MS),
            ..self.command_options()
        }
    }

    /// The options `ajs run` and `exec` start from: capabilities (built-in fetch client when
    /// domains are set, the model client when configured), the fetch policy and the limits, with
    /// the library's run timeout ([`ajs::DEFAULT_TIMEOUT_MS`]) unless `limits.defaultTimeoutMs`.
    pub fn command_options(&self) -> Options {
        let mut caps = Capabilities::default();
        if let Some(m) = &self.model {
            let mut cfg = LlmConfig::new(&m.base_url, &m.model, m.api_key_env.as_deref());
            if let Some(ms) = m.timeout_ms {
                cfg.timeout = Duration::from_millis(ms);
            }
            caps = caps.with_llm_client(LlmClient::new(cfg));
        }
        Options {
            fuel: self.limits.default_fuel,
            timeout_ms: self
                .limits
                .default_timeout_ms
                .unwrap_or(ajs::DEFAULT_TIMEOUT_MS),
            max_source_bytes: self.limits.max_source_bytes,
            args_max_bytes: self.limits.args_max_bytes,
            fetch_policy: Some(self.fetch_policy()),
            capabilities: caps,
            max_parallel_items: self.limits.max_parallel_items,
            max_concurrent_calls: self.limits.max_concurrent_calls,
            ..Options::default()
        }
    }

    /// The `httpFetch` policy of `fetch`.
    pub fn fetch_policy(&self) -> FetchPolicy {
        FetchPolicy {
            domains: self.fetch.domains.clone(),
            methods: self.fetch.methods.clone(),
            headers: self.fetch.headers.clone(),
            allow_addresses: self.fetch.allow_addresses.clone(),
        }
    }

    /// How many threads run guest code: `limits.runThreads`, or one per core, never more than
    /// `limits.maxConcurrentRuns`.
    pub fn run_threads(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        self.limits
            .run_threads
            .unwrap_or(cores)
            .clamp(1, self.limits.max_concurrent_runs.max(1))
    }

    /// A runner for one request: this configuration's quotas and heap ceiling, the incoming
    /// depth, and no state shared with any other run.
    pub fn runner(&self, depth: u32) -> Runner {
        Runner {
            quotas: self.quotas.clone(),
            max_heap_bytes: self.limits.max_heap_bytes,
            depth,
            ledger: None,
        }
    }

    /// Refuses, before it runs, a program calling an atom this runner does not provide or one
    /// that needs approval.
    ///
    /// # Errors
    /// The message naming the atom.
    pub fn admit_program(&self, program: &ajs::Program, options: &Options) -> Result<(), String> {
        Runner::check_atoms(program, options)?;
        if let Some(a) = program
            .atoms
            .iter()
            .find(|a| self.approval_required.contains(a))
        {
            return Err(format!(
                "This program calls the atom '{a}', which this server refuses (approvalRequired); to have its calls decided by a person, list it in [approvals] atoms"
            ));
        }
        Ok(())
    }
}
