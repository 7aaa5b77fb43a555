//! Builtins on the VM's special objects (Set, Date, regex), array `sort`, and `substr` /
//! `normalize`. Every one pays for the elements and characters it touches before doing the work.

use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::heap::{set_bytes, Cell, Gc, SetCell, SetKey};
use crate::machine::{Vm, MILLI_PER_ELEMENT};
use crate::memory::set_str_real;
use crate::number::number_to_string;
use crate::value::Value;

/// A sort key: undefined sorts last; everything else compares as its string.
enum SortKey {
    Str(Gc),
    Text(Vec<u16>),
    Undef,
}

/// Real bytes a Set being built may take between two admissions of its size.
const SET_ADMIT_STEP: usize = 1 << 20;

/// Code units `normalize` writes between two admissions of its output's growth.
const NORMALIZE_CHUNK: usize = 4096;

/// The longest text of a number (`-1.7976931348623157e+308`), `true`, `false` or `null`.
const SORT_TEXT_MAX: usize = 24;

impl Vm {
    /// Members of the special objects (`set.size`, `date.year`, `re.source`, …).
    pub(crate) fn special_member(&mut self, g: Gc, key: &str) -> OpResult<Value> {
        match self.heap.get(g) {
            Cell::Set(m) => Ok(match key {
                "size" => Value::Num(m.len() as f64),
                _ => Value::Undefined,
            }),
            Cell::Date(t) => {
                let t = *t;
                self.date_member(t, key)
            }
            Cell::Regex(r) => {
                let (src, flags, global, last) = (
                    r.source.to_vec(),
                    r.flags.to_string(),
                    r.global,
                    r.last_index,
                );
                Ok(match key {
                    "source" => {
                        self.charge_units(src.len())?;
                        self.alloc_str(src)?
                    }
                    "flags" => self.str_value(&flags)?,
                    "global" => Value::Bool(global),
                    "ignoreCase" => Value::Bool(flags.contains('i')),
                    "multiline" => Value::Bool(flags.contains('m')),
                    "dotAll" => Value::Bool(flags.contains('s')),
                    "unicode" => Value::Bool(flags.contains('u')),
                    "sticky" => Value::Bool(false),
                    "lastIndex" => Value::Num(last as f64),
                    _ => Value::Undefined,
                })
            }
            _ => Ok(Value::Undefined),
        }
    }

    /// A method called on an object value: Set, Date and regex methods.
    pub(crate) fn object_method(&mut self, id: NativeId, g: Gc, args: &[Value]) -> OpResult<Value> {
        match self.heap.get(g) {
            Cell::Set(_) => self.set_method(id, g, args),
            Cell::Date(_) => self.date_method(id, g, args),
            Cell::Regex(_) => self.regex_method(id, g, args),
            _ => {
                let m = &id.js_name()[1..];
                guest(crate::method_hints::not_a_function(m, "object"))
            }
        }
    }

    // ------------------------------------------------------------------ sort

    /// `sort()` / `toSorted()` without a comparator: JavaScript's order (elements as strings,
    /// code-unit order, undefined last), stable. Pays n·log n before sorting.
    pub(crate) fn sort_array(&mut self, g: Gc, in_place: bool) -> OpResult<Value> {
        // the copy of the elements, their keys and the text of those that are not strings are
        // held in the real count while sorting
        let scratch = match self.heap.get(g) {
            Cell::Arr(a) => a
                .iter()
                .map(|e| {
                    let text = match e {
                        Value::Str(_) | Value::Undefined => 0,
                        _ => crate::memory::alloc(2 * SORT_TEXT_MAX),
                    };
                    std::mem::size_of::<Value>() + std::mem::size_of::<(SortKey, Value)>() + text
                })
                .sum(),
            _ => 0,
        };
        self.with_scratch(scratch, &[Value::Arr(g)], |vm| vm.sort_in(g, in_place))
    }

    /// [`Vm::sort_array`] once its scratch is admitted.
    fn sort_in(&mut self, g: Gc, in_place: bool) -> OpResult<Value> {
        let items: Vec<Value> = match self.heap.get(g) {
            Cell::Arr(a) => a.clone(),
            _ => Vec::new(),
        };
        let n = items.len();
        let log = (usize::BITS - n.leading_zeros()).max(1) as u64;
        self.charge(
            (n as u64)
                .saturating_mul(log)
                .saturating_mul(MILLI_PER_ELEMENT),
        )?;
        let (mut units, mut texts) = (0usize, 0usize);
        for &e in &items {
            match e {
                Value::Arr(_) | Value::Obj(_) => {
                    return guest(
                        "Cannot sort an array that contains arrays or objects: sort() compares elements as strings, and AJS never turns an array or object into a string",
                    )
                }
                Value::Str(s) => units += self.units(s).len(),
                Value::Pending(_) => return guest("Cannot sort a host result that has not settled"),
                _ => {
                    units += 8;
                    texts += 1;
                }
            }
        }
        // every other member is compared as a string made for it
        self.charge_work(texts, crate::price::factor::NEW_STRING)?;
        // comparisons read the strings about log n times each
        self.charge_units(units.saturating_mul(log as usize))?;
        let mut keyed: Vec<(SortKey, Value)> = items
            .into_iter()
            .map(|e| {
                let k = match e {
                    Value::Undefined => SortKey::Undef,
                    Value::Str(s) => SortKey::Str(s),
                    Value::Num(x) => SortKey::Text(number_to_string(x).encode_utf16().collect()),
                    Value::Bool(b) => SortKey::Text(b.to_string().encode_utf16().collect()),
                    Value::Null => SortKey::Text("null".encode_utf16().collect()),
                    _ => SortKey::Undef,
                };
                (k, e)
            })
            .collect();
        {
            let heap = &self.heap;
            fn text<'a>(heap: &'a crate::heap::Heap, k: &'a SortKey) -> Option<&'a [u16]> {
                match k {
                    SortKey::Str(s) => Some(heap.str_units(*s)),
                    SortKey::Text(t) => Some(t),
                    SortKey::Undef => None,
                }
            }
            keyed.sort_by(|a, b| match (text(heap, &a.0), text(heap, &b.0)) {
                (Some(x), Some(y)) => x.cmp(y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            });
        }
        // (a fresh vector of exactly n: collected in place, the keyed vector's larger
        // allocation would become the array's, uncounted)
        let mut sorted: Vec<Value> = Vec::with_capacity(n);
        sorted.extend(keyed.into_iter().map(|(_, v)| v));
        if in_place {
            self.heap.mutate(g, |c| {
                if let Cell::Arr(a) = c {
                    *a = sorted;
                }
            });
            Ok(Value::Arr(g))
        } else {
            self.charge_elems(n)?;
            self.reserve_arr(n, &[Value::Arr(g)])?;
            Ok(self.commit_arr(sorted))
        }
    }

    // ------------------------------------------------------------------ strings

    /// `s.substr(start, length?)`.
    pub(crate) fn substr(&mut self, g: Gc, args: &[Value]) -> OpResult<Value> {
        let len = self.units(g).len() as f64;
        let a = |i: usize| args.get(i).copied().unwrap_or(Value::Undefined);
        let int = |vm: &Vm, v: Value| -> OpResult<f64> {
            let n = vm.to_number(v, "substr")?;
            Ok(if n.is_nan() { 0.0 } else { n.trunc() })
        };
        let mut start = int(self, a(1))?;
        if start < 0.0 {
            start = (len + start).max(0.0);
        }
        let start = start.min(len);
        let count = match a(2) {
            Value::Undefined => len - start,
            v => int(self, v)?.max(0.0).min(len - start),
        };
        let (s, e) = (start as usize, (start + count) as usize);
        self.charge_units(e - s)?;
        let out = self.units(g)[s..e].to_vec();
        self.reserve(crate::heap::str_bytes(out.len()), &[])?;
        Ok(self.commit_str(out))
    }

    /// `s.normalize(form?)`.
    pub(crate) fn normalize(&mut self, g: Gc, form: Value) -> OpResult<Value> {
        let form = match form {
            Value::Undefined => "NFC".to_string(),
            v => String::from_utf16_lossy(&self.to_units(v, "normalize")?),
        };
        if !matches!(form.as_str(), "NFC" | "NFD" | "NFKC" | "NFKD") {
            return guest("The normalization form should be one of NFC, NFD, NFKC, NFKD.");
        }
        let len = self.units(g).len();
        // ASCII text is in every normal form
        if self.units(g).iter().all(|&u| u < 0x80) {
            self.charge_units(len)?;
            return Ok(Value::Str(g));
        }
        // decomposition can grow a string (at most 18× per character for NFKD): the price per
        // input unit covers the output's making; the output is paid as a copy before storing
        self.charge_work(len, crate::price::factor::NORMALIZE)?;
        // the copy of the input is held as scratch; the output grows only as admitted
        let scratch = crate::memory::alloc(2 * len);
        self.with_scratch(scratch, &[Value::Str(g)], |vm| {
            let units = vm.units(g).to_vec();
            let mut held = 0;
            let r = vm.normalize_into(&units, &form, &mut held);
            let r = r.and_then(|out| {
                vm.charge_units(out.len())?;
                vm.reserve(crate::heap::str_bytes(out.len()), &[])?;
                Ok(vm.commit_str(out))
            });
            vm.heap.shrink_real(held);
            r
        })
    }

    /// `localeCompare`'s order: code-unit order of the two strings in NFC, so that canonically
    /// equivalent strings (`'o\u0308'` and `'\u00f6'`) compare equal. The caller paid for the
    /// common prefix; normalizing (from the last safe boundary before the first difference) is
    /// paid here, and only when it can change the order.
    pub(crate) fn locale_compare(&mut self, g: Gc, other: &[u16]) -> OpResult<std::cmp::Ordering> {
        use unicode_normalization::UnicodeNormalization;
        let mine = self.units(g);
        let Some(from) = normalize_from(mine, other) else {
            return Ok(crate::price::cmp_units(mine, other));
        };
        let rest = mine.len() + other.len() - 2 * from;
        self.charge_work(rest, crate::price::factor::NORMALIZE)?;
        // compared as they stream out; a normalizer buffers at most a run of combining marks
        // (a character and its class for each, once decomposed and once recomposed)
        let scratch = crate::memory::alloc(16 * rest);
        self.with_scratch(scratch, &[Value::Str(g)], |vm| {
            fn nfc(s: &[u16]) -> impl Iterator<Item = u16> + '_ {
                char::decode_utf16(s.iter().copied())
                    .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
                    .nfc()
                    .flat_map(|c| {
                        let mut b = [0u16; 2];
                        let n = c.encode_utf16(&mut b).len();
                        b.into_iter().take(n)
                    })
            }
            Ok(nfc(&vm.units(g)[from..]).cmp(nfc(&other[from..])))
        })
    }

    /// `units` in normalization `form`, built as it streams out, its growth admitted first
    /// (`held`: the real bytes of its buffer now in the real count, the caller's to release).
    /// Its making is paid ahead: the input's length, then doubling chunks (at most twice what
    /// is made, and never more than `NORMALIZE_CHUNK` ahead).
    fn normalize_into(
        &mut self,
        units: &[u16],
        form: &str,
        held: &mut usize,
    ) -> OpResult<Vec<u16>> {
        use unicode_normalization::UnicodeNormalization;
        let mut out: Vec<u16> = Vec::new();
        let mut pending: Vec<u16> = Vec::with_capacity(NORMALIZE_CHUNK + 2);
        let mut paid = 0usize;
        let mut step = units.len().max(2);
        let mut rest = units;
        while !rest.is_empty() {
            // a run of valid characters, then a lone surrogate (kept as it is)
            let mut end = 0;
            let mut lone = None;
            for r in char::decode_utf16(rest.iter().copied()) {
                match r {
                    Ok(c) => end += c.len_utf16(),
                    Err(e) => {
                        lone = Some(e.unpaired_surrogate());
                        break;
                    }
                }
            }
            let chars =
                char::decode_utf16(rest[..end].iter().copied()).map(|r| r.unwrap_or('\u{FFFD}'));
            let stream: Box<dyn Iterator<Item = char>> = match form {
                "NFC" => Box::new(chars.nfc()),
                "NFD" => Box::new(chars.nfd()),
                "NFKC" => Box::new(chars.nfkc()),
                _ => Box::new(chars.nfkd()),
            };
            for c in stream {
                if out.len() + pending.len() + 2 > paid {
                    self.charge_work(step, crate::price::factor::NORMALIZE_OUT)?;
                    paid += step;
                    step = paid.clamp(16, NORMALIZE_CHUNK);
                }
                pending.extend_from_slice(c.encode_utf16(&mut [0; 2]));
                if pending.len() >= NORMALIZE_CHUNK {
                    self.grow_text(&mut out, &pending, held)?;
                    pending.clear();
                }
            }
            if let Some(u) = lone {
                pending.push(u);
                end += 1;
            }
            rest = &rest[end..];
        }
        self.grow_text(&mut out, &pending, held)?;
        Ok(out)
    }

    // ------------------------------------------------------------------ Set

    fn set_key(&self, v: Value) -> OpResult<SetKey> {
        Ok(match v {
            Value::Undefined => SetKey::Undefined,
            Value::Null => SetKey::Null,
            Value::Bool(b) => SetKey::Bool(b),
            Value::Num(n) => SetKey::Num(if n.is_nan() {
                f64::NAN.to_bits()
            } else {
                (n + 0.0).to_bits()
            }),
            Value::Str(g) => SetKey::Str(self.units(g).into()),
            Value::Arr(g) | Value::Obj(g) => SetKey::Ref(g),
            Value::Pending(_) => {
                return guest("A host result that has not settled cannot go in a Set")
            }
        })
    }

    /// Fuel for hashing one member (its characters when a string) plus the element charge.
    /// (A set member is a hashed key and a value, twice a property's work.)
    fn key_cost(&self, v: Value) -> u64 {
        MILLI_PER_ELEMENT
            + 2 * crate::price::factor::PROPERTY * crate::price::MILLI_PER_UNIT
            + match v {
                Value::Str(g) => (self.units(g).len() as u64)
                    .saturating_mul(crate::price::MILLI_PER_UNIT)
                    .saturating_mul(2),
                _ => 0,
            }
    }

    /// The members of a Set or the elements of an array (for `Set(items)` and the algebra).
    fn members(&self, v: Value, op: &str) -> OpResult<Vec<Value>> {
        match v {
            Value::Undefined | Value::Null => Ok(Vec::new()),
            Value::Arr(g) => Ok(match self.heap.get(g) {
                Cell::Arr(a) => a.clone(),
                _ => Vec::new(),
            }),
            Value::Obj(g) => match self.heap.get(g) {
                Cell::Set(m) => Ok(m.values().copied().collect()),
                _ => guest(format!("{op} needs an array or a Set, got an object")),
            },
            other => guest(format!(
                "{op} needs an array or a Set, got a {}",
                self.kind_name(other)
            )),
        }
    }

    /// Builds a Set cell from values, paying per member first.
    fn build_set(&mut self, items: &[Value], roots: &[Value]) -> OpResult<Value> {
        let mut cost = 0u64;
        for &v in items {
            cost = cost.saturating_add(self.key_cost(v));
        }
        self.charge(cost)?;
        // the members are admitted as the set grows (every SET_ADMIT_STEP real bytes, and
        // before its table grows), never all at the end
        let mut m = SetCell::default();
        let (mut strs, mut units, mut admitted) = (0usize, 0usize, 0usize);
        for &v in items {
            let k = self.set_key(v)?;
            if m.contains_key(&k) {
                continue;
            }
            let len = match &k {
                SetKey::Str(u) => u.len(),
                _ => 0,
            };
            let real = crate::memory::map_real::<SetKey, Value>(m.capacity())
                + crate::memory::map_growth::<SetKey, Value>(m.len(), m.capacity(), 1)
                + strs
                + set_str_real(len);
            if real > admitted.saturating_add(SET_ADMIT_STEP) || m.len() == m.capacity() {
                self.reserve_real(set_bytes(m.len() + 1, units + len), real, roots)?;
                admitted = real;
            }
            strs += set_str_real(len);
            units += len;
            m.insert(k, v);
        }
        let cell = Cell::Set(Box::new(m));
        self.reserve_real(cell.bytes(), cell.real_bytes(), roots)?;
        Ok(Value::Obj(self.heap.insert(cell)))
    }

    /// `Set(items?)`.
    pub(crate) fn set_new(&mut self, items: Value) -> OpResult<Value> {
        let list = match items {
            Value::Str(_) | Value::Num(_) | Value::Bool(_) => {
                return guest("Set(items) needs an array (or nothing)")
            }
            v => self.members(v, "Set")?,
        };
        self.charge_elems(list.len())?;
        self.build_set(&list, &[items])
    }

    fn set_method(&mut self, id: NativeId, g: Gc, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let x = args.get(1).copied().unwrap_or(Value::Undefined);
        let len = match self.heap.get(g) {
            Cell::Set(m) => m.len(),
            _ => 0,
        };
        match id {
            Has => {
                self.charge(self.key_cost(x))?;
                let k = self.set_key(x)?;
                Ok(Value::Bool(
                    matches!(self.heap.get(g), Cell::Set(m) if m.contains_key(&k)),
                ))
            }
            Add => {
                self.charge(self.key_cost(x))?;
                let k = self.set_key(x)?;
                if matches!(self.heap.get(g), Cell::Set(m) if m.contains_key(&k)) {
                    return Ok(Value::Obj(g));
                }
                let (more, real) = match &k {
                    SetKey::Str(u) => (8 + 2 * u.len(), set_str_real(u.len())),
                    _ => (8, 0),
                };
                let room = self.heap.growth(g, 1) + real;
                self.reserve_real(more, room, &[Value::Obj(g), x])?;
                self.heap.grow(more);
                self.heap.grow_real(real);
                self.heap.mutate(g, |c| {
                    if let Cell::Set(m) = c {
                        m.insert(k, x);
                    }
                });
                Ok(Value::Obj(g))
            }
            Remove => {
                // removing keeps insertion order: the members after it move
                self.charge(
                    self.key_cost(x)
                        .saturating_add(len as u64 * MILLI_PER_ELEMENT),
                )?;
                let k = self.set_key(x)?;
                let (less, real) = match &k {
                    SetKey::Str(u) => (8 + 2 * u.len(), set_str_real(u.len())),
                    _ => (8, 0),
                };
                let removed = self.heap.mutate(g, |c| match c {
                    Cell::Set(m) => m.shift_remove(&k).is_some(),
                    _ => false,
                });
                if removed == Some(true) {
                    self.heap.shrink(less);
                    self.heap.shrink_real(real);
                }
                Ok(Value::Obj(g))
            }
            Clear => {
                self.charge_elems(len)?;
                let before = self.heap.get(g).bytes();
                let real = self.heap.get(g).real_bytes() - self.heap.get(g).shape_bytes();
                self.heap.mutate(g, |c| {
                    if let Cell::Set(m) = c {
                        m.clear();
                    }
                });
                self.heap.shrink(before - set_bytes(0, 0));
                self.heap.shrink_real(real);
                Ok(Value::Obj(g))
            }
            ToArray => {
                let items = self.members(Value::Obj(g), "toArray")?;
                self.charge_elems(items.len())?;
                self.reserve_arr(items.len(), &[])?;
                Ok(self.commit_arr(items))
            }
            Union | Intersection | Diff => {
                let mine = self.members(Value::Obj(g), id.js_name())?;
                let other = self.members(x, id.js_name())?;
                self.charge_elems(mine.len() + other.len())?;
                let items: Vec<Value> = if id == Union {
                    mine.into_iter().chain(other).collect()
                } else {
                    let mut cost = 0u64;
                    for &v in &other {
                        cost = cost.saturating_add(self.key_cost(v));
                    }
                    for &v in &mine {
                        cost = cost.saturating_add(self.key_cost(v));
                    }
                    self.charge(cost)?;
                    let mut theirs = std::collections::HashSet::with_capacity(other.len());
                    for &v in &other {
                        theirs.insert(self.set_key(v)?);
                    }
                    let mut keep = Vec::new();
                    for v in mine {
                        let inside = theirs.contains(&self.set_key(v)?);
                        if inside == (id == Intersection) {
                            keep.push(v);
                        }
                    }
                    keep
                };
                self.build_set(&items, &[Value::Obj(g), x])
            }
            ToString => guest("Cannot turn a Set into a string; use .toArray().join() first"),
            _ => {
                let m = &id.js_name()[1..];
                guest(crate::method_hints::not_a_function(m, "Set"))
            }
        }
    }
}

/// Where NFC can start to order `a` and `b` differently from their code units, or `None` when
/// it cannot. Below U+0300 every character is a starter that is its own NFC and composes with
/// nothing before it, so such a unit is a boundary NFC does not cross: when the first
/// difference and the unit after it are below U+0300 in both, code units decide; otherwise
/// normalizing from the last such unit of the common prefix does.
fn normalize_from(a: &[u16], b: &[u16]) -> Option<usize> {
    let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let low = |s: &[u16]| s[i..(i + 2).min(s.len())].iter().all(|&u| u < 0x300);
    if low(a) && low(b) {
        return None;
    }
    Some(a[..i].iter().rposition(|&u| u < 0x300).unwrap_or(0))
}
