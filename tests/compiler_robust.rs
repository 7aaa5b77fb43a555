//! Token-soup inputs: the compiler must never panic, and whatever compiles must verify.
use ajs_compiler::{compile, CompileOptions, Mode};

const TOKENS: &[&str] = &[
    "let ",
    "const ",
    "x",
    "a",
    "b",
    "=",
    "+=",
    "??=",
    "==",
    "+",
    "-",
    "*",
    "**",
    "!",
    "typeof ",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    "\n",
    ":",
    "?",
    "?.",
    ".",
    "k",
    "push",
    "constructor",
    "1",
    "'s'",
    "`t${",
    "}`",
    "`",
    "while ",
    "if ",
    "else ",
    "return ",
    "break",
    "continue",
    "try ",
    "catch ",
    "(e)",
    "e",
    "Error",
    "httpFetch",
    "Math",
    ".max",
    ".PI",
    "console",
    ".log",
    "&&",
    "||",
    "??",
    "++",
    "--",
    "null",
    "undefined",
    "true",
    "=>",
    "new ",
    "for ",
    "...",
];

#[test]
fn token_soup_never_panics() {
    let ext: Vec<String> = vec!["a".into(), "b".into()];
    let atoms: Vec<String> = vec!["httpFetch".into()];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut compiled = 0;
    for _ in 0..3000 {
        let n = (next() % 40) as usize;
        let src: String = (0..n)
            .map(|_| TOKENS[(next() % TOKENS.len() as u64) as usize])
            .collect();
        for mode in [Mode::Eval, Mode::FunctionBody] {
            let opts = CompileOptions {
                mode,
                externals: &ext,
                atoms: &atoms,
                source_name: "<fuzz>",
            };
            if let Ok(p) = compile(&src, &opts) {
                compiled += 1;
                let d = p.disassemble();
                p.verify().unwrap_or_else(|e| panic!("{src:?}: {e}\n{d}"));
            }
        }
    }
    assert!(compiled > 0);
}

#[test]
fn too_many_values_is_a_typed_error() {
    let items: Vec<String> = (0..70_000).map(|i| i.to_string()).collect();
    let src = format!("[{}]", items.join(","));
    let e = compile(&src, &CompileOptions::default()).unwrap_err();
    assert!(e.message.contains("too many"), "{e}");
    let src = format!(
        "return {}",
        items
            .iter()
            .map(|i| format!("'{i}'"))
            .collect::<Vec<_>>()
            .join(" + ")
    );
    let e = compile(
        &src,
        &CompileOptions {
            mode: Mode::FunctionBody,
            ..CompileOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        e.message.contains("too many") || e.message.contains("nesting"),
        "{e}"
    );
}

/// Sources just under the inline-compile bound compile on a small (2 MiB, like a tokio worker)
/// stack, in debug builds too.
#[test]
fn borderline_nesting_compiles_on_a_small_stack() {
    let sources = [
        format!("{}1{}", "(".repeat(60), ")".repeat(60)),
        format!("{}1{}", "[".repeat(60), "]".repeat(60)),
        format!("a{}", " ? 1 : a".repeat(60)),
        format!(
            "let x = 0\n{}return x",
            "if (a) { x = 1 } else ".repeat(30) + "{ x = 2 }\n"
        ),
        format!("{}a", "!".repeat(60)),
    ];
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            for s in &sources {
                let externals = vec!["a".to_string()];
                let opts = ajs_compiler::CompileOptions {
                    externals: &externals,
                    ..Default::default()
                };
                let _ = ajs_compiler::compile(s, &opts);
            }
        })
        .unwrap()
        .join()
        .expect("compiling on a 2 MiB stack does not overflow");
}
