//! Where atoms' data can go: a flow-insensitive dataflow over registers (a register's taint is
//! every atom whose data any of its values may hold), across calls, object literals and
//! natives. A value read out of a container also carries whatever a native may have stored in
//! any container; an object literal's properties go into the literal's own register (the
//! compiler builds a literal only in a fresh object, aliased only by moves, which the
//! dataflow follows). Only data, not control: a branch on fetched text is not a flow.

use std::collections::{BTreeMap, BTreeSet};

use ajs_bytecode::isa::{Op, Operand};
use ajs_bytecode::Program;

use super::atoms::called;
use super::{Flow, Output};

/// A set of atoms (by index in the program's atom table).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Bits(Vec<u64>);

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

/// The taint of every register of every function, to a fixed point.
struct State {
    regs: Vec<Vec<Bits>>,
    ret: Vec<Bits>,
    heap: Bits,
    thrown: Bits,
    batch: Vec<Bits>,
    all: Bits,
    changed: bool,
}

impl State {
    fn reg(&self, f: usize, r: u16) -> Bits {
        self.regs[f].get(r as usize).cloned().unwrap_or_default()
    }
    fn add(&mut self, f: usize, r: u16, t: &Bits) {
        if let Some(slot) = self.regs[f].get_mut(r as usize) {
            self.changed |= slot.union(t);
        }
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

fn step(program: &Program, s: &mut State, f: usize, op: &Op) {
    let mut input = Bits::default();
    for r in reads(op) {
        input.union(&s.reg(f, r));
    }
    if reads_heap(op) {
        let h = s.heap.clone();
        input.union(&h);
    }
    match *op {
        // literals: the container's own register holds its contents
        Op::InitProp { obj, .. } | Op::InitIndex { obj, .. } | Op::ObjectAssign { obj, .. } => {
            s.add(f, obj.0, &input)
        }
        Op::ArrayAppend { arr, .. } | Op::ArrayExtend { arr, .. } => s.add(f, arr.0, &input),
        Op::CallNative { .. } | Op::CallNativeArray { .. } => {
            // a native may store any argument into any other (`xs.push(x)`)
            s.changed |= s.heap.union(&input);
            for r in reads(op) {
                s.add(f, r, &input);
            }
            for w in writes(op) {
                s.add(f, w, &input);
            }
        }
        Op::Call {
            dst,
            func,
            base,
            argc,
        } => {
            let g = func.0 as usize;
            if g >= s.regs.len() {
                return;
            }
            for i in 0..argc.0 as u16 {
                let t = s.reg(f, base.0.saturating_add(i));
                s.add(g, i, &t);
            }
            // the callee's registers overwrite the caller's from `base` up
            for i in 0..s.regs[g].len() as u16 {
                let t = s.reg(g, i);
                s.add(f, base.0.saturating_add(i), &t);
            }
            let r = s.ret[g].clone();
            s.add(f, dst.0, &r);
        }
        Op::Return { src } => {
            let t = s.reg(f, src.0);
            s.changed |= s.ret[f].union(&t);
        }
        Op::CallAtom { dst, atom, .. } => {
            input.insert(atom.0);
            s.add(f, dst.0, &input);
        }
        Op::ParCall { atom, .. } => {
            input.insert(atom.0);
            s.changed |= s.batch[f].union(&input);
        }
        Op::ParValue { .. } => {
            s.changed |= s.batch[f].union(&input);
        }
        Op::ParEnd { dst, .. } => {
            let t = s.batch[f].clone();
            s.add(f, dst.0, &t);
        }
        Op::Throw { .. } => {
            s.changed |= s.thrown.union(&input);
        }
        Op::Catch { dst } => {
            // an atom's error can carry its data
            let mut t = s.thrown.clone();
            t.union(&s.all.clone());
            s.add(f, dst.0, &t);
        }
        _ => {
            for w in writes(op) {
                s.add(f, w, &input);
            }
        }
    }
    let _ = program;
}

/// Which atoms' data can reach the result, and which atoms' inputs.
pub fn output(program: &Program) -> Output {
    let mut all = Bits::default();
    for f in &program.functions {
        for op in &f.code {
            if let Some(a) = called(op) {
                all.insert(a);
            }
        }
    }
    let n = program.functions.len();
    let mut s = State {
        regs: program
            .functions
            .iter()
            .map(|f| vec![Bits::default(); f.nregs as usize])
            .collect(),
        ret: vec![Bits::default(); n],
        heap: Bits::default(),
        thrown: Bits::default(),
        batch: vec![Bits::default(); n],
        all: all.clone(),
        changed: true,
    };
    while s.changed {
        s.changed = false;
        for (fi, f) in program.functions.iter().enumerate() {
            for op in &f.code {
                step(program, &mut s, fi, op);
            }
        }
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
    for (fi, f) in program.functions.iter().enumerate() {
        for op in &f.code {
            let (to, arg) = match *op {
                Op::CallAtom { atom, arg, .. } | Op::ParCall { atom, arg } => (atom.0, arg.0),
                _ => continue,
            };
            let t = s.reg(fi, arg);
            for from in 0..program.atoms.len() as u16 {
                if t.contains(from) {
                    flows.insert(Flow {
                        from: name(from),
                        to: name(to),
                    });
                }
            }
        }
    }
    Output {
        result,
        flows: flows.into_iter().collect(),
    }
}
