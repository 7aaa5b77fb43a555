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
