//! Agent programs: helpers, recursion, parameters typed by example, the return contract.

use ajs::{ErrorKind, Options, Outcome, Runner};
use serde_json::{json, Value};

fn run(source: &str, args: Value) -> Outcome {
    run_with(source, args, Options::default())
}

fn run_with(source: &str, args: Value, options: Options) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(Runner::default().run_agent(source, &args, &options))
}

fn result(source: &str, args: Value) -> Value {
    let out = run(source, args);
    assert!(out.error.is_none(), "{source}: {:?}", out.error);
    out.result.to_json().unwrap_or(Value::Null)
}

fn error(source: &str, args: Value) -> String {
    let out = run(source, args);
    assert_eq!(out.result, ajs::JsValue::Undefined);
    out.error
        .unwrap_or_else(|| panic!("{source} succeeded"))
        .message
}

#[test]
fn helpers_and_recursion() {
    let src = "function fib(n) {\n  if (n < 2) { return n }\n  return fib(n - 1) + fib(n - 2)\n}\nfunction main({ n: 10 }) {\n  return { value: fib(n) }\n}";
    assert_eq!(result(src, json!({ "n": 8 })), json!({ "value": 21 }));
    assert_eq!(
        result(src, json!({})),
        json!({ "value": 55 }),
        "default applies"
    );
    let deep = "function down(n) { return down(n + 1) }\nfunction main() { return { v: down(0) } }";
    let out = run_with(
        deep,
        json!({}),
        Options {
            fuel: 1e6,
            ..Default::default()
        },
    );
    let e = out.error.unwrap();
    assert!(
        e.message
            .starts_with("Maximum helper call depth (256) exceeded"),
        "{}",
        e.message
    );
    assert_eq!(e.kind, ErrorKind::CallDepth);
}

/// A helper's parameters with defaults may be left out of a call, as in JavaScript: the
/// default applies; a parameter without one (or with an example value) must be passed.
#[test]
fn helper_defaults_apply_to_missing_arguments() {
    let src = "function money(amount, currency = 'EUR') {\n  return amount.toFixed(2) + ' ' + currency\n}\n\
               function pick(a, b = 1, c = 2) { return [a, b, c] }\n\
               function main({ n: 3 }) {\n  return { m: money(n), u: money(n, 'USD'), p: pick(0), q: pick(0, 9), r: pick(0, 9, 8) }\n}";
    assert_eq!(
        result(src, json!({})),
        json!({"m": "3.00 EUR", "u": "3.00 USD", "p": [0, 1, 2], "q": [0, 9, 2], "r": [0, 9, 8]})
    );
    let e = error(
        "function f(a, b = 2) { return a + b }\nfunction main() { return { x: f() } }",
        json!({}),
    );
    assert!(
        e.starts_with("Helper 'f' expects 1 to 2 argument(s), got 0"),
        "{e}"
    );
    let e = error(
        "function f(a, b: 5) { return a + b }\nfunction main() { return { x: f(1) } }",
        json!({}),
    );
    assert!(
        e.starts_with("Helper 'f' expects 2 argument(s), got 1"),
        "{e}"
    );
    let e = error(
        "function f(a = 1) { return a }\nfunction main() { return { x: f(1, 2) } }",
        json!({}),
    );
    assert!(
        e.starts_with("Helper 'f' expects 0 to 1 argument(s), got 2"),
        "{e}"
    );
}

#[test]
fn helpers_see_only_their_parameters() {
    let src =
        "function h(a) { return secret }\nfunction main() { let secret = 1\n return { v: h(1) } }";
    assert!(error(src, json!({})).contains("'secret' is not defined"));
    let src = "function h(a, b) { return a }\nfunction main() { return { v: h(1) } }";
    assert!(error(src, json!({})).contains("Helper 'h' expects 2 argument(s), got 1"));
}

#[test]
fn parameters_typed_by_example() {
    let src = "function f({ name: 'x', count = 2, tags: ['a'] }) { return { name, count, tags } }";
    assert_eq!(
        result(src, json!({ "name": "n" })),
        json!({ "name": "n", "count": 2, "tags": ["a"] })
    );
    assert!(error(src, json!({ "count": "3" }))
        .contains("Argument 'count' must be a number, got string"));
    assert_eq!(
        error(src, json!({ "tags": [1] })),
        "Argument 'tags': tags[0] must be a string, got number"
    );
    assert_eq!(
        error(src, json!({ "tags": "a" })),
        "Argument 'tags' must be an array of string, got string"
    );
    assert!(error(src, json!({ "nope": 1 })).contains("Unknown argument 'nope'"));
    let positional = "function f(a: 5, b = 'x') { return { a, b } }";
    assert_eq!(
        result(positional, json!({ "a": 1 })),
        json!({ "a": 1, "b": "x" })
    );
    assert!(error(positional, json!({})).contains("Missing required argument 'a'"));
}

#[test]
fn a_refused_argument_names_the_path_inside_it() {
    let src = "function main({ orders: [{ id: 'a', total: 1, tags: ['t'], meta: { 'a b': true, 'x-y': { n: 1 } } }], flag = false }) {\n  return { n: orders.length }\n}";
    let refused = [
        (
            json!([{ "total": "5" }]),
            "orders[0].total must be a number, got string",
        ),
        (
            json!([{ "total": 1 }, { "id": 7 }]),
            "orders[1].id must be a string, got number",
        ),
        (
            json!([{ "tags": ["a", null] }]),
            "orders[0].tags[1] must be a string, got null",
        ),
        (
            json!([{ "meta": { "a b": 1 } }]),
            "orders[0].meta[\"a b\"] must be a boolean, got number",
        ),
        (
            json!([{ "meta": { "x-y": { "n": [] } } }]),
            "orders[0].meta[\"x-y\"].n must be a number, got array",
        ),
        (
            json!([{ "meta": [] }]),
            "orders[0].meta must be an object, got array",
        ),
        (json!(["x"]), "orders[0] must be an object, got string"),
    ];
    for (orders, want) in refused {
        let e = error(src, json!({ "orders": orders }));
        assert_eq!(e, format!("Argument 'orders': {want}"), "{orders}");
    }
    // keys the example does not name, and fields left out, are not checked
    assert_eq!(
        result(
            src,
            json!({ "orders": [{ "other": 1 }, { "id": "b", "meta": {} }] })
        ),
        json!({ "n": 2 })
    );
    assert_eq!(
        error(src, json!({ "flag": "yes" })),
        "Argument 'flag' must be a boolean, got string"
    );
}

#[test]
fn the_entry_returns_an_object_null_or_nothing() {
    assert_eq!(
        error("function f() { return 5 }", json!({})),
        "Agent must return an object, got number; wrap the value: return { result: value }"
    );
    assert_eq!(
        error("function f() { return [1] }", json!({})),
        "Agent must return an object, got array; wrap the value: return { result: value }"
    );
    assert_eq!(
        result("function f() { return null }", json!({})),
        Value::Null
    );
    let out = run("function f() { let x = 1 }", json!({}));
    assert!(out.error.is_none() && out.result == ajs::JsValue::Undefined);
    // helpers may return anything
    assert_eq!(
        result(
            "function h() { return 3 }\nfunction f() { return { v: h() } }",
            json!({})
        ),
        json!({ "v": 3 })
    );
}

#[test]
fn top_level_rules() {
    assert!(error("", json!({})).contains("Source must contain a function declaration"));
    assert!(error("let x = 1\nfunction f() {}", json!({})).contains("only function declarations"));
    assert!(error("function f() {}\nfunction f() {}", json!({})).contains("cannot share a name"));
    assert!(error(
        "function g() {}\nfunction g() {}\nfunction main() {}",
        json!({})
    )
    .contains("Duplicate helper function name: g"));
}

#[test]
fn callbacks_in_agents() {
    let src = "function f({ items: [{ price: 1 }], budget = 100 }) {\n  let cheap = items.filter(x => x.price < budget)\n  let total = cheap.reduce((s, x) => s + x.price, 0)\n  return { names: cheap.map(({ name }) => name), total }\n}";
    let args = json!({ "items": [{ "name": "a", "price": 40 }, { "name": "b", "price": 250 }, { "name": "c", "price": 10 }] });
    assert_eq!(
        result(src, args),
        json!({ "names": ["a", "c"], "total": 50 })
    );
}

#[test]
fn arguments_over_args_max_bytes_are_refused_with_their_exact_size() {
    let src = "function main({ s: 'x' }) {\n  return { n: s.length }\n}";
    let args = json!({ "s": "é\"".repeat(20) });
    let exact = args.to_string().len();
    for (limit, refused) in [(exact, false), (exact - 1, true), (4, true)] {
        let out = run_with(
            src,
            args.clone(),
            Options {
                args_max_bytes: limit,
                ..Options::default()
            },
        );
        match out.error {
            Some(e) if refused => assert_eq!(
                e.message,
                format!("Arguments are {exact} bytes, over the {limit}-byte limit (argsMaxBytes)")
            ),
            e => assert!(!refused && e.is_none(), "{e:?}"),
        }
    }
    // `null` arguments are 4 bytes
    let out = run_with(
        "function main() {\n  return {}\n}",
        Value::Null,
        Options {
            args_max_bytes: 3,
            ..Options::default()
        },
    );
    assert_eq!(
        out.error.unwrap().message,
        "Arguments are 4 bytes, over the 3-byte limit (argsMaxBytes)"
    );
}
