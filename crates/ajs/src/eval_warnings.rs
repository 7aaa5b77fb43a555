//! Compile-time warnings of an Eval snippet (decision 39) in its outcome's `warnings`: Eval has
//! no command to print them, so they go out with the run, before its run-time ones.

use crate::driver::Run;
use crate::{Outcome, Warning};

/// Whether compiling `code` may warn (only a catch binding's property does): the other
/// snippets compile without a warning sink.
pub(crate) fn may_warn(code: &str) -> bool {
    code.contains("catch")
}

/// The warnings as the outcome carries them: `… at <source>:LINE:COL`.
pub(crate) fn lines(found: Vec<Warning>) -> Vec<String> {
    found
        .into_iter()
        .take(crate::capabilities::MAX_RUN_WARNINGS)
        .map(|w| format!("{} at {}:{}:{}", w.message, w.source_name, w.line, w.column))
        .collect()
}

/// `o` with `found` before its own warnings (at most [`crate::capabilities::MAX_RUN_WARNINGS`]).
pub(crate) fn add(o: &mut Outcome, mut found: Vec<String>) {
    if found.is_empty() {
        return;
    }
    found.append(&mut o.warnings);
    found.truncate(crate::capabilities::MAX_RUN_WARNINGS);
    o.warnings = found;
}

/// `run`, whose outcome gets `found` (see [`add`]).
pub(crate) fn add_to_run(run: Run<'_>, found: Vec<String>) -> Run<'_> {
    if found.is_empty() {
        return run;
    }
    match run {
        Run::Done(Some(mut o)) => {
            add(&mut o, found);
            Run::Done(Some(o))
        }
        Run::Driving(f) => Run::Driving(Box::pin(async move {
            let mut o = f.await;
            add(&mut o, found);
            o
        })),
        done => done,
    }
}
