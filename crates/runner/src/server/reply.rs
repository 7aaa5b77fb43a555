//! Answers: a JSON body with its status, and the refusal shape `{ "error": { "kind", "message" } }`.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

/// An answer.
pub(crate) type Reply = Response<Full<Bytes>>;

/// What the request log line records besides status and duration.
#[derive(Default)]
pub(crate) struct Note {
    pub(crate) fuel: Option<f64>,
    pub(crate) error_kind: Option<&'static str>,
    pub(crate) depth: u32,
}

/// `body` as JSON with `status`.
pub(crate) fn reply(status: StatusCode, body: &Value) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A refusal of kind `kind`, noted for the log line.
pub(crate) fn refuse(
    status: StatusCode,
    kind: &'static str,
    message: String,
    note: &mut Note,
) -> Reply {
    note.error_kind = Some(kind);
    reply(
        status,
        &json!({ "error": { "kind": kind, "message": message } }),
    )
}

/// A 400 `badRequest`.
pub(crate) fn bad(message: impl Into<String>, note: &mut Note) -> Reply {
    refuse(StatusCode::BAD_REQUEST, "badRequest", message.into(), note)
}
