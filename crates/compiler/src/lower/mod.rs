//! Lowering of the oxc AST to register bytecode.
//!
//! Registers are numbered virtually while compiling: temporaries and locals grow from 0 like a
//! stack; *specials* (externals, and constants kept in registers loaded once at entry) are numbered
//! down from `u16::MAX`. [`Lowerer::finish`] lays the frame out as `[params][constants][locals and
//! temporaries]`, prepends the constant prologue, remaps every register and jump target, and inserts
//! the fuel charges.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};

use ajs_bytecode::isa::{
    Atom, Base, Const, Count, Dst, Imm, Int, Key, Native, Operand, Src, Target, Visitor,
};
use ajs_bytecode::natives::{NativeId, MATH_CONSTANTS, NUMBER_CONSTANTS};
use ajs_bytecode::program::{
    widen, CompactString, Constant, DebugInfo, Function, SourcePos, StrUnits, MAX_CONSTANTS,
};
use ajs_bytecode::{Op, Program};
use oxc_ast::ast::*;
use oxc_span::{GetSpan, Span};
use smallvec::SmallVec;

use crate::pos::LineIndex;
use crate::{CompileOptions, Fail, Mode, MAX_NESTING};

mod agent;
mod buffers;
mod call;
mod callbacks;
mod catch_binding;
mod constants;
mod destructure;
mod emit;
mod expr;
mod hints;
mod index;
mod layout;
mod names;
mod operands;
mod parallel;
mod regs;
mod replace;
mod scope;
mod spread;
mod stmt;

pub(crate) use agent::lower_agent;

use buffers::*;
use callbacks::CallbackCtx;
use constants::*;
use emit::*;
use index::*;
use layout::*;
use names::*;
use operands::*;
use regs::*;
use scope::*;

pub(crate) use buffers::Kept;

/// A lowering's result. (Its error boxed: a result is then at most two registers wide and
/// returned in them, not through memory, which every call and `?` of the lowering would pay
/// for. An error, rare, pays an allocation.)
type R<T> = Result<T, Box<Fail>>;

/// An error at `span`. (Cold, as [`fail_at`]: the error paths are laid out of the way.)
#[cold]
fn fail<T>(span: Span, msg: impl Into<String>) -> R<T> {
    fail_at(span.start, msg)
}

/// [`fail`] at source offset `offset`.
#[cold]
fn fail_at<T>(offset: u32, msg: impl Into<String>) -> R<T> {
    Err(Box::new(Fail::new(offset, msg)))
}

const ARROW_MSG: &str =
    "arrow functions are only allowed as callback arguments, e.g. items.filter(x => x > 1); for a function you call by name, write a top-level helper function f(x) { … }";

pub(crate) struct Lowerer<'o> {
    opts: &'o CompileOptions<'o>,
    /// The working buffers (moved in and out whole: see [`Buffers`]).
    bufs: Buffers,
    constants: Vec<Constant>,
    num_map: NumMap,
    str_map: StrMap,
    atoms: Vec<String>,
    /// The register of each special value other than a constant loaded so far, by
    /// [`SpecialKey::index`].
    special_regs: Regs,
    /// The register of each external used so far, by its index in `opts.externals`.
    ext_regs: Regs,
    top: u16,
    max_top: u16,
    loops: Vec<LoopCtx>,
    try_depth: u32,
    depth: u32,
    chain: Option<Vec<usize>>,
    /// Callback bodies being lowered, innermost last.
    callbacks: Vec<CallbackCtx>,
    /// Helper functions of an agent program: name -> (function index, arity); one table shared
    /// by every function of the program.
    helpers: Option<&'o agent::Helpers<'o>>,
    /// A register holding the array a callback method iterates, when it was built already
    /// (`Array.from(x, cb)`).
    callback_source: Option<Reg>,
    /// Set by `parallel(xs.map(…))` for the `map` it lowers: the callback's results are
    /// parallel items, not array elements.
    parallel_map: bool,
    /// The parameter names of an agent's function being lowered: its externals, in place of
    /// `opts.externals` (empty then) when there are any (see [`Self::externals`]).
    ext_names: Vec<String>,
    /// The registers of the catch bindings in scope (each the caught message string).
    catch_regs: Vec<Reg>,
}

/// Compiles one expression (Eval expression mode).
pub(crate) fn lower_expression(
    src: &str,
    e: &Expression,
    opts: &CompileOptions,
    kept: &mut Kept,
) -> Result<Program, Fail> {
    expression_program(src, e, opts, kept).map_err(|e| *e)
}

fn expression_program(
    src: &str,
    e: &Expression,
    opts: &CompileOptions,
    kept: &mut Kept,
) -> R<Program> {
    let mut l = Lowerer::new(opts, kept.take_bufs());
    l.open_scope().is_top = true;
    l.with_temps(|l| {
        let r = l.expr(e)?;
        l.emit(Op::Return { src: r.src() }, e.span());
        Ok(())
    })?;
    l.finish(src, "<eval>", kept)
}

/// Compiles a statement list (Eval block mode or FunctionBody).
pub(crate) fn lower_statements(
    src: &str,
    body: &[Statement],
    opts: &CompileOptions,
    name: &str,
    kept: &mut Kept,
) -> Result<Program, Fail> {
    statements_program(src, body, opts, name, kept).map_err(|e| *e)
}

fn statements_program(
    src: &str,
    body: &[Statement],
    opts: &CompileOptions,
    name: &str,
    kept: &mut Kept,
) -> R<Program> {
    let mut l = Lowerer::new(opts, kept.take_bufs());
    if opts.mode == Mode::FunctionBody {
        for (i, p) in opts.externals.iter().enumerate() {
            if forbidden(p) {
                return fail_at(0, forbidden_msg(p));
            }
            let reg = l.new_special(Special::Ext(i), 0)?;
            l.ext_regs.insert(i, reg);
        }
    }
    l.block(body, true, Span::new(0, 0))?;
    let end = Span::new(src.len() as u32, src.len() as u32);
    // falling off the end returns undefined (loaded here, not in the prologue: usually dead code)
    let u = l.alloc(end)?;
    l.emit(Op::LoadUndef { dst: u.dst() }, end);
    l.emit(Op::Return { src: u.src() }, end);
    l.finish(src, name, kept)
}

impl<'o> Lowerer<'o> {
    /// A lowerer working in `bufs` (a compiler's kept buffers: see [`Buffers`]).
    fn new(opts: &'o CompileOptions<'o>, bufs: Buffers) -> Self {
        let pool = Pool {
            constants: Vec::new(),
            num_map: NumMap::default(),
            str_map: StrMap::default(),
            atoms: Vec::new(),
            bufs,
        };
        Self::with_pool(opts, pool)
    }

    /// A lowerer continuing `pool`: the constants, atoms and buffers of the previous functions
    /// of the program.
    fn with_pool(opts: &'o CompileOptions<'o>, pool: Pool) -> Self {
        Lowerer {
            opts,
            bufs: pool.bufs,
            constants: pool.constants,
            num_map: pool.num_map,
            str_map: pool.str_map,
            atoms: pool.atoms,
            special_regs: Regs::default(),
            ext_regs: Regs::default(),
            top: 0,
            max_top: 0,
            loops: Vec::new(),
            try_depth: 0,
            depth: 0,
            chain: None,
            callbacks: Vec::new(),
            helpers: None,
            callback_source: None,
            parallel_map: false,
            ext_names: Vec::new(),
            catch_regs: Vec::new(),
        }
    }

    /// Begins the next function of an agent in this lowerer: what the previous one left in
    /// the per-function fields is forgotten (its buffers were emptied by
    /// [`Self::finish_function`]), the program's pool and helpers stay.
    fn begin_function(&mut self) {
        self.special_regs.0.clear();
        self.ext_regs.0.clear();
        self.top = 0;
        self.max_top = 0;
        self.loops.clear();
        self.try_depth = 0;
        self.depth = 0;
        self.chain = None;
        self.callbacks.clear();
        self.callback_source = None;
        self.parallel_map = false;
    }

    /// The names of the externals: the parameter names of an agent's function, or the options'.
    #[inline]
    fn externals(&self) -> &[String] {
        if self.ext_names.is_empty() {
            self.opts.externals
        } else {
            &self.ext_names
        }
    }

    /// How the helper function `name` is called, if the program has one.
    fn helper(&self, name: &str) -> Option<agent::HelperSig> {
        self.helpers?.get(name)
    }

    /// Runs `f` one nesting level deeper (refused past [`MAX_NESTING`] levels), and back out of
    /// it on every path.
    #[inline(always)]
    fn nested<T>(&mut self, span: Span, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.enter(span)?;
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// One nesting level deeper: refused past [`MAX_NESTING`] (see [`Self::nested`]).
    fn enter(&mut self, span: Span) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return fail(
                span,
                format!("nesting too deep (more than {MAX_NESTING} levels); split the expression into statements (let inner = …) or into helper functions"),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `with_temps`, `in_scope` and `nested` put back the registers, the scopes and the depth
    /// they found, when the lowering inside succeeds and when it fails half-way (`?`), and a
    /// register allocated before them outlives them.
    #[test]
    fn the_scoped_helpers_restore_on_every_path() {
        let opts = CompileOptions::default();
        let mut l = Lowerer::new(&opts, Buffers::default());
        let at = Span::new(0, 0);
        let kept = l.alloc(at).unwrap();
        let state = |l: &Lowerer| (l.next_temp(), l.bufs.nscopes, l.depth);
        let before = state(&l);
        assert_eq!(before.0, kept.plus(1));
        for fails in [false, true] {
            let r: R<()> = l.nested(at, |l| {
                l.in_scope(|l| {
                    l.with_temps(|l| {
                        l.alloc(at)?;
                        l.alloc(at)?;
                        assert_eq!(state(l), (kept.plus(3), 1, 1));
                        if fails {
                            return fail(at, "half-way (an internal test refusal; never shown)");
                        }
                        l.alloc(at)?;
                        Ok(())
                    })
                })
            });
            assert_eq!(r.is_err(), fails);
            assert_eq!(state(&l), before, "fails: {fails}");
        }
    }
}
