//! The run endpoint: `POST /run` over hyper 1, stateless between requests.
//!
//! Request (JSON): `{ "artifact": base64 | "source": text, "spans"?: base64, "args"?: {…},
//! "options"?: { "fuel"?, "timeoutMs"? }, "log"?: bool }`. Answers:
//! - `200` with the outcome (see [`crate::output::outcome_json`]) whenever the program ran or its
//!   arguments were refused by its signature;
//! - `400` for a request that cannot run (malformed JSON or base64, an artifact the verifier
//!   refuses, an atom the server does not provide, options out of range, source not accepted),
//!   `404`, `405`, `413` (body over `limits.maxRequestBytes`), `503` (already
//!   `limits.maxConcurrentRuns` runs in flight), each with `{ "error": { "kind", "message" } }`.
//!
//! The incoming `X-Agent-Depth` becomes the run's depth; the guest's own requests carry
//! depth + 1 and are refused from depth 10 on.
//!
//! Guest code (loading, compiling, running, rendering the outcome) runs on a runtime of its own,
//! `limits.runThreads` threads, never on the threads that accept connections and read requests:
//! however hard every run slot computes, `GET /healthz` and request I/O keep their threads.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ajs::{Options, VerifiedProgram};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::config::ServerConfig;
use crate::output::outcome_json;

/// The header carrying the agent depth.
pub const DEPTH_HEADER: &str = "x-agent-depth";

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    state: Arc<State>,
}

struct State {
    config: ServerConfig,
    options: Options,
    runs: Arc<Semaphore>,
    pool: RunPool,
}

/// The runtime that runs guest code, apart from the one serving connections.
struct RunPool(Option<tokio::runtime::Runtime>);

impl RunPool {
    fn new(threads: usize) -> Result<RunPool, String> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("ajs-run")
            .enable_all()
            .build()
            .map(|rt| RunPool(Some(rt)))
            .map_err(|e| format!("cannot start the run threads: {e}"))
    }

    fn spawn<F>(&self, f: F) -> Option<AbortOnDrop<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.as_ref().map(|rt| AbortOnDrop(rt.spawn(f)))
    }
}

impl Drop for RunPool {
    // dropped wherever the last request ends, possibly inside the serving runtime, where a
    // blocking shutdown would panic
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A run on the pool, cancelled when its request goes away (the client hung up, shutdown).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunRequest {
    artifact: Option<String>,
    spans: Option<String>,
    source: Option<String>,
    #[serde(default)]
    args: Value,
    #[serde(default)]
    options: RunOptions,
    #[serde(default)]
    log: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunOptions {
    fuel: Option<f64>,
    timeout_ms: Option<u64>,
}

/// What the request log line records besides status and duration.
#[derive(Default)]
struct Note {
    fuel: Option<f64>,
    error_kind: Option<&'static str>,
    depth: u32,
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, body: &Value) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn refuse(status: StatusCode, kind: &'static str, message: String, note: &mut Note) -> Reply {
    note.error_kind = Some(kind);
    reply(
        status,
        &json!({ "error": { "kind": kind, "message": message } }),
    )
}

impl Server {
    /// Binds `config.listen`.
    ///
    /// # Errors
    /// The configuration is invalid, or the address cannot be bound.
    pub async fn bind(config: ServerConfig) -> Result<Server, String> {
        config.check()?;
        let listener = TcpListener::bind(&config.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let options = config.base_options();
        let runs = Arc::new(Semaphore::new(config.limits.max_concurrent_runs));
        let pool = RunPool::new(config.run_threads())?;
        Ok(Server {
            listener,
            state: Arc::new(State {
                config,
                options,
                runs,
                pool,
            }),
        })
    }

    /// The address actually bound (useful with port 0).
    ///
    /// # Panics
    /// Never in practice: a bound TCP listener has a local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("bound listener")
    }

    /// Serves until `shutdown` completes, then stops accepting (new connections are refused),
    /// lets in-flight requests finish within `limits.shutdownGraceMs` and returns.
    pub async fn run<F: Future<Output = ()>>(self, shutdown: F) {
        let graceful = GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                r = self.listener.accept() => {
                    let stream = match r {
                        Ok((stream, _)) => stream,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    let state = self.state.clone();
                    let svc = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(state, req).await) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(30))
                        .serve_connection(TokioIo::new(stream), svc);
                    let conn = graceful.watch(conn);
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                }
                () = &mut shutdown => break,
            }
        }
        drop(self.listener);
        let grace = Duration::from_millis(self.state.config.limits.shutdown_grace_ms);
        tracing::info!(
            grace_ms = grace.as_millis() as u64,
            "shutting down: finishing in-flight requests"
        );
        tokio::select! {
            () = graceful.shutdown() => tracing::info!("shut down"),
            () = tokio::time::sleep(grace) => tracing::warn!("shutdown grace period over; dropping the requests still running"),
        }
    }
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Reply {
    let start = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let mut note = Note::default();
    let resp = route(state, req, &mut note).await;
    let status = resp.status().as_u16();
    let duration_ms = (start.elapsed().as_secs_f64() * 1e6).round() / 1000.0;
    let fuel = note.fuel.unwrap_or(0.0);
    let error_kind = note.error_kind.unwrap_or("");
    tracing::info!(
        method = %method,
        path = %path,
        status,
        fuel,
        duration_ms,
        depth = note.depth,
        error_kind,
        "request"
    );
    resp
}

async fn route(state: Arc<State>, req: Request<Incoming>, note: &mut Note) -> Reply {
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/run") => run(state, req, note).await,
        (&Method::POST, "/inspect") => {
            let (status, body) =
                crate::manifest_routes::inspect(&state.config, &state.options, req).await;
            reply(status, &body)
        }
        (&Method::GET, "/healthz") => reply(StatusCode::OK, &json!({ "ok": true })),
        (_, "/run") => refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "methodNotAllowed",
            "Use POST /run".into(),
            note,
        ),
        (_, p) => refuse(
            StatusCode::NOT_FOUND,
            "notFound",
            format!("No endpoint {p}: use POST /run"),
            note,
        ),
    }
}

fn bad(message: impl Into<String>, note: &mut Note) -> Reply {
    refuse(StatusCode::BAD_REQUEST, "badRequest", message.into(), note)
}

async fn run(state: Arc<State>, req: Request<Incoming>, note: &mut Note) -> Reply {
    let limits = &state.config.limits;
    let depth = match req.headers().get(DEPTH_HEADER) {
        None => 0,
        Some(v) => match v.to_str().ok().and_then(|s| s.trim().parse::<u32>().ok()) {
            Some(d) => d,
            None => return bad("X-Agent-Depth must be a non-negative integer", note),
        },
    };
    note.depth = depth;
    let too_large = |note: &mut Note| {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "tooLarge",
            format!(
                "Request body over the {}-byte limit (limits.maxRequestBytes); send a smaller artifact or smaller args, or raise limits.maxRequestBytes",
                limits.max_request_bytes
            ),
            note,
        )
    };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_request_bytes as u64) {
        return too_large(note);
    }
    // the slot is taken before the body is read: bodies in memory are bounded by the slots
    let Ok(permit) = state.runs.clone().try_acquire_owned() else {
        let mut r = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "Server busy: {} runs in progress (limits.maxConcurrentRuns); retry later",
                limits.max_concurrent_runs
            ),
            note,
        );
        r.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    };
    let read = Limited::new(req.into_body(), limits.max_request_bytes).collect();
    let wait = Duration::from_millis(limits.request_read_timeout_ms);
    let body = match tokio::time::timeout(wait, read).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return too_large(note),
        Ok(Err(e)) => return bad(format!("Cannot read the request body: {e}"), note),
        Err(_) => {
            return refuse(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!(
                    "The request body did not arrive within {} ms (limits.requestReadTimeoutMs); send it faster or raise the limit",
                    limits.request_read_timeout_ms
                ),
                note,
            )
        }
    };
    let request: RunRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad(format!("Request is not a valid run request: {e}"), note),
    };
    drop(body);
    let mut options = state.options.clone();
    if let Some(f) = request.options.fuel {
        if !(f.is_finite() && f >= 0.0 && f <= limits.max_fuel) {
            return bad(
                format!(
                    "options.fuel must be between 0 and {} (limits.maxFuel), got {f}",
                    limits.max_fuel
                ),
                note,
            );
        }
        options.fuel = f;
    }
    if let Some(t) = request.options.timeout_ms {
        if t == 0 || t > limits.max_timeout_ms {
            return bad(
                format!(
                    "options.timeoutMs must be between 1 and {} (limits.maxTimeoutMs), got {t}",
                    limits.max_timeout_ms
                ),
                note,
            );
        }
        options.timeout_ms = t;
    }
    let Some(mut task) = state
        .pool
        .spawn(execute(state.clone(), request, options, depth, permit))
    else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "Server shutting down".into(),
            note,
        );
    };
    match (&mut task.0).await {
        Ok((resp, fuel, kind)) => {
            note.fuel = fuel;
            note.error_kind = kind;
            resp
        }
        Err(e) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("The run ended abnormally: {e}"),
            note,
        ),
    }
}

/// Everything a request does with guest code, on the run pool: load or compile, admit, run,
/// render. The slot is released when this ends, not when the client stops waiting.
async fn execute(
    state: Arc<State>,
    request: RunRequest,
    options: Options,
    depth: u32,
    permit: OwnedSemaphorePermit,
) -> (Reply, Option<f64>, Option<&'static str>) {
    let _permit = permit;
    let mut note = Note::default();
    let program = match load(&state, &request, &options) {
        Ok(p) => p,
        Err((kind, m)) => {
            let r = refuse(StatusCode::BAD_REQUEST, kind, m, &mut note);
            return (r, None, note.error_kind);
        }
    };
    if let Err(m) = state.config.admit_program(&program, &options) {
        let r = refuse(StatusCode::BAD_REQUEST, "atomRefused", m, &mut note);
        return (r, None, note.error_kind);
    }
    if let Some(m) = crate::manifest_routes::refusal(&state.config, &program) {
        let r = refuse(StatusCode::BAD_REQUEST, "manifestRefused", m, &mut note);
        return (r, None, note.error_kind);
    }
    let out = state
        .config
        .runner(depth)
        .run_program(&program, &request.args, &options)
        .await;
    let kind = out.error.as_ref().map(|e| e.kind.name());
    (
        reply(StatusCode::OK, &outcome_json(&out, request.log)),
        Some(out.fuel_used),
        kind,
    )
}

fn load(
    state: &State,
    request: &RunRequest,
    options: &Options,
) -> Result<VerifiedProgram, (&'static str, String)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    match (&request.artifact, &request.source) {
        (Some(_), Some(_)) => Err((
            "badRequest",
            "Send either artifact or source, not both".into(),
        )),
        (None, None) => Err((
            "badRequest",
            "The request needs an artifact (base64)".into(),
        )),
        (Some(a), None) => {
            let bytes = b64
                .decode(a.trim())
                .map_err(|e| ("badRequest", format!("artifact is not valid base64: {e}")))?;
            let spans = match &request.spans {
                Some(s) => Some(
                    b64.decode(s.trim())
                        .map_err(|e| ("badRequest", format!("spans is not valid base64: {e}")))?,
                ),
                None => None,
            };
            ajs::load_artifact(&bytes, spans.as_deref())
                .map_err(|e| ("artifactRefused", format!("Artifact refused: {e}")))
        }
        (None, Some(source)) => {
            if !state.config.accept_source {
                return Err((
                    "sourceRefused",
                    "This server runs compiled artifacts only (acceptSource is false)".into(),
                ));
            }
            compile(source, options)
        }
    }
}

#[cfg(feature = "source")]
fn compile(source: &str, options: &Options) -> Result<VerifiedProgram, (&'static str, String)> {
    ajs::Runner::compile_agent(source, options).map_err(|e| ("compileError", e.to_string()))
}

#[cfg(not(feature = "source"))]
fn compile(_: &str, _: &Options) -> Result<VerifiedProgram, (&'static str, String)> {
    Err((
        "sourceRefused",
        "This build has no compiler; send a compiled artifact".into(),
    ))
}
