//! The behaviour corpus (`tests/corpus/*.json`, in the conformance case format): every case file
//! except `known_bugs.json` is run through the built `ajs cases` command, which must report
//! `N passed, 0 failed` with N the number of cases in the files.
//!
//! Expected results of everything AJS keeps from JavaScript were computed by running the same code
//! in Node; `fuelUsed` ranges are ±25% around the measured cost. `known_bugs.json` holds cases where
//! the product is wrong today (each with a `note`); it is only checked to parse.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus")
}

fn case_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/corpus exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "known_bugs.json"))
        .collect();
    files.sort();
    files
}

fn count_cases(path: &PathBuf) -> usize {
    let text = std::fs::read_to_string(path).expect("read case file");
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    v.as_array()
        .unwrap_or_else(|| panic!("{} is not a list of cases", path.display()))
        .len()
}

fn run_cases(files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .arg("cases")
        .args(files)
        .output()
        .expect("run ajs cases");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn corpus_passes() {
    let files = case_files();
    assert!(
        files.len() >= 10,
        "expected the themed case files, got {files:?}"
    );
    let total: usize = files.iter().map(count_cases).sum();
    assert!(total >= 320, "the corpus has only {total} cases");
    let (ok, stdout) = run_cases(&files);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        ok && last == format!("{total} passed, 0 failed"),
        "corpus failures:\n{stdout}"
    );
}

#[test]
fn every_case_has_a_bounded_fuel_range() {
    for path in case_files() {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for case in v.as_array().unwrap() {
            let name = case["name"].as_str().unwrap_or("?");
            let mut expects = Vec::new();
            if let Some(e) = case.get("expect") {
                expects.push(e);
            }
            if let Some(calls) = case.get("calls").and_then(Value::as_array) {
                expects.extend(calls.iter().map(|c| &c["expect"]));
            }
            if case.get("expectCreateError").is_some() {
                continue;
            }
            assert!(!expects.is_empty(), "{name}: no expectation");
            for e in expects {
                let f = &e["fuelUsed"];
                let lower = f.get("gte").or_else(|| f.get("gt"));
                let upper = f.get("lte").or_else(|| f.get("lt"));
                assert!(
                    lower.is_some() && upper.is_some(),
                    "{name}: fuelUsed must have a lower and an upper bound, got {f}"
                );
                assert!(
                    e.get("result").is_some()
                        || e.get("undefined").is_some()
                        || e.get("error").is_some_and(|x| !x.is_null()),
                    "{name}: needs an expected result or error"
                );
            }
        }
    }
}

#[test]
fn known_bugs_file_parses() {
    let path = corpus_dir().join("known_bugs.json");
    if !path.exists() {
        return;
    }
    let n = count_cases(&path);
    let (_, stdout) = run_cases(std::slice::from_ref(&path));
    assert!(
        !stdout.contains("malformed") && !stdout.contains("not valid JSON"),
        "{stdout}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    let counted: usize = last
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse::<usize>().ok())
        .sum();
    assert_eq!(counted, n, "{stdout}");
}
