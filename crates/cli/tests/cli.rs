//! Runs the built `ajs` binary.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};

fn ajs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(args)
        .output()
        .expect("run ajs")
}

fn ajs_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ajs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A file in the temp directory, unique to this process and call, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(ext: &str, contents: &[u8]) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("ajs-cli-test-{}-{n}.{ext}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn usage_lists_the_subcommands() {
    for args in [&["--help"][..], &[][..], &["-h"][..]] {
        let o = ajs(args);
        assert!(o.status.success(), "{args:?}");
        let text = stdout(&o);
        for sub in ["ajs eval", "ajs cases", "ajs disasm"] {
            assert!(text.contains(sub), "usage lacks {sub}: {text}");
        }
    }
    let o = ajs(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown command 'frobnicate'"));
}

#[test]
fn eval_compile_error_shape() {
    let o = ajs(&["eval", "return a +"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "one JSON line: {out}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let m = v.as_object().unwrap();
    assert!(m["error"]["message"].is_string(), "{v}");
    assert!(!m.contains_key("result"), "{v}");
    assert!(m["fuelUsed"].is_number(), "{v}");
}

#[test]
fn eval_refuses_oversize_source_in_the_json() {
    let o = ajs(&["eval", "'aaaa'", "--max-source-bytes", "3"]);
    assert!(o.status.success());
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        v,
        json!({ "fuelUsed": 0, "error": { "message": "Source is 6 bytes, over the 3-byte limit (maxSourceBytes)" } })
    );
    // From stdin too.
    let o = ajs_stdin(&["eval", "-", "--max-source-bytes=3"], "'aaaa'");
    assert!(o.status.success());
    assert!(stdout(&o).contains("over the 3-byte limit"));
}

#[test]
fn eval_bad_usage_is_nonzero_with_a_message() {
    for (args, needle) in [
        (
            &["eval", "1", "--context", "{"][..],
            "--context is not valid JSON",
        ),
        (
            &["eval", "1", "--context", "[1]"][..],
            "--context must be a JSON object",
        ),
        (&["eval", "1", "--fuel", "lots"][..], "--fuel"),
        (&["eval", "1", "--fuel", "-1"][..], "Invalid option fuel"),
        (
            &["eval", "1", "--timeout-ms", "0"][..],
            "Invalid option timeoutMs",
        ),
        (
            &["eval", "1", "--bogus", "1"][..],
            "unknown option '--bogus'",
        ),
        (&["eval", "1", "--fuel"][..], "needs a value"),
        (&["eval"][..], "eval needs the code"),
        (&["eval", "1", "2"][..], "one CODE argument"),
    ] {
        let o = ajs(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
}

fn over_8k() -> String {
    format!("'{}'.length", "a".repeat(9000))
}

#[test]
fn cases_report_and_exit_code() {
    let cases = json!([
        { "name": "t/source-over-8k-refused", "note": "unknown keys are ignored",
          "eval": { "code": over_8k() },
          "expect": { "undefined": true, "error": { "startsWith": "Source is 9009 bytes" }, "fuelUsed": { "lte": 0 } } },
        { "name": "t/option-refused", "eval": { "code": "1", "fuel": -1 },
          "expect": { "error": { "contains": "Invalid option fuel" } } },
        { "name": "t/negative-timeout-refused", "eval": { "code": "1", "timeoutMs": -5 },
          "expect": { "error": "Invalid option timeoutMs: -5 (must be at least 1)" } },
        { "name": "t/heap-floor-through-runner", "eval": { "code": "1", "maxHeapBytes": 10 },
          "expect": { "error": { "startsWith": "Invalid option maxHeapBytes" }, "calls": { "fetch": 0 } } },
        { "name": "t/oversize-body-fails-creation", "function": { "params": [], "body": over_8k() },
          "expectCreateError": { "startsWith": "Source is" } },
        { "name": "t/wrong-expectation", "eval": { "code": over_8k() }, "expect": { "error": null } },
        { "name": "t/malformed-expect", "eval": { "code": "1" }, "expect": { "error": 42 } },
        { "name": "t/agent", "agent": { "source": "function f() { return 1 }", "args": {} },
          "expect": { "result": 1 } },
        { "name": "t/two-kinds", "eval": { "code": "1" }, "function": { "body": "1" }, "expect": {} },
        { "no-name": true }
    ]);
    let f = TempFile::new("json", cases.to_string().as_bytes());
    let o = ajs(&["cases", f.path()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(*lines.last().unwrap(), "5 passed, 5 failed", "{out}");
    assert_eq!(lines.len(), 6, "one line per failing case: {out}");
    let line = |name: &str| {
        lines
            .iter()
            .find(|l| l.contains(name))
            .copied()
            .unwrap_or_else(|| panic!("{name}: {out}"))
    };
    assert!(
        line("t/wrong-expectation").contains("expected no error, got \"Source is"),
        "{out}"
    );
    assert!(
        line("t/malformed-expect").contains("malformed case"),
        "{out}"
    );
    assert!(line("t/malformed-expect").contains("expect.error"), "{out}");
    assert!(
        line("t/agent").contains("Agent must return an object, got number"),
        "{out}"
    );
    assert!(line("t/two-kinds").contains("exactly one of"), "{out}");
    assert!(line("[9]").contains("missing \"name\""), "{out}");
    for name in [
        "t/source-over-8k-refused",
        "t/option-refused",
        "t/oversize-body",
        "t/heap-floor",
        "t/negative-timeout",
    ] {
        assert!(!out.contains(name), "{name} should pass: {out}");
    }
}

#[test]
fn cases_all_passing_exit_zero() {
    let cases = json!([
        { "name": "ok", "eval": { "code": over_8k(), "maxSourceBytes": 100 },
          "expect": { "error": "Source is 9009 bytes, over the 100-byte limit (maxSourceBytes)" } }
    ]);
    let f = TempFile::new("json", cases.to_string().as_bytes());
    let o = ajs(&["cases", f.path()]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert_eq!(stdout(&o), "1 passed, 0 failed\n");
}

#[test]
fn malformed_files_fail_without_panicking() {
    let bad_json = TempFile::new("json", b"[ { \"name\": ");
    let not_list = TempFile::new("json", b"{ \"name\": \"x\" }");
    let o = ajs(&[
        "cases",
        bad_json.path(),
        not_list.path(),
        "/nonexistent/ajs-cases.json",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("not valid JSON"), "{out}");
    assert!(out.contains("must be a JSON array"), "{out}");
    assert!(out.contains("cannot read the file"), "{out}");
    assert!(out.ends_with("0 passed, 3 failed\n"), "{out}");
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));

    let o = ajs(&["cases"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn disasm_artifact_and_errors() {
    let externals = ["a".to_string(), "b".to_string()];
    let atoms = ["httpFetch".to_string(), "llmPredict".to_string()];
    let opts = ajs_compiler::CompileOptions {
        mode: ajs_compiler::Mode::Eval,
        externals: &externals,
        atoms: &atoms,
        source_name: "<source>",
    };
    // The compiler may be unfinished: only check the artifact path when it compiles.
    if let Ok(program) = ajs_compiler::compile("a + b", &opts) {
        let f = TempFile::new("ajsb", &program.to_bytes());
        let o = ajs(&["disasm", f.path()]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o), program.disassemble());
    }
    let truncated = TempFile::new("ajsb", b"AJSB\x01");
    let o = ajs(&["disasm", truncated.path()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));

    let bad_source = TempFile::new("ajs", b"return a +");
    let o = ajs(&["disasm", bad_source.path()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!stderr(&o).is_empty());

    let o = ajs(&["disasm", "/nonexistent/file.ajs"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read"));
}

#[test]
fn compile_then_exec_with_and_without_spans() {
    let src = TempFile::new(
        "ajs",
        b"function main({ n: 1 }) {\n  if (n < 0) {\n    Error('negative')\n  }\n  return { twice: n * 2 }\n}\n",
    );
    let out = format!("{}.ajsb", src.path());
    let spans = format!("{out}.spans");
    let o = ajs(&["compile", src.path(), "-o", &out, "--strip"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&out).unwrap().starts_with(b"AJSB"));
    let o = ajs(&["exec", &out, "--args", r#"{"n": 4}"#]);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&o)).unwrap()["result"],
        json!({ "twice": 8 })
    );
    let o = ajs(&["exec", &out, "--args", r#"{"n": -1}"#, "--spans", &spans]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["error"],
        json!({ "message": "negative", "kind": "guest", "line": 3, "column": 4 })
    );
    // Another format version is refused, naming both versions; nothing runs.
    let mut bytes = std::fs::read(&out).unwrap();
    bytes[4] = 9;
    std::fs::write(&out, &bytes).unwrap();
    let o = ajs(&["exec", &out]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o)
            .contains("artifact format version 9 is not supported (this build reads version 1)"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty());
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&spans);
}

#[test]
fn compile_reports_errors_with_the_file_name() {
    let src = TempFile::new("ajs", b"function main() { return { v: lookup({}) } }");
    let out = format!("{}.ajsb", src.path());
    let o = ajs(&["compile", src.path(), "-o", &out]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("'lookup' is not defined"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains(src.path()), "{}", stderr(&o));
    let o = ajs(&["compile", src.path(), "-o", &out, "--atoms", "lookup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ajs(&["exec", &out]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("the atom 'lookup'"), "{}", stderr(&o));
    let _ = std::fs::remove_file(&out);
}

/// Every file and stdin read of the CLI has a cap, named in the refusal (under a 2 GiB
/// address-space limit: a reader without one dies instead of taking the machine's memory).
#[test]
fn file_and_stdin_reads_are_capped() {
    let bounded = |args: &[&str]| {
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 2097152; exec \"$0\" \"$@\" < /dev/zero")
            .arg(env!("CARGO_BIN_EXE_ajs"))
            .args(args)
            .output()
            .expect("run ajs")
    };
    let cases: [(&[&str], &str); 7] = [
        (&["compile", "/dev/zero"], "--max-source-bytes"),
        (&["disasm", "/dev/zero"], "MAX_ARTIFACT_BYTES"),
        (&["disasm", "-"], "MAX_ARTIFACT_BYTES"),
        (&["exec", "/dev/zero"], "MAX_ARTIFACT_BYTES"),
        (&["run", "/dev/zero"], "limits.maxSourceBytes"),
        (&["resume", "/dev/zero"], "limits.maxHeapBytes"),
        (
            &["exec", "x.ajsb", "--config", "/dev/zero"],
            "MAX_CONFIG_BYTES",
        ),
    ];
    for (args, limit) in cases {
        let o = bounded(args);
        let err = stderr(&o);
        assert!(
            matches!(o.status.code(), Some(1 | 2)),
            "{args:?}: {:?} {err}",
            o.status
        );
        assert!(err.contains(limit), "{args:?}: {err}");
    }
    let o = bounded(&["eval", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("--max-source-bytes"), "{}", stdout(&o));
    let o = bounded(&["cases", "/dev/zero"]);
    assert!(stdout(&o).contains("MAX_CASE_FILE_BYTES"), "{}", stdout(&o));
}

/// `ajs eval --timeout-ms 1000 --fuel 1e9` ends a regex search that would run for minutes
/// (every match re-reads the rest of a 4M-unit string) at its timeout, inside the call.
#[test]
fn eval_timeout_stops_a_long_regex_search() {
    let t = std::time::Instant::now();
    let o = ajs(&[
        "eval",
        r"return 'ab'.repeat(2000000).match(/\w+x|\w/g).length",
        "--timeout-ms",
        "1000",
        "--fuel",
        "1e9",
    ]);
    let took = t.elapsed();
    let out = stdout(&o);
    assert!(out.contains("Execution timeout after 1000ms"), "{out}");
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
}
