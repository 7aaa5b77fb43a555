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

pub mod allow;
pub mod decode;
pub mod http;
pub mod llm;

pub use allow::{AddressScreen, AllowEntry, Cidr};

#[cfg(feature = "client")]
pub use http::HttpClient;
pub use http::{encode_body, HttpError, HttpRequest, HttpResponse, SAFE_RESPONSE_HEADERS};
#[cfg(feature = "client")]
pub use llm::LlmClient;
pub use llm::{response_format, structured_not_json, LlmConfig, LlmText};

/// Request headers a guest may set (case-insensitive), besides those a policy adds.
pub const ALLOWED_HEADERS: &[&str] = &[
    "accept",
    "accept-encoding",
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
    /// Allowed hosts and ports (decision 35, [`AllowEntry`]): `api.example.com` (the scheme's
    /// default port only), `api.example.com:8443`, `api.example.com:*`, `*.example.com` (the
    /// domain and its subdomains), `10.0.0.5:*`, `[::1]:8080`. Setting it without a fetch
    /// capability turns on the built-in client.
    pub domains: Option<Vec<String>>,
    /// Methods allowed besides GET and HEAD.
    pub methods: Vec<String>,
    /// Request headers allowed besides [`ALLOWED_HEADERS`].
    pub headers: Vec<String>,
    /// Address ranges (`10.0.0.0/8`, `127.0.0.1`, `fd00::/8`) the built-in client may reach
    /// when an allowed **name** resolves to a loopback, private, link-local or unspecified
    /// address ([`AddressScreen`]); empty by default, so such a name is refused.
    pub allow_addresses: Vec<String>,
}

impl FetchPolicy {
    /// Checks every allowlist entry and address range (decision 35), once, when options are
    /// built.
    ///
    /// # Errors
    /// The field (`domains` or `allowAddresses`) and the first entry that could never match,
    /// named, with what to write instead.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for d in self.domains.iter().flatten() {
            AllowEntry::parse(d).map_err(|e| ("domains", e))?;
        }
        AddressScreen::parse(&self.allow_addresses)
            .map(|_| ())
            .map_err(|e| ("allowAddresses", e))
    }

    /// Judges a URL known before the run (a manifest's literal URL, or its literal start when
    /// `exact` is false) against [`FetchPolicy::domains`], as [`admit`] would judge every URL
    /// it can become. `None` when that is not decidable: no allowlist, a start that ends inside
    /// the authority (`https://api.`: the host is not known yet), not an http(s) URL.
    ///
    /// # Errors
    /// The refusal [`admit`] would give every URL of this site.
    pub fn judge_known_url(&self, url: &str, exact: bool) -> Option<Result<(), String>> {
        let domains = self.domains.as_ref()?;
        let known = if exact {
            url
        } else {
            // the authority is whole once a '/', '?', '#' (or '\\', a '/' in http URLs)
            // follows it
            let (scheme, rest) = url.split_once("://")?;
            let end = rest.find(['/', '?', '#', '\\'])?;
            &url[..scheme.len() + 3 + end + 1]
        };
        let parsed = url::Url::parse(known).ok()?;
        if parsed.scheme() != "http" && parsed.scheme() != "https" {
            return None;
        }
        Some(check_domains(&parsed, domains))
    }

    /// The screen for the addresses the built-in client resolves.
    ///
    /// # Errors
    /// A range that is not one.
    pub fn address_screen(&self) -> Result<AddressScreen, String> {
        AddressScreen::parse(&self.allow_addresses)
    }
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
            "Fetch blocked: method '{}' is not allowed. Allowed: {} (add methods to fetch.methods in the configuration; Rust: FetchPolicy::methods)",
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
        Some(domains) => check_domains(&url, domains)?,
        None if !has_capability => {
            return Err("Fetch blocked: no allowedFetchDomains configured. Set fetch.domains in the configuration (Rust: FetchPolicy::domains) to allow the built-in client, or provide a fetch capability.".into());
        }
        None => {}
    }
    Ok(())
}

/// The allowlist check (decision 35): the seed's domain check first, then the port.
fn check_domains(url: &url::Url, domains: &[String]) -> Result<(), String> {
    let host = url.host().ok_or("Fetch blocked: the URL has no host")?;
    let entries: Vec<AllowEntry> = domains
        .iter()
        .filter_map(|d| AllowEntry::parse(d).ok())
        .collect();
    let named: Vec<&AllowEntry> = entries.iter().filter(|e| e.host_matches(&host)).collect();
    if named.is_empty() {
        return Err(format!(
            "Fetch blocked: domain not in allowlist. Allowed: {}",
            domains.join(", ")
        ));
    }
    let default = if url.scheme() == "https" { 443 } else { 80 };
    let port = url.port().unwrap_or(default);
    if !named.iter().any(|e| e.port_matches(port, default)) {
        let h = url.host_str().unwrap_or("");
        return Err(format!(
            "Fetch blocked: port {port} of {h} is not allowed (an entry without a port allows only the scheme's default port). Add '{h}:{port}' or '{h}:*' to fetch.domains"
        ));
    }
    Ok(())
}
