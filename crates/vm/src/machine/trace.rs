//! Tracing: every executed instruction with the fuel used around it, when the host asks.

use ajs_bytecode::SourcePos;

use super::{TraceStep, Vm};

/// Most steps a trace keeps, whatever cap the host asks for ([`Vm::set_trace`]): a step is a
/// few dozen bytes, so a trace holds at most a few dozen MiB.
pub const MAX_TRACE_STEPS: usize = 1_000_000;

/// A run's trace: off, or the steps kept and the number dropped past the cap. Never in a
/// snapshot (a restored run is not traced).
#[derive(Debug, Default)]
pub(super) struct Trace {
    /// executed instructions, when tracing
    pub(super) steps: Option<Vec<TraceStep>>,
    pub(super) cap: usize,
    pub(super) dropped: u64,
}

impl Trace {
    /// Tracing off, nothing kept.
    #[inline]
    pub(super) fn clear(&mut self) {
        let Trace {
            steps,
            cap,
            dropped,
        } = self;
        super::clear_option(steps);
        *cap = 0;
        *dropped = 0;
    }

    /// Whether tracing is on.
    #[inline]
    pub(super) fn is_on(&self) -> bool {
        self.steps.is_some()
    }
}

impl Vm {
    /// Turns tracing on (keeping at most `cap` steps; later ones are counted) or off (`None`).
    pub fn set_trace(&mut self, cap: Option<usize>) {
        match cap {
            Some(c) => {
                self.trace.steps = Some(Vec::new());
                self.trace.cap = c.min(MAX_TRACE_STEPS);
            }
            None => self.trace.steps = None,
        }
    }

    /// Takes the steps traced so far and the number dropped past the cap.
    pub fn take_trace(&mut self) -> (Vec<TraceStep>, u64) {
        let steps = self
            .trace
            .steps
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        (steps, std::mem::take(&mut self.trace.dropped))
    }

    pub(super) fn trace_step(&mut self, op: &'static str, pos: Option<SourcePos>) {
        let used = self.fuel_used_milli();
        let cap = self.trace.cap;
        if let Some(t) = &mut self.trace.steps {
            if let Some(last) = t.last_mut() {
                if last.fuel_after == u64::MAX {
                    last.fuel_after = used;
                }
            }
            if t.len() < cap {
                t.push(TraceStep {
                    op,
                    fuel_before: used,
                    fuel_after: u64::MAX,
                    pos,
                });
            } else {
                self.trace.dropped += 1;
            }
        }
    }

    pub(super) fn close_trace(&mut self) {
        let used = self.fuel_used_milli();
        if let Some(last) = self.trace.steps.as_mut().and_then(|t| t.last_mut()) {
            if last.fuel_after == u64::MAX {
                last.fuel_after = used;
            }
        }
    }
}
