//! The dispatch loop: the instructions run inline, in slices of fuel.

use ajs_bytecode::isa::{Count, Op};
use ajs_bytecode::NativeId;

use super::frames::{grow_frames, Frame};
use super::general::js_rem;
use super::window::{fixed_window, UNDEFINED, WINDOW_FILL};
use super::{malformed_frames, Exit, Vm, MILLI_PER_ELEMENT};
use crate::error::{Fault, OpResult, RunError};
use crate::heap::Cell;
use crate::value::Value;

impl Vm {
    #[inline(never)]
    pub(super) fn exec<const SLOW: bool, const W: usize>(
        &mut self,
        slice_left: &mut u64,
    ) -> OpResult<Exit> {
        // The slice ends when the fuel falls to the floor `exec_slice` sets (see `Fuel`): a
        // block entered inline pays its `Charge` with one subtraction and a sign test (fuel
        // and slice checked at once); the work builtins charge counts towards the slice too.
        let start_fuel = self.meter.fuel.left();
        let result = self.exec_slice::<SLOW, W>(start_fuel, *slice_left);
        *slice_left = slice_left.saturating_sub(start_fuel - self.meter.fuel.left());
        result
    }

    #[inline(always)]
    pub(super) fn exec_slice<const SLOW: bool, const W: usize>(
        &mut self,
        start_fuel: u64,
        slice: u64,
    ) -> OpResult<Exit> {
        // (a slice of more than `i64::MAX` milli-fuel yields once that is spent: never, in
        // practice; so the room fits in an `i64`)
        let floor = start_fuel
            .saturating_sub(slice)
            .max(start_fuel.saturating_sub(i64::MAX as u64));
        self.meter.fuel.set_floor(floor);
        let prog = self.program.clone();
        let consts = self.consts.clone();
        let consts = &consts[..];
        let Some(&Frame { pc, base, .. }) = self.frames.last() else {
            return Ok(Exit::Done(Value::Undefined));
        };
        // every function's code, in one array: a call or return only moves the pc
        let code = prog.code();
        let entries = prog.entries();
        // the running frame, kept in locals (`Call` and `Return` switch them)
        let mut pc = pc as usize;
        // (slow loop only: the instruction at `pc` is dispatched again, and was traced already:
        // a `Call` that grew the frame stack first)
        let mut again = false;
        // The running frame's registers. On the fast path a fixed window of `W` registers
        // (every function of the program has at most that many, see `Vm::run`), indexed with a
        // mask, so a register access needs no bounds check; on the slow path the rest of the
        // register file, checked. Derived again after anything that may touch the register file
        // (a frame switch, an instruction run out of line, a builtin).
        //
        // The running frame's base is not kept in a local (it would be carried through every
        // iteration of the loop): `base!()` reads it from the frame, where only calls, returns
        // and the out-of-line paths need it.
        macro_rules! base {
            () => {
                self.frames.last().map_or(0, |f| f.base as usize)
            };
        }
        macro_rules! window_at {
            ($base:expr) => {
                if SLOW {
                    &mut self.regs[$base..]
                } else {
                    fixed_window::<W>(&mut self.regs, $base)
                }
            };
        }
        macro_rules! window {
            () => {
                window_at!(base!())
            };
        }
        let mut w: &mut [Value] = window_at!(base as usize);
        macro_rules! save_pc {
            () => {
                if let Some(f) = self.frames.last_mut() {
                    f.pc = pc as u32;
                }
            };
        }
        // register `i` of the running frame (`r!` for an operand)
        macro_rules! ri {
            ($i:expr) => {
                w[if SLOW { $i } else { $i & (W - 1) }]
            };
        }
        macro_rules! r {
            ($x:expr) => {
                ri!($x.0 as usize)
            };
        }
        macro_rules! k {
            ($k:expr) => {
                consts[$k.0 as usize]
            };
        }
        // `pc` is a block head, its `Charge`: pays it here, saving a dispatch, unless the
        // run may stop there (the slice is spent or the fuel too low: the `Charge` then runs as
        // an instruction and stops the run at its own pc). Not when tracing (every instruction
        // is traced).
        macro_rules! enter_block {
            () => {
                #[cfg(not(ajs_unmetered))]
                if !SLOW {
                    if let Some(&Op::Charge { amount }) = code.get(pc) {
                        let room = self.meter.fuel.room.wrapping_sub(amount.0 as i64);
                        if room >= 0 {
                            self.meter.fuel.room = room;
                            pc += 1;
                        }
                    }
                }
                #[cfg(ajs_unmetered)]
                if let Some(&Op::Charge { .. }) = code.get(pc) {
                    pc += 1;
                }
            };
        }
        let result: OpResult<Exit> = 'run: loop {
            macro_rules! tryop {
                ($e:expr) => {
                    match $e {
                        Ok(v) => v,
                        Err(f) => {
                            save_pc!();
                            break 'run Err(f);
                        }
                    }
                };
            }
            // back in `frame` (a caller a return resumes): its window and saved pc
            macro_rules! switch_to {
                ($frame:expr) => {
                    pc = $frame.pc as usize;
                    // (not grown: the caller's window was there when it made the call, and the
                    // register file only grows during a slice; one bounds check, and no call that
                    // would spill the result held meanwhile)
                    let b = $frame.base as usize;
                    let caller = if SLOW {
                        self.regs.get_mut(b..)
                    } else {
                        self.regs.get_mut(b..b.wrapping_add(W))
                    };
                    w = match caller {
                        Some(w) => w,
                        None => break 'run Err(Fault::Fatal(malformed_frames())),
                    };
                };
            }
            // Everything not handled inline below runs in `exec_other` (out of line, so that
            // this loop stays small): the pc is saved first, so its errors need no more.
            macro_rules! other {
                () => {{
                    save_pc!();
                    let done = self.exec_other(code[pc], base!());
                    w = window!();
                    if let Err(f) = done {
                        break 'run Err(f);
                    }
                }};
            }
            // When the instruction after a comparison branches on its result (a loop or `if`
            // test), the branch is taken here too: the same two steps, one dispatch. The branch
            // is not a block head (the verifier puts a `Charge` at every head), so it is paid for.
            macro_rules! branch_on {
                ($dst:expr, $t:expr) => {
                    if !SLOW {
                        match code.get(pc + 1) {
                            Some(&Op::JumpIfFalse { cond, target }) if cond.0 == $dst.0 => {
                                pc = if $t { pc + 2 } else { target.0 as usize };
                                enter_block!();
                                continue;
                            }
                            Some(&Op::JumpIfTrue { cond, target }) if cond.0 == $dst.0 => {
                                pc = if $t { target.0 as usize } else { pc + 2 };
                                enter_block!();
                                continue;
                            }
                            _ => {}
                        }
                    }
                };
            }
            macro_rules! num_op {
                ($dst:expr, $x:expr, $y:expr, |$a:ident, $b:ident| $e:expr) => {
                    match ($x, $y) {
                        (Value::Num($a), Value::Num($b)) => r!($dst) = Value::Num($e),
                        _ => other!(),
                    }
                };
            }
            macro_rules! cmp_op {
                ($dst:expr, $x:expr, $y:expr, |$a:ident, $b:ident| $e:expr) => {
                    match ($x, $y) {
                        (Value::Num($a), Value::Num($b)) => {
                            let t = $e;
                            r!($dst) = Value::Bool(t);
                            branch_on!($dst, t);
                        }
                        _ => other!(),
                    }
                };
            }
            // (never past the code: the verifier checked that no function falls off its end
            // and that every target is inside it. Tested here, rather than by indexing, which
            // would panic instead: the loop's registers were allocated worse around the panic's
            // path, every instruction reloading the code's address, once `Call` stopped
            // copying its argument)
            let Some(&op) = code.get(pc) else {
                break 'run Err(Fault::Fatal(malformed_frames()));
            };
            if SLOW {
                let blocked = self.blocks_on_pending(&op, base!());
                // a `ParEnd` still waiting for its calls is traced once, when it completes, and
                // an instruction dispatched again once, the first time
                if self.trace.is_on()
                    && !(blocked
                        || again
                        || (matches!(op, Op::ParEnd { .. }) && self.par_waiting()))
                {
                    let func = self.frames.last().map_or(0, |f| f.func as usize);
                    let pos = prog.span(func, prog.local_pc(func, pc as u32) as usize);
                    self.trace_step(op.name(), pos);
                }
                again = false;
                if blocked {
                    save_pc!();
                    break 'run Ok(Exit::Blocked);
                }
                w = window!();
            }
            // A fused compare-and-branch: two numbers compared inline, the branch taken when the
            // comparison is `$when` (both ways lead a block); anything else compared out of line
            // by `other!()`, like every other instruction's general case, which leaves in the
            // frame the pc to go on at. (Its own slow path in each arm, deriving the window again
            // there, made LLVM lose the window's length.)
            macro_rules! cmp_jump {
                ($x:expr, $y:expr, $target:expr, $when:expr, |$a:ident, $b:ident| $e:expr) => {{
                    if let (Value::Num($a), Value::Num($b)) = ($x, $y) {
                        pc = if ($e) == $when { $target.get() as usize } else { pc + 1 };
                        enter_block!();
                        continue;
                    }
                    other!();
                    pc = self.frames.last().map_or(0, |f| f.pc as usize);
                    continue;
                }};
            }
            // The fused compare-and-branches' arms, expanded from the bytecode crate's family
            // (each form: its comparison on two numbers, its sense, its right operand), around
            // the other arms of the one match.
            macro_rules! dispatch {
                (
                    { $($arms:tt)* }
                    $($cmp:ident ($($o:tt)+) [$ir:ident $ik:ident $ii:ident] [$ur:ident $uk:ident $ui:ident];)*
                ) => {
                    match op {
                        $(
                            Op::$ir { a, b, target } => {
                                cmp_jump!(r!(a), r!(b), target, true, |x, y| x $($o)+ y)
                            }
                            Op::$ur { a, b, target } => {
                                cmp_jump!(r!(a), r!(b), target, false, |x, y| x $($o)+ y)
                            }
                            Op::$ik { a, k, target } => {
                                cmp_jump!(r!(a), k!(k), target, true, |x, y| x $($o)+ y)
                            }
                            Op::$uk { a, k, target } => {
                                cmp_jump!(r!(a), k!(k), target, false, |x, y| x $($o)+ y)
                            }
                            Op::$ii { a, i, target } => {
                                cmp_jump!(r!(a), Value::Num(i.get()), target, true, |x, y| x $($o)+ y)
                            }
                            Op::$ui { a, i, target } => {
                                cmp_jump!(r!(a), Value::Num(i.get()), target, false, |x, y| x $($o)+ y)
                            }
                        )*
                        $($arms)*
                    }
                };
            }
            ajs_bytecode::for_each_fused_branch!(dispatch {
                #[cfg(ajs_unmetered)]
                Op::Charge { .. } => {}
                #[cfg(not(ajs_unmetered))]
                Op::Charge { amount } => {
                    let room = self.meter.fuel.room.wrapping_sub(amount.0 as i64);
                    if room >= 0 {
                        self.meter.fuel.room = room;
                    } else {
                        // the slice is spent, or the fuel is short, or this block's charge
                        // crosses the slice's end (paid: the next block yields)
                        let (amount, left) = (amount.0 as u64, self.meter.fuel.left());
                        if start_fuel - left >= slice || self.meter.fuel.room < 0 {
                            save_pc!();
                            break 'run Ok(Exit::Yield);
                        }
                        if amount > left {
                            self.meter.fuel.set(0);
                            save_pc!();
                            break 'run Err(Fault::Fatal(RunError::out_of_fuel()));
                        }
                        self.meter.fuel.set(left - amount);
                    }
                }
                Op::Move { dst, src } => r!(dst) = r!(src),
                Op::LoadConst { dst, k } => r!(dst) = k!(k),
                Op::LoadUndef { dst } => r!(dst) = Value::Undefined,
                Op::LoadNull { dst } => r!(dst) = Value::Null,
                Op::LoadTrue { dst } => r!(dst) = Value::Bool(true),
                Op::LoadFalse { dst } => r!(dst) = Value::Bool(false),
                Op::Add { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| x + y),
                Op::Sub { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| x - y),
                Op::Mul { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| x * y),
                Op::Div { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| x / y),
                Op::Mod { dst, a, b } => num_op!(dst, r!(a), r!(b), |x, y| js_rem(x, y)),
                Op::AddK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| x + y),
                Op::SubK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| x - y),
                Op::AddI { dst, a, i } => num_op!(dst, r!(a), Value::Num(i.get()), |x, y| x + y),
                Op::SubI { dst, a, i } => num_op!(dst, r!(a), Value::Num(i.get()), |x, y| x - y),
                Op::MulK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| x * y),
                Op::DivK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| x / y),
                Op::ModK { dst, a, k } => num_op!(dst, r!(a), k!(k), |x, y| js_rem(x, y)),
                Op::MulI { dst, a, i } => num_op!(dst, r!(a), Value::Num(i.get()), |x, y| x * y),
                Op::ModI { dst, a, i } => {
                    num_op!(dst, r!(a), Value::Num(i.get()), |x, y| js_rem(x, y))
                }
                Op::Lt { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x < y),
                Op::Le { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x <= y),
                Op::Gt { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x > y),
                Op::Ge { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x >= y),
                Op::StrictEq { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x == y),
                Op::StrictNe { dst, a, b } => cmp_op!(dst, r!(a), r!(b), |x, y| x != y),
                Op::LtK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x < y),
                Op::LeK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x <= y),
                Op::GtK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x > y),
                Op::GeK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x >= y),
                Op::StrictEqK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x == y),
                Op::StrictNeK { dst, a, k } => cmp_op!(dst, r!(a), k!(k), |x, y| x != y),
                Op::StrictEqI { dst, a, i } => {
                    cmp_op!(dst, r!(a), Value::Num(i.get()), |x, y| x == y)
                }
                Op::StrictNeI { dst, a, i } => {
                    cmp_op!(dst, r!(a), Value::Num(i.get()), |x, y| x != y)
                }
                Op::Jump { target } => {
                    pc = target.0 as usize;
                    enter_block!();
                    continue;
                }
                Op::JumpIfTrue { cond, target } => {
                    let t = match r!(cond) {
                        Value::Bool(t) => t,
                        v => {
                            let t = self.truthy(v);
                            w = window!();
                            t
                        }
                    };
                    if t {
                        pc = target.0 as usize;
                        continue;
                    }
                }
                Op::JumpIfFalse { cond, target } => {
                    let t = match r!(cond) {
                        Value::Bool(t) => t,
                        v => {
                            let t = self.truthy(v);
                            w = window!();
                            t
                        }
                    };
                    if !t {
                        pc = target.0 as usize;
                        continue;
                    }
                }
                Op::JumpIfNullish { src, target } => {
                    if matches!(r!(src), Value::Null | Value::Undefined) {
                        pc = target.0 as usize;
                        continue;
                    }
                }
                Op::JumpIfNotNullish { src, target } => {
                    if !matches!(r!(src), Value::Null | Value::Undefined) {
                        pc = target.0 as usize;
                        continue;
                    }
                }
                Op::Return { src } => {
                    let n = self.frames.depth;
                    // the common case: back to a caller from a frame that opened no handler
                    // or batch (the entry frame is marked as if it had); the two frames in one
                    // bounds check (`None` when there is no caller)
                    let below = self.frames.top_but(1);
                    if let Some(&[caller, done]) =
                        self.frames.slots.get(below..below.wrapping_add(2))
                    {
                        if done.opened {
                            // (the slow path below)
                        } else {
                            self.frames.depth = n - 1;
                            // (the result read here, not before the frames: read first, it was
                            // live into the slow path, where calls are, and was kept on the
                            // stack)
                            let v = r!(src);
                            switch_to!(caller);
                            // (through the caller's window: the verifier checked `dst`
                            // against the caller's registers)
                            ri!(done.ret as usize) = v;
                            continue;
                        }
                    }
                    let v = r!(src);
                    let depth = n.saturating_sub(1);
                    while self.tries.last().is_some_and(|t| t.frame as usize >= depth) {
                        self.tries.pop();
                    }
                    if !self.batches.is_empty() {
                        self.par_return(depth as u32);
                    }
                    if depth == 0 {
                        if SLOW && !self.hosts.deferred.is_empty() {
                            // the run would end with deferred calls never settled
                            save_pc!();
                            break 'run Ok(Exit::Blocked);
                        }
                        break 'run Ok(Exit::Done(v));
                    }
                    // (its slot's flag cleared: a call reusing the slot does not write it)
                    if let Some(f) = self.frames.last_mut() {
                        f.opened = false;
                    }
                    let Some(done) = self.frames.pop() else {
                        break 'run Ok(Exit::Done(v));
                    };
                    let Some(&caller) = self.frames.last() else {
                        break 'run Ok(Exit::Done(v));
                    };
                    switch_to!(caller);
                    ri!(done.ret as usize) = v;
                    continue;
                }
                Op::GetIndex { dst, obj, key } => {
                    // an array element by a number in range: the common case, inline
                    if let (Value::Arr(g), Value::Num(n)) = (r!(obj), r!(key)) {
                        if let Cell::Arr(items) = self.heap.get(g) {
                            let i = n as usize;
                            if i as f64 == n {
                                if let Some(&v) = items.get(i) {
                                    r!(dst) = v;
                                    pc += 1;
                                    continue;
                                }
                            }
                        }
                    }
                    other!()
                }
                Op::ArrayLen { dst, arr, .. } => match r!(arr) {
                    Value::Arr(g) => {
                        let n = match self.heap.get(g) {
                            Cell::Arr(a) => a.len(),
                            _ => 0,
                        };
                        r!(dst) = Value::Num(n as f64);
                    }
                    _ => other!(),
                },
                Op::CallNative {
                    dst,
                    native,
                    base: b,
                    argc: Count(2),
                } if native.0 == NativeId::Push as u16 => {
                    // `arr.push(x)`: the common case, inline (charged as the native does)
                    match ri!(b.0 as usize) {
                        Value::Arr(g) => {
                            let x = ri!(b.0 as usize + 1);
                            tryop!(self.charge(MILLI_PER_ELEMENT));
                            let n = tryop!(self.arr_extend(g, &[x], &[x]));
                            w = window!();
                            r!(dst) = Value::Num(n as f64);
                        }
                        _ => other!(),
                    }
                }
                Op::Call {
                    dst,
                    func: callee,
                    base: b,
                    argc,
                } => {
                    // (the callee's start and registers, from the entries kept in a local
                    // before the loop; watch `while`: under another register allocation the local
                    // slowed it)
                    let f = entries[callee.0 as usize];
                    // the caller's frame and the slot above it, in one bounds check (see
                    // `Frames`: the slot exists only below the depth limit)
                    let top = self.frames.top();
                    let Some(pair) = self.frames.slots.get_mut(top..top.wrapping_add(2)) else {
                        // one more spare slot, and this `Call` again (nothing written yet; no
                        // operand is live across the growth, so that the hot path need not
                        // keep them in registers a call preserves)
                        if let Err(e) =
                            grow_frames(&mut self.frames, self.max_call_depth, &prog, callee.0)
                        {
                            save_pc!();
                            break 'run Err(Fault::Fatal(e));
                        }
                        // (traced once: the slow loop does not trace it again)
                        again = SLOW;
                        continue;
                    };
                    let [caller, slot] = pair else {
                        save_pc!();
                        break 'run Err(Fault::Fatal(malformed_frames()));
                    };
                    // the pc the return resumes at
                    caller.pc = pc as u32 + 1;
                    // The callee's window starts at its arguments, inside the caller's: they
                    // are its first registers, in place, not copied. The caller's registers
                    // from there up are its temporaries, dead across the call (the compiler
                    // allocates them as a stack: see `Op::Call`; the verifier does not prove
                    // it, and a program that breaks it only overwrites its own registers).
                    // Not copying the argument matters far more than the instructions it
                    // saves: the copy read as one 16-byte load the value the instruction before
                    // had just written as its tag and its number, a load the CPU cannot forward
                    // from those two stores and waits for.
                    let new_base = caller.base as usize + b.0 as usize;
                    // the callee's registers after its arguments: `undefined` (the verifier
                    // checked argc == params <= nregs)
                    let (argc, nregs) = (argc.0 as usize, f.nregs as usize);
                    // (its pc not written: nothing reads the running frame's pc before
                    // `save_pc!` writes it, the pc being kept in a local until then)
                    // (nor its `opened`: a spare slot's is clear, unless an unwind dropped the
                    // frame that set it, and then its return takes the slow path once, which
                    // is all the flag does)
                    slot.func = callee.0;
                    slot.base = new_base as u32;
                    slot.ret = dst.0 as u32;
                    self.frames.depth = top.wrapping_add(2);
                    pc = f.start as usize;
                    // (`unary`: the callee has one parameter, so `argc` is 1, and at most
                    // `WINDOW_FILL` registers; `small`: at most two parameters. One test for the
                    // usual call. A fixed-size fill through the callee's window, no call; what
                    // it writes above the callee's registers is the caller's dead registers or
                    // the dead file above them. The base as the frame holds it, in `u32`: the
                    // window's end then cannot overflow, one test fewer.)
                    if !SLOW && f.unary {
                        w = window_at!(new_base as u32 as usize);
                        w[1..WINDOW_FILL].copy_from_slice(&UNDEFINED[1..]);
                    } else if !SLOW && f.small {
                        w = window_at!(new_base as u32 as usize);
                        if argc == 2 {
                            w[2..WINDOW_FILL].copy_from_slice(&UNDEFINED[2..]);
                        } else {
                            w[..WINDOW_FILL].copy_from_slice(&UNDEFINED);
                        }
                    } else {
                        self.call_registers(new_base, argc, nregs);
                        w = window_at!(new_base);
                    }
                    enter_block!();
                    continue;
                }
                Op::CallAtom { dst, atom, arg } => {
                    let input = r!(arg);
                    tryop!(self.take_atom(atom.0 as usize));
                    pc += 1;
                    save_pc!();
                    let ret = base!() + dst.0 as usize;
                    break 'run Ok(Exit::Host(atom.0, input, ret as u32));
                }
                Op::ParEnd { dst, settled } => match tryop!(self.par_end(settled.0 != 0)) {
                    Some(v) => {
                        w = window!();
                        r!(dst) = v
                    }
                    None => {
                        save_pc!();
                        break 'run Ok(Exit::Blocked);
                    }
                },
                Op::Throw { src } => {
                    let v = r!(src);
                    let msg = self.message_of(v);
                    save_pc!();
                    break 'run Err(Fault::Guest(msg));
                }
                Op::Pow { .. }
                | Op::Eq { .. }
                | Op::Ne { .. }
                | Op::Neg { .. }
                | Op::Pos { .. }
                | Op::Not { .. }
                | Op::TypeOf { .. }
                | Op::Concat { .. }
                | Op::NewArray { .. }
                | Op::ArrayAppend { .. }
                | Op::NewObject { .. }
                | Op::InitProp { .. }
                | Op::GetProp { .. }
                | Op::ArrayExtend { .. }
                | Op::ObjectAssign { .. }
                | Op::InitIndex { .. }
                | Op::Destructurable { .. }
                | Op::ObjectRest { .. }
                | Op::CallNativeArray { .. }
                | Op::CallNative { .. }
                | Op::ParBegin {}
                | Op::ParCall { .. }
                | Op::ParValue { .. }
                | Op::TryEnter { .. }
                | Op::TryExit {}
                | Op::Catch { .. } => other!(),
            });
            pc += 1;
        };
        #[cfg(ajs_unmetered)]
        let _ = (start_fuel, slice, floor);
        result
    }
}
