//! The pure utility atoms of decision 21 (`template regexMatch pick omit merge keys split join
//! len jsonParse jsonStringify hash random uuid`): called by name with one object of named
//! inputs (reference §4.2), run inside the VM, paid by the size of their inputs and outputs.

use std::collections::{HashMap, HashSet};

use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::heap::{Cell, Gc, Key, PropMap};
use crate::machine::{ordered_keys, Vm};
use crate::value::Value;

impl Vm {
    fn atom_obj(&self, v: Value, name: &str) -> OpResult<Option<Gc>> {
        match v {
            Value::Undefined => Ok(None),
            Value::Obj(g) if matches!(self.heap.get(g), Cell::Obj(_)) => Ok(Some(g)),
            other => guest(format!(
                "{name} takes one object of named inputs, e.g. {name}({{ ... }}), got {}",
                self.kind_name(other)
            )),
        }
    }

    fn input(&self, g: Option<Gc>, key: &str) -> Value {
        let Some(g) = g else {
            return Value::Undefined;
        };
        match self.heap.get(g) {
            Cell::Obj(m) => {
                let k: Vec<u16> = key.encode_utf16().collect();
                m.get(&k[..]).copied().unwrap_or(Value::Undefined)
            }
            _ => Value::Undefined,
        }
    }

    fn required(&self, g: Option<Gc>, name: &str, key: &str) -> OpResult<Value> {
        match self.input(g, key) {
            Value::Undefined => guest(format!("{name}: missing required input '{key}'")),
            v => Ok(v),
        }
    }

    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn object_props(&self, v: Value, name: &str, key: &str) -> OpResult<Vec<(Key, Value)>> {
        match v {
            Value::Obj(g) => match self.heap.get(g) {
                Cell::Obj(m) => Ok(ordered_keys(m)
                    .into_iter()
                    .filter_map(|k| m.get_entry(k).map(|(k, v)| (k.clone(), *v)))
                    .collect()),
                _ => Ok(Vec::new()),
            },
            Value::Undefined | Value::Null => Ok(Vec::new()),
            other => guest(format!(
                "{name}: '{key}' must be an object, got {}",
                self.kind_name(other)
            )),
        }
    }

    fn key_list(&mut self, v: Value, name: &str) -> OpResult<Vec<Vec<u16>>> {
        let Value::Arr(g) = v else {
            return guest(format!("{name}: 'keys' must be an array of strings"));
        };
        let items = match self.heap.get(g) {
            Cell::Arr(a) => a.clone(),
            _ => Vec::new(),
        };
        self.charge_elems(items.len())?;
        let mut out = Vec::with_capacity(items.len());
        for k in items {
            let u = self.str_arg_pub(k, name)?;
            out.push(u);
        }
        Ok(out)
    }

    /// A plain object of `pairs`, paid per property and admitted before it is stored (a
    /// forbidden key is refused).
    pub(crate) fn new_obj(&mut self, pairs: Vec<(Key, Value)>, roots: &[Value]) -> OpResult<Value> {
        self.charge_elems(pairs.len())?;
        self.charge_work(pairs.len(), crate::price::factor::PROPERTY)?;
        let mut m = PropMap::default();
        for (k, v) in pairs {
            self.check_key(&k)?;
            m.insert(k, v);
        }
        let cell = Cell::Obj(m);
        self.reserve_cell(&cell, roots)?;
        Ok(Value::Obj(self.heap.insert(cell)))
    }

    /// Runs a pure atom.
    pub(crate) fn pure_atom(&mut self, id: NativeId, input: Value) -> OpResult<Value> {
        use NativeId::*;
        let name = id.js_name();
        // every atom call costs 1 fuel (reference §4.2), 2 for regexMatch
        self.charge(if id == AtomRegexMatch { 2000 } else { 1000 })?;
        let g = self.atom_obj(input, name)?;
        match id {
            AtomTemplate => {
                let tmpl = self.required(g, name, "tmpl")?;
                let tmpl = self.str_arg_pub(tmpl, name)?;
                let vars = self.input(g, "vars");
                let vars = self.object_props(vars, name, "vars")?;
                self.charge_elems(vars.len())?;
                let by_key: std::collections::HashMap<&[u16], Value> =
                    vars.iter().map(|(k, v)| (&k[..], *v)).collect();
                // each placeholder is looked up by hash (at most one per 5 units: `{{a}}`):
                // the most it can hold is affordable before the scan, and paid after it
                self.afford_work(tmpl.len() / 5, crate::price::factor::PROPERTY)?;
                // pass 1: pieces
                let mut pieces: Vec<Result<(usize, usize), Value>> = Vec::new();
                let mut i = 0;
                let mut lit = 0;
                let open = [b'{' as u16, b'{' as u16];
                while i + 1 < tmpl.len() {
                    if tmpl[i..i + 2] == open {
                        let st = i + 2;
                        let mut e = st;
                        while e < tmpl.len()
                            && char::from_u32(tmpl[e] as u32)
                                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                        {
                            e += 1;
                        }
                        if e > st
                            && e + 1 < tmpl.len()
                            && tmpl[e] == b'}' as u16
                            && tmpl[e + 1] == b'}' as u16
                        {
                            pieces.push(Ok((lit, i)));
                            let v = by_key
                                .get(&tmpl[st..e])
                                .copied()
                                .unwrap_or(Value::Undefined);
                            pieces.push(Err(v));
                            i = e + 2;
                            lit = i;
                            continue;
                        }
                    }
                    i += 1;
                }
                pieces.push(Ok((lit, tmpl.len())));
                let holes = pieces.iter().filter(|p| p.is_err()).count();
                self.charge_work(holes, crate::price::factor::PROPERTY)?;
                // pass 2: the output's length (a variable used many times is not copied for
                // it), paid and reserved before anything is built
                let mut total = 0usize;
                for p in &pieces {
                    total = total.saturating_add(match p {
                        Ok((a, b)) => b - a,
                        Err(Value::Undefined | Value::Null) => 0,
                        Err(Value::Str(s)) => self.units(*s).len(),
                        Err(v) => self.to_units(*v, "template")?.len(),
                    });
                }
                self.charge_units(total)?;
                self.reserve(crate::heap::str_bytes(total), &[])?;
                // pass 3: the output
                let mut out: Vec<u16> = Vec::with_capacity(total);
                for p in pieces {
                    match p {
                        Ok((a, b)) => out.extend_from_slice(&tmpl[a..b]),
                        Err(Value::Undefined | Value::Null) => {}
                        Err(Value::Str(s)) => out.extend_from_slice(self.units(s)),
                        Err(v) => out.extend(self.to_units(v, "template")?),
                    }
                }
                Ok(self.commit_str(out))
            }
            AtomRegexMatch => {
                let p = self.required(g, name, "pattern")?;
                let p = self.str_arg_pub(p, name)?;
                let v = match self.input(g, "value") {
                    Value::Arr(_) | Value::Obj(_) => {
                        let s = self.json_stringify(
                            self.input(g, "value"),
                            Value::Undefined,
                            Value::Undefined,
                        )?;
                        self.str_arg_pub(s, name)?
                    }
                    v => self.str_arg_pub(v, name)?,
                };
                self.regex_match_atom(&p, &v)
            }
            AtomPick | AtomOmit => {
                let obj = self.input(g, "obj");
                let keys = self.required(g, name, "keys")?;
                let keys = self.key_list(keys, name)?;
                let props = self.object_props(obj, name, "obj")?;
                self.charge_elems(props.len())?;
                // every key and property hashed once
                self.charge_work(props.len() + keys.len(), crate::price::factor::PROPERTY)?;
                // hashed lookups: linear in keys + props, whatever their overlap
                let keep: Vec<(Key, Value)> = if id == AtomPick {
                    let at: HashMap<&[u16], usize> = props
                        .iter()
                        .enumerate()
                        .map(|(i, (k, _))| (&k[..], i))
                        .collect();
                    keys.iter()
                        .filter_map(|k| at.get(&k[..]).map(|&i| props[i].clone()))
                        .collect()
                } else {
                    let drop: HashSet<&[u16]> = keys.iter().map(|k| &k[..]).collect();
                    props
                        .iter()
                        .filter(|(pk, _)| !drop.contains(&pk[..]))
                        .cloned()
                        .collect()
                };
                self.new_obj(keep, &[obj])
            }
            AtomMerge => {
                let a = self.input(g, "a");
                let b = self.input(g, "b");
                let mut pairs = self.object_props(a, name, "a")?;
                self.charge_work(pairs.len(), crate::price::factor::PROPERTY)?;
                let mut at: HashMap<Key, usize> = pairs
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i))
                    .collect();
                for (k, v) in self.object_props(b, name, "b")? {
                    match at.get(&k) {
                        Some(&i) => pairs[i].1 = v,
                        None => {
                            at.insert(k.clone(), pairs.len());
                            pairs.push((k, v));
                        }
                    }
                }
                self.new_obj(pairs, &[a, b])
            }
            AtomKeys => {
                let obj = self.input(g, "obj");
                match obj {
                    Value::Obj(_) => self.call_builtin(ObjectKeys, &[obj]),
                    _ => self.pure_empty(),
                }
            }
            AtomSplit => {
                let s = self.required(g, name, "str")?;
                let sep = self.input(g, "sep");
                let s = match s {
                    Value::Str(_) => s,
                    v => {
                        let u = self.str_arg_pub(v, name)?;
                        self.alloc_str(u)?
                    }
                };
                self.call_builtin(Split, &[s, sep])
            }
            AtomJoin => {
                let list = self.required(g, name, "list")?;
                let sep = self.input(g, "sep");
                if !matches!(list, Value::Arr(_)) {
                    return guest(format!("{name}: 'list' must be an array"));
                }
                self.call_builtin(Join, &[list, sep])
            }
            AtomLen => {
                let v = self.input(g, "list");
                Ok(Value::Num(match v {
                    Value::Arr(a) => match self.heap.get(a) {
                        Cell::Arr(x) => x.len() as f64,
                        _ => 0.0,
                    },
                    Value::Str(s) => self.units(s).len() as f64,
                    _ => 0.0,
                }))
            }
            AtomJsonParse => {
                let s = self.required(g, name, "str")?;
                self.json_parse(s)
            }
            AtomJsonStringify => {
                let v = self.input(g, "value");
                self.json_stringify(v, Value::Undefined, Value::Undefined)
            }
            AtomHash => {
                use sha2::Digest;
                let v = self.input(g, "value");
                let text = match v {
                    Value::Str(_) => self.str_arg_pub(v, name)?,
                    Value::Arr(_) | Value::Obj(_) => {
                        let s = self.json_stringify(v, Value::Undefined, Value::Undefined)?;
                        self.str_arg_pub(s, name)?
                    }
                    other => self.str_arg_pub(other, name)?,
                };
                let algo = match self.input(g, "algorithm") {
                    Value::Undefined => "SHA-256".to_string(),
                    a => String::from_utf16_lossy(&self.str_arg_pub(a, name)?).to_uppercase(),
                };
                self.charge_work(text.len(), crate::price::factor::HASH)?;
                let bytes = String::from_utf16_lossy(&text).into_bytes();
                let digest: Vec<u8> = match algo.as_str() {
                    "SHA-256" | "SHA256" => sha2::Sha256::digest(&bytes).to_vec(),
                    "SHA-384" | "SHA384" => sha2::Sha384::digest(&bytes).to_vec(),
                    "SHA-512" | "SHA512" => sha2::Sha512::digest(&bytes).to_vec(),
                    other => {
                        return guest(format!(
                        "hash: unsupported algorithm '{other}' (use SHA-256, SHA-384 or SHA-512)"
                    ))
                    }
                };
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                self.str_value(&hex)
            }
            AtomRandom => {
                let num = |vm: &Vm, k: &str, d: f64| -> OpResult<f64> {
                    match vm.input(g, k) {
                        Value::Undefined => Ok(d),
                        v => vm.to_number(v, name),
                    }
                };
                let min = num(self, "min", 0.0)?;
                let max = num(self, "max", 1.0)?;
                let format = match self.input(g, "format") {
                    Value::Undefined => "float".to_string(),
                    v => String::from_utf16_lossy(&self.str_arg_pub(v, name)?),
                };
                let unit = |vm: &mut Vm| (vm.next_random() >> 11) as f64 / (1u64 << 53) as f64;
                match format.as_str() {
                    "float" => Ok(Value::Num(min + unit(self) * (max - min))),
                    "integer" => {
                        let (lo, hi) = (min.ceil(), max.floor());
                        Ok(Value::Num(
                            (lo + (unit(self) * (hi - lo + 1.0)).floor()).min(hi),
                        ))
                    }
                    "base36" => {
                        let n = num(self, "length", 10.0)?;
                        if !(0.0..=10_000.0).contains(&n) {
                            return guest("random: 'length' must be between 0 and 10000");
                        }
                        let n = n as usize;
                        self.charge_units(n * 8)?;
                        const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
                        let s: String = (0..n)
                            .map(|_| DIGITS[(self.next_random() % 36) as usize] as char)
                            .collect();
                        self.str_value(&s)
                    }
                    other => guest(format!(
                        "random: unknown format '{other}' (use float, integer or base36)"
                    )),
                }
            }
            AtomUuid => {
                let a = self.next_random();
                let b = self.next_random();
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&a.to_be_bytes());
                bytes[8..].copy_from_slice(&b.to_be_bytes());
                bytes[6] = (bytes[6] & 0x0F) | 0x40;
                bytes[8] = (bytes[8] & 0x3F) | 0x80;
                let h: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                let h = h.concat();
                let s = format!(
                    "{}-{}-{}-{}-{}",
                    &h[0..8],
                    &h[8..12],
                    &h[12..16],
                    &h[16..20],
                    &h[20..32]
                );
                self.str_value(&s)
            }
            _ => guest(format!("{name} is not available")),
        }
    }

    fn pure_empty(&mut self) -> OpResult<Value> {
        self.reserve_arr(0, &[])?;
        Ok(self.commit_arr(Vec::new()))
    }
}
