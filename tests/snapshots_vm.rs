//! Snapshots at the VM level: a run stopped at a host call, written to bytes, restored (as a
//! fresh process would) and continued, ends exactly like the run that never stopped; tampered,
//! foreign and mutated snapshots are refused or run within their budgets, never a panic.

use ajs_vm::{AtomSpec, JsValue, SnapshotError, Step, Vm, VmOptions};
use sha2::{Digest, Sha256};

use crate::common;

const SRC: &str = "function main({ n: 3 }) {\n  let out = []\n  let seen = Set()\n  let re = /a(b+)/g\n  let d = Date(0)\n  let mm = /b(?<x>b)/.exec('abbc')\n  let i = 0\n  while (i < n) {\n    let r = llmPredict({ prompt: 'q' + i })\n    seen.add(r)\n    out.push({ r, m: re.test('xabbb' + r), y: d.year, t: Date.now() })\n    i = i + 1\n  }\n  try { Error('boom') } catch (e) { out.push(e) }\n  console.log('done', out.length)\n  return { out, size: seen.size, r: Math.random() < 2, m: [mm.index, mm.input, mm.groups.x] }\n}";

fn program(src: &str) -> ajs_bytecode::VerifiedProgram {
    common::agent_program(src, &["llmPredict"])
}

fn opts() -> VmOptions {
    VmOptions {
        fuel: 5_000_000,
        atoms: [(
            "llmPredict".to_string(),
            AtomSpec {
                cost: 100_000,
                quota: Some(5),
            },
        )]
        .into(),
        random_seed: 7,
        clock: || 1_700_000_000_000.0,
        ..VmOptions::default()
    }
}

fn answer(input: &JsValue) -> JsValue {
    match input {
        JsValue::Object(m) => JsValue::String(format!("ans-{}", m["prompt"].display())),
        _ => JsValue::Null,
    }
}

/// Runs to the end; at the `pause_at`-th host call, snapshots, drops the VM and restores.
fn run(pause_at: Option<usize>, key: Option<&[u8]>) -> (Step, u64, usize) {
    let p = program(SRC);
    let mut vm = Vm::new(p.clone(), &[JsValue::Number(3.0)], opts()).unwrap();
    let mut calls = 0;
    loop {
        match vm.run(1_000) {
            Step::Host(c) => {
                if Some(calls) == pause_at {
                    let bytes = vm.snapshot_with(key);
                    drop(vm);
                    vm = Vm::restore(p.clone(), &bytes, key).unwrap();
                    vm.set_clock(|| 1_700_000_000_000.0);
                    let pending = vm.pending_calls();
                    assert_eq!(pending.len(), 1);
                    assert_eq!(pending[0].call, c);
                }
                calls += 1;
                vm.resume(Ok(answer(&c.input))).unwrap();
            }
            Step::Yield => {}
            other => return (other, vm.fuel_used_milli(), vm.log().len()),
        }
    }
}

#[test]
fn a_restored_run_ends_like_the_unpaused_one() {
    let plain = run(None, None);
    assert!(matches!(plain.0, Step::Done(_)), "{:?}", plain.0);
    // a match result held across the pause keeps its index, input and groups
    let Step::Done(v) = &plain.0 else {
        unreachable!()
    };
    assert!(format!("{v:?}").contains("abbc"), "{v:?}");
    for at in 0..3 {
        assert_eq!(run(Some(at), None), plain, "paused at call {at}");
        assert_eq!(
            run(Some(at), Some(b"k")),
            plain,
            "keyed, paused at call {at}"
        );
    }
}

fn paused_bytes(key: Option<&[u8]>) -> Vec<u8> {
    let mut vm = Vm::new(program(SRC), &[JsValue::Number(3.0)], opts()).unwrap();
    let mut seen = 0;
    loop {
        match vm.run(1_000) {
            Step::Host(c) => {
                seen += 1;
                if seen == 2 {
                    return vm.snapshot_with(key);
                }
                vm.resume(Ok(answer(&c.input))).unwrap();
            }
            Step::Yield => {}
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn tampered_keyed_and_foreign_snapshots_are_refused() {
    let bytes = paused_bytes(None);
    let p = program(SRC);
    assert!(Vm::restore(p.clone(), &bytes, None).is_ok());
    for i in [0, 5, 7, 8, 20, bytes.len() / 2, bytes.len() - 1] {
        let mut b = bytes.clone();
        b[i] ^= 0x40;
        assert!(Vm::restore(p.clone(), &b, None).is_err(), "byte {i}");
    }
    assert_eq!(
        Vm::restore(p.clone(), &bytes[..bytes.len() - 1], None).unwrap_err(),
        SnapshotError::Integrity
    );
    let other = program(&SRC.replace("'q'", "'z'"));
    assert_eq!(
        Vm::restore(other, &bytes, None).unwrap_err(),
        SnapshotError::ForeignProgram
    );
    let keyed = paused_bytes(Some(b"secret"));
    assert!(Vm::restore(p.clone(), &keyed, Some(b"secret")).is_ok());
    assert_eq!(
        Vm::restore(p.clone(), &keyed, Some(b"wrong")).unwrap_err(),
        SnapshotError::Integrity
    );
    assert!(matches!(
        Vm::restore(p.clone(), &keyed, None).unwrap_err(),
        SnapshotError::Key(_)
    ));
    // another cost version
    let mut b = bytes.clone();
    b[6] = b[6].wrapping_add(1);
    assert!(matches!(
        Vm::restore(p, &b, None).unwrap_err(),
        SnapshotError::CostVersion { .. }
    ));
}

/// Re-seals a mutated body with a valid SHA-256, so the state checks (not the hash) are what
/// refuse it.
fn reseal(mut b: Vec<u8>) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(&b[..9]);
    h.update(&b[41..]);
    let t: [u8; 32] = h.finalize().into();
    b[9..41].copy_from_slice(&t);
    b
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn mutated_snapshots_are_refused_or_run_within_budget() {
    let bytes = paused_bytes(None);
    let p = program(SRC);
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let (mut refused, mut ran) = (0, 0);
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..1 + rng.next() % 3 {
            let i = 41 + (rng.next() as usize % (b.len() - 41));
            match rng.next() % 3 {
                0 => b[i] ^= 1 << (rng.next() % 8),
                1 => b[i] = rng.next() as u8,
                _ => b[i] = b[i].wrapping_add(1),
            }
        }
        let Ok(mut vm) = Vm::restore(p.clone(), &reseal(b), None) else {
            refused += 1;
            continue;
        };
        ran += 1;
        let budget = vm.fuel_budget_milli();
        for _ in 0..10_000 {
            let step = vm.run(1_000);
            assert!(vm.fuel_used_milli() <= budget);
            match step {
                Step::Done(_) | Step::Failed(_) => break,
                Step::Host(c) => {
                    if vm.resume(Ok(answer(&c.input))).is_err() {
                        break;
                    }
                }
                Step::Blocked => {
                    for pc in vm.pending_calls() {
                        if pc.deferred && vm.settle(pc.id, Ok(JsValue::Null)).is_err() {
                            break;
                        }
                    }
                }
                Step::Yield => {}
            }
        }
    }
    assert!(refused > 0 && ran > 0, "refused {refused}, ran {ran}");
}

#[test]
fn a_deferred_call_blocks_where_its_value_is_needed() {
    let src = "function main({ n: 1 }) {\n  let a = llmPredict({ prompt: 'a' })\n  let b = llmPredict({ prompt: 'b' })\n  let c = a\n  console.log('before use')\n  return { s: c + b }\n}";
    let p = program(src);
    let mut vm = Vm::new(p.clone(), &[JsValue::Number(1.0)], opts()).unwrap();
    let mut deferred = Vec::new();
    loop {
        match vm.run(u64::MAX) {
            Step::Host(_) => deferred.push(vm.defer().unwrap()),
            Step::Blocked => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(deferred, vec![0, 1]);
    assert_eq!(vm.log().len(), 1, "ran up to the use");
    let bytes = vm.snapshot();
    let mut vm = Vm::restore(p, &bytes, None).unwrap();
    let pending = vm.pending_calls();
    assert_eq!(pending.len(), 2);
    for pc in pending {
        vm.settle(pc.id, Ok(answer(&pc.call.input))).unwrap();
    }
    let Step::Done(v) = vm.run(u64::MAX) else {
        panic!()
    };
    assert_eq!(
        v.to_json().unwrap(),
        serde_json::json!({ "s": "ans-aans-b" })
    );
    assert_eq!(vm.log().len(), 1, "nothing ran twice");
}

/// Runs `p` (with `n: 1`) to its end, answering every host call; at the `pause_at`-th, snapshots
/// and restores the run first. The step it ended with, and the VM.
fn run_pausing(p: &ajs_bytecode::VerifiedProgram, pause_at: Option<usize>) -> (Step, Vm) {
    let mut vm = Vm::new(p.clone(), &[JsValue::Number(1.0)], opts()).unwrap();
    let mut calls = 0;
    loop {
        match vm.run(u64::MAX) {
            Step::Host(c) => {
                if Some(calls) == pause_at {
                    let bytes = vm.snapshot();
                    vm = Vm::restore(p.clone(), &bytes, None).unwrap();
                }
                calls += 1;
                vm.resume(Ok(answer(&c.input))).unwrap();
            }
            other => return (other, vm),
        }
    }
}

/// A helper paused inside its own `try` and restored still closes that handler when it
/// returns: an error its caller throws afterwards ends the run, as it does when nothing paused,
/// instead of reaching the helper's dead handler. (A frame that opened a handler returns on the
/// slow path, which closes it; the restored frame must be known to have opened one.)
#[test]
fn a_handler_opened_in_a_paused_helper_closes_when_it_returns() {
    let src = "function ask(q) {\n  try { return llmPredict({ prompt: q }) } catch (e) { return 'ask caught' }\n}\nfunction main({ n: 1 }) {\n  let a = ask('x')\n  console.log(a)\n  Error('after')\n  return { a }\n}";
    let p = program(src);
    for pause_at in [None, Some(0)] {
        let (step, vm) = run_pausing(&p, pause_at);
        let Step::Failed(e) = step else {
            panic!("paused at {pause_at:?}: {step:?}")
        };
        assert!(e.message.contains("after"), "paused at {pause_at:?}: {e:?}");
        assert_eq!(
            e.pos.map(|p| p.line),
            Some(7),
            "paused at {pause_at:?}: {e:?}"
        );
        assert_eq!(vm.log().len(), 1, "paused at {pause_at:?}");
    }
}

/// A run paused two calls deep (each callee's registers start at its arguments, inside its
/// caller's) is snapshotted and restored at each of its host calls, and ends as the run that
/// never stopped: the callers' registers below the calls' arguments come back intact.
#[test]
fn a_run_paused_in_nested_helpers_restores_their_windows() {
    let src = "function inner(q, k) {\n  let r = llmPredict({ prompt: q })\n  return r + k\n}\nfunction outer(q) {\n  let before = 'b' + q\n  let v = inner(q + '!', 7)\n  return before + v\n}\nfunction main({ n: 1 }) {\n  let a = n + 1\n  let x = outer('x')\n  let y = outer('y')\n  return { x, y, a }\n}";
    let p = program(src);
    let mut outcomes = Vec::new();
    for pause_at in [None, Some(0), Some(1)] {
        match run_pausing(&p, pause_at) {
            (Step::Done(v), _) => outcomes.push(v),
            (other, _) => panic!("paused at {pause_at:?}: {other:?}"),
        }
    }
    assert_eq!(
        outcomes[0].to_json().unwrap(),
        serde_json::json!({ "x": "bxans-x!7", "y": "byans-y!7", "a": 2 })
    );
    assert!(outcomes.iter().all(|v| *v == outcomes[0]), "{outcomes:?}");
}
