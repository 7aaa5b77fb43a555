//! A bounded load test of the run endpoint on loopback:
//! `cargo run --release -p ajs-cli --example loadtest [REQUESTS] [CLIENTS]` (default 5000, 32).
//!
//! Starts the server in-process on 127.0.0.1:0, sends exactly REQUESTS runs from CLIENTS
//! concurrent keep-alive connections, checks that every answer belongs to its request (each
//! carries a unique id the agent echoes back), then stops the server and prints throughput,
//! latency percentiles and the process's peak RSS (VmHWM). Exits 1 on any lost, failed or
//! mixed-up response.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ajs::{Options, Runner};
use ajs_runner::{Server, ServerConfig};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

const AGENT: &str = "function main({ id: 0, tag: '', items: [1] }) {\n  let total = 0\n  let i = 0\n  while (i < items.length) { total = total + items[i] * 2\n i = i + 1 }\n  return { id, tag: tag.toUpperCase(), total }\n}";

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let requests: usize = argv.next().and_then(|s| s.parse().ok()).unwrap_or(5000);
    let clients: usize = argv.next().and_then(|s| s.parse().ok()).unwrap_or(32);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let ok = rt.block_on(load(requests, clients));
    std::process::exit(if ok { 0 } else { 1 });
}

async fn load(requests: usize, clients: usize) -> bool {
    let program = Runner::compile_agent(AGENT, &Options::default()).expect("compiles");
    let artifact = base64::engine::general_purpose::STANDARD.encode(program.to_bytes());
    let config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        limits: ajs_runner::Limits {
            max_concurrent_runs: clients.max(1),
            ..Default::default()
        },
        ..Default::default()
    };
    let server = Server::bind(config).await.expect("binds");
    let addr = server.local_addr();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(server.run(async {
        let _ = stop_rx.await;
    }));

    let next = Arc::new(AtomicUsize::new(0));
    let artifact = Arc::new(artifact);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let next = next.clone();
        let artifact = artifact.clone();
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr)
                .await
                .expect("connects");
            stream.set_nodelay(true).ok();
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .expect("handshake");
            tokio::spawn(conn);
            let mut latencies = Vec::new();
            let mut bad = Vec::new();
            loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                if id >= requests {
                    break;
                }
                let items: Vec<usize> = (0..(id % 20)).collect();
                let want_total: usize = items.iter().map(|x| x * 2).sum();
                let body = json!({
                    "artifact": *artifact,
                    "args": { "id": id, "tag": format!("req-{id}"), "items": items },
                });
                let req = Request::post("/run")
                    .header("host", addr.to_string())
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body.to_string())))
                    .expect("request");
                let t = Instant::now();
                let answer = match send.send_request(req).await {
                    Ok(resp) => {
                        let status = resp.status();
                        match resp.into_body().collect().await {
                            Ok(b) => Some((status, b.to_bytes())),
                            Err(_) => None,
                        }
                    }
                    Err(_) => None,
                };
                latencies.push(t.elapsed());
                let expected = json!({ "id": id, "tag": format!("REQ-{id}"), "total": want_total });
                match answer {
                    Some((s, b)) if s.is_success() => {
                        let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
                        if v["result"] != expected {
                            bad.push(format!("request {id}: got {v}"));
                        }
                    }
                    Some((s, b)) => {
                        bad.push(format!(
                            "request {id}: status {s}: {}",
                            String::from_utf8_lossy(&b)
                        ));
                    }
                    None => bad.push(format!("request {id}: no answer")),
                }
            }
            (latencies, bad)
        }));
    }
    let mut latencies: Vec<Duration> = Vec::with_capacity(requests);
    let mut bad = Vec::new();
    for t in tasks {
        let (l, b) = t.await.expect("client task");
        latencies.extend(l);
        bad.extend(b);
    }
    let elapsed = started.elapsed();
    let _ = stop_tx.send(());
    let _ = served.await;

    latencies.sort();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1000.0
    };
    println!("requests: {requests} from {clients} concurrent keep-alive clients (loopback)");
    println!(
        "answered: {} ({} wrong, lost or failed)",
        latencies.len(),
        bad.len()
    );
    println!(
        "wall time: {:.2} s, throughput: {:.0} runs/s",
        elapsed.as_secs_f64(),
        requests as f64 / elapsed.as_secs_f64()
    );
    if !latencies.is_empty() {
        println!(
            "latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            pct(0.50),
            pct(0.90),
            pct(0.99),
            latencies.last().unwrap().as_secs_f64() * 1000.0
        );
    }
    match peak_rss_kib() {
        Some(k) => println!(
            "peak RSS (VmHWM, server and clients in one process): {:.1} MiB",
            k as f64 / 1024.0
        ),
        None => println!("peak RSS: unavailable (no /proc/self/status)"),
    }
    for b in bad.iter().take(10) {
        eprintln!("{b}");
    }
    bad.is_empty() && latencies.len() == requests
}
