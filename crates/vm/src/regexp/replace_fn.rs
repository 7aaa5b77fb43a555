//! `s.replace(pattern, fn)` and `s.replaceAll(pattern, fn)`: the compiler runs the callback
//! inline between two natives. `%replaceMatches` lists each match as the callback's argument
//! list; `%replaceJoin` splices the callback's results into the string. Both pay for their
//! work and admit what they allocate before they build it.

use super::*;
use crate::builtins::find;
use crate::price::factor;

impl Vm {
    /// `%replaceMatches(s, pattern, all)`: for a regex, its matches (all of them when it is
    /// global; `all` with a non-global regex is JavaScript's TypeError); for any other pattern,
    /// its text's occurrences (the first, or all when `all`).
    pub(crate) fn replace_matches(&mut self, args: &[Value]) -> OpResult<Value> {
        let arg = |i: usize| args.get(i).copied().unwrap_or(Value::Undefined);
        let all = matches!(arg(2), Value::Bool(true));
        let name = if all { "replaceAll" } else { "replace" };
        let Value::Str(sg) = arg(0) else {
            let id = if all {
                NativeId::ReplaceAll
            } else {
                NativeId::Replace
            };
            return self.call_builtin(id, &[arg(0), arg(1), Value::Undefined]);
        };
        match self.regex_of(arg(1)) {
            Some(rg) => {
                let scratch = scratch_bytes(self.units(sg));
                let roots = [Value::Str(sg), Value::Obj(rg)];
                self.with_scratch(scratch, &roots, |vm| vm.regex_records(sg, rg, all))
            }
            None => {
                let pat = self.str_arg_pub(arg(1), name)?;
                self.text_records(sg, pat, all)
            }
        }
    }

    /// The argument lists of the matches of regex `rg` in `sg`.
    fn regex_records(&mut self, sg: Gc, rg: Gc, all: bool) -> OpResult<Value> {
        let Some((re, global, _)) = self.regex_parts(rg) else {
            return guest("not a regular expression");
        };
        if all && !global {
            return guest("replaceAll must be called with a global RegExp");
        }
        let s = self.units(sg).to_vec();
        let hay = self.haystack(&s)?;
        let mut out = Vec::new();
        let (chunk, mut from) = if global {
            self.set_last_index(rg, 0);
            (scan_chunk(&re, true), Some(Resume::at(0)))
        } else {
            (1, Some(Resume::at(0)))
        };
        while let Some(at) = from {
            let (f, next) =
                self.search(&re, |re, c, m| scan(re, c, hay.bytes(), at, chunk, true, m))?;
            from = if global { next } else { None };
            for i in 0..f.whole.len() {
                let (w, g) = f.get(i);
                let m = hay.m(w, g);
                let rec = self.replace_record(&s, &m, Value::Str(sg), &re.names, &mut out)?;
                out.push(rec);
            }
        }
        self.charge_elems(out.len())?;
        self.reserve_arr(out.len(), &out)?;
        Ok(self.commit_arr(out))
    }

    /// One match's argument list: `[whole, ...groups, index, input]`, and the named groups
    /// object last when the pattern names any (`held`: values only the caller holds).
    fn replace_record(
        &mut self,
        s: &[u16],
        m: &M,
        input: Value,
        names: &[Option<String>],
        held: &mut Vec<Value>,
    ) -> OpResult<Value> {
        let mark = held.len();
        let r = self.replace_record_in(s, m, input, names, held);
        held.truncate(mark);
        r
    }

    fn replace_record_in(
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
        let mut extra = vec![Value::Num(m.start as f64), input];
        if let Some(g) = self.groups_object(ag, names, held)? {
            extra.push(g);
        }
        self.charge_elems(extra.len())?;
        self.arr_extend(ag, &extra, held)?;
        Ok(arr)
    }

    /// The argument lists `[match, offset, input]` of the occurrences of `pat` in `sg`.
    fn text_records(&mut self, sg: Gc, pat: Vec<u16>, all: bool) -> OpResult<Value> {
        let len = self.units(sg).len();
        self.charge_work(len, factor::SEARCH)?;
        let n = pat.len();
        // where each occurrence starts: counted first, listed once the lists are admitted
        let mut k = 0usize;
        occurrences(self.units(sg), &pat, all, |_| k += 1);
        if k == 0 {
            self.reserve_arr(0, &[])?;
            return Ok(self.commit_arr(Vec::new()));
        }
        // one string for the match (every occurrence is the same text), an array per match
        // and the list, admitted together before any is made
        self.charge_units(n)?;
        self.charge_elems(k.saturating_mul(4))?;
        let bytes = str_bytes(n)
            .saturating_add(k.saturating_mul(crate::heap::arr_bytes(3)))
            .saturating_add(crate::heap::arr_bytes(k));
        let real = memory::str_real(n)
            .saturating_add(k.saturating_mul(memory::arr_real(3)))
            .saturating_add(memory::arr_real(k))
            .saturating_add(self.heap.cells_growth(k + 2));
        self.reserve_real(bytes, real, &[Value::Str(sg)])?;
        let mut at = Vec::with_capacity(k);
        occurrences(self.units(sg), &pat, all, |p| at.push(p));
        let whole = self.commit_str(pat);
        let out: Vec<Value> = at
            .into_iter()
            .map(|p| self.commit_arr(vec![whole, Value::Num(p as f64), Value::Str(sg)]))
            .collect();
        Ok(self.commit_arr(out))
    }

    /// `%replaceJoin(s, matches, results)`: `s` with each match replaced by its result as a
    /// string (a result's `$` patterns are not expanded).
    pub(crate) fn replace_join(&mut self, args: &[Value]) -> OpResult<Value> {
        let arg = |i: usize| args.get(i).copied().unwrap_or(Value::Undefined);
        let (Value::Str(sg), Value::Arr(mg), Value::Arr(rg)) = (arg(0), arg(1), arg(2)) else {
            return Ok(arg(0));
        };
        let recs = self.arr_items(mg).to_vec();
        let results = self.arr_items(rg).to_vec();
        if recs.is_empty() {
            return Ok(Value::Str(sg));
        }
        let len = self.units(sg).len();
        // pass 1: each match's place, each result's text, the output's length
        let mut places = Vec::with_capacity(recs.len());
        let mut texts: Vec<Option<Vec<u16>>> = Vec::with_capacity(recs.len());
        let mut total = 0usize;
        let mut last = 0usize;
        for (i, rec) in recs.iter().enumerate() {
            let (start, end) = self.record_place(*rec, last, len);
            let r = results.get(i).copied().unwrap_or(Value::Undefined);
            let (n, text) = match r {
                Value::Str(g) => (self.units(g).len(), None),
                v => {
                    let u = self.to_units(v, "replace")?;
                    (u.len(), Some(u))
                }
            };
            total = total.saturating_add(start - last).saturating_add(n);
            places.push((start, end));
            texts.push(text);
            last = end;
        }
        total = total.saturating_add(len - last);
        self.charge_units(total)?;
        self.reserve(str_bytes(total), &[])?;
        // pass 2: build
        let mut out = Vec::with_capacity(total);
        let s = self.units(sg);
        let mut last = 0usize;
        for (i, (start, end)) in places.into_iter().enumerate() {
            out.extend_from_slice(&s[last..start]);
            match (&texts[i], results.get(i)) {
                (Some(u), _) => out.extend_from_slice(u),
                (None, Some(Value::Str(g))) => out.extend_from_slice(self.units(*g)),
                _ => {}
            }
            last = end;
        }
        out.extend_from_slice(&s[last..]);
        Ok(self.commit_str(out))
    }

    /// Where the match of argument list `rec` lies in a string of `len` units, no earlier than
    /// `from`: its offset is before the input (the last item, or the one before the groups).
    fn record_place(&self, rec: Value, from: usize, len: usize) -> (usize, usize) {
        let Value::Arr(g) = rec else {
            return (from, from);
        };
        let items = self.arr_items(g);
        let n = items.len();
        let at = match items.last() {
            Some(Value::Str(_)) => n.checked_sub(2),
            _ => n.checked_sub(3),
        };
        let start = match at.and_then(|k| items.get(k)) {
            Some(Value::Num(x)) if *x >= 0.0 => (*x as usize).clamp(from, len),
            _ => from,
        };
        let mlen = match items.first() {
            Some(Value::Str(m)) => self.units(*m).len(),
            _ => 0,
        };
        (start, start.saturating_add(mlen).min(len))
    }
}

/// Calls `each` with where each occurrence of `pat` in `s` starts (the first only, unless
/// `all`); an empty pattern occurs at every position, the end included.
fn occurrences(s: &[u16], pat: &[u16], all: bool, mut each: impl FnMut(usize)) {
    let (len, n) = (s.len(), pat.len());
    let mut pos = find(s, pat, 0);
    while let Some(p) = pos {
        each(p);
        if !all || p + n.max(1) > len {
            break;
        }
        pos = find(s, pat, p + n.max(1));
    }
}
