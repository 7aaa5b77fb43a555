//! The verifier: every check the VM relies on, run before a program may be run.

use super::verified::new_shared;
use super::*;
use crate::isa::{Flow, Op, Operand};
use crate::natives::NativeId;

/// What the verifier sees of one instruction (see `Program::inspect`).
pub(super) struct Inspected {
    /// Whether every operand is valid.
    pub(super) fit: bool,
    /// Its cost ([`Op::cost`]).
    pub(super) cost: u32,
    /// What its check is besides its operands.
    pub(super) flow: Flow,
}

impl Program {
    /// Checks everything the VM relies on: indices in range, frames large enough, jump targets
    /// inside their function, every basic block opened by its exact fuel charge, no fall-through
    /// past the end, native arities and call arities.
    ///
    /// # Errors
    /// [`LoadError`] naming the function, instruction and byte offset at fault.
    pub fn verify(self) -> Result<VerifiedProgram, LoadError> {
        if self.functions.is_empty() {
            return Err(LoadError::Program("no functions".into()));
        }
        if self.functions.len() > MAX_FUNCTIONS
            || self.constants.len() > MAX_CONSTANTS
            || self.atoms.len() > u16::MAX as usize
        {
            return Err(LoadError::Program(
                "too many functions, constants or atoms".into(),
            ));
        }
        // (every function runs out of one array of all the program's code, see `Flat`, with
        // its jump targets in that array: they must fit the 24-bit fused branch targets)
        let total: usize = self.functions.iter().map(|f| f.code.len()).sum();
        if total > MAX_CODE_LEN {
            return Err(LoadError::Program(format!(
                "the program has {total} instructions in all, more than {MAX_CODE_LEN}"
            )));
        }
        // every run looks each atom up in its host's table: a name listed twice would make that
        // uncharged work grow past the host's own atoms
        if self.atoms.len() > 1 {
            let mut names: Vec<&str> = self.atoms.iter().map(String::as_str).collect();
            names.sort_unstable();
            if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                return Err(LoadError::Program(format!(
                    "the atom '{}' is listed twice; an atom is listed once (recompile the program)",
                    w[0]
                )));
            }
        }
        if self.entry as usize >= self.functions.len() {
            return Err(LoadError::Program(format!(
                "entry fn{} does not exist",
                self.entry
            )));
        }
        // every agent run checks its arguments' names against the signature's
        if let Some(sig) = &self.signature {
            let entry = self.functions[self.entry as usize].params.len();
            if sig.params.len() > entry {
                return Err(LoadError::Program(format!(
                    "the signature lists {} parameters but the entry function takes {entry}; recompile the program",
                    sig.params.len()
                )));
            }
        }
        if let Some(d) = &self.debug {
            if d.spans.len() != self.functions.len()
                || d.spans
                    .iter()
                    .zip(&self.functions)
                    .any(|(s, f)| s.len() != f.code.len())
            {
                return Err(LoadError::Program(
                    "span table does not match the code".into(),
                ));
            }
        }
        for (fi, f) in self.functions.iter().enumerate() {
            if f.params.len() > f.nregs as usize || f.params.len() > u8::MAX as usize {
                return Err(LoadError::Program(format!(
                    "function {fi} has more parameters than registers"
                )));
            }
            if f.code.len() > MAX_CODE_LEN {
                return Err(LoadError::Program(format!("function {fi} is too long")));
            }
            // every call fills the callee's frame, uncharged: a frame must be no larger than
            // its code (or its parameters) need
            if f.nregs > FREE_REGISTERS {
                let named = f.registers_named().max(f.params.len() as u32);
                if u32::from(f.nregs) > named {
                    return Err(LoadError::Program(format!(
                        "function {fi} declares {} registers but its code names only {named}; a frame larger than its code needs is refused (recompile the program)",
                        f.nregs
                    )));
                }
            }
            self.verify_function(f)
                .map_err(|(pc, fault)| LoadError::Code {
                    func: fi,
                    pc,
                    offset: f.code[..pc.min(f.code.len())]
                        .iter()
                        .map(|o| {
                            let mut v = Vec::new();
                            o.encode(&mut v);
                            v.len()
                        })
                        .sum(),
                    fault,
                })?;
        }
        let most = self.functions.iter().map(|f| f.nregs).max().unwrap_or(0);
        let shared = new_shared(self);
        Ok(VerifiedProgram(shared, most))
    }

    /// Checks one function's code in one pass over it. The faults of the first kind (operands,
    /// arities) are reported at once, in pc order; then a stray `Catch`; then the block faults
    /// (a leader without its `Charge`, a `Charge` with a wrong amount), which the pass only
    /// notes: their first, by the old precedence, is found by [`first_block_fault`], out of line.
    pub(super) fn verify_function(&self, f: &Function) -> Result<(), (usize, CodeFault)> {
        let code = &f.code[..];
        match code.last() {
            None => return Err((0, CodeFault::FallsOffEnd)),
            Some(op) if !op.is_terminator() => {
                return Err((code.len() - 1, CodeFault::FallsOffEnd))
            }
            _ => {}
        }
        let (nregs, len) = (f.nregs, code.len());
        // whether a leader at `t` is all right: a `Charge`, or past the end (the instruction
        // after the last, which ends a block, is no leader)
        let opens_block = |t: usize| code.get(t).is_none_or(|op| matches!(op, Op::Charge { .. }));
        // Whether some leader (instruction 0, a jump target, an instruction after one that ends
        // a block) is not a `Charge`: a leader is checked by the instruction that makes it one.
        let mut bad_leader = !opens_block(0);
        // Whether some `Charge`'s amount is not its block's cost; the amount of the `Charge`
        // opening the current block and its block's costs so far (before the first `Charge`
        // nothing is open: then instruction 0 is a bad leader anyway).
        let mut bad_amount = false;
        let (mut open_amount, mut sum) = (0u32, 0u32);
        // (`try` is rare: these allocate only for a function that has one)
        // the slot after each handler's `Charge`, where a `Catch` may stand
        let mut catch_slots: Vec<usize> = Vec::new();
        // every `Catch`, in pc order
        let mut catches: Vec<usize> = Vec::new();
        for (pc, op) in code.iter().enumerate() {
            let seen = self.inspect(op, nregs, len);
            if !seen.fit {
                // only a fault takes the full check, which names it
                self.check_operands(op, nregs, len)
                    .map_err(|fault| (pc, fault))?;
            }
            sum += seen.cost;
            if seen.flow == Flow::Next {
                // (most instructions: nothing more to check)
                continue;
            }
            match seen.flow {
                Flow::Next => {}
                // (it closes the block before it and opens its own)
                Flow::Charge => {
                    bad_amount |= sum != open_amount;
                    let amount = match *op {
                        Op::Charge { amount } => amount.0,
                        _ => 0,
                    };
                    (open_amount, sum) = (amount, 0);
                }
                Flow::Jump | Flow::Branch | Flow::TryEnter => {
                    // (the target is inside the function: its operand fits)
                    let t = op.jump_target().unwrap_or(0) as usize;
                    bad_leader |= !opens_block(t) || !opens_block(pc + 1);
                    // The handler block is `Charge; Catch`: the Catch position.
                    if seen.flow == Flow::TryEnter && t + 1 < len {
                        catch_slots.push(t + 1);
                    }
                }
                Flow::Return | Flow::Throw => bad_leader |= !opens_block(pc + 1),
                Flow::Catch => catches.push(pc),
                Flow::Call => {
                    if let Op::Call { func, argc, .. } = *op {
                        // (the function exists: its operand fits)
                        let expected = self
                            .functions
                            .get(func.0 as usize)
                            .map_or(0, |g| g.params.len());
                        if argc.0 as usize != expected {
                            return Err((
                                pc,
                                CodeFault::CallArity {
                                    given: argc.0,
                                    expected,
                                },
                            ));
                        }
                    }
                }
                Flow::CallNative => {
                    // (the native exists: its operand fits)
                    if let Op::CallNative { native, argc, .. } = *op {
                        if let Some(n) = NativeId::from_u16(native.0) {
                            let (min, max) = n.arity();
                            if argc.0 < min || argc.0 > max {
                                return Err((
                                    pc,
                                    CodeFault::NativeArity {
                                        name: n.js_name(),
                                        count: argc.0,
                                        min,
                                        max,
                                    },
                                ));
                            }
                        }
                    }
                }
            }
        }
        if !catches.is_empty() {
            catch_slots.sort_unstable();
            if let Some(&pc) = catches
                .iter()
                .find(|&&pc| catch_slots.binary_search(&pc).is_err())
            {
                return Err((pc, CodeFault::StrayCatch));
            }
        }
        bad_amount |= sum != open_amount;
        if bad_leader || bad_amount {
            return Err(first_block_fault(code));
        }
        Ok(())
    }

    /// What the verifier sees of `op` in one dispatch on it ([`Op::inspect`]): whether every
    /// operand is valid ([`Self::check_operands`] finds no fault), its cost and flow. (The few
    /// instructions whose flow needs an operand read it again: carrying it out of every arm costs
    /// more than that.) (A small callback the compiler inlines into each
    /// instruction's arm, where the kind of each operand is known, so that the usual instruction
    /// costs a few comparisons.)
    #[inline(always)]
    pub(super) fn inspect(&self, op: &Op, nregs: u16, len: usize) -> Inspected {
        let (constants, nfuncs, natoms) = (&self.constants, self.functions.len(), self.atoms.len());
        let mut fit = true;
        let mut base = 0u32;
        let (cost, flow) = op.inspect(|o| {
            fit &= match o {
                Operand::Read(r) | Operand::Write(r) => r < nregs,
                Operand::Base(b) => {
                    base = b as u32;
                    base <= nregs as u32
                }
                Operand::Count(c) => base + c as u32 <= nregs as u32,
                Operand::Const(k) => (k as usize) < constants.len(),
                Operand::Key(k) => matches!(constants.get(k as usize), Some(Constant::String(_))),
                Operand::Target(t) => (t as usize) < len,
                Operand::Imm(_) | Operand::Int(_) => true,
                Operand::Native(n) => NativeId::from_u16(n).is_some(),
                Operand::Func(n) => (n as usize) < nfuncs,
                Operand::Atom(n) => (n as usize) < natoms,
            }
        });
        Inspected { fit, cost, flow }
    }

    /// The first fault of `op`'s operands, in declaration order.
    #[inline(never)]
    pub(super) fn check_operands(&self, op: &Op, nregs: u16, len: usize) -> Result<(), CodeFault> {
        let mut fault = None;
        let mut base = 0u32;
        op.operands(|o| {
            if fault.is_some() {
                return;
            }
            let f = match o {
                // the common case first: a register in range
                Operand::Read(r) | Operand::Write(r) if r < nregs => return,
                Operand::Base(b) => {
                    base = b as u32;
                    (base > nregs as u32).then_some(CodeFault::Register { reg: base, nregs })
                }
                Operand::Count(c) => (base + c as u32 > nregs as u32).then(|| {
                    // c > 0 here: base <= nregs was checked with the Base operand
                    CodeFault::Register {
                        reg: (base + c as u32).saturating_sub(1),
                        nregs,
                    }
                }),
                o => self.check_operand(o, nregs, len),
            };
            if f.is_some() {
                fault = f;
            }
        });
        fault.map_or(Ok(()), Err)
    }

    #[inline]
    pub(super) fn check_operand(&self, o: Operand, nregs: u16, len: usize) -> Option<CodeFault> {
        let reg = |r: u32| {
            if r < nregs as u32 {
                None
            } else {
                Some(CodeFault::Register { reg: r, nregs })
            }
        };
        match o {
            Operand::Read(r) | Operand::Write(r) => reg(r as u32),
            Operand::Base(_) | Operand::Count(_) => None,
            Operand::Const(k) => {
                (k as usize >= self.constants.len()).then_some(CodeFault::Constant(k))
            }
            Operand::Key(k) => match self.constants.get(k as usize) {
                None => Some(CodeFault::Constant(k)),
                Some(Constant::String(_)) => None,
                Some(_) => Some(CodeFault::KeyNotString(k)),
            },
            Operand::Target(t) => (t as usize >= len).then_some(CodeFault::Target(t)),
            Operand::Imm(_) | Operand::Int(_) => None,
            Operand::Native(n) => NativeId::from_u16(n)
                .is_none()
                .then_some(CodeFault::Native(n)),
            Operand::Func(n) => (n as usize >= self.functions.len()).then_some(CodeFault::Func(n)),
            Operand::Atom(n) => (n as usize >= self.atoms.len()).then_some(CodeFault::Atom(n)),
        }
    }
}

/// The first block fault of `code`, a function's code whose operands and arities are valid and
/// which has a block fault (see [`Program::verify_function`]): every basic block must open with
/// `Charge{sum of the costs of the instructions up to the next Charge}`, where jump targets and
/// the instructions after a branch or a terminator are block heads. The first leader without its
/// `Charge` is reported before any wrong amount, then the first wrong amount. (This is the
/// verifier's former second pass over the charges, kept as it was: only a refused program takes
/// it, and it reports that program's fault exactly as the verifier always has.)
#[cold]
#[inline(never)]
pub(super) fn first_block_fault(code: &[Op]) -> (usize, CodeFault) {
    let leaders = crate::isa::leaders(code);
    let mut wrong_amount = None;
    // the Charge opening the current run of instructions: its pc, amount and the sum so far
    let mut open: Option<(usize, u32, u32)> = None;
    for (pc, op) in code.iter().enumerate() {
        if let Op::Charge { amount } = *op {
            if let Some((at, amount, sum)) = open {
                if amount != sum && wrong_amount.is_none() {
                    wrong_amount = Some((at, CodeFault::Charge { expected: sum }));
                }
            }
            open = Some((pc, amount.0, 0));
            continue;
        }
        if leaders.get(pc).copied().unwrap_or(false) {
            return (pc, CodeFault::Charge { expected: 0 });
        }
        match &mut open {
            Some((_, _, sum)) => *sum += op.cost(),
            None => {
                if wrong_amount.is_none() {
                    wrong_amount = Some((pc, CodeFault::StrayCharge));
                }
            }
        }
    }
    if let Some((at, amount, sum)) = open {
        if amount != sum && wrong_amount.is_none() {
            wrong_amount = Some((at, CodeFault::Charge { expected: sum }));
        }
    }
    // (the caller saw a fault: `None` would mean its pass and this one disagree; report the
    // function's first instruction rather than accept)
    wrong_amount.unwrap_or((0, CodeFault::Charge { expected: 0 }))
}
