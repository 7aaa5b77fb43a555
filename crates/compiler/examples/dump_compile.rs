//! Compiles every case of a file (written by a script: mode byte, externals, source, all
//! length-prefixed) and prints, per case, the error or the whole program (its `Debug` form, the
//! verification verdict and the serialized artifact's fingerprint): the output of two builds of
//! the compiler can be compared byte for byte.
//!
//! `cargo run --release -p ajs-compiler --example dump_compile CASES > OUT`

#![forbid(unsafe_code)]

use std::io::Write;

use ajs_compiler::{compile, CompileOptions, Mode};

fn main() {
    let path = std::env::args().nth(1).expect("a cases file");
    let data = std::fs::read(path).expect("readable cases");
    let mut at = 0usize;
    let u32_at = |at: &mut usize| {
        let v = u32::from_le_bytes(data[*at..*at + 4].try_into().unwrap()) as usize;
        *at += 4;
        v
    };
    let atoms = ["httpFetch".to_string(), "llmPredict".to_string()];
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    // with a second argument, the verified artifacts are also written there (length-prefixed)
    let mut artifacts = std::env::args()
        .nth(2)
        .map(|p| std::io::BufWriter::new(std::fs::File::create(p).expect("writable")));
    let mut n = 0;
    while at < data.len() {
        let mode = match data[at] {
            0 => Mode::Eval,
            1 => Mode::FunctionBody,
            _ => Mode::Agent,
        };
        at += 1;
        let next = u32_at(&mut at);
        let mut ext = Vec::with_capacity(next);
        for _ in 0..next {
            let len = u32_at(&mut at);
            ext.push(String::from_utf8_lossy(&data[at..at + len]).into_owned());
            at += len;
        }
        let len = u32_at(&mut at);
        let src = String::from_utf8_lossy(&data[at..at + len]).into_owned();
        at += len;
        let opts = CompileOptions {
            mode,
            externals: &ext,
            atoms: &atoms,
            source_name: "<case>",
        };
        match compile(&src, &opts) {
            Err(e) => writeln!(out, "#{n} ERR {e:?}").unwrap(),
            Ok(p) => {
                writeln!(out, "#{n} OK {p:?}").unwrap();
                match p.verify() {
                    Ok(v) => {
                        let b = v.to_bytes();
                        let fp = ajs_bytecode::program::artifact_fingerprint(&b);
                        if let Some(w) = artifacts.as_mut() {
                            w.write_all(&(b.len() as u32).to_le_bytes()).unwrap();
                            w.write_all(&b).unwrap();
                        }
                        writeln!(out, "  verified {} bytes {fp:016x}", b.len()).unwrap();
                    }
                    Err(e) => writeln!(out, "  VERIFY ERR {e:?}").unwrap(),
                }
            }
        }
        n += 1;
    }
    eprintln!("{n} cases");
}
