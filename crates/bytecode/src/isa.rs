//! The instruction set, declared once.
//!
//! Every opcode is one line of the [`define_ops!`] table below: its byte code, its operands (each
//! operand's *kind* says how it is encoded and what the verifier checks about it) and its fuel cost
//! in milli-fuel. The macro derives from that table the [`Op`] enum, the byte encoder and decoder,
//! the disassembler, the operand visitor the verifier uses, and the cost table. Nothing else in the
//! workspace lists opcodes.

use std::fmt;

/// A register that an instruction reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Src(pub u16);
/// A register that an instruction writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dst(pub u16);
/// First register of a contiguous run `base .. base + count` read by the instruction; always
/// followed by its [`Count`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Base(pub u16);
/// Length of the register run opened by the preceding [`Base`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Count(pub u8);
/// An index into the program's constant pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Const(pub u16);
/// An index into the constant pool that must name a string constant (a property key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key(pub u16);
/// An absolute instruction index inside the current function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target(pub u32);
/// An absolute instruction index inside the current function, in 24 bits (every index is: a
/// function, and a whole program, holds at most [`crate::program::MAX_CODE_LEN`] instructions;
/// a verified program's code of all functions has its targets in it), so that a fused
/// compare-and-branch keeps its two operands and its target in one 8-byte instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target24([u8; 3]);

impl Target24 {
    /// The target `t` (its low 24 bits: the caller keeps it below `MAX_CODE_LEN`).
    #[inline]
    pub const fn new(t: u32) -> Target24 {
        let b = t.to_le_bytes();
        Target24([b[0], b[1], b[2]])
    }
    /// The instruction index.
    #[inline]
    pub const fn get(self) -> u32 {
        u32::from_le_bytes([self.0[0], self.0[1], self.0[2], 0])
    }
}

const _: () = assert!(crate::program::MAX_CODE_LEN <= 1 << 24);

/// An unsigned immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Imm(pub u32);
/// A small integer carried in the instruction, the number operand of an arithmetic or a
/// comparison (`i + 1`, `n < 2`) that would otherwise name a constant: no constant-pool read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Int(pub i16);

impl Int {
    /// The immediate holding the number `n`, when `n` is an integer that fits (not `-0`: it
    /// must come back as exactly `n`).
    pub fn of(n: f64) -> Option<Int> {
        let i = n as i16;
        (i as f64 == n && !(n == 0.0 && n.is_sign_negative())).then_some(Int(i))
    }
    /// The number.
    #[inline(always)]
    pub fn get(self) -> f64 {
        self.0 as f64
    }
}
/// A native (builtin function or method) id, see [`crate::natives`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Native(pub u16);
/// An index into the program's function table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Func(pub u16);
/// An index into the program's atom table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Atom(pub u16);

/// One operand as the verifier sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// A register read.
    Read(u16),
    /// A register write.
    Write(u16),
    /// The first register of a run.
    Base(u16),
    /// The length of the run opened by the preceding `Base`.
    Count(u8),
    /// A constant index.
    Const(u16),
    /// A constant index that must be a string.
    Key(u16),
    /// A jump target.
    Target(u32),
    /// An immediate.
    Imm(u32),
    /// A small integer immediate.
    Int(i16),
    /// A native id.
    Native(u16),
    /// A function index.
    Func(u16),
    /// An atom index.
    Atom(u16),
}

/// An operand kind: how it is encoded, and how the verifier sees it.
pub trait OperandKind: Copy + fmt::Debug {
    /// Encoded size in bytes.
    const SIZE: usize;
    /// Appends the little-endian encoding.
    fn encode(self, out: &mut Vec<u8>);
    /// Decodes from exactly `SIZE` bytes.
    fn decode(b: &[u8]) -> Self;
    /// The verifier's view.
    fn operand(self) -> Operand;
    /// Rewrites the register this operand names, if it names one.
    fn map_register<F: Fn(u16) -> u16 + ?Sized>(&mut self, _f: &F) {}
    /// The jump target this operand is, if it is one.
    #[inline(always)]
    fn jump(self) -> Option<u32> {
        None
    }
    /// Rewrites the jump target this operand is, if it is one.
    #[inline(always)]
    fn map_jump<T: Fn(u32) -> u32>(&mut self, _t: &T) {}
    /// Tells `v` the register or jump target this operand names, if it names one.
    #[inline(always)]
    fn visit<V: Visitor>(self, _v: &mut V) {}
}

/// What [`Op::visit`] tells of an instruction: the registers it names and its jump target.
/// (The compiler's view of an instruction when it lays a function out: one match per
/// instruction, each arm calling these directly, where [`Op::operands`] hands every operand
/// over as an [`Operand`] that the caller must match again.)
pub trait Visitor {
    /// A register read or written ([`Src`], [`Dst`]).
    fn register(&mut self, r: u16);
    /// The first register of a run ([`Base`]).
    fn base(&mut self, r: u16);
    /// The jump target ([`Target`], [`Target24`]).
    fn target(&mut self, t: u32);
    /// The instruction is a `Return` or a `Throw` (control does not go on to the next; told
    /// after its operands).
    fn end(&mut self);
}

macro_rules! u16_kind {
    ($t:ident, $v:ident, reg $visit:ident) => {
        u16_kind!($t, $v, {
            fn map_register<F: Fn(u16) -> u16 + ?Sized>(&mut self, f: &F) {
                self.0 = f(self.0);
            }
            #[inline(always)]
            fn visit<V: Visitor>(self, v: &mut V) {
                v.$visit(self.0);
            }
        });
    };
    ($t:ident, $v:ident) => {
        u16_kind!($t, $v, {});
    };
    ($t:ident, $v:ident, { $($extra:tt)* }) => {
        impl OperandKind for $t {
            const SIZE: usize = 2;
            fn encode(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.0.to_le_bytes());
            }
            fn decode(b: &[u8]) -> Self {
                $t(u16::from_le_bytes([b[0], b[1]]))
            }
            fn operand(self) -> Operand {
                Operand::$v(self.0)
            }
            $($extra)*
        }
    };
}
macro_rules! u32_kind {
    ($t:ident, $v:ident) => {
        u32_kind!($t, $v, {});
    };
    ($t:ident, $v:ident, { $($extra:tt)* }) => {
        impl OperandKind for $t {
            const SIZE: usize = 4;
            fn encode(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.0.to_le_bytes());
            }
            fn decode(b: &[u8]) -> Self {
                $t(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
            fn operand(self) -> Operand {
                Operand::$v(self.0)
            }
            $($extra)*
        }
    };
}
u16_kind!(Src, Read, reg register);
u16_kind!(Base, Base, reg base);
u16_kind!(Dst, Write, reg register);
u16_kind!(Const, Const);
u16_kind!(Key, Key);
u16_kind!(Native, Native);
u16_kind!(Func, Func);
u16_kind!(Atom, Atom);
u32_kind!(Target, Target, {
    #[inline(always)]
    fn jump(self) -> Option<u32> {
        Some(self.0)
    }
    #[inline(always)]
    fn visit<V: Visitor>(self, v: &mut V) {
        v.target(self.0);
    }
    #[inline(always)]
    fn map_jump<T: Fn(u32) -> u32>(&mut self, t: &T) {
        self.0 = t(self.0);
    }
});
u32_kind!(Imm, Imm);

impl OperandKind for Int {
    const SIZE: usize = 2;
    fn encode(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        Int(i16::from_le_bytes([b[0], b[1]]))
    }
    fn operand(self) -> Operand {
        Operand::Int(self.0)
    }
}

impl OperandKind for Target24 {
    const SIZE: usize = 3;
    fn encode(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
    fn decode(b: &[u8]) -> Self {
        Target24([b[0], b[1], b[2]])
    }
    fn operand(self) -> Operand {
        Operand::Target(self.get())
    }
    #[inline(always)]
    fn jump(self) -> Option<u32> {
        Some(self.get())
    }
    #[inline(always)]
    fn visit<V: Visitor>(self, v: &mut V) {
        v.target(self.get());
    }
    #[inline(always)]
    fn map_jump<T: Fn(u32) -> u32>(&mut self, t: &T) {
        *self = Target24::new(t(self.get()));
    }
}

impl OperandKind for Count {
    const SIZE: usize = 1;
    fn encode(self, out: &mut Vec<u8>) {
        out.push(self.0);
    }
    fn decode(b: &[u8]) -> Self {
        Count(b[0])
    }
    fn operand(self) -> Operand {
        Operand::Count(self.0)
    }
}

/// Decoding failure of one instruction (the caller adds the offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeFault {
    /// The byte is not an opcode.
    UnknownOpcode(u8),
    /// The instruction runs past the end of the code.
    Truncated,
}

/// Milli-fuel: the integer unit every cost is counted in (1 fuel = 1000 milli-fuel).
pub const MILLI: u64 = 1000;
/// The cost of an ordinary instruction.
pub const BASE: u32 = 100;

macro_rules! define_ops {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident = $code:literal { $($field:ident : $kind:ident),* } cost $cost:expr, flow $flow:ident;
    )*) => {
        /// One instruction. Readable and typed for the compiler; encoded to compact bytes in
        /// artifacts; decoded and verified before the VM runs it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Op {
            $(
                $(#[doc = $doc])*
                $name { $(
                    #[allow(missing_docs)]
                    $field: $kind
                ),* },
            )*
        }

        impl Op {
            /// The opcode byte.
            pub fn opcode(&self) -> u8 {
                match self { $( Op::$name { .. } => $code, )* }
            }
            /// The mnemonic.
            pub fn name(&self) -> &'static str {
                match self { $( Op::$name { .. } => stringify!($name), )* }
            }
            /// How control goes on after it (the table's `flow` column).
            #[inline(always)]
            pub const fn flow(&self) -> Flow {
                match self { $( Op::$name { .. } => Flow::$flow, )* }
            }
            /// Static fuel cost in milli-fuel (size-proportional work is charged at run time).
            /// (Always inlined: one load from a table, asked of every instruction the layout
            /// places.)
            #[inline(always)]
            pub fn cost(&self) -> u32 {
                match self { $( Op::$name { .. } => $cost, )* }
            }
            /// Appends the encoding (opcode byte, then each operand little-endian).
            pub fn encode(&self, out: &mut Vec<u8>) {
                match *self {
                    $( Op::$name { $($field),* } => {
                        out.push($code);
                        $( OperandKind::encode($field, out); )*
                    } )*
                }
            }
            /// Decodes one instruction from the start of `b`, returning it and its length.
            ///
            /// # Errors
            /// [`DecodeFault`] when the opcode is unknown or the operands are cut off.
            pub fn decode(b: &[u8]) -> Result<(Op, usize), DecodeFault> {
                let code = *b.first().ok_or(DecodeFault::Truncated)?;
                match code {
                    $( $code => {
                        let len = 1 $( + <$kind as OperandKind>::SIZE )*;
                        if b.len() < len { return Err(DecodeFault::Truncated); }
                        #[allow(unused_mut, unused_variables)]
                        let mut at = 1usize;
                        $(
                            let $field = <$kind as OperandKind>::decode(&b[at..]);
                            at += <$kind as OperandKind>::SIZE;
                        )*
                        let _ = at;
                        Ok((Op::$name { $($field),* }, len))
                    } )*
                    other => Err(DecodeFault::UnknownOpcode(other)),
                }
            }
            /// Rewrites every register operand (reads, writes, run bases) through `f`.
            #[inline]
            pub fn map_registers<F: Fn(u16) -> u16 + ?Sized>(&mut self, f: &F) {
                match self {
                    $( Op::$name { $($field),* } => { $( OperandKind::map_register($field, f); )* } )*
                }
            }
            /// Where control may go besides the next instruction (its one `Target` or
            /// `Target24` operand). (Always inlined: asked wherever the lowering copies a loop's
            /// test or patches a jump.)
            #[inline(always)]
            pub fn jump_target(&self) -> Option<u32> {
                // (one match: the compiler and the verifier ask this of every instruction)
                match *self {
                    $( Op::$name { $($field),* } => {
                        $( if let Some(t) = OperandKind::jump($field) { return Some(t); } )*
                        None
                    } )*
                }
            }
            /// Rewrites the jump target (see [`Op::jump_target`]) through `f`; `f` must keep it
            /// below [`crate::program::MAX_CODE_LEN`].
            #[inline]
            pub fn map_target(&mut self, f: impl Fn(u32) -> u32) {
                match self {
                    $( Op::$name { $($field),* } => { $( OperandKind::map_jump($field, &f); )* } )*
                }
            }
            /// [`Op::map_registers`] through `f` and [`Op::map_target`] through `t`, in one
            /// match (`t` must keep the target below [`crate::program::MAX_CODE_LEN`]).
            #[inline]
            pub fn map_registers_and_target<F, T>(&mut self, f: &F, t: &T)
            where
                F: Fn(u16) -> u16 + ?Sized,
                T: Fn(u32) -> u32,
            {
                match self {
                    $( Op::$name { $($field),* } => { $(
                        OperandKind::map_register($field, f);
                        OperandKind::map_jump($field, t);
                    )* } )*
                }
            }
            /// Calls `f` with every operand, in declaration order (the verifier's view).
            #[inline]
            pub fn operands(&self, mut f: impl FnMut(Operand)) {
                match *self {
                    $( Op::$name { $($field),* } => { $( f(OperandKind::operand($field)); )* } )*
                }
                let _ = &mut f;
            }
            /// Tells `v` every register this instruction names and its jump target, in
            /// declaration order (what [`Op::operands`] gives as [`Operand::Read`],
            /// [`Operand::Write`], [`Operand::Base`] and [`Operand::Target`]), then whether it
            /// is a `Return` or a `Throw` (which, with the jumps, are [`Op::ends_block`]).
            /// (Always inlined: the compiler's layout asks it of every instruction, and LLVM made
            /// it a call once the table grew.)
            #[inline(always)]
            pub fn visit<V: Visitor>(&self, v: &mut V) {
                match *self {
                    $( Op::$name { $($field),* } => {
                        $( OperandKind::visit($field, v); )*
                        if const { Flow::$flow.leaves() } {
                            v.end();
                        }
                    } )*
                }
            }
            /// The verifier's one dispatch on an instruction: calls `f` with every operand, in
            /// declaration order (as [`Op::operands`]), and returns the instruction's cost (as
            /// [`Op::cost`]) and its [`Flow`]. (Each arm is its instruction's operand checks and two
            /// constants: the verifier looks at an instruction once, not once per question.)
            #[inline(always)]
            pub(crate) fn inspect(&self, mut f: impl FnMut(Operand)) -> (u32, Flow) {
                match *self {
                    $( Op::$name { $($field),* } => {
                        $( f(OperandKind::operand($field)); )*
                        ($cost, Flow::$flow)
                    } )*
                }
            }
        }

        /// The instruction table as text; hashed into [`ISA_HASH`].
        pub const ISA_TEXT: &str = concat!($( stringify!($name = $code { $($field : $kind),* } cost $cost;), )*);
    };
}

define_ops! {
    /// Meter: charges `amount` milli-fuel. Opens every basic block; the verifier recomputes it.
    Charge = 0x01 { amount: Imm } cost 0, flow Charge;
    /// `dst = src`.
    Move = 0x02 { dst: Dst, src: Src } cost BASE, flow Next;
    /// `dst = constant`.
    LoadConst = 0x03 { dst: Dst, k: Const } cost BASE, flow Next;
    /// `dst = undefined`.
    LoadUndef = 0x04 { dst: Dst } cost BASE, flow Next;
    /// `dst = null`.
    LoadNull = 0x05 { dst: Dst } cost BASE, flow Next;
    /// `dst = true`.
    LoadTrue = 0x06 { dst: Dst } cost BASE, flow Next;
    /// `dst = false`.
    LoadFalse = 0x07 { dst: Dst } cost BASE, flow Next;
    /// `dst = a + b` (numbers add, strings concatenate; arrays and objects refused).
    Add = 0x10 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a - b`.
    Sub = 0x11 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a * b`.
    Mul = 0x12 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a / b`.
    Div = 0x13 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a % b`.
    Mod = 0x14 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a ** b`.
    Pow = 0x15 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a == b` with AJS's rule (no coercion; null == undefined; NaN == NaN).
    Eq = 0x16 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a != b` with AJS's rule.
    Ne = 0x17 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a === b`.
    StrictEq = 0x18 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a !== b`.
    StrictNe = 0x19 { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a < b`.
    Lt = 0x1a { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a <= b`.
    Le = 0x1b { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a > b`.
    Gt = 0x1c { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = a >= b`.
    Ge = 0x1d { dst: Dst, a: Src, b: Src } cost BASE, flow Next;
    /// `dst = -src`.
    Neg = 0x20 { dst: Dst, src: Src } cost BASE, flow Next;
    /// `dst = +src`.
    Pos = 0x21 { dst: Dst, src: Src } cost BASE, flow Next;
    /// `dst = !src`.
    Not = 0x22 { dst: Dst, src: Src } cost BASE, flow Next;
    /// `dst = typeof src`.
    TypeOf = 0x23 { dst: Dst, src: Src } cost BASE, flow Next;
    /// `dst` = the template-literal concatenation of the registers in `parts`.
    Concat = 0x24 { dst: Dst, base: Base, count: Count } cost BASE, flow Next;
    /// Unconditional jump.
    Jump = 0x30 { target: Target } cost BASE, flow Jump;
    /// Jump when `cond` is truthy.
    JumpIfTrue = 0x31 { cond: Src, target: Target } cost BASE, flow Branch;
    /// Jump when `cond` is falsy.
    JumpIfFalse = 0x32 { cond: Src, target: Target } cost BASE, flow Branch;
    /// Jump when `src` is null or undefined.
    JumpIfNullish = 0x33 { src: Src, target: Target } cost BASE, flow Branch;
    /// Jump when `src` is neither null nor undefined.
    JumpIfNotNullish = 0x34 { src: Src, target: Target } cost BASE, flow Branch;
    /// Return `src` from the current function.
    Return = 0x35 { src: Src } cost BASE, flow Return;
    /// `dst` = a new array holding the registers of `items`.
    NewArray = 0x40 { dst: Dst, base: Base, count: Count } cost BASE, flow Next;
    /// Appends the registers of `items` to the array in `arr` (long array literals).
    ArrayAppend = 0x41 { arr: Src, base: Base, count: Count } cost BASE, flow Next;
    /// `dst` = a new empty object.
    NewObject = 0x42 { dst: Dst } cost BASE, flow Next;
    /// Defines own property `key` of the object in `obj` as `val` (object literals).
    InitProp = 0x43 { obj: Src, key: Key, val: Src } cost BASE, flow Next;
    /// `dst = obj.key`; null-safe (undefined when `obj` is null or undefined).
    GetProp = 0x44 { dst: Dst, obj: Src, key: Key } cost BASE, flow Next;
    /// `dst = obj[key]`; null-safe.
    GetIndex = 0x45 { dst: Dst, obj: Src, key: Src } cost BASE, flow Next;
    /// `dst` = the length of the array in `arr`, for a callback method named by the string
    /// constant `method`; raises a guest error when `arr` is not an array.
    ArrayLen = 0x46 { dst: Dst, arr: Src, method: Key } cost BASE, flow Next;
    /// Appends every element of the array in `src` to the array in `arr` (`[...src]`).
    ArrayExtend = 0x47 { arr: Src, src: Src } cost BASE, flow Next;
    /// Copies the own properties of `src` into the object in `obj` (`{...src}`); null and
    /// undefined copy nothing.
    ObjectAssign = 0x48 { obj: Src, src: Src } cost BASE, flow Next;
    /// Defines property `key` (a run-time value made a property key) of the object in `obj`.
    InitIndex = 0x49 { obj: Src, key: Src, val: Src } cost BASE, flow Next;
    /// `dst` = `src` made ready to destructure: a guest error for null or undefined; with
    /// `array` 1, a string becomes the array of its code points and anything else that is not an
    /// array is an error.
    Destructurable = 0x4a { dst: Dst, src: Src, array: Count } cost BASE, flow Next;
    /// `dst` = a copy of the object in `src` without the keys held (as strings) in the registers
    /// `base .. base + count` (`let { a, ...rest } = src`).
    ObjectRest = 0x4b { dst: Dst, src: Src, base: Base, count: Count } cost BASE, flow Next;
    /// `dst = native(...args)` where `args` is an array built at run time (spread arguments); the
    /// arity is checked when it runs.
    CallNativeArray = 0x4c { dst: Dst, native: Native, args: Src } cost BASE, flow Next;
    /// `dst = native(args…)`; for a method the receiver is the first register of `args`.
    CallNative = 0x50 { dst: Dst, native: Native, base: Base, argc: Count } cost BASE, flow CallNative;
    /// `dst = func(args…)`: calls a function of this program. The calling convention: the
    /// callee's registers start at `base` (its arguments are its first registers, in place),
    /// over the caller's registers from `base` up, which the callee may overwrite; a caller
    /// keeps nothing it reads after the call there, except `dst`, which the callee's `Return`
    /// writes ([`crate::Function::call_clobber`] checks a function for this; the verifier does
    /// not, since breaking it only changes the caller's own registers).
    Call = 0x51 { dst: Dst, func: Func, base: Base, argc: Count } cost BASE, flow Call;
    /// `dst = atom(arg)`: asks the host (the run pauses until the host answers).
    CallAtom = 0x52 { dst: Dst, atom: Atom, arg: Src } cost BASE, flow Next;
    /// Raises a guest error whose message is `src` made a string (`Error('…')`).
    Throw = 0x53 { src: Src } cost BASE, flow Throw;
    /// Opens a batch of concurrent host calls (`parallel([...])`).
    ParBegin = 0x54 { } cost BASE, flow Next;
    /// Queues `atom(arg)` in the innermost open batch: charged and counted like `CallAtom`, but
    /// the run goes on; the host performs the batch's calls together at `ParEnd`.
    ParCall = 0x55 { atom: Atom, arg: Src } cost BASE, flow Next;
    /// Queues a plain value in the innermost open batch (an item that is not an atom call).
    ParValue = 0x56 { src: Src } cost BASE, flow Next;
    /// Closes the innermost batch: waits until the host has settled every queued call, then
    /// `dst` = the array of the items' results in order. With `settled` 0 the first failed call
    /// (by position) raises its error; with 1 each item is `{ ok, value }` or `{ ok, error }`.
    ParEnd = 0x57 { dst: Dst, settled: Imm } cost BASE, flow Next;
    /// Installs a handler: a guest error raised before the matching `TryExit` jumps to `handler`.
    TryEnter = 0x60 { handler: Target } cost BASE, flow TryEnter;
    /// Removes the innermost handler of the current frame.
    TryExit = 0x61 { } cost BASE, flow Next;
    /// `dst` = the message of the guest error being handled (first instruction of a handler).
    Catch = 0x62 { dst: Dst } cost BASE, flow Catch;
    /// `dst = a + constant` (as `Add` with the constant `k` as its right operand).
    AddK = 0x70 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a - constant`.
    SubK = 0x71 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a + i` (as `AddK` with a small integer carried in the instruction).
    AddI = 0x7b { dst: Dst, a: Src, i: Int } cost BASE, flow Next;
    /// `dst = a - i`.
    SubI = 0x7c { dst: Dst, a: Src, i: Int } cost BASE, flow Next;
    /// `dst = a * constant`.
    MulK = 0x72 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a / constant`.
    DivK = 0x73 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a % constant`.
    ModK = 0x74 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a < constant`.
    LtK = 0x75 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a <= constant`.
    LeK = 0x76 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a > constant`.
    GtK = 0x77 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a >= constant`.
    GeK = 0x78 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a === constant`.
    StrictEqK = 0x79 { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    /// `dst = a !== constant`.
    StrictNeK = 0x7a { dst: Dst, a: Src, k: Const } cost BASE, flow Next;
    // Fused compare-and-branch (`if (a < b)` in one step): the compiler fuses a comparison and
    // the branch on its result when nothing else reads the result; each costs what the two
    // instructions it replaces cost. `JumpUnless*` also jumps when a comparison with NaN is false.
    /// Jumps to `target` when `a < b`.
    JumpIfLt = 0x80 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a < b`.
    JumpUnlessLt = 0x81 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a <= b`.
    JumpIfLe = 0x82 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a <= b`.
    JumpUnlessLe = 0x83 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a > b`.
    JumpIfGt = 0x84 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a > b`.
    JumpUnlessGt = 0x85 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a >= b`.
    JumpIfGe = 0x86 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a >= b`.
    JumpUnlessGe = 0x87 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a === b`.
    JumpIfStrictEq = 0x88 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a !== b`.
    JumpIfStrictNe = 0x89 { a: Src, b: Src, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a < constant`.
    JumpIfLtK = 0x8a { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a < constant`.
    JumpUnlessLtK = 0x8b { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a <= constant`.
    JumpIfLeK = 0x8c { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a <= constant`.
    JumpUnlessLeK = 0x8d { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a > constant`.
    JumpIfGtK = 0x8e { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a > constant`.
    JumpUnlessGtK = 0x8f { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a >= constant`.
    JumpIfGeK = 0x90 { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a >= constant`.
    JumpUnlessGeK = 0x91 { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a === constant`.
    JumpIfStrictEqK = 0x92 { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a !== constant`.
    JumpIfStrictNeK = 0x93 { a: Src, k: Const, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a < i` (the `K` forms with a small integer carried in the
    /// instruction).
    JumpIfLtI = 0x94 { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a < i`.
    JumpUnlessLtI = 0x95 { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a <= i`.
    JumpIfLeI = 0x96 { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a <= i`.
    JumpUnlessLeI = 0x97 { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a > i`.
    JumpIfGtI = 0x98 { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a > i`.
    JumpUnlessGtI = 0x99 { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a >= i`.
    JumpIfGeI = 0x9a { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` unless `a >= i`.
    JumpUnlessGeI = 0x9b { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a === i`.
    JumpIfStrictEqI = 0x9c { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// Jumps to `target` when `a !== i`.
    JumpIfStrictNeI = 0x9d { a: Src, i: Int, target: Target24 } cost 2 * BASE, flow Branch;
    /// `dst = a * i` (as `MulK` with a small integer carried in the instruction).
    MulI = 0xa0 { dst: Dst, a: Src, i: Int } cost BASE, flow Next;
    /// `dst = a % i`.
    ModI = 0xa1 { dst: Dst, a: Src, i: Int } cost BASE, flow Next;
    /// `dst = a === i`.
    StrictEqI = 0xa2 { dst: Dst, a: Src, i: Int } cost BASE, flow Next;
    /// `dst = a !== i`.
    StrictNeI = 0xa3 { dst: Dst, a: Src, i: Int } cost BASE, flow Next;
}

/// FNV-1a of [`ISA_TEXT`]: artifacts built from another instruction table are refused.
pub const ISA_HASH: u64 = {
    let b = ISA_TEXT.as_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < b.len() {
        h ^= b[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
};

/// How control goes on after an instruction: the `flow` column of the [`define_ops!`] table.
/// The verifier's block checks, the block heads ([`leaders`]), [`Op::is_terminator`],
/// [`Op::ends_block`] and the compiler's block analysis ([`Visitor::end`]) all read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Goes on to the next instruction (it adds its cost to its block).
    Next,
    /// `Charge`: opens a block.
    Charge,
    /// Always jumps to its target (`Jump`).
    Jump,
    /// Jumps to its target or goes on to the next (the conditional jumps and the fused
    /// compare-and-branches).
    Branch,
    /// `TryEnter`: goes on, with its target the handler a throw in its region goes to.
    TryEnter,
    /// `Catch`: must be the second instruction of a handler.
    Catch,
    /// Returns from the function.
    Return,
    /// Throws: to a handler, or out of the run.
    Throw,
    /// `Call`: goes on when the callee returns; its argument count is its callee's.
    Call,
    /// `CallNative`: goes on; its argument count is inside its native's arity.
    CallNative,
}

impl Flow {
    /// Whether the instruction has a jump target ([`Op::jump_target`]).
    #[inline(always)]
    pub const fn has_target(self) -> bool {
        matches!(self, Flow::Jump | Flow::Branch | Flow::TryEnter)
    }

    /// Whether control never goes on to the next instruction.
    #[inline(always)]
    pub const fn is_terminator(self) -> bool {
        matches!(self, Flow::Jump | Flow::Return | Flow::Throw)
    }

    /// Whether it leaves the function without a target (`Return`, `Throw`).
    #[inline(always)]
    pub const fn leaves(self) -> bool {
        matches!(self, Flow::Return | Flow::Throw)
    }

    /// Whether it ends a basic block: it jumps, may jump, installs a handler or leaves.
    #[inline(always)]
    pub const fn ends_block(self) -> bool {
        self.has_target() || self.leaves()
    }
}

/// The compare-and-branch family, declared once: for each comparison (a [`Cmp`]), its
/// operator on two numbers, and its fused branches taken when it holds (`JumpIf*`) and unless it
/// holds (`JumpUnless*`; for `StrictEq`, `JumpIfStrictNe*`), each with a register, a constant and
/// an immediate right operand. It calls back `$m!` with any tokens given after `$m` and then the
/// rows, `Cmp (op) [if: reg const int] [unless: reg const int];` (as wasmi's `for_each_op!`):
/// [`Op::fused`], [`Fused::op`], [`Op::with_const_operand`], [`Op::with_int_operand`] and the
/// VM's inline and out-of-line arms are expanded from it. (The instructions themselves stay in
/// the [`define_ops!`] table, whose text is the [`ISA_HASH`] fingerprint; a test checks that the
/// rows name 30 distinct instructions of it.)
#[macro_export]
macro_rules! for_each_fused_branch {
    ($m:ident $($extra:tt)*) => {
        $m! {
            $($extra)*
            Lt (<) [JumpIfLt JumpIfLtK JumpIfLtI] [JumpUnlessLt JumpUnlessLtK JumpUnlessLtI];
            Le (<=) [JumpIfLe JumpIfLeK JumpIfLeI] [JumpUnlessLe JumpUnlessLeK JumpUnlessLeI];
            Gt (>) [JumpIfGt JumpIfGtK JumpIfGtI] [JumpUnlessGt JumpUnlessGtK JumpUnlessGtI];
            Ge (>=) [JumpIfGe JumpIfGeK JumpIfGeI] [JumpUnlessGe JumpUnlessGeK JumpUnlessGeI];
            StrictEq (==)
                [JumpIfStrictEq JumpIfStrictEqK JumpIfStrictEqI]
                [JumpIfStrictNe JumpIfStrictNeK JumpIfStrictNeI];
        }
    };
}

impl Op {
    /// The fused compare-and-branch for this comparison (`Lt`, `StrictEq`, `LtK`, …) writing
    /// `cond`, followed by a branch to `target` taken when `cond` is `when`: `None` when this is
    /// not a comparison writing `cond`. (The caller makes sure nothing else reads `cond`.)
    pub fn fused_branch(&self, cond: u16, when: bool, target: u32) -> Option<Op> {
        let (cmp, a, right, negated) = match *self {
            Op::Lt { dst, a, b } if dst.0 == cond => (Cmp::Lt, a, Right::Reg(b), false),
            Op::Le { dst, a, b } if dst.0 == cond => (Cmp::Le, a, Right::Reg(b), false),
            Op::Gt { dst, a, b } if dst.0 == cond => (Cmp::Gt, a, Right::Reg(b), false),
            Op::Ge { dst, a, b } if dst.0 == cond => (Cmp::Ge, a, Right::Reg(b), false),
            Op::StrictEq { dst, a, b } if dst.0 == cond => (Cmp::StrictEq, a, Right::Reg(b), false),
            Op::StrictNe { dst, a, b } if dst.0 == cond => (Cmp::StrictEq, a, Right::Reg(b), true),
            Op::LtK { dst, a, k } if dst.0 == cond => (Cmp::Lt, a, Right::Const(k), false),
            Op::LeK { dst, a, k } if dst.0 == cond => (Cmp::Le, a, Right::Const(k), false),
            Op::GtK { dst, a, k } if dst.0 == cond => (Cmp::Gt, a, Right::Const(k), false),
            Op::GeK { dst, a, k } if dst.0 == cond => (Cmp::Ge, a, Right::Const(k), false),
            Op::StrictEqK { dst, a, k } if dst.0 == cond => {
                (Cmp::StrictEq, a, Right::Const(k), false)
            }
            Op::StrictNeK { dst, a, k } if dst.0 == cond => {
                (Cmp::StrictEq, a, Right::Const(k), true)
            }
            _ => return None,
        };
        // (`a !== b` is exactly `!(a === b)`: one pair of instructions serves both)
        let when = when != negated;
        Some(
            Fused {
                cmp,
                when,
                a,
                right,
                target: Target24::new(target),
            }
            .op(),
        )
    }
    /// This instruction with its constant operand carried as a small integer (`AddK r, a, k`
    /// becomes `AddI r, a, 1`) when it has an immediate form and `int_of` says the constant is
    /// such an integer (see [`Int::of`]).
    #[inline]
    pub fn with_int_operand(&self, int_of: impl Fn(Const) -> Option<Int>) -> Option<Op> {
        // (one match: each constant form with a destination and its immediate form, then the
        // fused branches' from the family)
        macro_rules! int_forms {
            (
                { $($k:ident => $i:ident),* }
                $($cmp:ident ($($o:tt)+) [$ir:ident $ik:ident $ii:ident] [$ur:ident $uk:ident $ui:ident];)*
            ) => {
                Some(match *self {
                    $(Op::$k { dst, a, k } => Op::$i { dst, a, i: int_of(k)? },)*
                    $(
                        Op::$ik { a, k, target } => Op::$ii { a, i: int_of(k)?, target },
                        Op::$uk { a, k, target } => Op::$ui { a, i: int_of(k)?, target },
                    )*
                    _ => return None,
                })
            };
        }
        for_each_fused_branch!(int_forms {
            AddK => AddI, SubK => SubI, MulK => MulI, ModK => ModI,
            StrictEqK => StrictEqI, StrictNeK => StrictNeI
        })
    }
    /// This instruction with its right register operand `b` replaced by a constant (`Add r, a,
    /// b` becomes `AddK r, a, k`) when it has a constant form and `const_of(b)` names the
    /// constant `b` holds. (One match over the instruction, read where it is: the compiler asks
    /// this of every instruction.)
    #[inline]
    pub fn with_const_operand(&self, const_of: impl Fn(u16) -> Option<u16>) -> Option<Op> {
        let k = |b: Src| const_of(b.0).map(Const);
        // (each register form with a destination and its constant form, then the fused
        // branches' from the family)
        macro_rules! const_forms {
            (
                { $($r:ident => $k:ident),* }
                $($cmp:ident ($($o:tt)+) [$ir:ident $ik:ident $ii:ident] [$ur:ident $uk:ident $ui:ident];)*
            ) => {
                Some(match *self {
                    $(Op::$r { dst, a, b } => Op::$k { dst, a, k: k(b)? },)*
                    $(
                        Op::$ir { a, b, target } => Op::$ik { a, k: k(b)?, target },
                        Op::$ur { a, b, target } => Op::$uk { a, k: k(b)?, target },
                    )*
                    _ => return None,
                })
            };
        }
        for_each_fused_branch!(const_forms {
            Add => AddK, Sub => SubK, Mul => MulK, Div => DivK, Mod => ModK,
            Lt => LtK, Le => LeK, Gt => GtK, Ge => GeK,
            StrictEq => StrictEqK, StrictNe => StrictNeK
        })
    }
    /// This instruction's parts when it is a fused compare-and-branch.
    pub fn fused(&self) -> Option<Fused> {
        macro_rules! parts {
            ($($cmp:ident ($($o:tt)+) [$ir:ident $ik:ident $ii:ident] [$ur:ident $uk:ident $ui:ident];)*) => {
                match *self {
                    $(
                        Op::$ir { a, b, target } => Some(Fused::of(Cmp::$cmp, true, a, Right::Reg(b), target)),
                        Op::$ik { a, k, target } => Some(Fused::of(Cmp::$cmp, true, a, Right::Const(k), target)),
                        Op::$ii { a, i, target } => Some(Fused::of(Cmp::$cmp, true, a, Right::Int(i), target)),
                        Op::$ur { a, b, target } => Some(Fused::of(Cmp::$cmp, false, a, Right::Reg(b), target)),
                        Op::$uk { a, k, target } => Some(Fused::of(Cmp::$cmp, false, a, Right::Const(k), target)),
                        Op::$ui { a, i, target } => Some(Fused::of(Cmp::$cmp, false, a, Right::Int(i), target)),
                    )*
                    _ => None,
                }
            };
        }
        for_each_fused_branch!(parts)
    }
    /// True when control never falls through to the next instruction.
    #[inline]
    pub fn is_terminator(&self) -> bool {
        self.flow().is_terminator()
    }
    /// True when this instruction ends a basic block (a branch, a terminator, or a handler install).
    #[inline]
    pub fn ends_block(&self) -> bool {
        self.flow().ends_block()
    }
}

/// The comparison a fused compare-and-branch makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `===` (`!==` is its negation)
    StrictEq,
}

/// The right operand of a fused compare-and-branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Right {
    /// A register.
    Reg(Src),
    /// A constant.
    Const(Const),
    /// A small integer carried in the instruction.
    Int(Int),
}

/// A fused compare-and-branch taken apart: it jumps to `target` when `a cmp right` is `when`
/// (`JumpIf*`: true; `JumpUnless*`: false, also when a comparison with NaN is false).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fused {
    /// The comparison.
    pub cmp: Cmp,
    /// The comparison's outcome that takes the branch.
    pub when: bool,
    /// The left operand.
    pub a: Src,
    /// The right operand.
    pub right: Right,
    /// Where the branch goes.
    pub target: Target24,
}

impl Fused {
    #[inline(always)]
    const fn of(cmp: Cmp, when: bool, a: Src, right: Right, target: Target24) -> Fused {
        Fused {
            cmp,
            when,
            a,
            right,
            target,
        }
    }

    /// The instruction.
    pub fn op(self) -> Op {
        let Fused {
            cmp,
            when,
            a,
            right,
            target,
        } = self;
        macro_rules! pick {
            ($($cmp:ident ($($o:tt)+) [$ir:ident $ik:ident $ii:ident] [$ur:ident $uk:ident $ui:ident];)*) => {
                match (cmp, right, when) {
                    $(
                        (Cmp::$cmp, Right::Reg(b), true) => Op::$ir { a, b, target },
                        (Cmp::$cmp, Right::Const(k), true) => Op::$ik { a, k, target },
                        (Cmp::$cmp, Right::Int(i), true) => Op::$ii { a, i, target },
                        (Cmp::$cmp, Right::Reg(b), false) => Op::$ur { a, b, target },
                        (Cmp::$cmp, Right::Const(k), false) => Op::$uk { a, k, target },
                        (Cmp::$cmp, Right::Int(i), false) => Op::$ui { a, i, target },
                    )*
                }
            };
        }
        for_each_fused_branch!(pick)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<15} ", self.name())?;
        let mut first = true;
        let mut res = Ok(());
        self.operands(|o| {
            let sep = if first { "" } else { ", " };
            first = false;
            let r = match o {
                Operand::Read(r) => write!(f, "{sep}r{r}"),
                Operand::Write(r) => write!(f, "{sep}r{r}"),
                Operand::Base(b) => write!(f, "{sep}r{b}"),
                Operand::Count(c) => write!(f, "{sep}#{c}"),
                Operand::Const(k) => write!(f, "{sep}k{k}"),
                Operand::Key(k) => write!(f, "{sep}k{k}"),
                Operand::Target(t) => write!(f, "{sep}@{t}"),
                Operand::Imm(i) => write!(f, "{sep}{i}"),
                Operand::Int(i) => write!(f, "{sep}{i}"),
                Operand::Native(n) => {
                    write!(
                        f,
                        "{sep}{}",
                        crate::natives::NativeId::from_u16(n).map_or("?", |n| n.js_name())
                    )
                }
                Operand::Func(n) => write!(f, "{sep}fn{n}"),
                Operand::Atom(n) => write!(f, "{sep}atom{n}"),
            };
            if r.is_err() {
                res = r;
            }
        });
        res
    }
}

/// The block leaders of `code`: instruction 0, every jump target, and every instruction after one
/// that ends a block. Out-of-range targets are ignored here (the verifier reports them).
pub fn leaders(code: &[Op]) -> Vec<bool> {
    let mut l = vec![false; code.len()];
    if !l.is_empty() {
        l[0] = true;
    }
    for (i, op) in code.iter().enumerate() {
        if let Some(t) = op.jump_target() {
            if let Some(slot) = l.get_mut(t as usize) {
                *slot = true;
            }
        }
        if op.ends_block() {
            if let Some(slot) = l.get_mut(i + 1) {
                *slot = true;
            }
        }
    }
    l
}

/// Inserts one `Charge` at the head of every basic block, carrying the sum of the static costs of
/// the block's instructions, and remaps jump targets (and the parallel `spans`) accordingly.
/// Input code must contain no `Charge`.
pub fn insert_charges<S: Copy>(code: &[Op], spans: &[S]) -> (Vec<Op>, Vec<S>) {
    let lead = leaders(code);
    // new index of the block head (its Charge) for every old leader; jump targets are leaders
    let mut map = Vec::with_capacity(code.len());
    let mut n = 0u32;
    for &is_leader in &lead {
        map.push(n);
        n += if is_leader { 2 } else { 1 };
    }
    let mut out = Vec::with_capacity(n as usize);
    let mut out_spans = Vec::with_capacity(n as usize);
    let mut i = 0;
    while i < code.len() {
        // block [i, j)
        let mut j = i + 1;
        while j < code.len() && !lead[j] {
            j += 1;
        }
        let amount: u32 = code[i..j].iter().map(|o| o.cost()).sum();
        out.push(Op::Charge {
            amount: Imm(amount),
        });
        out_spans.push(spans[i]);
        for k in i..j {
            let mut op = code[k];
            op.map_target(|t| map.get(t as usize).copied().unwrap_or(t));
            out.push(op);
            out_spans.push(spans[k]);
        }
        i = j;
    }
    (out, out_spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instruction_is_eight_bytes() {
        assert_eq!(std::mem::size_of::<Op>(), 8);
    }

    #[test]
    fn encode_decode_round_trip() {
        let ops = [
            Op::Charge { amount: Imm(300) },
            Op::Add {
                dst: Dst(1),
                a: Src(2),
                b: Src(3),
            },
            Op::CallNative {
                dst: Dst(0),
                native: Native(4),
                base: Base(7),
                argc: Count(2),
            },
            Op::JumpIfFalse {
                cond: Src(9),
                target: Target(70000),
            },
            Op::JumpUnlessLtK {
                a: Src(3),
                k: Const(9),
                target: Target24::new(0xab_cdef),
            },
            Op::TryExit {},
        ];
        let mut bytes = Vec::new();
        for op in &ops {
            op.encode(&mut bytes);
        }
        let mut at = 0;
        for op in &ops {
            let (d, len) = Op::decode(&bytes[at..]).unwrap();
            assert_eq!(&d, op);
            at += len;
        }
        assert_eq!(at, bytes.len());
    }

    #[test]
    fn small_integers_are_immediates() {
        for (n, want) in [
            (1.0, Some(1)),
            (0.0, Some(0)),
            (-32768.0, Some(-32768)),
            (32767.0, Some(32767)),
            (-0.0, None),
            (32768.0, None),
            (-32769.0, None),
            (0.5, None),
            (f64::NAN, None),
            (f64::INFINITY, None),
        ] {
            assert_eq!(Int::of(n).map(|i| i.0), want, "{n}");
            if let Some(i) = Int::of(n) {
                assert_eq!(i.get().to_bits(), n.to_bits());
            }
        }
        let k = Op::JumpUnlessGeK {
            a: Src(2),
            k: Const(7),
            target: Target24::new(9),
        };
        let i = k
            .with_int_operand(|c| (c.0 == 7).then_some(Int(-5)))
            .unwrap();
        assert_eq!(
            i,
            Op::JumpUnlessGeI {
                a: Src(2),
                i: Int(-5),
                target: Target24::new(9)
            }
        );
        assert_eq!((i.cost(), i.jump_target()), (k.cost(), k.jump_target()));
        let f = i.fused().unwrap();
        assert_eq!((f.right, f.when, f.op()), (Right::Int(Int(-5)), false, i));
        assert_eq!(k.with_int_operand(|_| None), None);
        let mut bytes = Vec::new();
        i.encode(&mut bytes);
        assert_eq!(Op::decode(&bytes), Ok((i, 8)));
        assert_eq!(i.to_string(), "JumpUnlessGeI   r2, -5, @9");
    }

    #[test]
    fn a_comparison_and_its_branch_fuse() {
        let lt = Op::Lt {
            dst: Dst(4),
            a: Src(1),
            b: Src(2),
        };
        let t = Target24::new((1 << 24) - 1);
        assert_eq!(t.get(), (1 << 24) - 1);
        assert_eq!(
            lt.fused_branch(4, false, t.get()),
            Some(Op::JumpUnlessLt {
                a: Src(1),
                b: Src(2),
                target: t
            })
        );
        // only a comparison writing the register branched on
        assert_eq!(lt.fused_branch(3, false, 0), None);
        let ne = Op::StrictNeK {
            dst: Dst(0),
            a: Src(1),
            k: Const(5),
        };
        assert_eq!(
            ne.fused_branch(0, false, 7),
            Some(Op::JumpIfStrictEqK {
                a: Src(1),
                k: Const(5),
                target: Target24::new(7)
            })
        );
        let mut j = lt.fused_branch(4, true, 7).unwrap();
        let mut parts = j.fused().unwrap();
        assert_eq!(parts.right, Right::Reg(Src(2)));
        parts.right = Right::Const(Const(3));
        assert_eq!(
            parts.op(),
            Op::JumpIfLtK {
                a: Src(1),
                k: Const(3),
                target: Target24::new(7)
            }
        );
        j.map_target(|t| t + 10);
        assert_eq!(j.jump_target(), Some(17));
        assert!(j.ends_block() && !j.is_terminator());
        assert_eq!(j.cost(), 2 * BASE);
    }

    /// The fingerprint of the table: what artifacts and snapshots of this instruction set
    /// carry. A change to the table's opcodes, operands or costs changes it (on purpose: pin the
    /// new value in the same commit); a change to how the table is written must not.
    #[test]
    fn the_instruction_set_fingerprint_is_pinned() {
        assert_eq!(ISA_HASH, 0x3efb_dedc_030c_af1c, "{ISA_HASH:#x}");
    }

    /// The compare-and-branch family's rows name 30 distinct instructions of the table, each
    /// taken apart and put together again by [`Op::fused`] and [`Fused::op`], and no other
    /// instruction is fused; each register form maps to its constant form and that to its
    /// immediate form.
    #[test]
    fn the_fused_family_names_thirty_instructions_that_round_trip() {
        let mut rows: Vec<[&str; 3]> = Vec::new();
        macro_rules! collect {
            ($($cmp:ident ($($o:tt)+) [$ir:ident $ik:ident $ii:ident] [$ur:ident $uk:ident $ui:ident];)*) => {
                $(
                    rows.push([stringify!($ir), stringify!($ik), stringify!($ii)]);
                    rows.push([stringify!($ur), stringify!($uk), stringify!($ui)]);
                )*
            };
        }
        for_each_fused_branch!(collect);
        let names: Vec<&str> = rows.iter().flatten().copied().collect();
        let mut fused = 0;
        for code in 0..=255u8 {
            let mut b = [0u8; 16];
            b[0] = code;
            let Ok((op, _)) = Op::decode(&b) else {
                continue;
            };
            match op.fused() {
                Some(f) => {
                    fused += 1;
                    assert!(names.contains(&op.name()), "{op:?}");
                    assert_eq!(f.op(), op);
                    assert_eq!(op.flow(), Flow::Branch);
                    assert_eq!(op.cost(), 2 * BASE);
                }
                None => assert!(!names.contains(&op.name()), "{op:?}"),
            }
            // a register form's constant form, and that one's immediate form, are its row's
            let konst = op.with_const_operand(|_| Some(7));
            let int = op.with_int_operand(|_| Some(Int(7)));
            for row in &rows {
                if op.name() == row[0] {
                    assert_eq!(konst.map(|o| o.name()), Some(row[1]));
                }
                if op.name() == row[1] {
                    assert_eq!(int.map(|o| o.name()), Some(row[2]));
                }
            }
        }
        assert_eq!(fused, 30);
        assert_eq!(names.len(), 30);
    }

    /// Every opcode's [`Flow`] agrees with what the instruction queries say of it.
    #[test]
    fn flow_agrees_with_the_instruction_queries() {
        let mut seen = 0;
        for code in 0..=255u8 {
            let mut b = [0u8; 16];
            b[0] = code;
            let Ok((op, _)) = Op::decode(&b) else {
                continue;
            };
            seen += 1;
            let (cost, flow) = op.inspect(|_| {});
            assert_eq!(cost, op.cost(), "{op:?}");
            let mut operands = Vec::new();
            op.operands(|o| operands.push(o));
            let mut inspected = Vec::new();
            op.inspect(|o| inspected.push(o));
            assert_eq!(operands, inspected, "{op:?}");
            assert_eq!(flow, op.flow(), "{op:?}");
            let branch = flow.has_target();
            assert_eq!(branch, op.jump_target().is_some(), "{op:?}");
            // a target is exactly a jump target
            let has_target = operands.iter().any(|o| matches!(o, Operand::Target(_)));
            assert_eq!(has_target, branch, "{op:?}");
            // the terminators are `Jump`, `Return` and `Throw`, the flows that leave `Return`
            // and `Throw`, and every instruction named `Jump…` a jump or a branch
            let name = op.name();
            assert_eq!(
                op.is_terminator(),
                matches!(op, Op::Jump { .. } | Op::Return { .. } | Op::Throw { .. }),
                "{op:?}"
            );
            assert_eq!(
                flow.leaves(),
                matches!(op, Op::Return { .. } | Op::Throw { .. })
            );
            assert_eq!(
                name.starts_with("Jump"),
                matches!(flow, Flow::Jump | Flow::Branch),
                "{op:?}"
            );
            assert_eq!(flow == Flow::Jump, matches!(op, Op::Jump { .. }));
            assert_eq!(op.ends_block(), branch || flow.leaves(), "{op:?}");
            assert_eq!(flow == Flow::Charge, matches!(op, Op::Charge { .. }));
            assert_eq!(flow == Flow::TryEnter, matches!(op, Op::TryEnter { .. }));
            assert_eq!(flow == Flow::Catch, matches!(op, Op::Catch { .. }));
            assert_eq!(flow == Flow::Call, matches!(op, Op::Call { .. }));
            assert_eq!(
                flow == Flow::CallNative,
                matches!(op, Op::CallNative { .. })
            );
        }
        assert!(seen > 80);
    }

    /// [`Op::map_registers_and_target`] is [`Op::map_registers`] then [`Op::map_target`].
    #[test]
    fn one_map_is_both() {
        let mut seen = 0;
        for code in 0..=255u8 {
            let mut b: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(29) ^ 0x33);
            b[0] = code;
            let Ok((op, _)) = Op::decode(&b) else {
                continue;
            };
            seen += 1;
            let f = |r: u16| r.wrapping_mul(7).wrapping_add(3);
            let t = |x: u32| (x ^ 0x5_5555) & 0xF_FFFF;
            let mut both = op;
            both.map_registers_and_target(&f, &t);
            let mut each = op;
            each.map_registers(&f);
            each.map_target(t);
            assert_eq!(both, each, "{op:?}");
        }
        assert!(seen > 80);
    }

    /// [`Op::visit`] tells exactly the registers and the target [`Op::operands`] gives, in order.
    #[test]
    fn visit_agrees_with_operands() {
        #[derive(Default)]
        struct Told(Vec<Operand>, bool);
        impl Visitor for Told {
            fn register(&mut self, r: u16) {
                self.0.push(Operand::Read(r));
            }
            fn base(&mut self, r: u16) {
                self.0.push(Operand::Base(r));
            }
            fn target(&mut self, t: u32) {
                self.0.push(Operand::Target(t));
            }
            fn end(&mut self) {
                self.1 = true;
            }
        }
        let mut seen = 0;
        for code in 0..=255u8 {
            // distinct operand bytes, so that operands told out of order would differ
            let mut b: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5A);
            b[0] = code;
            let Ok((op, _)) = Op::decode(&b) else {
                continue;
            };
            seen += 1;
            let mut expected = Vec::new();
            op.operands(|o| match o {
                Operand::Read(r) | Operand::Write(r) => expected.push(Operand::Read(r)),
                Operand::Base(_) | Operand::Target(_) => expected.push(o),
                _ => {}
            });
            let mut told = Told::default();
            op.visit(&mut told);
            assert_eq!(told.0, expected, "{op:?}");
            assert_eq!(
                told.1,
                matches!(op, Op::Return { .. } | Op::Throw { .. }),
                "{op:?}"
            );
            let has_target = told.0.iter().any(|o| matches!(o, Operand::Target(_)));
            assert_eq!(has_target || told.1, op.ends_block(), "{op:?}");
        }
        assert!(seen > 80);
    }

    #[test]
    fn charges_open_every_block() {
        let code = [
            Op::LoadTrue { dst: Dst(0) },
            Op::JumpIfFalse {
                cond: Src(0),
                target: Target(3),
            },
            Op::Jump { target: Target(0) },
            Op::Return { src: Src(0) },
        ];
        let (out, _) = insert_charges(&code, &[(); 4]);
        assert_eq!(out[0], Op::Charge { amount: Imm(200) });
        assert_eq!(out[3], Op::Charge { amount: Imm(100) });
        assert_eq!(out[4], Op::Jump { target: Target(0) });
        assert_eq!(
            out[2],
            Op::JumpIfFalse {
                cond: Src(0),
                target: Target(5)
            }
        );
        assert_eq!(out[5], Op::Charge { amount: Imm(100) });
    }
}
