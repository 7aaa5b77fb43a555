//! Concurrent host calls: `parallel([...])`.
//!
//! The compiler lowers `parallel(items)` to `ParBegin`, one `ParCall` (an atom call) or
//! `ParValue` (anything else) per item, and `ParEnd`. A `ParCall` is charged and counted like a
//! `CallAtom` but does not stop the run: the call is queued in the innermost open batch. At
//! `ParEnd` the run stops with [`Step::Blocked`] while any queued call is unsettled; the host
//! reads them with [`Vm::pending_calls`], performs them together, answers each with
//! [`Vm::settle`] and runs the VM again. `ParEnd` then builds the array of results, in the
//! items' order.
//!
//! Batches nest (an item's input may itself use `parallel`), are dropped when a guest error
//! unwinds past them, and are part of a snapshot: a run suspended with some calls of a batch
//! settled keeps their results and shows only the others as pending.
//!
//! [`Step::Blocked`]: super::Step::Blocked

use crate::error::{guest, ErrorKind, Fault, OpResult, RunError};
use crate::heap::{prop_bytes, Cell, PropMap};
use crate::value::Value;

use super::{Vm, MILLI_PER_ELEMENT};

/// Default cap on the items of one `parallel(...)` call.
pub const DEFAULT_MAX_PARALLEL_ITEMS: usize = 1000;
/// Most `parallel(...)` calls open at once (nested through items' inputs).
pub const MAX_PARALLEL_NESTING: usize = 64;

/// One item of a batch.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ParItem {
    /// An atom call not settled yet.
    Queued {
        /// The call's id (its number among the run's host calls).
        id: u32,
        /// The atom.
        atom: u16,
        /// Its input.
        input: Value,
    },
    /// A plain item, or a settled call's result.
    Ready(Value),
    /// A settled call that failed, with the error's message.
    Failed(String),
}

/// An open `parallel(...)`: where it was opened and its items so far.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Batch {
    /// The frame that opened it.
    pub frame: u32,
    /// How many try handlers were installed when it was opened.
    pub tries: u32,
    /// The items, in order.
    pub items: Vec<ParItem>,
}

fn malformed(what: &str) -> Fault {
    Fault::Fatal(RunError::new(
        ErrorKind::Input,
        format!("malformed program: {what}"),
    ))
}

impl Vm {
    pub(super) fn par_begin(&mut self) -> OpResult<()> {
        if self.batches.len() >= MAX_PARALLEL_NESTING {
            return guest(format!(
                "parallel() is nested more than {MAX_PARALLEL_NESTING} deep"
            ));
        }
        if let Some(f) = self.frames.last_mut() {
            f.opened = true;
        }
        self.batches.push(Batch {
            frame: self.frames.len().saturating_sub(1) as u32,
            tries: self.tries.len() as u32,
            items: Vec::new(),
        });
        Ok(())
    }

    pub(super) fn par_push(&mut self, item: ParItem) -> OpResult<()> {
        let max = self.max_parallel_items;
        let Some(b) = self.batches.last_mut() else {
            return Err(malformed("a parallel item outside parallel()"));
        };
        if b.items.len() >= max {
            return guest(format!(
                "parallel() takes at most {max} items (maxParallelItems); split the list"
            ));
        }
        b.items.push(item);
        Ok(())
    }

    /// Whether the innermost batch still has a call the host has not settled.
    pub(super) fn par_waiting(&self) -> bool {
        self.batches.last().is_some_and(|b| {
            b.items
                .iter()
                .any(|it| matches!(it, ParItem::Queued { .. }))
        })
    }

    /// Closes the innermost batch when every call in it has settled (`Some(result)`), or says
    /// the run must wait for the host (`None`).
    pub(super) fn par_end(&mut self, settled: bool) -> OpResult<Option<Value>> {
        let frame = self.frames.len().saturating_sub(1) as u32;
        let Some(b) = self.batches.last() else {
            return Err(malformed("parallel() closed without being opened"));
        };
        if b.frame != frame {
            return Err(malformed("parallel() closed in another function"));
        }
        let queued: Vec<Value> = b
            .items
            .iter()
            .filter_map(|it| match it {
                ParItem::Queued { input, .. } => Some(*input),
                _ => None,
            })
            .collect();
        if !queued.is_empty() {
            // the host must be able to read every input (as a `CallAtom` requires), all at once
            self.check_exports(&queued, || "The inputs of parallel(...)".into())
                .map_err(Fault::Fatal)?;
            return Ok(None);
        }
        let Some(b) = self.batches.last() else {
            return Err(malformed("parallel() closed without being opened"));
        };
        let n = b.items.len();
        let failed = b.items.iter().find_map(|it| match it {
            ParItem::Failed(m) => Some(m.clone()),
            _ => None,
        });
        self.charge(n as u64 * MILLI_PER_ELEMENT)?;
        if !settled {
            if let Some(msg) = failed {
                self.batches.pop();
                return Err(Fault::Guest(msg));
            }
        } else {
            // each item becomes `{ ok: true, value }` or `{ ok: false, error }`, built in place
            // so that everything made so far stays rooted by the batch
            for i in 0..n {
                let item = match self.batches.last().and_then(|b| b.items.get(i)) {
                    Some(it) => it.clone(),
                    None => break,
                };
                let (ok, key, v) = match item {
                    ParItem::Ready(v) => (true, "value", v),
                    ParItem::Failed(m) => (false, "error", self.str_value(&m)?),
                    ParItem::Queued { .. } => return Err(malformed("an unsettled call")),
                };
                if let Some(b) = self.batches.last_mut() {
                    b.items[i] = ParItem::Ready(v);
                }
                let bytes = 16 + prop_bytes(2) + prop_bytes(key.len());
                self.reserve(bytes, &[])?;
                let mut m = PropMap::with_capacity(2);
                m.insert("ok".encode_utf16().collect(), Value::Bool(ok));
                m.insert(key.encode_utf16().collect(), v);
                let o = Value::Obj(self.heap.insert(Cell::Obj(m)));
                if let Some(b) = self.batches.last_mut() {
                    b.items[i] = ParItem::Ready(o);
                }
            }
        }
        self.reserve_arr(n, &[])?;
        let Some(b) = self.batches.pop() else {
            return Err(malformed("parallel() closed without being opened"));
        };
        let values: Vec<Value> = b
            .items
            .into_iter()
            .map(|it| match it {
                ParItem::Ready(v) => v,
                _ => Value::Undefined,
            })
            .collect();
        Ok(Some(Value::Arr(self.heap.insert(Cell::Arr(values)))))
    }

    /// Drops the batches a guest error unwinds out of: those opened in frames above the
    /// handler's, or inside the `try` being left.
    pub(super) fn par_unwind(&mut self, frame: u32, tries: u32) {
        self.batches
            .retain(|b| b.frame < frame || (b.frame == frame && b.tries <= tries));
    }

    /// Drops the batches of a frame that returns (only malformed code leaves one open).
    pub(super) fn par_return(&mut self, frame: u32) {
        self.batches.retain(|b| b.frame < frame);
    }

    /// The queued calls of every open batch: (id, atom, input).
    pub(super) fn par_queued(&self) -> impl Iterator<Item = (u32, u16, Value)> + '_ {
        self.batches.iter().flat_map(|b| {
            b.items.iter().filter_map(|it| match it {
                ParItem::Queued { id, atom, input } => Some((*id, *atom, *input)),
                _ => None,
            })
        })
    }
}

/// Every value the open batches hold (GC roots).
pub(super) fn roots(batches: &[Batch]) -> impl Iterator<Item = &Value> + '_ {
    batches.iter().flat_map(|b| {
        b.items.iter().filter_map(|it| match it {
            ParItem::Queued { input, .. } => Some(input),
            ParItem::Ready(v) => Some(v),
            ParItem::Failed(_) => None,
        })
    })
}

impl Vm {
    /// Settles the queued call `id` when a batch holds it: `Ok(true)`.
    pub(super) fn par_settle(
        &mut self,
        id: u32,
        answer: Result<crate::value::JsValue, String>,
    ) -> Result<bool, RunError> {
        let found = self.batches.iter().enumerate().find_map(|(bi, b)| {
            b.items
                .iter()
                .position(|it| matches!(it, ParItem::Queued { id: qid, .. } if *qid == id))
                .map(|ii| (bi, ii))
        });
        let Some((bi, ii)) = found else {
            return Ok(false);
        };
        let item = match answer {
            Ok(v) => match self.import(&v, 0) {
                Ok(v) => ParItem::Ready(v),
                Err(Fault::Guest(m)) => ParItem::Failed(m),
                Err(Fault::Fatal(e)) => {
                    self.status = super::Status::Finished;
                    return Err(e);
                }
            },
            Err(m) => ParItem::Failed(m),
        };
        if let Some(slot) = self.batches.get_mut(bi).and_then(|b| b.items.get_mut(ii)) {
            *slot = item;
        }
        Ok(true)
    }
}
