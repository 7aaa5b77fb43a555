//! The working buffers a lowering reuses, between the functions of a program and between
//! compiles.

use super::*;

/// What the functions of one program share: constants and the atoms table.
pub(crate) struct Pool {
    pub(super) constants: Vec<Constant>,
    pub(super) num_map: NumMap,
    pub(super) str_map: StrMap,
    pub(super) atoms: Vec<String>,
    /// The emptied buffers of the previous function, reused by the next.
    pub(super) bufs: Buffers,
}

/// The working buffers of a lowering (instructions and their source offsets, specials, names, scopes), emptied
/// when a function is finished: the next function of the program reuses them, and a
/// [`crate::Compiler`] keeps one set between compiles (see [`Kept`]), so that a small compile
/// allocates none of them.
#[derive(Default)]
pub(crate) struct Buffers {
    /// The instructions of the function being lowered, each with its source offset (one vector:
    /// an instruction emitted is one push, not two).
    pub(super) code: Vec<(Op, u32)>,
    /// The specials of the function (externals and the constant values it loads).
    pub(super) specials: Vec<(Special, u32)>,
    /// The text of every variable name of `scopes`.
    pub(super) names: Names,
    /// The scopes: the first `nscopes` open (innermost last), the others closed and emptied,
    /// their vectors reused by the next scopes opened. (Opened and closed in place, never moved
    /// from the spare ones to the open ones and back.)
    pub(super) scopes: Vec<Scope>,
    pub(super) nscopes: usize,
    /// Scratch buffer for the UTF-16 units of a string constant being looked up.
    pub(super) units: Vec<u16>,
    /// [`Lowerer::finish_function`]'s block-leader marks.
    pub(super) marks: Vec<u32>,
    /// The register of each constant loaded so far in this function, by constant index (kept
    /// between the functions of a program: [`Lowerer::finish_function`] empties the slots it
    /// set, so a later function does not resize a table by the whole pool).
    pub(super) const_regs: Vec<Option<Reg>>,
}

/// What a compile may reuse of the compiles before it, owned by a [`crate::Compiler`]: the
/// working buffers of its last finished lowering, and the vectors of a program handed back.
#[derive(Default)]
pub(crate) struct Kept {
    bufs: Option<Buffers>,
    spare: Option<Spare>,
}

impl Kept {
    /// The kept buffers (empty ones when there are none).
    #[inline]
    pub(crate) fn take_bufs(&mut self) -> Buffers {
        self.bufs.take().unwrap_or_default()
    }

    /// The vectors of the program handed back last ([`Kept::recycle`]), if there is one.
    #[inline]
    pub(crate) fn take_spare(&mut self) -> Option<Spare> {
        self.spare.take()
    }
}

/// Most elements a kept buffer may hold (a huge compile's buffers are freed, not kept).
pub(super) const KEEP_BUFFER_LEN: usize = 1 << 14;
/// Most spare scopes kept between compiles.
pub(super) const KEEP_SCOPES: usize = 16;

impl Buffers {
    /// The open scopes, innermost last.
    #[inline(always)]
    pub(super) fn open_scopes(&self) -> &[Scope] {
        self.scopes.get(..self.nscopes).unwrap_or(&[])
    }

    /// Opens a new innermost scope (see [`Lowerer::open_scope`]).
    #[inline]
    pub(super) fn open_scope(&mut self) -> &mut Scope {
        let k = self.open_scope_at();
        &mut self.scopes[k]
    }

    /// Opens a new innermost scope, empty: its index.
    #[inline]
    pub(super) fn open_scope_at(&mut self) -> usize {
        let k = self.nscopes;
        if k >= self.scopes.len() {
            self.scopes.push(Scope::default());
        }
        self.nscopes = k + 1;
        k
    }

    /// Keeps these buffers, emptied by [`Lowerer::finish_function`], in `kept` for its next
    /// compile, unless they grew large (a few spare scopes at most).
    pub(crate) fn keep(mut self, kept: &mut Kept) {
        if self.nscopes == 0 {
            self.scopes.truncate(KEEP_SCOPES);
        }
        // (indexed by the constants of the program just compiled: none of them is the next's)
        self.const_regs.clear();
        let too_big = self.code.capacity() > KEEP_BUFFER_LEN
            || self.specials.capacity() > KEEP_BUFFER_LEN
            || self.names.0.capacity() > KEEP_BUFFER_LEN
            || self.units.capacity() > KEEP_BUFFER_LEN
            || self.marks.capacity() > KEEP_BUFFER_LEN
            || self.const_regs.capacity() > KEEP_BUFFER_LEN
            || self.scopes.capacity() > KEEP_BUFFER_LEN
            || self
                .scopes
                .iter()
                .any(|s| s.vars.capacity().max(s.pending.capacity()) > KEEP_BUFFER_LEN);
        // (emptied already: what is left in a buffer would be read by the next compile)
        let emptied = self.code.is_empty()
            && self.specials.is_empty()
            && self.names.0.is_empty()
            && self.nscopes == 0
            && self
                .scopes
                .iter()
                .all(|s| s.vars.is_empty() && s.pending.is_empty() && !s.is_top);
        if too_big || !emptied {
            return;
        }
        kept.bufs = Some(self);
    }
}

/// Most functions a recycled program may have to be kept (see [`Kept::recycle`]).
pub(super) const KEEP_FUNCTIONS: usize = 64;

/// The vectors of a program no longer needed: its functions and their positions.
pub(crate) struct Spare {
    pub(super) functions: Vec<Function>,
    pub(super) spans: Vec<Vec<SourcePos>>,
}

impl Kept {
    /// Keeps a program that is no longer needed for the next compile, which builds its own
    /// program in the allocations of this one (its functions' instructions, positions and lists
    /// of parameter names; the names themselves are `CompactString`s, most of them without an
    /// allocation) instead of allocating them. A big program is dropped instead. Its contents
    /// are never read: only its capacity is reused.
    pub(crate) fn recycle(&mut self, program: Program) {
        let small = program.functions.len() <= KEEP_FUNCTIONS
            && program.functions.iter().all(|f| {
                f.code.capacity() <= KEEP_BUFFER_LEN && f.params.len() <= u8::MAX as usize
            })
            && program.debug.as_ref().is_none_or(|d| {
                d.spans.len() <= KEEP_FUNCTIONS
                    && d.spans.iter().all(|s| s.capacity() <= KEEP_BUFFER_LEN)
            });
        if small {
            let spare = Spare {
                functions: program.functions,
                spans: program.debug.map(|d| d.spans).unwrap_or_default(),
            };
            self.spare = Some(spare);
        }
    }
}

/// What a function being finished may build in: a recycled function and its positions.
#[derive(Default)]
pub(crate) struct Reuse {
    pub(super) function: Option<Function>,
    pub(super) pos: Option<Vec<SourcePos>>,
}

impl Reuse {
    /// The next function's share of `spare` (nothing when there is none).
    pub(crate) fn from(spare: &mut Option<Spare>) -> Reuse {
        let Some(p) = spare else {
            return Reuse::default();
        };
        Reuse {
            function: p.functions.pop(),
            pos: p.spans.pop(),
        }
    }
}
