//! `ajs serve` against browsers and vanished clients: 415 for a body not declared JSON, 403 for
//! an unlisted `Origin` (CORS for a listed one), a disconnect cancelling its run and its host
//! calls, and `GET /metrics` in the Prometheus text format.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ajs_runner::server::metrics::Metrics;
use ajs_runner::ServerConfig;
use hyper::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{artifact, post, run, send, start, DOUBLE, FETCHER};

const APP: &str = "https://app.example.com";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_bodies_must_be_declared_json() {
    let s = start(json!({})).await;
    let body = json!({ "artifact": artifact(DOUBLE), "args": { "n": 2 } })
        .to_string()
        .into_bytes();
    let kind = |v: &Value| v["error"]["kind"].as_str().unwrap_or("").to_string();
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin1",
        "application/jsonx",
    ] {
        let (st, v) = post(
            s.addr,
            "/run",
            "POST",
            &[("content-type", ct)],
            body.clone(),
        )
        .await;
        assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct}: {v}");
        assert_eq!(kind(&v), "unsupportedMediaType");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(
            m.contains("Content-Type: application/json") && m.contains(ct),
            "says what to send and what came: {m}"
        );
    }
    // no Content-Type at all
    let (st, _, _) = send(s.addr, "/run", "POST", &[], body.clone()).await;
    assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    for ct in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=\"UTF-8\"",
    ] {
        let (st, v) = post(
            s.addr,
            "/run",
            "POST",
            &[("content-type", ct)],
            body.clone(),
        )
        .await;
        assert_eq!(st, StatusCode::OK, "{ct}: {v}");
        assert_eq!(v["result"], json!({ "twice": 4 }));
    }
    // GET needs no body and no Content-Type
    let (st, _, _) = send(s.addr, "/healthz", "GET", &[], vec![]).await;
    assert_eq!(st, StatusCode::OK);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused_and_a_listed_one_gets_cors_headers() {
    let s = start(json!({ "cors": { "origins": [APP] } })).await;
    let body = json!({ "artifact": artifact(DOUBLE), "args": { "n": 5 } })
        .to_string()
        .into_bytes();
    // the CSRF of the issue: a simple request (text/plain) from a foreign page
    for ct in ["text/plain", "application/json"] {
        let (st, h, b) = send(
            s.addr,
            "/run",
            "POST",
            &[("origin", "https://evil.example"), ("content-type", ct)],
            body.clone(),
        )
        .await;
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(st, StatusCode::FORBIDDEN, "{ct}: {v}");
        assert_eq!(v["error"]["kind"], "originRefused");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cors.origins"),
            "{v}"
        );
        assert!(h.get("access-control-allow-origin").is_none());
    }
    // nothing ran
    let m = scrape(s.addr).await;
    assert_eq!(m[r#"ajs_runs_total{outcome="ok"}"#], 0.0);
    // every endpoint, and a `null` origin (sandboxed frames)
    for (path, method, origin) in [
        ("/healthz", "GET", "https://evil.example"),
        ("/metrics", "GET", "https://evil.example"),
        ("/run", "POST", "null"),
        ("/run", "POST", "https://app.example.com.evil.example"),
        ("/run", "POST", "http://app.example.com"),
    ] {
        let (st, _) = post(s.addr, path, method, &[("origin", origin)], body.clone()).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{method} {path} from {origin}");
    }
    // a listed origin runs and may read the answer
    let (st, h, b) = send(
        s.addr,
        "/run",
        "POST",
        &[("origin", APP), ("content-type", "application/json")],
        body.clone(),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["result"],
        json!({ "twice": 10 })
    );
    assert_eq!(h["access-control-allow-origin"], APP);
    assert_eq!(h["vary"], "Origin");
    // but still only with a JSON body
    let (st, h, _) = send(
        s.addr,
        "/run",
        "POST",
        &[("origin", APP), ("content-type", "text/plain")],
        body.clone(),
    )
    .await;
    assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(h["access-control-allow-origin"], APP);
    // the preflight: answered for a listed origin, refused for another
    let preflight = [
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", "content-type"),
    ];
    let (st, h, b) = send(
        s.addr,
        "/run",
        "OPTIONS",
        &[&[("origin", APP)][..], &preflight[..]].concat(),
        vec![],
    )
    .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    assert!(b.is_empty());
    assert_eq!(h["access-control-allow-origin"], APP);
    assert!(h["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .contains("POST"));
    assert!(h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .contains("content-type"));
    let (st, h, _) = send(
        s.addr,
        "/run",
        "OPTIONS",
        &[&[("origin", "https://evil.example")][..], &preflight[..]].concat(),
        vec![],
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(h.get("access-control-allow-origin").is_none());
    s.shutdown().await;

    // origins are checked when the configuration is read
    for bad in [
        json!({ "cors": { "origins": ["*"] } }),
        json!({ "cors": { "origins": ["null"] } }),
        json!({ "cors": { "origins": ["https://app.example.com/"] } }),
        json!({ "cors": { "origins": ["app.example.com"] } }),
        json!({ "cors": { "origin": [APP] } }),
    ] {
        let e = ServerConfig::parse(&bad.to_string(), false).unwrap_err();
        assert!(e.contains("origin"), "{bad}: {e}");
    }
    let toml = "[cors]\norigins = [\"https://app.example.com\", \"http://localhost:3000\"]\n";
    assert!(ServerConfig::parse(toml, true).is_ok());
}

/// Sends a run request on a raw connection and returns the connection (dropping it is the
/// client going away).
async fn open_run(addr: std::net::SocketAddr, body: &Value) -> TcpStream {
    let body = body.to_string();
    let mut c = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /run HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(body.as_bytes()).await.unwrap();
    c
}

/// Waits (up to `within`) until `ajs_runs_total{outcome="cancelled"}` reaches `n` and nothing
/// is in flight; the time it took.
async fn until_cancelled(addr: std::net::SocketAddr, n: f64, within: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let m = scrape(addr).await;
        if m[r#"ajs_runs_total{outcome="cancelled"}"#] == n && m["ajs_runs_in_flight"] == 0.0 {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < within,
            "not cancelled within {within:?}: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_disconnect_cancels_its_run_and_its_host_calls() {
    let s = start(json!({
        "fetch": { "domains": ["127.0.0.1:*"] },
        "limits": { "maxConcurrentRuns": 1, "maxFuel": 1e12, "maxTimeoutMs": 120000 }
    }))
    .await;
    // a run computing: fuel for minutes
    let spin = json!({
        "artifact": artifact("function main() { let i = 0\n while (true) { i++ } }"),
        "options": { "fuel": 1e11, "timeoutMs": 120000 }
    });
    let c = open_run(s.addr, &spin).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = scrape(s.addr).await;
    assert_eq!(m["ajs_runs_in_flight"], 1.0, "the run computes");
    drop(c);
    let took = until_cancelled(s.addr, 1.0, Duration::from_secs(1)).await;
    eprintln!("computing run cancelled {took:?} after the disconnect");
    // its slot is free again (one slot): the next run is served, not 503
    let (st, v) = run(
        s.addr,
        json!({ "artifact": artifact(DOUBLE), "args": { "n": 1 } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");

    // a run waiting on a host call that never answers: the call is dropped too
    let stub = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slow", stub.local_addr().unwrap());
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    let (accepted_tx, accepted_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut conn, _) = stub.accept().await.unwrap();
        let _ = accepted_tx.send(());
        let mut buf = [0u8; 4096];
        // read the request, then never answer: a read of 0 bytes is the server hanging up
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = closed_tx.send(());
    });
    let fetch = json!({
        "artifact": artifact(FETCHER),
        "args": { "url": url },
        "options": { "timeoutMs": 120000 }
    });
    let c = open_run(s.addr, &fetch).await;
    tokio::time::timeout(Duration::from_secs(5), accepted_rx)
        .await
        .expect("the fetch reached the stub")
        .unwrap();
    let dropped = Instant::now();
    drop(c);
    tokio::time::timeout(Duration::from_secs(1), closed_rx)
        .await
        .expect("the in-flight fetch is dropped within a second of the disconnect")
        .unwrap();
    eprintln!(
        "in-flight fetch closed {:?} after the disconnect",
        dropped.elapsed()
    );
    until_cancelled(s.addr, 2.0, Duration::from_secs(1)).await;
    s.shutdown().await;
}

/// `GET /metrics` as a map from series (name and labels, as written) to value, after checking
/// every line against the Prometheus text format.
async fn scrape(addr: std::net::SocketAddr) -> HashMap<String, f64> {
    let (st, h, b) = send(addr, "/metrics", "GET", &[], vec![]).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        h["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    parse_exposition(std::str::from_utf8(&b).expect("UTF-8"))
}

/// A metric or label name: `[a-zA-Z_:][a-zA-Z0-9_:]*` (labels without `:`).
fn is_name(s: &str, colon: bool) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':');
    s.chars()
        .next()
        .is_some_and(|c| !c.is_ascii_digit() && ok(c))
        && s.chars().all(ok)
}

/// Checks every line of a text exposition and returns its samples. Each sample's family has a
/// `# TYPE` line before it; histograms' buckets are cumulative and end with `+Inf` equal to
/// `_count`; every name starts with `ajs_`.
fn parse_exposition(text: &str) -> HashMap<String, f64> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    let mut last_bucket: HashMap<String, f64> = HashMap::new();
    assert!(text.ends_with('\n'), "ends with a newline");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kw, name, what) = (parts.next(), parts.next(), parts.next());
            let name = name.unwrap_or_else(|| panic!("bad comment: {line}"));
            assert!(is_name(name, true), "{line}");
            match kw {
                Some("HELP") => assert!(what.is_some_and(|w| !w.is_empty()), "{line}"),
                Some("TYPE") => {
                    let t = what.unwrap_or("");
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t),
                        "{line}"
                    );
                    assert!(
                        types.insert(name.to_string(), t.to_string()).is_none(),
                        "one TYPE per family: {line}"
                    );
                }
                _ => panic!("unknown comment: {line}"),
            }
            continue;
        }
        assert!(!line.is_empty() && !line.starts_with('#'), "{line:?}");
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value of {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, ""),
            Some((n, l)) => (n, l.strip_suffix('}').unwrap_or_else(|| panic!("{line}"))),
        };
        assert!(is_name(name, true) && name.starts_with("ajs_"), "{line}");
        let mut le = None;
        let mut others = Vec::new();
        if !labels.is_empty() {
            for pair in labels.split(',') {
                let (k, v) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                assert!(is_name(k, false), "label name in {line}");
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or_else(|| panic!("label value quoted in {line}"));
                assert!(!v.contains(['"', '\\', '\n']), "{line}");
                if k == "le" {
                    le = Some(v.to_string());
                } else {
                    others.push(pair.to_string());
                }
            }
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suf| {
                name.strip_suffix(suf)
                    .filter(|b| types.get(*b).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE before {line}");
        if name.ends_with("_bucket") {
            let le = le.unwrap_or_else(|| panic!("a bucket without le: {line}"));
            let key = format!("{family}{{{}}}", others.join(","));
            let prev = last_bucket.insert(key.clone(), value).unwrap_or(0.0);
            assert!(value >= prev, "buckets are cumulative: {line}");
            if le == "+Inf" {
                last_bucket.insert(format!("{key}+Inf"), value);
            }
        }
        assert!(
            samples.insert(series.to_string(), value).is_none(),
            "one sample per series: {line}"
        );
    }
    // every histogram's +Inf bucket is its count
    for (key, inf) in last_bucket.iter().filter(|(k, _)| k.ends_with("+Inf")) {
        let series = key.trim_end_matches("+Inf");
        let (family, labels) = series.split_once('{').unwrap();
        let labels = labels.trim_end_matches('}');
        let count = if labels.is_empty() {
            format!("{family}_count")
        } else {
            format!("{family}_count{{{labels}}}")
        };
        assert_eq!(samples.get(&count), Some(inf), "{count}");
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text_and_move_after_runs() {
    let s = start(json!({})).await;
    let before = scrape(s.addr).await;
    for family in [
        r#"ajs_runs_total{outcome="ok"}"#,
        r#"ajs_runs_total{outcome="outOfFuel"}"#,
        r#"ajs_runs_total{outcome="cancelled"}"#,
        "ajs_fuel_used_total",
        "ajs_run_duration_seconds_count",
        "ajs_runs_suspended",
        "ajs_runs_in_flight",
    ] {
        assert_eq!(before.get(family), Some(&0.0), "{family}");
    }
    let (st, ok) = run(
        s.addr,
        json!({ "artifact": artifact(DOUBLE), "args": { "n": 3 } }),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (_, oof) = run(
        s.addr,
        json!({ "artifact": artifact("function main() { while (true) {} }"), "options": { "fuel": 5 } }),
    )
    .await;
    assert_eq!(oof["error"]["kind"], "outOfFuel");
    // refused before running: not a run
    let (st, _) = run(s.addr, json!({ "artifact": "%%%" })).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let after = scrape(s.addr).await;
    assert_eq!(after[r#"ajs_runs_total{outcome="ok"}"#], 1.0);
    assert_eq!(after[r#"ajs_runs_total{outcome="outOfFuel"}"#], 1.0);
    assert_eq!(after["ajs_run_duration_seconds_count"], 2.0);
    assert!(after["ajs_run_duration_seconds_sum"] > 0.0);
    let fuel = after["ajs_fuel_used_total"];
    let spent = ok["fuelUsed"].as_f64().unwrap() + oof["fuelUsed"].as_f64().unwrap();
    assert!((fuel - spent).abs() < 0.002, "{fuel} is the runs' {spent}");
    assert_eq!(after["ajs_runs_in_flight"], 0.0);
    s.shutdown().await;

    // what the run store reports: the suspended gauge and its latency histogram by operation
    let m = Metrics::default();
    m.set_suspended(3);
    m.observe_store("claim", Duration::from_micros(700));
    m.observe_store("claim", Duration::from_millis(30));
    m.observe_store("insert", Duration::from_secs(9));
    let samples = parse_exposition(&m.render());
    assert_eq!(samples["ajs_runs_suspended"], 3.0);
    assert_eq!(samples[r#"ajs_store_seconds_count{op="claim"}"#], 2.0);
    assert_eq!(
        samples[r#"ajs_store_seconds_bucket{op="claim",le="0.001"}"#],
        1.0
    );
    assert_eq!(
        samples[r#"ajs_store_seconds_bucket{op="claim",le="0.05"}"#],
        2.0
    );
    assert_eq!(
        samples[r#"ajs_store_seconds_bucket{op="insert",le="2.5"}"#],
        0.0
    );
    assert_eq!(
        samples[r#"ajs_store_seconds_bucket{op="insert",le="+Inf"}"#],
        1.0
    );
}
