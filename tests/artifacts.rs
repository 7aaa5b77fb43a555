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
