//! A verified program: its code flattened into one array, shared, and its allocation reused.

use std::sync::Arc;

use super::*;
use crate::isa::Op;

/// Where a function starts in a verified program's [`VerifiedProgram::code`], and its
/// registers: what a call needs of its callee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// the index of its first instruction (a `Charge`) in the program's code
    pub start: u32,
    /// its registers
    pub nregs: u16,
    /// whether it has at most two parameters and at most [`Entry::SMALL_REGS`] registers (a
    /// call's usual case, tested once)
    pub small: bool,
    /// whether it is [`Entry::small`] with one parameter (the usual call, tested once)
    pub unary: bool,
}

impl Entry {
    /// The most registers of a [`Entry::small`] function.
    pub const SMALL_REGS: u16 = 8;

    pub(super) fn of(start: u32, f: &Function) -> Entry {
        Entry {
            start,
            nregs: f.nregs,
            small: f.params.len() <= 2 && f.nregs <= Entry::SMALL_REGS,
            unary: f.params.len() == 1 && f.nregs <= Entry::SMALL_REGS,
        }
    }
}

/// Every function's code of a verified program in one array, in function order, each jump
/// target (and `try` handler) moved by its function's start: a VM runs a call or a return
/// without switching code.
#[derive(Debug)]
pub(super) struct Flat {
    /// (empty when the program has one function: its code is used as it is)
    pub(super) code: Vec<Op>,
    pub(super) entries: Vec<Entry>,
    /// the string constants: how many, and their code units in all
    pub(super) text: (usize, usize),
}

impl Flat {
    /// (the verifier has checked the functions: their targets are inside them, and their
    /// code fits [`MAX_CODE_LEN`] in all)
    pub(super) fn of(program: &Program) -> Flat {
        let mut flat = Flat {
            code: Vec::new(),
            entries: Vec::new(),
            text: (0, 0),
        };
        flat.fill(program);
        flat
    }

    /// [`Flat::of`] built in this one's vectors (emptied first).
    pub(super) fn fill(&mut self, program: &Program) {
        let Flat {
            code,
            entries,
            text,
        } = self;
        *text = program
            .constants
            .iter()
            .fold((0, 0), |(n, units), c| match c {
                Constant::String(s) => (n + 1, units + s.len()),
                Constant::Number(_) => (n, units),
            });
        let functions = &program.functions[..];
        code.clear();
        entries.clear();
        if let [f] = functions {
            // one function's own code is that array already (see `VerifiedProgram::code`): a
            // snippet or a `SafeFunction` body is not copied
            entries.push(Entry::of(0, f));
            return;
        }
        let total = functions.iter().map(|f| f.code.len()).sum();
        code.reserve(total);
        entries.reserve(functions.len());
        for f in functions {
            let start = code.len() as u32;
            entries.push(Entry::of(start, f));
            // copied whole, then only the instructions with a target moved (the first
            // function's stay: it starts at 0)
            code.extend_from_slice(&f.code);
            if start != 0 {
                for op in &mut code[start as usize..] {
                    // (the flow is a table lookup; only a branch takes `map_target`'s dispatch)
                    if op.flow().has_target() {
                        op.map_target(|t| t + start);
                    }
                }
            }
        }
    }
}

/// A verified program's shared part, in a new allocation.
pub(super) fn new_shared(program: Program) -> Arc<(Program, Flat)> {
    let flat = Flat::of(&program);
    Arc::new((program, flat))
}

/// A program without functions, constants or anything else (allocates nothing).
const EMPTY: Program = Program {
    functions: Vec::new(),
    constants: Vec::new(),
    atoms: Vec::new(),
    entry: 0,
    debug: None,
    signature: None,
};

/// A program that passed [`Program::verify`]; the only kind a VM accepts. Cheap to clone.
#[derive(Clone, Debug)]
pub struct VerifiedProgram(pub(super) Arc<(Program, Flat)>, pub(super) u16);

impl VerifiedProgram {
    /// The verified program.
    pub fn program(&self) -> &Program {
        &self.0 .0
    }

    /// All its functions' code in one array: function `i` starts at `entries()[i].start`, and
    /// every jump target and `try` handler is an index in this array (inside its function).
    #[inline]
    pub fn code(&self) -> &[Op] {
        let (program, flat) = &*self.0;
        match &program.functions[..] {
            [only] => &only.code,
            _ => &flat.code,
        }
    }

    /// Where each function starts in [`VerifiedProgram::code`], and its registers.
    #[inline]
    pub fn entries(&self) -> &[Entry] {
        &self.0 .1.entries
    }

    /// The index in function `func`'s own code of the instruction at `pc` in
    /// [`VerifiedProgram::code`] (0 for a function that does not exist).
    #[inline]
    pub fn local_pc(&self, func: usize, pc: u32) -> u32 {
        pc.saturating_sub(self.entries().get(func).map_or(0, |e| e.start))
    }

    /// The index in [`VerifiedProgram::code`] of instruction `pc` of function `func`'s own code.
    #[inline]
    pub fn flat_pc(&self, func: usize, pc: u32) -> u32 {
        pc.saturating_add(self.entries().get(func).map_or(0, |e| e.start))
    }

    /// Its string constants: how many, and their UTF-16 code units in all (what a run's start
    /// copies into its heap).
    #[inline]
    pub fn string_constants(&self) -> (usize, usize) {
        self.0 .1.text
    }

    /// The most registers any of its functions has.
    #[inline]
    pub fn max_registers(&self) -> usize {
        self.1 as usize
    }

    /// The program itself when this is its last handle (so that its allocations can be reused,
    /// as `ajs_compiler::Compiler::recycle` does); otherwise this handle back.
    ///
    /// # Errors
    /// `self`, when another handle to the program exists.
    #[inline]
    pub fn try_into_program(mut self) -> Result<Program, VerifiedProgram> {
        // (a shared program, the common case, costs one load here)
        if Arc::strong_count(&self.0) != 1 {
            return Err(self);
        }
        let Some((program, _)) = Arc::get_mut(&mut self.0) else {
            return Err(self);
        };
        Ok(std::mem::replace(program, EMPTY))
    }
}

impl std::ops::Deref for VerifiedProgram {
    type Target = Program;
    fn deref(&self) -> &Program {
        &self.0 .0
    }
}
