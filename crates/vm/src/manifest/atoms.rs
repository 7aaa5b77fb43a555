//! The atoms a program calls: every call site, its context (loop, callback over a collection),
//! what is literal in its input, and the most calls one run can make.

use std::collections::BTreeMap;

use ajs_bytecode::isa::Op;
use ajs_bytecode::Program;

use super::cfg::Graph;
use super::urls::{Abs, Values};
use super::{AtomUse, Site};

/// The atom an instruction calls, if it calls one (`CallAtom`, or `ParCall` in a batch).
pub fn called(op: &Op) -> Option<u16> {
    match *op {
        Op::CallAtom { atom, .. } | Op::ParCall { atom, .. } => Some(atom.0),
        _ => None,
    }
}

/// Every atom the program calls, keyed by name.
pub fn uses(program: &Program, graph: &Graph, values: &Values) -> BTreeMap<String, AtomUse> {
    let mut out: BTreeMap<String, AtomUse> = BTreeMap::new();
    for (fi, f) in program.functions.iter().enumerate() {
        for (pc, op) in f.code.iter().enumerate() {
            let Some(a) = called(op) else {
                continue;
            };
            let Some(name) = program.atoms.get(a as usize) else {
                continue;
            };
            let input = values.inputs.get(&(fi, pc)).unwrap_or(&Abs::Unknown);
            let pos = program.span(fi, pc);
            let site = Site {
                line: pos.map(|p| p.line),
                column: pos.map(|p| p.col),
                function: f.name.to_string(),
                in_loop: graph.repeats(fi, pc),
                in_callback: graph.in_callback(fi, pc),
                url: (name == "httpFetch").then(|| input.url()).flatten(),
                method: (name == "httpFetch").then(|| input.method()).flatten(),
                response_format: (name == "llmPredict")
                    .then(|| input.response_format())
                    .flatten(),
            };
            out.entry(name.clone())
                .or_insert_with(|| AtomUse {
                    sites: Vec::new(),
                    max_calls: None,
                })
                .sites
                .push(site);
        }
    }
    for (a, name) in program.atoms.iter().enumerate() {
        if let Some(u) = out.get_mut(name) {
            u.max_calls = max_calls(program, graph, a as u16);
        }
    }
    out
}

/// The most calls of atom `a` one run can make: the worst path's sites, callees' counted at
/// their call; `None` when a site can run more than once (loop, callback, recursion).
pub fn max_calls(program: &Program, graph: &Graph, a: u16) -> Option<u64> {
    let n = program.functions.len();
    // the functions that can reach a site of `a` (themselves or through calls)
    let mut reaches: Vec<bool> = program
        .functions
        .iter()
        .map(|f| f.code.iter().any(|op| called(op) == Some(a)))
        .collect();
    let mut changed = true;
    while changed {
        changed = false;
        for f in 0..n {
            if !reaches[f] && graph.calls[f].iter().any(|&(_, g)| reaches[g]) {
                reaches[f] = true;
                changed = true;
            }
        }
    }
    let mut per_func: Vec<Option<u64>> = vec![None; n];
    for f in graph.callees_first() {
        if !reaches[f] {
            per_func[f] = Some(0);
            continue;
        }
        let code = &program.functions[f].code;
        let sites_repeat = code
            .iter()
            .enumerate()
            .any(|(pc, op)| called(op) == Some(a) && graph.repeats(f, pc));
        if sites_repeat || graph.reaches_unbounded[f] {
            per_func[f] = None;
            // a function whose count is unknown poisons its callers through `None` below
            continue;
        }
        let g = &graph.funcs[f];
        let mut unknown = false;
        let weights: Vec<u64> = g
            .blocks
            .iter()
            .map(|b| {
                let mut w = 0u64;
                for op in &code[b.start..b.end] {
                    if called(op) == Some(a) {
                        w += 1;
                    }
                    if let Op::Call { func, .. } = op {
                        match per_func.get(func.0 as usize).copied().flatten() {
                            Some(n) => w = w.saturating_add(n),
                            None => unknown = true,
                        }
                    }
                }
                w
            })
            .collect();
        per_func[f] = (!unknown).then(|| g.longest(|b| weights[b]));
    }
    per_func.get(program.entry as usize).copied().flatten()
}
