//! Arbitrary bytes → load/verify → run under a small budget. Invariants: no panic; fuel and heap
//! stay within their limits; the run ends within a bounded number of slices.
#![no_main]

use ajs_bytecode::Program;
use ajs_vm::{JsValue, Step, Vm, VmOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(program) = Program::from_bytes(data) else {
        return;
    };
    let opts = VmOptions {
        fuel: 100_000,
        max_heap_bytes: 1 << 20,
        ..VmOptions::default()
    };
    let Ok(mut vm) = Vm::new(
        program,
        &[JsValue::Number(1.0), JsValue::String("x".into())],
        opts,
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
        assert!(vm.fuel_used_milli() <= 100_000);
        assert!(vm.heap_bytes() <= 1 << 20);
    }
    panic!("did not end within budget");
});
