//! Arbitrary text → compile (Eval rules) → verify → run under a small budget. No panic anywhere.
#![no_main]

use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{JsValue, Step, Vm, VmOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    if src.len() > 8192 {
        return;
    }
    let externals = vec!["a".to_string(), "b".to_string()];
    let atoms = vec!["httpFetch".to_string()];
    let opts = CompileOptions {
        mode: Mode::Eval,
        externals: &externals,
        atoms: &atoms,
        source_name: "<source>",
    };
    let Ok(program) = compile(src, &opts) else {
        return;
    };
    let program = program.verify().expect("compiler output always verifies");
    let mut atoms = std::collections::HashMap::new();
    atoms.insert(
        "httpFetch".to_string(),
        ajs_vm::AtomSpec {
            cost: 5000,
            quota: None,
        },
    );
    let vm_opts = VmOptions {
        fuel: 100_000,
        max_heap_bytes: 1 << 20,
        atoms,
        ..VmOptions::default()
    };
    let Ok(mut vm) = Vm::new(
        program,
        &[JsValue::Number(1.0), JsValue::Number(2.0)],
        vm_opts,
    ) else {
        return;
    };
    for _ in 0..10_000 {
        match vm.run(5_000) {
            Step::Done(_) | Step::Failed(_) => return,
            Step::Host(_) => {
                if vm.resume(Err("no host".into())).is_err() {
                    return;
                }
            }
            Step::Yield => {}
        }
    }
    panic!("did not end within budget");
});
