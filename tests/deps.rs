//! The VM must stay pure: no parser, no async runtime, no network stack in its dependency tree.

/// The output of `cargo ARGS` (offline) run in the workspace, which must succeed.
fn cargo(args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(args)
        .arg("--offline")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn vm_links_no_parser_runtime_or_network() {
    let out = cargo(&["tree", "-p", "ajs-vm", "-e", "normal", "--prefix", "none"]);
    let tree = String::from_utf8_lossy(&out);
    assert!(tree.contains("ajs-vm"), "{tree}");
    for banned in ["oxc", "tokio", "hyper", "rustls"] {
        assert!(
            !tree.lines().any(|l| l.starts_with(banned)),
            "ajs-vm depends on {banned}:\n{tree}"
        );
    }
}

/// The artifact runner must stay parser-free: no oxc (and no compiler) in its dependency tree.
#[test]
fn runner_links_no_parser() {
    let out = cargo(&[
        "tree",
        "-p",
        "ajs-runner",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]);
    let tree = String::from_utf8_lossy(&out);
    assert!(tree.contains("ajs-runner"), "{tree}");
    assert!(tree.lines().any(|l| l.starts_with("ajs-vm")), "{tree}");
    for banned in ["oxc", "ajs-compiler"] {
        assert!(
            !tree.lines().any(|l| l.starts_with(banned)),
            "ajs-runner depends on {banned}:\n{tree}"
        );
    }
}

/// A crate whose targets all have `test = false` builds no unit-test binary (which keeps the
/// workspace's test binaries few): a `#[test]` written in it would never run, so there is none.
#[test]
fn crates_without_a_unit_test_binary_have_no_unit_tests() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut untested = 0;
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let dir = entry.expect("readable crates/").path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        // each `[lib]` / `[[bin]]` section, and whether it says `test = false`
        let mut targets = Vec::new();
        for section in manifest.split("\n[").skip(1) {
            let head = section.lines().next().unwrap_or_default();
            if head == "lib]" || head == "[bin]]" {
                targets.push(section.lines().any(|l| l.trim() == "test = false"));
            }
        }
        let has_lib = dir.join("src/lib.rs").exists();
        let declares_lib = manifest.contains("\n[lib]");
        if targets.is_empty() || targets.contains(&false) || (has_lib && !declares_lib) {
            continue;
        }
        untested += 1;
        let mut stack = vec![dir.join("src")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("readable src/") {
                let p = e.expect("readable entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let src = std::fs::read_to_string(&p).expect("UTF-8 source");
                    assert!(
                        !src.contains("#[test]") && !src.contains("#[cfg(test)]"),
                        "{} has unit tests, but its crate's targets say `test = false` (they would \
                         never run): put them in the root tests (tests/*.rs) instead",
                        p.display()
                    );
                }
            }
        }
    }
    assert!(
        untested >= 2,
        "only {untested} crates without unit tests found (io, runner)"
    );
}

/// No published crate offers a Cargo feature that switches a limit off: any crate in a user's
/// tree could enable it (features unify), and fuel, timeout and cancellation would go unenforced
/// for everyone. Metering is measured with `--cfg ajs_unmetered` instead (benches/README.md).
/// Every feature is either on this list, reviewed as keeping every limit, or the test fails.
#[test]
fn no_crate_offers_a_feature_that_disables_a_limit() {
    const REVIEWED: &[(&str, &str)] = &[
        ("ajs", "default"),
        ("ajs", "compiler"),
        ("ajs", "http"),
        ("ajs", "store-sqlite"),
        ("ajs", "store-postgres"),
        ("ajs-compiler", "check-calls"),
        ("ajs-io", "default"),
        ("ajs-io", "client"),
        ("ajs-runner", "default"),
        ("ajs-runner", "jemalloc"),
        ("ajs-runner", "source"),
        ("ajs-runner", "store-sqlite"),
        ("ajs-runner", "store-postgres"),
    ];
    const DENIED: &[&str] = &[
        "unmetered",
        "unlimited",
        "unbounded",
        "no-fuel",
        "nofuel",
        "no-limit",
        "nolimit",
        "no-timeout",
        "unchecked",
        "unsafe",
        "insecure",
        "danger",
    ];
    let out = cargo(&["metadata", "--no-deps", "--format-version", "1"]);
    let meta: serde_json::Value = serde_json::from_slice(&out).expect("metadata is JSON");
    let packages = meta["packages"].as_array().expect("packages");
    assert!(packages.iter().any(|p| p["name"] == "ajs-vm"), "{meta}");
    for p in packages {
        let name = p["name"].as_str().unwrap_or_default();
        for feature in p["features"].as_object().expect("features").keys() {
            let lower = feature.to_ascii_lowercase();
            assert!(
                !DENIED.iter().any(|d| lower.contains(d)),
                "{name} offers the feature `{feature}`, which reads as switching a limit off"
            );
            assert!(
                REVIEWED.contains(&(name, feature.as_str())),
                "{name} offers the unreviewed feature `{feature}`: check it keeps every limit, \
                 then add it to REVIEWED in tests/deps.rs"
            );
        }
    }
}

/// Issue 32: the run stores are features; the facade's default build links no database driver.
#[test]
fn ajs_links_no_database_unless_a_store_feature_asks() {
    let out = cargo(&["tree", "-p", "ajs", "-e", "normal", "--prefix", "none"]);
    let tree = String::from_utf8_lossy(&out);
    assert!(tree.lines().any(|l| l.starts_with("ajs-vm")), "{tree}");
    for banned in [
        "rusqlite",
        "libsqlite3-sys",
        "tokio-postgres",
        "postgres-protocol",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(banned)),
            "ajs's default build depends on {banned}:\n{tree}"
        );
    }
    let out = cargo(&[
        "tree",
        "-p",
        "ajs",
        "--features",
        "store-sqlite,store-postgres",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]);
    let tree = String::from_utf8_lossy(&out);
    for needed in ["rusqlite", "tokio-postgres"] {
        assert!(tree.lines().any(|l| l.starts_with(needed)), "{tree}");
    }
}

/// Issue 31: a minimal embedder (`default-features = false, features = ["compiler"]`) links no
/// HTTP stack, no TLS and no tokio network code: the built-in clients are the `http` feature.
#[test]
fn ajs_without_the_http_feature_links_no_http_or_tls() {
    let out = cargo(&[
        "tree",
        "-p",
        "ajs",
        "--no-default-features",
        "--features",
        "compiler",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]);
    let tree = String::from_utf8_lossy(&out);
    assert!(tree.lines().any(|l| l.starts_with("oxc_parser")), "{tree}");
    for banned in [
        "hyper",
        "rustls",
        "ring ",
        "tokio-rustls",
        "webpki",
        "rusqlite",
        "libsqlite3-sys",
        "tokio-postgres",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(banned)),
            "ajs without `http` depends on {banned}:\n{tree}"
        );
    }
}
