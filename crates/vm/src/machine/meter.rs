//! The fuel meter: what a run has left, and the charges builtins pay before their work.

use super::Vm;
use crate::error::{Fault, OpResult, RunError};

/// The fuel a run has left, kept as `floor + room` (wrapping): the dispatch loop sets the
/// floor at the fuel where its slice ends, so that a block pays its `Charge` with one
/// subtraction and one sign test of `room` (fuel and slice checked at once). Signed: a
/// builtin's charge may take the fuel below the floor (the next block then yields).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fuel {
    pub(super) floor: u64,
    pub(super) room: i64,
}

impl Fuel {
    pub(super) fn new(left: u64) -> Fuel {
        Fuel {
            floor: 0,
            room: left as i64,
        }
    }

    /// The fuel left, in milli-fuel.
    #[inline]
    pub(crate) fn left(&self) -> u64 {
        self.floor.wrapping_add(self.room as u64)
    }

    /// Sets the fuel left (the floor stays).
    #[inline]
    pub(crate) fn set(&mut self, left: u64) {
        self.room = left.wrapping_sub(self.floor) as i64;
    }

    /// Moves the floor (the fuel left stays).
    pub(super) fn set_floor(&mut self, floor: u64) {
        let left = self.left();
        self.floor = floor;
        self.set(left);
    }
}

impl Vm {
    /// Charges size-proportional work before it is done.
    pub(crate) fn charge(&mut self, milli: u64) -> OpResult<()> {
        let left = self.fuel.left();
        if milli > left {
            self.fuel.set(0);
            return Err(Fault::Fatal(RunError::out_of_fuel()));
        }
        self.fuel.set(left - milli);
        Ok(())
    }

    /// Charges for touching `units` UTF-16 code units.
    pub(crate) fn charge_units(&mut self, units: usize) -> OpResult<()> {
        self.charge((units as u64).saturating_mul(crate::price::MILLI_PER_UNIT))
    }
}
