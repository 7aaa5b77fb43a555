//! Allocation: every new cell and every growth of one is admitted against both of the heap's
//! counts (decision 16's estimate and the real bytes, [`crate::memory`]) before it is made, and
//! host values are copied in the same way.

use crate::error::{guest, OpResult};
use crate::heap::{arr_bytes, prop_bytes, str_bytes, Cell, Gc, PropMap};
use crate::machine::{boundary_depth, Vm};
use crate::memory;
use crate::value::{JsValue, Value};

impl Vm {
    /// Makes room for `bytes` more live bytes, predicting as many real bytes (right for strings
    /// and other flat cells; arrays and objects built at once use [`Vm::reserve_arr`] and
    /// [`Vm::reserve_real`]), collecting first if needed, or raises the heap limit error.
    /// Nothing is committed when it fails.
    #[inline]
    pub(crate) fn reserve(&mut self, bytes: usize, extra_roots: &[Value]) -> OpResult<()> {
        self.reserve_real(bytes, bytes, extra_roots)
    }

    /// Makes room for `bytes` estimated and `real` real bytes (collecting first if needed) or
    /// raises the heap limit error. Nothing is committed when it fails.
    #[inline]
    pub(crate) fn reserve_real(
        &mut self,
        bytes: usize,
        real: usize,
        extra_roots: &[Value],
    ) -> OpResult<()> {
        if self.heap.fits_without_gc(bytes, real) {
            return Ok(());
        }
        self.reserve_slow(bytes, real, extra_roots)
    }

    /// Makes room for a new array of `n` elements.
    #[inline]
    pub(crate) fn reserve_arr(&mut self, n: usize, extra_roots: &[Value]) -> OpResult<()> {
        self.reserve_real(arr_bytes(n), memory::arr_real(n), extra_roots)
    }

    /// Makes room for `cell`, built but not yet stored.
    #[inline]
    pub(crate) fn reserve_cell(&mut self, cell: &Cell, extra_roots: &[Value]) -> OpResult<()> {
        self.reserve_real(cell.bytes(), cell.real_bytes(), extra_roots)
    }

    /// Makes room for an array of `n` new strings of `units` code units in all.
    pub(crate) fn reserve_strs(
        &mut self,
        n: usize,
        units: usize,
        extra_roots: &[Value],
    ) -> OpResult<()> {
        let bytes = arr_bytes(n) + n * str_bytes(0) + 2 * units;
        let real = memory::arr_real(n)
            + n * memory::str_real(0)
            + 2 * units
            + self.heap.cells_growth(n + 1);
        self.reserve_real(bytes, real, extra_roots)
    }

    /// Makes room for `bytes` more estimated bytes in the existing cell `g`, and for the real
    /// bytes its storage grows by when `n` more elements are added to it.
    #[inline]
    pub(crate) fn reserve_in(
        &mut self,
        g: Gc,
        bytes: usize,
        n: usize,
        extra_roots: &[Value],
    ) -> OpResult<()> {
        let real = self.heap.growth(g, n);
        self.reserve_real(bytes, real, extra_roots)
    }

    /// Makes room for `n` new strings of `units` code units in all, appended to the array `g`
    /// (its growth included): a chunk of a native's output, admitted before it is made.
    pub(crate) fn reserve_pieces(
        &mut self,
        g: Gc,
        n: usize,
        units: usize,
        roots: &[Value],
    ) -> OpResult<()> {
        let bytes = 8 * n + n * str_bytes(0) + 2 * units;
        let real = self.heap.growth(g, n)
            + n * memory::str_real(0)
            + 2 * units
            + self.heap.cells_growth(n + 1);
        self.reserve_real(bytes, real, roots)
    }

    /// Appends `items`, whose room (with the array's growth) was reserved, to the array `g`.
    pub(crate) fn commit_extend(&mut self, g: Gc, items: &[Value]) {
        self.heap.mutate(g, |c| {
            if let Cell::Arr(a) = c {
                a.extend_from_slice(items);
            }
        });
        self.heap.grow(8 * items.len());
    }

    /// Holds `real` bytes of a native's scratch memory in the real count while `f` runs (the
    /// scratch is admitted first, and every allocation `f` admits is admitted beside it).
    pub(crate) fn with_scratch<T>(
        &mut self,
        real: usize,
        roots: &[Value],
        f: impl FnOnce(&mut Vm) -> OpResult<T>,
    ) -> OpResult<T> {
        self.reserve_real(0, real, roots)?;
        self.heap.grow_real(real);
        let r = f(self);
        self.heap.shrink_real(real);
        r
    }

    /// Appends `more` to `out`, a native's text being built, admitting its buffer's growth
    /// first (`held`: the real bytes of the buffer in the real count, the caller's to
    /// release; while it moves, the old buffer and the new are both counted).
    pub(crate) fn grow_text(
        &mut self,
        out: &mut Vec<u16>,
        more: &[u16],
        held: &mut usize,
    ) -> OpResult<()> {
        let need = out.len().saturating_add(more.len());
        if need > out.capacity() {
            let cap = need.max(2 * out.capacity());
            let bytes = memory::alloc(cap.saturating_mul(2));
            self.reserve_real(0, bytes, &[])?;
            self.heap.grow_real(bytes.saturating_sub(*held));
            *held = bytes.max(*held);
            out.reserve_exact(cap - out.len());
        }
        out.extend_from_slice(more);
        Ok(())
    }

    /// How many more items of `bytes` estimated and `real` real bytes each fit under the
    /// heap's ceilings as it now stands (a collection may make room for more).
    pub(crate) fn room_for(&self, bytes: usize, real: usize) -> usize {
        let by_est = self.heap.limit().saturating_sub(self.heap.live_bytes()) / bytes.max(1);
        let by_real = self
            .heap
            .real_limit()
            .saturating_sub(self.heap.real_bytes())
            / real.max(1);
        by_est.min(by_real)
    }

    /// [`Vm::reserve_real`] when a collection is due.
    #[cold]
    #[inline(never)]
    fn reserve_slow(&mut self, bytes: usize, real: usize, extra_roots: &[Value]) -> OpResult<()> {
        self.collect_garbage(extra_roots);
        if self.heap.fits(bytes, real) {
            return Ok(());
        }
        self.heap_limit_error(bytes, real)
    }

    /// The heap limit error for a request of `bytes` estimated and `real` real bytes.
    pub(crate) fn heap_limit_error<T>(&self, bytes: usize, real: usize) -> OpResult<T> {
        let mib = |b: usize| ((b as f64) / 1_048_576.0).round() as u64;
        guest(format!(
            "Heap limit exceeded: guest state holds ~{}MB, limit {}MB (in memory ~{}MB, limit {}MB). Fuel bounds total work; this bounds peak memory. Raise it with the maxHeapBytes run option if the workload genuinely needs it.",
            mib(self.heap.live_bytes().saturating_add(bytes)),
            mib(self.heap.limit()),
            mib(self.heap.real_bytes().saturating_add(real)),
            mib(self.heap.real_limit()),
        ))
    }

    pub(crate) fn alloc_str_raw(&mut self, units: Box<[u16]>) -> OpResult<Gc> {
        self.reserve(str_bytes(units.len()), &[])?;
        Ok(self.heap.insert(Cell::Str(units)))
    }

    /// Allocates a string (the caller has charged fuel for producing it).
    pub(crate) fn alloc_str(&mut self, units: Vec<u16>) -> OpResult<Value> {
        Ok(Value::Str(self.alloc_str_raw(units.into_boxed_slice())?))
    }

    /// Allocates a string from Rust text.
    pub(crate) fn str_value(&mut self, s: &str) -> OpResult<Value> {
        self.alloc_str(crate::ops::text_units(s))
    }

    /// Appends `items` to the array `g` (fuel is charged; `roots` are kept alive if room must
    /// be made), admitted first; returns the new length.
    #[inline]
    pub(crate) fn arr_extend(
        &mut self,
        g: Gc,
        items: &[Value],
        roots: &[Value],
    ) -> OpResult<usize> {
        if let Some(n) = self.heap.push_in_place(g, items) {
            return Ok(n);
        }
        self.arr_extend_slow(g, items, roots)
    }

    /// [`Vm::arr_extend`] when the array must grow or a collection may be due.
    #[cold]
    #[inline(never)]
    fn arr_extend_slow(&mut self, g: Gc, items: &[Value], roots: &[Value]) -> OpResult<usize> {
        self.reserve_in(g, 8 * items.len(), items.len(), roots)?;
        self.heap.grow(8 * items.len());
        Ok(self
            .heap
            .mutate(g, |c| match c {
                Cell::Arr(a) => {
                    a.extend_from_slice(items);
                    a.len()
                }
                _ => 0,
            })
            .unwrap_or(0))
    }

    /// Copies a host value into the guest heap.
    pub(crate) fn import(&mut self, v: &JsValue, depth: usize) -> OpResult<Value> {
        boundary_depth(depth)?;
        Ok(match v {
            JsValue::Undefined => Value::Undefined,
            JsValue::Null => Value::Null,
            JsValue::Bool(b) => Value::Bool(*b),
            JsValue::Number(n) => Value::Num(*n),
            JsValue::String(s) => self.str_value(s)?,
            JsValue::Array(items) => {
                let mut vals = Vec::with_capacity(items.len().min(1 << 16));
                for it in items {
                    self.make_room(&vals);
                    vals.push(self.import(it, depth + 1)?);
                }
                self.import_array(vals)?
            }
            JsValue::Object(map) => {
                let mut vals: Vec<Value> = Vec::with_capacity(map.len().min(1 << 16));
                for it in map.values() {
                    self.make_room(&vals);
                    vals.push(self.import(it, depth + 1)?);
                }
                self.import_object(map.keys().map(String::as_str), vals)?
            }
        })
    }

    /// Copies JSON data into the guest heap: the same value, heap and errors as
    /// `import(&JsValue::from_json(v), depth)`, without building the `JsValue`.
    pub(crate) fn import_json(&mut self, v: &serde_json::Value, depth: usize) -> OpResult<Value> {
        boundary_depth(depth)?;
        Ok(match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Num(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => self.str_value(s)?,
            serde_json::Value::Array(items) => {
                let mut vals = Vec::with_capacity(items.len().min(1 << 16));
                for it in items {
                    self.make_room(&vals);
                    vals.push(self.import_json(it, depth + 1)?);
                }
                self.import_array(vals)?
            }
            serde_json::Value::Object(map) => {
                let mut vals: Vec<Value> = Vec::with_capacity(map.len().min(1 << 16));
                for it in map.values() {
                    self.make_room(&vals);
                    vals.push(self.import_json(it, depth + 1)?);
                }
                self.import_object(map.keys().map(String::as_str), vals)?
            }
        })
    }

    /// Before an imported child is allocated: children already built are only held in
    /// `siblings`, so a collection keeps them alive as roots.
    fn make_room(&mut self, siblings: &[Value]) {
        if !self.heap.fits_without_gc(64, 256) {
            self.collect_garbage(siblings);
        }
    }

    /// The array of imported `vals`, its bytes reserved first.
    fn import_array(&mut self, vals: Vec<Value>) -> OpResult<Value> {
        self.reserve_arr(vals.len(), &vals)?;
        Ok(Value::Arr(self.heap.insert(Cell::Arr(vals))))
    }

    /// The object of `keys` (in order) and imported `vals`, its bytes reserved first.
    fn import_object<'k>(
        &mut self,
        keys: impl Iterator<Item = &'k str> + Clone,
        vals: Vec<Value>,
    ) -> OpResult<Value> {
        let (bytes, real) = keys
            .clone()
            .fold((16, memory::obj_real(vals.len())), |(b, r), k| {
                let n = k.encode_utf16().count();
                (b + prop_bytes(n), r + memory::key_real(n))
            });
        self.reserve_real(bytes, real, &vals)?;
        let mut m = PropMap::with_capacity(vals.len());
        for (k, v) in keys.zip(vals) {
            m.insert(k.encode_utf16().collect(), v);
        }
        Ok(Value::Obj(self.heap.insert(Cell::Obj(m))))
    }
}
