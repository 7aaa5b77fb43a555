//! Random differential testing against Node: a seeded generator of well-typed AJS programs in the
//! part of the language that keeps JavaScript's meaning (number/string/boolean arithmetic without
//! the decision-2 refusals, `===` comparisons, ternaries, `let`/`const`, bounded `while` loops with
//! `break`/`continue`, `if`/`else`, arrays with callbacks, objects and member reads, spread,
//! template literals, string methods, `Math`). Every program runs in ONE Node process and in the
//! VM; the JSON results must be identical, and either both runs fail or neither.
//!
//! `AJS_DIFF_SEED` picks the seed (default fixed, printed on failure); `AJS_DIFF_COUNT` the number
//! of programs (default 2000).

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;

const DEFAULT_SEED: u64 = 0x00A1_5D1F_F5EE_D001;
const DEFAULT_COUNT: usize = 2000;

/// splitmix64: small, seedable, good enough to pick program shapes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Num,
    Str,
    Bool,
    NumArr,
    StrArr,
    /// `{ n: number, s: string, b: boolean, xs: number[] }`
    Obj,
}

const ALL_TYPES: [Ty; 6] = [Ty::Num, Ty::Str, Ty::Bool, Ty::NumArr, Ty::StrArr, Ty::Obj];

struct Var {
    name: String,
    ty: Ty,
    /// `let` (assignable) and not a loop counter or callback parameter.
    assignable: bool,
}

struct Gen {
    rng: Rng,
    vars: Vec<Var>,
    fresh: usize,
    /// Inside a callback body: outer variables are read-only there (decision 10).
    in_callback: usize,
    in_loop: bool,
}

const STRINGS: &[&str] = &[
    "'a'",
    "'hello'",
    "'Hello World'",
    "' padded '",
    "'x-y-z'",
    "''",
    "'héllo'",
    "'ÀÉÎ'",
    "'42'",
    "'3.5'",
    "'a,b,c'",
    "'abcabc'",
    "\"it's\"",
    "'tab\\there'",
    "'naïve café'",
];
const SEPS: &[&str] = &["','", "'-'", "''", "' '", "'b'", "'l'"];
const NUMS: &[&str] = &[
    "0", "1", "2", "3", "7", "10", "100", "0.5", "0.1", "2.5", "1e3", "1.25", "0.2", "9",
];

impl Gen {
    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn var_of(&mut self, ty: Ty) -> Option<String> {
        let cands: Vec<&Var> = self.vars.iter().filter(|v| v.ty == ty).collect();
        if cands.is_empty() {
            None
        } else {
            Some(cands[self.rng.below(cands.len())].name.clone())
        }
    }

    fn expr(&mut self, ty: Ty, depth: u32) -> String {
        // variables are leaves too: prefer them half of the time
        if self.rng.chance(35) {
            if let Some(v) = self.var_of(ty) {
                return v;
            }
        }
        if depth == 0 {
            return self.leaf(ty);
        }
        let d = depth - 1;
        match ty {
            Ty::Num => self.num(d),
            Ty::Str => self.str(d),
            Ty::Bool => self.bool(d),
            Ty::NumArr => self.num_arr(d),
            Ty::StrArr => self.str_arr(d),
            Ty::Obj => self.obj(d),
        }
    }

    fn leaf(&mut self, ty: Ty) -> String {
        match ty {
            Ty::Num => {
                if self.rng.chance(15) {
                    format!("(-{})", self.rng.pick(NUMS))
                } else {
                    self.rng.pick(NUMS).to_string()
                }
            }
            Ty::Str => self.rng.pick(STRINGS).to_string(),
            Ty::Bool => self.rng.pick(&["true", "false"]).to_string(),
            Ty::NumArr => {
                let n = self.rng.below(5);
                let items: Vec<String> =
                    (0..n).map(|_| self.rng.range(-5, 20).to_string()).collect();
                format!("[{}]", items.join(", "))
            }
            Ty::StrArr => {
                let n = self.rng.below(4);
                let items: Vec<String> =
                    (0..n).map(|_| self.rng.pick(STRINGS).to_string()).collect();
                format!("[{}]", items.join(", "))
            }
            Ty::Obj => format!(
                "{{ n: {}, s: {}, b: {}, xs: {} }}",
                self.leaf(Ty::Num),
                self.leaf(Ty::Str),
                self.leaf(Ty::Bool),
                self.leaf(Ty::NumArr)
            ),
        }
    }

    /// A callback `(p) => body` over elements of `elem`, the body of type `out`.
    fn callback(&mut self, elem: Ty, out: Ty, depth: u32, with_index: bool) -> String {
        let p = self.name("x");
        let idx = self.name("i");
        self.vars.push(Var {
            name: p.clone(),
            ty: elem,
            assignable: false,
        });
        if with_index {
            self.vars.push(Var {
                name: idx.clone(),
                ty: Ty::Num,
                assignable: false,
            });
        }
        self.in_callback += 1;
        let body = if self.rng.chance(20) {
            // a block body with a local and a return
            let l = self.name("t");
            let init = self.expr(out, depth);
            self.vars.push(Var {
                name: l.clone(),
                ty: out,
                assignable: false,
            });
            let ret = self.expr(out, depth);
            self.vars.pop();
            format!("{{\n  const {l} = {init}\n  return {ret}\n}}")
        } else {
            let e = self.expr(out, depth);
            if e.starts_with('{') {
                format!("({e})")
            } else {
                e
            }
        };
        self.in_callback -= 1;
        if with_index {
            self.vars.pop();
        }
        self.vars.pop();
        if with_index {
            format!("({p}, {idx}) => {body}")
        } else {
            format!("{p} => {body}")
        }
    }

    /// `(acc, x) => acc <op> <number expression of x>` for `reduce`.
    fn reducer(&mut self, d: u32) -> String {
        let acc = self.name("a");
        let p = self.name("x");
        for name in [&acc, &p] {
            self.vars.push(Var {
                name: name.clone(),
                ty: Ty::Num,
                assignable: false,
            });
        }
        self.in_callback += 1;
        let op = *self.rng.pick(&["+", "-", "*"]);
        let e = self.expr(Ty::Num, d);
        self.in_callback -= 1;
        self.vars.truncate(self.vars.len() - 2);
        format!("({acc}, {p}) => {acc} {op} {e}")
    }

    fn num(&mut self, d: u32) -> String {
        match self.rng.below(22) {
            0..=4 => {
                let op = *self.rng.pick(&["+", "-", "*", "/", "%"]);
                format!("({} {op} {})", self.expr(Ty::Num, d), self.expr(Ty::Num, d))
            }
            5 => format!("(-{})", self.expr(Ty::Num, d)),
            6 => {
                let f = *self
                    .rng
                    .pick(&["floor", "ceil", "round", "abs", "trunc", "sign"]);
                format!("Math.{f}({})", self.expr(Ty::Num, d))
            }
            7 => {
                let f = *self.rng.pick(&["max", "min"]);
                format!(
                    "Math.{f}({}, {})",
                    self.expr(Ty::Num, d),
                    self.expr(Ty::Num, d)
                )
            }
            8 => format!("Math.sqrt(Math.abs({}))", self.expr(Ty::Num, d)),
            9 => format!("{}.length", self.expr(Ty::Str, d)),
            10 => format!("{}.length", self.expr(Ty::NumArr, d)),
            11 => format!(
                "{}.indexOf({})",
                self.expr(Ty::Str, d),
                self.expr(Ty::Str, d)
            ),
            12 => format!(
                "({}[{}] ?? 0)",
                self.expr(Ty::NumArr, d),
                self.rng.range(0, 3)
            ),
            13 => format!("{}.n", self.expr(Ty::Obj, d)),
            14 => format!(
                "({} ? {} : {})",
                self.expr(Ty::Bool, d),
                self.expr(Ty::Num, d),
                self.expr(Ty::Num, d)
            ),
            15 => {
                let arr = self.expr(Ty::NumArr, d);
                format!(
                    "{arr}.reduce({}, {})",
                    self.reducer(d),
                    self.expr(Ty::Num, d)
                )
            }
            16 => format!("parseInt({})", self.expr(Ty::Str, d)),
            17 => format!(
                "parseFloat(({}).toFixed({}))",
                self.expr(Ty::Num, d),
                self.rng.below(4)
            ),
            18 => format!(
                "{}.indexOf({})",
                self.expr(Ty::NumArr, d),
                self.expr(Ty::Num, d)
            ),
            19 => format!("{}.charCodeAt(0)", self.expr(Ty::Str, d)),
            20 => format!("Object.keys({}).length", self.expr(Ty::Obj, d)),
            _ => format!(
                "{}.findIndex({})",
                self.expr(Ty::NumArr, d),
                self.callback(Ty::Num, Ty::Bool, d, false)
            ),
        }
    }

    fn str(&mut self, d: u32) -> String {
        match self.rng.below(22) {
            0..=2 => format!("({} + {})", self.expr(Ty::Str, d), self.expr(Ty::Str, d)),
            3 => format!("({} + {})", self.expr(Ty::Str, d), self.expr(Ty::Num, d)),
            4 => format!("({} + {})", self.expr(Ty::Num, d), self.expr(Ty::Str, d)),
            5 => format!(
                "`{}<${{{}}}>{}`",
                self.rng.pick(&["v", "", "a b", "é"]),
                self.expr(Ty::Num, d),
                if self.rng.chance(50) {
                    format!("${{{}}}", self.expr(Ty::Str, d))
                } else {
                    format!("${{{}}}", self.expr(Ty::Bool, d))
                }
            ),
            6 => {
                let m =
                    *self
                        .rng
                        .pick(&["toUpperCase", "toLowerCase", "trim", "trimStart", "trimEnd"]);
                if self.rng.chance(5) {
                    // a method call on null fails in both
                    format!(
                        "({} ? {} : null).{m}()",
                        self.expr(Ty::Bool, d),
                        self.expr(Ty::Str, d)
                    )
                } else {
                    format!("{}.{m}()", self.expr(Ty::Str, d))
                }
            }
            7 => format!(
                "{}.slice({}, {})",
                self.expr(Ty::Str, d),
                self.rng.range(-3, 4),
                self.rng.range(-2, 6)
            ),
            8 => {
                let m = *self.rng.pick(&["padStart", "padEnd"]);
                format!(
                    "{}.{m}({}, {})",
                    self.expr(Ty::Str, d),
                    self.rng.range(0, 12),
                    self.rng.pick(&["'*'", "'ab'", "' '", "'0'"])
                )
            }
            // a negative count fails in both (RangeError / AJS's error)
            9 => {
                let count = if self.rng.chance(5) {
                    -1
                } else {
                    self.rng.range(0, 3)
                };
                format!("{}.repeat({count})", self.expr(Ty::Str, d))
            }
            10 => format!("{}.charAt({})", self.expr(Ty::Str, d), self.rng.range(0, 5)),
            11 => format!(
                "({}.at({}) ?? '')",
                self.expr(Ty::Str, d),
                self.rng.range(-3, 3)
            ),
            12 => format!(
                "{}.{}({}, {})",
                self.expr(Ty::Str, d),
                self.rng.pick(&["replace", "replaceAll"]),
                self.rng.pick(&["'a'", "'l'", "','", "' '"]),
                self.rng.pick(&["'_'", "''", "'AA'", "'$'"])
            ),
            13 => format!(
                "{}.split({}).join({})",
                self.expr(Ty::Str, d),
                self.rng.pick(SEPS),
                self.rng.pick(SEPS)
            ),
            14 => format!("({}).toFixed({})", self.expr(Ty::Num, d), self.rng.below(4)),
            15 => format!("('' + {})", self.expr(Ty::Num, d)),
            16 => format!("{}.join({})", self.expr(Ty::NumArr, d), self.rng.pick(SEPS)),
            17 => format!("{}.join({})", self.expr(Ty::StrArr, d), self.rng.pick(SEPS)),
            18 => format!("{}.s", self.expr(Ty::Obj, d)),
            19 => format!(
                "({} ? {} : {})",
                self.expr(Ty::Bool, d),
                self.expr(Ty::Str, d),
                self.expr(Ty::Str, d)
            ),
            20 => {
                let ty = *self.rng.pick(&[Ty::Obj, Ty::NumArr, Ty::StrArr]);
                format!("JSON.stringify({})", self.expr(ty, d))
            }
            _ => format!(
                "{}.substring({}, {})",
                self.expr(Ty::Str, d),
                self.rng.range(0, 4),
                self.rng.range(0, 8)
            ),
        }
    }

    fn bool(&mut self, d: u32) -> String {
        match self.rng.below(14) {
            0..=2 => {
                let op = *self.rng.pick(&["<", "<=", ">", ">=", "===", "!=="]);
                format!("({} {op} {})", self.expr(Ty::Num, d), self.expr(Ty::Num, d))
            }
            3 => {
                let op = *self.rng.pick(&["<", ">", "===", "!=="]);
                format!("({} {op} {})", self.expr(Ty::Str, d), self.expr(Ty::Str, d))
            }
            4 => {
                let m = *self.rng.pick(&["includes", "startsWith", "endsWith"]);
                format!("{}.{m}({})", self.expr(Ty::Str, d), self.expr(Ty::Str, d))
            }
            5 => format!(
                "{}.includes({})",
                self.expr(Ty::NumArr, d),
                self.expr(Ty::Num, d)
            ),
            6 => format!("!{}", self.expr(Ty::Bool, d)),
            7 | 8 => {
                let op = *self.rng.pick(&["&&", "||"]);
                format!(
                    "({} {op} {})",
                    self.expr(Ty::Bool, d),
                    self.expr(Ty::Bool, d)
                )
            }
            9 => {
                let m = *self.rng.pick(&["some", "every"]);
                format!(
                    "{}.{m}({})",
                    self.expr(Ty::NumArr, d),
                    self.callback(Ty::Num, Ty::Bool, d, false)
                )
            }
            10 => format!("{}.b", self.expr(Ty::Obj, d)),
            11 => format!("Number.isInteger({})", self.expr(Ty::Num, d)),
            12 => format!("isNaN({})", self.expr(Ty::Num, d)),
            _ => format!(
                "({} ? {} : {})",
                self.expr(Ty::Bool, d),
                self.expr(Ty::Bool, d),
                self.expr(Ty::Bool, d)
            ),
        }
    }

    fn num_arr(&mut self, d: u32) -> String {
        match self.rng.below(11) {
            0 | 1 => {
                let with_index = self.rng.chance(30);
                format!(
                    "{}.map({})",
                    self.expr(Ty::NumArr, d),
                    self.callback(Ty::Num, Ty::Num, d, with_index)
                )
            }
            2 => format!(
                "{}.filter({})",
                self.expr(Ty::NumArr, d),
                self.callback(Ty::Num, Ty::Bool, d, false)
            ),
            3 => format!(
                "{}.slice({}, {})",
                self.expr(Ty::NumArr, d),
                self.rng.range(-2, 2),
                self.rng.range(-1, 4)
            ),
            4 => format!(
                "{}.concat({})",
                self.expr(Ty::NumArr, d),
                self.expr(Ty::NumArr, d)
            ),
            5 => format!(
                "[...{}, {}]",
                self.expr(Ty::NumArr, d),
                self.expr(Ty::Num, d)
            ),
            // comparator sorts only on integer literals (NaN would make the order engine-defined)
            6 => format!("{}.toSorted((p, q) => p - q)", self.leaf(Ty::NumArr)),
            7 => format!("{}.toReversed()", self.expr(Ty::NumArr, d)),
            8 => format!("{}.xs", self.expr(Ty::Obj, d)),
            9 => format!(
                "{}.map({})",
                self.expr(Ty::StrArr, d),
                self.callback(Ty::Str, Ty::Num, d, false)
            ),
            _ => format!("[{}, {}]", self.expr(Ty::Num, d), self.expr(Ty::Num, d)),
        }
    }

    fn str_arr(&mut self, d: u32) -> String {
        match self.rng.below(7) {
            0 | 1 => format!("{}.split({})", self.expr(Ty::Str, d), self.rng.pick(SEPS)),
            2 => format!(
                "{}.map({})",
                self.expr(Ty::StrArr, d),
                self.callback(Ty::Str, Ty::Str, d, false)
            ),
            3 => format!(
                "{}.filter({})",
                self.expr(Ty::StrArr, d),
                self.callback(Ty::Str, Ty::Bool, d, false)
            ),
            4 => format!("Object.keys({})", self.expr(Ty::Obj, d)),
            5 => format!("{}.toSorted()", self.expr(Ty::StrArr, d)),
            _ => format!(
                "{}.map({})",
                self.expr(Ty::NumArr, d),
                self.callback(Ty::Num, Ty::Str, d, false)
            ),
        }
    }

    fn obj(&mut self, d: u32) -> String {
        match self.rng.below(3) {
            0 => format!(
                "{{ n: {}, s: {}, b: {}, xs: {} }}",
                self.expr(Ty::Num, d),
                self.expr(Ty::Str, d),
                self.expr(Ty::Bool, d),
                self.expr(Ty::NumArr, d)
            ),
            1 => format!(
                "{{ ...{}, n: {} }}",
                self.expr(Ty::Obj, d),
                self.expr(Ty::Num, d)
            ),
            _ => format!(
                "{{ ...{}, s: {} }}",
                self.expr(Ty::Obj, d),
                self.expr(Ty::Str, d)
            ),
        }
    }

    fn stmts(&mut self, out: &mut String, n: usize, indent: &str, depth: u32) {
        let mark = self.vars.len();
        for _ in 0..n {
            self.stmt(out, indent, depth);
        }
        self.vars.truncate(mark);
    }

    fn stmt(&mut self, out: &mut String, indent: &str, depth: u32) {
        let assignable: Vec<usize> = (0..self.vars.len())
            .filter(|&i| self.vars[i].assignable)
            .collect();
        let k = self.rng.below(10);
        match k {
            0..=3 => {
                let ty = *self.rng.pick(&ALL_TYPES);
                let e = self.expr(ty, 3);
                let kw = if self.rng.chance(50) { "let" } else { "const" };
                let name = self.name("v");
                let _ = writeln!(out, "{indent}{kw} {name} = {e}");
                self.vars.push(Var {
                    name,
                    ty,
                    assignable: kw == "let",
                });
            }
            4 | 5 if !assignable.is_empty() => {
                let i = *self.rng.pick(&assignable);
                let (name, ty) = (self.vars[i].name.clone(), self.vars[i].ty);
                let line = match ty {
                    Ty::Num if self.rng.chance(40) => {
                        let op = *self.rng.pick(&["+=", "-=", "*="]);
                        format!("{name} {op} {}", self.expr(Ty::Num, 2))
                    }
                    Ty::Str if self.rng.chance(40) => {
                        format!("{name} += {}", self.expr(Ty::Str, 2))
                    }
                    Ty::NumArr if self.rng.chance(50) => {
                        format!("{name}.push({})", self.expr(Ty::Num, 2))
                    }
                    _ => format!("{name} = {}", self.expr(ty, 2)),
                };
                let _ = writeln!(out, "{indent}{line}");
            }
            6 if depth > 0 => {
                let c = self.expr(Ty::Bool, 2);
                let _ = writeln!(out, "{indent}if ({c}) {{");
                let inner = format!("{indent}  ");
                let n = 1 + self.rng.below(2);
                self.stmts(out, n, &inner, depth - 1);
                if self.rng.chance(50) {
                    let _ = writeln!(out, "{indent}}} else {{");
                    let n = 1 + self.rng.below(2);
                    self.stmts(out, n, &inner, depth - 1);
                }
                let _ = writeln!(out, "{indent}}}");
            }
            7 if depth > 0 && !self.in_loop => {
                let i = self.name("i");
                let bound = self.rng.range(0, 6);
                let _ = writeln!(out, "{indent}let {i} = 0");
                let _ = writeln!(out, "{indent}while ({i} < {bound}) {{");
                let inner = format!("{indent}  ");
                let _ = writeln!(out, "{inner}{i} = {i} + 1");
                self.vars.push(Var {
                    name: i.clone(),
                    ty: Ty::Num,
                    assignable: false,
                });
                self.in_loop = true;
                let mark = self.vars.len();
                let n = 1 + self.rng.below(3);
                for _ in 0..n {
                    self.stmt(out, &inner, depth - 1);
                    if self.rng.chance(15) {
                        let c = self.expr(Ty::Bool, 1);
                        let kw = if self.rng.chance(50) {
                            "break"
                        } else {
                            "continue"
                        };
                        let _ = writeln!(out, "{inner}if ({c}) {{ {kw} }}");
                    }
                }
                self.vars.truncate(mark);
                self.in_loop = false;
                let _ = writeln!(out, "{indent}}}");
            }
            _ => {
                // a `let` of a number, the common case of formulas
                let e = self.expr(Ty::Num, 3);
                let name = self.name("v");
                let _ = writeln!(out, "{indent}let {name} = {e}");
                self.vars.push(Var {
                    name,
                    ty: Ty::Num,
                    assignable: true,
                });
            }
        }
    }

    fn program(&mut self) -> String {
        self.vars.clear();
        self.fresh = 0;
        let mut out = String::new();
        let n = 2 + self.rng.below(5);
        for _ in 0..n {
            self.stmt(&mut out, "", 2);
        }
        let names: Vec<String> = self.vars.iter().map(|v| v.name.clone()).collect();
        let ty = *self.rng.pick(&ALL_TYPES);
        let last = self.expr(ty, 3);
        let _ = writeln!(
            out,
            "return [{}{}{last}]",
            names.join(", "),
            if names.is_empty() { "" } else { ", " }
        );
        debug_assert_eq!(self.in_callback, 0);
        out
    }
}

/// `node` (numbers encoded as "\u{1}<JavaScript text>") against the VM's JSON, numbers compared as
/// IEEE doubles.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::Number(y)) if x.starts_with('\u{1}') => {
            x[1..].parse::<f64>().ok() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.keys().eq(y.keys())
                && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// One run's outcome (the error text is only shown in failure reports).
#[derive(Debug)]
#[allow(dead_code)]
enum Res {
    Value(Value),
    Undefined,
    Error(String),
}

fn node_results(programs: &[String]) -> Vec<Res> {
    let mut script = String::from(
        // numbers travel as their JavaScript text ("\u0001" + String(x)), parsed by Rust's exact
        // float parser: serde_json's default parser may be one unit in the last place off
        "const num = (k, x) => typeof x === 'number' && Number.isFinite(x) ? '\\u0001' + x : x;\nconst out = [];\nconst P = [\n",
    );
    for p in programs {
        script.push_str(&serde_json::to_string(p).unwrap());
        script.push_str(",\n");
    }
    script.push_str(
        "];\nfor (const src of P) {\n  let line;\n  try {\n    const v = new Function(src)();\n    line = v === undefined ? { u: true } : { v: JSON.parse(JSON.stringify(v, num)) };\n  } catch (e) {\n    line = { e: String(e) };\n  }\n  out.push(JSON.stringify(line));\n}\nprocess.stdout.write(out.join('\\n') + '\\n');\n",
    );
    let mut child = Command::new("node")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node is installed (.ci/run installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        programs.len(),
        "one line per program from node"
    );
    lines
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            if let Some(e) = v.get("e") {
                Res::Error(e.as_str().unwrap_or_default().to_string())
            } else if v.get("u").is_some() {
                Res::Undefined
            } else {
                Res::Value(v["v"].clone())
            }
        })
        .collect()
}

#[test]
fn random_programs_match_node() {
    let seed = std::env::var("AJS_DIFF_SEED")
        .ok()
        .and_then(|s| {
            let s = s.trim();
            s.strip_prefix("0x")
                .map_or_else(|| s.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
        })
        .unwrap_or(DEFAULT_SEED);
    let count = std::env::var("AJS_DIFF_COUNT")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(DEFAULT_COUNT);
    let started = std::time::Instant::now();
    let mut gen = Gen {
        rng: Rng(seed),
        vars: Vec::new(),
        fresh: 0,
        in_callback: 0,
        in_loop: false,
    };
    let programs: Vec<String> = (0..count).map(|_| gen.program()).collect();
    let node = node_results(&programs);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let options = ajs::Options {
        fuel: 1e7,
        ..Default::default()
    };
    let mut failures = Vec::new();
    let mut errors_both = 0;
    for (i, (src, want)) in programs.iter().zip(&node).enumerate() {
        let out = rt.block_on(ajs::Eval::new(src.as_str()).options(options.clone()).run());
        let got = match &out.error {
            Some(e) => Res::Error(e.message.clone()),
            None => match out.result.to_json() {
                Some(v) => Res::Value(v),
                None => Res::Undefined,
            },
        };
        let ok = match (want, &got) {
            (Res::Value(a), Res::Value(b)) => same(a, b),
            (Res::Undefined, Res::Undefined) => true,
            (Res::Error(_), Res::Error(_)) => {
                errors_both += 1;
                true
            }
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "program #{i}:\n{src}\nnode: {want:?}\najs:  {got:?}\n"
            ));
        }
    }
    eprintln!(
        "differential_gen: seed {seed:#x}, {count} programs ({errors_both} failing in both), {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "AJS_DIFF_SEED={seed:#x}: {} of {count} programs differ from Node; the first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
