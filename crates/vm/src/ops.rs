//! Operator semantics: JavaScript's, with AJS's changes (decision 2: arrays and objects never
//! turn into strings or numbers; `==` never coerces).

use std::cmp::Ordering;

use crate::error::{guest, OpResult};
use crate::machine::Vm;
use crate::number::{number_to_string, string_to_number};
use crate::value::Value;

impl Vm {
    /// JavaScript truthiness.
    pub(crate) fn truthy(&self, v: Value) -> bool {
        match v {
            Value::Undefined | Value::Null => false,
            Value::Bool(b) => b,
            Value::Num(n) => !(n == 0.0 || n.is_nan()),
            Value::Str(g) => !self.units(g).is_empty(),
            Value::Arr(_) | Value::Obj(_) | Value::Pending(_) => true,
        }
    }

    /// `typeof`.
    pub(crate) fn type_of(&self, v: Value) -> &'static str {
        match v {
            Value::Undefined => "undefined",
            Value::Null | Value::Arr(_) | Value::Obj(_) | Value::Pending(_) => "object",
            Value::Bool(_) => "boolean",
            Value::Num(_) => "number",
            Value::Str(_) => "string",
        }
    }

    /// "array", "object", … for messages.
    pub(crate) fn kind_name(&self, v: Value) -> &'static str {
        match v {
            Value::Arr(_) => "array",
            Value::Obj(_) => "object",
            Value::Pending(_) => "unsettled host result",
            other => self.type_of(other),
        }
    }

    fn refuse_container(&self, v: Value, op: &str) -> OpResult<()> {
        match v {
            Value::Arr(_) => guest(format!("Cannot use '{op}' on an array; use .join() first")),
            Value::Obj(_) => guest(format!(
                "Cannot use '{op}' on an object; use JSON.stringify() first"
            )),
            Value::Pending(_) => guest(format!(
                "Cannot use '{op}' on a host result that has not settled"
            )),
            _ => Ok(()),
        }
    }

    /// `ToNumber` for an operator; arrays and objects are refused.
    pub(crate) fn to_number(&self, v: Value, op: &str) -> OpResult<f64> {
        Ok(match v {
            Value::Num(n) => n,
            Value::Undefined => f64::NAN,
            Value::Null => 0.0,
            Value::Bool(b) => b as u8 as f64,
            Value::Str(g) => string_to_number(&String::from_utf16_lossy(self.units(g))),
            other => {
                self.refuse_container(other, op)?;
                f64::NAN
            }
        })
    }

    pub(crate) fn num_pair(&self, a: Value, b: Value, op: &str) -> OpResult<(f64, f64)> {
        Ok((self.to_number(a, op)?, self.to_number(b, op)?))
    }

    /// `String(v)` for a primitive as code units; arrays and objects are refused with `op`.
    pub(crate) fn to_units(&self, v: Value, op: &str) -> OpResult<Vec<u16>> {
        Ok(match v {
            Value::Str(g) => self.units(g).to_vec(),
            Value::Num(n) => number_to_string(n).encode_utf16().collect(),
            Value::Bool(b) => b.to_string().encode_utf16().collect(),
            Value::Null => "null".encode_utf16().collect(),
            Value::Undefined => "undefined".encode_utf16().collect(),
            other => {
                self.refuse_container(other, op)?;
                Vec::new()
            }
        })
    }

    /// `+` when the operands are not both numbers.
    pub(crate) fn add_slow(&mut self, a: Value, b: Value) -> OpResult<Value> {
        self.refuse_container(a, "+")?;
        self.refuse_container(b, "+")?;
        if matches!(a, Value::Str(_)) || matches!(b, Value::Str(_)) {
            let la = self.units_len(a);
            let lb = self.units_len(b);
            self.charge_units(la + lb)?;
            self.reserve(crate::heap::str_bytes(la + lb), &[])?;
            let mut out = self.to_units(a, "+")?;
            out.extend(self.to_units(b, "+")?);
            return self.alloc_str(out);
        }
        let (x, y) = self.num_pair(a, b, "+")?;
        Ok(Value::Num(x + y))
    }

    /// Length of `String(v)` without building it (strings exactly, others by a small bound).
    fn units_len(&self, v: Value) -> usize {
        match v {
            Value::Str(g) => self.units(g).len(),
            _ => 24,
        }
    }

    /// Template-literal concatenation.
    pub(crate) fn template(&mut self, parts: &[Value]) -> OpResult<Value> {
        let mut total = 0;
        for &p in parts {
            match p {
                Value::Arr(_) => {
                    return guest("Cannot use an array in a template literal; use .join() first")
                }
                Value::Obj(_) => {
                    return guest(
                        "Cannot use an object in a template literal; use JSON.stringify() first",
                    )
                }
                _ => total += self.units_len(p),
            }
        }
        self.charge_units(total)?;
        self.reserve(crate::heap::str_bytes(total), &[])?;
        let mut out = Vec::with_capacity(total);
        for &p in parts {
            out.extend(self.to_units(p, "template")?);
        }
        self.alloc_str(out)
    }

    /// AJS `==`: no coercion; `null == undefined`; `NaN == NaN`; containers by identity.
    pub(crate) fn loose_eq(&self, a: Value, b: Value) -> bool {
        match (a, b) {
            (Value::Undefined | Value::Null, Value::Undefined | Value::Null) => true,
            (Value::Num(x), Value::Num(y)) => x == y || (x.is_nan() && y.is_nan()),
            _ => self.strict_eq(a, b),
        }
    }

    /// JavaScript `===`.
    pub(crate) fn strict_eq(&self, a: Value, b: Value) -> bool {
        match (a, b) {
            (Value::Undefined, Value::Undefined) | (Value::Null, Value::Null) => true,
            (Value::Bool(x), Value::Bool(y)) => x == y,
            (Value::Num(x), Value::Num(y)) => x == y,
            (Value::Str(x), Value::Str(y)) => x == y || self.units(x) == self.units(y),
            (Value::Arr(x), Value::Arr(y)) | (Value::Obj(x), Value::Obj(y)) => x == y,
            (Value::Pending(x), Value::Pending(y)) => x == y,
            _ => false,
        }
    }

    /// Relational comparison; `None` when unordered (NaN involved).
    pub(crate) fn compare(&self, a: Value, b: Value, op: &str) -> OpResult<Option<Ordering>> {
        if let (Value::Str(x), Value::Str(y)) = (a, b) {
            return Ok(Some(self.units(x).cmp(self.units(y))));
        }
        let (x, y) = self.num_pair(a, b, op)?;
        Ok(x.partial_cmp(&y))
    }

    /// The message of `Error(v)`: a string as is, anything else as `String(v)` (JSON for
    /// containers).
    pub(crate) fn message_of(&self, v: Value) -> String {
        match v {
            Value::Str(g) => String::from_utf16_lossy(self.units(g)),
            Value::Arr(_) | Value::Obj(_) => self
                .export(v)
                .map(|j| j.display())
                .unwrap_or_else(|e| e.message),
            other => String::from_utf16_lossy(&self.to_units(other, "Error").unwrap_or_default()),
        }
    }

    /// Renders a value for the log: strings raw, the rest as JSON-like text.
    pub(crate) fn render(&self, v: Value) -> String {
        match v {
            Value::Str(g) => String::from_utf16_lossy(self.units(g)),
            Value::Undefined => "undefined".into(),
            Value::Arr(_) | Value::Obj(_) => self
                .export(v)
                .map(|j| j.display())
                .unwrap_or_else(|e| e.message),
            other => self.message_of(other),
        }
    }
}
