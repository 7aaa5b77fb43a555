//! Times compiling `benches/programs/agent_8k.js` as an agent, the way `Runner::compile_agent`
//! does (compile, then verify), and prints the median time per compile, with and without the
//! verification.
//!
//! `cargo run --release -p ajs-compiler --example compile_8k [N]` (N compiles, default 2000).

#![forbid(unsafe_code)]

use std::time::Instant;

use ajs_compiler::{compile, CompileOptions, Mode};

const AGENT_8K: &str = include_str!("../../../benches/programs/agent_8k.js");

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    // the atoms `Options::default()` offers
    let atoms = ["httpFetch".to_string(), "llmPredict".to_string()];
    let opts = CompileOptions {
        mode: Mode::Agent,
        externals: &[],
        atoms: &atoms,
        source_name: "<source>",
    };
    let mut times = Vec::with_capacity(n);
    let mut verified = Vec::with_capacity(n);
    let mut size = 0;
    for _ in 0..n.max(1) {
        let t = Instant::now();
        let p = compile(std::hint::black_box(AGENT_8K), &opts).expect("the agent compiles");
        times.push(t.elapsed());
        let p = p.verify().expect("the agent verifies");
        verified.push(t.elapsed());
        size = p.functions.iter().map(|f| f.code.len()).sum();
        std::hint::black_box(p);
    }
    let us = |v: &mut Vec<std::time::Duration>| {
        v.sort();
        (v[v.len() / 2].as_secs_f64() * 1e6, v[0].as_secs_f64() * 1e6)
    };
    // oxc's parse alone, on a reused arena, for comparison
    let mut parse = Vec::with_capacity(n);
    // (with a plain destructuring signature: AJS's typed-by-example one is not JavaScript)
    let js: String = AGENT_8K
        .lines()
        .map(|l| {
            if l.starts_with("function main(") {
                "function main({ orders, history, coupons }) {"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut arena = oxc_allocator::Allocator::default();
    for _ in 0..n.max(1) {
        arena.reset();
        let t = Instant::now();
        let ret = oxc_parser::Parser::new(
            &arena,
            std::hint::black_box(js.as_str()),
            oxc_span::SourceType::script(),
        )
        .parse();
        parse.push(t.elapsed());
        assert!(ret.diagnostics.is_empty());
        std::hint::black_box(ret.program);
    }
    let (pmedian, _) = us(&mut parse);
    println!("oxc parse alone: median {pmedian:.1} µs");
    let (median, min) = us(&mut times);
    let (vmedian, vmin) = us(&mut verified);
    println!(
        "{} compiles of {} bytes ({size} instructions): compile median {median:.1} µs \
         (min {min:.1}), compile+verify median {vmedian:.1} µs (min {vmin:.1})",
        times.len(),
        AGENT_8K.len(),
    );
}
