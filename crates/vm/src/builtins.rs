//! Builtins without callbacks: string, array and number methods, the global functions and the
//! `Object`, `Array`, `Number` and `String` namespaces.
//!
//! Every builtin pays fuel for the size of what it reads and writes, and reserves heap for what it
//! allocates, **before** it allocates: outputs are measured first, then paid for, then built.
//! Mutating array methods keep the heap ledger equal to the cells' accounted size.

use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::heap::{arr_bytes, prop_bytes, str_bytes, Cell, Gc, Key, PropMap};
use crate::machine::{array_index, ordered_keys, Vm, FORBIDDEN, MILLI_PER_ELEMENT};
use crate::memory;
use crate::number::{
    exact_digits_cost, is_ws_unit, number_to_string, parse_float, parse_int, radix_digits_bound,
    to_fixed, to_fixed_cost, to_int32, to_precision, to_radix_string, to_uint32,
};
use crate::price::factor;
use crate::value::{Value, MAX_BOUNDARY_DEPTH};

fn arg(args: &[Value], i: usize) -> Value {
    args.get(i).copied().unwrap_or(Value::Undefined)
}

fn ascii(s: &str) -> impl Iterator<Item = u16> + '_ {
    s.bytes().map(u16::from)
}

/// Code units of the decimal indices `0..n` in all.
fn index_digits(n: usize) -> usize {
    let (mut total, mut from, mut width) = (0usize, 0usize, 1usize);
    while from < n {
        let to = from.saturating_mul(10).max(10).min(n);
        total = total.saturating_add((to - from).saturating_mul(width));
        from = to;
        width += 1;
    }
    total
}

/// A relative index (`slice`, `at`, `fill`) resolved against `len`.
fn rel(k: f64, len: usize) -> usize {
    if k < 0.0 {
        (len as f64 + k).max(0.0) as usize
    } else {
        k.min(len as f64) as usize
    }
}

fn clamp(k: f64, len: usize) -> usize {
    k.max(0.0).min(len as f64) as usize
}

/// First occurrence of `n` in `h` at or after `from` (Knuth–Morris–Pratt: linear time).
pub(crate) fn find(h: &[u16], n: &[u16], from: usize) -> Option<usize> {
    if n.is_empty() {
        return (from <= h.len()).then_some(from);
    }
    if from >= h.len() || n.len() > h.len() - from {
        return None;
    }
    if n.len() == 1 {
        return h[from..].iter().position(|&u| u == n[0]).map(|p| p + from);
    }
    let mut fail = vec![0usize; n.len()];
    let mut k = 0;
    for i in 1..n.len() {
        while k > 0 && n[i] != n[k] {
            k = fail[k - 1];
        }
        if n[i] == n[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut q = 0;
    for (i, &u) in h.iter().enumerate().skip(from) {
        while q > 0 && u != n[q] {
            q = fail[q - 1];
        }
        if u == n[q] {
            q += 1;
        }
        if q == n.len() {
            return Some(i + 1 - n.len());
        }
    }
    None
}

/// Last occurrence of `n` in `h` starting at or before `max_start`.
fn rfind(h: &[u16], n: &[u16], max_start: usize) -> Option<usize> {
    if n.len() > h.len() {
        return None;
    }
    let k_max = max_start.min(h.len() - n.len());
    let hr: Vec<u16> = h.iter().rev().copied().collect();
    let nr: Vec<u16> = n.iter().rev().copied().collect();
    let from = h.len() - n.len() - k_max;
    find(&hr, &nr, from).map(|rk| h.len() - n.len() - rk)
}

/// Calls `f(start, end)` for each piece of `h` split by `sep`, at most `lim` pieces.
fn split_pieces(h: &[u16], sep: &[u16], lim: usize, mut f: impl FnMut(usize, usize)) {
    if lim == 0 {
        return;
    }
    if sep.is_empty() {
        for i in 0..h.len().min(lim) {
            f(i, i + 1);
        }
        return;
    }
    let mut count = 0;
    let mut p = 0;
    while let Some(q) = find(h, sep, p) {
        f(p, q);
        count += 1;
        if count == lim {
            return;
        }
        p = q + sep.len();
    }
    f(p, h.len());
}

/// One part of a `replace` replacement template.
enum Tok {
    Lit(usize, usize),
    Dollar,
    Matched,
    Before,
    After,
}

fn parse_template(r: &[u16]) -> Vec<Tok> {
    let mut toks = Vec::new();
    let mut i = 0;
    let mut lit = 0;
    while i < r.len() {
        if r[i] == b'$' as u16 && i + 1 < r.len() {
            let t = match r[i + 1] {
                0x24 => Some(Tok::Dollar),
                0x26 => Some(Tok::Matched),
                0x60 => Some(Tok::Before),
                0x27 => Some(Tok::After),
                _ => None,
            };
            if let Some(t) = t {
                if lit < i {
                    toks.push(Tok::Lit(lit, i));
                }
                toks.push(t);
                i += 2;
                lit = i;
                continue;
            }
        }
        i += 1;
    }
    if lit < r.len() {
        toks.push(Tok::Lit(lit, r.len()));
    }
    toks
}

const URI_UNESCAPED: &[u8] = b"-_.!~*'()";
const URI_RESERVED: &[u8] = b";/?:@&=+$,#";

fn uri_keep(u: u16, full: bool) -> bool {
    u < 128
        && ((u as u8).is_ascii_alphanumeric()
            || URI_UNESCAPED.contains(&(u as u8))
            || (full && URI_RESERVED.contains(&(u as u8))))
}

fn hex_val(u: u16) -> Option<u8> {
    char::from_u32(u as u32)
        .and_then(|c| c.to_digit(16))
        .map(|d| d as u8)
}

/// Code units `case_map` of `s` gives (a character maps to the same length whatever its
/// context: only the final sigma depends on it, and both sigmas are one unit).
fn case_len(s: &[u16], upper: bool) -> usize {
    char::decode_utf16(s.iter().copied())
        .map(|r| match r {
            Ok(c) if upper => c.to_uppercase().map(char::len_utf16).sum(),
            Ok(c) => c.to_lowercase().map(char::len_utf16).sum(),
            Err(_) => 1,
        })
        .sum()
}

/// Characters a run of `case_map` holds before it is mapped at the next white space or
/// digit (where no character's mapping depends on what is on the other side).
const CASE_RUN: usize = 4096;

/// `s` in upper or lower case, into a buffer of `cap` units (its measured length; `ascii`:
/// every unit is ASCII, mapped one for one).
fn case_map(s: &[u16], upper: bool, ascii: bool, cap: usize) -> Vec<u16> {
    if ascii {
        let map = |u: u16| match (upper, u as u8) {
            (true, b'a'..=b'z') => u - 32,
            (false, b'A'..=b'Z') => u + 32,
            _ => u,
        };
        return s.iter().map(|&u| map(u)).collect();
    }
    let mut out = Vec::with_capacity(cap);
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut Vec<u16>| {
        let m = if upper {
            run.to_uppercase()
        } else {
            run.to_lowercase()
        };
        out.extend(m.encode_utf16());
        run.clear();
    };
    for r in char::decode_utf16(s.iter().copied()) {
        match r {
            Ok(c) => {
                if run.len() >= CASE_RUN && (c.is_ascii_whitespace() || c.is_ascii_digit()) {
                    flush(&mut run, &mut out);
                }
                run.push(c)
            }
            Err(e) => {
                flush(&mut run, &mut out);
                out.push(e.unpaired_surrogate());
            }
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The bounds of one `flat` walk: the elements that fit, the arrays visited and elements
/// counted so far, the receiver (kept alive if a collection must make room) and the
/// run's deadline.
struct FlatWalk {
    cap: usize,
    visits: u64,
    total: usize,
    root: Value,
    interrupt: crate::interrupt::Interrupt,
}

/// Arrays a `flat` walk visits between two checks of the run's deadline.
const FLAT_CHECK_EVERY: u64 = 1 << 14;

impl Vm {
    pub(crate) fn charge_elems(&mut self, n: usize) -> OpResult<()> {
        self.charge((n as u64).saturating_mul(MILLI_PER_ELEMENT))
    }

    /// Pays for a new string of `len` code units and makes room for it.
    fn prepare_str(&mut self, len: usize) -> OpResult<()> {
        self.charge_units(len)?;
        self.reserve(str_bytes(len), &[])
    }

    /// Stores a string whose room was reserved.
    pub(crate) fn commit_str(&mut self, units: Vec<u16>) -> Value {
        Value::Str(self.heap.insert(Cell::Str(units.into_boxed_slice())))
    }

    /// Stores an array whose room was reserved.
    pub(crate) fn commit_arr(&mut self, items: Vec<Value>) -> Value {
        Value::Arr(self.heap.insert(Cell::Arr(items)))
    }

    /// A string no longer than something already paid for: pays for the output and stores it.
    fn new_str(&mut self, units: Vec<u16>) -> OpResult<Value> {
        self.prepare_str(units.len())?;
        Ok(self.commit_str(units))
    }

    /// The part `start..end` of the string `g`: paid for and admitted before it is copied.
    fn sub_str(&mut self, g: Gc, start: usize, end: usize) -> OpResult<Value> {
        self.prepare_str(end - start)?;
        let out = self.units(g)[start..end].to_vec();
        Ok(self.commit_str(out))
    }

    /// A fresh array of existing values: pays per element, reserves, stores.
    fn new_arr(&mut self, items: Vec<Value>, roots: &[Value]) -> OpResult<Value> {
        self.charge_elems(items.len())?;
        self.reserve_arr(items.len(), roots)?;
        Ok(self.commit_arr(items))
    }

    fn int_arg(&self, v: Value, op: &str) -> OpResult<f64> {
        let n = self.to_number(v, op)?;
        Ok(if n.is_nan() { 0.0 } else { n.trunc() + 0.0 })
    }

    /// `String(v)` of an argument, paid for by its length (for the other builtin modules).
    pub(crate) fn str_arg_pub(&mut self, v: Value, op: &str) -> OpResult<Vec<u16>> {
        self.str_arg(v, op)
    }

    /// `String(v)` of an argument, paid for by its length.
    fn str_arg(&mut self, v: Value, op: &str) -> OpResult<Vec<u16>> {
        if let Value::Str(g) = v {
            self.charge_units(self.units(g).len())?;
        }
        self.to_units(v, op)
    }

    pub(crate) fn arr_items(&self, g: Gc) -> &[Value] {
        match self.heap.get(g) {
            Cell::Arr(a) => a,
            _ => &[],
        }
    }

    fn arr_at(&self, g: Gc, i: usize) -> Value {
        self.arr_items(g)
            .get(i)
            .copied()
            .unwrap_or(Value::Undefined)
    }

    pub(crate) fn check_key(&self, k: &[u16]) -> OpResult<()> {
        if k.len() <= 11 {
            for f in FORBIDDEN {
                if k.iter().copied().eq(f.encode_utf16()) {
                    return guest(ajs_bytecode::forbidden_message(f));
                }
            }
        }
        Ok(())
    }

    fn bad_receiver<T>(&self, id: NativeId, v: Value) -> OpResult<T> {
        let m = &id.js_name()[1..];
        match v {
            Value::Null | Value::Undefined => {
                guest(crate::method_hints::on_nullish(m, self.type_of_null(v)))
            }
            other => guest(crate::method_hints::not_a_function(
                m,
                self.kind_name(other),
            )),
        }
    }

    /// Natives other than `Math`, `console` and `push`.
    pub(crate) fn call_builtin(&mut self, id: NativeId, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let a = |i: usize| arg(args, i);
        let name = id.js_name();
        if id.is_method() {
            let recv = a(0);
            return match recv {
                Value::Str(g) => self.string_method(id, g, args),
                Value::Arr(g) => self.array_method(id, g, args),
                Value::Num(n) => self.number_method(id, n, args),
                Value::Obj(g) => self.object_method(id, g, args),
                Value::Bool(b) if id == ToString => {
                    self.str_value(if b { "true" } else { "false" })
                }
                _ => self.bad_receiver(id, recv),
            };
        }
        match id {
            ParseInt | NumberParseInt => {
                let s = self.str_arg(a(0), name)?;
                self.charge_work(s.len(), factor::PARSE_NUMBER)?;
                let radix = to_int32(self.number_paid(a(1), name)?);
                Ok(Value::Num(parse_int(&String::from_utf16_lossy(&s), radix)))
            }
            ParseFloat | NumberParseFloat => {
                let s = self.str_arg(a(0), name)?;
                self.charge_work(s.len(), factor::PARSE_NUMBER)?;
                Ok(Value::Num(parse_float(&String::from_utf16_lossy(&s))))
            }
            IsNaN => Ok(Value::Bool(self.number_paid(a(0), name)?.is_nan())),
            IsFinite => Ok(Value::Bool(self.number_paid(a(0), name)?.is_finite())),
            NumberIsNaN => Ok(Value::Bool(matches!(a(0), Value::Num(n) if n.is_nan()))),
            NumberIsFinite => Ok(Value::Bool(matches!(a(0), Value::Num(n) if n.is_finite()))),
            NumberIsInteger => Ok(Value::Bool(
                matches!(a(0), Value::Num(n) if n.is_finite() && n.trunc() == n),
            )),
            NumberIsSafeInteger => Ok(Value::Bool(matches!(a(0), Value::Num(n)
                if n.is_finite() && n.trunc() == n && n.abs() <= 9_007_199_254_740_991.0))),
            EncodeUriComponent | EncodeUri => {
                let s = self.str_arg(a(0), name)?;
                self.uri_encode(&s, id == EncodeUri)
            }
            DecodeUriComponent | DecodeUri => {
                let s = self.str_arg(a(0), name)?;
                self.uri_decode(&s, id == DecodeUri)
            }
            JsonParse => self.json_parse(a(0)),
            JsonStringify => self.json_stringify(a(0), a(1), a(2)),
            ObjectKeys | ObjectValues | ObjectEntries => self.object_listing(id, a(0)),
            ObjectFromEntries => self.object_from_entries(a(0)),
            ObjectAssign => self.object_assign(args),
            ObjectHasOwn => {
                let o = a(0);
                if matches!(o, Value::Null | Value::Undefined) {
                    return guest("Cannot convert undefined or null to object");
                }
                let k = self.str_arg(a(1), name)?;
                let is_len = k.iter().copied().eq(ascii("length"));
                Ok(Value::Bool(match o {
                    Value::Obj(g) => {
                        matches!(self.heap.get(g), Cell::Obj(m) if m.contains_key(&k[..]))
                    }
                    Value::Arr(g) => {
                        is_len || array_index(&k).is_some_and(|i| i < self.arr_items(g).len())
                    }
                    Value::Str(g) => {
                        is_len || array_index(&k).is_some_and(|i| i < self.units(g).len())
                    }
                    _ => false,
                }))
            }
            ArrayIsArray => Ok(Value::Bool(matches!(a(0), Value::Arr(_)))),
            ArrayOf => self.new_arr(args.to_vec(), &[]),
            StringFromCharCode => {
                self.charge_elems(args.len())?;
                let mut out = Vec::with_capacity(args.len());
                for &x in args {
                    out.push(to_uint32(self.to_number(x, name)?) as u16);
                }
                self.new_str(out)
            }
            StringFromCodePoint => {
                self.charge_elems(args.len())?;
                let mut out = Vec::with_capacity(args.len());
                for &x in args {
                    let n = self.to_number(x, name)?;
                    let c = (n.trunc() == n && (0.0..=1_114_111.0).contains(&n))
                        .then(|| char::from_u32(n as u32))
                        .flatten();
                    match c {
                        Some(c) => out.extend(c.encode_utf16(&mut [0; 2]).iter()),
                        None if n.trunc() == n && (0xD800 as f64..=0xDFFF as f64).contains(&n) => {
                            out.push(n as u16)
                        }
                        None => {
                            let s = String::from_utf16_lossy(&self.to_units(x, name)?);
                            return guest(format!("Invalid code point {s}"));
                        }
                    }
                }
                self.new_str(out)
            }
            _ => guest(format!("{name} is not available")),
        }
    }

    // ------------------------------------------------------------------ strings

    fn string_method(&mut self, id: NativeId, g: Gc, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let a = |i: usize| arg(args, i);
        let name = id.js_name();
        let len = self.units(g).len();
        if matches!(id, Match | MatchAll | Search | Replace | ReplaceAll | Split) {
            if let Some(v) = self.string_regex(id, g, args)? {
                return Ok(v);
            }
        }
        match id {
            ToString => Ok(Value::Str(g)),
            Substr => self.substr(g, args),
            Normalize => self.normalize(g, a(1)),
            ToUpperCase | ToLowerCase => {
                let ascii = self.units(g).iter().all(|&u| u < 0x80);
                let f = if ascii {
                    factor::CASE_MAP_ASCII
                } else {
                    factor::CASE_MAP
                };
                self.charge_work(len, f)?;
                // measured, paid for and admitted before it is built
                let upper = id == ToUpperCase;
                let n = if ascii {
                    len
                } else {
                    case_len(self.units(g), upper)
                };
                self.prepare_str(n)?;
                let out = case_map(self.units(g), upper, ascii, n);
                Ok(self.commit_str(out))
            }
            Trim | TrimStart | TrimEnd => {
                self.afford_work(len, factor::SCAN)?;
                let s = self.units(g);
                let mut start = 0;
                let mut end = s.len();
                if id != TrimEnd {
                    while start < end && is_ws_unit(s[start]) {
                        start += 1;
                    }
                }
                if id != TrimStart {
                    while end > start && is_ws_unit(s[end - 1]) {
                        end -= 1;
                    }
                }
                self.charge_work(len - (end - start), factor::SCAN)?;
                if start == 0 && end == len {
                    return Ok(Value::Str(g));
                }
                self.sub_str(g, start, end)
            }
            CharAt | CharCodeAt | CodePointAt | At => {
                let k = self.int_arg(a(1), name)?;
                let k = if id == At && k < 0.0 {
                    len as f64 + k
                } else {
                    k
                };
                let s = self.units(g);
                let u = (k >= 0.0 && k < len as f64).then(|| s[k as usize]);
                match (id, u) {
                    (CharAt, None) => self.new_str(Vec::new()),
                    (CharAt | At, Some(u)) => self.new_str(vec![u]),
                    (CharCodeAt, u) => Ok(Value::Num(u.map_or(f64::NAN, f64::from))),
                    (CodePointAt, Some(u)) => {
                        let i = k as usize;
                        let next = s.get(i + 1).copied();
                        Ok(Value::Num(match next {
                            Some(l)
                                if (0xD800..0xDC00).contains(&u)
                                    && (0xDC00..0xE000).contains(&l) =>
                            {
                                (((u as u32 - 0xD800) << 10) + (l as u32 - 0xDC00) + 0x10000) as f64
                            }
                            _ => u as f64,
                        }))
                    }
                    _ => Ok(Value::Undefined),
                }
            }
            Includes | IndexOf | StartsWith | EndsWith | LastIndexOf => {
                let needle = self.str_arg(a(1), name)?;
                if !matches!(id, StartsWith | EndsWith) {
                    self.charge_work(len, factor::SEARCH)?;
                }
                let s = self.units(g);
                Ok(match id {
                    Includes | IndexOf => {
                        let from = clamp(self.int_arg(a(2), name)?, len);
                        let r = find(s, &needle, from);
                        if id == Includes {
                            Value::Bool(r.is_some())
                        } else {
                            Value::Num(r.map_or(-1.0, |i| i as f64))
                        }
                    }
                    StartsWith => {
                        let from = clamp(self.int_arg(a(2), name)?, len);
                        Value::Bool(s[from..].starts_with(&needle))
                    }
                    EndsWith => {
                        let end = match a(2) {
                            Value::Undefined => len,
                            v => clamp(self.int_arg(v, name)?, len),
                        };
                        Value::Bool(s[..end].ends_with(&needle))
                    }
                    _ => {
                        let p = self.to_number(a(2), name)?;
                        let p = if p.is_nan() { f64::INFINITY } else { p.trunc() };
                        let from = clamp(p, len);
                        Value::Num(rfind(s, &needle, from).map_or(-1.0, |i| i as f64))
                    }
                })
            }
            Slice | Substring => {
                let (start, end) = if id == Slice {
                    let s = rel(self.int_arg(a(1), name)?, len);
                    let e = match a(2) {
                        Value::Undefined => len,
                        v => rel(self.int_arg(v, name)?, len),
                    };
                    (s, e.max(s))
                } else {
                    let s = clamp(self.int_arg(a(1), name)?, len);
                    let e = match a(2) {
                        Value::Undefined => len,
                        v => clamp(self.int_arg(v, name)?, len),
                    };
                    (s.min(e), s.max(e))
                };
                if start == 0 && end == len {
                    return Ok(Value::Str(g));
                }
                self.charge_units(end - start)?;
                self.sub_str(g, start, end)
            }
            Split => {
                let lim = match a(2) {
                    Value::Undefined => u32::MAX as usize,
                    v => to_uint32(self.to_number(v, name)?) as usize,
                };
                let sep = match a(1) {
                    Value::Undefined => None,
                    v => Some(self.str_arg(v, name)?),
                };
                self.charge_work(len, factor::SEARCH)?;
                let Some(sep) = sep else {
                    if lim == 0 {
                        return self.new_arr(Vec::new(), &[]);
                    }
                    self.charge_elems(1)?;
                    self.reserve_arr(1, &[])?;
                    return Ok(self.commit_arr(vec![Value::Str(g)]));
                };
                let s = self.units(g);
                let (mut count, mut units) = (0usize, 0usize);
                if !(s.is_empty() && sep.is_empty()) {
                    split_pieces(s, &sep, lim, |p, q| {
                        count += 1;
                        units += q - p;
                    });
                }
                self.charge_elems(count)?;
                self.charge_work(count, factor::NEW_STRING)?;
                self.charge_units(units)?;
                self.reserve_strs(count, units, &[])?;
                let mut ranges = Vec::with_capacity(count);
                if !(len == 0 && sep.is_empty()) {
                    split_pieces(self.units(g), &sep, lim, |p, q| ranges.push((p, q)));
                }
                let mut items = Vec::with_capacity(count);
                for (p, q) in ranges {
                    let piece = self.units(g)[p..q].to_vec();
                    items.push(self.commit_str(piece));
                }
                Ok(self.commit_arr(items))
            }
            Repeat => {
                let raw = self.to_number(a(1), name)?;
                let n = if raw.is_nan() { 0.0 } else { raw.trunc() };
                if n < 0.0 || n.is_infinite() {
                    return guest(format!("Invalid count value: {}", number_to_string(raw)));
                }
                if len == 0 || n == 0.0 {
                    return self.new_str(Vec::new());
                }
                let total = (len as f64 * n).min(usize::MAX as f64 / 4.0) as usize;
                self.prepare_str(total)?;
                let out = self.units(g).repeat(n as usize);
                Ok(self.commit_str(out))
            }
            PadStart | PadEnd => {
                let max = self.int_arg(a(1), name)?;
                if max <= len as f64 {
                    return Ok(Value::Str(g));
                }
                let fill = match a(2) {
                    Value::Undefined => vec![b' ' as u16],
                    v => self.str_arg(v, name)?,
                };
                if fill.is_empty() {
                    return Ok(Value::Str(g));
                }
                let total = max.min(usize::MAX as f64 / 4.0) as usize;
                self.prepare_str(total)?;
                // the fill is copied in place (no padding is built apart from the output)
                let pad = |out: &mut Vec<u16>| {
                    let at = out.len();
                    out.resize(at + (total - len), 0);
                    for c in out[at..].chunks_mut(fill.len()) {
                        c.copy_from_slice(&fill[..c.len()]);
                    }
                };
                let mut out = Vec::with_capacity(total);
                if id == PadStart {
                    pad(&mut out);
                    out.extend_from_slice(self.units(g));
                } else {
                    out.extend_from_slice(self.units(g));
                    pad(&mut out);
                }
                Ok(self.commit_str(out))
            }
            Concat => {
                let mut total = len;
                let mut converted: Vec<Option<Vec<u16>>> = Vec::with_capacity(args.len());
                for &x in &args[1..] {
                    match x {
                        Value::Str(h) => {
                            total += self.units(h).len();
                            converted.push(None);
                        }
                        other => {
                            let u = self.to_units(other, name)?;
                            total += u.len();
                            converted.push(Some(u));
                        }
                    }
                }
                self.prepare_str(total)?;
                let mut out = Vec::with_capacity(total);
                out.extend_from_slice(self.units(g));
                for (x, c) in args[1..].iter().zip(converted) {
                    match (x, c) {
                        (_, Some(u)) => out.extend_from_slice(&u),
                        (Value::Str(h), None) => out.extend_from_slice(self.units(*h)),
                        _ => {}
                    }
                }
                Ok(self.commit_str(out))
            }
            Replace | ReplaceAll => {
                let pat = self.str_arg(a(1), name)?;
                let rep = self.str_arg(a(2), name)?;
                self.charge_work(len, factor::SEARCH)?;
                let toks = parse_template(&rep);
                let all = id == ReplaceAll;
                let m = pat.len();
                // pass 1: the output length
                let s = self.units(g);
                let sub_len = |p: usize| -> usize {
                    toks.iter()
                        .map(|t| match t {
                            Tok::Lit(i, j) => j - i,
                            Tok::Dollar => 1,
                            Tok::Matched => m,
                            Tok::Before => p,
                            Tok::After => len - p - m,
                        })
                        .sum()
                };
                let mut total = 0usize;
                let mut last = 0usize;
                let mut matches = 0usize;
                let mut pos = find(s, &pat, 0);
                while let Some(p) = pos {
                    matches += 1;
                    total = total.saturating_add(p - last).saturating_add(sub_len(p));
                    last = p + m;
                    if !all {
                        break;
                    }
                    pos = find(s, &pat, p + m.max(1)).filter(|_| p + m.max(1) <= len);
                    if m == 0 && p + 1 > len {
                        pos = None;
                    }
                }
                if matches == 0 {
                    return Ok(Value::Str(g));
                }
                total = total.saturating_add(len - last);
                self.charge_elems(matches)?;
                self.prepare_str(total)?;
                // pass 2: build
                let s = self.units(g);
                let mut out = Vec::with_capacity(total);
                let mut last = 0usize;
                let mut pos = find(s, &pat, 0);
                while let Some(p) = pos {
                    out.extend_from_slice(&s[last..p]);
                    for t in &toks {
                        match t {
                            Tok::Lit(i, j) => out.extend_from_slice(&rep[*i..*j]),
                            Tok::Dollar => out.push(b'$' as u16),
                            Tok::Matched => out.extend_from_slice(&pat),
                            Tok::Before => out.extend_from_slice(&s[..p]),
                            Tok::After => out.extend_from_slice(&s[p + m..]),
                        }
                    }
                    last = p + m;
                    if !all {
                        break;
                    }
                    pos = find(s, &pat, p + m.max(1)).filter(|_| p + m.max(1) <= len);
                    if m == 0 && p + 1 > len {
                        pos = None;
                    }
                }
                out.extend_from_slice(&s[last..]);
                Ok(self.commit_str(out))
            }
            LocaleCompare => {
                let other = self.str_arg(a(1), name)?;
                self.charge_units(len.min(other.len()))?;
                let order = self.locale_compare(g, &other)?;
                Ok(Value::Num(match order {
                    std::cmp::Ordering::Less => -1.0,
                    std::cmp::Ordering::Equal => 0.0,
                    std::cmp::Ordering::Greater => 1.0,
                }))
            }
            _ => self.bad_receiver(id, Value::Str(g)),
        }
    }

    fn uri_encode(&mut self, s: &[u16], full: bool) -> OpResult<Value> {
        self.charge_work(s.len(), factor::URI)?;
        // measured in a first pass, built in a second once admitted
        let mut out_len = 0usize;
        for r in char::decode_utf16(s.iter().copied()) {
            match r {
                Ok(c) if (c as u32) < 128 && uri_keep(c as u16, full) => out_len += 1,
                Ok(c) => out_len += 3 * c.len_utf8(),
                Err(_) => return guest("URI malformed"),
            }
        }
        self.prepare_str(out_len)?;
        let mut out = Vec::with_capacity(out_len);
        const HEX: &[u8] = b"0123456789ABCDEF";
        for c in char::decode_utf16(s.iter().copied()).flatten() {
            if (c as u32) < 128 && uri_keep(c as u16, full) {
                out.push(c as u16);
            } else {
                let mut buf = [0u8; 4];
                for &b in c.encode_utf8(&mut buf).as_bytes() {
                    out.push(b'%' as u16);
                    out.push(HEX[(b >> 4) as usize] as u16);
                    out.push(HEX[(b & 15) as usize] as u16);
                }
            }
        }
        Ok(self.commit_str(out))
    }

    fn uri_decode(&mut self, s: &[u16], full: bool) -> OpResult<Value> {
        self.charge_work(s.len(), factor::URI)?;
        let byte_at = |i: usize| -> Option<u8> {
            if s.get(i) != Some(&(b'%' as u16)) {
                return None;
            }
            Some(hex_val(*s.get(i + 1)?)? * 16 + hex_val(*s.get(i + 2)?)?)
        };
        let mut out = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            if s[i] != b'%' as u16 {
                out.push(s[i]);
                i += 1;
                continue;
            }
            let Some(b) = byte_at(i) else {
                return guest("URI malformed");
            };
            if b < 0x80 {
                if full && URI_RESERVED.contains(&b) {
                    out.extend_from_slice(&s[i..i + 3]);
                } else {
                    out.push(b as u16);
                }
                i += 3;
                continue;
            }
            let n = match b {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => return guest("URI malformed"),
            };
            let mut bytes = vec![b];
            for k in 1..n {
                match byte_at(i + 3 * k) {
                    Some(c) if c & 0xC0 == 0x80 => bytes.push(c),
                    _ => return guest("URI malformed"),
                }
            }
            match std::str::from_utf8(&bytes) {
                Ok(t) => out.extend(t.encode_utf16()),
                Err(_) => return guest("URI malformed"),
            }
            i += 3 * n;
        }
        self.new_str(out)
    }

    // ------------------------------------------------------------------ numbers

    fn number_method(&mut self, id: NativeId, x: f64, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let name = id.js_name();
        let a1 = arg(args, 1);
        let s = match id {
            ToString => {
                let r = match a1 {
                    Value::Undefined => 10.0,
                    v => self.int_arg(v, name)?,
                };
                if !(2.0..=36.0).contains(&r) {
                    return guest("toString() radix argument must be between 2 and 36");
                }
                if r == 10.0 {
                    number_to_string(x)
                } else {
                    self.charge_digits(radix_digits_bound(x, r as u32), x)?;
                    to_radix_string(x, r as u32)
                }
            }
            ToFixed => {
                let f = self.int_arg(a1, name)?;
                if !(0.0..=100.0).contains(&f) {
                    return guest("toFixed() digits argument must be between 0 and 100");
                }
                self.charge_digits(to_fixed_cost(x, f as usize), x)?;
                to_fixed(x, f as usize)
            }
            ToPrecision => {
                if matches!(a1, Value::Undefined) || !x.is_finite() {
                    number_to_string(x)
                } else {
                    let p = self.int_arg(a1, name)?;
                    if !(1.0..=100.0).contains(&p) {
                        return guest("toPrecision() argument must be between 1 and 100");
                    }
                    self.charge_digits(exact_digits_cost(x.abs(), p as usize + 1) + p as usize, x)?;
                    to_precision(x, p as usize)
                }
            }
            _ => return self.bad_receiver(id, Value::Num(x)),
        };
        self.str_value(&s)
    }

    // ------------------------------------------------------------------ arrays

    /// The length of `String(e)` for an array element being joined; containers are refused.
    fn join_piece_len(&self, e: Value) -> OpResult<usize> {
        Ok(match e {
            Value::Undefined | Value::Null => 0,
            Value::Str(g) => self.units(g).len(),
            Value::Num(n) => number_to_string(n).len(),
            Value::Bool(b) => {
                if b {
                    4
                } else {
                    5
                }
            }
            Value::Arr(_) => return guest("Cannot join a nested array; use .flat() first"),
            Value::Obj(_) => {
                return guest("Cannot join an object; use JSON.stringify() on it first")
            }
            Value::Pending(_) => return guest("Cannot join a host result that has not settled"),
        })
    }

    fn join(&mut self, g: Gc, sep: &[u16]) -> OpResult<Value> {
        let n = self.arr_items(g).len();
        self.charge_elems(n)?;
        // a number's text is made twice (its length, then its characters)
        let numbers = self
            .arr_items(g)
            .iter()
            .filter(|e| matches!(e, Value::Num(_)))
            .count();
        self.charge_work(numbers.saturating_mul(2), factor::NEW_STRING)?;
        let mut total = sep.len().saturating_mul(n.saturating_sub(1));
        for i in 0..n {
            total = total.saturating_add(self.join_piece_len(self.arr_at(g, i))?);
        }
        self.prepare_str(total)?;
        let mut out = Vec::with_capacity(total);
        for (i, &e) in self.arr_items(g).iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(sep);
            }
            match e {
                Value::Str(h) => out.extend_from_slice(self.units(h)),
                Value::Num(x) => out.extend(ascii(&number_to_string(x))),
                Value::Bool(b) => out.extend(ascii(if b { "true" } else { "false" })),
                _ => {}
            }
        }
        Ok(self.commit_str(out))
    }

    fn array_method(&mut self, id: NativeId, g: Gc, args: &[Value]) -> OpResult<Value> {
        let r = self.array_method_inner(id, g, args);
        debug_assert_eq!(
            self.heap.live_bytes(),
            self.heap.recount(),
            "heap ledger after {}",
            id.js_name()
        );
        r
    }

    fn array_method_inner(&mut self, id: NativeId, g: Gc, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let a = |i: usize| arg(args, i);
        let name = id.js_name();
        let len = self.arr_items(g).len();
        match id {
            Sort | ToSorted => self.sort_array(g, id == Sort),
            Join | ToString => {
                let sep = match a(1) {
                    Value::Undefined => vec![b',' as u16],
                    _ if id == ToString => vec![b',' as u16],
                    v => self.str_arg(v, name)?,
                };
                self.join(g, &sep)
            }
            Slice => {
                let s = rel(self.int_arg(a(1), name)?, len);
                let e = match a(2) {
                    Value::Undefined => len,
                    v => rel(self.int_arg(v, name)?, len),
                };
                let n = e.max(s) - s;
                self.charge_elems(n)?;
                self.reserve_arr(n, &[])?;
                let items = self.arr_items(g)[s..s + n].to_vec();
                Ok(self.commit_arr(items))
            }
            Concat => {
                let mut total = len;
                for &x in &args[1..] {
                    total = total.saturating_add(match x {
                        Value::Arr(h) => self.arr_items(h).len(),
                        _ => 1,
                    });
                }
                self.charge_elems(total)?;
                self.reserve_arr(total, &[])?;
                let mut items = Vec::with_capacity(total);
                items.extend_from_slice(self.arr_items(g));
                for &x in &args[1..] {
                    match x {
                        Value::Arr(h) => items.extend_from_slice(self.arr_items(h)),
                        v => items.push(v),
                    }
                }
                Ok(self.commit_arr(items))
            }
            Includes | IndexOf | LastIndexOf => {
                let x = a(1);
                let range: Box<dyn Iterator<Item = usize>> = if id == LastIndexOf {
                    let from = if args.len() > 2 {
                        let k = self.int_arg(a(2), name)?;
                        if k >= 0.0 {
                            k.min(len as f64 - 1.0)
                        } else {
                            len as f64 + k
                        }
                    } else {
                        len as f64 - 1.0
                    };
                    if from < 0.0 {
                        Box::new(std::iter::empty())
                    } else {
                        Box::new((0..=from as usize).rev())
                    }
                } else {
                    let k = self.int_arg(a(2), name)?;
                    let from = if k >= 0.0 {
                        k.min(len as f64) as usize
                    } else {
                        (len as f64 + k).max(0.0) as usize
                    };
                    Box::new(from..len)
                };
                let needle_len = match x {
                    Value::Str(h) => Some(self.units(h).len()),
                    _ => None,
                };
                let nan = matches!(x, Value::Num(n) if n.is_nan());
                let mut found = None;
                for i in range {
                    let e = self.arr_at(g, i);
                    let mut cost = MILLI_PER_ELEMENT;
                    if let (Some(nl), Value::Str(h)) = (needle_len, e) {
                        if self.units(h).len() == nl {
                            cost += (nl as u64).saturating_mul(crate::price::MILLI_PER_UNIT);
                        }
                    }
                    self.charge(cost)?;
                    let hit = self.strict_eq(e, x)
                        || (id == Includes && nan && matches!(e, Value::Num(n) if n.is_nan()));
                    if hit {
                        found = Some(i);
                        break;
                    }
                }
                Ok(if id == Includes {
                    Value::Bool(found.is_some())
                } else {
                    Value::Num(found.map_or(-1.0, |i| i as f64))
                })
            }
            At => {
                let k = self.int_arg(a(1), name)?;
                let k = if k < 0.0 { len as f64 + k } else { k };
                Ok(if k >= 0.0 && k < len as f64 {
                    self.arr_at(g, k as usize)
                } else {
                    Value::Undefined
                })
            }
            Reverse => {
                self.charge_elems(len)?;
                if let Some(Cell::Arr(v)) = self.heap.get_mut(g) {
                    v.reverse();
                }
                Ok(Value::Arr(g))
            }
            ToReversed => {
                let mut items = self.arr_items(g).to_vec();
                items.reverse();
                self.new_arr(items, &[])
            }
            Pop | Shift => {
                if len == 0 {
                    return Ok(Value::Undefined);
                }
                if id == Shift {
                    self.charge_elems(len)?;
                }
                let v = self.heap.mutate(g, |c| match c {
                    Cell::Arr(v) if id == Pop => v.pop(),
                    Cell::Arr(v) => Some(v.remove(0)),
                    _ => None,
                });
                let v = v.flatten();
                self.heap.shrink(8);
                Ok(v.unwrap_or(Value::Undefined))
            }
            Unshift => {
                let k = args.len() - 1;
                self.charge_elems(len + k)?;
                self.reserve_in(g, 8 * k, k, args)?;
                self.heap.grow(8 * k);
                let n = self
                    .heap
                    .mutate(g, |c| match c {
                        Cell::Arr(v) => {
                            v.splice(0..0, args[1..].iter().copied());
                            v.len()
                        }
                        _ => 0,
                    })
                    .unwrap_or(0);
                Ok(Value::Num(n as f64))
            }
            Splice => {
                let start = if args.len() > 1 {
                    rel(self.int_arg(a(1), name)?, len)
                } else {
                    0
                };
                let dc = match args.len() {
                    0 | 1 => 0,
                    2 => len - start,
                    _ => clamp(self.int_arg(a(2), name)?, len - start),
                };
                let items: Vec<Value> = args.get(3..).unwrap_or(&[]).to_vec();
                let k = items.len();
                self.charge_elems(len + k)?;
                let room = self.heap.growth(g, k.saturating_sub(dc)) + memory::arr_real(dc);
                self.reserve_real(arr_bytes(dc) + 8 * k.saturating_sub(dc), room, args)?;
                let removed: Vec<Value> = self
                    .heap
                    .mutate(g, |c| match c {
                        Cell::Arr(v) => v.splice(start..start + dc, items).collect(),
                        _ => Vec::new(),
                    })
                    .unwrap_or_default();
                if k > dc {
                    self.heap.grow(8 * (k - dc));
                } else {
                    self.heap.shrink(8 * (dc - k));
                }
                Ok(self.commit_arr(removed))
            }
            Fill => {
                let v = a(1);
                let s = rel(self.int_arg(a(2), name)?, len);
                let e = match a(3) {
                    Value::Undefined => len,
                    x => rel(self.int_arg(x, name)?, len),
                };
                if e > s {
                    self.charge_elems(e - s)?;
                    if let Some(Cell::Arr(items)) = self.heap.get_mut(g) {
                        items[s..e].fill(v);
                    }
                }
                Ok(Value::Arr(g))
            }
            Flat => {
                let depth = match a(1) {
                    Value::Undefined => 1.0,
                    v => self.int_arg(v, name)?,
                };
                let mut walk = FlatWalk {
                    cap: self.flat_room(),
                    visits: 0,
                    total: 0,
                    root: Value::Arr(g),
                    interrupt: self.interrupt.pinned(),
                };
                self.flat_count(g, depth, 0, &mut walk)?;
                let count = walk.total;
                self.reserve_arr(count, &[])?;
                let mut out = Vec::with_capacity(count);
                self.flat_into(g, depth, &mut out);
                Ok(self.commit_arr(out))
            }
            _ => self.bad_receiver(id, Value::Arr(g)),
        }
    }

    /// How many elements an array made now could hold under the heap's ceilings.
    fn flat_room(&self) -> usize {
        self.room_for(8, std::mem::size_of::<Value>())
    }

    /// Elements `flat(depth)` produces, paid per element visited; a shared sub-array counts
    /// once per reference, so the walk stops at the heap's ceiling and at the run's deadline.
    fn flat_count(&mut self, g: Gc, depth: f64, level: usize, walk: &mut FlatWalk) -> OpResult<()> {
        let n = self.arr_items(g).len();
        self.charge_elems(n)?;
        walk.visits += 1;
        if walk.visits.is_multiple_of(FLAT_CHECK_EVERY) {
            walk.interrupt.clock().check()?;
        }
        for i in 0..n {
            match self.arr_at(g, i) {
                Value::Arr(h) if depth >= 1.0 => {
                    if level >= MAX_BOUNDARY_DEPTH {
                        return guest(format!(
                            "Cannot flatten arrays nested deeper than {MAX_BOUNDARY_DEPTH} levels (is the array inside itself?)"
                        ));
                    }
                    self.flat_count(h, depth - 1.0, level + 1, walk)?;
                }
                _ => walk.total += 1,
            }
            if walk.total > walk.cap {
                // past what fits as the heap stands: refused unless a collection makes room
                self.reserve_arr(walk.total, &[walk.root])?;
                walk.cap = self.flat_room().max(walk.total);
            }
        }
        Ok(())
    }

    fn flat_into(&self, g: Gc, depth: f64, out: &mut Vec<Value>) {
        for &e in self.arr_items(g) {
            match e {
                Value::Arr(h) if depth >= 1.0 => self.flat_into(h, depth - 1.0, out),
                v => out.push(v),
            }
        }
    }

    // ------------------------------------------------------------------ Object

    fn object_listing(&mut self, id: NativeId, o: Value) -> OpResult<Value> {
        use NativeId::*;
        // the keys of an object are copied (as many as it holds); an array's and a string's
        // are their indices, made as they are stored, and so are their values
        let (keys, vals, n, key_units): (Vec<Vec<u16>>, Vec<Value>, usize, usize) = match o {
            Value::Null | Value::Undefined => {
                return guest("Cannot convert undefined or null to object")
            }
            Value::Obj(g) => {
                let n = match self.heap.get(g) {
                    Cell::Obj(m) => m.len(),
                    _ => 0,
                };
                self.charge_elems(n)?;
                self.charge_work(n, factor::PROPERTY)?;
                let Cell::Obj(m) = self.heap.get(g) else {
                    return self.new_arr(Vec::new(), &[]);
                };
                let ks = ordered_keys(m);
                let units: usize = ks.iter().map(|k| k.len()).sum();
                let vals = ks
                    .iter()
                    .map(|k| m.get(k).copied().unwrap_or(Value::Undefined))
                    .collect();
                let keys = if id == ObjectValues {
                    Vec::new()
                } else {
                    ks.iter().map(|k| k.to_vec()).collect()
                };
                self.charge_units(units)?;
                (keys, vals, n, units)
            }
            Value::Arr(g) => {
                let n = self.arr_items(g).len();
                self.charge_elems(n)?;
                (Vec::new(), Vec::new(), n, index_digits(n))
            }
            Value::Str(g) => {
                let n = self.units(g).len();
                self.charge_elems(n)?;
                (Vec::new(), Vec::new(), n, index_digits(n))
            }
            _ => (Vec::new(), Vec::new(), 0, 0),
        };
        let is_str = matches!(o, Value::Str(_));
        let key_bytes = n * str_bytes(0) + 2 * key_units;
        let char_bytes = if is_str { n * str_bytes(1) } else { 0 };
        let bytes = arr_bytes(n)
            + match id {
                ObjectKeys => key_bytes,
                ObjectValues => char_bytes,
                _ => key_bytes + char_bytes + n * arr_bytes(2),
            };
        self.charge_elems(n)?;
        // every key, character and pair made is an allocation
        let chars = if is_str { n } else { 0 };
        let made = match id {
            ObjectKeys => n,
            ObjectValues => chars,
            _ => n + chars + n,
        };
        self.charge_work(made, factor::NEW_STRING)?;
        // (really: at most twice the estimate, and a slot per array and string made)
        let cells = self.heap.cells_growth(2 * n + 1);
        self.reserve_real(bytes, 2 * bytes + 2 * n * memory::SLOT + cells, &[o])?;
        let mut out = Vec::with_capacity(n);
        let mut keys = keys.into_iter();
        for i in 0..n {
            let key = |keys: &mut std::vec::IntoIter<Vec<u16>>| {
                keys.next()
                    .unwrap_or_else(|| ascii(&i.to_string()).collect())
            };
            let value = match o {
                Value::Obj(_) => vals.get(i).copied().unwrap_or(Value::Undefined),
                Value::Arr(g) => self.arr_at(g, i),
                Value::Str(g) if id != ObjectKeys => {
                    let c = self.units(g).get(i).copied().unwrap_or(0);
                    self.commit_str(vec![c])
                }
                _ => Value::Undefined,
            };
            let item = match id {
                ObjectKeys => {
                    let k = key(&mut keys);
                    self.commit_str(k)
                }
                ObjectValues => value,
                _ => {
                    let k = key(&mut keys);
                    let k = self.commit_str(k);
                    self.commit_arr(vec![k, value])
                }
            };
            out.push(item);
        }
        Ok(self.commit_arr(out))
    }

    /// A property key from a run-time value, checked against the forbidden names.
    fn key_of(&self, k: Value, op: &str) -> OpResult<Vec<u16>> {
        let units = match k {
            Value::Arr(_) | Value::Obj(_) => {
                return guest(format!(
                    "{op}: a key must be a string or a number, not an {}",
                    self.kind_name(k)
                ))
            }
            v => self.to_units(v, op)?,
        };
        self.check_key(&units)?;
        Ok(units)
    }

    fn object_from_entries(&mut self, list: Value) -> OpResult<Value> {
        let name = "Object.fromEntries";
        let Value::Arr(g) = list else {
            return guest(format!(
                "{name} needs an array of [key, value] pairs, got {}",
                self.kind_name(list)
            ));
        };
        let n = self.arr_items(g).len();
        self.charge_elems(n)?;
        self.charge_work(n, factor::PROPERTY)?;
        let mut m = PropMap::default();
        for i in 0..n {
            let e = self.arr_at(g, i);
            let Value::Arr(eg) = e else {
                let shown = match e {
                    Value::Obj(_) => "[object Object]".to_string(),
                    v => String::from_utf16_lossy(&self.to_units(v, name)?),
                };
                return guest(format!("Iterator value {shown} is not an entry object"));
            };
            if let Value::Str(kg) = self.arr_at(eg, 0) {
                self.charge_units(self.units(kg).len())?;
            }
            let k = self.key_of(self.arr_at(eg, 0), name)?;
            m.insert(k.into(), self.arr_at(eg, 1));
        }
        let cell = Cell::Obj(m);
        self.reserve_cell(&cell, &[])?;
        Ok(Value::Obj(self.heap.insert(cell)))
    }

    fn object_assign(&mut self, args: &[Value]) -> OpResult<Value> {
        let name = "Object.assign";
        if matches!(arg(args, 0), Value::Null | Value::Undefined) {
            return guest("Cannot convert undefined or null to object");
        }
        let mut m = PropMap::default();
        for &src in args {
            match src {
                Value::Obj(g) => {
                    let n = match self.heap.get(g) {
                        Cell::Obj(o) => o.len(),
                        _ => 0,
                    };
                    self.charge_elems(n)?;
                    self.charge_work(n, factor::PROPERTY)?;
                    let Cell::Obj(o) = self.heap.get(g) else {
                        continue;
                    };
                    let pairs: Vec<(Key, Value)> = ordered_keys(o)
                        .into_iter()
                        .filter_map(|k| o.get_entry(k).map(|(k, v)| (k.clone(), *v)))
                        .collect();
                    for (k, v) in pairs {
                        self.check_key(&k)?;
                        self.charge_units(k.len())?;
                        m.insert(k, v);
                    }
                }
                Value::Arr(g) => {
                    let n = self.arr_items(g).len();
                    self.charge_elems(n)?;
                    self.charge_work(n, factor::PROPERTY)?;
                    // the index keys are made here: admitted (with the table they grow, at
                    // most twice their number) before the first is made
                    let digits = index_digits(n);
                    let bytes = 16 + n * prop_bytes(0) + 2 * digits;
                    let real = memory::map_real::<Key, Value>(2 * (m.len() + n))
                        + n * (memory::key_real(0) + 16)
                        + 2 * digits;
                    self.reserve_real(bytes, real, args)?;
                    for i in 0..n {
                        let k: Vec<u16> = ascii(&i.to_string()).collect();
                        m.insert(k.into(), self.arr_at(g, i));
                    }
                }
                Value::Str(g) if !self.units(g).is_empty() => {
                    return guest(format!(
                        "{name} cannot copy the characters of a string; use .split('') first"
                    ))
                }
                _ => {}
            }
        }
        let cell = Cell::Obj(m);
        self.reserve_cell(&cell, &[])?;
        Ok(Value::Obj(self.heap.insert(cell)))
    }
}
