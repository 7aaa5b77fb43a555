//! The call stack: frames, their spare slots, and the registers they keep live.

use ajs_bytecode::VerifiedProgram;

use super::{parallel, Status, Vm};
use crate::error::{ErrorKind, RunError};
use crate::value::Value;

#[derive(Clone, Copy, Debug)]
pub(super) struct Frame {
    pub(super) func: u16,
    /// Whether this frame may have a `try` or a parallel batch open (set when it opens one,
    /// always set on the entry frame; cleared only when the slow path pops it, and not written
    /// by a call, so a slot above frames an unwind dropped may keep it for its next frame,
    /// which then returns the slow way once): its `Return` then takes the slow path, which
    /// closes them, and the others return without looking at either list.
    pub(super) opened: bool,
    /// in the program's code of all functions (`VerifiedProgram::code`), not the function's
    /// own (snapshots and source positions name it in the function's code); the running
    /// frame's is kept in a local, and written (`save_pc!`) before anything can read it, so a
    /// call does not write its callee's
    pub(super) pc: u32,
    pub(super) base: u32,
    /// the caller's register (from its base) receiving the result
    pub(super) ret: u32,
}

impl Frame {
    /// A spare slot's contents (never read: slots above the depth are dead).
    pub(super) const DEAD: Frame = Frame {
        func: 0,
        opened: false,
        pc: 0,
        base: 0,
        ret: 0,
    };
}

/// The call stack: `slots[..depth]` are the live frames, innermost last; the slots above are
/// spare (dead frames, overwritten by the next calls). A call writes its frame into the slot
/// above the caller's, found together with the caller's in one bounds check: `slots` never
/// grows past the run's depth limit (it grows only in `Call`'s cold path, which tests the
/// limit, or holds a snapshot's checked frames), so a slot above the caller's exists only
/// below the limit, and the limit, a `Vec`'s capacity test and the caller's frame need no
/// test of their own. Indexed from [`Frames::top`], in `u32`.
#[derive(Clone, Debug, Default)]
pub(super) struct Frames {
    pub(super) slots: Vec<Frame>,
    pub(super) depth: usize,
}

impl Frames {
    #[inline]
    pub(super) fn live(&self) -> &[Frame] {
        self.slots.get(..self.depth).unwrap_or(&[])
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.depth
    }

    #[inline]
    pub(super) fn iter(&self) -> std::slice::Iter<'_, Frame> {
        self.live().iter()
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<&Frame> {
        self.live().get(i)
    }

    // (one bounds check: `depth <= slots.len()` always holds, so the slot below the depth is
    // the top frame; `base!()` runs this for every instruction run out of line)
    #[inline]
    pub(super) fn last(&self) -> Option<&Frame> {
        self.slots.get(self.depth.wrapping_sub(1))
    }

    #[inline]
    pub(super) fn last_mut(&mut self) -> Option<&mut Frame> {
        self.slots.get_mut(self.depth.wrapping_sub(1))
    }

    /// Pushes `f` (dropping the spare slots: a push outside a call sets the stack up).
    #[inline]
    pub(super) fn push(&mut self, f: Frame) {
        self.slots.truncate(self.depth);
        self.slots.push(f);
        self.depth = self.slots.len();
    }

    #[inline]
    pub(super) fn pop(&mut self) -> Option<Frame> {
        let f = *self.last()?;
        self.depth -= 1;
        Some(f)
    }

    #[inline]
    pub(super) fn truncate(&mut self, n: usize) {
        self.depth = self.depth.min(n);
    }

    #[inline]
    pub(super) fn clear(&mut self) {
        self.slots.clear();
        self.depth = 0;
    }

    #[inline]
    pub(super) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// The top frame's index, wrapped in `u32` (`u32::MAX` when there is none): a range from
    /// it to `+ 2` does not overflow a 64-bit `usize`, so taking two frames from it is one
    /// bounds check (the compiler knows the range's start is below its end). Exact: a run
    /// holds at most `MAX_FRAMES`.
    #[inline]
    pub(super) fn top(&self) -> usize {
        self.top_but(0)
    }

    /// The index of the frame `n` below the top, wrapped in `u32` as [`Frames::top`].
    #[inline]
    pub(super) fn top_but(&self, n: u32) -> usize {
        (self.depth as u32).wrapping_sub(1 + n) as usize
    }

    /// One more spare slot, when the depth limit allows it (`Call`'s cold path).
    pub(super) fn grow(&mut self, max_depth: usize) -> bool {
        // (below `u32::MAX` frames, so that `top` is exact)
        if self.depth >= max_depth || self.depth >= MAX_FRAMES {
            return false;
        }
        self.slots.truncate(self.depth);
        self.slots.push(Frame::DEAD);
        true
    }
}

/// One more spare frame slot (`Call`'s cold path), or the call depth error of a call to
/// `callee`.
#[cold]
#[inline(never)]
pub(super) fn grow_frames(
    frames: &mut Frames,
    max_depth: usize,
    program: &VerifiedProgram,
    callee: u16,
) -> Result<(), RunError> {
    if frames.grow(max_depth) {
        return Ok(());
    }
    let name = &program.functions[callee as usize].name;
    Err(RunError::new(
        ErrorKind::CallDepth,
        format!(
            "Maximum helper call depth ({max_depth}) exceeded — likely infinite recursion in '{name}'"
        ),
    ))
}

/// Most frames a run may hold, whatever its depth limit (see `Frames::top`; a run of this
/// many frames would not fit in memory anyway).
pub(crate) const MAX_FRAMES: usize = u32::MAX as usize - 1;

impl From<Vec<Frame>> for Frames {
    fn from(slots: Vec<Frame>) -> Frames {
        let depth = slots.len();
        Frames { slots, depth }
    }
}

impl Vm {
    /// Collects everything unreachable from the run's roots — registers, constants, deferred
    /// and awaited host-call inputs — and `extra` (values only a Rust local holds).
    pub(crate) fn collect_garbage(&mut self, extra: &[Value]) {
        let awaiting = match self.status {
            Status::AwaitingHost { input, .. } => Some(input),
            _ => None,
        };
        let top = self.live_top();
        let roots = self.regs[..top]
            .iter()
            .chain(self.consts.iter())
            .chain(extra.iter())
            .chain(self.hosts.deferred.iter().map(|d| &d.input))
            .chain(awaiting.iter())
            .chain(parallel::roots(&self.batches));
        self.heap.collect(roots);
    }

    /// The registers of the frames on the stack: the register file above them holds the windows
    /// of returned calls (dead; overwritten by the next call), which are neither roots nor
    /// saved. (A caller's registers above a call's arguments are dead too, but are kept: the
    /// verifier does not prove it, and a frame's whole window stays rooted.)
    pub(crate) fn live_regs(&self) -> &[Value] {
        &self.regs[..self.live_top()]
    }

    /// The end of [`Vm::live_regs`]: the highest end of a frame's registers (not always the
    /// running frame's: a callee's window starts at its arguments, inside its caller's, and
    /// may end below the caller's).
    pub(crate) fn live_top(&self) -> usize {
        let funcs = &self.program.functions;
        let top = self
            .frames
            .iter()
            .map(|f| f.base as usize + funcs[f.func as usize].nregs as usize)
            .max()
            .unwrap_or(0);
        top.min(self.regs.len())
    }
}
