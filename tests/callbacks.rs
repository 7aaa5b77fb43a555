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

/// `replace`/`replaceAll` with an arrow callback (the callback's arguments, its result as text,
/// no `$` expansion), against Node.
const REPLACE_DIFFERENTIAL: &[&str] = &[
    "'a1b22c333'.replace(/\\d+/g, m => '[' + m.length + ']')",
    "'a1b22c333'.replace(/\\d+/, m => '[' + m + ']')",
    "'John Smith'.replace(/(?<first>\\w+)\\s(?<last>\\w+)/, (m, a, b, off, inp, g) => g.last + ', ' + g.first + '|' + a + b + off + inp)",
    "'x'.replace(/(?<n>y)?x/, (m, p, o, s, g) => JSON.stringify(g) + typeof g.n)",
    "'abc'.replace(/(x)?b/, (m, p1) => typeof p1)",
    "'abcabc'.replace(/(b)(c)/g, (m, p1, p2, off) => p2 + p1 + off)",
    "'abc'.replace(/b/, (m, off, s, extra) => typeof extra)",
    "'abc'.replace(/b/, (m, off, s) => s + off)",
    "'aXbX'.replaceAll('X', (m, off) => off)",
    "'aXbX'.replace('X', (m, off, s) => '$&' + s)",
    "'a.b.c'.replaceAll('.', m => '$1$&$$')",
    "'a.b.c'.replace(/\\./g, m => \"$'\")",
    "'abc'.replaceAll('', (m, o) => o)",
    "'abc'.replace('', (m, o) => '!' + o)",
    "''.replace(/^/, () => 'start')",
    "''.replaceAll('', () => 'e')",
    "'abc'.replace(/z/, m => 1)",
    "'abc'.replace('z', m => 1)",
    "'x'.replace(/x/, () => undefined)",
    "'x'.replace(/x/, () => null)",
    "'x'.replace(/x/, () => true)",
    "'x1y2'.replace(/\\d/g, d => d * 2)",
    "'a-b-c'.replace(/-/g, () => { return '+' })",
    "'a-b-c'.replace(/-/g, (m, i) => { if (i > 2) { return '#' } return '+' })",
    "'aaa'.replace(/a*?/g, (m, o) => '[' + o + ']')",
    "'aaa'.replace(/a/g, (m, o, s) => s.length + o)",
    "'😀a😀'.replace(/a/g, (m, o) => o)",
    "'😀a😀'.replaceAll('😀', (m, o) => '<' + o + '>')",
    "'2024-01-05'.replace(/(\\d+)-(\\d+)-(\\d+)/, (_, y, mo, d) => d + '/' + mo + '/' + y)",
    "'hello world'.replace(/\\b\\w/g, c => c.toUpperCase())",
    "'price: 10, 20'.replace(/\\d+/g, m => (parseInt(m) * 1.5).toFixed(2))",
    "'{a} and {b}'.replace(/\\{(\\w+)\\}/g, (m, k) => ({ a: 1, b: 'two' })[k])",
    "['a-b', 'c'].map(s => s.replace(/-/g, m => s.length))",
    "'abc'.replace(/(?<x>a)|(?<y>b)/g, (m, p1, p2, o, s, g) => (g.x ?? '') + '|' + (g.y ?? '') + o)",
    "'aaa'.replace(/(?<x>a)|(?<y>b)/g, (...a) => a.length)",
    "'a1b2'.replace(/([a-z])(\\d)/g, (m, ...r) => JSON.stringify(r))",
    "'ab'.replace('b', (...args) => args.join('|'))",
    "'ab'.replace(/(?<k>b)/, (m, ...rest) => typeof rest[rest.length - 1])",
];

#[test]
fn replace_callbacks_match_node() {
    common::compare_with_node(REPLACE_DIFFERENTIAL, common::Form::Expression);
}

#[test]
fn replace_callback_errors() {
    let e = common::err("'abc'.replaceAll(/b/, m => m)", json!({}));
    assert_eq!(e, "replaceAll must be called with a global RegExp");
    let e = common::err("n.replace(/b/, m => m)", json!({ "n": 5 }));
    assert_eq!(
        e,
        "'replace' is not a function on a number; convert it to a string first: ('' + x).replace(…)"
    );
    let e = common::err("n.replace(/b/, m => m)", json!({ "n": null }));
    assert_eq!(
        e,
        "Cannot call method 'replace' on null; the value is missing: write v?.replace(…) to get undefined instead, or give a default first: (v ?? '').replace(…)"
    );
    assert_eq!(
        common::ok("n?.replace(/b/, m => m)", json!({ "n": null })),
        None
    );
    let e = common::err("'abc'.replace(/b/, m => ({ m }))", json!({}));
    assert!(e.contains("JSON.stringify"), "{e}");
    let e = common::err("'abc'.replace(/b/, (m, ...[a]) => a)", json!({}));
    assert!(e.contains("a rest parameter needs a name"), "{e}");
    let e = common::err(
        "let n = 0\nreturn 'abc'.replace(/./g, m => { n = n + 1; return m })",
        json!({}),
    );
    assert!(e.contains("a callback cannot assign to 'n'"), "{e}");
    // a throw inside the callback is catchable, and stops the replacing
    assert_eq!(
        common::ok(
            "try { return 'abc'.replace(/b/, m => { Error('no ' + m) }) } catch (e) { return e }",
            json!({})
        ),
        Some(json!("no b"))
    );
    // a result's `$` patterns are text, the input is the receiver
    assert_eq!(
        common::ok("s.replace(/(b)/, m => '$1$`')", json!({ "s": "abc" })),
        Some(json!("a$1$`c"))
    );
}

#[test]
fn replace_callback_fuel_and_memory_are_bounded() {
    let run = |n: usize| {
        let opts = ajs::Options {
            fuel: 1e9,
            ..Default::default()
        };
        common::eval_with(
            "s.replace(/b/g, m => m + m).length",
            json!({ "s": "ab".repeat(n) }),
            opts,
        )
        .fuel_used
    };
    let small = run(100);
    let big = run(10_000);
    assert!(big > 50.0 * small, "100x matches: {small} -> {big}");
    // every invocation pays: a budget runs out part way, and is not overspent
    for code in [
        "s.replaceAll('', m => m)",
        "s.replace(/a/g, m => m)",
        "s.replaceAll('a', (m, i) => i)",
    ] {
        let out = common::eval_with(
            code,
            json!({ "s": "a".repeat(100_000) }),
            ajs::Options {
                fuel: 50.0,
                ..Default::default()
            },
        );
        assert_eq!(out.error.unwrap().message, "Out of Fuel", "{code}");
        assert!(out.fuel_used <= 50.5, "{code}: {}", out.fuel_used);
    }
    // the match lists and the output are admitted against the heap before they are built
    let out = crate::adversarial_common::eval_heap(
        "s.replaceAll('', m => 'xx').length",
        json!({ "s": "a".repeat(200_000) }),
        ajs::Options {
            fuel: 1e9,
            ..Default::default()
        },
        4 << 20,
    );
    let e = out.error.expect("the heap ceiling stops it");
    assert!(
        e.message.starts_with("Heap limit exceeded"),
        "{}",
        e.message
    );
    let out = crate::adversarial_common::eval_heap(
        "s.replace(/a/g, m => m.repeat(100)).length",
        json!({ "s": "a".repeat(20_000) }),
        ajs::Options {
            fuel: 1e9,
            ..Default::default()
        },
        1 << 20,
    );
    let e = out.error.expect("the heap ceiling stops it");
    assert!(
        e.message.starts_with("Heap limit exceeded"),
        "{}",
        e.message
    );
}
