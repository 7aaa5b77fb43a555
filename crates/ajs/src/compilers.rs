//! The compilers this process keeps between runs: a compile takes one (a new one when every
//! kept one is in use) and gives it back after, so that a run reuses the parse arena, the
//! lowering's buffers and the context-key list of an earlier run, on whichever thread.

use std::sync::Mutex;

use ajs_compiler::Compiler;

/// Most compilers kept (about one per thread compiling at once).
const KEEP_COMPILERS: usize = 8;

/// A compiler and the list of context keys handed to it (both reused).
#[derive(Default)]
pub(crate) struct Kept {
    pub(crate) compiler: Compiler,
    pub(crate) keys: Vec<String>,
}

/// The kept compilers.
static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// Runs `f` with a kept compiler (a new one when none is free), kept again after. (The lock is
/// not held while `f` runs: compiles on several threads do not wait for each other.)
pub(crate) fn with<T>(f: impl FnOnce(&mut Kept) -> T) -> T {
    let mut kept = KEPT
        .lock()
        .ok()
        .and_then(|mut v| v.pop())
        .unwrap_or_default();
    let r = f(&mut kept);
    if let Ok(mut v) = KEPT.lock() {
        if v.len() < KEEP_COMPILERS {
            v.push(kept);
        }
    }
    r
}

/// Hands a program no longer needed (when this is its last handle) to a kept compiler, whose
/// next compile builds its program in this one's allocations.
pub(crate) fn recycle(program: ajs_bytecode::VerifiedProgram) {
    if let Ok(p) = program.try_into_program() {
        if let Ok(mut v) = KEPT.lock() {
            if let Some(kept) = v.last_mut() {
                kept.compiler.recycle(p);
            }
        }
    }
}
