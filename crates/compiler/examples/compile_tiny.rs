//! Compiles a tiny Eval snippet many times (the fixed cost of a compile): `cargo run --release
//! -p ajs-compiler --example compile_tiny [N] [SOURCE] [verify]` prints the median time per
//! compile (with `verify`, each program is also verified, outside the timed part).

#![forbid(unsafe_code)]

use std::time::Instant;

use ajs_compiler::{compile, CompileOptions, Mode};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20000);
    let src = args.next().unwrap_or_else(|| "a + b".to_string());
    let verify = args.next().is_some_and(|a| a == "verify");
    let externals = ["a".to_string(), "b".to_string()];
    let opts = CompileOptions {
        mode: Mode::Eval,
        externals: &externals,
        atoms: &[],
        source_name: "<source>",
    };
    let mut times = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        let t = Instant::now();
        let p = compile(std::hint::black_box(&src), &opts).expect("the snippet compiles");
        times.push(t.elapsed());
        if verify {
            let v = p.verify().expect("the snippet verifies");
            std::hint::black_box(v);
        } else {
            std::hint::black_box(p);
        }
    }
    times.sort();
    println!(
        "{} compiles of {src:?}: median {:.2} µs (min {:.2})",
        times.len(),
        times[times.len() / 2].as_secs_f64() * 1e6,
        times[0].as_secs_f64() * 1e6
    );
}
