//! The compiler's constant-operand map: which instructions have a form taking their right
//! operand as a constant.

use super::*;

/// `op` with its right operand named as the constant it is (`Sub r, a, <const k>` becomes
/// `SubK r, a, k`), when `op` is an arithmetic or comparison operator (or a fused
/// compare-and-branch on two registers) and `const_of` says its right operand register holds a
/// constant.
///
/// One match over the instruction (the fused branches named here rather than taken apart with
/// [`Op::fused`], a call per instruction, and `const_of` a generic closure rather than a `dyn`
/// one): [`Lowerer::finish_function`] asks this of every instruction, and the match alone saves
/// ~12 k instructions per compile of the 8 KB agent. The instruction is read where it is (a copy
/// passed by value is taken apart into all its fields first, ~10 k instructions more).
#[inline]
pub(super) fn with_const_operand(op: &Op, const_of: impl Fn(u16) -> Option<u16>) -> Option<Op> {
    let k = |b: Src| const_of(b.0).map(Const);
    // (each register form and its constant form: the arithmetic and compare forms with a
    // destination, then the fused branches, as `Fused::op` makes them with the right operand a
    // constant)
    macro_rules! const_forms {
        ($($r:ident => $k:ident),*; $($jr:ident => $jk:ident),*) => {
            Some(match *op {
                $(Op::$r { dst, a, b } => Op::$k { dst, a, k: k(b)? },)*
                $(Op::$jr { a, b, target } => Op::$jk { a, k: k(b)?, target },)*
                _ => return None,
            })
        };
    }
    const_forms!(
        Add => AddK,
        Sub => SubK,
        Mul => MulK,
        Div => DivK,
        Mod => ModK,
        Lt => LtK,
        Le => LeK,
        Gt => GtK,
        Ge => GeK,
        StrictEq => StrictEqK,
        StrictNe => StrictNeK;
        JumpIfLt => JumpIfLtK,
        JumpUnlessLt => JumpUnlessLtK,
        JumpIfLe => JumpIfLeK,
        JumpUnlessLe => JumpUnlessLeK,
        JumpIfGt => JumpIfGtK,
        JumpUnlessGt => JumpUnlessGtK,
        JumpIfGe => JumpIfGeK,
        JumpUnlessGe => JumpUnlessGeK,
        JumpIfStrictEq => JumpIfStrictEqK,
        JumpIfStrictNe => JumpIfStrictNeK
    )
}
