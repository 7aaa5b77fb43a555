//! Programs shared by the benchmarks in `benches/` and the opcode census in `examples/`.
//! Run everything with `cd benches && cargo bench`; see README.md and docs/PERFORMANCE.md.

/// The 8 KB agent program the compile benchmark compiles (valid AJS and plain JavaScript).
pub const AGENT_8K: &str = include_str!("../programs/agent_8k.js");

/// One program in each dialect; `rhai` is `None` where rhai has no counterpart.
pub struct Program {
    pub name: &'static str,
    /// AJS (run with `Eval`, or as an agent when `agent` is set).
    pub ajs: &'static str,
    pub agent: bool,
    /// JavaScript for QuickJS and Boa (an expression or an IIFE).
    pub js: &'static str,
    pub rhai: Option<&'static str>,
    pub expect: f64,
}

pub const PROGRAMS: &[Program] = &[
    Program {
        name: "while loop 1e6",
        ajs: "let i = 0\nlet t = 0\nwhile (i < 1000000) { t = t + i\n i = i + 1 }\nreturn t",
        agent: false,
        js: "(function () { let i = 0; let t = 0; while (i < 1000000) { t = t + i; i = i + 1 } return t })()",
        rhai: Some("let i = 0; let t = 0; while i < 1000000 { t = t + i; i = i + 1; } t"),
        expect: 499_999_500_000.0,
    },
    Program {
        name: "fib(25)",
        ajs: "function fib(n) {\n  if (n < 2) { return n }\n  return fib(n - 1) + fib(n - 2)\n}\nfunction main() {\n  return { v: fib(25) }\n}",
        agent: true,
        js: "(function () { function fib(n) { if (n < 2) { return n } return fib(n - 1) + fib(n - 2) } return fib(25) })()",
        rhai: Some("fn fib(n) { if n < 2 { return n; } fib(n - 1) + fib(n - 2) } fib(25)"),
        expect: 75025.0,
    },
    Program {
        name: "array 10k filter/map/reduce",
        ajs: "let xs = []\nlet i = 0\nwhile (i < 10000) { xs.push(i)\n i = i + 1 }\nreturn xs.filter(x => x % 2 === 0).map(x => x * 3).reduce((s, x) => s + x, 0)",
        agent: false,
        js: "(function () { let xs = []; let i = 0; while (i < 10000) { xs.push(i); i = i + 1 } return xs.filter(x => x % 2 === 0).map(x => x * 3).reduce((s, x) => s + x, 0) })()",
        rhai: Some("let xs = []; let i = 0; while i < 10000 { xs.push(i); i = i + 1; } xs.filter(|x| x % 2 == 0).map(|x| x * 3).reduce(|s, x| s + x, 0)"),
        expect: 74_985_000.0,
    },
    Program {
        name: "string concat 10k",
        ajs: "let s = ''\nlet i = 0\nwhile (i < 10000) { s = s + 'abc'\n i = i + 1 }\nreturn s.length",
        agent: false,
        js: "(function () { let s = ''; let i = 0; while (i < 10000) { s = s + 'abc'; i = i + 1 } return s.length })()",
        rhai: Some("let s = \"\"; let i = 0; while i < 10000 { s = s + \"abc\"; i = i + 1; } s.len()"),
        expect: 30000.0,
    },
    Program {
        name: "JSON round trip 1k objects",
        ajs: "let xs = []\nlet i = 0\nwhile (i < 1000) { xs.push({ id: i, name: 'item' + i, tags: ['a', 'b'], ok: i % 2 === 0 })\n i = i + 1 }\nlet back = JSON.parse(JSON.stringify(xs))\nreturn back.length + back[999].id",
        agent: false,
        js: "(function () { let xs = []; let i = 0; while (i < 1000) { xs.push({ id: i, name: 'item' + i, tags: ['a', 'b'], ok: i % 2 === 0 }); i = i + 1 } let back = JSON.parse(JSON.stringify(xs)); return back.length + back[999].id })()",
        rhai: Some("let xs = []; let i = 0; while i < 1000 { xs.push(#{ id: i, name: \"item\" + i, tags: [\"a\", \"b\"], ok: i % 2 == 0 }); i = i + 1; } let back = parse_json(#{ items: xs }.to_json()); back.items.len() + back.items[999].id"),
        expect: 1999.0,
    },
];
