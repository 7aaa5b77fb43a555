//! Finishing a function: the frame laid out, specials and jumps remapped, constant operands
//! folded, fuel charges inserted per basic block.

use super::*;

/// The laid-out code of a function being finished: every basic block opened by a `Charge` of
/// the static cost of its instructions, each instruction with its source position.
pub(super) struct Layout<'c, 'i, 's> {
    pub(super) code: Vec<Op>,
    pub(super) pos: Vec<SourcePos>,
    pub(super) cursor: &'c mut crate::pos::Cursor<'i, 's>,
    /// The index of the open block's `Charge` (`usize::MAX` before the first), and the cost of
    /// its instructions so far.
    pub(super) charge: usize,
    pub(super) amount: u32,
}

impl Layout<'_, '_, '_> {
    /// Appends `op` (from source offset `off`), after a new `Charge` when it leads a block
    /// (the first instruction of a function always does).
    #[inline(always)]
    pub(super) fn push(&mut self, op: Op, off: u32, lead: bool) {
        let p = self.cursor.pos(off);
        if lead {
            self.close();
            self.charge = self.code.len();
            self.code.push(Op::Charge { amount: Imm(0) });
            self.pos.push(p);
        }
        self.amount += op.cost();
        self.code.push(op);
        self.pos.push(p);
    }

    /// Writes the open block's cost into its `Charge`.
    pub(super) fn close(&mut self) {
        if let Some(slot) = self.code.get_mut(self.charge) {
            *slot = Op::Charge {
                amount: Imm(self.amount),
            };
        }
        self.charge = usize::MAX;
        self.amount = 0;
    }

    pub(super) fn finish(mut self) -> (Vec<Op>, Vec<SourcePos>) {
        self.close();
        (self.code, self.pos)
    }
}

impl<'o> Lowerer<'o> {
    // ---------------------------------------------------------------- finishing

    /// Finishes the program of this one function (its buffers are kept in `kept` for the next
    /// compile, which may also have left a program to build in).
    /// (Inlined: the lowerer, some 600 bytes, is then not copied to be finished.)
    #[inline(always)]
    pub(super) fn finish(mut self, src: &str, name: &str, kept: &mut Kept) -> R<Program> {
        let mut spare = kept.take_spare();
        let reuse = Reuse::from(&mut spare);
        let idx = LineIndex::new(src);
        let (function, pos) = self.finish_function(&mut idx.cursor(), name, reuse)?;
        let Lowerer {
            bufs,
            constants,
            atoms,
            ..
        } = self;
        bufs.keep(kept);
        // the outer vectors of the recycled program, if any (what is left in them is dropped)
        let (mut functions, mut spans) = match spare {
            Some(p) => (p.functions, p.spans),
            None => (Vec::with_capacity(1), Vec::with_capacity(1)),
        };
        functions.clear();
        functions.push(function);
        spans.clear();
        spans.push(pos);
        Ok(Program {
            functions,
            constants,
            atoms,
            entry: 0,
            debug: Some(DebugInfo { spans }),
            signature: None,
        })
    }

    /// Moves out what the next function of the program continues from: the constant pool, the
    /// atoms table and the (emptied) buffers.
    pub(super) fn into_pool(self) -> Pool {
        Pool {
            constants: self.constants,
            num_map: self.num_map,
            str_map: self.str_map,
            atoms: self.atoms,
            bufs: self.bufs,
        }
    }

    /// Lays the frame out, inserts the fuel charges, and returns the function and its source
    /// positions (resolved with `cursor`, on the line index of the whole source: left where
    /// this function's positions end, the next function's begin near it), built in the
    /// allocations of `reuse` where it has them.
    pub(super) fn finish_function(
        &mut self,
        cursor: &mut crate::pos::Cursor<'_, '_>,
        name: &str,
        reuse: Reuse,
    ) -> R<(Function, Vec<SourcePos>)> {
        let (mut params, code) = match reuse.function {
            Some(f) => (f.params, f.code),
            None => (Vec::with_capacity(self.ext_regs.0.len()), Vec::new()),
        };
        let pos = reuse.pos.unwrap_or_default();
        let nspecial_all = self.bufs.specials.len();
        // virtual ids at or above `boundary` are specials
        let boundary = 65536 - nspecial_all as u32;
        // An operator whose right operand is a constant names the constant itself (`n - 1`
        // becomes `SubK`); a constant no instruction reads any more is not loaded at entry.
        let const_of = |v: u16| -> Option<u16> {
            match self.bufs.specials.get((u16::MAX - v) as usize) {
                Some((Special::Const(c), _)) if v as u32 >= boundary => Some(c.0),
                _ => None,
            }
        };
        let constants = &self.constants;
        let int_of = |k: Const| match constants.get(k.0 as usize) {
            Some(&Constant::Number(n)) => Int::of(n),
            _ => None,
        };
        let (mut used_short, mut used_long) = ([false; SHORT_TABLE], Vec::new());
        let used = zeroed(&mut used_short, &mut used_long, nspecial_all);
        // Block leaders of the body, by index in it: every jump target, every instruction after
        // a block end (the laid-out code is [prologue][body]; the prologue has no jumps, and
        // its first instruction, or the body's when there is none, leads too). `marks[j]`: its
        // bit `LEAD` set when body instruction j leads a block, and then (below) the new index
        // of the `Charge` before it, times two (`>> 1` takes it back).
        let mut marks = std::mem::take(&mut self.bufs.marks);
        marks.clear();
        marks.resize(self.bufs.code.len(), 0);
        // one pass: constant operands, the specials read, the leaders
        for (i, (op, _)) in self.bufs.code.iter_mut().enumerate() {
            if let Some(k) = with_const_operand(op, const_of) {
                // a small integer is carried in the instruction where it can be (`i + 1`
                // is `AddI`: no constant-pool read when it runs)
                *op = k.with_int_operand(int_of).unwrap_or(k);
            }
            // (the jump target is the one `Target` operand of the instructions that have one,
            // which are those `Op::jump_target` names: found in this visit, not by another
            // match over the instruction)
            let mut seen = Seen {
                boundary,
                used: &mut *used,
                target: None,
                end: false,
            };
            op.visit(&mut seen);
            let (target, end) = (seen.target, seen.end);
            // (`ends_block`, with the jump target found once)
            if let Some(t) = target {
                if let Some(slot) = marks.get_mut(t as usize) {
                    *slot |= LEAD;
                }
            }
            // (`Jump` has a target: a terminator is that or a `Return` or `Throw`)
            if target.is_some() || end {
                if let Some(slot) = marks.get_mut(i + 1) {
                    *slot |= LEAD;
                }
            }
        }
        // final register of every special (an unused one has none: nothing names it)
        let (mut final_short, mut final_long) = ([0u16; SHORT_TABLE], Vec::new());
        let final_of = zeroed(&mut final_short, &mut final_long, nspecial_all);
        // the parameter names, written over the recycled ones where there are
        let mut next = 0u16;
        let externals = self.externals();
        for (k, (s, _)) in self.bufs.specials.iter().enumerate() {
            if let Special::Ext(i) = s {
                final_of[k] = next;
                let text = externals.get(*i).map_or("", String::as_str);
                put_name(&mut params, next as usize, text);
                next += 1;
            }
        }
        params.truncate(next as usize);
        if params.len() > u8::MAX as usize {
            return fail_at(
                0,
                "too many parameters or context keys used (more than 255); pass one object instead and read its fields: data.a, data.b",
            );
        }
        // the prologue loads every used special that is not a parameter, in order (and the
        // constants' slots of `const_regs` are emptied for the next function)
        for (k, (s, _)) in self.bufs.specials.iter().enumerate() {
            if let Special::Const(c) = *s {
                if let Some(slot) = self.bufs.const_regs.get_mut(c.0 as usize) {
                    *slot = None;
                }
            }
            if used[k] && !matches!(s, Special::Ext(_)) {
                final_of[k] = next;
                next += 1;
            }
        }
        // the specials given a register: the parameters, then the prologue's
        let nspecial = next as usize;
        let shift = nspecial - params.len();
        let total = shift + self.bufs.code.len();
        let used: &[bool] = used;
        let prologue = self
            .bufs
            .specials
            .iter()
            .enumerate()
            .filter_map(|(k, &(s, off))| {
                let dst = Dst(final_of[k]);
                let op = match s {
                    Special::Ext(_) => return None,
                    _ if !used[k] => return None,
                    Special::Const(c) => Op::LoadConst {
                        dst,
                        k: c.constant(),
                    },
                    Special::Undef => Op::LoadUndef { dst },
                    Special::Null => Op::LoadNull { dst },
                    Special::True => Op::LoadTrue { dst },
                    Special::False => Op::LoadFalse { dst },
                };
                Some((op, off))
            });
        let nregs = nspecial + self.max_top as usize;
        if nregs > u16::MAX as usize {
            return fail_at(
                0,
                "too many registers (more than 65535); split the code into helper functions: function part(x) { … }",
            );
        }
        if total > ajs_bytecode::program::MAX_CODE_LEN / 2 {
            return fail_at(0, "program too long; split the code into helper functions (function part(x) { … }), or pass long data in as an argument");
        }
        let final_of: &[u16] = final_of;
        let map = |v: u16| -> u16 {
            if v as u32 >= boundary {
                final_of[(u16::MAX - v) as usize]
            } else {
                v + nspecial as u16
            }
        };
        // The code is laid out as [prologue][body] and every basic block opened by a `Charge`
        // (what `insert_charges` does), in one pass, with the new indices of the body's
        // instructions (the prologue's first opens a block: it moves by one).
        let mut n = if shift > 0 { shift as u32 + 1 } else { 0 };
        if let (0, Some(first)) = (shift, marks.first_mut()) {
            *first |= LEAD;
        }
        // (only the leaders are numbered, the jump targets among them, not every instruction)
        for (j, slot) in marks.iter_mut().enumerate() {
            if *slot & LEAD != 0 {
                *slot |= (n + j as u32) << 1;
                n += 1;
            }
        }
        let n = n + marks.len() as u32;
        let at: &[u32] = &marks;
        let (code, pos) = (exactly(code, n as usize), exactly(pos, n as usize));
        let mut out = Layout {
            code,
            pos,
            cursor,
            charge: usize::MAX,
            amount: 0,
        };
        for (k, (op, off)) in prologue.enumerate() {
            out.push(op, off, k == 0);
        }
        let new_target = |t: u32| match at.get(t as usize) {
            Some(&new) => new >> 1,
            None => t.wrapping_add(shift as u32),
        };
        // (rewritten in place, in the body buffer emptied below: an instruction copied out first
        // is taken apart into its bytes and put back together; only a jump is asked for its
        // target)
        // (the registers and the jump target in one match over the instruction, each jump not
        // asked for its target again by a mark of its own)
        for ((op, off), &mark) in self.bufs.code.iter_mut().zip(at) {
            op.map_registers_and_target(&map, &new_target);
            out.push(*op, *off, mark & LEAD != 0);
        }
        let (code, pos) = out.finish();
        self.bufs.marks = marks;
        let function = Function {
            name: CompactString::from(name),
            params,
            nregs: nregs as u16,
            code,
        };
        // the calling convention the VM relies on: a callee's registers start at its arguments,
        // over the caller's registers from there up, which are temporaries (a stack) dead
        // across the call (checked in debug builds and with the `check-calls` feature, which
        // the test command turns on)
        #[cfg(any(debug_assertions, feature = "check-calls"))]
        if let Some((pc, r)) = function.call_clobber() {
            panic!(
                "compiler bug: in {name}, r{r} is read after the call at {pc}, which overwrote it"
            );
        }
        self.bufs.code.clear();
        self.bufs.specials.clear();
        self.bufs.names.0.clear();
        // (the scopes still open are emptied: the closed ones are empty already, emptied by
        // `pop_scope`, and are not visited again)
        for sc in self.bufs.scopes.iter_mut().take(self.bufs.nscopes) {
            sc.vars.clear();
            sc.pending.clear();
            sc.is_top = false;
        }
        self.bufs.nscopes = 0;
        Ok((function, pos))
    }
}

/// [`Lowerer::finish_function`]'s mark of a body instruction that leads a basic block.
pub(super) const LEAD: u32 = 1;
/// What [`Lowerer::finish_function`]'s first pass learns of an instruction: the specials it
/// names (at or above `boundary`), marked in `used`, its jump target, and whether it ends its
/// block without one. (Told by
/// [`Op::visit`], whose arms call these directly, not handed each operand as an [`Operand`] to
/// match again: the pass runs per instruction.)
pub(super) struct Seen<'u> {
    pub(super) boundary: u32,
    pub(super) used: &'u mut [bool],
    pub(super) target: Option<u32>,
    /// It is a `Return` or `Throw`.
    pub(super) end: bool,
}

impl Visitor for Seen<'_> {
    #[inline(always)]
    fn register(&mut self, v: u16) {
        if v as u32 >= self.boundary {
            self.used[(u16::MAX - v) as usize] = true;
        }
    }

    #[inline(always)]
    fn base(&mut self, v: u16) {
        // a run never includes a special; if one did, keep them all
        if v as u32 >= self.boundary {
            self.used.iter_mut().for_each(|u| *u = true);
        }
    }

    #[inline(always)]
    fn target(&mut self, t: u32) {
        self.target = Some(t);
    }

    #[inline(always)]
    fn end(&mut self) {
        self.end = true;
    }
}

/// Entries of a per-special table of [`Lowerer::finish_function`] kept on the stack.
pub(super) const SHORT_TABLE: usize = 32;

/// `v` emptied, with room for exactly `n` elements. (A vector without any is allocated at that
/// size, not grown to it: called twice per function finished.)
#[inline]
pub(super) fn exactly<T>(mut v: Vec<T>, n: usize) -> Vec<T> {
    if v.capacity() == 0 {
        return Vec::with_capacity(n);
    }
    v.clear();
    v.reserve_exact(n);
    v
}

/// `n` default values: the first `n` of `short` when they fit, else `long`, filled.
#[inline]
pub(super) fn zeroed<'t, T: Copy + Default>(
    short: &'t mut [T; SHORT_TABLE],
    long: &'t mut Vec<T>,
    n: usize,
) -> &'t mut [T] {
    if n <= SHORT_TABLE {
        &mut short[..n]
    } else {
        long.resize(n, T::default());
        long
    }
}

/// Sets string `i` of `v` (at most one past its end) to `text`, reusing the string there.
#[inline]
pub(super) fn put_str(v: &mut Vec<String>, i: usize, text: &str) {
    match v.get_mut(i) {
        Some(s) => {
            s.clear();
            s.push_str(text);
        }
        None => v.push(text.to_string()),
    }
}

/// Sets name `i` of `v` (at most one past its end) to `text`.
#[inline]
pub(super) fn put_name(v: &mut Vec<CompactString>, i: usize, text: &str) {
    match v.get_mut(i) {
        Some(s) => *s = CompactString::from(text),
        None => v.push(CompactString::from(text)),
    }
}
