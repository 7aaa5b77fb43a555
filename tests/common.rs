//! Helpers shared by the workspace-level suites.
#![allow(dead_code)]

use ajs::{Eval, Options, Outcome};
use serde_json::Value;

/// Runs a snippet with `Eval` on a fresh current-thread runtime.
pub fn eval(code: &str, context: Value) -> Outcome {
    eval_with(code, context, Options::default())
}

/// Runs a snippet with options.
pub fn eval_with(code: &str, context: Value, options: Options) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(Eval::new(code).context(context).options(options).run())
}

/// The result as JSON (`None` for undefined), panicking with the error if the run failed.
pub fn ok(code: &str, context: Value) -> Option<Value> {
    let out = eval(code, context);
    if let Some(e) = &out.error {
        panic!("`{code}` failed: {}", e.message);
    }
    out.result.to_json()
}

/// The error message, panicking if the run succeeded.
pub fn err(code: &str, context: Value) -> String {
    let out = eval(code, context);
    match out.error {
        Some(e) => e.message,
        None => panic!("`{code}` succeeded with {:?}", out.result),
    }
}

/// How a differential case is given to Node.
#[derive(Clone, Copy)]
pub enum Form {
    /// One expression.
    Expression,
    /// Statements ending in a `return`, run by Node inside a function.
    Block,
}

/// Runs every case in one Node process and in the VM (as `Eval` with an empty context) and
/// requires identical JSON results.
pub fn compare_with_node(cases: &[&str], form: Form) {
    let script: String = cases
        .iter()
        .map(|c| match form {
            Form::Expression => format!("console.log(JSON.stringify([({c})]));\n"),
            Form::Block => format!("console.log(JSON.stringify([(function () {{\n{c}\n}})()]));\n"),
        })
        .collect();
    let node = std::process::Command::new("node")
        .arg("-e")
        .arg(&script)
        .output()
        .expect("node is installed (CI installs Node 20)");
    assert!(
        node.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&node.stderr)
    );
    let lines: Vec<String> = String::from_utf8_lossy(&node.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), cases.len());
    let mut failures = Vec::new();
    for (c, want) in cases.iter().zip(lines) {
        let out = eval(c, serde_json::json!({}));
        let got = serde_json::json!([out.result.to_json().unwrap_or(Value::Null)]);
        let want: Value = serde_json::from_str(&want).expect("node prints JSON");
        if out.error.is_some() || got != want {
            failures.push(format!(
                "{c:?}: node {want}, ajs {got} {:?}",
                out.error.map(|e| e.message)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} differ from Node:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Compiles an agent program that may call `atoms`, and verifies it (for the VM-level suites).
pub fn agent_program(src: &str, atoms: &[&str]) -> ajs_bytecode::VerifiedProgram {
    let atoms: Vec<String> = atoms.iter().map(|a| a.to_string()).collect();
    ajs_compiler::compile(
        src,
        &ajs_compiler::CompileOptions {
            mode: ajs_compiler::Mode::Agent,
            externals: &[],
            atoms: &atoms,
            source_name: "<source>",
        },
    )
    .unwrap()
    .verify()
    .unwrap()
}
