//! Unit tests of each analysis, on hand-built bytecode (the behaviour tests compile source:
//! tests/manifest.rs).

use ajs_bytecode::isa::*;
use ajs_bytecode::{widen, Constant, Function, Program};

use super::*;

fn s(text: &str) -> Constant {
    Constant::String(widen(text.as_bytes()))
}

fn program(code: &[Op], constants: Vec<Constant>, atoms: &[&str], nregs: u16) -> Program {
    let (code, _) = insert_charges(code, &vec![(); code.len()]);
    Program {
        functions: vec![Function {
            name: "main".into(),
            params: vec!["p".into()],
            nregs,
            code,
        }],
        constants,
        atoms: atoms.iter().map(|a| a.to_string()).collect(),
        entry: 0,
        debug: None,
        signature: None,
    }
}

/// `httpFetch({ url: 'https://api.example.com/items?page=' + p })`, then its result returned.
fn fetch_prefix() -> Program {
    let code = [
        Op::LoadConst {
            dst: Dst(1),
            k: Const(0),
        },
        Op::Add {
            dst: Dst(2),
            a: Src(1),
            b: Src(0),
        },
        Op::NewObject { dst: Dst(3) },
        Op::InitProp {
            obj: Src(3),
            key: Key(1),
            val: Src(2),
        },
        Op::CallAtom {
            dst: Dst(4),
            atom: Atom(0),
            arg: Src(3),
        },
        Op::Return { src: Src(4) },
    ];
    program(
        &code,
        vec![s("https://api.example.com/items?page="), s("url")],
        &["httpFetch"],
        5,
    )
}

#[test]
fn a_literal_start_is_a_url_prefix() {
    let m = Manifest::of(&fetch_prefix().verify().unwrap());
    let fetch = &m.atoms["httpFetch"];
    assert_eq!(fetch.max_calls, Some(1));
    let site = &fetch.sites[0];
    assert_eq!(
        site.url,
        Some(UrlInfo {
            url: "https://api.example.com/items?page=".into(),
            exact: false
        })
    );
    assert!(!site.in_loop && !site.in_callback);
    assert!(m.output.result["httpFetch"]);
    assert!(m.fuel.max.is_some());
}

#[test]
fn an_exact_url_and_method_are_known() {
    let code = [
        Op::NewObject { dst: Dst(1) },
        Op::LoadConst {
            dst: Dst(2),
            k: Const(0),
        },
        Op::InitProp {
            obj: Src(1),
            key: Key(1),
            val: Src(2),
        },
        Op::LoadConst {
            dst: Dst(2),
            k: Const(2),
        },
        Op::InitProp {
            obj: Src(1),
            key: Key(3),
            val: Src(2),
        },
        Op::CallAtom {
            dst: Dst(2),
            atom: Atom(0),
            arg: Src(1),
        },
        Op::LoadNull { dst: Dst(3) },
        Op::Return { src: Src(3) },
    ];
    let p = program(
        &code,
        vec![s("https://x.test/a"), s("url"), s("POST"), s("method")],
        &["httpFetch"],
        4,
    );
    let m = Manifest::of(&p.verify().unwrap());
    let site = &m.atoms["httpFetch"].sites[0];
    assert_eq!(
        site.url,
        Some(UrlInfo {
            url: "https://x.test/a".into(),
            exact: true
        })
    );
    assert_eq!(site.method.as_deref(), Some("POST"));
    // the result is null: nothing fetched reaches it
    assert!(!m.output.result["httpFetch"]);
}

#[test]
fn a_call_in_a_loop_is_unbounded() {
    // while (p < 3) { httpFetch(p); p = p + 1 }
    let code = [
        Op::JumpUnlessLtI {
            a: Src(0),
            i: Int(3),
            target: Target24::new(4),
        },
        Op::CallAtom {
            dst: Dst(1),
            atom: Atom(0),
            arg: Src(0),
        },
        Op::AddI {
            dst: Dst(0),
            a: Src(0),
            i: Int(1),
        },
        Op::Jump { target: Target(0) },
        Op::Return { src: Src(0) },
    ];
    let p = program(&code, vec![], &["httpFetch"], 2);
    let m = Manifest::of(&p.verify().unwrap());
    let fetch = &m.atoms["httpFetch"];
    assert_eq!(fetch.max_calls, None);
    assert!(fetch.sites[0].in_loop);
    assert_eq!(m.fuel.max, None);
    assert_eq!(m.fuel.loops.len(), 1);
}

#[test]
fn exclusive_branches_count_the_worst_path() {
    // if (p) a(p) else { a(p); a(p) }
    let code = [
        Op::JumpIfFalse {
            cond: Src(0),
            target: Target(3),
        },
        Op::CallAtom {
            dst: Dst(1),
            atom: Atom(0),
            arg: Src(0),
        },
        Op::Jump { target: Target(5) },
        Op::CallAtom {
            dst: Dst(1),
            atom: Atom(0),
            arg: Src(0),
        },
        Op::CallAtom {
            dst: Dst(1),
            atom: Atom(0),
            arg: Src(0),
        },
        Op::Return { src: Src(1) },
    ];
    let p = program(&code, vec![], &["a"], 2);
    let m = Manifest::of(&p.verify().unwrap());
    assert_eq!(m.atoms["a"].max_calls, Some(2));
    // three blocks' instructions at most plus two calls at the host atom price
    let max = m.fuel.max.unwrap();
    assert!(max >= 2, "{max}");
}

#[test]
fn fetched_text_reaching_a_prompt_is_a_flow() {
    let code = [
        Op::CallAtom {
            dst: Dst(1),
            atom: Atom(0),
            arg: Src(0),
        },
        Op::GetProp {
            dst: Dst(2),
            obj: Src(1),
            key: Key(0),
        },
        Op::NewObject { dst: Dst(3) },
        Op::InitProp {
            obj: Src(3),
            key: Key(1),
            val: Src(2),
        },
        Op::CallAtom {
            dst: Dst(4),
            atom: Atom(1),
            arg: Src(3),
        },
        Op::LoadConst {
            dst: Dst(5),
            k: Const(0),
        },
        Op::Return { src: Src(5) },
    ];
    let p = program(
        &code,
        vec![s("body"), s("prompt")],
        &["httpFetch", "llmPredict"],
        6,
    );
    let m = Manifest::of(&p.verify().unwrap());
    assert_eq!(
        m.output.flows,
        vec![super::Flow {
            from: "httpFetch".into(),
            to: "llmPredict".into()
        }]
    );
    assert!(!m.output.result["httpFetch"]);
    assert!(!m.output.result["llmPredict"]);
    assert_eq!(m.atoms["llmPredict"].sites[0].response_format, Some(false));
}

#[test]
fn recursion_is_named_and_unbounded() {
    let (f0, _) = insert_charges(
        &[
            Op::Call {
                dst: Dst(0),
                func: Func(0),
                base: Base(0),
                argc: Count(1),
            },
            Op::Return { src: Src(0) },
        ],
        &[(); 2],
    );
    let p = Program {
        functions: vec![Function {
            name: "again".into(),
            params: vec!["n".into()],
            nregs: 1,
            code: f0,
        }],
        constants: vec![],
        atoms: vec![],
        entry: 0,
        debug: None,
        signature: None,
    };
    let m = Manifest::of(&p.verify().unwrap());
    assert_eq!(m.recursion, vec!["again".to_string()]);
    assert_eq!(m.fuel.max, None);
}

#[test]
fn a_repeat_count_not_known_is_unbounded_but_a_literal_one_is_not() {
    let code = |k: Op| {
        [
            Op::LoadConst {
                dst: Dst(1),
                k: Const(0),
            },
            k,
            Op::CallNative {
                dst: Dst(3),
                native: Native(ajs_bytecode::NativeId::Repeat.to_u16()),
                base: Base(1),
                argc: Count(2),
            },
            Op::Return { src: Src(3) },
        ]
    };
    let unknown = program(
        &code(Op::Move {
            dst: Dst(2),
            src: Src(0),
        }),
        vec![s("ab"), Constant::Number(3.0)],
        &[],
        4,
    );
    let m = Manifest::of(&unknown.verify().unwrap());
    assert_eq!(m.fuel.max, None);
    assert_eq!(m.fuel.unbounded.len(), 1, "{:?}", m.fuel);
    let known = program(
        &code(Op::LoadConst {
            dst: Dst(2),
            k: Const(1),
        }),
        vec![s("ab"), Constant::Number(3.0)],
        &[],
        4,
    );
    let m = Manifest::of(&known.verify().unwrap());
    assert!(m.fuel.max.is_some(), "{:?}", m.fuel);
}

#[test]
fn the_same_program_gives_the_same_bytes() {
    let p = fetch_prefix().verify().unwrap();
    assert_eq!(Manifest::of(&p).to_bytes(), Manifest::of(&p).to_bytes());
    let back: Manifest = serde_json::from_slice(&Manifest::of(&p).to_bytes()).unwrap();
    assert_eq!(back, Manifest::of(&p));
}

/// A program past `MAX_ANALYSIS_CELLS` gets the conservative answers (no bound, every atom's
/// data everywhere) rather than a long analysis at every load.
#[test]
fn a_program_too_large_to_analyze_is_answered_conservatively() {
    let mut code = vec![Op::LoadNull { dst: Dst(59_999) }];
    for _ in 0..100 {
        let next = code.len() as u32 + 2;
        code.push(Op::JumpIfFalse {
            cond: Src(0),
            target: Target(next),
        });
        code.push(Op::CallAtom {
            dst: Dst(1),
            atom: Atom(0),
            arg: Src(0),
        });
    }
    code.push(Op::Return { src: Src(0) });
    let p = program(&code, vec![], &["a"], 60_000).verify().unwrap();
    let start = std::time::Instant::now();
    let m = Manifest::of(&p);
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!(m.fuel.max, None);
    assert!(
        m.fuel.unbounded[0].contains("MAX_ANALYSIS_CELLS"),
        "{:?}",
        m.fuel
    );
    assert!(m.output.result["a"]);
    assert_eq!(m.atoms["a"].max_calls, Some(100));
}

/// `%replaceMatches` searches with its pattern as `.search` does (and builds the matches
/// besides): its bound is at least a search's, whatever bytecode calls it.
#[test]
fn replace_matches_is_priced_at_least_as_a_regex_search() {
    use ajs_bytecode::NativeId;
    let code = |id: NativeId, argc: u8| {
        [
            Op::LoadConst {
                dst: Dst(1),
                k: Const(0),
            },
            Op::LoadConst {
                dst: Dst(2),
                k: Const(1),
            },
            Op::CallNative {
                dst: Dst(3),
                native: Native(NativeId::RegexNew.to_u16()),
                base: Base(1),
                argc: Count(2),
            },
            Op::Move {
                dst: Dst(4),
                src: Src(0),
            },
            Op::Move {
                dst: Dst(5),
                src: Src(3),
            },
            Op::LoadTrue { dst: Dst(6) },
            Op::CallNative {
                dst: Dst(7),
                native: Native(id.to_u16()),
                base: Base(4),
                argc: Count(argc),
            },
            Op::Return { src: Src(7) },
        ]
    };
    let bound = |id: NativeId, argc: u8| {
        let p = program(&code(id, argc), vec![s("(a|b)*c"), s("g")], &[], 8);
        Manifest::of(&p.verify().unwrap()).fuel.max.unwrap()
    };
    let search = bound(NativeId::Search, 2);
    let matches = bound(NativeId::ReplaceMatches, 3);
    assert!(matches >= search, "{matches} < {search}");
}
