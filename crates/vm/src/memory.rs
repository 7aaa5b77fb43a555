//! What a heap cell really costs in memory: the second count beside decision 16's estimator.
//!
//! The estimator ([`crate::heap::Cell::bytes`]) is what the guest and the seed's figures see; it
//! leaves out the cell's own slot, container headers, spare capacity, hash-table slots and the
//! allocator's rounding, which for small values are most of the memory. These functions count
//! them from capacities (never by walking a container's contents, except where the estimator
//! walks too), so the heap can keep a running total of real bytes and refuse past a ceiling
//! calibrated against peak RSS (docs/PERFORMANCE.md, "Memory: real bytes and peak RSS").

use std::mem::size_of;

use indexmap::IndexMap;

use crate::heap::{Cell, Key, RegexCell, SetKey};
use crate::value::Value;

/// Memory a run may hold beyond `maxHeapBytes` as counted in real bytes: the estimator leaves
/// out per-cell overheads, so the real count is allowed this much more (see [`real_ceiling`]).
pub const REAL_SLACK: usize = 16 << 20;

/// The real-bytes ceiling of a heap whose estimator ceiling is `limit`: peak RSS stays within
/// `1.5 × limit + 32 MiB` (measured; docs/PERFORMANCE.md), and a small heap is never refused
/// by the real count before the estimator's.
pub fn real_ceiling(limit: usize) -> usize {
    limit.saturating_add(limit / 8).saturating_add(REAL_SLACK)
}

/// Bytes the allocator takes for a request of `n` bytes (glibc: an 8-byte header, 16-byte
/// alignment, 32 at least; large requests are whole pages).
#[inline]
pub fn alloc(n: usize) -> usize {
    if n == 0 {
        0
    } else if n >= 128 << 10 {
        n.saturating_add(16 + 4095) & !4095
    } else {
        ((n + 8 + 15) & !15).max(32)
    }
}

/// One slot of the heap's cell vector, its mark and its place in the free list.
pub const SLOT: usize = size_of::<Cell>() + 1 + 4;

/// Real bytes of a key's allocation (an `Arc<[u16]>`: two counts and the code units).
#[inline]
pub fn key_real(len: usize) -> usize {
    alloc(16 + 2 * len)
}

/// Real bytes of a string member of a set (its own copy of the code units).
#[inline]
pub fn set_str_real(len: usize) -> usize {
    alloc(2 * len)
}

/// Real bytes of a regex cell with a source of `len` code units and a compiled form of
/// `compiled` bytes (counted in full by every cell that shares it), all told.
pub fn regex_real(len: usize, compiled: usize) -> usize {
    alloc(size_of::<RegexCell>()) + alloc(2 * len) + 16 + compiled
}

/// Real bytes of a hash index over `cap` entries (hashbrown: a power-of-two number of buckets
/// at most 7/8 full, 8 bytes each plus a control byte, and one group of control bytes).
#[inline]
fn index_real(cap: usize) -> usize {
    if cap == 0 {
        return 0;
    }
    let buckets = if cap < 8 {
        if cap < 4 {
            4
        } else {
            8
        }
    } else {
        (cap * 8 / 7).next_power_of_two()
    };
    alloc(buckets * 9 + 16)
}

/// Real bytes of an `IndexMap<K, V>` of capacity `cap` (boxed: the map's header too).
#[inline]
pub fn map_real<K, V>(cap: usize) -> usize {
    alloc(size_of::<IndexMap<K, V>>() + 16)
        + alloc(cap * (8 + size_of::<K>() + size_of::<V>()))
        + index_real(cap)
}

/// Real bytes an `IndexMap<K, V>` of `len` entries and capacity `cap` grows by when `n` more
/// are added (its tables at least double, from 3 entries).
#[inline]
pub fn map_growth<K, V>(len: usize, cap: usize, n: usize) -> usize {
    if len + n <= cap {
        0
    } else {
        let grown = (len + n).max(2 * cap + 1).max(4);
        map_real::<K, V>(grown).saturating_sub(map_real::<K, V>(cap))
    }
}

/// Real bytes of `cap` elements of `T` in a `Vec`.
#[inline]
pub fn vec_real<T>(cap: usize) -> usize {
    alloc(cap * size_of::<T>())
}

/// The capacity a `Vec` of `len` elements and capacity `cap` has after `more` are added (its
/// amortised growth: at least doubling, 4 at least for elements of this workspace's sizes).
#[inline]
pub fn grown_cap(len: usize, cap: usize, more: usize) -> usize {
    let need = len.saturating_add(more);
    if need <= cap {
        cap
    } else {
        need.max(cap.saturating_mul(2)).max(4)
    }
}

/// Real bytes an array of `n` elements built at once holds (its slot, exact capacity).
pub fn arr_real(n: usize) -> usize {
    SLOT + vec_real::<Value>(n)
}

/// Real bytes a string of `n` code units holds (its slot and units), at most.
pub fn str_real(n: usize) -> usize {
    SLOT + 2 * n + 32
}

/// Real bytes an object of `n` properties built at once holds, keys not included.
pub fn obj_real(n: usize) -> usize {
    SLOT + if n <= crate::heap::SMALL_OBJECT {
        vec_real::<(Key, Value)>(n)
    } else {
        map_real::<Key, Value>(n)
    }
}

/// Real bytes of one more property in an object being built member by member (an upper bound
/// of its share of the map's doubling capacity and hash index), its key not included.
pub const PROP_GROWTH_REAL: usize = 128;

impl Cell {
    /// Real bytes of the cell's storage from its capacities, without its keys and set
    /// members (O(1); [`Cell::real_bytes`] adds those).
    #[inline]
    pub fn shape_bytes(&self) -> usize {
        match self {
            Cell::Free | Cell::Date(_) | Cell::Slice { .. } => 0,
            Cell::Str(s) => alloc(2 * s.len()),
            Cell::Arr(a) => vec_real::<Value>(a.capacity()),
            Cell::StrBuf(b) => vec_real::<u16>(b.capacity()),
            Cell::Obj(o) => match o.large() {
                None => vec_real::<(Key, Value)>(o.small_capacity()),
                Some(m) => map_real::<Key, Value>(m.capacity()),
            },
            Cell::Set(m) => map_real::<SetKey, Value>(m.capacity()),
            // (the flags are at most a few bytes: one allocation's minimum)
            Cell::Regex(r) => regex_real(r.source.len(), r.re.bytes),
        }
    }

    /// Real bytes of the cell's storage (its slot in the heap's vectors is counted there).
    #[inline]
    pub fn real_bytes(&self) -> usize {
        match self {
            Cell::Obj(o) => self.shape_bytes() + o.keys().map(|k| key_real(k.len())).sum::<usize>(),
            Cell::Set(m) => {
                self.shape_bytes()
                    + m.keys()
                        .map(|k| match k {
                            SetKey::Str(u) => set_str_real(u.len()),
                            _ => 0,
                        })
                        .sum::<usize>()
            }
            _ => self.shape_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_is_small() {
        // a Cell is one slot per value on the heap: its size is most of a small value's cost
        assert!(size_of::<Cell>() <= 32, "{}", size_of::<Cell>());
        assert_eq!(size_of::<Value>(), 16);
    }

    #[test]
    fn rounding_follows_the_allocator() {
        assert_eq!(alloc(0), 0);
        assert_eq!(alloc(1), 32);
        assert_eq!(alloc(24), 32);
        assert_eq!(alloc(25), 48);
        assert_eq!(alloc(1 << 20) % 4096, 0);
        assert!(alloc(1 << 20) > 1 << 20);
    }

    #[test]
    fn growth_doubles() {
        assert_eq!(grown_cap(0, 0, 1), 4);
        assert_eq!(grown_cap(4, 4, 1), 8);
        assert_eq!(grown_cap(3, 4, 1), 4);
        assert_eq!(grown_cap(4, 4, 100), 104);
        let mut v: Vec<Value> = Vec::new();
        for _ in 0..1000 {
            let want = grown_cap(v.len(), v.capacity(), 1);
            v.push(Value::Null);
            assert_eq!(v.capacity(), want);
        }
    }
}
