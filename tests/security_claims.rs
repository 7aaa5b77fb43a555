//! A claim without a test is not made: every `…tests/<file>.rs::<name>` named in docs/SECURITY.md
//! must exist as a `#[test] fn <name>` in that file, and the file must be a module of a test
//! binary (so the test runs); and every scenario 1–52 of reference §9 has a row.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether `file` (a path from the root) is compiled into a test binary: a module named in its
/// directory's `main.rs` (a test binary's root), or in its parent module's file.
fn compiled_as_test_module(file: &str) -> Result<(), String> {
    let path = std::path::Path::new(file);
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(std::path::Path::new(""));
    let declared = |parent: &std::path::Path| {
        std::fs::read_to_string(root().join(parent))
            .map(|src| src.lines().any(|l| l.trim() == format!("mod {stem};")))
            .unwrap_or(false)
    };
    let main = dir.join("main.rs");
    if root().join(&main).exists() {
        return if declared(&main) {
            Ok(())
        } else {
            Err(format!("{file} is not a module of {}", main.display()))
        };
    }
    let parent = dir.with_extension("rs");
    if !declared(&parent) {
        return Err(format!("{file} is not a module of {}", parent.display()));
    }
    compiled_as_test_module(parent.to_str().unwrap_or_default())
}

/// Whether `src` has `fn name(` marked as a test (`#[test]` or `#[tokio::test…]` among the
/// attributes right above it).
fn is_test_fn(src: &str, name: &str) -> bool {
    let lines: Vec<&str> = src.lines().collect();
    lines.iter().enumerate().any(|(i, l)| {
        let l = l.trim_start();
        let decl = format!("fn {name}(");
        if !(l.starts_with(&decl) || l.starts_with(&format!("async {decl}"))) {
            return false;
        }
        lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("#[") || l.starts_with("//"))
            .any(|l| l == "#[test]" || l.starts_with("#[tokio::test"))
    })
}

#[test]
fn every_named_test_exists() {
    let doc = std::fs::read_to_string(root().join("docs/SECURITY.md")).expect("docs/SECURITY.md");
    let mut named = 0;
    let mut missing = Vec::new();
    for (i, _) in doc.match_indices(".rs::") {
        if doc[i + 5..].starts_with('<') {
            continue; // the pattern itself, `tests/<file>.rs::<name>`
        }
        // the path: the characters of a relative path before `.rs::`
        let start = doc[..i]
            .rfind(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '/' | '-' | '.')))
            .map_or(0, |p| p + 1);
        let file = &doc[start..i + 3];
        let name: String = doc[i + 5..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        assert!(!name.is_empty(), "empty test name after {file}");
        assert!(
            file.contains("tests/"),
            "SECURITY.md names {file}::{name}, which is not under a tests/ directory"
        );
        let src = std::fs::read_to_string(root().join(file))
            .unwrap_or_else(|e| panic!("SECURITY.md names {file}, which cannot be read: {e}"));
        if !is_test_fn(&src, &name) {
            missing.push(format!("{file}::{name}"));
        }
        if let Err(e) = compiled_as_test_module(file) {
            missing.push(format!("{file}::{name} ({e})"));
        }
        named += 1;
    }
    assert!(
        missing.is_empty(),
        "SECURITY.md names tests that do not exist: {missing:?}"
    );
    assert!(named >= 60, "only {named} tests named");
}

#[test]
fn every_scenario_has_a_row() {
    let doc = std::fs::read_to_string(root().join("docs/SECURITY.md")).unwrap();
    for n in 1..=52 {
        assert!(
            doc.contains(&format!("| S{n} |")),
            "scenario {n} has no row"
        );
    }
}
