//! The run's deadline and the host's cancellation, as natives see them.
//!
//! The driver checks both between slices; a native whose work can outlast a slice (a regex
//! search over a long string) must check them as it goes, through [`Vm::interrupted`] or a
//! [`Clock`], at least every few milliseconds of work, and end the run with the error it returns
//! (kind [`ErrorKind::Timeout`] or [`ErrorKind::Cancelled`], the driver's own messages), which no
//! guest `try` catches. A check costs a clock read: do it between chunks of work, not per item.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{ErrorKind, RunError};
use crate::machine::Vm;

/// The message of a run the host cancelled.
pub const CANCELLED_MESSAGE: &str = "Execution cancelled by the host";

/// The error that ends a run past its `timeoutMs`.
pub fn timeout_error(ms: u64) -> RunError {
    RunError::new(
        ErrorKind::Timeout,
        format!("Execution timeout after {ms}ms. Pass a higher timeoutMs if the work genuinely needs more time."),
    )
}

/// The error that ends a run the host cancelled.
pub fn cancelled_error() -> RunError {
    RunError::new(ErrorKind::Cancelled, CANCELLED_MESSAGE)
}

/// Whether the host has cancelled the run (read often: an atomic load, no lock).
pub type CancelCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// When a run must stop besides fuel: its deadline and the host's cancellation
/// ([`VmOptions::interrupt`](crate::VmOptions::interrupt)).
#[derive(Clone, Default)]
pub struct Interrupt {
    /// The run's wall-clock limit in milliseconds (`None`: none), named in the timeout message.
    pub timeout_ms: Option<u64>,
    /// The instant the run ends with a timeout. `None` with a `timeout_ms`: the driver has not
    /// started the run's clock yet (its first slice), and a native that checks counts
    /// `timeout_ms` from its own start instead.
    pub deadline: Option<Instant>,
    /// The host's cancellation flag.
    pub cancel: Option<CancelCheck>,
}

impl fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interrupt")
            .field("timeout_ms", &self.timeout_ms)
            .field("deadline", &self.deadline)
            .field("cancel", &self.cancel.as_ref().map(|c| c()))
            .finish()
    }
}

impl Interrupt {
    /// An interrupt with a timeout of `timeout_ms` (its clock not started) and `cancel`.
    pub fn new(timeout_ms: u64, cancel: Option<CancelCheck>) -> Interrupt {
        Interrupt {
            timeout_ms: Some(timeout_ms),
            deadline: None,
            cancel,
        }
    }

    /// This interrupt with its deadline fixed from now when the driver has not started the
    /// run's clock (for a native's long walk that checks through many short clocks).
    pub fn pinned(&self) -> Interrupt {
        let mut i = self.clone();
        if let (None, Some(ms)) = (i.deadline, i.timeout_ms) {
            let now = Instant::now();
            i.deadline = Some(now.checked_add(Duration::from_millis(ms)).unwrap_or(now));
        }
        i
    }

    /// A clock for one native's work, which reads the time only when asked to check.
    pub fn clock(&self) -> Clock<'_> {
        Clock {
            interrupt: self,
            deadline: self.deadline,
        }
    }
}

/// One native's view of the [`Interrupt`]: [`Clock::check`] between chunks of work.
pub struct Clock<'a> {
    interrupt: &'a Interrupt,
    deadline: Option<Instant>,
}

impl Clock<'_> {
    /// `Err` (the run-ending timeout or cancellation) when the run must stop now.
    ///
    /// # Errors
    /// The timeout when the deadline has passed, the cancellation when the host cancelled.
    pub fn check(&mut self) -> Result<(), RunError> {
        let i = self.interrupt;
        if i.cancel.as_ref().is_some_and(|c| c()) {
            return Err(cancelled_error());
        }
        if let Some(ms) = i.timeout_ms {
            let now = Instant::now();
            let until = *self
                .deadline
                .get_or_insert_with(|| now.checked_add(Duration::from_millis(ms)).unwrap_or(now));
            if now >= until {
                return Err(timeout_error(ms));
            }
        }
        Ok(())
    }
}

impl Vm {
    /// Sets the run's deadline (the driver, when it starts the run's clock or resumes a run).
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.interrupt.deadline = Some(deadline);
    }

    /// Replaces the run's interrupt (a restored run takes its host's).
    pub fn set_interrupt(&mut self, interrupt: Interrupt) {
        self.interrupt = interrupt;
    }

    /// `Err` when the run must stop now (deadline passed, host cancelled): for a native
    /// between chunks of long work. Each call reads the clock.
    ///
    /// # Errors
    /// The run-ending timeout or cancellation.
    pub fn interrupted(&self) -> Result<(), RunError> {
        self.interrupt.clock().check()
    }
}
