//! The built-in `httpFetch` client against a loopback server (plain HTTP and HTTPS with a
//! certificate made at test time): no redirects followed, no cookies, the depth header, the
//! body cap, timeouts and cancellation that close the connection, refusals that open none.

use crate::capabilities_support as support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ajs::{
    CancellationToken, Capabilities, ErrorKind, Eval, FetchPolicy, HttpClient, JsValue, Options,
    Outcome, Runner,
};
use serde_json::{json, Value};
use support::{json_ok, response, serve, Reply};

fn policy(domains: &[&str], methods: &[&str]) -> Option<FetchPolicy> {
    Some(FetchPolicy {
        domains: Some(domains.iter().map(|s| s.to_string()).collect()),
        methods: methods.iter().map(|s| s.to_string()).collect(),
        headers: vec![],
    })
}

fn opts() -> Options {
    Options {
        fetch_policy: policy(&["127.0.0.1"], &["POST"]),
        ..Options::default()
    }
}

async fn eval(code: &str, ctx: Value, options: Options) -> Outcome {
    Eval::new(code).context(ctx).options(options).run().await
}

fn result(out: &Outcome) -> Value {
    if let Some(e) = &out.error {
        panic!("run failed: {}", e.message);
    }
    out.result.to_json().unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread")]
async fn get_json_with_depth_header_and_guest_headers_no_cookies() {
    let server = serve(None, |_| json_ok(r#"{"items":[1,2,3]}"#)).await;
    let out = eval(
        "return httpFetch({ url, headers: { Accept: 'application/json', 'x-api-key': 'k1' } }).items.length",
        json!({ "url": server.url("http", "/data?q=1") }),
        opts(),
    )
    .await;
    assert_eq!(result(&out), json!(3));
    let reqs = server.recorded();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.line(), "GET /data?q=1 HTTP/1.1");
    assert_eq!(r.header("x-agent-depth").as_deref(), Some("1"));
    assert_eq!(r.header("accept").as_deref(), Some("application/json"));
    assert_eq!(r.header("x-api-key").as_deref(), Some("k1"));
    assert_eq!(r.header("cookie"), None);
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.header("host"), Some(server.addr.to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn text_body_and_full_shape_with_safe_headers_only() {
    let server = serve(None, |_| {
        response(
            "404 Not Found",
            &[
                ("content-type", "text/plain"),
                ("set-cookie", "s=1"),
                ("x-internal", "secret"),
                ("etag", "\"v1\""),
            ],
            "no such thing",
        )
    })
    .await;
    let url = server.url("http", "/missing");
    let out = eval("return httpFetch({ url })", json!({ "url": url }), opts()).await;
    assert_eq!(result(&out), json!("no such thing"));
    let out = eval(
        "return httpFetch({ url, responseType: 'full' })",
        json!({ "url": url }),
        opts(),
    )
    .await;
    let full = result(&out);
    assert_eq!(full["ok"], json!(false));
    assert_eq!(full["status"], json!(404));
    assert_eq!(full["body"], json!("no such thing"));
    assert_eq!(full["headers"]["etag"], json!("\"v1\""));
    assert_eq!(full["headers"]["content-type"], json!("text/plain"));
    assert!(full["headers"].get("set-cookie").is_none(), "{full}");
    assert!(full["headers"].get("x-internal").is_none(), "{full}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_is_returned_not_followed() {
    let server = serve(None, |r| {
        if r.line().starts_with("GET /start") {
            response(
                "302 Found",
                &[("location", "http://127.0.0.1:1/elsewhere")],
                "",
            )
        } else {
            json_ok("\"followed\"")
        }
    })
    .await;
    let out = eval(
        "let r = httpFetch({ url, responseType: 'full' })\nreturn { status: r.status, ok: r.ok, location: r.headers.location }",
        json!({ "url": server.url("http", "/start") }),
        opts(),
    )
    .await;
    assert_eq!(
        result(&out),
        json!({ "status": 302, "ok": false, "location": "http://127.0.0.1:1/elsewhere" })
    );
    assert_eq!(server.recorded().len(), 1, "the redirect was followed");
}

#[tokio::test(flavor = "multi_thread")]
async fn post_bodies_string_as_is_other_values_as_json() {
    let server = serve(None, |_| json_ok("{}")).await;
    let url = server.url("http", "/in");
    let out = eval(
        "httpFetch({ url, method: 'POST', body: { name: 'x', n: [1, 2] } })\nhttpFetch({ url, method: 'post', body: 'plain text', headers: { 'Content-Type': 'text/plain' } })\nreturn 1",
        json!({ "url": url }),
        opts(),
    )
    .await;
    assert_eq!(result(&out), json!(1));
    let reqs = server.recorded();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].line().starts_with("POST /in "));
    assert_eq!(
        reqs[0].header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&reqs[0].body).unwrap(),
        json!({ "name": "x", "n": [1, 2] })
    );
    assert_eq!(
        reqs[1].header("content-type").as_deref(),
        Some("text/plain")
    );
    assert_eq!(reqs[1].body, b"plain text");
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_header_or_method_opens_no_connection() {
    let server = serve(None, |_| json_ok("{}")).await;
    let url = server.url("http", "/x");
    let strict = Options {
        fetch_policy: policy(&["127.0.0.1"], &[]),
        ..Options::default()
    };
    for code in [
        "try { httpFetch({ url, headers: { Cookie: 'a=1' } }) } catch (e) { return e }",
        "try { httpFetch({ url, method: 'DELETE' }) } catch (e) { return e }",
        "try { httpFetch({ url, headers: { 'X-Agent-Depth': '0' } }) } catch (e) { return e }",
        "try { httpFetch({ url: 'http://localhost:1/' }) } catch (e) { return e }",
    ] {
        let out = eval(code, json!({ "url": url }), strict.clone()).await;
        let msg = result(&out);
        assert!(
            msg.as_str().unwrap().starts_with("Fetch blocked"),
            "{code}: {msg}"
        );
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn incoming_depth_plus_one_and_refusal_at_ten() {
    let server = serve(None, |_| json_ok("{}")).await;
    let runner = Runner {
        depth: 3,
        ..Runner::default()
    };
    let ctx = json!({ "url": server.url("http", "/d") });
    let out = runner
        .run_eval(
            "return httpFetch({ url })",
            ctx.as_object().unwrap(),
            &opts(),
        )
        .await;
    result(&out);
    assert_eq!(
        server.recorded()[0].header("x-agent-depth").as_deref(),
        Some("4")
    );
    let deep = Runner {
        depth: 10,
        ..Runner::default()
    };
    let out = deep
        .run_eval(
            "try { return httpFetch({ url }) } catch (e) { return e }",
            ctx.as_object().unwrap(),
            &opts(),
        )
        .await;
    assert!(result(&out)
        .as_str()
        .unwrap()
        .starts_with("Agent request depth exceeded (max 10)"));
    assert_eq!(server.recorded().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_body_cap_stops_reading_and_ends_the_run() {
    let server = serve(None, |_| Reply::Stream(64 * 1024 * 1024)).await;
    let options = Options {
        membrane_max_bytes: 100_000,
        ..opts()
    };
    let start = Instant::now();
    let out = eval(
        "try { httpFetch({ url }) \n return 'got it' } catch (e) { return 'caught' }",
        json!({ "url": server.url("http", "/big") }),
        options,
    )
    .await;
    let e = out.error.expect("the run ends");
    assert_eq!(e.kind, ErrorKind::Boundary);
    assert_eq!(
        e.message,
        "Capability boundary rejected the return of 'httpFetch': the response body is over the 100000-byte limit (membraneMaxBytes)"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(
        server.wait_closed(1, Duration::from_secs(5)).await,
        "the client kept reading"
    );
}

/// A body of tiny values, as large as the body cap lets it be: `[[],[],…]` or `[{"a":0},…]`
/// (1.4 million or half a million values, many times the run's heap once parsed).
fn tiny_nodes(unit: &str) -> String {
    let n = (4 * 1024 * 1024 - 2) / (unit.len() + 1);
    format!("[{}{unit}]", format!("{unit},").repeat(n - 1))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_of_tiny_values_is_refused_before_it_is_built() {
    for unit in ["[]", r#"{"a":0}"#] {
        let body = tiny_nodes(unit);
        assert!(body.len() <= 4 * 1024 * 1024);
        let server = serve(None, move |_| json_ok(&body)).await;
        let start = Instant::now();
        let out = eval(
            "try { return httpFetch({ url }).length } catch (e) { return 'caught' }",
            json!({ "url": server.url("http", "/tiny") }),
            opts(),
        )
        .await;
        let e = out.error.unwrap_or_else(|| panic!("{unit}: the run ends"));
        assert_eq!(e.kind, ErrorKind::Boundary, "{}", e.message);
        assert!(
            e.message.starts_with(
                "Capability boundary rejected the return of 'httpFetch': the response body, parsed, would take more than the "
            ) && e.message.ends_with(
                "bytes the run's heap has room for (maxHeapBytes); raise maxHeapBytes or fetch less"
            ),
            "{}",
            e.message
        );
        assert!(start.elapsed() < Duration::from_secs(10), "{unit}");
    }
    // the same shape, smaller, fits the heap's room and arrives whole
    let body = format!("[{}[]]", "[],".repeat(99_999));
    let server = serve(None, move |_| json_ok(&body)).await;
    let out = eval(
        "let a = httpFetch({ url }) \n return [a.length, a[99999].length]",
        json!({ "url": server.url("http", "/fits") }),
        opts(),
    )
    .await;
    assert_eq!(result(&out), json!([100000, 0]));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_run_timeout_closes_the_request() {
    let server = serve(None, |_| Reply::Hang).await;
    let options = Options {
        timeout_ms: 300,
        ..opts()
    };
    let start = Instant::now();
    let out = eval(
        "try { return httpFetch({ url }) } catch (e) { return 'caught' }",
        json!({ "url": server.url("http", "/slow") }),
        options,
    )
    .await;
    let e = out.error.expect("timed out");
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(e.message.starts_with("Execution timeout after 300ms"));
    assert!(start.elapsed() < Duration::from_secs(3));
    assert!(
        server.wait_closed(1, Duration::from_secs(3)).await,
        "the server never saw the connection closed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn host_cancellation_ends_the_run_and_closes_the_request() {
    let server = serve(None, |_| Reply::Hang).await;
    let token = CancellationToken::new();
    let options = Options {
        cancel: Some(token.clone()),
        ..opts()
    };
    let t = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        t.cancel();
    });
    let out = eval(
        "try { return httpFetch({ url }) } catch (e) { return 'caught' }",
        json!({ "url": server.url("http", "/slow") }),
        options,
    )
    .await;
    let e = out.error.expect("cancelled");
    assert_eq!(e.kind, ErrorKind::Cancelled);
    assert_eq!(e.message, "Execution cancelled by the host");
    assert!(server.wait_closed(1, Duration::from_secs(3)).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn https_with_a_test_certificate() {
    let tls = support::make_tls();
    let server = serve(Some(&tls), |_| json_ok(r#"{"secure":true}"#)).await;
    let url = server.url("https", "/s");
    let trusted = Options {
        capabilities: Capabilities::default().with_http_client(
            HttpClient::with_trusted_certs(std::slice::from_ref(&tls.cert)).unwrap(),
        ),
        ..opts()
    };
    let out = eval(
        "return httpFetch({ url }).secure",
        json!({ "url": url }),
        trusted,
    )
    .await;
    assert_eq!(result(&out), json!(true));
    assert_eq!(
        server.recorded()[0].header("x-agent-depth").as_deref(),
        Some("1")
    );
    // The default client trusts the public roots only: the self-signed certificate is refused,
    // as a catchable error.
    let out = eval(
        "try { return httpFetch({ url }) } catch (e) { return 'caught: ' + e }",
        json!({ "url": url }),
        opts(),
    )
    .await;
    let msg = result(&out);
    assert!(
        msg.as_str()
            .unwrap()
            .starts_with("caught: TLS handshake with 127.0.0.1 failed"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_catchable() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = eval(
        "try { return httpFetch({ url }) } catch (e) { return 'offline' }",
        json!({ "url": format!("http://127.0.0.1:{port}/") }),
        opts(),
    )
    .await;
    assert_eq!(out.result, JsValue::String("offline".into()));
}

// The admission rules themselves (ajs-io's `admit`), before any request is made.

fn fetch_req(url: &str, method: &str, headers: &[(&str, &str)]) -> ajs_io::FetchRequest {
    ajs_io::FetchRequest {
        url: url.into(),
        method: method.into(),
        headers: headers
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
    }
}

#[test]
fn fetch_admission_rules() {
    let open = ajs_io::FetchPolicy::default();
    assert!(ajs_io::admit(&fetch_req("https://a.com/", "GET", &[]), &open, true, 0).is_ok());
    assert!(
        ajs_io::admit(&fetch_req("https://a.com/", "GET", &[]), &open, false, 0)
            .unwrap_err()
            .starts_with("Fetch blocked: no allowedFetchDomains")
    );
    assert!(ajs_io::admit(&fetch_req("file:///etc/passwd", "GET", &[]), &open, true, 0).is_err());
    assert!(
        ajs_io::admit(&fetch_req("https://a.com/", "POST", &[]), &open, true, 0)
            .unwrap_err()
            .contains("method 'POST' is not allowed")
    );
    let post = ajs_io::FetchPolicy {
        methods: vec!["post".into()],
        ..Default::default()
    };
    assert!(ajs_io::admit(&fetch_req("https://a.com/", "POST", &[]), &post, true, 0).is_ok());
    assert_eq!(
        ajs_io::admit(
            &fetch_req("https://a.com/", "GET", &[("Cookie", "x")]),
            &open,
            true,
            0
        )
        .unwrap_err(),
        "Fetch blocked: header 'Cookie' is not allowed"
    );
    assert!(ajs_io::admit(
        &fetch_req("https://a.com/", "GET", &[("X-API-Key", "k")]),
        &open,
        true,
        0
    )
    .is_ok());
    assert!(ajs_io::admit(
        &fetch_req("https://a.com/", "GET", &[("X-Agent-Depth", "1")]),
        &open,
        true,
        0
    )
    .is_err());
    assert!(
        ajs_io::admit(&fetch_req("https://a.com/", "GET", &[]), &open, true, 10)
            .unwrap_err()
            .starts_with("Agent request depth exceeded")
    );
    let wild = ajs_io::FetchPolicy {
        domains: Some(vec!["*.example.com".into()]),
        ..Default::default()
    };
    assert!(ajs_io::admit(
        &fetch_req("https://API.example.com/x", "GET", &[]),
        &wild,
        false,
        0
    )
    .is_ok());
    assert!(ajs_io::admit(
        &fetch_req("https://example.com/x", "GET", &[]),
        &wild,
        false,
        0
    )
    .is_ok());
    assert!(ajs_io::admit(
        &fetch_req("https://badexample.com/x", "GET", &[]),
        &wild,
        false,
        0
    )
    .is_err());
}
