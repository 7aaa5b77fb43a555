//! The server's use of the manifest (docs/manifest.md): `POST /run` refuses, before anything
//! runs, a program whose manifest breaks the server's policy (a call of an atom the server does
//! not provide, a literal fetch URL outside `fetch.domains`, more fixed fuel than
//! `limits.maxFuel`); `POST /inspect` answers a posted
//! artifact's (or source's) manifest.

use std::time::Duration;

use ajs::{Manifest, Options, ProgramManifest, VerifiedProgram};
use base64::Engine;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::ServerConfig;

/// Why the manifest of `program` is against this server's policy, naming the site; `None`
/// when it is not. Checked before the program runs: a refused program makes no call.
pub(crate) fn refusal(
    config: &ServerConfig,
    options: &Options,
    program: &VerifiedProgram,
) -> Option<String> {
    let manifest = program.manifest();
    policy_refusal(config, options, &manifest)
}

fn policy_refusal(config: &ServerConfig, options: &Options, manifest: &Manifest) -> Option<String> {
    for (name, atom) in &manifest.atoms {
        if options.capabilities.decl(name).is_none() {
            let at = atom
                .sites
                .first()
                .map(|s| format!(" at {}", s.place()))
                .unwrap_or_default();
            return Some(format!(
                "This program calls the atom '{name}'{at}, which this server does not provide; remove the call, or ask the server's operator to provide '{name}'"
            ));
        }
    }
    let policy = config.fetch_policy();
    for (site, url) in manifest.fetch_sites() {
        if let Some(Err(why)) = policy.judge_known_url(&url.url, url.exact) {
            let what = if url.exact {
                format!("the URL '{}'", url.url)
            } else {
                format!("URLs starting '{}'", url.url)
            };
            return Some(format!(
                "This program calls httpFetch at {} with {what}, which this server refuses ({why}); fetch a host in fetch.domains, or add the host to fetch.domains",
                site.place()
            ));
        }
    }
    let max_fuel = config.limits.max_fuel;
    if let Some(fixed) = manifest.fuel.fixed {
        if fixed as f64 > max_fuel {
            return Some(format!(
                "This program can need {fixed} fuel on one path whatever its inputs (instructions, calls and atom prices), more than this server grants any run ({max_fuel}, limits.maxFuel); make that path cheaper (fewer atom calls) or raise limits.maxFuel"
            ));
        }
    }
    None
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InspectRequest {
    artifact: Option<String>,
    source: Option<String>,
}

type Refusal = (StatusCode, &'static str, String);

/// `POST /inspect`: the manifest of the posted artifact (base64) or source (where the server
/// accepts source), as `ajs inspect` prints it; a 4xx `{ "error": { kind, message } }` else.
pub(crate) async fn inspect(
    config: &ServerConfig,
    options: &Options,
    req: Request<Incoming>,
) -> (StatusCode, Value) {
    match manifest_of(config, options, req).await {
        Ok(m) => (
            StatusCode::OK,
            serde_json::to_value(&m).unwrap_or(Value::Null),
        ),
        Err((status, kind, message)) => (
            status,
            json!({ "error": { "kind": kind, "message": message } }),
        ),
    }
}

async fn manifest_of(
    config: &ServerConfig,
    options: &Options,
    req: Request<Incoming>,
) -> Result<Manifest, Refusal> {
    let limits = &config.limits;
    let bad = |m: String| (StatusCode::BAD_REQUEST, "badRequest", m);
    let read = Limited::new(req.into_body(), limits.max_request_bytes).collect();
    let wait = Duration::from_millis(limits.request_read_timeout_ms);
    let body = match tokio::time::timeout(wait, read).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                "tooLarge",
                format!(
                    "Request body over the {}-byte limit (limits.maxRequestBytes); send a smaller artifact",
                    limits.max_request_bytes
                ),
            ))
        }
        Ok(Err(e)) => return Err(bad(format!("Cannot read the request body: {e}"))),
        Err(_) => {
            return Err((
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!(
                    "The request body did not arrive within {} ms (limits.requestReadTimeoutMs)",
                    limits.request_read_timeout_ms
                ),
            ))
        }
    };
    let request: InspectRequest = serde_json::from_slice(&body)
        .map_err(|e| bad(format!("Request is not a valid inspect request: {e}")))?;
    let program = match (&request.artifact, &request.source) {
        (Some(a), None) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(a.trim())
                .map_err(|e| bad(format!("artifact is not valid base64: {e}")))?;
            ajs::load_artifact(&bytes, None).map_err(|e| {
                (
                    StatusCode::BAD_REQUEST,
                    "artifactRefused",
                    format!("Artifact refused: {e}"),
                )
            })?
        }
        (None, Some(source)) => {
            if !config.accept_source {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "sourceRefused",
                    "This server inspects compiled artifacts only (acceptSource is false)".into(),
                ));
            }
            compile(source, options)?
        }
        _ => return Err(bad("Send either an artifact (base64) or source".into())),
    };
    Ok(program.manifest())
}

#[cfg(feature = "source")]
fn compile(source: &str, options: &Options) -> Result<VerifiedProgram, Refusal> {
    ajs::Runner::compile_agent(source, options)
        .map_err(|e| (StatusCode::BAD_REQUEST, "compileError", e.to_string()))
}

#[cfg(not(feature = "source"))]
fn compile(_: &str, _: &Options) -> Result<VerifiedProgram, Refusal> {
    Err((
        StatusCode::BAD_REQUEST,
        "sourceRefused",
        "This build has no compiler; send a compiled artifact".into(),
    ))
}
