//! The stable-toolchain path of the fuzz targets: every file of `fuzz/corpus/<target>/` replayed
//! through the same harness the targets use (the crate `ajs-fuzz-support`, fuzz/support), so CI
//! replays the corpora without nightly. The `generated` corpus holds `arbitrary` input bytes (decoding
//! them needs the `arbitrary` crate, which only the fuzz workspace has); here those bytes go
//! through the text and artifact paths, and the generator's printer is exercised on seeded
//! programs (`ast::Program::random`).

use ajs_fuzz_support::{ast, harness};

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn load_run_corpus_replays() {
    let files = corpus("load_run");
    assert!(!files.is_empty());
    let mut ran = 0;
    for (p, bytes) in files {
        let end = harness::load_run(&bytes);
        if end != harness::End::Refused {
            ran += 1;
        }
        eprintln!("{}: {end:?}", p.display());
    }
    assert!(
        ran > 0,
        "no load_run seed loads: regenerate them after a format change"
    );
}

#[test]
fn compile_run_corpus_replays() {
    let files = corpus("compile_run");
    assert!(!files.is_empty());
    for (p, bytes) in files {
        eprintln!("{}: {:?}", p.display(), harness::compile_run(&bytes));
    }
}

#[test]
fn generated_corpus_replays() {
    for (p, bytes) in corpus("generated") {
        harness::load_run(&bytes);
        harness::compile_run(&bytes);
        eprintln!("{}: ok", p.display());
    }
}

#[test]
fn generator_programs_run_within_budget() {
    let n: u64 = std::env::var("AJS_GENERATED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let mut ends = std::collections::BTreeMap::new();
    for seed in 0..n {
        let program = ast::Program::random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) + 1);
        let src = program.to_source();
        let mode = if program.as_agent {
            ajs_compiler::Mode::Agent
        } else {
            ajs_compiler::Mode::FunctionBody
        };
        let end = std::panic::catch_unwind(|| harness::compile_run_mode(&src, mode))
            .unwrap_or_else(|_| panic!("seed {seed} panicked:\n{src}"));
        *ends.entry(end).or_insert(0) += 1;
    }
    eprintln!("generated programs: {ends:?}");
    assert!(
        ends.get(&harness::End::Done).copied().unwrap_or(0) > 0,
        "{ends:?}"
    );
}
