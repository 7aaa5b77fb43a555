//! Regular expressions (decision 23): literals, `test`/`exec`, and the string methods `match
//! matchAll replace replaceAll split search`, on linear-time automata (`regex_engine.rs`).
//! Every search pays as it reads, and stops at the run's deadline or cancellation; every call
//! pays for its output before allocating it.

use std::sync::Arc;

use ajs_bytecode::natives::jsregex::{translate, JsRegex};
use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::heap::{regex_bytes, str_bytes, Cell, Gc, Key, RegexCell};
use crate::machine::{Vm, MILLI_PER_ELEMENT};
use crate::memory;
use crate::regex_engine::{
    compile, compile_micro, stop_error, Caches, Compiled, Meter, Stop, MICRO_PER_HAY_UNIT,
    MICRO_PER_HAY_UNIT_MAPPED,
};
use crate::value::Value;
use std::mem::size_of;

mod replace_fn;

/// Micro-fuel per match found (the element it adds).
const MICRO_PER_MATCH: u64 = MILLI_PER_ELEMENT * 1000;

/// A haystack: the guest string as UTF-8 plus a map from byte offsets to UTF-16 offsets
/// (empty when every character is one byte and one unit, so offsets are equal).
struct Hay {
    text: String,
    map: Vec<u32>,
}

impl Hay {
    fn new(units: &[u16]) -> Hay {
        let text = utf8(units);
        if text.len() == units.len() {
            return Hay {
                text,
                map: Vec::new(),
            };
        }
        let mut map = Vec::with_capacity(text.len() + 1);
        let mut u = 0u32;
        for c in text.chars() {
            for _ in 0..c.len_utf8() {
                map.push(u);
            }
            u += c.len_utf16() as u32;
        }
        map.push(u);
        Hay { text, map }
    }
    fn u16(&self, byte: usize) -> usize {
        if self.map.is_empty() {
            return byte.min(self.text.len());
        }
        self.map.get(byte).copied().unwrap_or(0) as usize
    }
    /// The byte offset of UTF-16 offset `u` (the first byte at or after it).
    fn byte(&self, u: usize) -> usize {
        if self.map.is_empty() {
            return u.min(self.text.len() + 1);
        }
        self.map.partition_point(|&x| (x as usize) < u)
    }
    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }
    /// A match found in byte offsets, in UTF-16 units.
    fn m(&self, whole: (usize, usize), groups: &[Option<(usize, usize)>]) -> M {
        M {
            start: self.u16(whole.0),
            end: self.u16(whole.1),
            groups: groups
                .iter()
                .map(|g| g.map(|(a, b)| (self.u16(a), self.u16(b))))
                .collect(),
        }
    }
}

/// Real bytes a search of `units` holds besides the string: a copy of its units and the
/// haystack (its UTF-8 text and, beyond ASCII, the offset map), at most.
fn scratch_bytes(units: &[u16]) -> usize {
    let text: usize = units
        .iter()
        .map(|&u| match u {
            0..=0x7F => 1,
            0x80..=0x7FF => 2,
            _ => 3,
        })
        .sum();
    let map = if text == units.len() {
        0
    } else {
        4 * (text + 1)
    };
    crate::memory::alloc(2 * units.len()) + crate::memory::alloc(text) + crate::memory::alloc(map)
}

/// `units` as UTF-8 (a lone surrogate becomes U+FFFD), with a fast path for ASCII.
pub(crate) fn utf8(units: &[u16]) -> String {
    if units.iter().all(|&u| u < 0x80) {
        let bytes: Vec<u8> = units.iter().map(|&u| u as u8).collect();
        // ASCII is UTF-8
        return String::from_utf8(bytes).unwrap_or_default();
    }
    String::from_utf16_lossy(units)
}

/// One match: whole-match and group ranges in UTF-16 units.
struct M {
    start: usize,
    end: usize,
    groups: Vec<Option<(usize, usize)>>,
}

/// A range of byte offsets (`None`: a group that did not take part).
type Span = (usize, usize);

/// Matches found by one search pass: whole matches and, when asked for, their groups
/// (`groups` per match, flattened), in byte offsets.
struct Found {
    whole: Vec<(usize, usize)>,
    groups: Vec<Option<(usize, usize)>>,
    per: usize,
}

impl Found {
    fn get(&self, i: usize) -> (Span, &[Option<Span>]) {
        (
            self.whole[i],
            &self.groups[i * self.per..(i + 1) * self.per],
        )
    }
}

/// Where a scan goes on from: the byte to search at and the end of the last match found.
#[derive(Clone, Copy)]
struct Resume {
    at: usize,
    last_end: Option<usize>,
}

impl Resume {
    fn at(start: usize) -> Resume {
        Resume {
            at: start,
            last_end: None,
        }
    }
}

/// The matches from `from` on, as the `regex` crate's iterators give them (after an empty
/// match, the next match may not be empty at the same place), up to `limit`, each paid for as
/// found; with their groups when `groups`. Also where a next scan goes on from, or `None`
/// when the haystack is done.
fn scan(
    re: &Compiled,
    c: &mut Caches,
    hay: &[u8],
    from: Resume,
    limit: usize,
    groups: bool,
    m: &mut Meter,
) -> Result<(Found, Option<Resume>), Stop> {
    let per = if groups { re.groups() } else { 0 };
    let mut f = Found {
        whole: Vec::new(),
        groups: Vec::new(),
        per,
    };
    let Resume {
        mut at,
        mut last_end,
    } = from;
    while f.whole.len() < limit {
        if at > hay.len() {
            return Ok((f, None));
        }
        let Some(mut found) = re.find(c, hay, at, m)? else {
            return Ok((f, None));
        };
        if found.0 == found.1 && Some(found.1) == last_end {
            if at + 1 > hay.len() {
                return Ok((f, None));
            }
            match re.find(c, hay, at + 1, m)? {
                Some(x) => found = x,
                None => return Ok((f, None)),
            }
        }
        m.pay(MICRO_PER_MATCH, 0)?;
        f.whole.push(found);
        if per > 0 {
            f.groups.extend(re.captures(c, hay, found.0, found.1, m)?);
        }
        at = found.1;
        last_end = Some(found.1);
    }
    Ok((f, Some(Resume { at, last_end })))
}

/// Matches one scan collects at most (with groups: fewer, in proportion), so that the list
/// of a chunk stays small beside the output it becomes.
const SCAN_CHUNK: usize = 4096;

/// The most matches of `re` one scan collects.
fn scan_chunk(re: &Compiled, groups: bool) -> usize {
    let per = if groups { re.groups() } else { 0 };
    (SCAN_CHUNK / (1 + per)).max(1)
}

/// One part of a replacement template.
enum Part {
    Lit(Vec<u16>),
    Matched,
    Before,
    After,
    Group(usize),
}

fn parse_replacement(r: &[u16], ngroups: usize, names: &[Option<String>]) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    let d = |u: u16| {
        (b'0' as u16..=b'9' as u16)
            .contains(&u)
            .then(|| (u - b'0' as u16) as usize)
    };
    while i < r.len() {
        if r[i] == b'$' as u16 && i + 1 < r.len() {
            let c = r[i + 1];
            let part = match c {
                0x24 => {
                    lit.push(b'$' as u16);
                    i += 2;
                    continue;
                }
                0x26 => Some((Part::Matched, 2)),
                0x60 => Some((Part::Before, 2)),
                0x27 => Some((Part::After, 2)),
                0x3C if names.iter().any(Option::is_some) => {
                    match r[i + 2..].iter().position(|&u| u == b'>' as u16) {
                        Some(e) => {
                            let name = String::from_utf16_lossy(&r[i + 2..i + 2 + e]);
                            let g = names.iter().position(|n| n.as_deref() == Some(&name));
                            match g {
                                Some(g) => Some((Part::Group(g), e + 3)),
                                None => Some((Part::Lit(Vec::new()), e + 3)),
                            }
                        }
                        None => None,
                    }
                }
                _ => match d(c) {
                    Some(a) => {
                        let two = r.get(i + 2).and_then(|&u| d(u)).map(|b| a * 10 + b);
                        match two {
                            Some(n) if n >= 1 && n <= ngroups => Some((Part::Group(n - 1), 3)),
                            _ if a >= 1 && a <= ngroups => Some((Part::Group(a - 1), 2)),
                            _ => None,
                        }
                    }
                    None => None,
                },
            };
            if let Some((p, len)) = part {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(p);
                i += len;
                continue;
            }
        }
        lit.push(r[i]);
        i += 1;
    }
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    parts
}

impl Vm {
    /// The compiled form of a translated pattern (cached per run). Every call pays for the
    /// program, cached or not, so that fuel does not depend on what the cache holds (a
    /// restored run starts with it empty); a compile is paid for once it has run.
    fn engine(&mut self, t: &JsRegex) -> OpResult<Arc<Compiled>> {
        let re = match self.regex_cache.get(&t.rust) {
            Some(r) => r,
            None => match compile(&t.rust) {
                Ok(re) => {
                    let re = Arc::new(re);
                    self.regex_cache.insert(re.clone());
                    re
                }
                Err(m) => return guest(m),
            },
        };
        self.charge(compile_micro(re.bytes) / 1000)?;
        Ok(re)
    }

    /// Rebuilds a regex cell's matcher from its source and flags (restoring a snapshot).
    pub(crate) fn rebuild_regex(
        &mut self,
        source: &[u16],
        flags: &str,
    ) -> Result<(Arc<Compiled>, bool), String> {
        let src = String::from_utf16_lossy(source);
        let t = translate(&src, flags)?;
        match compile(&t.rust) {
            Ok(re) => Ok((Arc::new(re), t.global)),
            Err(m) => Err(m),
        }
    }

    /// A new regex value from a JavaScript pattern and flags.
    pub(crate) fn make_regex(&mut self, source: &[u16], flags: &str) -> OpResult<Value> {
        let src = String::from_utf16_lossy(source);
        // compiling costs like reading the pattern a few times, plus its program (`engine`)
        self.charge_units(source.len() * 16)?;
        let t = match translate(&src, flags) {
            Ok(t) => t,
            Err(m) => return guest(m),
        };
        let re = self.engine(&t)?;
        let real = crate::memory::SLOT + crate::memory::regex_real(source.len(), re.bytes);
        self.reserve_real(regex_bytes(source.len()), real, &[])?;
        let cell = RegexCell {
            source: source.into(),
            flags: flags.into(),
            re,
            global: t.global,
            last_index: 0,
        };
        Ok(Value::Obj(self.heap.insert(Cell::Regex(Box::new(cell)))))
    }

    /// The `%regex` native behind a literal: (pattern, flags).
    pub(crate) fn regex_literal(&mut self, p: Value, f: Value) -> OpResult<Value> {
        let (Value::Str(pg), Value::Str(fg)) = (p, f) else {
            return guest("a regular expression needs a pattern and flags");
        };
        let source = self.units(pg).to_vec();
        let flags = String::from_utf16_lossy(self.units(fg));
        self.make_regex(&source, &flags)
    }

    /// The regex cell behind `v`, if `v` is a regex.
    pub(crate) fn regex_of(&self, v: Value) -> Option<Gc> {
        match v {
            Value::Obj(g) if matches!(self.heap.get(g), Cell::Regex(_)) => Some(g),
            _ => None,
        }
    }

    /// The compiled form, `g` flag and `lastIndex` of regex cell `g` (`None`: not a regex).
    fn regex_parts(&self, g: Gc) -> Option<(Arc<Compiled>, bool, usize)> {
        match self.heap.get(g) {
            Cell::Regex(r) => Some((r.re.clone(), r.global, r.last_index)),
            _ => None,
        }
    }

    fn set_last_index(&mut self, g: Gc, i: usize) {
        if let Some(Cell::Regex(r)) = self.heap.get_mut(g) {
            r.last_index = i;
        }
    }

    /// Turns `s` into the haystack the automata read, paying for it first (text beyond ASCII
    /// also needs its offset map).
    fn haystack(&mut self, s: &[u16]) -> OpResult<Hay> {
        let rate = if s.iter().all(|&u| u < 0x80) {
            MICRO_PER_HAY_UNIT
        } else {
            MICRO_PER_HAY_UNIT_MAPPED
        };
        self.charge((s.len() as u64).saturating_mul(rate) / 1000)?;
        Ok(Hay::new(s))
    }

    /// Runs `f` with `re`'s search state and a meter of the run's fuel, deadline and
    /// cancellation; the fuel it spends is the run's.
    fn search<T>(
        &mut self,
        re: &Arc<Compiled>,
        f: impl FnOnce(&Compiled, &mut Caches, &mut Meter) -> Result<T, Stop>,
    ) -> OpResult<T> {
        let mut caches = self.regex_cache.take(re);
        let mut meter = Meter::new(self.meter.fuel.left(), &self.interrupt);
        let r = f(re, &mut caches, &mut meter);
        let left = meter.milli_left();
        self.meter.fuel.set(left);
        self.regex_cache.put(re, caches);
        r.map_err(stop_error)
    }

    /// The string argument as a regex (a string pattern compiles as `new RegExp(s)` would).
    fn coerce_regex(&mut self, v: Value, flags: &str, op: &str) -> OpResult<Gc> {
        if let Some(g) = self.regex_of(v) {
            return Ok(g);
        }
        let src = match v {
            Value::Undefined => Vec::new(),
            v => self.to_units(v, op)?,
        };
        match self.make_regex(&src, flags)? {
            Value::Obj(g) => Ok(g),
            _ => guest("not a regular expression"),
        }
    }

    fn substr_val(&mut self, s: &[u16], r: Option<(usize, usize)>) -> Value {
        match r {
            Some((a, b)) => self.commit_str(s[a..b].to_vec()),
            None => Value::Undefined,
        }
    }

    /// Builds `[whole, ...groups]` for a match, paying first (`roots`: values only the caller
    /// holds).
    fn match_array(&mut self, s: &[u16], m: &M, roots: &[Value]) -> OpResult<Value> {
        let units =
            (m.end - m.start) + m.groups.iter().flatten().map(|(a, b)| b - a).sum::<usize>();
        let n = m.groups.len() + 1;
        self.charge_elems(n)?;
        self.charge_units(units)?;
        self.reserve_strs(n, units, roots)?;
        let mut items = Vec::with_capacity(n);
        items.push(self.commit_str(s[m.start..m.end].to_vec()));
        for r in &m.groups {
            let v = self.substr_val(s, *r);
            items.push(v);
        }
        Ok(self.commit_arr(items))
    }

    /// A match result as `exec`, `match` and `matchAll` give it: `[whole, ...groups]` with the
    /// properties `index` (where the match starts), `input` (the string searched) and `groups`
    /// (the named groups, or `undefined` when the pattern names none).
    /// (`held`: values only the caller holds, kept as roots; the temporaries pushed on it are
    /// taken off again before it returns.)
    fn match_result(
        &mut self,
        s: &[u16],
        m: &M,
        input: Value,
        names: &[Option<String>],
        held: &mut Vec<Value>,
    ) -> OpResult<Value> {
        let mark = held.len();
        let r = self.match_result_in(s, m, input, names, held);
        held.truncate(mark);
        r
    }

    fn match_result_in(
        &mut self,
        s: &[u16],
        m: &M,
        input: Value,
        names: &[Option<String>],
        held: &mut Vec<Value>,
    ) -> OpResult<Value> {
        held.push(input);
        let arr = self.match_array(s, m, held)?;
        let Value::Arr(ag) = arr else {
            return Ok(arr);
        };
        held.push(arr);
        let groups = self
            .groups_object(ag, names, held)?
            .unwrap_or(Value::Undefined);
        let pairs = vec![
            (key("index"), Value::Num(m.start as f64)),
            (key("input"), input),
            (key("groups"), groups),
        ];
        let growth = self.heap.extras_growth(ag);
        self.reserve_real(0, growth, held)?;
        let Value::Obj(og) = self.new_obj(pairs, held)? else {
            return Ok(arr);
        };
        self.heap.set_extras(ag, og);
        Ok(arr)
    }

    /// The `groups` object of the match array `ag` (`[whole, ...captures]`): each named group
    /// with its capture, `None` when the pattern names none. The object is left on `held`.
    fn groups_object(
        &mut self,
        ag: Gc,
        names: &[Option<String>],
        held: &mut Vec<Value>,
    ) -> OpResult<Option<Value>> {
        if !names.iter().any(Option::is_some) {
            return Ok(None);
        }
        // (the group values are the array's own: read in place, not copied out)
        let pairs: Vec<(Key, Value)> = match self.heap.get(ag) {
            Cell::Arr(items) => names
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    let v = items.get(i + 1).copied().unwrap_or(Value::Undefined);
                    n.as_ref().map(|n| (key(n), v))
                })
                .collect(),
            _ => Vec::new(),
        };
        let g = self.new_obj(pairs, held)?;
        held.push(g);
        Ok(Some(g))
    }

    /// `re.test(s)`, `re.exec(s)`, `re.toString()`.
    pub(crate) fn regex_method(&mut self, id: NativeId, g: Gc, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let arg = args.get(1).copied().unwrap_or(Value::Undefined);
        match id {
            Test | Exec => {
                let scratch = match arg {
                    Value::Str(a) => scratch_bytes(self.units(a)),
                    _ => 0,
                };
                self.with_scratch(scratch, &[arg, Value::Obj(g)], |vm| {
                    vm.test_exec(id, g, arg)
                })
            }
            ToString => {
                let (src, flags) = match self.heap.get(g) {
                    Cell::Regex(r) => (r.source.to_vec(), r.flags.to_string()),
                    _ => (Vec::new(), String::new()),
                };
                let mut out = vec![b'/' as u16];
                out.extend_from_slice(if src.is_empty() {
                    &[0x28, 0x3F, 0x3A, 0x29][..]
                } else {
                    &src
                });
                out.push(b'/' as u16);
                out.extend(flags.encode_utf16());
                self.charge_units(out.len())?;
                self.alloc_str(out)
            }
            _ => {
                let m = &id.js_name()[1..];
                guest(crate::method_hints::not_a_function(m, "regular expression"))
            }
        }
    }

    /// `re.test(s)` and `re.exec(s)`.
    fn test_exec(&mut self, id: NativeId, g: Gc, arg: Value) -> OpResult<Value> {
        use NativeId::*;
        let s = self.to_units(arg, id.js_name())?;
        let Some((re, global, last)) = self.regex_parts(g) else {
            return guest("not a regular expression");
        };
        let start = if global { last } else { 0 };
        let nothing = if id == Test {
            Value::Bool(false)
        } else {
            Value::Null
        };
        if start > s.len() {
            self.set_last_index(g, 0);
            return Ok(nothing);
        }
        let hay = self.haystack(&s)?;
        let from = hay.byte(start);
        if id == Test && !global {
            let yes = self.search(&re, |re, c, m| re.is_match(c, hay.bytes(), from, m))?;
            return Ok(Value::Bool(yes));
        }
        let found = self.search(&re, |re, c, m| {
            let Some((a, b)) = re.find(c, hay.bytes(), from, m)? else {
                return Ok(None);
            };
            let groups = if id == Exec && re.groups() > 0 {
                re.captures(c, hay.bytes(), a, b, m)?
            } else {
                Vec::new()
            };
            Ok(Some(((a, b), groups)))
        })?;
        match found {
            None => {
                if global {
                    self.set_last_index(g, 0);
                }
                Ok(nothing)
            }
            Some((whole, groups)) => {
                let mut m = hay.m(whole, &groups);
                if id == Exec {
                    m.groups.resize(re.groups(), None);
                }
                if global {
                    self.set_last_index(g, m.end);
                }
                if id == Test {
                    return Ok(Value::Bool(true));
                }
                let input = match arg {
                    Value::Str(_) => arg,
                    _ => {
                        self.charge_units(s.len())?;
                        self.alloc_str(s.clone())?
                    }
                };
                self.match_result(&s, &m, input, &re.names, &mut Vec::new())
            }
        }
    }

    /// `s.match/matchAll/search/replace/replaceAll/split` with a regex (or, for `match`,
    /// `matchAll` and `search`, a pattern string). `None` when the method should take its
    /// string path instead.
    pub(crate) fn string_regex(
        &mut self,
        id: NativeId,
        sg: Gc,
        args: &[Value],
    ) -> OpResult<Option<Value>> {
        use NativeId::*;
        let a1 = args.get(1).copied().unwrap_or(Value::Undefined);
        let is_re = self.regex_of(a1).is_some();
        let rg = match id {
            Match | Search => self.coerce_regex(a1, "", id.js_name())?,
            MatchAll => {
                let g = self.coerce_regex(a1, "g", id.js_name())?;
                if !self.regex_parts(g).is_some_and(|p| p.1) {
                    return guest(
                        "String.prototype.matchAll called with a non-global RegExp argument",
                    );
                }
                g
            }
            Replace | ReplaceAll | Split if is_re => self.regex_of(a1).unwrap_or(0),
            _ => return Ok(None),
        };
        // the copy of the string and its haystack are held in the real count while in use
        let scratch = scratch_bytes(self.units(sg));
        let roots = [Value::Str(sg), Value::Obj(rg)];
        self.with_scratch(scratch, &roots, |vm| vm.string_regex_in(id, sg, rg, args))
    }

    /// [`Vm::string_regex`] once the regex `rg` is known.
    fn string_regex_in(
        &mut self,
        id: NativeId,
        sg: Gc,
        rg: Gc,
        args: &[Value],
    ) -> OpResult<Option<Value>> {
        use NativeId::*;
        let s = self.units(sg).to_vec();
        let Some((re, global, _)) = self.regex_parts(rg) else {
            return guest("not a regular expression");
        };
        if id == ReplaceAll && !global {
            return guest("replaceAll must be called with a global RegExp");
        }
        let hay = self.haystack(&s)?;
        let v = match id {
            Search => {
                let found = self.search(&re, |re, c, m| re.find(c, hay.bytes(), 0, m))?;
                Value::Num(found.map_or(-1.0, |(a, _)| hay.u16(a) as f64))
            }
            Match if !global => {
                let f = self
                    .search(&re, |re, c, m| {
                        scan(re, c, hay.bytes(), Resume::at(0), 1, true, m)
                    })?
                    .0;
                if f.whole.is_empty() {
                    Value::Null
                } else {
                    let (w, g) = f.get(0);
                    let m = hay.m(w, g);
                    self.match_result(&s, &m, Value::Str(sg), &re.names, &mut Vec::new())?
                }
            }
            Match => {
                self.set_last_index(rg, 0);
                let chunk = scan_chunk(&re, false);
                let mut out: Option<Gc> = None;
                let mut from = Some(Resume::at(0));
                while let Some(at) = from {
                    let (f, next) = self.search(&re, |re, c, m| {
                        scan(re, c, hay.bytes(), at, chunk, false, m)
                    })?;
                    from = next;
                    if f.whole.is_empty() {
                        break;
                    }
                    let ranges: Vec<(usize, usize)> = f
                        .whole
                        .iter()
                        .map(|&(a, b)| (hay.u16(a), hay.u16(b)))
                        .collect();
                    let units: usize = ranges.iter().map(|(a, b)| b - a).sum();
                    self.charge_units(units)?;
                    let g = match out {
                        Some(g) => g,
                        None => {
                            self.reserve_arr(0, &[])?;
                            *out.insert(self.heap.insert(Cell::Arr(Vec::new())))
                        }
                    };
                    self.reserve_pieces(g, ranges.len(), units, &[Value::Arr(g)])?;
                    let items: Vec<Value> = ranges
                        .into_iter()
                        .map(|(a, b)| self.commit_str(s[a..b].to_vec()))
                        .collect();
                    self.commit_extend(g, &items);
                }
                match out {
                    Some(g) => Value::Arr(g),
                    None => return Ok(Some(Value::Null)),
                }
            }
            MatchAll => {
                let chunk = scan_chunk(&re, true);
                let mut out = Vec::new();
                let mut from = Some(Resume::at(0));
                while let Some(at) = from {
                    let (f, next) =
                        self.search(&re, |re, c, m| scan(re, c, hay.bytes(), at, chunk, true, m))?;
                    from = next;
                    for i in 0..f.whole.len() {
                        let (w, g) = f.get(i);
                        let m = hay.m(w, g);
                        let arr = self.match_result(&s, &m, Value::Str(sg), &re.names, &mut out)?;
                        out.push(arr);
                    }
                }
                self.charge_elems(out.len())?;
                self.reserve_arr(out.len(), &out)?;
                self.commit_arr(out)
            }
            Replace | ReplaceAll => {
                let rep = match args.get(2).copied().unwrap_or(Value::Undefined) {
                    Value::Str(g) => self.units(g).to_vec(),
                    v => self.to_units(v, id.js_name())?,
                };
                self.charge_units(rep.len())?;
                let parts = parse_replacement(&rep, re.groups(), &re.names);
                let mut held = 0;
                let text = self.replace_text(&s, &hay, &re, &parts, global, &mut held);
                let r = match text {
                    Ok(Some(out)) => self
                        .reserve(str_bytes(out.len()), &[])
                        .map(|()| Some(self.commit_str(out))),
                    Ok(None) => Ok(None),
                    Err(e) => Err(e),
                };
                self.heap.shrink_real(held);
                match r? {
                    Some(v) => v,
                    None => return Ok(Some(Value::Str(sg))),
                }
            }
            Split => {
                let lim = match args.get(2).copied().unwrap_or(Value::Undefined) {
                    Value::Undefined => u32::MAX as usize,
                    v => crate::number::to_uint32(self.to_number(v, "split")?) as usize,
                };
                self.regex_split(&s, &re, &hay, lim)?
            }
            _ => return Ok(None),
        };
        Ok(Some(v))
    }

    /// `s` with the matches of `re` (all of them when `global`) replaced by `parts`, built
    /// chunk by chunk: each chunk of matches is paid for and the text's growth admitted before
    /// it is written (`held`: the real bytes of the text's buffer now in the heap's real
    /// count, the caller's to release). `None` when nothing matched.
    fn replace_text(
        &mut self,
        s: &[u16],
        hay: &Hay,
        re: &Arc<Compiled>,
        parts: &[Part],
        global: bool,
        held: &mut usize,
    ) -> OpResult<Option<Vec<u16>>> {
        let wants_groups = parts.iter().any(|p| matches!(p, Part::Group(_)));
        let limit = if global {
            scan_chunk(re, wants_groups)
        } else {
            1
        };
        let len = s.len();
        let piece_len = |m: &M| -> usize {
            parts
                .iter()
                .map(|p| match p {
                    Part::Lit(l) => l.len(),
                    Part::Matched => m.end - m.start,
                    Part::Before => m.start,
                    Part::After => len - m.end,
                    Part::Group(i) => m
                        .groups
                        .get(*i)
                        .copied()
                        .flatten()
                        .map_or(0, |(a, b)| b - a),
                })
                .fold(0usize, usize::saturating_add)
        };
        let mut out: Vec<u16> = Vec::new();
        let mut last = 0usize;
        let mut from = Some(Resume::at(0));
        let mut first = true;
        while let Some(at) = from {
            let (f, next) = self.search(re, |re, c, m| {
                scan(re, c, hay.bytes(), at, limit, wants_groups, m)
            })?;
            from = if global { next } else { None };
            if first && f.whole.is_empty() {
                return Ok(None);
            }
            first = false;
            let matches: Vec<M> = (0..f.whole.len())
                .map(|i| {
                    let (w, g) = f.get(i);
                    hay.m(w, g)
                })
                .collect();
            // this chunk's length, paid for and admitted before it is written
            let mut add = 0usize;
            let mut l = last;
            for m in &matches {
                add = add.saturating_add(m.start - l).saturating_add(piece_len(m));
                l = m.end;
            }
            if from.is_none() {
                add = add.saturating_add(len - l);
            }
            self.charge_units(add)?;
            let need = out.len().saturating_add(add);
            if need > out.capacity() {
                let cap = need.max(2 * out.capacity());
                // (while it moves, the old buffer and the new are both held)
                let bytes = crate::memory::alloc(cap.saturating_mul(2));
                self.reserve_real(0, bytes, &[])?;
                self.heap.grow_real(bytes.saturating_sub(*held));
                *held = bytes.max(*held);
                out.reserve_exact(cap - out.len());
            }
            for m in &matches {
                out.extend_from_slice(&s[last..m.start]);
                for p in parts {
                    match p {
                        Part::Lit(l) => out.extend_from_slice(l),
                        Part::Matched => out.extend_from_slice(&s[m.start..m.end]),
                        Part::Before => out.extend_from_slice(&s[..m.start]),
                        Part::After => out.extend_from_slice(&s[m.end..]),
                        Part::Group(i) => {
                            if let Some((a, b)) = m.groups.get(*i).copied().flatten() {
                                out.extend_from_slice(&s[a..b]);
                            }
                        }
                    }
                }
                last = m.end;
            }
            if from.is_none() {
                out.extend_from_slice(&s[last..]);
            }
        }
        Ok(Some(out))
    }

    /// JavaScript's `split` by a regex (captures are spliced into the output).
    fn regex_split(
        &mut self,
        s: &[u16],
        re: &Arc<Compiled>,
        hay: &Hay,
        lim: usize,
    ) -> OpResult<Value> {
        if lim == 0 {
            return self.empty_arr();
        }
        // the pieces are collected only as far as their strings could fit in the heap (their
        // list counted with them), and refused there unless a collection makes room
        let per_real = memory::str_real(0) + 8 + 2 * size_of::<Option<(usize, usize)>>();
        let per_est = str_bytes(0) + 8;
        let mut collected = false;
        loop {
            let room = self.room_for(per_est, per_real);
            let take = lim.min(room.saturating_add(1));
            let pieces = self.split_pieces(s, re, hay, take)?;
            if take < lim && pieces.len() == take {
                if collected {
                    return self.heap_limit_error(take * per_est, take * per_real);
                }
                self.collect_garbage(&[]);
                collected = true;
                continue;
            }
            return self.split_array(s, pieces);
        }
    }

    /// The pieces of a regex `split`, at most `lim`, as ranges (`None`: an unmatched capture,
    /// `undefined`).
    fn split_pieces(
        &mut self,
        s: &[u16],
        re: &Arc<Compiled>,
        hay: &Hay,
        lim: usize,
    ) -> OpResult<Vec<Option<(usize, usize)>>> {
        let size = s.len();
        self.search(re, |re, c, meter| {
            let mut pieces: Vec<Option<(usize, usize)>> = Vec::new();
            if size == 0 {
                if re.is_match(c, hay.bytes(), 0, meter)? {
                    return Ok(pieces);
                }
                pieces.push(Some((0, 0)));
                return Ok(pieces);
            }
            let mut p = 0usize;
            let mut q = 0usize;
            'outer: while q < size {
                let Some((a, b)) = re.find(c, hay.bytes(), hay.byte(q), meter)? else {
                    break;
                };
                let groups = if re.groups() > 0 {
                    re.captures(c, hay.bytes(), a, b, meter)?
                } else {
                    Vec::new()
                };
                let m = hay.m((a, b), &groups);
                if m.start >= size {
                    break;
                }
                if m.end == p {
                    q = m.start + 1;
                    continue;
                }
                meter.pay(MICRO_PER_MATCH, 0)?;
                pieces.push(Some((p, m.start)));
                if pieces.len() == lim {
                    break 'outer;
                }
                for gr in &m.groups {
                    pieces.push(*gr);
                    if pieces.len() == lim {
                        break 'outer;
                    }
                }
                p = m.end;
                q = p;
            }
            if pieces.len() < lim {
                pieces.push(Some((p, size)));
            }
            Ok(pieces)
        })
    }

    /// The array of a regex `split`'s `pieces` of `s`, paid for and admitted first.
    fn split_array(&mut self, s: &[u16], pieces: Vec<Option<(usize, usize)>>) -> OpResult<Value> {
        if pieces.is_empty() {
            return self.empty_arr();
        }
        let units: usize = pieces.iter().flatten().map(|(a, b)| b - a).sum();
        let n = pieces.len();
        self.charge_elems(n)?;
        self.charge_units(units)?;
        self.reserve_strs(n, units, &[])?;
        let mut items = Vec::with_capacity(n);
        for r in pieces {
            let v = self.substr_val(s, r);
            items.push(v);
        }
        Ok(self.commit_arr(items))
    }

    fn empty_arr(&mut self) -> OpResult<Value> {
        self.reserve_arr(0, &[])?;
        Ok(self.commit_arr(Vec::new()))
    }

    /// `regexMatch({ pattern, value })`: `test` with the reference's caps.
    pub(crate) fn regex_match_atom(&mut self, pattern: &[u16], value: &[u16]) -> OpResult<Value> {
        if pattern.len() > 1000 {
            return guest(format!("Regex pattern too long ({} > 1000)", pattern.len()));
        }
        if value.len() > 100_000 {
            return guest(format!("Regex input too long ({} > 100000)", value.len()));
        }
        let src = String::from_utf16_lossy(pattern);
        self.charge_units(pattern.len() * 16)?;
        let t = match translate(&src, "") {
            Ok(t) => t,
            Err(m) => return guest(m),
        };
        let re = self.engine(&t)?;
        let hay = self.haystack(value)?;
        let yes = self.search(&re, |re, c, m| re.is_match(c, hay.bytes(), 0, m))?;
        Ok(Value::Bool(yes))
    }
}

/// A property key of the VM's own (a match result's `index`, a group's name).
fn key(k: &str) -> Key {
    k.encode_utf16().collect::<Vec<u16>>().into()
}
