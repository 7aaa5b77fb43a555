//! Spread, computed keys and destructuring: copying work charged per element before it is done.

use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::heap::{prop_bytes, Cell, Key, PropMap};
use crate::machine::{Vm, FORBIDDEN, MILLI_PER_ELEMENT};
use crate::memory;
use crate::number::number_to_string;
use crate::value::Value;

impl Vm {
    /// `[...src]` appended to `arr`.
    pub(crate) fn spread_into_array(&mut self, arr: Value, src: Value) -> OpResult<()> {
        let items: Vec<Value> = match src {
            Value::Arr(g) => match self.heap.get(g) {
                Cell::Arr(a) => {
                    let n = a.len();
                    self.charge(n as u64 * MILLI_PER_ELEMENT)?;
                    match self.heap.get(g) {
                        Cell::Arr(a) => a.clone(),
                        _ => Vec::new(),
                    }
                }
                _ => Vec::new(),
            },
            Value::Str(g) => {
                // strings spread into their characters (code points), as in JavaScript
                let units = self.units(g).to_vec();
                self.charge(units.len() as u64 * MILLI_PER_ELEMENT)?;
                self.charge_work(units.len(), crate::price::factor::NEW_STRING)?;
                let mut out = Vec::new();
                for ch in char::decode_utf16(units.iter().copied()) {
                    let piece: Vec<u16> = match ch {
                        Ok(c) => c.encode_utf16(&mut [0; 2]).to_vec(),
                        Err(e) => vec![e.unpaired_surrogate()],
                    };
                    out.push(self.alloc_str(piece)?);
                }
                out
            }
            other => {
                return guest(format!(
                "Cannot spread {} into an array; only arrays and strings can be spread with [...x]",
                self.describe(other)
            ))
            }
        };
        let Value::Arr(target) = arr else {
            return guest("spread target is not an array");
        };
        self.arr_extend(target, &items, &items)?;
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
                return guest(format!("Security Error: Access to '{f}' is forbidden"));
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

    /// `native(...array)`.
    pub(crate) fn call_native_array(&mut self, id: NativeId, args: Value) -> OpResult<Value> {
        let items: Vec<Value> = match args {
            Value::Arr(g) => match self.heap.get(g) {
                Cell::Arr(a) => a.clone(),
                _ => Vec::new(),
            },
            _ => return guest("spread arguments must be an array"),
        };
        self.charge(items.len() as u64 * MILLI_PER_ELEMENT)?;
        let (min, max) = id.arity();
        if items.len() < min as usize || items.len() > max as usize {
            return guest(format!(
                "{} called with {} arguments (allowed {}..={})",
                id.js_name().trim_start_matches('.'),
                items.len(),
                min,
                max
            ));
        }
        self.call_native(id, &items)
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
