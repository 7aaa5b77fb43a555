//! What a run records to be replayed: the elapsed time carried across processes, the seed and
//! the clock readings, and the host's opaque data.

use serde::{Deserialize, Serialize};

use super::Vm;

/// The replay state of a run. A snapshot holds it as it is.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Journal {
    /// the seed the run's randomness started from
    pub(super) random_seed: u64,
    /// wall-clock milliseconds the run has spent before this process (set by the driver)
    pub(super) elapsed_ms: u64,
    /// every clock reading, in order (journaled)
    pub(super) clock_log: Vec<f64>,
    /// readings to answer the clock with instead of `clock` (replay)
    pub(super) clock_replay: Option<Vec<f64>>,
    /// opaque host data carried through snapshots (the facade's journal)
    pub(super) host_data: Vec<u8>,
}

impl Journal {
    /// Back to a run that has recorded nothing (the vectors keep their capacity).
    #[inline]
    pub(super) fn clear(&mut self) {
        let Journal {
            random_seed,
            elapsed_ms,
            clock_log,
            clock_replay,
            host_data,
        } = self;
        *elapsed_ms = 0;
        *random_seed = 0;
        clock_log.clear();
        super::clear_option(clock_replay);
        host_data.clear();
    }
}

impl Vm {
    // ---- budgets carried across processes ----

    /// Wall-clock milliseconds the run spent before it was last snapshotted (the driver adds
    /// its own time before snapshotting, with [`Vm::set_elapsed_ms`]).
    pub fn elapsed_ms(&self) -> u64 {
        self.journal.elapsed_ms
    }

    /// Records the run's total elapsed wall-clock time.
    pub fn set_elapsed_ms(&mut self, ms: u64) {
        self.journal.elapsed_ms = ms;
    }

    /// Opaque host data carried through snapshots.
    pub fn host_data(&self) -> &[u8] {
        &self.journal.host_data
    }

    /// Sets the opaque host data carried through snapshots.
    pub fn set_host_data(&mut self, data: Vec<u8>) {
        self.journal.host_data = data;
    }

    // ---- the host clock and randomness ----

    /// Sets the host clock.
    pub fn set_clock(&mut self, clock: fn() -> f64) {
        self.clock = clock;
    }

    /// Answers the clock with these readings, in order, instead of the host clock (replay).
    /// Past the last reading the clock answers `NaN`.
    pub fn set_clock_replay(&mut self, readings: Vec<f64>) {
        self.journal.clock_replay = Some(readings);
    }

    /// Every clock reading the run made, in order.
    pub fn clock_readings(&self) -> &[f64] {
        &self.journal.clock_log
    }

    /// The seed the run's randomness started from.
    pub fn random_seed(&self) -> u64 {
        self.journal.random_seed
    }

    pub(crate) fn now(&mut self) -> f64 {
        let t = match &self.journal.clock_replay {
            Some(r) => r
                .get(self.journal.clock_log.len())
                .copied()
                .unwrap_or(f64::NAN),
            None => (self.clock)(),
        };
        if self.journal.clock_log.len() < 1 << 20 {
            self.journal.clock_log.push(t);
        }
        t
    }
}
