//! What literal text reaches an atom's input: a forward dataflow over each function's blocks
//! that knows constant strings and numbers, their concatenations (`+`, templates; a known start
//! stays known whatever follows it) and object literals built from them.

use std::collections::HashMap;

use ajs_bytecode::isa::{Op, Operand};
use ajs_bytecode::{Constant, NativeId, Program};

use super::cfg::{Graph, MAX_ROUNDS};
use super::UrlInfo;
use crate::number::number_to_string;

/// What is known of a register's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Abs {
    /// Nothing.
    Unknown,
    /// A number.
    Num(f64),
    /// A string: exactly these units (`true`), or starting with them (`false`).
    Str(Vec<u16>, bool),
    /// An object built from a literal: the known properties, and whether it may have others
    /// (`true` after a spread of something not known: any property may have been replaced).
    Obj(Vec<(Vec<u16>, Abs)>, bool),
}

impl Abs {
    fn join(&self, other: &Abs) -> Abs {
        match (self, other) {
            (a, b) if a == b => a.clone(),
            (Abs::Str(p, pe), Abs::Str(q, qe)) => {
                let n = p.iter().zip(q).take_while(|(a, b)| a == b).count();
                Abs::Str(
                    p[..n].to_vec(),
                    *pe && *qe && p.len() == q.len() && n == p.len(),
                )
            }
            (Abs::Obj(a, ao), Abs::Obj(b, bo)) => {
                let props: Vec<(Vec<u16>, Abs)> = a
                    .iter()
                    .filter_map(|(k, v)| {
                        b.iter()
                            .find(|(k2, _)| k2 == k)
                            .map(|(_, w)| (k.clone(), v.join(w)))
                    })
                    .collect();
                // a property only one side has may or may not be there
                let open = *ao || *bo || props.len() != a.len() || props.len() != b.len();
                Abs::Obj(props, open)
            }
            _ => Abs::Unknown,
        }
    }

    /// The text of a string value and whether it is whole.
    fn text(&self) -> Option<(String, bool)> {
        match self {
            Abs::Str(u, exact) => Some((String::from_utf16_lossy(u), *exact)),
            _ => None,
        }
    }

    /// A property of a known object.
    pub fn prop(&self, key: &str) -> Option<&Abs> {
        let Abs::Obj(props, _) = self else {
            return None;
        };
        let k: Vec<u16> = key.encode_utf16().collect();
        props.iter().find(|(p, _)| *p == k).map(|(_, v)| v)
    }

    /// `httpFetch`'s URL: the input itself when a string, else its `url` property.
    pub fn url(&self) -> Option<UrlInfo> {
        let v = match self {
            Abs::Str(..) => self,
            _ => self.prop("url")?,
        };
        let (url, exact) = v.text()?;
        (!url.is_empty()).then_some(UrlInfo { url, exact })
    }

    /// `httpFetch`'s method, when literal.
    pub fn method(&self) -> Option<String> {
        match self.prop("method")?.text()? {
            (m, true) => Some(m),
            _ => None,
        }
    }

    /// Whether `llmPredict`'s input asks for a response format (`None`: not known).
    pub fn response_format(&self) -> Option<bool> {
        let Abs::Obj(_, open) = self else {
            return None;
        };
        match self.prop("options") {
            None => (!open).then_some(false),
            Some(o @ Abs::Obj(_, open)) => match o.prop("responseFormat") {
                Some(_) => Some(true),
                None => (!open).then_some(false),
            },
            Some(_) => None,
        }
    }
}

/// The value known of `a + b`.
fn concat(a: &Abs, b: &Abs) -> Abs {
    match (a, b) {
        (Abs::Str(p, true), Abs::Str(q, e)) => Abs::Str([&p[..], &q[..]].concat(), *e),
        (Abs::Str(p, true), Abs::Num(n)) => {
            let s: Vec<u16> = number_to_string(*n).encode_utf16().collect();
            Abs::Str([&p[..], &s[..]].concat(), true)
        }
        (Abs::Num(x), Abs::Num(y)) => Abs::Num(x + y),
        (Abs::Str(p, _), _) => Abs::Str(p.clone(), false),
        _ => Abs::Unknown,
    }
}

fn constant(program: &Program, k: u16) -> Abs {
    match program.constants.get(k as usize) {
        Some(Constant::String(s)) => Abs::Str(s.to_vec(), true),
        Some(Constant::Number(n)) => Abs::Num(*n),
        None => Abs::Unknown,
    }
}

fn get(state: &[Abs], r: u16) -> Abs {
    state.get(r as usize).cloned().unwrap_or(Abs::Unknown)
}

fn set(state: &mut [Abs], r: u16, v: Abs) {
    if let Some(s) = state.get_mut(r as usize) {
        *s = v;
    }
}

/// Forgets every object known: one of them may have been changed through an alias.
fn forget_objects(state: &mut [Abs]) {
    for s in state.iter_mut() {
        if matches!(s, Abs::Obj(..)) {
            *s = Abs::Unknown;
        }
    }
}

/// One instruction's effect on what is known.
fn step(program: &Program, op: &Op, state: &mut [Abs]) {
    match *op {
        Op::LoadConst { dst, k } => set(state, dst.0, constant(program, k.0)),
        Op::Move { dst, src } => set(state, dst.0, get(state, src.0)),
        Op::Add { dst, a, b } => set(state, dst.0, concat(&get(state, a.0), &get(state, b.0))),
        Op::AddK { dst, a, k } => set(
            state,
            dst.0,
            concat(&get(state, a.0), &constant(program, k.0)),
        ),
        Op::AddI { dst, a, i } => set(state, dst.0, concat(&get(state, a.0), &Abs::Num(i.get()))),
        Op::Concat { dst, base, count } => {
            let mut v = Abs::Str(Vec::new(), true);
            for r in 0..count.0 as u16 {
                v = concat(&v, &get(state, base.0.saturating_add(r)));
            }
            set(state, dst.0, v);
        }
        Op::NewObject { dst } => set(state, dst.0, Abs::Obj(Vec::new(), false)),
        Op::InitProp { obj, key, val } => {
            let v = get(state, val.0);
            let k = match constant(program, key.0) {
                Abs::Str(k, _) => k,
                _ => return,
            };
            if let Some(Abs::Obj(props, _)) = state.get_mut(obj.0 as usize) {
                props.retain(|(p, _)| *p != k);
                props.push((k, v));
            }
        }
        // `{ [key]: val }`: a known key sets that property; any other may replace any of them
        Op::InitIndex { obj, key, val } => {
            let v = get(state, val.0);
            let k: Option<Vec<u16>> = match get(state, key.0) {
                Abs::Str(k, true) => Some(k),
                Abs::Num(n) => Some(number_to_string(n).encode_utf16().collect()),
                _ => None,
            };
            match (k, state.get_mut(obj.0 as usize)) {
                (Some(k), Some(Abs::Obj(props, _))) => {
                    props.retain(|(p, _)| *p != k);
                    props.push((k, v));
                }
                (None, Some(o @ Abs::Obj(..))) => *o = Abs::Obj(Vec::new(), true),
                _ => {}
            }
        }
        // `{ ...src }`: src's properties replace the target's; what is not known of src may
        // replace any of them
        Op::ObjectAssign { obj, src } => {
            let merged = match (get(state, obj.0), get(state, src.0)) {
                (Abs::Obj(mut props, open), Abs::Obj(more, false)) => {
                    for (k, v) in more {
                        props.retain(|(p, _)| *p != k);
                        props.push((k, v));
                    }
                    Abs::Obj(props, open)
                }
                (Abs::Obj(..), Abs::Obj(more, true)) => Abs::Obj(more, true),
                (Abs::Obj(..), _) => Abs::Obj(Vec::new(), true),
                _ => Abs::Unknown,
            };
            forget_objects(state);
            set(state, obj.0, merged);
        }
        // `Object.assign` changes its target in place, and a helper may call it on what it is
        // given: any register may be an alias of the object changed
        Op::CallNative { dst, native, .. } | Op::CallNativeArray { dst, native, .. }
            if native.0 == NativeId::ObjectAssign.to_u16() =>
        {
            forget_objects(state);
            set(state, dst.0, Abs::Unknown);
        }
        Op::Call {
            dst, base, argc, ..
        } => {
            if argc.0 > 0 {
                forget_objects(state);
            }
            for s in state.iter_mut().skip(base.0 as usize) {
                *s = Abs::Unknown;
            }
            set(state, dst.0, Abs::Unknown);
        }
        _ => op.operands(|o| {
            if let Operand::Write(r) = o {
                set(state, r, Abs::Unknown);
            }
        }),
    }
}

/// What is known of every atom call's input: (function, pc) → the input's value.
#[derive(Clone, Debug, Default)]
pub struct Values {
    /// The input of the atom call at each (function, pc).
    pub inputs: HashMap<(usize, usize), Abs>,
}

impl Values {
    /// Runs the dataflow over every function of `program`.
    pub fn of(program: &Program, graph: &Graph) -> Values {
        let mut inputs = HashMap::new();
        if graph.cells.is_none() {
            return Values { inputs };
        }
        // a helper's parameters: the join of its arguments at every call, callers first (the
        // entry's, a recursive function's and an unsettled caller's callees' are not known)
        let n = program.functions.len();
        let mut params: Vec<Option<Vec<Abs>>> = vec![None; n];
        let mut poisoned: Vec<bool> = (0..n)
            .map(|f| f == program.entry as usize || graph.recursive[f])
            .collect();
        let mut order = graph.callees_first();
        order.reverse();
        for fi in order {
            let (f, g) = (&program.functions[fi], &graph.funcs[fi]);
            let sites: Vec<usize> = f
                .code
                .iter()
                .enumerate()
                .filter(|(_, op)| {
                    matches!(
                        op,
                        Op::CallAtom { .. } | Op::ParCall { .. } | Op::Call { .. }
                    )
                })
                .map(|(pc, _)| pc)
                .collect();
            if sites.is_empty() || g.blocks.is_empty() {
                continue;
            }
            let nregs = f.nregs as usize;
            let mut start = vec![Abs::Unknown; nregs];
            if !poisoned[fi] {
                if let Some(known) = &params[fi] {
                    for (slot, v) in start.iter_mut().zip(known) {
                        *slot = v.clone();
                    }
                }
            }
            let mut entry: Vec<Option<Vec<Abs>>> = vec![None; g.blocks.len()];
            entry[0] = Some(start);
            let mut rounds = 0;
            let mut changed = true;
            while changed && rounds < MAX_ROUNDS {
                changed = false;
                rounds += 1;
                for b in 0..g.blocks.len() {
                    let Some(mut state) = entry[b].clone() else {
                        continue;
                    };
                    for op in &f.code[g.blocks[b].start..g.blocks[b].end] {
                        step(program, op, &mut state);
                    }
                    for &s in &g.blocks[b].succ {
                        let joined = match &entry[s] {
                            None => state.clone(),
                            Some(old) => old.iter().zip(&state).map(|(a, b)| a.join(b)).collect(),
                        };
                        if entry[s].as_ref() != Some(&joined) {
                            entry[s] = Some(joined);
                            changed = true;
                        }
                    }
                }
            }
            let settled = !changed;
            for pc in sites {
                let b = g.block_of[pc];
                let state = match (&entry[b], settled) {
                    (Some(state), true) => {
                        let mut state = state.clone();
                        for op in &f.code[g.blocks[b].start..pc] {
                            step(program, op, &mut state);
                        }
                        Some(state)
                    }
                    _ => None,
                };
                match f.code[pc] {
                    Op::CallAtom { arg, .. } | Op::ParCall { arg, .. } => {
                        let known = state.map_or(Abs::Unknown, |st| get(&st, arg.0));
                        inputs.insert((fi, pc), known);
                    }
                    Op::Call {
                        func, base, argc, ..
                    } => {
                        let callee = func.0 as usize;
                        if callee >= n {
                            continue;
                        }
                        let Some(st) = state else {
                            // a call whose arguments are not known: reachable or not, its
                            // callee's parameters are not known
                            poisoned[callee] = true;
                            continue;
                        };
                        let nparams = program.functions[callee].params.len();
                        let args: Vec<Abs> = (0..nparams)
                            .map(|i| {
                                if i < argc.0 as usize {
                                    get(&st, base.0.saturating_add(i as u16))
                                } else {
                                    Abs::Unknown
                                }
                            })
                            .collect();
                        params[callee] = Some(match params[callee].take() {
                            None => args,
                            Some(old) => old.iter().zip(&args).map(|(a, b)| a.join(b)).collect(),
                        });
                    }
                    _ => {}
                }
            }
        }
        Values { inputs }
    }
}
