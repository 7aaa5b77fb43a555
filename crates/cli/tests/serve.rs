//! `ajs serve` in-process: a run, the refusals (400, 404, 405, 413, 503), the agent-depth chain
//! and graceful shutdown; `hardening`: 415, origins, disconnects, metrics.

mod hardening;

use std::sync::Arc;
use std::time::Duration;

use ajs::{Options, Runner};
use ajs_runner::{Server, ServerConfig};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Notify};

fn artifact(source: &str) -> String {
    let p = Runner::compile_agent(source, &Options::default()).expect("compiles");
    base64::engine::general_purpose::STANDARD.encode(p.to_bytes())
}

struct Running {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    fn url(&self) -> String {
        format!("http://{}/run", self.addr)
    }
    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), self.done)
            .await
            .expect("server stops")
            .unwrap();
    }
}

async fn start(config: Value) -> Running {
    let mut config: ServerConfig = serde_json::from_value(config).expect("config");
    config.listen = "127.0.0.1:0".into();
    let server = Server::bind(config).await.expect("binds");
    let addr = server.local_addr();
    let (tx, rx) = oneshot::channel::<()>();
    let done = tokio::spawn(server.run(async {
        let _ = rx.await;
    }));
    Running {
        addr,
        stop: Some(tx),
        done,
    }
}

/// One request on a fresh connection, with exactly `headers` (and `host`): status, headers and
/// body.
async fn send(
    addr: std::net::SocketAddr,
    path: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, hyper::HeaderMap, Bytes) {
    let stream = TcpStream::connect(addr).await.expect("connects");
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = send
        .send_request(req.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .expect("answer");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, headers, bytes)
}

/// One request on a fresh connection (declared JSON unless `headers` names a content type):
/// status and JSON body.
async fn post(
    addr: std::net::SocketAddr,
    path: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let mut all = headers.to_vec();
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        all.push(("content-type", "application/json"));
    }
    let (status, _, bytes) = send(addr, path, method, &all, body).await;
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, v)
}

async fn run(addr: std::net::SocketAddr, body: Value) -> (StatusCode, Value) {
    post(addr, "/run", "POST", &[], body.to_string().into_bytes()).await
}

const DOUBLE: &str =
    "function main({ n: 1 }) {\n  console.log('n is ' + n)\n  return { twice: n * 2 }\n}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_an_artifact() {
    let s = start(json!({})).await;
    let (st, v) = run(
        s.addr,
        json!({ "artifact": artifact(DOUBLE), "args": { "n": 21 } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["result"], json!({ "twice": 42 }));
    assert!(v["fuelUsed"].as_f64().unwrap() > 0.0);
    assert!(v.get("log").is_none());
    let (_, v) = run(
        s.addr,
        json!({ "artifact": artifact(DOUBLE), "args": { "n": 2 }, "log": true, "options": { "fuel": 50, "timeoutMs": 1000 } }),
    )
    .await;
    assert_eq!(v["log"], json!([{ "level": "info", "message": "n is 2" }]));
    // A run that fails is still a 200 with the outcome.
    let (st, v) = run(
        s.addr,
        json!({ "artifact": artifact("function main() { while (true) {} }"), "options": { "fuel": 5 } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["error"]["message"], "Out of Fuel");
    assert_eq!(v["error"]["kind"], "outOfFuel");
    let (st, v) = run(
        s.addr,
        json!({ "artifact": artifact(DOUBLE), "args": { "n": "x" } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["error"]["kind"], "input", "{v}");
    let (st, v) = post(s.addr, "/healthz", "GET", &[], vec![]).await;
    assert_eq!((st, v), (StatusCode::OK, json!({ "ok": true })));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_4xx_json() {
    let s =
        start(json!({ "limits": { "maxRequestBytes": 4096, "maxFuel": 100, "defaultFuel": 50 } }))
            .await;
    let good = artifact(DOUBLE);
    let kind = |v: &Value| v["error"]["kind"].as_str().unwrap_or("").to_string();
    let (st, v) = post(s.addr, "/run", "POST", &[], b"{not json".to_vec()).await;
    assert_eq!(
        (st, kind(&v)),
        (StatusCode::BAD_REQUEST, "badRequest".into())
    );
    let (st, v) = run(s.addr, json!({ "artifact": "%%%" })).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(v["error"]["message"].as_str().unwrap().contains("base64"));
    // Tampered: a flipped byte in the instruction-set fingerprint, and a truncated body.
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(&good)
        .unwrap();
    bytes[9] ^= 1;
    let (st, v) = run(
        s.addr,
        json!({ "artifact": base64::engine::general_purpose::STANDARD.encode(&bytes) }),
    )
    .await;
    assert_eq!(
        (st, kind(&v)),
        (StatusCode::BAD_REQUEST, "artifactRefused".into())
    );
    bytes[9] ^= 1;
    bytes.truncate(bytes.len() - 3);
    let (st, v) = run(
        s.addr,
        json!({ "artifact": base64::engine::general_purpose::STANDARD.encode(&bytes) }),
    )
    .await;
    assert_eq!(
        (st, kind(&v)),
        (StatusCode::BAD_REQUEST, "artifactRefused".into())
    );
    // Source is refused unless the config allows it.
    let (st, v) = run(s.addr, json!({ "source": DOUBLE })).await;
    assert_eq!(
        (st, kind(&v)),
        (StatusCode::BAD_REQUEST, "sourceRefused".into())
    );
    let (st, v) = run(
        s.addr,
        json!({ "artifact": good, "options": { "fuel": 1000 } }),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.maxFuel"),
        "{v}"
    );
    let (st, _) = run(s.addr, json!({ "artifact": good, "extra": 1 })).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "unknown fields are refused");
    let (st, _) = post(
        s.addr,
        "/run",
        "POST",
        &[("x-agent-depth", "minus one")],
        json!({ "artifact": good }).to_string().into_bytes(),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    // An atom the server does not provide: refused by the manifest, naming the call site.
    let opts = Options {
        capabilities: ajs::Capabilities::default().with_atom("lookup", |v| async move { Ok(v) }),
        ..Options::default()
    };
    let p = Runner::compile_agent("function main() { return lookup({}) }", &opts).unwrap();
    let (st, v) = run(
        s.addr,
        json!({ "artifact": base64::engine::general_purpose::STANDARD.encode(p.to_bytes()) }),
    )
    .await;
    assert_eq!(
        (st, kind(&v)),
        (StatusCode::BAD_REQUEST, "manifestRefused".into())
    );
    let m = v["error"]["message"].as_str().unwrap();
    assert!(m.contains("'lookup' at line 1, column 25"), "{m}");
    // 413, 404, 405.
    let big = json!({ "artifact": good, "args": { "pad": "x".repeat(5000) } });
    let (st, v) = run(s.addr, big).await;
    assert_eq!(
        (st, kind(&v)),
        (StatusCode::PAYLOAD_TOO_LARGE, "tooLarge".into())
    );
    let (st, _) = post(s.addr, "/nope", "POST", &[], vec![]).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = post(s.addr, "/run", "GET", &[], vec![]).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_when_allowed() {
    let s = start(json!({ "acceptSource": true })).await;
    let (st, v) = run(s.addr, json!({ "source": DOUBLE, "args": { "n": 4 } })).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["result"], json!({ "twice": 8 }));
    let (st, v) = run(s.addr, json!({ "source": "function main( {" })).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["kind"], "compileError");
    s.shutdown().await;
}

/// A plain HTTP server that answers each request with the `X-Agent-Depth` it received, after
/// `gate` is notified when one is given. `accepted` is notified on every request.
async fn echo_server(gate: Option<Arc<Notify>>, accepted: Arc<Notify>) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = l.accept().await else {
                return;
            };
            let gate = gate.clone();
            let accepted = accepted.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let gate = gate.clone();
                    let accepted = accepted.clone();
                    async move {
                        accepted.notify_one();
                        if let Some(g) = gate {
                            g.notified().await;
                        }
                        let depth = req
                            .headers()
                            .get("x-agent-depth")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("none")
                            .to_string();
                        let body = json!({ "depth": depth }).to_string();
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

const FETCHER: &str =
    "function main({ url: '' }) {\n  let r = httpFetch({ url })\n  return { saw: r.depth }\n}";

fn local_fetch() -> Value {
    json!({ "domains": ["127.0.0.1:*"], "methods": ["POST"] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outgoing_requests_carry_depth_plus_one() {
    let echo = echo_server(None, Arc::new(Notify::new())).await;
    let s = start(json!({ "fetch": local_fetch() })).await;
    let body =
        json!({ "artifact": artifact(FETCHER), "args": { "url": format!("http://{echo}/") } });
    let (st, v) = run(s.addr, body.clone()).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["result"], json!({ "saw": "1" }));
    let (_, v) = post(
        s.addr,
        "/run",
        "POST",
        &[("X-Agent-Depth", "3")],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(v["result"], json!({ "saw": "4" }));
    let (_, v) = post(
        s.addr,
        "/run",
        "POST",
        &[("X-Agent-Depth", "10")],
        body.to_string().into_bytes(),
    )
    .await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Agent request depth exceeded (max 10)"),
        "{v}"
    );
    s.shutdown().await;
}

const CHAIN: &str = "function main({ url: '', artifact: '', level: 0 }) {\n  let r = null\n  try {\n    r = httpFetch({ url, method: 'POST', body: { artifact, args: { url, artifact, level: level + 1 } } })\n  } catch (e) {\n    return { level, stopped: e }\n  }\n  return { level, inner: r.result ?? r }\n}";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chain_of_agents_is_cut_at_depth_ten() {
    let s = start(json!({ "fetch": local_fetch(), "limits": { "maxConcurrentRuns": 16 } })).await;
    let a = artifact(CHAIN);
    let (st, v) = run(
        s.addr,
        json!({ "artifact": a, "args": { "url": s.url(), "artifact": a } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let mut level = &v["result"];
    for expect in 0..10 {
        assert_eq!(level["level"], json!(expect), "{v}");
        level = &level["inner"];
    }
    assert_eq!(level["level"], json!(10), "{v}");
    assert!(
        level["stopped"]
            .as_str()
            .unwrap_or("")
            .starts_with("Agent request depth exceeded (max 10)"),
        "{v}"
    );
    assert!(level.get("inner").is_none());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_server_answers_503_then_shuts_down_gracefully() {
    let gate = Arc::new(Notify::new());
    let accepted = Arc::new(Notify::new());
    let echo = echo_server(Some(gate.clone()), accepted.clone()).await;
    let s = start(json!({ "fetch": local_fetch(), "limits": { "maxConcurrentRuns": 1 } })).await;
    let addr = s.addr;
    let body =
        json!({ "artifact": artifact(FETCHER), "args": { "url": format!("http://{echo}/") } });
    let held = tokio::spawn(run(addr, body.clone()));
    accepted.notified().await; // the first run is now waiting on its fetch
    let (st, v) = run(addr, body.clone()).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["kind"], "busy");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("maxConcurrentRuns"));
    // Shut down while the first run is in flight: new connections are refused, the run finishes.
    let stopping = tokio::spawn(s.shutdown());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no new connections"
    );
    assert!(!stopping.is_finished(), "waits for the request in flight");
    gate.notify_one();
    let (st, v) = held.await.unwrap();
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["result"], json!({ "saw": "1" }));
    stopping.await.unwrap();
}

/// `ajs serve` as a child process, for what only a process shows: its RSS.
struct Child {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Child {
    async fn start(config: Value) -> Child {
        let dir = std::env::temp_dir().join(format!("ajs-serve-child-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let path = dir.join("serve.json");
        std::fs::write(&path, config.to_string()).unwrap();
        // under an address-space limit, so that a server that fails to bound a run dies
        // instead of taking the machine's memory
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v {}; exec \"$0\" serve --config \"$1\" --listen {addr}",
                AS_LIMIT / 1024
            ))
            .arg(env!("CARGO_BIN_EXE_ajs"))
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starts ajs serve");
        let c = Child {
            child,
            addr,
            _dir: TempDir(dir),
        };
        for _ in 0..100 {
            if TcpStream::connect(addr).await.is_ok() {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("ajs serve did not listen on {addr}");
    }

    /// VmRSS in bytes.
    fn rss(&self) -> u64 {
        self.status_bytes("VmRSS:")
    }

    /// VmHWM (peak RSS) in bytes.
    fn peak(&self) -> u64 {
        self.status_bytes("VmHWM:")
    }

    fn status_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server is alive");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a memory field");
        kb * 1024
    }
}

const MIB: u64 = 1024 * 1024;
/// The child server's address-space limit.
const AS_LIMIT: u64 = 4096 * MIB;

/// Hostile programs posted at once, as artifacts, to a real `ajs serve` (the server of
/// `ajs-run serve`) with default limits but for the slots and fuel: while every run slot computes,
/// `/healthz` answers within a second (guest code runs on threads of its own); every request
/// gets a clean JSON outcome; the peak stays within the slots times a run's bound plus 64 MiB;
/// within 5 s after the burst the RSS is back within 64 MiB of idle (jemalloc's background
/// purge).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_hostile_runs_leaves_healthz_fast_and_memory_returned() {
    let slots = 8;
    let s = Child::start(json!({
        "limits": { "maxConcurrentRuns": slots, "maxFuel": 1e9, "maxTimeoutMs": 60000 }
    }))
    .await;
    // warm: the run threads exist and have run once
    let (st, v) = run(
        s.addr,
        json!({ "artifact": artifact(DOUBLE), "args": { "n": 1 } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let idle = s.rss();
    let hostile = [
        // burns its whole budget: fuel far beyond what 3 s can spend
        ("function main() { let i = 0\n while (true) { i++ } }", 1e9),
        // a JSON bomb: small nodes parsed from a large text
        ("function main() {\n let v = JSON.parse('[' + '[1],'.repeat(4000000) + '1]')\n return v.length\n}", 1e6),
        ("function main() {\n let v = JSON.parse('[' + '0,'.repeat(8000000) + '1]')\n return v.length\n}", 1e6),
        // the doubling result: 29 fuel, 2^40 references on the way out
        ("function main() { let x = 1\n let i = 0\n while (i < 40) { x = [x, x]; i++ }\n return x }", 1e6),
    ];
    let mut runs = Vec::new();
    for k in 0..slots {
        let (src, fuel) = hostile[k % hostile.len()];
        let body =
            json!({ "artifact": artifact(src), "options": { "fuel": fuel, "timeoutMs": 3000 } });
        runs.push(tokio::spawn(run(s.addr, body)));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut worst = Duration::ZERO;
    while runs.iter().any(|r| !r.is_finished()) {
        let t = std::time::Instant::now();
        let (st, v) = tokio::time::timeout(
            Duration::from_secs(10),
            post(s.addr, "/healthz", "GET", &[], vec![]),
        )
        .await
        .expect("healthz answers");
        assert_eq!((st, v), (StatusCode::OK, json!({ "ok": true })));
        worst = worst.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        worst < Duration::from_secs(1),
        "/healthz took {worst:?} while {slots} runs computed"
    );
    for r in runs {
        let (st, v) = r.await.unwrap();
        assert_eq!(st, StatusCode::OK, "{v}");
        assert!(
            v["error"]["kind"].is_string() || v.get("result").is_some(),
            "{v}"
        );
    }
    // the total bound of docs/deployment.md: the slots times a run's bound, plus the server
    let bound = slots as u64 * (64 * MIB * 3 / 2 + 32 * MIB) + 64 * MIB;
    assert!(
        s.peak() <= bound,
        "peak RSS {} MiB over {} MiB",
        s.peak() / MIB,
        bound / MIB
    );
    let mut after = s.rss();
    for _ in 0..50 {
        if after <= idle + 64 * MIB {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = s.rss();
    }
    assert!(
        after <= idle + 64 * MIB,
        "RSS {} MiB 5 s after the burst, idle was {} MiB",
        after / MIB,
        idle / MIB
    );
    let (st, _) = post(s.addr, "/healthz", "GET", &[], vec![]).await;
    assert_eq!(st, StatusCode::OK);
}

/// A local HTTP server that answers `ok` and counts the requests it gets.
async fn counting_server() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    (addr, hits)
}

/// The manifest is checked before anything runs: a literal fetch URL (or a literal URL start
/// whose host is known) outside `fetch.domains` is refused with 400 `manifestRefused` naming
/// the site and the URL, and the host it names gets no request; a start that ends inside the
/// host is not decidable and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_literal_fetch_outside_the_allowlist_is_refused_before_any_call() {
    let (target, hits) = counting_server().await;
    let fetcher = format!(
        "function main({{ p: 1 }}) {{\n  let r = httpFetch({{ url: 'http://{target}/items?page=' + p }})\n  return {{ r }}\n}}"
    );
    let s = start(json!({ "fetch": { "domains": ["api.example.com"] } })).await;
    let (st, v) = run(
        s.addr,
        json!({ "artifact": artifact(&fetcher), "args": { "p": 2 } }),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["kind"], "manifestRefused", "{v}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(m.contains("line 2, column"), "{m}");
    assert!(m.contains(&format!("http://{target}/items?page=")), "{m}");
    assert!(m.contains("fetch.domains"), "{m}");
    // an exact URL too, and from source where source is accepted
    let exact =
        "function main() { return { s: httpFetch({ url: 'https://evil.example.org/x' }).status } }";
    let (st, v) = run(s.addr, json!({ "artifact": artifact(exact) })).await;
    assert_eq!(
        (st, v["error"]["kind"].clone()),
        (StatusCode::BAD_REQUEST, json!("manifestRefused")),
        "{v}"
    );
    // a start that ends inside the host is not decidable: it runs (and the fetch is refused then)
    let open = "function main({ h: 'x' }) { try { return { s: httpFetch({ url: 'https://api.' + h }).status } } catch (e) { return { s: 'refused' } } }";
    let (st, v) = run(
        s.addr,
        json!({ "artifact": artifact(open), "args": { "h": "evil.org/" } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["s"], "refused", "{v}");
    s.shutdown().await;
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    // the same program where the host is allowed runs and reaches it (the counter counts)
    let s = start(
        json!({ "fetch": { "domains": [target.to_string()], "allowAddresses": ["127.0.0.1"] } }),
    )
    .await;
    let (st, v) = run(
        s.addr,
        json!({ "artifact": artifact(&fetcher), "args": { "p": 2 } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["r"], "ok", "{v}");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    s.shutdown().await;
}

/// A program whose fixed fuel on one path (here one `llmPredict`, 100 fuel) is over
/// `limits.maxFuel` is refused before it runs; `POST /inspect` answers a posted artifact's
/// manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_fuel_over_max_fuel_is_refused_and_inspect_answers_the_manifest() {
    let s = start(json!({ "limits": { "maxFuel": 50, "defaultFuel": 10 } })).await;
    let asks = "function main({ q: 'x' }) { if (q === 'skip') { return {} } return { a: llmPredict({ prompt: q }) } }";
    let (st, v) = run(s.addr, json!({ "artifact": artifact(asks) })).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["kind"], "manifestRefused", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.maxFuel"),
        "{v}"
    );
    let body = json!({ "artifact": artifact("function main({ p: 1 }) { return { s: httpFetch({ url: 'https://api.example.com/items?page=' + p }).status } }") });
    let (st, m) = post(
        s.addr,
        "/inspect",
        "POST",
        &[],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{m}");
    assert_eq!(
        m["atoms"]["httpFetch"]["sites"][0]["url"],
        json!({ "url": "https://api.example.com/items?page=", "exact": false })
    );
    assert_eq!(m["atoms"]["httpFetch"]["maxCalls"], 1);
    let (st, v) = post(
        s.addr,
        "/inspect",
        "POST",
        &[],
        b"{\"artifact\": \"QUJD\"}".to_vec(),
    )
    .await;
    assert_eq!(
        (st, v["error"]["kind"].clone()),
        (StatusCode::BAD_REQUEST, json!("artifactRefused")),
        "{v}"
    );
    s.shutdown().await;
}
