//! A loopback HTTP(S) server for the capability tests: records every request, answers from a
//! script, and reports connections the client closed.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Request line and headers, as received.
    pub head: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    /// The request line.
    pub fn line(&self) -> &str {
        self.head.lines().next().unwrap_or("")
    }
}

/// What the server answers.
pub enum Reply {
    /// These bytes, then close.
    Raw(Vec<u8>),
    /// Nothing: wait until the client closes the connection.
    Hang,
    /// A 200 header without a length, then `n` bytes of body in chunks (until the client stops
    /// reading).
    Stream(usize),
}

/// A complete response with a body and extra headers.
pub fn response(status: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut s = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        s.push_str(&format!("{k}: {v}\r\n"));
    }
    s.push_str("\r\n");
    s.push_str(body);
    Reply::Raw(s.into_bytes())
}

/// A complete response whose body is any bytes.
pub fn raw_response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut s = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    )
    .into_bytes();
    for (k, v) in headers {
        s.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    s.extend_from_slice(b"\r\n");
    s.extend_from_slice(body);
    Reply::Raw(s)
}

/// `data` gzip-compressed.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A JSON 200 response.
pub fn json_ok(body: &str) -> Reply {
    response("200 OK", &[("content-type", "application/json")], body)
}

type Handler = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

/// The running server.
#[derive(Clone)]
pub struct Server {
    /// Where it listens (127.0.0.1).
    pub addr: SocketAddr,
    /// Every request read so far.
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    /// Connections accepted.
    pub accepted: Arc<AtomicUsize>,
    /// Connections the client closed while the server was still waiting (`Hang`) or writing
    /// (`Stream`).
    pub closed_by_client: Arc<AtomicUsize>,
}

impl Server {
    /// `http://127.0.0.1:port` + path.
    pub fn url(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://{}{path}", self.addr)
    }

    /// Requests recorded so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until `closed_by_client` reaches `n`, up to `limit`.
    pub async fn wait_closed(&self, n: usize, limit: Duration) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if self.closed_by_client.load(Ordering::SeqCst) >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }
}

/// The self-signed certificate (for 127.0.0.1) and the TLS acceptor of an HTTPS server.
pub struct Tls {
    /// The certificate, to trust in the client.
    pub cert: rustls::pki_types::CertificateDer<'static>,
    acceptor: tokio_rustls::TlsAcceptor,
}

/// Makes a certificate for 127.0.0.1 at test time.
pub fn make_tls() -> Tls {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = ck.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        ck.key_pair.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    Tls {
        cert,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(cfg)),
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Starts a server on 127.0.0.1 (HTTPS when `tls` is given) answering with `handler`.
pub async fn serve<F>(tls: Option<&Tls>, handler: F) -> Server
where
    F: Fn(&Recorded) -> Reply + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server {
        addr: listener.local_addr().unwrap(),
        requests: Arc::default(),
        accepted: Arc::default(),
        closed_by_client: Arc::default(),
    };
    let handler: Handler = Arc::new(handler);
    let acceptor = tls.map(|t| t.acceptor.clone());
    let s = server.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            s.accepted.fetch_add(1, Ordering::SeqCst);
            let s = s.clone();
            let handler = handler.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let stream: Box<dyn Io> = match acceptor {
                    Some(a) => match a.accept(tcp).await {
                        Ok(t) => Box::new(t),
                        Err(_) => return,
                    },
                    None => Box::new(tcp),
                };
                handle(stream, s, handler).await;
            });
        }
    });
    server
}

async fn handle(mut stream: Box<dyn Io>, s: Server, handler: Handler) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut rec = Recorded {
        head,
        body: Vec::new(),
    };
    let len: usize = rec
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    rec.body = body;
    s.requests.lock().unwrap().push(rec.clone());
    match handler(&rec) {
        Reply::Raw(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
        Reply::Hang => loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => {
                    s.closed_by_client.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Ok(_) => {}
            }
        },
        Reply::Stream(n) => {
            let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n";
            if stream.write_all(head).await.is_err() {
                return;
            }
            let block = vec![b'a'; 16 * 1024];
            let mut sent = 0;
            while sent < n {
                if stream.write_all(&block).await.is_err() {
                    s.closed_by_client.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                sent += block.len();
            }
            let _ = stream.shutdown().await;
        }
    }
}

/// The Python of the real-server tests' virtual environment (httpbin, gunicorn, llmock):
/// `AJS_TEST_PYTHON`, else `target/test-venv`, made by `.ci/python-deps.sh` on first use.
/// `None` (after a loud message) when it cannot be made outside CI; under `CI=true` a missing
/// environment fails the test.
pub fn test_python() -> Option<std::path::PathBuf> {
    static PYTHON: std::sync::OnceLock<Result<std::path::PathBuf, String>> =
        std::sync::OnceLock::new();
    let found = PYTHON.get_or_init(|| {
        if let Ok(p) = std::env::var("AJS_TEST_PYTHON") {
            return Ok(p.into());
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = std::process::Command::new(root.join(".ci/python-deps.sh"))
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run .ci/python-deps.sh: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(p) if out.status.success() => Ok(p.trim().into()),
            _ => Err(format!(".ci/python-deps.sh failed ({})", out.status)),
        }
    });
    match found {
        Ok(p) => Some(p.clone()),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("the real-server tests need their Python environment: {e}")
        }
        Err(e) => {
            eprintln!(
                "\n*** SKIPPED: real-server test: {e}. Run .ci/python-deps.sh (python3 and network to PyPI) ***\n"
            );
            None
        }
    }
}

/// A server process the test started; killed when dropped.
pub struct PyServer {
    child: std::process::Child,
    /// Its loopback port.
    pub port: u16,
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PyServer {
    /// `http://127.0.0.1:port` + path.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `python <args>` (`{port}` in an argument is replaced by a free port) and waits until
/// `ready_path` answers 200. `None` when the environment is missing (see [`test_python`]).
pub fn start_py(args: &[&str], ready_path: &str) -> Option<PyServer> {
    let python = test_python()?;
    let port = free_port();
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{port}", &port.to_string()))
        .collect();
    let module = args.get(1).cloned().unwrap_or_default();
    let child = std::process::Command::new(&python)
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {module}: {e}"));
    let server = PyServer { child, port };
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if http_get(port, ready_path).is_some_and(|(status, _)| status == 200) {
            return Some(server);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{module} did not answer on port {port} within 60 s");
}

/// httpbin under gunicorn, on a free loopback port.
pub fn httpbin() -> Option<PyServer> {
    start_py(
        &[
            "-m",
            "gunicorn",
            "-b",
            "127.0.0.1:{port}",
            "--threads",
            "8",
            "httpbin:app",
        ],
        "/get",
    )
}

/// llmock (OpenAI-compatible `/v1/chat/completions`) on a free loopback port, with `extra`
/// arguments (e.g. `--error-rate 429=1`).
pub fn llmock(extra: &[&str]) -> Option<PyServer> {
    let mut args = vec![
        "-c",
        "import sys; from llmock.cli import app; sys.argv[0] = 'llmock'; sys.exit(app())",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--log-level",
        "warning",
        "--response-style",
        "echo",
    ];
    args.extend_from_slice(extra);
    start_py(&args, "/health")
}

/// A blocking `GET` over HTTP/1.0: the status and the body, or `None` when nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<(u16, Vec<u8>)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]);
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, buf[end + 4..].to_vec()))
}
