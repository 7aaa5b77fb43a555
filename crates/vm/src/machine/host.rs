//! The host-call state of a run: the atoms' costs, quotas and counts, the calls issued, those
//! deferred and not settled yet, and an error an answer delivered.

use ajs_bytecode::Op;
use serde::{Deserialize, Serialize};

use super::{HostCall, PendingHostCall, Status, Vm};
use crate::error::{ErrorKind, Fault, RunError};
use crate::value::{JsValue, Value};

/// A host call deferred by [`Vm::defer`], not settled yet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Deferred {
    pub(super) id: u32,
    pub(super) atom: u16,
    pub(super) input: Value,
}

/// Per atom of the program: its fuel per call, its per-run quota and the calls made so far
/// (empty when the program calls none). A snapshot holds it as it is.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct AtomCounters {
    pub(super) cost: Vec<u64>,
    pub(super) quota: Vec<Option<u32>>,
    pub(super) used: Vec<u32>,
}

/// Everything a run knows about its host calls, besides the one it is stopped at (its status).
#[derive(Debug, Default)]
pub(super) struct HostCalls {
    pub(super) atoms: AtomCounters,
    /// host calls deferred by [`Vm::defer`], not settled yet
    pub(super) deferred: Vec<Deferred>,
    /// host calls issued so far (the next call's id)
    pub(super) next_call_id: u32,
    /// an error delivered by `resume` or `settle`, raised when the run continues
    pub(super) raise_on_run: Option<String>,
}

impl HostCalls {
    /// Back to a run that has made no host call (the vectors keep their capacity).
    #[inline]
    pub(super) fn clear(&mut self) {
        let HostCalls {
            atoms: AtomCounters { cost, quota, used },
            deferred,
            next_call_id,
            raise_on_run,
        } = self;
        cost.clear();
        quota.clear();
        used.clear();
        deferred.clear();
        *next_call_id = 0;
        super::clear_option(raise_on_run);
    }
}

impl Vm {
    /// Defers the host call the run is stopped at: its destination receives a
    /// [`Value::Pending`] and the run continues until it needs the value ([`Step::Blocked`]).
    /// Returns the call's id.
    ///
    /// [`Step::Blocked`]: super::Step::Blocked
    ///
    /// # Errors
    /// An `Input` error when no host call is pending.
    pub fn defer(&mut self) -> Result<u32, RunError> {
        let Status::AwaitingHost {
            dst,
            id,
            atom,
            input,
        } = self.status
        else {
            return Err(RunError::new(
                ErrorKind::Input,
                "defer called while no host call is pending",
            ));
        };
        self.hosts.deferred.push(Deferred { id, atom, input });
        self.regs[dst as usize] = Value::Pending(id);
        self.status = Status::Running;
        Ok(id)
    }

    /// Settles a deferred call: `Ok(value)` replaces its pending value wherever it is held,
    /// `Err(message)` is raised as a guest error where the run continues. For a call queued by
    /// `parallel(...)`, the value (or the error) becomes that item's result.
    ///
    /// # Errors
    /// An `Input` error when no deferred or queued call has this id; a run-ending `Boundary`
    /// error when the value cannot be copied in.
    pub fn settle(&mut self, id: u32, answer: Result<JsValue, String>) -> Result<(), RunError> {
        let Some(i) = self.hosts.deferred.iter().position(|d| d.id == id) else {
            if self.par_settle(id, answer)? {
                return Ok(());
            }
            return Err(RunError::new(
                ErrorKind::Input,
                format!("no deferred host call has id {id}"),
            ));
        };
        let v = match answer {
            Ok(v) => match self.import(&v, 0) {
                Ok(v) => v,
                Err(Fault::Guest(m)) => {
                    self.hosts.raise_on_run.get_or_insert(m);
                    Value::Undefined
                }
                Err(Fault::Fatal(e)) => {
                    self.status = Status::Finished;
                    return Err(e);
                }
            },
            Err(m) => {
                self.hosts.raise_on_run.get_or_insert(m);
                Value::Undefined
            }
        };
        self.hosts.deferred.remove(i);
        let top = self.live_top();
        for r in self.regs[..top].iter_mut() {
            if *r == Value::Pending(id) {
                *r = v;
            }
        }
        Ok(())
    }

    /// Every host call not answered yet: the one the run is stopped at (if any), then the
    /// deferred ones, by id.
    pub fn pending_calls(&self) -> Vec<PendingHostCall> {
        let mut calls: Vec<(u32, u16, Value, bool)> = Vec::new();
        if let Status::AwaitingHost {
            id, atom, input, ..
        } = self.status
        {
            calls.push((id, atom, input, false));
        }
        for d in &self.hosts.deferred {
            calls.push((d.id, d.atom, d.input, true));
        }
        for (id, atom, input) in self.par_queued() {
            calls.push((id, atom, input, true));
        }
        // (every input within one copy budget: a call past it is left out, as a refused one)
        let inputs: Vec<Value> = calls.iter().map(|c| c.2).collect();
        let mut out: Vec<PendingHostCall> = calls
            .iter()
            .zip(self.export_shared(&inputs))
            .filter_map(|(&(id, atom, _, deferred), input)| {
                Some(PendingHostCall {
                    id,
                    call: HostCall {
                        atom: self.program.atoms[atom as usize].clone(),
                        input: input?,
                    },
                    deferred,
                })
            })
            .collect();
        out.sort_by_key(|p| (p.deferred, p.id));
        out
    }

    /// The id of the host call the run is stopped at.
    pub fn awaiting_call_id(&self) -> Option<u32> {
        match self.status {
            Status::AwaitingHost { id, .. } => Some(id),
            _ => None,
        }
    }

    /// Host calls issued so far (deferred ones included).
    pub fn host_calls(&self) -> u32 {
        self.hosts.next_call_id
    }

    pub(super) fn blocks_on_pending(&self, op: &Op, base: usize) -> bool {
        if self.hosts.deferred.is_empty() || matches!(op, Op::Move { .. }) {
            return false;
        }
        let mut hit = false;
        let mut run_base: Option<usize> = None;
        op.operands(|o| match o {
            ajs_bytecode::isa::Operand::Read(r) => {
                hit |= matches!(self.regs.get(base + r as usize), Some(Value::Pending(_)));
            }
            ajs_bytecode::isa::Operand::Base(r) => run_base = Some(base + r as usize),
            ajs_bytecode::isa::Operand::Count(n) => {
                if let Some(s) = run_base.take() {
                    let end = (s + n as usize).min(self.regs.len());
                    hit |= self.regs[s.min(end)..end]
                        .iter()
                        .any(|v| matches!(v, Value::Pending(_)));
                }
            }
            _ => {}
        });
        hit
    }
}
