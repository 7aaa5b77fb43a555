//! Implementations of the builtins declared in `ajs_bytecode::natives`.

use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::machine::{LogLevel, Vm, MILLI_PER_ELEMENT};
use crate::number::{to_int32, to_uint32};
use crate::value::Value;

impl Vm {
    /// Calls a native with its arguments (a method's receiver first).
    pub(crate) fn call_native(&mut self, id: NativeId, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let arg = |i: usize| args.get(i).copied().unwrap_or(Value::Undefined);
        let name = id.js_name();
        let num = |vm: &Vm, i: usize| vm.to_number(arg(i), name);
        let math1 =
            |vm: &Vm, f: fn(f64) -> f64| -> OpResult<Value> { Ok(Value::Num(f(num(vm, 0)?))) };
        match id {
            MathAbs => math1(self, f64::abs),
            MathCeil => math1(self, f64::ceil),
            MathFloor => math1(self, f64::floor),
            MathRound => math1(self, js_round),
            MathTrunc => math1(self, f64::trunc),
            MathSign => math1(self, |x| {
                if x.is_nan() || x == 0.0 {
                    x
                } else {
                    x.signum()
                }
            }),
            MathSqrt => math1(self, f64::sqrt),
            MathCbrt => math1(self, f64::cbrt),
            MathExp => math1(self, f64::exp),
            MathExpm1 => math1(self, f64::exp_m1),
            MathLog => math1(self, f64::ln),
            MathLog2 => math1(self, f64::log2),
            MathLog10 => math1(self, f64::log10),
            MathLog1p => math1(self, f64::ln_1p),
            MathSin => math1(self, f64::sin),
            MathCos => math1(self, f64::cos),
            MathTan => math1(self, f64::tan),
            MathAsin => math1(self, f64::asin),
            MathAcos => math1(self, f64::acos),
            MathAtan => math1(self, f64::atan),
            MathSinh => math1(self, f64::sinh),
            MathCosh => math1(self, f64::cosh),
            MathTanh => math1(self, f64::tanh),
            MathAsinh => math1(self, f64::asinh),
            MathAcosh => math1(self, f64::acosh),
            MathAtanh => math1(self, f64::atanh),
            MathFround => math1(self, |x| x as f32 as f64),
            MathClz32 => Ok(Value::Num(to_uint32(num(self, 0)?).leading_zeros() as f64)),
            MathPow => Ok(Value::Num(crate::machine::js_pow(
                num(self, 0)?,
                num(self, 1)?,
            ))),
            MathAtan2 => Ok(Value::Num(num(self, 0)?.atan2(num(self, 1)?))),
            MathImul => Ok(Value::Num(
                to_int32(num(self, 0)?).wrapping_mul(to_int32(num(self, 1)?)) as f64,
            )),
            MathHypot => {
                self.charge(args.len() as u64 * MILLI_PER_ELEMENT)?;
                let mut sum = 0.0f64;
                let mut inf = false;
                let mut nan = false;
                for i in 0..args.len() {
                    let x = num(self, i)?;
                    if x.is_infinite() {
                        inf = true;
                    }
                    if x.is_nan() {
                        nan = true;
                    }
                    sum = sum.hypot(x);
                }
                Ok(Value::Num(if inf {
                    f64::INFINITY
                } else if nan {
                    f64::NAN
                } else {
                    sum
                }))
            }
            MathMin | MathMax => {
                self.charge(args.len() as u64 * MILLI_PER_ELEMENT)?;
                let is_max = id == MathMax;
                let mut acc = if is_max {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                };
                for i in 0..args.len() {
                    let x = num(self, i)?;
                    if x.is_nan() || acc.is_nan() {
                        acc = f64::NAN;
                        continue;
                    }
                    acc = if is_max {
                        if x > acc || (x == 0.0 && acc == 0.0 && acc.is_sign_negative()) {
                            x
                        } else {
                            acc
                        }
                    } else if x < acc || (x == 0.0 && acc == 0.0 && x.is_sign_negative()) {
                        x
                    } else {
                        acc
                    };
                }
                Ok(Value::Num(acc))
            }
            MathRandom => {
                // xorshift64*, seeded by the host's randomness source
                let mut x = self.rng;
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                self.rng = x;
                let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
                Ok(Value::Num((r >> 11) as f64 / (1u64 << 53) as f64))
            }
            ConsoleLog | ConsoleInfo | ConsoleWarn | ConsoleError => {
                let level = match id {
                    ConsoleWarn => LogLevel::Warn,
                    ConsoleError => LogLevel::Error,
                    _ => LogLevel::Info,
                };
                self.console(level, args)?;
                Ok(Value::Undefined)
            }
            Push => {
                let recv = arg(0);
                let n = args.len() - 1;
                match recv {
                    Value::Arr(g) => {
                        self.charge(n as u64 * MILLI_PER_ELEMENT)?;
                        let len = self.arr_extend(g, &args[1..], args)?;
                        Ok(Value::Num(len as f64))
                    }
                    Value::Null | Value::Undefined => guest(crate::method_hints::on_nullish(
                        "push",
                        self.type_of_null(recv),
                    )),
                    other => guest(crate::method_hints::not_a_function(
                        "push",
                        self.kind_name(other),
                    )),
                }
            }
            RegexNew => self.regex_literal(arg(0), arg(1)),
            ReplaceMatches => self.replace_matches(args),
            ReplaceJoin => self.replace_join(args),
            AtomTemplate | AtomRegexMatch | AtomPick | AtomOmit | AtomMerge | AtomKeys
            | AtomSplit | AtomJoin | AtomLen | AtomJsonParse | AtomJsonStringify | AtomHash
            | AtomRandom | AtomUuid => self.pure_atom(id, arg(0)),
            Filter | SchemaFromExample | SchemaResponse | SchemaIsValid => {
                self.schema_native(id, args)
            }
            ArrayFrom => self.array_from(arg(0)),
            SetNew => self.set_new(arg(0)),
            DateNew => self.date_new(args),
            DateNow => Ok(self.date_now()),
            _ => self.call_builtin(id, args),
        }
    }

    pub(crate) fn type_of_null(&self, v: Value) -> &'static str {
        if matches!(v, Value::Null) {
            "null"
        } else {
            "undefined"
        }
    }
}

/// JavaScript's `Math.round`: halves round toward +∞.
fn js_round(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    if (-0.5..0.0).contains(&x) {
        return -0.0;
    }
    let f = x.floor();
    if x - f >= 0.5 {
        f + 1.0
    } else {
        f
    }
}
