//! Property access: reading and defining members, keys in JavaScript's order.

use super::{Vm, FORBIDDEN};
use crate::error::{guest, OpResult};
use crate::heap::{prop_bytes, Cell, Gc, Key, PropMap};
use crate::memory;
use crate::value::Value;

impl Vm {
    /// The code units of a string value.
    pub(crate) fn units(&self, g: Gc) -> &[u16] {
        self.heap.str_units(g)
    }

    pub(crate) fn set_prop(
        &mut self,
        o: Value,
        key: Gc,
        constant: Option<usize>,
        v: Value,
    ) -> OpResult<()> {
        let Value::Obj(og) = o else {
            return guest("property definition on a non-object");
        };
        let at = match self.heap.get(og) {
            Cell::Obj(m) => prop_index(m, self.units(key)),
            _ => None,
        };
        match at {
            // an existing property: replaced in place, by position (no hashing, no new key)
            Some(i) => {
                if let Some(Cell::Obj(m)) = self.heap.get_mut(og) {
                    if let Some((_, slot)) = m.get_index_mut(i) {
                        *slot = v;
                    }
                }
            }
            None => {
                let k = match constant {
                    Some(i) => self.const_key(i, key),
                    None => self.units(key).into(),
                };
                let real = memory::key_real(k.len());
                let growth = if self.heap.has_room_for_prop(og) {
                    0
                } else {
                    self.heap.growth(og, 1)
                };
                self.reserve_real(prop_bytes(k.len()), growth + real, &[])?;
                self.heap.grow(prop_bytes(k.len()));
                self.heap.grow_real(real);
                // (`prop_index` found no such key)
                if growth == 0 {
                    if let Some(Cell::Obj(m)) = self.heap.get_mut(og) {
                        m.insert_new(k, v);
                    }
                } else {
                    self.heap.mutate(og, |c| {
                        if let Cell::Obj(m) = c {
                            m.insert_new(k, v);
                        }
                    });
                }
            }
        }
        Ok(())
    }

    /// Constant `i` (the string `g`) as a property key, made once per run.
    pub(super) fn const_key(&mut self, i: usize, g: Gc) -> Key {
        if let Some(Some(k)) = self.const_keys.get(i) {
            return k.clone();
        }
        let k: Key = self.units(g).into();
        if self.const_keys.len() <= i {
            self.const_keys.resize(i + 1, None);
        }
        self.const_keys[i] = Some(k.clone());
        k
    }

    /// `o[k]`, null-safe, with the forbidden-name check on every path.
    pub(super) fn get_member(&mut self, o: Value, k: Value) -> OpResult<Value> {
        match k {
            Value::Str(kg) => {
                let key = self.units(kg);
                // the forbidden names are 9 and 11 units long
                if matches!(key.len(), 9 | 11) {
                    for f in FORBIDDEN {
                        if key.iter().copied().eq(f.encode_utf16()) {
                            return guest(ajs_bytecode::forbidden_message(f));
                        }
                    }
                }
                match o {
                    Value::Obj(og) => match self.heap.get(og) {
                        Cell::Obj(m) => Ok(prop_index(m, key)
                            .and_then(|i| m.get_index(i))
                            .map_or(Value::Undefined, |(_, v)| *v)),
                        Cell::Set(_) | Cell::Date(_) | Cell::Regex(_) => {
                            let key = String::from_utf16_lossy(key);
                            self.special_member(og, &key)
                        }
                        _ => Ok(Value::Undefined),
                    },
                    Value::Arr(_) | Value::Str(_) => {
                        if key.iter().copied().eq("length".encode_utf16()) {
                            return Ok(Value::Num(self.length_of(o) as f64));
                        }
                        match array_index(key) {
                            Some(i) => self.element(o, i),
                            None => Ok(self.array_extra(o, kg)),
                        }
                    }
                    _ => Ok(Value::Undefined),
                }
            }
            Value::Num(n) => match o {
                Value::Arr(_) | Value::Str(_) => {
                    if n >= 0.0 && n.fract() == 0.0 && n < 4_294_967_295.0 {
                        self.element(o, n as usize)
                    } else {
                        Ok(Value::Undefined)
                    }
                }
                Value::Obj(_) => {
                    let s = crate::number::number_to_string(n);
                    let kv = self.str_value(&s)?;
                    self.get_member(o, kv)
                }
                _ => Ok(Value::Undefined),
            },
            Value::Arr(_) | Value::Obj(_) => guest(format!(
                "Cannot use an {} as a property key; use a string or a number",
                self.kind_name(k)
            )),
            Value::Bool(_) | Value::Null | Value::Undefined => {
                let s = match k {
                    Value::Bool(b) => b.to_string(),
                    Value::Null => "null".into(),
                    _ => "undefined".into(),
                };
                let kv = self.str_value(&s)?;
                self.get_member(o, kv)
            }
            Value::Pending(_) => {
                guest("a host result that has not settled cannot be used as a property key")
            }
        }
    }

    /// A property of an array besides its elements and `length` (a match result's `index`,
    /// `input`, `groups`), or `undefined`.
    fn array_extra(&self, o: Value, key: Gc) -> Value {
        let Value::Arr(g) = o else {
            return Value::Undefined;
        };
        match self.heap.extras(g).map(|x| self.heap.get(x)) {
            Some(Cell::Obj(m)) => prop_index(m, self.units(key))
                .and_then(|i| m.get_index(i))
                .map_or(Value::Undefined, |(_, v)| *v),
            _ => Value::Undefined,
        }
    }

    pub(crate) fn length_of(&self, v: Value) -> usize {
        match v {
            Value::Str(g) => self.units(g).len(),
            Value::Arr(g) => match self.heap.get(g) {
                Cell::Arr(a) => a.len(),
                _ => 0,
            },
            _ => 0,
        }
    }

    pub(super) fn element(&mut self, o: Value, i: usize) -> OpResult<Value> {
        match o {
            Value::Arr(g) => Ok(match self.heap.get(g) {
                Cell::Arr(a) => a.get(i).copied().unwrap_or(Value::Undefined),
                _ => Value::Undefined,
            }),
            Value::Str(g) => match self.units(g).get(i).copied() {
                Some(u) => self.alloc_str(vec![u]),
                None => Ok(Value::Undefined),
            },
            _ => Ok(Value::Undefined),
        }
    }
}

/// The position of `key` among `m`'s properties (a small object's keys are compared in order, a
/// larger object's map is hashed: see [`PropMap`]).
#[inline]
pub(crate) fn prop_index(m: &PropMap, key: &[u16]) -> Option<usize> {
    m.get_index_of(key)
}

/// Keys in JavaScript's order: array-index keys ascending, then the rest in insertion order.
pub(crate) fn ordered_keys(m: &PropMap) -> Vec<&[u16]> {
    let mut idx: Vec<(u32, &[u16])> = Vec::new();
    let mut rest: Vec<&[u16]> = Vec::new();
    for k in m.keys() {
        match array_index(k) {
            Some(i) => idx.push((i as u32, k)),
            None => rest.push(k),
        }
    }
    idx.sort_by_key(|p| p.0);
    idx.into_iter().map(|p| p.1).chain(rest).collect()
}

/// The array index a canonical numeric key names (`"0"`, `"17"`; not `"01"` or `"-1"`).
pub(crate) fn array_index(k: &[u16]) -> Option<usize> {
    if k.is_empty() || k.len() > 10 || (k.len() > 1 && k[0] == b'0' as u16) {
        return None;
    }
    let mut n: u64 = 0;
    for &c in k {
        if !(b'0' as u16..=b'9' as u16).contains(&c) {
            return None;
        }
        n = n * 10 + (c - b'0' as u16) as u64;
    }
    (n < 4_294_967_295).then_some(n as usize)
}
