//! Regular expressions (decision 23): literals, `test`/`exec`, and the string methods `match
//! matchAll replace replaceAll split search`, on Rust's linear-time `regex` engine. Every call
//! pays for the length of its input (times a factor for the pattern's size) before matching, and
//! for its output before allocating it.

use ajs_bytecode::natives::jsregex::{translate, JsRegex};
use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::heap::{regex_bytes, str_bytes, Cell, Gc, RegexCell};
use crate::machine::{Vm, MILLI_PER_ELEMENT, UNITS_PER_MILLI};
use crate::value::Value;

/// Compiled-size cap of one regex (bytes of the engine's program).
const SIZE_LIMIT: usize = 1 << 20;
/// Lazy-DFA cache cap per regex.
const DFA_LIMIT: usize = 2 << 20;

/// A haystack: the guest string as UTF-8 plus a map from byte offsets to UTF-16 offsets.
struct Hay {
    text: String,
    map: Vec<u32>,
}

impl Hay {
    fn new(units: &[u16]) -> Hay {
        let text = String::from_utf16_lossy(units);
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
        self.map.get(byte).copied().unwrap_or(0) as usize
    }
    /// The byte offset of UTF-16 offset `u` (the first byte at or after it).
    fn byte(&self, u: usize) -> usize {
        self.map.partition_point(|&x| (x as usize) < u)
    }
}

/// One match: whole-match and group ranges in UTF-16 units.
struct M {
    start: usize,
    end: usize,
    groups: Vec<Option<(usize, usize)>>,
}

fn to_m(c: &regex::Captures, hay: &Hay) -> M {
    let whole = c.get(0).map_or((0, 0), |m| (m.start(), m.end()));
    M {
        start: hay.u16(whole.0),
        end: hay.u16(whole.1),
        groups: (1..c.len())
            .map(|i| c.get(i).map(|m| (hay.u16(m.start()), hay.u16(m.end()))))
            .collect(),
    }
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
    /// Builds the engine's regex for a translated pattern (cached per run).
    fn engine(&mut self, t: &JsRegex) -> OpResult<regex::Regex> {
        if let Some(r) = self.regex_cache.get(&t.rust) {
            return Ok(r.clone());
        }
        let re = regex::RegexBuilder::new(&t.rust)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(DFA_LIMIT)
            .nest_limit(200)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => {
                    format!("Regex pattern is too large once compiled (over {SIZE_LIMIT} bytes)")
                }
                other => format!("Invalid regular expression: {other}"),
            });
        match re {
            Ok(re) => {
                if self.regex_cache.len() < 256 {
                    self.regex_cache.insert(t.rust.clone(), re.clone());
                }
                Ok(re)
            }
            Err(m) => guest(m),
        }
    }

    /// Rebuilds a regex cell's matcher from its source and flags (restoring a snapshot).
    pub(crate) fn rebuild_regex(
        &mut self,
        source: &[u16],
        flags: &str,
    ) -> Result<(regex::Regex, bool), String> {
        let src = String::from_utf16_lossy(source);
        let t = translate(&src, flags)?;
        match self.engine(&t) {
            Ok(re) => Ok((re, t.global)),
            Err(crate::error::Fault::Guest(m)) => Err(m),
            Err(crate::error::Fault::Fatal(e)) => Err(e.message),
        }
    }

    /// A new regex value from a JavaScript pattern and flags.
    pub(crate) fn make_regex(&mut self, source: &[u16], flags: &str) -> OpResult<Value> {
        let src = String::from_utf16_lossy(source);
        // compiling costs like reading the pattern a few times
        self.charge_units(source.len() * 16)?;
        let t = match translate(&src, flags) {
            Ok(t) => t,
            Err(m) => return guest(m),
        };
        let re = self.engine(&t)?;
        let real = crate::memory::SLOT + crate::memory::regex_real(source.len());
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

    fn regex_parts(&self, g: Gc) -> (regex::Regex, bool, usize, usize) {
        match self.heap.get(g) {
            Cell::Regex(r) => (r.re.clone(), r.global, r.last_index, r.source.len()),
            _ => (
                regex::Regex::new("$^").unwrap_or_else(|_| unreachable_regex()),
                false,
                0,
                0,
            ),
        }
    }

    fn set_last_index(&mut self, g: Gc, i: usize) {
        if let Some(Cell::Regex(r)) = self.heap.get_mut(g) {
            r.last_index = i;
        }
    }

    /// Pays for scanning `len` code units with a pattern of `plen` units, before matching.
    fn charge_scan(&mut self, len: usize, plen: usize) -> OpResult<()> {
        let factor = 1 + plen / 32;
        self.charge(((len as u64).saturating_mul(factor as u64) / UNITS_PER_MILLI).max(1))
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

    /// Builds `[whole, ...groups]` for a match, paying first.
    fn match_array(&mut self, s: &[u16], m: &M) -> OpResult<Value> {
        let units =
            (m.end - m.start) + m.groups.iter().flatten().map(|(a, b)| b - a).sum::<usize>();
        let n = m.groups.len() + 1;
        self.charge_elems(n)?;
        self.charge_units(units)?;
        self.reserve_strs(n, units, &[])?;
        let mut items = Vec::with_capacity(n);
        items.push(self.commit_str(s[m.start..m.end].to_vec()));
        for r in &m.groups {
            let v = self.substr_val(s, *r);
            items.push(v);
        }
        Ok(self.commit_arr(items))
    }

    /// `re.test(s)`, `re.exec(s)`, `re.toString()`.
    pub(crate) fn regex_method(&mut self, id: NativeId, g: Gc, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let arg = args.get(1).copied().unwrap_or(Value::Undefined);
        match id {
            Test | Exec => {
                let s = self.to_units(arg, id.js_name())?;
                let (re, global, last, plen) = self.regex_parts(g);
                let start = if global { last } else { 0 };
                if start > s.len() {
                    self.set_last_index(g, 0);
                    return Ok(if id == Test {
                        Value::Bool(false)
                    } else {
                        Value::Null
                    });
                }
                self.charge_scan(s.len() - start, plen)?;
                let hay = Hay::new(&s);
                let found = re
                    .captures_at(&hay.text, hay.byte(start))
                    .map(|c| to_m(&c, &hay));
                match found {
                    None => {
                        if global {
                            self.set_last_index(g, 0);
                        }
                        Ok(if id == Test {
                            Value::Bool(false)
                        } else {
                            Value::Null
                        })
                    }
                    Some(m) => {
                        if global {
                            self.set_last_index(g, m.end);
                        }
                        if id == Test {
                            Ok(Value::Bool(true))
                        } else {
                            self.match_array(&s, &m)
                        }
                    }
                }
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
                guest(format!("'{m}' is not a function on a regular expression"))
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
                if !self.regex_parts(g).1 {
                    return guest(
                        "String.prototype.matchAll called with a non-global RegExp argument",
                    );
                }
                g
            }
            Replace | ReplaceAll | Split if is_re => self.regex_of(a1).unwrap_or(0),
            _ => return Ok(None),
        };
        let s = self.units(sg).to_vec();
        let (re, global, _, plen) = self.regex_parts(rg);
        if id == ReplaceAll && !global {
            return guest("replaceAll must be called with a global RegExp");
        }
        self.charge_scan(s.len(), plen)?;
        let hay = Hay::new(&s);
        let v = match id {
            Search => Value::Num(
                re.find(&hay.text)
                    .map_or(-1.0, |m| hay.u16(m.start()) as f64),
            ),
            Match if !global => match re.captures(&hay.text) {
                None => Value::Null,
                Some(c) => {
                    let m = to_m(&c, &hay);
                    self.match_array(&s, &m)?
                }
            },
            Match => {
                self.set_last_index(rg, 0);
                let mut count = 0usize;
                let mut units = 0usize;
                for m in re.find_iter(&hay.text) {
                    self.charge(MILLI_PER_ELEMENT)?;
                    count += 1;
                    units += hay.u16(m.end()) - hay.u16(m.start());
                }
                if count == 0 {
                    return Ok(Some(Value::Null));
                }
                self.charge_units(units)?;
                self.reserve_strs(count, units, &[])?;
                let mut items = Vec::with_capacity(count);
                for m in re.find_iter(&hay.text) {
                    let (a, b) = (hay.u16(m.start()), hay.u16(m.end()));
                    items.push(self.commit_str(s[a..b].to_vec()));
                }
                self.commit_arr(items)
            }
            MatchAll => {
                let mut out = Vec::new();
                for c in re.captures_iter(&hay.text) {
                    let m = to_m(&c, &hay);
                    let arr = self.match_array_rooted(&s, &m, &out)?;
                    out.push(arr);
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
                let names: Vec<Option<String>> = re
                    .capture_names()
                    .skip(1)
                    .map(|n| n.map(str::to_string))
                    .collect();
                let parts = parse_replacement(&rep, names.len(), &names);
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
                        .sum()
                };
                // pass 1: the output's length
                let mut total = 0usize;
                let mut last = 0usize;
                let mut count = 0usize;
                for c in re.captures_iter(&hay.text) {
                    let m = to_m(&c, &hay);
                    self.charge(MILLI_PER_ELEMENT)?;
                    count += 1;
                    total = total
                        .saturating_add(m.start - last)
                        .saturating_add(piece_len(&m));
                    last = m.end;
                    if !global {
                        break;
                    }
                }
                if count == 0 {
                    return Ok(Some(Value::Str(sg)));
                }
                total = total.saturating_add(len - last);
                self.charge_units(total)?;
                self.reserve(str_bytes(total), &[])?;
                // pass 2: build
                let mut out = Vec::with_capacity(total);
                let mut last = 0usize;
                for c in re.captures_iter(&hay.text) {
                    let m = to_m(&c, &hay);
                    out.extend_from_slice(&s[last..m.start]);
                    for p in &parts {
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
                    if !global {
                        break;
                    }
                }
                out.extend_from_slice(&s[last..]);
                self.commit_str(out)
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

    fn match_array_rooted(&mut self, s: &[u16], m: &M, roots: &[Value]) -> OpResult<Value> {
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

    /// JavaScript's `split` by a regex (captures are spliced into the output).
    fn regex_split(
        &mut self,
        s: &[u16],
        re: &regex::Regex,
        hay: &Hay,
        lim: usize,
    ) -> OpResult<Value> {
        if lim == 0 {
            return self.empty_arr();
        }
        let size = s.len();
        // pieces as ranges (None: an unmatched capture → undefined)
        let mut pieces: Vec<Option<(usize, usize)>> = Vec::new();
        if size == 0 {
            if re.is_match(&hay.text) {
                return self.empty_arr();
            }
            pieces.push(Some((0, 0)));
        } else {
            let mut p = 0usize;
            let mut q = 0usize;
            'outer: while q < size {
                let Some(c) = re.captures_at(&hay.text, hay.byte(q)) else {
                    break;
                };
                let m = to_m(&c, hay);
                if m.start >= size {
                    break;
                }
                if m.end == p {
                    q = m.start + 1;
                    continue;
                }
                self.charge(MILLI_PER_ELEMENT)?;
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
        self.charge_scan(value.len(), pattern.len())?;
        let hay = Hay::new(value);
        Ok(Value::Bool(re.is_match(&hay.text)))
    }
}

fn unreachable_regex() -> regex::Regex {
    // `$^` always compiles; this is never reached
    regex::Regex::new("a^").expect("a constant pattern compiles")
}
