//! `POST /run`: read and check the request, then load, admit, run and render on the run pool.
//!
//! The run belongs to its request: when the client goes away (the connection closes, so the
//! request's future is dropped) the run's cancellation token fires, which ends the run at its
//! next check (between slices, inside a long native) and drops its in-flight host calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ajs::{CancellationToken, Options, VerifiedProgram};
use base64::Engine;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_LENGTH, RETRY_AFTER};
use hyper::{Request, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::reply::{bad, refuse, reply, Note, Reply};
use super::{State, DEPTH_HEADER};
use crate::output::outcome_json;

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

pub(crate) async fn run(state: Arc<State>, req: Request<Incoming>, note: &mut Note) -> Reply {
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
    let cancel = CancelOnDrop::new();
    options.cancel = Some(cancel.token.clone());
    let Some(task) = state
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
    let result = task.await;
    cancel.disarm();
    match result {
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

/// Cancels a run when its request's future is dropped before the run answered (the client
/// went away, or the server stopped waiting).
pub(crate) struct CancelOnDrop {
    pub(crate) token: CancellationToken,
    armed: bool,
}

impl CancelOnDrop {
    pub(crate) fn new() -> CancelOnDrop {
        CancelOnDrop {
            token: CancellationToken::new(),
            armed: true,
        }
    }

    /// The run answered: dropping no longer cancels.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            tracing::info!("client went away before its answer: run cancelled");
            self.token.cancel();
        }
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
    let _in_flight = state.metrics.in_flight();
    let started = Instant::now();
    let mut note = Note::default();
    let program = match load(&state, &request, &options) {
        Ok(p) => p,
        Err((kind, m)) => {
            let r = refuse(StatusCode::BAD_REQUEST, kind, m, &mut note);
            return (r, None, note.error_kind);
        }
    };
    // the manifest first: a refused program is named by its call site, before anything runs
    if let Some(m) = crate::manifest_routes::refusal(&state.config, &options, &program) {
        let r = refuse(StatusCode::BAD_REQUEST, "manifestRefused", m, &mut note);
        return (r, None, note.error_kind);
    }
    if let Err(m) = state.config.admit_program(&program, &options) {
        let r = refuse(StatusCode::BAD_REQUEST, "atomRefused", m, &mut note);
        return (r, None, note.error_kind);
    }
    if let Some(runs) = state.approvals.as_ref().filter(|r| r.gates(&program)) {
        let a = runs
            .start(
                &state.config,
                &program,
                &request.args,
                options,
                depth,
                request.log,
            )
            .await;
        let outcome = if a.status == StatusCode::ACCEPTED {
            "suspended"
        } else {
            a.kind.unwrap_or("ok")
        };
        state
            .metrics
            .record_run(outcome, a.fuel.unwrap_or(0.0), started.elapsed());
        return (reply(a.status, &a.body), a.fuel, a.kind);
    }
    let out = state
        .config
        .runner(depth)
        .run_program(&program, &request.args, &options)
        .await;
    state.metrics.record_outcome(&out, started.elapsed());
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
