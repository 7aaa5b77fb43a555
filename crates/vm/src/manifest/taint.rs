//! Where atoms' data can go: a forward dataflow over each function's registers (a register's
//! taint is every atom whose data its value may hold), with summaries across calls (what
//! callers pass, what callees return). An object literal's properties go into the literal's
//! own register (the compiler fills a literal before anything else refers to it); what a
//! mutating native stores (`push`, `Object.assign`, `Set.add`) goes into a program-wide heap
//! taint that every read out of a container, every return and every atom input carries. Only
//! data, not control: a branch on fetched text is not a flow.

use std::collections::{BTreeMap, BTreeSet};

use ajs_bytecode::isa::{Op, Operand};
use ajs_bytecode::Program;
use smallvec::SmallVec;

use super::atoms::called;
use super::cfg::{Graph, MAX_ROUNDS};
use super::{Flow, Output};

/// A set of atoms (by index in the program's atom table).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Bits(SmallVec<[u64; 2]>);

impl Bits {
    fn insert(&mut self, a: u16) {
        let (w, i) = (a as usize / 64, a as usize % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << i;
    }
    fn contains(&self, a: u16) -> bool {
        self.0
            .get(a as usize / 64)
            .is_some_and(|w| w >> (a % 64) & 1 == 1)
    }
    /// Adds `other`; whether anything was new.
    fn union(&mut self, other: &Bits) -> bool {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        let mut grew = false;
        for (w, o) in self.0.iter_mut().zip(&other.0) {
            if *w | o != *w {
                *w |= o;
                grew = true;
            }
        }
        grew
    }
}

/// What flows between functions and through the heap, to a fixed point.
struct Summaries {
    /// Per function, per parameter register: what its callers pass.
    params: Vec<Vec<Bits>>,
    /// Per function: what it returns.
    ret: Vec<Bits>,
    /// Per function, per register: what it holds when the function returns or throws (a call
    /// overwrites the caller's registers from its base up with the callee's).
    any: Vec<Vec<Bits>>,
    /// What mutating natives stored into containers (`push`, `Object.assign`, `Set.add`).
    heap: Bits,
    /// What `throw` raised.
    thrown: Bits,
    /// Per function: what its `parallel` batches hold.
    batch: Vec<Bits>,
    /// Every atom the program calls (an atom's error message can carry its data).
    all: Bits,
    /// Per atom call (function, pc): its input's taint.
    inputs: BTreeMap<(usize, usize), Bits>,
    changed: bool,
}

impl Summaries {
    fn grow(slot: &mut Bits, t: &Bits, changed: &mut bool) {
        *changed |= slot.union(t);
    }
}

/// The registers `op` reads (its `Read` operands and its runs).
fn reads(op: &Op) -> Vec<u16> {
    let mut out = Vec::new();
    let mut base = None;
    op.operands(|o| match o {
        Operand::Read(r) => out.push(r),
        Operand::Base(b) => base = Some(b),
        Operand::Count(n) => {
            if let Some(b) = base.take() {
                out.extend((0..n as u16).map(|i| b.saturating_add(i)));
            }
        }
        _ => {}
    });
    out
}

fn writes(op: &Op) -> Vec<u16> {
    let mut out = Vec::new();
    op.operands(|o| {
        if let Operand::Write(r) = o {
            out.push(r);
        }
    });
    out
}

/// Whether `op` reads values out of containers (or may, as a native does).
fn reads_heap(op: &Op) -> bool {
    matches!(
        op,
        Op::GetProp { .. }
            | Op::GetIndex { .. }
            | Op::Destructurable { .. }
            | Op::ObjectRest { .. }
            | Op::CallNative { .. }
            | Op::CallNativeArray { .. }
            | Op::ArrayExtend { .. }
            | Op::ObjectAssign { .. }
            | Op::Concat { .. }
            | Op::Add { .. }
            | Op::AddK { .. }
    )
}

/// Whether a native can store its arguments into its receiver.
fn mutates(op: &Op) -> bool {
    use ajs_bytecode::NativeId::*;
    let native = match *op {
        Op::CallNative { native, .. } | Op::CallNativeArray { native, .. } => native.0,
        _ => return false,
    };
    match ajs_bytecode::NativeId::from_u16(native) {
        Some(Push | Unshift | Splice | Fill | Add | ObjectAssign) => true,
        Some(_) => false,
        None => true,
    }
}

fn get(regs: &[Bits], r: u16) -> Bits {
    regs.get(r as usize).cloned().unwrap_or_default()
}

fn put(regs: &mut [Bits], r: u16, t: Bits) {
    if let Some(slot) = regs.get_mut(r as usize) {
        *slot = t;
    }
}

fn add(regs: &mut [Bits], r: u16, t: &Bits) {
    if let Some(slot) = regs.get_mut(r as usize) {
        slot.union(t);
    }
}

/// One instruction of function `f` at `pc` over its registers `regs`.
fn step(s: &mut Summaries, f: usize, pc: usize, op: &Op, regs: &mut [Bits]) {
    let mut input = Bits::default();
    for r in reads(op) {
        input.union(&get(regs, r));
    }
    if reads_heap(op) {
        input.union(&s.heap);
    }
    let mut changed = false;
    match *op {
        // literals: the container's own register holds its contents
        Op::InitProp { obj, .. } | Op::InitIndex { obj, .. } | Op::ObjectAssign { obj, .. } => {
            add(regs, obj.0, &input)
        }
        Op::ArrayAppend { arr, .. } | Op::ArrayExtend { arr, .. } => add(regs, arr.0, &input),
        Op::CallNative { .. } | Op::CallNativeArray { .. } => {
            if mutates(op) {
                Summaries::grow(&mut s.heap, &input, &mut changed);
                for r in reads(op) {
                    add(regs, r, &input);
                }
            }
            for w in writes(op) {
                put(regs, w, input.clone());
            }
        }
        Op::Call {
            dst,
            func,
            base,
            argc,
        } => {
            let g = func.0 as usize;
            if g >= s.params.len() {
                return;
            }
            for i in 0..argc.0 as u16 {
                let t = get(regs, base.0.saturating_add(i));
                if let Some(slot) = s.params[g].get_mut(i as usize) {
                    Summaries::grow(slot, &t, &mut changed);
                }
            }
            // the callee's registers overwrite the caller's from `base` up
            for i in 0..s.any[g].len() as u16 {
                let t = s.any[g][i as usize].clone();
                put(regs, base.0.saturating_add(i), t);
            }
            let mut r = s.ret[g].clone();
            r.union(&s.heap);
            put(regs, dst.0, r);
        }
        Op::Return { src } => {
            // a container returned may hold what a native stored into an alias of it
            let mut t = get(regs, src.0);
            t.union(&s.heap);
            Summaries::grow(&mut s.ret[f], &t, &mut changed);
        }
        Op::CallAtom { dst, atom, arg } => {
            let mut t = get(regs, arg.0);
            t.union(&s.heap);
            let slot = s.inputs.entry((f, pc)).or_default();
            Summaries::grow(slot, &t, &mut changed);
            t.insert(atom.0);
            put(regs, dst.0, t);
        }
        Op::ParCall { atom, arg } => {
            let mut t = get(regs, arg.0);
            t.union(&s.heap);
            let slot = s.inputs.entry((f, pc)).or_default();
            Summaries::grow(slot, &t, &mut changed);
            t.insert(atom.0);
            Summaries::grow(&mut s.batch[f], &t, &mut changed);
        }
        Op::ParValue { .. } => Summaries::grow(&mut s.batch[f], &input, &mut changed),
        Op::ParEnd { dst, .. } => put(regs, dst.0, s.batch[f].clone()),
        Op::Throw { .. } => Summaries::grow(&mut s.thrown, &input, &mut changed),
        Op::Catch { dst } => {
            let mut t = s.thrown.clone();
            t.union(&s.all);
            put(regs, dst.0, t);
        }
        _ => {
            for w in writes(op) {
                put(regs, w, input.clone());
            }
        }
    }
    s.changed |= changed;
}

/// One pass of function `f` to its own fixed point, from its parameters' summary; `false` when
/// it did not settle within [`MAX_ROUNDS`].
fn function(program: &Program, graph: &Graph, s: &mut Summaries, f: usize) -> bool {
    let func = &program.functions[f];
    let g = &graph.funcs[f];
    if g.blocks.is_empty() {
        return true;
    }
    let handlers: BTreeSet<usize> = func
        .code
        .iter()
        .filter_map(|op| match op {
            Op::TryEnter { handler } => g.block_of.get(handler.0 as usize).copied(),
            _ => None,
        })
        .collect();
    let nregs = func.nregs as usize;
    let mut start = vec![Bits::default(); nregs];
    for (slot, t) in start.iter_mut().zip(&s.params[f]) {
        *slot = t.clone();
    }
    let mut entry: Vec<Option<Vec<Bits>>> = vec![None; g.blocks.len()];
    entry[0] = Some(start);
    let mut dirty = true;
    let mut rounds = 0;
    while dirty {
        if rounds == MAX_ROUNDS {
            return false;
        }
        rounds += 1;
        dirty = false;
        for b in 0..g.blocks.len() {
            let Some(mut regs) = entry[b].clone() else {
                continue;
            };
            let block = &g.blocks[b];
            // (a handler may be entered from the middle of a block: every state it passed)
            let to_handler = block.succ.iter().any(|b| handlers.contains(b));
            let mut seen = if to_handler { regs.clone() } else { Vec::new() };
            for pc in block.start..block.end {
                let op = &func.code[pc];
                if matches!(op, Op::Return { .. } | Op::Throw { .. }) {
                    // what a caller's registers from the call's base up become
                    for (slot, r) in s.any[f].iter_mut().zip(&regs) {
                        s.changed |= slot.union(r);
                    }
                }
                step(s, f, pc, op, &mut regs);
                for (a, r) in seen.iter_mut().zip(&regs) {
                    a.union(r);
                }
            }
            for &succ in &block.succ {
                let out = if handlers.contains(&succ) {
                    &seen
                } else {
                    &regs
                };
                match &mut entry[succ] {
                    None => {
                        entry[succ] = Some(out.clone());
                        dirty = true;
                    }
                    Some(old) => {
                        for (a, r) in old.iter_mut().zip(out) {
                            dirty |= a.union(r);
                        }
                    }
                }
            }
        }
    }
    true
}

/// Which atoms' data can reach the result, and which atoms' inputs.
pub fn output(program: &Program, graph: &Graph) -> Output {
    let mut all = Bits::default();
    for f in &program.functions {
        for op in &f.code {
            if let Some(a) = called(op) {
                all.insert(a);
            }
        }
    }
    let n = program.functions.len();
    let mut s = Summaries {
        params: program
            .functions
            .iter()
            .map(|f| vec![Bits::default(); f.params.len().min(f.nregs as usize)])
            .collect(),
        ret: vec![Bits::default(); n],
        any: program
            .functions
            .iter()
            .map(|f| vec![Bits::default(); f.nregs as usize])
            .collect(),
        heap: Bits::default(),
        thrown: Bits::default(),
        batch: vec![Bits::default(); n],
        all: all.clone(),
        inputs: BTreeMap::new(),
        changed: true,
    };
    let mut settled = graph.cells.is_some();
    let mut rounds = 0;
    while settled && s.changed {
        s.changed = false;
        rounds += 1;
        for f in 0..n {
            settled &= function(program, graph, &mut s, f);
        }
        settled &= rounds < MAX_ROUNDS || !s.changed;
    }
    if !settled {
        // too large or too deep to follow: every atom's data may go everywhere
        let names: Vec<String> = (0..program.atoms.len() as u16)
            .filter(|&a| all.contains(a))
            .filter_map(|a| program.atoms.get(a as usize).cloned())
            .collect();
        return Output {
            result: names.iter().map(|a| (a.clone(), true)).collect(),
            flows: names
                .iter()
                .flat_map(|f| {
                    names.iter().map(move |t| Flow {
                        from: f.clone(),
                        to: t.clone(),
                    })
                })
                .collect(),
        };
    }
    let name = |a: u16| program.atoms.get(a as usize).cloned().unwrap_or_default();
    let ret = s
        .ret
        .get(program.entry as usize)
        .cloned()
        .unwrap_or_default();
    let mut result = BTreeMap::new();
    let mut flows = BTreeSet::new();
    for a in 0..program.atoms.len() as u16 {
        if all.contains(a) {
            result.insert(name(a), ret.contains(a));
        }
    }
    for (&(fi, pc), t) in &s.inputs {
        let Some(to) = called(&program.functions[fi].code[pc]) else {
            continue;
        };
        for from in 0..program.atoms.len() as u16 {
            if t.contains(from) {
                flows.insert(Flow {
                    from: name(from),
                    to: name(to),
                });
            }
        }
    }
    Output {
        result,
        flows: flows.into_iter().collect(),
    }
}
