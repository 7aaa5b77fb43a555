//! The route table: every endpoint is one arm of the `match` in [`route`], after the checks
//! every request passes (its `Origin`, and a JSON `Content-Type` on `POST`).

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use serde_json::json;

use super::cors::{self, Verdict};
use super::metrics::METRICS_CONTENT_TYPE;
use super::reply::{refuse, reply, Note, Reply};
use super::{run, State};

/// Answers a request: the origin and content-type checks, then its endpoint.
pub(crate) async fn route(state: Arc<State>, req: Request<Incoming>, note: &mut Note) -> Reply {
    let preflight = req.method() == Method::OPTIONS;
    let origin = match cors::check(&state.config.cors, preflight, req.headers(), note) {
        Verdict::NoOrigin => None,
        Verdict::Listed(o) => Some(o),
        Verdict::Answer(r) => return r,
    };
    let mut resp = if req.method() == Method::POST && !json_content_type(req.headers()) {
        unsupported_media_type(req.headers(), note)
    } else {
        endpoint(state, req, note).await
    };
    if let Some(o) = origin {
        cors::allow(&mut resp, o);
    }
    resp
}

/// The endpoints, by method and path segments.
async fn endpoint(state: Arc<State>, req: Request<Incoming>, note: &mut Note) -> Reply {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (&method, segments.as_slice()) {
        (&Method::POST, ["run"]) => run::run(state, req, note).await,
        (&Method::GET, ["healthz"]) => reply(StatusCode::OK, &json!({ "ok": true })),
        (&Method::GET, ["metrics"]) => metrics(&state),
        (&Method::POST, ["inspect"]) => {
            let (status, body) =
                crate::manifest_routes::inspect(&state.config, &state.options, req).await;
            reply(status, &body)
        }
        (_, ["runs", ..]) => crate::runs_api::route(state, req, note).await,
        (_, ["run" | "inspect"]) => refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "methodNotAllowed",
            format!("Use POST {path}"),
            note,
        ),
        (_, ["healthz" | "metrics"]) => refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "methodNotAllowed",
            format!("Use GET {path}"),
            note,
        ),
        _ => refuse(
            StatusCode::NOT_FOUND,
            "notFound",
            format!("No endpoint {path}: use POST /run"),
            note,
        ),
    }
}

fn metrics(state: &State) -> Reply {
    let mut r = reply(StatusCode::OK, &json!({}));
    *r.body_mut() = Full::new(Bytes::from(state.metrics.render()));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(METRICS_CONTENT_TYPE));
    r
}

/// Whether the body is declared JSON: `application/json`, with at most a UTF-8 `charset`.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mut parts = value.split(';').map(str::trim);
    if !parts
        .next()
        .is_some_and(|t| t.eq_ignore_ascii_case("application/json"))
    {
        return false;
    }
    parts.all(|p| {
        p.split_once('=').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("charset")
                && v.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
        })
    })
}

fn unsupported_media_type(headers: &HeaderMap, note: &mut Note) -> Reply {
    let got = headers
        .get(CONTENT_TYPE)
        .map_or("no Content-Type".to_string(), |v| {
            format!("Content-Type '{}'", v.to_str().unwrap_or("(not text)"))
        });
    refuse(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupportedMediaType",
        format!(
            "POST bodies are JSON: send the header 'Content-Type: application/json' (got {got})"
        ),
        note,
    )
}
