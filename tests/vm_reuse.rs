//! A VM reused for another run (`Vm::restart`, and the facade's per-thread spare VM) holds
//! nothing of the run before it: heap, registers, fuel, quotas, log, trace, pending and deferred
//! calls, clock readings, host data, randomness — also after that run failed, ran out of fuel,
//! was stopped at a host call or timed out.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ajs::{Capabilities, ErrorKind, Eval, JsValue, Options, Runner, SafeFunction};
use ajs_vm::{AtomSpec, HostArg, Step, Vm, VmOptions};
use serde_json::json;

use crate::common::agent_program as program;

/// Leaves heap cells of every kind, a log, a caught error, clock readings and randomness.
const DIRTY: &str = "function main({ n: 3 }) {\n  let out = []\n  let seen = Set()\n  let re = /a(b+)/g\n  let d = Date(0)\n  let i = 0\n  while (i < n) {\n    let r = llmPredict({ prompt: 'q' + i })\n    seen.add(r)\n    out.push({ r, m: re.test('xabbb' + r), y: d.year, t: Date.now(), s: 'long string ' + i + ' '.repeat(40) })\n    i = i + 1\n  }\n  try { Error('boom') } catch (e) { out.push(e) }\n  console.log('done', out.length)\n  return { out, size: seen.size, r: Math.random() }\n}";

const CLEAN: &str = "function f({ a: 1, b: 'x' }) {\n  console.log('clean', a)\n  return { sum: a + 1, s: b + '!', r: Math.random(), t: Date.now() }\n}";

fn dirty_opts(fuel: u64) -> VmOptions {
    VmOptions {
        fuel,
        atoms: [(
            "llmPredict".to_string(),
            AtomSpec {
                cost: 100_000,
                quota: Some(5),
            },
        )]
        .into(),
        random_seed: 7,
        clock: || 1_700_000_000_000.0,
        max_heap_bytes: 1 << 20,
        ..VmOptions::default()
    }
}

fn clean_opts() -> VmOptions {
    VmOptions {
        fuel: 50_000,
        random_seed: 11,
        clock: || 1_600_000_000_000.0,
        ..VmOptions::default()
    }
}

/// Runs `vm` until it stops at its `stop_at`-th host call (answering the ones before), or ends.
fn drive(vm: &mut Vm, stop_at: Option<usize>, defer: bool) -> Step {
    let mut calls = 0;
    loop {
        match vm.run(1_000) {
            Step::Host(c) => {
                if Some(calls) == stop_at {
                    return Step::Host(c);
                }
                calls += 1;
                if defer {
                    vm.defer().unwrap();
                } else {
                    vm.resume(Ok(JsValue::String(format!("ans{calls}"))))
                        .unwrap();
                }
            }
            Step::Yield => {}
            other => return other,
        }
    }
}

/// Every way a first run can leave a VM.
fn dirty_vms() -> Vec<(&'static str, Vm)> {
    let p = program(DIRTY, &["llmPredict"]);
    let arg = [JsValue::Number(3.0)];
    let mut out = Vec::new();
    for (name, fuel, stop, defer, trace) in [
        ("finished", 5_000_000, None, false, false),
        ("out of fuel", 20_000, None, false, false),
        ("stopped at a host call", 5_000_000, Some(1), false, true),
        ("blocked on deferred calls", 5_000_000, None, true, true),
    ] {
        let mut vm = Vm::new(p.clone(), &arg, dirty_opts(fuel)).unwrap();
        if trace {
            vm.set_trace(Some(10));
        }
        vm.set_host_data(b"journal".to_vec());
        vm.set_elapsed_ms(1234);
        let end = drive(&mut vm, stop, defer);
        match name {
            "finished" => assert!(matches!(end, Step::Done(_)), "{end:?}"),
            "out of fuel" => assert!(
                matches!(&end, Step::Failed(e) if e.kind == ErrorKind::OutOfFuel),
                "{end:?}"
            ),
            "stopped at a host call" => assert!(matches!(end, Step::Host(_)), "{end:?}"),
            _ => assert!(matches!(end, Step::Blocked), "{end:?}"),
        }
        assert!(vm.heap_bytes() > 0);
        out.push((name, vm));
    }
    // a heap over its ceiling
    let p = program(
        "function g({ n: 1 }) {\n  let xs = []\n  while (true) { xs.push('x'.repeat(1000) + xs.length) }\n}",
        &[],
    );
    let mut vm = Vm::new(
        p,
        &[JsValue::Number(1.0)],
        VmOptions {
            fuel: u64::MAX / 4,
            max_heap_bytes: 256 * 1024,
            ..VmOptions::default()
        },
    )
    .unwrap();
    let end = drive(&mut vm, None, false);
    assert!(matches!(&end, Step::Failed(_)), "{end:?}");
    out.push(("over the heap ceiling", vm));
    out
}

#[test]
fn a_restarted_vm_is_a_fresh_vm() {
    let clean = program(CLEAN, &[]);
    let args = [json!(41), json!("y")];
    let fresh =
        || Vm::new_with(clean.clone(), args.iter().map(HostArg::Json), &clean_opts()).unwrap();
    let expected_state = format!("{:?}", fresh());
    let mut reference = fresh();
    let expected_end = drive(&mut reference, None, false);
    assert!(matches!(expected_end, Step::Done(_)), "{expected_end:?}");
    // 0: restart; 1: release, then restart; 2: a spare VM started; 3: a spare VM that ran
    // the same program already (kept, not cloned again) started
    for how in 0..4 {
        let release = how > 0;
        for (name, vm) in dirty_vms() {
            let mut vm = Box::new(vm);
            match how {
                0 | 1 => {
                    if release {
                        assert!(vm.release(), "{name}");
                    }
                    vm.restart(clean.clone(), args.iter().map(HostArg::Json), &clean_opts())
                        .unwrap();
                }
                _ => {
                    let start = |vm: Box<Vm>| {
                        vm.into_spare()
                            .expect(name)
                            .start(&clean, args.iter().map(HostArg::Json), &clean_opts())
                            .unwrap()
                    };
                    let (again, previous) = start(vm);
                    assert!(previous.is_some(), "{name}");
                    vm = again;
                    if how == 3 {
                        assert!(matches!(drive(&mut vm, None, false), Step::Done(_)));
                        let (again, previous) = start(vm);
                        assert!(previous.is_none(), "{name}");
                        vm = again;
                    }
                }
            }
            // every field, heap cell, register and counter as a new VM has them
            assert_eq!(format!("{vm:?}"), expected_state, "{name}, way {how}");
            assert_eq!(vm.fuel_used_milli(), 0, "{name}");
            assert!(
                vm.log().is_empty() && vm.pending_calls().is_empty(),
                "{name}"
            );
            assert_eq!(vm.host_data(), b"", "{name}");
            assert_eq!(vm.elapsed_ms(), 0, "{name}");
            let end = drive(&mut vm, None, false);
            assert_eq!(end, expected_end, "{name}");
            assert_eq!(vm.fuel_used_milli(), reference.fuel_used_milli(), "{name}");
            assert_eq!(vm.log(), reference.log(), "{name}");
            assert_eq!(vm.heap_bytes(), reference.heap_bytes(), "{name}");
        }
    }
}

#[test]
fn a_restart_that_fails_leaves_an_ended_run() {
    let (_, mut vm) = dirty_vms().remove(0);
    let needs_atom = program(DIRTY, &["llmPredict"]);
    let e = vm
        .restart(needs_atom, [HostArg::Undefined], &clean_opts())
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Input);
    assert!(matches!(vm.run(u64::MAX), Step::Failed(_)));
    // arguments over the heap ceiling
    let clean = program(CLEAN, &[]);
    let big = json!("x".repeat(100_000));
    let tiny = VmOptions {
        max_heap_bytes: 64 * 1024,
        ..clean_opts()
    };
    assert!(vm
        .restart(clean.clone(), [HostArg::Json(&big)], &tiny)
        .is_err());
    assert!(matches!(vm.run(u64::MAX), Step::Failed(_)));
    // and the VM is still good for a run after that
    vm.restart(clean.clone(), [HostArg::Json(&json!(1))], &clean_opts())
        .unwrap();
    assert!(matches!(drive(&mut vm, None, false), Step::Done(_)));
    // the same for a spare VM's start
    let spare = Box::new(vm).into_spare().unwrap();
    let needs_atom = program(DIRTY, &["llmPredict"]);
    let (e, vm) = spare
        .start(&needs_atom, [HostArg::Undefined], &clean_opts())
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Input);
    let mut vm = vm;
    assert!(matches!(vm.run(u64::MAX), Step::Failed(_)));
    let (e, mut vm) = vm
        .into_spare()
        .unwrap()
        .start(&clean, [HostArg::Json(&big)], &tiny)
        .unwrap_err();
    assert_ne!(e.kind, ErrorKind::Input);
    assert!(matches!(vm.run(u64::MAX), Step::Failed(_)));
    let (mut vm, _) = vm
        .into_spare()
        .unwrap()
        .start(&clean, [HostArg::Json(&json!(1))], &clean_opts())
        .unwrap();
    assert!(matches!(drive(&mut vm, None, false), Step::Done(_)));
}

#[test]
fn json_arguments_copy_in_like_host_values() {
    let p = program(CLEAN, &[]);
    for v in [
        json!(null),
        json!(true),
        json!(-0.5),
        json!(u64::MAX),
        json!("é😀\"\n"),
        json!([1, [2, [3, {}]], "s", null]),
        json!({ "z": 1, "a": { "k": [true, 2.5] }, "1": "one", "é": [] }),
    ] {
        let by_json = Vm::new_with(p.clone(), [HostArg::Json(&v)], &clean_opts()).unwrap();
        let by_value = Vm::new(p.clone(), &[JsValue::from_json(&v)], clean_opts()).unwrap();
        assert_eq!(format!("{by_json:?}"), format!("{by_value:?}"), "{v}");
    }
    // too deep for the boundary: the same error either way
    let mut deep = json!(1);
    for _ in 0..1100 {
        deep = json!([deep]);
    }
    let a = Vm::new_with(p.clone(), [HostArg::Json(&deep)], &clean_opts()).unwrap_err();
    let b = Vm::new(p, &[JsValue::from_json(&deep)], clean_opts()).unwrap_err();
    assert_eq!(a, b);
}

/// The facade's calls on one thread share a spare VM: each call answers as if it were the first.
#[test]
fn a_call_sees_nothing_of_the_call_before() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = Options {
        random_seed: Some(5),
        clock: || 1_000.0,
        ..Options::default()
    };
    let probe = SafeFunction::new(
        &["x"],
        "console.log('probe', x)\nlet o = { x }\nlet s = Set()\ns.add(x)\nreturn [o, s.size, Math.random(), Date.now(), 'p'.repeat(3), JSON.stringify(o)]",
        opts.clone(),
    )
    .unwrap();
    let baseline = probe.call_sync(&[json!(1)]);
    assert!(baseline.error.is_none(), "{:?}", baseline.error);
    assert_eq!(baseline.log.len(), 1);
    let spoilers: Vec<(&str, Eval)> = vec![
        (
            "error",
            Eval::new("console.log('secret'); let s = 'secret'.repeat(100); null.x"),
        ),
        (
            "out of fuel",
            Eval::new("let xs = []; while (true) { xs.push({ secret: 1 }) }").fuel(50.0),
        ),
        (
            "timeout",
            Eval::new("let xs = []; while (true) { xs.push('secret') }")
                .fuel(1e12)
                .timeout_ms(30),
        ),
        (
            "heap",
            Eval::new("let xs = []; while (true) { xs.push('secret'.repeat(10000)) }").fuel(1e12),
        ),
        (
            "random and log",
            Eval::new("console.warn('secret'); Math.random() + Math.random()"),
        ),
    ];
    for (name, e) in &spoilers {
        for spoil_async in [false, true] {
            let spoiled = if spoil_async {
                rt.block_on(e.run())
            } else {
                e.run_sync()
            };
            if *name != "random and log" {
                assert!(spoiled.error.is_some(), "{name}: {spoiled:?}");
            }
            for check_async in [false, true] {
                let out = if check_async {
                    rt.block_on(probe.call(&[json!(1)]))
                } else {
                    probe.call_sync(&[json!(1)])
                };
                assert_eq!(out, baseline, "{name} (async {spoil_async}/{check_async})");
            }
        }
    }
    // the other way round: a failed call, then an Eval
    let eval = Eval::new("[Math.random(), [1, 2].map(v => v + 1)]").options(opts.clone());
    let first = eval.run_sync();
    let f = SafeFunction::new(&["n"], "while (true) { n = n + 1 }", opts).unwrap();
    assert_eq!(
        f.call_sync(&[json!(1)]).error.unwrap().kind,
        ErrorKind::OutOfFuel
    );
    assert_eq!(eval.run_sync(), first);
    assert_eq!(rt.block_on(eval.run()), first);
}

/// Fuel and quotas are per run: a run after one that spent them all gets them all again.
#[test]
fn fuel_and_quotas_are_per_run_on_a_reused_vm() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let caps = Capabilities::default().with_atom("ping", move |v: JsValue| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { Ok(v) }
    });
    let options = Options {
        capabilities: caps,
        fuel: 100.0,
        ..Options::default()
    };
    let runner = Runner {
        quotas: [("ping".to_string(), 2)].into(),
        ..Runner::default()
    };
    let src = "function main({ n: 1 }) {\n  let i = 0\n  while (i < n) { ping(i); i = i + 1 }\n  return { i }\n}";
    for _ in 0..3 {
        let over = rt.block_on(runner.run_agent(src, &json!({ "n": 3 }), &options));
        assert_eq!(over.error.unwrap().kind, ErrorKind::Quota);
        let ok = rt.block_on(runner.run_agent(src, &json!({ "n": 2 }), &options));
        assert!(ok.error.is_none(), "{:?}", ok.error);
        let spent = rt.block_on(runner.run_agent(
            "function main({ n: 1 }) {\n  while (true) { n = n + 1 }\n}",
            &json!({ "n": 1 }),
            &options,
        ));
        assert_eq!(spent.error.unwrap().kind, ErrorKind::OutOfFuel);
        assert_eq!(spent.fuel_used, 100.0);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3 * (2 + 2));
    let f = SafeFunction::new(
        &["n"],
        "let i = 0\nwhile (i < n) { i = i + 1 }\nreturn i",
        Options::default(),
    )
    .unwrap();
    let small = f.call_sync(&[json!(10)]);
    assert_eq!(
        f.call_sync(&[json!(1e9)]).error.unwrap().kind,
        ErrorKind::OutOfFuel
    );
    assert_eq!(f.call_sync(&[json!(10)]), small);
    assert_eq!(rt.block_on(f.call(&[json!(10)])), small);
}

/// The context keys an `Eval` hands the compiler come from a per-thread buffer reused across
/// runs: a run sees exactly its own context's keys, whatever contexts came before (fewer,
/// more, longer keys; small contexts searched by scanning, large ones by hashing).
#[test]
fn an_eval_sees_only_its_own_context_keys() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let long = "k".repeat(5000);
    let long_code = format!("{long} * 2");
    let mut wide = serde_json::Map::new();
    for i in 0..40 {
        wide.insert(format!("v{i}"), json!(i));
    }
    let cases: Vec<(&str, serde_json::Value, Result<JsValue, &str>)> = vec![
        ("x + y", json!({ "x": 1, "y": 2 }), Ok(JsValue::Number(3.0))),
        // the keys of the run before are gone
        ("x", json!({}), Err("'x' is not defined")),
        ("y", json!({ "x": 1 }), Err("'y' is not defined")),
        // a large context: looked up by hashing
        (
            "v0 + v39 + v17",
            serde_json::Value::Object(wide.clone()),
            Ok(JsValue::Number(56.0)),
        ),
        ("v39", json!({ "v3": 3 }), Err("'v39' is not defined")),
        // a key too long for the buffer to keep
        (&long_code, json!({ &long: 21 }), Ok(JsValue::Number(42.0))),
        ("x", json!({ "xx": 1, "x": 5 }), Ok(JsValue::Number(5.0))),
        // a key the code does not use, and one it uses that is absent from the values
        ("a", json!({ "b": 1, "a": null }), Ok(JsValue::Null)),
    ];
    for round in 0..2 {
        for (code, ctx, want) in &cases {
            let e = Eval::new(*code).context(ctx.clone());
            for out in [e.run_sync(), rt.block_on(e.run())] {
                match want {
                    Ok(v) => assert_eq!(&out.result, v, "{code} (round {round}): {out:?}"),
                    Err(m) => {
                        let err = out.error.expect(code);
                        assert!(err.message.contains(m), "{code}: {}", err.message);
                    }
                }
            }
        }
    }
}

/// A run reseeded before its first slice (`Vm::set_random_seed`, what a `SafeFunction` call does
/// with its options built once) is the run started with that seed.
#[test]
fn a_reseeded_run_is_the_run_started_with_that_seed() {
    let clean = program(CLEAN, &[]);
    let args = [json!(41), json!("y")];
    let seeded = VmOptions {
        random_seed: 99,
        ..clean_opts()
    };
    let mut expected =
        Vm::new_with(clean.clone(), args.iter().map(HostArg::Json), &seeded).unwrap();
    let expected_state = format!("{expected:?}");
    let expected_end = drive(&mut expected, None, false);
    for (name, mut vm) in dirty_vms() {
        vm.restart(clean.clone(), args.iter().map(HostArg::Json), &clean_opts())
            .unwrap();
        vm.set_random_seed(99);
        assert_eq!(format!("{vm:?}"), expected_state, "{name}");
        assert_eq!(drive(&mut vm, None, false), expected_end, "{name}");
    }
}
