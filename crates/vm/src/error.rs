//! Run errors: what ends a run, and whether a guest `try` could have caught it.

use ajs_bytecode::SourcePos;
use thiserror::Error;

/// Why a run ended without a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A guest error nobody caught (`Error('…')`, a type error, a forbidden property, the heap
    /// limit, a capability that threw, …). Catchable by a guest `try`.
    Guest,
    /// The fuel budget is spent. Ends the run.
    OutOfFuel,
    /// The wall-clock limit passed. Ends the run.
    Timeout,
    /// A per-atom quota is exhausted. Ends the run.
    Quota,
    /// Too many nested calls. Ends the run.
    CallDepth,
    /// A value could not cross the boundary (not plain data, too large, cyclic). Ends the run.
    Boundary,
    /// The host cancelled the run. Ends the run.
    Cancelled,
    /// The run's input was refused before it started (arguments, options).
    Input,
    /// A host function (capability or atom) panicked; the driver caught it. Ends the run.
    HostPanic,
}

impl ErrorKind {
    /// The kind's name in logs and JSON answers (`guest`, `outOfFuel`, `timeout`, `quota`,
    /// `callDepth`, `boundary`, `cancelled`, `input`, `hostPanic`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Guest => "guest",
            ErrorKind::OutOfFuel => "outOfFuel",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Quota => "quota",
            ErrorKind::CallDepth => "callDepth",
            ErrorKind::Boundary => "boundary",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Input => "input",
            ErrorKind::HostPanic => "hostPanic",
        }
    }

    /// Whether a guest `try` can catch this kind (decision 4).
    pub fn catchable(self) -> bool {
        matches!(self, ErrorKind::Guest)
    }
}

/// An error that ended a run. `message` is exactly the text users see.
#[derive(Clone, Debug, PartialEq, Error)]
#[error("{message}")]
pub struct RunError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The message, e.g. `Out of Fuel`.
    pub message: String,
    /// Where in the user's source it happened, when known.
    pub pos: Option<SourcePos>,
}

impl RunError {
    /// A new error without position.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> RunError {
        RunError {
            kind,
            message: message.into(),
            pos: None,
        }
    }
    /// `Out of Fuel`.
    pub fn out_of_fuel() -> RunError {
        RunError::new(ErrorKind::OutOfFuel, "Out of Fuel")
    }
}

/// Inside the interpreter: a guest error (may be caught) or a run-ending one.
#[derive(Debug)]
pub(crate) enum Fault {
    Guest(String),
    Fatal(RunError),
}

impl From<RunError> for Fault {
    fn from(e: RunError) -> Fault {
        Fault::Fatal(e)
    }
}

pub(crate) type OpResult<T> = Result<T, Fault>;

pub(crate) fn guest<T>(msg: impl Into<String>) -> OpResult<T> {
    Err(Fault::Guest(msg.into()))
}
