//! Fuel used by a fixed set of programs, pinned in `tests/golden/fuel.txt`: any change to the
//! cost table or to code generation shows up as a reviewed diff. Regenerate with
//! `AJS_BLESS=1 cargo test --release -p ajs --test ajs_tests fuel_golden`.

use crate::common;

use serde_json::json;

const PROGRAMS: &[(&str, &str)] = &[
    ("add", "a + b"),
    ("while-1000", "let i = 0\nwhile (i < 1000) { i = i + 1 }\nreturn i"),
    ("while-sum", "let i = 0\nlet t = 0\nwhile (i < 100) { t = t + i\n i++ }\nreturn t"),
    ("object-literal", "return { a: 1, b: [1, 2, 3], c: { d: 'x' } }"),
    ("template", "return `${a} + ${b} = ${a + b}`"),
    ("string-concat", "let s = ''\nlet i = 0\nwhile (i < 50) { s = s + 'ab'\n i++ }\nreturn s.length"),
    ("math", "return Math.max(a, b, 3) + Math.floor(2.5) + Math.sqrt(16)"),
    ("try-catch", "try { Error('x') } catch (e) { return e }"),
    ("map-filter-reduce", "let xs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nreturn xs.map(x => x * 2).filter(x => x > 5).reduce((s, x) => s + x, 0)"),
    ("sort-comparator", "return [5, 3, 9, 1, 7, 2, 8].sort((x, y) => x - y)"),
    ("json", "return JSON.parse(JSON.stringify({ a: [1, 2, { b: 'c' }] }))"),
    ("string-methods", "return 'Hello, World'.toUpperCase().split(', ').join('-').padStart(20, '.')"),
    ("destructure-spread", "let { x, ...rest } = { x: 1, y: 2, z: 3 }\nreturn [...Object.keys(rest), x]"),
    ("push-loop", "let xs = []\nlet i = 0\nwhile (i < 100) { xs.push(i)\n i++ }\nreturn xs.length"),
];

#[test]
fn fuel_matches_the_golden_file() {
    let mut text =
        String::from("# program: fuel used (milli-fuel) — regenerate with AJS_BLESS=1\n");
    for (name, code) in PROGRAMS {
        let out = common::eval_with(
            code,
            json!({ "a": 1, "b": 2 }),
            ajs::Options {
                fuel: 1e6,
                ..Default::default()
            },
        );
        assert!(out.error.is_none(), "{name}: {:?}", out.error);
        text.push_str(&format!(
            "{name}: {}\n",
            (out.fuel_used * 1000.0).round() as u64
        ));
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/fuel.txt");
    if std::env::var_os("AJS_BLESS").is_some() {
        std::fs::write(path, &text).expect("write golden file");
        return;
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        text, want,
        "fuel changed: review the diff, then rerun with AJS_BLESS=1 to accept it"
    );
}
