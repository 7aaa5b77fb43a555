//! The error of a run as a Rust error: [`Error`] and its [`ErrorKind`].

use std::fmt;

use ajs_bytecode::SourcePos;

/// The start of the VM's heap limit message (`Heap limit exceeded: guest state holds …`).
const HEAP_LIMIT_PREFIX: &str = "Heap limit exceeded:";

/// What kind of failure ended a run (or refused it before it started).
///
/// `Display` describes the kind in words (`compile error`, `out of fuel`, …); [`ErrorKind::name`]
/// is its name on the wire (the `kind` of a JSON answer), unchanged since before the compile and
/// heap-limit kinds were told apart: [`ErrorKind::Compile`] is `input` there and
/// [`ErrorKind::HeapLimit`] is `guest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The source does not compile (a syntax error, a construct AJS refuses). Nothing ran.
    Compile,
    /// The run's input was refused before it started: options out of range, a source over
    /// `maxSourceBytes`, arguments or a context that do not fit, an artifact that does not
    /// verify, atoms the sync API cannot call.
    Input,
    /// An allocation would pass the heap ceiling (`Runner.max_heap_bytes`). Catchable by a guest
    /// `try`; this kind means nobody caught it.
    HeapLimit,
    /// A guest error nobody caught (`throw`, a type error, a forbidden property, a capability or
    /// host function that returned an error, …).
    Guest,
    /// The fuel budget is spent. Ends the run.
    OutOfFuel,
    /// The wall-clock limit passed. Ends the run.
    Timeout,
    /// A per-atom quota or a `maxCalls` limit is exhausted. Ends the run.
    Quota,
    /// Too many nested calls. Ends the run.
    CallDepth,
    /// A value could not cross the boundary (not plain data, too large, too deep). Ends the run.
    Boundary,
    /// The host cancelled the run. Ends the run.
    Cancelled,
    /// A host function (a capability or a registered atom) panicked. Ends the run; the panic
    /// does not reach the caller.
    HostPanic,
}

impl ErrorKind {
    /// The kind's name in logs and JSON answers: `guest`, `outOfFuel`, `timeout`, `quota`,
    /// `callDepth`, `boundary`, `cancelled`, `input` (also for [`ErrorKind::Compile`]),
    /// `hostPanic`; [`ErrorKind::HeapLimit`] is `guest`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Guest | ErrorKind::HeapLimit => "guest",
            ErrorKind::OutOfFuel => "outOfFuel",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Quota => "quota",
            ErrorKind::CallDepth => "callDepth",
            ErrorKind::Boundary => "boundary",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Compile | ErrorKind::Input => "input",
            ErrorKind::HostPanic => "hostPanic",
        }
    }

    /// Whether a guest `try` can catch this kind (decision 4): a guest error or the heap limit.
    pub fn catchable(self) -> bool {
        matches!(self, ErrorKind::Guest | ErrorKind::HeapLimit)
    }

    /// Whether the input was refused before anything ran (a compile error or refused input):
    /// the caller's request, not the code's run, is what to fix.
    pub fn refused(self) -> bool {
        matches!(self, ErrorKind::Compile | ErrorKind::Input)
    }

    /// This kind, for an error with this message: the VM reports the heap limit as a guest
    /// error, told apart here by its message (a guest that throws that very text is classed
    /// with it).
    pub(crate) fn classified(self, message: &str) -> ErrorKind {
        match self {
            ErrorKind::Guest if message.starts_with(HEAP_LIMIT_PREFIX) => ErrorKind::HeapLimit,
            k => k,
        }
    }
}

impl From<ajs_vm::ErrorKind> for ErrorKind {
    fn from(k: ajs_vm::ErrorKind) -> ErrorKind {
        match k {
            ajs_vm::ErrorKind::Guest => ErrorKind::Guest,
            ajs_vm::ErrorKind::OutOfFuel => ErrorKind::OutOfFuel,
            ajs_vm::ErrorKind::Timeout => ErrorKind::Timeout,
            ajs_vm::ErrorKind::Quota => ErrorKind::Quota,
            ajs_vm::ErrorKind::CallDepth => ErrorKind::CallDepth,
            ajs_vm::ErrorKind::Boundary => ErrorKind::Boundary,
            ajs_vm::ErrorKind::Cancelled => ErrorKind::Cancelled,
            ajs_vm::ErrorKind::Input => ErrorKind::Input,
            ajs_vm::ErrorKind::HostPanic => ErrorKind::HostPanic,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Compile => "compile error",
            ErrorKind::Input => "input refused",
            ErrorKind::HeapLimit => "heap limit exceeded",
            ErrorKind::Guest => "uncaught guest error",
            ErrorKind::OutOfFuel => "out of fuel",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Quota => "quota exceeded",
            ErrorKind::CallDepth => "call depth exceeded",
            ErrorKind::Boundary => "value refused at the boundary",
            ErrorKind::Cancelled => "cancelled by the host",
            ErrorKind::HostPanic => "host function panicked",
        })
    }
}

/// The error of a run (or of creating one), as users see it: `outcome.error`, or the `Err` of
/// [`Outcome::into_result`](crate::Outcome::into_result). `Display` is the message.
///
/// ```
/// # #[cfg(feature = "compiler")] {
/// use ajs::{Eval, ErrorKind};
/// let err = Eval::new("let x = 1\nreturn x +* 2").run_sync().into_result().unwrap_err();
/// assert_eq!(err.kind, ErrorKind::Compile);
/// assert_eq!(err.line(), Some(2));
/// let boxed: Box<dyn std::error::Error + Send + Sync + 'static> = Box::new(err);
/// assert!(boxed.to_string().starts_with("SyntaxError"));
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    /// The message (run-time messages exactly as documented; compile errors end with
    /// ` at <source>:LINE:COLUMN`, the column 0-based as in `pos`).
    pub message: String,
    /// What kind of failure.
    pub kind: ErrorKind,
    /// Where in the user's source, when known: `line` from 1, `col` from 0, counted in UTF-16
    /// code units (as JavaScript counts string length), not bytes or characters.
    pub pos: Option<SourcePos>,
}

/// The error of a run, under its earlier name.
pub type ErrorInfo = Error;

impl Error {
    /// An error of `kind` without a position.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
            kind,
            pos: None,
        }
    }

    /// The line in the user's source, from 1, when known.
    pub fn line(&self) -> Option<u32> {
        self.pos.map(|p| p.line)
    }

    /// The column in the user's source, from 0, in UTF-16 code units, when known.
    pub fn column(&self) -> Option<u32> {
        self.pos.map(|p| p.col)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<crate::OptionError> for Error {
    fn from(e: crate::OptionError) -> Error {
        Error::new(ErrorKind::Input, e.to_string())
    }
}

impl From<crate::LoadError> for Error {
    fn from(e: crate::LoadError) -> Error {
        Error::new(ErrorKind::Input, e.to_string())
    }
}

#[cfg(feature = "compiler")]
impl From<crate::CompileError> for Error {
    fn from(e: crate::CompileError) -> Error {
        let pos = SourcePos {
            line: e.line,
            col: e.column,
        };
        Error {
            message: e.to_string(),
            kind: ErrorKind::Compile,
            pos: Some(pos),
        }
    }
}

#[cfg(feature = "compiler")]
impl From<crate::CreateError> for Error {
    fn from(e: crate::CreateError) -> Error {
        match e {
            crate::CreateError::Option(e) => e.into(),
            crate::CreateError::SourceTooLarge(m) => Error::new(ErrorKind::Input, m),
            crate::CreateError::Compile(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_rust_error<E: std::error::Error + Send + Sync + 'static>() {}

    #[test]
    fn the_error_is_a_rust_error_and_its_wire_names_stay() {
        is_rust_error::<Error>();
        assert_eq!(ErrorKind::Compile.name(), "input");
        assert_eq!(ErrorKind::HeapLimit.name(), "guest");
        assert_eq!(ErrorKind::OutOfFuel.to_string(), "out of fuel");
        assert!(ErrorKind::HeapLimit.catchable() && !ErrorKind::HostPanic.catchable());
        let heap = ErrorKind::Guest.classified("Heap limit exceeded: guest state holds ~65MB");
        assert_eq!(heap, ErrorKind::HeapLimit);
        assert_eq!(
            ErrorKind::Guest.classified("Error: Heap limit"),
            ErrorKind::Guest
        );
        assert_eq!(
            ErrorKind::Input.classified(HEAP_LIMIT_PREFIX),
            ErrorKind::Input
        );
    }
}
