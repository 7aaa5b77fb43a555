//! Destructuring, spread and computed keys (decision 7), compared with Node.

use crate::common;

use serde_json::json;

/// Blocks of statements returning a value; each is run by Node inside a function.
const DIFFERENTIAL: &[&str] = &[
    "let { a, b: [x, y = 5], ...rest } = { a: 1, b: [2], c: 3 }\nreturn [a, x, y, rest]",
    "let [p, , q, ...more] = [1, 2, 3, 4]\nreturn { p, q, more }",
    "const { a = 10, c } = { c: 2 }\nreturn a + c",
    "let { a: { b } } = { a: { b: 7 } }\nreturn b",
    "let [[x], { y }] = [[1], { y: 2 }]\nreturn x + y",
    "let { n = 1 } = { n: null }\nreturn n",
    "let [u = 3] = []\nreturn u",
    "return [...[1, 2], 3, ...[4]]",
    "return [...'héllo😀']",
    "return { ...{ a: 1, b: 2 }, b: 3, ...null }",
    "let k = 'x'\nreturn { [k + '1']: 1, [2]: 2 }",
    "return Math.max(...[1, 5, 3], 4)",
    "let ys = [1]\nys.push(...[2, 3])\nreturn ys",
    "return { ...[7, 8] }",
];

#[test]
fn destructuring_and_spread_match_node() {
    common::compare_with_node(DIFFERENTIAL, common::Form::Block);
}

#[test]
fn destructuring_and_spread_refusals() {
    let e = common::err("let { constructor } = o\nreturn 1", json!({ "o": {} }));
    assert!(
        e.starts_with("Security Error: Access to 'constructor' is forbidden"),
        "{e}"
    );
    let e = common::err("return { [k]: 1 }", json!({ "k": "__proto__" }));
    assert_eq!(e, "Security Error: Access to '__proto__' is forbidden");
    let e = common::err("let [a] = o\nreturn a", json!({ "o": {} }));
    assert_eq!(e, "Cannot destructure an object as an array");
    let e = common::err("let { a } = null\nreturn a", json!({}));
    assert_eq!(e, "Cannot destructure null");
    let e = common::err("return [...o]", json!({ "o": {} }));
    assert!(
        e.starts_with("Cannot spread an object into an array"),
        "{e}"
    );
    let e = common::err("return { [xs]: 1 }", json!({ "xs": [] }));
    assert!(
        e.starts_with("Cannot use an array as a property key"),
        "{e}"
    );
    // spread copies: the source is not changed
    assert_eq!(
        common::ok(
            "let b = [...a]\nb.push(3)\nreturn [a, b]",
            json!({ "a": [1] })
        ),
        Some(json!([[1], [1, 3]]))
    );
}

#[test]
fn spread_costs_fuel_per_element() {
    let cost = |n: usize| {
        let xs: Vec<usize> = (0..n).collect();
        common::eval_with(
            "[...xs].length",
            json!({ "xs": xs }),
            ajs::Options {
                fuel: 1e6,
                ..Default::default()
            },
        )
        .fuel_used
    };
    let (small, big) = (cost(100), cost(100_000));
    assert!(big > 10.0 * small, "{small} -> {big}");
    let xs: Vec<usize> = (0..200_000).collect();
    let out = common::eval_with(
        "[...xs, ...xs]",
        json!({ "xs": xs }),
        ajs::Options {
            fuel: 5.0,
            ..Default::default()
        },
    );
    assert_eq!(out.error.unwrap().message, "Out of Fuel");
}

/// Strict-mode JavaScript refuses `eval`, `arguments` and its reserved words as bindings; so does
/// AJS, in every place a name is bound, saying what to write instead.
#[test]
fn strict_mode_reserved_names_are_refused_as_bindings() {
    for (code, name) in [
        ("let let = 1\nreturn 1", "let"),
        (
            "try { Error('x') } catch (eval) { return 1 }\nreturn 0",
            "eval",
        ),
        (
            "try { Error('x') } catch (arguments) { return 1 }\nreturn 0",
            "arguments",
        ),
        ("const eval = 1\nreturn 1", "eval"),
        (
            "const { arguments } = { arguments: 1 }\nreturn 1",
            "arguments",
        ),
        ("let [yield] = [1]\nreturn 1", "yield"),
        ("return [1].map(static => static)", "static"),
        ("let implements = 1\nreturn 1", "implements"),
    ] {
        let e = common::err(code, json!({}));
        assert!(
            e.starts_with(&format!(
                "SyntaxError: '{name}' cannot be a variable or parameter name"
            )) && e.contains(&format!("'{name}Value'")),
            "{code}: {e}"
        );
    }
    // names that only contain them stay fine
    assert_eq!(
        common::ok(
            "let letter = 1\nconst evaluate = 2\nreturn letter + evaluate",
            json!({})
        ),
        Some(json!(3))
    );
}
