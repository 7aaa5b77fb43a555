//! Host side of the AJS atoms.
//!
//! - [`admit`]: the fetch admission policy, what a guest's `httpFetch` request must satisfy
//!   before any capability is called (scheme, method, the closed header list, the domain
//!   allowlist, the agent-depth limit);
//! - [`HttpClient`]: the built-in `httpFetch` client (hyper + rustls), used when
//!   `fetchPolicy.domains` is set and no `fetch` capability is injected;
//! - [`LlmClient`]: a client for OpenAI-compatible chat-completions endpoints, to put behind
//!   `llmPredict`.
//!
//! ```
//! use ajs_io::{admit, FetchPolicy, FetchRequest};
//! let policy = FetchPolicy { domains: Some(vec!["api.example.com".into()]), ..Default::default() };
//! let req = FetchRequest { url: "https://evil.example.net/x".into(), method: "GET".into(), headers: vec![] };
//! let err = admit(&req, &policy, true, 0).unwrap_err();
//! assert_eq!(err, "Fetch blocked: domain not in allowlist. Allowed: api.example.com");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod http;
pub mod llm;

pub use http::{
    encode_body, HttpClient, HttpError, HttpRequest, HttpResponse, SAFE_RESPONSE_HEADERS,
};
pub use llm::{response_format, structured_not_json, LlmClient, LlmConfig, LlmText};

/// Request headers a guest may set (case-insensitive), besides those a policy adds.
pub const ALLOWED_HEADERS: &[&str] = &[
    "accept",
    "accept-language",
    "authorization",
    "cache-control",
    "content-language",
    "content-type",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-unmodified-since",
    "range",
    "user-agent",
    "x-api-key",
    "x-request-id",
    "x-correlation-id",
    "x-requested-with",
];

/// Methods allowed without a policy.
pub const DEFAULT_METHODS: &[&str] = &["GET", "HEAD"];

/// The agent-depth header the VM sets on every request.
pub const DEPTH_HEADER: &str = "X-Agent-Depth";

/// Requests from a run whose incoming depth reaches this are refused.
pub const MAX_AGENT_DEPTH: u32 = 10;

/// The host's rules for `httpFetch`, stated as data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FetchPolicy {
    /// Allowed hosts (`api.example.com`, or `*.example.com` for the domain and its subdomains).
    /// Setting it without a fetch capability turns on the built-in client.
    pub domains: Option<Vec<String>>,
    /// Methods allowed besides GET and HEAD.
    pub methods: Vec<String>,
    /// Request headers allowed besides [`ALLOWED_HEADERS`].
    pub headers: Vec<String>,
}

/// The parts of a guest request that admission judges.
#[derive(Clone, Debug, PartialEq)]
pub struct FetchRequest {
    /// The URL as the guest wrote it.
    pub url: String,
    /// The method, upper-cased.
    pub method: String,
    /// Header names and values as the guest spelled them.
    pub headers: Vec<(String, String)>,
}

/// Admits or refuses a request before any capability runs. `has_capability` says whether the
/// host injected a `fetch` capability; `depth` is the run's incoming agent depth.
///
/// # Errors
/// The refusal message the guest sees (a catchable error).
pub fn admit(
    req: &FetchRequest,
    policy: &FetchPolicy,
    has_capability: bool,
    depth: u32,
) -> Result<(), String> {
    if depth >= MAX_AGENT_DEPTH {
        return Err(format!(
            "Agent request depth exceeded (max {MAX_AGENT_DEPTH}). This prevents recursive agent loops."
        ));
    }
    let url = url::Url::parse(&req.url)
        .map_err(|e| format!("Fetch blocked: invalid URL '{}': {e}", req.url))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!(
            "Fetch blocked: only http: and https: URLs are allowed, got '{}:'",
            url.scheme()
        ));
    }
    let method_ok = DEFAULT_METHODS
        .iter()
        .any(|m| m.eq_ignore_ascii_case(&req.method))
        || policy
            .methods
            .iter()
            .any(|m| m.eq_ignore_ascii_case(&req.method));
    if !method_ok {
        let mut allowed: Vec<String> = DEFAULT_METHODS.iter().map(|s| s.to_string()).collect();
        allowed.extend(policy.methods.iter().map(|m| m.to_ascii_uppercase()));
        return Err(format!(
            "Fetch blocked: method '{}' is not allowed. Allowed: {} (add methods with fetchPolicy.methods)",
            req.method,
            allowed.join(", ")
        ));
    }
    for (name, _) in &req.headers {
        let ok = !name.eq_ignore_ascii_case(DEPTH_HEADER)
            && (ALLOWED_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name))
                || policy.headers.iter().any(|h| h.eq_ignore_ascii_case(name)));
        if !ok {
            return Err(format!("Fetch blocked: header '{name}' is not allowed"));
        }
    }
    match &policy.domains {
        Some(domains) => {
            let host = url
                .host_str()
                .unwrap_or("")
                .trim_end_matches('.')
                .to_ascii_lowercase();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if !domains.iter().any(|d| domain_matches(host, d)) {
                return Err(format!(
                    "Fetch blocked: domain not in allowlist. Allowed: {}",
                    domains.join(", ")
                ));
            }
        }
        None if !has_capability => {
            return Err("Fetch blocked: no allowedFetchDomains configured. Set fetchPolicy.domains to allow the built-in client, or provide a fetch capability.".into());
        }
        None => {}
    }
    Ok(())
}

/// Whether `host` matches an allowlist entry: exact (case-insensitive), or `*.suffix` matching
/// the suffix itself and any subdomain of it.
pub fn domain_matches(host: &str, entry: &str) -> bool {
    let entry = entry.trim_end_matches('.').to_ascii_lowercase();
    match entry.strip_prefix("*.") {
        Some(suffix) => host == suffix || host.ends_with(&format!(".{suffix}")),
        None => host == entry,
    }
}
