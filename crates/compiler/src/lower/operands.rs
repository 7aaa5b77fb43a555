//! The compiler's constant-operand map: which instructions have a form taking their right
//! operand as a constant.

use super::*;

/// `op` with its right operand named as the constant it is (`Sub r, a, <const k>` becomes
/// `SubK r, a, k`), when `op` is an arithmetic or comparison operator (or a fused
/// compare-and-branch on two registers) and `const_of` says its right operand register holds a
/// constant. The forms are the bytecode crate's, expanded from its compare-and-branch family.
///
/// Inlined: [`Lowerer::finish_function`] asks this of every instruction.
#[inline]
pub(super) fn with_const_operand(op: &Op, const_of: impl Fn(u16) -> Option<u16>) -> Option<Op> {
    op.with_const_operand(const_of)
}
