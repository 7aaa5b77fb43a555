//! Operator semantics: JavaScript's, with AJS's changes (decision 2: arrays and objects never
//! turn into strings or numbers; `==` never coerces).

use std::cmp::Ordering;

use crate::error::{guest, OpResult};
use crate::heap::{strbuf_bytes, Cell, Gc, SLICE_BYTES};
use crate::machine::Vm;
use crate::number::{number_to_string, string_to_number};
use crate::price::cmp_units;
use crate::value::Value;

/// Shortest result of `+` on a string that is made a slice of a shared buffer ([`Cell::Slice`]);
/// shorter results are plain strings.
const SHARED_CONCAT_MIN: usize = 128;

/// What `typeof` gives, by [`type_index`].
pub(crate) const TYPE_NAMES: [&str; 5] = ["undefined", "object", "boolean", "number", "string"];

/// The index of `typeof v` in [`TYPE_NAMES`].
#[inline]
pub(crate) fn type_index(v: Value) -> usize {
    match v {
        Value::Undefined => 0,
        Value::Null | Value::Arr(_) | Value::Obj(_) | Value::Pending(_) => 1,
        Value::Bool(_) => 2,
        Value::Num(_) => 3,
        Value::Str(_) => 4,
    }
}

impl Vm {
    /// JavaScript truthiness.
    pub(crate) fn truthy(&self, v: Value) -> bool {
        match v {
            Value::Undefined | Value::Null => false,
            Value::Bool(b) => b,
            Value::Num(n) => !(n == 0.0 || n.is_nan()),
            Value::Str(g) => !self.units(g).is_empty(),
            Value::Arr(_) | Value::Obj(_) | Value::Pending(_) => true,
        }
    }

    /// `typeof`.
    pub(crate) fn type_of(&self, v: Value) -> &'static str {
        TYPE_NAMES[type_index(v)]
    }

    /// "array", "object", … for messages.
    pub(crate) fn kind_name(&self, v: Value) -> &'static str {
        match v {
            Value::Arr(_) => "array",
            Value::Obj(_) => "object",
            Value::Pending(_) => "unsettled host result",
            other => self.type_of(other),
        }
    }

    fn refuse_container(&self, v: Value, op: &str) -> OpResult<()> {
        match v {
            Value::Arr(_) => guest(format!("Cannot use '{op}' on an array; use .join() first")),
            Value::Obj(_) => guest(format!(
                "Cannot use '{op}' on an object; use JSON.stringify() first"
            )),
            Value::Pending(_) => guest(format!(
                "Cannot use '{op}' on a host result that has not settled"
            )),
            _ => Ok(()),
        }
    }

    /// `ToNumber` for an operator; arrays and objects are refused.
    pub(crate) fn to_number(&self, v: Value, op: &str) -> OpResult<f64> {
        Ok(match v {
            Value::Num(n) => n,
            Value::Undefined => f64::NAN,
            Value::Null => 0.0,
            Value::Bool(b) => b as u8 as f64,
            Value::Str(g) => string_to_number(&String::from_utf16_lossy(self.units(g))),
            other => {
                self.refuse_container(other, op)?;
                f64::NAN
            }
        })
    }

    /// `ToNumber` of both operands of an operator, strings paid for by their length.
    pub(crate) fn num_pair(&mut self, a: Value, b: Value, op: &str) -> OpResult<(f64, f64)> {
        Ok((self.number_paid(a, op)?, self.number_paid(b, op)?))
    }

    /// `ToNumber` for an operator, a string paid for by its length.
    pub(crate) fn number_paid(&mut self, v: Value, op: &str) -> OpResult<f64> {
        self.charge_to_number(v)?;
        self.to_number(v, op)
    }

    /// `==` (`loose`) or `===`, two strings paid for by the length compared.
    pub(crate) fn eq_paid(&mut self, a: Value, b: Value, loose: bool) -> OpResult<bool> {
        self.charge_str_eq(a, b)?;
        Ok(if loose {
            self.loose_eq(a, b)
        } else {
            self.strict_eq(a, b)
        })
    }

    /// `String(v)` for a primitive as code units; arrays and objects are refused with `op`.
    pub(crate) fn to_units(&self, v: Value, op: &str) -> OpResult<Vec<u16>> {
        Ok(match v {
            Value::Str(g) => self.units(g).to_vec(),
            // a number's text is ASCII: no check needed
            Value::Num(n) => number_to_string(n).bytes().map(u16::from).collect(),
            Value::Bool(b) => text_units(if b { "true" } else { "false" }),
            Value::Null => text_units("null"),
            Value::Undefined => text_units("undefined"),
            other => {
                self.refuse_container(other, op)?;
                Vec::new()
            }
        })
    }

    /// `+` when the operands are not both numbers.
    pub(crate) fn add_slow(&mut self, a: Value, b: Value) -> OpResult<Value> {
        self.refuse_container(a, "+")?;
        self.refuse_container(b, "+")?;
        if matches!(a, Value::Str(_)) || matches!(b, Value::Str(_)) {
            let la = self.units_len(a);
            let lb = self.units_len(b);
            if let Value::Str(ga) = a {
                if (SHARED_CONCAT_MIN..=u32::MAX as usize).contains(&(la + lb)) {
                    // (append_shared charges for `b`, and for `a` only if it is copied)
                    return self.concat_shared(ga, b);
                }
            }
            self.charge_units(la + lb)?;
            self.reserve(crate::heap::str_bytes(la + lb), &[])?;
            let mut out = self.to_units(a, "+")?;
            out.extend(self.to_units(b, "+")?);
            return self.alloc_str(out);
        }
        let (x, y) = self.num_pair(a, b, "+")?;
        Ok(Value::Num(x + y))
    }

    /// `a + b` for a long string `a` (fuel is charged): the result is a slice of a string
    /// buffer. When `a` is the newest slice of its buffer, `b` is appended to that buffer in
    /// place (amortised O(|b|), so `s = s + x` in a loop is linear); otherwise `a` and `b` are
    /// copied into a fresh buffer, which later appends to the result extend.
    fn concat_shared(&mut self, ga: Gc, b: Value) -> OpResult<Value> {
        let a = Value::Str(ga);
        let tail: smallvec::SmallVec<[u16; 32]> = match b {
            Value::Str(gb) => self.units(gb).into(),
            other => self.to_units(other, "+")?.into(),
        };
        self.append_shared(ga, &tail, &[a, b])
    }

    /// `a` followed by `tail` as a slice of a string buffer (fuel is charged; `roots` are the
    /// operands, kept alive if room must be made): appended in place when `a` is the newest
    /// slice of its buffer, else both copied into a fresh buffer.
    fn append_shared(&mut self, ga: Gc, tail: &[u16], roots: &[Value]) -> OpResult<Value> {
        let la = self.units(ga).len();
        // the caller checked the length bound (`tail` is never longer than `units_len` says)
        let Ok(len) = u32::try_from(la + tail.len()) else {
            return guest("Invalid string length");
        };
        // room first, then fuel: a string past the heap's ceiling is refused as such
        if let Some(buf) = self.heap.appendable(ga) {
            // in place (within the buffer's capacity and under the next collection, so no
            // ceiling is near) when the fuel is there; else room first, then fuel
            let cost = (tail.len() as u64).saturating_mul(crate::price::MILLI_PER_UNIT);
            if cost <= self.meter.fuel.left() && self.heap.append_in_place(buf, tail, SLICE_BYTES) {
                self.charge(cost)?;
            } else {
                let room = self.heap.growth(buf, tail.len()) + SLICE_BYTES;
                self.reserve_real(strbuf_bytes(tail.len()) + SLICE_BYTES, room, roots)?;
                self.charge_units(tail.len())?;
                self.heap.append_to_buf(buf, tail);
            }
            return Ok(Value::Str(self.heap.insert(Cell::Slice { buf, len })));
        }
        let total = len as usize;
        self.reserve(strbuf_bytes(total) + SLICE_BYTES, roots)?;
        self.charge_units(total)?;
        let mut units = Vec::with_capacity(total);
        units.extend_from_slice(self.units(ga));
        units.extend_from_slice(tail);
        let buf = self.heap.insert(Cell::StrBuf(units));
        Ok(Value::Str(self.heap.insert(Cell::Slice { buf, len })))
    }

    /// Length of `String(v)` without building it (strings exactly, others by a small bound).
    fn units_len(&self, v: Value) -> usize {
        match v {
            Value::Str(g) => self.units(g).len(),
            _ => 24,
        }
    }

    /// Template-literal concatenation.
    pub(crate) fn template(&mut self, parts: &[Value]) -> OpResult<Value> {
        let mut total = 0;
        for &p in parts {
            match p {
                Value::Arr(_) => {
                    return guest("Cannot use an array in a template literal; use .join() first")
                }
                Value::Obj(_) => {
                    return guest(
                        "Cannot use an object in a template literal; use JSON.stringify() first",
                    )
                }
                _ => total += self.units_len(p),
            }
        }
        // `${s}…` with a long `s` (a string built up in a loop): shares `s`'s buffer, as `+` does
        if let [Value::Str(ga), rest @ ..] = parts {
            if (SHARED_CONCAT_MIN..=u32::MAX as usize).contains(&total) {
                // (append_shared charges for the rest, and for `s` only if it is copied)
                let mut tail: smallvec::SmallVec<[u16; 32]> = smallvec::SmallVec::new();
                for &p in rest {
                    self.push_units(&mut tail, p)?;
                }
                return self.append_shared(*ga, &tail, parts);
            }
        }
        self.charge_units(total)?;
        self.reserve(crate::heap::str_bytes(total), &[])?;
        let mut out = Vec::with_capacity(total);
        for &p in parts {
            self.push_units(&mut out, p)?;
        }
        self.alloc_str(out)
    }

    /// Appends `String(p)`'s code units (a string's without a copy in between).
    fn push_units<E: Extend<u16>>(&self, out: &mut E, p: Value) -> OpResult<()> {
        match p {
            Value::Str(g) => out.extend(self.units(g).iter().copied()),
            other => out.extend(self.to_units(other, "template")?),
        }
        Ok(())
    }

    /// AJS `==`: no coercion; `null == undefined`; `NaN == NaN`; containers by identity.
    pub(crate) fn loose_eq(&self, a: Value, b: Value) -> bool {
        match (a, b) {
            (Value::Undefined | Value::Null, Value::Undefined | Value::Null) => true,
            (Value::Num(x), Value::Num(y)) => x == y || (x.is_nan() && y.is_nan()),
            _ => self.strict_eq(a, b),
        }
    }

    /// JavaScript `===`.
    pub(crate) fn strict_eq(&self, a: Value, b: Value) -> bool {
        match (a, b) {
            (Value::Undefined, Value::Undefined) | (Value::Null, Value::Null) => true,
            (Value::Bool(x), Value::Bool(y)) => x == y,
            (Value::Num(x), Value::Num(y)) => x == y,
            (Value::Str(x), Value::Str(y)) => x == y || self.units(x) == self.units(y),
            (Value::Arr(x), Value::Arr(y)) | (Value::Obj(x), Value::Obj(y)) => x == y,
            (Value::Pending(x), Value::Pending(y)) => x == y,
            _ => false,
        }
    }

    /// Relational comparison; `None` when unordered (NaN involved).
    pub(crate) fn compare(&mut self, a: Value, b: Value, op: &str) -> OpResult<Option<Ordering>> {
        if let (Value::Str(x), Value::Str(y)) = (a, b) {
            self.charge_str_order(a, b)?;
            return Ok(Some(cmp_units(self.units(x), self.units(y))));
        }
        let (x, y) = self.num_pair(a, b, op)?;
        Ok(x.partial_cmp(&y))
    }
}

/// The UTF-16 code units of Rust text; ASCII text (the common case: numbers, keywords, type
/// names) in one allocation of the exact size, which UTF-16's count does not give up front.
#[inline]
pub(crate) fn text_units(s: &str) -> Vec<u16> {
    if s.is_ascii() {
        s.bytes().map(u16::from).collect()
    } else {
        s.encode_utf16().collect()
    }
}

#[cfg(test)]
mod tests {
    use ajs_bytecode::isa::{insert_charges, Op, Src};
    use ajs_bytecode::{Function, Program};

    use crate::heap::Cell;
    use crate::machine::Vm;
    use crate::value::Value;
    use crate::VmOptions;

    fn vm(max_heap_bytes: usize) -> Vm {
        let (code, _) = insert_charges(&[Op::Return { src: Src(0) }], &[(); 1]);
        let program = Program {
            functions: vec![Function {
                name: "f".into(),
                params: vec![],
                nregs: 4,
                code,
            }],
            constants: vec![],
            atoms: vec![],
            entry: 0,
            debug: None,
            signature: None,
        }
        .verify()
        .unwrap();
        let opts = VmOptions {
            max_heap_bytes,
            ..VmOptions::default()
        };
        Vm::new(program, &[], opts).unwrap()
    }

    fn text(vm: &Vm, v: Value) -> String {
        match v {
            Value::Str(g) => String::from_utf16_lossy(vm.units(g)),
            other => panic!("{other:?}"),
        }
    }

    fn ledger_ok(vm: &Vm) {
        assert_eq!(vm.heap.live_bytes(), vm.heap.recount());
    }

    #[test]
    fn remainder_of_integers_matches_the_floating_point_one() {
        use crate::machine::js_rem;
        let same = |x: f64, y: f64| {
            let want = if y == 0.0 || x.is_infinite() || x.is_nan() || y.is_nan() {
                f64::NAN
            } else if y.is_infinite() {
                x
            } else {
                x % y
            };
            let got = js_rem(x, y);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{x} % {y}: {got} vs {want}"
            );
        };
        let xs = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            4.0,
            -4.0,
            5.0,
            -5.0,
            5.5,
            -7.25,
            9_007_199_254_740_991.0,
            -9_007_199_254_740_992.0,
            9_223_372_036_854_775_807.0,
            -9_223_372_036_854_775_808.0,
            1e300,
            f64::INFINITY,
            f64::NAN,
        ];
        for &x in &xs {
            for &y in &xs {
                same(x, y);
            }
        }
        assert!(js_rem(-4.0, 2.0).is_sign_negative());
    }

    /// How many shared string buffers the heap holds.
    fn string_buffers(vm: &Vm) -> usize {
        vm.heap
            .cells()
            .iter()
            .filter(|c| matches!(c, Cell::StrBuf(_)))
            .count()
    }

    #[test]
    fn long_concatenations_share_one_buffer_and_keep_every_prefix() {
        let mut vm = vm(1 << 30);
        let mut s = vm.str_value(&"a".repeat(200)).unwrap();
        let first = s;
        let mut kept = vec![];
        for i in 0..100 {
            let x = vm.str_value("xyz").unwrap();
            s = vm.add_slow(s, x).unwrap();
            s = vm.add_slow(s, Value::Num(i as f64)).unwrap();
            kept.push(s);
            ledger_ok(&vm);
        }
        // every string made along the way still reads as it did
        let mut want = "a".repeat(200);
        for (i, &k) in kept.iter().enumerate() {
            want.push_str(&format!("xyz{i}"));
            assert_eq!(text(&vm, k), want);
        }
        assert_eq!(text(&vm, first), "a".repeat(200));
        // one buffer behind all of them
        assert_eq!(string_buffers(&vm), 1);
        // extending an older string copies instead of writing over the newer ones
        let old = kept[10];
        let y = vm.str_value("!").unwrap();
        let branch = vm.add_slow(old, y).unwrap();
        assert!(text(&vm, branch).ends_with("xyz10!"));
        assert!(text(&vm, kept[11]).ends_with("xyz10xyz11"));
        // a string appended to itself
        let twice = vm.add_slow(s, s).unwrap();
        assert_eq!(text(&vm, twice), format!("{want}{want}"));
        assert_eq!(text(&vm, s), want);
        ledger_ok(&vm);
    }

    #[test]
    fn templates_extending_a_long_string_share_its_buffer() {
        let mut vm = vm(1 << 30);
        let mut s = vm.str_value(&"t".repeat(150)).unwrap();
        let mut kept = vec![];
        for i in 0..50 {
            let x = vm.str_value("-").unwrap();
            // `${s}-${i}`, then `${s}${true}`, alternating with `+`
            s = vm.template(&[s, x, Value::Num(i as f64)]).unwrap();
            kept.push(s);
            s = vm.template(&[s, Value::Bool(i % 2 == 0)]).unwrap();
            s = vm.add_slow(s, Value::Null).unwrap();
            kept.push(s);
            ledger_ok(&vm);
        }
        let mut want = "t".repeat(150);
        for (i, pair) in kept.chunks(2).enumerate() {
            want.push_str(&format!("-{i}"));
            assert_eq!(text(&vm, pair[0]), want);
            want.push_str(&format!("{}null", i % 2 == 0));
            assert_eq!(text(&vm, pair[1]), want);
        }
        assert_eq!(string_buffers(&vm), 1);
        // a short template is a plain string; an older string extended by a template is copied
        let a = vm.str_value("a").unwrap();
        let short = vm.template(&[a, Value::Num(1.0)]).unwrap();
        assert_eq!(text(&vm, short), "a1");
        let branch = vm.template(&[kept[3], a]).unwrap();
        assert!(text(&vm, branch).ends_with("falsenulla"));
        assert!(text(&vm, kept[4]).ends_with("-2"));
        ledger_ok(&vm);
    }

    #[test]
    fn collection_keeps_buffers_of_live_slices_and_frees_the_rest() {
        let mut vm = vm(1 << 30);
        let mut s = vm.str_value(&"b".repeat(300)).unwrap();
        for _ in 0..10 {
            let x = vm.str_value("cd").unwrap();
            s = vm.add_slow(s, x).unwrap();
        }
        let want = text(&vm, s);
        vm.regs[0] = s;
        vm.collect_garbage(&[]);
        ledger_ok(&vm);
        assert_eq!(text(&vm, s), want);
        assert_eq!(vm.heap.live_bytes(), 16 + 2 * want.len());
        vm.regs[0] = Value::Undefined;
        vm.collect_garbage(&[]);
        ledger_ok(&vm);
        assert_eq!(vm.heap.live_bytes(), 0);
    }

    #[test]
    fn the_heap_ceiling_holds_for_shared_concatenation() {
        let mut vm = vm(64 * 1024);
        let mut s = vm.str_value(&"c".repeat(200)).unwrap();
        vm.regs[0] = s;
        let mut failed = false;
        for _ in 0..100_000 {
            // (the ceiling may refuse the small string or the concatenation: either holds it)
            let Ok(x) = vm.str_value("0123456789") else {
                failed = true;
                break;
            };
            vm.regs[1] = x;
            match vm.add_slow(s, x) {
                Ok(v) => {
                    s = v;
                    vm.regs[0] = s;
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
            assert!(vm.heap.live_bytes() <= 64 * 1024);
            ledger_ok(&vm);
        }
        assert!(failed);
    }

    #[test]
    fn slices_survive_a_snapshot() {
        let mut vm = vm(1 << 30);
        let mut s = vm.str_value(&"d".repeat(150)).unwrap();
        let first = {
            let x = vm.str_value("e").unwrap();
            vm.add_slow(s, x).unwrap()
        };
        s = first;
        for _ in 0..5 {
            let x = vm.str_value("fg").unwrap();
            s = vm.add_slow(s, x).unwrap();
        }
        vm.regs[0] = first;
        vm.regs[1] = s;
        let want = (text(&vm, first), text(&vm, s));
        let bytes = vm.snapshot();
        let back = Vm::restore(vm.program.clone(), &bytes, None).unwrap();
        assert_eq!((text(&back, first), text(&back, s)), want);
        assert_eq!(back.heap.live_bytes(), vm.heap.live_bytes());
        // a slice pointing past its buffer is refused
        let mut vm2 = vm;
        if let Some(Cell::Slice { len, .. }) = vm2.heap.get_mut(match s {
            Value::Str(g) => g,
            _ => unreachable!(),
        }) {
            *len += 1000;
        }
        let bad = vm2.snapshot();
        assert!(Vm::restore(vm2.program.clone(), &bad, None).is_err());
    }
}
