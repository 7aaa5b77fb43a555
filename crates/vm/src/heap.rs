//! The per-run arena: strings, arrays and objects addressed by index, with live-byte accounting
//! and a mark-and-sweep collector. The ceiling is checked **before** memory is committed.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;

use indexmap::IndexMap;

use crate::memory;
use crate::value::Value;

/// Index of a heap cell.
pub type Gc = u32;

/// A property key: UTF-16, shared (an object built from a literal, a copy of an object and the
/// objects one `JSON.parse` makes share their keys instead of copying them).
pub type Key = std::sync::Arc<[u16]>;

/// Objects with at most this many properties keep them in a plain vector searched by comparing
/// keys (cheaper than hashing a key and no hash table to allocate; bounded, so no input can make
/// it slow); a larger object's properties are in a hash map.
pub const SMALL_OBJECT: usize = 8;

/// An object's own properties, in insertion order, keyed by UTF-16 strings.
///
/// Up to [`SMALL_OBJECT`] properties are a `Vec` of pairs searched linearly; the insert that
/// would make it larger moves them, in order, into an `IndexMap` hashed with SipHash under a
/// per-map random key (so a guest cannot flood one bucket), where they stay. Which of the two
/// holds the properties is invisible: every method (order, positions, `insert` of an existing
/// key keeping its position) behaves as on an `IndexMap`.
#[derive(Clone)]
pub struct PropMap(Props);

/// The two representations of a [`PropMap`].
#[derive(Clone)]
enum Props {
    /// At most [`SMALL_OBJECT`] pairs, in insertion order.
    Small(Vec<(Key, Value)>),
    /// More than [`SMALL_OBJECT`] pairs (or made with that capacity); boxed, so that a heap
    /// cell stays small.
    Large(Box<IndexMap<Key, Value, RandomState>>),
}

impl std::fmt::Debug for PropMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Default for PropMap {
    fn default() -> Self {
        PropMap(Props::Small(Vec::new()))
    }
}

impl PropMap {
    /// An empty map with room for `n` properties: a vector if `n` is small, else a hash map.
    pub fn with_capacity(n: usize) -> Self {
        PropMap(if n <= SMALL_OBJECT {
            Props::Small(Vec::with_capacity(n))
        } else {
            Props::Large(Box::new(IndexMap::with_capacity_and_hasher(
                n,
                RandomState::new(),
            )))
        })
    }

    /// The hash map holding the properties, when there are more than [`SMALL_OBJECT`].
    #[inline]
    pub(crate) fn large(&self) -> Option<&IndexMap<Key, Value, RandomState>> {
        match &self.0 {
            Props::Small(_) => None,
            Props::Large(m) => Some(m),
        }
    }

    /// The capacity of the vector holding a small map's properties (0 for a large one).
    #[inline]
    pub(crate) fn small_capacity(&self) -> usize {
        match &self.0 {
            Props::Small(v) => v.capacity(),
            Props::Large(_) => 0,
        }
    }

    /// The number of properties.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            Props::Small(v) => v.len(),
            Props::Large(m) => m.len(),
        }
    }

    /// Whether there are no properties.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of `key`, if present.
    #[inline]
    pub fn get_index_of(&self, key: &[u16]) -> Option<usize> {
        match &self.0 {
            Props::Small(v) => v.iter().position(|(k, _)| **k == *key),
            Props::Large(m) => m.get_index_of(key),
        }
    }

    /// Whether `key` is present.
    #[inline]
    pub fn contains_key(&self, key: &[u16]) -> bool {
        self.get_index_of(key).is_some()
    }

    /// The value of `key`, if present.
    #[inline]
    pub fn get(&self, key: &[u16]) -> Option<&Value> {
        self.get_entry(key).map(|(_, x)| x)
    }

    /// The (shared) key and the value of `key`, if present.
    #[inline]
    pub fn get_entry(&self, key: &[u16]) -> Option<(&Key, &Value)> {
        match &self.0 {
            Props::Small(v) => v.iter().find(|(k, _)| **k == *key).map(|(k, x)| (k, x)),
            Props::Large(m) => m.get_key_value(key),
        }
    }

    /// The value of `key`, mutably, if present.
    #[inline]
    pub fn get_mut(&mut self, key: &[u16]) -> Option<&mut Value> {
        match &mut self.0 {
            Props::Small(v) => v.iter_mut().find(|(k, _)| **k == *key).map(|(_, x)| x),
            Props::Large(m) => m.get_mut(key),
        }
    }

    /// The key and value at position `i`, if in range.
    #[inline]
    pub fn get_index(&self, i: usize) -> Option<(&[u16], &Value)> {
        match &self.0 {
            Props::Small(v) => v.get(i).map(|(k, x)| (&**k, x)),
            Props::Large(m) => m.get_index(i).map(|(k, x)| (&**k, x)),
        }
    }

    /// The key and (mutable) value at position `i`, if in range.
    #[inline]
    pub fn get_index_mut(&mut self, i: usize) -> Option<(&[u16], &mut Value)> {
        match &mut self.0 {
            Props::Small(v) => v.get_mut(i).map(|(k, x)| (&**k, x)),
            Props::Large(m) => m.get_index_mut(i).map(|(k, x)| (&**k, x)),
        }
    }

    /// Sets `key` to `value`: a new key goes last, an existing one keeps its position. Returns the
    /// value it replaced.
    pub fn insert(&mut self, key: Key, value: Value) -> Option<Value> {
        match &mut self.0 {
            Props::Small(v) => {
                if let Some((_, x)) = v.iter_mut().find(|(k, _)| *k == key) {
                    return Some(std::mem::replace(x, value));
                }
                if v.len() < SMALL_OBJECT {
                    v.push((key, value));
                    return None;
                }
                let mut m =
                    IndexMap::with_capacity_and_hasher(2 * SMALL_OBJECT, RandomState::new());
                m.extend(v.drain(..));
                m.insert(key, value);
                self.0 = Props::Large(Box::new(m));
                None
            }
            Props::Large(m) => m.insert(key, value),
        }
    }

    /// Adds a property whose key the caller has just looked for and not found (no second
    /// search). A key that is there already must go through [`PropMap::insert`].
    pub fn insert_new(&mut self, key: Key, value: Value) {
        match &mut self.0 {
            Props::Small(v) if v.len() < SMALL_OBJECT => v.push((key, value)),
            Props::Small(_) => {
                self.insert(key, value);
            }
            Props::Large(m) => {
                m.insert(key, value);
            }
        }
    }

    /// The properties in order.
    #[inline]
    pub fn iter(&self) -> Iter<'_> {
        match &self.0 {
            Props::Small(v) => Iter::Small(v.iter()),
            Props::Large(m) => Iter::Large(m.iter()),
        }
    }

    /// The properties in order, with their shared keys.
    pub fn entries(&self) -> impl Iterator<Item = (&Key, &Value)> {
        let (small, large) = match &self.0 {
            Props::Small(v) => (Some(v.iter().map(|(k, x)| (k, x))), None),
            Props::Large(m) => (None, Some(m.iter())),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
    }

    /// The keys in order.
    #[inline]
    pub fn keys(&self) -> impl Iterator<Item = &[u16]> {
        self.iter().map(|(k, _)| k)
    }

    /// The values in order.
    #[inline]
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.iter().map(|(_, x)| x)
    }
}

/// The properties of a [`PropMap`] in order ([`PropMap::iter`]).
pub enum Iter<'a> {
    /// Of a small map.
    Small(std::slice::Iter<'a, (Key, Value)>),
    /// Of a large map.
    Large(indexmap::map::Iter<'a, Key, Value>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u16], &'a Value);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next().map(|(k, x)| (&**k, x)),
            Iter::Large(it) => it.next().map(|(k, x)| (&**k, x)),
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Small(it) => it.size_hint(),
            Iter::Large(it) => it.size_hint(),
        }
    }
}

impl<'a> IntoIterator for &'a PropMap {
    type Item = (&'a [u16], &'a Value);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// What a heap cell holds.
#[derive(Debug, Clone)]
pub enum Cell {
    /// A free cell (on the free list).
    Free,
    /// A string of UTF-16 code units.
    Str(Box<[u16]>),
    /// An array.
    Arr(Vec<Value>),
    /// A plain object.
    Obj(PropMap),
    /// A `Set` (an object to the guest; crosses out as an array); boxed, so that a heap cell
    /// stays small.
    Set(Box<SetCell>),
    /// A `Date`: epoch milliseconds, UTC (an object to the guest; crosses out as its ISO string).
    Date(f64),
    /// A regular expression (an object to the guest; crosses out as `{}`).
    Regex(Box<RegexCell>),
    /// A string that is the first `len` code units of the [`Cell::StrBuf`] at `buf` (made by
    /// `+` on long strings, so that appending to the newest string of a buffer is amortised
    /// O(1): a buffer only ever grows at its end, so every slice of it stays unchanged).
    Slice {
        /// The buffer cell.
        buf: Gc,
        /// Length in code units (at most the buffer's length).
        len: u32,
    },
    /// The code units behind one or more [`Cell::Slice`] strings; no value points at it.
    StrBuf(Vec<u16>),
}

/// The identity of a set member under SameValueZero.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SetKey {
    /// `undefined`.
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number's bits (`-0` as `0`, every NaN as one NaN).
    Num(u64),
    /// A string's code units.
    Str(Box<[u16]>),
    /// An array or object, by identity.
    Ref(Gc),
}

/// A set's members in insertion order, keyed by SameValueZero identity.
pub type SetCell = IndexMap<SetKey, Value, RandomState>;

/// A compiled regular expression.
#[derive(Debug, Clone)]
pub struct RegexCell {
    /// The JavaScript source of the pattern.
    pub source: Box<[u16]>,
    /// The flags as written (`gimsu` subset).
    pub flags: Box<str>,
    /// The compiled linear-time matcher.
    pub re: std::sync::Arc<crate::regex_engine::Compiled>,
    /// `g`.
    pub global: bool,
    /// JavaScript's `lastIndex` (used by `test`/`exec` with `g`).
    pub last_index: usize,
}

/// Accounted size of a set with `n` members whose string members total `units` code units.
pub fn set_bytes(n: usize, units: usize) -> usize {
    16 + 8 * n + 2 * units
}

/// Accounted size of a regex with a source of `len` code units, as the guest sees it (its
/// compiled form counts in the heap's real bytes: [`crate::memory::regex_real`]).
pub fn regex_bytes(len: usize) -> usize {
    16 + 2 * len + 256
}

/// Accounted size of a string of `len` code units (decision 16: 2 bytes per code unit, plus a
/// 16-byte header).
pub fn str_bytes(len: usize) -> usize {
    16 + 2 * len
}
/// Accounted size of a [`Cell::Slice`] (its header; the code units count in its buffer).
pub const SLICE_BYTES: usize = 16;

/// Accounted size of a [`Cell::StrBuf`] of `len` code units (2 bytes per code unit; the header
/// is the slices'). A string made as one slice of a fresh buffer counts as [`str_bytes`] says.
pub fn strbuf_bytes(len: usize) -> usize {
    2 * len
}

/// Accounted size of an array of `len` elements (16 + 8 per slot; contents count where they are
/// allocated).
pub fn arr_bytes(len: usize) -> usize {
    16 + 8 * len
}
/// Accounted size of one object property with a key of `key_len` code units.
pub fn prop_bytes(key_len: usize) -> usize {
    8 + 2 * key_len
}

impl Cell {
    /// Accounted size of the cell's content (inline: [`Heap::insert`] of a string would
    /// otherwise pay for a call and its saved registers).
    #[inline]
    pub fn bytes(&self) -> usize {
        match self {
            Cell::Free => 0,
            Cell::Str(s) => str_bytes(s.len()),
            Cell::Arr(a) => arr_bytes(a.len()),
            Cell::Obj(o) => 16 + o.keys().map(|k| prop_bytes(k.len())).sum::<usize>(),
            Cell::Set(s) => set_bytes(
                s.len(),
                s.keys()
                    .map(|k| match k {
                        SetKey::Str(u) => u.len(),
                        _ => 0,
                    })
                    .sum(),
            ),
            Cell::Date(_) => 24,
            Cell::Regex(r) => regex_bytes(r.source.len()),
            Cell::Slice { .. } => SLICE_BYTES,
            Cell::StrBuf(b) => strbuf_bytes(b.len()),
        }
    }
}

/// The arena.
///
/// Two counts of live memory: `live`, decision 16's estimator (what the guest sees), and `real`,
/// what the cells really hold ([`crate::memory`]: every cell's storage by capacity, the cell
/// and mark vectors and the free list). Either passing its ceiling refuses the allocation.
#[derive(Debug, Clone)]
pub struct Heap {
    cells: Vec<Cell>,
    marks: Vec<bool>,
    free: Vec<Gc>,
    live: usize,
    limit: usize,
    next_gc: usize,
    real: usize,
    /// the part of `real` that is the heap's own vectors
    vecs: usize,
    real_limit: usize,
    /// `real` at which the next collection runs (by the real count)
    real_gc: usize,
    /// the fast path's real threshold: `real_gc`, less the next growth of a full cell vector
    next_real: usize,
    collections: u64,
    /// The properties besides its elements of an array that has them (a match result's
    /// `index`, `input` and `groups`): the array's cell to an object cell, which lives while
    /// the array does.
    extras: HashMap<Gc, Gc>,
}

/// Real bytes of one entry of [`Heap`]'s extras table (key, value, control byte, slack).
const EXTRA_ENTRY: usize = 24;

const FIRST_GC: usize = 4 << 20;

/// The capacity a vector has after `len` pushes from empty (4, then doubling).
#[inline]
fn slots(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len.next_power_of_two().max(4)
    }
}
/// The first collection by the real count (the real count of small values is a few times their
/// estimate, so its schedule starts higher).
const FIRST_REAL_GC: usize = 16 << 20;

impl Heap {
    /// An empty heap with a ceiling of `limit` live bytes (and [`memory::real_ceiling`] of
    /// real bytes).
    pub fn new(limit: usize) -> Heap {
        let mut h = Heap {
            cells: Vec::new(),
            marks: Vec::new(),
            free: Vec::new(),
            live: 0,
            limit,
            next_gc: 0,
            real: 0,
            vecs: 0,
            real_limit: 0,
            real_gc: 0,
            next_real: 0,
            collections: 0,
            extras: HashMap::new(),
        };
        h.set_limit(limit);
        h
    }

    /// Empties the heap for a new run with a ceiling of `limit` (as [`Heap::new`] builds it),
    /// keeping the vectors' capacity (counted as real bytes: the memory stays held).
    #[inline]
    pub fn reset(&mut self, limit: usize) {
        // every field by name: one added without a reset does not compile
        let Heap {
            cells,
            marks,
            free,
            live,
            // (with the ceiling: `set_limit`, below)
            limit: _,
            next_gc: _,
            real: _,
            vecs: _,
            real_limit: _,
            real_gc: _,
            next_real: _,
            collections,
            extras,
        } = self;
        // (the cells need dropping: their clear tested first, a no-op when they are empty)
        if !cells.is_empty() {
            cells.clear();
        }
        marks.clear();
        free.clear();
        extras.clear();
        *live = 0;
        *collections = 0;
        self.set_limit(limit);
    }

    /// Sets the ceiling of an empty heap (and when its first collection runs): it is then as
    /// [`Heap::new`]`(limit)` builds it.
    #[inline]
    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
        self.next_gc = FIRST_GC.min(limit);
        self.real_limit = memory::real_ceiling(limit);
        self.vecs = self.vec_bytes();
        self.real = self.vecs;
        self.real_gc = FIRST_REAL_GC.min(self.real_limit);
        self.schedule_real();
    }

    /// Real bytes of the heap's own vectors (cells, marks, free list): a slot each for the
    /// capacity that pushing the cells from empty gives (a function of the cell count, so a
    /// restarted heap counts as a fresh one; a reused heap keeps at most a few thousand
    /// slots more, `Vm::release`).
    #[inline]
    fn vec_bytes(&self) -> usize {
        slots(self.cells.len()) * memory::SLOT + Heap::extras_bytes(self.extras.len())
    }

    /// Real bytes of an extras table of `n` entries (grown from empty).
    fn extras_bytes(n: usize) -> usize {
        if n == 0 {
            0
        } else {
            memory::alloc(slots(n) * EXTRA_ENTRY)
        }
    }

    /// Real bytes giving the array `arr` extra properties adds to the heap's own vectors.
    pub fn extras_growth(&self, arr: Gc) -> usize {
        if self.extras.contains_key(&arr) {
            return 0;
        }
        let n = self.extras.len();
        Heap::extras_bytes(n + 1) - Heap::extras_bytes(n)
    }

    /// Gives the array `arr` the properties of the object `obj` besides its elements (its room,
    /// [`Heap::extras_growth`], admitted by the caller).
    pub fn set_extras(&mut self, arr: Gc, obj: Gc) {
        self.extras.insert(arr, obj);
        self.vectors_changed();
    }

    /// The object holding the array `arr`'s properties besides its elements, if it has any.
    #[inline]
    pub fn extras(&self, arr: Gc) -> Option<Gc> {
        if self.extras.is_empty() {
            return None;
        }
        self.extras.get(&arr).copied()
    }

    /// Every array with extra properties and the object holding them (for snapshots).
    pub(crate) fn all_extras(&self) -> Vec<(Gc, Gc)> {
        let mut v: Vec<(Gc, Gc)> = self.extras.iter().map(|(a, o)| (*a, *o)).collect();
        v.sort_unstable();
        v
    }

    /// Sets the fast path's real threshold: the collection schedule, less the growth of the
    /// cell vector when the next new cell needs it.
    #[inline]
    fn schedule_real(&mut self) {
        self.next_real = self
            .real_gc
            .min(self.real_limit.saturating_sub(self.pending()));
    }

    /// Real bytes the next new cell adds to the heap's vectors: their growth when the cell
    /// vector is full and no cell is free.
    #[inline]
    fn pending(&self) -> usize {
        let cap = slots(self.cells.len());
        if self.free.is_empty() && self.cells.len() == cap {
            cap.max(4) * memory::SLOT
        } else {
            0
        }
    }

    /// The most cells the heap holds without growing its vectors.
    pub fn capacity(&self) -> usize {
        self.cells
            .capacity()
            .max(self.marks.capacity())
            .max(self.free.capacity())
    }

    /// Every cell (for snapshots).
    pub(crate) fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// A heap holding `cells` (restored from a snapshot): the free list, the marks and both
    /// live-byte counts are rebuilt from the cells, never trusted from outside.
    pub(crate) fn from_cells(cells: Vec<Cell>, limit: usize, collections: u64) -> Heap {
        let free = cells
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, c)| matches!(c, Cell::Free))
            .map(|(i, _)| i as Gc)
            .collect();
        let live = cells.iter().map(Cell::bytes).sum::<usize>();
        let mut h = Heap {
            marks: vec![false; cells.len()],
            cells,
            free,
            live,
            limit,
            next_gc: (live.saturating_mul(2)).max(FIRST_GC).min(limit),
            real: 0,
            vecs: 0,
            real_limit: memory::real_ceiling(limit),
            real_gc: 0,
            next_real: 0,
            collections,
            extras: HashMap::new(),
        };
        h.vecs = h.vec_bytes();
        h.real = h.recount_real();
        h.real_gc = (h.real.saturating_mul(2))
            .max(FIRST_REAL_GC)
            .min(h.real_limit);
        h.schedule_real();
        h
    }

    /// Live bytes as accounted.
    pub fn live_bytes(&self) -> usize {
        self.live
    }

    /// Real bytes held, as counted.
    pub fn real_bytes(&self) -> usize {
        self.real
    }

    /// The ceiling.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The real-bytes ceiling.
    pub fn real_limit(&self) -> usize {
        self.real_limit
    }

    /// Collections run so far.
    pub fn collections(&self) -> u64 {
        self.collections
    }

    /// Whether `more` estimated and `real` real bytes fit without a collection.
    #[inline]
    pub fn fits_without_gc(&self, more: usize, real: usize) -> bool {
        self.live.saturating_add(more) <= self.next_gc
            && self.real.saturating_add(real) <= self.next_real
    }

    /// Whether `more` estimated and `real` real bytes fit under the ceilings at all (after a
    /// collection), with the growth of the cell vector if the next cell needs it.
    pub fn fits(&self, more: usize, real: usize) -> bool {
        self.live.saturating_add(more) <= self.limit
            && self
                .real
                .saturating_add(real)
                .saturating_add(self.pending())
                <= self.real_limit
    }

    /// Accounts `more` bytes for growth of an existing cell (the caller checked [`Heap::fits`]).
    pub fn grow(&mut self, more: usize) {
        self.live += more;
    }

    /// Live bytes recomputed from the cells (for checking the ledger in tests).
    pub fn recount(&self) -> usize {
        self.cells.iter().map(Cell::bytes).sum()
    }

    /// Real bytes recomputed from the cells and the vectors (for checking the ledger).
    pub fn recount_real(&self) -> usize {
        self.cells.iter().map(Cell::real_bytes).sum::<usize>() + self.vec_bytes()
    }

    /// Accounts `less` bytes released by an existing cell that shrank in place.
    pub fn shrink(&mut self, less: usize) {
        self.live = self.live.saturating_sub(less);
    }

    /// Accounts `more` real bytes a cell took besides its capacity (a key, a set member).
    #[inline]
    pub fn grow_real(&mut self, more: usize) {
        self.real += more;
    }

    /// Accounts `less` real bytes a cell released besides its capacity.
    #[inline]
    pub fn shrink_real(&mut self, less: usize) {
        self.real = self.real.saturating_sub(less);
    }

    /// Stores a new cell; the caller has checked [`Heap::fits`] for its size.
    #[inline]
    pub fn insert(&mut self, cell: Cell) -> Gc {
        self.live += cell.bytes();
        self.real += cell.real_bytes();
        if let Some(i) = self.free.pop() {
            self.cells[i as usize] = cell;
            if self.free.is_empty() {
                // (the next cell may need the vectors to grow)
                self.schedule_real();
            }
            i
        } else {
            self.cells.push(cell);
            self.marks.push(false);
            let n = self.cells.len();
            // (the counted slots just grew, or are full)
            if n & (n - 1) == 0 || (n - 1) & (n.wrapping_sub(2)) == 0 {
                self.vectors_changed();
            }
            (self.cells.len() - 1) as Gc
        }
    }

    /// After a push that may have grown the counted slots or filled them.
    #[cold]
    fn vectors_changed(&mut self) {
        let vecs = self.vec_bytes();
        self.real = (self.real + vecs).saturating_sub(self.vecs);
        self.vecs = vecs;
        self.schedule_real();
    }

    /// The cell at `g`.
    #[inline]
    pub fn get(&self, g: Gc) -> &Cell {
        // Values only ever hold indices the heap handed out and that are reachable, so the cell
        // exists; a stale index would be a VM bug, answered with a free cell, never a panic.
        self.cells.get(g as usize).unwrap_or(&Cell::Free)
    }

    /// The code units of the string at `g` (empty when `g` is not a string).
    #[inline]
    pub fn str_units(&self, g: Gc) -> &[u16] {
        match self.get(g) {
            Cell::Str(s) => s,
            Cell::Slice { buf, len } => match self.get(*buf) {
                Cell::StrBuf(b) => b.get(..*len as usize).unwrap_or(&[]),
                _ => &[],
            },
            _ => &[],
        }
    }

    /// The buffer the string at `g` can be extended in place in: `g` is a slice reaching the
    /// end of its buffer, so units appended there are seen by no existing string.
    pub fn appendable(&self, g: Gc) -> Option<Gc> {
        match self.get(g) {
            Cell::Slice { buf, len } => match self.get(*buf) {
                Cell::StrBuf(b) if b.len() == *len as usize => Some(*buf),
                _ => None,
            },
            _ => None,
        }
    }

    /// Real bytes the heap's vectors grow by when `n` new cells are stored at once (beyond
    /// the free cells; a single cell's growth is already in [`Heap::fits`]).
    #[inline]
    pub fn cells_growth(&self, n: usize) -> usize {
        let more = n.saturating_sub(self.free.len());
        let len = self.cells.len();
        (slots(len + more) - slots(len)) * memory::SLOT
    }

    /// Whether one more property fits in the capacity of the object at `g` (then adding it
    /// changes no capacity).
    #[inline]
    pub fn has_room_for_prop(&self, g: Gc) -> bool {
        match self.get(g) {
            Cell::Obj(o) => match o.large() {
                None => o.len() < o.small_capacity(),
                Some(m) => m.len() < m.capacity(),
            },
            _ => false,
        }
    }

    /// Real bytes the cell at `g` grows by when `n` more elements (array slots, string-buffer
    /// units, set members or properties) are added to it: its next capacity, predicted.
    #[inline]
    pub fn growth(&self, g: Gc, n: usize) -> usize {
        let cell = self.get(g);
        let grown = |len: usize, cap: usize, size: usize| {
            if len + n <= cap {
                return 0;
            }
            memory::alloc(memory::grown_cap(len, cap, n) * size)
                .saturating_sub(memory::alloc(cap * size))
        };
        match cell {
            Cell::Arr(a) => grown(a.len(), a.capacity(), std::mem::size_of::<Value>()),
            Cell::StrBuf(b) => grown(b.len(), b.capacity(), 2),
            Cell::Obj(o) => match o.large() {
                None if o.len() + n <= SMALL_OBJECT => grown(
                    o.len(),
                    o.small_capacity(),
                    std::mem::size_of::<(Key, Value)>(),
                ),
                None => memory::map_real::<Key, Value>((o.len() + n).max(2 * SMALL_OBJECT))
                    .saturating_sub(memory::vec_real::<(Key, Value)>(o.small_capacity())),
                Some(m) => memory::map_growth::<Key, Value>(m.len(), m.capacity(), n),
            },
            Cell::Set(m) => memory::map_growth::<SetKey, Value>(m.len(), m.capacity(), n),
            _ => 0,
        }
    }

    /// Appends `units` to the buffer at `buf` and accounts them (the caller has checked
    /// [`Heap::fits`] for [`strbuf_bytes`] of their length and [`Heap::growth`]).
    pub fn append_to_buf(&mut self, buf: Gc, units: &[u16]) {
        match self.cells.get_mut(buf as usize) {
            // within its capacity: no real bytes change
            Some(Cell::StrBuf(b)) if b.len() + units.len() <= b.capacity() => {
                b.extend_from_slice(units)
            }
            _ => {
                self.mutate(buf, |c| {
                    if let Cell::StrBuf(b) = c {
                        b.extend_from_slice(units);
                    }
                });
            }
        }
        self.live += strbuf_bytes(units.len());
    }

    /// Appends `units` to the buffer at `buf` when they fit in its capacity and their bytes and
    /// `then` more (for a cell made next) fit without a collection; whether it did (when not,
    /// nothing is done and the caller admits the growth first).
    #[inline]
    pub fn append_in_place(&mut self, buf: Gc, units: &[u16], then: usize) -> bool {
        let more = strbuf_bytes(units.len());
        if self.live + more + then > self.next_gc || self.real + then > self.next_real {
            return false;
        }
        match self.cells.get_mut(buf as usize) {
            Some(Cell::StrBuf(b)) if b.len() + units.len() <= b.capacity() => {
                b.extend_from_slice(units);
                self.live += more;
                true
            }
            _ => false,
        }
    }

    /// Appends `items` to the array at `g` when they fit in its capacity and `8 × len` more
    /// estimated bytes fit without a collection (the common push); returns the new length, or
    /// `None` (nothing done) when the caller must admit the growth first.
    #[inline]
    pub fn push_in_place(&mut self, g: Gc, items: &[Value]) -> Option<usize> {
        let more = 8 * items.len();
        if self.live + more > self.next_gc {
            return None;
        }
        match self.cells.get_mut(g as usize) {
            Some(Cell::Arr(a)) if a.len() + items.len() <= a.capacity() => {
                a.extend_from_slice(items);
                self.live += more;
                Some(a.len())
            }
            _ => None,
        }
    }

    /// The cell at `g`, mutably, for a change that leaves its capacity alone (a change of
    /// capacity goes through [`Heap::mutate`]).
    #[inline]
    pub fn get_mut(&mut self, g: Gc) -> Option<&mut Cell> {
        self.cells.get_mut(g as usize)
    }

    /// Runs `f` on the cell at `g` and follows the change of its capacity in the real count
    /// (keys and set members `f` adds or removes are the caller's: [`Heap::grow_real`]).
    #[inline]
    pub fn mutate<R>(&mut self, g: Gc, f: impl FnOnce(&mut Cell) -> R) -> Option<R> {
        let cell = self.cells.get_mut(g as usize)?;
        let before = cell.shape_bytes();
        let r = f(cell);
        let after = cell.shape_bytes();
        self.real = (self.real + after).saturating_sub(before);
        Some(r)
    }

    /// Marks from `roots`, frees everything unreachable, and returns the bytes freed.
    pub fn collect<'a>(&mut self, roots: impl IntoIterator<Item = &'a Value>) -> usize {
        self.collections += 1;
        for m in self.marks.iter_mut() {
            *m = false;
        }
        let mut stack: Vec<Gc> = Vec::new();
        for v in roots {
            if let Some(g) = v.gc() {
                stack.push(g);
            }
        }
        while let Some(g) = stack.pop() {
            let Some(m) = self.marks.get_mut(g as usize) else {
                continue;
            };
            if *m {
                continue;
            }
            *m = true;
            match &self.cells[g as usize] {
                Cell::Arr(a) => {
                    stack.extend(a.iter().filter_map(Value::gc));
                    if let Some(o) = self.extras(g) {
                        stack.push(o);
                    }
                }
                Cell::Obj(o) => stack.extend(o.values().filter_map(Value::gc)),
                Cell::Set(m) => stack.extend(m.values().filter_map(Value::gc)),
                Cell::Slice { buf, .. } => stack.push(*buf),
                Cell::Str(_) | Cell::StrBuf(_) | Cell::Free | Cell::Date(_) | Cell::Regex(_) => {}
            }
        }
        let mut freed = 0;
        let mut freed_real = 0;
        for (i, cell) in self.cells.iter_mut().enumerate() {
            if !self.marks[i] && !matches!(cell, Cell::Free) {
                freed += cell.bytes();
                freed_real += cell.real_bytes();
                *cell = Cell::Free;
                self.free.push(i as Gc);
            }
        }
        self.live = self.live.saturating_sub(freed);
        if !self.extras.is_empty() {
            let marks = &self.marks;
            self.extras.retain(|a, _| marks[*a as usize]);
        }
        let vecs = self.vec_bytes();
        self.real = (self.real + vecs).saturating_sub(freed_real + self.vecs);
        self.vecs = vecs;
        self.next_gc = (self.live.saturating_mul(2)).max(FIRST_GC).min(self.limit);
        self.real_gc = (self.real.saturating_mul(2))
            .max(FIRST_REAL_GC)
            .min(self.real_limit);
        self.schedule_real();
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A heap's running counts match a recount from its cells after every kind of change.
    fn check(h: &Heap) {
        assert_eq!(h.live_bytes(), h.recount(), "estimator");
        assert_eq!(h.real_bytes(), h.recount_real(), "real");
    }

    #[test]
    fn the_real_count_follows_inserts_mutations_and_collections() {
        let mut h = Heap::new(64 << 20);
        check(&h);
        let mut keep = Vec::new();
        for i in 0..2000u32 {
            let s = h.insert(Cell::Str(vec![7u16; (i % 50) as usize].into_boxed_slice()));
            let a = h.insert(Cell::Arr(vec![Value::Str(s)]));
            let mut m = PropMap::default();
            for k in 0..(i % 12) {
                let key: Key = vec![b'k' as u16, k as u16].into();
                m.insert(key, Value::Arr(a));
            }
            let o = h.insert(Cell::Obj(m));
            let mut set = SetCell::default();
            set.insert(SetKey::Str(vec![1u16; 9].into()), Value::Null);
            let st = h.insert(Cell::Set(Box::new(set)));
            if i % 3 == 0 {
                keep.push(Value::Obj(o));
                keep.push(Value::Obj(st));
            }
            // a property added in place: its key is the caller's to count
            if i % 7 == 0 {
                let key: Key = vec![b'z' as u16; 5].into();
                h.grow_real(memory::key_real(key.len()));
                h.mutate(o, |c| {
                    if let Cell::Obj(m) = c {
                        m.insert(key, Value::Null);
                    }
                });
                h.live += prop_bytes(5);
            }
            // in-place growth, followed by capacity
            h.mutate(a, |c| {
                if let Cell::Arr(v) = c {
                    v.extend(std::iter::repeat_n(Value::Null, (i % 40) as usize));
                }
            });
            h.live += 8 * (i % 40) as usize;
            if i % 500 == 499 {
                h.collect(keep.iter());
                check(&h);
            }
        }
        check(&h);
        let buf = h.insert(Cell::StrBuf(Vec::new()));
        for _ in 0..100 {
            h.append_to_buf(buf, &[1, 2, 3]);
        }
        check(&h);
        h.collect([].iter());
        check(&h);
        assert!(h.real_bytes() < 1 << 20, "{}", h.real_bytes());
    }

    #[test]
    fn growth_predicts_what_a_push_takes() {
        let mut h = Heap::new(64 << 20);
        let a = h.insert(Cell::Arr(Vec::new()));
        for _ in 0..5000 {
            let want = h.growth(a, 1);
            let before = h.real_bytes();
            h.mutate(a, |c| {
                if let Cell::Arr(v) = c {
                    v.push(Value::Null)
                }
            });
            assert_eq!(h.real_bytes() - before, want);
        }
    }

    #[test]
    fn growth_bounds_what_adding_members_takes() {
        let mut h = Heap::new(64 << 20);
        let o = h.insert(Cell::Obj(PropMap::default()));
        let st = h.insert(Cell::Set(Box::default()));
        for i in 0..5000u32 {
            let key: Key = i.to_string().encode_utf16().collect::<Vec<u16>>().into();
            for (g, add) in [(o, 0), (st, 1)] {
                let want = h.growth(g, 1);
                let before = h.real_bytes();
                h.mutate(g, |c| match c {
                    Cell::Obj(m) if add == 0 => {
                        m.insert(key.clone(), Value::Null);
                    }
                    Cell::Set(m) => {
                        m.insert(SetKey::Num(u64::from(i)), Value::Null);
                    }
                    _ => {}
                });
                let took = h.real_bytes() - before;
                assert!(took <= want, "member {i}: took {took}, predicted {want}");
            }
        }
    }

    #[test]
    fn a_full_cell_vector_lowers_the_fast_threshold() {
        // cells admitted one by one until neither check admits another: the growth of the
        // cell vector a cell causes was admitted with it, so the count never passes its ceiling
        // (a heap whose real ceiling comes before the estimator's for these cells)
        let mut h = Heap::new(64 << 20);
        let mut n = 0;
        while h.fits_without_gc(0, 0) || h.fits(0, 0) {
            h.insert(Cell::Date(0.0));
            assert!(h.real_bytes() <= h.real_limit(), "after {n} cells");
            n += 1;
        }
        assert!(n > 1_000_000, "{n}");
        assert!(h.live_bytes() < h.limit(), "the estimator stopped it");
        check(&h);
    }
}
