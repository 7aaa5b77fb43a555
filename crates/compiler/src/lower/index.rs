//! What an index is: a register, a constant or an atom of the program being lowered, each a
//! type of its own; it becomes an instruction's operand only when the instruction is emitted.

use super::*;

/// A register of the function being lowered: a temporary or a local (numbered up from 0), or a
/// special (numbered down from `u16::MAX` until the frame is laid out).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Reg(pub(super) u16);

impl Reg {
    /// The register as an operand the instruction reads.
    #[inline(always)]
    pub(super) fn src(self) -> Src {
        Src(self.0)
    }

    /// The register as an operand the instruction writes.
    #[inline(always)]
    pub(super) fn dst(self) -> Dst {
        Dst(self.0)
    }

    /// The register as the first of a run the instruction reads.
    #[inline(always)]
    pub(super) fn base(self) -> Base {
        Base(self.0)
    }

    /// The register `n` after this one (in a run that starts here).
    #[inline(always)]
    pub(super) fn plus(self, n: usize) -> Reg {
        Reg(self.0 + n as u16)
    }
}

/// An index into the program's constant pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct ConstIdx(pub(super) u16);

impl ConstIdx {
    /// The constant as an instruction's operand.
    #[inline(always)]
    pub(super) fn constant(self) -> Const {
        Const(self.0)
    }

    /// The constant, a string, as a property key operand.
    #[inline(always)]
    pub(super) fn key(self) -> Key {
        Key(self.0)
    }
}

/// An index into the program's atom table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct AtomIdx(pub(super) u16);

impl AtomIdx {
    /// The atom as an instruction's operand.
    #[inline(always)]
    pub(super) fn atom(self) -> Atom {
        Atom(self.0)
    }
}
