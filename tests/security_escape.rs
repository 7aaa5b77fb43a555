//! Reaches nothing not handed to it: prototype names, host globals, the method allowlist, string
//! literals that equal variable names (reference §9, scenarios 19–27).

use crate::adversarial_common as adv;

use adv::{eval, failed, fuel, is_security_error, ok_json};
use ajs::ErrorKind;
use serde_json::json;

const FORBIDDEN: &[&str] = &["constructor", "__proto__", "prototype"];

fn security(code: &str, ctx: serde_json::Value) {
    let out = eval(code, ctx, fuel(1000.0));
    let (m, k) = failed(&out, code);
    // `Math.constructor` and the like are refused at compile time, with their own message.
    assert!(
        is_security_error(&m) || (k == ErrorKind::Input && out.fuel_used == 0.0),
        "`{code}`: {m}"
    );
}

/// Scenario 19: member reads, static, bracketed, and computed at run time.
#[test]
fn prototype_names_are_forbidden_on_every_member_path() {
    let ctx = json!({ "o": { "a": 1 }, "xs": [1, 2], "s": "str", "k": "constructor" });
    for name in FORBIDDEN {
        let half = name.len() / 2;
        let (l, r) = name.split_at(half);
        for code in [
            format!("o.{name}"),
            format!("o['{name}']"),
            format!("o[\"{name}\"]"),
            format!("o['{l}' + '{r}']"),
            format!("o[['{l}', '{r}'].join('')]"),
            format!("o[`{l}${{'{r}'}}`]"),
            format!("xs.{name}"),
            format!("xs['{l}' + '{r}']"),
            format!("s.{name}"),
            format!("s['{l}' + '{r}']"),
            format!("(1).{name}"),
            format!("true.{name}"),
            format!("Math.{name}"),
            format!("JSON.{name}"),
            format!("o?.{name}"),
            format!("o.a.{name}"),
            format!("'{name}'.split('').reverse().reverse().join('') == '{name}' ? o['{l}'.concat('{r}')] : 0"),
        ] {
            security(&code, ctx.clone());
        }
    }
    // A key from the context, built on the host side.
    security("o[k]", ctx.clone());
    // Inside a callback.
    security("xs.map(x => o['constr' + 'uctor'])", ctx.clone());
    // The same key through a member assignment is refused at compile time (decision 6).
    let out = eval(
        "let o2 = {}\no2['__proto__'] = 1\nreturn o2",
        json!({}),
        fuel(100.0),
    );
    failed(&out, "member assignment");
}

/// Scenario 19 ★ and the heap: the error is catchable, a guest cannot get anything else out.
#[test]
fn a_forbidden_read_is_a_catchable_error_value() {
    let out = eval(
        "try { return o['constr' + 'uctor'] } catch (e) { return 'caught: ' + e }",
        json!({ "o": {} }),
        fuel(100.0),
    );
    assert_eq!(
        ok_json(&out, "catch").unwrap(),
        json!("caught: Security Error: Access to 'constructor' is forbidden")
    );
}

/// Scenario 20: bindings named like prototype members are refused.
#[test]
fn bindings_named_like_prototype_members_are_refused() {
    for name in FORBIDDEN {
        for code in [
            format!("let {name} = 1\nreturn 1"),
            format!("const {name} = 1\nreturn 1"),
            format!("try {{ Error('x') }} catch ({name}) {{ return 1 }}\nreturn 2"),
            format!("return [1].map({name} => 1)"),
            format!("return [1].map(({name}) => 1)"),
            format!("let {{ {name} }} = {{ a: 1 }}\nreturn 1"),
            format!("let {{ a: {name} }} = {{ a: 1 }}\nreturn 1"),
            format!("return [{{ a: 1 }}].map(({{ {name} }}) => {name})"),
            format!("return [[1]].map(([{name}]) => 1)"),
        ] {
            let out = eval(&code, json!({}), fuel(100.0));
            let (m, k) = failed(&out, &code);
            assert!(
                is_security_error(&m) || k == ErrorKind::Input,
                "`{code}`: {m}"
            );
        }
    }
    // A function parameter named so, in an agent.
    let out = adv::agent(
        "function main({ constructor: 1 }) { return { v: 1 } }",
        json!({}),
        fuel(100.0),
    );
    failed(&out, "agent parameter named constructor");
}

/// Scenario 24 ★: keys named `__proto__` from JSON text, fromEntries, literals and computed keys
/// never reach a prototype: refused with the security error.
#[test]
fn proto_keys_from_data_are_refused_or_plain() {
    let cases = [
        "Object.assign({}, JSON.parse('{\"__proto__\":{\"isAdmin\":true}}')).isAdmin",
        "JSON.parse('{\"__proto__\":{\"isAdmin\":true}}').isAdmin",
        "JSON.parse('{\"a\":{\"constructor\":{\"prototype\":1}}}').a",
        "JSON.parse('[{\"prototype\":1}]')",
        "Object.fromEntries([['__proto__', { isAdmin: true }]]).isAdmin",
        "Object.fromEntries([['constr' + 'uctor', 1]])",
        "({ ['__pro' + 'to__']: { isAdmin: true } }).isAdmin",
        "({ ...JSON.parse('{\"__proto__\":1}') })",
        "Object.keys(JSON.parse('{\"constructor\":1}'))",
        // spelled with escapes (read by the escaping path, not in place)
        "JSON.parse('{\"__proto\\u005f_\":{\"isAdmin\":true}}').isAdmin",
        "JSON.parse('[{\"a\":1},{\"\\u0063onstructor\":1}]')",
        // after objects whose keys the parser shares
        "JSON.parse('[{\"a\":1,\"b\":2},{\"a\":1,\"__proto__\":2}]')",
    ];
    for code in cases {
        let out = eval(code, json!({}), fuel(100.0));
        match &out.error {
            Some(e) => assert!(is_security_error(&e.message), "`{code}`: {}", e.message),
            None => {
                // Plain key: must not have made anything an admin.
                let v = out.result.to_json();
                assert!(
                    v != Some(json!(true)),
                    "`{code}` leaked a prototype value: {v:?}"
                );
            }
        }
    }
    // JSON text naming them, escaped or after shared keys, is refused outright.
    for code in [
        "JSON.parse('{\"__proto\\u005f_\":1}')",
        "JSON.parse('[{\"a\":1},{\"\\u0063onstructor\":1}]')",
        "JSON.parse('[{\"a\":1,\"b\":2},{\"a\":1,\"__proto__\":2}]')",
    ] {
        let out = eval(code, json!({}), fuel(100.0));
        assert!(is_security_error(&failed(&out, code).0), "`{code}`");
    }
    // The literal is refused at compile time.
    let out = eval(
        "({ __proto__: { isAdmin: true } }).isAdmin",
        json!({}),
        fuel(100.0),
    );
    assert!(is_security_error(&failed(&out, "literal").0));
}

/// Scenario 24 ★ through the boundary: a context or capability value with a `__proto__` key.
#[test]
fn proto_keys_in_context_and_capability_returns_do_not_pollute() {
    let ctx: serde_json::Value =
        serde_json::from_str(r#"{"o": {"__proto__": {"isAdmin": true}, "a": 1}}"#).unwrap();
    let out = eval("o.isAdmin", ctx.clone(), fuel(100.0));
    assert!(out.error.is_none() || is_security_error(&out.error.unwrap().message));
    let out = eval("({}).isAdmin", ctx, fuel(100.0));
    assert_eq!(out.result, ajs::JsValue::Undefined);
    assert!(out.error.is_none());
}

/// Scenario 21: no `call`/`apply`/`bind`, no Object.prototype members, objects have own keys
/// only; `toUpperCase` works.
#[test]
fn method_allowlist_and_no_inherited_members() {
    let ctx = json!({ "o": { "a": 1 }, "s": "abc", "xs": [1] });
    for code in [
        "o.hasOwnProperty",
        "o.toString",
        "o.valueOf",
        "o.__lookupGetter__",
        "o.__defineGetter__",
        "o.isPrototypeOf",
        "s.call",
        "xs.apply",
        "xs.bind",
        "xs.includes.apply",
    ] {
        let out = eval(code, ctx.clone(), fuel(100.0));
        if let Some(e) = &out.error {
            assert_eq!(e.kind, ErrorKind::Input, "`{code}`: {}", e.message);
        } else {
            assert_eq!(
                out.result,
                ajs::JsValue::Undefined,
                "`{code}` reached a member"
            );
        }
    }
    for code in [
        "o.hasOwnProperty('a')",
        "o.toString()",
        "o.__defineGetter__('a', 1)",
        "s.toUpperCase.call(s)",
        "xs.map.apply(xs, [])",
        "s.constructor('x')",
        "xs.push.bind(xs)",
    ] {
        let out = eval(code, ctx.clone(), fuel(100.0));
        failed(&out, code);
    }
    let out = eval("s.toUpperCase()", ctx, fuel(100.0));
    assert_eq!(ok_json(&out, "toUpperCase"), Some(json!("ABC")));
}

/// Scenarios 22 and 27: host globals and refused constructs, each with its message, at compile
/// time (nothing runs).
#[test]
fn host_globals_and_refused_constructs_are_compile_errors() {
    for code in [
        "process",
        "process.env",
        "globalThis",
        "window",
        "document",
        "require('fs')",
        "import('fs')",
        "eval('1')",
        "Function('return 1')()",
        "new Date()",
        "this",
        "Symbol",
        "Proxy",
        "Reflect",
        "RegExp",
        "Map",
        "WeakMap",
        "WeakSet",
        "setTimeout",
        "Promise",
        "fetch('https://example.com')",
        "XMLHttpRequest",
        "global",
        "module",
        "Buffer",
        "__dirname",
    ] {
        let out = eval(code, json!({}), fuel(100.0));
        let (m, k) = failed(&out, code);
        assert_eq!(k, ErrorKind::Input, "`{code}`: {m}");
        assert_eq!(out.fuel_used, 0.0, "`{code}` ran");
    }
    for code in [
        "class A {}\nreturn 1",
        "function f() { return 1 }\nreturn f()",
        "throw 1",
        "var x = 1\nreturn x",
        "let f = () => 1\nreturn 1",
        "with (Math) { return 1 }",
    ] {
        let out = eval(code, json!({}), fuel(100.0));
        assert_eq!(failed(&out, code).1, ErrorKind::Input, "`{code}`");
    }
}

/// Scenario 23 ★: a string literal is always just a string (decision 14), never a variable, a
/// context value or a prototype member.
#[test]
fn string_literals_never_resolve_to_names() {
    let ctx = json!({ "secret": "s3cret", "toString": "ctx", "data": { "json": 1 } });
    for (code, want) in [
        ("'secret'", json!("secret")),
        ("\"secret\"", json!("secret")),
        ("`secret`", json!("secret")),
        ("'toString'", json!("toString")),
        ("'constructor'", json!("constructor")),
        ("'__proto__'", json!("__proto__")),
        ("'data.json'", json!("data.json")),
        ("'Math.PI'", json!("Math.PI")),
        ("['secret'][0]", json!("secret")),
        ("{ secret: 'secret' }.secret", json!("secret")),
    ] {
        let out = eval(code, ctx.clone(), fuel(100.0));
        if code.starts_with('{') {
            continue; // a block, not an expression; shape covered below
        }
        assert_eq!(ok_json(&out, code), Some(want), "`{code}`");
    }
    let out = eval(
        "let x = 'secret'\nlet secret2 = 'y'\nreturn [x, 'secret2', 'x']",
        ctx,
        fuel(100.0),
    );
    assert_eq!(
        ok_json(&out, "locals"),
        Some(json!(["secret", "secret2", "x"]))
    );
}

/// Scenario 25 ★: an atom is looked up by its own name only; a method named like an atom or a
/// string value's member is never an atom call.
#[test]
fn atom_lookup_is_by_declared_name_only() {
    for code in [
        "'x'.httpFetch({ url: 'https://a.example/' })",
        "({ httpFetch: 1 }).httpFetch({})",
        "Math.httpFetch({})",
        // regexMatch is a pure atom every run has (decision 21), so it is not listed here
        "unknownAtom({})",
    ] {
        let out = eval(code, json!({}), fuel(100.0));
        failed(&out, code);
    }
}

/// Scenario 26 (in Rust): no host objects in guest state — values are plain data, and equality
/// compares values, never runs code.
#[test]
fn values_are_plain_data_and_equality_runs_no_code() {
    let ctx = json!({ "o": { "valueOf": 1, "toString": 2 }, "n": 1 });
    let out = eval("o == 1 || o === 1 || o == 2", ctx.clone(), fuel(100.0));
    assert_eq!(ok_json(&out, "eq"), Some(json!(false)));
    let out = eval("[o == o, o === o, {} == {}, o.valueOf]", ctx, fuel(100.0));
    assert_eq!(ok_json(&out, "eq2"), Some(json!([true, true, false, 1])));
}

/// Scenario 28: regular expressions (decision 23) run on a linear-time engine, so a catastrophic
/// pattern ends fast; backtracking features are compile errors.
#[test]
fn regex_literals_run_in_linear_time() {
    let s = format!("{}!", "a".repeat(100_000));
    let out = eval("/^(a+)+$/.test(s)", json!({ "s": s }), fuel(1e6));
    assert_eq!(ok_json(&out, "redos"), Some(json!(false)));
    let out = eval("/(a)\\1/.test('aa')", json!({}), fuel(100.0));
    assert_eq!(failed(&out, "backreference").1, ErrorKind::Input);
}

/// Scenario 28: a catastrophic pattern either is refused at compile time (before regex support
/// lands) or runs on the linear-time engine and ends within fuel — never hangs.
#[test]
fn regex_literals_cannot_hang() {
    let s = format!("{}!", "a".repeat(20_000));
    let t = std::time::Instant::now();
    let out = eval("/^(a+)+$/.test(s)", json!({ "s": s }), fuel(1e5));
    match &out.error {
        Some(e) => assert!(
            e.kind == ErrorKind::Input || e.kind == ErrorKind::OutOfFuel,
            "{}",
            e.message
        ),
        None => assert_eq!(out.result.to_json(), Some(json!(false))),
    }
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
}
