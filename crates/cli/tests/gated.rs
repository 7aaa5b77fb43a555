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
        r#"{"fetch": {"domains": ["127.0.0.1"]}}"#,
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
