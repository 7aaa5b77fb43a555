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

fn ajs_stdin(args: &[&str], input: impl AsRef<[u8]>) -> Output {
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
        .write_all(input.as_ref())
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
        for sub in [
            "eval", "cases", "disasm", "compile", "inspect", "exec", "serve", "run", "resume",
            "replay",
        ] {
            assert!(
                text.contains(&format!("\n  {sub} ")),
                "usage lacks {sub}: {text}"
            );
        }
        assert!(text.contains("Exit codes"), "{text}");
    }
    let o = ajs(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unrecognized subcommand 'frobnicate'"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn version_and_help_per_subcommand() {
    let o = ajs(&["--version"]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o).trim(),
        format!("ajs {}", env!("CARGO_PKG_VERSION"))
    );
    for args in [&["eval", "--help"][..], &["help", "eval"][..]] {
        let o = ajs(args);
        assert!(o.status.success(), "{args:?}");
        let text = stdout(&o);
        assert!(text.contains("Usage: ajs eval"), "{args:?}: {text}");
        for own in [
            "--context",
            "--fuel",
            "--max-source-bytes",
            "--log",
            "Exit codes",
        ] {
            assert!(text.contains(own), "{args:?} lacks {own}: {text}");
        }
        // eval's help alone: no other subcommand's options
        for other in ["--policy", "--strip", "--listen", "--journal", "cases"] {
            assert!(!text.contains(other), "{args:?} shows {other}: {text}");
        }
    }
    for sub in [
        "cases", "disasm", "compile", "exec", "serve", "run", "resume", "replay",
    ] {
        let o = ajs(&[sub, "--help"]);
        assert!(o.status.success(), "{sub}: {}", stderr(&o));
        assert!(
            stdout(&o).contains(&format!("Usage: ajs {sub}")),
            "{sub}: {}",
            stdout(&o)
        );
    }
}

/// 0 the run succeeded, 1 it failed, 2 bad usage, 3 input refused; and one JSON shape.
#[test]
fn exit_codes_of_eval() {
    let code_and_json = |args: &[&str]| {
        let o = ajs(args);
        let v: Value = serde_json::from_str(stdout(&o).trim())
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(&o)));
        (o.status.code(), v)
    };
    let (code, v) = code_and_json(&["eval", "1 + 1"]);
    assert_eq!(
        (code, v),
        (Some(0), json!({ "result": 2, "fuelUsed": 0.3 }))
    );
    // CODE may start with '-'
    let (code, v) = code_and_json(&["eval", "-1", "--fuel", "5"]);
    assert_eq!(
        (code, v),
        (Some(0), json!({ "result": -1, "fuelUsed": 0.2 }))
    );
    let (code, v) = code_and_json(&["eval", "Error('no')"]);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["error"]["kind"], "guest", "{v}");
    assert_eq!(v["error"]["message"], "no", "{v}");
    let (code, v) = code_and_json(&["eval", "while (true) {}\nreturn 1", "--fuel", "5"]);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["error"]["kind"], "outOfFuel", "{v}");
    let (code, v) = code_and_json(&["eval", "return a +*"]);
    assert_eq!(code, Some(3), "a compile error is input refused: {v}");
    assert_eq!(v["error"]["kind"], "input", "{v}");
    assert!(v["error"]["message"].is_string(), "{v}");
    // bad usage: nothing on stdout
    for args in [
        &["eval"][..],
        &["eval", "1", "--max-source-bytes", "0"][..],
        &["eval", "1", "--max-source-bytes=0"][..],
        &["eval", "1", "--timeout-ms", "0"][..],
        &["eval", "1", "--fuel", "-1"][..],
        &["eval", "1", "--bogus"][..],
        &["eval", "--bogus"][..],
    ] {
        let o = ajs(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}");
        assert!(!stderr(&o).is_empty(), "{args:?}");
    }
    let o = ajs(&["eval", "1", "--max-source-bytes", "0"]);
    assert!(stderr(&o).contains("must be at least 1"), "{}", stderr(&o));
}

/// A non-UTF-8 argument is bad usage, not a panic.
#[test]
fn non_utf8_arguments_are_usage_errors() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let bad = OsStr::from_bytes(b"\xff\xfe");
    for args in [
        vec![OsStr::new("eval"), bad],
        vec![bad],
        vec![OsStr::new("cases"), bad],
        vec![OsStr::new("exec"), bad],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_ajs"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

/// `ajs eval 1 | head -c0`: a closed stdout ends quietly, with the run's own exit code.
#[test]
fn a_closed_stdout_is_a_quiet_exit() {
    let big = "return 'x'.repeat(1000000)";
    for (args, code) in [
        (&["eval", big, "--fuel", "1e6"][..], 0),
        (
            &["eval", "Error('x'.repeat(1000000))", "--fuel", "1e6"][..],
            1,
        ),
        (&["--help"][..], 0),
        (&["eval", "--help"][..], 0),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ajs"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).is_empty(), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn log_is_in_the_outcome_when_asked() {
    let code = "console.log('a'); console.warn('b'); return 1";
    let o = ajs(&["eval", code, "--log"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        v["log"],
        json!([{ "level": "info", "message": "a" }, { "level": "warn", "message": "b" }])
    );
    let o = ajs(&["eval", code]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(v.get("log").is_none(), "{v}");
    // and for `ajs run`, also when the run fails
    let src = TempFile::new(
        "ajs",
        b"function main() {\n  console.log('started')\n  Error('late')\n}\n",
    );
    let o = ajs(&["run", src.path(), "--log"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        v["log"],
        json!([{ "level": "info", "message": "started" }]),
        "{v}"
    );
    assert_eq!(v["error"]["kind"], "guest", "{v}");
}

#[test]
fn eval_compile_error_shape() {
    let o = ajs(&["eval", "return a +"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
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
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        v,
        json!({ "fuelUsed": 0, "error": { "message": "Source is 6 bytes, over the 3-byte limit (maxSourceBytes)", "kind": "input" } })
    );
    // From stdin too.
    let o = ajs_stdin(&["eval", "-", "--max-source-bytes=3"], "'aaaa'");
    assert_eq!(o.status.code(), Some(3));
    assert!(stdout(&o).contains("over the 3-byte limit"));
    // code on stdin that is not UTF-8 is refused the same way
    let o = ajs_stdin(&["eval", "-"], b"1 + \xff");
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["error"]["kind"], "input", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid UTF-8"),
        "{v}"
    );
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
            "unexpected argument '--bogus'",
        ),
        (
            &["eval", "1", "--fuel"][..],
            "a value is required for '--fuel",
        ),
        (&["eval"][..], "<CODE>"),
        (&["eval", "1", "2"][..], "unexpected argument '2'"),
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

/// Files run in parallel; the report is in the order of the files and their cases, the same
/// as one at a time; stderr (not a terminal here) has one plain progress line per file.
#[test]
fn cases_in_parallel_report_in_argument_order() {
    let files: Vec<TempFile> = (0..4)
        .map(|i| {
            // the first file is the slowest: it finishes last when files run at once
            let slow = if i == 0 { "let s = 0; let k = 0; while (k < 200000) { s += k; k++ }" } else { "" };
            let cases = json!([
                { "name": format!("f{i}/pass"), "eval": { "code": format!("{slow} return {i}"), "fuel": 1e6 },
                  "expect": { "result": i } },
                { "name": format!("f{i}/fail-a"), "eval": { "code": "1" }, "expect": { "result": 2 } },
                { "name": format!("f{i}/fail-b"), "eval": { "code": "2" }, "expect": { "result": 3 } }
            ]);
            TempFile::new("json", cases.to_string().as_bytes())
        })
        .collect();
    let paths: Vec<&str> = files.iter().map(TempFile::path).collect();
    let run = |jobs: &str| {
        let mut args = vec!["cases", "--jobs", jobs];
        args.extend(&paths);
        ajs(&args)
    };
    let parallel = run("4");
    let serial = run("1");
    assert_eq!(parallel.status.code(), Some(1));
    assert_eq!(serial.status.code(), Some(1));
    assert_eq!(stdout(&parallel), stdout(&serial));
    let names: Vec<String> = stdout(&parallel)
        .lines()
        .filter_map(|l| l.strip_prefix("FAIL "))
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect();
    let want: Vec<String> = (0..4)
        .flat_map(|i| [format!("f{i}/fail-a"), format!("f{i}/fail-b")])
        .collect();
    assert_eq!(names, want, "{}", stdout(&parallel));
    assert!(stdout(&parallel).ends_with("\n4 passed, 8 failed\n"));
    let err = stderr(&parallel);
    let progress: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("ajs cases: ["))
        .collect();
    assert_eq!(progress.len(), 4, "{err}");
    assert!(progress[0].starts_with("ajs cases: [1/4] "), "{err}");
    assert!(progress[0].ends_with(": 3 cases, 2 failing"), "{err}");
    assert!(
        !err.contains('\x1b'),
        "no terminal codes when stderr is not a terminal: {err}"
    );
    let o = ajs(&["cases", "--jobs", "0", paths[0]]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
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
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));

    let bad_source = TempFile::new("ajs", b"return a +");
    let o = ajs(&["disasm", bad_source.path()]);
    assert_eq!(o.status.code(), Some(3));
    assert!(!stderr(&o).is_empty());

    let o = ajs(&["disasm", "/nonexistent/file.ajs"]);
    assert_eq!(o.status.code(), Some(2));
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
    assert_eq!(o.status.code(), Some(1), "the run failed");
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
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["error"]["kind"], "artifactRefused", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("artifact format version 9 is not supported (this build reads version 2)"),
        "{v}"
    );
    assert_eq!(v.as_object().unwrap().len(), 1, "nothing ran: {v}");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&spans);
}

#[test]
fn compile_reports_errors_with_the_file_name() {
    let src = TempFile::new("ajs", b"function main() { return { v: lookup({}) } }");
    let out = format!("{}.ajsb", src.path());
    let o = ajs(&["compile", src.path(), "-o", &out]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("'lookup' is not defined"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains(src.path()), "{}", stderr(&o));
    // `ajs run` refuses it in its JSON line, the body POST /run answers with
    let o = ajs(&["run", src.path()]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["error"]["kind"], "compileError", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'lookup' is not defined"),
        "{v}"
    );
    let o = ajs(&["run", "/nonexistent/agent.ajs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).is_empty());
    let o = ajs(&["compile", src.path(), "-o", &out, "--atoms", "lookup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ajs(&["exec", &out]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["error"]["kind"], "atomRefused", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the atom 'lookup'"),
        "{v}"
    );
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
        (&["resume", "/dev/zero", "--approve"], "limits.maxHeapBytes"),
        (
            &["exec", "x.ajsb", "--config", "/dev/zero"],
            "MAX_CONFIG_BYTES",
        ),
    ];
    for (args, limit) in cases {
        let o = bounded(args);
        // a run command refuses in its JSON line (3), the others on stderr; a configuration
        // is part of the command line (2)
        let said = format!("{}{}", stdout(&o), stderr(&o));
        let want = if args.contains(&"--config") { 2 } else { 3 };
        assert_eq!(o.status.code(), Some(want), "{args:?}: {said}");
        assert!(said.contains(limit), "{args:?}: {said}");
    }
    let o = bounded(&["eval", "-"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
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

#[test]
fn a_property_of_a_catch_binding_is_warned_at_compile_time() {
    let dir = std::env::temp_dir().join(format!("ajs-catch-warn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("catch.ajs");
    std::fs::write(
        &file,
        "function main() {\n  try {\n    Error('boom')\n  } catch (e) {\n    return { msg: e.message, ok: e }\n  }\n}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let want = format!(
        "warning: 'e' is the caught error's message string, so e.message is undefined; write e instead of e.message at {path}:5:18"
    );
    let out = ajs(&["run", path]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    assert!(stdout(&out).contains(r#""ok":"boom""#), "{}", stdout(&out));
    let artifact = dir.join("catch.ajsc");
    let out = ajs(&["compile", path, "-o", artifact.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ajs inspect` prints the same manifest for a source and its artifact, and refuses an
/// artifact whose embedded manifest was edited (exit 3) and bad source (exit 3).
#[test]
fn inspect_source_and_artifact() {
    let src = TempFile::new(
        "ajs",
        b"function main({ p: 1 }) {\n  let r = httpFetch({ url: 'https://api.example.com/items?page=' + p })\n  return r.status\n}\n",
    );
    let o = ajs(&["inspect", src.path()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let site = &m["atoms"]["httpFetch"]["sites"][0];
    assert_eq!(
        site["url"],
        json!({ "url": "https://api.example.com/items?page=", "exact": false })
    );
    assert_eq!(site["line"], json!(2));
    assert_eq!(m["atoms"]["httpFetch"]["maxCalls"], json!(1));
    assert!(m["fuel"]["max"].is_u64(), "{m}");
    let out = format!("{}.ajsb", src.path());
    assert!(ajs(&["compile", src.path(), "-o", &out]).status.success());
    let o = ajs(&["inspect", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(serde_json::from_str::<Value>(&stdout(&o)).unwrap(), m);
    let o = ajs_stdin(&["inspect", "-"], std::fs::read(&out).unwrap());
    assert_eq!(serde_json::from_str::<Value>(&stdout(&o)).unwrap(), m);
    // an edited manifest: the call count lowered
    let bytes = std::fs::read(&out).unwrap();
    let at = bytes
        .windows(12)
        .position(|w| w == b"\"maxCalls\":1")
        .unwrap();
    let mut edited = bytes.clone();
    edited[at + 11] = b'0';
    std::fs::write(&out, &edited).unwrap();
    let o = ajs(&["inspect", &out]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("manifest does not match"),
        "{}",
        stderr(&o)
    );
    let o = ajs(&["exec", &out]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    let _ = std::fs::remove_file(&out);
    let bad = TempFile::new("ajs", b"function main( {");
    assert_eq!(ajs(&["inspect", bad.path()]).status.code(), Some(3));
    assert_eq!(ajs(&["inspect", "/no/such/file"]).status.code(), Some(2));
}
