//! Compiles AJS source (parsed with oxc) to ajs bytecode.
//!
//! Entry point: [`compile`], or [`Compiler::compile`] to reuse one compile's allocations in the
//! next. The produced [`Program`] holds one function whose parameters are the externals the code
//! uses (see [`CompileOptions`]), with fuel `Charge`s inserted and a span table pointing into the
//! user's source.
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

mod brackets;
mod lower;
mod params;
mod pos;
mod stack;
mod strict_literals;
#[cfg(test)]
mod test_rng;
mod warnings;

use ajs_bytecode::Program;
use oxc_allocator::Allocator;
use oxc_ast::ast::Statement;
use oxc_parser::{ParseOptions, Parser};
use oxc_span::SourceType;

pub use pos::LineIndex;
pub use warnings::{unknown_input, unknown_member, AtomInputs, Warning};

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

/// Most levels of bracket nesting the source may have.
pub const MAX_BRACKET_DEPTH: usize = 256;
/// Most levels of expression/statement nesting the compiler recurses through.
pub const MAX_NESTING: u32 = 200;

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

/// Compiles `source` (with a new [`Compiler`]: nothing is reused from an earlier compile).
///
/// # Errors
/// [`CompileError`] naming what is refused and where; never panics.
pub fn compile(source: &str, opts: &CompileOptions) -> Result<Program, CompileError> {
    Compiler::new().compile(source, opts)
}

/// What one compile leaves for the next to reuse: the parse arena, the lowering's working
/// buffers and a program handed back ([`Compiler::recycle`]). Keep one for a series of compiles
/// (as a host keeps a VM for a series of runs): a small compile then allocates little.
#[derive(Default)]
pub struct Compiler {
    /// The parse arena, reset before each parse (`None` while in use, or when too big to keep).
    arena: Option<Allocator>,
    /// The lowering's buffers and a recycled program.
    kept: lower::Kept,
}

const _: () = {
    const fn send<T: Send>() {}
    send::<Compiler>();
};

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiler").finish_non_exhaustive()
    }
}

impl Compiler {
    /// A compiler that has nothing to reuse yet.
    pub fn new() -> Compiler {
        Compiler::default()
    }

    /// Compiles `source`, in what the previous compiles left (the result is the same as
    /// [`compile`]'s).
    ///
    /// # Errors
    /// [`CompileError`] naming what is refused and where; never panics.
    pub fn compile(
        &mut self,
        source: &str,
        opts: &CompileOptions,
    ) -> Result<Program, CompileError> {
        compile_checked(self, source, opts, None).map(|(p, _)| p)
    }

    /// Compiles `source` and returns the warnings (decision 39) beside the program: an atom
    /// call whose input object, written out, names an input `inputs` does not declare for that
    /// atom.
    ///
    /// # Errors
    /// As [`Compiler::compile`].
    pub fn compile_with_warnings(
        &mut self,
        source: &str,
        opts: &CompileOptions,
        inputs: &AtomInputs,
    ) -> Result<(Program, Vec<Warning>), CompileError> {
        let name = if opts.source_name.is_empty() {
            "<source>"
        } else {
            opts.source_name
        };
        let (program, found) = compile_checked(self, source, opts, Some(inputs))?;
        let idx = LineIndex::new(source);
        let warnings = found
            .into_iter()
            .map(|(offset, message)| {
                let p = idx.pos(offset);
                Warning {
                    message,
                    source_name: name.to_string(),
                    line: p.line,
                    column: p.col,
                }
            })
            .collect();
        Ok((program, warnings))
    }

    /// Hands back a program that is no longer needed: the next compile builds its program in
    /// this one's allocations (its functions' instructions, positions and parameter lists)
    /// instead of allocating them. A big program is dropped instead. Its contents are never
    /// read: only its capacity is reused.
    pub fn recycle(&mut self, program: Program) {
        self.kept.recycle(program);
    }
}

/// Compiles `source` and returns the warnings (decision 39) beside the program (with a new
/// [`Compiler`]).
///
/// # Errors
/// As [`compile`].
pub fn compile_with_warnings(
    source: &str,
    opts: &CompileOptions,
    inputs: &AtomInputs,
) -> Result<(Program, Vec<Warning>), CompileError> {
    Compiler::new().compile_with_warnings(source, opts, inputs)
}

/// [`compile`], collecting the warnings (byte offset, message) when `inputs` is given.
fn compile_checked(
    c: &mut Compiler,
    source: &str,
    opts: &CompileOptions,
    inputs: Option<&AtomInputs>,
) -> Result<(Program, Vec<(u32, String)>), CompileError> {
    let name = if opts.source_name.is_empty() {
        "<source>"
    } else {
        opts.source_name
    };
    let run = |bodies: &[stack::Body]| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match inputs {
            None => compile_inner(c, source, opts, bodies).map(|p| (p, Vec::new())),
            Some(inputs) => {
                // (collected on the thread that compiles: the sink is thread-local)
                let (r, found) =
                    warnings::collect(inputs, || compile_inner(c, source, opts, bodies));
                r.map(|p| (p, found))
            }
        }))
        .unwrap_or_else(|_| Err(Fail::new(0, "internal compiler error")))
    };
    stack::guarded(source, run).map_err(|f| to_error(source, name, brackets::explain(source, f)))
}

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

/// Compiles `source` (on a stack [`stack::guarded`] found big enough; `bodies` are the top-level
/// brackets its scan read, for the parameter rewrite).
fn compile_inner(
    c: &mut Compiler,
    source: &str,
    opts: &CompileOptions,
    bodies: &[stack::Body],
) -> Result<Program, Fail> {
    if source.len() > u32::MAX as usize / 2 {
        return Err(Fail::new(0, "source is too large; pass long data in as an argument instead of writing it in the code: function main({ rows: [{ id: 1 }] })"));
    }
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
            with_arena(&mut c.arena, |alloc| {
                let ret = Parser::new(alloc, &rewritten, SourceType::script())
                    .with_options(plain_opts)
                    .parse();
                if ret.panicked || !ret.diagnostics.is_empty() {
                    return Err(diag_fail(&rewritten, first_diag!(ret.diagnostics)));
                }
                lower::lower_agent(&rewritten, &ret.program.body, &raw, opts, &mut c.kept)
            })
        }
        Mode::FunctionBody => with_arena(&mut c.arena, |alloc| {
            let ret = Parser::new(alloc, source, SourceType::script())
                .with_options(script_opts)
                .parse();
            if ret.panicked || !ret.diagnostics.is_empty() {
                return Err(diag_fail(source, first_diag!(ret.diagnostics)));
            }
            lower::lower_statements(source, &ret.program.body, opts, "<function>", &mut c.kept)
        }),
        Mode::Eval => {
            let expr_err = match with_arena(&mut c.arena, |alloc| {
                match Parser::new(alloc, source, SourceType::script())
                    .with_options(plain_opts)
                    .parse_expression()
                {
                    Ok(expr) => Ok(lower::lower_expression(source, &expr, opts, &mut c.kept)),
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
                    return lower::lower_statements(
                        source,
                        &ret.program.body,
                        opts,
                        "<eval>",
                        &mut c.kept,
                    );
                }
                // Statements without a `return`: say how to get a result out.
                return Err(Fail::new(
                    expr_err.offset,
                    format!(
                        "{} (code made of statements must `return` its result; without a `return`, Eval reads the code as one expression: write return before the result, e.g. return total)",
                        expr_err.message
                    ),
                ));
            }
            // Neither parse: a block with a return has the useful error in the script's; else
            // the parse that got further into the source names the error (decision 38).
            let script_err = diag_fail(source, first_diag!(ret.diagnostics));
            if has_return || script_err.offset > expr_err.offset {
                return Err(script_err);
            }
            Err(expr_err)
        }
    }
}

/// Most bytes of arena a compiler keeps between compiles (a huge source's arena is freed).
const KEEP_ARENA_BYTES: usize = 4 << 20;

/// Runs `f` with the kept parse arena `kept`, emptied (a new one when there is none), and keeps
/// it again after unless it grew large. (Parsing then reuses its memory instead of allocating
/// and faulting in fresh chunks every time.)
fn with_arena<T>(kept: &mut Option<Allocator>, f: impl FnOnce(&Allocator) -> T) -> T {
    let mut alloc = kept.take().unwrap_or_default();
    alloc.reset();
    let r = f(&alloc);
    if alloc.capacity() <= KEEP_ARENA_BYTES {
        alloc.reset();
        *kept = Some(alloc);
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
