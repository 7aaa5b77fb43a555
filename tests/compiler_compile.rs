use ajs_bytecode::isa::{Int, Op};
use ajs_bytecode::Program;
use ajs_compiler::{compile, CompileError, CompileOptions, Compiler, Mode};

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn compile_with(
    mode: Mode,
    src: &str,
    ext: &[&str],
    atoms: &[&str],
) -> Result<Program, CompileError> {
    let ext = strs(ext);
    let atoms = strs(atoms);
    let opts = CompileOptions {
        mode,
        externals: &ext,
        atoms: &atoms,
        source_name: "<source>",
    };
    compile(src, &opts)
}

fn eval(src: &str, ext: &[&str]) -> Result<Program, CompileError> {
    compile_with(Mode::Eval, src, ext, &["httpFetch", "llmPredict"])
}

fn ok(mode: Mode, src: &str, ext: &[&str]) -> Program {
    let p = compile_with(mode, src, ext, &["httpFetch", "llmPredict"])
        .unwrap_or_else(|e| panic!("{src:?} should compile: {e}"));
    let d = p.disassemble();
    p.clone()
        .verify()
        .unwrap_or_else(|e| panic!("{src:?} does not verify: {e}\n{d}"));
    p
}

fn err(mode: Mode, src: &str, ext: &[&str]) -> CompileError {
    match compile_with(mode, src, ext, &["httpFetch", "llmPredict"]) {
        Ok(p) => panic!("{src:?} should not compile:\n{}", p.disassemble()),
        Err(e) => e,
    }
}

const EVAL_OK: &[&str] = &[
    "a + b",
    "1",
    "'héllo 😀'",
    "(true && false || null) ?? undefined",
    "a ? b : -1",
    "[1, , a, [b]]",
    "({ a: 1, 'b': 2, 3: a, b })",
    "`x${a}y${b}z`",
    "``",
    "a.b.c",
    "a?.b?.[0]",
    "a[b]",
    "a['k']",
    "Math.max(a, b, 1)",
    "Math.PI * 2",
    "Math.random()",
    "typeof a === 'number'",
    "!a",
    "+a",
    "-a",
    "NaN",
    "Infinity",
    "-Infinity",
    "a.length",
    "cfg.constructor",
    "a.push(1)",
    "a?.push(1)",
    "a?.b.push(1)",
    "httpFetch({ url: 'x' })",
    "Error('boom')",
    "a ** 2 % 3 / 4 - 5",
    "a == b != (a === b) !== (a < b) <= (a > b) >= b",
    "let x = 1\nreturn x",
    "let x = a\nx += 1\nx -= 1\nx *= 2\nx /= 2\nx %= 7\nx **= 2\nx ??= 1\nx ||= 2\nx &&= 3\nreturn x",
    "let i = 0\nwhile (i < 10) { i++ }\nreturn i",
    "let i = 0\nwhile (true) { i = i + 1\n if (i > 5) { break } else { continue } }\nreturn i",
    "try { return httpFetch({ url: 'u' }) } catch (e) { return 'fallback: ' + e }",
    "try { Error('x') } catch { return 1 }",
    "let i = 0\nwhile (i < 3) { try { i++\n if (i == 2) { break }\n continue } catch (e) { } }\nreturn i",
    "if (a) return 1\nelse if (b) return 2\nreturn 3",
    "{ let x = 1 }\n{ let x = 2\n return x }",
    "let x\nreturn x",
    "const x = 1; let y = x; { const x = 2; y = y + x }; return y",
    "return",
    "console.log('hi', a); return 1",
    "let r = llmPredict({ prompt: 'hi' })\nreturn r",
    "let x = a\nx = x || b\nx = b ? x : 1\nx = { a: x }\nx = [x, x]\nreturn x",
    "while (a) { const c = 1\n a = a - c }\nreturn a",
    "return { 'a b': 1, 1.5: 2, 1e21: 3 }",
];

const BODY_OK: &[&str] = &[
    "return a + b",
    "",
    "let c = a * 2\nreturn c",
    "a = a + 1\nreturn a",
    "let i = 0\nlet s = 0\nwhile (i < 1000) { s = s + i\n i = i + 1 }\nreturn s",
];

#[test]
fn eval_snippets_verify() {
    for s in EVAL_OK {
        ok(Mode::Eval, s, &["a", "b", "cfg"]);
    }
}

#[test]
fn function_bodies_verify() {
    for s in BODY_OK {
        let p = ok(Mode::FunctionBody, s, &["a", "b"]);
        assert_eq!(p.functions[0].params, vec!["a", "b"]);
        assert_eq!(p.functions[0].name, "<function>");
    }
}

#[test]
fn eval_params_are_the_used_context_keys_in_first_use_order() {
    let p = ok(Mode::Eval, "b + a", &["a", "b", "unused", "Math"]);
    assert_eq!(p.functions[0].params, vec!["b", "a"]);
    let p = ok(Mode::Eval, "Math.floor(a)", &["a", "Math"]);
    assert_eq!(p.functions[0].params, vec!["a"]);
    let p = ok(Mode::Eval, "let a = 1\nreturn a", &["a"]);
    assert!(p.functions[0].params.is_empty());
    assert_eq!(p.functions[0].name, "<eval>");
}

#[test]
fn a_plus_b_disassembly() {
    let p = ok(Mode::Eval, "a + b", &["a", "b"]);
    let expected = "
fn0 <eval>(a, b) regs=3 (entry)
    0  Charge          200  ; 1:0
    1  Add             r2, r0, r1  ; 1:0
    2  Return          r2  ; 1:0
";
    assert_eq!(p.disassemble(), expected);
}

#[test]
fn while_loop_is_one_block_of_two_instructions_per_iteration() {
    let p = ok(
        Mode::Eval,
        "let i = 0\nwhile (i < 1000) { i = i + 1 }\nreturn i",
        &[],
    );
    let code = &p.functions[0].code;
    // the test once at the top (Charge, then `i < 1000` fused with its branch out), then each
    // iteration is one block: Charge, AddI, and the test fused with the branch back to the
    // block's head; it costs what AddK, LtK and JumpIfTrue cost (the small integers carried
    // in the instructions)
    let back = code
        .iter()
        .rposition(|o| matches!(o, Op::JumpIfLtI { .. }))
        .unwrap();
    let head = code[back].jump_target().unwrap() as usize;
    assert!(
        matches!(code[head], Op::Charge { amount } if amount.0 == 300),
        "{}",
        p.disassemble()
    );
    let body: Vec<_> = code[head + 1..=back].iter().collect();
    assert!(
        matches!(
            body[..],
            [
                Op::AddI { i: Int(1), .. },
                Op::JumpIfLtI { i: Int(1000), .. }
            ]
        ),
        "{}",
        p.disassemble()
    );
    assert!(
        code[..head]
            .iter()
            .any(|o| matches!(o, Op::JumpUnlessLtI { .. })),
        "{}",
        p.disassemble()
    );
    // nothing else jumps into the loop
    assert!(!code[head + 1..=back]
        .iter()
        .any(|o| matches!(o, Op::Charge { .. })));
}

#[test]
fn constants_named_by_the_instruction_are_not_loaded_at_entry() {
    let p = ok(
        Mode::Agent,
        "function fib(n) {\n  if (n < 2) { return n }\n  return fib(n - 1) + fib(n - 2)\n}\nfunction main() {\n  return fib(5)\n}",
        &[],
    );
    let fib = &p.functions[0];
    assert!(
        !fib.code.iter().any(|o| matches!(o, Op::LoadConst { .. })),
        "{}",
        p.disassemble()
    );
    // (small integers: carried in the instructions)
    assert!(fib
        .code
        .iter()
        .any(|o| matches!(o, Op::JumpUnlessLtI { i: Int(2), .. })));
    assert_eq!(
        fib.code
            .iter()
            .filter(|o| matches!(o, Op::SubI { .. }))
            .count(),
        2
    );
    // a constant that is no small integer is named (-0 too: an immediate would be +0)
    let p = ok(
        Mode::Eval,
        "let n = 3\nlet i = 0\nwhile (i < 100000) { i = i + 0.5\n n = n - -0\n if (n === 32768) { n = n + -32768 } }\nreturn n",
        &[],
    );
    let code = &p.functions[0].code;
    let names = |o: &Op| o.name();
    for want in ["JumpIfLtK", "AddK", "SubK", "JumpIfStrictNeK"] {
        assert!(
            code.iter().map(names).any(|n| n == want),
            "{want}: {}",
            p.disassemble()
        );
    }
    assert!(
        code.iter()
            .any(|o| matches!(o, Op::AddI { i: Int(-32768), .. })),
        "{}",
        p.disassemble()
    );
}

#[test]
fn error_positions() {
    let e = err(Mode::Eval, "let x = 1\nlet x = 2\nreturn x", &[]);
    assert_eq!((e.line, e.column), (2, 4), "{e}");
    let m = "Identifier 'x' has already been declared; assign it without let (x = …) or use another name";
    assert_eq!(e.message, m);
    assert_eq!(e.to_string(), format!("{m} at <source>:2:4"));

    let e = err(Mode::Eval, "let y = 1\nreturn zz + y", &[]);
    assert_eq!((e.line, e.column), (2, 7));
    assert_eq!(
        e.message,
        "'zz' is not defined; declare it first (let zz = …), or pass it in the context"
    );

    let e = err(Mode::FunctionBody, "let s = '😀'; for (;;) {}", &[]);
    assert_eq!((e.line, e.column), (1, 14), "{e}");
    assert!(e.message.contains("write let i = 0 / while"), "{e}");

    let e = err(Mode::Eval, "let total = a + b\ntotal * 2", &["a", "b"]);
    assert_eq!(e.line, 1, "{e}");
}

#[test]
fn refusals() {
    let cases: &[(&str, &str)] = &[
        ("for (const x of a) {}\nreturn 1", "for...of"),
        ("switch (a) {}\nreturn 1", "switch"),
        ("do { } while (a)\nreturn 1", "do...while"),
        ("new Date()", "write Date() (no 'new')"),
        (
            "throw 1\nreturn 1",
            "'throw' is not supported in AJS: write Error(1)",
        ),
        ("var x = 1\nreturn x", "`var`"),
        ("x => x", "callback"),
        ("a & b", "'&'"),
        ("a in b", "'in'"),
        ("void a", "'void'"),
        ("(a, b)", "comma"),
        (
            "Math.foo(1)",
            "Math.foo is not supported in AJS; use one of Math.abs, Math.ceil",
        ),
        ("Math.foo", "Math.foo is not supported in AJS"),
        (
            "a.frobnicate(1)",
            "Security Error: method 'frobnicate' is not callable in AJS",
        ),
        ("a.map(f)", "takes a callback written as an arrow function"),
        (
            "a.sort(1, 2)",
            "takes a comparator written as an arrow function",
        ),
        (
            "a.constructor(1)",
            "Security Error: Access to 'constructor' is forbidden",
        ),
        (
            "({ __proto__: 1 })",
            "Security Error: Access to '__proto__' is forbidden",
        ),
        (
            "let constructor = 1\nreturn 1",
            "Security Error: Access to 'constructor' is forbidden",
        ),
        ("a.b = 1\nreturn 1", "member assignment"),
        ("let x = 1\nx = a = 2\nreturn x", "chained assignment"),
        ("let x = 1\nlet y = x++\nreturn y", "'++'"),
        ("const x = 1\nx = 2\nreturn x", "constant"),
        ("const x\nreturn 1", "initializer"),
        ("let y = x\nlet x = 1\nreturn y", "before initialization"),
        ("foo(1)", "'foo' is not defined"),
        ("a(1)", "context value"),
        (
            "fetch('x')",
            "fetch is not available. Use the httpFetch atom: let body = httpFetch({ url })",
        ),
        ("setTimeout(1)", "setTimeout is not available"),
        ("let {x}\nreturn x", "Missing initializer"),
        ("try { return 1 } finally { }", "finally"),
        ("this", "'this'"),
        ("function f() {}\nreturn 1", "nested functions"),
        ("class A {}\nreturn 1", "no classes"),
        ("f(...a)", "spread"),
        ("({ get x() { return 1 } })", "getters"),
        ("let x = 1\nx", "SyntaxError"),
        ("a`x`", "tagged"),
        ("10n", "BigInt"),
        ("eval('1')", "eval is not available"),
    ];
    for (src, needle) in cases {
        let e = err(Mode::Eval, src, &["a", "b"]);
        assert!(e.message.contains(needle), "{src:?}: {e}");
    }
    let e = err(Mode::FunctionBody, "let a = 1\nreturn a", &["a"]);
    assert!(e.message.contains("already been declared"), "{e}");
    let e = err(Mode::FunctionBody, "await a", &["a"]);
    assert!(e.message.contains("await"), "{e}");
}

/// Decision 38: a snippet that parses neither as an expression nor as statements reports the
/// error of the parse that got further into the source.
#[test]
fn eval_reports_the_parse_that_got_further() {
    // the statement parse fails on line 2, the expression parse at `x` on line 1
    let e = err(Mode::Eval, "let x = 1\nreturn x +* 2", &[]);
    assert_eq!(
        (e.line, e.message.starts_with("SyntaxError")),
        (2, true),
        "{e}"
    );
    let e = err(Mode::Eval, "let x = 1\nlet y = x +* 2", &[]);
    assert_eq!(e.line, 2, "{e}");
    // the expression parse gets further: its error stays
    let e = err(Mode::Eval, "a +\n+ * 2", &["a"]);
    assert_eq!(e.line, 2, "{e}");
    let e = err(Mode::Eval, "(a + ", &["a"]);
    assert_eq!((e.line, e.column), (1, 5), "{e}");
}

#[test]
fn try_catch_layout() {
    let p = ok(Mode::Eval, "try { return 1 } catch (e) { return e }", &[]);
    let code = &p.functions[0].code;
    let Some(Op::TryEnter { handler }) = code.iter().find(|o| matches!(o, Op::TryEnter { .. }))
    else {
        panic!()
    };
    assert!(matches!(code[handler.0 as usize + 1], Op::Catch { .. }));
}

#[test]
fn long_array_literal_and_many_constants() {
    let items: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    let src = format!("[{}]", items.join(", "));
    let p = ok(Mode::Eval, &src, &[]);
    assert!(p.functions[0]
        .code
        .iter()
        .any(|o| matches!(o, Op::ArrayAppend { .. })));
    let src = format!(
        "Math.max({})",
        (0..300)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let e = err(Mode::Eval, &src, &[]);
    assert!(e.message.contains("too many arguments"), "{e}");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for n in [300usize, 100_000] {
        let src = format!("{}1{}", "(".repeat(n), ")".repeat(n));
        let e = err(Mode::Eval, &src, &[]);
        assert!(e.message.contains("nesting too deep"), "{e}");
        let src = format!("{}1", "-".repeat(n));
        assert!(eval(&src, &[]).is_err());
        let src = format!("{}1", "!".repeat(n));
        assert!(eval(&src, &[]).is_err());
        let src = format!("{}1", "typeof ".repeat(n));
        assert!(eval(&src, &[]).is_err());
        let src = format!("{}1", "a ? 1 : ".repeat(n));
        assert!(eval(&src, &["a"]).is_err());
        // a left-leaning chain is no nesting (issue 29): it compiles at any length the source
        // scan admits, and never crashes
        let src = format!("{}1", "a + ".repeat(n));
        let r = eval(&src, &["a"]);
        if n <= 1000 {
            assert!(r.is_ok(), "{:?}", r.err());
        }
        let src = format!("{}return 1{}", "{".repeat(n), "}".repeat(n));
        assert!(eval(&src, &[]).is_err());
    }
    // moderate nesting compiles
    let src = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    ok(Mode::Eval, &src, &[]);
}

#[test]
fn garbage_never_panics() {
    let samples = [
        "",
        " ",
        "(",
        ")",
        "{",
        "}",
        "`${",
        "`${`",
        "'",
        "\"",
        "/*",
        "//",
        "return",
        "return return",
        "\u{2028}",
        "let",
        "let let",
        "a?.",
        "a?.()",
        "((a)) = 1",
        "\\u0041",
        "#!x\n1",
        "<a/>",
        "a => { return }",
        "`\\u{110000}`",
        "'\\uD800'",
        "x = 1",
        "let x = 1; x++; x--; ++x; --x; return x",
    ];
    for s in samples {
        for mode in [Mode::Eval, Mode::FunctionBody] {
            if let Ok(p) = compile_with(mode, s, &["a"], &[]) {
                p.verify().unwrap_or_else(|e| panic!("{s:?}: {e}"));
            }
        }
    }
}

/// A compile that builds in a recycled program's allocations, with a compiler kept from earlier
/// compiles, produces exactly what a new compiler does, whatever the recycled program was
/// (bigger, smaller, more functions, more parameters, longer names), in every mode.
#[test]
fn a_recycled_program_changes_nothing_in_the_next_compile() {
    let agent = "function helper(x, y) {\n  return x * y + 1\n}\nfunction other(s) {\n  return s.length\n}\nfunction main({ n = 3, label = 'a long label' }) {\n  let i = 0\n  let t = 0\n  while (i < n) { t = t + helper(i, 2)\n i = i + 1 }\n  return { t, l: other(label) }\n}";
    let mut cases: Vec<(Mode, &str, &[&str])> = Vec::new();
    for s in EVAL_OK {
        cases.push((Mode::Eval, s, &["a", "b", "cfg"]));
    }
    for s in BODY_OK {
        cases.push((Mode::FunctionBody, s, &["a", "b"]));
    }
    cases.push((Mode::FunctionBody, "return x", &["a_much_longer_name", "x"]));
    cases.push((Mode::Agent, agent, &[]));
    cases.push((Mode::Agent, "function main() { return 1 }", &[]));
    let fresh: Vec<Program> = cases
        .iter()
        .map(|&(mode, src, ext)| ok(mode, src, ext))
        .collect();
    fn compile_in(
        compiler: &mut Compiler,
        mode: Mode,
        src: &str,
        ext: &[&str],
    ) -> Result<Program, CompileError> {
        let (ext, atoms) = (strs(ext), strs(&["httpFetch", "llmPredict"]));
        let opts = CompileOptions {
            mode,
            externals: &ext,
            atoms: &atoms,
            source_name: "<source>",
        };
        compiler.compile(src, &opts)
    }
    // one compiler for every compile: each builds in what the ones before it left
    let mut compiler = Compiler::new();
    for (i, &(mode, src, ext)) in cases.iter().enumerate() {
        for spare in [
            0,
            1,
            cases.len() - 2,
            cases.len() - 1,
            (i + 7) % cases.len(),
        ] {
            // handed back as compiled, or by the last handle of its verified program
            for released in [false, true] {
                let p = fresh[spare].clone();
                let p = if released {
                    p.verify().unwrap().try_into_program().unwrap()
                } else {
                    p
                };
                compiler.recycle(p);
                let again = compile_in(&mut compiler, mode, src, ext)
                    .unwrap_or_else(|e| panic!("{src:?} should compile: {e}"));
                // (as bytes: a NaN constant is not equal to itself)
                assert_eq!(
                    (again.to_bytes(), &again.debug),
                    (fresh[i].to_bytes(), &fresh[i].debug),
                    "{src:?} compiled after recycling case {spare} (released: {released})"
                );
                let v = again.clone().verify().unwrap();
                assert_eq!(v.program().to_bytes(), fresh[i].to_bytes());
                assert_eq!(
                    v.code().len(),
                    fresh[i]
                        .functions
                        .iter()
                        .map(|f| f.code.len())
                        .sum::<usize>()
                );
            }
        }
    }
    // a refused compile with a recycled program is refused the same way, and the next compile
    // is still right
    let before = eval("a +", &["a"]).unwrap_err();
    compiler.recycle(fresh[cases.len() - 2].clone());
    assert_eq!(
        compile_in(&mut compiler, Mode::Eval, "a +", &["a"]).unwrap_err(),
        before
    );
    let again = compile_in(&mut compiler, Mode::Eval, "a + b", &["a", "b", "cfg"]).unwrap();
    assert_eq!(again.to_bytes(), fresh[0].to_bytes());
}

#[test]
fn a_comparison_fuses_with_its_branch_only_when_nothing_else_reads_it() {
    let fused = |o: &Op| {
        o.jump_target().is_some()
            && !matches!(
                o,
                Op::Jump { .. }
                    | Op::JumpIfTrue { .. }
                    | Op::JumpIfFalse { .. }
                    | Op::JumpIfNullish { .. }
                    | Op::JumpIfNotNullish { .. }
                    | Op::TryEnter { .. }
            )
    };
    let plain = |o: &Op| matches!(o, Op::JumpIfFalse { .. } | Op::JumpIfTrue { .. });
    for (src, want_fused) in [
        ("if (a < b) { return 1 }\nreturn 0", true),
        ("if (a < 2) { return 1 }\nreturn 0", true),
        ("return a === b ? 1 : 0", true),
        // `||` in a test is lowered as branches: both of its sides fuse
        ("if (a < 1 || b < 2) { return 1 }\nreturn 0", true),
        // the branch tests `a` when `??` short-circuits: it cannot be the comparison's
        ("if (a ?? b < 2) { return 1 }\nreturn 0", false),
        // `t` is read again after the branch
        ("const t = a < b\nif (t) { return t }\nreturn 0", false),
    ] {
        let p = ok(Mode::Eval, src, &["a", "b"]);
        let code = &p.functions[0].code;
        assert_eq!(
            code.iter().any(fused),
            want_fused,
            "{src}\n{}",
            p.disassemble()
        );
        assert_eq!(
            code.iter().any(plain),
            !want_fused,
            "{src}\n{}",
            p.disassemble()
        );
    }
}
