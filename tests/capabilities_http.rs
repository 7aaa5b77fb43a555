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
        ..FetchPolicy::default()
    })
}

fn opts() -> Options {
    Options {
        fetch_policy: policy(&["127.0.0.1:*"], &["POST"]),
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
        fetch_policy: policy(&["127.0.0.1:*"], &[]),
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

fn caught(out: &Outcome) -> String {
    match result(out) {
        Value::String(s) => s,
        other => panic!("expected a message, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn compressed_bodies_are_decoded_and_a_bomb_is_refused_at_the_decoded_cap() {
    let server = serve(None, |r| {
        if r.line().starts_with("GET /bomb") {
            // 64 MiB of zeros in about 64 KB
            return support::raw_response(
                "200 OK",
                &[("content-type", "text/plain"), ("content-encoding", "gzip")],
                &support::gzip(&vec![0u8; 64 << 20]),
            );
        }
        support::raw_response(
            "200 OK",
            &[
                ("content-type", "application/json"),
                ("content-encoding", "gzip"),
            ],
            &support::gzip(br#"{"gzipped":true}"#),
        )
    })
    .await;
    let url = server.url("http", "/gz");
    let out = eval(
        "let r = httpFetch({ url, responseType: 'full' })\nreturn [httpFetch({ url }).gzipped, r.body.gzipped, r.headers['content-encoding']]",
        json!({ "url": url }),
        opts(),
    )
    .await;
    assert_eq!(result(&out), json!([true, true, "gzip"]));
    let r = &server.recorded()[0];
    assert_eq!(
        r.header("accept-encoding").as_deref(),
        Some("gzip, deflate, br")
    );
    let options = Options {
        membrane_max_bytes: 1 << 20,
        ..opts()
    };
    let out = eval(
        "try { return httpFetch({ url }) } catch (e) { return 'caught' }",
        json!({ "url": server.url("http", "/bomb") }),
        options,
    )
    .await;
    let e = out.error.expect("the bomb ends the run");
    assert_eq!(e.kind, ErrorKind::Boundary);
    assert!(
        e.message
            .ends_with("the response body is over the 1048576-byte limit (membraneMaxBytes)"),
        "{}",
        e.message
    );
    // the guest may ask for the body unencoded
    let out = eval(
        "httpFetch({ url, headers: { 'Accept-Encoding': 'identity' } })\nreturn 1",
        json!({ "url": url }),
        opts(),
    )
    .await;
    result(&out);
    let last = server.recorded().pop().unwrap();
    assert_eq!(last.header("accept-encoding").as_deref(), Some("identity"));
}

#[tokio::test(flavor = "multi_thread")]
async fn response_types_text_full_data_url_and_charsets() {
    let server = serve(None, |r| {
        let line = r.line();
        if line.starts_with("GET /latin1") {
            support::raw_response(
                "200 OK",
                &[("content-type", "text/plain; charset=ISO-8859-1")],
                b"caf\xe9",
            )
        } else if line.starts_with("GET /bogus") {
            support::raw_response(
                "200 OK",
                &[("content-type", "text/plain; charset=no-such-charset")],
                "café".as_bytes(),
            )
        } else if line.starts_with("GET /bin") {
            support::raw_response(
                "200 OK",
                &[("content-type", "image/png")],
                b"\x89PNG\x00\xff",
            )
        } else {
            response(
                "502 Bad Gateway",
                &[("content-type", "application/json")],
                "<html>bad gateway</html>",
            )
        }
    })
    .await;
    let ctx = json!({ "base": server.url("http", "") });
    let out = eval(
        "let r = httpFetch({ url: base + '/502', responseType: 'full' })\nreturn [r.status, r.ok, r.body, typeof r.parseError, httpFetch({ url: base + '/latin1' }), httpFetch({ url: base + '/latin1', responseType: 'text' }), httpFetch({ url: base + '/bogus' }), httpFetch({ url: base + '/bin', responseType: 'dataUrl' }), httpFetch({ url: base + '/502', responseType: 'text' })]",
        ctx.clone(),
        opts(),
    )
    .await;
    assert_eq!(
        result(&out),
        json!([
            502,
            false,
            "<html>bad gateway</html>",
            "string",
            "café",
            "café",
            "café",
            "data:image/png;base64,iVBORwD/",
            "<html>bad gateway</html>"
        ])
    );
    let out = eval(
        "try { return httpFetch({ url: base + '/502' }) } catch (e) { return e }",
        ctx.clone(),
        opts(),
    )
    .await;
    assert!(caught(&out).contains("responseType 'text' or 'full'"));
    let before = server.recorded().len();
    let out = eval(
        "try { return httpFetch({ url: base + '/latin1', responseType: 'blob' }) } catch (e) { return e }",
        ctx.clone(),
        opts(),
    )
    .await;
    assert_eq!(
        caught(&out),
        "httpFetch: responseType 'blob' is not one of 'json', 'text', 'full', 'dataUrl'"
    );
    assert_eq!(
        server.recorded().len(),
        before,
        "a refused call sends nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn default_user_agent_empty_post_length_and_header_value_types() {
    let server = serve(None, |_| json_ok("{}")).await;
    let url = server.url("http", "/p");
    let out = eval(
        "httpFetch({ url, method: 'POST' })\nhttpFetch({ url, headers: { 'User-Agent': 'mine', 'x-request-id': 7 } })\ntry { httpFetch({ url, headers: { 'x-request-id': null } }) } catch (e) { return e }",
        json!({ "url": url }),
        opts(),
    )
    .await;
    assert_eq!(
        caught(&out),
        "httpFetch: header 'x-request-id' must be a string, number or boolean, got null; write the value as a string"
    );
    let reqs = server.recorded();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].header("content-length").as_deref(), Some("0"));
    let ua = reqs[0].header("user-agent").unwrap();
    assert_eq!(ua, format!("ajs/{}", env!("CARGO_PKG_VERSION")));
    assert_eq!(reqs[1].header("user-agent").as_deref(), Some("mine"));
    assert_eq!(reqs[1].header("x-request-id").as_deref(), Some("7"));
}

#[tokio::test(flavor = "multi_thread")]
async fn fetched_json_nests_to_the_boundary_depth() {
    let deep = format!("{}1{}", "[".repeat(900), "]".repeat(900));
    let server = serve(None, move |_| json_ok(&deep)).await;
    let out = eval(
        "let v = httpFetch({ url })\nlet n = 0\nwhile (Array.isArray(v)) { v = v[0]\n n = n + 1 }\nreturn n",
        json!({ "url": server.url("http", "/deep") }),
        opts(),
    )
    .await;
    assert_eq!(result(&out), json!(900));
}

#[tokio::test(flavor = "multi_thread")]
async fn allowlist_ports_and_names_resolving_to_private_addresses() {
    let server = serve(None, |_| json_ok(r#""reached""#)).await;
    let port = server.addr.port();
    let fetch = |domains: Vec<String>, allow: Vec<String>| Options {
        fetch_policy: Some(FetchPolicy {
            domains: Some(domains),
            allow_addresses: allow,
            ..FetchPolicy::default()
        }),
        ..Options::default()
    };
    let code = "try { return httpFetch({ url }) } catch (e) { return e }";
    // an entry with a port opens that port only; without one, only the default port
    let other = format!("http://127.0.0.1:{}/", port.wrapping_add(1).max(1));
    let out = eval(
        code,
        json!({ "url": other }),
        fetch(vec![format!("127.0.0.1:{port}")], vec![]),
    )
    .await;
    assert!(
        caught(&out).starts_with("Fetch blocked: port"),
        "{}",
        caught(&out)
    );
    let out = eval(
        code,
        json!({ "url": server.url("http", "/") }),
        fetch(vec!["127.0.0.1".into()], vec![]),
    )
    .await;
    assert!(
        caught(&out).contains(&format!(
            "Add '127.0.0.1:{port}' or '127.0.0.1:*' to fetch.domains"
        )),
        "{}",
        caught(&out)
    );
    let out = eval(
        code,
        json!({ "url": server.url("http", "/") }),
        fetch(vec![format!("127.0.0.1:{port}")], vec![]),
    )
    .await;
    assert_eq!(result(&out), json!("reached"));
    // a name that resolves to loopback is refused unless allowed by address
    let by_name = format!("http://localhost:{port}/");
    let out = eval(
        code,
        json!({ "url": by_name }),
        fetch(vec!["localhost:*".into()], vec![]),
    )
    .await;
    let msg = caught(&out);
    assert!(
        msg.starts_with("Fetch blocked: localhost resolved to ")
            && msg.contains("a loopback address"),
        "{msg}"
    );
    assert_eq!(
        server.accepted.load(Ordering::SeqCst),
        1,
        "only the allowed fetch connected"
    );
    let out = eval(
        code,
        json!({ "url": by_name }),
        fetch(
            vec!["localhost:*".into()],
            vec!["127.0.0.0/8".into(), "::1".into()],
        ),
    )
    .await;
    assert_eq!(result(&out), json!("reached"));
    // entries that can never match are refused when the options are built
    for bad in ["http://127.0.0.1", "*.0.0.1", "::1", " 127.0.0.1", "*"] {
        let out = eval("1", json!({}), fetch(vec![bad.into()], vec![])).await;
        let e = out.error.expect("refused");
        assert!(
            e.message.starts_with(&format!(
                "Invalid option fetchPolicy.domains: entry '{bad}'"
            )),
            "{bad}: {}",
            e.message
        );
    }
    let out = eval("1", json!({}), fetch(vec![], vec!["10.0.0.0/40".into()])).await;
    assert!(out
        .error
        .unwrap()
        .message
        .contains("fetchPolicy.allowAddresses: range '10.0.0.0/40'"));
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_inputs_are_ignored_but_never_silently() {
    let server = serve(None, |_| json_ok(r#"{"v":1}"#)).await;
    let url = server.url("http", "/w");
    // run time: the input object is built where the compiler cannot see it
    let out = eval(
        "let a = httpFetch(req)\nlet b = httpFetch({ ...req })\nreturn a.v + b.v",
        json!({ "req": { "url": url, "header": { "x-api-key": "k" }, "cache": 3600 } }),
        opts(),
    )
    .await;
    assert_eq!(result(&out), json!(2));
    assert_eq!(
        out.warnings,
        vec![
            "httpFetch: input 'header' is not known and is ignored (inputs: url, method, headers, body, responseType)".to_string(),
            "httpFetch: input 'cache' is not known and is ignored (inputs: url, method, headers, body, responseType)".to_string(),
        ]
    );
    assert_eq!(out.to_json()["warnings"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        server.recorded()[0].header("x-api-key"),
        None,
        "the misspelt input sent nothing"
    );
    // compile time: the literal is visible, the warning says where
    let (_, warnings) = Runner::compile_agent_with_warnings(
        "function main() {\n  return httpFetch({ url: 'http://127.0.0.1:1/', header: {} })\n}",
        &opts(),
    )
    .unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        warnings[0].to_string(),
        "warning: httpFetch: input 'header' is not known and is ignored (inputs: url, method, headers, body, responseType) at <source>:2:49"
    );
    // a plain run has no warnings and the JSON has no key for them
    let out = eval("return httpFetch({ url }).v", json!({ "url": url }), opts()).await;
    assert!(out.warnings.is_empty() && out.to_json().get("warnings").is_none());
}

// ---- against a real server: httpbin under gunicorn (.ci/python-deps.sh) ----

fn to_httpbin(port: u16) -> Options {
    Options {
        fetch_policy: Some(FetchPolicy {
            domains: Some(vec![format!("127.0.0.1:{port}")]),
            methods: vec!["POST".into()],
            ..FetchPolicy::default()
        }),
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn httpbin_compressed_bodies_are_decoded() {
    let Some(hb) = support::httpbin() else { return };
    let out = eval(
        "let g = httpFetch({ url: base + '/gzip', responseType: 'full' })\nreturn [g.body.gzipped, g.headers['content-encoding'], httpFetch({ url: base + '/deflate' }).deflated, httpFetch({ url: base + '/brotli' }).brotli]",
        json!({ "base": hb.url("") }),
        to_httpbin(hb.port),
    )
    .await;
    assert_eq!(result(&out), json!([true, "gzip", true, true]));
}

#[tokio::test(flavor = "multi_thread")]
async fn httpbin_ports_and_a_name_resolving_to_loopback() {
    let Some(hb) = support::httpbin() else { return };
    let code = "try { return httpFetch({ url }).url } catch (e) { return e }";
    let out = eval(code, json!({ "url": hb.url("/get") }), to_httpbin(hb.port)).await;
    assert_eq!(result(&out), json!(hb.url("/get")));
    // a second port on the allowed host (another httpbin, really listening)
    let Some(other) = support::httpbin() else {
        return;
    };
    let out = eval(
        code,
        json!({ "url": other.url("/get") }),
        to_httpbin(hb.port),
    )
    .await;
    assert!(
        caught(&out).starts_with(&format!(
            "Fetch blocked: port {} of 127.0.0.1 is not allowed",
            other.port
        )),
        "{}",
        caught(&out)
    );
    // allowed by name, resolving to loopback: refused unless allowed by address
    let by_name = |allow: Vec<String>| Options {
        fetch_policy: Some(FetchPolicy {
            domains: Some(vec![format!("localhost:{}", hb.port)]),
            allow_addresses: allow,
            ..FetchPolicy::default()
        }),
        ..Options::default()
    };
    let url = format!("http://localhost:{}/get", hb.port);
    let out = eval(code, json!({ "url": url }), by_name(vec![])).await;
    let msg = caught(&out);
    assert!(
        msg.starts_with("Fetch blocked: localhost resolved to ") && msg.contains("loopback"),
        "{msg}"
    );
    let out = eval(
        code,
        json!({ "url": url }),
        by_name(vec!["127.0.0.1".into(), "::1".into()]),
    )
    .await;
    assert_eq!(result(&out), json!(url));
}

#[tokio::test(flavor = "multi_thread")]
async fn httpbin_full_text_user_agent_empty_post_and_unknown_inputs() {
    let Some(hb) = support::httpbin() else { return };
    let out = eval(
        "let s = httpFetch({ url: base + '/status/502', responseType: 'full' })\nlet t = httpFetch({ url: base + '/encoding/utf8', responseType: 'text' })\nlet ua = httpFetch({ url: base + '/user-agent' })['user-agent']\nlet p = httpFetch({ url: base + '/anything', method: 'POST' })\nlet h = httpFetch({ url: base + '/headers', header: { 'X-Request-Id': 'lost' } })\nreturn [s.status, s.ok, typeof t, t.includes('∮ E⋅da = Q'), ua, p.headers['Content-Length'], h.headers['X-Request-Id'] === undefined]",
        json!({ "base": hb.url("") }),
        to_httpbin(hb.port),
    )
    .await;
    assert_eq!(
        result(&out),
        json!([
            502,
            false,
            "string",
            true,
            format!("ajs/{}", env!("CARGO_PKG_VERSION")),
            "0",
            true
        ])
    );
    assert_eq!(
        out.warnings,
        vec!["httpFetch: input 'header' is not known and is ignored (inputs: url, method, headers, body, responseType)".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn warnings_are_capped_and_quote_keys_short() {
    let mut req = serde_json::Map::new();
    req.insert("url".into(), json!("https://api.example.com/"));
    req.insert("k".repeat(10_000), json!(1));
    for i in 0..2_000 {
        req.insert(format!("x{i}"), json!(i));
    }
    let options = Options {
        capabilities: Capabilities::default().with_fetch(|_| async { Ok(JsValue::Null) }),
        ..Options::default()
    };
    let start = Instant::now();
    let out = eval(
        "let n = 0\nwhile (n < 5) { httpFetch(req)\n n = n + 1 }\nreturn n",
        json!({ "req": req }),
        Options {
            fuel: 100_000.0,
            ..options
        },
    )
    .await;
    assert_eq!(result(&out), json!(5));
    assert_eq!(out.warnings.len(), 100);
    let long = &out.warnings[0];
    assert!(
        long.starts_with(&format!(
            "httpFetch: input '{}…' is not known",
            "k".repeat(64)
        )),
        "{}",
        &long[..120]
    );
    assert!(out.warnings.iter().all(|w| w.len() < 250));
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// The allowlist's entry forms and the address screen (ajs-io's `allow`), directly.
mod allow_entries {

    use ajs_io::allow::*;
    use std::net::IpAddr;

    fn host(h: &str) -> url::Host<String> {
        url::Host::parse(h).unwrap()
    }

    fn matches(entry: &str, h: &str) -> bool {
        let e = AllowEntry::parse(entry).unwrap();
        let h = host(h);
        let h = match &h {
            url::Host::Domain(d) => url::Host::Domain(d.as_str()),
            url::Host::Ipv4(a) => url::Host::Ipv4(*a),
            url::Host::Ipv6(a) => url::Host::Ipv6(*a),
        };
        e.host_matches(&h)
    }

    #[test]
    fn entries_that_could_never_match_are_refused_by_name() {
        for (bad, says) in [
            ("", "is empty"),
            (" api.example.com", "has spaces"),
            ("https://api.example.com", "is a URL"),
            ("api.example.com/v1", "is a URL"),
            ("*", "every host"),
            ("::1", "without brackets"),
            ("[::1", "without closing"),
            ("[::1]8080", "not ':PORT'"),
            ("[nope]", "not an IPv6"),
            ("api.example.com:0", "port '0'"),
            ("api.example.com:99999", "port '99999'"),
            ("api.example.com:8o", "port '8o'"),
            ("*.0.0.1", "wildcards match names only"),
            ("*.10.0.0.1", "wildcards match names only"),
            ("a.*.com", "not a leading"),
            ("*.*.com", "not a leading"),
            ("exa mple.com", "not a valid host"),
        ] {
            let e = AllowEntry::parse(bad).unwrap_err();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains(says),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn every_form_of_decision_35_parses() {
        let e = |s| AllowEntry::parse(s).unwrap();
        assert_eq!(
            e("API.Example.com.").host,
            HostPattern::Name("api.example.com".into())
        );
        assert_eq!(e("api.example.com").port, PortRule::Default);
        assert_eq!(e("api.example.com:8443").port, PortRule::Exact(8443));
        assert_eq!(e("api.example.com:*").port, PortRule::Any);
        assert_eq!(
            e("*.example.com:*").host,
            HostPattern::Suffix("example.com".into())
        );
        assert_eq!(
            e("127.1").host,
            HostPattern::Ip("127.0.0.1".parse().unwrap())
        );
        assert_eq!(e("10.0.0.5:8080").port, PortRule::Exact(8080));
        assert_eq!(e("[::1]:*").host, HostPattern::Ip("::1".parse().unwrap()));
        assert_eq!(e("[::1]").port, PortRule::Default);
    }

    #[test]
    fn wildcards_match_names_only_and_addresses_match_exactly() {
        assert!(matches("*.example.com", "example.com"));
        assert!(matches("*.example.com", "a.b.example.com"));
        assert!(!matches("*.example.com", "badexample.com"));
        assert!(!matches("*.example.com", "example.com.evil.net"));
        assert!(matches("127.0.0.1", "127.0.0.1"));
        assert!(!matches("127.0.0.1", "127.0.0.2"));
        assert!(!matches("localhost", "127.0.0.1"));
        assert!(matches("[::1]", "[::1]"));
        let e = AllowEntry::parse("a.com").unwrap();
        assert!(e.port_matches(443, 443) && !e.port_matches(8443, 443));
        assert!(AllowEntry::parse("a.com:*").unwrap().port_matches(1, 443));
    }

    #[test]
    fn special_addresses_and_ranges() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for (a, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.9.9.9", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "private"),
            ("169.254.169.254", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00::1", "private"),
            ("fe80::1", "link-local"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::a00:1", "private"),
        ] {
            assert_eq!(special_kind(ip(a)), Some(kind), "{a}");
        }
        for a in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "172.32.0.1",
            "8.8.8.8",
        ] {
            assert_eq!(special_kind(ip(a)), None, "{a}");
        }
        let c = Cidr::parse("127.0.0.0/8").unwrap();
        assert!(c.contains(ip("127.5.5.5")) && c.contains(ip("::ffff:127.0.0.1")));
        assert!(!c.contains(ip("128.0.0.1")));
        assert!(Cidr::parse("::1").unwrap().contains(ip("::1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("10.0.0.1")));
        assert!(Cidr::parse("10.0.0.0/33")
            .unwrap_err()
            .contains("'10.0.0.0/33'"));
        assert!(Cidr::parse("nope").is_err());
        let screen = AddressScreen::parse(&["10.0.0.0/8".into()]).unwrap();
        assert!(screen.check("h", ip("10.2.3.4")).is_ok());
        assert!(screen.check("h", ip("8.8.8.8")).is_ok());
        let e = screen
            .check("internal.example.com", ip("127.0.0.1"))
            .unwrap_err();
        assert!(
            e.contains("internal.example.com resolved to 127.0.0.1, a loopback address"),
            "{e}"
        );
    }
}

/// Content decoding under a cap (ajs-io's `decode`), directly.
mod decoding {

    use ajs_io::decode::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn codings_are_undone_and_a_bomb_stops_at_the_cap() {
        let plain = b"hello, world".repeat(10);
        assert_eq!(
            decode_content(gzip(&plain), "gzip", 1 << 20).unwrap(),
            plain
        );
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&plain).unwrap();
        assert_eq!(
            decode_content(z.finish().unwrap(), "deflate", 1 << 20).unwrap(),
            plain
        );
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        raw.write_all(&plain).unwrap();
        assert_eq!(
            decode_content(raw.finish().unwrap(), "Deflate", 1 << 20).unwrap(),
            plain
        );
        // gzip inside identity: codings undone last first
        assert_eq!(
            decode_content(gzip(&plain), "gzip, identity", 1 << 20).unwrap(),
            plain
        );
        // 64 MiB of zeros in about 64 KB: refused at the cap
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 100_000, "{}", bomb.len());
        assert_eq!(
            decode_content(bomb, "gzip", 4 << 20),
            Err(DecodeError::TooLarge(4 << 20))
        );
        assert_eq!(decode_content(gzip(b"12345"), "gzip", 5).unwrap(), b"12345");
        assert_eq!(
            decode_content(gzip(b"123456"), "gzip", 5),
            Err(DecodeError::TooLarge(5))
        );
        assert!(
            matches!(decode_content(b"not gzip".to_vec(), "gzip", 100), Err(DecodeError::Invalid(m)) if m.contains("corrupt"))
        );
        assert!(
            matches!(decode_content(b"x".to_vec(), "zstd", 100), Err(DecodeError::Invalid(m)) if m.contains("'zstd'"))
        );
    }

    #[test]
    fn charsets_are_read_from_the_content_type() {
        assert_eq!(
            charset("text/plain; charset=ISO-8859-1"),
            Some("ISO-8859-1")
        );
        assert_eq!(charset("text/plain;charset=\"utf-8\""), Some("utf-8"));
        assert_eq!(charset("text/plain"), None);
        let latin1 = encoding_of(Some("text/plain; charset=iso-8859-1"));
        assert_eq!(text(b"caf\xe9", latin1), "café");
        assert!(max_text_bytes(latin1, 4) >= "café".len());
        assert_eq!(
            encoding_of(Some("text/plain; charset=bogus")),
            encoding_rs::UTF_8
        );
        assert_eq!(text(b"caf\xe9", encoding_rs::UTF_8), "caf\u{fffd}");
        assert_eq!(text("\u{feff}é".as_bytes(), latin1), "é");
    }
}
