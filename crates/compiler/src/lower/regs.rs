//! Registers: temporaries, and the specials (externals, constants, special values) numbered
//! down from `u16::MAX` until the function is laid out.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Special {
    /// Index into `opts.externals`.
    Ext(usize),
    Const(ConstIdx),
    Undef,
    Null,
    True,
    False,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum SpecialKey {
    Const(ConstIdx),
    Undef,
    Null,
    True,
    False,
}

/// Registers by a small dense index (of an external, or of a special value): a vector rather
/// than a hash map.
#[derive(Default)]
pub(super) struct Regs(pub(super) SmallVec<[Option<Reg>; 8]>);

impl Regs {
    pub(super) fn get(&self, i: usize) -> Option<Reg> {
        self.0.get(i).copied().flatten()
    }

    pub(super) fn insert(&mut self, i: usize, reg: Reg) {
        // (one more, the usual case, is pushed: cheaper than resizing)
        if self.0.len() == i {
            self.0.push(Some(reg));
            return;
        }
        if self.0.len() < i {
            self.0.resize(i + 1, None);
        }
        if let Some(slot) = self.0.get_mut(i) {
            *slot = Some(reg);
        }
    }
}

impl SpecialKey {
    /// The index of this key in [`Lowerer::special_regs`].
    pub(super) fn index(self) -> usize {
        match self {
            SpecialKey::Undef => 0,
            SpecialKey::Null => 1,
            SpecialKey::True => 2,
            SpecialKey::False => 3,
            SpecialKey::Const(k) => 4 + k.0 as usize,
        }
    }
}

impl<'o> Lowerer<'o> {
    /// Runs `f`, then frees every temporary it allocated, on every path (`?` included). A
    /// register that must outlive `f` is allocated before it.
    #[inline(always)]
    pub(super) fn with_temps<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        let mark = self.top;
        let r = f(self);
        self.top = mark;
        r
    }

    /// The register the next [`Self::alloc`] returns: the first of a run allocated from here,
    /// and the first temporary of what is lowered from here.
    #[inline(always)]
    pub(super) fn next_temp(&self) -> Reg {
        Reg(self.top)
    }

    /// A new temporary register (the next above `top`). Always inlined, its failure kept out of
    /// line: a call per temporary costs more than the allocation.
    #[inline(always)]
    pub(super) fn alloc(&mut self, span: Span) -> R<Reg> {
        if self.top as usize + 1 + self.bufs.specials.len() > u16::MAX as usize {
            return too_many_registers(span);
        }
        let r = self.top;
        self.top += 1;
        self.max_top = self.max_top.max(self.top);
        Ok(Reg(r))
    }

    pub(super) fn new_special(&mut self, s: Special, offset: u32) -> R<Reg> {
        if self.max_top as usize + self.bufs.specials.len() + 1 > u16::MAX as usize {
            return fail_at(
                offset,
                "too many registers (more than 65535 constants and values); split the code into helper functions: function part(x) { … }",
            );
        }
        let k = self.bufs.specials.len();
        self.bufs.specials.push((s, offset));
        Ok(Reg(u16::MAX - k as u16))
    }

    /// (Inline, the lookup of a register given already: the usual case, not worth a call.)
    #[inline(always)]
    pub(super) fn special(&mut self, key: SpecialKey, span: Span) -> R<Reg> {
        let given = match key {
            SpecialKey::Const(k) => self.bufs.const_regs.get(k.0 as usize).copied().flatten(),
            _ => self.special_regs.get(key.index()),
        };
        match given {
            Some(r) => Ok(r),
            None => self.new_special_reg(key, span),
        }
    }

    /// [`Self::special`] of a key with no register yet.
    #[inline(never)]
    pub(super) fn new_special_reg(&mut self, key: SpecialKey, span: Span) -> R<Reg> {
        if let SpecialKey::Const(k) = key {
            let r = self.new_special(Special::Const(k), span.start)?;
            let k = k.0 as usize;
            if self.bufs.const_regs.len() <= k {
                // (to the pool's capacity: resized to its length, the table grew with nearly
                // every new constant)
                self.bufs
                    .const_regs
                    .resize(self.constants.capacity().max(k + 1), None);
            }
            if let Some(slot) = self.bufs.const_regs.get_mut(k) {
                *slot = Some(r);
            }
            return Ok(r);
        }
        let s = match key {
            SpecialKey::Const(k) => Special::Const(k),
            SpecialKey::Undef => Special::Undef,
            SpecialKey::Null => Special::Null,
            SpecialKey::True => Special::True,
            SpecialKey::False => Special::False,
        };
        let r = self.new_special(s, span.start)?;
        self.special_regs.insert(key.index(), r);
        Ok(r)
    }

    /// (An inline hint, not forced: a call of its own costs an agent more, forced inlining
    /// everywhere an Eval snippet.)
    #[inline]
    pub(super) fn num_reg(&mut self, v: f64, span: Span) -> R<Reg> {
        let k = self.num_const(v, span)?;
        self.special(SpecialKey::Const(k), span)
    }
}

/// [`Lowerer::alloc`]'s failure: more values live at once than there are registers.
#[cold]
#[inline(never)]
pub(super) fn too_many_registers(span: Span) -> R<Reg> {
    fail(
        span,
        "too many registers (more than 65535 values live at once); split the expression into statements (let t = …) or helper functions",
    )
}
