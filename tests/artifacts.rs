//! Artifacts for split deployment: a compiled agent survives the round trip, its span table can
//! travel separately, and a tampered artifact is refused by the loader, never run.

use ajs::{load_artifact, LoadError, Options, Program, Runner};
use ajs_bytecode::isa::{Dst, Op};
use ajs_bytecode::program::{CodeFault, COST_VERSION, FORMAT_VERSION};
use serde_json::{json, Value};

const AGENT: &str = "function fact(n) {\n  if (n < 2) { return 1 }\n  return n * fact(n - 1)\n}\nfunction main({ n: 3 }) {\n  let i = 0\n  let s = 0\n  while (i < n) { s = s + i\n i = i + 1 }\n  if (n > 100.5) { Error('too big: ' + n) }\n  return { fact: fact(n), sum: s }\n}";

fn compiled() -> Program {
    Runner::compile_agent(AGENT, &Options::default())
        .expect("compiles")
        .program()
        .clone()
}

fn run(program: &ajs::VerifiedProgram, args: Value) -> ajs::Outcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(Runner::default().run_program(program, &args, &Options::default()))
}

#[test]
fn round_trip_runs_the_same() {
    let p = compiled();
    let loaded = load_artifact(&p.to_bytes(), None).expect("loads");
    let out = run(&loaded, json!({ "n": 5 }));
    assert_eq!(
        out.result.to_json(),
        Some(json!({ "fact": 120, "sum": 10 }))
    );
}

#[test]
fn stripped_spans_travel_in_a_sidecar() {
    let p = compiled();
    let (artifact, sidecar) = p.to_stripped_bytes();
    let sidecar = sidecar.expect("the compiler writes spans");
    assert!(artifact.len() < p.to_bytes().len());
    let bare = load_artifact(&artifact, None).unwrap();
    assert!(bare.debug.is_none());
    let e = run(&bare, json!({ "n": 101 })).error.unwrap();
    assert_eq!(e.message, "too big: 101");
    assert_eq!(e.pos, None, "no spans, no position");
    let with = load_artifact(&artifact, Some(&sidecar)).unwrap();
    let e = run(&with, json!({ "n": 101 })).error.unwrap();
    assert_eq!(e.pos.map(|p| p.line), Some(10));
    // A sidecar binds to its artifact's exact bytes.
    let mut other = p.clone();
    other.constants.push(ajs_bytecode::Constant::Number(7.0));
    let (other_artifact, _) = other.to_stripped_bytes();
    let err = load_artifact(&other_artifact, Some(&sidecar)).unwrap_err();
    assert!(matches!(err, LoadError::Spans(_)), "{err}");
    assert!(err.to_string().contains("belongs to artifact"), "{err}");
    for cut in 0..sidecar.len() {
        assert!(load_artifact(&artifact, Some(&sidecar[..cut])).is_err());
    }
}

#[test]
fn other_format_or_cost_version_is_refused_naming_both() {
    let bytes = compiled().to_bytes();
    let mut f = bytes.clone();
    f[4..6].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let e = load_artifact(&f, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "artifact format version {} is not supported (this build reads version {FORMAT_VERSION})",
            FORMAT_VERSION + 1
        )
    );
    let mut c = bytes.clone();
    c[6..8].copy_from_slice(&(COST_VERSION + 7).to_le_bytes());
    let e = load_artifact(&c, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "artifact cost-table version {} does not match this build's cost table version {COST_VERSION}",
            COST_VERSION + 7
        )
    );
}

#[test]
fn wrong_isa_fingerprint_is_refused() {
    let mut bytes = compiled().to_bytes();
    bytes[8] ^= 0x40;
    let e = load_artifact(&bytes, None).unwrap_err();
    assert!(matches!(e, LoadError::IsaMismatch { .. }), "{e}");
    assert!(e.to_string().contains("instruction-set fingerprint"), "{e}");
}

#[test]
fn truncated_artifacts_are_refused() {
    let bytes = compiled().to_bytes();
    for cut in 0..bytes.len() {
        assert!(
            load_artifact(&bytes[..cut], None).is_err(),
            "truncated to {cut} bytes"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(load_artifact(&longer, None).is_err(), "trailing byte");
}

/// Applies `edit` to the first instruction it accepts, re-encodes without verifying and loads.
fn tamper(edit: impl Fn(&mut Op, u16) -> bool) -> LoadError {
    let mut p = compiled();
    let mut done = false;
    'outer: for f in &mut p.functions {
        let nregs = f.nregs;
        for op in &mut f.code {
            if edit(op, nregs) {
                done = true;
                break 'outer;
            }
        }
    }
    assert!(done, "no instruction to tamper with");
    load_artifact(&p.to_bytes(), None).expect_err("a tampered artifact must be refused")
}

#[test]
fn lowered_fuel_charge_is_refused() {
    let e = tamper(|op, _| match op {
        Op::Charge { amount } if amount.0 > 0 => {
            amount.0 -= 1;
            true
        }
        _ => false,
    });
    assert!(
        matches!(
            e,
            LoadError::Code {
                fault: CodeFault::Charge { .. },
                ..
            }
        ),
        "{e}"
    );
    // Zeroing every charge (a "free" program) is refused too.
    let mut p = compiled();
    for f in &mut p.functions {
        for op in &mut f.code {
            if let Op::Charge { amount } = op {
                amount.0 = 0;
            }
        }
    }
    assert!(load_artifact(&p.to_bytes(), None).is_err());
}

#[test]
fn retargeted_jump_is_refused() {
    // Into the middle of a block (past its charge) …
    // (the agent's branches are fused compare-and-branches: `if (n < 2)` is one instruction,
    // the 2 carried in it)
    let e = tamper(|op, _| match op {
        Op::JumpUnlessLtI { .. } => {
            op.map_target(|t| t + 1);
            true
        }
        _ => false,
    });
    assert!(
        matches!(
            e,
            LoadError::Code {
                fault: CodeFault::Charge { .. } | CodeFault::Target(_),
                ..
            }
        ),
        "{e}"
    );
    // … and out of the function.
    let e = tamper(|op, _| match op {
        Op::JumpIfLt { .. } | Op::JumpUnlessLt { .. } => {
            op.map_target(|_| 1_000_000);
            true
        }
        _ => false,
    });
    assert!(
        matches!(
            e,
            LoadError::Code {
                fault: CodeFault::Target(1_000_000),
                ..
            }
        ),
        "{e}"
    );
}

/// `e` refuses an instruction for naming a register its function does not have.
fn assert_register_fault(e: &LoadError) {
    assert!(
        matches!(
            e,
            LoadError::Code {
                fault: CodeFault::Register { .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn register_out_of_range_is_refused() {
    let e = tamper(|op, nregs| match op {
        Op::LoadConst { dst, .. } => {
            *dst = Dst(nregs);
            true
        }
        _ => false,
    });
    assert_register_fault(&e);
}

#[test]
fn constant_operand_out_of_range_is_refused() {
    // `n > 100.5` names its constant in the instruction (JumpUnlessGtK): its index is checked
    // like every constant index
    let e = tamper(|op, _| match op {
        Op::JumpUnlessGtK { k, .. } => {
            k.0 = u16::MAX;
            true
        }
        _ => false,
    });
    assert!(
        matches!(
            e,
            LoadError::Code {
                fault: CodeFault::Constant(u16::MAX),
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn constant_operand_instruction_register_out_of_range_is_refused() {
    let e = tamper(|op, nregs| match op {
        Op::JumpUnlessGtK { a, .. } => {
            a.0 = nregs;
            true
        }
        _ => false,
    });
    assert_register_fault(&e);
    // and one carrying a small integer (`n - 1` is `SubI`)
    for dst in [false, true] {
        let e = tamper(|op, nregs| match op {
            Op::SubI { dst: d, a, .. } => {
                if dst {
                    d.0 = nregs;
                } else {
                    a.0 = nregs;
                }
                true
            }
            _ => false,
        });
        assert_register_fault(&e);
    }
}

#[test]
fn a_missing_atom_is_refused_before_running_naming_it() {
    let options = Options {
        capabilities: ajs::Capabilities::default().with_atom("lookup", |v| async move { Ok(v) }),
        ..Options::default()
    };
    let src = "function main() {\n  console.log('started')\n  return { v: lookup({ id: 1 }) }\n}";
    let program = Runner::compile_agent(src, &options).unwrap();
    assert_eq!(program.atoms, vec!["lookup".to_string()]);
    let loaded = load_artifact(&program.to_bytes(), None).unwrap();
    assert!(Runner::check_atoms(&loaded, &options).is_ok());
    let bare = Options::default();
    assert_eq!(
        Runner::check_atoms(&loaded, &bare).unwrap_err(),
        "This program calls the atom 'lookup', which this runner does not provide"
    );
    // The runner refuses it too (at VM creation), before a single instruction runs.
    let out = run(&loaded, json!({}));
    let e = out.error.unwrap();
    assert_eq!(
        e.message,
        "This program calls the atom 'lookup', which this runner does not provide"
    );
    assert!(out.log.is_empty(), "nothing ran");
    assert_eq!(out.fuel_used, 0.0);
}

#[test]
fn an_artifact_over_the_largest_allowed_is_refused_unread() {
    // a real artifact padded past the limit: refused for its size, before decoding
    let mut bytes = compiled().to_bytes();
    bytes.resize(ajs::MAX_ARTIFACT_BYTES + 1, 0);
    let e = load_artifact(&bytes, None).unwrap_err();
    assert_eq!(e, LoadError::TooLarge(ajs::MAX_ARTIFACT_BYTES + 1));
    assert!(e.to_string().contains("MAX_ARTIFACT_BYTES"), "{e}");
    let sidecar = vec![0u8; ajs::MAX_ARTIFACT_BYTES + 1];
    let e = load_artifact(&compiled().to_bytes(), Some(&sidecar)).unwrap_err();
    assert!(e.to_string().contains("MAX_ARTIFACT_BYTES"), "{e}");
    // at the limit, the size is not what refuses it
    bytes.truncate(ajs::MAX_ARTIFACT_BYTES);
    assert!(!matches!(
        load_artifact(&bytes, None),
        Err(LoadError::TooLarge(_))
    ));
}

/// A function declaring far more registers than its code names (65,535: every call would fill
/// them, uncharged) is refused at load; one naming its high register must also declare it, so
/// the check cannot refuse what the compiler makes (the round trip above loads).
#[test]
fn a_frame_larger_than_its_code_is_refused() {
    let mut p = compiled();
    let f = p
        .functions
        .iter_mut()
        .find(|f| f.name == "fact")
        .expect("fact");
    let named = f.registers_named();
    f.nregs = u16::MAX;
    let e = load_artifact(&p.to_bytes(), None).expect_err("refused");
    let m = e.to_string();
    assert!(
        m.contains("declares 65535 registers") && m.contains(&format!("names only {named}")),
        "{m}"
    );
    // within the free margin it still loads
    let mut p = compiled();
    for f in &mut p.functions {
        f.nregs = f.nregs.max(ajs_bytecode::program::FREE_REGISTERS);
    }
    assert!(load_artifact(&p.to_bytes(), None).is_ok());
}

/// Time per fuel of running `program` with `args` under a budget of `budget` fuel, in ns.
fn ns_per_fuel(program: &ajs::VerifiedProgram, args: Value, budget: f64) -> (f64, ajs::Outcome) {
    let opts = Options {
        fuel: budget,
        ..Options::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let t = std::time::Instant::now();
    let out = rt.block_on(Runner::default().run_program(program, &args, &opts));
    let ns = t.elapsed().as_nanos() as f64;
    (ns / out.fuel_used.max(1e-3), out)
}

/// The median of three.
fn median(mut xs: [f64; 3]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[1]
}

/// A plain `while` loop of `n` iterations.
const LOOP: &str =
    "function main({ n: 3 }) {\n  let i = 0\n  while (i < n) { i = i + 1 }\n  return { i }\n}";

/// A call loop: `main({ n })` calls `f` `n` times.
const CALLS: &str = "function f(x) {\n  return x\n}\nfunction main({ n: 3 }) {\n  let i = 0\n  while (i < n) { f(i)\n i = i + 1 }\n  return { i }\n}";

fn compile(source: &str) -> Program {
    Runner::compile_agent(source, &Options::default())
        .expect("compiles")
        .program()
        .clone()
}

/// `CALLS` with `f` naming register `high` (a `Move` into it after its first charge, which pays
/// for it): a frame of `high + 1` registers, filled by every call, that the verifier accepts.
fn call_loop_with_frame(high: u16) -> ajs::VerifiedProgram {
    let mut p = compile(CALLS);
    p.debug = None;
    let f = p.functions.iter_mut().find(|f| f.name == "f").expect("f");
    assert!(f.code.iter().all(|op| op.jump_target().is_none()), "{f:?}");
    let mv = Op::Move {
        dst: Dst(high),
        src: ajs_bytecode::isa::Src(0),
    };
    match &mut f.code[0] {
        Op::Charge { amount } => amount.0 += mv.cost(),
        op => panic!("{op:?}"),
    }
    f.code.insert(1, mv);
    f.nregs = f.nregs.max(high + 1);
    load_artifact(&p.to_bytes(), None).expect("a frame its code names loads")
}

/// A function whose code names register 65,534 (so the verifier must accept its 65,535-register
/// frame) pays for filling it on every call: calling it in a loop spends fuel within 100 times
/// a plain `while` loop's time per fuel, measured in the same test (uncharged, ~1,200×), and
/// under the default budget such a loop ends Out of Fuel at once.
#[test]
fn a_large_frame_costs_fuel_in_proportion_to_its_size() {
    let plain = load_artifact(&compile(LOOP).to_bytes(), None).unwrap();
    let small = call_loop_with_frame(2);
    let big = call_loop_with_frame(u16::MAX - 1);
    let (mut base, mut ratio) = ([0.0; 3], [0.0; 3]);
    let (mut small_fuel, mut big_fuel) = (0.0, 0.0);
    for i in 0..3 {
        let (b, out) = ns_per_fuel(&plain, json!({ "n": 2_000_000 }), 1e7);
        assert!(out.error.is_none(), "{:?}", out.error);
        let (_, out) = ns_per_fuel(&small, json!({ "n": 1000 }), 1e7);
        assert!(out.error.is_none(), "{:?}", out.error);
        small_fuel = out.fuel_used;
        let (ns, out) = ns_per_fuel(&big, json!({ "n": 2000 }), 1e7);
        assert!(out.error.is_none(), "{:?}", out.error);
        big_fuel = out.fuel_used;
        (base[i], ratio[i]) = (b, ns / b);
    }
    let ratio = median(ratio);
    eprintln!(
        "loop {:.1} ns/fuel; 65,535-register calls {ratio:.1}x that; fuel per call {:.3} (3 registers: {:.3})",
        median(base),
        big_fuel / 2000.0,
        small_fuel / 1000.0
    );
    assert!(
        big_fuel / 2000.0 > 10.0 * small_fuel / 1000.0,
        "the large frame is charged: {big_fuel} vs {small_fuel}"
    );
    assert!(
        ratio <= 100.0,
        "large frames cost {ratio:.0}x a loop's time per fuel"
    );
    // under the default budget: Out of Fuel within a few calls
    let t = std::time::Instant::now();
    let out = run(&big, json!({ "n": 1_000_000 }));
    assert_eq!(out.error.map(|e| e.kind), Some(ajs::ErrorKind::OutOfFuel));
    assert!(out.fuel_used <= 1000.0, "{}", out.fuel_used);
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
}

/// `compiled()` with `n` more string constants of `len` units each (none used by its code).
fn with_constants(n: usize, len: usize) -> ajs::VerifiedProgram {
    let mut p = compiled();
    for i in 0..n {
        let mut s = format!("{i:x}");
        s.extend(std::iter::repeat_n('k', len.saturating_sub(s.len())));
        p.constants.push(ajs_bytecode::Constant::String(
            ajs_bytecode::program::widen(s.as_bytes()),
        ));
    }
    load_artifact(&p.to_bytes(), None).expect("loads")
}

/// A run's start copies the program's string constants into its heap: past a small free
/// allowance (which a compiled program of ordinary size stays within) it is charged before
/// the copy, in proportion to their count and size, and a start the budget does not cover
/// ends Out of Fuel without copying. (60,000 constants took ~5.6 ms per run for 4.4 fuel.)
#[test]
fn a_run_start_charges_for_its_string_constants() {
    let fuel_of = |p: &ajs::VerifiedProgram| {
        let (_, out) = ns_per_fuel(p, json!({ "n": 3 }), 1e7);
        assert!(out.error.is_none(), "{:?}", out.error);
        out.fuel_used
    };
    let base = fuel_of(&load_artifact(&compiled().to_bytes(), None).unwrap());
    // within the allowance: unchanged
    assert_eq!(fuel_of(&with_constants(16, 8)), base);
    // past it: in proportion to the count and to the length
    let many = fuel_of(&with_constants(30_000, 8)) - base;
    let twice = fuel_of(&with_constants(60_000, 8)) - base;
    let longer = fuel_of(&with_constants(30_000, 200)) - base;
    assert!(many > 0.0, "30,000 constants are charged");
    assert!((twice / many - 2.0).abs() < 0.05, "{many} vs {twice}");
    assert!(longer > 2.0 * many, "{many} vs {longer}");
    // the charge buys the copy's time: within a bound of a plain loop's time per fuel (100×,
    // wide slack over the goal of 10×; uncharged, ~50,000×)
    let plain = load_artifact(&compile(LOOP).to_bytes(), None).unwrap();
    let big = with_constants(60_000, 8);
    let mut ratio = [0.0; 3];
    for r in &mut ratio {
        let (b, _) = ns_per_fuel(&plain, json!({ "n": 2_000_000 }), 1e7);
        let (ns, _) = ns_per_fuel(&big, json!({ "n": 3 }), 1e7);
        *r = ns / b;
    }
    let ratio = median(ratio);
    eprintln!("60,000 constants: {ratio:.0}x a loop's time per fuel");
    assert!(ratio <= 100.0, "{ratio:.0}x");
    // a start the budget does not cover: refused before the copy, nothing runs
    let mut p = compiled();
    p.constants.push(ajs_bytecode::Constant::String(
        ajs_bytecode::program::widen(&vec![b'a'; 8_000_000]),
    ));
    let p = load_artifact(&p.to_bytes(), None).unwrap();
    let out = run(&p, json!({ "n": 3 }));
    let e = out.error.expect("refused");
    assert_eq!(e.kind, ajs::ErrorKind::OutOfFuel);
    // (exactly the reference's run-time message, as every Out of Fuel)
    assert_eq!(e.message, "Out of Fuel");
    assert!(out.log.is_empty());
}

/// Each run looks every atom the program lists up in the host's table: a list naming one atom
/// 65,535 times would make that uncharged work grow past the host's own atoms. Refused at load.
#[test]
fn an_atom_listed_twice_is_refused() {
    let mut p = compiled();
    p.atoms = vec!["llm".into(), "fetch".into(), "llm".into()];
    let e = load_artifact(&p.to_bytes(), None).expect_err("refused");
    assert!(e.to_string().contains("'llm' is listed twice"), "{e}");
    p.atoms.pop();
    assert!(load_artifact(&p.to_bytes(), None).is_ok());
}

/// An agent artifact's signature is read and checked by every loader and run: a parameter type
/// nested a million levels deep (which would exhaust the loader's stack as it is read) is
/// refused as it is read, and a signature listing more parameters than the entry takes (which
/// every run would compare argument names with) is refused.
#[test]
fn a_deep_or_long_signature_is_refused() {
    let mut p = compile(CALLS);
    p.signature = None;
    let mut bytes = p.to_bytes();
    assert_eq!(bytes.pop(), Some(0), "the manifest section is encoded last");
    assert_eq!(bytes.pop(), Some(0), "the signature ends the program");
    let with_type = |depth: usize| {
        // `Some(Signature { name: "m", params: [ParamSpec { name: "n", required: false,
        // ty: Array(Array(…(Any))) }] })`
        let mut b = bytes.clone();
        b.extend_from_slice(&[1, 1, b'm', 1, 1, b'n', 0]);
        b.extend(std::iter::repeat_n(5u8, depth));
        b.push(0);
        // no manifest section
        b.push(0);
        load_artifact(&b, None)
    };
    let e = with_type(1_000_000).expect_err("refused");
    assert!(e.to_string().contains("MAX_TYPE_DEPTH"), "{e}");
    let depth = ajs_bytecode::program::MAX_TYPE_DEPTH as usize;
    assert!(with_type(depth - 1).is_ok());
    assert!(with_type(depth).is_err());
    let mut p = compile(CALLS);
    let sig = p.signature.as_mut().expect("an agent has a signature");
    let extra = sig.params[0].clone();
    sig.params.extend(std::iter::repeat_n(extra, 1000));
    let e = load_artifact(&p.to_bytes(), None).expect_err("refused");
    assert!(e.to_string().contains("lists 1001 parameters"), "{e}");
}
