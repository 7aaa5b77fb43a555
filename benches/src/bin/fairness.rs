//! The fairness benchmark: does fuel predict time at the edges?
//!
//! Every builtin and operator at adversarial sizes and inputs, each measured as nanoseconds per
//! fuel unit and as the ratio to a plain `while` loop measured in the same run, printed worst
//! first as a markdown table (docs/PERFORMANCE.md, "Fairness"). Goal: every ratio ≤ 10.
//!
//!     cd benches && cargo run --release --bin fairness [-- FILTER] [--rounds N] [--ms T]
//!
//! Each row is a setup (building the adversarial input) and an operation run in a loop. The
//! program runs twice per round, with `2k` and with `k` iterations, alternating; the row's time
//! and fuel are the differences (so setup, compile and one-off collections cancel), its ns/fuel
//! the median over rounds. `k` is chosen so one round's operations take about `--ms` milliseconds.
//! Rows marked `regex` belong to the regex engine's pricing (docs/costs.md, "Regular
//! expressions").

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::time::Instant;

use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{Step, Vm, VmOptions};

/// Heap for every run: room for a few 4M-unit strings and their copies.
const HEAP: usize = 768 << 20;
/// Most operations a row runs per measured program.
const MAX_K: u64 = 2_000_000;
/// 4M code units: the longest strings the rows build.
const N: usize = 4_000_000;

struct Row {
    group: &'static str,
    name: String,
    setup: String,
    op: String,
}

fn row(group: &'static str, name: &str, setup: &str, op: &str) -> Row {
    Row {
        group,
        name: name.to_string(),
        setup: setup
            .replace("{N}", &N.to_string())
            .replace("{N2}", &(N / 2).to_string()),
        op: op.to_string(),
    }
}

fn rows() -> Vec<Row> {
    let long =
        "let a = 'a'.repeat({N})\nlet b = 'a'.repeat({N})\nlet c = 'a'.repeat({N} - 1) + 'b'";
    let mut v = vec![
        row("loop", "plain while loop", "", ""),
        // ---- comparisons on long equal-prefix strings
        row("compare", "a < c (4M, equal prefix)", long, "let r = a < c"),
        row("compare", "a <= c (4M)", long, "let r = a <= c"),
        row("compare", "a === b (4M, equal)", long, "let r = a === b"),
        row("compare", "a !== b (4M, equal)", long, "let r = a !== b"),
        row("compare", "a == b (4M, equal)", long, "let r = a == b"),
        row("compare", "if (a < c) fused branch (4M)", long, "if (a < c) { }"),
        row("compare", "if (a === b) fused branch (4M)", long, "if (a === b) { }"),
        row("compare", "a.localeCompare(c) (4M)", long, "let r = a.localeCompare(c)"),
        row("compare", "[b].includes(a) (4M)", &format!("{long}\nlet xs = [b]"), "let r = xs.includes(a)"),
        row("compare", "Set has(a) (4M key)", &format!("{long}\nlet s = Set([b])"), "let r = s.has(a)"),
        row("compare", "Set add(a) (4M key, present)", &format!("{long}\nlet s = Set([b])"), "s.add(a)"),
        row("compare", "o[a] lookup (4M key)", &format!("{long}\nlet o = {{ x: 1 }}"), "let r = o[a]"),
        row("compare", "{ ...o, [a]: 1 } (4M key, present)", &format!("{long}\nlet o = {{ [b]: 1 }}"), "let r = { ...o, [a]: 1 }"),
        row("compare", "sort 2,000 strings of 2,000 equal-prefix units", "let p = 'a'.repeat(2000)\nlet xs = []\nlet i = 0\nwhile (i < 2000) { xs.push(p + ((i * 7919) % 2000)) \n i = i + 1 }", "let r = xs.toSorted()"),
        row("compare", "sort 100k numbers (default: as strings)", "let xs = []\nlet i = 0\nwhile (i < 100000) { xs.push((i * 7919) % 100003 + 0.5) \n i = i + 1 }", "let r = xs.toSorted()"),
        row("compare", "numbers a < b", "let x = 1\nlet y = 2", "let r = x < y"),
        // ---- case mapping
        row("case", "'ß'.repeat(1M).toUpperCase()", "let s = 'ß'.repeat(1000000)", "let r = s.toUpperCase()"),
        row("case", "'ŉ'.repeat(1M).toUpperCase()", "let s = 'ŉ'.repeat(1000000)", "let r = s.toUpperCase()"),
        row("case", "'ΐ'.repeat(1M).toUpperCase() (3 units out)", "let s = 'ΐ'.repeat(1000000)", "let r = s.toUpperCase()"),
        row("case", "'ΑΣ '.repeat(1M).toLowerCase() (final sigma)", "let s = 'ΑΣ '.repeat(1000000)", "let r = s.toLowerCase()"),
        row("case", "'İ'.repeat(1M).toLowerCase()", "let s = 'İ'.repeat(1000000)", "let r = s.toLowerCase()"),
        row("case", "ASCII 4M toUpperCase()", "let s = 'a'.repeat({N})", "let r = s.toUpperCase()"),
        row("case", "ASCII 4M toLowerCase()", "let s = 'A'.repeat({N})", "let r = s.toLowerCase()"),
        row("case", "lone surrogates 2M toUpperCase()", "let s = String.fromCharCode(0xD800, 0x61).repeat(1000000)", "let r = s.toUpperCase()"),
        // ---- search
        row("search", "indexOf(a^1000 b) in a^4M", "let h = 'a'.repeat({N})\nlet n = 'a'.repeat(1000) + 'b'", "let r = h.indexOf(n)"),
        row("search", "indexOf(a^2M b) in a^4M", "let h = 'a'.repeat({N})\nlet n = 'a'.repeat({N2}) + 'b'", "let r = h.indexOf(n)"),
        row("search", "includes(a^1000 b) in a^4M", "let h = 'a'.repeat({N})\nlet n = 'a'.repeat(1000) + 'b'", "let r = h.includes(n)"),
        row("search", "includes('b') in a^4M", "let h = 'a'.repeat({N})", "let r = h.includes('b')"),
        row("search", "includes(ab^1000) in (ab^999 a)^k", "let n = 'a' + 'b'.repeat(1000)\nlet h = ('a' + 'b'.repeat(999)).repeat(4000)", "let r = h.includes(n)"),
        row("search", "lastIndexOf(b a^1000) in a^4M", "let h = 'a'.repeat({N})\nlet n = 'b' + 'a'.repeat(1000)", "let r = h.lastIndexOf(n)"),
        row("search", "lastIndexOf('b') in a^4M", "let h = 'a'.repeat({N})", "let r = h.lastIndexOf('b')"),
        row("search", "startsWith(a^2M) a^4M", "let h = 'a'.repeat({N})\nlet n = 'a'.repeat({N2})", "let r = h.startsWith(n)"),
        row("search", "endsWith(a^2M) a^4M", "let h = 'a'.repeat({N})\nlet n = 'a'.repeat({N2})", "let r = h.endsWith(n)"),
        row("search", "split(a^1000 b) of a^4M", "let h = 'a'.repeat({N})\nlet n = 'a'.repeat(1000) + 'b'", "let r = h.split(n)"),
        row("search", "split('a') of a^1M (1M pieces)", "let h = 'a'.repeat(1000000)", "let r = h.split('a')"),
        row("search", "split('') of 1M", "let h = 'ab'.repeat(500000)", "let r = h.split('')"),
        row("search", "replace(a^1000 b) in a^4M", "let h = 'a'.repeat({N})\nlet n = 'a'.repeat(1000) + 'b'", "let r = h.replace(n, 'x')"),
        row("search", "replaceAll('a', 'bb') in a^1M", "let h = 'a'.repeat(1000000)", "let r = h.replaceAll('a', 'bb')"),
        row("search", "replaceAll('', '-') in a^1M", "let h = 'a'.repeat(1000000)", "let r = h.replaceAll('', '-')"),
        row("search", "replace(x, \"$`$'\") in 4k", "let h = 'a'.repeat(4000) + 'x' + 'a'.repeat(4000)", "let r = h.replace('x', \"$`$'$`$'\")"),
        // ---- numbers: formatting
        row("number", "(5e-324).toPrecision(100)", "let x = 5e-324", "let r = x.toPrecision(100)"),
        row("number", "(1.7976931348623157e308).toPrecision(100)", "let x = 1.7976931348623157e308", "let r = x.toPrecision(100)"),
        row("number", "(5e-324).toFixed(100)", "let x = 5e-324", "let r = x.toFixed(100)"),
        row("number", "(0.1).toFixed(100)", "let x = 0.1", "let r = x.toFixed(100)"),
        row("number", "(1e20+0.5).toFixed(100)", "let x = 123456789012345680000", "let r = x.toFixed(100)"),
        row("number", "(5e-324).toString(3)", "let x = 5e-324", "let r = x.toString(3)"),
        row("number", "(1.7976931348623157e308).toString(2)", "let x = 1.7976931348623157e308", "let r = x.toString(2)"),
        row("number", "(1/3).toString(3)", "let x = 1 / 3", "let r = x.toString(3)"),
        row("number", "(5e-324).toString(36)", "let x = 5e-324", "let r = x.toString(36)"),
        row("number", "String(5e-324) ('' + x)", "let x = 5e-324", "let r = '' + x"),
        row("number", "(1.2345678901234567e-300).toString()", "let x = 1.2345678901234567e-300", "let r = x.toString()"),
        // ---- numbers: parsing
        row("parse", "parseFloat('1' x 1M)", "let s = '1'.repeat(1000000)", "let r = parseFloat(s)"),
        row("parse", "parseFloat('0.' + '1' x 1M)", "let s = '0.' + '1'.repeat(1000000)", "let r = parseFloat(s)"),
        row("parse", "parseFloat('1' x 1M + 'e-400')", "let s = '1'.repeat(1000000) + 'e-400'", "let r = parseFloat(s)"),
        row("parse", "parseFloat(' ' x 1M + '1')", "let s = ' '.repeat(1000000) + '1'", "let r = parseFloat(s)"),
        row("parse", "parseInt('1' x 1M)", "let s = '1'.repeat(1000000)", "let r = parseInt(s)"),
        row("parse", "parseInt('1' x 1M, 36)", "let s = 'z'.repeat(1000000)", "let r = parseInt(s, 36)"),
        row("parse", "Number-ish: +s of '1' x 1M", "let s = '1'.repeat(1000000)", "let r = +s"),
        row("parse", "s * 1 of '0.'+'1' x 1M", "let s = '0.' + '1'.repeat(1000000)", "let r = s * 1"),
        row("parse", "s == 1 ('1' x 1M)", "let s = '1'.repeat(1000000)", "let r = s == 1"),
        // ---- JSON
        row("json", "JSON.parse deep [[[...]]] 10k", "let s = '['.repeat(10000) + ']'.repeat(10000)", "let r = 0\ntry { r = JSON.parse(s) } catch (e) { r = 1 }"),
        row("json", "JSON.parse wide [1,1,...] 1M", "let s = '[' + '1,'.repeat(1000000) + '1]'", "let r = JSON.parse(s)"),
        row("json", "JSON.parse long string 4M", "let s = '\"' + 'a'.repeat({N}) + '\"'", "let r = JSON.parse(s)"),
        row("json", "JSON.parse \\u escapes 500k", "let s = '\"' + '\\\\u00e9'.repeat(500000) + '\"'", "let r = JSON.parse(s)"),
        row("json", "JSON.parse long number 1M digits", "let s = '1'.repeat(1000000)", "let r = JSON.parse(s)"),
        row("json", "JSON.parse object 100k keys", "let p = []\nlet i = 0\nwhile (i < 100000) { p.push('\"k' + i + '\":1')\n i = i + 1 }\nlet s = '{' + p.join(',') + '}'", "let r = JSON.parse(s)"),
        row("json", "JSON.parse 1 key of 4M units", "let s = '{\"' + 'a'.repeat({N}) + '\":1}'", "let r = JSON.parse(s)"),
        row("json", "JSON.stringify 1M numbers", "let xs = JSON.parse('[' + '0.1,'.repeat(1000000) + '5e-324]')", "let r = JSON.stringify(xs)"),
        row("json", "JSON.stringify 4M string of quotes", "let s = '\"'.repeat({N})", "let r = JSON.stringify(s)"),
        row("json", "JSON.stringify control chars 1M", "let s = String.fromCharCode(1).repeat(1000000)", "let r = JSON.stringify(s)"),
        row("json", "JSON.stringify nested 100 deep, indent", "let o = JSON.parse('['.repeat(100) + ']'.repeat(100))", "let r = JSON.stringify(o, null, 10)"),
        row("json", "JSON.stringify 100k keys, indent", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = JSON.stringify(o, null, '          ')"),
        // ---- URI
        row("uri", "encodeURIComponent astral 1M", "let s = '😀'.repeat(500000)", "let r = encodeURIComponent(s)"),
        row("uri", "encodeURI 2-byte 1M", "let s = 'é'.repeat(1000000)", "let r = encodeURI(s)"),
        row("uri", "encodeURIComponent ASCII 4M", "let s = 'a'.repeat({N})", "let r = encodeURIComponent(s)"),
        row("uri", "decodeURIComponent astral 1M", "let s = '%F0%9F%98%80'.repeat(250000)", "let r = decodeURIComponent(s)"),
        row("uri", "decodeURI reserved 1M", "let s = '%2F'.repeat(333333)", "let r = decodeURI(s)"),
        // ---- normalize
        row("normalize", "NFC e + 1M combining marks", "let s = 'e' + '\\u0301\\u0327'.repeat(500000)", "let r = s.normalize('NFC')"),
        row("normalize", "NFD of precomposed 1M", "let s = 'é'.repeat(1000000)", "let r = s.normalize('NFD')"),
        row("normalize", "NFKD of U+FDFA (18 out) 100k", "let s = '\\uFDFA'.repeat(100000)", "let r = s.normalize('NFKD')"),
        row("normalize", "NFKC of U+FDFA 100k", "let s = '\\uFDFA'.repeat(100000)", "let r = s.normalize('NFKC')"),
        row("normalize", "NFC ASCII 4M", "let s = 'a'.repeat({N})", "let r = s.normalize()"),
        row("normalize", "NFC Hangul jamo 1M", "let s = '\\u1100\\u1161\\u11A8'.repeat(333333)", "let r = s.normalize('NFC')"),
        // ---- building strings
        row("string", "a + b (4M + 4M)", long, "let r = a + b"),
        row("string", "template `${a}${b}` (4M)", long, "let r = `${a}-${b}`"),
        row("string", "a.concat(b, c)", long, "let r = a.concat(b, c)"),
        row("string", "'ab'.repeat(2M)", "", "let r = 'ab'.repeat(2000000)"),
        row("string", "padStart(4M, 'xyz')", "let s = 'a'", "let r = s.padStart(4000000, 'xyz')"),
        row("string", "padEnd(4M) single-unit fill", "let s = 'a'", "let r = s.padEnd(4000000)"),
        row("string", "slice(1) of 4M", "let s = 'a'.repeat({N})", "let r = s.slice(1)"),
        row("string", "substring(1) of 4M", "let s = 'a'.repeat({N})", "let r = s.substring(1)"),
        row("string", "substr(1) of 4M", "let s = 'a'.repeat({N})", "let r = s.substr(1)"),
        row("string", "trim() of spaces 4M + x", "let s = ' '.repeat({N}) + 'x'", "let r = s.trim()"),
        row("string", "trim() of all-space 4M", "let s = ' '.repeat({N})", "let r = s.trim()"),
        row("string", "charAt / at / charCodeAt", "let s = 'a'.repeat({N})", "let r = s.charCodeAt(5) + s.at(-1).length + s.charAt(3).length"),
        row("string", "s.length of 4M", "let s = 'a'.repeat({N})", "let r = s.length"),
        row("string", "String.fromCharCode(...255 args)", "let xs = []\nlet i = 0\nwhile (i < 255) { xs.push(65 + i % 26)\n i = i + 1 }", "let r = String.fromCharCode(...xs)"),
        row("string", "String.fromCodePoint(...255 astral)", "let xs = []\nlet i = 0\nwhile (i < 255) { xs.push(128512 + i)\n i = i + 1 }", "let r = String.fromCodePoint(...xs)"),
        row("string", "[...s] spread of 1M", "let s = 'ab'.repeat(500000)", "let r = [...s]"),
        row("string", "[...s] spread astral 1M units", "let s = '😀'.repeat(500000)", "let r = [...s]"),
        // ---- arrays
        row("array", "join(',') 1M short strings", "let xs = 'a,'.repeat(1000000).split(',')", "let r = xs.join(',')"),
        row("array", "join of 1M numbers", "let xs = []\nlet i = 0\nwhile (i < 1000000) { xs.push(i * 1.1) \n i = i + 1 }", "let r = xs.join(',')"),
        row("array", "join with 1k separator 100k", "let xs = 'a,'.repeat(100000).split(',')\nlet sep = 'x'.repeat(1000)", "let r = xs.join(sep)"),
        row("array", "xs.toString() 1M numbers 5e-324", "let xs = JSON.parse('[' + '5e-324,'.repeat(1000000) + '1]')", "let r = xs.toString()"),
        row("array", "slice() 1M", "let xs = 'a,'.repeat(1000000).split(',')", "let r = xs.slice()"),
        row("array", "concat 1M + 1M", "let xs = 'a,'.repeat(1000000).split(',')", "let r = xs.concat(xs)"),
        row("array", "[...xs] 1M", "let xs = 'a,'.repeat(1000000).split(',')", "let r = [...xs]"),
        row("array", "includes(missing) 1M numbers", "let xs = JSON.parse('[' + '1,'.repeat(1000000) + '1]')", "let r = xs.includes(2)"),
        row("array", "indexOf(NaN) 1M", "let xs = JSON.parse('[' + '1,'.repeat(1000000) + '1]')", "let r = xs.indexOf(NaN)"),
        row("array", "lastIndexOf(missing str) 1M", "let xs = 'a,'.repeat(1000000).split(',')", "let r = xs.lastIndexOf('b')"),
        row("array", "reverse() 1M", "let xs = 'a,'.repeat(1000000).split(',')", "xs.reverse()"),
        row("array", "toReversed() 1M", "let xs = 'a,'.repeat(1000000).split(',')", "let r = xs.toReversed()"),
        row("array", "shift() of 1M", "let xs = 'a,'.repeat(1000000).split(',')", "xs.shift()\nxs.push('a')"),
        row("array", "unshift(1) of 1M", "let xs = 'a,'.repeat(1000000).split(',')", "xs.unshift(1)\nxs.pop()"),
        row("array", "splice(0, 1) of 1M", "let xs = 'a,'.repeat(1000000).split(',')", "xs.splice(0, 1)\nxs.push('a')"),
        row("array", "fill(0) 1M", "let xs = 'a,'.repeat(1000000).split(',')", "xs.fill(0)"),
        row("array", "flat() of 1M [x]", "let xs = JSON.parse('[' + '[1],'.repeat(500000) + '[1]]')", "let r = xs.flat()"),
        row("array", "flat(Infinity) of 1k-deep", "let xs = JSON.parse('['.repeat(200) + '1' + ']'.repeat(200))", "let r = xs.flat(Infinity)"),
        row("array", "Array.of(...255)", "let xs = JSON.parse('[' + '1,'.repeat(254) + '1]')", "let r = Array.of(...xs)"),
        row("array", "Math.max(...255)", "let xs = JSON.parse('[' + '1,'.repeat(254) + '1]')", "let r = Math.max(...xs)"),
        row("array", "push(x) (amortized)", "let xs = []", "xs.push(1)"),
        row("array", "array literal of 100", "", "let r = [1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10,1,2,3,4,5,6,7,8,9,10]"),
        // ---- objects
        row("object", "Object.keys 100k keys", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = Object.keys(o)"),
        row("object", "Object.entries 100k keys", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = Object.entries(o)"),
        row("object", "Object.values 100k keys", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = Object.values(o)"),
        row("object", "Object.keys of 1M string", "let s = 'a'.repeat(1000000)", "let r = Object.keys(s)"),
        row("object", "Object.entries of 1M string", "let s = 'a'.repeat(1000000)", "let r = Object.entries(s)"),
        row("object", "Object.keys of 1M array", "let xs = JSON.parse('[' + '1,'.repeat(1000000) + '1]')", "let r = Object.keys(xs)"),
        row("object", "Object.fromEntries 100k", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)\nlet es = Object.entries(o)", "let r = Object.fromEntries(es)"),
        row("object", "Object.fromEntries 1 key 4M", "let es = [['a'.repeat({N}), 1]]", "let r = Object.fromEntries(es)"),
        row("object", "Object.assign 100k keys", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = Object.assign({}, o)"),
        row("object", "Object.assign of 1M array", "let xs = JSON.parse('[' + '1,'.repeat(1000000) + '1]')", "let r = Object.assign({}, xs)"),
        row("object", "Object.hasOwn(o, 4M key)", "let o = { a: 1 }\nlet k = 'a'.repeat({N})", "let r = Object.hasOwn(o, k)"),
        row("object", "{...o} 100k keys", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = { ...o }"),
        row("object", "o.x property get", "let o = { x: 1 }", "let r = o.x"),
        // ---- sets
        row("set", "Set(1M numbers)", "let xs = []\nlet i = 0\nwhile (i < 1000000) { xs.push(i) \n i = i + 1 }", "let r = Set(xs)"),
        row("set", "Set(100k long strings)", "let xs = []\nlet p = 'a'.repeat(100)\nlet i = 0\nwhile (i < 100000) { xs.push(p + i) \n i = i + 1 }", "let r = Set(xs)"),
        row("set", "union 1M", "let xs = []\nlet i = 0\nwhile (i < 1000000) { xs.push(i) \n i = i + 1 }\nlet s = Set(xs)", "let r = s.union(xs)"),
        row("set", "intersection 1M", "let xs = []\nlet i = 0\nwhile (i < 1000000) { xs.push(i) \n i = i + 1 }\nlet s = Set(xs)", "let r = s.intersection(xs)"),
        row("set", "diff 1M", "let xs = []\nlet i = 0\nwhile (i < 1000000) { xs.push(i) \n i = i + 1 }\nlet s = Set(xs)", "let r = s.diff(xs)"),
        row("set", "toArray 1M", "let xs = []\nlet i = 0\nwhile (i < 1000000) { xs.push(i) \n i = i + 1 }\nlet s = Set(xs)", "let r = s.toArray()"),
        row("set", "has(number)", "let s = Set([1, 2, 3])", "let r = s.has(2)"),
        // ---- dates
        row("date", "Date(iso)", "let t = '2024-01-15T10:30:00.123Z'", "let r = Date(t)"),
        row("date", "Date(4M junk) (invalid)", "let t = '2'.repeat({N})", "let r = 0\ntry { r = Date(t) } catch (e) { r = 1 }"),
        row("date", "format('YYYY-MM-DD HH:mm:ss')", "let d = Date('2024-01-15T10:30:00Z')", "let r = d.format('YYYY-MM-DD HH:mm:ss')"),
        row("date", "add + diff", "let d = Date('2024-01-15T10:30:00Z')", "let r = d.add({ days: 20, months: 3 }).diff(d, 'days')"),
        row("date", "toISOString / isBefore", "let d = Date('2024-01-15T10:30:00Z')\nlet e = Date(0)", "let r = d.toISOString().length + (d.isBefore(e) ? 1 : 0)"),
        // ---- pure atoms
        row("atom", "template 1M placeholders", "let t = '{{a}}'.repeat(1000000)\nlet vars = { a: 'xyz' }", "let r = template({ tmpl: t, vars })"),
        row("atom", "template 1 var of 4M", "let t = '{{a}}{{a}}'\nlet vars = { a: 'x'.repeat({N2}) }", "let r = template({ tmpl: t, vars })"),
        row("atom", "pick 100k keys", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)\nlet ks = Object.keys(o)", "let r = pick({ obj: o, keys: ks })"),
        row("atom", "omit 100k keys", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)\nlet ks = Object.keys(o)", "let r = omit({ obj: o, keys: ks })"),
        row("atom", "merge 100k + 100k", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = merge({ a: o, b: o })"),
        row("atom", "keys 100k", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = keys({ obj: o })"),
        row("atom", "split atom a^1000 b in a^4M", "let h = 'a'.repeat({N})\nlet n = 'a'.repeat(1000) + 'b'", "let r = split({ str: h, sep: n })"),
        row("atom", "join atom 1M", "let xs = 'a,'.repeat(1000000).split(',')", "let r = join({ list: xs, sep: ',' })"),
        row("atom", "len 1M", "let xs = 'a,'.repeat(1000000).split(',')", "let r = len({ list: xs })"),
        row("atom", "jsonParse wide 1M", "let s = '[' + '1,'.repeat(1000000) + '1]'", "let r = jsonParse({ str: s })"),
        row("atom", "jsonStringify 1M", "let xs = JSON.parse('[' + '0.1,'.repeat(1000000) + '1]')", "let r = jsonStringify({ value: xs })"),
        row("atom", "hash 4M string", "let s = 'a'.repeat({N})", "let r = hash({ value: s })"),
        row("atom", "hash 100k-key object", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = hash({ value: o })"),
        row("atom", "random / uuid", "", "let r = random() + uuid().length"),
        row("atom", "filter 100k items", "let xs = []\nlet i = 0\nwhile (i < 100000) { xs.push({ a: i, b: 'x' }) \n i = i + 1 }", "let r = filter(xs, [{ a: 1 }])"),
        row("atom", "Schema.fromExample 100k keys", "let ps = []\nlet i = 0\nwhile (i < 100000) { ps.push(['k' + i, i])\n i = i + 1 }\nlet o = Object.fromEntries(ps)", "let r = Schema.fromExample(o)"),
        row("atom", "Schema.isValid 100k items", "let xs = []\nlet i = 0\nwhile (i < 100000) { xs.push({ a: i }) \n i = i + 1 }\nlet sc = Schema.fromExample([{ a: 1 }])", "let r = Schema.isValid(xs, sc)"),
        // ---- math and the interpreter itself
        row("math", "Math.sin/pow/hypot", "let x = 0.7", "let r = Math.sin(x) + Math.pow(x, 3.3) + Math.hypot(x, x, x)"),
        row("math", "arithmetic a * b + c", "let x = 3\nlet y = 4", "let r = x * y + x"),
        row("math", "isNaN/isFinite of 1M-digit string", "let s = '1'.repeat(1000000)", "let r = isNaN(s)"),
        // ---- callbacks (compiled loops)
        row("callback", "map/filter/reduce 1M", "let xs = JSON.parse('[' + '1,'.repeat(1000000) + '1]')", "let r = xs.map(x => x + 1).filter(x => x > 1).reduce((s, x) => s + x, 0)"),
        row("callback", "sort with comparator 100k", "let xs = []\nlet i = 0\nwhile (i < 100000) { xs.push((i * 7919) % 100003) \n i = i + 1 }", "let r = xs.toSorted((p, q) => p - q)"),
        // ---- regex rows: the fuel-regex helper's to price (marked)
        row("regex", "/(\\w{0,60}\\s?){1,30}[^\\w\\s]/u.test(ab^10k)", "let s = 'ab'.repeat(10000)", "let r = /(\\w{0,60}\\s?){1,30}[^\\w\\s]/u.test(s)"),
        row("regex", "/a+b/.test(a^1M)", "let s = 'a'.repeat(1000000)", "let r = /a+b/.test(s)"),
        row("regex", "s.replace(/a/g, 'bb') a^1M", "let s = 'a'.repeat(1000000)", "let r = s.replace(/a/g, 'bb')"),
        row("regex", "s.split(/,/) 1M", "let s = 'a,'.repeat(500000)", "let r = s.split(/,/)"),
    ];
    v.shrink_to_fit();
    v
}

fn program(r: &Row, k: u64) -> String {
    format!(
        "{}\nlet i__ = 0\nwhile (i__ < {k}) {{\n{}\ni__ = i__ + 1\n}}\nreturn 0",
        r.setup, r.op
    )
}

struct Run {
    secs: f64,
    fuel: f64,
}

fn run(src: &str) -> Result<Run, String> {
    let p = compile(
        src,
        &CompileOptions {
            mode: Mode::Eval,
            externals: &[],
            atoms: &[],
            source_name: "<fairness>",
        },
    )
    .map_err(|e| format!("compile: {e:?}"))?
    .verify()
    .map_err(|e| format!("verify: {e:?}"))?;
    let mut vm = Vm::new(
        p,
        &[],
        VmOptions {
            fuel: 1 << 50,
            max_heap_bytes: HEAP,
            atoms: HashMap::new(),
            ..VmOptions::default()
        },
    )
    .map_err(|e| format!("vm: {e:?}"))?;
    let t = Instant::now();
    let step = vm.run(u64::MAX);
    let secs = t.elapsed().as_secs_f64();
    match step {
        Step::Done(_) => Ok(Run {
            secs,
            fuel: vm.fuel_used(),
        }),
        other => Err(format!("{other:?}").chars().take(160).collect()),
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

struct Measured {
    group: &'static str,
    name: String,
    ns_per_fuel: f64,
    fuel_per_op: f64,
    us_per_op: f64,
}

fn measure(r: &Row, rounds: usize, target_secs: f64) -> Result<Measured, String> {
    // The row is timed as the difference between `2k` and `k` operations after the same setup,
    // so the setup, and one-off events the first operation triggers (a garbage collection due
    // once the setup's heap is built), land on both sides and cancel. Grow k until those k
    // more operations take about `target_secs` (a single cheap operation is below the noise).
    let mut k = 1u64;
    loop {
        let dt = run(&program(r, 2 * k))?.secs - run(&program(r, k))?.secs;
        if dt >= target_secs / 2.0 || k >= MAX_K {
            break;
        }
        let grow = (target_secs / dt.max(target_secs / 64.0)).clamp(2.0, 64.0);
        k = ((k as f64 * grow) as u64).min(MAX_K);
    }
    let (base_src, src) = (program(r, k), program(r, 2 * k));
    let mut per_fuel = Vec::with_capacity(rounds);
    let mut per_op = Vec::with_capacity(rounds);
    let mut fuel = 0.0;
    for i in 0..rounds {
        let (a, b) = if i % 2 == 0 {
            let a = run(&src)?;
            (a, run(&base_src)?)
        } else {
            let b = run(&base_src)?;
            (run(&src)?, b)
        };
        fuel = a.fuel - b.fuel;
        let dt = (a.secs - b.secs).max(0.0);
        per_fuel.push(dt * 1e9 / fuel.max(1e-9));
        per_op.push(dt * 1e6 / k as f64);
    }
    Ok(Measured {
        group: r.group,
        name: r.name.clone(),
        ns_per_fuel: median(per_fuel),
        fuel_per_op: fuel / k as f64,
        us_per_op: median(per_op),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut filter = String::new();
    let mut rounds = 5usize;
    let mut ms = 40.0f64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = it.next().and_then(|s| s.parse().ok()).unwrap_or(rounds),
            "--ms" => ms = it.next().and_then(|s| s.parse().ok()).unwrap_or(ms),
            f => filter = f.to_string(),
        }
    }
    let started = Instant::now();
    let all = rows();
    let loop_row = &all[0];
    let lp = measure(loop_row, rounds.max(7), ms / 1e3).expect("the plain loop runs");
    eprintln!("plain loop: {:.1} ns/fuel", lp.ns_per_fuel);
    let mut out = Vec::new();
    let mut failed = Vec::new();
    for r in all
        .iter()
        .skip(1)
        .filter(|r| r.name.contains(&filter) || r.group == filter)
    {
        match measure(r, rounds, ms / 1e3) {
            Ok(m) => {
                eprintln!(
                    "{:>8.1}x  {:<10} {}",
                    m.ns_per_fuel / lp.ns_per_fuel,
                    m.group,
                    m.name
                );
                out.push(m);
            }
            Err(e) => {
                eprintln!("   error  {:<10} {}: {e}", r.group, r.name);
                failed.push((r.group, r.name.clone(), e));
            }
        }
    }
    // the loop again, so drift over the run shows
    let lp2 = measure(loop_row, rounds.max(7), ms / 1e3).expect("the plain loop runs");
    let loop_ns = (lp.ns_per_fuel + lp2.ns_per_fuel) / 2.0;
    out.sort_by(|a, b| b.ns_per_fuel.total_cmp(&a.ns_per_fuel));
    println!(
        "plain `while` loop: {:.1} ns/fuel at the start, {:.1} at the end; ratios use their mean ({:.1})",
        lp.ns_per_fuel, lp2.ns_per_fuel, loop_ns
    );
    println!();
    println!("| × loop | ns/fuel | fuel/op | µs/op | group | what |");
    println!("|---:|---:|---:|---:|---|---|");
    for m in &out {
        let mark = if m.group == "regex" {
            " (regex: fuel-regex's)"
        } else {
            ""
        };
        println!(
            "| {:.1} | {:.0} | {:.3} | {:.2} | {} | {}{} |",
            m.ns_per_fuel / loop_ns,
            m.ns_per_fuel,
            m.fuel_per_op,
            m.us_per_op,
            m.group,
            m.name.replace('|', "\\|"),
            mark
        );
    }
    for (g, n, e) in &failed {
        println!("| error | | | | {g} | {n}: {} |", e.replace('|', "\\|"));
    }
    let worst = out.iter().find(|m| m.group != "regex");
    if let Some(w) = worst {
        println!();
        println!(
            "worst outside regex: {:.1}x ({}); {} rows in {:.0} s",
            w.ns_per_fuel / loop_ns,
            w.name,
            out.len(),
            started.elapsed().as_secs_f64()
        );
    }
}
