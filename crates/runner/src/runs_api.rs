//! The `/runs` endpoints (see [`crate::runs`]); every one requires `Authorization: Bearer
//! <token>` and answers 401 before anything else is looked at.
//!
//! - `GET /runs?status=suspended|running|done|expired&limit=N` → `{ "runs": [{ "runId",
//!   "status", "createdAtMs", "expiresAtMs" }] }` (oldest first; default `suspended`, 100).
//! - `GET /runs/{runId}` → `{ "status", "runId", "pending"? , "outcome"? }`.
//! - `GET /runs/{runId}/journal` → the journal's bytes (`application/octet-stream`) once done.
//! - `POST /runs/{runId}/decisions` `{ "decisions": [{ "id": 0, "approve": true }] }` → like
//!   `POST /run`: 200 with the outcome, or 202 suspended again; 409 `alreadyDecided`, 410
//!   `expired`, 404 `notFound`.

use std::sync::Arc;
use std::time::Duration;

use ajs::store::{is_run_id, RunStatus};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};

use crate::runs::{Answer, DecisionsIn, Runs, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT};
use crate::server::reply::{refuse, reply, Note, Reply};
use crate::server::State;

fn answer(a: Answer, note: &mut Note) -> Reply {
    note.error_kind = a.kind;
    note.fuel = a.fuel;
    reply(a.status, &a.body)
}

/// Serves a path under `/runs`.
pub(crate) async fn route(state: Arc<State>, req: Request<Incoming>, note: &mut Note) -> Reply {
    let Some(runs) = state.approvals.clone() else {
        return refuse(
            StatusCode::NOT_FOUND,
            "notFound",
            "Approvals are not configured on this server: add an [approvals] section to its configuration".into(),
            note,
        );
    };
    if !runs.authorized(req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes)) {
        let mut r = refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Send Authorization: Bearer <token>, the token in the environment variable approvals.tokenEnv names".into(),
            note,
        );
        r.headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(2).collect();
    let method = req.method().clone();
    match (&method, parts.as_slice()) {
        (&Method::GET, []) => list(&runs, req.uri().query().unwrap_or(""), note).await,
        (_, [id, ..]) if !is_run_id(id) => refuse(
            StatusCode::NOT_FOUND,
            "notFound",
            "No such run: a run id is the 32 lower-case hex digits a 202 answer gave".into(),
            note,
        ),
        (&Method::GET, [id]) => answer(runs.show(id).await, note),
        (&Method::GET, [id, "journal"]) => match runs.journal(id).await {
            Ok(bytes) => {
                let mut r = Response::new(Full::new(Bytes::from(bytes)));
                r.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                );
                r
            }
            Err(a) => answer(a, note),
        },
        (&Method::POST, [id, "decisions"]) => {
            let id = id.to_string();
            decide(state, runs, id, req, note).await
        }
        (_, [] | [_] | [_, "journal"]) => refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "methodNotAllowed",
            "Use GET for /runs, /runs/{runId} and /runs/{runId}/journal".into(),
            note,
        ),
        (_, [_, "decisions"]) => refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "methodNotAllowed",
            "Use POST /runs/{runId}/decisions".into(),
            note,
        ),
        _ => refuse(
            StatusCode::NOT_FOUND,
            "notFound",
            format!("No endpoint {path}: see GET /runs, GET /runs/{{runId}}, GET /runs/{{runId}}/journal, POST /runs/{{runId}}/decisions"),
            note,
        ),
    }
}

async fn list(runs: &Runs, query: &str, note: &mut Note) -> Reply {
    let mut status = RunStatus::Suspended;
    let mut limit = DEFAULT_LIST_LIMIT;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("status", s)) => match RunStatus::parse(s) {
                Some(s) => status = s,
                None => {
                    return refuse(
                        StatusCode::BAD_REQUEST,
                        "badRequest",
                        format!("status={s}: write suspended, running, done or expired"),
                        note,
                    )
                }
            },
            Some(("limit", n)) => match n.parse::<usize>() {
                Ok(n) if (1..=MAX_LIST_LIMIT).contains(&n) => limit = n,
                _ => {
                    return refuse(
                        StatusCode::BAD_REQUEST,
                        "badRequest",
                        format!("limit must be between 1 and {MAX_LIST_LIMIT} (MAX_LIST_LIMIT)"),
                        note,
                    )
                }
            },
            _ => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "badRequest",
                    format!("Unknown query parameter '{pair}': GET /runs takes status and limit"),
                    note,
                )
            }
        }
    }
    answer(runs.list(status, limit).await, note)
}

async fn decide(
    state: Arc<State>,
    runs: Arc<Runs>,
    id: String,
    req: Request<Incoming>,
    note: &mut Note,
) -> Reply {
    let limits = &state.config.limits;
    // a resumed run holds a slot like any run; the slot is taken before the body is read
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
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "badRequest",
                format!(
                    "The decisions did not arrive whole within limits.requestReadTimeoutMs or are over limits.maxRequestBytes ({} bytes)",
                    limits.max_request_bytes
                ),
                note,
            )
        }
    };
    let input: DecisionsIn = match serde_json::from_slice(&body) {
        Ok(d) => d,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "badRequest",
                format!("Not a decisions request ({e}); send {{\"decisions\": [{{\"id\": 0, \"approve\": true}}]}}"),
                note,
            )
        }
    };
    let st = state.clone();
    // detached: once claimed, the resumed run finishes and records its end even if this client
    // hangs up (it can read the outcome with GET /runs/{runId})
    let task = state.pool.spawn(async move {
        let _permit = permit;
        runs.decide(&st.config, &id, input).await
    });
    match task {
        Some(t) => match t.await {
            Ok(a) => answer(a, note),
            Err(e) => refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("The resumed run ended abnormally: {e}"),
                note,
            ),
        },
        None => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "Server shutting down".into(),
            note,
        ),
    }
}
