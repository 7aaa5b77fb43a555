//! Memory held by 10,000 runs suspended on a host call: each `Vm` has run an agent-like program
//! (a few locals, an array and an object) up to its `httpFetch` call and waits there. The growth
//! of the process's resident memory (`VmRSS`, Linux) while they are made is what they hold, to
//! the page. Prints one line; no criterion.
//!
//! Run: `cd benches && cargo bench --bench suspended`.

#![forbid(unsafe_code)]

use std::collections::HashMap;

use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{AtomSpec, JsValue, Step, Vm, VmOptions};

/// The process's resident memory in bytes (`VmRSS` of /proc/self/status), 0 where there is none.
fn resident_bytes() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

const RUNS: usize = 10_000;
const SOURCE: &str = "let user = { id: 42, name: 'Ada', tags: ['a', 'b', 'c'] }\n\
let urls = ['https://example.com/a', 'https://example.com/b']\n\
let page = httpFetch({ url: urls[0] })\n\
return { user: user, page: page }";

fn main() {
    let atoms = vec!["httpFetch".to_string()];
    let program = compile(
        SOURCE,
        &CompileOptions {
            mode: Mode::FunctionBody,
            externals: &[],
            atoms: &atoms,
            source_name: "<source>",
        },
    )
    .expect("compiles")
    .verify()
    .expect("verifies");
    let opts = VmOptions {
        atoms: HashMap::from([(
            "httpFetch".to_string(),
            AtomSpec {
                cost: 5000,
                quota: None,
            },
        )]),
        ..VmOptions::default()
    };
    let before = resident_bytes();
    let mut vms = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let mut vm = Vm::new(program.clone(), &[], opts.clone()).expect("vm");
        match vm.run(u64::MAX) {
            Step::Host(call) => assert_eq!(call.atom, "httpFetch"),
            other => panic!("expected a host call, got {other:?}"),
        }
        vms.push(vm);
    }
    let held = resident_bytes().saturating_sub(before);
    println!(
        "{RUNS} suspended runs hold {held} bytes ({:.1} MiB, {} bytes per run; size_of::<Vm>() = {})",
        held as f64 / (1 << 20) as f64,
        held / RUNS,
        std::mem::size_of::<Vm>()
    );
    // they can all still finish
    for vm in &mut vms {
        vm.resume(Ok(JsValue::String("ok".into()))).expect("resume");
        assert!(matches!(vm.run(u64::MAX), Step::Done(_)));
    }
}
