//! Semantics of the second batch of builtins: `sort`/`toSorted`, `substr`, `normalize`, regular
//! expressions (decision 23), `Set` (decision 13), `Date` (decision 12, UTC) and the pure utility
//! atoms (decision 21); with their refusals.

use crate::common::{self, err, ok};
use serde_json::json;

#[test]
fn sort_without_a_comparator_sorts_as_strings_stably() {
    assert_eq!(
        ok("[3, 1, 10, 2].sort()", json!({})),
        Some(json!([1, 10, 2, 3]))
    );
    assert_eq!(
        ok("['b', undefined, 'a', true, null].sort()", json!({})),
        Some(json!(["a", "b", null, true, null]))
    );
    assert_eq!(
        ok(
            "let a = [2, 1]\nlet b = a.toSorted()\nreturn [a, b]",
            json!({})
        ),
        Some(json!([[2, 1], [1, 2]]))
    );
    assert_eq!(
        ok("let a = ['b', 'a']\na.sort()\nreturn a", json!({})),
        Some(json!(["a", "b"]))
    );
    assert!(err("[[1], 2].sort()", json!({}))
        .starts_with("Cannot sort an array that contains arrays or objects"));
    assert!(err("[{}, 2].toSorted()", json!({})).starts_with("Cannot sort"));
}

#[test]
fn substr_and_normalize() {
    assert_eq!(ok("'abcdef'.substr(-3, 2)", json!({})), Some(json!("de")));
    assert_eq!(ok("'abcdef'.substr(2)", json!({})), Some(json!("cdef")));
    assert_eq!(
        ok("'e\\u0301'.normalize('NFC').length", json!({})),
        Some(json!(1))
    );
    assert_eq!(
        ok("'\\u00e9'.normalize('NFD').length", json!({})),
        Some(json!(2))
    );
    assert_eq!(
        err("'a'.normalize('nfc')", json!({})),
        "The normalization form should be one of NFC, NFD, NFKC, NFKD."
    );
}

#[test]
fn locale_compare_treats_canonically_equivalent_strings_as_equal() {
    for (code, want) in [
        ("'o\\u0308'.localeCompare('\\u00f6')", 0),
        ("'\\u00f6'.localeCompare('o\\u0308')", 0),
        ("'a\\u0323\\u0308'.localeCompare('a\\u0308\\u0323')", 0),
        ("'\\u1100\\u1161'.localeCompare('\\uac00')", 0),
        ("'x\\u0308'.localeCompare('x')", 1),
        ("'ab'.localeCompare('ab\\u0308')", -1),
        ("'abc'.localeCompare('abd')", -1),
    ] {
        assert_eq!(ok(code, json!({})), Some(json!(want)), "{code}");
    }
}

#[test]
fn locale_compare_pays_for_normalizing_a_hostile_run() {
    // two 2M-unit runs of combining marks in opposite canonical order: equal once normalized,
    // and the normalizing is paid for by the units it reads (a plain compare would be cheap)
    let code = "let a = 'o' + '\\u0308\\u0323'.repeat(1000000)\n\
                let b = 'o' + '\\u0323\\u0308'.repeat(1000000)\n\
                return a.localeCompare(b)";
    let out = common::eval_with(
        code,
        json!({}),
        ajs::Options {
            fuel: 10_000_000.0,
            ..Default::default()
        },
    );
    assert_eq!(out.result.to_json(), Some(json!(0)), "{:?}", out.error);
    assert!(
        out.fuel_used > 400_000.0,
        "normalizing 4M units cost only {}",
        out.fuel_used
    );
    // over budget, it stops before normalizing
    let out = common::eval_with(
        code,
        json!({}),
        ajs::Options {
            fuel: 100_000.0,
            ..Default::default()
        },
    );
    assert!(out.error.is_some());
}

#[test]
fn regex_group_names_are_javascript_identifiers() {
    for (code, want) in [
        ("'abc'.replace(/(?<$>b)/, '[$<$>]')", json!("a[b]c")),
        ("'abc'.replace(/(?<π>b)/u, '[$<π>]')", json!("a[b]c")),
        ("'abc'.replace(/(?<_x$1>b)/, '<$<_x$1>>')", json!("a<b>c")),
        (
            "'2020-01'.replace(/(?<y>\\d+)-(?<m>\\d+)/, '$<m>/$<y>')",
            json!("01/2020"),
        ),
        ("/x/.exec()", json!(null)),
        ("/und/.test()", json!(true)),
    ] {
        assert_eq!(ok(code, json!({})), Some(want), "{code}");
    }
    assert!(err("/(?<a>x)(?<a>y)/", json!({})).contains("Duplicate capture group name"));
    assert!(err("/(?<1a>x)/", json!({})).contains("Invalid capture group name"));
    assert!(err("/(?<a-b>x)/", json!({})).contains("Invalid capture group name"));
}

#[test]
fn regular_expressions() {
    assert_eq!(ok("/ab+c/i.test('xABBC')", json!({})), Some(json!(true)));
    assert_eq!(
        ok("'a1b22'.match(/\\d+/g)", json!({})),
        Some(json!(["1", "22"]))
    );
    assert_eq!(ok("'x'.match(/\\d/)", json!({})), Some(json!(null)));
    assert_eq!(
        ok(
            "'2024-01-15'.replace(/(\\d+)-(\\d+)-(?<d>\\d+)/, '$<d>.$2.$1 [$&]')",
            json!({})
        ),
        Some(json!("15.01.2024 [2024-01-15]"))
    );
    assert_eq!(
        ok("'a1b2'.matchAll(/[a-z](\\d)/g)", json!({})),
        Some(json!([["a1", "1"], ["b2", "2"]]))
    );
    assert_eq!(
        ok("'a, b ,c'.split(/\\s*,\\s*/)", json!({})),
        Some(json!(["a", "b", "c"]))
    );
    assert_eq!(ok("'héllo wörld'.search(/w/)", json!({})), Some(json!(6)));
    assert_eq!(ok("'😀a'.search(/a/)", json!({})), Some(json!(2)));
    assert_eq!(
        ok(
            "let r = /a/g\nreturn [r.test('aa'), r.test('aa'), r.test('aa')]",
            json!({})
        ),
        Some(json!([true, true, false]))
    );
    assert_eq!(
        ok("[typeof /a/, /a/gi.flags, /a/.source]", json!({})),
        Some(json!(["object", "gi", "a"]))
    );
    // a regex crosses out as {}, like JSON.stringify of a JavaScript RegExp
    assert_eq!(ok("[/a/]", json!({})), Some(json!([{}])));
    assert_eq!(ok("JSON.stringify(/a/)", json!({})), Some(json!("{}")));
    // JavaScript's \d and \w are ASCII; '.' stops at \r
    assert_eq!(ok("/\\d/.test('٣')", json!({})), Some(json!(false)));
    assert_eq!(ok("/a.b/.test('a\\rb')", json!({})), Some(json!(false)));
    assert_eq!(ok("/a.b/s.test('a\\rb')", json!({})), Some(json!(true)));
}

#[test]
fn regex_refusals() {
    for (code, want) in [
        ("/(a)\\1/.test('aa')", "Backreferences"),
        ("/a(?=b)/.test('ab')", "Lookahead"),
        ("/(?<!a)b/.test('b')", "Lookbehind"),
        ("/a/y.test('a')", "sticky"),
    ] {
        let e = err(code, json!({}));
        assert!(e.contains(want), "{code}: {e}");
        assert!(e.contains(" at <source>:"), "compile error expected: {e}");
    }
    assert!(err("'aa'.replaceAll(/a/, 'b')", json!({})).contains("global"));
    assert!(err("'aa'.matchAll(/a/)", json!({})).contains("non-global"));
    assert!(err(
        "regexMatch({ pattern: 'a'.repeat(1001), value: 'a' })",
        json!({})
    )
    .starts_with("Regex pattern too long (1001 > 1000)"));
    assert!(
        err("regexMatch({ pattern: '(a)\\\\1', value: 'a' })", json!({})).contains("backtracking")
    );
}

#[test]
fn sets() {
    assert_eq!(
        ok("Set([1, 2, 2, 'a', 'a', NaN, NaN, 0, -0])", json!({})),
        Some(json!([1, 2, "a", null, 0]))
    );
    assert_eq!(
        ok("let s = Set()\ns.add(1)\ns.add(1)\ns.add('x')\nreturn [s.size, s.has(1), s.has('y'), s.toArray()]", json!({})),
        Some(json!([2, true, false, [1, "x"]]))
    );
    assert_eq!(
        ok("Set([1, 2, 3]).remove(2)", json!({})),
        Some(json!([1, 3]))
    );
    assert_eq!(ok("Set([1, 2, 3]).clear().size", json!({})), Some(json!(0)));
    assert_eq!(
        ok("Set([1, 2]).union(Set([2, 3]))", json!({})),
        Some(json!([1, 2, 3]))
    );
    assert_eq!(
        ok("Set([1, 2, 3]).intersection([2, 3, 4])", json!({})),
        Some(json!([2, 3]))
    );
    assert_eq!(
        ok("Set([1, 2, 3]).diff([2])", json!({})),
        Some(json!([1, 3]))
    );
    assert_eq!(
        ok("[typeof Set(), JSON.stringify(Set(['a']))]", json!({})),
        Some(json!(["object", "[\"a\"]"]))
    );
    let o = "let o = {}\nlet s = Set([o, o, {}])\nreturn s.size";
    assert_eq!(ok(o, json!({})), Some(json!(2)));
    assert!(err("Set('abc')", json!({})).contains("needs an array"));
    assert!(err("new Set([1])", json!({})).contains("write Set([1]) (no 'new')"));
}

#[test]
fn dates_are_utc() {
    let d = "let d = Date('2024-01-15T10:20:30.250Z')\nreturn [d.value, d.timestamp, d.year, d.month, d.day, d.hours, d.minutes, d.seconds, d.dayOfWeek]";
    assert_eq!(
        ok(d, json!({})),
        Some(json!([
            "2024-01-15T10:20:30.250Z",
            1705314030250u64,
            2024,
            1,
            15,
            10,
            20,
            30,
            1
        ]))
    );
    assert_eq!(
        ok("Date('2024-01-15').toISOString()", json!({})),
        Some(json!("2024-01-15T00:00:00.000Z"))
    );
    assert_eq!(ok("Date(0).getTime()", json!({})), Some(json!(0)));
    assert_eq!(
        ok(
            "Date('2024-01-31').add({ months: 1 }).format('date')",
            json!({})
        ),
        Some(json!("2024-03-02"))
    );
    assert_eq!(
        ok(
            "Date('2024-01-15T10:00:00Z').add({ days: 1, hours: -2 }).value",
            json!({})
        ),
        Some(json!("2024-01-16T08:00:00.000Z"))
    );
    assert_eq!(
        ok("Date('2024-01-15T10:20:30Z').format('time')", json!({})),
        Some(json!("10:20:30"))
    );
    assert_eq!(
        ok(
            "Date('2024-01-15T10:20:30Z').format('DD/MM/YYYY HH:mm')",
            json!({})
        ),
        Some(json!("15/01/2024 10:20"))
    );
    assert_eq!(
        ok("Date('2024-01-15').format('iso')", json!({})),
        Some(json!("iso"))
    );
    assert_eq!(
        ok(
            "Date('2024-01-20').diff(Date('2024-01-15'), 'days')",
            json!({})
        ),
        Some(json!(5))
    );
    assert_eq!(
        ok("Date('2024-01-15').isBefore('2024-01-16')", json!({})),
        Some(json!(true))
    );
    assert_eq!(
        ok("Date('2024-01-15').isAfter(Date('2024-01-16'))", json!({})),
        Some(json!(false))
    );
    // crosses out as the ISO string, as JSON.stringify does for a JavaScript Date
    assert_eq!(
        ok("[Date(86400000)]", json!({})),
        Some(json!(["1970-01-02T00:00:00.000Z"]))
    );
    assert_eq!(
        ok("JSON.stringify({ d: Date(0) })", json!({})),
        Some(json!("{\"d\":\"1970-01-01T00:00:00.000Z\"}"))
    );
    assert_eq!(ok("typeof Date()", json!({})), Some(json!("object")));
    assert_eq!(ok("typeof Date.now()", json!({})), Some(json!("number")));
    assert_eq!(
        err("Date('not a date')", json!({})),
        "Invalid date: not a date"
    );
    assert!(err("new Date()", json!({})).contains("write Date() (no 'new')"));
}

#[test]
fn pure_atoms() {
    let cases = [
        (
            "template({ tmpl: 'Hi {{name}} ({{n}}){{missing}}', vars: { name: 'Bo', n: 3 } })",
            json!("Hi Bo (3)"),
        ),
        (
            "regexMatch({ pattern: '^a+b$', value: 'aaab' })",
            json!(true),
        ),
        (
            "pick({ obj: { a: 1, b: 2, c: 3 }, keys: ['c', 'a', 'z'] })",
            json!({ "c": 3, "a": 1 }),
        ),
        (
            "omit({ obj: { a: 1, b: 2, c: 3 }, keys: ['b'] })",
            json!({ "a": 1, "c": 3 }),
        ),
        (
            "merge({ a: { x: 1, y: 2 }, b: { y: 3, z: 4 } })",
            json!({ "x": 1, "y": 3, "z": 4 }),
        ),
        ("keys({ obj: { p: 1, q: 2 } })", json!(["p", "q"])),
        ("split({ str: 'a-b', sep: '-' })", json!(["a", "b"])),
        ("join({ list: [1, 2], sep: '+' })", json!("1+2")),
        ("len({ list: [1, 2, 3] })", json!(3)),
        ("len({ list: 5 })", json!(0)),
        (
            "jsonParse({ str: '[1, {\"a\": 2}]' })",
            json!([1, { "a": 2 }]),
        ),
        ("jsonStringify({ value: { a: [1] } })", json!("{\"a\":[1]}")),
        (
            "hash({ value: 'abc' })",
            json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ),
    ];
    for (code, want) in cases {
        assert_eq!(ok(code, json!({})), Some(want), "{code}");
    }
    let r = ok("random({ min: 1, max: 6, format: 'integer' })", json!({})).unwrap();
    let r = r.as_f64().unwrap();
    assert!((1.0..=6.0).contains(&r) && r.fract() == 0.0, "{r}");
    let u = ok("uuid()", json!({})).unwrap();
    let u = u.as_str().unwrap();
    assert_eq!(u.len(), 36);
    assert_eq!(&u[14..15], "4");
    assert_eq!(
        ok("random({ format: 'base36', length: 12 }).length", json!({})),
        Some(json!(12))
    );
    assert!(err("template({ vars: {} })", json!({})).contains("missing required input 'tmpl'"));
    assert!(err("pick(1, 2)", json!({})).contains("takes one object"));
    // a context key of the same name still reads as a value
    assert_eq!(
        ok("keys + len", json!({ "keys": 1, "len": 2 })),
        Some(json!(3))
    );
}

#[test]
fn spread_of_a_million_arguments_is_paid_per_element() {
    let code =
        "const a = Array.from({ length: 1000000 })\nreturn [Math.max(...a.map((x, i) => i)), 1]";
    let run = |fuel: f64| {
        common::eval_with(
            code,
            json!({}),
            ajs::Options {
                fuel,
                ..Default::default()
            },
        )
    };
    let out = run(10_000_000.0);
    assert_eq!(
        out.result.to_json(),
        Some(json!([999_999, 1])),
        "{:?}",
        out.error
    );
    // the spread itself pays per element: the same program without it is cheaper by about that
    let without = common::eval_with(
        "const a = Array.from({ length: 1000000 })\nreturn [a.map((x, i) => i).length, 1]",
        json!({}),
        ajs::Options {
            fuel: 10_000_000.0,
            ..Default::default()
        },
    );
    assert!(
        out.fuel_used - without.fuel_used >= 90_000.0,
        "{} vs {}",
        out.fuel_used,
        without.fuel_used
    );
}

#[test]
fn match_result_properties_survive_collections_and_cost_their_room() {
    // a million live match results, each with its index/input/groups object: the heap limit
    // sees them (a run under a small heap fails as a heap limit, not a crash)
    let code = "const all = []\nlet i = 0\n\
                while (i < 1000000) { all.push(/(?<d>\\d)/.exec('ab' + (i % 10))); i = i + 1 }\n\
                return all.length";
    let out = common::eval_with(
        code,
        json!({}),
        ajs::Options {
            fuel: 1e9,
            ..Default::default()
        },
    );
    let e = out
        .error
        .expect("a million match results exceed the default heap");
    assert!(e.message.contains("Heap limit"), "{}", e.message);
    // survivors keep their properties across collections
    let code = "const keep = []\nlet i = 0\n\
                while (i < 20000) { const m = /(?<d>\\d)/.exec('ab' + (i % 10))\n\
                if (i % 1000 == 0) { keep.push(m) }\n i = i + 1 }\n\
                return keep.map(m => m.index + ':' + m.groups.d + ':' + m.input).join()";
    let out = common::eval_with(
        code,
        json!({}),
        ajs::Options {
            fuel: 1e8,
            ..Default::default()
        },
    );
    let want: Vec<String> = (0..20)
        .map(|k| format!("2:{}:ab{}", (k * 1000) % 10, (k * 1000) % 10))
        .collect();
    assert_eq!(
        out.result.to_json(),
        Some(json!(want.join(","))),
        "{:?}",
        out.error
    );
}
