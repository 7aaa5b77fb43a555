//! What a run's start and a call's frame cost, and the work they do: the start copies the
//! program's string constants into the run's heap and fills the entry's frame; a call fills
//! its callee's frame. Work a crafted artifact can make large is charged before it is done,
//! at the price builtins pay per code unit ([`Vm::charge_units`]); work no larger than a
//! run's or a call's fixed cost is free.

use ajs_bytecode::VerifiedProgram;

use crate::error::{ErrorKind, RunError};
use crate::machine::{Vm, VmOptions, WINDOW_FILL};
use crate::value::Value;

/// Registers of a callee's frame a call fills without a charge of its own (the call's fuel
/// covers a frame this small); each register past them is charged as [`UNITS_PER_REGISTER`].
pub const FRAME_FREE_REGISTERS: usize = 64;

/// Code units a register filled is charged as: the 16 bytes of a value, 8 units' bytes.
pub const UNITS_PER_REGISTER: usize = 8;

/// Code units a string constant is charged as besides its own: its allocation and heap cell
/// (as a string a native makes).
pub const UNITS_PER_CONSTANT: usize = 64;

/// Code units of a run's start (its string constants, counted as above) that are free: what a
/// program within the default source limit (`maxSourceBytes`, 8 KiB) usually holds. The units
/// past them are charged before the constants are copied (no step at the allowance: a start one
/// unit over it pays for one unit).
pub const FREE_START_UNITS: usize = 8192;

/// The code units a call charges for filling a frame of `nregs` registers (0 for a frame of
/// at most [`FRAME_FREE_REGISTERS`]).
#[inline]
pub(crate) fn frame_units(nregs: usize) -> usize {
    nregs.saturating_sub(FRAME_FREE_REGISTERS) * UNITS_PER_REGISTER
}

/// The code units a run's start charges for `program`, whose entry has `nregs` registers: its
/// string constants (those past [`FREE_START_UNITS`]) and its entry's frame (as a call's).
#[inline(always)]
fn start_units(program: &VerifiedProgram, nregs: usize) -> usize {
    let (strings, units) = program.string_constants();
    start_units_of(strings, units, nregs)
}

/// [`start_units`] of a program with `strings` string constants of `units` code units in all.
#[inline(always)]
pub(crate) fn start_units_of(strings: usize, units: usize, nregs: usize) -> usize {
    let text = units + strings * UNITS_PER_CONSTANT;
    text.saturating_sub(FREE_START_UNITS) + frame_units(nregs)
}

impl Vm {
    /// Charges a run's start ([`start_units`]; its entry has `nregs` registers) before its
    /// constants are copied.
    ///
    /// # Errors
    /// Out of Fuel when the budget does not cover it.
    #[inline(always)]
    pub(crate) fn charge_start(&mut self, nregs: usize) -> Result<(), RunError> {
        let (strings, units) = self.program.string_constants();
        // (the usual start: one test of each)
        if units + strings * UNITS_PER_CONSTANT <= FREE_START_UNITS && nregs <= FRAME_FREE_REGISTERS
        {
            return Ok(());
        }
        self.charge_start_units(start_units(&self.program, nregs))
    }

    #[cold]
    #[inline(never)]
    fn charge_start_units(&mut self, units: usize) -> Result<(), RunError> {
        if units == 0 {
            return Ok(());
        }
        // (the run-time message is exactly the reference's `Out of Fuel`)
        self.charge_units(units)
            .map_err(|_| RunError::out_of_fuel())
    }

    /// A callee's registers on `Call`'s general path (more than two parameters, or more than
    /// [`WINDOW_FILL`] registers): a frame of more than [`FRAME_FREE_REGISTERS`] charged
    /// first, then the register file grown to hold them, and those after its `argc` arguments
    /// (in place at `new_base`) filled with `undefined`. A charge the fuel left does not cover
    /// spends it all: the callee's first block (its `Charge`, next) then ends the run Out of
    /// Fuel, before any of its instructions (so that the dispatch loop gains no exit: one
    /// there slowed all of its instructions). Out of line: its loops and the growth's call are
    /// kept out of the dispatch loop's allocation.
    #[inline(never)]
    pub(crate) fn call_registers(&mut self, new_base: usize, argc: usize, nregs: usize) {
        if nregs > FRAME_FREE_REGISTERS {
            // (an error leaves no fuel: the callee's `Charge` reports it)
            let _ = self.charge_units(frame_units(nregs));
        }
        let regs = &mut self.regs;
        let need = new_base + nregs.max(WINDOW_FILL);
        if regs.len() < need {
            regs.resize(need, Value::Undefined);
        }
        regs[new_base + argc..new_base + nregs].fill(Value::Undefined);
    }
}

/// The atoms' costs and quotas, in the program's atom order; an error naming the first atom
/// the options do not provide.
fn atom_table(
    program: &VerifiedProgram,
    opts: &VmOptions,
) -> Result<(Vec<u64>, Vec<Option<u32>>), RunError> {
    let mut atom_cost = Vec::with_capacity(program.atoms.len());
    let mut atom_quota = Vec::with_capacity(program.atoms.len());
    for a in &program.atoms {
        let spec = opts.atoms.get(a).ok_or_else(|| {
            RunError::new(
                ErrorKind::Input,
                format!("This program calls the atom '{a}', which this runner does not provide"),
            )
        })?;
        atom_cost.push(spec.cost);
        atom_quota.push(spec.quota);
    }
    Ok((atom_cost, atom_quota))
}

/// [`atom_table`] for a program that calls atoms; `None` (no lookups, nothing allocated) for
/// one that calls none. (The verifier refuses an atom listed twice: the lookups are at most
/// the host's atoms.)
#[allow(clippy::type_complexity)]
#[inline]
pub(crate) fn atoms_of(
    program: &VerifiedProgram,
    opts: &VmOptions,
) -> Result<Option<(Vec<u64>, Vec<Option<u32>>)>, RunError> {
    if program.atoms.is_empty() {
        Ok(None)
    } else {
        atom_table(program, opts).map(Some)
    }
}
