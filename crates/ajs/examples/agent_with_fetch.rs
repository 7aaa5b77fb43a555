//! An agent that fetches over HTTP with the built-in client, against a stub server this example
//! starts on 127.0.0.1: `cargo run -p ajs --example agent_with_fetch`.
//!
//! The fetch policy names the only host the agent may reach; every request carries the agent
//! depth header; quotas bound the calls. Needs the `http` feature (on by default).

use ajs::{FetchPolicy, Options, Runner};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const AGENT: &str = "function cheapest({ base: 'http://127.0.0.1:1', budget: 100 }) {\n\
                       let items = httpFetch({ url: base + '/products' })\n\
                       let ok = items.filter(x => x.price <= budget)\n\
                       ok.sort((a, b) => a.price - b.price)\n\
                       return { count: ok.length, first: ok.length > 0 ? ok[0].name : null }\n\
                     }";

/// Answers every request with the same JSON list (one request per connection).
async fn stub_server(listener: TcpListener) {
    let body = json!([
        { "name": "widget", "price": 40 },
        { "name": "gadget", "price": 250 },
        { "name": "gizmo", "price": 15 }
    ])
    .to_string();
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let body = body.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
        });
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            println!("skipped: cannot listen on 127.0.0.1 here ({e})");
            return;
        }
    };
    let port = listener.local_addr().expect("bound").port();
    tokio::spawn(stub_server(listener));

    let options = Options {
        // with `domains` set and no `fetch` capability, the built-in client does the request
        fetch_policy: Some(FetchPolicy {
            domains: Some(vec!["127.0.0.1".into()]),
            ..FetchPolicy::default()
        }),
        timeout_ms: 10_000,
        ..Options::default()
    };
    let runner = Runner {
        quotas: [("httpFetch".to_string(), 3)].into(),
        ..Runner::default()
    };
    let args = json!({ "base": format!("http://127.0.0.1:{port}"), "budget": 100 });
    let out = runner.run_agent(AGENT, &args, &options).await;
    println!("fuel used: {}", out.fuel_used);
    match out.into_result() {
        Ok(v) => {
            println!("result: {}", v.display());
            assert_eq!(v.to_json(), Some(json!({ "count": 2, "first": "gizmo" })));
        }
        // a policy that keeps loopback out is not this example's failure
        Err(e) if e.message.contains("blocked") => println!("skipped: {e}"),
        Err(e) => panic!("the agent failed: {e}"),
    }
}
