//! Every example in `docs/language.md` and `docs/ajs-for-models.md` compiles: each fenced block
//! marked `ajs` (or `js`) must compile with `ajs_compiler::compile` — as an agent when it starts
//! with `function`, else as an Eval snippet — and each block marked `ajs-refused` must be refused
//! (for its own reason, not because a name is undeclared). A fence may declare the Eval context
//! keys the example reads: ```` ```ajs context=a,b ````.

use ajs_compiler::{compile, CompileOptions, Mode};

struct Example {
    file: &'static str,
    line: usize,
    refused: bool,
    skip: bool,
    context: Vec<String>,
    code: String,
}

fn examples(file: &'static str) -> Vec<Example> {
    let path = format!("{}/../../{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = Vec::new();
    let mut current: Option<Example> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(ex) = current.as_mut() {
            if line.trim_start().starts_with("```") {
                out.push(current.take().unwrap());
            } else {
                ex.code.push_str(line);
                ex.code.push('\n');
            }
            continue;
        }
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let mut words = info.split_whitespace();
        let lang = words.next().unwrap_or("");
        let refused = lang == "ajs-refused";
        // another language (or none): read to its closing fence and drop it
        let skip = !matches!(lang, "ajs" | "js" | "ajs-refused");
        let context = words
            .find_map(|w| w.strip_prefix("context="))
            .map(|c| c.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        current = Some(Example {
            file,
            line: i + 1,
            refused,
            skip,
            context,
            code: String::new(),
        });
    }
    assert!(current.is_none(), "{file}: unclosed code fence");
    out.retain(|e| !e.skip);
    out
}

fn check(file: &'static str, min: usize) {
    let atoms = ["httpFetch".to_string(), "llmPredict".to_string()];
    let all = examples(file);
    assert!(
        all.len() >= min,
        "{file}: expected at least {min} examples, found {}",
        all.len()
    );
    let mut failures = Vec::new();
    for ex in &all {
        let mode = if ex.code.trim_start().starts_with("function") {
            Mode::Agent
        } else {
            Mode::Eval
        };
        let result = compile(
            &ex.code,
            &CompileOptions {
                mode,
                externals: &ex.context,
                atoms: &atoms,
                source_name: "<example>",
            },
        );
        match (&result, ex.refused) {
            (Ok(_), false) => {}
            (Err(e), false) => failures.push(format!(
                "{}:{}: example does not compile: {e}\n{}",
                ex.file, ex.line, ex.code
            )),
            (Ok(_), true) => failures.push(format!(
                "{}:{}: example marked ajs-refused compiles\n{}",
                ex.file, ex.line, ex.code
            )),
            (Err(e), true) if e.message.contains("is not defined") => failures.push(format!(
                "{}:{}: refused only for an undeclared name (declare it with context=…): {e}",
                ex.file, ex.line
            )),
            (Err(_), true) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn language_md_examples_compile() {
    check("docs/language.md", 10);
}

#[test]
fn ajs_for_models_examples_compile() {
    check("docs/ajs-for-models.md", 4);
}
