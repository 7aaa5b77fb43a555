//! The built-in OpenAI-compatible model client behind `llmPredict`, against a loopback server.

use crate::capabilities_support as support;

use std::time::Duration;

use ajs::{Capabilities, Eval, HttpClient, LlmClient, LlmConfig, Options};
use serde_json::{json, Value};
use support::{json_ok, response, serve, Reply};

fn caps_for(base: String) -> Capabilities {
    Capabilities::default().with_llm_client(client(base, None))
}

async fn eval_with(code: &str, caps: Capabilities) -> ajs::Outcome {
    Eval::new(code)
        .options(Options {
            capabilities: caps,
            ..Options::default()
        })
        .run()
        .await
}

fn completion(content: &str) -> String {
    json!({
        "id": "x", "object": "chat.completion",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }]
    })
    .to_string()
}

fn client(base: String, key_env: Option<&str>) -> LlmClient {
    LlmClient::with_http(
        LlmConfig::new(base, "test-model", key_env),
        HttpClient::new(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn predict_sends_the_prompt_model_and_key_and_returns_the_content() {
    std::env::set_var("AJS_TEST_LLM_KEY", "sk-test-123");
    let server = serve(None, |_| json_ok(&completion("a summary"))).await;
    let caps = Capabilities::default()
        .with_llm_client(client(server.url("http", "/v1/"), Some("AJS_TEST_LLM_KEY")));
    let out = Eval::new("return llmPredict({ prompt: 'Summarize: ' + text })")
        .context(json!({ "text": "Fuel bounds work." }))
        .options(Options {
            capabilities: caps,
            ..Options::default()
        })
        .run()
        .await;
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.result.to_json(), Some(json!("a summary")));
    assert!(out.fuel_used >= 100.0);
    let reqs = server.recorded();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].line().starts_with("POST /v1/chat/completions "));
    assert_eq!(
        reqs[0].header("authorization").as_deref(),
        Some("Bearer sk-test-123")
    );
    assert_eq!(reqs[0].header("x-agent-depth"), None);
    let body: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(body["model"], json!("test-model"));
    assert_eq!(
        body["messages"],
        json!([{ "role": "user", "content": "Summarize: Fuel bounds work." }])
    );
    assert!(body.get("response_format").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn response_format_becomes_structured_output_and_the_answer_is_parsed() {
    let server = serve(None, |_| json_ok(&completion(r#"{"name":"Ada","age":36}"#))).await;
    let llm = client(server.url("http", ""), None);
    // A bare JSON Schema is wrapped.
    let schema = json!({ "type": "object", "properties": { "name": { "type": "string" } } });
    let v = llm
        .predict(
            "who?",
            Some(&json!({ "responseFormat": schema, "system": "Be brief." })),
        )
        .await
        .unwrap();
    assert_eq!(v, json!({ "name": "Ada", "age": 36 }));
    // A ready `response_format` (what Schema.response builds) is passed as is.
    let ready = json!({ "type": "json_schema", "json_schema": { "name": "person", "strict": true, "schema": schema } });
    llm.predict("who?", Some(&json!({ "responseFormat": ready })))
        .await
        .unwrap();
    let reqs = server.recorded();
    let first: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(
        first["response_format"],
        json!({ "type": "json_schema", "json_schema": { "name": "response", "strict": true, "schema": schema } })
    );
    assert_eq!(
        first["messages"][0],
        json!({ "role": "system", "content": "Be brief." })
    );
    assert_eq!(reqs[0].header("authorization"), None);
    let second: Value = serde_json::from_slice(&reqs[1].body).unwrap();
    assert_eq!(second["response_format"], ready);
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_are_catchable_and_never_show_the_key() {
    std::env::set_var("AJS_TEST_LLM_KEY2", "sk-secret-456");
    let server = serve(None, |_| {
        response(
            "401 Unauthorized",
            &[("content-type", "application/json")],
            r#"{"error":{"message":"Incorrect API key provided: sk-secret-456","code":"invalid_api_key"}}"#,
        )
    })
    .await;
    let caps = Capabilities::default()
        .with_llm_client(client(server.url("http", ""), Some("AJS_TEST_LLM_KEY2")));
    let out =
        Eval::new("try { return llmPredict({ prompt: 'x' }) } catch (e) { return 'caught: ' + e }")
            .options(Options {
                capabilities: caps,
                ..Options::default()
            })
            .run()
            .await;
    let msg = out.result.to_json().unwrap();
    assert_eq!(
        msg,
        json!("caught: llmPredict: the model endpoint answered HTTP 401 (invalid_api_key): Incorrect API key provided: [the API key]")
    );
    // A missing key variable.
    let missing = client(server.url("http", ""), Some("AJS_TEST_LLM_NOT_SET"));
    let e = missing.predict("x", None).await.unwrap_err();
    assert_eq!(
        e,
        "llmPredict: the API key variable 'AJS_TEST_LLM_NOT_SET' is not set on the host"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_client_timeout_applies() {
    let server = serve(None, |_| Reply::Hang).await;
    let mut cfg = LlmConfig::new(server.url("http", ""), "m", None);
    cfg.timeout = Duration::from_millis(200);
    let llm = LlmClient::with_http(cfg, HttpClient::new());
    let e = llm.predict("x", None).await.unwrap_err();
    assert_eq!(e, "llmPredict: request timed out after 200ms");
    assert!(server.wait_closed(1, Duration::from_secs(3)).await);
}

/// A structured answer of tiny values (the model can be asked for any JSON): parsed within the
/// run's heap room, so 4 MiB of `[[],[],…]` ends the run before the host builds it, and a small
/// answer, parsed, is what the guest gets (a bad one is catchable).
#[tokio::test(flavor = "multi_thread")]
async fn a_structured_answer_is_parsed_within_the_heap_room() {
    let n = (4 * 1024 * 1024 - 4096) / 3;
    let tiny = format!("[{}[]]", "[],".repeat(n - 1));
    let answers = [
        completion(&tiny),
        completion(r#"{"name":"Ada","list":[[],[1]]}"#),
        completion("[1,"),
    ];
    for (i, answer) in answers.into_iter().enumerate() {
        let server = serve(None, move |_| json_ok(&answer)).await;
        let caps = Capabilities::default().with_llm_client(client(server.url("http", ""), None));
        let out = Eval::new(
            "try { return llmPredict({ prompt: 'x', options: { responseFormat: { type: 'json_object' } } }) } catch (e) { return 'caught: ' + e }",
        )
        .options(Options {
            capabilities: caps,
            ..Options::default()
        })
        .run()
        .await;
        match i {
            0 => {
                let e = out.error.expect("the run ends");
                assert_eq!(e.kind, ajs::ErrorKind::Boundary, "{}", e.message);
                assert!(
                    e.message.starts_with("Capability boundary rejected the return of 'llmPredict': the model's structured answer, parsed, would take more than the ")
                        && e.message.ends_with("(maxHeapBytes); raise maxHeapBytes or ask for less"),
                    "{}",
                    e.message
                );
            }
            1 => assert_eq!(
                out.result.to_json().unwrap(),
                json!({ "name": "Ada", "list": [[], [1]] })
            ),
            _ => {
                assert!(
                    out.result.to_json().unwrap().as_str().unwrap().starts_with(
                        "caught: llmPredict: the model's structured answer is not JSON: "
                    ),
                    "{:?}",
                    out.result
                )
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_spellings_are_aliases_and_wrong_types_are_named() {
    let server = serve(None, |_| json_ok(&completion(r#"{"ok":true}"#))).await;
    let caps = caps_for(server.url("http", ""));
    let out = eval_with(
        "let a = llmPredict({ prompt: 'x', options: { max_tokens: 5, response_format: { type: 'json_object' } } })\nlet b = llmPredict({ prompt: 'y', options: { maxTokens: 7, temperature: 0.5 } })\nreturn a.ok",
        caps.clone(),
    )
    .await;
    assert_eq!(out.result.to_json(), Some(json!(true)), "{:?}", out.error);
    let reqs = server.recorded();
    let a: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(a["max_tokens"], json!(5));
    assert_eq!(a["response_format"], json!({ "type": "json_object" }));
    let b: Value = serde_json::from_slice(&reqs[1].body).unwrap();
    assert_eq!(
        (b["max_tokens"].clone(), b["temperature"].clone()),
        (json!(7), json!(0.5))
    );
    for (options, says) in [
        (
            "{ temperature: '0.2' }",
            "llmPredict: option 'temperature' must be a number, got string",
        ),
        (
            "{ max_tokens: 2.5 }",
            "llmPredict: option 'max_tokens' must be a whole number of at least 1, got number",
        ),
        (
            "{ responseFormat: 'json' }",
            "llmPredict: option 'responseFormat' must be an object, got string",
        ),
        (
            "{ maxTokens: 1, max_tokens: 2 }",
            "llmPredict: options 'maxTokens' and 'max_tokens' are the same option; give one",
        ),
    ] {
        let out = eval_with(
            &format!("try {{ return llmPredict({{ prompt: 'x', options: {options} }}) }} catch (e) {{ return e }}"),
            caps.clone(),
        )
        .await;
        assert_eq!(out.result.to_json(), Some(json!(says)), "{options}");
    }
    assert_eq!(server.recorded().len(), 2, "a refused call sends nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_message_and_retry_after_reach_the_guest() {
    let server = serve(None, |_| {
        response(
            "429 Too Many Requests",
            &[("content-type", "application/json"), ("retry-after", "7")],
            r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#,
        )
    })
    .await;
    let out = eval_with(
        "try { return llmPredict({ prompt: 'x' }) } catch (e) { return e }",
        caps_for(server.url("http", "")),
    )
    .await;
    assert_eq!(
        out.result.to_json(),
        Some(json!("llmPredict: the model endpoint answered HTTP 429 (rate_limit_exceeded): Rate limit reached for requests (retry after 7 s)"))
    );
}

#[test]
fn a_model_timeout_above_the_atom_timeout_raises_the_atom_timeout() {
    let mut cfg = LlmConfig::new("http://127.0.0.1:9", "m", None);
    cfg.timeout = Duration::from_secs(300);
    let caps = Capabilities::default().with_llm_client(LlmClient::new(cfg));
    assert_eq!(
        caps.decl("llmPredict").unwrap().timeout,
        Duration::from_secs(300)
    );
    let mut cfg = LlmConfig::new("http://127.0.0.1:9", "m", None);
    cfg.timeout = Duration::from_secs(10);
    let caps = Capabilities::default().with_llm_client(LlmClient::new(cfg));
    assert_eq!(
        caps.decl("llmPredict").unwrap().timeout,
        Duration::from_secs(120)
    );
}

// ---- against a real server: llmock (.ci/python-deps.sh) ----

fn journal(port: u16) -> Vec<Value> {
    let (status, body) = support::http_get(port, "/_llmock/requests").expect("llmock answers");
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&body).unwrap();
    v["requests"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn llmock_receives_either_spelling_and_wrong_types_send_nothing() {
    let Some(mock) = support::llmock(&[]) else {
        return;
    };
    let caps = caps_for(mock.url("/v1"));
    let out = eval_with(
        "let a = llmPredict({ prompt: 'hi', options: { max_tokens: 5, response_format: { type: 'json_object' } } })\nlet b = llmPredict({ prompt: 'yo', options: { maxTokens: 7, responseFormat: { type: 'json_object' }, temperature: 0.5 } })\nreturn [typeof a.message, typeof b.message]",
        caps.clone(),
    )
    .await;
    assert_eq!(
        out.result.to_json(),
        Some(json!(["string", "string"])),
        "{:?}",
        out.error
    );
    let reqs = journal(mock.port);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["body"]["max_tokens"], json!(5));
    assert_eq!(
        reqs[0]["body"]["response_format"],
        json!({ "type": "json_object" })
    );
    assert_eq!(reqs[1]["body"]["max_tokens"], json!(7));
    assert_eq!(reqs[1]["body"]["temperature"], json!(0.5));
    let out = eval_with(
        "try { return llmPredict({ prompt: 'x', options: { temperature: '0.2' } }) } catch (e) { return e }",
        caps,
    )
    .await;
    assert_eq!(
        out.result.to_json(),
        Some(json!(
            "llmPredict: option 'temperature' must be a number, got string"
        ))
    );
    assert_eq!(journal(mock.port).len(), 2, "the refused call sent nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn llmock_errors_carry_the_provider_message_and_retry_after() {
    let Some(mock) = support::llmock(&["--error-rate", "429=1"]) else {
        return;
    };
    let out = eval_with(
        "try { return llmPredict({ prompt: 'x' }) } catch (e) { return e }",
        caps_for(mock.url("/v1")),
    )
    .await;
    let msg = out.result.to_json().unwrap();
    let msg = msg.as_str().unwrap();
    assert!(
        msg.starts_with("llmPredict: the model endpoint answered HTTP 429 (rate_limit_exceeded): ")
            && msg.ends_with("(retry after 1 s)"),
        "{msg}"
    );
}
