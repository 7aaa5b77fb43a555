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
//! `options.temperature` / `options.maxTokens` (numbers) are passed on; other options are ignored.

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

    /// The request body for a prompt and the guest's `options`.
    pub fn request_body(&self, prompt: &str, options: Option<&Value>) -> Value {
        let opts = options.and_then(Value::as_object);
        let mut messages = Vec::new();
        if let Some(system) = opts.and_then(|o| o.get("system")).and_then(Value::as_str) {
            messages.push(json!({ "role": "system", "content": system }));
        }
        messages.push(json!({ "role": "user", "content": prompt }));
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.config.model.clone()));
        body.insert("messages".into(), Value::Array(messages));
        if let Some(rf) = response_format(opts.and_then(|o| o.get("responseFormat"))) {
            body.insert("response_format".into(), rf);
        }
        if let Some(t) = opts
            .and_then(|o| o.get("temperature"))
            .filter(|v| v.is_number())
        {
            body.insert("temperature".into(), t.clone());
        }
        if let Some(t) = opts
            .and_then(|o| o.get("maxTokens"))
            .filter(|v| v.is_number())
        {
            body.insert("max_tokens".into(), t.clone());
        }
        Value::Object(body)
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
        if let Some(var) = &self.config.api_key_env {
            let key = std::env::var(var).map_err(|_| {
                format!("llmPredict: the API key variable '{var}' is not set on the host")
            })?;
            headers.push(("authorization".into(), format!("Bearer {key}")));
        }
        let body = self.request_body(prompt, options);
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
            let code = answer
                .pointer("/error/code")
                .or_else(|| answer.pointer("/error/type"))
                .and_then(Value::as_str)
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            return Err(format!(
                "llmPredict: the model endpoint answered HTTP {}{code}",
                resp.status
            ));
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
