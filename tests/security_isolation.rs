//! Isolation between runs, 100 concurrent runs, and "a guest never makes the host panic"
//! (reference §9, scenarios 45, 50; the seed's isolation claim).

use crate::adversarial_common as adv;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use adv::{caps, eval, fuel, ok_json};
use ajs::{Capabilities, Eval, JsValue, Options, Runner, SafeFunction};
use serde_json::json;

/// Nothing a run leaves is visible to the next: locals, mutated context, a SafeFunction's
/// previous call, or state smuggled through a shared capability object.
#[test]
fn nothing_a_run_leaves_is_visible_to_the_next() {
    let out = eval("let leak = 42\nreturn leak", json!({}), fuel(100.0));
    assert_eq!(ok_json(&out, "set"), Some(json!(42)));
    let out = eval("leak", json!({}), fuel(100.0));
    assert!(out.error.is_some(), "a name from a previous run resolved");
    let f =
        SafeFunction::new(&["xs"], "xs.push(xs.length)\nreturn xs", Options::default()).unwrap();
    let rt = adv::rt();
    let a = rt.block_on(f.call(&[json!([0])]));
    let b = rt.block_on(f.call(&[json!([0])]));
    assert_eq!(a.result, b.result);
    assert_eq!(b.result.to_json(), Some(json!([0, 1])));
    // A shared capability object: the host's closure is the only state, and the guest can only
    // pass data to it — it cannot store a guest value in it or read another run's input.
    let shared = Capabilities::default().with_fetch(|call| async move { Ok(call.body) });
    let opts = Options {
        fetch_policy: Some(ajs::FetchPolicy {
            methods: vec!["POST".into()],
            ..Default::default()
        }),
        ..caps(shared, 100.0)
    };
    let out = eval(
        "httpFetch({ url: 'https://a.example/', method: 'POST', body: { secret: 'run1' } })",
        json!({}),
        opts.clone(),
    );
    assert_eq!(ok_json(&out, "run1"), Some(json!({ "secret": "run1" })));
    let out = eval(
        "httpFetch({ url: 'https://a.example/', method: 'POST' })",
        json!({}),
        opts,
    );
    assert_eq!(out.result.to_json(), None, "run 2 saw run 1's body");
    // The same options reused: quotas and fuel are per run.
    let runner = Runner {
        quotas: [("httpFetch".to_string(), 1)].into_iter().collect(),
        ..Runner::default()
    };
    let c = Capabilities::default().with_fetch(|_| async { Ok(JsValue::Null) });
    let o = caps(c, 100.0);
    for _ in 0..3 {
        let out = rt.block_on(runner.run_eval(
            "httpFetch({ url: 'https://a.example/' })",
            &serde_json::Map::new(),
            &o,
        ));
        assert!(
            out.error.is_none(),
            "quota leaked across runs: {:?}",
            out.error
        );
    }
}

/// Scenario 50: 100 concurrent runs on a multi-thread runtime, sharing one capability object, do
/// not contaminate each other: each gets its own result, fuel and errors.
#[test]
fn a_hundred_concurrent_runs_do_not_contaminate_each_other() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let shared = Capabilities::default().with_fetch(move |call| {
        c2.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::task::yield_now().await;
            Ok(JsValue::String(call.url))
        }
    });
    let fib_src = "function fib(n) { if (n < 2) { return n }\n return fib(n - 1) + fib(n - 2) }\nfunction main({ n: 1 }) {\n  let u = httpFetch({ url: 'https://a.example/' + n })\n  let tries = 0\n  let got = null\n  while (tries < 3 && got == null) { tries++\n try { got = httpFetch({ url: 'https://a.example/r' + n }) } catch (e) { } }\n  return { n: n, fib: fib(n % 15), u: u, got: got }\n}";
    let results = rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..100u32 {
            let shared = shared.clone();
            handles.push(tokio::spawn(async move {
                let opts = Options {
                    fuel: if i % 10 == 9 { 0.1 } else { 1e5 },
                    capabilities: shared,
                    ..Options::default()
                };
                if i % 2 == 0 {
                    let out = Runner::default()
                        .run_agent(fib_src, &json!({ "n": i }), &opts)
                        .await;
                    (i, out)
                } else {
                    let out = Eval::new("let s = 'x'.repeat(n)\nreturn { n: n, len: s.length }")
                        .context(json!({ "n": i }))
                        .options(opts)
                        .run()
                        .await;
                    (i, out)
                }
            }));
        }
        let mut v = Vec::new();
        for h in handles {
            v.push(h.await.unwrap());
        }
        v
    });
    fn fib_host(n: u32) -> u32 {
        if n < 2 {
            n
        } else {
            fib_host(n - 1) + fib_host(n - 2)
        }
    }
    for (i, out) in results {
        if i % 10 == 9 {
            assert_eq!(
                out.error.as_ref().map(|e| e.message.as_str()),
                Some("Out of Fuel"),
                "run {i}"
            );
            continue;
        }
        let v = ok_json(&out, &format!("run {i}")).unwrap();
        if i % 2 == 0 {
            assert_eq!(
                v,
                json!({ "n": i, "fib": fib_host(i % 15), "u": format!("https://a.example/{i}"), "got": format!("https://a.example/r{i}") }),
                "run {i}"
            );
        } else {
            assert_eq!(v, json!({ "n": i, "len": i }), "run {i}");
        }
    }
    assert!(calls.load(Ordering::SeqCst) >= 90);
}

/// Scenario 45 (adapted): teardown does not wait for a hanging capability; a fuel failure does
/// not leave the capability's future running into the next run.
#[test]
fn teardown_does_not_wait_for_a_hanging_capability() {
    let started = Arc::new(Mutex::new(0));
    let s2 = started.clone();
    let c = Capabilities::default().with_fetch(move |_| {
        *s2.lock().unwrap() += 1;
        async {
            std::future::pending::<()>().await;
            Ok(JsValue::Null)
        }
    });
    let opts = Options {
        timeout_ms: 50,
        ..caps(c, 100.0)
    };
    let t = std::time::Instant::now();
    for _ in 0..5 {
        let out = eval(
            "httpFetch({ url: 'https://a.example/' })",
            json!({}),
            opts.clone(),
        );
        assert_eq!(out.error.unwrap().kind, ajs::ErrorKind::Timeout);
    }
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(*started.lock().unwrap(), 5);
}

/// Sources a guest might send: none makes the host panic, under every entry point.
const NASTY: &[&str] = &[
    "",
    " ",
    "\u{0}",
    "\u{FEFF}1",
    "'\\ud800'",
    "'\\u{10FFFF}'.length",
    "\"\\",
    "`${`${`${1}`}`}`",
    "return",
    "return return",
    "}{",
    "((((((((((",
    "let",
    "let let = 1",
    "let x = x\nreturn x",
    "const c = 1\nc = 2\nreturn c",
    "1/0",
    "-0",
    "0/0 === 0/0",
    "2 ** 1e308",
    "1e308 * 10",
    "9007199254740993 + 1",
    "(-1) ** 0.5",
    "1 << 1e10",
    "-2147483648 % -1",
    "parseInt('9'.repeat(400))",
    "Number.MAX_SAFE_INTEGER.toString(36)",
    "(255).toString(1)",
    "(255).toString(37)",
    "(1e21).toFixed(100)",
    "(1).toFixed(-1)",
    "(1.5).toPrecision(0)",
    "'abc'.slice(-1e20, 1e20)",
    "'abc'.substring(NaN, Infinity)",
    "'abc'.charAt(-1)",
    "'abc'.codePointAt(1e10)",
    "'abc'.at(-1e300)",
    "[1, 2].at(-3)",
    "[].reduce((a, x) => a)",
    "[1].splice(-1e20, 1e20)",
    "[1, 2, 3].fill(0, -1e10, 1e10)",
    "[[[[1]]]].flat(Infinity)",
    "[[[[1]]]].flat(-1)",
    "[1].join(undefined)",
    "'a'.repeat(-1)",
    "'a'.repeat(Infinity)",
    "'a'.repeat(NaN)",
    "'a'.padStart(Infinity)",
    "'a'.padEnd(-1, '')",
    "'a'.split('', -1)",
    "'a'.split(undefined, 1e20)",
    "'a'.localeCompare()",
    "String.fromCharCode(0xD800, 0xDC00, -1, 1e10)",
    "encodeURIComponent('\\ud800')",
    "decodeURIComponent('%')",
    "decodeURIComponent('%E0%A4%A')",
    "JSON.parse('')",
    "JSON.parse('1e99999')",
    "JSON.parse('\"\\\\ud800\"')",
    "JSON.parse('{\"a\":1,\"a\":2}')",
    "JSON.stringify(1/0)",
    "JSON.stringify({ a: undefined, b: [undefined] })",
    "JSON.stringify('x', null, 1e9)",
    "JSON.stringify([1], null, '\\u0000'.repeat(100))",
    "Math.max()",
    "Math.min(...[])",
    "Math.round(-0.5)",
    "Math.floor(1e400)",
    "Math.hypot(1e308, 1e308)",
    "Object.keys(1)",
    "Object.keys(null)",
    "Object.entries('abc')",
    "Object.assign(null, {})",
    "Object.fromEntries([1])",
    "Object.fromEntries([[1, 2, 3]])",
    "[1, 2, 3].sort()",
    "[undefined, null, NaN, -0, 0].sort()",
    "[1, [2]].includes([2])",
    "[NaN].includes(NaN)",
    "[NaN].indexOf(NaN)",
    "typeof typeof typeof 1",
    "!!!!!!!!!!1",
    "a?.b?.c?.d",
    "a ?? b ?? c",
    "[...'😀😀']",
    "'😀'.length",
    "'😀'.split('')",
    "'😀'.slice(1)",
    "'😀'.toUpperCase()",
    "'ß'.toUpperCase()",
    "'İ'.toLowerCase()",
    "Number('0x' + 'f'.repeat(300))",
    "Number('  \\n\\t ')",
    "String(null) + String(undefined)",
    "Boolean('')",
    "isNaN('x')",
    "let { a, ...rest } = { a: 1, b: 2 }\nreturn rest",
    "let [x, y = x, ...z] = [1]\nreturn [x, y, z]",
    "let i = 0\nwhile (i < 10) { i++\n if (i == 5) { break } }\nreturn i",
    "try { try { Error('a') } catch (e) { Error(e + 'b') } } catch (e) { return e }",
    "try { return [1].map(x => Error('in cb')) } catch (e) { return e }",
    "console.log(1, 'a', [1], { a: 1 }, null, undefined)\nreturn 1",
    "console.error('x'.repeat(100000))\nreturn 1",
    "httpFetch({})",
    "httpFetch({ url: 1 })",
    "httpFetch({ url: 'https://a.example/', headers: 1 })",
    "httpFetch({ url: 'https://a.example/', headers: { 'a\\nb': 'c' } })",
    "httpFetch({ url: 'https://a.example/', method: 'GET\\r\\nX: y' })",
    "httpFetch({ url: 'https://' + 'a'.repeat(100000) + '.example/' })",
    "httpFetch(null)",
    "llmPredict({ prompt: 'x'.repeat(1e6) })",
    "llmPredict({ prompt: null, options: [1] })",
];

fn run_everywhere(src: &str) {
    let rt = adv::rt();
    let ctx = json!({ "a": null, "b": { "c": [1] }, "c": 3 });
    let c = Capabilities::default()
        .with_fetch(|call| async move { Ok(JsValue::String(call.url)) })
        .with_llm(|p, _| async move { Ok(JsValue::Number(p.len() as f64)) });
    let opts = Options {
        fuel: 200.0,
        timeout_ms: 5_000,
        capabilities: c,
        ..Options::default()
    };
    let out = rt.block_on(
        Eval::new(src)
            .context(ctx.clone())
            .options(opts.clone())
            .run(),
    );
    assert!(out.fuel_used <= 200.0);
    if out.error.is_some() {
        assert_eq!(out.result, JsValue::Undefined, "`{src}`");
    }
    if let Ok(f) = SafeFunction::new(&["a", "b", "c"], src, opts.clone()) {
        let out = rt.block_on(f.call(&[json!(null), json!({ "c": [1] }), json!(3)]));
        assert!(out.fuel_used <= 200.0);
    }
    let agent = format!("function main() {{\n{src}\n}}");
    let out = rt.block_on(Runner::default().run_agent(&agent, &json!({}), &opts));
    assert!(out.fuel_used <= 200.0);
    let _ = out.to_json();
}

/// A guest can never make the host panic: a corpus of nasty sources under Eval, SafeFunction and
/// the agent runner.
#[test]
fn nasty_sources_never_panic_the_host() {
    for src in NASTY {
        let r = std::panic::catch_unwind(|| run_everywhere(src));
        assert!(r.is_ok(), "the host panicked on `{src}`");
    }
}

/// A guest can never make the host panic: nasty bytes as artifacts (see also tests/mutation.rs
/// and the fuzz corpus replay).
#[test]
fn nasty_artifacts_never_panic_the_host() {
    let real = ajs::Runner::compile_agent(
        "function main() { return { v: [1, 2].map(x => x * 2) } }",
        &Options::default(),
    )
    .unwrap()
    .to_bytes();
    let mut inputs: Vec<Vec<u8>> = vec![
        vec![],
        b"AJSB".to_vec(),
        real[..real.len() / 2].to_vec(),
        real.iter().map(|b| !b).collect(),
        [real.as_slice(), &[0xff; 64]].concat(),
    ];
    for i in 0..real.len() {
        let mut b = real.clone();
        b[i] = 0xff;
        inputs.push(b);
        let mut z = real.clone();
        z[i] = 0;
        inputs.push(z);
    }
    let rt = adv::rt();
    for bytes in inputs {
        let r = std::panic::catch_unwind(|| {
            if let Ok(p) = ajs::Program::from_bytes(&bytes) {
                let out = rt.block_on(Runner::default().run_program(&p, &json!({}), &fuel(50.0)));
                assert!(out.fuel_used <= 50.0);
            }
        });
        assert!(
            r.is_ok(),
            "the host panicked on an artifact of {} bytes",
            bytes.len()
        );
    }
}

/// Regression: the verifier's register-range check once subtracted with overflow (`base + c - 1`
/// for an empty run at register 0) on an artifact with one byte zeroed. A loaded artifact is
/// untrusted input: it must be refused, never panic.
#[test]
fn zeroed_artifact_bytes_never_panic_the_verifier() {
    let real = ajs::Runner::compile_agent(
        "function main() { return { v: [1, 2].map(x => x * 2) } }",
        &Options::default(),
    )
    .unwrap()
    .to_bytes();
    for i in 0..real.len() {
        let mut b = real.clone();
        b[i] = 0;
        let r = std::panic::catch_unwind(|| {
            let _ = ajs::Program::from_bytes(&b);
        });
        assert!(r.is_ok(), "the verifier panicked with byte {i} zeroed");
    }
}

/// Hand-written bytecode that breaks the calling convention (a callee's registers start at its
/// arguments, over the caller's registers from there up, which a compiler keeps nothing live
/// in): the caller reads back what the callee left there, and nothing worse. A register of the
/// caller above the callee's window stays a root while the callee runs: the array it holds
/// survives the collections the callee's garbage causes.
#[test]
fn a_caller_register_a_callee_overwrote_is_the_callees_value_and_nothing_worse() {
    use ajs_bytecode::isa::*;
    use ajs_bytecode::{Constant, Function, Program};
    use ajs_vm::{Step, Vm, VmOptions};
    let f = |params: &[&str], nregs: u16, code: &[Op]| Function {
        name: "f".into(),
        params: params.iter().map(|&p| p.into()).collect(),
        nregs,
        code: insert_charges(code, &vec![(); code.len()]).0,
    };
    let main = f(
        &[],
        20,
        &[
            Op::LoadTrue { dst: Dst(3) },
            Op::LoadTrue { dst: Dst(4) },
            Op::LoadTrue { dst: Dst(5) },
            Op::NewArray {
                dst: Dst(15),
                base: Base(3),
                count: Count(3),
            },
            Op::LoadConst {
                dst: Dst(2),
                k: Const(0),
            },
            Op::Call {
                dst: Dst(1),
                func: Func(1),
                base: Base(2),
                argc: Count(1),
            },
            Op::Move {
                dst: Dst(16),
                src: Src(15),
            },
            Op::Move {
                dst: Dst(17),
                src: Src(3),
            },
            Op::NewArray {
                dst: Dst(0),
                base: Base(16),
                count: Count(2),
            },
            Op::Return { src: Src(0) },
        ],
    );
    // 200,000 empty arrays of garbage, counted in r1 (the caller's r3)
    let garbage = f(
        &["x"],
        4,
        &[
            Op::LoadConst {
                dst: Dst(1),
                k: Const(0),
            },
            Op::NewArray {
                dst: Dst(2),
                base: Base(0),
                count: Count(0),
            },
            Op::AddI {
                dst: Dst(1),
                a: Src(1),
                i: Int(1),
            },
            Op::JumpIfLtK {
                a: Src(1),
                k: Const(1),
                target: Target24::new(1),
            },
            Op::Return { src: Src(0) },
        ],
    );
    let program = Program {
        functions: vec![main, garbage],
        constants: vec![Constant::Number(0.0), Constant::Number(200_000.0)],
        atoms: vec![],
        entry: 0,
        debug: None,
        signature: None,
    };
    assert!(matches!(program.functions[0].call_clobber(), Some((_, 3))));
    let program = program.verify().unwrap();
    // (a small heap: the collector runs every few thousand arrays)
    let opts = VmOptions {
        fuel: 100_000_000,
        max_heap_bytes: 64 << 10,
        ..VmOptions::default()
    };
    let mut vm = Vm::new(program, &[], opts).unwrap();
    let step = vm.run(u64::MAX);
    assert!(vm.collections() > 0, "no collection ran");
    match step {
        Step::Done(v) => assert_eq!(
            v,
            JsValue::Array(vec![
                JsValue::Array(vec![JsValue::Bool(true); 3]),
                JsValue::Number(200_000.0),
            ])
        ),
        other => panic!("{other:?}"),
    }
}
