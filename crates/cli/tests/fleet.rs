//! `ajs serve` as a fleet (issue 32): approvals over HTTP, suspended runs kept in a store that
//! several `ajs serve` processes share: two processes on one SQLite file, and two on a
//! throwaway PostgreSQL cluster (initdb in a temporary directory, a free loopback port, an
//! unprivileged user when the tests run as root). Under `CI=true` a PostgreSQL that cannot be
//! started fails the test; it never skips.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};

const KEY_ENV: &str = "AJS_FLEET_TEST_KEY";
const TOKEN_ENV: &str = "AJS_FLEET_TEST_TOKEN";
const KEY: &str = "fleet-test-key-0123456789abcdef0123456789";
const TOKEN: &str = "fleet-test-token-5b1c";

/// Two gated fetches: the run pauses before each.
const AGENT: &str = "function main({ url: '' }) {\n  let a = httpFetch({ url: url + '/a' })\n  let b = httpFetch({ url: url + '/b' })\n  return { a: a.path, b: b.path, seen: [a.n, b.n] }\n}";

static UNIQUE: AtomicU64 = AtomicU64::new(0);

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("ajs-fleet-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A local HTTP server answering `{"path": …, "n": hits of that path so far}` and counting the
/// requests per path.
struct Target {
    addr: std::net::SocketAddr,
    hits: Arc<Mutex<HashMap<String, u64>>>,
}

impl Target {
    async fn start() -> Target {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let hits: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let h = hits.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = l.accept().await {
                let h = h.clone();
                tokio::spawn(async move {
                    let svc =
                        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                            let path = req.uri().path().to_string();
                            let n = {
                                let mut m = h.lock().unwrap();
                                let e = m.entry(path.clone()).or_insert(0);
                                *e += 1;
                                *e
                            };
                            async move {
                                Ok::<_, std::convert::Infallible>(
                                    hyper::Response::builder()
                                        .header("content-type", "application/json")
                                        .body(Full::new(Bytes::from(
                                            json!({ "path": path, "n": n }).to_string(),
                                        )))
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
        Target { addr, hits }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn hits(&self, path: &str) -> u64 {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `ajs serve` as a child process with the key and token in its environment.
struct Serve {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_config(store: &str, ttl: u64) -> Value {
    json!({
        "acceptSource": true,
        "fetch": { "domains": ["127.0.0.1:*"] },
        "approvals": {
            "atoms": ["httpFetch"],
            "store": store,
            "keyEnv": KEY_ENV,
            "tokenEnv": TOKEN_ENV,
            "ttlSeconds": ttl
        }
    })
}

impl Serve {
    async fn start(config: &Value, dir: &Path, name: &str) -> Serve {
        let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, config.to_string()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_ajs"))
            .args(["serve", "--config"])
            .arg(&path)
            .args(["--listen", &addr.to_string()])
            .env(KEY_ENV, KEY)
            .env(TOKEN_ENV, TOKEN)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts ajs serve");
        for _ in 0..200 {
            if TcpStream::connect(addr).await.is_ok() {
                // stderr is drained so the server never blocks on a full pipe
                let mut err = child.stderr.take().unwrap();
                std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
                return Serve { child, addr };
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
                panic!("ajs serve {name} exited ({status}): {err}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("ajs serve {name} did not listen on {addr}");
    }

    /// SIGKILL: the process gets no chance to clean up.
    fn kill9(&mut self) {
        let _ = Command::new("kill")
            .args(["-9", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// One request: status, JSON body (`Null` when not JSON) and the raw bytes.
async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (StatusCode, Value, Bytes) {
    let stream = TcpStream::connect(addr).await.expect("connects");
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let resp = send
        .send_request(req.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .expect("answer");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, v, bytes)
}

async fn get(addr: std::net::SocketAddr, path: &str) -> (StatusCode, Value) {
    let (s, v, _) = http(addr, "GET", path, Some(TOKEN), None).await;
    (s, v)
}

async fn decide(
    addr: std::net::SocketAddr,
    id: &str,
    call: u64,
    approve: bool,
) -> (StatusCode, Value) {
    let body = json!({ "decisions": [{ "id": call, "approve": approve }] });
    let (s, v, _) = http(
        addr,
        "POST",
        &format!("/runs/{id}/decisions"),
        Some(TOKEN),
        Some(&body),
    )
    .await;
    (s, v)
}

/// Starts the agent on `addr`: it must pause before its first fetch.
async fn pause(addr: std::net::SocketAddr, target: &Target) -> String {
    let body = json!({ "source": AGENT, "args": { "url": target.url() } });
    let (st, v, _) = http(addr, "POST", "/run", None, Some(&body)).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["status"], "suspended", "{v}");
    assert_eq!(v["pending"][0]["id"], 0, "{v}");
    assert_eq!(v["pending"][0]["atom"], "httpFetch", "{v}");
    assert_eq!(
        v["pending"][0]["input"]["url"],
        format!("{}/a", target.url()),
        "{v}"
    );
    v["runId"].as_str().expect("a run id").to_string()
}

/// The whole flow on two instances sharing `store`: 401s, pause on A and decide on B, the
/// result equal to the unpaused run's with each host call made once, the journal replayed
/// offline, a raced decision (one 200, one 409), `kill -9` of the pausing instance, a
/// TTL-expired run refused.
async fn fleet_suite(store: &str, dir: &Path) {
    let target = Target::start().await;
    let config = serve_config(store, 3600);
    let mut a = Serve::start(&config, dir, "a").await;
    let b = Serve::start(&config, dir, "b").await;

    // 401 before any lookup: no token, a wrong token, another scheme; for an id that exists
    // or not, the answer is the same
    let id = pause(a.addr, &target).await;
    for path in [
        format!("/runs/{id}"),
        "/runs/00000000000000000000000000000000".to_string(),
        "/runs".to_string(),
        format!("/runs/{id}/journal"),
    ] {
        for auth in [None, Some("wrong-token"), Some("")] {
            let (st, v, _) = http(b.addr, "GET", &path, auth, None).await;
            assert_eq!(st, StatusCode::UNAUTHORIZED, "{path} {auth:?} {v}");
            assert_eq!(v["error"]["kind"], "unauthorized");
        }
    }
    let body = json!({ "decisions": [{ "id": 0, "approve": true }] });
    let (st, _, _) = http(
        b.addr,
        "POST",
        &format!("/runs/{id}/decisions"),
        Some("Bearer-less"),
        Some(&body),
    )
    .await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(target.hits("/a"), 0, "nothing ran before a decision");

    // B sees the run A paused, and lists it
    let (st, v) = get(b.addr, &format!("/runs/{id}")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["status"], "suspended");
    assert_eq!(v["pending"][0]["atom"], "httpFetch");
    let (_, v) = get(b.addr, "/runs?status=suspended").await;
    assert!(
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["runId"] == id.as_str()),
        "{v}"
    );
    let (st, v) = get(b.addr, &format!("/runs/{id}/journal")).await;
    assert_eq!(
        (st, &v["error"]["kind"]),
        (StatusCode::CONFLICT, &json!("notFinished"))
    );
    // a decision that names no pending call spends nothing
    let (st, v) = decide(b.addr, &id, 7, true).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");

    // decide on B: the first fetch runs, the run pauses again before the second
    let (st, v) = decide(b.addr, &id, 0, true).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["runId"], id.as_str());
    assert_eq!(v["pending"][0]["id"], 1, "{v}");
    assert_eq!((target.hits("/a"), target.hits("/b")), (1, 0));
    // the same decision again, on either instance: already decided
    let (st, v) = decide(a.addr, &id, 0, true).await;
    assert_eq!(
        (st, &v["error"]["kind"]),
        (StatusCode::CONFLICT, &json!("alreadyDecided")),
        "{v}"
    );
    let (st, v) = decide(a.addr, &id, 1, true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let paused_result = v["result"].clone();
    let paused_fuel = v["fuelUsed"].as_f64().unwrap();
    assert_eq!(
        paused_result,
        json!({ "a": "/a", "b": "/b", "seen": [1, 1] }),
        "{v}"
    );
    assert_eq!(
        (target.hits("/a"), target.hits("/b")),
        (1, 1),
        "each call made once"
    );
    let (st, v) = decide(b.addr, &id, 1, true).await;
    assert_eq!(
        (st, &v["error"]["kind"]),
        (StatusCode::CONFLICT, &json!("alreadyDecided")),
        "{v}"
    );
    let (st, v) = get(b.addr, &format!("/runs/{id}")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["status"], "done");
    assert_eq!(v["outcome"]["result"], paused_result);
    assert_eq!((target.hits("/a"), target.hits("/b")), (1, 1));

    // the store's latency and the suspended runs are in B's metrics
    let (st, _, text) = http(b.addr, "GET", "/metrics", None, None).await;
    assert_eq!(st, StatusCode::OK);
    let text = String::from_utf8_lossy(&text);
    for op in ["get", "claim", "complete"] {
        assert!(
            text.contains(&format!("ajs_store_seconds_count{{op=\"{op}\"}}")),
            "{op}: {text}"
        );
    }
    assert!(text.contains("ajs_runs_suspended "), "{text}");

    // the journal, fetched from B, replays offline to the same result
    let (st, _, journal) = http(
        b.addr,
        "GET",
        &format!("/runs/{id}/journal"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let agent = dir.join("agent.ajs");
    std::fs::write(&agent, AGENT).unwrap();
    let jpath = dir.join("run.journal");
    std::fs::write(&jpath, &journal).unwrap();
    let args = json!({ "url": target.url() }).to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .arg("replay")
        .arg(&agent)
        .arg("--journal")
        .arg(&jpath)
        .args(["--args", &args])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replayed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(replayed["result"], paused_result);
    assert_eq!(
        (target.hits("/a"), target.hits("/b")),
        (1, 1),
        "replay calls nothing"
    );

    // the unpaused run of the same program gives the same result
    let plain = dir.join("plain.json");
    std::fs::write(
        &plain,
        json!({ "fetch": { "domains": ["127.0.0.1:*"] } }).to_string(),
    )
    .unwrap();
    let fresh = Target::start().await;
    let out = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .arg("run")
        .arg(&agent)
        .arg("--config")
        .arg(&plain)
        .args(["--args", &json!({ "url": fresh.url() }).to_string()])
        .output()
        .unwrap();
    let unpaused: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(unpaused["result"], paused_result, "{unpaused}");
    // the budget continued across both pauses: the fuel is the unpaused run's, not a restart's
    assert_eq!(
        unpaused["fuelUsed"].as_f64(),
        Some(paused_fuel),
        "{unpaused}"
    );

    // the same decision raced on A and B: exactly one 200, one 409
    let id = pause(a.addr, &target).await;
    let (x, y) = tokio::join!(decide(a.addr, &id, 0, true), decide(b.addr, &id, 0, true));
    let mut statuses = [x.0, y.0];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::ACCEPTED, StatusCode::CONFLICT],
        "{x:?} {y:?}"
    );
    assert_eq!(target.hits("/a"), 2, "the raced decision ran its call once");
    // a denial: the guest gets a catchable error, no call is made
    let (st, v) = decide(b.addr, &id, 1, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("denied"),
        "{v}"
    );
    assert_eq!(target.hits("/b"), 1);

    // kill -9 of the pausing instance: the run is resumed from B
    let id = pause(a.addr, &target).await;
    a.kill9();
    let (st, v) = decide(b.addr, &id, 0, true).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let (st, v) = decide(b.addr, &id, 1, true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["a"], "/a");
    assert_eq!((target.hits("/a"), target.hits("/b")), (3, 2));

    // a run past its TTL is expired and cannot be resumed (410)
    let short = Serve::start(&serve_config(store, 1), dir, "short").await;
    let id = pause(short.addr, &target).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (st, v) = decide(b.addr, &id, 0, true).await;
    assert_eq!(
        (st, &v["error"]["kind"]),
        (StatusCode::GONE, &json!("expired")),
        "{v}"
    );
    let (_, v) = get(b.addr, &format!("/runs/{id}")).await;
    assert_eq!(v["status"], "expired");
    let (_, v) = get(b.addr, "/runs?status=expired").await;
    assert!(
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["runId"] == id.as_str()),
        "{v}"
    );
    assert_eq!(target.hits("/a"), 3, "the expired run's call never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_instances_pause_decide_race_kill_and_expire() {
    let dir = TempDir::new("sqlite");
    let store = format!("sqlite:{}", dir.0.join("runs.db").display());
    fleet_suite(&store, &dir.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_instances_pause_decide_race_kill_and_expire() {
    let Some(pg) = Postgres::start() else { return };
    let dir = TempDir::new("pg-serve");
    fleet_suite(&pg.url(), &dir.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_refuse_to_start_without_a_long_enough_key() {
    let dir = TempDir::new("nokey");
    let path = dir.0.join("c.json");
    std::fs::write(&path, serve_config("memory:", 60).to_string()).unwrap();
    for key in [None, Some("too-short")] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ajs"));
        cmd.args(["serve", "--config"])
            .arg(&path)
            .args(["--listen", "127.0.0.1:0"])
            .env_remove(KEY_ENV)
            .env(TOKEN_ENV, TOKEN);
        if let Some(k) = key {
            cmd.env(KEY_ENV, k);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(KEY_ENV), "{err}");
    }
}

/// A throwaway PostgreSQL cluster, stopped and removed on drop.
struct Postgres {
    dir: TempDir,
    bin: PathBuf,
    user: Option<String>,
    port: u16,
}

/// Where `initdb` is: on PATH, else the newest /usr/lib/postgresql/*/bin.
fn pg_bin() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            if d.join("initdb").is_file() && d.join("pg_ctl").is_file() {
                return Some(d);
            }
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| d.join("initdb").is_file())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop()
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// No PostgreSQL: under CI=true the test fails, else it is skipped with a note.
fn unavailable(why: &str) -> Option<Postgres> {
    assert!(!ci(), "CI=true and PostgreSQL cannot be started: {why}");
    eprintln!("skipping: PostgreSQL cannot be started ({why}); install the postgresql package");
    None
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Postgres {
    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        match &self.user {
            None => Command::new(exe),
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(exe);
                c
            }
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.0.join("data")
    }

    fn start() -> Option<Postgres> {
        let Some(bin) = pg_bin() else {
            return unavailable("initdb is neither on PATH nor under /usr/lib/postgresql/*/bin");
        };
        let dir = TempDir::new("pg");
        // PostgreSQL refuses to run as root: use its own account (or nobody)
        let user = is_root().then(|| {
            let has_postgres = Command::new("id")
                .arg("postgres")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if has_postgres { "postgres" } else { "nobody" }.to_string()
        });
        if let Some(u) = &user {
            let ok = Command::new("chown")
                .args(["-R", u])
                .arg(&dir.0)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return unavailable(&format!("cannot chown the cluster directory to {u}"));
            }
        }
        let pg = Postgres {
            dir,
            bin,
            user,
            port: free_port(),
        };
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(pg.data())
            .args(["-U", "ajs", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                return unavailable(&format!("initdb: {}", String::from_utf8_lossy(&o.stderr)))
            }
            Err(e) => return unavailable(&format!("initdb: {e}")),
        }
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            pg.port,
            pg.dir.0.display()
        );
        let out = pg
            .command("pg_ctl")
            .arg("-D")
            .arg(pg.data())
            .arg("-l")
            .arg(pg.dir.0.join("log"))
            .args(["-w", "-o", &opts, "start"])
            .output();
        match out {
            Ok(o) if o.status.success() => Some(pg),
            Ok(o) => {
                let log = std::fs::read_to_string(pg.dir.0.join("log")).unwrap_or_default();
                unavailable(&format!(
                    "pg_ctl start: {}{log}",
                    String::from_utf8_lossy(&o.stderr)
                ))
            }
            Err(e) => unavailable(&format!("pg_ctl: {e}")),
        }
    }

    fn url(&self) -> String {
        format!(
            "postgres://ajs@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Whoever can write the database cannot change what a run does or what deciders are shown:
/// a stored run with one byte flipped, or another run's sealed record moved under its id, is
/// refused when shown and when decided, and no host call runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_run_edited_in_the_database_is_refused() {
    let dir = TempDir::new("tamper");
    let spec = format!("sqlite:{}", dir.0.join("runs.db").display());
    let target = Target::start().await;
    let s = Serve::start(&serve_config(&spec, 3600), &dir.0, "s").await;
    let x = pause(s.addr, &target).await;
    let y = pause(s.addr, &target).await;
    let store = ajs::store::open(&spec).await.unwrap();
    let now = ajs::store::now_ms();
    // rewrite a record through the store's own transitions (claim, then suspend again)
    let rewrite = |id: String, bundle: Vec<u8>| {
        let store = store.clone();
        async move {
            let rec = store.get(&id, now).await.unwrap().unwrap();
            let v = store
                .claim(&id, rec.version, now, now + 60_000)
                .await
                .unwrap();
            let end = ajs::store::Completion::Suspended {
                bundle,
                pending: rec.pending.unwrap(),
                expires_ms: rec.expires_ms,
            };
            store.complete(&id, v, end).await.unwrap();
        }
    };
    let rec_x = store.get(&x, now).await.unwrap().unwrap();
    let rec_y = store.get(&y, now).await.unwrap().unwrap();
    // every tenth byte flipped in turn: the pending calls, the policy, the snapshot, the tag
    let mut refused = 0;
    for at in (0..rec_x.bundle.len()).step_by(rec_x.bundle.len() / 10 + 1) {
        let mut bad = rec_x.bundle.clone();
        bad[at] ^= 1;
        rewrite(x.clone(), bad).await;
        let (st, v) = get(s.addr, &format!("/runs/{x}")).await;
        assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "byte {at}: {v}");
        assert_eq!(v["error"]["kind"], "runRefused");
        let (st, v) = decide(s.addr, &x, 0, true).await;
        assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "byte {at}: {v}");
        refused += 1;
    }
    assert!(refused >= 10);
    // run y's intact record moved under run x's id
    rewrite(x.clone(), rec_y.bundle.clone()).await;
    let (st, v) = decide(s.addr, &x, 0, true).await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_eq!(target.hits("/a"), 0, "no refused run made a call");
    // the untouched run still resumes
    let (st, v) = decide(s.addr, &y, 0, true).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(target.hits("/a"), 1);
}

/// Instances starting at once on a fresh database each apply the schema safely (versioned
/// migrations under a lock), and a claim raced from several connections has one winner.
async fn stores_start_together_and_claim_once(spec: &str) {
    use ajs::store::{self, NewRun, StoreError};
    let opened = futures_join_all((0..4).map(|_| store::open(spec)).collect::<Vec<_>>()).await;
    let stores: Vec<_> = opened.into_iter().map(|s| s.expect("opens")).collect();
    let now = store::now_ms();
    for _ in 0..5 {
        let id = store::new_run_id().unwrap();
        stores[0]
            .insert(NewRun {
                id: id.clone(),
                bundle: vec![0; 64],
                pending: "[]".into(),
                created_ms: now,
                expires_ms: now + 60_000,
            })
            .await
            .unwrap();
        let claims = futures_join_all(
            stores
                .iter()
                .map(|s| s.claim(&id, 1, now, now + 60_000))
                .collect::<Vec<_>>(),
        )
        .await;
        let won = claims.iter().filter(|c| c.is_ok()).count();
        assert_eq!(won, 1, "{claims:?}");
        assert!(claims
            .iter()
            .all(|c| c.is_ok() || *c == Err(StoreError::AlreadyDecided)));
    }
}

/// Awaits every future (concurrently, on this task).
async fn futures_join_all<F: std::future::Future>(fs: Vec<F>) -> Vec<F::Output> {
    let mut fs: Vec<std::pin::Pin<Box<F>>> = fs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = (0..fs.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in fs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("ready")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stores_start_together_and_claim_once() {
    let Some(pg) = Postgres::start() else { return };
    stores_start_together_and_claim_once(&pg.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_stores_start_together_and_claim_once() {
    let dir = TempDir::new("sqlite-open");
    let spec = format!("sqlite:{}", dir.0.join("runs.db").display());
    stores_start_together_and_claim_once(&spec).await;
}

#[tokio::test]
async fn postgres_urls_with_a_downgradable_sslmode_are_refused() {
    for mode in ["prefer", "allow", "bogus"] {
        let url = format!("postgres://ajs:secret@127.0.0.1:1/db?sslmode={mode}");
        let Err(e) = ajs::store::open(&url).await else {
            panic!("{mode} accepted")
        };
        let m = e.to_string();
        assert!(m.contains("sslmode=require"), "{m}");
        assert!(!m.contains("secret"), "the password is not echoed: {m}");
    }
}

/// Posts a raw decisions body (any JSON) with the token.
async fn decide_raw(addr: std::net::SocketAddr, id: &str, body: &Value) -> (StatusCode, Value) {
    let (s, v, _) = http(
        addr,
        "POST",
        &format!("/runs/{id}/decisions"),
        Some(TOKEN),
        Some(body),
    )
    .await;
    (s, v)
}

/// One request with explicit headers: status and JSON body.
async fn http_with(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value) {
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
        .send_request(req.body(Full::new(Bytes::from(body.to_string()))).unwrap())
        .await
        .expect("answer");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The value of an unlabelled metric in a `/metrics` scrape.
async fn metric(addr: std::net::SocketAddr, name: &str) -> Option<f64> {
    let (_, _, text) = http(addr, "GET", "/metrics", None, None).await;
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_string))
        .and_then(|v| v.trim().parse().ok())
}

/// The same decision posted ten times at once to two instances is applied once (one 202, nine
/// 409 `alreadyDecided`, one host call); malformed decisions are 400s that leave the run
/// suspended and decidable; the scheme `bearer` is case-insensitive; `/runs` refuses
/// `text/plain` (415) and a foreign `Origin` (403); `ajs_runs_suspended` follows a suspension
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_race_tenfold_and_malformed_ones_spend_nothing() {
    let dir = TempDir::new("race10");
    let store = format!("sqlite:{}", dir.0.join("runs.db").display());
    race_tenfold(&store, &dir).await;
}

/// The same on PostgreSQL: ten copies of one decision on two instances, one applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_decisions_race_tenfold_and_malformed_ones_spend_nothing() {
    let Some(pg) = Postgres::start() else { return };
    let dir = TempDir::new("pg-race10");
    race_tenfold(&pg.url(), &dir).await;
}

async fn race_tenfold(store: &str, dir: &TempDir) {
    let target = Target::start().await;
    let mut config = serve_config(store, 3600);
    config["cors"] = json!({ "origins": ["https://ok.example"] });
    let a = Serve::start(&config, &dir.0, "a").await;
    let b = Serve::start(&config, &dir.0, "b").await;

    let id = pause(a.addr, &target).await;
    assert_eq!(metric(a.addr, "ajs_runs_suspended").await, Some(1.0));
    // malformed decisions: each a 400, none consumes the run
    for body in [
        json!({ "decisions": [{ "id": 3, "approve": true }] }),
        json!({ "decisions": [{ "approve": true }] }),
        json!({ "decisions": [{ "id": 0, "approve": true }, { "id": 0, "approve": true }] }),
        json!({ "decisions": [{ "id": 0, "approve": true }, { "id": 1, "approve": true }] }),
        json!({ "decisions": [] }),
        json!({ "decisions": [{ "id": -1, "approve": true }] }),
        json!({ "decisions": [{ "id": 0, "approve": "yes" }] }),
        json!({}),
    ] {
        let (st, v) = decide_raw(b.addr, &id, &body).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {v}");
        let (_, v) = get(a.addr, &format!("/runs/{id}")).await;
        assert_eq!(v["status"], "suspended", "{body}: {v}");
    }
    // the hardening reaches /runs
    let decision = json!({ "decisions": [{ "id": 0, "approve": true }] }).to_string();
    let auth = format!("Bearer {TOKEN}");
    let (st, v) = http_with(
        b.addr,
        "POST",
        &format!("/runs/{id}/decisions"),
        &[("authorization", &auth), ("content-type", "text/plain")],
        &decision,
    )
    .await;
    assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{v}");
    let (st, v) = http_with(
        b.addr,
        "GET",
        &format!("/runs/{id}"),
        &[("authorization", &auth), ("origin", "https://evil.example")],
        "",
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    let (st, v) = http_with(
        b.addr,
        "GET",
        &format!("/runs/{id}"),
        &[("authorization", &auth), ("origin", "https://ok.example")],
        "",
    )
    .await;
    assert_eq!(
        (st, &v["status"]),
        (StatusCode::OK, &json!("suspended")),
        "{v}"
    );
    // the auth scheme is case-insensitive (RFC 9110 §11.1)
    let lower = format!("bearer {TOKEN}");
    let (st, v) = http_with(
        b.addr,
        "GET",
        &format!("/runs/{id}"),
        &[("authorization", &lower)],
        "",
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(target.hits("/a"), 0, "nothing ran");

    // ten copies of the decision at once, alternating instances
    let tries: Vec<_> = (0..10)
        .map(|i| {
            let addr = if i % 2 == 0 { a.addr } else { b.addr };
            let id = id.clone();
            tokio::spawn(async move { decide(addr, &id, 0, true).await })
        })
        .collect();
    let mut won = 0;
    for t in tries {
        let (st, v) = t.await.unwrap();
        match st {
            StatusCode::ACCEPTED => won += 1,
            StatusCode::CONFLICT => assert_eq!(v["error"]["kind"], "alreadyDecided", "{v}"),
            other => panic!("{other}: {v}"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(target.hits("/a"), 1, "the decision ran its call once");
    let (st, v) = decide(b.addr, &id, 1, true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!((target.hits("/a"), target.hits("/b")), (1, 1));
    assert_eq!(metric(b.addr, "ajs_runs_suspended").await, Some(0.0));
}

/// With `collect`, both deferred calls are pending together: a decision for only one of them
/// is a 400 that leaves the run decidable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_decision_of_collected_calls_is_refused_and_spends_nothing() {
    let dir = TempDir::new("collect");
    let target = Target::start().await;
    let mut config = serve_config("memory:", 3600);
    config["approvals"]["atoms"] = json!([]);
    config["approvals"]["collect"] = json!(["httpFetch"]);
    let s = Serve::start(&config, &dir.0, "s").await;
    let body = json!({ "source": AGENT, "args": { "url": target.url() } });
    let (st, v, _) = http(s.addr, "POST", "/run", None, Some(&body)).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let id = v["runId"].as_str().unwrap().to_string();
    let pending = v["pending"].as_array().unwrap().len();
    assert_eq!(pending, 2, "{v}");
    let (st, v) = decide(s.addr, &id, 0, true).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    let (_, v) = get(s.addr, &format!("/runs/{id}")).await;
    assert_eq!(v["status"], "suspended", "{v}");
    let all = json!({ "decisions": [{ "id": 0, "approve": true }, { "id": 1, "approve": true }] });
    let (st, v) = decide_raw(s.addr, &id, &all).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!((target.hits("/a"), target.hits("/b")), (1, 1));
}

/// A run sealed under one key is refused by an instance with another; the token variable unset
/// refuses to start; an expired run is deleted once its grace has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_key_is_refused_no_token_refuses_start_and_grace_deletes() {
    let dir = TempDir::new("keys");
    let store = format!("sqlite:{}", dir.0.join("runs.db").display());
    let target = Target::start().await;
    let a = Serve::start(&serve_config(&store, 3600), &dir.0, "a").await;
    let id = pause(a.addr, &target).await;
    let path = dir.0.join("other.json");
    std::fs::write(&path, serve_config(&store, 1).to_string()).unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--listen", &addr.to_string()])
        .env(KEY_ENV, "another-key-0123456789abcdef0123456789")
        .env(TOKEN_ENV, TOKEN)
        .current_dir(&dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut up = false;
    for _ in 0..200 {
        if TcpStream::connect(addr).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up);
    let (st, v) = decide(addr, &id, 0, true).await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_eq!(v["error"]["kind"], "runRefused", "{v}");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(target.hits("/a"), 0, "the refused run made no call");
    let (st, v) = decide(a.addr, &id, 0, true).await;
    assert_eq!(
        st,
        StatusCode::ACCEPTED,
        "still decidable with its key: {v}"
    );

    // the token variable unset
    let out = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env(KEY_ENV, KEY)
        .env_remove(TOKEN_ENV)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(TOKEN_ENV));

    // expired, then past a grace of 0: the next instance's first sweep deletes it
    let short = Serve::start(&serve_config(&store, 1), &dir.0, "short").await;
    let id = pause(short.addr, &target).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (st, v) = decide(short.addr, &id, 0, true).await;
    assert_eq!(
        (st, &v["error"]["kind"]),
        (StatusCode::GONE, &json!("expired"))
    );
    let mut config = serve_config(&store, 1);
    config["approvals"]["graceSeconds"] = json!(0);
    let sweeper = Serve::start(&config, &dir.0, "sweeper").await;
    let mut gone = false;
    for _ in 0..40 {
        let (st, _) = get(sweeper.addr, &format!("/runs/{id}")).await;
        if st == StatusCode::NOT_FOUND {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "an expired run past its grace is deleted");
}

/// A record put back to `suspended` with the sealed bundle of an earlier suspension (a status
/// edited back, keeping its later version) is refused: replaying it would run an approved call
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_set_back_to_an_earlier_suspension_is_refused() {
    let dir = TempDir::new("setback");
    let spec = format!("sqlite:{}", dir.0.join("runs.db").display());
    let target = Target::start().await;
    let s = Serve::start(&serve_config(&spec, 3600), &dir.0, "s").await;
    let id = pause(s.addr, &target).await;
    let store = ajs::store::open(&spec).await.unwrap();
    let now = ajs::store::now_ms();
    let first = store.get(&id, now).await.unwrap().unwrap();
    let (st, v) = decide(s.addr, &id, 0, true).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(target.hits("/a"), 1);
    // the row set back to the first suspension's bundle and pending calls
    let rec = store.get(&id, now).await.unwrap().unwrap();
    let v = store
        .claim(&id, rec.version, now, now + 60_000)
        .await
        .unwrap();
    let end = ajs::store::Completion::Suspended {
        bundle: first.bundle.clone(),
        pending: first.pending.clone().unwrap(),
        expires_ms: first.expires_ms,
    };
    store.complete(&id, v, end).await.unwrap();
    let (st, v) = get(s.addr, &format!("/runs/{id}")).await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    let (st, v) = decide(s.addr, &id, 0, true).await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_eq!(v["error"]["kind"], "runRefused", "{v}");
    assert_eq!(target.hits("/a"), 1, "the approved call did not run twice");
}

/// The token goes to deciders and the key stays with the servers: one secret (or one variable)
/// for both refuses to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_refuse_one_secret_for_key_and_token() {
    let dir = TempDir::new("onesecret");
    let path = dir.0.join("c.json");
    std::fs::write(&path, serve_config("memory:", 60).to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env(KEY_ENV, KEY)
        .env(TOKEN_ENV, KEY)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("same secret"), "{err}");
    let mut config = serve_config("memory:", 60);
    config["approvals"]["tokenEnv"] = json!(KEY_ENV);
    std::fs::write(&path, config.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env(KEY_ENV, KEY)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use two variables"), "{err}");
}

/// A result written into the database (a run completed there with a forged outcome, or a
/// real outcome moved to another run) is refused when shown and its journal is not served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_forged_in_the_database_is_refused() {
    let dir = TempDir::new("forged");
    let spec = format!("sqlite:{}", dir.0.join("runs.db").display());
    let target = Target::start().await;
    let s = Serve::start(&serve_config(&spec, 3600), &dir.0, "s").await;
    let store = ajs::store::open(&spec).await.unwrap();
    // a real run, decided to its end
    let real = pause(s.addr, &target).await;
    assert_eq!(decide(s.addr, &real, 0, true).await.0, StatusCode::ACCEPTED);
    assert_eq!(decide(s.addr, &real, 1, true).await.0, StatusCode::OK);
    let (st, v) = get(s.addr, &format!("/runs/{real}")).await;
    assert_eq!((st, &v["status"]), (StatusCode::OK, &json!("done")), "{v}");
    let now = ajs::store::now_ms();
    let done = store.get(&real, now).await.unwrap().unwrap();
    let outcome = done.outcome.clone().unwrap();
    let json_at = outcome.find('{').unwrap();
    let forge = |id: String, outcome: String, journal: Option<Vec<u8>>| {
        let store = store.clone();
        async move {
            let rec = store.get(&id, now).await.unwrap().unwrap();
            let v = store
                .claim(&id, rec.version, now, now + 60_000)
                .await
                .unwrap();
            let end = ajs::store::Completion::Done {
                outcome,
                journal,
                keep_until_ms: now + 3_600_000,
            };
            store.complete(&id, v, end).await.unwrap();
        }
    };
    for (n, forged) in [
        r#"{"result":"forged","fuelUsed":1}"#.to_string(),
        format!(
            "{}{}",
            &outcome[..json_at],
            r#"{"result":"forged","fuelUsed":1}"#
        ),
        outcome.clone(),
    ]
    .into_iter()
    .enumerate()
    {
        let id = pause(s.addr, &target).await;
        forge(id.clone(), forged, done.journal.clone()).await;
        let (st, v) = get(s.addr, &format!("/runs/{id}")).await;
        assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "forgery {n}: {v}");
        assert_eq!(v["error"]["kind"], "runRefused", "{v}");
        let (st, _, _) = http(
            s.addr,
            "GET",
            &format!("/runs/{id}/journal"),
            Some(TOKEN),
            None,
        )
        .await;
        assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "forgery {n}");
    }
    // the real run still reads
    let (st, v) = get(s.addr, &format!("/runs/{real}")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["outcome"]["result"]["a"], "/a", "{v}");
}
