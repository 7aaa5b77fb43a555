//! Browsers: a request carrying an `Origin` is refused (403) unless its origin is listed in
//! `cors.origins`; a listed origin gets the CORS headers and its preflight (`OPTIONS`) answered.
//!
//! Why: a web page can make a browser on the operator's network send a "simple" cross-origin
//! `POST` (CSRF). Browsers send `Origin` on every cross-origin request, so refusing unknown
//! origins, and requiring `Content-Type: application/json` (which no simple request can carry),
//! keeps pages from submitting programs.

use hyper::header::{
    HeaderMap, HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_MAX_AGE, ORIGIN, VARY,
};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::reply::{refuse, reply, Note, Reply};

/// Methods a listed origin may use.
const ALLOWED_METHODS: &str = "GET, POST, OPTIONS";
/// Request headers a listed origin may send.
const ALLOWED_HEADERS: &str = "content-type, authorization, x-agent-depth";
/// How long a browser may cache a preflight answer, in seconds.
const PREFLIGHT_MAX_AGE_SECONDS: &str = "600";

/// `cors`: the web origins whose pages may call this server from a browser.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CorsConfig {
    /// Origins as browsers send them, `scheme://host[:port]` (e.g. `https://app.example.com`);
    /// default none: every request carrying an `Origin` is refused with 403.
    pub origins: Vec<String>,
}

impl CorsConfig {
    /// Checks every origin's shape.
    ///
    /// # Errors
    /// The first entry that is not `scheme://host[:port]`, saying what to write.
    pub fn check(&self) -> Result<(), String> {
        for o in &self.origins {
            let rest = o
                .strip_prefix("https://")
                .or_else(|| o.strip_prefix("http://"));
            let ok = rest.is_some_and(|r| {
                !r.is_empty()
                    && r.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
            });
            if !ok {
                return Err(format!(
                    "cors.origins: '{o}' is not an origin; write each as scheme://host[:port], e.g. https://app.example.com (no path, no trailing slash, no '*', no 'null')"
                ));
            }
        }
        Ok(())
    }

    fn listed(&self, origin: &str) -> bool {
        self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }
}

/// What to do with a request, as far as its origin goes.
pub(crate) enum Verdict {
    /// No `Origin`: not from a browser's cross-site request; go on.
    NoOrigin,
    /// A listed origin: go on, and add [`allow`]'s headers to the answer.
    Listed(HeaderValue),
    /// Answer this (a refusal, or a preflight's answer).
    Answer(Reply),
}

/// Judges a request's `Origin`; answers a listed origin's preflight.
pub(crate) fn check(
    cors: &CorsConfig,
    preflight: bool,
    headers: &HeaderMap,
    note: &mut Note,
) -> Verdict {
    let Some(value) = headers.get(ORIGIN) else {
        return Verdict::NoOrigin;
    };
    let origin = value.to_str().unwrap_or("");
    if !cors.listed(origin) {
        return Verdict::Answer(refuse(
            StatusCode::FORBIDDEN,
            "originRefused",
            format!(
                "Requests from the web origin '{origin}' are refused: list it in the configuration's cors.origins to let its pages call this server, or call it from a program (which sends no Origin)"
            ),
            note,
        ));
    }
    if preflight {
        let mut r = reply(StatusCode::NO_CONTENT, &json!({}));
        *r.body_mut() = Default::default();
        r.headers_mut().remove(hyper::header::CONTENT_TYPE);
        allow(&mut r, value.clone());
        let h = r.headers_mut();
        h.insert(
            ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOWED_METHODS),
        );
        h.insert(
            ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(ALLOWED_HEADERS),
        );
        h.insert(
            ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(PREFLIGHT_MAX_AGE_SECONDS),
        );
        return Verdict::Answer(r);
    }
    Verdict::Listed(value.clone())
}

/// Adds the headers that let a listed origin read the answer.
pub(crate) fn allow(r: &mut Reply, origin: HeaderValue) {
    let h = r.headers_mut();
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(VARY, HeaderValue::from_static("Origin"));
}
