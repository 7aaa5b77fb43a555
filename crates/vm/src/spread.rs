//! Spread, computed keys and destructuring: copying work charged per element before it is done.

use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::heap::{prop_bytes, Cell, Gc, Key, PropMap};
use crate::machine::{Vm, FORBIDDEN, MILLI_PER_ELEMENT};
use crate::memory;
use crate::number::number_to_string;
use crate::value::Value;

/// Strings a spread of a string makes between two appends to its array.
const SPREAD_CHUNK: usize = 4096;

impl Vm {
    /// `[...src]` appended to `arr`.
    pub(crate) fn spread_into_array(&mut self, arr: Value, src: Value) -> OpResult<()> {
        match src {
            Value::Arr(g) => self.spread_array(arr, g),
            Value::Str(g) => self.spread_string(arr, g),
            Value::Obj(g) if matches!(self.heap.get(g), Cell::Set(_)) => {
                guest("Cannot spread a Set into an array; write s.toArray() (a new array of its items)")
            }
            Value::Obj(_) => guest(
                "Cannot spread an object into an array; only arrays and strings can be spread with [...x]: write Object.values(o) for its values, Object.entries(o) for [key, value] pairs",
            ),
            other => guest(format!(
                "Cannot spread {} into an array; only arrays and strings can be spread with [...x]: wrap one value in brackets, [x]",
                self.describe(other)
            )),
        }
    }

    /// `[...src]` appended to `arr`: the target's growth admitted first, the elements copied
    /// in chunks (no copy of the whole source is made).
    fn spread_array(&mut self, arr: Value, g: Gc) -> OpResult<()> {
        let Value::Arr(target) = arr else {
            return guest("spread target is not an array");
        };
        let n = match self.heap.get(g) {
            Cell::Arr(a) => a.len(),
            _ => 0,
        };
        self.charge(n as u64 * MILLI_PER_ELEMENT)?;
        self.reserve_in(target, 8 * n, n, &[arr, Value::Arr(g)])?;
        self.heap.mutate(target, |c| {
            if let Cell::Arr(a) = c {
                a.reserve(n);
            }
        });
        let mut at = 0;
        while at < n {
            let end = (at + SPREAD_CHUNK).min(n);
            let chunk: Vec<Value> = match self.heap.get(g) {
                Cell::Arr(a) => a.get(at..end).unwrap_or(&[]).to_vec(),
                _ => Vec::new(),
            };
            at = end;
            self.commit_extend(target, &chunk);
        }
        Ok(())
    }

    /// `[...s]` appended to `arr`: the characters (code points) of `s`, each a new string,
    /// all admitted with the array's growth before the first is made.
    fn spread_string(&mut self, arr: Value, g: Gc) -> OpResult<()> {
        let Value::Arr(target) = arr else {
            return guest("spread target is not an array");
        };
        let units = self.units(g);
        let len = units.len();
        let n = char::decode_utf16(units.iter().copied()).count();
        self.charge(len as u64 * MILLI_PER_ELEMENT)?;
        self.charge_work(len, crate::price::factor::NEW_STRING)?;
        self.reserve_pieces(target, n, len, &[arr, Value::Str(g)])?;
        self.heap.mutate(target, |c| {
            if let Cell::Arr(a) = c {
                a.reserve(n);
            }
        });
        let mut at = 0;
        let mut chunk = Vec::with_capacity(n.min(SPREAD_CHUNK));
        while at < len {
            chunk.clear();
            while at < len && chunk.len() < SPREAD_CHUNK {
                let u = self.heap.str_units(g);
                let w = if (0xD800..0xDC00).contains(&u[at])
                    && u.get(at + 1).is_some_and(|v| (0xDC00..0xE000).contains(v))
                {
                    2
                } else {
                    1
                };
                let piece: Box<[u16]> = u[at..at + w].into();
                at += w;
                chunk.push(Value::Str(self.heap.insert(Cell::Str(piece))));
            }
            self.commit_extend(target, &chunk);
        }
        Ok(())
    }

    /// `{...src}` copied into `obj`.
    pub(crate) fn spread_into_object(&mut self, obj: Value, src: Value) -> OpResult<()> {
        let pairs: Vec<(Key, Value)> = match src {
            Value::Null | Value::Undefined => return Ok(()),
            Value::Obj(g) => match self.heap.get(g) {
                Cell::Obj(m) => {
                    let n = m.len();
                    self.charge(n as u64 * MILLI_PER_ELEMENT)?;
                    self.charge_work(n, crate::price::factor::PROPERTY)?;
                    match self.heap.get(g) {
                        Cell::Obj(m) => m.entries().map(|(k, v)| (k.clone(), *v)).collect(),
                        _ => Vec::new(),
                    }
                }
                _ => Vec::new(),
            },
            Value::Arr(g) => {
                let items = match self.heap.get(g) {
                    Cell::Arr(a) => a.clone(),
                    _ => Vec::new(),
                };
                self.charge(items.len() as u64 * MILLI_PER_ELEMENT)?;
                self.charge_work(items.len(), crate::price::factor::PROPERTY)?;
                items.into_iter().enumerate().map(|(i, v)| (i.to_string().encode_utf16().collect(), v)).collect()
            }
            other => {
                return guest(format!(
                    "Cannot spread {} into an object; only objects and arrays can be spread with {{...x}}",
                    self.describe(other)
                ))
            }
        };
        let Value::Obj(target) = obj else {
            return guest("spread target is not an object");
        };
        let roots: Vec<Value> = pairs.iter().map(|p| p.1).collect();
        let (mut more, mut real, mut new) = (0, 0, 0);
        if let Cell::Obj(m) = self.heap.get(target) {
            for (k, _) in &pairs {
                if !m.contains_key(k) {
                    more += prop_bytes(k.len());
                    real += memory::key_real(k.len());
                    new += 1;
                }
            }
        }
        let room = self.heap.growth(target, new) + real;
        self.reserve_real(more, room, &roots)?;
        self.heap.grow(more);
        self.heap.grow_real(real);
        self.heap.mutate(target, |c| {
            if let Cell::Obj(m) = c {
                for (k, v) in pairs {
                    m.insert(k, v);
                }
            }
        });
        Ok(())
    }

    /// A run-time value as a property key (`{ [k]: v }`), refusing forbidden names.
    pub(crate) fn init_index(&mut self, obj: Value, key: Value, val: Value) -> OpResult<()> {
        if let Value::Str(g) = key {
            // copied, hashed and compared with an existing key
            self.charge_units(self.units(g).len().saturating_mul(3))?;
        }
        let units: Vec<u16> = match key {
            Value::Str(g) => self.units(g).to_vec(),
            Value::Num(n) => number_to_string(n).encode_utf16().collect(),
            Value::Bool(b) => b.to_string().encode_utf16().collect(),
            Value::Null => "null".encode_utf16().collect(),
            Value::Undefined => "undefined".encode_utf16().collect(),
            other => {
                return guest(format!(
                    "Cannot use {} as a property key; use a string or a number",
                    self.describe(other)
                ))
            }
        };
        for f in FORBIDDEN {
            if units.iter().copied().eq(f.encode_utf16()) {
                return guest(ajs_bytecode::forbidden_message(f));
            }
        }
        let k = self.alloc_str(units)?;
        let Value::Str(kg) = k else { return Ok(()) };
        self.set_prop(obj, kg, None, val)
    }

    /// A destructuring source: refused when null or undefined (or, for an array pattern, when
    /// neither an array nor a string); a string becomes the array of its code points.
    pub(crate) fn destructurable(&mut self, v: Value, array: bool) -> OpResult<Value> {
        match (v, array) {
            (Value::Null, _) => guest("Cannot destructure null"),
            (Value::Undefined, _) => guest("Cannot destructure undefined"),
            (Value::Str(_), true) => {
                self.reserve_arr(0, &[v])?;
                let arr = Value::Arr(self.heap.insert(Cell::Arr(Vec::new())));
                self.spread_into_array(arr, v)?;
                Ok(arr)
            }
            (Value::Arr(_), true) | (_, false) => Ok(v),
            (other, true) => guest(format!(
                "Cannot destructure {} as an array",
                self.describe(other)
            )),
        }
    }

    /// `let { a, ...rest } = src`: a copy of `src` without `excluded`.
    pub(crate) fn object_rest(&mut self, src: Value, excluded: &[Value]) -> OpResult<Value> {
        let skip: Vec<Vec<u16>> = excluded
            .iter()
            .filter_map(|k| match k {
                Value::Str(g) => Some(self.units(*g).to_vec()),
                _ => None,
            })
            .collect();
        let pairs: Vec<(Key, Value)> = match src {
            Value::Obj(g) => match self.heap.get(g) {
                Cell::Obj(m) => m
                    .entries()
                    .filter(|(k, _)| !skip.iter().any(|s| s[..] == k[..]))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        self.charge((pairs.len() + skip.len()) as u64 * MILLI_PER_ELEMENT)?;
        let (bytes, real) = pairs
            .iter()
            .fold((16, memory::obj_real(pairs.len())), |(b, r), (k, _)| {
                (b + prop_bytes(k.len()), r + memory::key_real(k.len()))
            });
        let roots: Vec<Value> = pairs.iter().map(|p| p.1).chain([src]).collect();
        self.reserve_real(bytes, real, &roots)?;
        let mut m = PropMap::with_capacity(pairs.len());
        for (k, v) in pairs {
            m.insert(k, v);
        }
        Ok(Value::Obj(self.heap.insert(Cell::Obj(m))))
    }

    /// `Array.from(src)`.
    pub(crate) fn array_from(&mut self, src: Value) -> OpResult<Value> {
        let items: Vec<Value> = match src {
            Value::Arr(_) | Value::Str(_) => {
                self.reserve_arr(0, &[src])?;
                let arr = Value::Arr(self.heap.insert(Cell::Arr(Vec::new())));
                self.spread_into_array(arr, src)?;
                return Ok(arr);
            }
            Value::Obj(g) => match self.heap.get(g) {
                Cell::Set(m) => m.values().copied().collect(),
                Cell::Obj(m) => {
                    let len_key: Vec<u16> = "length".encode_utf16().collect();
                    let n = match m.get(&len_key[..]) {
                        Some(Value::Num(n)) if n.is_finite() && *n >= 0.0 => n.trunc() as usize,
                        _ => 0,
                    };
                    self.charge(n as u64 * MILLI_PER_ELEMENT)?;
                    self.reserve_arr(n, &[src])?;
                    return Ok(Value::Arr(
                        self.heap.insert(Cell::Arr(vec![Value::Undefined; n])),
                    ));
                }
                _ => Vec::new(),
            },
            Value::Null | Value::Undefined => {
                return guest("Array.from needs an array, a string, a Set or { length: n }")
            }
            _ => Vec::new(),
        };
        self.charge(items.len() as u64 * MILLI_PER_ELEMENT)?;
        self.reserve_arr(items.len(), &items)?;
        Ok(Value::Arr(self.heap.insert(Cell::Arr(items))))
    }

    /// `native(...array)`, with JavaScript's counting: a native declared with at most 255
    /// arguments takes any number this way (`Math.max(...a)`, `b.push(...a)` with thousands of
    /// elements); others ignore arguments past their last and see missing ones as `undefined`.
    pub(crate) fn call_native_array(&mut self, id: NativeId, args: Value) -> OpResult<Value> {
        let Value::Arr(g) = args else {
            return guest("spread arguments must be an array");
        };
        let n = match self.heap.get(g) {
            Cell::Arr(a) => a.len(),
            _ => 0,
        };
        self.charge(n as u64 * MILLI_PER_ELEMENT)?;
        let (min, max) = id.arity();
        let take = if max == u8::MAX {
            n
        } else {
            n.min(max as usize)
        };
        let len = take.max(min as usize);
        // the arguments are copied out of the array (it may change under the call): admitted
        let real = memory::alloc(len * std::mem::size_of::<Value>());
        self.with_scratch(real, &[args], |vm| {
            let mut items: Vec<Value> = match vm.heap.get(g) {
                Cell::Arr(a) => a[..take].to_vec(),
                _ => Vec::new(),
            };
            items.resize(len, Value::Undefined);
            vm.call_native(id, &items)
        })
    }

    fn describe(&self, v: Value) -> String {
        match v {
            Value::Arr(_) => "an array".into(),
            Value::Obj(_) => "an object".into(),
            Value::Null => "null".into(),
            Value::Undefined => "undefined".into(),
            other => format!("a {}", self.type_of(other)),
        }
    }
}
