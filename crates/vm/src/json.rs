//! `JSON.parse` and `JSON.stringify` with JavaScript's output, paid for before anything is
//! allocated: `stringify` measures its output (charging every node and character it reads) before
//! building it; `parse` reads text already paid for straight into the heap, admitting every
//! node (against both of the heap's counts) before it makes it, so a refusal comes before the
//! memory exists.

use crate::error::{guest, Fault, OpResult};
use crate::heap::{arr_bytes, prop_bytes, str_bytes, Cell, Gc, Key, PropMap};
use crate::machine::{array_index, ordered_keys, Vm, MILLI_PER_ELEMENT};
use crate::memory;
use crate::number::number_to_string;
use crate::value::{Value, MAX_BOUNDARY_DEPTH};
use crate::RunError;

/// Deepest nesting `JSON.parse` accepts.
pub const MAX_JSON_DEPTH: usize = MAX_BOUNDARY_DEPTH;

enum Halt {
    Guest(String),
    Fuel,
    /// The output measured so far cannot fit under the heap's ceiling.
    TooLong,
}

/// Where `stringify` writes: a counter (first pass) or the output (second pass).
struct Out {
    len: usize,
    buf: Option<Vec<u16>>,
    /// milli-fuel spent reading (first pass), and the most it may spend
    spent: u64,
    units_read: u64,
    cap: u64,
    /// longest output worth measuring: one longer cannot fit under the heap's ceiling at all,
    /// so the first pass stops there (a value shared many times measures no further)
    max_len: usize,
}

impl Out {
    fn ascii(&mut self, s: &str) {
        self.len += s.len();
        if let Some(b) = &mut self.buf {
            b.extend(s.bytes().map(u16::from));
        }
    }
    fn unit(&mut self, u: u16) {
        self.len += 1;
        if let Some(b) = &mut self.buf {
            b.push(u);
        }
    }
    fn units(&mut self, s: &[u16]) {
        self.len += s.len();
        if let Some(b) = &mut self.buf {
            b.extend_from_slice(s);
        }
    }
    /// A finite number as JavaScript prints it; a safe integer (the common case) without
    /// building a string first.
    fn number(&mut self, n: f64) {
        let i = n as i64;
        if i as f64 == n && i.unsigned_abs() < 1 << 53 && !(n == 0.0 && n.is_sign_negative()) {
            let mut digits = [0u8; 20];
            let mut at = digits.len();
            let mut m = i.unsigned_abs();
            loop {
                at -= 1;
                digits[at] = b'0' + (m % 10) as u8;
                m /= 10;
                if m == 0 {
                    break;
                }
            }
            if i < 0 {
                at -= 1;
                digits[at] = b'-';
            }
            self.len += digits.len() - at;
            if let Some(b) = &mut self.buf {
                b.extend(digits[at..].iter().map(|&d| u16::from(d)));
            }
        } else {
            self.spent += crate::price::MILLI_PER_NUMBER_TEXT;
            self.ascii(&number_to_string(n));
        }
    }
    fn pay(&mut self, elems: u64, units: usize) -> Result<(), Halt> {
        self.units_read += units as u64;
        self.spent += elems * MILLI_PER_ELEMENT;
        if self.spent + self.units_read * crate::price::MILLI_PER_UNIT > self.cap {
            return Err(Halt::Fuel);
        }
        if self.len > self.max_len {
            return Err(Halt::TooLong);
        }
        Ok(())
    }
    fn quote(&mut self, s: &[u16]) -> Result<(), Halt> {
        self.pay(0, s.len())?;
        const HEX: &[u8] = b"0123456789abcdef";
        self.unit(b'"' as u16);
        let mut i = 0;
        while i < s.len() {
            // a run of units written as they are, copied at once
            let plain = s[i..]
                .iter()
                .position(|&u| u < 0x20 || u == 0x22 || u == 0x5C || (0xD800..0xE000).contains(&u))
                .unwrap_or(s.len() - i);
            if plain > 0 {
                self.units(&s[i..i + plain]);
                i += plain;
                continue;
            }
            let u = s[i];
            match u {
                0x22 => self.ascii("\\\""),
                0x5C => self.ascii("\\\\"),
                0x08 => self.ascii("\\b"),
                0x0C => self.ascii("\\f"),
                0x0A => self.ascii("\\n"),
                0x0D => self.ascii("\\r"),
                0x09 => self.ascii("\\t"),
                0xD800..=0xDBFF if s.get(i + 1).is_some_and(|l| (0xDC00..0xE000).contains(l)) => {
                    self.unit(u);
                    self.unit(s[i + 1]);
                    i += 1;
                }
                _ if u < 0x20 || (0xD800..0xE000).contains(&u) => {
                    self.ascii("\\u");
                    for sh in [12, 8, 4, 0] {
                        self.unit(HEX[((u >> sh) & 15) as usize] as u16);
                    }
                }
                _ => self.unit(u),
            }
            i += 1;
        }
        self.unit(b'"' as u16);
        Ok(())
    }
}

struct Parser<'a> {
    s: &'a [u16],
    i: usize,
    nodes: usize,
    /// estimated and real bytes admitted for the open containers' own storage (their cells
    /// are stored when they close)
    pending: (usize, usize),
    /// the text, a root while the parse runs
    text: Value,
    /// why the parse stopped when it was not the text (the heap limit, fuel)
    fault: Option<Fault>,
    /// the last key parsed at each member position (up to `SHARED_POSITIONS`): the objects of
    /// an array usually have the same keys in the same order, and then share them
    recent: Vec<Key>,
}

/// Member positions whose last key `JSON.parse` remembers for the next object.
const SHARED_POSITIONS: usize = 32;

type PResult<T> = Result<T, String>;

impl Parser<'_> {
    fn ws(&mut self) {
        while self
            .s
            .get(self.i)
            .is_some_and(|&u| matches!(u, 0x20 | 0x09 | 0x0A | 0x0D))
        {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u16> {
        self.s.get(self.i).copied()
    }
    fn unexpected(&self) -> String {
        match self.peek() {
            None => "Unexpected end of JSON input".into(),
            Some(u) => {
                let c = String::from_utf16_lossy(&[u]);
                if self.s.len() <= 40 {
                    format!(
                        "Unexpected token '{c}', \"{}\" is not valid JSON",
                        String::from_utf16_lossy(self.s)
                    )
                } else {
                    format!("Unexpected token '{c}' in JSON at position {}", self.i)
                }
            }
        }
    }
    fn at(&self, msg: &str) -> String {
        format!("{msg} in JSON at position {}", self.i)
    }
    fn lit(&mut self, word: &str, v: Value) -> PResult<Value> {
        for b in word.bytes() {
            if self.peek() != Some(b as u16) {
                return Err(self.unexpected());
            }
            self.i += 1;
        }
        Ok(v)
    }
    /// A property name and its colon; `first` picks V8's message for a missing name.
    /// The key of member `pos` of an object (the same allocation as the previous object's at
    /// that position, when it is the same key).
    fn key(&mut self, first: bool, pos: usize) -> PResult<Key> {
        self.ws();
        if self.peek() != Some(0x22) {
            let msg = if first {
                "Expected property name or '}'"
            } else {
                "Expected double-quoted property name"
            };
            return Err(self.at(msg));
        }
        // a key without escapes (the usual one) is read in place, not copied: when it is the
        // previous object's key at this position, nothing is allocated
        let src = self.s;
        let start = self.i + 1;
        let rest = src.get(start..).unwrap_or(&[]);
        let plain = rest
            .iter()
            .position(|&u| u == 0x22 || u == 0x5C || u < 0x20)
            .unwrap_or(rest.len());
        let owned: Vec<u16>;
        let k: &[u16] = if rest.get(plain) == Some(&0x22) {
            self.i = start + plain + 1;
            &rest[..plain]
        } else {
            owned = self.string()?;
            &owned
        };
        for f in ajs_bytecode::FORBIDDEN_NAMES {
            if k.len() == f.len() && k.iter().copied().eq(f.encode_utf16()) {
                return Err(ajs_bytecode::forbidden_message(f));
            }
        }
        self.ws();
        if self.peek() != Some(0x3A) {
            return Err(self.at("Expected ':' after property name"));
        }
        self.i += 1;
        if let Some(r) = self.recent.get(pos) {
            if r[..] == k[..] {
                return Ok(r.clone());
            }
        }
        let k: Key = Key::from(k);
        if pos < self.recent.len() {
            self.recent[pos] = k.clone();
        } else if pos == self.recent.len() && pos < SHARED_POSITIONS {
            self.recent.push(k.clone());
        }
        Ok(k)
    }

    /// Makes room for `bytes` estimated and `real` real bytes more than the open containers
    /// hold (collecting, with everything parsed so far and `v` as roots, if needed); when they
    /// do not fit, records the fault (fuel for the nodes parsed so far first, then the heap
    /// limit) and stops the parse.
    fn admit(
        &mut self,
        vm: &mut Vm,
        stack: &[Open],
        v: Value,
        bytes: usize,
        real: usize,
    ) -> PResult<()> {
        let (e, r) = (self.pending.0 + bytes, self.pending.1 + real);
        if vm.heap.fits_without_gc(e, r) {
            return Ok(());
        }
        let mut roots: Vec<Value> = vec![self.text, v];
        for o in stack {
            match o {
                Open::Arr(items, _) => roots.extend_from_slice(items),
                Open::Obj(m, _, _) => roots.extend(m.values().copied()),
            }
        }
        vm.collect_garbage(&roots);
        if vm.heap.fits(e, r) {
            return Ok(());
        }
        let nodes = std::mem::take(&mut self.nodes);
        self.fault = Some(match vm.charge_elems(nodes) {
            Err(f) => f,
            Ok(()) => match vm.heap_limit_error::<()>(e, r) {
                Err(f) => f,
                Ok(()) => unreachable!("an error"),
            },
        });
        Err(String::new())
    }

    /// Parses one value into the heap with an explicit stack of open containers (no host
    /// recursion), admitting every node before it is made.
    fn value(&mut self, vm: &mut Vm) -> PResult<Value> {
        let mut stack: Vec<Open> = Vec::new();
        'value: loop {
            self.ws();
            self.nodes += 1;
            let Some(u) = self.peek() else {
                return Err(self.unexpected());
            };
            let mut v = match u {
                0x7B | 0x5B => {
                    if stack.len() >= MAX_JSON_DEPTH {
                        return Err(format!(
                            "JSON.parse: nesting deeper than {MAX_JSON_DEPTH} levels"
                        ));
                    }
                    self.i += 1;
                    self.ws();
                    if u == 0x7B && self.peek() == Some(0x7D) {
                        self.i += 1;
                        self.admit(vm, &stack, Value::Null, 16, memory::obj_real(0))?;
                        Value::Obj(vm.heap.insert(Cell::Obj(PropMap::default())))
                    } else if u == 0x5B && self.peek() == Some(0x5D) {
                        self.i += 1;
                        self.admit(vm, &stack, Value::Null, arr_bytes(0), memory::arr_real(0))?;
                        Value::Arr(vm.heap.insert(Cell::Arr(Vec::new())))
                    } else {
                        let room = (16, OPEN_REAL);
                        self.admit(vm, &stack, Value::Null, room.0, room.1)?;
                        self.pending.0 += room.0;
                        self.pending.1 += room.1;
                        if u == 0x7B {
                            let k = self.key(true, 0)?;
                            stack.push(Open::Obj(PropMap::default(), k, room));
                        } else {
                            stack.push(Open::Arr(Vec::new(), room));
                        }
                        continue 'value;
                    }
                }
                0x22 => {
                    let s = self.string()?;
                    let n = s.len();
                    self.admit(vm, &stack, Value::Null, str_bytes(n), memory::str_real(n))?;
                    vm.commit_str(s)
                }
                0x74 => self.lit("true", Value::Bool(true))?,
                0x66 => self.lit("false", Value::Bool(false))?,
                0x6E => self.lit("null", Value::Null)?,
                0x2D | 0x30..=0x39 => self.number()?,
                _ => return Err(self.unexpected()),
            };
            // a complete value: hand it to the open containers, closing those that end here
            loop {
                // the room the value takes in its container, admitted first (the value a root)
                let room = match stack.last() {
                    None => return Ok(v),
                    Some(Open::Arr(..)) => (8, 2 * std::mem::size_of::<Value>()),
                    Some(Open::Obj(_, k, _)) => (
                        prop_bytes(k.len()),
                        memory::key_real(k.len()) + memory::PROP_GROWTH_REAL,
                    ),
                };
                self.admit(vm, &stack, v, room.0, room.1)?;
                self.pending.0 += room.0;
                self.pending.1 += room.1;
                match stack.last_mut() {
                    None => return Ok(v),
                    Some(Open::Arr(items, held)) => {
                        held.0 += room.0;
                        held.1 += room.1;
                        items.push(v);
                        self.ws();
                        match self.peek() {
                            Some(0x2C) => {
                                self.i += 1;
                                continue 'value;
                            }
                            Some(0x5D) => {
                                self.i += 1;
                                let Some(Open::Arr(items, held)) = stack.pop() else {
                                    unreachable!("the top is an array")
                                };
                                self.release(held);
                                v = Value::Arr(vm.heap.insert(Cell::Arr(items)));
                            }
                            _ => return Err(self.at("Expected ',' or ']' after array element")),
                        }
                    }
                    Some(Open::Obj(m, key, held)) => {
                        held.0 += room.0;
                        held.1 += room.1;
                        // a repeated key keeps its place and takes the new value
                        m.insert(std::mem::take(key), v);
                        self.ws();
                        match self.peek() {
                            Some(0x2C) => {
                                self.i += 1;
                                let pos = match stack.last() {
                                    Some(Open::Obj(m, _, _)) => m.len(),
                                    _ => 0,
                                };
                                let k = self.key(false, pos)?;
                                if let Some(Open::Obj(_, key, _)) = stack.last_mut() {
                                    *key = k;
                                }
                                continue 'value;
                            }
                            Some(0x7D) => {
                                self.i += 1;
                                let Some(Open::Obj(m, _, held)) = stack.pop() else {
                                    unreachable!("the top is an object")
                                };
                                self.release(held);
                                v = Value::Obj(vm.heap.insert(Cell::Obj(m)));
                            }
                            _ => return Err(self.at("Expected ',' or '}' after property value")),
                        }
                    }
                }
            }
        }
    }

    /// A container closed: what was admitted for it is stored (its cell now counts).
    fn release(&mut self, held: (usize, usize)) {
        self.pending.0 -= held.0;
        self.pending.1 -= held.1;
    }
    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|u| (0x30..=0x39).contains(&u)) {
            self.i += 1;
        }
        self.i - start
    }
    fn number(&mut self) -> PResult<Value> {
        let start = self.i;
        if self.peek() == Some(0x2D) {
            self.i += 1;
            if !self.peek().is_some_and(|u| (0x30..=0x39).contains(&u)) {
                return Err(self.at("No number after minus sign"));
            }
        }
        if self.peek() == Some(0x30) {
            self.i += 1;
            if self.peek().is_some_and(|u| (0x30..=0x39).contains(&u)) {
                return Err(self.at("Unexpected number"));
            }
        } else {
            self.digits();
        }
        if self.peek() == Some(0x2E) {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.at("Unterminated fractional number"));
            }
        }
        if matches!(self.peek(), Some(0x65 | 0x45)) {
            self.i += 1;
            if matches!(self.peek(), Some(0x2B | 0x2D)) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.at("Exponent part is missing a number"));
            }
        }
        let text = String::from_utf16_lossy(&self.s[start..self.i]);
        Ok(Value::Num(text.parse::<f64>().unwrap_or(f64::NAN)))
    }
    fn string(&mut self) -> PResult<Vec<u16>> {
        self.i += 1; // opening quote
                     // the units up to the first quote, backslash or control character, copied at once
                     // (most strings end there)
        let rest = &self.s[self.i.min(self.s.len())..];
        let plain = rest
            .iter()
            .position(|&u| u == 0x22 || u == 0x5C || u < 0x20)
            .unwrap_or(rest.len());
        let mut out = rest[..plain].to_vec();
        self.i += plain;
        loop {
            let Some(u) = self.peek() else {
                return Err(format!(
                    "Unterminated string in JSON at position {}",
                    self.i
                ));
            };
            match u {
                0x22 => {
                    self.i += 1;
                    return Ok(out);
                }
                0x5C => {
                    self.i += 1;
                    let Some(e) = self.peek() else {
                        return Err(format!(
                            "Unterminated string in JSON at position {}",
                            self.i
                        ));
                    };
                    let c = match e {
                        0x22 => 0x22,
                        0x5C => 0x5C,
                        0x2F => 0x2F,
                        0x62 => 0x08,
                        0x66 => 0x0C,
                        0x6E => 0x0A,
                        0x72 => 0x0D,
                        0x74 => 0x09,
                        0x75 => {
                            let mut v: u16 = 0;
                            for _ in 0..4 {
                                self.i += 1;
                                let d = self
                                    .peek()
                                    .and_then(|h| char::from_u32(h as u32)?.to_digit(16));
                                match d {
                                    Some(d) => v = v * 16 + d as u16,
                                    None => return Err(self.at("Bad Unicode escape")),
                                }
                            }
                            v
                        }
                        _ => return Err(self.at("Bad escaped character")),
                    };
                    out.push(c);
                    self.i += 1;
                }
                u if u < 0x20 => {
                    return Err(self.at("Bad control character in string literal"));
                }
                u => {
                    out.push(u);
                    self.i += 1;
                }
            }
        }
    }
}

impl Vm {
    /// `JSON.stringify(value, replacer, space)`.
    pub(crate) fn json_stringify(
        &mut self,
        v: Value,
        replacer: Value,
        space: Value,
    ) -> OpResult<Value> {
        let gap: Vec<u16> = match space {
            Value::Num(n) => {
                let k = if n.is_nan() { 0.0 } else { n.trunc().min(10.0) };
                vec![b' ' as u16; if k >= 1.0 { k as usize } else { 0 }]
            }
            Value::Str(g) => self.units(g).iter().take(10).copied().collect(),
            _ => Vec::new(),
        };
        // an array replacer lists the properties to keep
        let allow: Option<Vec<Vec<u16>>> = match replacer {
            Value::Arr(g) => {
                let n = match self.heap.get(g) {
                    Cell::Arr(a) => a.len(),
                    _ => 0,
                };
                self.charge_elems(n)?;
                let mut keys: Vec<Vec<u16>> = Vec::new();
                if let Cell::Arr(a) = self.heap.get(g) {
                    for &k in a {
                        let u = match k {
                            Value::Str(s) => self.units(s).to_vec(),
                            Value::Num(x) => number_to_string(x).encode_utf16().collect(),
                            _ => continue,
                        };
                        if !keys.contains(&u) {
                            keys.push(u);
                        }
                    }
                }
                Some(keys)
            }
            _ => None,
        };
        let mut out = Out {
            len: 0,
            buf: None,
            spent: 0,
            units_read: 0,
            cap: self.meter.fuel.left(),
            max_len: self.heap.limit() / 2,
        };
        let mut path = Vec::new();
        let r = self.ser(v, &gap, &allow, &mut Vec::new(), &mut path, &mut out);
        let cost = out.spent + out.units_read * crate::price::MILLI_PER_UNIT;
        match r {
            Err(Halt::Fuel) => return Err(self.spend_all()),
            Err(Halt::TooLong) => {
                // (refused by the reservation: no collection makes room for it)
                self.charge(cost)?;
                self.reserve(str_bytes(out.len), &[])?;
                return guest("JSON.stringify: the output cannot fit under the heap's ceiling");
            }
            Err(Halt::Guest(m)) => {
                self.charge(cost)?;
                return guest(m);
            }
            Ok(false) => {
                self.charge(cost)?;
                return Ok(Value::Undefined);
            }
            Ok(true) => self.charge(cost)?,
        }
        let len = out.len;
        self.charge_units(len)?;
        self.reserve(str_bytes(len), &[])?;
        let mut out = Out {
            len: 0,
            buf: Some(Vec::with_capacity(len)),
            spent: 0,
            units_read: 0,
            cap: u64::MAX,
            max_len: usize::MAX,
        };
        let _ = self.ser(v, &gap, &allow, &mut Vec::new(), &mut Vec::new(), &mut out);
        let units = out.buf.unwrap_or_default();
        Ok(self.commit_str(units))
    }

    fn spend_all(&mut self) -> Fault {
        self.meter.fuel.set(0);
        Fault::Fatal(RunError::out_of_fuel())
    }

    /// Writes `v`; `Ok(false)` when it has no JSON form (`undefined`).
    fn ser(
        &self,
        v: Value,
        gap: &[u16],
        allow: &Option<Vec<Vec<u16>>>,
        indent: &mut Vec<u16>,
        path: &mut Vec<Gc>,
        out: &mut Out,
    ) -> Result<bool, Halt> {
        out.pay(1, 0)?;
        match v {
            Value::Undefined => return Ok(false),
            Value::Pending(_) => {
                return Err(Halt::Guest(
                    "JSON.stringify: a host result that has not settled cannot be serialized"
                        .into(),
                ))
            }
            Value::Null => out.ascii("null"),
            Value::Bool(b) => out.ascii(if b { "true" } else { "false" }),
            Value::Num(n) => {
                if n.is_finite() {
                    out.number(n)
                } else {
                    out.ascii("null")
                }
            }
            Value::Str(g) => out.quote(self.units(g))?,
            Value::Obj(g) if matches!(self.heap.get(g), Cell::Date(_)) => {
                let t = match self.heap.get(g) {
                    Cell::Date(t) => *t,
                    _ => f64::NAN,
                };
                if t.is_finite() {
                    let iso: Vec<u16> = crate::dates::iso_string(t).encode_utf16().collect();
                    out.quote(&iso)?
                } else {
                    out.ascii("null")
                }
            }
            Value::Arr(g) | Value::Obj(g) => {
                if path.contains(&g) {
                    return Err(Halt::Guest("Converting circular structure to JSON".into()));
                }
                if path.len() >= MAX_BOUNDARY_DEPTH {
                    return Err(Halt::Guest(format!(
                        "JSON.stringify: value nested deeper than {MAX_BOUNDARY_DEPTH} levels"
                    )));
                }
                path.push(g);
                let stepback = indent.len();
                indent.extend_from_slice(gap);
                let is_arr = matches!(v, Value::Arr(_)) || matches!(self.heap.get(g), Cell::Set(_));
                out.unit(if is_arr { b'[' } else { b'{' } as u16);
                let mut first = true;
                let mut sep = |out: &mut Out, indent: &[u16]| {
                    if !first {
                        out.unit(b',' as u16);
                    }
                    first = false;
                    if !gap.is_empty() {
                        out.unit(b'\n' as u16);
                        out.units(indent);
                    }
                };
                match self.heap.get(g) {
                    Cell::Set(m) => {
                        for &e in m.values() {
                            sep(out, indent);
                            if !self.ser(e, gap, allow, indent, path, out)? {
                                out.ascii("null");
                            }
                        }
                    }
                    Cell::Arr(a) => {
                        for &e in a.iter() {
                            sep(out, indent);
                            if !self.ser(e, gap, allow, indent, path, out)? {
                                out.ascii("null");
                            }
                        }
                    }
                    Cell::Obj(m) => {
                        let mut member = |out: &mut Out,
                                          indent: &mut Vec<u16>,
                                          path: &mut Vec<Gc>,
                                          k: &[u16],
                                          x: Value|
                         -> Result<(), Halt> {
                            if matches!(x, Value::Undefined) {
                                return Ok(());
                            }
                            sep(out, indent);
                            out.quote(k)?;
                            out.unit(b':' as u16);
                            if !gap.is_empty() {
                                out.unit(b' ' as u16);
                            }
                            self.ser(x, gap, allow, indent, path, out)?;
                            Ok(())
                        };
                        if allow.is_none() && !m.keys().any(|k| array_index(k).is_some()) {
                            // no replacer list and no integer-like key (the common case): the
                            // keys' order is the insertion order, the members are read in place
                            for (k, &x) in m.iter() {
                                member(out, indent, path, k, x)?;
                            }
                        } else {
                            let keys: Vec<&[u16]> = match allow {
                                Some(list) => list
                                    .iter()
                                    .filter(|k| m.contains_key(&k[..]))
                                    .map(|k| &k[..])
                                    .collect(),
                                None => ordered_keys(m),
                            };
                            for k in keys {
                                let x = m.get(k).copied().unwrap_or(Value::Undefined);
                                member(out, indent, path, k, x)?;
                            }
                        }
                    }
                    _ => {}
                }
                let empty = first;
                indent.truncate(stepback);
                if !empty && !gap.is_empty() {
                    out.unit(b'\n' as u16);
                    out.units(indent);
                }
                out.unit(if is_arr { b']' } else { b'}' } as u16);
                path.pop();
            }
        }
        Ok(true)
    }

    /// `JSON.parse(text)`.
    pub(crate) fn json_parse(&mut self, text: Value) -> OpResult<Value> {
        if let Value::Str(g) = text {
            self.charge_work(self.units(g).len(), crate::price::factor::PARSE_JSON)?;
        }
        // a flat string is read in place: its units are taken out of the cell (still counted,
        // the cell still rooted) while the parse stores new cells, and put back after
        let taken = match text {
            Value::Str(g) => match self.heap.get_mut(g) {
                Some(Cell::Str(b)) => Some((g, std::mem::take(b))),
                _ => None,
            },
            _ => None,
        };
        let r = match &taken {
            Some((_, units)) => self.parse_units(units, text, (0, 0)),
            None => {
                let s = self.to_units(text, "JSON.parse")?;
                // the copy is held while the parse runs
                let held = (0, memory::alloc(2 * s.len()));
                self.parse_units(&s, text, held)
            }
        };
        if let Some((g, units)) = taken {
            if let Some(Cell::Str(b)) = self.heap.get_mut(g) {
                *b = units;
            }
        }
        r
    }

    fn parse_units(&mut self, s: &[u16], text: Value, held: (usize, usize)) -> OpResult<Value> {
        let mut p = Parser {
            s,
            i: 0,
            nodes: 0,
            pending: held,
            text,
            fault: None,
            recent: Vec::new(),
        };
        let r = p.value(self);
        if let Some(f) = p.fault.take() {
            return Err(f);
        }
        let v = match r {
            Ok(v) => {
                p.ws();
                if p.i < s.len() {
                    return guest(format!(
                        "Unexpected non-whitespace character after JSON at position {}",
                        p.i
                    ));
                }
                v
            }
            Err(m) => return guest(m),
        };
        self.charge_elems(p.nodes)?;
        Ok(v)
    }
}

/// A container being parsed and the bytes admitted for its own storage so far.
enum Open {
    Arr(Vec<Value>, (usize, usize)),
    Obj(PropMap, Key, (usize, usize)),
}

/// Real bytes admitted for a container when it opens (its slot and first allocation).
const OPEN_REAL: usize = memory::SLOT + 128;
