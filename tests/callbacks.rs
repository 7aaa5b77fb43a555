//! Callback methods, lowered inline as loops: results compared with Node, fuel proportional to
//! the array, outer variables read-only.

use crate::common;

use serde_json::json;

const DIFFERENTIAL: &[&str] = &[
    "[1, 2, 3].map(x => x * 2)",
    "[1, 2, 3].map((x, i) => x * i)",
    "[1, 2, 3, 4].filter(x => x % 2)",
    "[1, 2, 3, 4].reduce((a, x) => a + x)",
    "[1, 2, 3, 4].reduce((a, x) => a + x, 10)",
    "['a', 'b', 'c'].reduceRight((a, x) => a + x)",
    "[3, 1, 2].find(x => x < 3)",
    "[3, 1, 2].findIndex(x => x == 2)",
    "[3, 1, 2].findLast(x => x > 1)",
    "[3, 1, 2].findLastIndex(x => x > 5)",
    "[1, 2].some(x => x > 1)",
    "[1, 2].every(x => x > 1)",
    "[].every(x => false)",
    "[].some(x => true)",
    "[{ n: 1 }, { n: 2 }].map(o => o.n)",
    "[1, 2, 3].map(x => { if (x > 1) { return x * 10 } return 0 })",
    "[1, 2, 3].map(x => [1, 2].map(y => x * y))",
    "[1, 2, 3].filter((x, i, arr) => arr.length - 1 > i)",
    "[5, 3, 9, 1, 1, 7, 2].sort((a, b) => a - b)",
    "[5, 3, 9, 1, 1, 7, 2].toSorted((a, b) => b - a)",
    "[{ k: 2, n: 'a' }, { k: 1, n: 'b' }, { k: 2, n: 'c' }, { k: 1, n: 'd' }].sort((p, q) => p.k - q.k).map(o => o.n)",
    "['b', 'a', 'C'].sort((x, y) => x < y ? -1 : x > y ? 1 : 0)",
    "[3, 1, 2].sort((a, b) => { if (a < b) { return 1 } return -1 })",
    "[].sort((a, b) => a - b)",
    "[[1, 2], [3]].flatMap(x => x)",
    "[1, 2].flatMap(x => [x, [x * 10]])",
    "[1, 2].flatMap((x, i) => i)",
    "Array.from({ length: 3 }, (_, i) => i * 2)",
    "Array.from('ab😀')",
    "Array.from([1, 2], x => x * 3)",
];

#[test]
fn callbacks_match_node() {
    common::compare_with_node(DIFFERENTIAL, common::Form::Expression);
}

#[test]
fn callback_errors() {
    let e = common::err("n.map(x => x)", json!({ "n": 5 }));
    assert!(
        e.starts_with("'map' is not a function on a number; "),
        "{e}"
    );
    assert!(e.contains("Array.isArray(x)"), "{e}");
    let e = common::err("n.map(x => x)", json!({ "n": null }));
    assert!(e.starts_with("Cannot call method 'map' on null; "), "{e}");
    assert!(e.contains("(v ?? []).map(…)"), "{e}");
    assert_eq!(common::ok("n?.map(x => x)", json!({ "n": null })), None);
    let e = common::err("[].reduce((a, x) => a + x)", json!({}));
    assert_eq!(e, "Reduce of empty array with no initial value");
    let e = common::err(
        "let t = 0\nxs.forEach(x => { t = t + x })\nreturn t",
        json!({ "xs": [1] }),
    );
    assert!(e.contains("a callback cannot assign to 't'"), "{e}");
    let e = common::err("xs.map(f)", json!({ "xs": [1], "f": 1 }));
    assert!(
        e.contains("takes a callback written as an arrow function"),
        "{e}"
    );
    // an error inside a callback is catchable
    assert_eq!(
        common::ok(
            "try { return xs.map(x => x.constructor) } catch (e) { return e }",
            json!({ "xs": [{}] })
        ),
        Some(json!(
            "Security Error: Access to 'constructor' is forbidden"
        ))
    );
}

#[test]
fn callback_fuel_is_proportional_and_bounded() {
    let run = |n: usize| {
        let xs: Vec<usize> = (0..n).collect();
        let opts = ajs::Options {
            fuel: 1e9,
            ..Default::default()
        };
        common::eval_with(
            "xs.map(x => x * 2).filter(x => x > 3).length",
            json!({ "xs": xs }),
            opts,
        )
        .fuel_used
    };
    let small = run(100);
    let big = run(10_000);
    assert!(
        big >= 10.0 * small * 0.9 && big > 50.0 * small,
        "100x input: {small} -> {big}"
    );
    let xs: Vec<usize> = (0..100_000).collect();
    let out = common::eval_with(
        "xs.map(x => x + 1)",
        json!({ "xs": xs }),
        ajs::Options {
            fuel: 50.0,
            ..Default::default()
        },
    );
    assert_eq!(out.error.unwrap().message, "Out of Fuel");
    assert!(out.fuel_used <= 50.5);
}
