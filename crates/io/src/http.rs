//! The built-in `httpFetch` client: HTTP/1.1 over hyper, TLS by rustls (ring, webpki roots).
//!
//! It is deliberately small. One request per connection, no pooling, **no redirects** (a 3xx
//! comes back as data with its `location`), **no cookies and no ambient credentials** (only the
//! headers the caller passes, plus `Host`, `Content-Length` (`0` on an empty `POST`, `PUT` or
//! `PATCH`), `User-Agent: ajs/VERSION` and `Accept-Encoding: gzip, deflate, br` unless the
//! caller set them, and the agent-depth header the driver adds), content codings undone under
//! the same cap on the decoded bytes, names resolved and screened before connecting to the
//! address that was checked (decision 35), a connect timeout and an overall timeout, and a cap on the response body: the
//! client stops reading once the body passes the cap. Everything happens inside the one future
//! [`HttpClient::send`] returns, so dropping it (a run that timed out or was cancelled) closes the
//! connection at once.

#[cfg(feature = "client")]
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "client")]
use bytes::Bytes;
#[cfg(feature = "client")]
use http_body_util::{BodyExt, Full};
#[cfg(feature = "client")]
use hyper::body::Body as _;
#[cfg(feature = "client")]
use hyper_util::rt::TokioIo;
#[cfg(feature = "client")]
use rustls::pki_types::{CertificateDer, ServerName};
#[cfg(feature = "client")]
use tokio::net::TcpStream;

use crate::allow::AddressScreen;
use crate::decode::{decode_content, DecodeError, ACCEPT_ENCODING};

/// Default connect timeout (TCP and TLS handshake).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default overall timeout of one request (matches `httpFetch`'s own 30 s).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default response-body cap: 4 MiB, the same as the capability boundary.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Response headers the guest may see with `responseType: 'full'` (lower case). Everything else
/// (`set-cookie`, server internals, proxy headers) stays outside.
pub const SAFE_RESPONSE_HEADERS: &[&str] = &[
    "cache-control",
    "content-encoding",
    "content-language",
    "content-length",
    "content-type",
    "date",
    "etag",
    "expires",
    "last-modified",
    "location",
    "retry-after",
    "x-request-id",
    "x-correlation-id",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
];

/// Why a request produced no response.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum HttpError {
    /// The request failed (bad URL, DNS, connection, TLS, protocol, timeout). The message is what
    /// the guest sees; a guest `try` may catch it.
    #[error("{0}")]
    Failed(String),
    /// The response body is larger than the cap. Decision 20: a response is capped like any
    /// capability return, so the driver ends the run with a boundary error.
    #[error("the response body is over the {limit}-byte limit (membraneMaxBytes)")]
    TooLarge {
        /// The cap, in bytes.
        limit: usize,
    },
}

/// One request, already admitted by [`crate::admit`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpRequest {
    /// An `http:` or `https:` URL.
    pub url: String,
    /// The method, upper case.
    pub method: String,
    /// Header names and values, sent as given.
    pub headers: Vec<(String, String)>,
    /// The body bytes, if any.
    pub body: Option<Vec<u8>>,
    /// The screen on the addresses a name resolves to (decision 35), for destinations a guest
    /// chose; `None` for destinations the host configured (the model endpoint).
    pub screen: Option<AddressScreen>,
}

/// The `User-Agent` sent when the caller sets none.
pub const USER_AGENT: &str = concat!("ajs/", env!("CARGO_PKG_VERSION"));

/// A response, body read in full (up to the cap) and its content codings undone.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Every response header, names lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the content type says JSON (`application/json`, `…+json`).
    pub fn is_json(&self) -> bool {
        self.header("content-type").is_some_and(|ct| {
            let mime = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            mime == "application/json" || mime.ends_with("+json")
        })
    }

    /// The headers the guest may see: [`SAFE_RESPONSE_HEADERS`] only, names lower case,
    /// repeated headers joined with `, `.
    pub fn safe_headers(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut headers = serde_json::Map::new();
        for (k, v) in &self.headers {
            let k = k.to_ascii_lowercase();
            if !SAFE_RESPONSE_HEADERS.contains(&k.as_str()) {
                continue;
            }
            let joined = match headers.get(&k) {
                Some(serde_json::Value::String(prev)) => format!("{prev}, {v}"),
                _ => v.clone(),
            };
            headers.insert(k, serde_json::Value::String(joined));
        }
        headers
    }

    /// The encoding of the body's text: the content type's `charset`, UTF-8 by default.
    pub fn encoding(&self) -> &'static encoding_rs::Encoding {
        crate::decode::encoding_of(self.header("content-type"))
    }
}

#[cfg(feature = "client")]
/// The built-in HTTP client. Cheap to clone (the TLS configuration is shared).
#[derive(Clone)]
pub struct HttpClient {
    tls: Arc<rustls::ClientConfig>,
    /// TCP connect plus TLS handshake limit.
    pub connect_timeout: Duration,
    /// Limit on one whole request, response body included.
    pub request_timeout: Duration,
    /// Response-body cap in bytes.
    pub max_body_bytes: usize,
}

#[cfg(feature = "client")]
impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "client")]
impl Default for HttpClient {
    fn default() -> Self {
        HttpClient::new()
    }
}

#[cfg(feature = "client")]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(feature = "client")]
fn tls_config(roots: rustls::RootCertStore) -> Arc<rustls::ClientConfig> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

#[cfg(feature = "client")]
fn webpki_store() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    roots
}

#[cfg(feature = "client")]
impl HttpClient {
    /// A client trusting the Mozilla roots shipped in `webpki-roots`, with the default timeouts
    /// and body cap.
    pub fn new() -> HttpClient {
        HttpClient::with_root_store(webpki_store())
    }

    /// A client trusting exactly `roots` (for tests with a self-signed certificate, or a private
    /// CA). The public roots are **not** included.
    pub fn with_root_store(roots: rustls::RootCertStore) -> HttpClient {
        HttpClient {
            tls: tls_config(roots),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// A client trusting only the given DER certificates (test injection point).
    ///
    /// # Errors
    /// A certificate rustls cannot use as a trust anchor.
    pub fn with_trusted_certs(certs: &[CertificateDer<'static>]) -> Result<HttpClient, String> {
        let mut roots = rustls::RootCertStore::empty();
        for c in certs {
            roots.add(c.clone()).map_err(|e| e.to_string())?;
        }
        Ok(HttpClient::with_root_store(roots))
    }

    /// The same client with another body cap.
    pub fn max_body_bytes(mut self, cap: usize) -> HttpClient {
        self.max_body_bytes = cap;
        self
    }

    /// Sends one request and reads the response, under the overall timeout.
    ///
    /// # Errors
    /// [`HttpError::Failed`] for anything that prevents a response (the message says what),
    /// [`HttpError::TooLarge`] when the body passes [`HttpClient::max_body_bytes`].
    pub async fn send(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        match tokio::time::timeout(self.request_timeout, self.send_inner(req)).await {
            Ok(r) => r,
            Err(_) => Err(HttpError::Failed(format!(
                "request timed out after {}ms",
                self.request_timeout.as_millis()
            ))),
        }
    }

    async fn send_inner(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let fail = |m: String| HttpError::Failed(m);
        let url = url::Url::parse(&req.url).map_err(|e| fail(format!("invalid URL: {e}")))?;
        let https = match url.scheme() {
            "https" => true,
            "http" => false,
            s => return Err(fail(format!("unsupported scheme '{s}:'"))),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(fail(
                "Fetch blocked: credentials in the URL are not allowed".into(),
            ));
        }
        let host = url
            .host_str()
            .ok_or_else(|| fail("the URL has no host".into()))?
            .to_string();
        let port = url
            .port_or_known_default()
            .unwrap_or(if https { 443 } else { 80 });
        let bare_host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();

        let screen = req.screen.clone();
        let connect = async {
            let addr = resolve(&bare_host, url.host(), port, screen.as_ref()).await?;
            // the connection goes to the address that was checked (no second lookup)
            let tcp = TcpStream::connect(addr).await.map_err(|e| {
                fail(format!(
                    "connection to {host}:{port} ({}) failed: {e}",
                    addr.ip()
                ))
            })?;
            let _ = tcp.set_nodelay(true);
            if https {
                let name = ServerName::try_from(bare_host.clone())
                    .map_err(|e| fail(format!("invalid server name '{host}': {e}")))?;
                let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| fail(format!("TLS handshake with {host} failed: {e}")))?;
                Ok::<Box<dyn Io>, HttpError>(Box::new(tls))
            } else {
                Ok(Box::new(tcp) as Box<dyn Io>)
            }
        };
        let stream = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(s) => s?,
            Err(_) => {
                return Err(fail(format!(
                    "connection to {host}:{port} timed out after {}ms",
                    self.connect_timeout.as_millis()
                )))
            }
        };

        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let mut builder = hyper::Request::builder()
            .method(req.method.as_str())
            .uri(path)
            .header(hyper::header::HOST, authority);
        for (k, v) in &req.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        let has = |name: &str| {
            req.headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        if !has("user-agent") {
            builder = builder.header(hyper::header::USER_AGENT, USER_AGENT);
        }
        if !has("accept-encoding") {
            builder = builder.header(hyper::header::ACCEPT_ENCODING, ACCEPT_ENCODING);
        }
        let body = req.body.unwrap_or_default();
        if body.is_empty()
            && matches!(req.method.as_str(), "POST" | "PUT" | "PATCH")
            && !has("content-length")
        {
            // an empty body is said, not left for the server to guess (some answer 411)
            builder = builder.header(hyper::header::CONTENT_LENGTH, "0");
        }
        let body = Full::new(Bytes::from(body));
        let request = builder
            .body(body)
            .map_err(|e| fail(format!("invalid request: {e}")))?;

        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| fail(format!("HTTP handshake failed: {e}")))?;
        // Drive the connection inside this future (never spawned), so dropping the future
        // closes the socket.
        let conn = async move {
            let _ = conn.await;
            std::future::pending::<()>().await;
        };
        let cap = self.max_body_bytes;
        let work = async move {
            let resp = sender
                .send_request(request)
                .await
                .map_err(|e| fail(format!("request failed: {e}")))?;
            let status = resp.status().as_u16();
            let headers = resp
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let mut body = resp.into_body();
            if body.size_hint().lower() > cap as u64 {
                return Err(HttpError::TooLarge { limit: cap });
            }
            let mut buf = Vec::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| fail(format!("reading the response failed: {e}")))?;
                if let Ok(data) = frame.into_data() {
                    if buf.len() + data.len() > cap {
                        return Err(HttpError::TooLarge { limit: cap });
                    }
                    buf.extend_from_slice(&data);
                }
            }
            let mut resp = HttpResponse {
                status,
                headers,
                body: buf,
            };
            if let Some(coding) = resp.header("content-encoding").map(str::to_string) {
                if !resp.body.is_empty() {
                    resp.body = decode_content(std::mem::take(&mut resp.body), &coding, cap)
                        .map_err(|e| match e {
                            DecodeError::TooLarge(limit) => HttpError::TooLarge { limit },
                            DecodeError::Invalid(m) => fail(m),
                        })?;
                }
            }
            Ok(resp)
        };
        tokio::select! {
            r = work => r,
            () = conn => unreachable!("the connection future never completes"),
        }
    }
}

#[cfg(feature = "client")]
/// The address to connect to: an IP literal as written (the allowlist named that address), or
/// the first address the name resolves to that passes the screen.
async fn resolve(
    name: &str,
    host: Option<url::Host<&str>>,
    port: u16,
    screen: Option<&AddressScreen>,
) -> Result<std::net::SocketAddr, HttpError> {
    match host {
        Some(url::Host::Ipv4(a)) => return Ok((a, port).into()),
        Some(url::Host::Ipv6(a)) => return Ok((a, port).into()),
        _ => {}
    }
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((name, port))
        .await
        .map_err(|e| HttpError::Failed(format!("could not resolve {name}: {e}")))?
        .collect();
    let Some(screen) = screen else {
        return addrs
            .first()
            .copied()
            .ok_or_else(|| HttpError::Failed(format!("{name} resolved to no address")));
    };
    let mut refusal = None;
    for a in &addrs {
        match screen.check(name, a.ip()) {
            Ok(()) => return Ok(*a),
            Err(m) => {
                refusal.get_or_insert(m);
            }
        }
    }
    Err(HttpError::Failed(refusal.unwrap_or_else(|| {
        format!("{name} resolved to no address")
    })))
}

#[cfg(feature = "client")]
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
#[cfg(feature = "client")]
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// Encodes a guest body for the wire: a string is sent as is (no content type added); any other
/// value as JSON with `content-type: application/json` (unless the caller set a content type).
/// `None` (undefined) sends no body.
pub fn encode_body(body: Option<&serde_json::Value>) -> (Option<Vec<u8>>, Option<&'static str>) {
    match body {
        None => (None, None),
        Some(serde_json::Value::String(s)) => (Some(s.as_bytes().to_vec()), None),
        Some(v) => (Some(v.to_string().into_bytes()), Some("application/json")),
    }
}
