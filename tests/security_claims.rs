//! A claim without a test is not made: every `tests/<file>.rs::<name>` named in docs/SECURITY.md
//! must exist as `fn <name>` in that file, and every scenario 1–52 of reference §9 has a row.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_named_test_exists() {
    let doc = std::fs::read_to_string(root().join("docs/SECURITY.md")).expect("docs/SECURITY.md");
    let mut named = 0;
    let mut missing = Vec::new();
    for (i, _) in doc.match_indices("tests/") {
        let rest = &doc[i..];
        let Some(sep) = rest.find(".rs::") else {
            continue;
        };
        let file = &rest[..sep + 3];
        if file.contains(|c: char| c.is_whitespace() || c == '`' || c == ',' || c == '<') {
            continue;
        }
        let name: String = rest[sep + 5..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        assert!(!name.is_empty(), "empty test name after {file}");
        let src = std::fs::read_to_string(root().join(file))
            .unwrap_or_else(|e| panic!("SECURITY.md names {file}, which cannot be read: {e}"));
        if !src.contains(&format!("fn {name}(")) {
            missing.push(format!("{file}::{name}"));
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
