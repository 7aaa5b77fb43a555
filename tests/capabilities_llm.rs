//! The built-in OpenAI-compatible model client behind `llmPredict`, against a loopback server.

use crate::capabilities_support as support;

use std::time::Duration;

use ajs::{Capabilities, Eval, HttpClient, LlmClient, LlmConfig, Options};
use serde_json::{json, Value};
use support::{json_ok, response, serve, Reply};

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
        json!("caught: llmPredict: the model endpoint answered HTTP 401 (invalid_api_key)")
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
