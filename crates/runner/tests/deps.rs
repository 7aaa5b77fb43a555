//! The artifact runner must stay parser-free: no oxc (and no compiler) in its dependency tree.

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
