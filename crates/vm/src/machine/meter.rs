//! The fuel meter: what a run has left, and the charges builtins pay before their work.

use ajs_bytecode::isa::MILLI;
use serde::{Deserialize, Serialize};

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
    #[inline]
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
    #[inline]
    pub(super) fn set_floor(&mut self, floor: u64) {
        let left = self.left();
        self.floor = floor;
        self.set(left);
    }
}

impl Vm {
    /// Charges size-proportional work before it is done.
    pub(crate) fn charge(&mut self, milli: u64) -> OpResult<()> {
        let left = self.meter.fuel.left();
        if milli > left {
            self.meter.fuel.set(0);
            return Err(Fault::Fatal(RunError::out_of_fuel()));
        }
        self.meter.fuel.set(left - milli);
        Ok(())
    }

    /// Charges for touching `units` UTF-16 code units.
    pub(crate) fn charge_units(&mut self, units: usize) -> OpResult<()> {
        self.charge((units as u64).saturating_mul(crate::price::MILLI_PER_UNIT))
    }
}

/// A run's fuel: the budget it started with and what it has left.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meter {
    /// the budget, in milli-fuel
    pub(super) budget: u64,
    /// what is left of it (read and paid by the dispatch loop as `meter.fuel`)
    pub(crate) fuel: Fuel,
}

/// A [`Meter`] as a snapshot holds it: the budget and the fuel left, in milli-fuel.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct MeterWire {
    budget: u64,
    left: u64,
}

impl Meter {
    /// A full meter of `budget` milli-fuel.
    #[inline]
    pub(super) fn new(budget: u64) -> Meter {
        Meter {
            budget,
            fuel: Fuel::new(budget),
        }
    }

    /// Back to an empty budget (what a cleared VM holds).
    #[inline]
    pub(super) fn clear(&mut self) {
        let Meter { budget, fuel } = self;
        *budget = 0;
        *fuel = Fuel::new(0);
    }

    /// Fuel spent so far, in milli-fuel.
    #[inline]
    pub(super) fn used(&self) -> u64 {
        self.budget - self.fuel.left()
    }

    /// The meter as a snapshot holds it.
    pub(super) fn to_wire(self) -> MeterWire {
        MeterWire {
            budget: self.budget,
            left: self.fuel.left(),
        }
    }

    /// A meter from a snapshot, refused when it has more fuel left than its budget.
    pub(super) fn from_wire(w: MeterWire) -> Result<Meter, &'static str> {
        if w.left > w.budget {
            return Err("more fuel left than the budget");
        }
        Ok(Meter {
            budget: w.budget,
            fuel: Fuel::new(w.left),
        })
    }
}

impl Vm {
    /// Fuel spent so far, in milli-fuel.
    pub fn fuel_used_milli(&self) -> u64 {
        self.meter.used()
    }

    /// Fuel spent so far, in fuel.
    pub fn fuel_used(&self) -> f64 {
        self.fuel_used_milli() as f64 / MILLI as f64
    }

    /// The fuel budget, in milli-fuel.
    pub fn fuel_budget_milli(&self) -> u64 {
        self.meter.budget
    }
}
