//! Snapshots: the whole run state as bytes, integrity-checked, restorable in another process.
//!
//! A snapshot is untrusted input: [`Vm::restore`] checks the header, the hash (or HMAC), the
//! program fingerprint and every invariant the interpreter relies on (frames, registers, heap
//! indices, the kinds of cells values point at) before it hands back a `Vm`.

use std::collections::HashSet;

use ajs_bytecode::program::COST_VERSION;
use ajs_bytecode::{Constant, Op, VerifiedProgram};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::frames::Frame;
use super::host::{AtomCounters, Deferred, HostCalls};
use super::journal::Journal;
use super::meter::MeterWire;
use super::parallel::{Batch, ParItem};
use super::trace::Trace;
use super::{LogLevel, LogLine, Meter, Status, TryEntry, Vm};
use crate::heap::{Cell, Heap, PropMap, RegexCell, SetCell, SetKey};
use crate::value::{JsValue, Value};
use crate::MAX_PARALLEL_NESTING;

/// The first bytes of every snapshot.
pub const SNAPSHOT_MAGIC: [u8; 4] = *b"AJSS";
/// The snapshot format version.
pub const SNAPSHOT_VERSION: u16 = 5;
const HEADER_LEN: usize = 4 + 2 + 2 + 1 + 32;

/// Why a snapshot was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Not a snapshot (wrong magic or too short).
    #[error("not an AJS snapshot")]
    NotASnapshot,
    /// Written by another snapshot format version.
    #[error("snapshot format version {found} is not this build's {expected}")]
    Version {
        /// In the snapshot.
        found: u16,
        /// This build's.
        expected: u16,
    },
    /// Written under another cost table.
    #[error("snapshot cost version {found} is not this build's {expected}")]
    CostVersion {
        /// In the snapshot.
        found: u16,
        /// This build's.
        expected: u16,
    },
    /// The hash or HMAC does not match: the bytes were changed, or the key is wrong.
    #[error("snapshot integrity check failed: the bytes were altered or the key is wrong")]
    Integrity,
    /// The snapshot carries an HMAC and no key was given, or the reverse.
    #[error("snapshot key mismatch: {0}")]
    Key(&'static str),
    /// The snapshot is of a run of another program.
    #[error("snapshot is for another program")]
    ForeignProgram,
    /// The body does not decode.
    #[error("snapshot body does not decode: {0}")]
    Decode(String),
    /// The state breaks an invariant the interpreter relies on.
    #[error("snapshot state is invalid: {0}")]
    Invalid(String),
    /// A single-use snapshot was already resumed.
    #[error("snapshot was already used")]
    AlreadyUsed,
}

/// SHA-256 of a program's bytes: what a snapshot and a journal are bound to.
pub fn program_fingerprint(program: &VerifiedProgram) -> [u8; 32] {
    Sha256::digest(program.to_bytes()).into()
}

/// A stable SHA-256 of a host value (kinds, numbers' bits, strings, keys in order), hex.
pub fn value_hash(v: &JsValue) -> String {
    let mut h = Sha256::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            JsValue::Undefined => h.update([0u8]),
            JsValue::Null => h.update([1u8]),
            JsValue::Bool(b) => h.update([2u8, u8::from(*b)]),
            JsValue::Number(n) => {
                h.update([3u8]);
                h.update(n.to_bits().to_le_bytes());
            }
            JsValue::String(s) => {
                h.update([4u8]);
                h.update((s.len() as u64).to_le_bytes());
                h.update(s.as_bytes());
            }
            JsValue::Array(a) => {
                h.update([5u8]);
                h.update((a.len() as u64).to_le_bytes());
                stack.extend(a.iter().rev());
            }
            JsValue::Object(m) => {
                h.update([6u8]);
                h.update((m.len() as u64).to_le_bytes());
                for (k, _) in m {
                    h.update((k.len() as u64).to_le_bytes());
                    h.update(k.as_bytes());
                }
                stack.extend(m.values().rev());
            }
        }
    }
    hex(&h.finalize())
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[derive(Serialize, Deserialize, Clone, Copy)]
enum SV {
    U,
    N,
    B(bool),
    Num(f64),
    S(u32),
    A(u32),
    O(u32),
    P(u32),
}

#[derive(Serialize, Deserialize)]
enum SKey {
    U,
    N,
    B(bool),
    Num(u64),
    S(Vec<u16>),
    R(u32),
}

#[derive(Serialize, Deserialize)]
enum SCell {
    Free,
    Str(Vec<u16>),
    Arr(Vec<SV>),
    Obj(Vec<(Vec<u16>, SV)>),
    Set(Vec<(SKey, SV)>),
    Date(f64),
    Regex {
        source: Vec<u16>,
        flags: String,
        last_index: u64,
    },
    Slice {
        buf: u32,
        len: u32,
    },
    StrBuf(Vec<u16>),
}

#[derive(Serialize, Deserialize)]
enum SStatus {
    Running,
    Awaiting {
        dst: u32,
        id: u32,
        atom: u16,
        input: SV,
    },
    Finished,
}

#[derive(Serialize, Deserialize)]
enum SItem {
    Queued { id: u32, atom: u16, input: SV },
    Ready(SV),
    Failed(String),
}

#[derive(Serialize, Deserialize)]
struct SBatch {
    frame: u32,
    tries: u32,
    items: Vec<SItem>,
}

#[derive(Serialize, Deserialize)]
struct Body {
    fingerprint: [u8; 32],
    frames: Vec<(u16, u32, u32, u32)>,
    regs: Vec<SV>,
    tries: Vec<(u32, u32)>,
    consts: Vec<SV>,
    cells: Vec<SCell>,
    heap_limit: u64,
    collections: u64,
    meter: MeterWire,
    raise_on_run: Option<String>,
    handling: Option<String>,
    status: SStatus,
    deferred: Vec<(u32, u16, SV)>,
    batches: Vec<SBatch>,
    max_parallel_items: u64,
    next_call_id: u32,
    log: Vec<(u8, String)>,
    log_dropped: u64,
    max_log_lines: u64,
    max_log_bytes: u64,
    max_call_depth: u64,
    atoms: AtomCounters,
    rng: u64,
    journal: Journal,
    /// Arrays with properties besides their elements (match results), each with the object
    /// cell holding them.
    array_extras: Vec<(u32, u32)>,
}

fn sv(v: Value) -> SV {
    match v {
        Value::Undefined => SV::U,
        Value::Null => SV::N,
        Value::Bool(b) => SV::B(b),
        Value::Num(n) => SV::Num(n),
        Value::Str(g) => SV::S(g),
        Value::Arr(g) => SV::A(g),
        Value::Obj(g) => SV::O(g),
        Value::Pending(p) => SV::P(p),
    }
}

fn tag(key: Option<&[u8]>, header: &[u8], body: &[u8]) -> [u8; 32] {
    match key {
        Some(k) => {
            let mut m = <Hmac<Sha256> as Mac>::new_from_slice(k).expect("HMAC takes any key");
            m.update(header);
            m.update(body);
            m.finalize().into_bytes().into()
        }
        None => {
            let mut h = Sha256::new();
            h.update(header);
            h.update(body);
            h.finalize().into()
        }
    }
}

/// The identity of a snapshot (its hash or HMAC), for single-use checks.
pub fn snapshot_id(bytes: &[u8]) -> Option<String> {
    (bytes.len() >= HEADER_LEN).then(|| hex(&bytes[9..41]))
}

struct Check<'a> {
    cells: &'a [SCell],
    pending: HashSet<u32>,
}

impl Check<'_> {
    fn value(&self, v: SV, pending_ok: bool) -> Result<Value, SnapshotError> {
        let cell = |g: u32| self.cells.get(g as usize);
        let bad = |what: &str| Err(SnapshotError::Invalid(what.to_string()));
        Ok(match v {
            SV::U => Value::Undefined,
            SV::N => Value::Null,
            SV::B(b) => Value::Bool(b),
            SV::Num(n) => Value::Num(n),
            SV::S(g) => match cell(g) {
                Some(SCell::Str(_) | SCell::Slice { .. }) => Value::Str(g),
                _ => return bad("a string value points at no string cell"),
            },
            SV::A(g) => match cell(g) {
                Some(SCell::Arr(_)) => Value::Arr(g),
                _ => return bad("an array value points at no array cell"),
            },
            SV::O(g) => match cell(g) {
                Some(SCell::Obj(_) | SCell::Set(_) | SCell::Date(_) | SCell::Regex { .. }) => {
                    Value::Obj(g)
                }
                _ => return bad("an object value points at no object cell"),
            },
            SV::P(p) if pending_ok && self.pending.contains(&p) => Value::Pending(p),
            SV::P(_) => return bad("an unsettled host result is not where one may be"),
        })
    }
}

fn invalid<T>(m: impl Into<String>) -> Result<T, SnapshotError> {
    Err(SnapshotError::Invalid(m.into()))
}

impl Vm {
    /// The whole run state as bytes, with a SHA-256 integrity hash.
    pub fn snapshot(&self) -> Vec<u8> {
        self.snapshot_with(None)
    }

    /// The whole run state as bytes: a header (magic, format version, cost version, whether it
    /// is keyed, the tag) and the postcard body. The tag is an HMAC-SHA256 under `key` when one
    /// is given, else a SHA-256.
    pub fn snapshot_with(&self, key: Option<&[u8]>) -> Vec<u8> {
        let cells = self
            .heap
            .cells()
            .iter()
            .map(|c| match c {
                Cell::Free => SCell::Free,
                Cell::Str(s) => SCell::Str(s.to_vec()),
                Cell::Arr(a) => SCell::Arr(a.iter().copied().map(sv).collect()),
                Cell::Obj(m) => SCell::Obj(m.iter().map(|(k, v)| (k.to_vec(), sv(*v))).collect()),
                Cell::Set(m) => SCell::Set(
                    m.iter()
                        .map(|(k, v)| {
                            let k = match k {
                                SetKey::Undefined => SKey::U,
                                SetKey::Null => SKey::N,
                                SetKey::Bool(b) => SKey::B(*b),
                                SetKey::Num(n) => SKey::Num(*n),
                                SetKey::Str(s) => SKey::S(s.to_vec()),
                                SetKey::Ref(g) => SKey::R(*g),
                            };
                            (k, sv(*v))
                        })
                        .collect(),
                ),
                Cell::Date(t) => SCell::Date(*t),
                Cell::Regex(r) => SCell::Regex {
                    source: r.source.to_vec(),
                    flags: r.flags.to_string(),
                    last_index: r.last_index as u64,
                },
                Cell::Slice { buf, len } => SCell::Slice {
                    buf: *buf,
                    len: *len,
                },
                Cell::StrBuf(b) => SCell::StrBuf(b.clone()),
            })
            .collect();
        let body = Body {
            fingerprint: program_fingerprint(&self.program),
            frames: self
                .frames
                .iter()
                .enumerate()
                // (a snapshot names the register a frame returns into absolutely)
                .map(|(i, f)| {
                    let caller_base = i
                        .checked_sub(1)
                        .and_then(|c| self.frames.get(c))
                        .map_or(0, |c| c.base);
                    let pc = self.program.local_pc(f.func as usize, f.pc);
                    (f.func, pc, f.base, caller_base + f.ret)
                })
                .collect(),
            regs: self.live_regs().iter().copied().map(sv).collect(),
            // (pcs and handlers in their function's own code, as the snapshot names them)
            tries: self
                .tries
                .iter()
                .map(|t| {
                    let func = self.frames.get(t.frame as usize).map_or(0, |f| f.func);
                    (t.frame, self.program.local_pc(func as usize, t.handler))
                })
                .collect(),
            consts: self.consts.iter().copied().map(sv).collect(),
            cells,
            heap_limit: self.heap.limit() as u64,
            collections: self.heap.collections(),
            array_extras: self.heap.all_extras(),
            meter: self.meter.to_wire(),
            raise_on_run: self.hosts.raise_on_run.clone(),
            handling: self.handling.clone(),
            status: match self.status {
                Status::Running => SStatus::Running,
                Status::Finished => SStatus::Finished,
                Status::AwaitingHost {
                    dst,
                    id,
                    atom,
                    input,
                } => SStatus::Awaiting {
                    dst,
                    id,
                    atom,
                    input: sv(input),
                },
            },
            deferred: self
                .hosts
                .deferred
                .iter()
                .map(|d| (d.id, d.atom, sv(d.input)))
                .collect(),
            batches: self
                .batches
                .iter()
                .map(|b| SBatch {
                    frame: b.frame,
                    tries: b.tries,
                    items: b
                        .items
                        .iter()
                        .map(|it| match it {
                            ParItem::Queued { id, atom, input } => SItem::Queued {
                                id: *id,
                                atom: *atom,
                                input: sv(*input),
                            },
                            ParItem::Ready(v) => SItem::Ready(sv(*v)),
                            ParItem::Failed(m) => SItem::Failed(m.clone()),
                        })
                        .collect(),
                })
                .collect(),
            max_parallel_items: self.max_parallel_items as u64,
            next_call_id: self.hosts.next_call_id,
            log: self
                .log
                .iter()
                .map(|l| {
                    let level = match l.level {
                        LogLevel::Info => 0,
                        LogLevel::Warn => 1,
                        LogLevel::Error => 2,
                    };
                    (level, l.message.clone())
                })
                .collect(),
            log_dropped: self.log_dropped,
            max_log_lines: self.max_log_lines as u64,
            max_log_bytes: self.max_log_bytes as u64,
            max_call_depth: self.max_call_depth as u64,
            atoms: self.hosts.atoms.clone(),
            rng: self.rng,
            journal: self.journal.clone(),
        };
        let body = postcard::to_allocvec(&body).unwrap_or_default();
        let mut header = Vec::with_capacity(HEADER_LEN + body.len());
        header.extend_from_slice(&SNAPSHOT_MAGIC);
        header.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        header.extend_from_slice(&COST_VERSION.to_le_bytes());
        header.push(u8::from(key.is_some()));
        let t = tag(key, &header, &body);
        header.extend_from_slice(&t);
        header.extend_from_slice(&body);
        header
    }

    /// Restores a run from [`Vm::snapshot`]'s bytes, for `program`. The clock is the system
    /// clock ([`Vm::set_clock`] to change it); everything else — budgets included — continues
    /// from the snapshot.
    ///
    /// # Errors
    /// [`SnapshotError`] when the bytes are not a snapshot of this format and cost version, fail
    /// the integrity check (or the key does not match), belong to another program, or hold a
    /// state that breaks an invariant of the interpreter.
    pub fn restore(
        program: VerifiedProgram,
        bytes: &[u8],
        key: Option<&[u8]>,
    ) -> Result<Vm, SnapshotError> {
        if bytes.len() < HEADER_LEN || bytes[..4] != SNAPSHOT_MAGIC {
            return Err(SnapshotError::NotASnapshot);
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version {
                found: version,
                expected: SNAPSHOT_VERSION,
            });
        }
        let cost = u16::from_le_bytes([bytes[6], bytes[7]]);
        if cost != COST_VERSION {
            return Err(SnapshotError::CostVersion {
                found: cost,
                expected: COST_VERSION,
            });
        }
        match (bytes[8], key) {
            (0, None) | (1, Some(_)) => {}
            (1, None) => return Err(SnapshotError::Key("the snapshot is keyed; give the key")),
            (0, Some(_)) => return Err(SnapshotError::Key("the snapshot is not keyed")),
            _ => return Err(SnapshotError::NotASnapshot),
        }
        let body = &bytes[HEADER_LEN..];
        let want = tag(key, &bytes[..9], body);
        // constant-time enough for a 32-byte tag: compare every byte
        let diff = want
            .iter()
            .zip(&bytes[9..41])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err(SnapshotError::Integrity);
        }
        let body: Body =
            postcard::from_bytes(body).map_err(|e| SnapshotError::Decode(e.to_string()))?;
        if body.fingerprint != program_fingerprint(&program) {
            return Err(SnapshotError::ForeignProgram);
        }
        Vm::from_body(program, body)
    }

    fn from_body(program: VerifiedProgram, b: Body) -> Result<Vm, SnapshotError> {
        let funcs = &program.functions;
        // frames: pcs inside their code; each caller stopped after a `Call` of the frame above
        // it, whose window starts at that call's arguments (inside the caller's)
        if b.frames.is_empty() {
            return invalid("no frames");
        }
        let mut frames = Vec::with_capacity(b.frames.len());
        // the caller's base, registers and the `Call` it stopped after
        let mut prev: Option<(u64, u64, Option<Op>)> = None;
        // the end of the highest window
        let mut top = 0u64;
        for &(func, pc, base, ret) in &b.frames {
            let Some(f) = funcs.get(func as usize) else {
                return invalid("a frame runs no function of the program");
            };
            if pc as usize >= f.code.len() {
                return invalid("a frame's pc is outside its code");
            }
            // (kept from the caller's base; the entry frame returns into nothing)
            let mut ret_reg = 0;
            match prev {
                None if base != 0 => {
                    return invalid("the entry frame's registers do not start at 0");
                }
                None => {}
                Some((pb, pn, call)) => {
                    let Some(Op::Call {
                        dst,
                        func: callee,
                        base: at,
                        ..
                    }) = call
                    else {
                        return invalid("a caller is not stopped after a call");
                    };
                    if callee.0 != func
                        || base as u64 != pb + at.0 as u64
                        || ret as u64 != pb + dst.0 as u64
                    {
                        return invalid("a frame is not the call its caller made");
                    }
                    if (ret as u64) < pb || ret as u64 >= pb + pn {
                        return invalid("a frame returns into no register of its caller");
                    }
                    ret_reg = (ret as u64 - pb) as u32;
                }
            }
            let call = (pc as usize)
                .checked_sub(1)
                .and_then(|p| f.code.get(p))
                .copied();
            prev = Some((base as u64, f.nregs as u64, call));
            top = top.max(base as u64 + f.nregs as u64);
            frames.push(Frame {
                func,
                // (the frames owning a handler or batch are marked below)
                opened: frames.is_empty(),
                pc: program.flat_pc(func as usize, pc),
                base,
                ret: ret_reg,
            });
        }
        if b.regs.len() as u64 != top {
            return invalid("registers do not match the frames");
        }
        if b.max_call_depth == 0
            || b.frames.len() as u64 > b.max_call_depth
            || b.frames.len() > super::MAX_FRAMES
        {
            return invalid("more frames than the call depth allows");
        }
        let mut tries = Vec::with_capacity(b.tries.len());
        for &(frame, handler) in &b.tries {
            let Some(&(func, ..)) = b.frames.get(frame as usize) else {
                return invalid("a try handler names no frame");
            };
            if handler as usize >= funcs[func as usize].code.len() {
                return invalid("a try handler is outside its code");
            }
            tries.push(TryEntry {
                frame,
                handler: program.flat_pc(func as usize, handler),
            });
            if let Some(f) = frames.get_mut(frame as usize) {
                f.opened = true;
            }
        }
        let natoms = program.atoms.len();
        if b.atoms.cost.len() != natoms
            || b.atoms.quota.len() != natoms
            || b.atoms.used.len() != natoms
        {
            return invalid("atom counters do not match the program's atoms");
        }
        let meter = Meter::from_wire(b.meter).or_else(invalid)?;
        let mut pending = HashSet::new();
        for &(id, atom, _) in &b.deferred {
            if atom as usize >= natoms || id >= b.next_call_id || !pending.insert(id) {
                return invalid("a deferred call is malformed");
            }
        }
        // batches: opened by live frames, in order, within the caps; queued calls unique
        let max_items = usize::try_from(b.max_parallel_items).unwrap_or(usize::MAX);
        if b.batches.len() > MAX_PARALLEL_NESTING {
            return invalid("more open parallel() calls than allowed");
        }
        let mut queued = HashSet::new();
        let mut last = (0u32, 0u32);
        for sb in &b.batches {
            if sb.frame as usize >= b.frames.len()
                || sb.tries as usize > b.tries.len()
                || (sb.frame, sb.tries) < last
                || sb.items.len() > max_items
            {
                return invalid("an open parallel() call is malformed");
            }
            last = (sb.frame, sb.tries);
            for it in &sb.items {
                if let SItem::Queued { id, atom, .. } = it {
                    if *atom as usize >= natoms
                        || *id >= b.next_call_id
                        || pending.contains(id)
                        || !queued.insert(*id)
                    {
                        return invalid("a queued parallel call is malformed");
                    }
                }
            }
        }
        let check = Check {
            cells: &b.cells,
            pending,
        };
        // cells: every reference inside points at a cell of the right kind
        let mut cells = Vec::with_capacity(b.cells.len());
        let mut regexes = Vec::new();
        for (i, c) in b.cells.iter().enumerate() {
            cells.push(match c {
                SCell::Free => Cell::Free,
                SCell::Str(s) => Cell::Str(s.clone().into_boxed_slice()),
                SCell::Arr(a) => Cell::Arr(
                    a.iter()
                        .map(|v| check.value(*v, false))
                        .collect::<Result<_, _>>()?,
                ),
                SCell::Obj(m) => {
                    let mut out = PropMap::with_capacity(m.len());
                    for (k, v) in m {
                        out.insert(k[..].into(), check.value(*v, false)?);
                    }
                    Cell::Obj(out)
                }
                SCell::Set(m) => {
                    let mut out = SetCell::with_capacity_and_hasher(m.len(), Default::default());
                    for (k, v) in m {
                        let k = match k {
                            SKey::U => SetKey::Undefined,
                            SKey::N => SetKey::Null,
                            SKey::B(x) => SetKey::Bool(*x),
                            SKey::Num(n) => SetKey::Num(*n),
                            SKey::S(s) => SetKey::Str(s.clone().into_boxed_slice()),
                            SKey::R(g) => {
                                if b.cells.get(*g as usize).is_none() {
                                    return invalid("a set member points at no cell");
                                }
                                SetKey::Ref(*g)
                            }
                        };
                        out.insert(k, check.value(*v, false)?);
                    }
                    Cell::Set(Box::new(out))
                }
                SCell::Date(t) => Cell::Date(*t),
                SCell::Regex { .. } => {
                    regexes.push(i);
                    Cell::Free
                }
                SCell::Slice { buf, len } => match b.cells.get(*buf as usize) {
                    Some(SCell::StrBuf(u)) if *len as usize <= u.len() => Cell::Slice {
                        buf: *buf,
                        len: *len,
                    },
                    _ => return invalid("a string slice points past a string buffer"),
                },
                SCell::StrBuf(u) => Cell::StrBuf(u.clone()),
            });
        }
        let regs: Vec<Value> = b
            .regs
            .iter()
            .map(|v| check.value(*v, true))
            .collect::<Result<_, _>>()?;
        if b.consts.len() != program.constants.len() {
            return invalid("constants do not match the program");
        }
        let mut consts = Vec::with_capacity(b.consts.len());
        let mut typeof_consts = [Value::Undefined; super::TYPE_NAMES.len()];
        for (v, c) in b.consts.iter().zip(&program.constants) {
            let v = check.value(*v, false)?;
            let ok = match (v, c) {
                (Value::Num(x), Constant::Number(y)) => x.to_bits() == y.to_bits(),
                (Value::Str(g), Constant::String(s)) => {
                    matches!(&cells[g as usize], Cell::Str(u) if u[..] == s[..])
                }
                _ => false,
            };
            if !ok {
                return invalid("constants do not match the program");
            }
            if let Constant::String(s) = c {
                if let Some(t) = super::type_name_index(s) {
                    typeof_consts[t] = v;
                }
            }
            consts.push(v);
        }
        let status = match b.status {
            SStatus::Running => super::Status::Running,
            SStatus::Finished => super::Status::Finished,
            SStatus::Awaiting {
                dst,
                id,
                atom,
                input,
            } => {
                if dst as usize >= regs.len() || atom as usize >= natoms || id >= b.next_call_id {
                    return invalid("the awaited host call is malformed");
                }
                Status::AwaitingHost {
                    dst,
                    id,
                    atom,
                    input: check.value(input, false)?,
                }
            }
        };
        let deferred = b
            .deferred
            .iter()
            .map(|&(id, atom, input)| {
                Ok(Deferred {
                    id,
                    atom,
                    input: check.value(input, false)?,
                })
            })
            .collect::<Result<Vec<_>, SnapshotError>>()?;
        let mut batches = Vec::with_capacity(b.batches.len());
        for sb in &b.batches {
            let mut items = Vec::with_capacity(sb.items.len());
            for it in &sb.items {
                items.push(match it {
                    SItem::Queued { id, atom, input } => ParItem::Queued {
                        id: *id,
                        atom: *atom,
                        input: check.value(*input, false)?,
                    },
                    SItem::Ready(v) => ParItem::Ready(check.value(*v, false)?),
                    SItem::Failed(m) => ParItem::Failed(m.clone()),
                });
            }
            if let Some(f) = frames.get_mut(sb.frame as usize) {
                f.opened = true;
            }
            batches.push(Batch {
                frame: sb.frame,
                tries: sb.tries,
                items,
            });
        }
        let mut log = Vec::with_capacity(b.log.len());
        for (level, message) in b.log {
            let level = match level {
                0 => LogLevel::Info,
                1 => LogLevel::Warn,
                2 => LogLevel::Error,
                _ => return invalid("unknown log level"),
            };
            log.push(LogLine { level, message });
        }
        let regex_sources: Vec<(usize, Vec<u16>, String, u64)> = regexes
            .iter()
            .map(|&i| match &b.cells[i] {
                SCell::Regex {
                    source,
                    flags,
                    last_index,
                } => (i, source.clone(), flags.clone(), *last_index),
                _ => unreachable!("collected from regex cells"),
            })
            .collect();
        let limit = usize::try_from(b.heap_limit).unwrap_or(usize::MAX);
        let log_bytes = log.iter().map(|l| l.message.len()).sum();
        let mut vm = Vm {
            heap: Heap::from_cells(cells, limit, b.collections),
            consts: std::sync::Arc::new(consts),
            typeof_consts,
            const_keys: Vec::new(),
            regs,
            frames: frames.into(),
            tries,
            meter,
            handling: b.handling,
            status,
            log,
            log_dropped: b.log_dropped,
            max_log_lines: usize::try_from(b.max_log_lines).unwrap_or(usize::MAX),
            log_bytes,
            max_log_bytes: usize::try_from(b.max_log_bytes).unwrap_or(usize::MAX),
            max_call_depth: usize::try_from(b.max_call_depth).unwrap_or(usize::MAX),
            hosts: HostCalls {
                atoms: b.atoms,
                deferred,
                next_call_id: b.next_call_id,
                raise_on_run: b.raise_on_run,
            },
            rng: b.rng | 1,
            clock: super::system_clock,
            regex_cache: Default::default(),
            interrupt: Default::default(),
            journal: b.journal,
            trace: Trace::default(),
            batches,
            max_parallel_items: max_items,
            program,
        };
        for (i, source, flags, last_index) in regex_sources {
            let (re, global) = vm
                .rebuild_regex(&source, &flags)
                .map_err(SnapshotError::Invalid)?;
            if let Some(c) = vm.heap.get_mut(i as u32) {
                *c = Cell::Regex(Box::new(RegexCell {
                    source: source.into_boxed_slice(),
                    flags: flags.into_boxed_str(),
                    re,
                    global,
                    last_index: usize::try_from(last_index).unwrap_or(usize::MAX),
                }));
            }
        }
        // the heap's accounting counts regex cells once rebuilt
        let cells = vm.heap.cells().to_vec();
        vm.heap = Heap::from_cells(cells, limit, b.collections);
        // an array's extra properties: an array cell to an object cell, each array once
        let mut seen = HashSet::new();
        for &(arr, obj) in &b.array_extras {
            let arr_ok = matches!(b.cells.get(arr as usize), Some(SCell::Arr(_)));
            let obj_ok = matches!(b.cells.get(obj as usize), Some(SCell::Obj(_)));
            if !arr_ok || !obj_ok || !seen.insert(arr) {
                return invalid("an array's extra properties point at the wrong cells");
            }
            vm.heap.set_extras(arr, obj);
        }
        Ok(vm)
    }
}
