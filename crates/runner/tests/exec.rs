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

fn json_out(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
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
    let v = json_out(&ajs_run(&[
        "exec",
        &full,
        "--args",
        r#"{"n": 21}"#,
        "--log",
    ]));
    assert_eq!(v["result"], json!({ "twice": 42 }));
    assert_eq!(v["log"][0]["message"], "n=21");
    let v = json_out(&ajs_run(&["exec", &bare, "--args", r#"{"n": -1}"#]));
    assert_eq!(v["error"]["message"], "negative");
    assert!(v["error"].get("line").is_none(), "stripped: no position");
    let v = json_out(&ajs_run(&[
        "exec",
        &bare,
        "--args",
        r#"{"n": -1}"#,
        "--spans",
        &spans,
    ]));
    assert_eq!(v["error"]["line"], 4);
    let v = json_out(&ajs_run(&[
        "exec",
        &full,
        "--fuel",
        "0.1",
        "--timeout-ms",
        "1000",
    ]));
    assert_eq!(v["error"]["kind"], "outOfFuel");
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
    let o = ajs_run(&["exec", &path]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "cost-table version {} does not match this build's cost table version {}",
            cost[6], bytes[6]
        )),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "nothing ran");
    let mut body = bytes.clone();
    let last = body.len() - 1;
    body[last] ^= 0xff;
    body.truncate(last - 2);
    let path = d.write("cut.ajsb", &body);
    let o = ajs_run(&["exec", &path]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());

    let opts = Options {
        capabilities: ajs::Capabilities::default().with_atom("lookup", |v| async move { Ok(v) }),
        ..Options::default()
    };
    let p = Runner::compile_agent("function main() { return lookup({}) }", &opts).unwrap();
    let path = d.write("atom.ajsb", &p.to_bytes());
    let o = ajs_run(&["exec", &path]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("This program calls the atom 'lookup', which this runner does not provide"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty());
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
    let cases: [(&[&str], i32, &str); 3] = [
        (&["exec", "/dev/urandom"], 1, "MAX_ARTIFACT_BYTES"),
        (
            &["exec", &artifact, "--spans", "/dev/zero"],
            1,
            "MAX_ARTIFACT_BYTES",
        ),
        (
            &["exec", &artifact, "--config", "/dev/zero"],
            2,
            "MAX_CONFIG_BYTES",
        ),
    ];
    for (args, code, limit) in cases {
        let o = ajs_run_bounded(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            err.contains(limit) && err.contains("limit"),
            "{args:?}: {err}"
        );
    }
}
