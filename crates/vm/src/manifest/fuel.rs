//! The sound static fuel bound: the worst path's block charges (exact: the verifier checks
//! them), plus the most every size-dependent charge on it can be, at the caps in force.
//!
//! Sizes are *weights*: a value's code units and values (elements, properties and their
//! keys), everything reachable from it counted. A forward dataflow over each loop-free
//! function knows a weight bound for every register: literal lengths, sums for concatenation
//! and literals, a native's output from its inputs where its rule says so, and otherwise the
//! caps' largest value ([`Caps::max_value_weight`], the heap limit: every unit and value takes
//! at least a byte of it). A native's charge is at most its rule's price per unit of weight in
//! and out, plus a fixed amount per call. A loop, recursion or callback over a collection makes
//! the bound `null`, as does a native whose work a number not known before the run sets
//! (`'x'.repeat(n)`).

use std::collections::BTreeMap;

use ajs_bytecode::isa::{Op, Operand, MILLI};
use ajs_bytecode::{Constant, NativeId, Program, TypeSpec};

use super::cfg::Graph;
use super::{FuelBound, Place};
use crate::machine::{DEFAULT_MAX_HEAP_BYTES, MAX_MESSAGE_BYTES};
use crate::price::MILLI_PER_UNIT;
use crate::setup::{frame_units, start_units_of};

/// The caps a bound is computed at.
#[derive(Clone, Debug, PartialEq)]
pub struct Caps {
    /// The run's heap limit in bytes ([`DEFAULT_MAX_HEAP_BYTES`] by default).
    pub max_heap_bytes: u64,
    /// Milli-fuel per call of an atom, by name; an atom not named here costs
    /// [`Caps::host_atom_milli`].
    pub atom_milli: BTreeMap<String, u64>,
    /// Milli-fuel per call of an atom [`Caps::atom_milli`] does not name.
    pub host_atom_milli: u64,
    /// The largest weight of one argument, when the host caps it (a server's request size:
    /// a JSON text of n bytes holds no value heavier than n); `None`: the heap limit.
    pub max_arg_weight: Option<u64>,
    /// The largest weight of one atom's answer, when the host caps it (a fetch's body limit
    /// and a model's answer limit); `None`: the heap limit.
    pub max_answer_weight: Option<u64>,
}

/// The default price of `httpFetch`, in milli-fuel (as the facade's `HTTP_FETCH_FUEL`).
pub const HTTP_FETCH_MILLI: u64 = 5 * MILLI;
/// The default price of `llmPredict`, in milli-fuel (as the facade's `LLM_PREDICT_FUEL`).
pub const LLM_PREDICT_MILLI: u64 = 100 * MILLI;
/// The default price of a host-registered atom, in milli-fuel (as `HOST_ATOM_FUEL`).
pub const HOST_ATOM_MILLI: u64 = MILLI;

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            max_heap_bytes: DEFAULT_MAX_HEAP_BYTES as u64,
            atom_milli: [
                ("httpFetch".to_string(), HTTP_FETCH_MILLI),
                ("llmPredict".to_string(), LLM_PREDICT_MILLI),
            ]
            .into_iter()
            .collect(),
            host_atom_milli: HOST_ATOM_MILLI,
            max_arg_weight: None,
            max_answer_weight: None,
        }
    }
}

impl Caps {
    /// The largest weight any one value can have: every unit and value takes a heap byte.
    pub fn max_value_weight(&self) -> u64 {
        self.max_heap_bytes.max(1)
    }
    fn arg_weight(&self) -> u64 {
        self.max_arg_weight
            .map_or(self.max_value_weight(), |w| w.min(self.max_value_weight()))
    }
    fn answer_weight(&self) -> u64 {
        self.max_answer_weight
            .map_or(self.max_value_weight(), |w| w.min(self.max_value_weight()))
    }
    fn atom_price(&self, name: &str) -> u64 {
        self.atom_milli
            .get(name)
            .copied()
            .unwrap_or(self.host_atom_milli)
    }
}

/// Milli-fuel per unit of weight of an operator's string work (`+`, templates, comparisons,
/// `ToNumber` of a string: the dearest is parsing a number, 4 units' price).
const OPERATOR_PER_WEIGHT: u64 = 4 * MILLI_PER_UNIT;
/// Milli-fuel per unit of weight a value crossing the boundary costs (a value's element price
/// and its units' copy).
const BOUNDARY_PER_WEIGHT: u64 = 128;
/// The weight a number can take written as text.
const NUMBER_TEXT: u64 = 25;

/// What a register can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Scalar,
    Str,
    Arr,
    Obj,
    Any,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Sz {
    w: u64,
    kind: Kind,
    num: Option<f64>,
}

impl Sz {
    const UNDEF: Sz = Sz {
        w: 1,
        kind: Kind::Scalar,
        num: None,
    };
    fn join(self, o: Sz) -> Sz {
        Sz {
            w: self.w.max(o.w),
            kind: if self.kind == o.kind {
                self.kind
            } else {
                Kind::Any
            },
            num: match (self.num, o.num) {
                (Some(a), Some(b)) if a == b || (a.is_nan() && b.is_nan()) => Some(a),
                _ => None,
            },
        }
    }
    fn scalar() -> Sz {
        Sz::UNDEF
    }
    fn string(w: u64) -> Sz {
        Sz {
            w,
            kind: Kind::Str,
            num: None,
        }
    }
}

/// How a native's output's weight follows from its inputs'.
#[derive(Clone, Copy, Debug)]
enum Out {
    /// A number, a boolean, `undefined`: weight 1.
    Scalar,
    /// At most this weight.
    Bounded(u64),
    /// At most this many times the inputs' weight.
    Scale(u64),
    /// Anything up to the largest value (and the inputs it refers to).
    Top,
    /// `s.repeat(n)`: `n` times the receiver, when `n` is known.
    Repeat,
    /// `s.padStart(n, f)`: `n` and the receiver, when `n` is known.
    Pad,
    /// `Array.from(x)`: three times a string's or an array's weight; `{ length: n }` sets it.
    From,
    /// `xs.fill(v)`: each element may become `v`.
    Fill,
}

/// A native's worst case: milli-fuel per unit of weight in and out, milli-fuel per call, and
/// its output.
#[derive(Clone, Copy, Debug)]
struct Rule {
    per_weight: u64,
    per_call: u64,
    out: Out,
    /// Whether it can grow its receiver (`push`, `Object.assign`, `Set.add`).
    grows: bool,
}

/// Milli-fuel per weight of natives doing a fixed, small work per unit (search, case maps,
/// normalization's input, URI coding, `localeCompare`'s normalization): the dearest is case
/// mapping's 192.
const STRING_PER_WEIGHT: u64 = 256;
/// Milli-fuel per weight of natives that make values per unit or walk structures (a property
/// listed 608, a Set member 1,120, a value `Schema.isValid` checks 3,072 with its example's).
const STRUCT_PER_WEIGHT: u64 = 4096;
/// Milli-fuel per weight of a sort: a structure's price times the comparisons per element
/// (`log2` of the largest array).
const SORT_PER_WEIGHT: u64 = STRUCT_PER_WEIGHT * 64;
/// Milli-fuel per weight of a regular expression's search: each of a unit's up to 3 UTF-8
/// bytes may build a DFA state over a compiled program of up to 1 MiB (16 per 16 bytes), and
/// capture groups cost 6 per NFA state per byte.
const REGEX_PER_WEIGHT: u64 = 3 * (1 << 20) + 6 * 3 * (1 << 20);
/// Milli-fuel per regular-expression call besides its search: a compile of up to 1 MiB at 1.5
/// per byte times 33.
const REGEX_PER_CALL: u64 = 3 * (1 << 20) * 33 / 2;
/// Milli-fuel per call of natives with fixed work: digits of `toFixed`, `toPrecision` and
/// `toString(radix)` (up to ~2,100 digits at up to 9 × 40), Date methods (3,000).
const DIGITS_PER_CALL: u64 = 1_000_000;
/// Milli-fuel per call of any other native besides its work per weight.
const FIXED_PER_CALL: u64 = 2_000;

fn rule(id: NativeId, pattern: Kind) -> Rule {
    use NativeId::*;
    let r = |per_weight, per_call, out| Rule {
        per_weight,
        per_call,
        out,
        grows: false,
    };
    let regex = r(REGEX_PER_WEIGHT, REGEX_PER_CALL, Out::Top);
    match id {
        Push | Unshift | Add => Rule {
            grows: true,
            ..r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Scalar)
        },
        Splice | ObjectAssign => Rule {
            grows: true,
            ..r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(1))
        },
        Fill => Rule {
            grows: true,
            ..r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Fill)
        },
        RegexNew => r(REGEX_PER_WEIGHT, REGEX_PER_CALL, Out::Bounded(1)),
        Test | Search => r(REGEX_PER_WEIGHT, REGEX_PER_CALL, Out::Scalar),
        Exec | Match | MatchAll | AtomRegexMatch => regex,
        // `%replaceMatches` searches as `replace` does (its callback's loop is priced apart)
        Replace | ReplaceAll | ReplaceMatches | Split if pattern != Kind::Str => regex,
        Replace | ReplaceAll | ReplaceMatches | ReplaceJoin => {
            r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Top)
        }
        Split => r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(3)),
        Sort | ToSorted => r(SORT_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(1)),
        Repeat => r(STRING_PER_WEIGHT, FIXED_PER_CALL, Out::Repeat),
        PadStart | PadEnd => r(STRING_PER_WEIGHT, FIXED_PER_CALL, Out::Pad),
        ArrayFrom => r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::From),
        ToUpperCase | ToLowerCase => r(STRING_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(3)),
        Trim | TrimStart | TrimEnd | CharAt | At | Slice | Substring | Substr | Concat
        | DecodeUriComponent | DecodeUri | Reverse | ToReversed | Pop | Shift | Flat => {
            r(STRING_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(1))
        }
        Normalize => r(STRING_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(18)),
        EncodeUriComponent | EncodeUri => r(STRING_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(9)),
        StringFromCharCode | StringFromCodePoint | ArrayOf => {
            r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(2))
        }
        ObjectKeys | ObjectValues | ObjectEntries | AtomKeys => {
            r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(12))
        }
        ObjectFromEntries | AtomPick | AtomOmit | AtomMerge | JsonParse | AtomJsonParse
        | SetNew | ToArray | Union | Intersection | Diff | Filter | Remove | Clear => {
            r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Scale(2))
        }
        DateNew | Format | ToIsoString | AtomHash | AtomUuid | ToFixed | ToPrecision => {
            r(STRUCT_PER_WEIGHT, DIGITS_PER_CALL, Out::Bounded(4096))
        }
        Has | ObjectHasOwn | ArrayIsArray => r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Scalar),
        GetTime | IsBefore | IsAfter | DateNow => {
            r(STRUCT_PER_WEIGHT, DIGITS_PER_CALL, Out::Scalar)
        }
        ToString => r(STRUCT_PER_WEIGHT, DIGITS_PER_CALL, Out::Top),
        _ if rule_out_scalar(id) => r(STRING_PER_WEIGHT, FIXED_PER_CALL, Out::Scalar),
        // the rest (`join`, `toString`, `JSON.stringify`, `template`, schemas, …): any output
        _ => r(STRUCT_PER_WEIGHT, FIXED_PER_CALL, Out::Top),
    }
}

/// Whether `id` answers a number, a boolean or `undefined` from its inputs at a string
/// native's price (maths, parsing, searching, comparing, logging).
fn rule_out_scalar(id: NativeId) -> bool {
    use NativeId::*;
    matches!(
        id,
        MathAbs
            | MathCeil
            | MathFloor
            | MathRound
            | MathTrunc
            | MathSign
            | MathSqrt
            | MathCbrt
            | MathPow
            | MathExp
            | MathExpm1
            | MathLog
            | MathLog2
            | MathLog10
            | MathLog1p
            | MathSin
            | MathCos
            | MathTan
            | MathAsin
            | MathAcos
            | MathAtan
            | MathAtan2
            | MathSinh
            | MathCosh
            | MathTanh
            | MathAsinh
            | MathAcosh
            | MathAtanh
            | MathHypot
            | MathMin
            | MathMax
            | MathClz32
            | MathImul
            | MathFround
            | MathRandom
            | ConsoleLog
            | ConsoleInfo
            | ConsoleWarn
            | ConsoleError
            | ParseInt
            | ParseFloat
            | IsNaN
            | IsFinite
            | NumberIsNaN
            | NumberIsFinite
            | NumberIsInteger
            | NumberIsSafeInteger
            | NumberParseFloat
            | NumberParseInt
            | CharCodeAt
            | CodePointAt
            | Includes
            | IndexOf
            | LastIndexOf
            | StartsWith
            | EndsWith
            | LocaleCompare
            | AtomLen
            | AtomRandom
    )
}

/// The flow-sensitive weights of one function and the extra charges of its blocks.
struct Walk<'a> {
    program: &'a Program,
    caps: &'a Caps,
    top: u64,
    /// Per function: its bound in milli-fuel, its fixed part, when known.
    callees: &'a [Option<(u64, u64)>],
    is_entry: bool,
    unbounded: Vec<String>,
    fi: usize,
}

impl Walk<'_> {
    fn konst(&self, k: u16) -> Sz {
        match self.program.constants.get(k as usize) {
            Some(Constant::String(s)) => Sz::string(s.len() as u64 + 1),
            Some(Constant::Number(n)) => Sz {
                num: Some(*n),
                ..Sz::scalar()
            },
            None => Sz::scalar(),
        }
    }

    fn any(&self) -> Sz {
        Sz {
            w: self.top,
            kind: Kind::Any,
            num: None,
        }
    }

    fn note(&mut self, what: &str, pc: usize) {
        let at = match self.program.span(self.fi, pc) {
            Some(p) => format!("{what} at line {}, column {}", p.line, p.col),
            None => format!(
                "{what} in function '{}'",
                self.program.functions[self.fi].name
            ),
        };
        if !self.unbounded.contains(&at) {
            self.unbounded.push(at);
        }
    }

    /// Runs `op` over `st`; returns its size-dependent charge (milli) and its fixed extra charge.
    fn step(&mut self, op: &Op, pc: usize, st: &mut [Sz]) -> (u64, u64) {
        let get = |st: &[Sz], r: u16| st.get(r as usize).copied().unwrap_or(Sz::UNDEF);
        let set = |st: &mut [Sz], r: u16, v: Sz| {
            if let Some(s) = st.get_mut(r as usize) {
                *s = v;
            }
        };
        let top = self.top;
        let mut reads: Vec<Sz> = Vec::new();
        let mut base = None;
        op.operands(|o| match o {
            Operand::Read(r) => reads.push(get(st, r)),
            Operand::Base(b) => base = Some(b),
            Operand::Count(n) => {
                if let Some(b) = base.take() {
                    reads.extend((0..n as u16).map(|i| get(st, b.saturating_add(i))));
                }
            }
            _ => {}
        });
        let sum_in = reads.iter().fold(0u64, |a, s| a.saturating_add(s.w));
        let per = |k: u64, w: u64| k.saturating_mul(w);
        match *op {
            Op::Charge { .. } | Op::Jump { .. } | Op::TryEnter { .. } | Op::TryExit {} => (0, 0),
            Op::LoadConst { dst, k } => {
                set(st, dst.0, self.konst(k.0));
                (0, 0)
            }
            Op::LoadUndef { dst }
            | Op::LoadNull { dst }
            | Op::LoadTrue { dst }
            | Op::LoadFalse { dst } => {
                set(st, dst.0, Sz::scalar());
                (0, 0)
            }
            Op::Move { dst, src } => {
                set(st, dst.0, get(st, src.0));
                (0, 0)
            }
            Op::Add { dst, .. } | Op::AddK { dst, .. } | Op::Concat { dst, .. } => {
                let (mut ins, mut w) = (reads.clone(), 0u64);
                if let Op::AddK { k, .. } = *op {
                    ins.push(self.konst(k.0));
                }
                let all_scalar = ins.iter().all(|s| s.kind == Kind::Scalar);
                for s in &ins {
                    w = w.saturating_add(s.w).saturating_add(NUMBER_TEXT);
                }
                let num = match (*op, ins.as_slice()) {
                    (Op::Add { .. } | Op::AddK { .. }, [a, b]) => {
                        a.num.zip(b.num).map(|(x, y)| x + y)
                    }
                    _ => None,
                };
                let out = if all_scalar && !matches!(op, Op::Concat { .. }) {
                    Sz {
                        num,
                        ..Sz::scalar()
                    }
                } else {
                    Sz::string(w)
                };
                set(st, dst.0, out);
                (per(OPERATOR_PER_WEIGHT, w), 0)
            }
            Op::AddI { dst, a, i } => {
                let s = get(st, a.0);
                let w = s.w.saturating_add(2 * NUMBER_TEXT);
                let out = if s.kind == Kind::Scalar {
                    Sz {
                        num: s.num.map(|x| x + i.get()),
                        ..Sz::scalar()
                    }
                } else {
                    Sz::string(w)
                };
                set(st, dst.0, out);
                (per(OPERATOR_PER_WEIGHT, w), 0)
            }
            Op::NewArray { dst, .. } => {
                let n = reads.len() as u64;
                set(
                    st,
                    dst.0,
                    Sz {
                        w: sum_in.saturating_add(n + 1),
                        kind: Kind::Arr,
                        num: None,
                    },
                );
                (0, per(BOUNDARY_PER_WEIGHT, n + 1))
            }
            Op::NewObject { dst } => {
                set(
                    st,
                    dst.0,
                    Sz {
                        w: 1,
                        kind: Kind::Obj,
                        num: None,
                    },
                );
                (0, 0)
            }
            // literals fill a fresh container: its register grows by what goes in
            Op::InitProp { obj, key, .. } => {
                let k = self.konst(key.0).w;
                let mut o = get(st, obj.0);
                o.w = o.w.saturating_add(sum_in).saturating_add(k);
                set(st, obj.0, o);
                (0, per(BOUNDARY_PER_WEIGHT, 1))
            }
            Op::InitIndex { obj, .. }
            | Op::ObjectAssign { obj, .. }
            | Op::ArrayAppend { arr: obj, .. }
            | Op::ArrayExtend { arr: obj, .. } => {
                let mut o = get(st, obj.0);
                o.w = o.w.saturating_add(sum_in);
                set(st, obj.0, o);
                (per(STRUCT_PER_WEIGHT, sum_in), 0)
            }
            Op::GetProp { dst, obj, .. } => {
                let o = get(st, obj.0);
                set(
                    st,
                    dst.0,
                    Sz {
                        num: None,
                        kind: Kind::Any,
                        ..o
                    },
                );
                (0, 0)
            }
            Op::GetIndex { dst, obj, .. } => {
                let o = get(st, obj.0);
                set(
                    st,
                    dst.0,
                    Sz {
                        num: None,
                        kind: Kind::Any,
                        ..o
                    },
                );
                (0, 0)
            }
            Op::Destructurable { dst, src, .. } | Op::ObjectRest { dst, src, .. } => {
                let s = get(st, src.0);
                let out = Sz {
                    w: s.w.saturating_mul(3).saturating_add(1),
                    kind: Kind::Any,
                    num: None,
                };
                set(st, dst.0, out);
                (per(STRUCT_PER_WEIGHT, sum_in.saturating_add(out.w)), 0)
            }
            Op::CallNative { dst, native, .. } | Op::CallNativeArray { dst, native, .. } => {
                let Some(id) = NativeId::from_u16(native.0) else {
                    set(st, dst.0, self.any());
                    return (0, 0);
                };
                let pattern = reads.get(1).map_or(Kind::Any, |s| s.kind);
                let mut rule = rule(id, pattern);
                if id == NativeId::JsonStringify && reads.len() <= 2 {
                    // without indentation: a unit escaped as `\\uXXXX`, a number as its
                    // digits, a key quoted with its colon and comma
                    rule.out = Out::Scale(32);
                }
                let recv = reads.first().copied().unwrap_or(Sz::UNDEF);
                let n = reads.get(1).and_then(|s| s.num);
                let bounded_n = n.filter(|x| x.is_finite() && *x >= 0.0).map(|x| x as u64);
                let out_w = match rule.out {
                    Out::Scalar => 1,
                    Out::Bounded(b) => b,
                    // (a native's new values fit the heap; what it refers to is its inputs)
                    Out::Scale(m) => sum_in
                        .saturating_mul(m)
                        .saturating_add(64)
                        .min(top.saturating_add(sum_in)),
                    Out::Top => top.saturating_add(sum_in),
                    Out::Repeat => match bounded_n {
                        Some(n) => recv.w.saturating_mul(n).saturating_add(1),
                        None => {
                            self.note(&format!("'{}' with a count not known", id.js_name()), pc);
                            top
                        }
                    },
                    Out::Pad => match bounded_n {
                        Some(n) => n.saturating_add(sum_in),
                        None => {
                            self.note(&format!("'{}' with a length not known", id.js_name()), pc);
                            top
                        }
                    },
                    Out::From => match recv.kind {
                        Kind::Str | Kind::Arr => sum_in.saturating_mul(3).saturating_add(1),
                        _ => {
                            self.note("'Array.from' of a value that may be { length: n }", pc);
                            top
                        }
                    },
                    Out::Fill => recv
                        .w
                        .saturating_mul(sum_in.saturating_sub(recv.w).saturating_add(1)),
                };
                let kind = match rule.out {
                    Out::Scalar => Kind::Scalar,
                    Out::Repeat | Out::Pad => Kind::Str,
                    _ => Kind::Any,
                };
                if rule.grows {
                    // every container may be or hold the receiver
                    for s in st.iter_mut() {
                        if matches!(s.kind, Kind::Arr | Kind::Obj | Kind::Any) {
                            s.w = s.w.max(top).saturating_add(sum_in);
                        }
                    }
                }
                set(
                    st,
                    dst.0,
                    Sz {
                        w: out_w,
                        kind,
                        num: None,
                    },
                );
                let argc = reads.len() as u64;
                (
                    per(rule.per_weight, sum_in.saturating_add(out_w)),
                    rule.per_call.saturating_add(per(BOUNDARY_PER_WEIGHT, argc)),
                )
            }
            Op::Call {
                dst, func, base, ..
            } => {
                let g = func.0 as usize;
                let nregs = self
                    .program
                    .functions
                    .get(g)
                    .map_or(0, |f| f.nregs as usize);
                let frame = (frame_units(nregs) as u64).saturating_mul(MILLI_PER_UNIT);
                let (callee, callee_fixed) = match self.callees.get(g).copied().flatten() {
                    Some(b) => b,
                    None => {
                        self.note("a call of a function without a bound", pc);
                        (0, 0)
                    }
                };
                // the callee may grow any container it is given, and overwrites registers from
                // `base` up
                let any = self.any();
                for (r, s) in st.iter_mut().enumerate() {
                    if r >= base.0 as usize || matches!(s.kind, Kind::Arr | Kind::Obj | Kind::Any) {
                        *s = any;
                    }
                }
                set(st, dst.0, any);
                (
                    callee.saturating_sub(callee_fixed),
                    callee_fixed.saturating_add(frame),
                )
            }
            Op::CallAtom { dst, atom, arg } => {
                let name = self
                    .program
                    .atoms
                    .get(atom.0 as usize)
                    .cloned()
                    .unwrap_or_default();
                let a = get(st, arg.0);
                let answer = Sz {
                    w: self.caps.answer_weight(),
                    ..self.any()
                };
                set(st, dst.0, answer);
                (per(BOUNDARY_PER_WEIGHT, a.w), self.caps.atom_price(&name))
            }
            Op::ParCall { atom, arg } => {
                let name = self
                    .program
                    .atoms
                    .get(atom.0 as usize)
                    .cloned()
                    .unwrap_or_default();
                let a = get(st, arg.0);
                (per(BOUNDARY_PER_WEIGHT, a.w), self.caps.atom_price(&name))
            }
            Op::ParEnd { dst, .. } => {
                set(st, dst.0, self.any());
                // the batch's items (at most one per queueing instruction of a loop-free
                // function), each as a settled `{ ok, value }`
                let items = self.program.functions[self.fi]
                    .code
                    .iter()
                    .filter(|o| matches!(o, Op::ParCall { .. } | Op::ParValue { .. }))
                    .count() as u64;
                (0, per(STRUCT_PER_WEIGHT, items.saturating_add(1)))
            }
            Op::Throw { .. } => (per(BOUNDARY_PER_WEIGHT, sum_in), 0),
            Op::Return { .. } => {
                let out = if self.is_entry {
                    per(BOUNDARY_PER_WEIGHT, sum_in)
                } else {
                    0
                };
                (out, 0)
            }
            Op::Catch { dst } => {
                set(st, dst.0, Sz::string(top.min(MAX_MESSAGE_BYTES as u64)));
                (0, 0)
            }
            Op::ArrayLen { dst, .. } | Op::TypeOf { dst, .. } | Op::Not { dst, .. } => {
                set(
                    st,
                    dst.0,
                    Sz {
                        w: 16,
                        ..Sz::scalar()
                    },
                );
                (0, 0)
            }
            _ => {
                // arithmetic, comparisons and branches: a string operand is read (compared,
                // parsed) at most once per unit
                let mut wrote = false;
                op.operands(|o| {
                    if let Operand::Write(r) = o {
                        wrote = true;
                        set(st, r, Sz::scalar());
                    }
                });
                let _ = wrote;
                (per(OPERATOR_PER_WEIGHT, sum_in), 0)
            }
        }
    }
}

/// The bound of one loop-free function: (bound, fixed part) in milli-fuel.
fn function_bound(
    program: &Program,
    graph: &Graph,
    caps: &Caps,
    callees: &[Option<(u64, u64)>],
    fi: usize,
    unbounded: &mut Vec<String>,
) -> Option<(u64, u64)> {
    let f = &program.functions[fi];
    let g = &graph.funcs[fi];
    let topo = g.topo.as_ref()?;
    if g.irregular || g.blocks.is_empty() {
        return None;
    }
    let top = caps.max_value_weight();
    let arg = if fi == program.entry as usize {
        caps.arg_weight()
    } else {
        top
    };
    let mut walk = Walk {
        program,
        caps,
        top,
        callees,
        is_entry: fi == program.entry as usize,
        unbounded: Vec::new(),
        fi,
    };
    let nregs = f.nregs as usize;
    let mut start = vec![Sz::UNDEF; nregs];
    let sig = (fi == program.entry as usize)
        .then_some(program.signature.as_ref())
        .flatten();
    for (i, slot) in start.iter_mut().enumerate().take(f.params.len()) {
        let ty = sig.and_then(|s| s.params.get(i)).map(|p| &p.ty);
        *slot = match ty {
            Some(TypeSpec::Number | TypeSpec::Boolean | TypeSpec::Null) => Sz {
                w: NUMBER_TEXT,
                kind: Kind::Any,
                num: None,
            },
            Some(TypeSpec::String) => Sz {
                w: arg,
                kind: Kind::Str,
                num: None,
            },
            Some(TypeSpec::Array(_)) => Sz {
                w: arg,
                kind: Kind::Arr,
                num: None,
            },
            _ => Sz {
                w: arg,
                ..walk.any()
            },
        };
    }
    let nb = g.blocks.len();
    let mut entry: Vec<Option<Vec<Sz>>> = vec![None; nb];
    entry[0] = Some(start);
    let mut weight = vec![0u64; nb];
    let mut fixed = vec![0u64; nb];
    for &b in topo {
        let Some(mut st) = entry[b].take() else {
            continue;
        };
        let block = &g.blocks[b];
        for pc in block.start..block.end {
            let op = f.code[pc];
            if let Op::Charge { amount } = op {
                weight[b] = weight[b].saturating_add(amount.0 as u64);
                fixed[b] = fixed[b].saturating_add(amount.0 as u64);
            }
            let (size, fix) = walk.step(&op, pc, &mut st);
            weight[b] = weight[b].saturating_add(size).saturating_add(fix);
            fixed[b] = fixed[b].saturating_add(fix);
        }
        for &s in &block.succ {
            entry[s] = Some(match entry[s].take() {
                None => st.clone(),
                Some(old) => old.iter().zip(&st).map(|(a, b)| a.join(*b)).collect(),
            });
        }
    }
    unbounded.append(&mut walk.unbounded);
    Some((g.longest(|b| weight[b]), g.longest(|b| fixed[b])))
}

/// The fuel bound of `program` at `caps`.
pub fn bound(program: &Program, graph: &Graph, caps: &Caps) -> FuelBound {
    let mut loops = Vec::new();
    for (fi, g) in graph.funcs.iter().enumerate() {
        for &(pc, callback) in &g.loops {
            let pos = program.span(fi, pc);
            loops.push(Place {
                function: program.functions[fi].name.to_string(),
                line: pos.map(|p| p.line),
                column: pos.map(|p| p.col),
                callback,
            });
        }
    }
    let mut unbounded = Vec::new();
    if graph.cells.is_none() {
        unbounded.push(format!(
            "a program too large to analyze (more than {} register-block cells, MAX_ANALYSIS_CELLS)",
            super::cfg::MAX_ANALYSIS_CELLS
        ));
    }
    for (fi, r) in graph.recursive.iter().enumerate() {
        if *r {
            unbounded.push(format!(
                "recursion through '{}'",
                program.functions[fi].name
            ));
        }
    }
    let mut per_func: Vec<Option<(u64, u64)>> = vec![None; program.functions.len()];
    for fi in graph.callees_first() {
        if graph.recursive[fi] || graph.cells.is_none() {
            continue;
        }
        per_func[fi] = function_bound(program, graph, caps, &per_func, fi, &mut unbounded);
    }
    let entry = program.entry as usize;
    let entry_regs = program.functions.get(entry).map_or(0, |f| f.nregs as usize);
    let (strings, units) = program
        .constants
        .iter()
        .fold((0usize, 0usize), |(n, u), c| match c {
            Constant::String(s) => (n + 1, u + s.len()),
            Constant::Number(_) => (n, u),
        });
    let start = (start_units_of(strings, units, entry_regs) as u64).saturating_mul(MILLI_PER_UNIT);
    match per_func.get(entry).copied().flatten() {
        Some((max, fixed)) if unbounded.is_empty() => FuelBound {
            max: Some(to_fuel(max.saturating_add(start))),
            fixed: Some(to_fuel(fixed.saturating_add(start))),
            loops: Vec::new(),
            unbounded: Vec::new(),
        },
        _ => FuelBound {
            max: None,
            fixed: None,
            loops,
            unbounded,
        },
    }
}

/// Milli-fuel as whole fuel, rounded up.
fn to_fuel(milli: u64) -> u64 {
    milli.div_ceil(MILLI)
}
