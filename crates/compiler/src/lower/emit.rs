//! Emission: instructions appended with their source offsets, jumps and their patching, and
//! tests lowered as (fused) branches.

use super::*;

/// Longest loop test (in instructions) copied to the bottom of its loop.
pub(super) const MAX_COPIED_TEST: usize = 24;

impl<'o> Lowerer<'o> {
    // ---------------------------------------------------------------- emission and registers

    /// Appends `op`, from the source at `span`. (Always inlined: a call per instruction emitted
    /// costs more than the two pushes; a plain `#[inline]` was not taken.)
    #[inline(always)]
    pub(super) fn emit(&mut self, op: Op, span: Span) {
        self.bufs.code.push((op, span.start));
    }

    pub(super) fn here(&self) -> u32 {
        self.bufs.code.len() as u32
    }

    /// Emits a jump with a placeholder target; returns its index for [`Self::patch`].
    pub(super) fn emit_jump(&mut self, op: Op, span: Span) -> usize {
        self.emit(op, span);
        self.bufs.code.len() - 1
    }

    pub(super) fn patch(&mut self, at: usize, target: u32) {
        if let Some((op, _)) = self.bufs.code.get_mut(at) {
            op.map_target(|_| target);
        }
    }

    pub(super) fn patch_all_here(&mut self, jumps: &[usize]) {
        for &j in jumps {
            self.patch_here(j);
        }
    }

    /// Lowers `test` for its truthiness alone, as branches: returns the jumps (for
    /// [`Self::patch`]) taken when it is `when`, and falls through when it is not. `&&`, `||`
    /// and `!` become control flow (no value is made: `a && b` is false when either is), a
    /// comparison fuses with its branch ([`Self::emit_branch`]).
    pub(super) fn cond_jump(&mut self, test: &Expression, when: bool) -> R<Jumps> {
        match test.without_parentheses() {
            Expression::LogicalExpression(l) if l.operator != LogicalOperator::Coalesce => {
                let and = l.operator == LogicalOperator::And;
                if and != when {
                    // `a && b` is false when either is; `a || b` is true when either is
                    let mut jumps = self.cond_jump(&l.left, when)?;
                    jumps.extend(self.cond_jump(&l.right, when)?);
                    Ok(jumps)
                } else {
                    // `a && b` is true when both are: a false `a` skips `b`'s branch
                    let skip = self.cond_jump(&l.left, !when)?;
                    let jumps = self.cond_jump(&l.right, when)?;
                    self.patch_all_here(&skip);
                    Ok(jumps)
                }
            }
            Expression::UnaryExpression(u) if u.operator == UnaryOperator::LogicalNot => {
                self.cond_jump(&u.argument, !when)
            }
            e => {
                let start = self.here();
                self.with_temps(|l| {
                    let mark = l.next_temp();
                    let c = l.expr(e)?;
                    let (jump, _) = l.emit_branch(c, mark, start, when, 0, e.span());
                    Ok(one_jump(jump))
                })
            }
        }
    }

    /// Emits the comparison `cmp` and a branch on its result taken when it is `when`, fused
    /// into one instruction (the caller makes sure nothing else reads the result); returns the
    /// branch's index for [`Self::patch`].
    pub(crate) fn emit_test(&mut self, cmp: Op, when: bool, span: Span) -> usize {
        let mut cond = Reg(0);
        cmp.operands(|o| {
            if let Operand::Write(r) = o {
                cond = Reg(r);
            }
        });
        let start = self.here();
        self.emit(cmp, span);
        // (`cond` as the mark: the caller says nothing else reads it)
        self.emit_branch(cond, cond, start, when, 0, span).0
    }

    /// Emits the branch to `target` on the test `c` (whose instructions start at `start`),
    /// taken when `c` is `when`; returns its index (for [`Self::patch`]) and, when it was fused,
    /// the comparison it was fused with. A test ending with a comparison into a temporary (at
    /// or above `mark`: nothing else reads it) that no jump of the test lands after becomes one
    /// fused compare-and-branch in the comparison's place (its span, which error messages use).
    pub(super) fn emit_branch(
        &mut self,
        c: Reg,
        mark: Reg,
        start: u32,
        when: bool,
        target: u32,
        span: Span,
    ) -> (usize, Option<Op>) {
        let here = self.here();
        if c >= mark && here > start {
            let last = self.bufs.code[here as usize - 1].0;
            if let Some(fused) = last.fused_branch(c.0, when, target) {
                let lands_after = self.bufs.code[start as usize..]
                    .iter()
                    .any(|(op, _)| op.jump_target() == Some(here));
                if !lands_after {
                    self.bufs.code[here as usize - 1].0 = fused;
                    return (here as usize - 1, Some(last));
                }
            }
        }
        let op = if when {
            Op::JumpIfTrue {
                cond: c.src(),
                target: Target(target),
            }
        } else {
            Op::JumpIfFalse {
                cond: c.src(),
                target: Target(target),
            }
        };
        (self.emit_jump(op, span), None)
    }

    /// Appends a copy of the straight-line test `start..end` (jumps only inside it or to its
    /// end), relocated; false (nothing appended) when it is too long or jumps elsewhere.
    pub(super) fn copy_test(&mut self, start: u32, end: u32) -> bool {
        let (s, e) = (start as usize, end as usize);
        if e - s > MAX_COPIED_TEST {
            return false;
        }
        let test = &self.bufs.code[s..e];
        let movable = test.iter().all(|(op, _)| match op.jump_target() {
            _ if matches!(
                op,
                Op::TryEnter { .. } | Op::Return { .. } | Op::Throw { .. }
            ) =>
            {
                false
            }
            Some(t) => (start..=end).contains(&t),
            None => true,
        });
        if !movable {
            return false;
        }
        let shift = self.here() - start;
        for i in s..e {
            let (op, span) = self.bufs.code[i];
            self.bufs.code.push((op, span));
            if let Some(t) = op.jump_target() {
                self.patch(self.bufs.code.len() - 1, t + shift);
            }
        }
        true
    }

    pub(super) fn patch_here(&mut self, at: usize) {
        let h = self.here();
        self.patch(at, h);
    }
}

/// Branches to patch to one target (most tests make one or two).
pub(super) type Jumps = SmallVec<[usize; 4]>;

/// The jumps of one branch, `jump`. (Pushed inline, not `SmallVec::from_elem`, a call that
/// fills from a count.)
#[inline(always)]
pub(super) fn one_jump(jump: usize) -> Jumps {
    let mut jumps = Jumps::new();
    jumps.push(jump);
    jumps
}

/// True when `test` is made of `&&`, `||` or `!` at its top ([`Lowerer::cond_jump`] lowers it as
/// branches).
pub(super) fn is_logical(test: &Expression) -> bool {
    match test.without_parentheses() {
        Expression::LogicalExpression(l) => l.operator != LogicalOperator::Coalesce,
        Expression::UnaryExpression(u) => u.operator == UnaryOperator::LogicalNot,
        _ => false,
    }
}
