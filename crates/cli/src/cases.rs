//! `ajs cases FILES…`: the conformance runner (shared/conformance/README.md).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use ajs::{
    CreateError, ErrorInfo, ErrorKind, Eval, FetchPolicy, JsValue, OptionError, Options, Outcome,
    Runner, SafeFunction,
};
use serde_json::{Map, Value};

use crate::matchers::{describe_error, ErrorExpect, Expect, Mismatch};
use crate::scripted::{Counters, Script};

/// Extra wall time the runner grants a case beyond its own `timeoutMs` before giving up on it.
const GRACE: Duration = Duration::from_secs(10);

/// The options a case sets (`None` = the default).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunOptions {
    /// `fuel`.
    pub fuel: Option<f64>,
    /// `timeoutMs`.
    pub timeout_ms: Option<u64>,
    /// `maxSourceBytes`.
    pub max_source_bytes: Option<usize>,
    /// `argsMaxBytes`.
    pub args_max_bytes: Option<usize>,
    /// `fetchPolicy`.
    pub fetch_policy: Option<FetchPolicy>,
    /// `quotas` (runner only).
    pub quotas: Option<HashMap<String, u32>>,
    /// `maxHeapBytes` (runner only).
    pub max_heap_bytes: Option<usize>,
    /// A value the facade's types cannot hold (a negative limit…): the run is refused with this,
    /// the way the facade refuses an option out of range.
    pub invalid: Option<OptionError>,
}

impl RunOptions {
    /// The facade options, with these capabilities.
    pub fn options(&self, capabilities: ajs::Capabilities) -> Options {
        let d = Options::default();
        Options {
            fuel: self.fuel.unwrap_or(d.fuel),
            timeout_ms: self.timeout_ms.unwrap_or(d.timeout_ms),
            max_source_bytes: self.max_source_bytes.unwrap_or(d.max_source_bytes),
            args_max_bytes: self.args_max_bytes.unwrap_or(d.args_max_bytes),
            fetch_policy: self.fetch_policy.clone(),
            capabilities,
            ..d
        }
    }

    fn uses_runner(&self) -> bool {
        self.quotas.is_some() || self.max_heap_bytes.is_some()
    }
}

/// An `eval` case's run.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalSpec {
    /// `code`.
    pub code: String,
    /// `context`.
    pub context: Map<String, Value>,
    /// The options.
    pub options: RunOptions,
}

/// A `function` case's function.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSpec {
    /// `params`.
    pub params: Vec<String>,
    /// `body`.
    pub body: String,
    /// The options.
    pub options: RunOptions,
}

/// One entry of `calls`.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// `args`.
    pub args: Vec<Value>,
    /// `expect`.
    pub expect: Expect,
}

/// An `agent` case: a program run by the agent runner with arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentSpec {
    /// `source`.
    pub source: String,
    /// `args`.
    pub args: Value,
    /// The options.
    pub options: RunOptions,
}

/// What a case runs.
#[derive(Clone, Debug, PartialEq)]
pub enum CaseKind {
    /// `eval`.
    Eval(EvalSpec, Expect),
    /// `function` with its `calls`, or with `expectCreateError`.
    Function(FunctionSpec, FunctionExpect),
    /// `agent`.
    Agent(AgentSpec, Expect),
}

/// What a function case expects of creation.
#[derive(Clone, Debug, PartialEq)]
pub enum FunctionExpect {
    /// Creation succeeds, then these calls.
    Calls(Vec<Call>),
    /// Creation fails with a message matching this.
    CreateError(ErrorExpect),
}

/// A parsed case.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// `name`.
    pub name: String,
    /// What it runs and expects.
    pub kind: CaseKind,
    /// `capabilities`.
    pub script: Script,
}

fn get_string(m: &Map<String, Value>, key: &str, at: &str) -> Result<Option<String>, String> {
    match m.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(o) => Err(format!("{at}.{key} must be a string, not {}", short(o))),
    }
}

fn string_list(v: &Value, at: &str) -> Result<Vec<String>, String> {
    let Value::Array(a) = v else {
        return Err(format!("{at} must be a list of strings, not {}", short(v)));
    };
    a.iter()
        .map(|x| {
            x.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{at} must be a list of strings, not {}", short(v)))
        })
        .collect()
}

/// An integer option: a non-negative integer, or a recorded option error when the number is
/// negative, fractional or too large for the facade.
fn int_option(
    m: &Map<String, Value>,
    key: &'static str,
    at: &str,
    min: u64,
    max: u64,
    invalid: &mut Option<OptionError>,
) -> Result<Option<u64>, String> {
    let Some(v) = m.get(key) else { return Ok(None) };
    let Value::Number(n) = v else {
        return Err(format!("{at}.{key} must be a number, not {}", short(v)));
    };
    match n.as_u64() {
        Some(x) if x >= min && x <= max => Ok(Some(x)),
        _ => {
            let bound = if min == 0 {
                "must be an integer >= 0"
            } else {
                "must be at least 1"
            };
            let bound = if n.as_u64().is_some_and(|x| x > max) {
                "is too large"
            } else {
                bound
            };
            invalid.get_or_insert(OptionError {
                field: key,
                value: n.to_string(),
                bound,
            });
            Ok(None)
        }
    }
}

/// Parses the options of `eval`, `function` or `agent`.
pub fn parse_options(m: &Map<String, Value>, at: &str) -> Result<RunOptions, String> {
    let mut o = RunOptions::default();
    if let Some(f) = m.get("fuel") {
        match f {
            Value::Number(n) => o.fuel = n.as_f64(),
            other => return Err(format!("{at}.fuel must be a number, not {}", short(other))),
        }
    }
    let mut invalid = None;
    o.timeout_ms = int_option(m, "timeoutMs", at, 1, u64::MAX, &mut invalid)?.or_else(|| {
        // A zero timeout is passed through: the facade refuses it with its own message.
        (m.get("timeoutMs").and_then(Value::as_u64) == Some(0)).then_some(0)
    });
    if o.timeout_ms == Some(0) {
        invalid = invalid.filter(|e| e.field != "timeoutMs");
    }
    let usize_max = usize::MAX as u64;
    o.max_source_bytes =
        int_option(m, "maxSourceBytes", at, 0, usize_max, &mut invalid)?.map(|x| x as usize);
    o.args_max_bytes =
        int_option(m, "argsMaxBytes", at, 0, usize_max, &mut invalid)?.map(|x| x as usize);
    o.max_heap_bytes =
        int_option(m, "maxHeapBytes", at, 0, usize_max, &mut invalid)?.map(|x| x as usize);
    if let Some(q) = m.get("quotas") {
        let Value::Object(qm) = q else {
            return Err(format!(
                "{at}.quotas must be an object like {{\"llmPredict\": 3}}, not {}",
                short(q)
            ));
        };
        let mut quotas = HashMap::new();
        for (name, n) in qm {
            match n {
                Value::Number(x) => match x.as_u64() {
                    Some(c) if c <= u64::from(u32::MAX) => {
                        quotas.insert(name.clone(), c as u32);
                    }
                    _ => {
                        invalid.get_or_insert(OptionError {
                            field: "quotas",
                            value: format!("{name}: {x}"),
                            bound: "must be an integer >= 0",
                        });
                    }
                },
                other => {
                    return Err(format!(
                        "{at}.quotas.{name} must be a number, not {}",
                        short(other)
                    ))
                }
            }
        }
        o.quotas = Some(quotas);
    }
    if let Some(p) = m.get("fetchPolicy") {
        let Value::Object(pm) = p else {
            return Err(format!(
                "{at}.fetchPolicy must be an object, not {}",
                short(p)
            ));
        };
        let list = |k: &str| -> Result<Option<Vec<String>>, String> {
            match pm.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => string_list(v, &format!("{at}.fetchPolicy.{k}")).map(Some),
            }
        };
        o.fetch_policy = Some(FetchPolicy {
            domains: list("domains")?,
            methods: list("methods")?.unwrap_or_default(),
            headers: list("headers")?.unwrap_or_default(),
        });
    }
    o.invalid = invalid;
    Ok(o)
}

fn parse_expect(m: &Map<String, Value>, at: &str) -> Result<Expect, String> {
    match m.get("expect") {
        Some(e) => Expect::parse(e).map_err(|msg| format!("{at}{msg}")),
        None => Err(format!("{at}missing \"expect\"")),
    }
}

/// Parses one case (its name already read).
pub fn parse_case(name: &str, v: &Value) -> Result<Case, String> {
    let Value::Object(m) = v else {
        return Err(format!("a case must be an object, not {}", short(v)));
    };
    let kinds: Vec<&str> = ["eval", "function", "agent"]
        .into_iter()
        .filter(|k| m.contains_key(*k))
        .collect();
    if kinds.len() != 1 {
        return Err(format!(
            "a case needs exactly one of \"eval\", \"function\", \"agent\"; found {kinds:?}"
        ));
    }
    let script = match m.get("capabilities") {
        Some(c) => Script::parse(c)?,
        None => Script::default(),
    };
    let obj = |k: &str| -> Result<&Map<String, Value>, String> {
        match m.get(k) {
            Some(Value::Object(o)) => Ok(o),
            other => Err(format!(
                "\"{k}\" must be an object, not {}",
                other.map_or("nothing".into(), short)
            )),
        }
    };
    let kind = match kinds[0] {
        "eval" => {
            let e = obj("eval")?;
            let code = get_string(e, "code", "eval")?.ok_or("eval.code is missing")?;
            let context = match e.get("context") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(c)) => c.clone(),
                Some(o) => return Err(format!("eval.context must be an object, not {}", short(o))),
            };
            CaseKind::Eval(
                EvalSpec {
                    code,
                    context,
                    options: parse_options(e, "eval")?,
                },
                parse_expect(m, "")?,
            )
        }
        "function" => {
            let f = obj("function")?;
            let body = get_string(f, "body", "function")?.ok_or("function.body is missing")?;
            let params = match f.get("params") {
                None => Vec::new(),
                Some(p) => string_list(p, "function.params")?,
            };
            let spec = FunctionSpec {
                params,
                body,
                options: parse_options(f, "function")?,
            };
            let create = match m.get("expectCreateError") {
                Some(Value::Null) | None => None,
                Some(x) => Some(ErrorExpect::parse(x, "expectCreateError")?),
            };
            let fexpect = match (create, m.get("calls")) {
                (Some(_), Some(_)) => {
                    return Err(
                        "a function case has \"calls\" or \"expectCreateError\", not both".into(),
                    )
                }
                (Some(c), None) => FunctionExpect::CreateError(c),
                (None, Some(Value::Array(calls))) => {
                    let mut out = Vec::new();
                    for (i, c) in calls.iter().enumerate() {
                        let at = format!("calls[{i}]");
                        let Value::Object(cm) = c else {
                            return Err(format!("{at} must be an object"));
                        };
                        let args = match cm.get("args") {
                            None => Vec::new(),
                            Some(Value::Array(a)) => a.clone(),
                            Some(o) => {
                                return Err(format!("{at}.args must be a list, not {}", short(o)))
                            }
                        };
                        out.push(Call {
                            args,
                            expect: parse_expect(cm, &format!("{at}: "))?,
                        });
                    }
                    FunctionExpect::Calls(out)
                }
                (None, Some(o)) => return Err(format!("calls must be a list, not {}", short(o))),
                (None, None) => {
                    return Err("a function case needs \"calls\" or \"expectCreateError\"".into())
                }
            };
            CaseKind::Function(spec, fexpect)
        }
        _ => {
            let a = obj("agent")?;
            let source = get_string(a, "source", "agent")?.ok_or("agent.source is missing")?;
            let args = a.get("args").cloned().unwrap_or(Value::Object(Map::new()));
            CaseKind::Agent(
                AgentSpec {
                    source,
                    args,
                    options: parse_options(a, "agent")?,
                },
                parse_expect(m, "")?,
            )
        }
    };
    Ok(Case {
        name: name.to_string(),
        kind,
        script,
    })
}

/// A refusal in the facade's own form, for options its types cannot hold.
fn refused(e: &OptionError) -> Outcome {
    Outcome {
        result: JsValue::Undefined,
        fuel_used: 0.0,
        error: Some(ErrorInfo {
            message: e.to_string(),
            kind: ErrorKind::Input,
            pos: None,
        }),
        log: Vec::new(),
    }
}

/// Runs a future on the local task set so that a panic in it becomes a failure, not an abort,
/// and gives up after `limit`.
async fn guarded<F>(limit: Duration, fut: F) -> Result<F::Output, String>
where
    F: std::future::Future + 'static,
    F::Output: 'static,
{
    let handle = tokio::task::spawn_local(fut);
    match tokio::time::timeout(limit, handle).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(match e.try_into_panic() {
            Ok(p) => format!(
                "runner: the run panicked: {}",
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".into())
            ),
            Err(e) => format!("runner: the run was cancelled: {e}"),
        }),
        Err(_) => Err(format!(
            "runner: the run did not finish within {}ms",
            limit.as_millis()
        )),
    }
}

fn limit_for(opts: &Options) -> Duration {
    Duration::from_millis(opts.timeout_ms).saturating_add(GRACE)
}

/// A readable form of an outcome (its JSON line, as `ajs eval` prints it), cut to a readable
/// length.
fn show_outcome(o: &Outcome) -> String {
    short(&ajs_runner::outcome_json(o, false))
}

/// JSON text cut to 300 characters.
pub fn short(v: &Value) -> String {
    cut(&v.to_string(), 300)
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}… ({} bytes in all)", s.len())
}

fn check_outcome(expect: &Expect, o: &Outcome, calls: &BTreeMap<String, u64>) -> Vec<Mismatch> {
    let result = o.result.to_json();
    let error = o.error.as_ref().map(|e| e.message.as_str());
    let mut m = expect.check(result.as_ref(), error, o.fuel_used, calls);
    for x in &mut m {
        x.expected = cut(&x.expected, 300);
        x.got = cut(&x.got, 300);
    }
    m
}

/// Runs one parsed case; `Ok(())` if it passed, else the failure text (expected and got).
pub async fn run_case(case: &Case) -> Result<(), String> {
    match &case.kind {
        CaseKind::Agent(spec, expect) => {
            let counters = Counters::default();
            let opts = spec.options.options(case.script.capabilities(&counters));
            let outcome = if let Some(e) = &spec.options.invalid {
                refused(e)
            } else {
                let runner = Runner {
                    quotas: spec.options.quotas.clone().unwrap_or_default(),
                    max_heap_bytes: spec
                        .options
                        .max_heap_bytes
                        .unwrap_or(Runner::default().max_heap_bytes),
                    ..Runner::default()
                };
                let source = spec.source.clone();
                let args = spec.args.clone();
                let limit = limit_for(&opts);
                guarded(limit, async move {
                    runner.run_agent(&source, &args, &opts).await
                })
                .await?
            };
            report(
                check_outcome(expect, &outcome, &counters.snapshot()),
                &outcome,
            )
        }
        CaseKind::Eval(spec, expect) => {
            let counters = Counters::default();
            let opts = spec.options.options(case.script.capabilities(&counters));
            let outcome = if let Some(e) = &spec.options.invalid {
                refused(e)
            } else {
                let limit = limit_for(&opts);
                let code = spec.code.clone();
                let context = spec.context.clone();
                if spec.options.uses_runner() {
                    let runner = Runner {
                        quotas: spec.options.quotas.clone().unwrap_or_default(),
                        max_heap_bytes: spec
                            .options
                            .max_heap_bytes
                            .unwrap_or(Runner::default().max_heap_bytes),
                        ..Runner::default()
                    };
                    guarded(limit, async move {
                        runner.run_eval(&code, &context, &opts).await
                    })
                    .await?
                } else {
                    let eval = Eval {
                        code,
                        context,
                        options: opts,
                    };
                    guarded(limit, async move { eval.run().await }).await?
                }
            };
            report(
                check_outcome(expect, &outcome, &counters.snapshot()),
                &outcome,
            )
        }
        CaseKind::Function(spec, fexpect) => {
            let counters = Counters::default();
            let opts = spec.options.options(case.script.capabilities(&counters));
            let created = match &spec.options.invalid {
                Some(e) => Err(CreateError::Option(e.clone())),
                None => SafeFunction::new(&spec.params, &spec.body, opts.clone()),
            };
            match (created, fexpect) {
                (Err(e), FunctionExpect::CreateError(want)) => {
                    let msg = e.to_string();
                    if want.matches(Some(&msg)) {
                        Ok(())
                    } else {
                        Err(Mismatch::new(
                            "create error",
                            describe_error(want),
                            short(&Value::String(msg)),
                        )
                        .to_string())
                    }
                }
                (Ok(_), FunctionExpect::CreateError(want)) => Err(Mismatch::new(
                    "create error",
                    describe_error(want),
                    "the function was created".into(),
                )
                .to_string()),
                (Err(e), FunctionExpect::Calls(_)) => Err(Mismatch::new(
                    "create",
                    "the function to be created".into(),
                    format!("error {}", short(&Value::String(e.to_string()))),
                )
                .to_string()),
                (Ok(f), FunctionExpect::Calls(calls)) => {
                    let mut failures = Vec::new();
                    for (i, call) in calls.iter().enumerate() {
                        counters.reset();
                        let f = f.clone();
                        let args = call.args.clone();
                        let outcome = guarded(limit_for(&opts), async move { f.call(&args).await })
                            .await
                            .map_err(|e| format!("call {}: {e}", i + 1))?;
                        let m = check_outcome(&call.expect, &outcome, &counters.snapshot());
                        if let Err(text) = report(m, &outcome) {
                            failures.push(format!(
                                "call {} (args {}): {text}",
                                i + 1,
                                short(&Value::Array(call.args.clone()))
                            ));
                        }
                    }
                    if failures.is_empty() {
                        Ok(())
                    } else {
                        Err(failures.join(" | "))
                    }
                }
            }
        }
    }
}

fn report(m: Vec<Mismatch>, o: &Outcome) -> Result<(), String> {
    if m.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = m.iter().map(Mismatch::to_string).collect();
    Err(format!(
        "{} [outcome {}]",
        parts.join("; "),
        show_outcome(o)
    ))
}

/// Largest conformance case file read.
pub const MAX_CASE_FILE_BYTES: usize = 64 * 1024 * 1024;

/// Reads the cases of one file: each entry parsed (or the reason it cannot be); a file that is
/// not a list of cases gives one failing entry named after the file.
pub fn load_file(path: &str) -> Vec<(String, Result<Case, String>)> {
    let read = ajs_runner::cli::read_capped(
        path,
        MAX_CASE_FILE_BYTES,
        "MAX_CASE_FILE_BYTES; split the cases over several files",
    );
    let text = match read.map(String::from_utf8) {
        Ok(Ok(t)) => t,
        Ok(Err(_)) => return vec![(path.to_string(), Err("not UTF-8".into()))],
        Err(e) => return vec![(path.to_string(), Err(format!("cannot read the file: {e}")))],
    };
    let json: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return vec![(path.to_string(), Err(format!("not valid JSON: {e}")))],
    };
    let Value::Array(items) = json else {
        return vec![(
            path.to_string(),
            Err("a case file must be a JSON array of cases".into()),
        )];
    };
    let mut seen = HashSet::new();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let name = match item.get("name") {
                Some(Value::String(n)) => n.clone(),
                _ => {
                    return (
                        format!("{path}[{i}]"),
                        Err("malformed case: missing \"name\" (a string)".into()),
                    )
                }
            };
            if !seen.insert(name.clone()) {
                return (
                    name,
                    Err(format!("malformed case: duplicate name in {path}")),
                );
            }
            let parsed = parse_case(&name, item).map_err(|e| format!("malformed case: {e}"));
            (name, parsed)
        })
        .collect()
}

/// One case's report: its name, and why it failed (`None`: it passed).
pub type CaseReport = (String, Option<String>);

/// Runs every case of one file in order.
pub async fn run_file(file: &str) -> Vec<CaseReport> {
    let mut reports = Vec::new();
    for (name, parsed) in load_file(file) {
        let failure = match parsed {
            Err(e) => Some(e),
            Ok(case) => run_case(&case).await.err(),
        };
        reports.push((name, failure));
    }
    reports
}

/// A failing case's line in the report: `FAIL name: why`, on one line.
pub fn failure_line(name: &str, why: &str) -> String {
    format!("FAIL {name}: {why}")
        .replace('\r', "\\r")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matchers::{FuelRange, TextMatch};
    use crate::scripted::Answer;
    use serde_json::json;

    #[test]
    fn every_eval_field_is_parsed() {
        let c = parse_case(
            "x",
            &json!({
                "name": "x", "note": "ignored",
                "eval": { "code": "a", "context": { "a": 1 }, "fuel": 12.5, "timeoutMs": 50, "maxSourceBytes": 9000,
                          "argsMaxBytes": 100, "quotas": { "llmPredict": 3 }, "maxHeapBytes": 70000,
                          "fetchPolicy": { "domains": ["api.example.com"], "methods": ["POST"], "headers": ["x-k"] } },
                "capabilities": { "fetch": [ { "echo": true } ] },
                "expect": { "result": 1, "error": null, "fuelUsed": { "gt": 0 }, "calls": { "fetch": 0 } }
            }),
        )
        .unwrap();
        let CaseKind::Eval(spec, expect) = c.kind else {
            panic!("not eval")
        };
        assert_eq!(spec.code, "a");
        assert_eq!(spec.context.get("a"), Some(&json!(1)));
        let o = &spec.options;
        assert_eq!(o.fuel, Some(12.5));
        assert_eq!(o.timeout_ms, Some(50));
        assert_eq!(o.max_source_bytes, Some(9000));
        assert_eq!(o.args_max_bytes, Some(100));
        assert_eq!(
            o.quotas.as_ref().and_then(|q| q.get("llmPredict")),
            Some(&3)
        );
        assert_eq!(o.max_heap_bytes, Some(70000));
        assert_eq!(
            o.fetch_policy,
            Some(FetchPolicy {
                domains: Some(vec!["api.example.com".into()]),
                methods: vec!["POST".into()],
                headers: vec!["x-k".into()]
            })
        );
        assert!(o.invalid.is_none() && o.uses_runner());
        let opts = o.options(ajs::Capabilities::default());
        assert_eq!(
            (
                opts.fuel,
                opts.timeout_ms,
                opts.max_source_bytes,
                opts.args_max_bytes
            ),
            (12.5, 50, 9000, 100)
        );
        assert_eq!(c.script.caps[0].1[0].answer, Answer::Echo);
        assert_eq!(expect.result, Some(json!(1)));
        assert_eq!(expect.error, Some(ErrorExpect::NoError));
        assert_eq!(
            expect.fuel_used,
            Some(FuelRange {
                gt: Some(0.0),
                ..FuelRange::default()
            })
        );
        assert_eq!(expect.calls.unwrap().get("fetch"), Some(&0));
    }

    #[test]
    fn every_function_field_is_parsed() {
        let c = parse_case(
            "f",
            &json!({
                "name": "f",
                "function": { "params": ["a", "b"], "body": "return a", "fuel": 50, "timeoutMs": 10,
                              "maxSourceBytes": 10, "argsMaxBytes": 20, "fetchPolicy": { "methods": ["PUT"] } },
                "calls": [ { "args": [1, 2], "expect": { "result": 1 } }, { "expect": { "undefined": true } } ]
            }),
        )
        .unwrap();
        let CaseKind::Function(spec, FunctionExpect::Calls(calls)) = c.kind else {
            panic!("not calls")
        };
        assert_eq!(spec.params, ["a", "b"]);
        assert_eq!(spec.body, "return a");
        assert_eq!(spec.options.fuel, Some(50.0));
        assert_eq!(spec.options.timeout_ms, Some(10));
        assert_eq!(spec.options.max_source_bytes, Some(10));
        assert_eq!(spec.options.args_max_bytes, Some(20));
        assert_eq!(
            spec.options
                .fetch_policy
                .as_ref()
                .map(|p| p.methods.clone()),
            Some(vec!["PUT".to_string()])
        );
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].args, [json!(1), json!(2)]);
        assert!(calls[1].args.is_empty());
        assert_eq!(calls[1].expect.undefined, Some(true));

        let c = parse_case(
            "g",
            &json!({ "name": "g", "function": { "params": [], "body": "x" }, "expectCreateError": { "startsWith": "S" } }),
        )
        .unwrap();
        assert_eq!(
            c.kind,
            CaseKind::Function(
                FunctionSpec {
                    params: vec![],
                    body: "x".into(),
                    options: RunOptions::default()
                },
                FunctionExpect::CreateError(ErrorExpect::Error(TextMatch::Pattern {
                    starts_with: Some("S".into()),
                    contains: None
                }))
            )
        );
    }

    #[test]
    fn every_agent_field_is_parsed() {
        let c = parse_case(
            "a",
            &json!({
                "name": "a",
                "agent": { "source": "function f({ x }) { return x }", "args": { "x": 1 }, "fuel": 10,
                           "timeoutMs": 100, "quotas": { "llmPredict": 3 }, "maxHeapBytes": 65536,
                           "fetchPolicy": { "domains": ["a.b"] } },
                "capabilities": { "llm": [ { "upper": true } ] },
                "expect": { "error": "x", "calls": { "llm": 3 } }
            }),
        )
        .unwrap();
        let CaseKind::Agent(spec, expect) = c.kind else {
            panic!("not agent")
        };
        assert_eq!(spec.args, json!({ "x": 1 }));
        assert_eq!(
            spec.options
                .quotas
                .as_ref()
                .and_then(|q| q.get("llmPredict")),
            Some(&3)
        );
        assert_eq!(spec.options.max_heap_bytes, Some(65536));
        assert_eq!(expect.calls.unwrap().get("llm"), Some(&3));
    }

    #[test]
    fn out_of_range_options_become_refusals() {
        let o = parse_options(json!({ "timeoutMs": -5 }).as_object().unwrap(), "eval").unwrap();
        assert_eq!(
            o.invalid.unwrap().to_string(),
            "Invalid option timeoutMs: -5 (must be at least 1)"
        );
        let o = parse_options(json!({ "timeoutMs": 0 }).as_object().unwrap(), "eval").unwrap();
        assert_eq!((o.timeout_ms, o.invalid), (Some(0), None));
        let o = parse_options(
            json!({ "quotas": { "llmPredict": -1 } })
                .as_object()
                .unwrap(),
            "eval",
        )
        .unwrap();
        assert!(o
            .invalid
            .unwrap()
            .to_string()
            .starts_with("Invalid option quotas"));
        let o = parse_options(
            json!({ "maxSourceBytes": 1.5 }).as_object().unwrap(),
            "eval",
        )
        .unwrap();
        assert!(o.invalid.is_some());
    }

    #[test]
    fn malformed_cases() {
        for bad in [
            json!(1),
            json!({ "name": "x" }),
            json!({ "name": "x", "eval": { "code": "1" }, "function": { "body": "1" }, "expect": {} }),
            json!({ "name": "x", "eval": { "code": 1 }, "expect": {} }),
            json!({ "name": "x", "eval": { "code": "1" } }),
            json!({ "name": "x", "eval": { "code": "1", "context": [] }, "expect": {} }),
            json!({ "name": "x", "eval": { "code": "1", "fuel": "1" }, "expect": {} }),
            json!({ "name": "x", "eval": { "code": "1" }, "expect": { "error": 3 } }),
            json!({ "name": "x", "eval": { "code": "1", "fetchPolicy": { "domains": "a" } }, "expect": {} }),
            json!({ "name": "x", "function": { "body": "1" } }),
            json!({ "name": "x", "function": { "body": "1" }, "calls": [ { "args": [] } ] }),
            json!({ "name": "x", "function": { "body": "1", "params": "a" }, "calls": [] }),
            json!({ "name": "x", "function": { "body": "1" }, "calls": [], "expectCreateError": true }),
            json!({ "name": "x", "agent": { "args": {} }, "expect": {} }),
        ] {
            assert!(parse_case("x", &bad).is_err(), "{bad}");
        }
    }
}
