//! Opcode census: which instructions the benchmark programs (and the 8 KB agent's entry run on
//! its example input) actually execute, counted from the VM's trace. Run:
//! `cd benches && cargo run --release --example opcount`.

use std::collections::{BTreeMap, HashMap};

use ajs_benches::PROGRAMS;
use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{Step, Vm, VmOptions};

fn census(name: &str, source: &str, mode: Mode, totals: &mut BTreeMap<&'static str, u64>) {
    // Scale the loops down: the trace holds one record per instruction.
    let source = source
        .replace("1000000", "10000")
        .replace("fib(25)", "fib(15)");
    let program = compile(
        &source,
        &CompileOptions {
            mode,
            externals: &[],
            atoms: &[],
            source_name: "<source>",
        },
    )
    .expect("compiles")
    .verify()
    .expect("verifies");
    let mut vm = Vm::new(
        program,
        &[],
        VmOptions {
            fuel: u64::MAX / 2,
            atoms: HashMap::new(),
            ..VmOptions::default()
        },
    )
    .expect("vm");
    vm.set_trace(Some(usize::MAX));
    let step = vm.run(u64::MAX);
    assert!(matches!(step, Step::Done(_)), "{name}: {step:?}");
    let (steps, _) = vm.take_trace();
    let mut counts: HashMap<&'static str, u64> = HashMap::new();
    for s in &steps {
        *counts.entry(s.op).or_default() += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1));
    println!("{name} ({} instructions):", steps.len());
    for (op, n) in &v {
        println!(
            "  {op:<18}{n:>9}  {:5.1}%",
            *n as f64 * 100.0 / steps.len() as f64
        );
        *totals.entry(op).or_default() += n;
    }
}

fn main() {
    let mut totals = BTreeMap::new();
    for p in PROGRAMS {
        let mode = if p.agent { Mode::Agent } else { Mode::Eval };
        census(p.name, p.ajs, mode, &mut totals);
    }
    census(
        "agent 8 KB",
        ajs_benches::AGENT_8K,
        Mode::Agent,
        &mut totals,
    );
    let all: u64 = totals.values().sum();
    let mut v: Vec<_> = totals.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1));
    println!("all programs ({all} instructions):");
    for (op, n) in v {
        println!("  {op:<18}{n:>9}  {:5.1}%", n as f64 * 100.0 / all as f64);
    }
}
