//! The `expect` side of a conformance case: text matchers, fuel ranges, JSON comparison and the
//! checks of one outcome against one expectation.

use std::collections::BTreeMap;

use serde_json::Value;

/// A text match (`error`, `expectCreateError`): `true`, an exact string, or
/// `{ "startsWith": s }` / `{ "contains": s }` (both may be given; both must then hold).
#[derive(Clone, Debug, PartialEq)]
pub enum TextMatch {
    /// `true`: any text.
    Any,
    /// A string: exactly this text.
    Exact(String),
    /// An object of patterns.
    Pattern {
        /// `startsWith`.
        starts_with: Option<String>,
        /// `contains`.
        contains: Option<String>,
    },
}

impl TextMatch {
    /// Whether `text` satisfies this match.
    pub fn matches(&self, text: &str) -> bool {
        match self {
            TextMatch::Any => true,
            TextMatch::Exact(s) => text == s,
            TextMatch::Pattern {
                starts_with,
                contains,
            } => {
                starts_with.as_deref().is_none_or(|p| text.starts_with(p))
                    && contains.as_deref().is_none_or(|p| text.contains(p))
            }
        }
    }
}

/// What `error` (or `expectCreateError`) asks for: `null` = no error, otherwise a text match.
#[derive(Clone, Debug, PartialEq)]
pub enum ErrorExpect {
    /// `null`: the run must not fail.
    NoError,
    /// The run must fail with a message matching this.
    Error(TextMatch),
}

impl ErrorExpect {
    /// Parses the JSON form.
    pub fn parse(v: &Value, what: &str) -> Result<ErrorExpect, String> {
        match v {
            Value::Null => Ok(ErrorExpect::NoError),
            Value::Bool(true) => Ok(ErrorExpect::Error(TextMatch::Any)),
            Value::String(s) => Ok(ErrorExpect::Error(TextMatch::Exact(s.clone()))),
            Value::Object(m) => {
                let text = |key: &str| -> Result<Option<String>, String> {
                    match m.get(key) {
                        None => Ok(None),
                        Some(Value::String(s)) => Ok(Some(s.clone())),
                        Some(other) => Err(format!("{what}.{key} must be a string, not {other}")),
                    }
                };
                let starts_with = text("startsWith")?;
                let contains = text("contains")?;
                if starts_with.is_none() && contains.is_none() {
                    return Err(format!("{what} object needs \"startsWith\" or \"contains\", got {v}"));
                }
                Ok(ErrorExpect::Error(TextMatch::Pattern { starts_with, contains }))
            }
            other => Err(format!(
                "{what} must be null, true, a string, {{\"startsWith\": s}} or {{\"contains\": s}}, not {other}"
            )),
        }
    }

    /// Whether an outcome's error message (None = no error) satisfies this.
    pub fn matches(&self, got: Option<&str>) -> bool {
        match (self, got) {
            (ErrorExpect::NoError, None) => true,
            (ErrorExpect::Error(m), Some(text)) => m.matches(text),
            _ => false,
        }
    }
}

/// `fuelUsed`: any of `gt`, `gte`, `lt`, `lte`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FuelRange {
    /// Strictly greater than.
    pub gt: Option<f64>,
    /// Greater or equal.
    pub gte: Option<f64>,
    /// Strictly less than.
    pub lt: Option<f64>,
    /// Less or equal.
    pub lte: Option<f64>,
}

impl FuelRange {
    /// Parses `{ "gt": x, … }`.
    pub fn parse(v: &Value) -> Result<FuelRange, String> {
        let Value::Object(m) = v else {
            return Err(format!(
                "expect.fuelUsed must be an object like {{\"gt\": 0}}, not {v}"
            ));
        };
        let bound = |key: &str| -> Result<Option<f64>, String> {
            match m.get(key) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(n.as_f64()),
                Some(other) => Err(format!(
                    "expect.fuelUsed.{key} must be a number, not {other}"
                )),
            }
        };
        let r = FuelRange {
            gt: bound("gt")?,
            gte: bound("gte")?,
            lt: bound("lt")?,
            lte: bound("lte")?,
        };
        if r == FuelRange::default() {
            return Err(format!(
                "expect.fuelUsed needs at least one of gt, gte, lt, lte; got {v}"
            ));
        }
        Ok(r)
    }

    /// Whether `fuel` lies in the range.
    pub fn contains(&self, fuel: f64) -> bool {
        self.gt.is_none_or(|x| fuel > x)
            && self.gte.is_none_or(|x| fuel >= x)
            && self.lt.is_none_or(|x| fuel < x)
            && self.lte.is_none_or(|x| fuel <= x)
    }
}

/// Compares two JSON values as JSON: numbers as IEEE doubles (`1 == 1.0`), object keys in any
/// order, arrays in order.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => false,
    }
}

/// One case's (or one call's) `expect`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expect {
    /// `result`: the value as JSON.
    pub result: Option<Value>,
    /// `undefined`: whether the result must be (true) or must not be (false) `undefined`.
    pub undefined: Option<bool>,
    /// `error`.
    pub error: Option<ErrorExpect>,
    /// `fuelUsed`.
    pub fuel_used: Option<FuelRange>,
    /// `calls`: capability key → expected number of calls.
    pub calls: Option<BTreeMap<String, u64>>,
}

impl Expect {
    /// Parses an `expect` object (unknown keys ignored).
    pub fn parse(v: &Value) -> Result<Expect, String> {
        let Value::Object(m) = v else {
            return Err(format!("expect must be an object, not {v}"));
        };
        let mut e = Expect {
            result: m.get("result").cloned(),
            ..Expect::default()
        };
        if let Some(u) = m.get("undefined") {
            match u {
                Value::Bool(b) => e.undefined = Some(*b),
                other => {
                    return Err(format!(
                        "expect.undefined must be true or false, not {other}"
                    ))
                }
            }
        }
        if let Some(err) = m.get("error") {
            e.error = Some(ErrorExpect::parse(err, "expect.error")?);
        }
        if let Some(f) = m.get("fuelUsed") {
            e.fuel_used = Some(FuelRange::parse(f)?);
        }
        if let Some(c) = m.get("calls") {
            let Value::Object(cm) = c else {
                return Err(format!(
                    "expect.calls must be an object like {{\"fetch\": 1}}, not {c}"
                ));
            };
            let mut calls = BTreeMap::new();
            for (k, n) in cm {
                let Some(n) = n.as_u64() else {
                    return Err(format!(
                        "expect.calls.{k} must be a non-negative integer, not {n}"
                    ));
                };
                calls.insert(k.clone(), n);
            }
            e.calls = Some(calls);
        }
        Ok(e)
    }

    /// Checks what came back. `result` is the outcome's result as JSON (None = undefined),
    /// `error` its error message, `calls` the number of calls per capability key.
    pub fn check(
        &self,
        result: Option<&Value>,
        error: Option<&str>,
        fuel_used: f64,
        calls: &BTreeMap<String, u64>,
    ) -> Vec<Mismatch> {
        let mut out = Vec::new();
        let show_result = || result.map_or_else(|| "undefined".to_string(), |r| r.to_string());
        let show_error = || {
            error.map_or_else(
                || "no error".to_string(),
                |m| Value::String(m.to_string()).to_string(),
            )
        };
        if let Some(want) = &self.result {
            if !result.is_some_and(|got| json_equal(want, got)) {
                out.push(Mismatch::new("result", want.to_string(), show_result()));
            }
        }
        if let Some(u) = self.undefined {
            if result.is_none() != u {
                let want = if u { "undefined" } else { "not undefined" };
                out.push(Mismatch::new("result", want.into(), show_result()));
            }
        }
        if let Some(e) = &self.error {
            if !e.matches(error) {
                out.push(Mismatch::new("error", describe_error(e), show_error()));
            }
        }
        if let Some(r) = &self.fuel_used {
            if !r.contains(fuel_used) {
                out.push(Mismatch::new(
                    "fuelUsed",
                    describe_range(r),
                    fuel_used.to_string(),
                ));
            }
        }
        if let Some(want) = &self.calls {
            let bad = want
                .iter()
                .any(|(k, n)| calls.get(k).copied().unwrap_or(0) != *n);
            if bad {
                let got: BTreeMap<&String, u64> = want
                    .keys()
                    .map(|k| (k, calls.get(k).copied().unwrap_or(0)))
                    .collect();
                out.push(Mismatch::new(
                    "calls",
                    format!("{want:?}"),
                    format!("{got:?}"),
                ));
            }
        }
        out
    }
}

/// One check that did not hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Which expectation (`result`, `error`, `fuelUsed`, `calls`, `create`…).
    pub what: &'static str,
    /// What was expected, readable.
    pub expected: String,
    /// What came back, readable.
    pub got: String,
}

impl Mismatch {
    /// A mismatch.
    pub fn new(what: &'static str, expected: String, got: String) -> Mismatch {
        Mismatch {
            what,
            expected,
            got,
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: expected {}, got {}",
            self.what, self.expected, self.got
        )
    }
}

/// A readable form of an error expectation.
pub fn describe_error(e: &ErrorExpect) -> String {
    let q = |s: &str| Value::String(s.to_string()).to_string();
    match e {
        ErrorExpect::NoError => "no error".into(),
        ErrorExpect::Error(TextMatch::Any) => "any error".into(),
        ErrorExpect::Error(TextMatch::Exact(s)) => q(s),
        ErrorExpect::Error(TextMatch::Pattern {
            starts_with,
            contains,
        }) => {
            let mut parts = Vec::new();
            if let Some(s) = starts_with {
                parts.push(format!("an error starting with {}", q(s)));
            }
            if let Some(s) = contains {
                parts.push(format!("an error containing {}", q(s)));
            }
            parts.join(" and ")
        }
    }
}

fn describe_range(r: &FuelRange) -> String {
    let mut parts = Vec::new();
    for (op, v) in [(">", r.gt), (">=", r.gte), ("<", r.lt), ("<=", r.lte)] {
        if let Some(v) = v {
            parts.push(format!("{op} {v}"));
        }
    }
    parts.join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_matchers() {
        let p = |v: Value| ErrorExpect::parse(&v, "expect.error").unwrap();
        assert!(p(json!(null)).matches(None));
        assert!(!p(json!(null)).matches(Some("boom")));
        assert!(p(json!(true)).matches(Some("anything")));
        assert!(!p(json!(true)).matches(None));
        assert!(p(json!("Out of Fuel")).matches(Some("Out of Fuel")));
        assert!(!p(json!("Out of Fuel")).matches(Some("Out of Fuel!")));
        assert!(!p(json!("Out of Fuel")).matches(None));
        let sw = p(json!({ "startsWith": "Execution timeout after 50ms" }));
        assert!(sw.matches(Some(
            "Execution timeout after 50ms. Pass a higher timeoutMs"
        )));
        assert!(!sw.matches(Some("an Execution timeout after 50ms")));
        let c = p(json!({ "contains": "__proto__" }));
        assert!(c.matches(Some("Access to '__proto__' is forbidden")));
        assert!(!c.matches(Some("constructor")));
        assert!(!c.matches(None));
        let both = p(json!({ "startsWith": "a", "contains": "z" }));
        assert!(both.matches(Some("abcz")));
        assert!(!both.matches(Some("abc")));
        for bad in [
            json!(false),
            json!(1),
            json!([]),
            json!({}),
            json!({ "startsWith": 3 }),
        ] {
            assert!(ErrorExpect::parse(&bad, "expect.error").is_err(), "{bad}");
        }
    }

    #[test]
    fn fuel_ranges() {
        let r = FuelRange::parse(&json!({ "gt": 0 })).unwrap();
        assert!(r.contains(0.001) && !r.contains(0.0));
        let r = FuelRange::parse(&json!({ "gte": 200, "lte": 800 })).unwrap();
        assert!(r.contains(200.0) && r.contains(800.0) && r.contains(500.5));
        assert!(!r.contains(199.9) && !r.contains(800.1));
        let r = FuelRange::parse(&json!({ "lt": 10 })).unwrap();
        assert!(r.contains(9.99) && !r.contains(10.0));
        let r = FuelRange::parse(&json!({ "gt": 1, "lt": 2, "gte": 1.5, "lte": 1.75 })).unwrap();
        assert!(r.contains(1.6) && !r.contains(1.8) && !r.contains(1.2));
        assert!(FuelRange::parse(&json!({})).is_err());
        assert!(FuelRange::parse(&json!(5)).is_err());
        assert!(FuelRange::parse(&json!({ "gt": "0" })).is_err());
    }

    #[test]
    fn json_comparison() {
        assert!(json_equal(&json!(1), &json!(1.0)));
        assert!(json_equal(
            &json!({ "a": 1, "b": [1, 2.0] }),
            &json!({ "b": [1.0, 2], "a": 1.0 })
        ));
        assert!(!json_equal(&json!({ "a": 1 }), &json!({ "a": 1, "b": 2 })));
        assert!(!json_equal(&json!({ "a": 1, "b": 2 }), &json!({ "a": 1 })));
        assert!(!json_equal(&json!([1, 2]), &json!([2, 1])));
        assert!(!json_equal(&json!(null), &json!(0)));
        assert!(!json_equal(&json!("1"), &json!(1)));
        assert!(json_equal(&json!(-0.0), &json!(0)));
        assert!(json_equal(&json!(0.1 + 0.2), &json!(0.30000000000000004)));
    }

    #[test]
    fn every_expect_field_is_parsed() {
        let e = Expect::parse(&json!({
            "result": { "out": [1] },
            "undefined": false,
            "error": { "contains": "x" },
            "fuelUsed": { "gt": 1, "gte": 2, "lt": 30, "lte": 40 },
            "calls": { "fetch": 1, "llm": 0, "lookup": 2 },
            "note": "ignored",
        }))
        .unwrap();
        assert_eq!(e.result, Some(json!({ "out": [1] })));
        assert_eq!(e.undefined, Some(false));
        assert_eq!(
            e.error,
            Some(ErrorExpect::Error(TextMatch::Pattern {
                starts_with: None,
                contains: Some("x".into())
            }))
        );
        assert_eq!(
            e.fuel_used,
            Some(FuelRange {
                gt: Some(1.0),
                gte: Some(2.0),
                lt: Some(30.0),
                lte: Some(40.0)
            })
        );
        let calls = e.calls.clone().unwrap();
        assert_eq!(calls.get("fetch"), Some(&1));
        assert_eq!(calls.get("llm"), Some(&0));
        assert_eq!(calls.get("lookup"), Some(&2));
        for bad in [
            json!([]),
            json!({ "undefined": 1 }),
            json!({ "error": 5 }),
            json!({ "fuelUsed": { "gt": "x" } }),
            json!({ "calls": { "fetch": -1 } }),
            json!({ "calls": [1] }),
        ] {
            assert!(Expect::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn checks() {
        let none = BTreeMap::new();
        let e =
            Expect::parse(&json!({ "result": 3, "error": null, "fuelUsed": { "gt": 0 } })).unwrap();
        assert!(e.check(Some(&json!(3.0)), None, 1.5, &none).is_empty());
        let m = e.check(None, Some("Out of Fuel"), 0.0, &none);
        assert_eq!(
            m.iter().map(|m| m.what).collect::<Vec<_>>(),
            ["result", "error", "fuelUsed"]
        );
        assert_eq!(
            m[1].to_string(),
            "error: expected no error, got \"Out of Fuel\""
        );

        let u = Expect::parse(&json!({ "undefined": true, "error": true })).unwrap();
        assert!(u.check(None, Some("x"), 0.0, &none).is_empty());
        assert_eq!(u.check(Some(&json!(null)), Some("x"), 0.0, &none).len(), 1);

        let c = Expect::parse(&json!({ "calls": { "fetch": 0, "llm": 3 } })).unwrap();
        let mut got = BTreeMap::new();
        got.insert("llm".to_string(), 3);
        assert!(c.check(None, None, 0.0, &got).is_empty());
        got.insert("fetch".to_string(), 1);
        assert_eq!(c.check(None, None, 0.0, &got).len(), 1);
    }
}
