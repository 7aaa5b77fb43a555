//! Programs shared by the benchmarks in `benches/` and the opcode census in `examples/`.
//! Run everything with `cd benches && cargo bench`; see README.md and docs/PERFORMANCE.md.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use ajs::{Eval, JsValue, Options, Runner};
use serde_json::json;

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

/// Fuel given to our runs: far more than any program here needs (metering stays on).
pub const FUEL: f64 = 1e7;
/// QuickJS's memory limit: generous, but on.
pub const QJS_MEMORY: usize = 256 << 20;

/// A current-thread tokio runtime, as a service embedding ajs would have.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Our options in the benchmarks: the defaults, with [`FUEL`].
pub fn ajs_options() -> Options {
    Options {
        fuel: FUEL,
        ..Options::default()
    }
}

/// Runs `p` in ajs from source to result (as an agent or an `Eval`): its number and the fuel used.
pub fn ajs_run(rt: &tokio::runtime::Runtime, p: &Program) -> (f64, f64) {
    let out = if p.agent {
        rt.block_on(Runner::default().run_agent(p.ajs, &json!({}), &ajs_options()))
    } else {
        rt.block_on(Eval::new(p.ajs).options(ajs_options()).run())
    };
    let v = match (&out.error, out.result) {
        (None, JsValue::Number(n)) => n,
        (None, JsValue::Object(o)) => match o.first() {
            Some((_, JsValue::Number(n))) => *n,
            other => panic!("{}: {other:?}", p.name),
        },
        (e, r) => panic!("{}: {e:?} {r:?}", p.name),
    };
    (v, out.fuel_used)
}

/// A QuickJS runtime with the limits a careful user sets: a memory limit and an interrupt
/// handler checking a deadline.
pub fn qjs_runtime() -> rquickjs::Runtime {
    let rt = rquickjs::Runtime::new().expect("quickjs runtime");
    rt.set_memory_limit(QJS_MEMORY);
    // A careful user's deadline: checked whenever QuickJS polls the handler.
    let deadline = Instant::now() + Duration::from_secs(3600);
    rt.set_interrupt_handler(Some(Box::new(move || Instant::now() > deadline)));
    rt
}

/// The 8 KB agent as plain JavaScript, for the peers: AJS types the entry's parameters by
/// example (`main({ orders: [...] })`), which is not JavaScript, so the peers compile the same
/// program with a plain destructuring signature.
pub fn agent_8k_js() -> String {
    AGENT_8K
        .lines()
        .map(|l| {
            if l.starts_with("function main(") {
                "function main({ orders, history, coupons }) {"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
