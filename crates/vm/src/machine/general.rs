//! The instructions run out of line: the general cases of the inline ones, and the rest.

use ajs_bytecode::isa::{Cmp, Op, Right};
use ajs_bytecode::NativeId;

use super::{parallel, TryEntry, Vm, MILLI_PER_ELEMENT};
use crate::error::{guest, ErrorKind, Fault, OpResult, RunError};
use crate::heap::{Cell, PropMap};
use crate::ops::{type_index, TYPE_NAMES};
use crate::value::Value;

/// The binary operators with a register or a constant right operand (`Add` / `AddK`, …).
#[derive(Clone, Copy)]
pub(super) enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Lt,
    Le,
    Gt,
    Ge,
    StrictEq,
    StrictNe,
}

impl Vm {
    /// The instructions `exec` does not handle inline: those that never change control flow
    /// (and the general cases of the ones it handles inline for numbers, arrays and `push`).
    #[inline(never)]
    pub(super) fn exec_other(&mut self, op: Op, base: usize) -> OpResult<()> {
        // every fused compare-and-branch, from the bytecode crate's family
        macro_rules! fused_pattern {
            ($($cmp:ident ($($o:tt)+) [$ir:ident $ik:ident $ii:ident] [$ur:ident $uk:ident $ui:ident];)*) => {
                $(Op::$ir { .. } | Op::$ik { .. } | Op::$ii { .. }
                | Op::$ur { .. } | Op::$uk { .. } | Op::$ui { .. })|*
            };
        }
        macro_rules! r {
            ($x:expr) => {
                self.regs[base + $x.0 as usize]
            };
        }
        macro_rules! run {
            ($b:expr, $n:expr) => {
                base + $b.0 as usize..base + $b.0 as usize + $n as usize
            };
        }
        macro_rules! k {
            ($k:expr) => {
                self.consts[$k.0 as usize]
            };
        }
        match op {
            Op::Add { dst, a, b } => r!(dst) = self.binary(Bin::Add, r!(a), r!(b))?,
            Op::Sub { dst, a, b } => r!(dst) = self.binary(Bin::Sub, r!(a), r!(b))?,
            Op::Mul { dst, a, b } => r!(dst) = self.binary(Bin::Mul, r!(a), r!(b))?,
            Op::Div { dst, a, b } => r!(dst) = self.binary(Bin::Div, r!(a), r!(b))?,
            Op::Mod { dst, a, b } => r!(dst) = self.binary(Bin::Mod, r!(a), r!(b))?,
            Op::Lt { dst, a, b } => r!(dst) = self.binary(Bin::Lt, r!(a), r!(b))?,
            Op::Le { dst, a, b } => r!(dst) = self.binary(Bin::Le, r!(a), r!(b))?,
            Op::Gt { dst, a, b } => r!(dst) = self.binary(Bin::Gt, r!(a), r!(b))?,
            Op::Ge { dst, a, b } => r!(dst) = self.binary(Bin::Ge, r!(a), r!(b))?,
            Op::StrictEq { dst, a, b } => r!(dst) = self.binary(Bin::StrictEq, r!(a), r!(b))?,
            Op::StrictNe { dst, a, b } => r!(dst) = self.binary(Bin::StrictNe, r!(a), r!(b))?,
            Op::AddK { dst, a, k } => r!(dst) = self.binary(Bin::Add, r!(a), k!(k))?,
            Op::SubK { dst, a, k } => r!(dst) = self.binary(Bin::Sub, r!(a), k!(k))?,
            Op::AddI { dst, a, i } => {
                r!(dst) = self.binary(Bin::Add, r!(a), Value::Num(i.get()))?
            }
            Op::SubI { dst, a, i } => {
                r!(dst) = self.binary(Bin::Sub, r!(a), Value::Num(i.get()))?
            }
            Op::MulK { dst, a, k } => r!(dst) = self.binary(Bin::Mul, r!(a), k!(k))?,
            Op::DivK { dst, a, k } => r!(dst) = self.binary(Bin::Div, r!(a), k!(k))?,
            Op::ModK { dst, a, k } => r!(dst) = self.binary(Bin::Mod, r!(a), k!(k))?,
            Op::LtK { dst, a, k } => r!(dst) = self.binary(Bin::Lt, r!(a), k!(k))?,
            Op::LeK { dst, a, k } => r!(dst) = self.binary(Bin::Le, r!(a), k!(k))?,
            Op::GtK { dst, a, k } => r!(dst) = self.binary(Bin::Gt, r!(a), k!(k))?,
            Op::GeK { dst, a, k } => r!(dst) = self.binary(Bin::Ge, r!(a), k!(k))?,
            Op::StrictEqK { dst, a, k } => r!(dst) = self.binary(Bin::StrictEq, r!(a), k!(k))?,
            Op::StrictNeK { dst, a, k } => r!(dst) = self.binary(Bin::StrictNe, r!(a), k!(k))?,
            Op::MulI { dst, a, i } => {
                r!(dst) = self.binary(Bin::Mul, r!(a), Value::Num(i.get()))?
            }
            Op::ModI { dst, a, i } => {
                r!(dst) = self.binary(Bin::Mod, r!(a), Value::Num(i.get()))?
            }
            Op::StrictEqI { dst, a, i } => {
                r!(dst) = self.binary(Bin::StrictEq, r!(a), Value::Num(i.get()))?
            }
            Op::StrictNeI { dst, a, i } => {
                r!(dst) = self.binary(Bin::StrictNe, r!(a), Value::Num(i.get()))?
            }
            // a fused compare-and-branch of anything but two numbers: the pc it goes on at
            ajs_bytecode::for_each_fused_branch!(fused_pattern) => {
                let to = self.compare_slow(op, base)?;
                if let Some(f) = self.frames.last_mut() {
                    f.pc = to.unwrap_or(f.pc + 1);
                }
            }
            Op::Pow { dst, a, b } => {
                let (x, y) = self.num_pair(r!(a), r!(b), "**")?;
                r!(dst) = Value::Num(js_pow(x, y));
            }
            Op::Eq { dst, a, b } => r!(dst) = Value::Bool(self.eq_paid(r!(a), r!(b), true)?),
            Op::Ne { dst, a, b } => r!(dst) = Value::Bool(!self.eq_paid(r!(a), r!(b), true)?),
            Op::Neg { dst, src } => {
                let n = self.number_paid(r!(src), "-")?;
                r!(dst) = Value::Num(-n);
            }
            Op::Pos { dst, src } => {
                let n = self.number_paid(r!(src), "+")?;
                r!(dst) = Value::Num(n);
            }
            Op::Not { dst, src } => r!(dst) = Value::Bool(!self.truthy(r!(src))),
            Op::TypeOf { dst, src } => {
                let t = type_index(r!(src));
                r!(dst) = match self.typeof_consts[t] {
                    Value::Undefined => self.str_value(TYPE_NAMES[t])?,
                    name => name,
                };
            }
            Op::Concat {
                dst,
                base: b,
                count,
            } => {
                let parts: smallvec::SmallVec<[Value; 8]> =
                    self.regs[run!(b, count.0)].iter().copied().collect();
                r!(dst) = self.template(&parts)?;
            }
            Op::NewArray {
                dst,
                base: b,
                count,
            } => {
                let n = count.0 as usize;
                self.charge(n as u64 * MILLI_PER_ELEMENT)?;
                self.reserve_arr(n, &[])?;
                let items = self.regs[run!(b, n)].to_vec();
                let g = self.heap.insert(Cell::Arr(items));
                r!(dst) = Value::Arr(g);
            }
            Op::ArrayAppend {
                arr,
                base: b,
                count,
            } => {
                let n = count.0 as usize;
                self.charge(n as u64 * MILLI_PER_ELEMENT)?;
                let Value::Arr(g) = r!(arr) else {
                    return guest("ArrayAppend on a non-array");
                };
                let items: smallvec::SmallVec<[Value; 16]> =
                    self.regs[run!(b, n)].iter().copied().collect();
                self.arr_extend(g, &items, &[])?;
            }
            Op::NewObject { dst } => {
                self.reserve(16, &[])?;
                let g = self.heap.insert(Cell::Obj(PropMap::default()));
                r!(dst) = Value::Obj(g);
            }
            Op::InitProp { obj, key, val } => {
                let (o, v) = (r!(obj), r!(val));
                let Value::Str(kg) = self.consts[key.0 as usize] else {
                    return guest("property key is not a string");
                };
                self.set_prop(o, kg, Some(key.0 as usize), v)?;
            }
            Op::GetProp { dst, obj, key } => {
                let o = r!(obj);
                let k = self.consts[key.0 as usize];
                r!(dst) = self.get_member(o, k)?;
            }
            Op::GetIndex { dst, obj, key } => {
                let (o, k) = (r!(obj), r!(key));
                r!(dst) = self.get_member(o, k)?;
            }
            Op::ArrayExtend { arr, src } => {
                let (a, v) = (r!(arr), r!(src));
                self.spread_into_array(a, v)?;
            }
            Op::ObjectAssign { obj, src } => {
                let (o, v) = (r!(obj), r!(src));
                self.spread_into_object(o, v)?;
            }
            Op::InitIndex { obj, key, val } => {
                let (o, k, v) = (r!(obj), r!(key), r!(val));
                self.init_index(o, k, v)?;
            }
            Op::Destructurable { dst, src, array } => {
                let v = r!(src);
                r!(dst) = self.destructurable(v, array.0 == 1)?;
            }
            Op::ObjectRest {
                dst,
                src,
                base: b,
                count,
            } => {
                let keys: smallvec::SmallVec<[Value; 8]> =
                    self.regs[run!(b, count.0)].iter().copied().collect();
                let v = r!(src);
                r!(dst) = self.object_rest(v, &keys)?;
            }
            Op::CallNativeArray { dst, native, args } => {
                let id = NativeId::from_u16(native.0).unwrap_or(NativeId::MathAbs);
                let a = r!(args);
                r!(dst) = self.call_native_array(id, a)?;
            }
            Op::ArrayLen { dst, arr, method } => {
                let a = r!(arr);
                if let Value::Arr(_) = a {
                    r!(dst) = Value::Num(self.length_of(a) as f64);
                    return Ok(());
                }
                let m = match self.consts[method.0 as usize] {
                    Value::Str(g) => String::from_utf16_lossy(self.units(g)),
                    _ => String::new(),
                };
                return match a {
                    Value::Null => guest(crate::method_hints::on_nullish(&m, "null")),
                    Value::Undefined => guest(crate::method_hints::on_nullish(&m, "undefined")),
                    other => guest(crate::method_hints::not_a_function(
                        &m,
                        self.kind_name(other),
                    )),
                };
            }
            Op::CallNative {
                dst,
                native,
                base: b,
                argc,
            } => {
                let args: smallvec::SmallVec<[Value; 8]> =
                    self.regs[run!(b, argc.0)].iter().copied().collect();
                let id = NativeId::from_u16(native.0).unwrap_or(NativeId::MathAbs);
                r!(dst) = self.call_native(id, &args)?;
            }
            Op::ParBegin {} => self.par_begin()?,
            Op::ParCall { atom, arg } => {
                self.take_atom(atom.0 as usize)?;
                let input = r!(arg);
                let id = self.hosts.next_call_id;
                self.hosts.next_call_id = self.hosts.next_call_id.saturating_add(1);
                self.par_push(parallel::ParItem::Queued {
                    id,
                    atom: atom.0,
                    input,
                })?;
            }
            Op::ParValue { src } => {
                let v = r!(src);
                self.par_push(parallel::ParItem::Ready(v))?;
            }
            Op::TryEnter { handler } => {
                if let Some(f) = self.frames.last_mut() {
                    f.opened = true;
                }
                self.tries.push(TryEntry {
                    frame: self.frames.len() as u32 - 1,
                    handler: handler.0,
                });
            }
            Op::TryExit {} => {
                let depth = self.frames.len() as u32 - 1;
                if self.tries.last().is_some_and(|t| t.frame == depth) {
                    self.tries.pop();
                }
            }
            Op::Catch { dst } => {
                let msg = self.handling.take().unwrap_or_default();
                let units: Vec<u16> = msg.encode_utf16().collect();
                r!(dst) = self.alloc_str(units)?;
            }
            // handled by `exec` (control flow); never sent here
            Op::Charge { .. }
            | Op::Move { .. }
            | Op::LoadConst { .. }
            | Op::LoadUndef { .. }
            | Op::LoadNull { .. }
            | Op::LoadTrue { .. }
            | Op::LoadFalse { .. }
            | Op::Jump { .. }
            | Op::JumpIfTrue { .. }
            | Op::JumpIfFalse { .. }
            | Op::JumpIfNullish { .. }
            | Op::JumpIfNotNullish { .. }
            | Op::Return { .. }
            | Op::Call { .. }
            | Op::CallAtom { .. }
            | Op::ParEnd { .. }
            | Op::Throw { .. } => {}
        }
        Ok(())
    }

    /// A fused compare-and-branch of anything but two numbers: its target when it jumps.
    #[inline(never)]
    pub(super) fn compare_slow(&mut self, op: Op, base: usize) -> OpResult<Option<u32>> {
        let Some(f) = op.fused() else {
            return Ok(None);
        };
        let y = match f.right {
            Right::Reg(b) => self.regs.get(base + b.0 as usize).copied(),
            Right::Const(k) => self.consts.get(k.0 as usize).copied(),
            Right::Int(i) => Some(Value::Num(i.get())),
        };
        let (Some(&x), Some(y)) = (self.regs.get(base + f.a.0 as usize), y) else {
            return Ok(None);
        };
        let bin = match f.cmp {
            Cmp::Lt => Bin::Lt,
            Cmp::Le => Bin::Le,
            Cmp::Gt => Bin::Gt,
            Cmp::Ge => Bin::Ge,
            Cmp::StrictEq => Bin::StrictEq,
        };
        let t = matches!(self.binary(bin, x, y)?, Value::Bool(true));
        Ok((t == f.when).then_some(f.target.get()))
    }

    /// A binary operator on two values, the general case (`exec` handles numbers inline).
    pub(super) fn binary(&mut self, op: Bin, x: Value, y: Value) -> OpResult<Value> {
        Ok(match op {
            Bin::Add => match (x, y) {
                (Value::Num(x), Value::Num(y)) => Value::Num(x + y),
                _ => self.add_slow(x, y)?,
            },
            Bin::Sub => {
                let (x, y) = self.num_pair(x, y, "-")?;
                Value::Num(x - y)
            }
            Bin::Mul => {
                let (x, y) = self.num_pair(x, y, "*")?;
                Value::Num(x * y)
            }
            Bin::Div => {
                let (x, y) = self.num_pair(x, y, "/")?;
                Value::Num(x / y)
            }
            Bin::Mod => {
                let (x, y) = self.num_pair(x, y, "%")?;
                Value::Num(js_rem(x, y))
            }
            Bin::Lt => Value::Bool(self.compare(x, y, "<")?.is_some_and(|o| o.is_lt())),
            Bin::Le => Value::Bool(self.compare(x, y, "<=")?.is_some_and(|o| o.is_le())),
            Bin::Gt => Value::Bool(self.compare(x, y, ">")?.is_some_and(|o| o.is_gt())),
            Bin::Ge => Value::Bool(self.compare(x, y, ">=")?.is_some_and(|o| o.is_ge())),
            Bin::StrictEq => Value::Bool(self.eq_paid(x, y, false)?),
            Bin::StrictNe => Value::Bool(!self.eq_paid(x, y, false)?),
        })
    }

    /// Checks the atom's per-run quota, charges its fuel and counts the call.
    pub(super) fn take_atom(&mut self, i: usize) -> OpResult<()> {
        if let Some(q) = self.hosts.atoms.quota[i] {
            if self.hosts.atoms.used[i] >= q {
                let name = &self.program.atoms[i];
                let calls = if q == 1 { "call" } else { "calls" };
                return Err(Fault::Fatal(RunError::new(
                    ErrorKind::Quota,
                    format!("Quota exceeded for '{name}': {q} {calls} allowed"),
                )));
            }
        }
        self.charge(self.hosts.atoms.cost[i])?;
        self.hosts.atoms.used[i] += 1;
        Ok(())
    }
}

/// JavaScript's `%`.
#[inline]
pub(crate) fn js_rem(x: f64, y: f64) -> f64 {
    // integers (the common case) by integer remainder, which is exact; the sign follows `x`
    let (i, j) = (x as i64, y as i64);
    if i as f64 == x
        && j as f64 == y
        && j != 0
        && i.unsigned_abs() < 1 << 53
        && j.unsigned_abs() < 1 << 53
    {
        let r = i % j;
        return if r == 0 && x.is_sign_negative() {
            -0.0
        } else {
            r as f64
        };
    }
    if y == 0.0 || x.is_infinite() || x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if y.is_infinite() {
        return x;
    }
    x % y
}

/// JavaScript's `**`.
pub(crate) fn js_pow(x: f64, y: f64) -> f64 {
    if y.is_nan() {
        return f64::NAN;
    }
    if (x == 1.0 || x == -1.0) && y.is_infinite() {
        return f64::NAN;
    }
    x.powf(y)
}
