//! Compiles AJS source (parsed with oxc) to ajs bytecode.
//!
//! Entry point: [`compile`]. The produced [`Program`] holds one function whose parameters are the
//! externals the code uses (see [`CompileOptions`]), with fuel `Charge`s inserted and a span table
//! pointing into the user's source.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// The first diagnostic of a parse as (message, byte offset of its first label).
macro_rules! first_diag {
    ($d:expr) => {
        $d.first().map(|d| {
            (
                d.message.to_string(),
                d.labels.first().map_or(0, |l| l.offset()),
            )
        })
    };
}

mod lower;
mod params;
mod pos;
#[cfg(test)]
mod test_rng;

use ajs_bytecode::Program;
use oxc_allocator::Allocator;
use oxc_ast::ast::Statement;
use oxc_parser::{ParseOptions, Parser};
use oxc_span::SourceType;

pub use lower::recycle;
pub use pos::LineIndex;

/// How the source is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Eval: decision 3. Source is one expression if `oxc_parser::Parser::parse_expression` accepts
    /// it (value of the expression is the result); otherwise parse as a script with return allowed;
    /// if that parses and has a `return` statement of its own (not inside a callback arrow) it runs
    /// as a block (result = what it returns, undefined when no return reached); otherwise the error
    /// is the error of the expression parse.
    Eval,
    /// SafeFunction body: parse as a script with return allowed; a missing return gives undefined.
    FunctionBody,
    /// An agent program: top-level `function` declarations, the last one the entry, parameters
    /// typed by example values (decision 8). `externals` is ignored; the entry's parameters and
    /// their types are in [`Program::signature`].
    Agent,
}

/// Options of one compilation.
#[derive(Clone, Copy, Debug)]
pub struct CompileOptions<'a> {
    /// Eval or function body.
    pub mode: Mode,
    /// Names the code may read that the host supplies. For Eval: the context keys offered. For
    /// FunctionBody: the parameter names.
    pub externals: &'a [String],
    /// Atoms (host operations) the code may call by name, e.g. "httpFetch", "llmPredict".
    pub atoms: &'a [String],
    /// Shown in messages, default "<source>".
    pub source_name: &'a str,
}

impl Default for CompileOptions<'_> {
    fn default() -> Self {
        CompileOptions {
            mode: Mode::Eval,
            externals: &[],
            atoms: &[],
            source_name: "<source>",
        }
    }
}

/// A compile error, positioned in the user's source.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} at {source_name}:{line}:{column}")]
pub struct CompileError {
    /// What is wrong (and what to write instead).
    pub message: String,
    /// The source name of [`CompileOptions::source_name`].
    pub source_name: String,
    /// Line, 1-based.
    pub line: u32,
    /// Column, 0-based, in UTF-16 units.
    pub column: u32,
}

/// Most levels of bracket nesting the source may have (bounds the parser's recursion).
pub const MAX_BRACKET_DEPTH: usize = 256;
/// Most levels of expression/statement nesting the compiler recurses through.
pub const MAX_NESTING: u32 = 200;
/// Stack given to the thread that parses and compiles.
const COMPILE_STACK: usize = 256 * 1024 * 1024;

/// An error before line/column resolution: message and byte offset into the source.
#[derive(Debug, Clone)]
pub(crate) struct Fail {
    pub message: String,
    pub offset: u32,
}

impl Fail {
    pub(crate) fn new(offset: u32, message: impl Into<String>) -> Fail {
        Fail {
            message: message.into(),
            offset,
        }
    }
}

/// Compiles `source`.
///
/// # Errors
/// [`CompileError`] naming what is refused and where; never panics.
pub fn compile(source: &str, opts: &CompileOptions) -> Result<Program, CompileError> {
    let name = if opts.source_name.is_empty() {
        "<source>"
    } else {
        opts.source_name
    };
    // One pass over the source: how deeply the parser could recurse on it, or why its nesting is
    // refused before parsing.
    // (a short source needs no scan: see `SHORT_SOURCE`)
    // (with the top-level brackets it read, for the parameter rewrite)
    let scan = if source.len() <= SHORT_SOURCE {
        Ok((source.len() * pos::BRACKET_UNITS, Vec::new()))
    } else {
        std::panic::catch_unwind(|| pos::prescan_bodies(source, MAX_BRACKET_DEPTH))
            .unwrap_or_else(|_| Err(Fail::new(0, "internal compiler error")))
    };
    let inline = scan
        .as_ref()
        .map_or(true, |&(units, _)| units <= INLINE_UNITS);
    let run = || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            compile_inner(source, opts, &scan)
        }))
        .unwrap_or_else(|_| Err(Fail::new(0, "internal compiler error")))
    };
    // Parse and compile on a thread with a large stack, so that deep (but bounded) nesting never
    // overflows; fall back to the current thread if one cannot be started. A source that cannot
    // make the parser recurse deeply (every ordinary program), or that is refused before parsing,
    // compiles on the current thread, which saves starting a thread (and mapping its stack) per
    // compile.
    if inline {
        return run().map_err(|f| to_error(source, name, f));
    }
    let result = std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("ajs-compile".into())
            .stack_size(COMPILE_STACK)
            .spawn_scoped(s, run)
        {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err(Fail::new(0, "internal compiler error"))),
            Err(_) => run(),
        }
    });
    result.map_err(|f| to_error(source, name, f))
}

/// Most units of [`pos::recursion_bound`] (each about half a kilobyte of parser stack at most)
/// for which compiling stays on the caller's stack: at most about 160 KB of it, measured on the
/// deepest sources that stay under the bound (nested calls with callbacks, brackets, `a = a = …`).
const INLINE_UNITS: usize = 256;

/// The longest source compiled without [`pos::prescan`]: each byte opens at most one nesting
/// level, and a level costs the parser at most [`pos::BRACKET_UNITS`] units of stack, so a source
/// this short can neither nest deeper than [`MAX_BRACKET_DEPTH`] nor need the big stack (a test
/// checks that the prescan agrees on 200,000 short sources).
const SHORT_SOURCE: usize = INLINE_UNITS / pos::BRACKET_UNITS;

const _: () = assert!(SHORT_SOURCE <= MAX_BRACKET_DEPTH);

fn to_error(source: &str, name: &str, f: Fail) -> CompileError {
    let idx = LineIndex::new(source);
    let p = idx.pos(f.offset);
    CompileError {
        message: f.message,
        source_name: name.to_string(),
        line: p.line,
        column: p.col,
    }
}

/// Compiles `source`; `nesting` is [`pos::prescan_bodies`]'s verdict on it (its top-level
/// brackets when it passes).
fn compile_inner(
    source: &str,
    opts: &CompileOptions,
    nesting: &Result<pos::Scan, Fail>,
) -> Result<Program, Fail> {
    if source.len() > u32::MAX as usize / 2 {
        return Err(Fail::new(0, "source is too large"));
    }
    let bodies = match nesting {
        Ok((_, bodies)) => bodies.as_slice(),
        Err(f) => return Err(f.clone()),
    };
    // (identifier hashes are for maps keyed by oxc's `Ident`: neither the parser nor the
    // lowering keys any map by one, names are compared as strings)
    let plain_opts = ParseOptions {
        enable_ident_hashes: false,
        ..ParseOptions::default()
    };
    let script_opts = ParseOptions {
        allow_return_outside_function: true,
        ..plain_opts
    };
    match opts.mode {
        Mode::Agent => {
            let (rewritten, raw) = params::rewrite_with(source, bodies);
            with_arena(|alloc| {
                let ret = Parser::new(alloc, &rewritten, SourceType::script())
                    .with_options(plain_opts)
                    .parse();
                if ret.panicked || !ret.diagnostics.is_empty() {
                    return Err(diag_fail(&rewritten, first_diag!(ret.diagnostics)));
                }
                lower::lower_agent(&rewritten, &ret.program.body, &raw, opts)
            })
        }
        Mode::FunctionBody => with_arena(|alloc| {
            let ret = Parser::new(alloc, source, SourceType::script())
                .with_options(script_opts)
                .parse();
            if ret.panicked || !ret.diagnostics.is_empty() {
                return Err(diag_fail(source, first_diag!(ret.diagnostics)));
            }
            lower::lower_statements(source, &ret.program.body, opts, "<function>")
        }),
        Mode::Eval => {
            let expr_err = match with_arena(|alloc| {
                match Parser::new(alloc, source, SourceType::script())
                    .with_options(plain_opts)
                    .parse_expression()
                {
                    Ok(expr) => Ok(lower::lower_expression(source, &expr, opts)),
                    Err(d) => Err(diag_fail(source, first_diag!(d))),
                }
            }) {
                Ok(lowered) => return lowered,
                Err(e) => e,
            };
            let alloc2 = Allocator::default();
            let ret = Parser::new(&alloc2, source, SourceType::script())
                .with_options(script_opts)
                .parse();
            let has_return = has_own_return(&ret.program.body, 0);
            if !ret.panicked && ret.diagnostics.is_empty() {
                if has_return {
                    return lower::lower_statements(source, &ret.program.body, opts, "<eval>");
                }
                // Statements without a `return`: say how to get a result out.
                return Err(Fail::new(
                    expr_err.offset,
                    format!(
                        "{} (code made of statements must `return` its result; without a `return`, Eval reads the code as one expression)",
                        expr_err.message
                    ),
                ));
            }
            if has_return {
                // A block with a return and a syntax error: the script's error is the useful one.
                return Err(diag_fail(source, first_diag!(ret.diagnostics)));
            }
            Err(expr_err)
        }
    }
}

thread_local! {
    /// The parse arena of this thread, kept between compiles (and reset before each) so that
    /// parsing reuses its memory instead of allocating and faulting in fresh chunks every time.
    static ARENA: std::cell::Cell<Option<Allocator>> = const { std::cell::Cell::new(None) };
}

/// Most bytes of arena a thread keeps between compiles (a huge source's arena is freed).
const KEEP_ARENA_BYTES: usize = 4 << 20;

/// Runs `f` with this thread's parse arena, emptied (a new one when it is in use or gone).
fn with_arena<T>(f: impl FnOnce(&Allocator) -> T) -> T {
    let mut alloc = ARENA
        .try_with(std::cell::Cell::take)
        .ok()
        .flatten()
        .unwrap_or_default();
    alloc.reset();
    let r = f(&alloc);
    if alloc.capacity() <= KEEP_ARENA_BYTES {
        alloc.reset();
        let _ = ARENA.try_with(|a| a.set(Some(alloc)));
    }
    r
}

fn diag_fail(source: &str, d: Option<(String, u32)>) -> Fail {
    match d {
        None => Fail::new(0, "SyntaxError: could not parse the code"),
        Some((msg, offset)) => {
            let mut message = format!("SyntaxError: {msg}");
            if source
                .get(offset as usize..)
                .is_some_and(|s| s.starts_with("await"))
                || msg.contains("await")
            {
                message = "AJS has no await: atom calls look synchronous, write `let r = httpFetch({...})`".into();
            }
            Fail::new(offset, message)
        }
    }
}

/// True when the statements contain a `return` of their own (not inside a function or arrow).
fn has_own_return(stmts: &[Statement], depth: u32) -> bool {
    stmts.iter().any(|s| stmt_has_return(s, depth))
}

fn stmt_has_return(s: &Statement, depth: u32) -> bool {
    if depth > 10_000 {
        return false;
    }
    let d = depth + 1;
    match s {
        Statement::ReturnStatement(_) => true,
        Statement::BlockStatement(b) => has_own_return(&b.body, d),
        Statement::IfStatement(i) => {
            stmt_has_return(&i.consequent, d)
                || i.alternate.as_ref().is_some_and(|a| stmt_has_return(a, d))
        }
        Statement::WhileStatement(w) => stmt_has_return(&w.body, d),
        Statement::DoWhileStatement(w) => stmt_has_return(&w.body, d),
        Statement::ForStatement(f) => stmt_has_return(&f.body, d),
        Statement::ForInStatement(f) => stmt_has_return(&f.body, d),
        Statement::ForOfStatement(f) => stmt_has_return(&f.body, d),
        Statement::LabeledStatement(l) => stmt_has_return(&l.body, d),
        Statement::WithStatement(w) => stmt_has_return(&w.body, d),
        Statement::TryStatement(t) => {
            has_own_return(&t.block.body, d)
                || t.handler
                    .as_ref()
                    .is_some_and(|h| has_own_return(&h.body.body, d))
                || t.finalizer
                    .as_ref()
                    .is_some_and(|f| has_own_return(&f.body, d))
        }
        Statement::SwitchStatement(sw) => sw.cases.iter().any(|c| has_own_return(&c.consequent, d)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `compile` assumes of a short source without scanning it, checked on the nastiest
    /// short sources: brackets, template holes, prefix operators, keywords, strings, comments,
    /// regexes and a hashbang, at every length up to `SHORT_SOURCE`.
    #[test]
    fn a_short_source_passes_the_prescan_on_the_callers_stack() {
        let pieces: [&str; 24] = [
            "(", "[", "{", "${", "`", "!", "-", "~", "+", "typeof ", "if", "else ", "a", "/", "'",
            "\"", "//", "/*", "*/", "\n", "#!", "<!--", "-->", "\\",
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..200_000 {
            let mut src = String::new();
            let target = 1 + round % SHORT_SOURCE;
            while src.len() < target {
                let piece = pieces[(next() % pieces.len() as u64) as usize];
                if src.len() + piece.len() > target {
                    break;
                }
                src.push_str(piece);
            }
            for s in [
                src.clone(),
                "(".repeat(target),
                "!".repeat(target),
                "${".repeat(target / 2),
            ] {
                let units = pos::prescan(&s, MAX_BRACKET_DEPTH)
                    .unwrap_or_else(|e| panic!("{s:?} refused by the prescan: {}", e.message));
                assert!(units <= INLINE_UNITS, "{s:?}: {units} units");
            }
        }
    }

    #[test]
    fn an_ordinary_agent_compiles_on_the_callers_stack() {
        let agent = include_str!("../../../benches/programs/agent_8k.js");
        assert!(pos::recursion_bound(agent) <= INLINE_UNITS / 2);
    }
}
