//! Compile on one side (the library, standing in for `ajs compile` on a trusted host), run the
//! artifact with the parser-free `ajs-run` on the other.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use ajs::{Options, Runner};
use serde_json::{json, Value};

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("ajs-run-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn write(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_string_lossy().into_owned()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ajs_run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ajs-run"))
        .args(args)
        .output()
        .expect("runs ajs-run")
}

/// The one JSON line of a run that exited with `code`.
fn json_out(o: &Output, code: i32) -> Value {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON line")
}

const AGENT: &str = "function main({ n: 1 }) {\n  console.log('n=' + n)\n  if (n < 0) {\n    Error('negative')\n  }\n  return { twice: n * 2 }\n}";

#[test]
fn compile_here_run_there() {
    let d = Dir::new("roundtrip");
    let p = Runner::compile_agent(AGENT, &Options::default()).unwrap();
    let (stripped, sidecar) = p.to_stripped_bytes();
    let full = d.write("a.ajsb", &p.to_bytes());
    let bare = d.write("s.ajsb", &stripped);
    let spans = d.write("s.ajsb.spans", &sidecar.unwrap());
    let v = json_out(
        &ajs_run(&["exec", &full, "--args", r#"{"n": 21}"#, "--log"]),
        0,
    );
    assert_eq!(v["result"], json!({ "twice": 42 }));
    assert_eq!(v["log"][0]["message"], "n=21");
    let v = json_out(&ajs_run(&["exec", &bare, "--args", r#"{"n": -1}"#]), 1);
    assert_eq!(v["error"]["message"], "negative");
    assert!(v["error"].get("line").is_none(), "stripped: no position");
    let v = json_out(
        &ajs_run(&["exec", &bare, "--args", r#"{"n": -1}"#, "--spans", &spans]),
        1,
    );
    assert_eq!(v["error"]["line"], 4);
    let v = json_out(
        &ajs_run(&["exec", &full, "--fuel", "0.1", "--timeout-ms", "1000"]),
        1,
    );
    assert_eq!(v["error"]["kind"], "outOfFuel");
    // arguments the signature refuses: input refused, nothing ran
    let v = json_out(&ajs_run(&["exec", &full, "--args", r#"{"n": "x"}"#]), 3);
    assert_eq!(v["error"]["kind"], "input", "{v}");
    assert_eq!(v["fuelUsed"], 0, "{v}");
}

#[test]
fn an_artifact_refuses_a_nested_argument_by_its_path() {
    let d = Dir::new("nested-args");
    let src = "function main({ orders: [{ total: 1, lines: [{ 'unit price': 2 }] }] }) {\n  return { n: orders.length }\n}";
    let p = Runner::compile_agent(src, &Options::default()).unwrap();
    let (stripped, _) = p.to_stripped_bytes();
    let bare = d.write("n.ajsb", &stripped);
    for (args, want) in [
        (
            r#"{"orders": [{"total": "5"}]}"#,
            "Argument 'orders': orders[0].total must be a number, got string",
        ),
        (
            r#"{"orders": [{"total": 5}, {"lines": [{"unit price": "2"}]}]}"#,
            r#"Argument 'orders': orders[1].lines[0]["unit price"] must be a number, got string"#,
        ),
        (
            r#"{"orders": {"total": 5}}"#,
            "Argument 'orders' must be an array of object, got object",
        ),
    ] {
        let v = json_out(&ajs_run(&["exec", &bare, "--args", args]), 3);
        assert_eq!(v["error"]["message"], want, "{v}");
        assert_eq!(v["fuelUsed"], 0, "{v}");
    }
    let ok = r#"{"orders": [{"total": 5, "lines": [{"unit price": 2}]}]}"#;
    let v = json_out(&ajs_run(&["exec", &bare, "--args", ok]), 0);
    assert_eq!(v["result"], json!({ "n": 1 }));
}

#[test]
fn tampered_or_foreign_artifacts_are_refused() {
    let d = Dir::new("tamper");
    let bytes = Runner::compile_agent(AGENT, &Options::default())
        .unwrap()
        .to_bytes();
    let mut cost = bytes.clone();
    cost[6] = cost[6].wrapping_add(1);
    let path = d.write("cost.ajsb", &cost);
    let v = json_out(&ajs_run(&["exec", &path]), 3);
    assert_eq!(v["error"]["kind"], "artifactRefused", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(&format!(
            "cost-table version {} does not match this build's cost table version {}",
            cost[6], bytes[6]
        )),
        "{v}"
    );
    assert!(v.get("fuelUsed").is_none(), "nothing ran: {v}");
    let mut body = bytes.clone();
    let last = body.len() - 1;
    body[last] ^= 0xff;
    body.truncate(last - 2);
    let path = d.write("cut.ajsb", &body);
    let v = json_out(&ajs_run(&["exec", &path]), 3);
    assert_eq!(v["error"]["kind"], "artifactRefused", "{v}");

    let opts = Options {
        capabilities: ajs::Capabilities::default().with_atom("lookup", |v| async move { Ok(v) }),
        ..Options::default()
    };
    let p = Runner::compile_agent("function main() { return lookup({}) }", &opts).unwrap();
    let path = d.write("atom.ajsb", &p.to_bytes());
    let v = json_out(&ajs_run(&["exec", &path]), 3);
    assert_eq!(
        v,
        json!({ "error": { "kind": "atomRefused", "message": "This program calls the atom 'lookup', which this runner does not provide" } })
    );
}

/// `ajs-run` under a 1 GiB address-space limit: a reader without a cap dies instead of taking
/// the machine's memory.
fn ajs_run_bounded(args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_ajs-run"))
        .args(args)
        .output()
        .expect("runs ajs-run")
}

#[test]
fn every_file_read_is_capped() {
    let d = Dir::new("caps");
    let artifact = d.write(
        "a.ajsb",
        &Runner::compile_agent(AGENT, &Options::default())
            .unwrap()
            .to_bytes(),
    );
    let cases: [(&[&str], i32, &str); 4] = [
        (&["exec", "/dev/urandom"], 3, "MAX_ARTIFACT_BYTES"),
        (
            &["exec", &artifact, "--spans", "/dev/zero"],
            3,
            "MAX_ARTIFACT_BYTES",
        ),
        (&["exec", "/nonexistent.ajsb"], 2, "cannot read"),
        (
            &["exec", &artifact, "--config", "/dev/zero"],
            2,
            "MAX_CONFIG_BYTES",
        ),
    ];
    for (args, code, limit) in cases {
        let o = ajs_run_bounded(args);
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {out}{err}");
        if code == 3 {
            // refused input: the JSON line, kind tooLarge, naming the limit
            let v: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["error"]["kind"], "tooLarge", "{v}");
            let m = v["error"]["message"].as_str().unwrap();
            assert!(m.contains(limit) && m.contains("limit"), "{args:?}: {m}");
        } else {
            // bad usage: a message on stderr, nothing on stdout
            assert!(out.is_empty(), "{args:?}: {out}");
            assert!(err.contains(limit), "{args:?}: {err}");
        }
    }
}

#[test]
fn version_help_and_usage_errors() {
    let o = ajs_run(&["--version"]);
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("ajs-run {}", env!("CARGO_PKG_VERSION"))
    );
    for args in [&["exec", "--help"][..], &["help", "exec"][..]] {
        let o = ajs_run(args);
        assert!(o.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("Usage: ajs-run exec"), "{text}");
        assert!(text.contains("--spans") && text.contains("--log"), "{text}");
        assert!(!text.contains("--listen"), "exec's help alone: {text}");
    }
    let o = ajs_run(&["serve", "--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--listen"));
    for args in [
        &["exec"][..],
        &["exec", "a.ajsb", "--bogus"][..],
        &["exec", "a.ajsb", "--timeout-ms", "0"][..],
        &["frobnicate"][..],
    ] {
        let o = ajs_run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    use std::os::unix::ffi::OsStrExt;
    let o = Command::new(env!("CARGO_BIN_EXE_ajs-run"))
        .arg("exec")
        .arg(std::ffi::OsStr::from_bytes(b"\xff.ajsb"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

/// A limit of 0 is refused, on the command line and in a configuration, never "unlimited".
#[test]
fn a_limit_of_zero_is_bad_usage() {
    let d = Dir::new("zero");
    let cfg = d.write("zero.json", br#"{"limits": {"maxSourceBytes": 0}}"#);
    let artifact = d.write(
        "a.ajsb",
        &Runner::compile_agent(AGENT, &Options::default())
            .unwrap()
            .to_bytes(),
    );
    for args in [
        &["exec", &artifact, "--config", &cfg][..],
        &["serve", "--config", &cfg][..],
        &["exec", &artifact, "--timeout-ms", "0"][..],
    ] {
        let o = ajs_run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("must be at least 1"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// A closed stdout ends `ajs-run exec` quietly with the run's exit code.
#[test]
fn a_closed_stdout_is_a_quiet_exit() {
    let d = Dir::new("closed");
    let p = Runner::compile_agent(
        "function main() { return { s: 'x'.repeat(1000000) } }",
        &Options::default(),
    )
    .unwrap();
    let path = d.write("big.ajsb", &p.to_bytes());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ajs-run"))
        .args(["exec", &path, "--fuel", "1e6"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Defaults and fetch entries of the configuration (`ajs_runner::config`), directly.
mod configuration {

    use ajs_runner::config::*;

    #[test]
    fn commands_use_the_library_timeout_and_serve_its_own() {
        let c = ServerConfig::default();
        assert_eq!(c.command_options().timeout_ms, ajs::DEFAULT_TIMEOUT_MS);
        assert_eq!(ajs::DEFAULT_TIMEOUT_MS, 240_000);
        assert_eq!(c.base_options().timeout_ms, SERVE_DEFAULT_TIMEOUT_MS);
        assert_eq!(c.command_options().fuel, ajs::DEFAULT_FUEL);
        let c = ServerConfig::parse(r#"{"limits": {"defaultTimeoutMs": 5000}}"#, false).unwrap();
        assert_eq!(c.command_options().timeout_ms, 5000);
        assert_eq!(c.base_options().timeout_ms, 5000);
        assert!(ServerConfig::parse(r#"{"limits": {"defaultTimeoutMs": 0}}"#, false).is_err());
    }

    #[test]
    fn fetch_entries_are_checked_when_the_configuration_loads() {
        let e = ServerConfig::parse(
            r#"{"fetch": {"domains": ["https://api.example.com"]}}"#,
            false,
        )
        .unwrap_err();
        assert!(
            e.starts_with("fetch.domains: entry 'https://api.example.com' is a URL"),
            "{e}"
        );
        let e =
            ServerConfig::parse(r#"{"fetch": {"allowAddresses": ["10/8"]}}"#, false).unwrap_err();
        assert!(e.starts_with("fetch.allowAddresses: range '10/8'"), "{e}");
        let c = ServerConfig::parse(
            r#"{"fetch": {"domains": ["api.example.com:8443", "*.example.org"], "allowAddresses": ["10.0.0.0/8"]}}"#,
            false,
        )
        .unwrap();
        assert_eq!(
            c.fetch_policy().allow_addresses,
            vec!["10.0.0.0/8".to_string()]
        );
    }
}
