//! Memory held by 10,000 runs suspended on a host call: each `Vm` has run an agent-like program
//! (a few locals, an array and an object) up to its `httpFetch` call and waits there. A counting
//! allocator reports the bytes allocated and still live. Prints one line; no criterion.
//!
//! Run: `cd benches && cargo bench --bench suspended`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{AtomSpec, JsValue, Step, Vm, VmOptions};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

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
    let before = LIVE.load(Ordering::Relaxed);
    let mut vms = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let mut vm = Vm::new(program.clone(), &[], opts.clone()).expect("vm");
        match vm.run(u64::MAX) {
            Step::Host(call) => assert_eq!(call.atom, "httpFetch"),
            other => panic!("expected a host call, got {other:?}"),
        }
        vms.push(vm);
    }
    let held = LIVE.load(Ordering::Relaxed) - before;
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
