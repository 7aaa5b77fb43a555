//! Arithmetic and comparisons whose right operand is a literal compile to instructions naming the
//! constant (`n - 0.5` is `SubK`), or carrying it when it is a small integer (`n - 1` is `SubI`);
//! the loop test is copied to the bottom of a `while`. All must behave exactly like the general
//! forms: same results, same errors, for every kind of operand.

use crate::common;

use serde_json::json;

const OPS: &[&str] = &["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "===", "!=="];
const LEFT: &[&str] = &[
    "7",
    "-2.5",
    "0",
    "'5'",
    "'ab'",
    "''",
    "true",
    "null",
    "undefined",
    "[1]",
    "({ a: 1 })",
    "-0",
    "32767",
    "NaN",
];
// (small integers are carried in the instruction: the edges of that range, and numbers just
// outside it, -0 among them, which stay constants)
const RIGHT: &[&str] = &[
    "1", "2", "0", "'x'", "'3'", "-1", "-0", "0.5", "32767", "-32768", "32768", "-32769", "1e6",
];

/// `v OP literal` against `v OP variable`: result or error message, as text.
fn outcome(code: &str) -> String {
    let out = common::eval(code, json!({}));
    match out.error {
        Some(e) => format!("error: {}", e.message),
        None => format!("{:?}", out.result),
    }
}

#[test]
fn constant_right_operands_behave_like_registers() {
    for op in OPS {
        for l in LEFT {
            for r in RIGHT {
                let k = outcome(&format!("let v = {l}\nreturn v {op} {r}"));
                let reg = outcome(&format!("let v = {l}\nlet w = {r}\nreturn v {op} w"));
                assert_eq!(k, reg, "{l} {op} {r}");
                // a test fused with its branch
                let k = outcome(&format!(
                    "let v = {l}\nif (v {op} {r}) {{ return 1 / v }}\nreturn 'no'"
                ));
                let reg = outcome(&format!(
                    "let v = {l}\nlet w = {r}\nif (v {op} w) {{ return 1 / v }}\nreturn 'no'"
                ));
                assert_eq!(k, reg, "if ({l} {op} {r})");
            }
        }
    }
}

#[test]
fn while_loops_run_their_test_the_same_number_of_times() {
    let cases = [
        // the test counts its own evaluations
        ("let xs = []\nlet i = 0\nwhile (xs.push(0) && i < 5) { i = i + 1 }\nreturn [i, xs.length]", json!([5, 6])),
        ("let xs = []\nwhile (xs.push(0) < 4) { }\nreturn xs.length", json!(4)),
        ("let xs = []\nwhile (xs.push(0) < 1) { }\nreturn xs.length", json!(1)),
        // continue goes to the test
        ("let i = 0\nlet s = 0\nwhile (i < 10) { i = i + 1\n if (i % 2 === 0) { continue }\n s = s + i }\nreturn s", json!(25)),
        // break leaves
        ("let i = 0\nwhile (true) { i = i + 1\n if (i > 3) { break } }\nreturn i", json!(4)),
        // a short-circuit test (jumps inside the copied test)
        ("let i = 0\nlet xs = [1, 2, 3]\nwhile (i < xs.length && xs[i] < 3) { i = i + 1 }\nreturn i", json!(2)),
        ("let i = 0\nwhile (i < 3 ? true : false) { i = i + 1 }\nreturn i", json!(3)),
        // a callback in the test
        ("let xs = [1, 2, 3]\nlet n = 0\nwhile (xs.some(x => x > n)) { n = n + 1 }\nreturn n", json!(3)),
        // nested loops, a try inside
        ("let i = 0\nlet t = 0\nwhile (i < 3) { let j = 0\n while (j < i) { try { t = t + j } catch (e) { t = -1 }\n j = j + 1 }\n i = i + 1 }\nreturn t", json!(1)),
        // never entered
        ("let i = 5\nwhile (i < 3) { i = i + 1 }\nreturn i", json!(5)),
    ];
    for (code, want) in cases {
        assert_eq!(common::ok(code, json!({})), Some(want), "{code}");
    }
}
