//! The VM must stay pure: no parser, no async runtime, no network stack in its dependency tree.

#[test]
fn vm_links_no_parser_runtime_or_network() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "ajs-vm",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
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
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "ajs-runner",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
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
