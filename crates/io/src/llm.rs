//! The built-in model client behind `llmPredict`: any OpenAI-compatible chat-completions endpoint.
//!
//! The host configures it (base URL, model, the **name** of the environment variable holding the
//! API key, timeout); the guest only ever sends a prompt and `options`. The key is read from the
//! environment at each call and never appears in an error message.
//!
//! `options.responseFormat` becomes the endpoint's `response_format`:
//! - an object whose `type` is `json_schema`, `json_object` or `text` (what AJS's
//!   `Schema.response(name, example)` builds) is sent as it is;
//! - any other object is taken as a JSON Schema and wrapped as
//!   `{ type: 'json_schema', json_schema: { name: 'response', strict: true, schema } }`.
//!
//! The answer is the first choice's message content: a string, or the parsed JSON when a
//! structured format was requested. `options.system` (a string) adds a system message and
//! `options.temperature` / `options.maxTokens` (numbers) are passed on; `max_tokens` and
//! `response_format` are accepted as the OpenAI spellings of `maxTokens` and `responseFormat`.
//! A known option of the wrong type is an error naming it; other options are ignored.

use std::time::Duration;

#[cfg(feature = "client")]
use serde_json::Map;
use serde_json::{json, Value};

#[cfg(feature = "client")]
use crate::http::{HttpClient, HttpError, HttpRequest};

/// `llmPredict`'s own timeout: 2 minutes.
pub const DEFAULT_LLM_TIMEOUT: Duration = Duration::from_secs(120);

/// How to reach a model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    /// The API base, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The model name sent with every request.
    pub model: String,
    /// The environment variable holding the API key (sent as `Authorization: Bearer …`); `None`
    /// sends no key (a local server).
    pub api_key_env: Option<String>,
    /// Limit on one call, response included (default 2 minutes).
    pub timeout: Duration,
}

impl LlmConfig {
    /// A configuration with the default timeout and the key in `api_key_env`.
    pub fn new(
        base_url: impl Into<String>,
        model: impl Into<String>,
        api_key_env: Option<&str>,
    ) -> LlmConfig {
        LlmConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: api_key_env.map(str::to_string),
            timeout: DEFAULT_LLM_TIMEOUT,
        }
    }
}

#[cfg(feature = "client")]
/// The OpenAI-compatible client.
#[derive(Clone, Debug)]
pub struct LlmClient {
    config: LlmConfig,
    http: HttpClient,
}

/// Turns a guest `responseFormat` into the endpoint's `response_format` (see the module docs).
/// `None` when no structured output was asked for.
pub fn response_format(format: Option<&Value>) -> Option<Value> {
    match format? {
        Value::Object(m) => {
            let is_wrapper = matches!(
                m.get("type").and_then(Value::as_str),
                Some("json_schema" | "json_object" | "text")
            );
            if is_wrapper {
                Some(Value::Object(m.clone()))
            } else {
                Some(json!({
                    "type": "json_schema",
                    "json_schema": { "name": "response", "strict": true, "schema": m },
                }))
            }
        }
        _ => None,
    }
}

#[cfg(feature = "client")]
impl LlmClient {
    /// A client over the public web roots.
    pub fn new(config: LlmConfig) -> LlmClient {
        let http = HttpClient::new();
        LlmClient::with_http(config, http)
    }

    /// A client over a given HTTP client (a private CA, or a test's self-signed certificate).
    /// The HTTP client's request timeout is set to the configuration's.
    pub fn with_http(config: LlmConfig, mut http: HttpClient) -> LlmClient {
        http.request_timeout = config.timeout;
        LlmClient { config, http }
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// The request body for a prompt and the guest's `options` (see [`LLM_OPTIONS`]).
    ///
    /// # Errors
    /// An option of the wrong type, or given in both spellings, named: `llmPredict: option
    /// 'temperature' must be a number, got string`.
    pub fn request_body(&self, prompt: &str, options: Option<&Value>) -> Result<Value, String> {
        let opts = match options {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => {
                return Err(format!(
                    "llmPredict: input 'options' must be an object, got {}",
                    json_kind(other)
                ))
            }
        };
        let get =
            |name: &str, want: &str, ok: fn(&Value) -> bool| -> Result<Option<&Value>, String> {
                let Some(o) = opts else { return Ok(None) };
                let spellings: Vec<&str> = LLM_OPTIONS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(n, alias)| alias.iter().copied().chain([*n]).collect())
                    .unwrap_or_else(|| vec![name]);
                let given: Vec<(&str, &Value)> = spellings
                    .iter()
                    .filter_map(|k| o.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
                    .collect();
                match given.as_slice() {
                    [] => Ok(None),
                    [(k, v)] if ok(v) => {
                        let _ = k;
                        Ok(Some(*v))
                    }
                    [(k, v)] => Err(format!(
                        "llmPredict: option '{k}' must be {want}, got {}",
                        json_kind(v)
                    )),
                    [(a, _), (b, _), ..] => Err(format!(
                        "llmPredict: options '{b}' and '{a}' are the same option; give one"
                    )),
                }
            };
        let mut messages = Vec::new();
        if let Some(system) = get("system", "a string", Value::is_string)? {
            messages.push(json!({ "role": "system", "content": system }));
        }
        messages.push(json!({ "role": "user", "content": prompt }));
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.config.model.clone()));
        body.insert("messages".into(), Value::Array(messages));
        if let Some(rf) = response_format(get("responseFormat", "an object", Value::is_object)?) {
            body.insert("response_format".into(), rf);
        }
        if let Some(t) = get("temperature", "a number", Value::is_number)? {
            body.insert("temperature".into(), t.clone());
        }
        let whole = |v: &Value| v.as_f64().is_some_and(|n| n >= 1.0 && n.fract() == 0.0);
        if let Some(t) = get("maxTokens", "a whole number of at least 1", whole)? {
            body.insert("max_tokens".into(), json!(t.as_f64().unwrap_or(1.0) as u64));
        }
        Ok(Value::Object(body))
    }

    /// Asks the model. The error messages are for the guest (a catchable error) and never
    /// contain the key.
    ///
    /// # Errors
    /// A missing key variable, a transport failure, a non-2xx answer, an answer without content,
    /// a refusal, or structured output that does not parse.
    pub async fn predict(&self, prompt: &str, options: Option<&Value>) -> Result<Value, String> {
        let answer = self.predict_text(prompt, options).await?;
        if answer.structured {
            serde_json::from_str(&answer.content).map_err(|e| structured_not_json(&e))
        } else {
            Ok(Value::String(answer.content))
        }
    }

    /// Asks the model and returns its text unparsed (for a caller that parses structured
    /// output under its own budget).
    ///
    /// # Errors
    /// As [`LlmClient::predict`], except that structured output is not parsed here.
    pub async fn predict_text(
        &self,
        prompt: &str,
        options: Option<&Value>,
    ) -> Result<LlmText, String> {
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        let mut key = None;
        if let Some(var) = &self.config.api_key_env {
            let k = std::env::var(var).map_err(|_| {
                format!("llmPredict: the API key variable '{var}' is not set on the host")
            })?;
            headers.push(("authorization".into(), format!("Bearer {k}")));
            key = Some(k);
        }
        let body = self.request_body(prompt, options)?;
        let structured = body
            .get("response_format")
            .and_then(|f| f.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|t| t != "text");
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let resp = self
            .http
            .send(HttpRequest {
                url,
                method: "POST".into(),
                headers,
                body: Some(body.to_string().into_bytes()),
                screen: None,
            })
            .await
            .map_err(|e| match e {
                HttpError::Failed(m) => format!("llmPredict: {m}"),
                e @ HttpError::TooLarge { .. } => format!("llmPredict: {e}"),
            })?;
        let answer: Value = serde_json::from_slice(&resp.body)
            .ok()
            .unwrap_or(Value::Null);
        if !(200..300).contains(&resp.status) {
            return Err(endpoint_error(&resp, &answer, key.as_deref()));
        }
        let message = answer
            .pointer("/choices/0/message")
            .ok_or("llmPredict: the model endpoint's answer has no message")?;
        if let Some(refusal) = message.get("refusal").and_then(Value::as_str) {
            return Err(format!("llmPredict: the model refused: {refusal}"));
        }
        let content = message
            .get("content")
            .and_then(Value::as_str)
            .ok_or("llmPredict: the model's message has no text content")?;
        Ok(LlmText {
            content: content.to_string(),
            structured,
        })
    }
}

/// The options the client reads, with their other spellings (the OpenAI names): anything else
/// in `options` is ignored (and named in a warning by the driver).
pub const LLM_OPTIONS: &[(&str, &[&str])] = &[
    ("system", &[]),
    ("temperature", &[]),
    ("maxTokens", &["max_tokens"]),
    ("responseFormat", &["response_format"]),
];

/// Whether `key` is an option the client reads, in either spelling.
pub fn is_llm_option(key: &str) -> bool {
    LLM_OPTIONS
        .iter()
        .any(|(n, alias)| *n == key || alias.contains(&key))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Most characters of the provider's own message carried into the guest's error.
const MAX_PROVIDER_MESSAGE_CHARS: usize = 500;

/// The guest's error for a non-2xx answer: the status, the provider's code and message, and
/// when to retry (`Retry-After`). The key, should the provider quote it, is blanked.
fn endpoint_error(resp: &crate::http::HttpResponse, answer: &Value, key: Option<&str>) -> String {
    let code = answer
        .pointer("/error/code")
        .or_else(|| answer.pointer("/error/type"))
        .and_then(Value::as_str)
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    let message = answer
        .pointer("/error/message")
        .or_else(|| answer.get("message"))
        .and_then(Value::as_str)
        .map(|m| {
            let mut m = m.to_string();
            if let Some(k) = key.filter(|k| !k.is_empty()) {
                m = m.replace(k, "[the API key]");
            }
            let m: String = m.chars().take(MAX_PROVIDER_MESSAGE_CHARS).collect();
            format!(": {m}")
        })
        .unwrap_or_default();
    let retry = resp
        .header("retry-after")
        .map(|r| match r.trim().parse::<u64>() {
            Ok(secs) => format!(" (retry after {secs} s)"),
            Err(_) => format!(" (retry after {})", r.trim()),
        })
        .unwrap_or_default();
    format!(
        "llmPredict: the model endpoint answered HTTP {}{code}{message}{retry}",
        resp.status
    )
}

/// The model's answer as text ([`LlmClient::predict_text`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LlmText {
    /// The message's content.
    pub content: String,
    /// Whether structured output was asked for: the content should be JSON.
    pub structured: bool,
}

/// The guest's message for structured output that does not parse.
pub fn structured_not_json(e: &impl std::fmt::Display) -> String {
    format!("llmPredict: the model's structured answer is not JSON: {e}")
}
