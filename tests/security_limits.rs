//! It halts, and memory is bounded: fuel-shape attacks and memory bombs (reference §9,
//! scenarios 1–18). Wall-clock bounds of the reference become fuel, size or count bounds here;
//! the few `Instant` checks are generous sanity bounds, not the claim.

use crate::adversarial_common as adv;
mod regex;

use std::time::{Duration, Instant};

use adv::{agent, eval, eval_heap, failed, fails_with, fuel, ok_json};
use ajs::{ErrorKind, Eval, Options};
use ajs_compiler::{compile, CompileOptions, Mode};
use ajs_vm::{JsValue, Step, Vm, VmOptions};
use serde_json::{json, Value};

const HEAP_MSG: &str = "Heap limit exceeded";

fn out_of_fuel(out: &ajs::Outcome, what: &str, budget: f64) {
    let (m, k) = failed(out, what);
    assert_eq!(m, "Out of Fuel", "`{what}`");
    assert_eq!(k, ErrorKind::OutOfFuel, "`{what}`");
    assert!(
        out.fuel_used <= budget,
        "`{what}`: used {} of {budget}",
        out.fuel_used
    );
}

/// Scenario 1: an endless loop stops on its budget; `i++` and `+=` loops count correctly.
#[test]
fn endless_loops_run_out_of_fuel() {
    for code in [
        "while (1 == 1) {}\nreturn 1",
        "while (true) { }\nreturn 1",
        "let i = 0\nwhile (true) { i++ }\nreturn i",
        "let i = 0\nwhile (i >= 0) { i += 1 }\nreturn i",
        "let i = 0\nwhile (true) { if (i > 1e12) { break }\n i = i + 1\n continue }\nreturn i",
        "let xs = [1, 2, 3]\nwhile (true) { xs = xs.map(x => x) }\nreturn 1",
    ] {
        out_of_fuel(&eval(code, json!({}), fuel(10.0)), code, 10.0);
    }
    for code in [
        "let i = 0\nwhile (i < n) { i++ }\nreturn i",
        "let i = 0\nwhile (i < n) { i += 1 }\nreturn i",
        "let i = 0\nwhile (i < n) { ++i }\nreturn i",
    ] {
        let out = eval(code, json!({ "n": 100 }), fuel(1000.0));
        assert_eq!(ok_json(&out, code), Some(json!(100)), "`{code}`");
    }
}

/// Scenario 2: a `try` around every iteration cannot resume after exhaustion.
#[test]
fn try_catch_cannot_resume_after_fuel_exhaustion() {
    let code =
        "let i = 0\nwhile (true) {\n  try { i = i + 1 } catch (e) { i = i + 1 }\n}\nreturn i";
    let out = eval(code, json!({}), fuel(50.0));
    out_of_fuel(&out, code, 50.0);
    assert!(out.fuel_used < 60.0);
    let code = "let i = 0\nwhile (true) {\n  try { while (true) { i++ } } catch (e) { i = 0 }\n}\nreturn i";
    out_of_fuel(&eval(code, json!({}), fuel(50.0)), code, 50.0);
    // Positive control: the same shape with a bound finishes.
    let code =
        "let i = 0\nwhile (i < 10) {\n  try { i = i + 1 } catch (e) { i = i + 1 }\n}\nreturn i";
    assert_eq!(
        ok_json(&eval(code, json!({}), fuel(50.0)), code),
        Some(json!(10))
    );
}

fn cost(code: &str, ctx: Value) -> f64 {
    let out = eval(code, ctx, fuel(1e9));
    ok_json(&out, code);
    out.fuel_used
}

/// Scenarios 3, 4, 6: size-proportional builtins charge ∝ n (≥ 10× marginal fuel per 100×
/// input), and a huge input on a small budget fails.
#[test]
fn size_proportional_builtins_scale_with_input() {
    let xs = |n: usize| json!({ "xs": (0..n).map(|i| i % 97).collect::<Vec<_>>(), "s": "ab".repeat(n / 2) });
    for code in [
        "JSON.stringify(xs).length",
        "xs.concat(xs).length",
        "xs.slice(0).length",
        "xs.join(',').length",
        "xs.toReversed().length",
        "xs.slice(0).sort().length",
        "xs.includes(-1)",
        "xs.indexOf(-1)",
        "s.includes('zz')",
        "s.indexOf('zz')",
        "s.split('').length",
        "xs.map(x => x).length",
        "xs.filter(x => true).length",
        "xs.reduce((a, x) => a + x, 0)",
    ] {
        let base = |n| cost("xs.length + s.length", xs(n));
        let small = cost(code, xs(500)) - base(500);
        let big = cost(code, xs(50_000)) - base(50_000);
        assert!(
            big >= 10.0 * small && big > 0.0,
            "`{code}`: marginal {small} at 500, {big} at 50k"
        );
    }
    // 500 k numbers stringified on 10 fuel: refused before the work is done.
    let ctx = json!({ "xs": vec![1; 500_000] });
    let out = eval("JSON.stringify(xs)", ctx, fuel(10.0));
    out_of_fuel(&out, "stringify 500k", 10.0);
}

/// Scenario 5: the charge precedes the allocation.
#[test]
fn repeat_is_charged_before_it_allocates() {
    out_of_fuel(
        &eval("'x'.repeat(10000)", json!({}), fuel(0.5)),
        "repeat 1e4",
        0.5,
    );
    out_of_fuel(
        &eval("'x'.repeat(1e6)", json!({}), fuel(50.0)),
        "repeat 1e6",
        50.0,
    );
    let start = Instant::now();
    out_of_fuel(
        &eval("'x'.repeat(1e8)", json!({}), fuel(10.0)),
        "repeat 1e8",
        10.0,
    );
    out_of_fuel(
        &eval("''.padStart(1e9, 'ab')", json!({}), fuel(10.0)),
        "pad",
        10.0,
    );
    out_of_fuel(
        &eval("'ab'.padEnd(1e9)", json!({}), fuel(10.0)),
        "padEnd",
        10.0,
    );
    assert!(start.elapsed() < Duration::from_secs(2));
}

/// Scenario 7: runaway spread allocation stops on fuel 100.
#[test]
fn runaway_spread_stops() {
    for code in [
        "let arr = []\nwhile (true) { arr = [...arr, { big: 'x'.repeat(100) }] }\nreturn 1",
        "let arr = [1]\nwhile (true) { arr = [...arr, ...arr] }\nreturn 1",
        "let o = {}\nlet i = 0\nwhile (true) { o = { ...o, ['k' + i]: i }\n i++ }\nreturn 1",
        "let a = [1]\nwhile (true) { a = a.concat(a) }\nreturn 1",
    ] {
        let out = eval(code, json!({}), fuel(100.0));
        let (m, _) = failed(&out, code);
        assert!(
            m == "Out of Fuel" || m.starts_with(HEAP_MSG),
            "`{code}`: {m}"
        );
        assert!(out.fuel_used <= 100.0);
    }
}

/// Scenario 8: a growing accumulator in `reduce` is linear; helper calls with a large argument
/// do not copy it per call.
#[test]
fn reduce_accumulator_and_helper_arguments_are_linear() {
    let code = "xs.reduce((acc, x) => acc + x, 0)";
    let small = cost(code, json!({ "xs": vec![1; 1000] }));
    let big = cost(code, json!({ "xs": vec![1; 100_000] }));
    assert!(big < 200.0 * small, "reduce not linear: {small} → {big}");
    let src = "function first(xs) { return xs[0] }\nfunction main({ xs: [1] }) {\n  let i = 0\n  let t = 0\n  while (i < 400) { t = t + first(xs)\n i++ }\n  return { t: t }\n}";
    let out = agent(src, json!({ "xs": vec![1; 20_000] }), fuel(1000.0));
    assert_eq!(ok_json(&out, "400 helper calls"), Some(json!({ "t": 400 })));
    assert!(out.fuel_used < 1000.0);
}

/// Scenario 9: self and mutual recursion in helpers hit the depth cap cleanly (no host stack
/// overflow), and the error ends the run; mutual recursion below the cap works.
#[test]
fn deep_recursion_in_helpers_is_capped() {
    for src in [
        "function down(n) { return down(n + 1) }\nfunction main() { return { v: down(0) } }",
        "function a(n) { return b(n + 1) }\nfunction b(n) { return a(n + 1) }\nfunction main() { return { v: a(0) } }",
        "function down(n) { return [1, 2].map(x => down(n + 1)) }\nfunction main() { return { v: down(0) } }",
        "function down(n) { try { return down(n + 1) } catch (e) { return down(n + 1) } }\nfunction main() { return { v: down(0) } }",
        "function wide(n) { return wide(n + 1) + wide(n + 2) }\nfunction main() { return { v: wide(0) } }",
    ] {
        let out = agent(src, json!({}), fuel(1e6));
        let (m, k) = failed(&out, src);
        assert!(
            k == ErrorKind::CallDepth || k == ErrorKind::OutOfFuel,
            "{src}: {m} ({k:?})"
        );
    }
    let src = "function even(n) { if (n == 0) { return true }\n return odd(n - 1) }\nfunction odd(n) { if (n == 0) { return false }\n return even(n - 1) }\nfunction main() { return { v: even(100) } }";
    assert_eq!(
        ok_json(&agent(src, json!({}), fuel(1e5)), src),
        Some(json!({ "v": true }))
    );
}

/// Scenario 10 (adapted: there is no `agentRun`): a run a capability starts is a separate run
/// with its own fuel; its failure comes back to the parent as a catchable error.
#[test]
fn a_nested_run_through_a_capability_has_its_own_budget() {
    let caps = ajs::Capabilities::default().with_atom("child", |input: JsValue| async move {
        let code = match input {
            JsValue::Object(m) => match m.get("code") {
                Some(JsValue::String(s)) => s.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        let out = Eval::new(code).fuel(0.5).run().await;
        match out.error {
            Some(e) => Err(e.message),
            None => Ok(out.result),
        }
    });
    let opts = Options {
        fuel: 100.0,
        capabilities: caps,
        ..Options::default()
    };
    let out = eval(
        "try { return child({ code: 'let i = 0\\nwhile (true) { i++ }\\nreturn i' }) } catch (e) { return 'child: ' + e }",
        json!({}),
        opts.clone(),
    );
    assert_eq!(ok_json(&out, "child"), Some(json!("child: Out of Fuel")));
    let out = eval("child({ code: '1 + 1' })", json!({}), opts);
    assert_eq!(ok_json(&out, "child ok"), Some(json!(2)));
}

/// Scenarios 6 and the looping builtins: every callback method over a large array on a small
/// budget runs out of fuel instead of finishing.
#[test]
fn callbacks_over_large_arrays_are_metered() {
    let ctx = json!({ "xs": vec![1; 200_000] });
    for code in [
        "xs.map(x => x + 1).length",
        "xs.filter(x => x > 0).length",
        "xs.forEach(x => x)",
        "xs.some(x => x > 1)",
        "xs.every(x => x > 0)",
        "xs.find(x => x > 1)",
        "xs.findIndex(x => x > 1)",
        "xs.findLast(x => x > 1)",
        "xs.findLastIndex(x => x > 1)",
        "xs.reduce((a, x) => a + x, 0)",
        "xs.reduceRight((a, x) => a + x, 0)",
        "xs.map(x => xs.length).length",
        "xs.map(x => [1, 2, 3].map(y => y)).length",
        "xs.join('').length",
        "xs.toReversed().length",
        "JSON.stringify(xs).length",
        "JSON.parse(JSON.stringify(xs)).length",
        "Object.keys(Object.fromEntries(xs.map((x, i) => ['k' + i, x]))).length",
    ] {
        out_of_fuel(&eval(code, ctx.clone(), fuel(20.0)), code, 20.0);
    }
}

/// Scenario 11: 26 doublings of 1 KB hit the default 64 MB ceiling under 10 M fuel; a 1 MB
/// ceiling holds; rebinding one name 50× with 200 KB passes.
#[test]
fn string_doubling_hits_the_heap_ceiling() {
    let code =
        "let s = 'x'.repeat(1024)\nlet i = 0\nwhile (i < 26) { s = s + s\n i++ }\nreturn s.length";
    let out = eval(code, json!({}), fuel(1e7));
    fails_with(&out, code, HEAP_MSG);
    let out = eval_heap(code, json!({}), fuel(1e7), 1 << 20);
    assert!(
        failed(&out, code).0.contains("limit 1MB"),
        "{:?}",
        out.error
    );
    let code =
        "let s = ''\nlet i = 0\nwhile (i < 50) { s = 'y'.repeat(100000)\n i++ }\nreturn s.length";
    let out = eval_heap(code, json!({}), fuel(1e6), 1 << 20);
    assert_eq!(ok_json(&out, code), Some(json!(100_000)));
}

/// Scenarios 12–13: shadowing never frees a live value's budget; discarded scopes release it.
#[test]
fn shadowing_keeps_and_discarding_releases_heap() {
    // 8 × 16 KB live at once under 64 KB: trips, whatever the names.
    let src = "function hold(s, n) {\n  if (n == 0) { return 0 }\n  let s2 = s.repeat(1)\n  return hold(s2 + '', n - 1) + s2.length\n}\nfunction main() {\n  let s = 'x'.repeat(8192)\n  let a = [s + '1', s + '2', s + '3', s + '4', s + '5', s + '6', s + '7', s + '8']\n  return { n: a.length }\n}";
    let runner = ajs::Runner {
        max_heap_bytes: 64 * 1024,
        ..Default::default()
    };
    let out = adv::rt().block_on(runner.run_agent(src, &json!({}), &fuel(1e5)));
    fails_with(&out, "8 x 16KB", HEAP_MSG);
    // 5000-item map under 64 KB passes when the items are dropped.
    let code = "let i = 0\nlet t = 0\nwhile (i < 20) { t = t + xs.map(x => x + 1).length\n i++ }\nreturn t";
    let out = eval_heap(code, json!({ "xs": vec![1; 500] }), fuel(1e6), 64 * 1024);
    assert_eq!(ok_json(&out, code), Some(json!(10_000)));
}

/// Scenario 14: push-accumulate loops are seen by the heap and stopped, fast.
#[test]
fn push_loops_are_stopped_by_the_heap() {
    for code in [
        "let a = []\nwhile (true) { a.push('xxxxxxxxxxxxxxxxxxxx') }\nreturn 1",
        "let a = []\nwhile (true) { a.push([1, 2, 3, 4]) }\nreturn 1",
        "let a = []\nwhile (true) { a.unshift({ k: 1 }) }\nreturn 1",
        "let a = [[]]\nwhile (true) { a[0].push(a.length) }\nreturn 1",
        "let a = []\nlet s = 'x'\nwhile (true) { a.push(s)\n s = s + 'x' }\nreturn 1",
    ] {
        let out = eval_heap(code, json!({}), fuel(1e8), 1 << 20);
        fails_with(&out, code, HEAP_MSG);
    }
}

/// Scenario 16: errors raised inside callbacks and helpers surface.
#[test]
fn errors_in_child_scopes_surface() {
    let out = eval_heap(
        "[1, 2].map(x => 'x'.repeat(1e7)).length",
        json!({}),
        fuel(1e6),
        1 << 20,
    );
    fails_with(&out, "heap in callback", HEAP_MSG);
    let out = eval("[{}].map(o => o['__pro' + 'to__'])", json!({}), fuel(100.0));
    fails_with(&out, "proto in callback", "Security Error");
    let out = agent(
        "function h(o) { return o['constr' + 'uctor'] }\nfunction main() { return { v: h({}) } }",
        json!({}),
        fuel(100.0),
    );
    fails_with(&out, "proto in helper", "Security Error");
}

/// Scenario 17: ordinary memory-pressure shapes complete.
#[test]
fn ordinary_memory_pressure_completes() {
    let big = "y".repeat(1 << 20);
    for (code, ctx) in [
        ("let a = []\nlet i = 0\nwhile (i < 1000) { a.push({ i: i })\n i++ }\nreturn a.length", json!({})),
        ("let o = 1\nlet i = 0\nwhile (i < 100) { o = { o: o }\n i++ }\nreturn JSON.stringify(o).length > 0", json!({})),
        ("let s = ''\nlet i = 0\nwhile (i < 500) { s = s + 'ab'\n i++ }\nreturn s.length", json!({})),
        ("return big.length", json!({ "big": big })),
        ("let a1 = 1\nlet a2 = 2\nlet a3 = 3\nlet a4 = 4\nlet a5 = 5\nlet a6 = 6\nreturn a1 + a2 + a3 + a4 + a5 + a6", json!({})),
    ] {
        ok_json(&eval(code, ctx, fuel(10_000.0)), code);
    }
}

fn vm_for(src: &str, heap: usize) -> Vm {
    let program = compile(
        src,
        &CompileOptions {
            mode: Mode::FunctionBody,
            externals: &["big".to_string()],
            atoms: &[],
            source_name: "<source>",
        },
    )
    .unwrap()
    .verify()
    .unwrap();
    let args = [JsValue::String("z".repeat(200_000))];
    Vm::new(
        program,
        &args,
        VmOptions {
            fuel: 1_000_000_000_000,
            max_heap_bytes: heap,
            ..VmOptions::default()
        },
    )
    .unwrap()
}

/// Scenario 18 ★: allocation spikes are refused before the memory is committed: the heap counter
/// never passes the ceiling, and a 2 GB request returns at once.
#[test]
fn allocation_spikes_are_refused_before_commit() {
    let heap = 1 << 20;
    for src in [
        "return 'x'.repeat(1e9)",
        "return ''.padStart(1e9, 'ab')",
        "return 'a'.padEnd(1e9, 'ab')",
        "let s = 'x'.repeat(500000)\nreturn s.concat(s, s, s)",
        "let a = 'x'.repeat(300000)\nreturn [a, a, a].join(a)",
        "return JSON.parse(JSON.stringify([big, big, big]))",
        "return big.split('')",
        "return big.replaceAll('z', 'zzzzzzzzzz')",
        "let a = [1]\nwhile (true) { a = [...a, ...a] }",
        "return [1].concat(big.split(''), big.split(''))",
        "return Object.fromEntries(big.split('').map((c, i) => ['k' + i, c]))",
    ] {
        let start = Instant::now();
        let mut vm = vm_for(src, heap);
        let mut end = None;
        for _ in 0..100_000 {
            let step = vm.run(1_000_000);
            assert!(
                vm.heap_bytes() <= heap,
                "`{src}`: heap counter {}",
                vm.heap_bytes()
            );
            match step {
                Step::Done(_) => {
                    end = Some("done".to_string());
                    break;
                }
                Step::Failed(e) => {
                    end = Some(e.message.clone());
                    break;
                }
                Step::Host(_) | Step::Yield | Step::Blocked => {}
            }
        }
        let end = end.expect("ended");
        assert!(end.starts_with(HEAP_MSG), "`{src}` ended with {end}");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "`{src}` took {:?}",
            start.elapsed()
        );
    }
}

/// Bounded input and output: source, context, arguments.
#[test]
fn input_sizes_are_capped() {
    let out = eval(&format!("'{}'", "x".repeat(9000)), json!({}), fuel(100.0));
    fails_with(&out, "source", "over the 8192-byte limit (maxSourceBytes)");
    let out = eval(
        "big.length",
        json!({ "big": "x".repeat(5 << 20) }),
        fuel(100.0),
    );
    fails_with(
        &out,
        "context",
        "over the 4194304-byte limit (argsMaxBytes)",
    );
    // An unused huge context key costs nothing.
    let out = eval("1", json!({ "big": "x".repeat(5 << 20) }), fuel(100.0));
    assert_eq!(ok_json(&out, "unused"), Some(json!(1)));
    let f = ajs::SafeFunction::new(&["a"], "return a.length", Options::default()).unwrap();
    let out = adv::rt().block_on(f.call(&[json!("x".repeat(5 << 20))]));
    fails_with(&out, "args", "over the 4194304-byte limit (argsMaxBytes)");
    let out = agent(
        "function main({ s: '' }) { return { n: s.length } }",
        json!({ "s": "x".repeat(5 << 20) }),
        fuel(100.0),
    );
    fails_with(&out, "agent args", "argsMaxBytes");
}

/// Bounded output: the log is capped, a cyclic value cannot be returned.
#[test]
fn output_is_bounded() {
    let out = agent(
        "function main() {\n  let i = 0\n  while (i < 5000) { console.log('line ' + i)\n i++ }\n  return { n: i }\n}",
        json!({}),
        fuel(1e5),
    );
    ok_json(&out, "log");
    assert!(out.log.len() <= 1000, "log kept {} lines", out.log.len());
    let out = eval("let a = []\na.push(a)\nreturn a", json!({}), fuel(100.0));
    failed(&out, "cycle out");
}

/// Scenarios 4, 6 for the callback forms of decision 10: `sort` with a comparator and `flatMap`
/// with a callback pay for every comparison and element.
#[test]
fn comparator_sort_and_flat_map_are_metered() {
    let ctx = json!({ "xs": vec![1; 200_000] });
    for code in [
        "xs.slice(0).sort((a, b) => b - a).length",
        "xs.flatMap(x => [x, x]).length",
    ] {
        out_of_fuel(&eval(code, ctx.clone(), fuel(20.0)), code, 20.0);
    }
}

/// A slice is a budget of fuel, whoever spends it: the work builtins charge (here `join` over a
/// 2,000-character string's parts, ~200 fuel per iteration against 0.x fuel of instructions)
/// ends a slice as the instructions' own charges do, so the host regains control after about a
/// slice's worth of work (at most one block or one builtin more), never after a thousand times
/// that.
#[test]
fn builtin_work_counts_towards_the_slice() {
    let mut vm = vm_for(
        "let parts = big.slice(0, 2000).split('')\nlet n = 0\nwhile (n < 50) { parts.join(''); n = n + 1 }\nreturn n",
        usize::MAX,
    );
    let slice = 1_000_000; // milli-fuel: 1,000 fuel
    let mut yields = 0;
    let mut last = vm.fuel_used_milli();
    loop {
        let step = vm.run(slice);
        let used = vm.fuel_used_milli();
        // one iteration charges ~200,000 milli per join, the split before the loop ~200,000
        assert!(
            used - last <= slice + 2_000_000,
            "a slice of {slice} milli-fuel spent {}",
            used - last
        );
        last = used;
        match step {
            Step::Yield => yields += 1,
            Step::Done(v) => {
                assert_eq!(v, JsValue::Number(50.0));
                break;
            }
            other => panic!("unexpected step {other:?}"),
        }
    }
    assert!(yields >= 5, "only {yields} yields");
}

/// Runs `src` (an agent whose `main` takes `big`, here 2,000 characters) with `fuel` milli-fuel in
/// slices of `slice` milli-fuel; returns how it ended (result or error message) and the fuel it
/// used, after checking that no slice that yielded overran its size by more than one block's or
/// one builtin's charge (running out of fuel spends what is left).
fn sliced(src: &str, fuel: u64, slice: u64) -> (String, u64) {
    let program = compile(
        src,
        &CompileOptions {
            mode: Mode::Agent,
            externals: &[],
            atoms: &[],
            source_name: "<source>",
        },
    )
    .unwrap()
    .verify()
    .unwrap();
    let args = [JsValue::String("z".repeat(2_000))];
    let opts = VmOptions {
        fuel,
        ..VmOptions::default()
    };
    let mut vm = Vm::new(program, &args, opts).unwrap();
    let mut last = 0;
    loop {
        let step = vm.run(slice);
        let used = vm.fuel_used_milli();
        match step {
            Step::Yield => {
                assert!(
                    used - last <= slice.saturating_add(1_000_000),
                    "`{src}`: a slice of {slice} spent {}",
                    used - last
                );
                last = used;
            }
            Step::Done(v) => return (v.display(), used),
            Step::Failed(e) => return (e.message, used),
            other => panic!("`{src}`: unexpected step {other:?}"),
        }
    }
}

/// However a run is cut into slices (one milli-fuel each, odd sizes, one slice for the whole
/// budget, a budget past `i64::MAX` milli-fuel), it ends the same way having used the same fuel:
/// calls, returns, loops, builtins that charge for their work, and running out of fuel part way.
#[test]
fn every_slice_size_gives_the_same_run() {
    for body in [
        "let i = 0\n let t = 0\n while (i < 300) { t = t + i\n i = i + 1 }\n return t",
        "return fib(12)",
        "let xs = []\n let i = 0\n while (i < 200) { xs.push(i)\n i = i + 1 }\n return xs.map(x => x * 2).filter(x => x % 3 === 0).join(',').length",
        "let n = 0\n while (n < 20) { big.split('').join('-')\n n = n + 1 }\n return n",
        "let s = ''\n while (s.length < 100000) { s = s + 'ab' }\n return s.length",
        "return deep(0)",
    ] {
        let src = format!(
            "function fib(n) {{\n  if (n < 2) {{ return n }}\n  return fib(n - 1) + fib(n - 2)\n}}\nfunction deep(n) {{\n  return deep(n + 1)\n}}\nfunction main(big) {{\n {body}\n}}"
        );
        let src = src.as_str();
        for fuel in [5_000_000, 40_000_000, u64::MAX] {
            let whole = sliced(src, fuel, u64::MAX);
            for slice in [1, 7, 999, 100_000, 1 << 40] {
                assert_eq!(
                    sliced(src, fuel, slice),
                    whole,
                    "`{src}` with {fuel} milli-fuel in slices of {slice}"
                );
            }
        }
    }
}

/// Copies out of the VM (issue 26, class 1): a value the guest built by sharing — `[x, x]` 40
/// times is 2^40 leaves, a few dozen fuel and a few hundred heap bytes to make — leaves the VM
/// at every door without expanding past a budget: the result, a log line, an `Error` message, an
/// atom's input (also one a policy refuses), `filter`, `Schema.fromExample`. Each ends quickly
/// with a clean error or a truncated line, within its fuel budget.
mod copy_out {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::adv::{self, agent, caps, eval, failed, fails_with, fuel, ok_json};
    use ajs::{Capabilities, ErrorKind, FetchPolicy, JsValue, Options};
    use serde_json::json;

    /// The copy limit's words, as every refusal names it.
    const COPY_LIMIT: &str = "copy limit (maxHeapBytes)";

    /// `x` doubled 40 times, from a number, a string and an object.
    const SHAPES: [&str; 3] = [
        "let x = 1\nlet i = 0\nwhile (i < 40) { x = [x, x]\n i++ }\n",
        "let x = 'abcdefghijklmnop'\nlet i = 0\nwhile (i < 40) { x = [x, x]\n i++ }\n",
        "let x = { k: 'v' }\nlet i = 0\nwhile (i < 40) { x = { l: x, r: x }\n i++ }\n",
    ];

    /// Enough fuel that the copy budget, not the fuel, is what stops the copy.
    const BUDGET: f64 = 1e7;

    /// Runs `f` and checks it took less than a generous bound (the claim is the budget; this
    /// only catches an expansion that allocates or loops for long).
    fn quick<T>(what: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "`{what}` took {:?}",
            t.elapsed()
        );
        r
    }

    fn within_budget(out: &ajs::Outcome, what: &str) {
        assert!(
            out.fuel_used <= BUDGET,
            "`{what}`: used {} of {BUDGET}",
            out.fuel_used
        );
    }

    #[test]
    fn a_shared_result_is_refused_at_the_copy_limit() {
        for shape in SHAPES {
            let code = format!("{shape}return x");
            let out = quick(&code, || eval(&code, json!({}), fuel(BUDGET)));
            let k = fails_with(&out, &code, COPY_LIMIT);
            assert_eq!(k, ErrorKind::Boundary, "`{code}`");
            within_budget(&out, &code);
            // the same through an agent (the driver's output check) and wrapped in an object
            let src = format!("function main() {{\n{shape}return {{ x }}\n}}");
            let out = quick(&src, || agent(&src, json!({}), fuel(BUDGET)));
            fails_with(&out, &src, COPY_LIMIT);
            within_budget(&out, &src);
        }
    }

    #[test]
    fn a_shared_value_logged_is_one_truncated_line() {
        for shape in SHAPES {
            let src = format!(
                "function main() {{\n{shape}console.log(x)\nconsole.log('after')\nreturn {{ ok: true }}\n}}"
            );
            let out = quick(&src, || agent(&src, json!({}), fuel(BUDGET)));
            assert_eq!(ok_json(&out, &src), Some(json!({ "ok": true })));
            within_budget(&out, &src);
            assert!(!out.log.is_empty(), "`{src}`: no log line");
            let line = &out.log[0].message;
            assert!(
                line.len() <= ajs_vm::DEFAULT_MAX_LOG_BYTES,
                "`{src}`: a line of {} bytes",
                line.len()
            );
            assert!(
                line.contains("maxLogBytes"),
                "`{src}`: no marker in {:?}",
                &line[line.len().saturating_sub(200)..]
            );
            let total: usize = out.log.iter().map(|l| l.message.len()).sum();
            assert!(
                total <= ajs_vm::DEFAULT_MAX_LOG_BYTES,
                "`{src}`: log of {total} bytes"
            );
        }
    }

    #[test]
    fn a_shared_error_message_is_truncated() {
        for shape in SHAPES {
            let code = format!("{shape}Error(x)\nreturn 1");
            let out = quick(&code, || eval(&code, json!({}), fuel(BUDGET)));
            let (m, k) = failed(&out, &code);
            assert_eq!(k, ErrorKind::Guest, "`{code}`");
            assert!(
                m.len() <= ajs_vm::MAX_MESSAGE_BYTES && m.contains("truncated"),
                "`{code}`: a message of {} bytes",
                m.len()
            );
            within_budget(&out, &code);
            let code = format!("{shape}try {{ Error(x) }} catch (e) {{ return e.length }}");
            let out = quick(&code, || eval(&code, json!({}), fuel(BUDGET)));
            let n = ok_json(&out, &code)
                .and_then(|v| v.as_u64())
                .unwrap_or(u64::MAX);
            assert!(
                n as usize <= ajs_vm::MAX_MESSAGE_BYTES,
                "`{code}`: {n} units"
            );
            within_budget(&out, &code);
        }
    }

    #[test]
    fn a_shared_atom_input_is_refused_before_the_host_sees_it() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c2 = calls.clone();
        let c = Capabilities::default()
            .with_atom("sink", move |_| {
                c2.fetch_add(1, Ordering::SeqCst);
                async { Ok(JsValue::Null) }
            })
            .with_fetch(|_| async { Ok(JsValue::Null) });
        for shape in SHAPES {
            let code = format!("{shape}return sink({{ v: x }})");
            let out = quick(&code, || eval(&code, json!({}), caps(c.clone(), BUDGET)));
            assert_eq!(fails_with(&out, &code, COPY_LIMIT), ErrorKind::Boundary);
            within_budget(&out, &code);
            // a fetch the policy refuses: the input is checked before the policy reads it
            let code = format!(
                "{shape}return httpFetch({{ url: 'https://blocked.example/', method: 'POST', body: x }})"
            );
            let opts = Options {
                fetch_policy: Some(FetchPolicy {
                    domains: Some(vec!["api.example.com".into()]),
                    methods: vec!["POST".into()],
                    ..FetchPolicy::default()
                }),
                ..caps(c.clone(), BUDGET)
            };
            let out = quick(&code, || eval(&code, json!({}), opts));
            assert_eq!(fails_with(&out, &code, COPY_LIMIT), ErrorKind::Boundary);
            within_budget(&out, &code);
            // in a parallel batch
            let code = format!("{shape}return parallel([sink({{ v: x }})])");
            let out = quick(&code, || eval(&code, json!({}), caps(c.clone(), BUDGET)));
            assert_eq!(fails_with(&out, &code, COPY_LIMIT), ErrorKind::Boundary);
            within_budget(&out, &code);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn filter_and_schema_refuse_a_shared_value() {
        for shape in SHAPES {
            for call in [
                "filter(x, [1])",
                "filter([1], x)",
                "Schema.fromExample(x)",
                "Schema.isValid(x, [1])",
                "Schema.response('r', x)",
            ] {
                let code = format!("{shape}return {call}");
                let out = quick(&code, || eval(&code, json!({}), fuel(BUDGET)));
                fails_with(&out, &code, COPY_LIMIT);
                within_budget(&out, &code);
            }
        }
    }

    /// Positive controls: ordinary results and logs cross as before; a result of 100 000
    /// numbers or a 1 MB string crosses with default options.
    #[test]
    fn ordinary_values_cross_unchanged() {
        let xs: Vec<u32> = (0..100_000).collect();
        // (default limits but fuel: copying 100k values out, or making and copying 1M units,
        // costs more than the default 1,000 fuel at the natives' prices)
        let out = eval("return xs", json!({ "xs": xs }), fuel(1e5));
        assert_eq!(ok_json(&out, "100k numbers"), Some(json!(xs)));
        let out = eval("return 'x'.repeat(1048576)", json!({}), fuel(1e5));
        assert_eq!(
            ok_json(&out, "1 MB string"),
            Some(json!("x".repeat(1 << 20)))
        );
        let src = "function main() {\n  console.log('a', 1, -0, 1e21, 2**53, 0.1, NaN, [1,'x\"\\n\\u0001', {k:null, u: undefined}, undefined, 1e21, 2**53, -0, 1.5e-7], {u: undefined, d: Date(0)}, Date(0), Set([1,2]), /a/g, null, undefined, true)\n  try { Error([1,{a:'x'}]) } catch (e) { console.log(e) }\n  try { Error({s: Set(['a'])}) } catch (e) { console.log(e) }\n  console.log(['\\ud800', 'é€😀', '\\u007f'])\n  console.warn({ '': 1, 'a\\tb': 'c' })\n  let a = [1]\n  a.push(a)\n  console.log(a)\n  return { n: 1 }\n}";
        let out = agent(src, json!({}), fuel(100.0));
        assert_eq!(ok_json(&out, src), Some(json!({ "n": 1 })));
        let lines: Vec<&str> = out.log.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(
            lines,
            [
                "a 1 0 1e+21 9007199254740992 0.1 NaN [1,\"x\\\"\\n\\u0001\",{\"k\":null},null,1e+21,9007199254740992.0,0,1.5e-7] {\"d\":\"1970-01-01T00:00:00.000Z\"} 1970-01-01T00:00:00.000Z [1,2] {} null undefined true",
                "[1,{\"a\":\"x\"}]",
                "{\"s\":[\"a\"]}",
                "[\"\u{FFFD}\",\"é€😀\",\"\u{7f}\"]",
                "{\"\":1,\"a\\tb\":\"c\"}",
                "Converting circular structure to JSON: the value contains itself",
            ]
        );
        let _ = adv::rt;
    }

    /// `maxLogBytes`: a long log stops at its byte cap; later lines are counted as dropped.
    #[test]
    fn the_log_is_capped_in_bytes() {
        let src = "function main() {\n  let s = 'y'.repeat(100000)\n  let i = 0\n  while (i < 100) { console.log(s)\n i++ }\n  return { n: i }\n}";
        let out = agent(src, json!({}), fuel(1e5));
        assert_eq!(ok_json(&out, src), Some(json!({ "n": 100 })));
        let total: usize = out.log.iter().map(|l| l.message.len()).sum();
        assert!(
            total <= ajs_vm::DEFAULT_MAX_LOG_BYTES,
            "log of {total} bytes"
        );
        assert!(
            out.log.len() >= 10 && out.log.len() < 100,
            "{} lines",
            out.log.len()
        );
    }
}

/// Atoms pay before they render (issue 26, class 2): a template that names one large variable
/// many times is measured, paid and reserved before its output is built; `pick`, `omit` and
/// `merge` of large objects are linear, not quadratic. Positive controls give the same text.
#[test]
fn atoms_measure_their_output_before_building_it() {
    let t = Instant::now();
    let code =
        "return template({ tmpl: '{{a}}'.repeat(100000), vars: { a: 'x'.repeat(60000) } }).length";
    let out = eval(code, json!({}), fuel(1e5));
    let (m, _) = failed(&out, code);
    assert!(m == "Out of Fuel" || m.contains(HEAP_MSG), "{m}");
    assert!(out.fuel_used <= 1e5);
    // with fuel to spare, the heap refuses it before it is built
    let out = eval(code, json!({}), fuel(1e12));
    fails_with(&out, code, HEAP_MSG);
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    let code = "return template({ tmpl: 'a{{x}}b{{y}}c{{x}}{{z}}{{n}}{{u}}', vars: { x: 'X', y: 2, z: null, n: true } })";
    let out = eval(code, json!({}), fuel(100.0));
    assert_eq!(ok_json(&out, code), Some(json!("aXb2cXtrue")));
    // 100 000 keys: a quadratic pick, omit or merge would take minutes
    let t = Instant::now();
    let code = "let ks = Object.keys(o)\nlet p = pick({ obj: o, keys: ks })\nlet q = omit({ obj: o, keys: ks })\nlet m = merge({ a: o, b: o })\nreturn [Object.keys(p).length, Object.keys(q).length, Object.keys(m).length]";
    let o: serde_json::Map<String, Value> =
        (0..100_000).map(|i| (format!("k{i}"), json!(i))).collect();
    let out = eval(code, json!({ "o": o }), fuel(1e6));
    assert_eq!(ok_json(&out, code), Some(json!([100_000, 0, 100_000])));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

/// The journal and the trace hold a bounded number of bytes (issue 26): the host call whose
/// entry would take the journal past `maxJournalBytes` ends the run, and a trace keeps at most
/// `MAX_TRACE_STEPS` steps whatever cap the host asks for (the rest are counted).
#[test]
fn journal_and_trace_are_bounded() {
    use ajs::{Approvals, Capabilities, GatedRunner, RunSettings, Runner};
    let opts = Options {
        capabilities: Capabilities::default().with_atom("sink", |_| async { Ok(JsValue::Null) }),
        fuel: 1e6,
        ..Options::default()
    };
    let settings = RunSettings {
        journal: true,
        max_journal_bytes: Some(4 << 20),
        ..RunSettings::default()
    };
    let g = GatedRunner::new(
        Runner::default(),
        opts.clone(),
        Approvals::default(),
        settings,
    )
    .unwrap();
    let src = "function main() {\n  let s = 'x'.repeat(1048576)\n  let i = 0\n  while (i < 100) { sink({ v: s })\n i++ }\n  return { n: i }\n}";
    let p = Runner::compile_agent(src, &g.options).unwrap();
    let r = adv::rt()
        .block_on(g.start(&p, &json!({})))
        .finished()
        .unwrap();
    let e = r.outcome.error.expect("the journal cap ends the run");
    assert!(e.message.contains("maxJournalBytes"), "{}", e.message);
    assert_eq!(e.kind, ErrorKind::Boundary);
    let j = r.journal.expect("journal");
    assert!(
        j.held_bytes() <= 4 << 20 && j.entries.len() >= 3,
        "{} entries",
        j.entries.len()
    );
    // positive control: the same run with the default cap (64 MiB) records 10 such calls
    let g = GatedRunner::new(
        Runner::default(),
        opts.clone(),
        Approvals::default(),
        RunSettings {
            journal: true,
            ..RunSettings::default()
        },
    )
    .unwrap();
    let src10 = src.replace("i < 100", "i < 10");
    let p = Runner::compile_agent(&src10, &g.options).unwrap();
    let r = adv::rt()
        .block_on(g.start(&p, &json!({})))
        .finished()
        .unwrap();
    assert_eq!(ok_json(&r.outcome, &src10), Some(json!({ "n": 10 })));
    assert_eq!(r.journal.unwrap().entries.len(), 10);
    // a trace asked for without a cap keeps MAX_TRACE_STEPS
    let g = GatedRunner::new(
        Runner::default(),
        opts,
        Approvals::default(),
        RunSettings {
            trace: true,
            trace_cap: usize::MAX,
            ..RunSettings::default()
        },
    )
    .unwrap();
    let src = "function main() {\n  let i = 0\n  while (i < 400000) { i++ }\n  return { n: i }\n}";
    let p = Runner::compile_agent(src, &g.options).unwrap();
    let r = adv::rt()
        .block_on(g.start(&p, &json!({})))
        .finished()
        .unwrap();
    assert_eq!(ok_json(&r.outcome, src), Some(json!({ "n": 400000 })));
    assert_eq!(r.trace.len(), ajs::MAX_TRACE_STEPS);
    assert!(r.trace_dropped > 0);
}

/// Small values, containers and cells whose memory is mostly what the estimator leaves out
/// (issue 26): pushed until the heap is full.
const REAL_SHAPES: &[&str] = &[
    "let a = []\nwhile (true) { a.push({ a: 1 }) }",
    "let a = []\nwhile (true) { a.push([1]) }",
    "let a = []\nwhile (true) { a.push([]) }",
    "let a = []\nwhile (true) { a.push(Set([1])) }",
    "let a = []\nwhile (true) { a.push(/a/) }",
    "let a = []\nwhile (true) { let r = /a+b/\n r.test('aaab')\n a.push(r) }",
    "let a = []\nwhile (true) { a.push(Date(0)) }",
    "let a = []\nwhile (true) { a.push(1) }",
    "let a = []\nlet i = 0\nwhile (true) { a.push('x' + i)\n i++ }",
    "let a = []\nwhile (true) { a.push({ a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9 }) }",
    "let a = []\nwhile (true) { let b = []\n b.push(1)\n a.push(b) }",
    "let a = []\nlet o = { a: 1, b: 2, c: 3 }\nwhile (true) { a.push({ ...o }) }",
    "let s = Set()\nlet i = 0\nwhile (true) { s.add(i)\n i++ }",
    "let s = Set()\nlet i = 0\nwhile (true) { s.add('k' + i)\n i++ }",
    "let r = []\nwhile (true) { let e = []\n let i = 0\n while (i < 50000) { e.push(['k' + i, i])\n i++ }\n r.push(Object.fromEntries(e)) }",
    "let s = 'x'.repeat(1000)\nlet a = []\nwhile (true) { s = s + 'xy'\n a.push(s) }",
    "let t = '[' + '{\"a\":1},'.repeat(300000) + '{}]'\nlet r = []\nwhile (true) { r.push(JSON.parse(t)) }",
    "let r = []\nwhile (true) { r.push(JSON.parse('[' + '[],'.repeat(500000) + '[]]')) }",
    "let a = []\nlet i = 0\nwhile (i < 100000) { a.push(i)\n i++ }\nlet k = []\nwhile (true) { k.push([...a].sort()) }",
    "let s = 'x'.repeat(100000)\nlet k = []\nwhile (true) { k.push(s.split('')) }",
];

/// Issue 26 ★: beside the estimator, the heap counts the real bytes of every cell (its slot,
/// capacities, hash tables, keys, rounding); for each shape the real count never passes its
/// ceiling, the run ends with the heap-limit error, and the running counts match a recount
/// from the cells.
#[test]
fn the_real_count_never_passes_its_ceiling() {
    let heap = 64 << 20;
    for src in REAL_SHAPES {
        let src = &format!("{src}\nreturn 1");
        let mut vm = vm_for(src, heap);
        let mut end = None;
        for _ in 0..100_000 {
            let step = vm.run(10_000_000);
            let (real, ceiling) = vm.heap_real_bytes();
            assert!(real <= ceiling, "`{src}`: real count {real} over {ceiling}");
            assert!(
                vm.heap_bytes() <= heap,
                "`{src}`: heap counter {}",
                vm.heap_bytes()
            );
            match step {
                Step::Done(_) => {
                    end = Some("done".to_string());
                    break;
                }
                Step::Failed(e) => {
                    end = Some(e.message.clone());
                    break;
                }
                Step::Host(_) | Step::Yield | Step::Blocked => {}
            }
        }
        let end = end.expect("ended");
        assert!(end.starts_with(HEAP_MSG), "`{src}` ended with {end}");
        assert_eq!(
            vm.heap_recount(),
            (vm.heap_bytes(), vm.heap_real_bytes().0),
            "`{src}`: the running counts drifted from the cells"
        );
    }
}

/// Issue 26: small objects are refused by the real count long before the estimator's
/// ceiling (their real cost is several times their estimate).
#[test]
fn small_values_are_refused_by_their_real_size() {
    let heap = 64 << 20;
    for src in [
        "let a = []\nwhile (true) { a.push({ a: 1 }) }\nreturn 1",
        "let a = []\nwhile (true) { a.push(Set([1])) }\nreturn 1",
        "let a = []\nwhile (true) { a.push(/a/) }\nreturn 1",
    ] {
        let mut vm = vm_for(src, heap);
        let Step::Failed(e) = vm.run(u64::MAX / 4) else {
            panic!("`{src}` did not fail");
        };
        assert!(e.message.starts_with(HEAP_MSG), "`{src}`: {}", e.message);
        assert!(
            vm.heap_bytes() < heap / 2,
            "`{src}`: the estimator reached {} first",
            vm.heap_bytes()
        );
    }
}

/// Issue 26: natives whose output can be far larger than their input (a spread of a string, a
/// global match, a replace, a split, `Object.entries` of a string, `flat` of a shared array)
/// admit it before building it: both counts stay under their ceilings at every step, the run
/// ends with the heap error, and the running counts equal a recount of the cells (scratch held
/// while a native ran is released).
#[test]
fn natives_admit_their_output_before_building_it() {
    let heap = 1 << 20;
    for src in [
        "return [...big]",
        "return [...big, ...big]",
        "return big.match(/z/g)",
        "return [...big.matchAll(/(z)/g)]",
        "return big.replace(/z/g, 'zzzzzzzzzz')",
        "return big.replace(/(?:)/g, 'zz')",
        "return big.split(/(?:)/)",
        "return Object.entries(big)",
        "return Object.keys(big)",
        "return Object.assign({}, big.split(''))",
        "return '\u{FDFA}'.repeat(100000).normalize('NFKD')",
        "return '\u{390}'.repeat(200000).toUpperCase()",
        "let a = [big.slice(0, 100000) + 1, big.slice(0, 100000) + 2]\nreturn Set(a)",
        "let x = [1]\nlet i = 0\nwhile (i < 40) { x = [x, x]; i++ }\nreturn x.flat(Infinity)",
    ] {
        let start = Instant::now();
        let mut vm = vm_for(src, heap);
        let mut end = None;
        for _ in 0..100_000 {
            let step = vm.run(1_000_000);
            let (real, ceiling) = vm.heap_real_bytes();
            assert!(real <= ceiling, "`{src}`: real count {real} over {ceiling}");
            assert!(vm.heap_bytes() <= heap, "`{src}`: heap counter");
            match step {
                Step::Done(_) => {
                    end = Some("done".to_string());
                    break;
                }
                Step::Failed(e) => {
                    end = Some(e.message.clone());
                    break;
                }
                Step::Host(_) | Step::Yield | Step::Blocked => {}
            }
        }
        let end = end.expect("ended");
        assert!(end.starts_with(HEAP_MSG), "`{src}` ended with {end}");
        assert_eq!(
            vm.heap_recount(),
            (vm.heap_bytes(), vm.heap_real_bytes().0),
            "`{src}`: the running counts drifted from the cells"
        );
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "`{src}` took {:?}",
            start.elapsed()
        );
    }
}

/// The same natives at ordinary sizes give JavaScript's answers, and leave the counts equal
/// to a recount (their scratch released).
#[test]
fn natives_that_admit_first_still_answer() {
    let src = "let s = 'ab'.repeat(3000) + '😀'\n\
        return [[...s].length, s.match(/a/g).length, [...s.matchAll(/(a)(b)/g)].length,\n\
        s.replace(/a/g, 'xy').length, s.replace(/b/, '[$&]').slice(0, 6), s.split(/b/).length,\n\
        Object.entries('abc')[2], Object.keys([7, 8, 9]).join(), '\u{FDFA}'.normalize('NFKD').length, 'ΌΣΟΣ ΑΣ1'.toLowerCase(), '\u{390}'.toUpperCase().length, [3, 1, [2, [0]]].flat(Infinity),\n\
        [10, 9, 1].sort(), 'abc'.slice(1), ' a '.trim(), 'a'.padStart(3, 'xy'), encodeURI('é ')]";
    let mut vm = vm_for(src, 64 << 20);
    let out = match vm.run(1_000_000_000) {
        Step::Done(v) => serde_json::to_string(&v).unwrap(),
        other => panic!("{:?}", matches!(other, Step::Failed(_))),
    };
    assert_eq!(
        out,
        r#"[6001,3000,3000,9002,"a[b]ab",3001,["2","c"],"0,1,2",18,"όσος ας1",3,[3,1,2,0],[1,10,9],"bc","a","xya","%C3%A9%20"]"#
    );
    assert_eq!(vm.heap_recount(), (vm.heap_bytes(), vm.heap_real_bytes().0));
}
