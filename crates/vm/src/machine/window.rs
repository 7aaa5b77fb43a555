//! The register window the dispatch loop reads a frame's registers through.

use ajs_bytecode::{Entry, VerifiedProgram};

use crate::value::Value;

/// Registers a call always fills with `undefined` (a fixed-size copy; a bigger window is filled
/// to its size).
pub(crate) const WINDOW_FILL: usize = 8;

/// Fresh registers for a call's window.
pub(super) static UNDEFINED: [Value; WINDOW_FILL] = [Value::Undefined; WINDOW_FILL];

/// Registers the dispatch loop's fast path sees from a frame's base: a fixed-size window, so
/// that an access (its index masked) needs no bounds check. A program with a function of more
/// registers runs on the slow path (checked accesses). A power of two.
pub(crate) const WINDOW: usize = 256;

/// The window of a program whose functions all have at most this many registers (most
/// formulas and rules): a run starts by growing the register file to one window, so a small
/// window keeps that cheap. A power of two.
pub(super) const SMALL_WINDOW: usize = 32;

const _: () = assert!(
    WINDOW_FILL == Entry::SMALL_REGS as usize
        && WINDOW.is_power_of_two()
        && SMALL_WINDOW.is_power_of_two()
        && WINDOW >= SMALL_WINDOW
        && SMALL_WINDOW >= WINDOW_FILL
);

/// The `W` registers from `base`, the register file grown to hold them first (out of line: rare,
/// and its loop would otherwise be inlined at every place the dispatch loop derives its window).
#[cold]
#[inline(never)]
pub(super) fn grown_window<const W: usize>(regs: &mut Vec<Value>, base: usize) -> &mut [Value; W] {
    regs.resize(base + W, Value::Undefined);
    match (&mut regs[base..base + W]).try_into() {
        Ok(w) => w,
        Err(_) => unreachable!("the slice is W long"),
    }
}

/// The window the dispatch loop reads `program`'s registers through: `SMALL_WINDOW` or
/// `WINDOW`, or `None` when a function has more registers than that (the checked slow path).
pub(super) fn window_of(program: &VerifiedProgram) -> Option<usize> {
    match program.max_registers() {
        n if n <= SMALL_WINDOW => Some(SMALL_WINDOW),
        n if n <= WINDOW => Some(WINDOW),
        _ => None,
    }
}

/// How many registers a run of `program` starts with: its entry's `nregs`, or its window if
/// that is more (so that the first slice need not grow the file).
#[inline]
pub(super) fn first_registers(program: &VerifiedProgram, nregs: usize) -> usize {
    nregs.max(window_of(program).unwrap_or(0))
}

/// The `W` registers from `base`, the register file grown to hold them first (registers past
/// the live frames are dead: growing it changes nothing a run can see).
#[inline(always)]
pub(super) fn fixed_window<const W: usize>(regs: &mut Vec<Value>, base: usize) -> &mut [Value] {
    let end = base + W;
    // (the file's length tested once: the slice taken where the test holds, no second test
    // after an out-of-line growth)
    let w: &mut [Value; W] = if regs.len() >= end {
        match (&mut regs[base..end]).try_into() {
            Ok(w) => w,
            Err(_) => unreachable!("the slice is W long"),
        }
    } else {
        grown_window::<W>(regs, base)
    };
    w
}
