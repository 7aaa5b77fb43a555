//! `ajs run --policy … --snapshot-out`, `ajs resume`, `ajs replay` across processes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn ajs(dir: &PathBuf, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A loopback HTTP server answering every request with `{"v": 7}`; counts requests.
fn server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            h.fetch_add(1, Ordering::SeqCst);
            let body = "{\"v\": 7}";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, hits)
}

/// Removes a test's scratch directory when the test ends (kept when it failed, to look at).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn setup(name: &str) -> (PathBuf, Arc<AtomicUsize>) {
    let dir = std::env::temp_dir().join(format!("ajs-gated-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (port, hits) = server();
    let agent = format!(
        "function main({{ n = 2 }}) {{\n  let a = httpFetch({{ url: 'http://127.0.0.1:{port}/a' }})\n  let b = httpFetch({{ url: 'http://127.0.0.1:{port}/b' }})\n  return {{ total: a.v + b.v + n }}\n}}\n"
    );
    std::fs::write(dir.join("agent.ajs"), agent).unwrap();
    std::fs::write(
        dir.join("cfg.json"),
        r#"{"fetch": {"domains": ["127.0.0.1:*"]}}"#,
    )
    .unwrap();
    (dir, hits)
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("{e}: {s}"))
}

#[test]
fn pause_resume_in_new_processes_matches_an_unpaused_run() {
    let (dir, hits) = setup("pause");
    let _cleanup = Cleanup(dir.clone());
    let (_, plain, _) = ajs(&dir, &["run", "agent.ajs", "--config", "cfg.json"]);
    let plain = json(&plain);
    assert_eq!(plain["result"]["total"], 16);
    assert_eq!(hits.load(Ordering::SeqCst), 2);

    let (code, out, err) = ajs(
        &dir,
        &[
            "run",
            "agent.ajs",
            "--config",
            "cfg.json",
            "--policy",
            "httpFetch=pause",
            "--snapshot-out",
            "s1.snap",
            "--journal-out",
            "j",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["status"], "suspended");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "nothing was fetched before the decision"
    );
    let (_, out, err) = ajs(
        &dir,
        &[
            "resume",
            "s1.snap",
            "--approve",
            "--config",
            "cfg.json",
            "--snapshot-out",
            "s2.snap",
            "--journal-out",
            "j",
        ],
    );
    assert_eq!(json(&out)["pending"][0]["atom"], "httpFetch", "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    let (_, out, err) = ajs(
        &dir,
        &[
            "resume",
            "s2.snap",
            "--approve",
            "--config",
            "cfg.json",
            "--journal-out",
            "run.journal",
        ],
    );
    let out = json(&out);
    assert_eq!(out["result"], plain["result"], "{err}");
    assert_eq!(out["fuelUsed"], plain["fuelUsed"], "fuel continues exactly");
    assert_eq!(hits.load(Ordering::SeqCst), 4, "each call made once");

    // the journal replays offline, with no request
    let (code, out, _) = ajs(
        &dir,
        &[
            "replay",
            "agent.ajs",
            "--config",
            "cfg.json",
            "--journal",
            "run.journal",
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(json(&out)["result"]["total"], 16);
    assert_eq!(hits.load(Ordering::SeqCst), 4);
    // other arguments do not match the journal: refused before anything runs
    let (code, out, _) = ajs(
        &dir,
        &[
            "replay",
            "agent.ajs",
            "--config",
            "cfg.json",
            "--journal",
            "run.journal",
            "--args",
            "{\"n\": 3}",
        ],
    );
    assert_eq!(code, 3, "{out}");
    assert_eq!(json(&out)["error"]["kind"], "journalRefused", "{out}");
}

#[test]
fn edited_snapshots_and_journals_are_refused() {
    let (dir, _) = setup("tamper");
    let _cleanup = Cleanup(dir.clone());
    let (_, out, _) = ajs(
        &dir,
        &[
            "run",
            "agent.ajs",
            "--config",
            "cfg.json",
            "--policy",
            "httpFetch=pause",
            "--snapshot-out",
            "s.snap",
        ],
    );
    assert_eq!(json(&out)["status"], "suspended");
    let mut bytes = std::fs::read(dir.join("s.snap")).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 1;
    std::fs::write(dir.join("bad.snap"), &bytes).unwrap();
    let (code, out, err) = ajs(
        &dir,
        &["resume", "bad.snap", "--approve", "--config", "cfg.json"],
    );
    assert_eq!(code, 3, "input refused: {err}");
    assert_eq!(json(&out)["error"]["kind"], "snapshotRefused");
    assert!(
        json(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("refused"),
        "{out}"
    );
    // a denied call is a catchable error in the guest; here uncaught: the run failed
    let (code, out, _) = ajs(
        &dir,
        &["resume", "s.snap", "--deny", "--config", "cfg.json"],
    );
    assert_eq!(
        json(&out)["error"]["message"],
        "Call to 'httpFetch' denied by policy"
    );
    assert_eq!(code, 1);

    let (_, _, _) = ajs(
        &dir,
        &[
            "run",
            "agent.ajs",
            "--config",
            "cfg.json",
            "--journal-out",
            "ok.journal",
        ],
    );
    let mut j = std::fs::read(dir.join("ok.journal")).unwrap();
    let at = j.len() / 2;
    j[at] ^= 0x20;
    std::fs::write(dir.join("bad.journal"), &j).unwrap();
    let (code, out, _) = ajs(
        &dir,
        &[
            "replay",
            "agent.ajs",
            "--config",
            "cfg.json",
            "--journal",
            "bad.journal",
        ],
    );
    // the library reports a broken chain as the first call that differs: the run failed
    assert_eq!(code, 1, "an edited journal never replays clean: {out}");
    assert_eq!(json(&out)["error"]["kind"], "replayMismatch", "{out}");
}

#[test]
fn a_parallel_batch_pauses_and_a_nonce_dir_makes_resume_single_use_across_processes() {
    let (dir, hits) = setup("parallel");
    let _cleanup = Cleanup(dir.clone());
    let agent = std::fs::read_to_string(dir.join("agent.ajs")).unwrap();
    let url = agent
        .split('\'')
        .find(|s| s.starts_with("http://"))
        .unwrap()
        .trim_end_matches("/a")
        .to_string();
    std::fs::write(
        dir.join("par.ajs"),
        format!(
            "function main({{ paths: ['a'] }}) {{\n  let rs = parallel(paths.map(p => httpFetch({{ url: '{url}/' + p }})))\n  return {{ total: rs.reduce((s, r) => s + r.v, 0) }}\n}}\n"
        ),
    )
    .unwrap();
    let args = r#"{"paths": ["a", "b", "c"]}"#;
    let (_, plain, err) = ajs(
        &dir,
        &["run", "par.ajs", "--config", "cfg.json", "--args", args],
    );
    assert_eq!(json(&plain)["result"]["total"], 21, "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 3);

    let (code, out, err) = ajs(
        &dir,
        &[
            "run",
            "par.ajs",
            "--config",
            "cfg.json",
            "--args",
            args,
            "--policy",
            "httpFetch=pause",
            "--snapshot-out",
            "p.snap",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let out = json(&out);
    assert_eq!(out["status"], "suspended");
    assert_eq!(
        out["pending"].as_array().unwrap().len(),
        3,
        "the whole batch is pending"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        3,
        "nothing fetched before the decision"
    );

    let resume = || {
        ajs(
            &dir,
            &[
                "resume",
                "p.snap",
                "--approve",
                "--config",
                "cfg.json",
                "--nonce-dir",
                "nonces",
            ],
        )
    };
    let (code, out, err) = resume();
    assert_eq!(code, 0, "{err}");
    let out = json(&out);
    assert_eq!(out["result"], json(&plain)["result"]);
    assert_eq!(out["fuelUsed"], json(&plain)["fuelUsed"]);
    assert_eq!(hits.load(Ordering::SeqCst), 6, "each call made once");
    let (code, out, err) = resume();
    assert_eq!(code, 3, "a second resume is refused: {err}");
    assert_eq!(json(&out)["error"]["kind"], "snapshotRefused");
    assert!(out.contains("already"), "{out}");
    assert_eq!(hits.load(Ordering::SeqCst), 6);
}

#[test]
fn an_unknown_literal_input_is_warned_at_compile_time_and_the_call_still_runs() {
    let (dir, hits) = setup("warn");
    let _cleanup = Cleanup(dir.clone());
    let port = std::fs::read_to_string(dir.join("agent.ajs"))
        .unwrap()
        .split("127.0.0.1:")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    std::fs::write(
        dir.join("warn.ajs"),
        format!("function main() {{\n  let r = httpFetch({{ url: 'http://127.0.0.1:{port}/w', header: {{ accept: 'x' }}, cache: 3600 }})\n  return {{ v: r.v }}\n}}\n"),
    )
    .unwrap();
    let (code, out, err) = ajs(&dir, &["run", "warn.ajs", "--config", "cfg.json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["result"]["v"], 7, "{out}");
    assert!(
        json(&out).get("warnings").is_none(),
        "printed once, at compile time: {out}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the call ran");
    assert!(
        err.contains("warning: httpFetch: input 'header' is not known and is ignored (inputs: url, method, headers, body, responseType) at warn.ajs:2:"),
        "{err}"
    );
    assert!(
        err.contains("warning: httpFetch: input 'cache' is not known and is ignored"),
        "{err}"
    );
    let (code, _, err) = ajs(&dir, &["compile", "warn.ajs", "-o", "warn.ajsc"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: httpFetch: input 'header'"), "{err}");
}

fn ajs_with_key(dir: &PathBuf, key: &str, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ajs"))
        .args(args)
        .env("AJS_TEST_BUNDLE_KEY", key)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Replaces `from` by `to` (the same length) in a file's bytes.
fn edit_file(path: &PathBuf, out: &PathBuf, from: &[u8], to: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .unwrap_or_else(|| panic!("{} not in the file", String::from_utf8_lossy(from)));
    bytes[at..at + to.len()].copy_from_slice(to);
    std::fs::write(out, bytes).unwrap();
}

#[test]
fn a_keyed_bundle_with_its_policy_edited_to_allow_is_refused() {
    let (dir, hits) = setup("keyed");
    let _cleanup = Cleanup(dir.clone());
    let key = "k".repeat(32);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "agent.ajs",
            "--config",
            "cfg.json",
            "--policy",
            "httpFetch=pause",
        ];
        args.extend_from_slice(extra);
        ajs_with_key(&dir, &key, &args)
    };
    let (code, out, err) = run(&[
        "--snapshot-out",
        "k.snap",
        "--key-env",
        "AJS_TEST_BUNDLE_KEY",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["status"], "suspended");
    // the issue's attack: pause becomes allow, so the second call would run unapproved
    edit_file(
        &dir.join("k.snap"),
        &dir.join("allow.snap"),
        br#""httpFetch":"pause""#,
        br#""httpFetch":"allow""#,
    );
    let resume = |file: &str, key_env: bool| {
        let mut args = vec!["resume", file, "--approve", "--config", "cfg.json"];
        if key_env {
            args.extend_from_slice(&["--key-env", "AJS_TEST_BUNDLE_KEY"]);
        }
        ajs_with_key(&dir, &key, &args)
    };
    let (code, out, err) = resume("allow.snap", true);
    assert_eq!(code, 3, "input refused: {out} {err}");
    assert_eq!(json(&out)["error"]["kind"], "snapshotRefused", "{out}");
    assert!(out.contains("integrity check failed"), "{out}");
    // the timeout in the settings is under the MAC as well
    edit_file(
        &dir.join("k.snap"),
        &dir.join("slow.snap"),
        b"\"timeoutMs\":240000",
        b"\"timeoutMs\":999999",
    );
    let (code, out, _) = resume("slow.snap", true);
    assert_eq!(code, 3, "{out}");
    // without the key, a keyed bundle is refused, saying what to give
    let (code, out, _) = resume("k.snap", false);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("keyed") && out.contains("--key-env"), "{out}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing ran unapproved");
    // the untouched bundle resumes, and the policy still pauses the second call
    let (code, out, err) = resume("k.snap", true);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["status"], "suspended", "{out}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // an unkeyed bundle resumed with a key is refused: it may have been edited by anyone
    let (code, _, err) = run(&["--snapshot-out", "plain.snap"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = resume("plain.snap", true);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("not keyed") && out.contains("without --key-env"),
        "{out}"
    );
    // a key shorter than MIN_KEY_BYTES is bad usage
    let (code, _, err) = ajs_with_key(
        &dir,
        "short",
        &[
            "run",
            "agent.ajs",
            "--config",
            "cfg.json",
            "--policy",
            "httpFetch=pause",
            "--key-env",
            "AJS_TEST_BUNDLE_KEY",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at least 32"), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

/// A bundle `ajs run` wrote, keyed with `key` (or not).
fn saved_bundle(name: &str, key: Option<&str>) -> (PathBuf, Arc<AtomicUsize>, Vec<u8>) {
    let (dir, hits) = setup(name);
    let mut args = vec![
        "run",
        "agent.ajs",
        "--config",
        "cfg.json",
        "--policy",
        "httpFetch=pause",
        "--snapshot-out",
        "s.snap",
    ];
    if key.is_some() {
        args.extend_from_slice(&["--key-env", "AJS_TEST_BUNDLE_KEY"]);
    }
    let (code, out, err) = ajs_with_key(&dir, key.unwrap_or(""), &args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["status"], "suspended");
    let bytes = std::fs::read(dir.join("s.snap")).unwrap();
    (dir, hits, bytes)
}

#[test]
fn every_byte_flip_of_a_keyed_bundle_is_refused() {
    let key = "0123456789abcdef".repeat(2);
    let (dir, _, sealed) = saved_bundle("flip", Some(&key));
    let _cleanup = Cleanup(dir.clone());
    let k = ajs::BundleKey::new(key.as_bytes()).unwrap();
    let b = ajs::Bundle::open(&sealed, Some(&k)).expect("the bundle as written opens");
    assert_eq!(
        b.policies,
        vec![("httpFetch".to_string(), ajs::Policy::Pause)]
    );
    for i in 0..sealed.len() {
        for bit in [0x01u8, 0x10, 0x80] {
            let mut edited = sealed.clone();
            edited[i] ^= bit;
            assert!(
                ajs::Bundle::open(&edited, Some(&k)).is_err(),
                "flipping bit {bit:#x} of byte {i} of {} was accepted",
                sealed.len()
            );
        }
    }
    for n in 0..sealed.len() {
        assert!(
            ajs::Bundle::open(&sealed[..n], Some(&k)).is_err(),
            "cut at {n}"
        );
    }
}

#[test]
fn an_unkeyed_bundle_protects_against_accidents_only() {
    let (dir, hits, plain) = saved_bundle("unkeyed", None);
    let _cleanup = Cleanup(dir.clone());
    // an accident (one flipped bit) is caught
    for i in [0, plain.len() / 3, plain.len() / 2, plain.len() - 1] {
        let mut b = plain.clone();
        b[i] ^= 0x04;
        assert!(ajs::Bundle::open(&b, None).is_err(), "byte {i}");
    }
    // but anyone who can write the file can edit it and recompute the hash: the policy
    // becomes allow, and the second call runs without a decision
    let mut b = ajs::Bundle::open(&plain, None).unwrap();
    b.policies = vec![("httpFetch".into(), ajs::Policy::Allow)];
    std::fs::write(dir.join("edited.snap"), b.seal(None)).unwrap();
    let (code, out, err) = ajs(
        &dir,
        &["resume", "edited.snap", "--approve", "--config", "cfg.json"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["result"]["total"], 16, "{out}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "the second call ran unapproved"
    );
    // whoever resumes with a key refuses it (and so does the server, which always keys)
    let (code, out, _) = ajs_with_key(
        &dir,
        &"k".repeat(32),
        &[
            "resume",
            "edited.snap",
            "--approve",
            "--config",
            "cfg.json",
            "--key-env",
            "AJS_TEST_BUNDLE_KEY",
        ],
    );
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("not keyed"), "{out}");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[test]
fn a_resumed_run_keeps_the_settings_it_was_saved_with() {
    let (dir, _) = setup("settings");
    let _cleanup = Cleanup(dir.clone());
    let agent = std::fs::read_to_string(dir.join("agent.ajs")).unwrap();
    let url = agent
        .split('\'')
        .find(|s| s.starts_with("http://"))
        .unwrap();
    std::fs::write(
        dir.join("spin.ajs"),
        format!("function main() {{\n  let a = httpFetch({{ url: '{url}' }})\n  let i = 0\n  while (true) {{ i++ }}\n}}\n"),
    )
    .unwrap();
    let (code, out, err) = ajs(
        &dir,
        &[
            "run",
            "spin.ajs",
            "--config",
            "cfg.json",
            "--policy",
            "httpFetch=pause",
            "--fuel",
            "1e9",
            "--timeout-ms",
            "1000",
            "--snapshot-out",
            "t.snap",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["status"], "suspended");
    // the configuration's default timeout (4 minutes) does not replace the saved one
    let t = std::time::Instant::now();
    let (code, out, err) = ajs(
        &dir,
        &["resume", "t.snap", "--approve", "--config", "cfg.json"],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(json(&out)["error"]["kind"], "timeout", "{out}");
    assert!(out.contains("1000ms"), "{out}");
    assert!(t.elapsed() < std::time::Duration::from_secs(20));
}
