//! Copies out of the VM: every place a guest value leaves it — a run's result, an atom's input,
//! the data of `filter` and `Schema`, a log line, an `Error` message — walks the value once,
//! with a budget that counts every reference (a value the guest shares is copied once per
//! reference, so a few hundred heap bytes can stand for terabytes of copy), charging fuel as it
//! goes, and stops at the budget instead of allocating.
//!
//! One walker ([`Walk`]) drives two sinks: [`Build`], which makes the host value ([`JsValue`])
//! and counts the bytes it allocates before allocating them, and [`Text`], which writes the
//! JSON-like text the log and error messages show and stops at a byte cap.

use std::collections::HashSet;
use std::mem::size_of;

use indexmap::IndexMap;

use super::{array_index, ordered_keys, LogLevel, LogLine, Vm, MILLI_PER_ELEMENT};
use crate::error::{ErrorKind, Fault, OpResult, RunError};
use crate::heap::{Cell, Gc, Heap, PropMap};
use crate::number::number_to_string;
use crate::price::MILLI_PER_UNIT;
use crate::value::{JsValue, Value, MAX_BOUNDARY_DEPTH};

/// Default cap on the bytes of text the run's log keeps (`maxLogBytes`): 1 MiB.
pub const DEFAULT_MAX_LOG_BYTES: usize = 1 << 20;

/// Longest `Error(v)` message, in UTF-8 bytes: a longer one is cut and ends with a marker.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The words of the copy limit's error, after its number of bytes.
const COPY_LIMIT: &str = "-byte copy limit (maxHeapBytes)";

/// What a heap allocation costs beyond its size (the allocator's header and rounding).
const ALLOC_OVERHEAD: usize = 16;

/// Paths shorter than this are searched for cycles by a scan; deeper entries are also hashed.
const SHALLOW: usize = 16;

/// What one copy out of the VM may take: bytes it may allocate and values it may visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Bytes of host memory (really allocated sizes, sharing expanded).
    pub bytes: usize,
    /// Values visited, every reference counted.
    pub nodes: usize,
}

/// Why a walk stopped before its end.
#[derive(Debug)]
enum Stop {
    /// The sink's bytes are spent.
    Full,
    /// The node budget is spent.
    Nodes,
    /// The fuel the walk may spend is spent.
    Fuel,
    /// The value cannot cross (a cycle, too deep, not settled).
    Refused(RunError),
}

/// A scalar or string reached by the walk.
enum Leaf<'a> {
    Undefined,
    Null,
    Bool(bool),
    Num(f64),
    /// A guest string's code units.
    Units(&'a [u16]),
    /// Text made on the way (a Date's ISO string).
    Text(&'a str),
}

/// Where the walk writes.
trait Sink {
    /// Whether a property whose value crosses out as `undefined` is kept (a copy keeps it;
    /// JSON text drops it).
    const KEEPS_UNDEFINED: bool;
    /// The code units (or text bytes) handled so far, charged [`MILLI_PER_UNIT`] each.
    fn units(&self) -> u64;
    fn leaf(&mut self, v: Leaf<'_>) -> Result<(), Stop>;
    fn open(&mut self, object: bool, len: usize) -> Result<(), Stop>;
    fn key(&mut self, k: &[u16]) -> Result<(), Stop>;
    fn close(&mut self) -> Result<(), Stop>;
}

/// The walk over the heap: node budget, fuel, depth and cycles; the sink does the rest.
struct Walk<'h, S> {
    heap: &'h Heap,
    sink: S,
    nodes: usize,
    fuel_cap: u64,
    elems: u64,
    path: Vec<Gc>,
    deep: HashSet<Gc>,
}

impl<'h, S: Sink> Walk<'h, S> {
    fn new(heap: &'h Heap, sink: S, nodes: usize, fuel_cap: u64) -> Self {
        Walk {
            heap,
            sink,
            nodes,
            fuel_cap,
            elems: 0,
            path: Vec::new(),
            deep: HashSet::new(),
        }
    }

    /// Milli-fuel the walk has spent.
    fn spent(&self) -> u64 {
        self.elems
            .saturating_mul(MILLI_PER_ELEMENT)
            .saturating_add(self.sink.units().saturating_mul(MILLI_PER_UNIT))
    }

    /// Counts one value visited, and checks fuel before the work on it.
    fn node(&mut self, units: usize) -> Result<(), Stop> {
        if self.nodes == 0 {
            return Err(Stop::Nodes);
        }
        self.nodes -= 1;
        self.elems += 1;
        self.check_fuel(units)
    }

    fn check_fuel(&self, more_units: usize) -> Result<(), Stop> {
        if self
            .spent()
            .saturating_add((more_units as u64).saturating_mul(MILLI_PER_UNIT))
            > self.fuel_cap
        {
            return Err(Stop::Fuel);
        }
        Ok(())
    }

    fn value(&mut self, v: Value) -> Result<(), Stop> {
        match v {
            Value::Undefined => self.scalar(Leaf::Undefined),
            Value::Null => self.scalar(Leaf::Null),
            Value::Bool(b) => self.scalar(Leaf::Bool(b)),
            Value::Num(n) => self.scalar(Leaf::Num(n)),
            Value::Str(g) => {
                let units = self.heap.str_units(g);
                self.node(units.len())?;
                self.sink.leaf(Leaf::Units(units))
            }
            Value::Pending(_) => Err(Stop::Refused(RunError::new(
                ErrorKind::Boundary,
                "a host result that has not settled cannot leave the VM",
            ))),
            Value::Arr(g) | Value::Obj(g) => self.container(g),
        }
    }

    fn scalar(&mut self, leaf: Leaf<'_>) -> Result<(), Stop> {
        self.node(0)?;
        self.sink.leaf(leaf)
    }

    fn container(&mut self, g: Gc) -> Result<(), Stop> {
        self.node(0)?;
        let heap = self.heap;
        let cell = heap.get(g);
        match cell {
            Cell::Arr(_) | Cell::Obj(_) | Cell::Set(_) => {}
            Cell::Date(t) => return self.sink.leaf(Leaf::Text(&crate::dates::iso_string(*t))),
            Cell::Regex(_) => {
                self.sink.open(true, 0)?;
                return self.sink.close();
            }
            _ => return self.sink.leaf(Leaf::Undefined),
        }
        if self.on_path(g) {
            return Err(Stop::Refused(RunError::new(
                ErrorKind::Guest,
                "Converting circular structure to JSON: the value contains itself",
            )));
        }
        if self.path.len() >= MAX_BOUNDARY_DEPTH {
            return Err(Stop::Refused(RunError::new(
                ErrorKind::Boundary,
                format!("value nested deeper than {MAX_BOUNDARY_DEPTH} levels cannot cross the boundary"),
            )));
        }
        if self.path.len() >= SHALLOW {
            self.deep.insert(g);
        }
        self.path.push(g);
        match cell {
            Cell::Arr(a) => {
                self.sink.open(false, a.len())?;
                for x in a {
                    self.value(*x)?;
                }
            }
            Cell::Set(m) => {
                self.sink.open(false, m.len())?;
                for x in m.values() {
                    self.value(*x)?;
                }
            }
            Cell::Obj(m) => self.object(m)?,
            _ => {}
        }
        self.sink.close()?;
        if self.path.len() > SHALLOW {
            self.deep.remove(&g);
        }
        self.path.pop();
        Ok(())
    }

    fn object(&mut self, m: &'h PropMap) -> Result<(), Stop> {
        let heap = self.heap;
        let len = if S::KEEPS_UNDEFINED {
            m.len()
        } else {
            m.values()
                .filter(|x| !crosses_as_undefined(heap, **x))
                .count()
        };
        self.sink.open(true, len)?;
        // (insertion order unless a key is an array index: no list of keys to sort)
        if m.keys().any(|k| array_index(k).is_some()) {
            for k in ordered_keys(m) {
                let x = m.get(k).copied().unwrap_or(Value::Undefined);
                self.prop(k, x)?;
            }
        } else {
            for (k, x) in m.iter() {
                self.prop(k, *x)?;
            }
        }
        Ok(())
    }

    fn prop(&mut self, k: &[u16], x: Value) -> Result<(), Stop> {
        if !S::KEEPS_UNDEFINED && crosses_as_undefined(self.heap, x) {
            // dropped from the text, still visited
            return self.node(0);
        }
        self.check_fuel(k.len())?;
        self.sink.key(k)?;
        self.value(x)
    }

    fn on_path(&self, g: Gc) -> bool {
        self.path[..self.path.len().min(SHALLOW)].contains(&g) || self.deep.contains(&g)
    }
}

/// Whether `v` crosses out as `undefined` (dropped from an object's JSON text).
fn crosses_as_undefined(heap: &Heap, v: Value) -> bool {
    match v {
        Value::Undefined => true,
        Value::Arr(g) | Value::Obj(g) => !matches!(
            heap.get(g),
            Cell::Arr(_) | Cell::Obj(_) | Cell::Set(_) | Cell::Date(_) | Cell::Regex(_)
        ),
        _ => false,
    }
}

/// Bytes one allocation of `n` bytes takes (none for an empty one).
fn alloc(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.div_ceil(ALLOC_OVERHEAD)
            .saturating_mul(ALLOC_OVERHEAD)
            .saturating_add(ALLOC_OVERHEAD)
    }
}

/// Bytes of an `IndexMap<String, JsValue>` made with room for `n` entries: the entries (hash,
/// key, value) and the index table (a power of two of slots at most 7/8 full, a control byte
/// each).
fn map_bytes(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let entry = size_of::<usize>() + size_of::<String>() + size_of::<JsValue>();
    let slots = n
        .saturating_mul(8)
        .div_ceil(7)
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX)
        .max(4);
    alloc(n.saturating_mul(entry))
        .saturating_add(alloc(slots.saturating_mul(size_of::<usize>() + 1) + 16))
}

/// UTF-8 length of UTF-16 units decoded lossily (a lone surrogate becomes U+FFFD).
fn utf8_len(units: &[u16]) -> usize {
    char::decode_utf16(units.iter().copied())
        .map(|c| c.map_or(3, char::len_utf8))
        .sum()
}

/// An open container of [`Build`].
enum Open {
    Arr(Vec<JsValue>),
    Obj(IndexMap<String, JsValue>, Option<String>),
}

/// Builds the host value, counting every allocation against its bytes before making it.
struct Build {
    left: usize,
    units: u64,
    stack: Vec<Open>,
    root: Option<JsValue>,
}

impl Build {
    fn new(bytes: usize) -> Build {
        Build {
            left: bytes,
            units: 0,
            stack: Vec::new(),
            root: None,
        }
    }

    fn take(&mut self, bytes: usize) -> Result<(), Stop> {
        if bytes > self.left {
            return Err(Stop::Full);
        }
        self.left -= bytes;
        Ok(())
    }

    fn string(&mut self, units: &[u16]) -> Result<String, Stop> {
        self.units += units.len() as u64;
        let n = utf8_len(units);
        self.take(alloc(n))?;
        let mut s = String::with_capacity(n);
        s.extend(char::decode_utf16(units.iter().copied()).map(|c| c.unwrap_or('\u{FFFD}')));
        Ok(s)
    }

    fn put(&mut self, v: JsValue) {
        match self.stack.last_mut() {
            None => self.root = Some(v),
            Some(Open::Arr(a)) => a.push(v),
            Some(Open::Obj(m, k)) => {
                m.insert(k.take().unwrap_or_default(), v);
            }
        }
    }
}

impl Sink for Build {
    const KEEPS_UNDEFINED: bool = true;

    fn units(&self) -> u64 {
        self.units
    }

    fn leaf(&mut self, v: Leaf<'_>) -> Result<(), Stop> {
        let v = match v {
            Leaf::Undefined => JsValue::Undefined,
            Leaf::Null => JsValue::Null,
            Leaf::Bool(b) => JsValue::Bool(b),
            Leaf::Num(n) => JsValue::Number(n),
            Leaf::Units(u) => JsValue::String(self.string(u)?),
            Leaf::Text(t) => {
                self.units += t.len() as u64;
                self.take(alloc(t.len()))?;
                JsValue::String(t.to_string())
            }
        };
        self.put(v);
        Ok(())
    }

    fn open(&mut self, object: bool, len: usize) -> Result<(), Stop> {
        if object {
            self.take(map_bytes(len))?;
            self.stack
                .push(Open::Obj(IndexMap::with_capacity(len), None));
        } else {
            self.take(alloc(len.saturating_mul(size_of::<JsValue>())))?;
            self.stack.push(Open::Arr(Vec::with_capacity(len)));
        }
        Ok(())
    }

    fn key(&mut self, k: &[u16]) -> Result<(), Stop> {
        let k = self.string(k)?;
        if let Some(Open::Obj(_, slot)) = self.stack.last_mut() {
            *slot = Some(k);
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), Stop> {
        let v = match self.stack.pop() {
            Some(Open::Arr(a)) => JsValue::Array(a),
            Some(Open::Obj(m, _)) => JsValue::Object(m),
            None => return Ok(()),
        };
        self.put(v);
        Ok(())
    }
}

/// Writes JSON text as `serde_json` writes the host value (`JsValue::display`), up to a cap.
struct Text {
    out: String,
    cap: usize,
    /// per open container: whether it is an object, and whether it has no item yet
    open: Vec<(bool, bool)>,
    after_key: bool,
    /// scratch for formatting a number
    num: Vec<u8>,
}

impl Text {
    fn new(out: String, cap: usize) -> Text {
        Text {
            out,
            cap,
            open: Vec::new(),
            after_key: false,
            num: Vec::new(),
        }
    }

    /// Appends `s`, or as much of it as fits under the cap (whole characters) and stops.
    fn push(&mut self, s: &str) -> Result<(), Stop> {
        let room = self.cap.saturating_sub(self.out.len());
        if s.len() <= room {
            self.out.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.out.push_str(&s[..end]);
        Err(Stop::Full)
    }

    fn push_char(&mut self, c: char) -> Result<(), Stop> {
        if self.out.len() + c.len_utf8() > self.cap {
            return Err(Stop::Full);
        }
        self.out.push(c);
        Ok(())
    }

    /// The comma before an item (none right after a key, or before a container's first item).
    fn separate(&mut self) -> Result<(), Stop> {
        if self.after_key {
            self.after_key = false;
            return Ok(());
        }
        if let Some((_, first)) = self.open.last_mut() {
            if !*first {
                return self.push(",");
            }
            *first = false;
        }
        Ok(())
    }

    /// A string quoted and escaped as `serde_json` does (lone surrogates as U+FFFD).
    fn quote(&mut self, chars: impl Iterator<Item = char>) -> Result<(), Stop> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.push("\"")?;
        for c in chars {
            match c {
                '"' => self.push("\\\"")?,
                '\\' => self.push("\\\\")?,
                '\n' => self.push("\\n")?,
                '\r' => self.push("\\r")?,
                '\t' => self.push("\\t")?,
                '\u{8}' => self.push("\\b")?,
                '\u{c}' => self.push("\\f")?,
                c if (c as u32) < 0x20 => {
                    let b = c as usize;
                    let esc = [b'\\', b'u', b'0', b'0', HEX[b >> 4], HEX[b & 15]];
                    self.push(std::str::from_utf8(&esc).unwrap_or("?"))?;
                }
                c => self.push_char(c)?,
            }
        }
        self.push("\"")
    }

    fn number(&mut self, n: f64) -> Result<(), Stop> {
        if !n.is_finite() {
            return self.push("null");
        }
        if n == n.trunc() && n.abs() < 9.007_199_254_740_992e15 {
            return self.push(&(n as i64).to_string());
        }
        // as serde_json writes a float (shortest round trip)
        self.num.clear();
        if serde_json::to_writer(&mut self.num, &n).is_err() {
            return self.push("null");
        }
        let num = std::mem::take(&mut self.num);
        let r = self.push(std::str::from_utf8(&num).unwrap_or("null"));
        self.num = num;
        r
    }
}

impl Sink for Text {
    const KEEPS_UNDEFINED: bool = false;

    fn units(&self) -> u64 {
        self.out.len() as u64
    }

    fn leaf(&mut self, v: Leaf<'_>) -> Result<(), Stop> {
        self.separate()?;
        match v {
            Leaf::Undefined | Leaf::Null => self.push("null"),
            Leaf::Bool(b) => self.push(if b { "true" } else { "false" }),
            Leaf::Num(n) => self.number(n),
            Leaf::Units(u) => {
                self.quote(char::decode_utf16(u.iter().copied()).map(|c| c.unwrap_or('\u{FFFD}')))
            }
            Leaf::Text(t) => self.quote(t.chars()),
        }
    }

    fn open(&mut self, object: bool, _len: usize) -> Result<(), Stop> {
        self.separate()?;
        self.open.push((object, true));
        self.push(if object { "{" } else { "[" })
    }

    fn key(&mut self, k: &[u16]) -> Result<(), Stop> {
        self.separate()?;
        self.quote(char::decode_utf16(k.iter().copied()).map(|c| c.unwrap_or('\u{FFFD}')))?;
        self.push(":")?;
        self.after_key = true;
        Ok(())
    }

    fn close(&mut self) -> Result<(), Stop> {
        match self.open.pop() {
            Some((true, _)) => self.push("}"),
            Some((false, _)) => self.push("]"),
            None => Ok(()),
        }
    }
}

/// A rendering of values as text: how it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    Whole,
    /// cut at the cap (or the node budget)
    Cut,
    /// the fuel ran out
    Fuel,
}

/// The marker that ends a log line cut at `maxLogBytes`.
fn log_marker(max: usize) -> String {
    format!(
        " … [cut: the log keeps at most {max} bytes (maxLogBytes); log less or raise maxLogBytes]"
    )
}

/// The marker that ends an `Error` message cut at [`MAX_MESSAGE_BYTES`].
fn message_marker() -> String {
    format!(" … [message truncated at {MAX_MESSAGE_BYTES} bytes]")
}

/// `text` cut (at a character boundary) so that `marker` fits within `cap`, then the marker.
fn cut_with(text: &mut String, cap: usize, marker: &str) {
    let mut end = cap.saturating_sub(marker.len()).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(marker);
}

impl Vm {
    /// What one copy out of the VM may take: the room under the heap's real-bytes ceiling (the
    /// copy and the heap it is made from live in one process, under one bound) in bytes, and as
    /// many values as that room holds host values.
    pub(crate) fn export_budget(&self) -> Budget {
        let bytes = self
            .heap
            .real_limit()
            .saturating_sub(self.heap.real_bytes());
        Budget {
            bytes,
            nodes: bytes / size_of::<JsValue>(),
        }
    }

    /// Bytes of host memory a host answer (a fetched body, parsed) may take before it is
    /// copied in: half the room under the heap's real-bytes ceiling, because the heap copy the
    /// import makes lives beside the answer until the import ends.
    pub fn answer_room(&self) -> usize {
        self.export_budget().bytes / 2
    }

    /// The boundary error of a copy over its budget; `what` names the value (`Result`, …).
    fn copy_limit_error(what: String, budget: Budget) -> RunError {
        RunError::new(
            ErrorKind::Boundary,
            format!(
                "{what} is over the {}{COPY_LIMIT}: it holds shared values that expand when copied; return less or raise maxHeapBytes",
                budget.bytes
            ),
        )
    }

    /// Whether `e` is the error of a copy over its budget ([`Vm::export`]).
    pub(crate) fn is_copy_limit(e: &RunError) -> bool {
        e.kind == ErrorKind::Boundary && e.message.contains(COPY_LIMIT)
    }

    /// Copies `v` out within `budget` (reduced by what the copy takes) and `fuel_cap`
    /// milli-fuel: the value and the milli-fuel spent, or why it stopped and the milli-fuel
    /// spent until then.
    fn copy_within(
        &self,
        v: Value,
        budget: &mut Budget,
        fuel_cap: u64,
    ) -> (Result<JsValue, Stop>, u64) {
        let mut w = Walk::new(&self.heap, Build::new(budget.bytes), budget.nodes, fuel_cap);
        let r = w.value(v);
        let spent = w.spent();
        budget.bytes = w.sink.left;
        budget.nodes = w.nodes;
        match r {
            Ok(()) => (Ok(w.sink.root.take().unwrap_or(JsValue::Undefined)), spent),
            Err(e) => (Err(e), spent),
        }
    }

    /// Copies a guest value out as plain data (`what` names it in the error), paying fuel for
    /// every value and code unit it copies. A value that expands past [`Vm::export_budget`]
    /// (after a collection) is refused; cycles and excessive depth are refused.
    ///
    /// # Errors
    /// A run-ending `Boundary` error naming the copy limit, `Out of Fuel`, or the refusal.
    pub(crate) fn export(
        &mut self,
        v: Value,
        what: impl FnOnce() -> String,
    ) -> Result<JsValue, RunError> {
        match v {
            // the common results, without the walk
            Value::Undefined => return Ok(JsValue::Undefined),
            Value::Null => return Ok(JsValue::Null),
            Value::Bool(b) => return Ok(JsValue::Bool(b)),
            Value::Num(n) => return Ok(JsValue::Number(n)),
            _ => {}
        }
        let mut collected = false;
        loop {
            let budget = self.export_budget();
            let mut room = budget;
            let (r, spent) = self.copy_within(v, &mut room, self.meter.fuel.left());
            match r {
                Ok(j) => {
                    self.pay_copy(spent);
                    return Ok(j);
                }
                Err(stop) => {
                    if let Some(e) = self.copy_stopped(stop, spent) {
                        return Err(e);
                    }
                    // garbage counts as live until a collection: collect once and try again
                    // when that leaves more room
                    if !collected {
                        collected = true;
                        self.collect_garbage(&[v]);
                        if self.export_budget().bytes > budget.bytes {
                            continue;
                        }
                    }
                    return Err(Vm::copy_limit_error(what(), budget));
                }
            }
        }
    }

    /// Pays for a copy that stopped early (`spent` milli-fuel; all that is left when its fuel
    /// ran out) and gives the error it ends with, or `None` when its budget was full (the
    /// caller names the copy limit, or makes room and tries again).
    fn copy_stopped(&mut self, stop: Stop, spent: u64) -> Option<RunError> {
        match stop {
            Stop::Fuel => {
                self.pay_copy(u64::MAX);
                Some(RunError::out_of_fuel())
            }
            Stop::Refused(e) => {
                self.pay_copy(spent);
                Some(e)
            }
            Stop::Full | Stop::Nodes => {
                self.pay_copy(spent);
                None
            }
        }
    }

    /// Copies several values out within one shared budget and no fuel (the host reading what
    /// the run already paid to copy): `None` for a value past the budget or refused.
    pub(crate) fn export_shared(&self, values: &[Value]) -> Vec<Option<JsValue>> {
        let mut budget = self.export_budget();
        values
            .iter()
            .map(|&v| {
                let (r, _) = self.copy_within(v, &mut budget, u64::MAX);
                r.ok()
            })
            .collect()
    }

    /// Checks that every value in `values` can be copied out within one shared budget, paying
    /// as [`Vm::export`] does (what the host will then read with [`Vm::export_shared`]).
    ///
    /// # Errors
    /// As [`Vm::export`].
    pub(crate) fn check_exports(
        &mut self,
        values: &[Value],
        what: impl FnOnce() -> String,
    ) -> Result<(), RunError> {
        let start = self.export_budget();
        let mut budget = start;
        for &v in values {
            let (r, spent) = self.copy_within(v, &mut budget, self.meter.fuel.left());
            match r {
                Ok(_) => self.pay_copy(spent),
                Err(stop) => {
                    return Err(self
                        .copy_stopped(stop, spent)
                        .unwrap_or_else(|| Vm::copy_limit_error(what(), start)))
                }
            }
        }
        Ok(())
    }

    /// Takes `milli` off the fuel left (at most what is left).
    fn pay(&mut self, milli: u64) {
        let left = self.meter.fuel.left();
        self.meter.fuel.set(left.saturating_sub(milli));
    }

    /// [`Vm::pay`] for a copy made after the instruction that asked for it ran (the result of
    /// a `Return`, the input of a `CallAtom`): a trace counts it in that instruction's step.
    fn pay_copy(&mut self, milli: u64) {
        self.pay(milli);
        let used = self.fuel_used_milli();
        if let Some(last) = self.trace.steps.as_mut().and_then(|t| t.last_mut()) {
            if last.fuel_after != u64::MAX {
                last.fuel_after = used;
            }
        }
    }

    /// Appends `v` rendered as the log shows it to `out`, up to `cap` bytes in all: strings raw,
    /// a Date as its ISO string, other scalars as `String(v)`, containers as JSON text (a value
    /// that cannot cross is shown as the error's message). Stops where the values visited (a
    /// milli-fuel each) and the bytes of `out` ([`MILLI_PER_UNIT`] each) would pass `fuel_cap`.
    /// Returns how it ended and the milli-fuel of the values visited (the caller pays for the
    /// bytes).
    fn render_into(&self, out: &mut String, v: Value, cap: usize, fuel_cap: u64) -> (Ended, u64) {
        let raw: Option<std::borrow::Cow<'_, str>> = match v {
            Value::Str(g) => {
                let units = self.units(g);
                // (at most the units that can fill the cap: a cut there is past the cap)
                let fit = cap.saturating_sub(out.len()).saturating_add(2);
                let take = &units[..units.len().min(fit)];
                Some(String::from_utf16_lossy(take).into())
            }
            Value::Undefined => Some("undefined".into()),
            Value::Null => Some("null".into()),
            Value::Bool(b) => Some(if b { "true" } else { "false" }.into()),
            Value::Num(n) => Some(number_to_string(n).into()),
            Value::Obj(g) => match self.heap.get(g) {
                Cell::Date(t) => Some(crate::dates::iso_string(*t).into()),
                _ => None,
            },
            _ => None,
        };
        let start = out.len();
        if let Some(s) = raw {
            let mut t = Text::new(std::mem::take(out), cap);
            let r = t.push(&s);
            *out = t.out;
            let ended = if (out.len() as u64).saturating_mul(MILLI_PER_UNIT) > fuel_cap {
                Ended::Fuel
            } else if r.is_err() {
                Ended::Cut
            } else {
                Ended::Whole
            };
            return (ended, 0);
        }
        // (text takes no more memory than its cap, so its node budget follows the cap, not
        // the heap: values that write nothing, `undefined` properties, are still bounded)
        let mut w = Walk::new(
            &self.heap,
            Text::new(std::mem::take(out), cap),
            cap.saturating_mul(2),
            fuel_cap,
        );
        let r = w.value(v);
        let nodes = w.elems.saturating_mul(MILLI_PER_ELEMENT);
        *out = std::mem::take(&mut w.sink.out);
        let ended = match r {
            Ok(()) => Ended::Whole,
            Err(Stop::Full | Stop::Nodes) => Ended::Cut,
            Err(Stop::Fuel) => Ended::Fuel,
            Err(Stop::Refused(e)) => {
                out.truncate(start);
                let mut t = Text::new(std::mem::take(out), cap);
                let r = t.push(&e.message);
                *out = t.out;
                if r.is_ok() {
                    Ended::Whole
                } else {
                    Ended::Cut
                }
            }
        };
        (ended, nodes)
    }

    /// `v` rendered as the log shows it, at most [`MAX_MESSAGE_BYTES`] (a longer text is cut
    /// and ends with a marker), paid for; when the fuel runs out the text is cut there and the
    /// fuel is left empty (the run ends at its next charge).
    pub(crate) fn render(&mut self, v: Value) -> String {
        let mut out = String::new();
        let (ended, nodes) =
            self.render_into(&mut out, v, MAX_MESSAGE_BYTES, self.meter.fuel.left());
        let cost = nodes.saturating_add((out.len() as u64).saturating_mul(MILLI_PER_UNIT));
        match ended {
            Ended::Whole => self.pay(cost),
            Ended::Cut => {
                self.pay(cost);
                cut_with(&mut out, MAX_MESSAGE_BYTES, &message_marker());
            }
            Ended::Fuel => {
                self.meter.fuel.set(0);
                let n = out.len();
                cut_with(&mut out, n, &message_marker());
            }
        }
        out
    }

    /// The message of `Error(v)`: a string as is, anything else as `String(v)` (JSON for
    /// containers); capped as [`Vm::render`] caps it.
    pub(crate) fn message_of(&mut self, v: Value) -> String {
        self.render(v)
    }

    /// `console.*`: one log line of the arguments rendered and separated by spaces, paid for
    /// (a value per container element, and the bytes of the line). A line past `maxLogBytes`
    /// is cut with a marker; once the log is full (lines or bytes), lines are counted as
    /// dropped. Never raises but for the fuel.
    ///
    /// # Errors
    /// `Out of Fuel`.
    pub(crate) fn console(&mut self, level: LogLevel, args: &[Value]) -> OpResult<()> {
        let room = self.max_log_bytes.saturating_sub(self.log_bytes);
        if self.log.len() >= self.max_log_lines || room == 0 {
            self.log_dropped += 1;
            return Ok(());
        }
        let mut line = String::new();
        let mut nodes = 0u64;
        let mut ended = Ended::Whole;
        for (i, &a) in args.iter().enumerate() {
            if i > 0 {
                if line.len() >= room {
                    ended = Ended::Cut;
                    break;
                }
                line.push(' ');
            }
            let fuel_cap = self.meter.fuel.left().saturating_sub(nodes);
            let (e, n) = self.render_into(&mut line, a, room, fuel_cap);
            nodes = nodes.saturating_add(n);
            if e != Ended::Whole {
                ended = e;
                break;
            }
        }
        let cost = nodes.saturating_add((line.len() as u64).saturating_mul(MILLI_PER_UNIT));
        if ended == Ended::Fuel || cost > self.meter.fuel.left() {
            self.meter.fuel.set(0);
            return Err(Fault::Fatal(RunError::out_of_fuel()));
        }
        self.pay(cost);
        if ended == Ended::Cut || line.len() > room {
            let marker = log_marker(self.max_log_bytes);
            if room < marker.len() {
                self.log_dropped += 1;
                self.log_bytes = self.max_log_bytes;
                return Ok(());
            }
            cut_with(&mut line, room, &marker);
        }
        self.log_bytes += line.len();
        self.log.push(LogLine {
            level,
            message: line,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ajs_bytecode::isa::{insert_charges, Op, Src};
    use ajs_bytecode::{Function, Program};

    fn vm(max_heap_bytes: usize, fuel: u64) -> Vm {
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
        let opts = crate::VmOptions {
            max_heap_bytes,
            fuel,
            max_log_bytes: 1000,
            ..crate::VmOptions::default()
        };
        Vm::new(program, &[], opts).unwrap()
    }

    /// `leaf` in an array of two references to itself, `levels` times.
    fn doubled(vm: &mut Vm, leaf: Value, levels: usize) -> Value {
        let mut x = leaf;
        for _ in 0..levels {
            x = Value::Arr(vm.heap.insert(Cell::Arr(vec![x, x])));
        }
        x
    }

    #[test]
    fn a_shared_value_stops_at_the_budget_and_pays_for_its_walk() {
        let mut vm = vm(1 << 20, 1 << 40);
        let s = vm.str_value("abcdefgh").unwrap();
        let x = doubled(&mut vm, s, 40);
        let before = vm.meter.fuel.left();
        let e = vm.export(x, || "Result".into()).unwrap_err();
        assert!(Vm::is_copy_limit(&e), "{}", e.message);
        assert!(
            e.message.starts_with("Result is over the "),
            "{}",
            e.message
        );
        // the walk paid for what it visited, which the budget bounds
        let paid = before - vm.meter.fuel.left();
        let most = (vm.export_budget().nodes as u64 + 1) * (MILLI_PER_ELEMENT + 1);
        assert!(paid > 0 && paid <= most, "{paid} of at most {most}");
        // on a small fuel budget the fuel runs out first
        let mut vm2 = super::tests::vm(1 << 30, 5_000);
        let x = doubled(&mut vm2, Value::Num(1.0), 40);
        let e = vm2.export(x, || "Result".into()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfFuel);
        assert_eq!(vm2.meter.fuel.left(), 0);
    }

    #[test]
    fn a_copy_within_budget_is_exact_and_counts_its_bytes() {
        let mut vm = vm(1 << 20, 1 << 40);
        let x = doubled(&mut vm, Value::Num(1.5), 10);
        let j = vm.export(x, || "Result".into()).unwrap();
        // 1024 leaves of 3 bytes; 1023 arrays of two brackets and a comma
        assert_eq!(j.json_len(), 1024 * 3 + 1023 * 3);
        // what the copy may take is what it counts: 2^10 leaves and 2^10 - 1 arrays
        let b = vm.export_budget();
        let mut room = b;
        let (r, _) = vm.copy_within(x, &mut room, u64::MAX);
        assert!(r.is_ok());
        let used = b.bytes - room.bytes;
        assert!(used >= 1023 * 2 * size_of::<JsValue>(), "{used}");
        let mut tight = Budget {
            bytes: used - 1,
            nodes: b.nodes,
        };
        assert!(matches!(
            vm.copy_within(x, &mut tight, u64::MAX).0,
            Err(Stop::Full)
        ));
    }

    #[test]
    fn text_renders_as_the_copy_displays() {
        let mut vm = vm(1 << 20, 1 << 40);
        let s = vm.str_value("q\"\n\u{1}é😀").unwrap();
        let lone = Value::Str(vm.heap.insert(Cell::Str(vec![0xD800, 0x61].into())));
        let d = Value::Obj(vm.heap.insert(Cell::Date(0.0)));
        let mut m = PropMap::default();
        m.insert("7".encode_utf16().collect(), Value::Num(7.0));
        m.insert("u".encode_utf16().collect(), Value::Undefined);
        m.insert("s".encode_utf16().collect(), s);
        m.insert("0".encode_utf16().collect(), d);
        m.insert("n".encode_utf16().collect(), Value::Num(f64::NAN));
        let o = Value::Obj(vm.heap.insert(Cell::Obj(m)));
        let a = Value::Arr(vm.heap.insert(Cell::Arr(vec![
            Value::Undefined,
            Value::Null,
            Value::Bool(true),
            Value::Num(-0.0),
            Value::Num(1e21),
            Value::Num(9007199254740992.0),
            Value::Num(0.1),
            lone,
            o,
            d,
        ])));
        for v in [a, o, s, d, Value::Num(1e21), Value::Undefined] {
            let shown = vm.export(v, || "Value".into()).unwrap().display();
            assert_eq!(vm.render(v), shown);
        }
    }

    #[test]
    fn a_log_line_is_cut_at_the_byte_cap_and_later_lines_dropped() {
        let mut vm = vm(1 << 20, 1 << 40);
        let x = doubled(&mut vm, Value::Num(1.0), 40);
        vm.console(LogLevel::Info, &[Value::Num(1.0), x]).unwrap();
        vm.console(LogLevel::Info, &[Value::Num(2.0)]).unwrap();
        assert_eq!(vm.log.len(), 1);
        assert_eq!(vm.log_dropped, 1);
        let line = &vm.log[0].message;
        assert!(
            line.len() <= 1000 && line.starts_with("1 [[[[") && line.ends_with(&log_marker(1000))
        );
        let msg = vm.message_of(x);
        assert!(msg.len() <= MAX_MESSAGE_BYTES && msg.ends_with(&message_marker()));
    }

    #[test]
    fn sizes_count_what_is_allocated() {
        assert_eq!(alloc(0), 0);
        assert_eq!(alloc(1), 32);
        assert_eq!(alloc(16), 32);
        assert_eq!(alloc(17), 48);
        assert!(map_bytes(1) > size_of::<JsValue>());
        assert!(map_bytes(1000) >= 1000 * (size_of::<String>() + size_of::<JsValue>()));
        assert_eq!(utf8_len(&[0x61, 0xD800, 0x20AC]), 1 + 3 + 3);
        assert_eq!(utf8_len(&[0xD83D, 0xDE00]), 4);
    }

    #[test]
    fn a_cut_keeps_whole_characters_and_the_marker_within_the_cap() {
        let mut s = "é".repeat(100);
        cut_with(&mut s, 51, "[m]");
        assert!(s.len() <= 51 && s.ends_with("[m]"), "{s}");
        let mut t = Text::new(String::new(), 5);
        assert!(t.push("ab€cd").is_err());
        assert_eq!(t.out, "ab€");
    }
}
