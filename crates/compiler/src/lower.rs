//! Lowering of the oxc AST to register bytecode.
//!
//! Registers are numbered virtually while compiling: temporaries and locals grow from 0 like a
//! stack; *specials* (externals, and constants kept in registers loaded once at entry) are numbered
//! down from `u16::MAX`. [`Lowerer::finish`] lays the frame out as `[params][constants][locals and
//! temporaries]`, prepends the constant prologue, remaps every register and jump target, and inserts
//! the fuel charges.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};

use ajs_bytecode::isa::{
    Atom, Base, Const, Count, Dst, Imm, Int, Key, Native, Operand, Src, Target, Visitor,
};
use ajs_bytecode::natives::{NativeId, MATH_CONSTANTS, NUMBER_CONSTANTS};
use ajs_bytecode::program::{
    widen, CompactString, Constant, DebugInfo, Function, SourcePos, StrUnits, MAX_CONSTANTS,
};
use ajs_bytecode::{Op, Program};
use oxc_ast::ast::*;
use oxc_span::{GetSpan, Span};
use smallvec::SmallVec;

use crate::pos::LineIndex;
use crate::{CompileOptions, Fail, Mode, MAX_NESTING};

mod agent;
mod callbacks;
mod destructure;
mod parallel;
mod spread;

pub(crate) use agent::lower_agent;

use callbacks::CallbackCtx;

/// A lowering's result. (Its error boxed: a result is then at most two registers wide and
/// returned in them, not through memory, which every call and `?` of the lowering pays for:
/// ~12 k instructions per compile of the 8 KB agent, ~90 per tiny one. An error, rare, pays
/// an allocation.)
type R<T> = Result<T, Box<Fail>>;

/// An error at `span`. (Cold, as [`fail_at`]: the error paths are laid out of the way,
/// ~1 k instructions per compile of the 8 KB agent.)
#[cold]
fn fail<T>(span: Span, msg: impl Into<String>) -> R<T> {
    fail_at(span.start, msg)
}

/// [`fail`] at source offset `offset`.
#[cold]
fn fail_at<T>(offset: u32, msg: impl Into<String>) -> R<T> {
    Err(Box::new(Fail::new(offset, msg)))
}

const FORBIDDEN: [&str; 3] = ["constructor", "__proto__", "prototype"];

fn forbidden(name: &str) -> bool {
    FORBIDDEN.contains(&name)
}

fn forbidden_msg(name: &str) -> String {
    format!("Security Error: Access to '{name}' is forbidden")
}

/// Shortest name of [`is_builtin_name`] and [`unsupported_builtin`]: a shorter name (most
/// variable names) is neither, without comparing it with each.
const SHORTEST_BUILTIN: usize = 3;

/// Whether `name` is a builtin name of AJS (builtins win over context keys).
fn is_builtin_name(name: &str) -> bool {
    name.len() >= SHORTEST_BUILTIN
        && (is_namespace_name(name)
            || matches!(
                name,
                "Error"
                    | "parseInt"
                    | "parseFloat"
                    | "isNaN"
                    | "isFinite"
                    | "encodeURI"
                    | "decodeURI"
                    | "encodeURIComponent"
                    | "decodeURIComponent"
                    | "filter"
                    | "undefined"
                    | "NaN"
                    | "Infinity"
            ))
}

/// Whether `name` is the name of a namespace of builtins (`Math`, `JSON`, `console`, …).
fn is_namespace_name(name: &str) -> bool {
    may_be_namespace_name(name)
        && matches!(
            name,
            "Math"
                | "console"
                | "JSON"
                | "Array"
                | "Object"
                | "String"
                | "Number"
                | "Boolean"
                | "Schema"
                | "Date"
                | "Set"
        )
}

/// Whether `name` may be one of [`is_namespace_name`]: each is capitalized but `console` (a
/// lower-case name is looked at no further).
#[inline(always)]
fn may_be_namespace_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase()) || name == "console"
}

/// Names that do not exist in AJS, with what to use instead (reference §3.4).
fn unsupported_builtin(name: &str) -> Option<String> {
    if name.len() < SHORTEST_BUILTIN {
        return None;
    }
    Some(match name {
        "RegExp" => "RegExp is not available. Use string methods or the regexMatch atom.".into(),
        "Promise" => "Promise is not needed. All operations are implicitly async. To make several atom calls at once, use parallel([...]).".into(),
        "Map" => "Map is not available. Use plain objects instead.".into(),
        "WeakSet" | "WeakMap" | "Symbol" | "Proxy" | "Reflect" => {
            format!("{name} is not available.")
        }
        "Function" => "Function constructor is not available. Define functions normally.".into(),
        "eval" => "eval is not available. Code is compiled, not evaluated.".into(),
        "setTimeout" => "setTimeout is not available. Use the delay atom.".into(),
        "setInterval" => "setInterval is not available. Use while loops with delay.".into(),
        "fetch" => "fetch is not available. Use the httpFetch atom.".into(),
        "require" | "import" => {
            format!("{name} is not available. Atoms must be registered with the VM.")
        }
        "process" | "window" | "document" | "global" => {
            format!("{name} is not available. AsyncJS runs in a sandboxed environment.")
        }
        "globalThis" => "globalThis is not available. Use builtins directly.".into(),
        _ => return None,
    })
}

/// The message for a member of a builtin namespace that AJS does not have (reference §3.3): an
/// alternative when there is one, the function hint when it is a function read as a value.
fn namespace_member_msg(ns: &str, m: &str) -> String {
    let alt = match (ns, m) {
        (_, "prototype") | ("Object", "getPrototypeOf") => Some("Prototype access is not allowed."),
        ("Object", "create") => Some("Use object literals instead."),
        ("Object", "defineProperty" | "defineProperties") => {
            Some("Property descriptors are not supported.")
        }
        ("Object", "setPrototypeOf") => Some("Prototype modification is not allowed."),
        _ => None,
    };
    if let Some(alt) = alt {
        return format!("{ns}.{m} is not available. {alt}");
    }
    if native_member(ns, m).is_some() {
        return format!("{ns}.{m} is a function: call it, e.g. {ns}.{m}(x)");
    }
    format!("{ns}.{m} is not supported in AsyncJS. Check docs for available {ns} methods.")
}

/// The native `ns.m` (`ns` a namespace such as `Math`, or empty for a method: `.push`).
/// (Looked up by its two parts: the name is not put together first, ~300 instructions less
/// per lookup, ~10 k per compile of the 8 KB agent.)
fn native_member(ns: &str, m: &str) -> Option<NativeId> {
    debug_assert!(!ns.contains('.'));
    native_by(NativeKey { ns: Some(ns), m })
}

/// [`NativeId::lookup`] through a hash table built once (the first native of each name, as
/// `lookup` finds it): a name is hashed once instead of compared at every step of a search.
/// The table's keys are the fixed native names, never guest text, so a plain multiplicative
/// hash serves (a guest's name is only looked up: see [`native_by`]).
fn native(name: &str) -> Option<NativeId> {
    native_by(NativeKey::of(name))
}

fn native_by(key: NativeKey<'_>) -> Option<NativeId> {
    type Table = Vec<Option<(NativeKey<'static>, NativeId)>>;
    static BY_NAME: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    let table = BY_NAME.get_or_init(|| {
        let mut t: Table = vec![None; NATIVE_SLOTS];
        // (at most a quarter of the slots: a test checks that every native fits)
        for &n in NativeId::all().iter().take(NATIVE_SLOTS / 4) {
            let key = NativeKey::of(n.js_name());
            let mut i = key.slot();
            // (the first native of each name, as `lookup` finds it)
            while let Some(Some((k, _))) = t.get(i) {
                if *k == key {
                    break;
                }
                i = (i + 1) & (NATIVE_SLOTS - 1);
            }
            if let Some(slot @ None) = t.get_mut(i) {
                *slot = Some((key, n));
            }
        }
        t
    });
    // From the key's slot on to the first empty one (the table is fixed, and at most a
    // quarter full: a guest's name can only be looked up, over the few slots the natives' own
    // names share).
    let mut i = key.slot();
    let mut found = None;
    while let Some(Some((k, n))) = table.get(i) {
        if *k == key {
            found = Some(*n);
            break;
        }
        i = (i + 1) & (NATIVE_SLOTS - 1);
    }
    debug_assert_eq!(found, NativeId::lookup(&key.to_string()));
    found
}

/// Slots of [`native_by`]'s table: a power of two, at least four per native.
const NATIVE_SLOTS: usize = 1024;

/// A native's name split at its first dot: `Math.max` is `Math` and `max`, `.push` is `` and
/// `push`, `parseInt` has no namespace.
#[derive(Clone, Copy)]
struct NativeKey<'a> {
    ns: Option<&'a str>,
    m: &'a str,
}

impl<'a> NativeKey<'a> {
    fn of(name: &'a str) -> Self {
        match name.split_once('.') {
            Some((ns, m)) => NativeKey { ns: Some(ns), m },
            None => NativeKey { ns: None, m: name },
        }
    }
}

/// (Compared by [`same_bytes`]: two calls of `memcmp` per native looked up cost ~2 k
/// instructions per compile of the 8 KB agent.)
impl PartialEq for NativeKey<'_> {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        same_bytes(self.m.as_bytes(), other.m.as_bytes())
            && match (self.ns, other.ns) {
                (None, None) => true,
                (Some(a), Some(b)) => same_bytes(a.as_bytes(), b.as_bytes()),
                _ => false,
            }
    }
}

impl Eq for NativeKey<'_> {}

impl NativeKey<'_> {
    /// The key's first slot in [`native_by`]'s table: a multiplicative hash of the words of
    /// [`hash_words`] of both parts and their lengths (a missing namespace as one no name has).
    /// (A `HashMap` of the names, hashed through `Hasher` in three writes, cost ~1.2 k
    /// instructions more per compile of the 8 KB agent.)
    #[inline]
    fn slot(&self) -> usize {
        let (m0, m1) = hash_words(self.m.as_bytes());
        let (n0, n1, nlen) = match self.ns {
            Some(ns) => {
                let (n0, n1) = hash_words(ns.as_bytes());
                (n0, n1, ns.len() as u64)
            }
            None => (0, 0, u64::MAX),
        };
        let h = (m0 ^ (self.m.len() as u64).wrapping_mul(MIX_K)).wrapping_mul(MIX_K) ^ m1;
        let h = (h ^ n0).wrapping_mul(MIX_K) ^ n1 ^ nlen;
        (h.wrapping_mul(MIX_K) >> 54) as usize
    }
}

impl std::fmt::Display for NativeKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ns {
            Some(ns) => write!(f, "{ns}.{}", self.m),
            None => f.write_str(self.m),
        }
    }
}

fn new_suggestion(name: Option<&str>) -> String {
    let tail = match name {
        Some("Date") => " Use Date() or Date('2024-01-15') instead - no 'new' needed.".to_string(),
        Some("Set") => " Use Set([items]) instead - no 'new' needed.".into(),
        Some("Map") => " Use plain objects instead of Map.".into(),
        Some("Array") => " Use array literals like [1, 2, 3] instead.".into(),
        Some("Object") => " Use object literals like { key: value } instead.".into(),
        Some("Error") => " Use Error('message') (no 'new') to raise an error.".into(),
        Some("RegExp") => " Use string methods or the regexMatch atom.".into(),
        Some("Promise") => " Not needed - all operations are implicitly async.".into(),
        Some(n @ ("WeakSet" | "WeakMap")) => format!(" {n} is not available."),
        _ => " Use factory functions or object literals instead.".into(),
    };
    format!("The 'new' keyword is not supported in AsyncJS.{tail}")
}

const FOR_MSG: &str = "AJS has no `for` loops. Use `while` with a counter: let i = 0 / while (i < items.length) { ... i = i + 1 }";
const ARROW_MSG: &str =
    "arrow functions are only allowed as callback arguments, e.g. items.filter(x => x > 1)";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Special {
    /// Index into `opts.externals`.
    Ext(usize),
    Const(u16),
    Undef,
    Null,
    True,
    False,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SpecialKey {
    Const(u16),
    Undef,
    Null,
    True,
    False,
}

/// Registers by a small dense index (of an external, or of a special value): a vector rather
/// than a hash map.
#[derive(Default)]
struct Regs(SmallVec<[Option<u16>; 8]>);

impl Regs {
    fn get(&self, i: usize) -> Option<u16> {
        self.0.get(i).copied().flatten()
    }

    fn insert(&mut self, i: usize, reg: u16) {
        // (one more, the usual case, is pushed: cheaper than resizing)
        if self.0.len() == i {
            self.0.push(Some(reg));
            return;
        }
        if self.0.len() < i {
            self.0.resize(i + 1, None);
        }
        if let Some(slot) = self.0.get_mut(i) {
            *slot = Some(reg);
        }
    }
}

impl SpecialKey {
    /// The index of this key in [`Lowerer::special_regs`].
    fn index(self) -> usize {
        match self {
            SpecialKey::Undef => 0,
            SpecialKey::Null => 1,
            SpecialKey::True => 2,
            SpecialKey::False => 3,
            SpecialKey::Const(k) => 4 + k as usize,
        }
    }
}

/// A variable name of [`Names`]: where its text is, and its [`name_key`].
#[derive(Clone, Copy)]
struct Name {
    at: u32,
    len: u32,
    key: u64,
}

/// A name looked up among [`Names`]: its text and its [`name_key`], computed once for all the
/// names it is compared with.
#[derive(Clone, Copy)]
struct Probe<'n> {
    name: &'n str,
    key: u64,
}

impl<'n> Probe<'n> {
    #[inline(always)]
    fn new(name: &'n str) -> Probe<'n> {
        Probe {
            name,
            key: name_key(name.as_bytes()),
        }
    }
}

/// A word of the bytes of a name that, with its length, is the whole name when it has up to
/// eight bytes (the first eight of a longer one): its first and last four, or its first, middle
/// and last byte. Names are told apart by it and their lengths before any byte is compared
/// (name lookups, 1,198.5 k -> 1,196.1 k instructions per compile of the 8 KB agent). The
/// words of [`hash_words`], the two of a shorter name in one, read here by themselves: taken
/// from `hash_words`, a long name's last word was read too (+2.3 k a compile).
#[inline(always)]
fn name_key(b: &[u8]) -> u64 {
    if let Some(h) = b.first_chunk::<8>() {
        u64::from_le_bytes(*h)
    } else if let (Some(h), Some(t)) = (b.first_chunk::<4>(), b.last_chunk::<4>()) {
        u64::from(u32::from_le_bytes(*h)) | u64::from(u32::from_le_bytes(*t)) << 32
    } else if let (Some(&first), Some(&mid), Some(&last)) =
        (b.first(), b.get(b.len() / 2), b.last())
    {
        u64::from(first) | u64::from(mid) << 8 | u64::from(last) << 16
    } else {
        0
    }
}

/// The variable names of one function, one after the other (a name costs no allocation).
#[derive(Default)]
struct Names(String);

impl Names {
    fn add(&mut self, p: Probe) -> Name {
        let at = self.0.len();
        self.0.push_str(p.name);
        Name {
            at: at as u32,
            len: p.name.len() as u32,
            key: p.key,
        }
    }

    /// Whether `n` is the name of `p`: by their keys and lengths, which say it for a name of up
    /// to eight bytes; a longer one's bytes are compared too. Compared as bytes: slicing the
    /// `str` would check both ends for a character boundary on every comparison (~3 k
    /// instructions per compile of the 8 KB agent).
    #[inline(always)]
    fn is(&self, n: Name, p: Probe) -> bool {
        n.key == p.key
            && n.len as usize == p.name.len()
            && (n.len <= 8
                || self
                    .0
                    .as_bytes()
                    .get(n.at as usize..(n.at + n.len) as usize)
                    .is_some_and(|t| same_bytes(t, p.name.as_bytes())))
    }
}

/// `a == b` for two slices of one length, a short one (most names) compared by two overlapping
/// words, without a call to `memcmp` (~15 instructions less per name compared, ~5 k per compile
/// of the 8 KB agent).
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // (each pair of windows covers the whole of a slice of its lengths)
    if let (Some(ah), Some(bh)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        if n <= 16 {
            let (at, bt) = (a.last_chunk::<8>(), b.last_chunk::<8>());
            return ah == bh && at == bt;
        }
        return a == b;
    }
    if let (Some(ah), Some(bh)) = (a.first_chunk::<4>(), b.first_chunk::<4>()) {
        return ah == bh && a.last_chunk::<4>() == b.last_chunk::<4>();
    }
    // up to three bytes: the first, the middle and the last
    a.first() == b.first() && a.get(n / 2) == b.get(n / 2) && a.last() == b.last()
}

struct Var {
    name: Name,
    reg: u16,
    is_const: bool,
}

#[derive(Default)]
struct Scope {
    vars: Vec<Var>,
    /// let/const names of this block not declared yet (use before declaration is an error).
    pending: Vec<Name>,
    /// The function body's outermost scope (FunctionBody: may not redeclare a parameter).
    is_top: bool,
}

struct LoopCtx {
    breaks: Vec<usize>,
    /// the `continue` jumps, patched to the loop's test when it is known
    continues: Vec<usize>,
    try_depth: u32,
}

/// Longest loop test (in instructions) copied to the bottom of its loop.
const MAX_COPIED_TEST: usize = 24;

/// What the functions of one program share: constants and the atoms table.
pub(crate) struct Pool {
    constants: Vec<Constant>,
    num_map: NumMap,
    str_map: StrMap,
    atoms: Vec<String>,
    /// The emptied buffers of the previous function, reused by the next.
    bufs: Buffers,
}

/// The working buffers of a lowering (instructions and their source offsets, specials, names, scopes), emptied
/// when a function is finished: the next function of the program reuses them, and a thread
/// keeps one set between compiles (see [`Buffers::take`]), so that a small compile allocates
/// none of them.
#[derive(Default)]
pub(crate) struct Buffers {
    /// The instructions of the function being lowered, each with its source offset (one vector:
    /// an instruction emitted is one push, ~5 instructions less than two, ~5 k per compile of
    /// the 8 KB agent).
    code: Vec<(Op, u32)>,
    /// The specials of the function (externals and the constant values it loads).
    specials: Vec<(Special, u32)>,
    /// The text of every variable name of `scopes`.
    names: Names,
    /// The scopes: the first `nscopes` open (innermost last), the others closed and emptied,
    /// their vectors reused by the next scopes opened. (Opened and closed in place: a scope
    /// moved from the spare ones to the open ones and back, some 56 bytes each way, cost ~4.6 k
    /// instructions per compile of the 8 KB agent.)
    scopes: Vec<Scope>,
    nscopes: usize,
    /// Scratch buffer for the UTF-16 units of a string constant being looked up.
    units: Vec<u16>,
    /// [`Lowerer::finish_function`]'s block-leader marks.
    marks: Vec<u32>,
    /// The register of each constant loaded so far in this function, by constant index (kept
    /// between the functions of a program: [`Lowerer::finish_function`] empties the slots it
    /// set, so a later function does not resize a table by the whole pool).
    const_regs: Vec<Option<u16>>,
}

thread_local! {
    /// The buffers of this thread's last finished compile (see [`Buffers`]).
    /// (A `RefCell`: keeping them writes them into the slot, where a `Cell`'s `set` would
    /// also copy the slot's old contents out to drop them.)
    static BUFFERS: std::cell::RefCell<Option<Buffers>> = const { std::cell::RefCell::new(None) };
}

/// Most elements a kept buffer may hold (a huge compile's buffers are freed, not kept).
const KEEP_BUFFER_LEN: usize = 1 << 14;
/// Most spare scopes kept between compiles.
const KEEP_SCOPES: usize = 16;

impl Buffers {
    /// The open scopes, innermost last.
    #[inline(always)]
    fn open_scopes(&self) -> &[Scope] {
        self.scopes.get(..self.nscopes).unwrap_or(&[])
    }

    /// Opens a new innermost scope (see [`Lowerer::open_scope`]).
    #[inline]
    fn open_scope(&mut self) -> &mut Scope {
        let k = self.open_scope_at();
        &mut self.scopes[k]
    }

    /// Opens a new innermost scope, empty: its index.
    #[inline]
    fn open_scope_at(&mut self) -> usize {
        let k = self.nscopes;
        if k >= self.scopes.len() {
            self.scopes.push(Scope::default());
        }
        self.nscopes = k + 1;
        k
    }

    /// This thread's kept buffers (empty ones when there are none).
    pub(crate) fn take() -> Buffers {
        BUFFERS
            .try_with(|b| b.try_borrow_mut().ok().and_then(|mut b| b.take()))
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Keeps these buffers, emptied by [`Lowerer::finish_function`], for the thread's next
    /// compile, unless they grew large (a few spare scopes at most).
    pub(crate) fn keep(mut self) {
        if self.nscopes == 0 {
            self.scopes.truncate(KEEP_SCOPES);
        }
        // (indexed by the constants of the program just compiled: none of them is the next's)
        self.const_regs.clear();
        let too_big = self.code.capacity() > KEEP_BUFFER_LEN
            || self.specials.capacity() > KEEP_BUFFER_LEN
            || self.names.0.capacity() > KEEP_BUFFER_LEN
            || self.units.capacity() > KEEP_BUFFER_LEN
            || self.marks.capacity() > KEEP_BUFFER_LEN
            || self.const_regs.capacity() > KEEP_BUFFER_LEN
            || self.scopes.capacity() > KEEP_BUFFER_LEN
            || self
                .scopes
                .iter()
                .any(|s| s.vars.capacity().max(s.pending.capacity()) > KEEP_BUFFER_LEN);
        // (emptied already: what is left in a buffer would be read by the next compile)
        let emptied = self.code.is_empty()
            && self.specials.is_empty()
            && self.names.0.is_empty()
            && self.nscopes == 0
            && self
                .scopes
                .iter()
                .all(|s| s.vars.is_empty() && s.pending.is_empty() && !s.is_top);
        if too_big || !emptied {
            return;
        }
        let _ = BUFFERS.try_with(|b| {
            if let Ok(mut slot) = b.try_borrow_mut() {
                *slot = Some(self);
            }
        });
    }
}

/// Most functions a recycled program may have to be kept (see [`recycle`]).
const KEEP_FUNCTIONS: usize = 64;

/// The vectors of a program this thread no longer needs: its functions and their positions.
pub(crate) struct Spare {
    functions: Vec<Function>,
    spans: Vec<Vec<SourcePos>>,
}

thread_local! {
    /// A program this thread no longer needs, whose vectors and strings the thread's next
    /// compile reuses (see [`recycle`]).
    static SPARE: std::cell::Cell<Option<Spare>> = const { std::cell::Cell::new(None) };
}

/// Hands a program that is no longer needed to this thread's next compile, which builds its own
/// program in the allocations of this one (its functions' instructions, positions and lists of
/// parameter names; the names themselves are `CompactString`s, most of them without an
/// allocation)
/// instead of allocating them. A big program is dropped instead; a compile on another thread
/// does not see it. Its contents are never read: only its capacity is reused.
pub fn recycle(program: Program) {
    let small = program.functions.len() <= KEEP_FUNCTIONS
        && program
            .functions
            .iter()
            .all(|f| f.code.capacity() <= KEEP_BUFFER_LEN && f.params.len() <= u8::MAX as usize)
        && program.debug.as_ref().is_none_or(|d| {
            d.spans.len() <= KEEP_FUNCTIONS
                && d.spans.iter().all(|s| s.capacity() <= KEEP_BUFFER_LEN)
        });
    if small {
        let spare = Spare {
            functions: program.functions,
            spans: program.debug.map(|d| d.spans).unwrap_or_default(),
        };
        let _ = SPARE.try_with(|s| s.set(Some(spare)));
    }
}

/// The recycled program of this thread, if there is one (see [`recycle`]), or else the vectors
/// of the program it released last (`VerifiedProgram::release`).
pub(crate) fn take_spare() -> Option<Spare> {
    match SPARE.try_with(std::cell::Cell::take) {
        Ok(Some(s)) => Some(s),
        _ => ajs_bytecode::take_released().map(|(functions, spans)| Spare { functions, spans }),
    }
}

/// What a function being finished may build in: a recycled function and its positions.
#[derive(Default)]
pub(crate) struct Reuse {
    function: Option<Function>,
    pos: Option<Vec<SourcePos>>,
}

impl Reuse {
    /// The next function's share of `spare` (nothing when there is none).
    pub(crate) fn from(spare: &mut Option<Spare>) -> Reuse {
        let Some(p) = spare else {
            return Reuse::default();
        };
        Reuse {
            function: p.functions.pop(),
            pos: p.spans.pop(),
        }
    }
}

/// The laid-out code of a function being finished: every basic block opened by a `Charge` of
/// the static cost of its instructions, each instruction with its source position.
struct Layout<'c, 'i, 's> {
    code: Vec<Op>,
    pos: Vec<SourcePos>,
    cursor: &'c mut crate::pos::Cursor<'i, 's>,
    /// The index of the open block's `Charge` (`usize::MAX` before the first), and the cost of
    /// its instructions so far.
    charge: usize,
    amount: u32,
}

impl Layout<'_, '_, '_> {
    /// Appends `op` (from source offset `off`), after a new `Charge` when it leads a block
    /// (the first instruction of a function always does).
    #[inline(always)]
    fn push(&mut self, op: Op, off: u32, lead: bool) {
        let p = self.cursor.pos(off);
        if lead {
            self.close();
            self.charge = self.code.len();
            self.code.push(Op::Charge { amount: Imm(0) });
            self.pos.push(p);
        }
        self.amount += op.cost();
        self.code.push(op);
        self.pos.push(p);
    }

    /// Writes the open block's cost into its `Charge`.
    fn close(&mut self) {
        if let Some(slot) = self.code.get_mut(self.charge) {
            *slot = Op::Charge {
                amount: Imm(self.amount),
            };
        }
        self.charge = usize::MAX;
        self.amount = 0;
    }

    fn finish(mut self) -> (Vec<Op>, Vec<SourcePos>) {
        self.close();
        (self.code, self.pos)
    }
}

/// The string constants of a program by content. A table of slots, two for each string by a
/// cheap hash of it ([`string_hash`]: its top bits, then its low bits), holds the first string
/// of each slot and is checked against the pool: a string whose first slot is empty, or whose
/// second is while another string holds its first, is new, without any other lookup (a second
/// slot spares the keyed maps most strings: 1,196.1 k -> 1,195.1 k instructions per compile of
/// the 8 KB agent). A string whose two slots others hold is hashed once with std's keyed
/// SipHash (a guest cannot choose strings that
/// collide there: a guest's strings colliding in the table cost a keyed lookup each, no chain),
/// and the map from that hash to the constant's index hashes no further; the rare strings whose
/// keyed hash another string has already are kept in a second, ordinary map. (The keyed maps
/// alone hashed every new string, ~150 instructions, and grew with them: ~16 k instructions per
/// compile of the 8 KB agent.)
pub(crate) struct StrMap {
    /// The index of the string constant of each slot (`NO_STRING`: none), a power of two of
    /// them; made at the first string, `wanted` of them.
    slots: Vec<u16>,
    wanted: usize,
    /// The strings whose slot another holds (made at the first of them: a program without
    /// strings, such as most Eval snippets, makes neither).
    keyed: Option<Box<Keyed>>,
}

/// The strings of a [`StrMap`] whose slot another string holds, by keyed hash.
#[derive(Default)]
pub(crate) struct Keyed {
    keys: RandomState,
    by_hash: HashMap<u64, u16, BuildHasherDefault<Prehashed>>,
    collided: HashMap<Vec<u16>, u16>,
}

/// An empty slot of [`StrMap`] (no constant has this index: there are at most
/// [`MAX_CONSTANTS`]).
const NO_STRING: u16 = NO_CONSTANT;

/// An empty slot of a table of constants (no constant has this index: there are at most
/// [`MAX_CONSTANTS`]).
const NO_CONSTANT: u16 = u16::MAX;

const _: () = assert!(MAX_CONSTANTS <= NO_CONSTANT as usize);

/// Slots of a [`StrMap`] for a program of unknown size, and at most.
const STRING_SLOTS: usize = 64;
const MAX_STRING_SLOTS: usize = 1 << 16;

impl Default for StrMap {
    fn default() -> Self {
        StrMap {
            slots: Vec::new(),
            wanted: STRING_SLOTS,
            keyed: None,
        }
    }
}

impl StrMap {
    /// A map for about `n` strings (four slots each, so that few share one).
    fn with_capacity(n: usize) -> StrMap {
        StrMap {
            wanted: n
                .saturating_mul(4)
                .clamp(STRING_SLOTS, MAX_STRING_SLOTS)
                .next_power_of_two(),
            ..StrMap::default()
        }
    }

    /// The slot of the string whose [`string_hash`] is `h`: its top bits.
    #[inline]
    fn slot(&mut self, h: u32) -> usize {
        if self.slots.is_empty() {
            self.make_slots();
        }
        (h >> (32 - self.slots.len().trailing_zeros())) as usize
    }

    /// The second slot of the string whose [`string_hash`] is `h` (its low bits), where it is
    /// when its first held another string (after [`Self::slot`]: the slots are made).
    #[inline]
    fn second_slot(&self, h: u32) -> usize {
        h as usize & self.slots.len().wrapping_sub(1)
    }

    #[cold]
    fn make_slots(&mut self) {
        self.slots = vec![NO_STRING; self.wanted];
    }

    /// Sets slot `slot` (empty) to constant `k`.
    #[inline]
    fn fill(&mut self, slot: usize, k: u16) {
        if let Some(s) = self.slots.get_mut(slot) {
            *s = k;
        }
    }

    /// The keyed maps.
    fn keyed(&mut self) -> &mut Keyed {
        self.keyed.get_or_insert_with(Box::default)
    }
}

impl Keyed {
    /// The keyed hash of the string of `units` (`ascii`: its bytes, when the caller has them).
    /// An ASCII string is hashed as its bytes, in one write: half the bytes of its units and no
    /// length prefix (~80 instructions less per new string, ~9 k per compile of the 8 KB
    /// agent); any other as a marker byte no ASCII string starts with, then its units.
    fn hash(&self, units: &[u16], ascii: Option<&[u8]>) -> u64 {
        let mut h = self.keys.build_hasher();
        match ascii {
            Some(bytes) => h.write(bytes),
            None if units.iter().all(|&u| u < 0x80) => {
                h.write(&units.iter().map(|&u| u as u8).collect::<Vec<u8>>());
            }
            None => {
                h.write_u8(0xFF);
                units.hash(&mut h);
            }
        }
        h.finish()
    }

    /// The index of the string constant `units` (`ascii`: its bytes, when the caller has them),
    /// or its hash and whether that hash is taken.
    fn find(
        &self,
        units: &[u16],
        ascii: Option<&[u8]>,
        constants: &[Constant],
    ) -> Result<u16, (u64, bool)> {
        let hash = self.hash(units, ascii);
        match self.by_hash.get(&hash) {
            None => Err((hash, false)),
            Some(&k) => match constants.get(k as usize) {
                Some(Constant::String(s)) if s.as_slice() == units => Ok(k),
                _ => self.collided.get(units).copied().ok_or((hash, true)),
            },
        }
    }

    fn insert(&mut self, hash: u64, collided: bool, units: &[u16], k: u16) {
        if collided {
            self.collided.insert(units.to_vec(), k);
        } else {
            self.by_hash.insert(hash, k);
        }
    }
}

/// The number constants of a program by their bits ([`num_bits`]), as [`StrMap`] keeps strings:
/// a direct-mapped table, by a cheap hash of the bits, holds the first number of each slot
/// (checked against the pool: an empty slot means a new number), and a keyed map (std's SipHash,
/// made at the first of them) the numbers whose slot another holds. (A keyed map alone, behind a
/// cache of recent numbers, hashed every new number: ~3 k instructions per compile of the 8 KB
/// agent.)
#[derive(Default)]
pub(crate) struct NumMap {
    /// The index of the number constant of each slot (`NO_CONSTANT`: none), a power of two of
    /// them; made at the first number, `wanted` of them (at least `NUMBER_SLOTS`).
    slots: Vec<u16>,
    wanted: usize,
    keyed: Option<HashMap<u64, u16>>,
}

/// Slots of a [`NumMap`] for a program of unknown size.
const NUMBER_SLOTS: usize = 64;

impl NumMap {
    /// A map for about `n` numbers (four slots each).
    fn with_capacity(n: usize) -> NumMap {
        NumMap {
            wanted: n.saturating_mul(4).clamp(NUMBER_SLOTS, MAX_STRING_SLOTS),
            ..NumMap::default()
        }
    }

    /// The slot of the number of bits `bits`.
    #[inline]
    fn slot(&mut self, bits: u64) -> usize {
        if self.slots.is_empty() {
            self.make_slots();
        }
        let h = (bits ^ (bits >> 32)).wrapping_mul(MIX_K);
        (h >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    #[cold]
    fn make_slots(&mut self) {
        self.slots = vec![NO_CONSTANT; self.wanted.max(NUMBER_SLOTS).next_power_of_two()];
    }
}

/// A cheap hash of the string `units` ([`StrMap`]'s slot is its top bits): multiplicative, of
/// its length and of two words of its units taken as bytes (each unit's low byte; see
/// [`hash_words`]).
/// (Of the units of a string, or of the bytes of an ASCII string: the same hash.)
#[inline]
fn string_hash(units: &[u16]) -> u32 {
    let n = units.len();
    // (little-endian: the first unit in the low byte)
    let pack = |s: &[u16]| {
        s.iter()
            .rev()
            .fold(0u64, |w, &u| w << 8 | u64::from(u as u8))
    };
    let (w0, w1) = if n >= 8 {
        (pack(&units[..8]), pack(&units[n - 8..]))
    } else if n >= 4 {
        (pack(&units[..4]), pack(&units[n - 4..]))
    } else if n > 0 {
        (pack(&[units[0], units[n / 2], units[n - 1]]), 0)
    } else {
        (0, 0)
    };
    mix_words(n, w0, w1)
}

/// The two words [`string_hash`] mixes, of the bytes `b`: its first and last eight (which
/// overlap when it has fewer than sixteen), or four, or (of up to three) its first, middle
/// and last byte. Between them they hold every byte of a string of up to sixteen.
#[inline(always)]
fn hash_words(b: &[u8]) -> (u64, u64) {
    let n = b.len();
    if let (Some(h), Some(t)) = (b.first_chunk::<8>(), b.last_chunk::<8>()) {
        (u64::from_le_bytes(*h), u64::from_le_bytes(*t))
    } else if let (Some(h), Some(t)) = (b.first_chunk::<4>(), b.last_chunk::<4>()) {
        (
            u64::from(u32::from_le_bytes(*h)),
            u64::from(u32::from_le_bytes(*t)),
        )
    } else if let (Some(&first), Some(&mid), Some(&last)) = (b.first(), b.get(n / 2), b.last()) {
        (
            u64::from(first) | u64::from(mid) << 8 | u64::from(last) << 16,
            0,
        )
    } else {
        (0, 0)
    }
}

/// The hash of a string of length `n` by its two words ([`hash_words`]).
#[inline(always)]
fn mix_words(n: usize, w0: u64, w1: u64) -> u32 {
    let h = (w0 ^ (n as u64).wrapping_mul(MIX_K)).wrapping_mul(MIX_K) ^ w1;
    (h.wrapping_mul(MIX_K) >> 32) as u32
}

/// The multiplier of the compiler's multiplicative hashes (2^64 over the golden ratio).
const MIX_K: u64 = 0x9E37_79B9_7F4A_7C15;

/// [`string_hash`] of the bytes of `s` when it is ASCII, `None` when it is not. (A string of up
/// to sixteen bytes is checked by the words it is hashed by, which hold all its bytes.)
#[inline]
fn ascii_hash(s: &str) -> Option<u32> {
    let bytes = s.as_bytes();
    let (w0, w1) = hash_words(bytes);
    let ascii = if bytes.len() > 16 {
        bytes.is_ascii()
    } else {
        (w0 | w1) & 0x8080_8080_8080_8080 == 0
    };
    ascii.then(|| mix_words(bytes.len(), w0, w1))
}

/// Whether `c` is the string constant of the ASCII `bytes`.
#[inline]
fn is_ascii_constant(c: Option<&Constant>, bytes: &[u8]) -> bool {
    matches!(c, Some(Constant::String(s))
        if s.len() == bytes.len() && s.iter().zip(bytes).all(|(&u, &c)| u == u16::from(c)))
}

/// The key of a number in the pool: its bits, every NaN as the one NaN.
fn num_bits(v: f64) -> u64 {
    if v.is_nan() {
        f64::NAN.to_bits()
    } else {
        v.to_bits()
    }
}

/// The hasher of a map keyed by a hash already computed: the key is the hash.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

enum Resolved {
    Local { reg: u16, is_const: bool },
    Ext(u16),
}

pub(crate) struct Lowerer<'o> {
    opts: &'o CompileOptions<'o>,
    /// The working buffers (moved in and out whole: see [`Buffers`]).
    bufs: Buffers,
    constants: Vec<Constant>,
    num_map: NumMap,
    str_map: StrMap,
    atoms: Vec<String>,
    /// The register of each special value other than a constant loaded so far, by
    /// [`SpecialKey::index`].
    special_regs: Regs,
    /// The register of each external used so far, by its index in `opts.externals`.
    ext_regs: Regs,
    top: u16,
    max_top: u16,
    loops: Vec<LoopCtx>,
    try_depth: u32,
    depth: u32,
    chain: Option<Vec<usize>>,
    /// Callback bodies being lowered, innermost last.
    callbacks: Vec<CallbackCtx>,
    /// Helper functions of an agent program: name -> (function index, arity); one table shared
    /// by every function of the program.
    helpers: Option<&'o agent::Helpers<'o>>,
    /// A register holding the array a callback method iterates, when it was built already
    /// (`Array.from(x, cb)`).
    callback_source: Option<u16>,
    /// Set by `parallel(xs.map(…))` for the `map` it lowers: the callback's results are
    /// parallel items, not array elements.
    parallel_map: bool,
    /// The parameter names of an agent's function being lowered: its externals, in place of
    /// `opts.externals` (empty then) when there are any (see [`Self::externals`]).
    ext_names: Vec<String>,
}

/// Compiles one expression (Eval expression mode).
pub(crate) fn lower_expression(
    src: &str,
    e: &Expression,
    opts: &CompileOptions,
) -> Result<Program, Fail> {
    expression_program(src, e, opts).map_err(|e| *e)
}

fn expression_program(src: &str, e: &Expression, opts: &CompileOptions) -> R<Program> {
    let mut l = Lowerer::new(opts);
    l.open_scope().is_top = true;
    let mark = l.top;
    let r = l.expr(e)?;
    l.emit(Op::Return { src: Src(r) }, e.span());
    l.top = mark;
    l.finish(src, "<eval>")
}

/// Compiles a statement list (Eval block mode or FunctionBody).
pub(crate) fn lower_statements(
    src: &str,
    body: &[Statement],
    opts: &CompileOptions,
    name: &str,
) -> Result<Program, Fail> {
    statements_program(src, body, opts, name).map_err(|e| *e)
}

fn statements_program(
    src: &str,
    body: &[Statement],
    opts: &CompileOptions,
    name: &str,
) -> R<Program> {
    let mut l = Lowerer::new(opts);
    if opts.mode == Mode::FunctionBody {
        for (i, p) in opts.externals.iter().enumerate() {
            if forbidden(p) {
                return fail_at(0, forbidden_msg(p));
            }
            let reg = l.new_special(Special::Ext(i), 0)?;
            l.ext_regs.insert(i, reg);
        }
    }
    l.block(body, true, Span::new(0, 0))?;
    let end = Span::new(src.len() as u32, src.len() as u32);
    // falling off the end returns undefined (loaded here, not in the prologue: usually dead code)
    let u = l.alloc(end)?;
    l.emit(Op::LoadUndef { dst: Dst(u) }, end);
    l.emit(Op::Return { src: Src(u) }, end);
    l.finish(src, name)
}

impl<'o> Lowerer<'o> {
    /// A lowerer with this thread's kept buffers (see [`Buffers`]).
    fn new(opts: &'o CompileOptions<'o>) -> Self {
        let pool = Pool {
            constants: Vec::new(),
            num_map: NumMap::default(),
            str_map: StrMap::default(),
            atoms: Vec::new(),
            bufs: Buffers::take(),
        };
        Self::with_pool(opts, pool)
    }

    /// A lowerer continuing `pool`: the constants, atoms and buffers of the previous functions
    /// of the program.
    fn with_pool(opts: &'o CompileOptions<'o>, pool: Pool) -> Self {
        Lowerer {
            opts,
            bufs: pool.bufs,
            constants: pool.constants,
            num_map: pool.num_map,
            str_map: pool.str_map,
            atoms: pool.atoms,
            special_regs: Regs::default(),
            ext_regs: Regs::default(),
            top: 0,
            max_top: 0,
            loops: Vec::new(),
            try_depth: 0,
            depth: 0,
            chain: None,
            callbacks: Vec::new(),
            helpers: None,
            callback_source: None,
            parallel_map: false,
            ext_names: Vec::new(),
        }
    }

    /// Begins the next function of an agent in this lowerer: what the previous one left in
    /// the per-function fields is forgotten (its buffers were emptied by
    /// [`Self::finish_function`]), the program's pool and helpers stay.
    fn begin_function(&mut self) {
        self.special_regs.0.clear();
        self.ext_regs.0.clear();
        self.top = 0;
        self.max_top = 0;
        self.loops.clear();
        self.try_depth = 0;
        self.depth = 0;
        self.chain = None;
        self.callbacks.clear();
        self.callback_source = None;
        self.parallel_map = false;
    }

    /// The names of the externals: the parameter names of an agent's function, or the options'.
    #[inline]
    fn externals(&self) -> &[String] {
        if self.ext_names.is_empty() {
            self.opts.externals
        } else {
            &self.ext_names
        }
    }

    /// The function index and arity of the helper function `name`, if the program has one.
    fn helper(&self, name: &str) -> Option<(u16, usize)> {
        self.helpers?.get(name)
    }

    // ---------------------------------------------------------------- emission and registers

    /// Appends `op`, from the source at `span`. (Always inlined: the call per instruction
    /// emitted cost more than the two pushes, ~8 k instructions per compile of the 8 KB agent;
    /// a plain `#[inline]` was not taken.)
    #[inline(always)]
    fn emit(&mut self, op: Op, span: Span) {
        self.bufs.code.push((op, span.start));
    }

    fn here(&self) -> u32 {
        self.bufs.code.len() as u32
    }

    /// Emits a jump with a placeholder target; returns its index for [`Self::patch`].
    fn emit_jump(&mut self, op: Op, span: Span) -> usize {
        self.emit(op, span);
        self.bufs.code.len() - 1
    }

    fn patch(&mut self, at: usize, target: u32) {
        if let Some((op, _)) = self.bufs.code.get_mut(at) {
            op.map_target(|_| target);
        }
    }

    fn patch_all_here(&mut self, jumps: &[usize]) {
        for &j in jumps {
            self.patch_here(j);
        }
    }

    /// Lowers `test` for its truthiness alone, as branches: returns the jumps (for
    /// [`Self::patch`]) taken when it is `when`, and falls through when it is not. `&&`, `||`
    /// and `!` become control flow (no value is made: `a && b` is false when either is), a
    /// comparison fuses with its branch ([`Self::emit_branch`]).
    fn cond_jump(&mut self, test: &Expression, when: bool) -> R<Jumps> {
        match test.without_parentheses() {
            Expression::LogicalExpression(l) if l.operator != LogicalOperator::Coalesce => {
                let and = l.operator == LogicalOperator::And;
                if and != when {
                    // `a && b` is false when either is; `a || b` is true when either is
                    let mut jumps = self.cond_jump(&l.left, when)?;
                    jumps.extend(self.cond_jump(&l.right, when)?);
                    Ok(jumps)
                } else {
                    // `a && b` is true when both are: a false `a` skips `b`'s branch
                    let skip = self.cond_jump(&l.left, !when)?;
                    let jumps = self.cond_jump(&l.right, when)?;
                    self.patch_all_here(&skip);
                    Ok(jumps)
                }
            }
            Expression::UnaryExpression(u) if u.operator == UnaryOperator::LogicalNot => {
                self.cond_jump(&u.argument, !when)
            }
            e => {
                let (mark, start) = (self.top, self.here());
                let c = self.expr(e)?;
                let (jump, _) = self.emit_branch(c, mark, start, when, 0, e.span());
                self.top = mark;
                Ok(one_jump(jump))
            }
        }
    }

    /// Emits the comparison `cmp` and a branch on its result taken when it is `when`, fused
    /// into one instruction (the caller makes sure nothing else reads the result); returns the
    /// branch's index for [`Self::patch`].
    pub(crate) fn emit_test(&mut self, cmp: Op, when: bool, span: Span) -> usize {
        let mut cond = 0;
        cmp.operands(|o| {
            if let Operand::Write(r) = o {
                cond = r;
            }
        });
        let start = self.here();
        self.emit(cmp, span);
        // (`cond` as the mark: the caller says nothing else reads it)
        self.emit_branch(cond, cond, start, when, 0, span).0
    }

    /// Emits the branch to `target` on the test `c` (whose instructions start at `start`),
    /// taken when `c` is `when`; returns its index (for [`Self::patch`]) and, when it was fused,
    /// the comparison it was fused with. A test ending with a comparison into a temporary (at
    /// or above `mark`: nothing else reads it) that no jump of the test lands after becomes one
    /// fused compare-and-branch in the comparison's place (its span, which error messages use).
    fn emit_branch(
        &mut self,
        c: u16,
        mark: u16,
        start: u32,
        when: bool,
        target: u32,
        span: Span,
    ) -> (usize, Option<Op>) {
        let here = self.here();
        if c >= mark && here > start {
            let last = self.bufs.code[here as usize - 1].0;
            if let Some(fused) = last.fused_branch(c, when, target) {
                let lands_after = self.bufs.code[start as usize..]
                    .iter()
                    .any(|(op, _)| op.jump_target() == Some(here));
                if !lands_after {
                    self.bufs.code[here as usize - 1].0 = fused;
                    return (here as usize - 1, Some(last));
                }
            }
        }
        let op = if when {
            Op::JumpIfTrue {
                cond: Src(c),
                target: Target(target),
            }
        } else {
            Op::JumpIfFalse {
                cond: Src(c),
                target: Target(target),
            }
        };
        (self.emit_jump(op, span), None)
    }

    /// Appends a copy of the straight-line test `start..end` (jumps only inside it or to its
    /// end), relocated; false (nothing appended) when it is too long or jumps elsewhere.
    fn copy_test(&mut self, start: u32, end: u32) -> bool {
        let (s, e) = (start as usize, end as usize);
        if e - s > MAX_COPIED_TEST {
            return false;
        }
        let test = &self.bufs.code[s..e];
        let movable = test.iter().all(|(op, _)| match op.jump_target() {
            _ if matches!(
                op,
                Op::TryEnter { .. } | Op::Return { .. } | Op::Throw { .. }
            ) =>
            {
                false
            }
            Some(t) => (start..=end).contains(&t),
            None => true,
        });
        if !movable {
            return false;
        }
        let shift = self.here() - start;
        for i in s..e {
            let (op, span) = self.bufs.code[i];
            self.bufs.code.push((op, span));
            if let Some(t) = op.jump_target() {
                self.patch(self.bufs.code.len() - 1, t + shift);
            }
        }
        true
    }

    fn patch_here(&mut self, at: usize) {
        let h = self.here();
        self.patch(at, h);
    }

    /// A new temporary register (the next above `top`). Always inlined, its failure kept out of
    /// line: the call per temporary cost more than the allocation (~5 k instructions per
    /// compile of the 8 KB agent).
    #[inline(always)]
    fn alloc(&mut self, span: Span) -> R<u16> {
        if self.top as usize + 1 + self.bufs.specials.len() > u16::MAX as usize {
            return too_many_registers(span);
        }
        let r = self.top;
        self.top += 1;
        self.max_top = self.max_top.max(self.top);
        Ok(r)
    }

    fn new_special(&mut self, s: Special, offset: u32) -> R<u16> {
        if self.max_top as usize + self.bufs.specials.len() + 1 > u16::MAX as usize {
            return fail_at(
                offset,
                "too many registers (more than 65535 constants and values)",
            );
        }
        let k = self.bufs.specials.len();
        self.bufs.specials.push((s, offset));
        Ok(u16::MAX - k as u16)
    }

    /// (Inline, the lookup of a register given already: the usual case; a call for it cost
    /// ~0.7 k instructions per compile of the 8 KB agent.)
    #[inline(always)]
    fn special(&mut self, key: SpecialKey, span: Span) -> R<u16> {
        let given = match key {
            SpecialKey::Const(k) => self.bufs.const_regs.get(k as usize).copied().flatten(),
            _ => self.special_regs.get(key.index()),
        };
        match given {
            Some(r) => Ok(r),
            None => self.new_special_reg(key, span),
        }
    }

    /// [`Self::special`] of a key with no register yet.
    #[inline(never)]
    fn new_special_reg(&mut self, key: SpecialKey, span: Span) -> R<u16> {
        if let SpecialKey::Const(k) = key {
            let r = self.new_special(Special::Const(k), span.start)?;
            let k = k as usize;
            if self.bufs.const_regs.len() <= k {
                // (to the pool's capacity: resized to its length, the table grew with nearly
                // every new constant)
                self.bufs
                    .const_regs
                    .resize(self.constants.capacity().max(k + 1), None);
            }
            if let Some(slot) = self.bufs.const_regs.get_mut(k) {
                *slot = Some(r);
            }
            return Ok(r);
        }
        let s = match key {
            SpecialKey::Const(k) => Special::Const(k),
            SpecialKey::Undef => Special::Undef,
            SpecialKey::Null => Special::Null,
            SpecialKey::True => Special::True,
            SpecialKey::False => Special::False,
        };
        let r = self.new_special(s, span.start)?;
        self.special_regs.insert(key.index(), r);
        Ok(r)
    }

    /// (Inlined: a call, its constant passed in memory and its result returned there, cost
    /// ~4 k instructions per compile of the 8 KB agent, 1,184.9 k -> 1,180.7 k.)
    #[inline(always)]
    fn add_constant(&mut self, c: Constant, span: Span) -> R<u16> {
        if self.constants.len() >= MAX_CONSTANTS {
            return fail(span, "too many constants (more than 65535)");
        }
        self.constants.push(c);
        Ok((self.constants.len() - 1) as u16)
    }

    /// (Inline, the lookup of a number whose slot holds it: the usual case; a call for it cost
    /// ~1.4 k instructions per compile of the 8 KB agent.)
    #[inline(always)]
    fn num_const(&mut self, v: f64, span: Span) -> R<u16> {
        let bits = num_bits(v);
        let slot = self.num_map.slot(bits);
        match self.num_map.slots.get(slot).copied() {
            Some(k) if matches!(self.constants.get(k as usize), Some(Constant::Number(x)) if num_bits(*x) == bits) => {
                Ok(k)
            }
            _ => self.num_const_new(v, bits, slot, span),
        }
    }

    /// [`Self::num_const`] of a number that its slot (`slot`) does not hold.
    #[inline(never)]
    fn num_const_new(&mut self, v: f64, bits: u64, slot: usize, span: Span) -> R<u16> {
        match self.num_map.slots.get(slot).copied() {
            Some(NO_CONSTANT) => {
                let k = self.add_constant(Constant::Number(v), span)?;
                if let Some(s) = self.num_map.slots.get_mut(slot) {
                    *s = k;
                }
                return Ok(k);
            }
            Some(k) if matches!(self.constants.get(k as usize), Some(Constant::Number(x)) if num_bits(*x) == bits) => {
                return Ok(k)
            }
            _ => {}
        }
        // the slot holds another number: the keyed map
        match self
            .num_map
            .keyed
            .get_or_insert_with(HashMap::new)
            .entry(bits)
        {
            Entry::Occupied(e) => Ok(*e.get()),
            Entry::Vacant(e) => {
                if self.constants.len() >= MAX_CONSTANTS {
                    return fail(span, "too many constants (more than 65535)");
                }
                self.constants.push(Constant::Number(v));
                let k = (self.constants.len() - 1) as u16;
                e.insert(k);
                Ok(k)
            }
        }
    }

    /// The constant of the string of UTF-16 `units` (added when new).
    fn str_const_slice(&mut self, units: &[u16], span: Span) -> R<u16> {
        self.str_const_cow(Cow::Borrowed(units), span)
    }

    /// The constant of the string of UTF-16 `units`, owned or borrowed (an owned one becomes the
    /// constant when new, without a copy).
    fn str_const_cow(&mut self, units: Cow<'_, [u16]>, span: Span) -> R<u16> {
        let h = string_hash(&units);
        let mut slot = self.str_map.slot(h);
        match self.str_map.slots.get(slot).copied() {
            Some(NO_STRING) => {}
            Some(k) if self.is_string(k, &units) => return Ok(k),
            // (the first slot holds another string: the second)
            _ => {
                slot = self.str_map.second_slot(h);
                match self.str_map.slots.get(slot).copied() {
                    Some(NO_STRING) => {}
                    Some(k) if self.is_string(k, &units) => return Ok(k),
                    _ => return self.str_const_keyed(&units, None, span),
                }
            }
        }
        let units = match units {
            Cow::Owned(units) => StrUnits::from_vec(units),
            Cow::Borrowed(units) => StrUnits::from_slice(units),
        };
        let k = self.add_constant(Constant::String(units), span)?;
        self.str_map.fill(slot, k);
        Ok(k)
    }

    /// Whether constant `k` is the string of `units`.
    #[inline]
    fn is_string(&self, k: u16, units: &[u16]) -> bool {
        matches!(self.constants.get(k as usize), Some(Constant::String(s)) if s.as_slice() == units)
    }

    /// [`Self::str_const_slice`] when the slot of `units` holds another string: by the keyed maps
    /// (`ascii`: the string's bytes, when it is ASCII and the caller has them).
    fn str_const_keyed(&mut self, units: &[u16], ascii: Option<&[u8]>, span: Span) -> R<u16> {
        let (hash, collided) = match self.str_map.keyed().find(units, ascii, &self.constants) {
            Ok(k) => return Ok(k),
            Err(miss) => miss,
        };
        let k = self.add_constant(Constant::String(StrUnits::from_slice(units)), span)?;
        self.str_map.keyed().insert(hash, collided, units, k);
        Ok(k)
    }

    fn str_const_units(&mut self, units: Vec<u16>, span: Span) -> R<u16> {
        self.str_const_cow(Cow::Owned(units), span)
    }

    fn str_const(&mut self, s: &str, span: Span) -> R<u16> {
        let Some(h) = ascii_hash(s) else {
            // encoded into the scratch buffer: a constant seen before costs no allocation
            let mut units = std::mem::take(&mut self.bufs.units);
            units.clear();
            units.reserve(s.len());
            for u in s.encode_utf16() {
                units.push(u);
            }
            let r = self.str_const_slice(&units, span);
            self.bufs.units = units;
            return r;
        };
        // An ASCII string is looked up by its bytes (not encoded first), and a new one is widened
        // straight into its constant (~130 instructions less per new string than encoding it
        // into the scratch buffer, copying that and probing twice: ~15 k per compile of the 8 KB
        // agent).
        let bytes = s.as_bytes();
        let mut slot = self.str_map.slot(h);
        for second in [false, true] {
            if second {
                slot = self.str_map.second_slot(h);
            }
            match self.str_map.slots.get(slot).copied() {
                Some(NO_STRING) => {
                    let k = self.add_constant(Constant::String(widen(bytes)), span)?;
                    self.str_map.fill(slot, k);
                    return Ok(k);
                }
                Some(k) if is_ascii_constant(self.constants.get(k as usize), bytes) => {
                    return Ok(k)
                }
                _ => {}
            }
        }
        // both slots hold other strings: the keyed maps, in one probe
        let keyed = self.str_map.keyed();
        let hash = keyed.hash(&[], Some(bytes));
        match keyed.by_hash.entry(hash) {
            Entry::Vacant(e) => {
                if self.constants.len() >= MAX_CONSTANTS {
                    return fail(span, "too many constants (more than 65535)");
                }
                self.constants.push(Constant::String(widen(bytes)));
                let k = (self.constants.len() - 1) as u16;
                e.insert(k);
                Ok(k)
            }
            Entry::Occupied(e)
                if is_ascii_constant(self.constants.get(*e.get() as usize), bytes) =>
            {
                Ok(*e.get())
            }
            Entry::Occupied(_) => {
                // another string has its keyed hash: the units way, by the map of such strings
                let mut units = std::mem::take(&mut self.bufs.units);
                units.clear();
                units.extend(bytes.iter().map(|&b| u16::from(b)));
                let r = self.str_const_keyed(&units, Some(bytes), span);
                self.bufs.units = units;
                r
            }
        }
    }

    /// (An inline hint: a call of its own cost ~1 k instructions per compile of the 8 KB agent;
    /// forced inline everywhere, 5 more per Eval snippet.)
    #[inline]
    fn num_reg(&mut self, v: f64, span: Span) -> R<u16> {
        let k = self.num_const(v, span)?;
        self.special(SpecialKey::Const(k), span)
    }

    fn enter(&mut self, span: Span) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return fail(
                span,
                format!("nesting too deep (more than {MAX_NESTING} levels)"),
            );
        }
        Ok(())
    }

    // ---------------------------------------------------------------- finishing

    /// Finishes the program of this one function (its buffers are kept for the thread's next
    /// compile).
    /// (Inlined: the lowerer, some 600 bytes, is then not copied to be finished.)
    #[inline(always)]
    fn finish(mut self, src: &str, name: &str) -> R<Program> {
        let mut spare = take_spare();
        let reuse = Reuse::from(&mut spare);
        let idx = LineIndex::new(src);
        let (function, pos) = self.finish_function(&mut idx.cursor(), name, reuse)?;
        let Lowerer {
            bufs,
            constants,
            atoms,
            ..
        } = self;
        bufs.keep();
        // the outer vectors of the recycled program, if any (what is left in them is dropped)
        let (mut functions, mut spans) = match spare {
            Some(p) => (p.functions, p.spans),
            None => (Vec::with_capacity(1), Vec::with_capacity(1)),
        };
        functions.clear();
        functions.push(function);
        spans.clear();
        spans.push(pos);
        Ok(Program {
            functions,
            constants,
            atoms,
            entry: 0,
            debug: Some(DebugInfo { spans }),
            signature: None,
        })
    }

    /// Moves out what the next function of the program continues from: the constant pool, the
    /// atoms table and the (emptied) buffers.
    fn into_pool(self) -> Pool {
        Pool {
            constants: self.constants,
            num_map: self.num_map,
            str_map: self.str_map,
            atoms: self.atoms,
            bufs: self.bufs,
        }
    }

    /// Lays the frame out, inserts the fuel charges, and returns the function and its source
    /// positions (resolved with `cursor`, on the line index of the whole source: left where
    /// this function's positions end, the next function's begin near it), built in the
    /// allocations of `reuse` where it has them.
    fn finish_function(
        &mut self,
        cursor: &mut crate::pos::Cursor<'_, '_>,
        name: &str,
        reuse: Reuse,
    ) -> R<(Function, Vec<SourcePos>)> {
        let (mut params, code) = match reuse.function {
            Some(f) => (f.params, f.code),
            None => (Vec::with_capacity(self.ext_regs.0.len()), Vec::new()),
        };
        let pos = reuse.pos.unwrap_or_default();
        let nspecial_all = self.bufs.specials.len();
        // virtual ids at or above `boundary` are specials
        let boundary = 65536 - nspecial_all as u32;
        // An operator whose right operand is a constant names the constant itself (`n - 1`
        // becomes `SubK`); a constant no instruction reads any more is not loaded at entry.
        let const_of = |v: u16| -> Option<u16> {
            match self.bufs.specials.get((u16::MAX - v) as usize) {
                Some((Special::Const(c), _)) if v as u32 >= boundary => Some(*c),
                _ => None,
            }
        };
        let constants = &self.constants;
        let int_of = |k: Const| match constants.get(k.0 as usize) {
            Some(&Constant::Number(n)) => Int::of(n),
            _ => None,
        };
        let (mut used_short, mut used_long) = ([false; SHORT_TABLE], Vec::new());
        let used = zeroed(&mut used_short, &mut used_long, nspecial_all);
        // Block leaders of the body, by index in it: every jump target, every instruction after
        // a block end (the laid-out code is [prologue][body]; the prologue has no jumps, and
        // its first instruction, or the body's when there is none, leads too). `marks[j]`: its
        // bit `LEAD` set when body instruction j leads a block, and then (below) the new index
        // of the `Charge` before it, times two (`>> 1` takes it back).
        let mut marks = std::mem::take(&mut self.bufs.marks);
        marks.clear();
        marks.resize(self.bufs.code.len(), 0);
        // one pass: constant operands, the specials read, the leaders
        for (i, (op, _)) in self.bufs.code.iter_mut().enumerate() {
            if let Some(k) = with_const_operand(op, const_of) {
                // a small integer is carried in the instruction where it can be (`i + 1`
                // is `AddI`: no constant-pool read when it runs)
                *op = k.with_int_operand(int_of).unwrap_or(k);
            }
            // (the jump target is the one `Target` operand of the instructions that have one,
            // which are those `Op::jump_target` names: found in this visit, not by another
            // match over the instruction: ~3 k instructions per compile)
            let mut seen = Seen {
                boundary,
                used: &mut *used,
                target: None,
                end: false,
            };
            op.visit(&mut seen);
            let (target, end) = (seen.target, seen.end);
            // (`ends_block`, with the jump target found once)
            if let Some(t) = target {
                if let Some(slot) = marks.get_mut(t as usize) {
                    *slot |= LEAD;
                }
            }
            // (`Jump` has a target: a terminator is that or a `Return` or `Throw`)
            if target.is_some() || end {
                if let Some(slot) = marks.get_mut(i + 1) {
                    *slot |= LEAD;
                }
            }
        }
        // final register of every special (an unused one has none: nothing names it)
        let (mut final_short, mut final_long) = ([0u16; SHORT_TABLE], Vec::new());
        let final_of = zeroed(&mut final_short, &mut final_long, nspecial_all);
        // the parameter names, written over the recycled ones where there are
        let mut next = 0u16;
        let externals = self.externals();
        for (k, (s, _)) in self.bufs.specials.iter().enumerate() {
            if let Special::Ext(i) = s {
                final_of[k] = next;
                let text = externals.get(*i).map_or("", String::as_str);
                put_name(&mut params, next as usize, text);
                next += 1;
            }
        }
        params.truncate(next as usize);
        if params.len() > u8::MAX as usize {
            return fail_at(
                0,
                "too many parameters or context keys used (more than 255)",
            );
        }
        // the prologue loads every used special that is not a parameter, in order (and the
        // constants' slots of `const_regs` are emptied for the next function)
        for (k, (s, _)) in self.bufs.specials.iter().enumerate() {
            if let Special::Const(c) = *s {
                if let Some(slot) = self.bufs.const_regs.get_mut(c as usize) {
                    *slot = None;
                }
            }
            if used[k] && !matches!(s, Special::Ext(_)) {
                final_of[k] = next;
                next += 1;
            }
        }
        // the specials given a register: the parameters, then the prologue's
        let nspecial = next as usize;
        let shift = nspecial - params.len();
        let total = shift + self.bufs.code.len();
        let used: &[bool] = used;
        let prologue = self
            .bufs
            .specials
            .iter()
            .enumerate()
            .filter_map(|(k, &(s, off))| {
                let dst = Dst(final_of[k]);
                let op = match s {
                    Special::Ext(_) => return None,
                    _ if !used[k] => return None,
                    Special::Const(c) => Op::LoadConst { dst, k: Const(c) },
                    Special::Undef => Op::LoadUndef { dst },
                    Special::Null => Op::LoadNull { dst },
                    Special::True => Op::LoadTrue { dst },
                    Special::False => Op::LoadFalse { dst },
                };
                Some((op, off))
            });
        let nregs = nspecial + self.max_top as usize;
        if nregs > u16::MAX as usize {
            return fail_at(0, "too many registers (more than 65535)");
        }
        if total > ajs_bytecode::program::MAX_CODE_LEN / 2 {
            return fail_at(0, "program too long");
        }
        let final_of: &[u16] = final_of;
        let map = |v: u16| -> u16 {
            if v as u32 >= boundary {
                final_of[(u16::MAX - v) as usize]
            } else {
                v + nspecial as u16
            }
        };
        // The code is laid out as [prologue][body] and every basic block opened by a `Charge`
        // (what `insert_charges` does), in one pass, with the new indices of the body's
        // instructions (the prologue's first opens a block: it moves by one).
        let mut n = if shift > 0 { shift as u32 + 1 } else { 0 };
        if let (0, Some(first)) = (shift, marks.first_mut()) {
            *first |= LEAD;
        }
        // (only the leaders are numbered, the jump targets among them: numbering every
        // instruction cost ~9 instructions each, 1,120.3 k -> 1,118.2 k per compile of the 8 KB
        // agent)
        for (j, slot) in marks.iter_mut().enumerate() {
            if *slot & LEAD != 0 {
                *slot |= (n + j as u32) << 1;
                n += 1;
            }
        }
        let n = n + marks.len() as u32;
        let at: &[u32] = &marks;
        let (code, pos) = (exactly(code, n as usize), exactly(pos, n as usize));
        let mut out = Layout {
            code,
            pos,
            cursor,
            charge: usize::MAX,
            amount: 0,
        };
        for (k, (op, off)) in prologue.enumerate() {
            out.push(op, off, k == 0);
        }
        let new_target = |t: u32| match at.get(t as usize) {
            Some(&new) => new >> 1,
            None => t.wrapping_add(shift as u32),
        };
        // (rewritten in place, in the body buffer emptied below: an instruction copied out first
        // is taken apart into its bytes and put back together, ~25 instructions more each; only
        // a jump is asked for its target, ~9 instructions less for each other one)
        // (the registers and the jump target in one match over the instruction: asking each jump
        // for its target again, by a mark of its own, cost ~4 k instructions per compile)
        for ((op, off), &mark) in self.bufs.code.iter_mut().zip(at) {
            op.map_registers_and_target(&map, &new_target);
            out.push(*op, *off, mark & LEAD != 0);
        }
        let (code, pos) = out.finish();
        self.bufs.marks = marks;
        let function = Function {
            name: CompactString::from(name),
            params,
            nregs: nregs as u16,
            code,
        };
        // the calling convention the VM relies on: a callee's registers start at its arguments,
        // over the caller's registers from there up, which are temporaries (a stack) dead
        // across the call (checked in debug builds and with the `check-calls` feature, which
        // the test command turns on)
        #[cfg(any(debug_assertions, feature = "check-calls"))]
        if let Some((pc, r)) = function.call_clobber() {
            panic!(
                "compiler bug: in {name}, r{r} is read after the call at {pc}, which overwrote it"
            );
        }
        self.bufs.code.clear();
        self.bufs.specials.clear();
        self.bufs.names.0.clear();
        // (the scopes still open are emptied: the closed ones are empty already, emptied by
        // `pop_scope`; not visiting them all again saves ~45 instructions per function of the
        // 8 KB agent)
        for sc in self.bufs.scopes.iter_mut().take(self.bufs.nscopes) {
            sc.vars.clear();
            sc.pending.clear();
            sc.is_top = false;
        }
        self.bufs.nscopes = 0;
        Ok((function, pos))
    }

    // ---------------------------------------------------------------- names

    fn lookup_local(&self, name: &str, span: Span) -> R<Option<(u16, bool)>> {
        // (no variable's text, no variable, and no key computed: an Eval expression's names;
        // an identifier is never empty)
        if self.bufs.names.0.is_empty() {
            return Ok(None);
        }
        let names = &self.bufs.names;
        let probe = Probe::new(name);
        for sc in self.bufs.open_scopes().iter().rev() {
            if let Some(v) = sc.vars.iter().rev().find(|v| names.is(v.name, probe)) {
                return Ok(Some((v.reg, v.is_const)));
            }
            if sc.pending.iter().any(|&p| names.is(p, probe)) {
                return fail(span, format!("Cannot access '{name}' before initialization (it is declared later in this block)"));
            }
        }
        Ok(None)
    }

    fn param_index(&self, name: &str) -> Option<usize> {
        if self.opts.mode == Mode::FunctionBody {
            self.externals().iter().rposition(|p| p == name)
        } else {
            None
        }
    }

    /// True when `name` is neither a local nor a parameter (so a builtin or atom of that name is meant).
    fn is_global(&self, name: &str) -> bool {
        let names = &self.bufs.names;
        let probe = Probe::new(name);
        let local = self.bufs.open_scopes().iter().any(|sc| {
            sc.vars.iter().any(|v| names.is(v.name, probe))
                || sc.pending.iter().any(|&p| names.is(p, probe))
        });
        !local && self.param_index(name).is_none()
    }

    /// Resolves a name to a variable or external register; errors for everything else.
    fn resolve(&mut self, name: &str, span: Span) -> R<Resolved> {
        if forbidden(name) {
            return fail(span, forbidden_msg(name));
        }
        if let Some((reg, is_const)) = self.lookup_local(name, span)? {
            return Ok(Resolved::Local { reg, is_const });
        }
        if let Some(i) = self.param_index(name) {
            if let Some(r) = self.ext_regs.get(i) {
                return Ok(Resolved::Ext(r));
            }
        }
        if is_builtin_name(name) {
            return fail(
                span,
                format!("'{name}' is a builtin and cannot be used as a value here"),
            );
        }
        if let Some(m) = unsupported_builtin(name) {
            return fail(span, m);
        }
        if self.opts.mode == Mode::Eval {
            if let Some(i) = self.opts.externals.iter().position(|k| k == name) {
                if let Some(r) = self.ext_regs.get(i) {
                    return Ok(Resolved::Ext(r));
                }
                let r = self.new_special(Special::Ext(i), span.start)?;
                self.ext_regs.insert(i, r);
                return Ok(Resolved::Ext(r));
            }
        }
        if self.opts.atoms.iter().any(|a| a == name) {
            return fail(
                span,
                format!("'{name}' is an atom: call it, e.g. {name}({{ ... }})"),
            );
        }
        fail(span, format!("'{name}' is not defined"))
    }

    /// The register holding identifier `id`'s value. (Always inlined into its two callers: a
    /// call of its own per identifier read cost ~6 k instructions per compile of the 8 KB agent.)
    #[inline(always)]
    fn read_ident(&mut self, id: &IdentifierReference) -> R<u16> {
        let name = id.name.as_str();
        // (the name first: the scope search only for these three)
        if matches!(name, "undefined" | "NaN" | "Infinity") && self.is_global(name) {
            match name {
                "undefined" => return self.special(SpecialKey::Undef, id.span),
                "NaN" => return self.num_reg(f64::NAN, id.span),
                _ => return self.num_reg(f64::INFINITY, id.span),
            }
        }
        match self.resolve(name, id.span)? {
            Resolved::Local { reg, .. } | Resolved::Ext(reg) => Ok(reg),
        }
    }

    /// Declares a block-scoped variable in the innermost scope and allocates its register.
    /// (`probe`: the name's, which [`Self::bind`] takes too: its key is computed once.)
    fn declare(&mut self, probe: Probe, span: Span) -> R<u16> {
        let name = probe.name;
        if forbidden(name) {
            return fail(span, forbidden_msg(name));
        }
        let is_top = self.bufs.open_scopes().last().is_some_and(|s| s.is_top);
        let dup = self
            .bufs
            .open_scopes()
            .last()
            .is_some_and(|s| s.vars.iter().any(|v| self.bufs.names.is(v.name, probe)))
            || (is_top && self.param_index(name).is_some());
        if dup {
            return fail(
                span,
                format!("Identifier '{name}' has already been declared"),
            );
        }
        let reg = self.alloc(span)?;
        Ok(reg)
    }

    /// Binds `name` to `reg` in the innermost scope, where it is no longer pending. A pending
    /// name's text, added by [`Self::block_scope`], serves the variable too (not copied into
    /// the names a second time), and the pending list, only ever searched, loses it by a swap
    /// rather than a shift (~3 k instructions per compile of the 8 KB agent, with the copy).
    fn bind(&mut self, probe: Probe, reg: u16, is_const: bool) {
        let names = &mut self.bufs.names;
        let Some(sc) = self
            .bufs
            .nscopes
            .checked_sub(1)
            .and_then(|k| self.bufs.scopes.get_mut(k))
        else {
            return;
        };
        let n = match sc.pending.iter().position(|&p| names.is(p, probe)) {
            Some(p) => sc.pending.swap_remove(p),
            None => names.add(probe),
        };
        sc.vars.push(Var {
            name: n,
            reg,
            is_const,
        });
    }

    // ---------------------------------------------------------------- statements

    /// Opens a new innermost scope, empty (one used before, when there is one: its vectors are
    /// reused).
    fn open_scope(&mut self) -> &mut Scope {
        self.bufs.open_scope()
    }

    /// Closes the innermost scope, keeping its vectors for the next.
    fn pop_scope(&mut self) {
        if let Some(k) = self.bufs.nscopes.checked_sub(1) {
            self.bufs.nscopes = k;
            if let Some(sc) = self.bufs.scopes.get_mut(k) {
                sc.vars.clear();
                sc.pending.clear();
                sc.is_top = false;
            }
        }
    }

    /// Opens a new innermost scope for the block `stmts`, its let/const names pending.
    fn open_block_scope(&mut self, stmts: &[Statement]) -> &mut Scope {
        let bufs = &mut self.bufs;
        let scope = bufs.open_scope_at();
        let (scopes, names) = (&mut bufs.scopes, &mut bufs.names);
        let scope = &mut scopes[scope];
        for s in stmts {
            if let Statement::VariableDeclaration(d) = s {
                for decl in &d.declarations {
                    if let BindingPattern::BindingIdentifier(b) = &decl.id {
                        scope.pending.push(names.add(Probe::new(b.name.as_str())));
                    }
                }
            }
        }
        scope
    }

    fn block(&mut self, stmts: &[Statement], top: bool, _span: Span) -> R<()> {
        let mark = self.top;
        self.open_block_scope(stmts).is_top = top;
        let r = stmts.iter().try_for_each(|s| self.stmt(s));
        self.pop_scope();
        self.top = mark;
        r
    }

    /// Lowers statement `s`, one level deeper. (Its span is found once, here, and handed on:
    /// each `span()` is a call into oxc.)
    fn stmt(&mut self, s: &Statement) -> R<()> {
        let span = s.span();
        self.enter(span)?;
        let r = self.stmt_inner(s, span);
        self.depth -= 1;
        r
    }

    /// [`Self::stmt`] of `s`, whose span is `span`.
    fn stmt_inner(&mut self, s: &Statement, span: Span) -> R<()> {
        match s {
            Statement::EmptyStatement(_) => Ok(()),
            Statement::BlockStatement(b) => self.block(&b.body, false, b.span),
            Statement::ExpressionStatement(e) => {
                let mark = self.top;
                let r = self.expr_stmt(&e.expression);
                self.top = mark;
                r
            }
            Statement::VariableDeclaration(d) => self.var_decl(d),
            Statement::IfStatement(i) => {
                let jf = self.cond_jump(&i.test, false)?;
                self.sub_stmt(&i.consequent)?;
                if let Some(alt) = &i.alternate {
                    let je = self.emit_jump(Op::Jump { target: Target(0) }, alt.span());
                    self.patch_all_here(&jf);
                    self.sub_stmt(alt)?;
                    self.patch_here(je);
                } else {
                    self.patch_all_here(&jf);
                }
                Ok(())
            }
            Statement::WhileStatement(w) => {
                // The test runs at the top once, then at the bottom of every iteration (a copy
                // of its instructions), so that an iteration is one block: `body; test;
                // JumpIfTrue body`. A test too long or with jumps leaving it is not copied: the
                // bottom then jumps back to it.
                //
                // A test of `&&`, `||` and `!` is lowered as branches (`cond_jump`) and lowered
                // again at the bottom, branching back to the body, when it is as short.
                let start = self.here();
                let logical = is_logical(&w.test);
                let mark = self.top;
                let (jf, c, test_end, cmp) = if logical {
                    (self.cond_jump(&w.test, false)?, 0, 0, None)
                } else {
                    let c = self.expr(&w.test)?;
                    let test_end = self.here();
                    let (jf, cmp) = self.emit_branch(c, mark, start, false, 0, w.test.span());
                    (one_jump(jf), c, test_end, cmp)
                };
                let test_len = self.here() - start;
                // (a fused test's comparison is not copied: it is fused again at the bottom)
                let (copied_end, cmp_span) = match cmp {
                    Some(_) => (test_end - 1, self.bufs.code[jf[0]].1),
                    None => (test_end, 0),
                };
                self.top = mark;
                let body = self.here();
                self.loops.push(LoopCtx { breaks: Vec::new(), continues: Vec::new(), try_depth: self.try_depth });
                let r = self.sub_stmt(&w.body);
                let ctx = self.loops.pop();
                r?;
                let bottom = self.here();
                let to = if logical && test_len as usize <= MAX_COPIED_TEST {
                    for j in self.cond_jump(&w.test, true)? {
                        self.patch(j, body);
                    }
                    bottom
                } else if !logical && self.copy_test(start, copied_end) {
                    match cmp.and_then(|cmp| cmp.fused_branch(c, true, body)) {
                        Some(fused) => {
                            self.bufs.code.push((fused, cmp_span));
                        }
                        None => self.emit(Op::JumpIfTrue { cond: Src(c), target: Target(body) }, w.test.span()),
                    }
                    bottom
                } else {
                    self.emit(Op::Jump { target: Target(start) }, w.span);
                    start
                };
                self.patch_all_here(&jf);
                if let Some(ctx) = ctx {
                    for b in ctx.breaks {
                        self.patch_here(b);
                    }
                    for j in ctx.continues {
                        self.patch(j, to);
                    }
                }
                Ok(())
            }
            Statement::BreakStatement(b) => {
                if b.label.is_some() {
                    return fail(span, "labels are not supported in AJS; use a flag variable with `break`");
                }
                let Some(depth) = self.loops.last().map(|l| l.try_depth) else {
                    return fail(span, "`break` outside a `while` loop");
                };
                for _ in depth..self.try_depth {
                    self.emit(Op::TryExit {}, span);
                }
                let j = self.emit_jump(Op::Jump { target: Target(0) }, span);
                if let Some(l) = self.loops.last_mut() {
                    l.breaks.push(j);
                }
                Ok(())
            }
            Statement::ContinueStatement(c) => {
                if c.label.is_some() {
                    return fail(span, "labels are not supported in AJS; use a flag variable with `continue`");
                }
                let Some(depth) = self.loops.last().map(|l| l.try_depth) else {
                    return fail(span, "`continue` outside a `while` loop");
                };
                for _ in depth..self.try_depth {
                    self.emit(Op::TryExit {}, span);
                }
                let j = self.emit_jump(Op::Jump { target: Target(0) }, span);
                if let Some(l) = self.loops.last_mut() {
                    l.continues.push(j);
                }
                Ok(())
            }
            Statement::ReturnStatement(r) if !self.callbacks.is_empty() => {
                let mark = self.top;
                let res = self.callback_return(r.argument.as_ref(), span);
                self.top = mark;
                res
            }
            Statement::ReturnStatement(r) => {
                let mark = self.top;
                let reg = match &r.argument {
                    Some(e) => self.expr(e)?,
                    None => self.special(SpecialKey::Undef, span)?,
                };
                self.emit(Op::Return { src: Src(reg) }, span);
                self.top = mark;
                Ok(())
            }
            Statement::TryStatement(t) => self.try_stmt(t),
            Statement::ForStatement(_) => fail(span, format!("Unsupported statement type: ForStatement. {FOR_MSG}")),
            Statement::ForInStatement(_) => fail(
                span,
                "Unsupported statement type: ForInStatement. AJS has no `for...in`. Get the keys and walk them with `while`: let ks = keys({ obj: data }) / let i = 0 / while (i < ks.length) { ... i = i + 1 }",
            ),
            Statement::ForOfStatement(_) => fail(
                span,
                "Unsupported statement type: ForOfStatement. AJS has no `for...of`. Use `while` with a counter: let i = 0 / while (i < items.length) { const x = items[i] ... i = i + 1 }",
            ),
            Statement::SwitchStatement(_) => fail(
                span,
                "Unsupported statement type: SwitchStatement. AJS has no `switch`. Use `if`/`else if`: if (x == 'a') { ... } else if (x == 'b') { ... } else { ... }",
            ),
            Statement::DoWhileStatement(_) => fail(
                span,
                "Unsupported statement type: DoWhileStatement. AJS has no `do...while`. Use `while`, running the body check first: let go = true / while (go) { ... go = condition }",
            ),
            Statement::ThrowStatement(_) => {
                fail(span, "'throw' is not supported in AsyncJS. Use Error('message') to trigger error flow")
            }
            Statement::LabeledStatement(_) => {
                fail(span, "Unsupported statement type: LabeledStatement. AJS has no labels; use a flag variable with `break`")
            }
            Statement::DebuggerStatement(_) => fail(span, "Unsupported statement type: DebuggerStatement. Remove the `debugger` statement"),
            Statement::WithStatement(_) => fail(span, "Unsupported statement type: WithStatement. AJS has no `with`; name the object explicitly"),
            Statement::FunctionDeclaration(f) => {
                if f.generator {
                    return fail(span, "generators are not supported in AJS");
                }
                if f.r#async {
                    return fail(span, "async functions are not supported in AJS: atom calls look synchronous, write `let r = httpFetch({...})`");
                }
                fail(span, "Unsupported statement type: FunctionDeclaration. AJS has no nested functions; write the code inline (arrow functions are only allowed as callback arguments, e.g. items.map(x => x * 2))")
            }
            Statement::ClassDeclaration(_) => {
                fail(span, "Unsupported statement type: ClassDeclaration. Classes are not supported. AJS uses plain objects and functions")
            }
            Statement::ImportDeclaration(_) => fail(span, "Imports are not supported. All atoms must be registered with the VM."),
            Statement::ExportAllDeclaration(_) | Statement::ExportDefaultDeclaration(_) | Statement::ExportNamedDeclaration(_) => {
                fail(span, "Exports are not supported.")
            }
            _ => fail(span, "unsupported statement"),
        }
    }

    /// A statement in a position that is not a block of its own (if/while bodies).
    fn sub_stmt(&mut self, s: &Statement) -> R<()> {
        let mark = self.top;
        self.open_scope();
        let r = self.stmt(s);
        self.pop_scope();
        self.top = mark;
        r
    }

    fn var_decl(&mut self, d: &VariableDeclaration) -> R<()> {
        let is_const = match d.kind {
            VariableDeclarationKind::Let => false,
            VariableDeclarationKind::Const => true,
            VariableDeclarationKind::Var => {
                return fail(
                    d.span,
                    "AJS has no `var`; use `let` (or `const` for a value that never changes)",
                )
            }
            _ => {
                return fail(
                    d.span,
                    "`using` declarations are not supported; use `let` or `const`",
                )
            }
        };
        for decl in &d.declarations {
            let b = match &decl.id {
                BindingPattern::BindingIdentifier(b) => b,
                pattern => {
                    let Some(init) = &decl.init else {
                        return fail(
                            decl.span,
                            "a destructuring declaration needs a value: let { a } = obj",
                        );
                    };
                    self.destructuring_decl(pattern, init, is_const)?;
                    continue;
                }
            };
            let name = b.name.as_str();
            let probe = Probe::new(name);
            let reg = self.declare(probe, b.span)?;
            let mark = self.top;
            match &decl.init {
                Some(init) => self.expr_to(init, reg)?,
                None if is_const => {
                    return fail(
                        decl.span,
                        format!("Missing initializer in const declaration '{name}'"),
                    )
                }
                None => self.emit(Op::LoadUndef { dst: Dst(reg) }, decl.span),
            }
            self.top = mark;
            self.bind(probe, reg, is_const);
        }
        Ok(())
    }

    fn try_stmt(&mut self, t: &TryStatement) -> R<()> {
        if let Some(f) = &t.finalizer {
            return fail(
                f.span,
                "`finally` is not supported in AJS; put the cleanup code after the try/catch",
            );
        }
        let Some(handler) = &t.handler else {
            return fail(t.span, "`try` needs a `catch` block in AJS");
        };
        let enter = self.emit_jump(Op::TryEnter { handler: Target(0) }, t.span);
        self.try_depth += 1;
        let r = self.block(&t.block.body, false, t.block.span);
        self.try_depth -= 1;
        r?;
        self.emit(Op::TryExit {}, t.block.span);
        let jend = self.emit_jump(Op::Jump { target: Target(0) }, t.block.span);
        self.patch_here(enter);
        // the catch body scope holds the catch parameter
        let mark = self.top;
        self.open_block_scope(&handler.body.body);
        let r = (|| {
            match &handler.param {
                Some(p) => {
                    let BindingPattern::BindingIdentifier(b) = &p.pattern else {
                        return fail(p.span, "destructuring a caught error is not supported; the error is its message string: catch (e) { ... }");
                    };
                    let name = b.name.as_str();
                    let probe = Probe::new(name);
                    let reg = self.declare(probe, b.span)?;
                    self.emit(Op::Catch { dst: Dst(reg) }, handler.span);
                    self.bind(probe, reg, false);
                }
                None => {
                    let reg = self.alloc(handler.span)?;
                    self.emit(Op::Catch { dst: Dst(reg) }, handler.span);
                }
            }
            handler.body.body.iter().try_for_each(|s| self.stmt(s))
        })();
        self.pop_scope();
        self.top = mark;
        r?;
        self.patch_here(jend);
        Ok(())
    }

    fn expr_stmt(&mut self, e: &Expression) -> R<()> {
        match e.without_parentheses() {
            Expression::AssignmentExpression(a) => self.assign(a),
            Expression::UpdateExpression(u) => self.update(u),
            e => {
                self.expr(e)?;
                Ok(())
            }
        }
    }

    /// The register of an assignable variable.
    fn assign_target(&mut self, id: &IdentifierReference) -> R<u16> {
        let name = id.name.as_str();
        self.check_callback_write(name, id.span)?;
        // (the name first: the scopes are searched only for these three)
        if !matches!(name, "undefined" | "NaN" | "Infinity") || !self.is_global(name) {
            match self.resolve(name, id.span) {
                Ok(Resolved::Local { is_const: true, .. }) => {
                    fail(id.span, format!("Assignment to constant variable '{name}'"))
                }
                Ok(Resolved::Local { reg, .. } | Resolved::Ext(reg)) => Ok(reg),
                Err(e) if is_builtin_name(name) => {
                    fail_at(e.offset, format!("Cannot assign to builtin '{name}'"))
                }
                Err(e) => Err(e),
            }
        } else {
            fail(id.span, format!("Cannot assign to builtin '{name}'"))
        }
    }

    fn simple_target(&mut self, t: &SimpleAssignmentTarget, span: Span) -> R<u16> {
        match t {
            SimpleAssignmentTarget::AssignmentTargetIdentifier(id) => self.assign_target(id),
            t if t.as_member_expression().is_some() => fail(
                span,
                "AJS has no member assignment (`o.k = v`, `a[i] = v`). Build a new object or array instead, e.g. o = { ...o, k: v }, or use arr.push(v)",
            ),
            _ => fail(span, "unsupported assignment target"),
        }
    }

    fn assign(&mut self, a: &AssignmentExpression) -> R<()> {
        let reg = match &a.left {
            AssignmentTarget::ArrayAssignmentTarget(_)
            | AssignmentTarget::ObjectAssignmentTarget(_) => {
                return fail(
                    a.span,
                    "destructuring assignment is not supported; assign each variable on its own",
                );
            }
            t => match t.as_simple_assignment_target() {
                Some(st) => self.simple_target(st, a.left.span())?,
                None => return fail(a.span, "unsupported assignment target"),
            },
        };
        let rhs = &a.right;
        if let Expression::AssignmentExpression(_) = rhs.without_parentheses() {
            return fail(rhs.span(), "chained assignment (a = b = 1) is not supported in AJS; assign each variable in its own statement");
        }
        let op = a.operator;
        let arith = |dst: Dst, a: Src, b: Src| -> Option<Op> {
            Some(match op {
                AssignmentOperator::Addition => Op::Add { dst, a, b },
                AssignmentOperator::Subtraction => Op::Sub { dst, a, b },
                AssignmentOperator::Multiplication => Op::Mul { dst, a, b },
                AssignmentOperator::Division => Op::Div { dst, a, b },
                AssignmentOperator::Remainder => Op::Mod { dst, a, b },
                AssignmentOperator::Exponential => Op::Pow { dst, a, b },
                _ => return None,
            })
        };
        match op {
            AssignmentOperator::Assign => self.expr_to_var(rhs, reg),
            AssignmentOperator::LogicalAnd
            | AssignmentOperator::LogicalOr
            | AssignmentOperator::LogicalNullish => {
                let j = match op {
                    AssignmentOperator::LogicalAnd => Op::JumpIfFalse {
                        cond: Src(reg),
                        target: Target(0),
                    },
                    AssignmentOperator::LogicalOr => Op::JumpIfTrue {
                        cond: Src(reg),
                        target: Target(0),
                    },
                    _ => Op::JumpIfNotNullish {
                        src: Src(reg),
                        target: Target(0),
                    },
                };
                let j = self.emit_jump(j, a.span);
                self.expr_to_var(rhs, reg)?;
                self.patch_here(j);
                Ok(())
            }
            _ => {
                let Some(_) = arith(Dst(0), Src(0), Src(0)) else {
                    return fail(
                        a.span,
                        format!("the '{}' operator is not supported in AJS", op.as_str()),
                    );
                };
                let mark = self.top;
                let r = self.expr(rhs)?;
                if let Some(o) = arith(Dst(reg), Src(reg), Src(r)) {
                    self.emit(o, a.span);
                }
                self.top = mark;
                Ok(())
            }
        }
    }

    /// Evaluates `e` into a variable's register, through a temporary when `e` writes its
    /// destination before it has read everything (logical, conditional, literals, chains).
    fn expr_to_var(&mut self, e: &Expression, reg: u16) -> R<()> {
        let direct = matches!(
            e.without_parentheses(),
            Expression::BinaryExpression(_)
                | Expression::UnaryExpression(_)
                | Expression::Identifier(_)
                | Expression::NumericLiteral(_)
                | Expression::StringLiteral(_)
                | Expression::BooleanLiteral(_)
                | Expression::NullLiteral(_)
                | Expression::TemplateLiteral(_)
                | Expression::StaticMemberExpression(_)
                | Expression::ComputedMemberExpression(_)
                | Expression::CallExpression(_)
        );
        let mark = self.top;
        if direct {
            self.expr_to(e, reg)?;
        } else {
            let t = self.alloc(e.span())?;
            self.expr_to(e, t)?;
            self.emit(
                Op::Move {
                    dst: Dst(reg),
                    src: Src(t),
                },
                e.span(),
            );
        }
        self.top = mark;
        Ok(())
    }

    fn update(&mut self, u: &UpdateExpression) -> R<()> {
        let reg = self.simple_target(&u.argument, u.span)?;
        // x - (-1) converts to a number like ++ does (x + 1 would concatenate strings)
        let k = self.num_reg(
            if u.operator == UpdateOperator::Increment {
                -1.0
            } else {
                1.0
            },
            u.span,
        )?;
        self.emit(
            Op::Sub {
                dst: Dst(reg),
                a: Src(reg),
                b: Src(k),
            },
            u.span,
        );
        Ok(())
    }

    // ---------------------------------------------------------------- expressions

    /// A register holding the value of `e`: a variable's, a constant's, or a new temporary (the
    /// caller resets `top` when done).
    ///
    /// (The span is found once, here, and handed on: each `span()` is a call into oxc.)
    fn expr(&mut self, e: &Expression) -> R<u16> {
        // (an identifier, the usual operand, is read here, without its span (a call into oxc)
        // or the depth's update: it nests nothing, and `enter` would refuse it only at the
        // depth limit, where it goes the general way; 1,140.3 k -> 1,139.1 k instructions per
        // compile of the 8 KB agent, tiny 4,396 -> 4,376. The same in `expr_to_at` cost 3.8 k.)
        if let Expression::Identifier(id) = e {
            if self.depth < MAX_NESTING {
                return self.read_ident(id);
            }
        }
        self.expr_general(e)
    }

    /// [`Self::expr`] of any expression. (Inline: out of line, with `expr` a small function of
    /// its own, the compile of the 8 KB agent took ~2.3 k instructions more.)
    #[inline]
    fn expr_general(&mut self, e: &Expression) -> R<u16> {
        let span = e.span();
        self.enter(span)?;
        let r = self.expr_inner(e, span);
        self.depth -= 1;
        r
    }

    /// [`Self::expr`] of `e`, whose span is `span`.
    fn expr_inner(&mut self, e: &Expression, span: Span) -> R<u16> {
        match e {
            Expression::Identifier(id) => return self.read_ident(id),
            Expression::NumericLiteral(n) => return self.num_reg(n.value, n.span),
            Expression::StringLiteral(s) => return self.string_lit_reg(s),
            Expression::BooleanLiteral(b) => {
                return self.special(
                    if b.value {
                        SpecialKey::True
                    } else {
                        SpecialKey::False
                    },
                    b.span,
                )
            }
            Expression::NullLiteral(n) => return self.special(SpecialKey::Null, n.span),
            Expression::ParenthesizedExpression(p) => return self.expr(&p.expression),
            Expression::UnaryExpression(u) if u.operator == UnaryOperator::UnaryNegation => {
                if let Expression::NumericLiteral(n) = u.argument.without_parentheses() {
                    return self.num_reg(-n.value, u.span);
                }
            }
            Expression::StaticMemberExpression(m) => {
                if let Some(v) = self.math_constant(&m.object, m.property.name.as_str(), m.span)? {
                    return self.num_reg(v, m.span);
                }
            }
            _ => {}
        }
        let t = self.alloc(span)?;
        self.expr_to_at(e, t, span)?;
        Ok(t)
    }

    /// The constant of a string literal.
    fn str_lit_const(&mut self, s: &StringLiteral, span: Span) -> R<u16> {
        if s.lone_surrogates {
            self.str_const_units(string_units(s), span)
        } else {
            self.str_const(s.value.as_str(), span)
        }
    }

    fn string_lit_reg(&mut self, s: &StringLiteral) -> R<u16> {
        let k = self.str_lit_const(s, s.span)?;
        self.special(SpecialKey::Const(k), s.span)
    }

    /// Evaluates `e` into `dst` (which the caller owns; it may be written before `e` is done).
    fn expr_to(&mut self, e: &Expression, dst: u16) -> R<()> {
        self.expr_to_at(e, dst, e.span())
    }

    /// [`Self::expr_to`] of `e`, whose span (found once by the caller and handed on: each
    /// `span()` is a call into oxc) is `span`.
    fn expr_to_at(&mut self, e: &Expression, dst: u16, span: Span) -> R<()> {
        self.enter(span)?;
        let r = self.expr_to_inner(e, dst, span);
        self.depth -= 1;
        r
    }

    /// [`Self::expr_to`] of `e`, whose span is `span`, one level deeper already.
    fn expr_to_inner(&mut self, e: &Expression, dst: u16, span: Span) -> R<()> {
        let d = Dst(dst);
        match e {
            Expression::NumericLiteral(n) => {
                let k = self.num_const(n.value, span)?;
                self.emit(Op::LoadConst { dst: d, k: Const(k) }, span);
            }
            Expression::StringLiteral(s) => {
                let k = self.str_lit_const(s, span)?;
                self.emit(Op::LoadConst { dst: d, k: Const(k) }, span);
            }
            Expression::BooleanLiteral(b) => {
                self.emit(if b.value { Op::LoadTrue { dst: d } } else { Op::LoadFalse { dst: d } }, span)
            }
            Expression::NullLiteral(_) => self.emit(Op::LoadNull { dst: d }, span),
            Expression::Identifier(id) => {
                let r = self.read_ident(id)?;
                if r != dst {
                    self.emit(Op::Move { dst: d, src: Src(r) }, span);
                }
            }
            Expression::ParenthesizedExpression(p) => self.expr_to(&p.expression, dst)?,
            Expression::BinaryExpression(b) => {
                let mark = self.top;
                let a = self.expr(&b.left)?;
                let c = self.expr(&b.right)?;
                let (a, c) = (Src(a), Src(c));
                let op = match b.operator {
                    BinaryOperator::Addition => Op::Add { dst: d, a, b: c },
                    BinaryOperator::Subtraction => Op::Sub { dst: d, a, b: c },
                    BinaryOperator::Multiplication => Op::Mul { dst: d, a, b: c },
                    BinaryOperator::Division => Op::Div { dst: d, a, b: c },
                    BinaryOperator::Remainder => Op::Mod { dst: d, a, b: c },
                    BinaryOperator::Exponential => Op::Pow { dst: d, a, b: c },
                    BinaryOperator::Equality => Op::Eq { dst: d, a, b: c },
                    BinaryOperator::Inequality => Op::Ne { dst: d, a, b: c },
                    BinaryOperator::StrictEquality => Op::StrictEq { dst: d, a, b: c },
                    BinaryOperator::StrictInequality => Op::StrictNe { dst: d, a, b: c },
                    BinaryOperator::LessThan => Op::Lt { dst: d, a, b: c },
                    BinaryOperator::LessEqualThan => Op::Le { dst: d, a, b: c },
                    BinaryOperator::GreaterThan => Op::Gt { dst: d, a, b: c },
                    BinaryOperator::GreaterEqualThan => Op::Ge { dst: d, a, b: c },
                    other => {
                        return fail(span, format!("the '{}' operator is not supported in AJS", other.as_str()));
                    }
                };
                self.emit(op, span);
                self.top = mark;
            }
            Expression::PrivateInExpression(_) => return fail(span, "the 'in' operator is not supported in AJS"),
            Expression::LogicalExpression(l) => {
                self.expr_to(&l.left, dst)?;
                let j = match l.operator {
                    LogicalOperator::And => Op::JumpIfFalse { cond: Src(dst), target: Target(0) },
                    LogicalOperator::Or => Op::JumpIfTrue { cond: Src(dst), target: Target(0) },
                    LogicalOperator::Coalesce => Op::JumpIfNotNullish { src: Src(dst), target: Target(0) },
                };
                let j = self.emit_jump(j, span);
                self.expr_to(&l.right, dst)?;
                self.patch_here(j);
            }
            Expression::ConditionalExpression(c) => {
                let jf = self.cond_jump(&c.test, false)?;
                self.expr_to(&c.consequent, dst)?;
                let je = self.emit_jump(Op::Jump { target: Target(0) }, c.consequent.span());
                self.patch_all_here(&jf);
                self.expr_to(&c.alternate, dst)?;
                self.patch_here(je);
            }
            Expression::UnaryExpression(u) => {
                if u.operator == UnaryOperator::UnaryNegation {
                    if let Expression::NumericLiteral(n) = u.argument.without_parentheses() {
                        let k = self.num_const(-n.value, span)?;
                        self.emit(Op::LoadConst { dst: d, k: Const(k) }, span);
                        return Ok(());
                    }
                }
                let mark = self.top;
                let op = match u.operator {
                    UnaryOperator::UnaryNegation => Op::Neg { dst: d, src: Src(self.expr(&u.argument)?) },
                    UnaryOperator::UnaryPlus => Op::Pos { dst: d, src: Src(self.expr(&u.argument)?) },
                    UnaryOperator::LogicalNot => Op::Not { dst: d, src: Src(self.expr(&u.argument)?) },
                    UnaryOperator::Typeof => Op::TypeOf { dst: d, src: Src(self.expr(&u.argument)?) },
                    other => return fail(span, format!("the '{}' operator is not supported in AJS", other.as_str())),
                };
                self.emit(op, span);
                self.top = mark;
            }
            Expression::TemplateLiteral(t) => self.template(t, dst)?,
            Expression::ArrayExpression(a) => self.array(a, dst)?,
            Expression::ObjectExpression(o) => self.object(o, dst)?,
            Expression::StaticMemberExpression(m) => {
                if let Some(v) = self.math_constant(&m.object, m.property.name.as_str(), m.span)? {
                    let k = self.num_const(v, span)?;
                    self.emit(Op::LoadConst { dst: d, k: Const(k) }, span);
                    return Ok(());
                }
                let mark = self.top;
                let o = self.expr(&m.object)?;
                if m.optional {
                    self.chain_jump(o, span);
                }
                let key = self.str_const(m.property.name.as_str(), m.property.span)?;
                self.emit(Op::GetProp { dst: d, obj: Src(o), key: Key(key) }, span);
                self.top = mark;
            }
            Expression::ComputedMemberExpression(m) => {
                if let Expression::StringLiteral(s) = m.expression.without_parentheses() {
                    if let Some(v) = self.math_constant(&m.object, s.value.as_str(), m.span)? {
                        let k = self.num_const(v, span)?;
                        self.emit(Op::LoadConst { dst: d, k: Const(k) }, span);
                        return Ok(());
                    }
                }
                let mark = self.top;
                let o = self.expr(&m.object)?;
                if m.optional {
                    self.chain_jump(o, span);
                }
                match m.expression.without_parentheses() {
                    Expression::StringLiteral(s) => {
                        let key = self.str_lit_const(s, s.span)?;
                        self.emit(Op::GetProp { dst: d, obj: Src(o), key: Key(key) }, span);
                    }
                    k => {
                        let kr = self.expr(k)?;
                        self.emit(Op::GetIndex { dst: d, obj: Src(o), key: Src(kr) }, span);
                    }
                }
                self.top = mark;
            }
            Expression::PrivateFieldExpression(_) => return fail(span, "private fields are not supported in AJS"),
            Expression::CallExpression(c) => self.call(c, dst)?,
            Expression::ChainExpression(c) => {
                let saved = self.chain.replace(Vec::new());
                let r = match &c.expression {
                    ChainElement::CallExpression(call) => self.call(call, dst),
                    ChainElement::TSNonNullExpression(_) => fail(span, "TypeScript syntax is not supported"),
                    other => match other.as_member_expression() {
                        Some(m) => self.expr_to(m.as_expression(), dst),
                        None => fail(span, "unsupported optional chain"),
                    },
                };
                let jumps = std::mem::replace(&mut self.chain, saved).unwrap_or_default();
                r?;
                if !jumps.is_empty() {
                    let je = self.emit_jump(Op::Jump { target: Target(0) }, span);
                    for j in jumps {
                        self.patch_here(j);
                    }
                    self.emit(Op::LoadUndef { dst: d }, span);
                    self.patch_here(je);
                }
            }
            Expression::NewExpression(n) => {
                let name = match n.callee.without_parentheses() {
                    Expression::Identifier(id) => Some(id.name.as_str()),
                    _ => None,
                };
                return fail(span, new_suggestion(name));
            }
            Expression::ThisExpression(_) => {
                return fail(span, "'this' is not supported in AJS; use the variables and context values directly")
            }
            Expression::ArrowFunctionExpression(_) => return fail(span, ARROW_MSG),
            Expression::FunctionExpression(f) => {
                if f.generator {
                    return fail(span, "generators are not supported in AJS");
                }
                return fail(span, format!("function expressions are not supported in AJS; {ARROW_MSG}"));
            }
            Expression::ClassExpression(_) => return fail(span, "Classes are not supported. AJS uses plain objects"),
            Expression::AwaitExpression(_) => {
                return fail(span, "AJS has no await: atom calls look synchronous, write `let r = httpFetch({...})`")
            }
            Expression::YieldExpression(_) => return fail(span, "generators (yield) are not supported in AJS"),
            Expression::SequenceExpression(_) => {
                return fail(span, "the comma operator (sequence expression) is not supported in AJS; write separate statements")
            }
            Expression::TaggedTemplateExpression(_) => {
                return fail(span, "tagged templates are not supported in AJS; use a plain template literal `...${x}...`")
            }
            Expression::RegExpLiteral(r) => self.regex_literal(r, dst)?,
            Expression::BigIntLiteral(_) => return fail(span, "BigInt literals are not supported in AJS; use numbers"),
            Expression::AssignmentExpression(_) => {
                return fail(span, "assignment inside an expression is not supported in AJS; write the assignment as its own statement")
            }
            Expression::UpdateExpression(_) => {
                return fail(span, "'++'/'--' are only allowed as statements in AJS (i++ on its own line); inside an expression write i + 1")
            }
            Expression::Super(_) => return fail(span, "'super' is not supported in AJS"),
            Expression::ImportExpression(_) | Expression::ImportMeta(_) => {
                return fail(span, "import is not available. Atoms must be registered with the VM.")
            }
            _ => return fail(span, "unsupported expression"),
        }
        Ok(())
    }

    fn chain_jump(&mut self, obj: u16, span: Span) {
        if self.chain.is_some() {
            let j = self.emit_jump(
                Op::JumpIfNullish {
                    src: Src(obj),
                    target: Target(0),
                },
                span,
            );
            if let Some(c) = self.chain.as_mut() {
                c.push(j);
            }
        }
    }

    /// The builtin namespace `e` names, if it is a bare identifier of one not shadowed locally.
    fn namespace<'e>(&self, e: &'e Expression) -> Option<&'e str> {
        if let Expression::Identifier(id) = e.without_parentheses() {
            let n = id.name.as_str();
            if is_namespace_name(n) && self.is_global(n) {
                return Some(n);
            }
        }
        None
    }

    /// `Math.<name>` as a number; an error for other namespace members read as values.
    /// (Inline, the test that `obj` may name a namespace: most member reads are of other
    /// objects, and a call for each of them cost ~5.7 k instructions per compile of the 8 KB
    /// agent, 1,195.1 k -> 1,189.4 k.)
    #[inline(always)]
    fn math_constant(&self, obj: &Expression, name: &str, span: Span) -> R<Option<f64>> {
        match obj.without_parentheses() {
            Expression::Identifier(id) if may_be_namespace_name(id.name.as_str()) => {
                self.namespace_constant(obj, name, span)
            }
            _ => Ok(None),
        }
    }

    /// [`Self::math_constant`] of an object that may name a namespace.
    #[inline(never)]
    fn namespace_constant(&self, obj: &Expression, name: &str, span: Span) -> R<Option<f64>> {
        match self.namespace(obj) {
            None => Ok(None),
            Some("Math") => match MATH_CONSTANTS.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => Ok(Some(*v)),
                None if native_member("Math", name).is_some() => {
                    fail(span, format!("Math.{name} is a function: call it, e.g. Math.{name}(x)"))
                }
                None => fail(span, format!("Math.{name} is not supported in AsyncJS. Check docs for available Math methods.")),
            },
            Some("Number") => match NUMBER_CONSTANTS.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => Ok(Some(*v)),
                None => fail(span, namespace_member_msg("Number", name)),
            },
            Some(ns) => fail(span, namespace_member_msg(ns, name)),
        }
    }

    fn template(&mut self, t: &TemplateLiteral, dst: u16) -> R<()> {
        let span = t.span;
        // (a text part is encoded into UTF-16 when its constant is looked up: no copy unless new)
        let mut parts: SmallVec<[Result<&Expression, (&str, Span)>; 8]> = SmallVec::new();
        for (i, q) in t.quasis.iter().enumerate() {
            let Some(cooked) = &q.value.cooked else {
                return fail(q.span, "invalid escape sequence in template literal");
            };
            if !cooked.as_str().is_empty() {
                parts.push(Err((cooked.as_str(), q.span)));
            }
            if let Some(e) = t.expressions.get(i) {
                parts.push(Ok(e));
            }
        }
        if parts.len() > u8::MAX as usize {
            return fail(span, "template literal has too many parts (at most 255)");
        }
        if parts.is_empty() {
            let k = self.str_const("", span)?;
            self.emit(
                Op::LoadConst {
                    dst: Dst(dst),
                    k: Const(k),
                },
                span,
            );
            return Ok(());
        }
        let mark = self.top;
        let base = self.top;
        for _ in 0..parts.len() {
            self.alloc(span)?;
        }
        for (i, p) in parts.into_iter().enumerate() {
            let r = base + i as u16;
            match p {
                Ok(e) => self.expr_to(e, r)?,
                Err((text, sp)) => {
                    let k = self.str_const(text, sp)?;
                    self.emit(
                        Op::LoadConst {
                            dst: Dst(r),
                            k: Const(k),
                        },
                        sp,
                    );
                }
            }
        }
        let count = self.top - base;
        self.emit(
            Op::Concat {
                dst: Dst(dst),
                base: Base(base),
                count: Count(count as u8),
            },
            span,
        );
        self.top = mark;
        Ok(())
    }

    fn array(&mut self, a: &ArrayExpression, dst: u16) -> R<()> {
        let span = a.span;
        if a.elements
            .iter()
            .any(|e| matches!(e, ArrayExpressionElement::SpreadElement(_)))
        {
            return self.array_with_spread(a, dst);
        }
        let mut chunks = a.elements.chunks(u8::MAX as usize).peekable();
        let mut first = true;
        if chunks.peek().is_none() {
            self.emit(
                Op::NewArray {
                    dst: Dst(dst),
                    base: Base(self.top),
                    count: Count(0),
                },
                span,
            );
            return Ok(());
        }
        for chunk in chunks {
            let mark = self.top;
            let base = self.top;
            for _ in 0..chunk.len() {
                self.alloc(span)?;
            }
            for (i, el) in chunk.iter().enumerate() {
                let r = base + i as u16;
                match el {
                    ArrayExpressionElement::Elision(e) => {
                        self.emit(Op::LoadUndef { dst: Dst(r) }, e.span)
                    }
                    ArrayExpressionElement::SpreadElement(s) => return fail(
                        s.span,
                        "spread (...) in array literals is not supported yet; use concat or push",
                    ),
                    el => match el.as_expression() {
                        Some(e) => self.expr_to(e, r)?,
                        None => return fail(span, "unsupported array element"),
                    },
                }
            }
            let count = Count(chunk.len() as u8);
            if first {
                self.emit(
                    Op::NewArray {
                        dst: Dst(dst),
                        base: Base(base),
                        count,
                    },
                    span,
                );
                first = false;
            } else {
                self.emit(
                    Op::ArrayAppend {
                        arr: Src(dst),
                        base: Base(base),
                        count,
                    },
                    span,
                );
            }
            self.top = mark;
        }
        Ok(())
    }

    fn object(&mut self, o: &ObjectExpression, dst: u16) -> R<()> {
        self.emit(Op::NewObject { dst: Dst(dst) }, o.span);
        for p in &o.properties {
            let p = match p {
                ObjectPropertyKind::ObjectProperty(p) => p,
                ObjectPropertyKind::SpreadProperty(s) => {
                    let mark = self.top;
                    let v = self.expr(&s.argument)?;
                    self.emit(
                        Op::ObjectAssign {
                            obj: Src(dst),
                            src: Src(v),
                        },
                        s.span,
                    );
                    self.top = mark;
                    continue;
                }
            };
            if p.kind != PropertyKind::Init {
                return fail(p.span, "getters and setters are not supported in AJS object literals; use plain values");
            }
            if p.method {
                return fail(
                    p.span,
                    "methods in object literals are not supported in AJS; use plain values",
                );
            }
            if p.computed {
                let Some(ke) = p.key.as_expression() else {
                    return fail(p.key.span(), "unsupported computed key");
                };
                let mark = self.top;
                let k = self.expr(ke)?;
                let v = self.expr(&p.value)?;
                self.emit(
                    Op::InitIndex {
                        obj: Src(dst),
                        key: Src(k),
                        val: Src(v),
                    },
                    p.span,
                );
                self.top = mark;
                continue;
            }
            // a key written as a name or a plain string: no UTF-16 copy unless it is new
            let plain = match &p.key {
                PropertyKey::StaticIdentifier(id) => Some(id.name.as_str()),
                PropertyKey::StringLiteral(s) if !s.lone_surrogates => Some(s.value.as_str()),
                _ => None,
            };
            let k = if let Some(name) = plain {
                if forbidden(name) {
                    return fail(p.key.span(), forbidden_msg(name));
                }
                self.str_const(name, p.key.span())?
            } else {
                let key: Vec<u16> = match &p.key {
                    PropertyKey::StringLiteral(s) => string_units(s),
                    PropertyKey::NumericLiteral(n) => {
                        js_number_to_string(n.value).encode_utf16().collect()
                    }
                    _ => {
                        return fail(
                            p.key.span(),
                            "unsupported object key; use an identifier, string or number",
                        )
                    }
                };
                let key_str = String::from_utf16_lossy(&key);
                if forbidden(&key_str) {
                    return fail(p.key.span(), forbidden_msg(&key_str));
                }
                self.str_const_units(key, p.key.span())?
            };
            let mark = self.top;
            let v = self.expr(&p.value)?;
            self.emit(
                Op::InitProp {
                    obj: Src(dst),
                    key: Key(k),
                    val: Src(v),
                },
                p.span,
            );
            self.top = mark;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- calls

    fn call(&mut self, c: &CallExpression, dst: u16) -> R<()> {
        let span = c.span;
        if c.arguments
            .iter()
            .any(|a| matches!(a, Argument::SpreadElement(_)))
        {
            return self.call_with_spread(c, dst);
        }
        // (sized first and pushed: a collect of the filtered arguments costs ~27 instructions
        // more per call, ~3 k per compile of the 8 KB agent)
        let mut args: smallvec::SmallVec<[&Expression; 4]> =
            smallvec::SmallVec::with_capacity(c.arguments.len());
        for a in &c.arguments {
            if let Some(e) = a.as_expression() {
                args.push(e);
            }
        }
        let callee = c.callee.without_parentheses();
        match callee {
            Expression::Identifier(id) => self.call_name(id, &args, dst, span),
            Expression::StaticMemberExpression(m) => {
                self.call_method(&m.object, m.property.name.as_str(), m.optional, &args, dst, span)
            }
            Expression::ComputedMemberExpression(m) => match m.expression.without_parentheses() {
                Expression::StringLiteral(s) => self.call_method(&m.object, s.value.as_str(), m.optional, &args, dst, span),
                _ => fail(span, "computed method calls (o[k]()) are not supported in AJS; call the method by name"),
            },
            Expression::ArrowFunctionExpression(_) | Expression::FunctionExpression(_) => {
                fail(span, format!("calling a function expression is not supported in AJS; {ARROW_MSG}"))
            }
            _ => fail(span, "only atoms, builtins (e.g. Math.max) and methods (e.g. items.push) can be called in AJS"),
        }
    }

    /// The index of `name` in the program's atom table (added on first use).
    fn atom_index(&mut self, name: &str, span: Span) -> R<u16> {
        if let Some(i) = self.atoms.iter().position(|a| a == name) {
            return Ok(i as u16);
        }
        if self.atoms.len() >= u16::MAX as usize {
            return fail(span, "too many atoms");
        }
        self.atoms.push(name.to_string());
        Ok((self.atoms.len() - 1) as u16)
    }

    fn call_name(
        &mut self,
        id: &IdentifierReference,
        args: &[&Expression],
        dst: u16,
        span: Span,
    ) -> R<()> {
        let name = id.name.as_str();
        if forbidden(name) {
            return fail(id.span, forbidden_msg(name));
        }
        if !self.is_global(name) {
            return fail(
                id.span,
                format!("'{name}' is a variable, not a function: AJS can only call atoms, builtins (e.g. Math.max) and methods"),
            );
        }
        if self.call_helper(name, args, dst, span)? {
            return Ok(());
        }
        if name == "Error" {
            let mark = self.top;
            let r = match args.first() {
                Some(a) => self.expr(a)?,
                None => self.special(SpecialKey::Undef, span)?,
            };
            // remaining arguments are evaluated for their effects
            for a in args.iter().skip(1) {
                self.expr(a)?;
            }
            self.emit(Op::Throw { src: Src(r) }, span);
            self.top = mark;
            // keep the destination defined for the (unreachable) code that follows
            let _ = dst;
            return Ok(());
        }
        if let Some(m) = unsupported_builtin(name) {
            return fail(id.span, m);
        }
        if self.opts.atoms.iter().any(|a| a == name) {
            if args.len() > 1 {
                return fail(
                    span,
                    format!(
                        "atom '{name}' takes one object of named inputs, e.g. {name}({{ ... }})"
                    ),
                );
            }
            let idx = self.atom_index(name, span)?;
            let mark = self.top;
            let r = match args.first() {
                Some(a) => self.expr(a)?,
                None => self.special(SpecialKey::Undef, span)?,
            };
            self.emit(
                Op::CallAtom {
                    dst: Dst(dst),
                    atom: Atom(idx),
                    arg: Src(r),
                },
                span,
            );
            self.top = mark;
            return Ok(());
        }
        if name == "parallel" {
            return self.parallel_call(args, dst, span);
        }
        if let Some(native) = NativeId::pure_atom(name) {
            if args.len() > 1 {
                return fail(
                    span,
                    format!(
                        "atom '{name}' takes one object of named inputs, e.g. {name}({{ ... }})"
                    ),
                );
            }
            return self.call_native(native, None, args, dst, span);
        }
        if is_builtin_name(name) {
            if let Some(native) = native(name) {
                return self.call_native(native, None, args, dst, span);
            }
            return fail(
                id.span,
                format!("'{name}(...)' is not supported in AsyncJS yet"),
            );
        }
        if self.opts.mode == Mode::Eval && self.opts.externals.iter().any(|k| k == name) {
            return fail(id.span, format!("'{name}' is a context value, not a function: AJS can only call atoms, builtins and methods"));
        }
        fail(
            id.span,
            format!("'{name}' is not defined: AJS can only call atoms (host operations registered with the VM), builtins (e.g. Math.max) and methods (e.g. items.push)"),
        )
    }

    fn call_method(
        &mut self,
        obj: &Expression,
        m: &str,
        optional: bool,
        args: &[&Expression],
        dst: u16,
        span: Span,
    ) -> R<()> {
        if let Some(ns) = self.namespace(obj) {
            if ns == "Array" && m == "from" && args.len() == 2 {
                // Array.from(x, cb): build the array, then map it with the callback inline
                let mark = self.top;
                let t = self.alloc(span)?;
                let from = NativeId::ArrayFrom;
                self.call_native(from, None, &args[..1], t, span)?;
                self.callback_source = Some(t);
                let r = self.callback_method(args[1], "map", false, &args[1..], dst, span);
                self.callback_source = None;
                self.top = mark;
                return r.map(|_| ());
            }
            let native = match ns {
                "Math" => match native_member("Math", m) {
                    Some(n) => n,
                    None => return fail(span, format!("Math.{m} is not supported in AsyncJS. Check docs for available Math methods.")),
                },
                "console" => match native_member("console", m) {
                    Some(n) => n,
                    None => {
                        let alt = match m {
                            "table" => "console.table is not available. Use console.log with JSON.stringify for structured data.".to_string(),
                            "dir" => "console.dir is not available. Use console.log instead.".into(),
                            "trace" => "console.trace is not available. Stack traces are not available in AsyncJS.".into(),
                            _ => format!("console.{m} is not supported in AsyncJS. Check docs for available console methods."),
                        };
                        return fail(span, alt);
                    }
                },
                "JSON" | "Object" | "Array" | "Number" | "String" | "Date" | "Schema" => {
                    match native_member(ns, m) {
                        Some(n) => n,
                        None => return fail(span, namespace_member_msg(ns, m)),
                    }
                }
                _ => return fail(span, format!("{ns}.{m} is not supported in AsyncJS yet. Check docs for available {ns} methods.")),
            };
            return self.call_native(native, None, args, dst, span);
        }
        if let Expression::Identifier(id) = obj.without_parentheses() {
            // `Promise.all(…)`, `Map.groupBy(…)`: say what the name is not, and what to use
            // (the name first: the scopes are searched only for these)
            if let Some(msg) = unsupported_builtin(id.name.as_str()) {
                if self.is_global(id.name.as_str()) {
                    return fail(id.span, msg);
                }
            }
        }
        if forbidden(m) {
            return fail(span, forbidden_msg(m));
        }
        if self.callback_method(obj, m, optional, args, dst, span)? {
            return Ok(());
        }
        let Some(native) = native_member("", m) else {
            return fail(
                span,
                format!("Security Error: method '{m}' is not callable in AsyncJS"),
            );
        };
        let mark = self.top;
        let recv = self.expr(obj)?;
        if optional {
            self.chain_jump(recv, span);
        }
        let r = self.call_native(native, Some(recv), args, dst, span);
        self.top = mark;
        r
    }

    /// A regex literal: checked and translated now (decision 23: patterns that need
    /// backtracking are compile errors), built at run time by the `%regex` native.
    fn regex_literal(&mut self, r: &RegExpLiteral, dst: u16) -> R<()> {
        let span = r.span;
        let pattern = r.regex.pattern.text.as_str();
        let flags = r.regex.flags.to_string();
        if let Err(m) = ajs_bytecode::natives::jsregex::translate(pattern, &flags) {
            return fail(span, m);
        }
        let mark = self.top;
        let base = self.alloc(span)?;
        self.alloc(span)?;
        let kp = self.str_const(pattern, span)?;
        let kf = self.str_const(&flags, span)?;
        self.emit(
            Op::LoadConst {
                dst: Dst(base),
                k: Const(kp),
            },
            span,
        );
        self.emit(
            Op::LoadConst {
                dst: Dst(base + 1),
                k: Const(kf),
            },
            span,
        );
        self.emit(
            Op::CallNative {
                dst: Dst(dst),
                native: Native(NativeId::RegexNew.to_u16()),
                base: Base(base),
                argc: Count(2),
            },
            span,
        );
        self.top = mark;
        Ok(())
    }

    fn call_native(
        &mut self,
        native: NativeId,
        recv: Option<u16>,
        args: &[&Expression],
        dst: u16,
        span: Span,
    ) -> R<()> {
        let argc = args.len() + usize::from(recv.is_some());
        let (min, max) = native.arity();
        if argc > max as usize || argc > u8::MAX as usize {
            return fail(
                span,
                format!(
                    "too many arguments to {} (at most {})",
                    native.js_name(),
                    max
                ),
            );
        }
        if argc < min as usize {
            return fail(
                span,
                format!("{} needs at least {} argument(s)", native.js_name(), min),
            );
        }
        let mark = self.top;
        let base = self.top;
        for _ in 0..argc {
            self.alloc(span)?;
        }
        let mut i = 0u16;
        if let Some(r) = recv {
            self.emit(
                Op::Move {
                    dst: Dst(base),
                    src: Src(r),
                },
                span,
            );
            i = 1;
        }
        for a in args {
            self.expr_to(a, base + i)?;
            i += 1;
        }
        self.emit(
            Op::CallNative {
                dst: Dst(dst),
                native: Native(native.to_u16()),
                base: Base(base),
                argc: Count(argc as u8),
            },
            span,
        );
        self.top = mark;
        Ok(())
    }
}

/// The UTF-16 units of a string literal (lone surrogates kept when oxc encoded them).
fn string_units(s: &StringLiteral) -> Vec<u16> {
    let v = s.value.as_str();
    if s.lone_surrogates {
        // oxc encodes a lone surrogate as U+FFFD followed by 4 hex digits; U+FFFD itself as "fffd"
        let mut out = Vec::new();
        let mut it = v.chars().peekable();
        while let Some(c) = it.next() {
            if c == '\u{FFFD}' {
                let hex: String = it.by_ref().take(4).collect();
                if let Ok(u) = u16::from_str_radix(&hex, 16) {
                    out.push(u);
                    continue;
                }
                out.push(0xFFFD);
                out.extend(hex.encode_utf16());
            } else {
                let mut buf = [0u16; 2];
                out.extend_from_slice(c.encode_utf16(&mut buf));
            }
        }
        out
    } else {
        v.encode_utf16().collect()
    }
}

/// JavaScript's `Number.prototype.toString()` for property keys.
pub(crate) fn js_number_to_string(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let neg = v < 0.0;
    let a = v.abs();
    // shortest round-trip digits and exponent from Rust's `{:e}` ("d.ddde±x")
    let e = format!("{a:e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1; // decimal point position
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&digits);
        s.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        s.push_str(&digits[..n as usize]);
        s.push('.');
        s.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n('0', (-n) as usize));
        s.push_str(&digits);
    } else {
        s.push_str(&digits[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(if n > 0 { '+' } else { '-' });
        s.push_str(&(n - 1).abs().to_string());
    }
    s
}

/// [`Lowerer::alloc`]'s failure: more values live at once than there are registers.
#[cold]
#[inline(never)]
fn too_many_registers(span: Span) -> R<u16> {
    fail(
        span,
        "too many registers (more than 65535 values live at once)",
    )
}

/// Branches to patch to one target (most tests make one or two).
type Jumps = SmallVec<[usize; 4]>;

/// The jumps of one branch, `jump`. (Pushed inline: `SmallVec::from_elem`, a call that fills
/// from a count, cost ~1.2 k instructions more per compile of the 8 KB agent.)
#[inline(always)]
fn one_jump(jump: usize) -> Jumps {
    let mut jumps = Jumps::new();
    jumps.push(jump);
    jumps
}

/// True when `test` is made of `&&`, `||` or `!` at its top ([`Lowerer::cond_jump`] lowers it as
/// branches).
fn is_logical(test: &Expression) -> bool {
    match test.without_parentheses() {
        Expression::LogicalExpression(l) => l.operator != LogicalOperator::Coalesce,
        Expression::UnaryExpression(u) => u.operator == UnaryOperator::LogicalNot,
        _ => false,
    }
}

/// [`Lowerer::finish_function`]'s mark of a body instruction that leads a basic block.
const LEAD: u32 = 1;
/// What [`Lowerer::finish_function`]'s first pass learns of an instruction: the specials it
/// names (at or above `boundary`), marked in `used`, its jump target, and whether it ends its
/// block without one. (Told by
/// [`Op::visit`], whose arms call these directly: handed each operand as an [`Operand`] to match
/// again, the pass cost ~15 instructions more per instruction.)
struct Seen<'u> {
    boundary: u32,
    used: &'u mut [bool],
    target: Option<u32>,
    /// It is a `Return` or `Throw`.
    end: bool,
}

impl Visitor for Seen<'_> {
    #[inline(always)]
    fn register(&mut self, v: u16) {
        if v as u32 >= self.boundary {
            self.used[(u16::MAX - v) as usize] = true;
        }
    }

    #[inline(always)]
    fn base(&mut self, v: u16) {
        // a run never includes a special; if one did, keep them all
        if v as u32 >= self.boundary {
            self.used.iter_mut().for_each(|u| *u = true);
        }
    }

    #[inline(always)]
    fn target(&mut self, t: u32) {
        self.target = Some(t);
    }

    #[inline(always)]
    fn end(&mut self) {
        self.end = true;
    }
}

/// Entries of a per-special table of [`Lowerer::finish_function`] kept on the stack.
const SHORT_TABLE: usize = 32;

/// `v` emptied, with room for exactly `n` elements. (A vector without any is allocated at that
/// size, not grown to it: ~80 instructions less each, two per function finished.)
#[inline]
fn exactly<T>(mut v: Vec<T>, n: usize) -> Vec<T> {
    if v.capacity() == 0 {
        return Vec::with_capacity(n);
    }
    v.clear();
    v.reserve_exact(n);
    v
}

/// `n` default values: the first `n` of `short` when they fit, else `long`, filled.
#[inline]
fn zeroed<'t, T: Copy + Default>(
    short: &'t mut [T; SHORT_TABLE],
    long: &'t mut Vec<T>,
    n: usize,
) -> &'t mut [T] {
    if n <= SHORT_TABLE {
        &mut short[..n]
    } else {
        long.resize(n, T::default());
        long
    }
}

/// Sets string `i` of `v` (at most one past its end) to `text`, reusing the string there.
#[inline]
fn put_str(v: &mut Vec<String>, i: usize, text: &str) {
    match v.get_mut(i) {
        Some(s) => {
            s.clear();
            s.push_str(text);
        }
        None => v.push(text.to_string()),
    }
}

/// Sets name `i` of `v` (at most one past its end) to `text`.
#[inline]
fn put_name(v: &mut Vec<CompactString>, i: usize, text: &str) {
    match v.get_mut(i) {
        Some(s) => *s = CompactString::from(text),
        None => v.push(CompactString::from(text)),
    }
}

/// `op` with its right operand named as the constant it is (`Sub r, a, <const k>` becomes
/// `SubK r, a, k`), when `op` is an arithmetic or comparison operator (or a fused
/// compare-and-branch on two registers) and `const_of` says its right operand register holds a
/// constant.
///
/// One match over the instruction (the fused branches named here rather than taken apart with
/// [`Op::fused`], a call per instruction, and `const_of` a generic closure rather than a `dyn`
/// one): [`Lowerer::finish_function`] asks this of every instruction, and the match alone saves
/// ~12 k instructions per compile of the 8 KB agent. The instruction is read where it is (a copy
/// passed by value is taken apart into all its fields first, ~10 k instructions more).
#[inline]
fn with_const_operand(op: &Op, const_of: impl Fn(u16) -> Option<u16>) -> Option<Op> {
    // (the forms are the bytecode crate's, expanded from its compare-and-branch family)
    op.with_const_operand(const_of)
}

#[cfg(test)]
mod tests {
    use super::js_number_to_string as s;
    use super::{Constant, Keyed};

    /// Every native is found by its name in the natives' table (which holds at most a quarter
    /// of its slots), as `NativeId::lookup` finds it, and names of no native are not, also
    /// names that share a native's slot.
    #[test]
    fn the_natives_table_finds_what_lookup_finds() {
        use super::{native, native_member, NATIVE_SLOTS};
        use ajs_bytecode::NativeId;
        assert!(NativeId::all().len() * 4 <= NATIVE_SLOTS);
        for &n in NativeId::all() {
            let name = n.js_name();
            assert_eq!(native(name), NativeId::lookup(name), "{name}");
            let (ns, m) = name.split_once('.').unwrap_or(("", name));
            if !ns.is_empty() {
                assert_eq!(native_member(ns, m), NativeId::lookup(name), "{name}");
            }
            for other in [format!("{name}x"), format!("x{name}"), name.to_uppercase()] {
                assert_eq!(native(&other), NativeId::lookup(&other), "{other}");
            }
        }
        for name in [
            "",
            ".",
            "..",
            "a.b.c",
            "Math.",
            ".max",
            "max",
            "Math.maxx",
            "push",
        ] {
            assert_eq!(native(name), NativeId::lookup(name), "{name}");
        }
    }

    #[test]
    fn a_string_whose_hash_is_taken_is_kept_apart() {
        let units = |t: &str| t.encode_utf16().collect::<Vec<u16>>();
        let (a, b) = (units("a"), units("b"));
        let mut m = Keyed::default();
        let mut constants = vec![Constant::String(a.clone().into())];
        let ha = m.hash(&a, None);
        m.insert(ha, false, &a, 0);
        // as if "b" hashed like "a": its hash leads to the constant "a"
        let hb = m.hash(&b, None);
        m.by_hash.insert(hb, 0);
        assert_eq!(m.find(&b, None, &constants), Err((hb, true)));
        constants.push(Constant::String(b.clone().into()));
        m.insert(hb, true, &b, 1);
        assert_eq!(m.find(&b, None, &constants), Ok(1));
        assert_eq!(m.find(&a, Some(b"a"), &constants), Ok(0));
        assert_eq!(
            m.find(&units("c"), None, &constants).map_err(|e| e.1),
            Err(false)
        );
    }

    /// Every string constant is in the pool once, however many share a slot of the direct-mapped
    /// table (64 slots for an Eval or a function body): ASCII strings, others, and strings
    /// with lone surrogates, each written several times and in both quotes.
    #[test]
    fn each_string_is_one_constant() {
        use crate::{compile, CompileOptions, Mode};
        let mut items = Vec::new();
        for i in 0..600 {
            let text = match i % 3 {
                0 => format!("s{i}"),
                1 => format!("é{i}✓"),
                _ => format!("\\ud800{i}"),
            };
            items.push(format!("'{text}'"));
            items.push(format!("\"{text}\""));
        }
        let src = format!("return [{}, {}]", items.join(", "), items.join(", "));
        let opts = CompileOptions {
            mode: Mode::FunctionBody,
            ..CompileOptions::default()
        };
        let program = compile(&src, &opts).expect("compiles");
        let strings: Vec<&[u16]> = program
            .constants
            .iter()
            .filter_map(|c| match c {
                Constant::String(s) => Some(s.as_slice()),
                _ => None,
            })
            .collect();
        let distinct: std::collections::HashSet<&[u16]> = strings.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            strings.len(),
            "a string is in the pool twice"
        );
        assert_eq!(distinct.len(), 600);
    }

    /// The hash of an ASCII string by its bytes is the hash of its units (the two ways a string
    /// constant is looked up find the same slot), at every length up to 40; a string that is
    /// not ASCII has no byte hash.
    #[test]
    fn the_byte_hash_is_the_units_hash() {
        let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let n = next() % 41;
            let ascii = !next().is_multiple_of(4);
            let s: String = (0..n)
                .map(|_| match next() % 5 {
                    0 if !ascii => 'é',
                    1 if !ascii => '✓',
                    k => ['a', 'b', '_', '~', '\0'][k],
                })
                .collect();
            let units: Vec<u16> = s.encode_utf16().collect();
            match super::ascii_hash(&s) {
                Some(h) => assert_eq!(h, super::string_hash(&units), "{s:?}"),
                None => assert!(!s.is_ascii(), "{s:?}"),
            }
        }
    }

    /// `Names::is` is `==`, at every length up to 20, for names of few letters (most pairs of
    /// one length differ in one or two bytes).
    #[test]
    fn a_name_is_its_text() {
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1d);
        let mut names = super::Names::default();
        for _ in 0..20_000 {
            let word = |next: &mut dyn FnMut() -> usize| -> String {
                let n = 1 + next() % 20;
                (0..n).map(|_| ['a', 'b', '_'][next() % 3]).collect()
            };
            let (a, b) = (word(&mut next), word(&mut next));
            let n = names.add(super::Probe::new(&a));
            assert!(names.is(n, super::Probe::new(&a)), "{a:?}");
            assert_eq!(names.is(n, super::Probe::new(&b)), a == b, "{a:?} {b:?}");
        }
    }

    /// The table of native names finds what `NativeId::lookup` finds, for every native's name
    /// and for names that are none (a namespace or a method alone, a prefix, a longer name).
    #[test]
    fn the_native_table_is_the_lookup() {
        use ajs_bytecode::natives::NativeId;
        let mut names: Vec<String> = Vec::new();
        for &n in NativeId::all() {
            let name = n.js_name();
            names.push(name.to_string());
            names.push(format!("{name}x"));
            names.push(name[..name.len() / 2].to_string());
            if let Some((ns, m)) = name.split_once('.') {
                names.push(ns.to_string());
                names.push(m.to_string());
                names.push(format!(".{m}"));
            }
        }
        names.extend(["", ".", "Math.", "x.y.z"].map(String::from));
        for name in &names {
            assert_eq!(super::native(name), NativeId::lookup(name), "{name:?}");
        }
    }

    /// `same_bytes` is `==`, at every length up to 40, for equal slices and slices differing in
    /// any one byte.
    #[test]
    fn same_bytes_is_equality() {
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..20_000 {
            let n = next() % 41;
            let a: Vec<u8> = (0..n).map(|_| b"ab_"[next() % 3]).collect();
            let mut b = a.clone();
            assert!(super::same_bytes(&a, &b));
            if n > 0 {
                let i = next() % n;
                b[i] = b"ab_z"[next() % 4];
            }
            assert_eq!(super::same_bytes(&a, &b), a == b, "{a:?} {b:?}");
            assert!(!super::same_bytes(&a, &a[..n / 2]) || n == 0);
        }
    }

    /// Every number constant is in the pool once (by its bits, every NaN as one), however many
    /// share a slot of the direct-mapped table.
    #[test]
    fn each_number_is_one_constant() {
        use crate::{compile, CompileOptions, Mode};
        let items: Vec<String> = (0..600)
            .map(|i| match i % 4 {
                0 => format!("{i}"),
                1 => format!("{i}.5"),
                2 => format!("{}e300", i),
                _ => format!("-{i}"),
            })
            .collect();
        let src = format!(
            "return [{}, {}, NaN, 0 / 0, Infinity, -0, 0]",
            items.join(", "),
            items.join(", ")
        );
        let opts = CompileOptions {
            mode: Mode::FunctionBody,
            ..CompileOptions::default()
        };
        let program = compile(&src, &opts).expect("compiles");
        let bits: Vec<u64> = program
            .constants
            .iter()
            .filter_map(|c| match c {
                Constant::Number(v) => Some(super::num_bits(*v)),
                _ => None,
            })
            .collect();
        let distinct: std::collections::HashSet<u64> = bits.iter().copied().collect();
        assert_eq!(distinct.len(), bits.len(), "a number is in the pool twice");
        assert!(distinct.len() >= 600);
    }

    #[test]
    fn numbers_print_like_javascript() {
        assert_eq!(s(1.0), "1");
        assert_eq!(s(-0.0), "0");
        assert_eq!(s(1.5), "1.5");
        assert_eq!(s(100.0), "100");
        assert_eq!(s(1e21), "1e+21");
        assert_eq!(s(1.25e-7), "1.25e-7");
        assert_eq!(s(0.000001), "0.000001");
        assert_eq!(s(123456789012345680000.0), "123456789012345680000");
        assert_eq!(s(0.1), "0.1");
        assert_eq!(s(-2.5), "-2.5");
    }
}
