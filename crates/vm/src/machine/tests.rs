//! Op families on hand-built programs: each program is written instruction by instruction,
//! charged by `insert_charges`, verified, and run; the result and the fuel it used are checked
//! (fuel: the sum of the costs of the instructions run, as the table declares them).

use ajs_bytecode::isa::*;
use ajs_bytecode::program::CodeFault;
use ajs_bytecode::{Constant, Function, LoadError, Program, StrUnits};

use crate::{ErrorKind, JsValue, Step, Vm, VmOptions};

/// A function of `params` parameters and `nregs` registers running `code` (charged here).
fn func(name: &str, params: usize, nregs: u16, code: &[Op]) -> Function {
    let (code, _) = insert_charges(code, &vec![(); code.len()]);
    Function {
        name: name.into(),
        params: (0..params).map(|i| format!("p{i}").into()).collect(),
        nregs,
        code,
    }
}

fn program(functions: Vec<Function>, constants: Vec<Constant>) -> Program {
    Program {
        functions,
        constants,
        atoms: vec![],
        entry: 0,
        debug: None,
        signature: None,
    }
}

fn string(s: &str) -> Constant {
    Constant::String(s.encode_utf16().collect::<StrUnits>())
}

fn num(n: f64) -> JsValue {
    JsValue::Number(n)
}

/// Runs `p` with `args` to its end: the step it ended with and the milli-fuel it used.
fn run(p: Program, args: &[JsValue]) -> (Step, u64) {
    let p = p.verify().expect("the hand-built program verifies");
    let mut vm = Vm::new(p, args, VmOptions::default()).expect("the run starts");
    let step = vm.run(u64::MAX);
    (step, vm.fuel_used_milli())
}

/// The value `p` returns, and the fuel it used.
fn value(p: Program, args: &[JsValue]) -> (JsValue, u64) {
    match run(p, args) {
        (Step::Done(v), fuel) => (v, fuel),
        (other, _) => panic!("expected a result, got {other:?}"),
    }
}

/// An instruction of a family, from its operands (each form takes those it has).
type Form = fn(Dst, Src, Src, Const, Int) -> Op;
/// The reference semantics of an arithmetic operator.
type Arith = fn(f64, f64) -> f64;
/// The reference semantics of a comparison.
type Compare = fn(f64, f64) -> bool;

/// The cost of `n` plain instructions.
fn plain(n: u64) -> u64 {
    n * u64::from(BASE)
}

// ---- arithmetic ----

/// Every arithmetic form (register, constant and immediate right operand) on numbers, inline,
/// and on a string and a number, out of line: the same result as JavaScript's, one
/// instruction's fuel each.
#[test]
fn arithmetic_forms_compute_as_javascript() {
    let forms: [(&str, Form, Arith); 15] = [
        (
            "Add",
            |d, a, b, _, _| Op::Add { dst: d, a, b },
            |x, y| x + y,
        ),
        (
            "Sub",
            |d, a, b, _, _| Op::Sub { dst: d, a, b },
            |x, y| x - y,
        ),
        (
            "Mul",
            |d, a, b, _, _| Op::Mul { dst: d, a, b },
            |x, y| x * y,
        ),
        (
            "Div",
            |d, a, b, _, _| Op::Div { dst: d, a, b },
            |x, y| x / y,
        ),
        (
            "Mod",
            |d, a, b, _, _| Op::Mod { dst: d, a, b },
            |x, y| x % y,
        ),
        ("Pow", |d, a, b, _, _| Op::Pow { dst: d, a, b }, f64::powf),
        (
            "AddK",
            |d, a, _, k, _| Op::AddK { dst: d, a, k },
            |x, y| x + y,
        ),
        (
            "SubK",
            |d, a, _, k, _| Op::SubK { dst: d, a, k },
            |x, y| x - y,
        ),
        (
            "MulK",
            |d, a, _, k, _| Op::MulK { dst: d, a, k },
            |x, y| x * y,
        ),
        (
            "DivK",
            |d, a, _, k, _| Op::DivK { dst: d, a, k },
            |x, y| x / y,
        ),
        (
            "ModK",
            |d, a, _, k, _| Op::ModK { dst: d, a, k },
            |x, y| x % y,
        ),
        (
            "AddI",
            |d, a, _, _, i| Op::AddI { dst: d, a, i },
            |x, y| x + y,
        ),
        (
            "SubI",
            |d, a, _, _, i| Op::SubI { dst: d, a, i },
            |x, y| x - y,
        ),
        (
            "MulI",
            |d, a, _, _, i| Op::MulI { dst: d, a, i },
            |x, y| x * y,
        ),
        (
            "ModI",
            |d, a, _, _, i| Op::ModI { dst: d, a, i },
            |x, y| x % y,
        ),
    ];
    for (name, form, want) in forms {
        for (x, y) in [(7.0, 2.0), (-7.5, 3.0), (5.0, -2.0), (0.0, 4.0), (6.0, 0.0)] {
            let op = form(Dst(2), Src(0), Src(1), Const(0), Int::of(y).unwrap());
            let p = program(
                vec![func("f", 2, 3, &[op, Op::Return { src: Src(2) }])],
                vec![Constant::Number(y)],
            );
            let (v, fuel) = value(p, &[num(x), num(y)]);
            let JsValue::Number(got) = v else {
                panic!("{name}({x}, {y}) gave {v:?}")
            };
            let w = want(x, y);
            assert!(
                got.to_bits() == w.to_bits() || (got.is_nan() && w.is_nan()),
                "{name}({x}, {y}) = {got}, want {w}"
            );
            assert_eq!(fuel, plain(2), "{name}: one block of two instructions");
        }
    }
    // the general case, out of line: `+` of a string concatenates, `-` converts
    let p = program(
        vec![func(
            "f",
            2,
            4,
            &[
                Op::Add {
                    dst: Dst(2),
                    a: Src(0),
                    b: Src(1),
                },
                Op::Sub {
                    dst: Dst(3),
                    a: Src(0),
                    b: Src(1),
                },
                Op::NewArray {
                    dst: Dst(2),
                    base: Base(2),
                    count: Count(2),
                },
                Op::Return { src: Src(2) },
            ],
        )],
        vec![],
    );
    let (v, _) = value(p, &[JsValue::String("12".into()), num(2.0)]);
    assert_eq!(
        v,
        JsValue::Array(vec![JsValue::String("122".into()), num(10.0)])
    );
}

/// A unary or arithmetic instruction on a value it cannot convert is a guest error a `try`
/// catches: its message reaches the `Catch` register.
#[test]
fn arithmetic_type_errors_are_caught_by_try() {
    let p = program(
        vec![func(
            "f",
            1,
            3,
            &[
                Op::TryEnter { handler: Target(5) },
                Op::NewObject { dst: Dst(1) },
                Op::Sub {
                    dst: Dst(2),
                    a: Src(0),
                    b: Src(1),
                },
                Op::TryExit {},
                Op::Return { src: Src(2) },
                Op::Catch { dst: Dst(2) },
                Op::Return { src: Src(2) },
            ],
        )],
        vec![],
    );
    let (v, _) = value(p, &[num(1.0)]);
    let JsValue::String(msg) = v else {
        panic!("the handler returns the message, got {v:?}")
    };
    assert!(!msg.is_empty());
}

// ---- compare and branch ----

/// The reference semantics of a comparison of two numbers.
fn compares(cmp: Cmp, x: f64, y: f64) -> bool {
    match cmp {
        Cmp::Lt => x < y,
        Cmp::Le => x <= y,
        Cmp::Gt => x > y,
        Cmp::Ge => x >= y,
        Cmp::StrictEq => x == y,
    }
}

/// Every fused compare-and-branch, by comparison, sense and right operand kind: 30 distinct
/// instructions.
fn every_fused_form() -> Vec<Fused> {
    let mut out = Vec::new();
    for cmp in [Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge, Cmp::StrictEq] {
        for when in [true, false] {
            for right in [
                Right::Reg(Src(1)),
                Right::Const(Const(0)),
                Right::Int(Int(0)),
            ] {
                out.push(Fused {
                    cmp,
                    when,
                    a: Src(0),
                    right,
                    target: Target24::new(3),
                });
            }
        }
    }
    out
}

/// `f(a, b)`: 1 when `fused` jumps on `a` against `b` (the constant or immediate is `y`),
/// else 0. Before charges: 0 the branch, 1..=2 the fall-through, 3..=4 the target.
fn branch_program(fused: Fused, y: f64) -> Program {
    let mut f = fused;
    if let Right::Int(_) = f.right {
        f.right = Right::Int(Int::of(y).expect("an integer immediate"));
    }
    let op = f.op();
    assert_eq!(op.fused(), Some(f), "{op:?} reads back as it was built");
    program(
        vec![func(
            "f",
            2,
            3,
            &[
                op,
                Op::LoadConst {
                    dst: Dst(2),
                    k: Const(1),
                },
                Op::Return { src: Src(2) },
                Op::LoadConst {
                    dst: Dst(2),
                    k: Const(2),
                },
                Op::Return { src: Src(2) },
            ],
        )],
        vec![
            Constant::Number(y),
            Constant::Number(0.0),
            Constant::Number(1.0),
        ],
    )
}

/// Every fused compare-and-branch form, with every operand kind, on numbers (inline), NaN and
/// strings (out of line): it jumps exactly when the comparison is its sense, and costs what
/// the two instructions it fuses cost.
#[test]
fn fused_compare_and_branch_forms_jump_as_their_comparison() {
    let forms = every_fused_form();
    let mut codes: Vec<u8> = forms.iter().map(|f| f.op().opcode()).collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), 30, "every form is its own instruction");
    for fused in forms {
        for (x, y) in [
            (1.0_f64, 2.0_f64),
            (2.0, 2.0),
            (3.0, 2.0),
            (-1.0, 0.0),
            (f64::NAN, 1.0),
        ] {
            if matches!(fused.right, Right::Int(_)) && y.is_nan() {
                continue;
            }
            let (v, fuel) = value(branch_program(fused, y), &[num(x), num(y)]);
            let jumped = compares(fused.cmp, x, y) == fused.when;
            let name = fused.op().name();
            assert_eq!(v, num(f64::from(u8::from(jumped))), "{name}({x}, {y})");
            assert_eq!(fuel, 2 * u64::from(BASE) + plain(2), "{name}({x}, {y})");
        }
        // two strings, compared out of line (the right operand a register only: a constant
        // here is a number)
        if let Right::Reg(_) = fused.right {
            let args = [JsValue::String("b".into()), JsValue::String("a".into())];
            let (v, _) = value(branch_program(fused, 0.0), &args);
            let jumped = compares(fused.cmp, 1.0, 0.0) == fused.when;
            assert_eq!(v, num(f64::from(u8::from(jumped))), "{:?}", fused.op());
        }
    }
}

/// Every comparison with a destination (register, constant and immediate forms) gives the
/// comparison's boolean, alone and when a conditional jump on its result follows (the pair
/// the dispatch loop takes in one step).
#[test]
fn comparisons_give_booleans_and_branch_on_them() {
    let forms: [(Form, Compare); 14] = [
        (|d, a, b, _, _| Op::Lt { dst: d, a, b }, |x, y| x < y),
        (|d, a, b, _, _| Op::Le { dst: d, a, b }, |x, y| x <= y),
        (|d, a, b, _, _| Op::Gt { dst: d, a, b }, |x, y| x > y),
        (|d, a, b, _, _| Op::Ge { dst: d, a, b }, |x, y| x >= y),
        (|d, a, b, _, _| Op::StrictEq { dst: d, a, b }, |x, y| x == y),
        (|d, a, b, _, _| Op::StrictNe { dst: d, a, b }, |x, y| x != y),
        (|d, a, _, k, _| Op::LtK { dst: d, a, k }, |x, y| x < y),
        (|d, a, _, k, _| Op::LeK { dst: d, a, k }, |x, y| x <= y),
        (|d, a, _, k, _| Op::GtK { dst: d, a, k }, |x, y| x > y),
        (|d, a, _, k, _| Op::GeK { dst: d, a, k }, |x, y| x >= y),
        (
            |d, a, _, k, _| Op::StrictEqK { dst: d, a, k },
            |x, y| x == y,
        ),
        (
            |d, a, _, k, _| Op::StrictNeK { dst: d, a, k },
            |x, y| x != y,
        ),
        (
            |d, a, _, _, i| Op::StrictEqI { dst: d, a, i },
            |x, y| x == y,
        ),
        (
            |d, a, _, _, i| Op::StrictNeI { dst: d, a, i },
            |x, y| x != y,
        ),
    ];
    for (form, want) in forms {
        for (x, y) in [(1.0, 2.0), (2.0, 2.0), (3.0, 2.0), (f64::NAN, 2.0)] {
            let op = form(Dst(2), Src(0), Src(1), Const(0), Int::of(y).unwrap());
            let consts = vec![
                Constant::Number(y),
                Constant::Number(0.0),
                Constant::Number(1.0),
            ];
            // alone: the boolean
            let p = program(
                vec![func("f", 2, 3, &[op, Op::Return { src: Src(2) }])],
                consts.clone(),
            );
            let (v, fuel) = value(p, &[num(x), num(y)]);
            assert_eq!(v, JsValue::Bool(want(x, y)), "{}({x}, {y})", op.name());
            assert_eq!(fuel, plain(2));
            // followed by a branch on it, each way
            for jump_if_true in [true, false] {
                let branch = if jump_if_true {
                    Op::JumpIfTrue {
                        cond: Src(2),
                        target: Target(5),
                    }
                } else {
                    Op::JumpIfFalse {
                        cond: Src(2),
                        target: Target(5),
                    }
                };
                let p = program(
                    vec![func(
                        "f",
                        2,
                        3,
                        &[
                            op,
                            branch,
                            Op::LoadConst {
                                dst: Dst(2),
                                k: Const(1),
                            },
                            Op::Return { src: Src(2) },
                            Op::Return { src: Src(2) },
                            Op::LoadConst {
                                dst: Dst(2),
                                k: Const(2),
                            },
                            Op::Return { src: Src(2) },
                        ],
                    )],
                    consts.clone(),
                );
                let (v, fuel) = value(p, &[num(x), num(y)]);
                let jumped = want(x, y) == jump_if_true;
                let name = op.name();
                assert_eq!(v, num(f64::from(u8::from(jumped))), "{name}({x}, {y})");
                assert_eq!(fuel, plain(4), "{name}({x}, {y}): two blocks of two");
            }
        }
    }
}

/// A loop counting down with a fused back-edge runs its body once per iteration and pays per
/// iteration; a budget too small ends it Out of Fuel, uncatchable.
#[test]
fn a_counted_loop_pays_per_iteration_and_stops_out_of_fuel() {
    // r0 = n; r1 = 0; loop: r1 += r0; r0 -= 1; if r0 > 0 goto loop; return r1
    let code = [
        Op::LoadConst {
            dst: Dst(1),
            k: Const(0),
        },
        Op::Add {
            dst: Dst(1),
            a: Src(1),
            b: Src(0),
        },
        Op::SubI {
            dst: Dst(0),
            a: Src(0),
            i: Int(1),
        },
        Op::JumpIfGtI {
            a: Src(0),
            i: Int(0),
            target: Target24::new(1),
        },
        Op::Return { src: Src(1) },
    ];
    let p = || program(vec![func("f", 1, 2, &code)], vec![Constant::Number(0.0)]);
    let (v, fuel) = value(p(), &[num(10.0)]);
    assert_eq!(v, num(55.0));
    // the first block, ten iterations of the loop block, the return block
    assert_eq!(
        fuel,
        plain(1) + 10 * (plain(2) + 2 * u64::from(BASE)) + plain(1)
    );
    let p = p().verify().unwrap();
    let opts = VmOptions {
        fuel: 1000,
        ..VmOptions::default()
    };
    let mut vm = Vm::new(p, &[num(1e9)], opts).unwrap();
    match vm.run(u64::MAX) {
        Step::Failed(e) => assert_eq!(e.kind, ErrorKind::OutOfFuel),
        other => panic!("expected Out of Fuel, got {other:?}"),
    }
    assert_eq!(vm.fuel_used_milli(), 1000);
}

// ---- calls and returns ----

/// `fn1(a) = a * 2`, `fn2(a, b) = a - b`, `fn3(a, b, c) = a + b + c` with a big frame: the
/// three call paths (one parameter, two, the general one) each pass their arguments in place
/// and return into the caller's register, the caller's registers below the call intact.
#[test]
fn calls_pass_arguments_and_return_into_the_caller() {
    let main = func(
        "main",
        0,
        8,
        &[
            Op::LoadConst {
                dst: Dst(0),
                k: Const(0),
            },
            Op::LoadConst {
                dst: Dst(1),
                k: Const(1),
            },
            Op::Move {
                dst: Dst(4),
                src: Src(0),
            },
            Op::Call {
                dst: Dst(2),
                func: Func(1),
                base: Base(4),
                argc: Count(1),
            },
            Op::Move {
                dst: Dst(4),
                src: Src(1),
            },
            Op::Move {
                dst: Dst(5),
                src: Src(0),
            },
            Op::Call {
                dst: Dst(3),
                func: Func(2),
                base: Base(4),
                argc: Count(2),
            },
            Op::Move {
                dst: Dst(4),
                src: Src(2),
            },
            Op::Move {
                dst: Dst(5),
                src: Src(3),
            },
            Op::Move {
                dst: Dst(6),
                src: Src(0),
            },
            Op::Call {
                dst: Dst(7),
                func: Func(3),
                base: Base(4),
                argc: Count(3),
            },
            // [r0, r1, fn1(r0), fn2(r1, r0), fn3(...)]
            Op::Move {
                dst: Dst(4),
                src: Src(7),
            },
            Op::NewArray {
                dst: Dst(0),
                base: Base(0),
                count: Count(5),
            },
            Op::Return { src: Src(0) },
        ],
    );
    let double = func(
        "double",
        1,
        2,
        &[
            Op::MulI {
                dst: Dst(1),
                a: Src(0),
                i: Int(2),
            },
            Op::Return { src: Src(1) },
        ],
    );
    let minus = func(
        "minus",
        2,
        3,
        &[
            Op::Sub {
                dst: Dst(2),
                a: Src(0),
                b: Src(1),
            },
            Op::Return { src: Src(2) },
        ],
    );
    let mut sum_code = vec![
        Op::Add {
            dst: Dst(3),
            a: Src(0),
            b: Src(1),
        },
        Op::Add {
            dst: Dst(3),
            a: Src(3),
            b: Src(2),
        },
    ];
    // registers past the window's fill, named so the frame may hold them: `undefined`
    sum_code.push(Op::StrictEqK {
        dst: Dst(11),
        a: Src(11),
        k: Const(2),
    });
    sum_code.push(Op::Return { src: Src(3) });
    let sum = func("sum", 3, 12, &sum_code);
    let p = program(
        vec![main, double, minus, sum],
        vec![
            Constant::Number(5.0),
            Constant::Number(7.0),
            Constant::Number(0.0),
        ],
    );
    let (v, fuel) = value(p, &[]);
    // fn1(5) = 10, fn2(7, 5) = 2, fn3(10, 2, 5) = 17
    assert_eq!(
        v,
        JsValue::Array(vec![num(5.0), num(7.0), num(10.0), num(2.0), num(17.0)])
    );
    // main's 14 instructions and the callees' 2 + 2 + 4, and the array's build and copy out
    // as a program doing only that pays them
    let array = func(
        "array",
        0,
        5,
        &[
            Op::NewArray {
                dst: Dst(0),
                base: Base(0),
                count: Count(5),
            },
            Op::Return { src: Src(0) },
        ],
    );
    let (_, array_fuel) = value(program(vec![array], vec![]), &[]);
    assert_eq!(fuel, plain(14 + 2 + 2 + 4) + (array_fuel - plain(2)));
}

/// A recursive function (`fib`) returns through every frame; unbounded recursion ends the run
/// with a call-depth error no `try` catches.
#[test]
fn recursion_returns_through_frames_and_is_bounded() {
    // fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
    let fib = |target_self: u16| {
        func(
            "fib",
            1,
            4,
            &[
                Op::JumpUnlessLtI {
                    a: Src(0),
                    i: Int(2),
                    target: Target24::new(2),
                },
                Op::Return { src: Src(0) },
                Op::SubI {
                    dst: Dst(2),
                    a: Src(0),
                    i: Int(1),
                },
                Op::Call {
                    dst: Dst(1),
                    func: Func(target_self),
                    base: Base(2),
                    argc: Count(1),
                },
                Op::SubI {
                    dst: Dst(2),
                    a: Src(0),
                    i: Int(2),
                },
                Op::Call {
                    dst: Dst(3),
                    func: Func(target_self),
                    base: Base(2),
                    argc: Count(1),
                },
                Op::Add {
                    dst: Dst(1),
                    a: Src(1),
                    b: Src(3),
                },
                Op::Return { src: Src(1) },
            ],
        )
    };
    let (v, _) = value(program(vec![fib(0)], vec![]), &[num(10.0)]);
    assert_eq!(v, num(55.0));
    // f(n) = f(n) inside a try: the depth error still ends the run
    let forever = func(
        "forever",
        1,
        3,
        &[
            Op::TryEnter { handler: Target(4) },
            Op::Move {
                dst: Dst(2),
                src: Src(0),
            },
            Op::Call {
                dst: Dst(1),
                func: Func(0),
                base: Base(2),
                argc: Count(1),
            },
            Op::Return { src: Src(1) },
            Op::Catch { dst: Dst(1) },
            Op::Return { src: Src(1) },
        ],
    );
    match run(program(vec![forever], vec![]), &[num(1.0)]).0 {
        Step::Failed(e) => {
            assert_eq!(e.kind, ErrorKind::CallDepth);
            assert!(e.message.contains("'forever'"), "{}", e.message);
        }
        other => panic!("expected a call-depth error, got {other:?}"),
    }
}

/// `Throw` in a callee unwinds to the caller's handler, which gets the message; with no
/// handler the run fails with it as a guest error.
#[test]
fn throw_unwinds_to_the_nearest_handler() {
    let thrower = func("thrower", 1, 1, &[Op::Throw { src: Src(0) }]);
    let caught = func(
        "main",
        1,
        3,
        &[
            Op::TryEnter { handler: Target(4) },
            Op::Move {
                dst: Dst(2),
                src: Src(0),
            },
            Op::Call {
                dst: Dst(1),
                func: Func(1),
                base: Base(2),
                argc: Count(1),
            },
            Op::Return { src: Src(1) },
            Op::Catch { dst: Dst(1) },
            Op::Return { src: Src(1) },
        ],
    );
    let boom = JsValue::String("boom".into());
    let (v, _) = value(
        program(vec![caught, thrower.clone()], vec![]),
        std::slice::from_ref(&boom),
    );
    assert_eq!(v, boom);
    match run(program(vec![thrower], vec![]), &[boom]).0 {
        Step::Failed(e) => {
            assert_eq!(e.kind, ErrorKind::Guest);
            assert_eq!(e.message, "boom");
        }
        other => panic!("expected the guest error, got {other:?}"),
    }
}

// ---- properties ----

/// Objects and arrays built, read and written through the property instructions.
#[test]
fn property_instructions_build_and_read_objects_and_arrays() {
    // o = { a: p0 }; o[p1] = 3; arr = [o.a, o[p1], o.missing, arr.length, arr[0], arr[9]]
    let code = [
        Op::NewObject { dst: Dst(2) },
        Op::InitProp {
            obj: Src(2),
            key: Key(0),
            val: Src(0),
        },
        Op::LoadConst {
            dst: Dst(3),
            k: Const(2),
        },
        Op::InitIndex {
            obj: Src(2),
            key: Src(1),
            val: Src(3),
        },
        Op::GetProp {
            dst: Dst(4),
            obj: Src(2),
            key: Key(0),
        },
        Op::GetIndex {
            dst: Dst(5),
            obj: Src(2),
            key: Src(1),
        },
        Op::GetProp {
            dst: Dst(6),
            obj: Src(2),
            key: Key(1),
        },
        Op::NewArray {
            dst: Dst(7),
            base: Base(4),
            count: Count(3),
        },
        Op::ArrayLen {
            dst: Dst(8),
            arr: Src(7),
            method: Key(0),
        },
        Op::LoadConst {
            dst: Dst(3),
            k: Const(3),
        },
        Op::GetIndex {
            dst: Dst(9),
            obj: Src(7),
            key: Src(3),
        },
        Op::LoadConst {
            dst: Dst(3),
            k: Const(4),
        },
        Op::GetIndex {
            dst: Dst(10),
            obj: Src(7),
            key: Src(3),
        },
        Op::ArrayAppend {
            arr: Src(7),
            base: Base(8),
            count: Count(3),
        },
        Op::Return { src: Src(7) },
    ];
    let p = program(
        vec![func("f", 2, 11, &code)],
        vec![
            string("a"),
            string("missing"),
            Constant::Number(3.0),
            Constant::Number(0.0),
            Constant::Number(9.0),
        ],
    );
    let (v, fuel) = value(
        p,
        &[JsValue::String("x".into()), JsValue::String("k".into())],
    );
    let x = JsValue::String("x".into());
    assert_eq!(
        v,
        JsValue::Array(vec![
            x.clone(),
            num(3.0),
            JsValue::Undefined,
            num(3.0),
            x,
            JsValue::Undefined,
        ])
    );
    // one block; the builtins' per-element charges come on top of the instructions'
    assert!(fuel >= plain(code.len() as u64), "{fuel}");
}

/// Reading a forbidden name is a guest error whatever the object; a member of `null` or
/// `undefined` reads as `undefined` (null-safe).
#[test]
fn forbidden_members_are_refused_and_nullish_reads_are_safe() {
    for name in ["__proto__", "constructor", "prototype"] {
        let p = program(
            vec![func(
                "f",
                0,
                2,
                &[
                    Op::NewObject { dst: Dst(0) },
                    Op::GetProp {
                        dst: Dst(1),
                        obj: Src(0),
                        key: Key(0),
                    },
                    Op::Return { src: Src(1) },
                ],
            )],
            vec![string(name)],
        );
        match run(p, &[]).0 {
            Step::Failed(e) => {
                assert_eq!(e.kind, ErrorKind::Guest);
                assert!(e.message.contains(name), "{}", e.message);
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
    }
    let p = program(
        vec![func(
            "f",
            0,
            2,
            &[
                Op::LoadNull { dst: Dst(0) },
                Op::GetProp {
                    dst: Dst(1),
                    obj: Src(0),
                    key: Key(0),
                },
                Op::Return { src: Src(1) },
            ],
        )],
        vec![string("a")],
    );
    assert_eq!(value(p, &[]).0, JsValue::Undefined);
}

// ---- the verifier's refusals ----

/// The fault the verifier reports for a one-function program running `code` (charged).
fn refusal(code: &[Op], nregs: u16, constants: Vec<Constant>) -> CodeFault {
    match program(vec![func("f", 0, nregs, code)], constants).verify() {
        Err(LoadError::Code { fault, .. }) => fault,
        other => panic!("expected a code fault, got {other:?}"),
    }
}

/// Every kind of bad operand is refused before anything runs: a register past the frame, a
/// constant or key that does not exist, a key that is not a string, a target past the code, a
/// function that does not exist or a call with the wrong argument count, code that falls off
/// its end, and a block that does not pay for itself.
#[test]
fn bad_operands_are_refused_by_the_verifier() {
    let ret = Op::Return { src: Src(0) };
    let load = |dst, k| Op::LoadConst {
        dst: Dst(dst),
        k: Const(k),
    };
    assert_eq!(
        refusal(&[load(3, 0), ret], 2, vec![Constant::Number(1.0)]),
        CodeFault::Register { reg: 3, nregs: 2 }
    );
    assert_eq!(
        refusal(&[load(0, 1), ret], 1, vec![]),
        CodeFault::Constant(1)
    );
    let get = Op::GetProp {
        dst: Dst(0),
        obj: Src(0),
        key: Key(0),
    };
    assert_eq!(
        refusal(&[get, ret], 1, vec![Constant::Number(1.0)]),
        CodeFault::KeyNotString(0)
    );
    assert_eq!(refusal(&[get, ret], 1, vec![]), CodeFault::Constant(0));
    // (targets are checked after the charges are inserted: one past the code of three)
    let jump = Op::JumpIfLtI {
        a: Src(0),
        i: Int(1),
        target: Target24::new(9),
    };
    assert_eq!(refusal(&[jump, ret], 1, vec![]), CodeFault::Target(9));
    let call = |func, argc| Op::Call {
        dst: Dst(0),
        func: Func(func),
        base: Base(0),
        argc: Count(argc),
    };
    assert_eq!(refusal(&[call(4, 0), ret], 1, vec![]), CodeFault::Func(4));
    assert_eq!(
        refusal(&[call(0, 1), ret], 1, vec![]),
        CodeFault::CallArity {
            given: 1,
            expected: 0
        }
    );
    assert_eq!(
        refusal(&[Op::LoadUndef { dst: Dst(0) }], 1, vec![]),
        CodeFault::FallsOffEnd
    );
    // a block whose charge is not the sum of its costs
    let mut f = func("f", 0, 1, &[Op::LoadUndef { dst: Dst(0) }, ret]);
    f.code[0] = Op::Charge { amount: Imm(1) };
    match program(vec![f], vec![]).verify() {
        Err(LoadError::Code { fault, pc, .. }) => {
            assert_eq!(pc, 0);
            assert_eq!(fault, CodeFault::Charge { expected: 2 * BASE });
        }
        other => panic!("expected a charge fault, got {other:?}"),
    }
}
