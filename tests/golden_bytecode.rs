//! The golden bytecode corpus: every `tests/golden/bytecode/NAME.ajs` compiles to exactly the
//! program its `NAME.dis` lists (constants, atoms, functions, every instruction with its operands
//! and source position, the agent signature, the verifier's verdict), or fails to compile with
//! exactly the message of its `NAME.err`. Any change to code generation shows up as a reviewed
//! diff. Regenerate with `AJS_BLESS=1 cargo test --release -p ajs --test ajs_tests golden_bytecode`.
//!
//! A source's first line is its header, `// golden {"mode": "eval"|"function"|"agent",
//! "externals": [names], "atoms": [extra atoms]}`; the rest is compiled as the case runner
//! would (`tests/golden/extract_bytecode.py` writes sources from case files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ajs_compiler::{compile, CompileOptions, Mode};

/// Fewest compiled programs the corpus holds: a corpus emptied by accident fails.
const MIN_PROGRAMS: usize = 300;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/bytecode")
}

/// The expected file's extension and text for one source.
fn render(name: &str, text: &str) -> Result<(&'static str, String), String> {
    let (header, source) = text
        .split_once('\n')
        .ok_or_else(|| format!("{name}.ajs: no header line"))?;
    let json = header
        .strip_prefix("// golden ")
        .ok_or_else(|| format!("{name}.ajs: the first line must be `// golden {{...}}`"))?;
    let h: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("{name}.ajs: bad header: {e}"))?;
    let list = |key: &str| -> Vec<String> {
        h[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mode = match h["mode"].as_str() {
        Some("eval") => Mode::Eval,
        Some("function") => Mode::FunctionBody,
        Some("agent") => Mode::Agent,
        other => return Err(format!("{name}.ajs: unknown mode {other:?}")),
    };
    let externals = list("externals");
    let mut atoms = vec!["httpFetch".to_string(), "llmPredict".to_string()];
    atoms.extend(list("atoms"));
    let opts = CompileOptions {
        mode,
        externals: &externals,
        atoms: &atoms,
        source_name: "<source>",
    };
    Ok(match compile(source, &opts) {
        Err(e) => ("err", format!("{e}\n")),
        Ok(p) => {
            let mut s = String::new();
            let listing = p.disassemble();
            if let Some(sig) = &p.signature {
                s.push_str(&format!("; signature {sig:?}\n"));
            }
            match p.verify() {
                Ok(_) => s.push_str("; verified\n"),
                Err(e) => s.push_str(&format!("; VERIFY ERROR {e}\n")),
            }
            s.push_str(&listing);
            ("dis", s)
        }
    })
}

/// The first lines where `want` and `got` differ, for a failure message.
fn short_diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let first = w.iter().zip(&g).take_while(|(a, b)| a == b).count();
    let mut out = String::new();
    for i in first..(first + 3).min(w.len().max(g.len())) {
        out.push_str(&format!(
            "    line {}: want {:?}\n    line {}:  got {:?}\n",
            i + 1,
            w.get(i).copied().unwrap_or("<end>"),
            i + 1,
            g.get(i).copied().unwrap_or("<end>")
        ));
    }
    out
}

#[test]
fn golden_bytecode_matches() {
    let dir = dir();
    let bless = std::env::var_os("AJS_BLESS").is_some();
    // every file by stem: the extensions present
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("tests/golden/bytecode exists") {
        let path = entry.expect("readable directory").path();
        let (Some(stem), Some(ext)) = (path.file_stem(), path.extension()) else {
            continue;
        };
        files
            .entry(stem.to_string_lossy().into_owned())
            .or_default()
            .push(ext.to_string_lossy().into_owned());
    }
    let mut problems = Vec::new();
    let mut compiled = 0;
    for (name, exts) in &files {
        if !exts.iter().any(|e| e == "ajs") {
            if bless {
                for e in exts {
                    std::fs::remove_file(dir.join(format!("{name}.{e}"))).expect("remove orphan");
                }
            } else {
                problems.push(format!("{name}: .{} without a .ajs", exts.join(", .")));
            }
            continue;
        }
        let text = std::fs::read_to_string(dir.join(format!("{name}.ajs"))).expect("UTF-8 .ajs");
        let (ext, got) = match render(name, &text) {
            Ok(r) => r,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        compiled += usize::from(ext == "dis");
        let path = dir.join(format!("{name}.{ext}"));
        let other = if ext == "dis" { "err" } else { "dis" };
        if bless {
            std::fs::write(&path, &got).expect("write golden file");
            let _ = std::fs::remove_file(dir.join(format!("{name}.{other}")));
            continue;
        }
        if exts.iter().any(|e| e == other) {
            problems.push(format!(
                "{name}: has a .{other}, but it now gives a .{ext}:\n{}",
                short_diff(
                    &std::fs::read_to_string(dir.join(format!("{name}.{other}")))
                        .unwrap_or_default(),
                    &got
                )
            ));
            continue;
        }
        match std::fs::read_to_string(&path) {
            Err(_) => problems.push(format!("{name}.ajs: no .{ext} beside it")),
            Ok(want) if want != got => problems.push(format!(
                "{name}.{ext} differs:\n{}",
                short_diff(&want, &got)
            )),
            Ok(_) => {}
        }
    }
    assert!(
        compiled >= MIN_PROGRAMS,
        "only {compiled} golden programs compile; the corpus must hold at least {MIN_PROGRAMS}"
    );
    assert!(
        problems.is_empty(),
        "{} golden bytecode file(s) differ; review, then rerun with AJS_BLESS=1 to accept:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
