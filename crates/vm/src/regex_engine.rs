//! The regex engine under `regexp.rs`: regex-automata's lazy DFAs driven by our own search
//! loop, so that every step is paid for before (or, for one state build, right after) it is
//! taken and a long search stops at the run's deadline or cancellation; capture groups come
//! from a PikeVM run over the match alone, paid for by its worst case before it starts.
//!
//! Prices (docs/costs.md, "Regular expressions"), in micro-fuel (1/1000 of a milli-fuel):
//! every haystack byte a DFA reads; every transition out of a match state (the slow path);
//! every DFA state built, in proportion to the size of the program it is built from (a build
//! walks the NFA); a PikeVM run, per NFA state per byte of the match. The lazy DFA never gives
//! up: a pattern that makes it build a state per byte pays a state per byte.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::nfa::thompson::{self, pikevm, WhichCaptures, NFA};
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input, MatchKind};

use crate::error::RunError;
use crate::interrupt::{Clock, Interrupt};

/// Largest compiled program (bytes of one NFA) a pattern may produce.
pub(crate) const MAX_PROGRAM_BYTES: usize = 1 << 20;
/// Lazy-DFA cache per automaton (each regex has two), or the least the program needs if more.
const DFA_CACHE_BYTES: usize = 1 << 20;
/// Nesting depth accepted by the pattern parser.
const NEST_LIMIT: u32 = 200;
/// Bytes read between two checks of the deadline and cancellation (and between charges).
const CHUNK: usize = 1 << 16;
/// Work (bytes read, plus program bytes walked by state builds) between two interrupt checks.
const CHECK_WORK: u64 = 1 << 22;
/// Most PikeVM work (NFA states × bytes of the match) one capture extraction may do: it
/// cannot stop midway, so this bounds how long it can hold the run past its deadline.
pub(crate) const MAX_CAPTURE_WORK: u64 = 1 << 26;

/// Micro-fuel per haystack byte read by a lazy DFA.
pub(crate) const MICRO_PER_BYTE: u64 = 16_000;
/// Micro-fuel per transition out of a tagged (match) state, besides its byte.
const MICRO_PER_TAGGED: u64 = 8_000;
/// Micro-fuel per DFA state built, per 16 bytes of the program it walks (at least one).
const MICRO_PER_BUILD_16B: u64 = 16_000;
/// Micro-fuel per PikeVM step (one NFA state, one byte of the match).
const MICRO_PER_PIKE_STEP: u64 = 6_000;
/// Micro-fuel per byte of compiled program, charged after a compile; the rate grows by itself
/// every [`PROGRAM_BYTES_PER_STEP`] bytes (large programs compile slower per byte).
const MICRO_PER_PROGRAM_BYTE: u64 = 1_500;
/// See [`MICRO_PER_PROGRAM_BYTE`].
const PROGRAM_BYTES_PER_STEP: u64 = 1 << 15;
/// Micro-fuel per UTF-16 unit turned into the UTF-8 haystack the automata read (ASCII).
pub(crate) const MICRO_PER_HAY_UNIT: u64 = 6_000;
/// [`MICRO_PER_HAY_UNIT`] for text beyond ASCII (decoded, and mapped back to UTF-16 offsets).
pub(crate) const MICRO_PER_HAY_UNIT_MAPPED: u64 = 20_000;

/// What compiling a program of `bytes` bytes costs, in micro-fuel.
pub(crate) fn compile_micro(bytes: usize) -> u64 {
    let b = bytes as u64;
    b.saturating_mul(MICRO_PER_PROGRAM_BYTE)
        .saturating_mul(1 + b / PROGRAM_BYTES_PER_STEP)
}

/// Compiled regexes one run keeps, and the bytes they and their lazy-DFA caches may hold:
/// past either bound the cache is emptied (searches still run, rebuilding their states).
pub(crate) const MAX_CACHED_REGEXES: usize = 256;
/// See [`MAX_CACHED_REGEXES`].
pub(crate) const MAX_REGEX_CACHE_BYTES: usize = 8 << 20;

/// Why a search stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// Out of fuel, or the deadline or cancellation (run-ending).
    Run(RunError),
    /// A guest-visible refusal (a capture extraction over its work limit, an engine error).
    Guest(String),
}

/// Fuel and interruption for one native call: fuel is kept in micro-fuel here and written
/// back to the VM by the caller.
pub(crate) struct Meter<'a> {
    /// micro-fuel left
    left: u64,
    clock: Clock<'a>,
    /// work since the last interrupt check
    work: u64,
}

impl<'a> Meter<'a> {
    pub(crate) fn new(milli_left: u64, interrupt: &'a Interrupt) -> Meter<'a> {
        Meter {
            left: milli_left.saturating_mul(1000),
            clock: interrupt.clock(),
            work: 0,
        }
    }

    /// Milli-fuel left (a partly spent milli-fuel counts as spent).
    pub(crate) fn milli_left(&self) -> u64 {
        self.left / 1000
    }

    /// Pays `micro`, then counts `work` toward the next interrupt check.
    #[inline]
    pub(crate) fn pay(&mut self, micro: u64, work: u64) -> Result<(), Stop> {
        if micro > self.left {
            self.left = 0;
            return Err(Stop::Run(RunError::out_of_fuel()));
        }
        self.left -= micro;
        self.work += work;
        if self.work >= CHECK_WORK {
            self.work = 0;
            self.clock.check().map_err(Stop::Run)?;
        }
        Ok(())
    }

    /// Pays for reading up to `want` bytes (at least one), as many as the fuel left allows,
    /// and checks the deadline and cancellation: returns how many were paid for.
    fn grant(&mut self, want: usize) -> Result<usize, Stop> {
        let n = (want as u64).min(self.left / MICRO_PER_BYTE) as usize;
        if n == 0 {
            self.left = 0;
            return Err(Stop::Run(RunError::out_of_fuel()));
        }
        self.left -= n as u64 * MICRO_PER_BYTE;
        self.check()?;
        Ok(n)
    }

    /// Gives back what [`Meter::grant`] took for `n` bytes not read.
    fn refund(&mut self, n: usize) {
        self.left += n as u64 * MICRO_PER_BYTE;
    }

    /// Checks the deadline and cancellation now.
    fn check(&mut self) -> Result<(), Stop> {
        self.work = 0;
        self.clock.check().map_err(Stop::Run)
    }
}

/// One compiled pattern: the forward and reverse lazy DFAs and the PikeVM for groups.
pub struct Compiled {
    /// The translated pattern (the cache key).
    pub(crate) key: String,
    fwd: DFA,
    rev: DFA,
    pike: pikevm::PikeVM,
    /// NFA states of the forward program (the PikeVM's work per byte)
    states: u64,
    /// micro-fuel per state build in each direction
    build_fwd: u64,
    build_rev: u64,
    /// capture group names, group 1 first
    pub(crate) names: Vec<Option<String>>,
    /// the pattern can match the empty string on a UTF-8 haystack (such matches must not
    /// split a character)
    utf8_empty: bool,
    /// bytes this holds (programs and automata), for the heap's accounting
    pub(crate) bytes: usize,
    /// bytes one set of lazy-DFA caches may grow to
    cache_bytes: usize,
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiled")
            .field("key", &self.key)
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// The mutable search state of one [`Compiled`] (lazy-DFA caches, PikeVM scratch).
pub(crate) struct Caches {
    fwd: DfaCache,
    rev: DfaCache,
    pike: pikevm::Cache,
    caps: Captures,
}

impl Caches {
    /// Forgets every state built (each search starts cold, so its fuel does not depend on
    /// earlier searches), keeping the allocations.
    pub(crate) fn reset(&mut self, re: &Compiled) {
        self.fwd.reset(&re.fwd);
        self.rev.reset(&re.rev);
    }

    fn memory(&self) -> usize {
        self.fwd.memory_usage() + self.rev.memory_usage() + self.pike.memory_usage()
    }
}

fn build_error(e: &regex_automata::nfa::thompson::BuildError) -> String {
    if e.size_limit().is_some() {
        return format!(
            "Regex pattern is too large once compiled (over {MAX_PROGRAM_BYTES} bytes); use a shorter pattern or smaller counted repetitions"
        );
    }
    format!("Invalid regular expression: {e}")
}

fn dfa_error(e: &regex_automata::hybrid::BuildError) -> String {
    format!("Invalid regular expression: {e}")
}

/// Compiles a translated pattern.
///
/// # Errors
/// The guest-visible message for a syntax error or a program over [`MAX_PROGRAM_BYTES`].
pub(crate) fn compile(pattern: &str) -> Result<Compiled, String> {
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(pattern)
        .map_err(|e| format!("Invalid regular expression: {e}"))?;
    let nfa_config = || thompson::Config::new().nfa_size_limit(Some(MAX_PROGRAM_BYTES));
    let fwd_nfa = thompson::Compiler::new()
        .configure(nfa_config())
        .build_from_hir(&hir)
        .map_err(|e| build_error(&e))?;
    let rev_nfa = thompson::Compiler::new()
        .configure(
            nfa_config()
                .reverse(true)
                .which_captures(WhichCaptures::None),
        )
        .build_from_hir(&hir)
        .map_err(|e| build_error(&e))?;
    let dfa_config = |nfa: &NFA, kind: MatchKind| -> Result<_, String> {
        let base = DFA::config()
            .match_kind(kind)
            .specialize_start_states(false)
            .minimum_cache_clear_count(None);
        let least = base
            .get_minimum_cache_capacity(nfa)
            .map_err(|e| dfa_error(&e))?;
        Ok(base.cache_capacity(DFA_CACHE_BYTES.max(least)))
    };
    let fwd = DFA::builder()
        .configure(dfa_config(&fwd_nfa, MatchKind::LeftmostFirst)?)
        .build_from_nfa(fwd_nfa.clone())
        .map_err(|e| dfa_error(&e))?;
    let rev = DFA::builder()
        .configure(dfa_config(&rev_nfa, MatchKind::All)?)
        .build_from_nfa(rev_nfa.clone())
        .map_err(|e| dfa_error(&e))?;
    let pike = pikevm::PikeVM::builder()
        .build_from_nfa(fwd_nfa.clone())
        .map_err(|e| build_error(&e))?;
    let names = fwd_nfa
        .group_info()
        .pattern_names(regex_automata::PatternID::ZERO)
        .skip(1)
        .map(|n| n.and_then(ajs_bytecode::natives::jsregex::js_group_name))
        .collect();
    let build = |nfa: &NFA| MICRO_PER_BUILD_16B * (1 + nfa.memory_usage() as u64 / 16);
    let cache_bytes = fwd.get_config().get_cache_capacity()
        + rev.get_config().get_cache_capacity()
        + fwd_nfa.memory_usage();
    Ok(Compiled {
        key: pattern.to_string(),
        states: fwd_nfa.states().len() as u64,
        build_fwd: build(&fwd_nfa),
        build_rev: build(&rev_nfa),
        names,
        utf8_empty: fwd_nfa.has_empty() && fwd_nfa.is_utf8(),
        bytes: std::mem::size_of::<Compiled>()
            + pattern.len()
            + fwd_nfa.memory_usage()
            + rev_nfa.memory_usage()
            + fwd.memory_usage()
            + rev.memory_usage(),
        cache_bytes,
        fwd,
        rev,
        pike,
    })
}

fn gave_up() -> Stop {
    // the DFAs are built never to give up and with no quit bytes
    Stop::Guest("the regex engine stopped unexpectedly".into())
}

/// Whether byte offset `i` of `hay` starts a character (or is its end).
fn char_boundary(hay: &[u8], i: usize) -> bool {
    hay.get(i).is_none_or(|&b| (b as i8) >= -0x40)
}

impl Compiled {
    /// Fresh search state for this pattern.
    pub(crate) fn caches(&self) -> Caches {
        Caches {
            fwd: self.fwd.create_cache(),
            rev: self.rev.create_cache(),
            pike: self.pike.create_cache(),
            caps: self.pike.create_captures(),
        }
    }

    /// Capture groups besides the whole match.
    pub(crate) fn groups(&self) -> usize {
        self.names.len()
    }

    /// One transition, paying for a state build when it makes one.
    #[inline(never)]
    fn step(
        dfa: &DFA,
        cache: &mut DfaCache,
        sid: LazyStateID,
        b: u8,
        build: u64,
        m: &mut Meter,
    ) -> Result<LazyStateID, Stop> {
        if !sid.is_tagged() {
            let next = dfa.next_state_untagged(cache, sid, b);
            if !next.is_unknown() {
                return Ok(next);
            }
            m.pay(build, build / 1000)?;
            return dfa.next_state(cache, sid, b).map_err(|_| gave_up());
        }
        m.pay(MICRO_PER_TAGGED, 1)?;
        let before = (cache.memory_usage(), cache.clear_count());
        let next = dfa.next_state(cache, sid, b).map_err(|_| gave_up())?;
        if (cache.memory_usage(), cache.clear_count()) != before {
            m.pay(build, build / 1000)?;
        }
        Ok(next)
    }

    /// The end of the leftmost-first match starting at or after `start` (`earliest`: the
    /// end of the first match state reached, enough for a yes/no answer).
    fn find_end(
        &self,
        c: &mut Caches,
        hay: &[u8],
        start: usize,
        earliest: bool,
        m: &mut Meter,
    ) -> Result<Option<usize>, Stop> {
        let input = Input::new(hay).range(start..).anchored(Anchored::No);
        m.pay(self.build_fwd, self.build_fwd / 1000)?;
        let mut sid = self
            .fwd
            .start_state_forward(&mut c.fwd, &input)
            .map_err(|_| gave_up())?;
        let mut mat = None;
        let mut at = start;
        while at < hay.len() {
            let end = at + m.grant((hay.len() - at).min(CHUNK))?;
            while at < end {
                if !sid.is_tagged() {
                    let next = self.fwd.next_state_untagged(&c.fwd, sid, hay[at]);
                    if !next.is_tagged() {
                        sid = next;
                        at += 1;
                        continue;
                    }
                }
                sid = Self::step(&self.fwd, &mut c.fwd, sid, hay[at], self.build_fwd, m)?;
                if sid.is_tagged() {
                    if sid.is_match() {
                        mat = Some(at);
                        if earliest {
                            m.refund(end - at - 1);
                            return Ok(mat);
                        }
                    } else if sid.is_dead() {
                        m.refund(end - at - 1);
                        return Ok(mat);
                    } else if sid.is_quit() {
                        return Err(gave_up());
                    }
                }
                at += 1;
            }
        }
        m.pay(self.build_fwd, self.build_fwd / 1000)?;
        sid = self
            .fwd
            .next_eoi_state(&mut c.fwd, sid)
            .map_err(|_| gave_up())?;
        if sid.is_match() {
            mat = Some(hay.len());
        }
        Ok(mat)
    }

    /// The start of the match `[?, end)` found by a forward search from `start`.
    fn find_start(
        &self,
        c: &mut Caches,
        hay: &[u8],
        start: usize,
        end: usize,
        m: &mut Meter,
    ) -> Result<usize, Stop> {
        let input = Input::new(hay).range(start..end).anchored(Anchored::Yes);
        m.pay(self.build_rev, self.build_rev / 1000)?;
        let mut sid = self
            .rev
            .start_state_reverse(&mut c.rev, &input)
            .map_err(|_| gave_up())?;
        let mut mat = None;
        let mut at = end;
        while at > start {
            let lo = at - m.grant((at - start).min(CHUNK))?;
            while at > lo {
                at -= 1;
                if !sid.is_tagged() {
                    let next = self.rev.next_state_untagged(&c.rev, sid, hay[at]);
                    if !next.is_tagged() {
                        sid = next;
                        continue;
                    }
                }
                sid = Self::step(&self.rev, &mut c.rev, sid, hay[at], self.build_rev, m)?;
                if sid.is_tagged() {
                    if sid.is_match() {
                        mat = Some(at + 1);
                    } else if sid.is_dead() {
                        m.refund(at - lo);
                        return mat.ok_or_else(gave_up);
                    } else if sid.is_quit() {
                        return Err(gave_up());
                    }
                }
            }
        }
        if start > 0 {
            sid = Self::step(
                &self.rev,
                &mut c.rev,
                sid,
                hay[start - 1],
                self.build_rev,
                m,
            )?;
        } else {
            m.pay(self.build_rev, self.build_rev / 1000)?;
            sid = self
                .rev
                .next_eoi_state(&mut c.rev, sid)
                .map_err(|_| gave_up())?;
        }
        if sid.is_match() {
            mat = Some(start);
        }
        mat.ok_or_else(gave_up)
    }

    /// Whether the pattern matches at or after byte `start`.
    pub(crate) fn is_match(
        &self,
        c: &mut Caches,
        hay: &[u8],
        start: usize,
        m: &mut Meter,
    ) -> Result<bool, Stop> {
        if self.utf8_empty {
            return Ok(self.find(c, hay, start, m)?.is_some());
        }
        Ok(self.find_end(c, hay, start, true, m)?.is_some())
    }

    /// The leftmost-first match at or after byte `start`, as byte offsets (an empty match never
    /// splits a character).
    pub(crate) fn find(
        &self,
        c: &mut Caches,
        hay: &[u8],
        start: usize,
        m: &mut Meter,
    ) -> Result<Option<(usize, usize)>, Stop> {
        let mut from = start;
        while from <= hay.len() {
            let Some(end) = self.find_end(c, hay, from, false, m)? else {
                return Ok(None);
            };
            let s = if end == from {
                end
            } else {
                self.find_start(c, hay, from, end, m)?
            };
            if s == end && self.utf8_empty && !char_boundary(hay, end) {
                // no match starts before `end`, and none that starts inside a character
                from = end + 1;
                continue;
            }
            return Ok(Some((s, end)));
        }
        Ok(None)
    }

    /// The capture groups (1 and up) of the match `[s, e)`, paid for by the PikeVM's bound.
    pub(crate) fn captures(
        &self,
        c: &mut Caches,
        hay: &[u8],
        s: usize,
        e: usize,
        m: &mut Meter,
    ) -> Result<Vec<Option<(usize, usize)>>, Stop> {
        let work = self.states.saturating_mul(e as u64 - s as u64 + 1);
        if work > MAX_CAPTURE_WORK {
            return Err(Stop::Guest(format!(
                "Regex capture groups over a match of {} bytes with this pattern ({} states) exceed the {MAX_CAPTURE_WORK}-step limit of one call; match a shorter span, or use a pattern without groups",
                e - s,
                self.states
            )));
        }
        m.pay(work.saturating_mul(MICRO_PER_PIKE_STEP), 0)?;
        m.check()?;
        let input = Input::new(hay).range(s..e).anchored(Anchored::Yes);
        self.pike.search(&mut c.pike, &input, &mut c.caps);
        Ok((1..=self.groups())
            .map(|i| c.caps.get_group(i).map(|sp| (sp.start, sp.end)))
            .collect())
    }
}

/// The compiled regexes of one run, with their lazy-DFA caches, bounded in count and bytes.
#[derive(Default)]
pub(crate) struct RegexCache {
    map: HashMap<String, Slot>,
    bytes: usize,
}

struct Slot {
    compiled: Arc<Compiled>,
    caches: Option<Box<Caches>>,
    /// bytes counted for this slot
    bytes: usize,
}

impl fmt::Debug for RegexCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegexCache")
            .field("len", &self.map.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl RegexCache {
    /// Empties the cache.
    pub(crate) fn clear(&mut self) {
        if !self.map.is_empty() {
            self.map = HashMap::new();
        }
        self.bytes = 0;
    }

    /// Bytes the cache holds (compiled programs and the lazy-DFA caches kept with them), for a
    /// count of the run's real memory; at most [`MAX_REGEX_CACHE_BYTES`].
    #[allow(dead_code)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The compiled form of `key`, if kept.
    pub(crate) fn get(&self, key: &str) -> Option<Arc<Compiled>> {
        self.map.get(key).map(|s| s.compiled.clone())
    }

    /// Keeps `compiled`, emptying the cache first when it is full.
    pub(crate) fn insert(&mut self, compiled: Arc<Compiled>) {
        let bytes = compiled.bytes + compiled.key.len();
        if self.map.len() >= MAX_CACHED_REGEXES
            || self.bytes + bytes + compiled.cache_bytes > MAX_REGEX_CACHE_BYTES
        {
            self.clear();
        }
        if bytes + compiled.cache_bytes > MAX_REGEX_CACHE_BYTES {
            return;
        }
        self.bytes += bytes;
        self.map.insert(
            compiled.key.clone(),
            Slot {
                compiled,
                caches: None,
                bytes,
            },
        );
    }

    /// Search state for `compiled` with no state built (the kept allocations, or fresh ones):
    /// every search starts cold, so its fuel depends only on the pattern and the haystack,
    /// never on earlier searches (a restored or replayed run spends the same).
    pub(crate) fn take(&mut self, compiled: &Arc<Compiled>) -> Box<Caches> {
        match self.map.get_mut(&compiled.key) {
            Some(s) if Arc::ptr_eq(&s.compiled, compiled) => match s.caches.take() {
                Some(mut c) => {
                    c.reset(compiled);
                    c
                }
                None => Box::new(compiled.caches()),
            },
            _ => Box::new(compiled.caches()),
        }
    }

    /// Returns search state taken by [`RegexCache::take`], kept while the cache has room.
    pub(crate) fn put(&mut self, compiled: &Arc<Compiled>, caches: Box<Caches>) {
        let Some(s) = self.map.get_mut(&compiled.key) else {
            return;
        };
        if !Arc::ptr_eq(&s.compiled, compiled) || s.caches.is_some() {
            return;
        }
        let bytes = compiled.bytes + compiled.key.len() + caches.memory();
        let total = self.bytes - s.bytes + bytes;
        if total > MAX_REGEX_CACHE_BYTES {
            return;
        }
        self.bytes = total;
        s.bytes = bytes;
        s.caches = Some(caches);
    }
}

/// The run-ending or guest error for a stopped search.
pub(crate) fn stop_error(s: Stop) -> crate::error::Fault {
    match s {
        Stop::Run(e) => crate::error::Fault::Fatal(e),
        Stop::Guest(m) => crate::error::Fault::Guest(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn run(re: &Compiled, hay: &[u8], caps: bool) -> (f64, u64, bool) {
        let i = Interrupt::default();
        let mut c = re.caches();
        let mut m = Meter::new(u64::MAX / 2000, &i);
        let before = m.left;
        let t = Instant::now();
        let r = if caps {
            let r = re.find(&mut c, hay, 0, &mut m).unwrap();
            if let Some((a, b)) = r {
                re.captures(&mut c, hay, a, b, &mut m).unwrap();
            }
            r.is_some()
        } else {
            re.is_match(&mut c, hay, 0, &mut m).unwrap()
        };
        (t.elapsed().as_nanos() as f64, before - m.left, r)
    }

    /// Prints ns per micro-fuel of each engine path (for docs/costs.md; `--ignored`).
    #[test]
    #[ignore]
    fn calibrate() {
        let ab = "ab".repeat(2_000_000);
        let shapes: &[(&str, &str, bool)] = &[
            ("scan", r"b\d", false),
            ("alt", r"(a|b)*c", false),
            ("class", r"[a-q][^u-z]{13}x", false),
            ("hostile", r"(\w{0,60}\s?){1,30}[^\w\s]", false),
            (
                "hostile-small",
                r"([a-z0-9_]{0,20}\s?){1,10}[^a-z\s]",
                false,
            ),
            ("unicode", r"\p{L}{20}x", false),
            ("tail", r"a.*", false),
            ("pike", r"(a|b)(a|b)*", true),
            ("pike-big", r"((a|b){1,30}(a|b|c){0,30})+", true),
        ];
        for &(name, p, caps) in shapes {
            let p = ajs_bytecode::natives::jsregex::translate(p, "u")
                .unwrap()
                .rust;
            let re = compile(&p).unwrap();
            let t = Instant::now();
            for _ in 0..10 {
                compile(&p).unwrap();
            }
            let ct = t.elapsed().as_nanos() as f64 / 10.0;
            let cfuel = compile_micro(re.bytes);
            let hay = if name.starts_with("pike") {
                &ab.as_bytes()[..200_000]
            } else {
                ab.as_bytes()
            };
            let (ns, micro, _) = run(&re, hay, caps);
            let (ns2, micro2, _) = run(&re, hay, caps);
            eprintln!(
                "{name:14} compile {:>9.0} ns {:>8} B {:.5} ns/micro | search {:>11.0} ns {:>13} micro {:.5} ns/micro | again {:.5}",
                ct, re.bytes, ct / cfuel as f64, ns, micro, ns / micro as f64, ns2 / micro2 as f64
            );
        }
        for (p, h) in [
            (r"\d+", "abc123"),
            (r"^[a-z]+@[a-z]+\.com$", "someone@example.com"),
            (r"(\w+)\s(\w+)", "hello world"),
        ] {
            let p = ajs_bytecode::natives::jsregex::translate(p, "")
                .unwrap()
                .rust;
            let re = compile(&p).unwrap();
            let i = Interrupt::default();
            let mut c = re.caches();
            let mut m = Meter::new(u64::MAX / 2000, &i);
            let before = m.left;
            let t = Instant::now();
            for _ in 0..10_000 {
                c.reset(&re);
                re.find(&mut c, h.as_bytes(), 0, &mut m).unwrap();
            }
            let ns = t.elapsed().as_nanos() as f64 / 10_000.0;
            let micro = (before - m.left) / 10_000;
            eprintln!(
                "short {p:30} {ns:8.0} ns/call {micro:10} micro/call {:.5} ns/micro nfa {}",
                ns / micro as f64,
                re.build_fwd
            );
        }
        let units: Vec<u16> = ab.encode_utf16().collect();
        let t = Instant::now();
        let s = crate::regexp::utf8(&units);
        let ns = t.elapsed().as_nanos() as f64;
        eprintln!("hay {:.3} ns/unit ({})", ns / units.len() as f64, s.len());
    }
}
