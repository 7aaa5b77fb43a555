//! The control-flow and call graphs of a program: basic blocks, loops (cycles of blocks),
//! callbacks over collections, calls, recursion, and in what context each function runs.

use ajs_bytecode::isa::{leaders, Flow, Op};
use ajs_bytecode::Program;

/// The most register-block cells (each function's blocks times its registers, summed) the
/// dataflows walk: a larger program gets the manifest's conservative answers (no bound, no
/// literal URLs, every atom's data everywhere), so a manifest costs little to compute at every
/// load whatever an artifact holds.
pub const MAX_ANALYSIS_CELLS: u64 = 1 << 20;

/// Rounds of a fixed-point iteration before the dataflows give up and answer conservatively.
pub const MAX_ROUNDS: usize = 64;

/// One basic block: instructions `start..end`.
#[derive(Clone, Debug)]
pub struct Block {
    /// Its first instruction (a `Charge`, in verified code).
    pub start: usize,
    /// One past its last instruction.
    pub end: usize,
    /// The blocks control may go to next (a `try` region's blocks also to its handler).
    pub succ: Vec<usize>,
}

/// One function's blocks and loops.
#[derive(Clone, Debug, Default)]
pub struct FuncGraph {
    /// Its blocks, in code order.
    pub blocks: Vec<Block>,
    /// The block of every instruction.
    pub block_of: Vec<usize>,
    /// Whether each block is on a cycle.
    pub cyclic: Vec<bool>,
    /// Each loop's head instruction and whether it is a callback over a collection.
    pub loops: Vec<(usize, bool)>,
    /// Per block: whether it is inside a callback-over-a-collection loop.
    pub in_callback: Vec<bool>,
    /// The blocks in an order where every edge goes forward (when there is no cycle).
    pub topo: Option<Vec<usize>>,
    /// Whether a `try` handler lies before its `TryEnter` (not the compiler's layout: the
    /// paths through it are not known, so no bound is claimed for it).
    pub irregular: bool,
}

/// The whole program's graphs.
#[derive(Clone, Debug)]
pub struct Graph {
    /// Per function.
    pub funcs: Vec<FuncGraph>,
    /// Per function, its calls: (pc, callee).
    pub calls: Vec<Vec<(usize, usize)>>,
    /// Per function: whether it is on a call-graph cycle.
    pub recursive: Vec<bool>,
    /// Per function: whether a run of it may reach a recursive function or an irregular one.
    pub reaches_unbounded: Vec<bool>,
    /// Per function: whether some call to it runs inside a loop (of any caller on the way).
    pub called_in_loop: Vec<bool>,
    /// Per function: whether some call to it runs inside a callback over a collection.
    pub called_in_callback: Vec<bool>,
    /// The program's register-block cells, when within [`MAX_ANALYSIS_CELLS`] (`None`: too
    /// large for the dataflows).
    pub cells: Option<u64>,
}

impl Graph {
    /// The graphs of `program` (verified: targets inside their functions, callees exist).
    pub fn of(program: &Program) -> Graph {
        let funcs: Vec<FuncGraph> = program.functions.iter().map(|f| func(&f.code)).collect();
        let n = funcs.len();
        let calls: Vec<Vec<(usize, usize)>> = program
            .functions
            .iter()
            .map(|f| {
                f.code
                    .iter()
                    .enumerate()
                    .filter_map(|(pc, op)| match op {
                        Op::Call { func, .. } if (func.0 as usize) < n => {
                            Some((pc, func.0 as usize))
                        }
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        let succ: Vec<Vec<usize>> = calls
            .iter()
            .map(|c| c.iter().map(|&(_, f)| f).collect())
            .collect();
        let recursive = cyclic_nodes(&succ);
        // a function reaches trouble when it is recursive, irregular, or calls one that does
        let mut reaches: Vec<bool> = (0..n).map(|f| recursive[f] || funcs[f].irregular).collect();
        let mut changed = true;
        while changed {
            changed = false;
            for f in 0..n {
                if !reaches[f] && succ[f].iter().any(|&g| reaches[g]) {
                    reaches[f] = true;
                    changed = true;
                }
            }
        }
        // contexts flow from a caller's call site (or the caller's own context) to the callee
        let mut in_loop = vec![false; n];
        let mut in_cb = vec![false; n];
        let mut changed = true;
        while changed {
            changed = false;
            for f in 0..n {
                for &(pc, g) in &calls[f] {
                    let b = funcs[f].block_of[pc];
                    let l = in_loop[f] || funcs[f].cyclic[b] || recursive[f];
                    let c = in_cb[f] || funcs[f].in_callback[b];
                    if l && !in_loop[g] {
                        in_loop[g] = true;
                        changed = true;
                    }
                    if c && !in_cb[g] {
                        in_cb[g] = true;
                        changed = true;
                    }
                }
            }
        }
        let cells = funcs
            .iter()
            .zip(&program.functions)
            .fold(0u64, |n, (g, f)| {
                n.saturating_add((g.blocks.len() as u64).saturating_mul(u64::from(f.nregs)))
            });
        Graph {
            cells: (cells <= MAX_ANALYSIS_CELLS).then_some(cells),
            funcs,
            calls,
            recursive,
            reaches_unbounded: reaches,
            called_in_loop: in_loop,
            called_in_callback: in_cb,
        }
    }

    /// Whether instruction `pc` of function `f` can run more than once in a run (a loop, a
    /// recursive function, or a call from either).
    pub fn repeats(&self, f: usize, pc: usize) -> bool {
        let g = &self.funcs[f];
        g.cyclic[g.block_of[pc]] || self.recursive[f] || self.called_in_loop[f]
    }

    /// Whether instruction `pc` of function `f` runs inside a callback over a collection.
    pub fn in_callback(&self, f: usize, pc: usize) -> bool {
        let g = &self.funcs[f];
        g.in_callback[g.block_of[pc]] || self.called_in_callback[f]
    }

    /// The names of the recursive functions.
    pub fn recursive_names(&self, program: &Program) -> Vec<String> {
        self.recursive
            .iter()
            .enumerate()
            .filter(|(_, r)| **r)
            .map(|(f, _)| program.functions[f].name.to_string())
            .collect()
    }

    /// Functions in an order where every callee comes before its callers (when the call graph
    /// has no cycle; recursive functions come in any order).
    pub fn callees_first(&self) -> Vec<usize> {
        let n = self.funcs.len();
        let mut order = Vec::with_capacity(n);
        let mut state = vec![0u8; n];
        for root in 0..n {
            if state[root] != 0 {
                continue;
            }
            // iterative post-order
            let mut stack = vec![(root, 0usize)];
            state[root] = 1;
            while let Some(&mut (f, ref mut i)) = stack.last_mut() {
                if let Some(&(_, g)) = self.calls[f].get(*i) {
                    *i += 1;
                    if state[g] == 0 {
                        state[g] = 1;
                        stack.push((g, 0));
                    }
                } else {
                    state[f] = 2;
                    order.push(f);
                    stack.pop();
                }
            }
        }
        order
    }
}

impl FuncGraph {
    /// The most any path from the function's start can weigh, a block weighing `weight(b)`; on a
    /// graph with cycles, each cycle's blocks' weights once (sound for weights that are zero on
    /// cycles), on the worst path between them.
    pub fn longest(&self, weight: impl Fn(usize) -> u64) -> u64 {
        let Some(topo) = &self.topo else {
            return self.longest_condensed(weight);
        };
        if self.blocks.is_empty() {
            return 0;
        }
        let mut best: Vec<Option<u64>> = vec![None; self.blocks.len()];
        best[0] = Some(weight(0));
        let mut most = 0u64;
        for &b in topo {
            let Some(here) = best[b] else {
                continue;
            };
            most = most.max(here);
            for &s in &self.blocks[b].succ {
                let via = here.saturating_add(weight(s));
                if best[s].is_none_or(|old| old < via) {
                    best[s] = Some(via);
                }
            }
        }
        most
    }
}

impl FuncGraph {
    /// [`FuncGraph::longest`] on a graph with cycles: each strongly connected component weighs
    /// its blocks' weights together, and the worst path runs through the components (an edge
    /// between two goes from a later-numbered one to an earlier, as Tarjan's numbers them).
    fn longest_condensed(&self, weight: impl Fn(usize) -> u64) -> u64 {
        let n = self.blocks.len();
        if n == 0 {
            return 0;
        }
        let succ: Vec<Vec<usize>> = self.blocks.iter().map(|b| b.succ.clone()).collect();
        let comp = components(&succ);
        let nc = comp.iter().copied().max().map_or(0, |m| m + 1);
        let mut cw = vec![0u64; nc];
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); nc];
        for b in 0..n {
            cw[comp[b]] = cw[comp[b]].saturating_add(weight(b));
            members[comp[b]].push(b);
        }
        let mut best: Vec<Option<u64>> = vec![None; nc];
        best[comp[0]] = Some(cw[comp[0]]);
        let mut most = 0u64;
        for c in (0..nc).rev() {
            let Some(here) = best[c] else {
                continue;
            };
            most = most.max(here);
            for &b in &members[c] {
                for &s in &succ[b] {
                    let d = comp[s];
                    if d == c {
                        continue;
                    }
                    if d > c {
                        // not Tarjan's order: every block's weight once is still sound
                        return (0..n).map(&weight).fold(0u64, u64::saturating_add);
                    }
                    let via = here.saturating_add(cw[d]);
                    if best[d].is_none_or(|old| old < via) {
                        best[d] = Some(via);
                    }
                }
            }
        }
        most
    }
}

/// The blocks of one function's code.
fn func(code: &[Op]) -> FuncGraph {
    let lead = leaders(code);
    let mut blocks: Vec<Block> = Vec::new();
    let mut block_of = vec![0usize; code.len()];
    for (pc, &l) in lead.iter().enumerate() {
        if l || blocks.is_empty() {
            blocks.push(Block {
                start: pc,
                end: pc + 1,
                succ: Vec::new(),
            });
        }
        let b = blocks.len() - 1;
        blocks[b].end = pc + 1;
        block_of[pc] = b;
    }
    let nb = blocks.len();
    let mut irregular = false;
    for b in 0..nb {
        let last = blocks[b].end - 1;
        let op = code[last];
        let mut succ = Vec::new();
        let flow = op.flow();
        if !flow.leaves() && flow != Flow::Jump && blocks[b].end < code.len() {
            succ.push(block_of[blocks[b].end]);
        }
        if let Some(t) = op.jump_target() {
            if let Some(&tb) = block_of.get(t as usize) {
                succ.push(tb);
            }
        }
        blocks[b].succ = succ;
    }
    // a `try` region (the compiler lays it between its `TryEnter` and its handler) may throw to
    // its handler from any of its blocks
    for (pc, op) in code.iter().enumerate() {
        if let Op::TryEnter { handler } = op {
            let h = handler.0 as usize;
            if h <= pc || h >= code.len() {
                irregular = true;
                continue;
            }
            let hb = block_of[h];
            for block in &mut blocks[block_of[pc]..hb] {
                if !block.succ.contains(&hb) {
                    block.succ.push(hb);
                }
            }
        }
    }
    let succ: Vec<Vec<usize>> = blocks.iter().map(|b| b.succ.clone()).collect();
    let cyclic = cyclic_nodes(&succ);
    // each loop named by its first block; a callback over a collection is a loop whose
    // preceding block asks the collection's length for a callback method (`ArrayLen`)
    let mut loops = Vec::new();
    let mut in_callback = vec![false; nb];
    let comp = components(&succ);
    let mut seen = std::collections::HashSet::new();
    for b in 0..nb {
        if cyclic[b] && seen.insert(comp[b]) {
            let callback = b > 0
                && code[blocks[b - 1].start..blocks[b - 1].end]
                    .iter()
                    .any(|op| matches!(op, Op::ArrayLen { .. }));
            loops.push((blocks[b].start, callback));
            if callback {
                for (c, slot) in in_callback.iter_mut().enumerate() {
                    if comp[c] == comp[b] {
                        *slot = true;
                    }
                }
            }
        }
    }
    let topo = if cyclic.iter().any(|&c| c) {
        None
    } else {
        Some(topo_order(&succ))
    };
    FuncGraph {
        blocks,
        block_of,
        cyclic,
        loops,
        in_callback,
        topo,
        irregular,
    }
}

/// An order of the nodes of an acyclic graph where every edge goes forward.
fn topo_order(succ: &[Vec<usize>]) -> Vec<usize> {
    let n = succ.len();
    let mut indeg = vec![0usize; n];
    for s in succ {
        for &t in s {
            indeg[t] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..n).rev().filter(|&b| indeg[b] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(b) = ready.pop() {
        order.push(b);
        for &t in &succ[b] {
            indeg[t] -= 1;
            if indeg[t] == 0 {
                ready.push(t);
            }
        }
    }
    order
}

/// The strongly connected component of every node (Tarjan's, without recursion).
pub fn components(succ: &[Vec<usize>]) -> Vec<usize> {
    let n = succ.len();
    const NONE: usize = usize::MAX;
    let mut index = vec![NONE; n];
    let mut low = vec![0usize; n];
    let mut on = vec![false; n];
    let mut comp = vec![NONE; n];
    let mut stack = Vec::new();
    let mut next = 0usize;
    let mut ncomp = 0usize;
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on[root] = true;
        while let Some(&(v, i)) = work.last() {
            if let Some(&w) = succ[v].get(i) {
                if let Some(t) = work.last_mut() {
                    t.1 += 1;
                }
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on[w] = true;
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    while let Some(w) = stack.pop() {
                        on[w] = false;
                        comp[w] = ncomp;
                        if w == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
    }
    comp
}

/// Whether each node lies on a cycle (a component of two or more, or an edge to itself).
pub fn cyclic_nodes(succ: &[Vec<usize>]) -> Vec<bool> {
    let comp = components(succ);
    let mut size = vec![0usize; succ.len()];
    for &c in &comp {
        size[c] += 1;
    }
    (0..succ.len())
        .map(|v| size[comp[v]] > 1 || succ[v].contains(&v))
        .collect()
}
