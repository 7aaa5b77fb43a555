//! Scripted host capabilities for conformance cases: rules tried in order, the first that
//! matches answering the call, and a count of calls per capability key.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ajs::{Capabilities, FetchCall, JsValue};
use serde_json::Value;

/// Largest `respondBytes` accepted (a bigger one is a malformed case, not an allocation).
pub const MAX_RESPOND_BYTES: u64 = 256 * 1024 * 1024;

/// What a rule answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// `respond`: this JSON value.
    Respond(Value),
    /// `throw`: the capability fails with this message.
    Throw(String),
    /// `echo`: what the capability received.
    Echo,
    /// `upper` (llm): the prompt in upper case.
    Upper,
    /// `lengthTemplate` (llm): the text with `{n}` replaced by the prompt's length.
    LengthTemplate(String),
    /// `never`: the call never settles.
    Never,
    /// `respondBytes`: a string of this many bytes.
    RespondBytes(usize),
}

/// Which capability a rule list belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `fetch` (behind `httpFetch`).
    Fetch,
    /// `llm` (behind `llmPredict`).
    Llm,
    /// A host atom of that name.
    Custom,
}

impl Kind {
    fn of(key: &str) -> Kind {
        match key {
            "fetch" => Kind::Fetch,
            "llm" => Kind::Llm,
            _ => Kind::Custom,
        }
    }
}

/// One scripted rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// `match.host` (fetch).
    pub host: Option<String>,
    /// `match.method` (fetch).
    pub method: Option<String>,
    /// `match.urlPrefix` (fetch).
    pub url_prefix: Option<String>,
    /// `match.promptContains` (llm).
    pub prompt_contains: Option<String>,
    /// The answer.
    pub answer: Answer,
    /// `delayMs`.
    pub delay_ms: Option<f64>,
}

impl Rule {
    /// Parses one rule of capability `key`.
    pub fn parse(key: &str, v: &Value) -> Result<Rule, String> {
        let kind = Kind::of(key);
        let at = format!("capabilities.{key}");
        let Value::Object(m) = v else {
            return Err(format!("{at}: a rule must be an object, not {v}"));
        };
        let mut rule = Rule {
            host: None,
            method: None,
            url_prefix: None,
            prompt_contains: None,
            answer: Answer::Never,
            delay_ms: None,
        };
        if let Some(mv) = m.get("match") {
            let Value::Object(mm) = mv else {
                return Err(format!("{at}: match must be an object, not {mv}"));
            };
            let text = |k: &str| -> Result<Option<String>, String> {
                match mm.get(k) {
                    None => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(o) => Err(format!("{at}: match.{k} must be a string, not {o}")),
                }
            };
            match kind {
                Kind::Fetch => {
                    rule.host = text("host")?;
                    rule.method = text("method")?;
                    rule.url_prefix = text("urlPrefix")?;
                }
                Kind::Llm => rule.prompt_contains = text("promptContains")?,
                Kind::Custom => {}
            }
        }
        let flag = |k: &str| -> Result<bool, String> {
            match m.get(k) {
                None | Some(Value::Bool(false)) => Ok(false),
                Some(Value::Bool(true)) => Ok(true),
                Some(o) => Err(format!("{at}: {k} must be true, not {o}")),
            }
        };
        let mut answers = Vec::new();
        if let Some(r) = m.get("respond") {
            answers.push(Answer::Respond(r.clone()));
        }
        if let Some(t) = m.get("throw") {
            match t {
                Value::String(s) => answers.push(Answer::Throw(s.clone())),
                o => return Err(format!("{at}: throw must be a string, not {o}")),
            }
        }
        if flag("echo")? {
            answers.push(Answer::Echo);
        }
        if flag("upper")? {
            if kind != Kind::Llm {
                return Err(format!("{at}: upper is for llm only"));
            }
            answers.push(Answer::Upper);
        }
        if let Some(t) = m.get("lengthTemplate") {
            if kind != Kind::Llm {
                return Err(format!("{at}: lengthTemplate is for llm only"));
            }
            match t {
                Value::String(s) => answers.push(Answer::LengthTemplate(s.clone())),
                o => return Err(format!("{at}: lengthTemplate must be a string, not {o}")),
            }
        }
        if flag("never")? {
            answers.push(Answer::Never);
        }
        if let Some(n) = m.get("respondBytes") {
            match n.as_u64() {
                Some(n) if n <= MAX_RESPOND_BYTES => answers.push(Answer::RespondBytes(n as usize)),
                _ => {
                    return Err(format!(
                    "{at}: respondBytes must be an integer from 0 to {MAX_RESPOND_BYTES}, not {n}"
                ))
                }
            }
        }
        if answers.len() != 1 {
            return Err(format!(
                "{at}: a rule needs exactly one of respond, throw, echo, upper, lengthTemplate, never, respondBytes; got {}",
                answers.len()
            ));
        }
        rule.answer = answers.remove(0);
        if let Some(d) = m.get("delayMs") {
            match d.as_f64() {
                Some(ms) if ms.is_finite() && ms >= 0.0 => rule.delay_ms = Some(ms),
                _ => return Err(format!("{at}: delayMs must be a number >= 0, not {d}")),
            }
        }
        Ok(rule)
    }

    fn matches_fetch(&self, call: &FetchCall) -> bool {
        if let Some(h) = &self.host {
            let host = url::Url::parse(&call.url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string));
            if !host.is_some_and(|got| got.eq_ignore_ascii_case(h)) {
                return false;
            }
        }
        if let Some(m) = &self.method {
            if !m.eq_ignore_ascii_case(&call.method) {
                return false;
            }
        }
        if let Some(p) = &self.url_prefix {
            if !call.url.starts_with(p.as_str()) {
                return false;
            }
        }
        true
    }

    fn matches_prompt(&self, prompt: &str) -> bool {
        self.prompt_contains
            .as_deref()
            .is_none_or(|p| prompt.contains(p))
    }
}

/// All scripted capabilities of a case, in the order given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Script {
    /// Capability key → its rules.
    pub caps: Vec<(String, Vec<Rule>)>,
}

/// Calls per capability key, shared with the capability closures.
#[derive(Clone, Debug, Default)]
pub struct Counters(Arc<Mutex<BTreeMap<String, u64>>>);

impl Counters {
    fn bump(&self, key: &str) {
        if let Ok(mut m) = self.0.lock() {
            *m.entry(key.to_string()).or_insert(0) += 1;
        }
    }

    /// Forgets the counts (between the calls of a function case).
    pub fn reset(&self) {
        if let Ok(mut m) = self.0.lock() {
            m.clear();
        }
    }

    /// The counts so far.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

/// What the capability received, for `echo` and the templates.
enum Received {
    Fetch(FetchCall),
    Prompt(String),
    Input(JsValue),
}

async fn answer(rule: Option<Rule>, received: Received) -> Result<JsValue, String> {
    let Some(rule) = rule else {
        return Err("no scripted answer".into());
    };
    if let Some(ms) = rule.delay_ms {
        tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
    }
    match rule.answer {
        Answer::Respond(v) => Ok(JsValue::from_json(&v)),
        Answer::Throw(m) => Err(m),
        Answer::Never => std::future::pending().await,
        Answer::RespondBytes(n) => Ok(JsValue::String("x".repeat(n))),
        Answer::Echo => Ok(match received {
            Received::Fetch(c) => {
                let headers = JsValue::Object(
                    c.headers
                        .into_iter()
                        .map(|(k, v)| (k, JsValue::String(v)))
                        .collect(),
                );
                JsValue::Object(
                    [
                        ("url".to_string(), JsValue::String(c.url)),
                        ("method".to_string(), JsValue::String(c.method)),
                        ("headers".to_string(), headers),
                        ("body".to_string(), c.body),
                    ]
                    .into_iter()
                    .collect(),
                )
            }
            Received::Prompt(p) => JsValue::String(p),
            Received::Input(v) => v,
        }),
        Answer::Upper => match received {
            Received::Prompt(p) => Ok(JsValue::String(p.to_uppercase())),
            _ => Err("upper is for llm only".into()),
        },
        Answer::LengthTemplate(t) => match received {
            Received::Prompt(p) => {
                let n = p.encode_utf16().count();
                Ok(JsValue::String(t.replace("{n}", &n.to_string())))
            }
            _ => Err("lengthTemplate is for llm only".into()),
        },
    }
}

impl Script {
    /// Parses the `capabilities` object of a case.
    pub fn parse(v: &Value) -> Result<Script, String> {
        let Value::Object(m) = v else {
            return Err(format!("capabilities must be an object, not {v}"));
        };
        let mut caps = Vec::new();
        for (key, rules) in m {
            if key == "httpFetch" || key == "llmPredict" {
                return Err(format!(
                    "capabilities.{key}: name the capability, not the atom (\"fetch\" for httpFetch, \"llm\" for llmPredict)"
                ));
            }
            let Value::Array(list) = rules else {
                return Err(format!(
                    "capabilities.{key} must be a list of rules, not {rules}"
                ));
            };
            let rules = list
                .iter()
                .map(|r| Rule::parse(key, r))
                .collect::<Result<Vec<_>, _>>()?;
            caps.push((key.clone(), rules));
        }
        Ok(Script { caps })
    }

    /// The capabilities to hand a run, counting calls into `counters`.
    pub fn capabilities(&self, counters: &Counters) -> Capabilities {
        let mut caps = Capabilities::default();
        for (key, rules) in &self.caps {
            let rules = Arc::new(rules.clone());
            let counters = counters.clone();
            let key = key.clone();
            caps = match Kind::of(&key) {
                Kind::Fetch => caps.with_fetch(move |call: FetchCall| {
                    counters.bump(&key);
                    let rule = rules.iter().find(|r| r.matches_fetch(&call)).cloned();
                    answer(rule, Received::Fetch(call))
                }),
                Kind::Llm => caps.with_llm(move |prompt: String, _opts: JsValue| {
                    counters.bump(&key);
                    let rule = rules.iter().find(|r| r.matches_prompt(&prompt)).cloned();
                    answer(rule, Received::Prompt(prompt))
                }),
                Kind::Custom => {
                    let name = key.clone();
                    caps.with_atom(name, move |input: JsValue| {
                        counters.bump(&key);
                        let rule = rules.first().cloned();
                        answer(rule, Received::Input(input))
                    })
                }
            };
        }
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fetch_call(url: &str, method: &str) -> FetchCall {
        FetchCall {
            url: url.into(),
            method: method.into(),
            headers: vec![
                ("x-api-key".into(), "k".into()),
                ("X-Agent-Depth".into(), "1".into()),
            ],
            body: JsValue::Undefined,
        }
    }

    #[test]
    fn every_rule_field_is_parsed() {
        let s = Script::parse(&json!({
            "fetch": [
                { "match": { "host": "api.example.com", "method": "post", "urlPrefix": "https://api" },
                  "respond": [1], "delayMs": 5, "note": "x" },
                { "throw": "no" },
                { "echo": true },
                { "never": true },
                { "respondBytes": 10 }
            ],
            "llm": [
                { "match": { "promptContains": "hi" }, "upper": true },
                { "lengthTemplate": "{n} chars" },
                { "echo": true }
            ],
            "lookup": [ { "echo": true } ]
        }))
        .unwrap();
        let fetch = &s.caps.iter().find(|(k, _)| k == "fetch").unwrap().1;
        assert_eq!(fetch[0].host.as_deref(), Some("api.example.com"));
        assert_eq!(fetch[0].method.as_deref(), Some("post"));
        assert_eq!(fetch[0].url_prefix.as_deref(), Some("https://api"));
        assert_eq!(fetch[0].answer, Answer::Respond(json!([1])));
        assert_eq!(fetch[0].delay_ms, Some(5.0));
        assert_eq!(fetch[1].answer, Answer::Throw("no".into()));
        assert_eq!(fetch[2].answer, Answer::Echo);
        assert_eq!(fetch[3].answer, Answer::Never);
        assert_eq!(fetch[4].answer, Answer::RespondBytes(10));
        let llm = &s.caps.iter().find(|(k, _)| k == "llm").unwrap().1;
        assert_eq!(llm[0].prompt_contains.as_deref(), Some("hi"));
        assert_eq!(llm[0].answer, Answer::Upper);
        assert_eq!(llm[1].answer, Answer::LengthTemplate("{n} chars".into()));
        assert!(s.caps.iter().any(|(k, _)| k == "lookup"));
    }

    #[test]
    fn malformed_rules_are_refused() {
        for bad in [
            json!([]),
            json!({ "fetch": {} }),
            json!({ "fetch": [ {} ] }),
            json!({ "fetch": [ { "respond": 1, "throw": "x" } ] }),
            json!({ "fetch": [ { "upper": true } ] }),
            json!({ "lookup": [ { "lengthTemplate": "x" } ] }),
            json!({ "fetch": [ { "throw": 1 } ] }),
            json!({ "fetch": [ { "respondBytes": -1 } ] }),
            json!({ "fetch": [ { "echo": "yes" } ] }),
            json!({ "fetch": [ { "match": { "host": 1 }, "echo": true } ] }),
            json!({ "fetch": [ { "echo": true, "delayMs": -1 } ] }),
            json!({ "httpFetch": [ { "echo": true } ] }),
        ] {
            assert!(Script::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fetch_matching() {
        let r = Rule::parse(
            "fetch",
            &json!({ "match": { "host": "api.example.com" }, "echo": true }),
        )
        .unwrap();
        assert!(r.matches_fetch(&fetch_call("https://api.example.com/x", "GET")));
        assert!(r.matches_fetch(&fetch_call("https://API.example.com:8443/x", "GET")));
        assert!(!r.matches_fetch(&fetch_call(
            "https://evil.example.net/api.example.com",
            "GET"
        )));
        assert!(!r.matches_fetch(&fetch_call("not a url", "GET")));
        let r = Rule::parse(
            "fetch",
            &json!({ "match": { "method": "post", "urlPrefix": "https://a/" }, "echo": true }),
        )
        .unwrap();
        assert!(r.matches_fetch(&fetch_call("https://a/b", "POST")));
        assert!(!r.matches_fetch(&fetch_call("https://a/b", "GET")));
        assert!(!r.matches_fetch(&fetch_call("https://b/a/", "POST")));
    }

    #[test]
    fn answers() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = Script::parse(&json!({
                "fetch": [ { "match": { "urlPrefix": "https://echo/" }, "echo": true },
                           { "match": { "urlPrefix": "https://big/" }, "respondBytes": 7 } ],
                "llm": [ { "match": { "promptContains": "up" }, "upper": true },
                         { "match": { "promptContains": "echo" }, "echo": true },
                         { "lengthTemplate": "({n})" } ],
                "lookup": [ { "echo": true, "delayMs": 1 } ]
            }))
            .unwrap();
            let counters = Counters::default();
            let caps = s.capabilities(&counters);
            let fetch = caps.fetch.clone().unwrap();
            let got = fetch(fetch_call("https://echo/x", "GET")).await.unwrap();
            assert_eq!(
                got.to_json(),
                Some(json!({ "url": "https://echo/x", "method": "GET",
                             "headers": { "x-api-key": "k", "X-Agent-Depth": "1" } }))
            );
            assert_eq!(
                fetch(fetch_call("https://big/", "GET")).await,
                Ok(JsValue::String("xxxxxxx".into()))
            );
            assert_eq!(
                fetch(fetch_call("https://other/", "GET")).await,
                Err("no scripted answer".into())
            );
            let llm = caps.llm.clone().unwrap();
            assert_eq!(
                llm("make up".into(), JsValue::Undefined).await,
                Ok(JsValue::String("MAKE UP".into()))
            );
            assert_eq!(
                llm("echo me".into(), JsValue::Undefined).await,
                Ok(JsValue::String("echo me".into()))
            );
            // "é" is one UTF-16 unit, "😀" two.
            assert_eq!(
                llm("é😀".into(), JsValue::Undefined).await,
                Ok(JsValue::String("(3)".into()))
            );
            let lookup = caps.atoms.get("lookup").unwrap();
            let input = JsValue::from_json(&json!({ "id": 4 }));
            assert_eq!(lookup(input.clone()).await, Ok(input));
            let n = counters.snapshot();
            assert_eq!((n["fetch"], n["llm"], n["lookup"]), (3, 3, 1));
        });
    }

    #[test]
    fn never_never_settles() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = Script::parse(&json!({ "fetch": [ { "never": true } ] })).unwrap();
            let caps = s.capabilities(&Counters::default());
            let fut = (caps.fetch.unwrap())(fetch_call("https://a/", "GET"));
            assert!(tokio::time::timeout(Duration::from_millis(20), fut)
                .await
                .is_err());
        });
    }
}
