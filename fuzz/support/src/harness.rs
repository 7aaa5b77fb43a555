//! The code paths the fuzz targets exercise, shared with the stable-toolchain replay test
//! (`tests/security_fuzz_corpus.rs`, through this crate), so a corpus file runs the
//! same way under `cargo fuzz` and under `cargo test`.
//!
//! Invariants checked after every slice: fuel used never exceeds the budget; the heap counter
//! never exceeds the ceiling (a refused allocation is not counted, decision 16); every run ends
//! within a bounded number of slices. A panic anywhere is a finding.
#![allow(dead_code)]

use ajs_bytecode::Program;
use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{AtomSpec, JsValue, Step, Vm, VmOptions};

/// Fuel budget of a fuzzed run, in milli-fuel (100 fuel).
pub const FUEL_MILLI: u64 = 100_000;
/// Heap ceiling of a fuzzed run.
pub const MAX_HEAP: usize = 1 << 20;
/// Milli-fuel per slice.
pub const SLICE: u64 = 5_000;
/// Most slices a run may take: the budget divided by the slice, plus host calls and slack.
pub const MAX_SLICES: usize = 10_000;
/// Largest source the text targets compile.
pub const MAX_SOURCE: usize = 8192;

/// How a fuzzed run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum End {
    /// Refused before running (did not load, verify or compile).
    Refused,
    /// Ran to a value.
    Done,
    /// Ran to an error.
    Failed,
}

fn vm_options() -> VmOptions {
    let mut atoms = std::collections::HashMap::new();
    atoms.insert(
        "httpFetch".to_string(),
        AtomSpec {
            cost: 5_000,
            quota: Some(3),
        },
    );
    VmOptions {
        fuel: FUEL_MILLI,
        max_heap_bytes: MAX_HEAP,
        atoms,
        random_seed: 7,
        ..VmOptions::default()
    }
}

/// The host's answer to call number `n`: an error, a big string or a nested value in turn.
fn hostile_answer(n: u32) -> Result<JsValue, String> {
    match n % 3 {
        0 => Err("no host".to_string()),
        1 => Ok(JsValue::String("x".repeat(4096))),
        _ => {
            let mut v = JsValue::Number(1.0);
            for _ in 0..50 {
                v = JsValue::Array(vec![v]);
            }
            Ok(v)
        }
    }
}

/// Drives a VM to its end, answering host calls with a hostile mix (an error, a big string, a
/// nested value), and asserting the invariants after every slice.
pub fn drive(mut vm: Vm) -> End {
    let mut host_calls = 0u32;
    for _ in 0..MAX_SLICES {
        let step = vm.run(SLICE);
        assert!(
            vm.fuel_used_milli() <= FUEL_MILLI,
            "fuel used {} over the budget {FUEL_MILLI}",
            vm.fuel_used_milli()
        );
        assert!(
            vm.heap_bytes() <= MAX_HEAP,
            "heap counter {} over the ceiling {MAX_HEAP}",
            vm.heap_bytes()
        );
        match step {
            Step::Done(_) => return End::Done,
            Step::Failed(_) => return End::Failed,
            Step::Host(_) => {
                host_calls += 1;
                if vm.resume(hostile_answer(host_calls)).is_err() {
                    return End::Failed;
                }
            }
            // `parallel(...)` waits for its queued calls: settle every one
            Step::Blocked => {
                let pending = vm.pending_calls();
                if pending.is_empty() {
                    return End::Failed;
                }
                for p in pending {
                    host_calls += 1;
                    if vm.settle(p.id, hostile_answer(host_calls)).is_err() {
                        return End::Failed;
                    }
                }
            }
            Step::Yield => {}
        }
    }
    panic!("the run did not end within {MAX_SLICES} slices of a {FUEL_MILLI}-milli-fuel budget");
}

/// Arbitrary bytes → load → verify → run (target `load_run`).
pub fn load_run(data: &[u8]) -> End {
    let Ok(program) = Program::from_bytes(data) else {
        return End::Refused;
    };
    let args = [JsValue::Number(1.0), JsValue::String("x".into())];
    let Ok(vm) = Vm::new(program, &args, vm_options()) else {
        return End::Refused;
    };
    drive(vm)
}

/// Compiles `src` in `mode` (context names `a`, `b`, `s`, `xs`), verifies and runs it.
pub fn compile_run_mode(src: &str, mode: Mode) -> End {
    if src.len() > MAX_SOURCE {
        return End::Refused;
    }
    let externals: Vec<String> = ["a", "b", "s", "xs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let atoms = vec!["httpFetch".to_string()];
    let opts = CompileOptions {
        mode,
        externals: if mode == Mode::Agent { &[] } else { &externals },
        atoms: &atoms,
        source_name: "<source>",
    };
    let Ok(program) = compile(src, &opts) else {
        return End::Refused;
    };
    // Compiler output always verifies; a refusal here is a compiler bug.
    let program = program.verify().expect("compiler output verifies");
    // Round-trip through the artifact format too.
    let bytes = program.to_bytes();
    let program = Program::from_bytes(&bytes).expect("an artifact the compiler wrote loads");
    let wanted = program.functions[program.entry as usize].params.clone();
    let args: Vec<JsValue> = wanted
        .iter()
        .map(|name| match name.as_str() {
            "a" => JsValue::Number(1.0),
            "b" => JsValue::Number(2.0),
            "s" => JsValue::String("hello world".into()),
            "xs" => JsValue::Array((0..20).map(|i| JsValue::Number(i as f64)).collect()),
            _ => JsValue::Undefined,
        })
        .collect();
    let Ok(vm) = Vm::new(program, &args, vm_options()) else {
        return End::Refused;
    };
    drive(vm)
}

/// Arbitrary text → compile (Eval rules, then function-body rules) → run (target `compile_run`).
pub fn compile_run(data: &[u8]) -> End {
    let Ok(src) = std::str::from_utf8(data) else {
        return End::Refused;
    };
    let a = compile_run_mode(src, Mode::Eval);
    let b = compile_run_mode(src, Mode::FunctionBody);
    a.max(b)
}
