//! Objects crossing the small-object threshold (8 properties: a vector searched in order below
//! it, a hash map above it): insertion order, overwrites keeping their position, array-index keys
//! first, spread, `Object.assign`, `JSON` and the boundary, compared with Node and with fixed
//! expectations.

use crate::common;

use serde_json::json;

/// Blocks of statements returning a value; each is run by Node inside a function. Orders are
/// returned as strings or arrays (JSON objects compare equal whatever their key order).
const DIFFERENTIAL: &[&str] = &[
    "let o = {}
let i = 0
while (i < 20) { o = { ...o, ['k' + i]: i }
i = i + 1 }
return [Object.keys(o).join(','), JSON.stringify(o), Object.values(o), Object.entries(o)[9]]",
    "let o = {}
let i = 0
while (i < 6) { o = { ...o, ['k' + i]: i }
i = i + 1 }
o = { ...o, k2: 'a' }
while (i < 12) { o = { ...o, ['k' + i]: i }
i = i + 1 }
o = { ...o, k2: 'b', k0: 'c', k11: 'd' }
o = { ...o, k7: 'e' }
return [JSON.stringify(o), Object.keys(o).length, o.k2, o.k11, o.nope, o['k7']]",
    "let o = { a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8 }
const at8 = JSON.stringify(o)
o = { ...o, h: 80 }
const still8 = JSON.stringify(o)
o = { ...o, i: 9, a: 10 }
o = { ...o, ['j']: 11 }
return [at8, still8, JSON.stringify(o), Object.keys(o).length, Object.hasOwn(o, 'i'), o.z === undefined, Object.hasOwn(o, 'j'), Object.hasOwn(o, 'y')]",
    "const ks = ['b', '10', 'a', '2', '01', '-1', '1.5', '0', 'z', '4294967294', '4294967295', 'c', '7']
let o = {}
let i = 0
while (i < ks.length) { o = { ...o, [ks[i]]: ks[i].length }
i = i + 1 }
const s = { y: 'y', 3: '3', x: 'x', 1: '1' }
return [Object.keys(o), Object.entries(o), JSON.stringify(o), Object.keys(s), JSON.stringify(s), JSON.stringify({ ...o, 3: 3, b: 'B' })]",
    "const o = { a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10, a: 11 }
return [JSON.stringify(o), Object.keys(o), o.a, o.j]",
    "let a = {}
let i = 0
while (i < 10) { a = { ...a, ['p' + i]: i }
i = i + 1 }
const b = { ...a, p3: 'x', q: 1 }
const c = Object.assign({ z: 0, p9: 'first' }, a, { p0: 'last' })
const small = { ...{ x: 1, y: 2 }, x: 3 }
const { p0, p1, ...rest } = b
return [JSON.stringify(b), JSON.stringify(c), JSON.stringify(small), Object.keys(c), Object.keys(rest), p0 + p1]",
    "const a = { a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7 }
const b = { ...a, h: 8, a: 0, i: 9, b: 1, j: 10 }
return [JSON.stringify(b), JSON.stringify({ ...b, ...a })]",
    "const o = JSON.parse('{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"a\":10,\"j\":11,\"i\":12,\"5\":0}')
const t = JSON.parse('{\"x\":1,\"y\":2,\"x\":3}')
const u = { ...JSON.parse(JSON.stringify(o)), a: 'A', k: 'K' }
return [JSON.stringify(o), JSON.stringify(t), Object.keys(o), JSON.stringify(u), JSON.stringify(o, null, 1).length]",
    "const e = []
let i = 0
while (i < 12) { e.push(['e' + (i % 10), i])
i = i + 1 }
const o = Object.fromEntries(e)
return [JSON.stringify(o), Object.keys(o).length, Object.entries(o).length]",
    "const xs = []
let n = 0
while (n < 5) { let o = {}
let i = 0
while (i < 7 + n) { o = { ...o, ['f' + ((i * 7) % (7 + n))]: n * 100 + i }
i = i + 1 }
xs.push(o)
n = n + 1 }
return xs.map(o => JSON.stringify(o))",
    "const o = ['q', 'w', 'e', 'r', 't', 'y', 'u', 'i', 'o', 'p', 'q', 'a'].reduce((acc, k, i) => ({ ...acc, [k]: i }), {})
return [JSON.stringify(o), Object.keys(o)]",
];

#[test]
fn objects_across_the_threshold_match_node() {
    common::compare_with_node(DIFFERENTIAL, common::Form::Block);
}

/// The same orders, fixed, and through the boundary in both directions.
#[test]
fn objects_across_the_threshold_keep_their_order() {
    // built key by key past 8, with overwrites before and after the switch
    let code = "let o = {}\nlet i = 0\nwhile (i < 6) { o = { ...o, ['k' + i]: i }\ni = i + 1 }\no = { ...o, k1: 'x' }\nwhile (i < 11) { o = { ...o, ['k' + i]: i }\ni = i + 1 }\no = { ...o, k1: 'y', k10: 'z' }\nreturn JSON.stringify(o)";
    assert_eq!(
        common::ok(code, json!({})),
        Some(json!(
            r#"{"k0":0,"k1":"y","k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":"z"}"#
        ))
    );
    // a returned object leaves the VM in its property order (serde_json keeps insertion order)
    let code = "let o = { b: 1, a: 2 }\nlet i = 0\nwhile (i < 9) { o = { ...o, ['n' + (8 - i)]: i }\ni = i + 1 }\nreturn { ...o, b: 3, ['2']: 'two' }";
    let out = common::ok(code, json!({})).expect("an object");
    assert_eq!(
        out.to_string(),
        r#"{"2":"two","b":3,"a":2,"n8":0,"n7":1,"n6":2,"n5":3,"n4":4,"n3":5,"n2":6,"n1":7,"n0":8}"#
    );
    // a context object of more than 8 properties comes in in order and keeps it when changed
    let mut big = serde_json::Map::new();
    for i in (0..12).rev() {
        big.insert(format!("c{i}"), json!(i));
    }
    let code = "const p = { ...o, c5: 'five', extra: true }\nreturn [Object.keys(p).join(','), p.c5, p.c0, Object.keys(o).join(',')]";
    let out = common::ok(code, json!({ "o": big })).expect("an array");
    assert_eq!(out[0], json!("c11,c10,c9,c8,c7,c6,c5,c4,c3,c2,c1,c0,extra"));
    assert_eq!(out[1], json!("five"));
    assert_eq!(out[2], json!(0));
    assert_eq!(out[3], json!("c11,c10,c9,c8,c7,c6,c5,c4,c3,c2,c1,c0"));
    // a small context object grows past 8 inside the VM
    let code = "let p = o\nlet i = 0\nwhile (i < 10) { p = { ...p, ['x' + i]: i }\ni = i + 1 }\nreturn Object.keys({ ...p, a: 'A' }).join(',')";
    assert_eq!(
        common::ok(code, json!({ "o": { "a": 1, "b": 2 } })),
        Some(json!("a,b,x0,x1,x2,x3,x4,x5,x6,x7,x8,x9"))
    );
}
