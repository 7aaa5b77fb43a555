//! Compiles real programs, mutates each artifact at random (seeded) and loads + runs the result:
//! every mutant is refused by the verifier or runs to an end within its budget. Never a panic.

use ajs_bytecode::Program;
use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{JsValue, Step, Vm, VmOptions};

const PROGRAMS: &[&str] = &[
    "a + b",
    "let i = 0\nwhile (i < n) { i = i + 1 }\nreturn i",
    "let xs = [1, 2, 3]\nxs.push(4)\nreturn { total: xs.length, first: xs[0], s: `v=${xs[1]}` }",
    "try { Error('x') } catch (e) { return e + '!' }",
    "let o = { a: 1, b: { c: [1, 2] } }\nreturn o.b.c[1] + Math.max(a, b, 3)",
    "let s = ''\nlet i = 0\nwhile (i < 20) { s = s + i\n i++ }\nreturn s.length > 3 ? s : null",
    "let r = 0\nif (a > b) { r = a } else if (a == b) { r = 0 } else { r = b }\nreturn typeof r",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn artifacts() -> Vec<Vec<u8>> {
    let externals: Vec<String> = ["a", "b", "n"].iter().map(|s| s.to_string()).collect();
    PROGRAMS
        .iter()
        .map(|src| {
            let p = compile(
                src,
                &CompileOptions {
                    mode: Mode::Eval,
                    externals: &externals,
                    atoms: &[],
                    source_name: "<source>",
                },
            )
            .unwrap_or_else(|e| panic!("{src}: {e}"));
            p.to_bytes()
        })
        .collect()
}

fn run_bytes(bytes: &[u8]) -> &'static str {
    let Ok(program) = Program::from_bytes(bytes) else {
        return "refused";
    };
    let args = [
        JsValue::Number(3.0),
        JsValue::Number(4.0),
        JsValue::Number(50.0),
    ];
    let opts = VmOptions {
        fuel: 200_000,
        max_heap_bytes: 1 << 20,
        ..VmOptions::default()
    };
    let Ok(mut vm) = Vm::new(program, &args, opts) else {
        return "refused";
    };
    for _ in 0..1000 {
        match vm.run(10_000) {
            Step::Done(_) => return "done",
            Step::Failed(_) => return "failed",
            Step::Host(_) => {
                if vm.resume(Err("no host".into())).is_err() {
                    return "failed";
                }
            }
            Step::Yield | Step::Blocked => {}
        }
        assert!(vm.fuel_used_milli() <= 200_000, "fuel over budget");
        assert!(vm.heap_bytes() <= 1 << 20, "heap over ceiling");
    }
    panic!("a mutant ran more than 1000 slices on a 200-fuel budget");
}

#[test]
fn originals_run() {
    for a in artifacts() {
        assert_eq!(run_bytes(&a), "done");
    }
}

#[test]
fn mutated_artifacts_are_refused_or_run_within_budget() {
    let seed = std::env::var("AJS_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_1234_u64);
    let rounds: usize = std::env::var("AJS_MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000);
    let mut rng = Rng(seed | 1);
    let originals = artifacts();
    let mut counts = std::collections::BTreeMap::new();
    for round in 0..rounds {
        let mut bytes = originals[rng.below(originals.len())].clone();
        let edits = 1 + rng.below(4);
        for _ in 0..edits {
            let len = bytes.len();
            match rng.below(5) {
                0 | 1 => {
                    // skip the header most of the time, so mutants reach the verifier
                    let at = if len > 16 && rng.below(10) > 0 {
                        16 + rng.below(len - 16)
                    } else {
                        rng.below(len)
                    };
                    bytes[at] = rng.next() as u8;
                }
                2 => {
                    let at = 16.min(len) + rng.below(len - 16.min(len) + 1);
                    bytes.insert(at, rng.next() as u8);
                }
                3 if len > 17 => {
                    bytes.remove(16 + rng.below(len - 16));
                }
                _ => {
                    let at = rng.below(len);
                    bytes[at] ^= 1 << rng.below(8);
                }
            }
        }
        let outcome = std::panic::catch_unwind(|| run_bytes(&bytes));
        match outcome {
            Ok(kind) => *counts.entry(kind).or_insert(0) += 1,
            Err(_) => panic!("mutant {round} (seed {seed}) panicked: {bytes:?}"),
        }
    }
    eprintln!("mutation outcomes: {counts:?}");
    assert!(counts.get("refused").copied().unwrap_or(0) > 0);
}
