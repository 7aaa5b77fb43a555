use super::*;
use crate::isa::{insert_charges, Dst, Imm, Src, Target, Target24};
use crate::natives::NativeId;

fn function(code: &[Op]) -> Function {
    Function {
        name: CompactString::default(),
        params: Vec::new(),
        nregs: 2,
        code: insert_charges(code, &vec![(); code.len()]).0,
    }
}

/// `call_clobber` finds a register at or above a call's base read after the call, along
/// the fall-through, a jump and a `try` handler, and accepts the registers below the base,
/// the result, and registers written again before they are read.
#[test]
fn call_clobber_finds_registers_read_after_a_call() {
    use crate::isa::{Base, Count, Func};
    let call = |dst: u16, base: u16| Op::Call {
        dst: Dst(dst),
        func: Func(0),
        base: Base(base),
        argc: Count(1),
    };
    let f = |nregs: u16, code: Vec<Op>| Function {
        name: CompactString::default(),
        params: vec!["n".into()],
        nregs,
        code,
    };
    let ret = |r: u16| Op::Return { src: Src(r) };
    let mv = |d: u16, s: u16| Op::Move {
        dst: Dst(d),
        src: Src(s),
    };
    // r0 (below the base) and the result r1 read after: fine
    let ok = f(
        4,
        vec![
            mv(2, 0),
            call(1, 2),
            Op::Add {
                dst: Dst(3),
                a: Src(0),
                b: Src(1),
            },
            ret(3),
        ],
    );
    assert_eq!(ok.call_clobber(), None);
    // r3 (above the base) written before the call and read after
    let bad = f(4, vec![mv(3, 0), mv(2, 0), call(1, 2), ret(3)]);
    assert_eq!(bad.call_clobber(), Some((2, 3)));
    // the argument register itself read after the call
    let arg = f(4, vec![mv(2, 0), call(1, 2), ret(2)]);
    assert_eq!(arg.call_clobber(), Some((1, 2)));
    // written again before it is read: fine
    let rewritten = f(4, vec![mv(3, 0), mv(2, 0), call(1, 2), mv(3, 1), ret(3)]);
    assert_eq!(rewritten.call_clobber(), None);
    // read after a jump
    let jumped = f(
        4,
        vec![
            mv(3, 0),
            mv(2, 0),
            call(1, 2),
            Op::Jump { target: Target(5) },
            ret(0),
            ret(3),
        ],
    );
    assert_eq!(jumped.call_clobber(), Some((2, 3)));
    // read in a `try` handler the call may throw to
    let handler = f(
        4,
        vec![
            mv(3, 0),
            Op::TryEnter { handler: Target(6) },
            mv(2, 0),
            call(1, 2),
            Op::TryExit {},
            ret(1),
            Op::Catch { dst: Dst(2) },
            ret(3),
        ],
    );
    assert_eq!(handler.call_clobber(), Some((3, 3)));
}

fn program_of(functions: Vec<Function>) -> Program {
    Program {
        functions,
        constants: Vec::new(),
        atoms: Vec::new(),
        entry: 0,
        debug: None,
        signature: None,
    }
}

/// String constants (a `SmallVec` of units) and names (a `CompactString`), short and long,
/// encode and print as the `Vec<u16>` and `String` they were declared as before: the
/// artifact format did not change with them.
#[test]
fn inline_strings_encode_as_vectors_and_strings() {
    for n in [0, 1, 7, 8, 9, 23, 24, 25, 40] {
        let v: Vec<u16> = (0..n as u16).map(|u| u.wrapping_mul(40_503)).collect();
        let c = Constant::String(StrUnits::from_slice(&v));
        let old = OldConstant::String(v.clone());
        let encoded = postcard::to_stdvec(&c).expect("encodes");
        assert_eq!(encoded, postcard::to_stdvec(&old).expect("encodes"));
        assert_eq!(
            postcard::from_bytes::<Constant>(&encoded).expect("decodes"),
            c
        );
        assert_eq!(format!("{c:?}"), format!("{old:?}"));
        let bytes: Vec<u8> = v.iter().map(|&u| u as u8).collect();
        let wide: Vec<u16> = bytes.iter().map(|&b| u16::from(b)).collect();
        assert_eq!(widen(&bytes).as_slice(), &wide[..]);
        // (a two-byte character across the inline limit)
        let text: String = "aé".chars().cycle().take(n).collect();
        let name = CompactString::from(text.as_str());
        let encoded = postcard::to_stdvec(&name).expect("encodes");
        assert_eq!(encoded, postcard::to_stdvec(&text).expect("encodes"));
        assert_eq!(
            postcard::from_bytes::<CompactString>(&encoded).expect("decodes"),
            name
        );
        assert_eq!(format!("{name:?} {name}"), format!("{text:?} {text}"));
    }
    /// `Constant` as it was declared with a vector.
    #[derive(Debug, Serialize)]
    enum OldConstant {
        #[allow(dead_code)]
        Number(f64),
        String(Vec<u16>),
    }
}

/// A verified program's code is every function's, in order, with each jump target and
/// `try` handler moved by its function's start.
#[test]
fn verified_code_is_all_functions_relocated() {
    let f0 = function(&[Op::LoadUndef { dst: Dst(0) }, Op::Return { src: Src(0) }]);
    let f1 = function(&[
        Op::TryEnter { handler: Target(4) },
        Op::JumpIfNullish {
            src: Src(0),
            target: Target(3),
        },
        Op::JumpIfLt {
            a: Src(0),
            b: Src(1),
            target: Target24::new(3),
        },
        Op::TryExit {},
        Op::Return { src: Src(0) },
    ]);
    let (c0, c1) = (f0.code.clone(), f1.code.clone());
    let v = program_of(vec![f0, f1]).verify().unwrap();
    let start = c0.len() as u32;
    assert_eq!(
        v.entries(),
        &[
            Entry {
                start: 0,
                nregs: 2,
                small: true,
                unary: false
            },
            Entry {
                start,
                nregs: 2,
                small: true,
                unary: false
            }
        ]
    );
    assert_eq!(&v.code()[..c0.len()], &c0[..]);
    let moved: Vec<Op> = c1
        .iter()
        .map(|&op| {
            let mut op = op;
            op.map_target(|t| t + start);
            op
        })
        .collect();
    assert_eq!(&v.code()[c0.len()..], &moved[..]);
    assert_ne!(moved, c1);
    assert_eq!(v.local_pc(1, start + 3), 3);
    assert_eq!(v.flat_pc(1, 3), start + 3);
}

/// The last handle of a verified program gives the program back, exactly as it was; a
/// handle while another one exists does not, and the other still reads it.
#[test]
fn only_the_last_handle_gives_the_program_back() {
    let one = || {
        program_of(vec![function(&[
            Op::LoadUndef { dst: Dst(0) },
            Op::Return { src: Src(0) },
        ])])
    };
    let v = one().verify().unwrap();
    let held = v.clone();
    let v = v.try_into_program().unwrap_err();
    drop(v);
    assert_eq!(held.code(), one().verify().unwrap().code());
    assert_eq!(held.try_into_program().unwrap(), one());
}

/// A program whose functions hold more than [`MAX_CODE_LEN`] instructions in all is refused
/// (its targets in the one array of all its code would not fit the 24-bit ones).
#[test]
fn too_much_code_in_all_is_refused() {
    let half = MAX_CODE_LEN / 2;
    let long = |n: usize| Function {
        name: CompactString::default(),
        params: Vec::new(),
        nregs: 1,
        code: vec![Op::LoadUndef { dst: Dst(0) }; n],
    };
    let e = program_of(vec![long(half), long(half + 1)])
        .verify()
        .unwrap_err();
    assert!(
        matches!(&e, LoadError::Program(m) if m.contains("instructions in all")),
        "{e}"
    );
}

/// The verifier's inline operand check agrees with the full one on every instruction the
/// decoder can produce from random bytes, against tables of several sizes.
#[test]
fn inline_operand_check_matches_the_full_one() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let program = |nconst: usize, nfuncs: usize, natoms: usize| Program {
        functions: (0..nfuncs.max(1))
            .map(|_| Function {
                name: CompactString::default(),
                params: Vec::new(),
                nregs: 0,
                code: Vec::new(),
            })
            .collect(),
        constants: (0..nconst)
            .map(|k| {
                if k % 3 == 0 {
                    Constant::Number(k as f64)
                } else {
                    Constant::String(vec![b'a' as u16; k % 5].into())
                }
            })
            .collect(),
        atoms: (0..natoms).map(|a| a.to_string()).collect(),
        entry: 0,
        debug: None,
        signature: None,
    };
    let programs = [program(0, 1, 0), program(7, 3, 2), program(300, 20, 5)];
    let mut checked = 0;
    for _ in 0..200_000 {
        let mut bytes = [0u8; 16];
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&next().to_le_bytes()[..chunk.len()]);
        }
        // small operand values, so that both verdicts occur
        for b in bytes.iter_mut().skip(1) {
            if *b & 0x80 != 0 {
                *b &= 0x0f;
            }
        }
        let Ok((op, _)) = Op::decode(&bytes) else {
            continue;
        };
        let r = next();
        let p = &programs[(r % 3) as usize];
        let nregs = (r >> 8) as u16 % 40;
        let len = (r >> 24) as usize % 40;
        assert_eq!(
            p.inspect(&op, nregs, len).fit,
            p.check_operands(&op, nregs, len).is_ok(),
            "{op:?} nregs {nregs} len {len}"
        );
        checked += 1;
    }
    assert!(checked > 10_000);
}

/// TEST-ONLY REFERENCE: the per-function check as it was before the one-pass verifier
/// (commit 1fe75a6: an operand and arity pass that marks block leaders and `Catch` slots,
/// the stray-`Catch` check, then a second pass over the charges), kept to compare the
/// verifier's verdicts against. Not used outside the tests.
fn reference_verify_function(p: &Program, f: &Function) -> Result<(), (usize, CodeFault)> {
    let code = &f.code;
    match code.last() {
        None => return Err((0, CodeFault::FallsOffEnd)),
        Some(op) if !op.is_terminator() => return Err((code.len() - 1, CodeFault::FallsOffEnd)),
        _ => {}
    }
    let nregs = f.nregs;
    const LEADER: u8 = 1;
    const HANDLER: u8 = 2;
    let mut marks = vec![0u8; code.len()];
    marks[0] = LEADER;
    let mut any_catch = false;
    for (pc, op) in code.iter().enumerate() {
        p.check_operands(op, nregs, code.len())
            .map_err(|fault| (pc, fault))?;
        match *op {
            Op::CallNative { native, argc, .. } => {
                if let Some(n) = NativeId::from_u16(native.0) {
                    let (min, max) = n.arity();
                    if argc.0 < min || argc.0 > max {
                        return Err((
                            pc,
                            CodeFault::NativeArity {
                                name: n.js_name(),
                                count: argc.0,
                                min,
                                max,
                            },
                        ));
                    }
                }
            }
            Op::Call { func, argc, .. } => {
                let expected = p.functions[func.0 as usize].params.len();
                if argc.0 as usize != expected {
                    return Err((
                        pc,
                        CodeFault::CallArity {
                            given: argc.0,
                            expected,
                        },
                    ));
                }
            }
            Op::TryEnter { handler } => {
                if let Some(slot) = marks.get_mut(handler.0 as usize + 1) {
                    *slot |= HANDLER;
                }
            }
            Op::Catch { .. } => any_catch = true,
            _ => {}
        }
        if let Some(t) = op.jump_target() {
            if let Some(slot) = marks.get_mut(t as usize) {
                *slot |= LEADER;
            }
        }
        if op.ends_block() {
            if let Some(slot) = marks.get_mut(pc + 1) {
                *slot |= LEADER;
            }
        }
    }
    if any_catch {
        for (pc, op) in code.iter().enumerate() {
            if matches!(op, Op::Catch { .. }) && marks[pc] & HANDLER == 0 {
                return Err((pc, CodeFault::StrayCatch));
            }
        }
    }
    let mut wrong_amount = None;
    let mut open: Option<(usize, u32, u32)> = None;
    for (pc, op) in code.iter().enumerate() {
        if let Op::Charge { amount } = *op {
            if let Some((at, amount, sum)) = open {
                if amount != sum && wrong_amount.is_none() {
                    wrong_amount = Some((at, CodeFault::Charge { expected: sum }));
                }
            }
            open = Some((pc, amount.0, 0));
            continue;
        }
        if marks[pc] & LEADER != 0 {
            return Err((pc, CodeFault::Charge { expected: 0 }));
        }
        match &mut open {
            Some((_, _, sum)) => *sum += op.cost(),
            None => {
                if wrong_amount.is_none() {
                    wrong_amount = Some((pc, CodeFault::StrayCharge));
                }
            }
        }
    }
    if let Some((at, amount, sum)) = open {
        if amount != sum && wrong_amount.is_none() {
            wrong_amount = Some((at, CodeFault::Charge { expected: sum }));
        }
    }
    match wrong_amount {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The one-pass verifier gives every function the verdict of the reference (the verifier
/// before it, [`reference_verify_function`]) — the same fault at the same pc, or none — on
/// random functions: charged ones (mostly valid) and then broken by a few edits (an
/// operand, a target, a charge amount, an instruction moved, dropped or added, a `try`
/// piece), with a fixed seed.
#[test]
fn verdicts_match_the_reference_verifier() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let below = |n: usize, next: &mut dyn FnMut() -> u64| (next() % n.max(1) as u64) as usize;
    let random_op = |next: &mut dyn FnMut() -> u64| loop {
        let mut bytes = [0u8; 16];
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&next().to_le_bytes());
        }
        // small operands (most bytes 0), so that most fit
        for b in bytes.iter_mut().skip(1) {
            *b = if next().is_multiple_of(4) {
                *b & 0x07
            } else {
                0
            };
        }
        if let Ok((op, _)) = Op::decode(&bytes) {
            return op;
        }
    };
    let mut verdicts = std::collections::BTreeMap::<String, usize>::new();
    for round in 0..20_000 {
        let nfuncs = 1 + below(8, &mut next);
        let mut functions = Vec::new();
        for _ in 0..nfuncs {
            let nregs = below(9, &mut next) as u16;
            let len = 1 + below(40, &mut next);
            let mut code: Vec<Op> = (0..len)
                .map(|_| random_op(&mut next))
                .filter(|op| !matches!(op, Op::Charge { .. }))
                .collect();
            code.push(Op::Return { src: Src(0) });
            let n = code.len() as u32;
            for op in &mut code {
                op.map_registers(&|r| r % nregs.max(1));
                op.map_target(|t| t % n);
            }
            let mut code = insert_charges(&code, &vec![(); code.len()]).0;
            for _ in 0..below(4, &mut next) {
                let len = code.len();
                if len == 0 {
                    break;
                }
                let pc = below(len, &mut next);
                match below(7, &mut next) {
                    0 => code[pc] = random_op(&mut next),
                    1 => {
                        let t = below(len + 2, &mut next) as u32;
                        code[pc].map_target(|_| t);
                    }
                    2 => {
                        if let Op::Charge { amount } = &mut code[pc] {
                            amount.0 = amount.0.wrapping_add(100);
                        }
                    }
                    3 => code.swap(pc, below(len, &mut next)),
                    4 => {
                        code.remove(pc);
                    }
                    5 => code.insert(pc, random_op(&mut next)),
                    _ => {
                        let op = match below(3, &mut next) {
                            0 => Op::Catch { dst: Dst(0) },
                            1 => Op::TryEnter {
                                handler: Target(below(len, &mut next) as u32),
                            },
                            _ => Op::Charge {
                                amount: Imm(100 * below(4, &mut next) as u32),
                            },
                        };
                        code.insert(pc, op);
                    }
                }
            }
            functions.push(Function {
                name: CompactString::default(),
                params: vec![CompactString::default(); below(3, &mut next).min(nregs as usize)],
                nregs,
                code,
            });
        }
        let mut p = program_of(functions);
        p.constants = (0..4 + below(5, &mut next))
            .map(|k| {
                if k % 4 != 3 {
                    Constant::String(Vec::new().into())
                } else {
                    Constant::Number(0.0)
                }
            })
            .collect();
        p.atoms = (0..4 + below(5, &mut next))
            .map(|a| a.to_string())
            .collect();
        for f in &p.functions {
            let want = reference_verify_function(&p, f);
            let got = p.verify_function(f);
            assert_eq!(got, want, "round {round}: {:?}", f.code);
            let name = match &got {
                Ok(()) => "ok".to_string(),
                Err((_, fault)) => format!("{fault:?}")
                    .split([' ', '('])
                    .next()
                    .unwrap()
                    .into(),
            };
            *verdicts.entry(name).or_default() += 1;
        }
    }
    // both verdicts, and the block faults, occur
    for kind in ["ok", "Charge", "StrayCatch", "Register", "Target"] {
        assert!(
            verdicts.get(kind).copied().unwrap_or(0) > 20,
            "{verdicts:?}"
        );
    }
}
