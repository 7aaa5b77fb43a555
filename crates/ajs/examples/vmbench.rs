//! VM execution timings for the benchmark programs of `benches/src/lib.rs` (copied here: the
//! benches are their own workspace). For each program it prints the median wall time of a run
//! through the facade (source to result, the way `benches/benches/peers.rs` measures ajs), the
//! median of the VM alone (`Vm::new` + `run` on a program compiled once), and the fuel used.
//! The last two programs are not peers rows: `records` reads properties and tests `typeof` over
//! records, as agents do; `template concat` is the string concat row with a template literal.
//!
//! Run: `cargo run --release -p ajs --example vmbench` (all programs), or with a program-name
//! filter and an iteration count, `vmbench fib 20`. With `--vm-only` only the VM part runs (for
//! `valgrind --tool=callgrind`); `--disasm` prints each program's bytecode.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::time::Instant;

use ajs::{Eval, JsValue, Options, Runner};
use ajs_bytecode::VerifiedProgram;
use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{Step, Vm, VmOptions};
use serde_json::json;

struct Program {
    name: &'static str,
    src: &'static str,
    agent: bool,
    expect: f64,
}

const PROGRAMS: &[Program] = &[
    Program {
        name: "while loop 1e6",
        src: "let i = 0\nlet t = 0\nwhile (i < 1000000) { t = t + i\n i = i + 1 }\nreturn t",
        agent: false,
        expect: 499_999_500_000.0,
    },
    Program {
        name: "fib(25)",
        src: "function fib(n) {\n  if (n < 2) { return n }\n  return fib(n - 1) + fib(n - 2)\n}\nfunction main() {\n  return { v: fib(25) }\n}",
        agent: true,
        expect: 75025.0,
    },
    Program {
        name: "array 10k filter/map/reduce",
        src: "let xs = []\nlet i = 0\nwhile (i < 10000) { xs.push(i)\n i = i + 1 }\nreturn xs.filter(x => x % 2 === 0).map(x => x * 3).reduce((s, x) => s + x, 0)",
        agent: false,
        expect: 74_985_000.0,
    },
    Program {
        name: "string concat 10k",
        src: "let s = ''\nlet i = 0\nwhile (i < 10000) { s = s + 'abc'\n i = i + 1 }\nreturn s.length",
        agent: false,
        expect: 30000.0,
    },
    Program {
        name: "string concat 'x' + i 10k",
        src: "let s = ''\nlet i = 0\nwhile (i < 10000) { s = s + 'x' + i\n i = i + 1 }\nreturn s.length",
        agent: false,
        expect: 48890.0,
    },
    Program {
        name: "JSON round trip 1k objects",
        src: "let xs = []\nlet i = 0\nwhile (i < 1000) { xs.push({ id: i, name: 'item' + i, tags: ['a', 'b'], ok: i % 2 === 0 })\n i = i + 1 }\nlet back = JSON.parse(JSON.stringify(xs))\nreturn back.length + back[999].id",
        agent: false,
        expect: 1999.0,
    },
    // not a peers row: property reads and `typeof` tests over records, as agents do
    Program {
        name: "records 1k props/typeof",
        src: "let xs = []\nlet i = 0\nwhile (i < 1000) { xs.push({ id: i, name: 'n' + i, price: i * 2, ok: i % 2 === 0 })\n i = i + 1 }\nlet total = 0\nlet j = 0\nwhile (j < 1000) { const x = xs[j]\n if (typeof x.price === 'number' && x.ok) { total = total + x.price + x.id }\n j = j + 1 }\nreturn total",
        agent: false,
        expect: 748500.0,
    },
    // not a peers row: the string concat row written with a template literal
    Program {
        name: "template concat 10k",
        src: "let s = ''\nlet i = 0\nwhile (i < 10000) { s = `${s}abc`\n i = i + 1 }\nreturn s.length",
        agent: false,
        expect: 30000.0,
    },
];

/// Fuel given to every run (as in the peers bench).
const FUEL: f64 = 1e7;

fn number(r: &JsValue) -> f64 {
    match r {
        JsValue::Number(n) => *n,
        JsValue::Object(o) => match o.first() {
            Some((_, JsValue::Number(n))) => *n,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

fn facade(rt: &tokio::runtime::Runtime, p: &Program) -> (f64, f64) {
    let opts = Options {
        fuel: FUEL,
        ..Options::default()
    };
    let out = if p.agent {
        rt.block_on(Runner::default().run_agent(p.src, &json!({}), &opts))
    } else {
        rt.block_on(Eval::new(p.src).options(opts).run())
    };
    assert!(out.error.is_none(), "{}: {:?}", p.name, out.error);
    (number(&out.result), out.fuel_used)
}

fn vm_only(program: &VerifiedProgram, p: &Program) -> (f64, f64) {
    let mut vm = Vm::new(
        program.clone(),
        &[],
        VmOptions {
            fuel: (FUEL * 1000.0) as u64,
            atoms: HashMap::new(),
            ..VmOptions::default()
        },
    )
    .expect("vm");
    let v = match vm.run(u64::MAX) {
        Step::Done(v) => number(&v),
        other => panic!("{}: {other:?}", p.name),
    };
    (v, vm.fuel_used())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let vm_only_flag = args.iter().any(|a| a == "--vm-only");
    let rest: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let filter = rest.first().map(|s| s.as_str()).unwrap_or("");
    let iters: usize = rest.get(1).and_then(|s| s.parse().ok()).unwrap_or(31);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    for p in PROGRAMS.iter().filter(|p| p.name.contains(filter)) {
        let mode = if p.agent { Mode::Agent } else { Mode::Eval };
        let program = compile(
            p.src,
            &CompileOptions {
                mode,
                externals: &[],
                atoms: &[],
                source_name: "<source>",
            },
        )
        .expect("compiles");
        if args.iter().any(|a| a == "--disasm") {
            print!("{}", program.disassemble());
        }
        let program = program.verify().expect("verifies");
        let (v, fuel) = vm_only(&program, p);
        assert_eq!(v, p.expect, "{}", p.name);
        let mut vm_times = Vec::with_capacity(iters);
        for _ in 0..iters {
            let t = Instant::now();
            std::hint::black_box(vm_only(&program, p));
            vm_times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        if vm_only_flag {
            println!("{:<30} vm {:8.3} ms  fuel {fuel}", p.name, median(vm_times));
            continue;
        }
        let (v, ffuel) = facade(&rt, p);
        assert_eq!(v, p.expect, "{}", p.name);
        let mut times = Vec::with_capacity(iters);
        for _ in 0..iters {
            let t = Instant::now();
            std::hint::black_box(facade(&rt, p));
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        println!(
            "{:<30} facade {:8.3} ms  vm {:8.3} ms  fuel {ffuel}",
            p.name,
            median(times),
            median(vm_times)
        );
    }
}
