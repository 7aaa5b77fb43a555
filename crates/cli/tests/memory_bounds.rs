//! Peak memory: every hostile shape of issue 26 runs in a child process (the release `ajs`
//! binary, its `exec` being `ajs-run exec`'s code) under a 3 GiB address-space limit, with
//! default options, and must end with a clean JSON outcome (a result or an error, never a signal
//! or an abort) and a peak RSS within 1.5 × `maxHeapBytes` + 32 MiB.
//!
//! The child reports its own peak (`VmHWM`, printed on exit when `AJS_REPORT_PEAK_RSS` is set):
//! a parent cannot read it once the child has exited. Children run one at a time, so a shape
//! that breaks its bound takes at most one address-space limit of the machine at once.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

const MIB: u64 = 1024 * 1024;
/// The children's address-space limit.
const AS_LIMIT: u64 = 3 * 1024 * MIB;
/// `maxHeapBytes` by default.
const HEAP: u64 = 64 * MIB;
/// The bound of issue 26: 1.5 × `maxHeapBytes` + 32 MiB.
const BOUND: u64 = HEAP * 3 / 2 + 32 * MIB;
/// A child still running after this is killed (each ends within seconds when bounded).
const CHILD_DEADLINE: Duration = Duration::from_secs(20);
/// Fuel for the shapes that fill the heap: far more than reaching the ceiling takes.
const FUEL: &str = "100000000";
/// Each run's own timeout: a shape that neither fills the heap nor spends its fuel first must
/// still end, with a clean timeout, well before [`CHILD_DEADLINE`].
const RUN_TIMEOUT_MS: &str = "5000";

/// One child at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The doubling value: 40 steps, 2^40 references to one leaf, 29 fuel.
const DOUBLING: &str = "let x = 1; let i = 0; while (i < 40) { x = [x, x]; i++ }";

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("ajs-memory-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn write(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a child printed: its outcome (the last JSON line of stdout) and its peak RSS.
struct Ended {
    outcome: Value,
    peak: u64,
}

/// Runs `ajs ARGS` under the address-space limit; asserts it exited (no signal) with a JSON
/// outcome on stdout and its peak on stderr, and the peak within [`BOUND`].
fn bounded(case: &str, args: &[&str]) -> Ended {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let start = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {}; exec \"$0\" \"$@\"", AS_LIMIT / 1024))
        .arg(env!("CARGO_BIN_EXE_ajs"))
        .args(args)
        .env("AJS_REPORT_PEAK_RSS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts ajs");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let readers = (
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        }),
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        }),
    );
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > CHILD_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{case}: still running after {CHILD_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = readers.0.join().unwrap();
    let stderr = readers.1.join().unwrap();
    let took = start.elapsed();
    let tail = |s: &str| s.chars().take(600).collect::<String>();
    assert!(
        status.code().is_some(),
        "{case}: ended by a signal ({status}) after {took:?}; stderr: {}",
        tail(&stderr)
    );
    let peak = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("ajs-peak-rss-bytes="))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| {
            panic!(
                "{case}: no peak reported ({status}); stderr: {}",
                tail(&stderr)
            )
        });
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    let outcome: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "{case}: no JSON outcome ({status}, {e}); stdout: {}; stderr: {}",
            tail(&stdout),
            tail(&stderr)
        )
    });
    assert!(
        outcome.get("result").is_some()
            || outcome.get("error").is_some()
            || outcome.get("status").is_some(),
        "{case}: {}",
        tail(line)
    );
    // the shape ran (a compile error would pass every bound without testing one)
    assert!(
        outcome["fuelUsed"].as_f64().unwrap_or(1.0) > 0.0,
        "{case}: did not run: {}",
        tail(line)
    );
    eprintln!(
        "{case}: peak {} MiB in {took:?}: {}",
        peak / MIB,
        tail(line).chars().take(160).collect::<String>()
    );
    assert!(
        peak <= BOUND,
        "{case}: peak RSS {} MiB over the {} MiB bound; outcome {}",
        peak / MIB,
        BOUND / MIB,
        tail(line)
    );
    Ended { outcome, peak }
}

/// `ajs eval CODE` with the given fuel (default options otherwise).
fn eval(case: &str, code: &str, fuel: &str) -> Ended {
    bounded(
        case,
        &[
            "eval",
            code,
            "--fuel",
            fuel,
            "--max-source-bytes",
            "1000000",
            "--timeout-ms",
            RUN_TIMEOUT_MS,
        ],
    )
}

/// `ajs eval` of a shape that should end with the heap ceiling (or another clean error).
fn eval_fails(case: &str, code: &str, fuel: &str) -> Ended {
    let e = eval(case, code, fuel);
    assert!(e.outcome.get("error").is_some(), "{case}: {}", e.outcome);
    e
}

/// An agent compiled with `ajs compile`, run with `ajs exec` (the code of `ajs-run exec`).
fn exec_agent(case: &str, source: &str, extra: &[&str]) -> Ended {
    let d = Dir::new(case);
    let src = d.write("agent.ajs", source);
    let artifact = d.0.join("agent.ajsb").to_string_lossy().into_owned();
    let o = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(["compile", &src, "-o", &artifact])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut args = vec!["exec", artifact.as_str()];
    args.extend_from_slice(extra);
    bounded(case, &args)
}

/// `ajs run AGENT` (the gated runner: journal, pending calls, snapshots).
fn run_agent(case: &str, source: &str, extra: &[&str]) -> Ended {
    let d = Dir::new(case);
    let src = d.write("agent.ajs", source);
    let snap = d.0.join("run.snap").to_string_lossy().into_owned();
    let mut args = vec!["run", src.as_str(), "--snapshot-out", snap.as_str()];
    args.extend_from_slice(extra);
    bounded(case, &args)
}

// Class 1: every door a value leaves the VM by, with a value shared 2^40 times.

#[test]
fn door_result_doubling_array() {
    eval_fails("result", &format!("{DOUBLING} return x"), "1000");
}

#[test]
fn door_result_doubling_string() {
    eval_fails(
        "result, shared string",
        "let x = ['x'.repeat(1000000)]; let i = 0; while (i < 30) { x = [x, x]; i++ } return x",
        "1000",
    );
}

#[test]
fn door_result_doubling_object() {
    eval_fails(
        "result, shared object",
        "let x = {}; let i = 0; while (i < 40) { x = { a: x, b: x }; i++ } return x",
        "1000",
    );
}

#[test]
fn door_artifact_result_doubling() {
    let e = exec_agent(
        "artifact result",
        &format!("function main() {{ {DOUBLING} return x }}"),
        &[],
    );
    assert!(e.outcome.get("error").is_some(), "{}", e.outcome);
}

#[test]
fn door_console_log_doubling() {
    eval(
        "console line",
        &format!("{DOUBLING} console.log(x); return 1"),
        "1000",
    );
}

#[test]
fn door_artifact_log_doubling() {
    exec_agent(
        "artifact log",
        &format!("function main() {{ {DOUBLING} console.log(x)\n return 1 }}"),
        &["--log"],
    );
}

#[test]
fn door_atom_input_doubling() {
    // refused by the fetch policy (no domains), after its input was copied
    eval(
        "atom input",
        &format!("{DOUBLING} return httpFetch({{ url: 'https://example.com/', body: x }})"),
        "1000",
    );
}

#[test]
fn door_pure_atom_input_doubling() {
    eval(
        "pure atom input",
        &format!("{DOUBLING} return len({{ list: x }})"),
        "1000",
    );
}

#[test]
fn door_error_message_doubling() {
    eval_fails(
        "Error(x)",
        &format!("{DOUBLING} Error(x); return 1"),
        "1000",
    );
}

#[test]
fn door_filter_doubling() {
    eval(
        "filter",
        &format!("{DOUBLING} return filter({{ a: x }}, {{ a: [] }})"),
        "1000",
    );
}

#[test]
fn door_schema_from_example_doubling() {
    eval(
        "Schema.fromExample",
        &format!("{DOUBLING} return Schema.fromExample(x)"),
        "1000",
    );
}

#[test]
fn door_journal_doubling() {
    let d = Dir::new("journal-out");
    let journal = d.0.join("run.journal").to_string_lossy().into_owned();
    run_agent(
        "journal",
        &format!(
            "function main() {{ {DOUBLING}\n let r = null\n try {{ r = httpFetch({{ url: 'https://example.com/', body: x }}) }} catch (e) {{ r = 'refused' }}\n return 1 }}"
        ),
        &["--journal-out", &journal],
    );
}

#[test]
fn door_pending_call_doubling() {
    // paused before the call: the pending call's input is printed and saved in the snapshot
    run_agent(
        "pending call",
        &format!("function main() {{ {DOUBLING}\n return httpFetch({{ url: 'https://example.com/', body: x }}) }}"),
        &["--policy", "httpFetch=pause"],
    );
}

// Class 2: atoms that render text.

#[test]
fn atom_template_renders_within_bounds() {
    eval_fails(
        "template",
        "return template({ tmpl: '{{a}}'.repeat(100000), vars: { a: 'x'.repeat(60000) } })",
        "1000000",
    );
}

#[test]
fn atom_join_renders_within_bounds() {
    eval_fails(
        "join",
        "let s = 'x'.repeat(60000); let l = []; let i = 0; while (i < 100000) { l.push(s); i++ } return join({ list: l, sep: ',' })",
        "1000000",
    );
}

#[test]
fn atom_json_stringify_renders_within_bounds() {
    eval_fails(
        "jsonStringify",
        &format!("{DOUBLING} return jsonStringify({{ value: x }})"),
        FUEL,
    );
}

#[test]
fn atom_hash_renders_within_bounds() {
    eval_fails(
        "hash",
        &format!("{DOUBLING} return hash({{ value: x }})"),
        FUEL,
    );
}

#[test]
fn atom_split_renders_within_bounds() {
    eval(
        "split",
        "return split({ str: 'x'.repeat(8000000), sep: '' }).length",
        "1000000",
    );
}

#[test]
fn atom_merge_and_keys_render_within_bounds() {
    eval(
        "merge/keys",
        "let o = Object.fromEntries(Array.from({ length: 200000 }, (v, k) => ['k' + k, k])); let m = merge({ a: o, b: o }); return keys({ obj: m }).length",
        FUEL,
    );
}

// Class 3: containers and values pushed until the heap ceiling.

fn fill(case: &str, push: &str) {
    eval_fails(
        case,
        &format!("let a = []; let i = 0; while (true) {{ a.push({push}); i++ }} return a.length"),
        FUEL,
    );
}

#[test]
fn fill_small_objects() {
    fill("objects", "{ a: 1 }");
}

#[test]
fn fill_small_arrays() {
    fill("arrays", "[1]");
}

#[test]
fn fill_sets() {
    fill("sets", "Set([1])");
}

#[test]
fn fill_regexes() {
    fill("regexes", "/a/");
}

#[test]
fn fill_dates() {
    fill("dates", "Date(0)");
}

#[test]
fn fill_short_strings() {
    fill("strings", "'s' + i");
}

#[test]
fn fill_numbers() {
    fill("numbers", "i");
}

#[test]
fn fill_object_keys() {
    eval_fails(
        "object keys",
        "return Object.fromEntries(Array.from({ length: 10000000 }, (v, k) => ['k' + k, k]))",
        FUEL,
    );
}

#[test]
fn fill_one_set() {
    eval_fails(
        "set members",
        "let s = Set(); let i = 0; while (true) { s.add(i); i++ } return s.size",
        FUEL,
    );
}

#[test]
fn fill_string_doubling() {
    eval_fails(
        "string doubling",
        "let s = 'x'; while (true) { s = s + s } return s",
        FUEL,
    );
}

// Parsers.

#[test]
fn parse_json_nested_text() {
    eval_fails(
        "JSON.parse nested",
        "return JSON.parse('[' + '[1],'.repeat(4000000) + '1]').length",
        FUEL,
    );
}

#[test]
fn parse_json_flat_numbers() {
    eval_fails(
        "JSON.parse numbers",
        "return JSON.parse('[' + '0,'.repeat(8000000) + '1]').length",
        FUEL,
    );
}

#[test]
fn parse_json_objects() {
    eval_fails(
        "JSON.parse objects",
        "return JSON.parse('[' + '{\"a\":[1,2,3],\"b\":\"xy\"},'.repeat(1000000) + '1]').length",
        FUEL,
    );
}

#[test]
fn parse_json_parse_atom() {
    eval_fails(
        "jsonParse",
        "return jsonParse({ str: '[' + '[1],'.repeat(4000000) + '1]' }).length",
        FUEL,
    );
}

/// Serves `body` as JSON on a loopback port, to every connection, until the test process ends;
/// returns the URL.
fn serve_json(body: String) -> String {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/body", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            // the request head, up to its blank line
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(body.as_bytes());
        }
    });
    url
}

/// A fetched body of tiny values, as large as the body cap (4 MiB) lets it be.
fn fetch_tiny_values(case: &str, unit: &str) {
    let n = (4 * MIB as usize - 2) / (unit.len() + 1);
    let url = serve_json(format!("[{}{unit}]", format!("{unit},").repeat(n - 1)));
    let args = serde_json::json!({ "url": url }).to_string();
    let e = exec_agent(
        case,
        "function main(url) { return { n: httpFetch({ url }).length } }",
        &[
            "--args",
            &args,
            "--fetch-domains",
            "127.0.0.1",
            "--fuel",
            FUEL,
        ],
    );
    let message = e.outcome["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("(maxHeapBytes)"), "{case}: {}", e.outcome);
}

#[test]
fn fetched_body_of_empty_arrays() {
    fetch_tiny_values("fetched [[],[],…]", "[]");
}

#[test]
fn fetched_body_of_small_objects() {
    fetch_tiny_values("fetched [{a:0},…]", r#"{"a":0}"#);
}

// The compiled-regex cache.

#[test]
fn regex_cache_of_1500_literals() {
    // each literal a large compiled program (a Unicode word class, counted repetitions)
    let mut code = String::from("let n = 0; let s = 'ab'\n");
    for i in 0..1500 {
        code.push_str(&format!(
            "if (/(\\w{{0,60}}\\s?){{1,30}}[^\\w\\s]{i}/u.test(s)) {{ n++ }}\n"
        ));
    }
    code.push_str("return n");
    eval("regex cache", &code, FUEL);
}

// Logs.

#[test]
fn log_many_long_lines() {
    eval(
        "long log lines",
        "let s = 'x'.repeat(1000000); let i = 0; while (i < 100000) { console.log(s + i); i++ } return i",
        FUEL,
    );
}

#[test]
fn log_many_long_lines_shown() {
    exec_agent(
        "long log lines, printed",
        "function main() { let s = 'x'.repeat(1000000)\n let i = 0\n while (i < 100000) { console.log(s + i); i++ }\n return i }",
        &["--log", "--fuel", FUEL, "--timeout-ms", "10000"],
    );
}

/// The suite's yardstick: a run doing nothing stays far below the bound, so a failing case is
/// the shape, not the binary.
#[test]
fn an_empty_run_is_far_below_the_bound() {
    let e = eval("empty", "return 1", "1000");
    assert_eq!(e.outcome["result"], 1);
    assert!(e.peak < 32 * MIB, "{} MiB", e.peak / MIB);
}

// Natives whose output can be far larger than what was paid for: admitted before it is built.

#[test]
fn native_spread_of_a_long_string() {
    eval_fails(
        "spread-string",
        "let s = 'x'.repeat(20000000); return [...s].length",
        FUEL,
    );
}

#[test]
fn native_global_match_of_many_matches() {
    eval_fails(
        "match-global",
        "let s = 'ab'.repeat(5000000); return s.match(/a/g).length",
        FUEL,
    );
}

#[test]
fn native_match_all_of_many_matches() {
    eval_fails(
        "match-all",
        "let s = 'ab'.repeat(5000000); return [...s.matchAll(/(a)/g)].length",
        FUEL,
    );
}

#[test]
fn native_regex_replace_of_many_matches() {
    eval(
        "replace-global",
        "let s = 'ab'.repeat(5000000); return s.replace(/a/g, 'xyzxyz').length",
        FUEL,
    );
    eval(
        "replace-empty",
        "let s = 'ab'.repeat(5000000); return s.replace(/(?:)/g, '').length",
        FUEL,
    );
}

#[test]
fn native_regex_split_into_many_pieces() {
    eval_fails(
        "split-regex",
        "let s = 'ab'.repeat(5000000); return s.split(/(?:)/).length",
        FUEL,
    );
}

#[test]
fn native_object_entries_of_a_long_string() {
    eval_fails(
        "entries-string",
        "let s = 'x'.repeat(20000000); return Object.entries(s).length",
        FUEL,
    );
}

#[test]
fn native_flat_of_a_shared_array() {
    eval_fails(
        "flat-shared",
        &format!("{DOUBLING} return x.flat(Infinity).length"),
        FUEL,
    );
}

#[test]
fn native_flat_of_shared_empty_arrays_ends_by_its_timeout() {
    let e = eval_fails(
        "flat-shared-empty",
        "let x = [[]]; let i = 0; while (i < 40) { x = [x, x]; i++ } return x.flat(Infinity).length",
        "1000000000",
    );
    let msg = e.outcome["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("timeout"), "{msg}");
}

#[test]
fn native_sort_of_many_numbers() {
    eval(
        "sort-numbers",
        "let a = []; let i = 0; while (i < 3000000) { a.push(i * 1.1); i++ } a.sort(); return a.length",
        FUEL,
    );
}

#[test]
fn native_normalize_that_grows_eighteen_times() {
    eval_fails(
        "normalize-nfkd",
        "let s = '\\u{FDFA}'.repeat(5000000); return s.normalize('NFKD').length",
        FUEL,
    );
}

#[test]
fn native_upper_case_that_grows_three_times() {
    eval_fails(
        "upper-case",
        "let s = '\\u{390}'.repeat(20000000); return s.toUpperCase().length",
        FUEL,
    );
}

#[test]
fn native_set_of_many_distinct_strings() {
    eval_fails(
        "set-strings",
        "let a = []; let i = 0; while (i < 700000) { a.push('k' + i); i++ } return Set(a).size",
        FUEL,
    );
    eval_fails(
        "set-long-strings",
        "let s = 'x'.repeat(4000000); let a = []; let i = 0; while (i < 7) { a.push(s + i); i++ } return Set(a).size",
        FUEL,
    );
}

#[test]
fn native_object_assign_of_a_long_array() {
    eval_fails(
        "assign-array",
        "let a = []; let i = 0; while (i < 3000000) { a.push(i); i++ } return Object.keys(Object.assign({}, a)).length",
        FUEL,
    );
}
