//! Behaviour corpus: small AJS programs with their expected result, error and fuel range, plus a
//! differential check against Node for what AJS keeps from JavaScript.

use crate::common;

use crate::common::{err, eval, eval_with, ok};
use serde_json::{json, Value};

/// (code, context, expected result as JSON; `null` JSON literal means JS null)
const RESULTS: &[(&str, &str, &str)] = &[
    ("1 + 2 * 3", "{}", "7"),
    ("(1 + 2) * 3", "{}", "9"),
    ("2 ** 10", "{}", "1024"),
    ("7 % 3", "{}", "1"),
    ("-7 % 3", "{}", "-1"),
    ("'a' + 1", "{}", "\"a1\""),
    ("1 + 'a'", "{}", "\"1a\""),
    ("'3' * '4'", "{}", "12"),
    ("null + 1", "{}", "1"),
    ("true + 1", "{}", "2"),
    ("0.1 + 0.2", "{}", "0.30000000000000004"),
    ("'' + 0.1 + 0.2", "{}", "\"0.10.2\""),
    ("'' + 1e21", "{}", "\"1e+21\""),
    ("'' + -0", "{}", "\"0\""),
    ("'' + (0 / 0)", "{}", "\"NaN\""),
    ("'' + 1 / 0", "{}", "\"Infinity\""),
    ("'' + 123456789012345680000", "{}", "\"123456789012345680000\""),
    ("'' + 1.5e-7", "{}", "\"1.5e-7\""),
    ("'1' == 1", "{}", "false"),
    ("0 == false", "{}", "false"),
    ("null == undefined", "{}", "true"),
    ("null === undefined", "{}", "false"),
    ("NaN == NaN", "{}", "true"),
    ("NaN === NaN", "{}", "false"),
    ("'ab' == 'ab'", "{}", "true"),
    ("'ab' < 'b'", "{}", "true"),
    ("2 < 10", "{}", "true"),
    ("'2' < '10'", "{}", "false"),
    ("1 <= 1 && 2 >= 3", "{}", "false"),
    ("x == x", "{\"x\": [1]}", "true"),
    ("typeof 1", "{}", "\"number\""),
    ("typeof 'a'", "{}", "\"string\""),
    ("typeof null", "{}", "\"object\""),
    ("typeof undefined", "{}", "\"undefined\""),
    ("typeof [1]", "{}", "\"object\""),
    ("typeof true", "{}", "\"boolean\""),
    ("!0", "{}", "true"),
    ("!''", "{}", "true"),
    ("![]", "{}", "false"),
    ("-'5'", "{}", "-5"),
    ("+'12'", "{}", "12"),
    ("0 || 'x'", "{}", "\"x\""),
    ("1 && 'y'", "{}", "\"y\""),
    ("null ?? 'd'", "{}", "\"d\""),
    ("0 ?? 'd'", "{}", "0"),
    ("a > 1 ? 'big' : 'small'", "{\"a\": 5}", "\"big\""),
    ("[1, 'a', null, true]", "{}", "[1,\"a\",null,true]"),
    ("{ a: 1, 'b c': [2], 3: 'x' }", "{}", "{\"3\":\"x\",\"a\":1,\"b c\":[2]}"),
    ("o.a.b", "{\"o\": {\"a\": {\"b\": 7}}}", "7"),
    ("o.missing.deeper", "{\"o\": {}}", "null"),
    ("o['a']", "{\"o\": {\"a\": 3}}", "3"),
    ("xs[1]", "{\"xs\": [10, 20]}", "20"),
    ("xs[5]", "{\"xs\": [10, 20]}", "null"),
    ("xs[i + 1]", "{\"xs\": [10, 20, 30], \"i\": 1}", "30"),
    ("xs.length", "{\"xs\": [1, 2, 3]}", "3"),
    ("'héllo'.length", "{}", "5"),
    ("'😀'.length", "{}", "2"),
    ("'abc'[1]", "{}", "\"b\""),
    ("o?.a", "{\"o\": null}", "null"),
    ("`sum ${a + b}!`", "{\"a\": 1, \"b\": 2}", "\"sum 3!\""),
    ("`${null}-${undefined}-${true}`", "{}", "\"null-undefined-true\""),
    ("Math.max(1, 5, 3)", "{}", "5"),
    ("Math.min()", "{}", "null"),
    ("Math.round(2.5)", "{}", "3"),
    ("Math.round(-2.5)", "{}", "-2"),
    ("Math.floor(-1.5)", "{}", "-2"),
    ("Math.abs(-3)", "{}", "3"),
    ("Math.sqrt(16)", "{}", "4"),
    ("Math.PI > 3.14", "{}", "true"),
    ("Math.hypot(3, 4)", "{}", "5"),
    ("Math.sign(-3)", "{}", "-1"),
    ("Math.trunc(-4.7)", "{}", "-4"),
    ("Math.imul(3, 4)", "{}", "12"),
    ("Math.clz32(1)", "{}", "31"),
    ("Math.pow(2, 3)", "{}", "8"),
    ("Math.random() < 1", "{}", "true"),
    ("let total = a + b\nreturn total * 2", "{\"a\": 1, \"b\": 2}", "6"),
    ("let x = 1\n{ let x = 2 }\nreturn x", "{}", "1"),
    ("let x = 1\nif (true) { let x = 2 }\nreturn x", "{}", "1"),
    ("let i = 0\nlet s = 0\nwhile (i < 10) {\n  i++\n  if (i % 2 == 0) { continue }\n  if (i > 7) { break }\n  s += i\n}\nreturn s", "{}", "16"),
    ("let i = 0\nwhile (i < 3) { const y = i * 2\n i = i + 1 }\nreturn i", "{}", "3"),
    ("let a = 5\na -= 2\na *= 3\na /= 9\na **= 2\nreturn a", "{}", "1"),
    ("let a = null\na ??= 4\nlet b = 1\nb ||= 9\nlet c = 1\nc &&= 7\nreturn [a, b, c]", "{}", "[4,1,7]"),
    ("let x\nreturn x", "{}", "null"),
    ("let xs = [1]\nlet n = xs.push(2, 3)\nreturn [n, xs]", "{}", "[3,[1,2,3]]"),
    ("try {\n  Error('boom')\n} catch (e) {\n  return 'caught ' + e\n}", "{}", "\"caught boom\""),
    ("try {\n  return o.constructor\n} catch (e) {\n  return e\n}", "{\"o\": {}}", "\"Security Error: Access to 'constructor' is forbidden\""),
    ("try { Error('a') } catch (e) { try { Error(e + 'b') } catch (f) { return f } }", "{}", "\"ab\""),
    ("let r = 0\ntry { r = 1 } catch (e) { r = 2 }\nreturn r", "{}", "1"),
    ("tags.push('clearance')\nreturn tags", "{\"tags\": [\"sale\"]}", "[\"sale\",\"clearance\"]"),
    ("Math.max(1, 2)", "{\"Math\": 5}", "2"),
    ("'secret'", "{\"secret\": \"leaked\"}", "\"secret\""),
    ("let a = 5\nreturn a + 1", "{\"a\": 1}", "6"),
    ("return 'return'", "{}", "\"return\""),
];

#[test]
fn results_match() {
    let mut failures = Vec::new();
    for (code, ctx, expected) in RESULTS {
        let ctx: Value = serde_json::from_str(ctx).expect("context JSON");
        let expected: Value = serde_json::from_str(expected).expect("expected JSON");
        let out = eval(code, ctx);
        let got = out.result.to_json().unwrap_or(Value::Null);
        if out.error.is_some() || got != expected {
            failures.push(format!(
                "{code:?}: expected {expected}, got {got} / error {:?}",
                out.error.map(|e| e.message)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// (code, context, the error message must start with this)
const ERRORS: &[(&str, &str, &str)] = &[
    (
        "[1, 2] + 'a'",
        "{}",
        "Cannot use '+' on an array; use .join() first",
    ),
    (
        "o + 1",
        "{\"o\": {}}",
        "Cannot use '+' on an object; use JSON.stringify() first",
    ),
    ("xs * 2", "{\"xs\": []}", "Cannot use '*' on an array"),
    ("xs < 2", "{\"xs\": []}", "Cannot use '<' on an array"),
    (
        "`${xs}`",
        "{\"xs\": [1]}",
        "Cannot use an array in a template literal",
    ),
    (
        "cfg.constructor",
        "{\"cfg\": {}}",
        "Security Error: Access to 'constructor' is forbidden",
    ),
    (
        "cfg.__proto__",
        "{\"cfg\": {}}",
        "Security Error: Access to '__proto__' is forbidden",
    ),
    (
        "cfg['proto' + 'type']",
        "{\"cfg\": {}}",
        "Security Error: Access to 'prototype' is forbidden",
    ),
    ("Error('custom message')", "{}", "custom message"),
    (
        "let i = 0\nwhile (true) { i = i + 1 }\nreturn i",
        "{}",
        "Out of Fuel",
    ),
    (
        "try {\n  while (true) {}\n} catch (e) {\n  return 'caught'\n}",
        "{}",
        "Out of Fuel",
    ),
    ("n.push(1)", "{\"n\": 3}", "'push' is not a function"),
    (
        "n.push(1)",
        "{\"n\": null}",
        "Cannot call method 'push' on null",
    ),
    (
        "return llmPredict({ prompt: 'hi' })",
        "{}",
        "Capability 'llm.predict' missing",
    ),
    (
        "return httpFetch({ url: 'https://a.example/' })",
        "{}",
        "Fetch blocked: no allowedFetchDomains configured",
    ),
    ("let total = a + b\ntotal * 2", "{\"a\": 1, \"b\": 2}", ""),
    ("undeclared + 1", "{}", "'undeclared' is not defined"),
    (
        "let s = 0\nfor (let i = 0; i < 3; i++) { s = s + i }\nreturn s",
        "{}",
        "",
    ),
    (
        "return new Date()",
        "{}",
        "The 'new' keyword is not supported",
    ),
    ("class A {}\nreturn 1", "{}", ""),
    ("throw 'x'\nreturn 1", "{}", "'throw' is not supported"),
    ("let f = x => x\nreturn 1", "{}", ""),
    ("let o = {}\no.key = 1\nreturn o", "{}", ""),
    (
        "let r = await httpFetch({ url: 'https://a.example/' })\nreturn r",
        "{}",
        "",
    ),
];

#[test]
fn errors_match() {
    let mut failures = Vec::new();
    for (code, ctx, prefix) in ERRORS {
        let ctx: Value = serde_json::from_str(ctx).expect("context JSON");
        let out = eval(code, ctx);
        match &out.error {
            Some(e) if e.message.starts_with(prefix) => {
                if out.result != ajs::JsValue::Undefined {
                    failures.push(format!("{code:?}: result not undefined after an error"));
                }
            }
            other => failures.push(format!(
                "{code:?}: expected error starting {prefix:?}, got {:?} / result {:?}",
                other.as_ref().map(|e| &e.message),
                out.result
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn compile_errors_name_the_users_line_and_column() {
    let m = err("let x = 1\nlet x = 2\nreturn x", json!({}));
    assert!(m.ends_with(" at <source>:2:4"), "{m}");
    let m = err("let a = 1\nreturn nope", json!({}));
    assert!(
        m.contains("'nope' is not defined") && m.ends_with(" at <source>:2:7"),
        "{m}"
    );
}

#[test]
fn fuel_is_calibrated_to_the_seed() {
    let out = eval(
        "let i = 0\nwhile (i < 1000) { i = i + 1 }\nreturn i",
        json!({}),
    );
    assert!(out.error.is_none());
    assert!(
        (300.0..=500.0).contains(&out.fuel_used),
        "while loop used {}",
        out.fuel_used
    );
    let out = eval("a + b", json!({ "a": 1, "b": 2 }));
    assert!(
        out.fuel_used > 0.0 && out.fuel_used < 1.0,
        "a + b used {}",
        out.fuel_used
    );
    // The same program on the same input costs exactly the same.
    let again = eval(
        "let i = 0\nwhile (i < 1000) { i = i + 1 }\nreturn i",
        json!({}),
    );
    assert_eq!(
        again.fuel_used,
        eval(
            "let i = 0\nwhile (i < 1000) { i = i + 1 }\nreturn i",
            json!({})
        )
        .fuel_used
    );
}

#[test]
fn out_of_fuel_reports_the_budget() {
    let opts = ajs::Options {
        fuel: 50.0,
        ..Default::default()
    };
    let out = eval_with(
        "let i = 0\nwhile (true) { i = i + 1 }\nreturn i",
        json!({}),
        opts,
    );
    assert_eq!(out.error.unwrap().message, "Out of Fuel");
    assert!((50.0..50.5).contains(&out.fuel_used), "{}", out.fuel_used);
    assert_eq!(out.result, ajs::JsValue::Undefined);
}

#[test]
fn heap_limit_is_enforced_and_catchable() {
    let code = "let s = 'xxxxxxxxxxxxxxxx'\nlet i = 0\nwhile (i < 40) {\n  s = s + s\n  i = i + 1\n}\nreturn s.length";
    let opts = ajs::Options {
        fuel: 100_000.0,
        ..Default::default()
    };
    let out = eval_with(code, json!({}), opts.clone());
    assert!(
        out.error
            .as_ref()
            .unwrap()
            .message
            .starts_with("Heap limit exceeded"),
        "{:?}",
        out.error
    );
    let caught = format!("try {{\n{code}\n}} catch (e) {{\n  return 'caught'\n}}");
    let out = eval_with(&caught, json!({}), opts);
    assert_eq!(
        out.result,
        ajs::JsValue::String("caught".into()),
        "{:?}",
        out.error
    );
}

#[test]
fn context_is_copied_not_shared() {
    let ctx = json!({ "tags": ["sale"] });
    let before = ctx.clone();
    assert_eq!(
        ok("tags.push('x')\nreturn tags", ctx.clone()),
        Some(json!(["sale", "x"]))
    );
    assert_eq!(ctx, before);
}

#[test]
fn console_goes_to_the_log() {
    let out = eval(
        "console.log('hi', 1, [2])\nconsole.warn('w')\nreturn 1",
        json!({}),
    );
    assert_eq!(out.result, ajs::JsValue::Number(1.0));
    assert_eq!(out.log.len(), 2);
    assert_eq!(out.log[0].message, "hi 1 [2]");
}

#[test]
fn safe_function_budget_is_per_call() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let f = ajs::SafeFunction::new(
        &["n"],
        "let i = 0\nwhile (i < n) {\n  i = i + 1\n}\nreturn i",
        ajs::Options {
            fuel: 50.0,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        rt.block_on(f.call(&[json!(5)])).result,
        ajs::JsValue::Number(5.0)
    );
    assert_eq!(
        rt.block_on(f.call(&[json!(5000)])).error.unwrap().message,
        "Out of Fuel"
    );
    assert_eq!(
        rt.block_on(f.call(&[json!(5)])).result,
        ajs::JsValue::Number(5.0)
    );
    let g = ajs::SafeFunction::new(&["n"], "n * 2", ajs::Options::default()).unwrap();
    let out = rt.block_on(g.call(&[json!(3)]));
    assert!(out.error.is_none() && out.result == ajs::JsValue::Undefined);
    assert!(ajs::SafeFunction::new(&["a"], "return a +", ajs::Options::default()).is_err());
}

#[test]
fn source_and_context_caps() {
    let long = format!("'{}'.length", "a".repeat(9000));
    let out = eval(&long, json!({}));
    assert!(out
        .error
        .unwrap()
        .message
        .contains("over the 8192-byte limit"));
    let out = eval_with(
        &long,
        json!({}),
        ajs::Options {
            max_source_bytes: 16 * 1024,
            ..Default::default()
        },
    );
    assert_eq!(out.result, ajs::JsValue::Number(9000.0));
    let big = json!({ "s": "x".repeat(5 * 1024 * 1024) });
    let out = eval("s.length", big.clone());
    assert!(
        out.error.unwrap().message.starts_with("Context is "),
        "context cap"
    );
    // an unused key costs nothing
    assert_eq!(ok("1", big), Some(json!(1)));
}

/// Expressions whose value AJS keeps from JavaScript, compared with Node's.
const DIFFERENTIAL: &[&str] = &[
    // sort without a comparator, substr, normalize, regular expressions (builtins batch 2)
    "[3, 1, 10, 2, 21].sort()",
    "['b', undefined, 'a', 'B', true, null].sort()",
    "[2, 1, 3].toSorted()",
    "[-1, -2, 0, 1e21, 5e-7].sort()",
    "'abcdef'.substr(-3, 2)",
    "'abcdef'.substr(2)",
    "'abcdef'.substr(1, -1)",
    "'e\\u0301'.normalize().length",
    "'\\u00e9'.normalize('NFD').length",
    "/ab+c/i.test('xABBC')",
    "/^\\d{3}-\\d{4}$/.test('555-1234')",
    "'a1b22c333'.match(/\\d+/g)",
    "'a1b22c333'.match(/(\\d)(\\d)?/)",
    "'abc'.match(/x/)",
    "'abc'.match(/x/g)",
    "'2024-01-15'.replace(/(\\d+)-(\\d+)-(\\d+)/, '$3/$2/$1')",
    "'2024-01-15'.replace(/(?<y>\\d+)-(?<m>\\d+)/, '$<m>.$<y>')",
    "'aXbXc'.replace(/x/gi, '[$&]')",
    "'aXbXc'.replaceAll(/x/gi, '$`')",
    "'abc'.replace(/b/, \"$'$$\")",
    "'abc'.replace(/(z)?b/, '[$1]')",
    "'2024-01-15'.replace(/(\\d+)-(\\d+)-(\\d+)/, (m, y, mo, d) => d + '/' + mo + '/' + y)",
    "'aXbXc'.replaceAll(/x/gi, (m, i, s) => '$`' + i + s.length)",
    "'aXbXc'.replaceAll('X', (m, i) => i)",
    "'a, b ,c'.split(/\\s*,\\s*/)",
    "'abc'.split(/(b)/)",
    "'abc'.split(/(?:)/)",
    "''.split(/,/)",
    "''.split(/(?:)/)",
    "'a1b2c3'.split(/\\d/, 2)",
    "'xyz'.search(/z/)",
    "'xyz'.search(/q/)",
    "'héllo wörld'.search(/w/)",
    "'a\\nb'.match(/^b/m)",
    "'a\\nb'.match(/a.b/s)",
    "/\\bfoo\\b/.test('a foo b')",
    "/\\w+/.test('éé')",
    "/[^]/.test('\\n')",
    "/[]/.test('a')",
    "/a{2,3}/.test('caab')",
    "/a{/.test('a{')",
    "/[a-c-]/.test('-')",
    "/\\u0041/.test('A')",
    "/\\x41/.test('A')",
    "/[\\d.]+/.exec('v1.25x')",
    "'Hello World'.replace(/o/g, '0')",
    "'one two  three'.split(/\\s+/)",
    "/a/gi.flags",
    "/a\\/b/.source",
    "JSON.stringify({ r: /a/ })",
    "'test'.match('t')",
    "'a.c'.search('.')",
    "0.1 + 0.2",
    "1 / 3",
    "2 ** 0.5",
    "-7 % 3",
    "5.5 % 2",
    "1e21 + 1",
    "'' + 1e21",
    "'' + 0.000001",
    "'' + 0.0000001",
    "'' + 123e-20",
    "'' + 2 ** 53",
    "'' + -1.5",
    "'' + 100 / 3",
    "'x' + 1 + 2",
    "1 + 2 + 'x'",
    "'5' * '2'",
    "'5' - 2",
    "' 12 ' * 1",
    "'0x10' * 1",
    "'1e3' * 1",
    "'abc' * 1",
    "null * 5",
    "true * 5",
    "'b' > 'a'",
    "'B' > 'a'",
    "'10' < '9'",
    "Math.round(0.49999999999999994)",
    "Math.round(-0.5)",
    "Math.max(-0, 0)",
    "Math.min(0, -0)",
    "Math.atan2(1, 1)",
    "Math.cbrt(27)",
    "Math.expm1(1e-10)",
    "Math.fround(5.5)",
    "Math.fround(5.05)",
    "Math.clz32(0)",
    "Math.imul(0xffffffff, 5)",
    "Math.sign(-0)",
    "Math.log10(1000)",
    "typeof (1 + 'a')",
    // `typeof` compared with, and next to, the literals it can give (the VM reuses them)
    "[typeof 1 === 'number', typeof 'a' === 'string', typeof null === 'object', typeof undefined === 'undefined', typeof true === 'boolean', typeof [] === 'object', typeof {} === 'number', typeof 1 !== 'number']",
    "typeof 1 + typeof 'x' + ('number' === typeof 2) + 'number'.length + (typeof 3).length",
    "[typeof 'number', typeof 'number' === 'string', 'string' === typeof 'number', typeof typeof 1]",
    "[typeof 1, 'number', 'numbers', 'Number', typeof 2 === 'Number'].join('|')",
    "`a${1 + 1}b${'c'}`",
    "'😀x'.length",
    "'abc'[2]",
    "[1, [2, 3], { a: null }]",
    "{ b: 1, a: 2, 1: 3, 0: 4 }",
    "2 ** -1",
    "(-8) ** (1 / 3)",
    "0 / 0",
    "-1 / 0",
    // builtins without callbacks
    "'abc'.padStart(6, '-')",
    "'abc'.padEnd(7, '12')",
    "'5'.padStart(3, '0')",
    "'abc'.padStart(2)",
    "'Hello'.toUpperCase()",
    "'ÇA ΣΑΣ'.toLowerCase()",
    "'straße'.toUpperCase()",
    "'  hi \\n'.trim()",
    "'  hi '.trimStart()",
    "'  hi '.trimEnd()",
    "'abc'.charAt(1)",
    "'abc'.charAt(5)",
    "'abc'.charCodeAt(0)",
    "'abc'.charCodeAt(9)",
    "'😀'.codePointAt(0)",
    "'😀'.codePointAt(1)",
    "'abc'.codePointAt(3)",
    "'hello'.includes('ell')",
    "'hello'.includes('ell', 2)",
    "'hello'.indexOf('l')",
    "'hello'.indexOf('l', 3)",
    "'hello'.indexOf('')",
    "'hello'.indexOf('', 9)",
    "'hello'.lastIndexOf('l')",
    "'hello'.lastIndexOf('l', 2)",
    "'hello'.lastIndexOf('')",
    "'aaaa'.lastIndexOf('aa')",
    "'abcabcabd'.indexOf('abcabd')",
    "'hello'.startsWith('he')",
    "'hello'.startsWith('l', 2)",
    "'hello'.endsWith('lo')",
    "'hello'.endsWith('l', 4)",
    "'hello'.slice(1, 3)",
    "'hello'.slice(-3)",
    "'hello'.slice(3, 1)",
    "'hello'.substring(3, 1)",
    "'hello'.substring(-2)",
    "'a,b,,c'.split(',')",
    "'a,b,c'.split(',', 2)",
    "'abc'.split('')",
    "''.split(',')",
    "''.split('')",
    "'abc'.split()",
    "'a--b--c'.split('--')",
    "'ab'.repeat(3)",
    "'ab'.repeat(0)",
    "'a'.concat('b', 1, true, null)",
    "'abc'.at(-1)",
    "'abc'.at(5)",
    "'aXbXc'.replace('X', '-')",
    "'aXbXc'.replaceAll('X', '-')",
    "'abc'.replace('b', '[$&|$`|$\\'|$$|$1]')",
    "'abc'.replaceAll('', '-')",
    "'aaa'.replaceAll('aa', 'b')",
    "'abc'.replace('z', 'y')",
    "'a'.localeCompare('b')",
    "'b'.localeCompare('a')",
    "'a'.localeCompare('a')",
    "'o\\u0308'.localeCompare('\\u00f6')",
    "'\\u00f6'.localeCompare('o\\u0308')",
    "'a\\u0323\\u0308'.localeCompare('a\\u0308\\u0323')",
    "'\\u1100\\u1161'.localeCompare('\\uac00')",
    "'caf\\u00e9'.localeCompare('cafe\\u0301')",
    "'abc'.replace(/(?<$>b)/, '[$<$>]')",
    "'abc'.replace(/(?<π>b)/u, '[$<π>]')",
    "/x/.exec()",
    "/und/.test()",
    "'abc'.toString()",
    "[1, 2, 3].join('-')",
    "[1, null, undefined, 'x', true].join()",
    "[].join()",
    "[1, 2, 3, 4].slice(1, -1)",
    "[1, 2].concat([3, 4], 5, [[6]])",
    "[1, NaN].includes(NaN)",
    "[1, NaN].indexOf(NaN)",
    "[1, 2, 1].lastIndexOf(1)",
    "[1, 2, 1].lastIndexOf(1, -2)",
    "[1, 2, 3].indexOf(3, -1)",
    "['a', 'b'].includes('b')",
    "[1, 2, 3].at(-1)",
    "[3, 1, 2].reverse()",
    "[1, [2, [3, [4]]]].flat()",
    "[1, [2, [3, [4]]]].flat(2)",
    "[1, [2, [3, [4]]]].flat(Infinity)",
    "[1, 2, 3].toReversed()",
    "[1, 2, 3].toString()",
    "(1234.5678).toFixed(2)",
    "(0.5).toFixed(0)",
    "(2.5).toFixed(0)",
    "(1.005).toFixed(2)",
    "(-1.5).toFixed(0)",
    "(1e21).toFixed(2)",
    "(0).toFixed(2)",
    "(123.456).toFixed()",
    "(255).toString(16)",
    "(255).toString(2)",
    "(-255).toString(36)",
    "(0.5).toString(2)",
    "(3.75).toString(16)",
    "(0.1).toString(3)",
    "(123.456).toPrecision(4)",
    "(0.000123).toPrecision(2)",
    "(123456).toPrecision(2)",
    "(1.5).toPrecision()",
    "(0).toPrecision(3)",
    "(12).toString()",
    "true.toString()",
    "parseInt('08')",
    "parseInt('0x1F')",
    "parseInt('  -42px')",
    "parseInt('101', 2)",
    "parseInt('z', 36)",
    "parseInt('abc')",
    "parseInt('12', 1)",
    "parseInt('123456789012345678901234567890')",
    "parseFloat('3.14abc')",
    "parseFloat('.5')",
    "parseFloat('-1e3x')",
    "parseFloat('1e')",
    "parseFloat('Infinityx')",
    "parseFloat('x')",
    "isNaN('abc')",
    "isNaN('12')",
    "isFinite('12')",
    "isFinite(1 / 0)",
    "encodeURIComponent('a b&c=d/é😀')",
    "encodeURI('http://x.y/a b?q=1&r=é#f')",
    "decodeURIComponent('a%20b%26%C3%A9%F0%9F%98%80')",
    "decodeURI('a%20b%26%2F')",
    "JSON.stringify({ a: [1, { b: 2 }] }, null, 2)",
    "JSON.stringify({ a: [1, { b: 2 }] })",
    "JSON.stringify([1, 'a', null, true, undefined, NaN, 1 / 0])",
    "JSON.stringify({ a: undefined, b: 1 })",
    "JSON.stringify({ b: 1, a: 2, 10: 3, 2: 4 })",
    "JSON.stringify('he said \"hi\"\\n\\t\\u0001\\\\')",
    "JSON.stringify('\\ud800x')",
    "JSON.stringify({ a: 1, b: [] , c: {} }, null, '--')",
    "JSON.stringify([[]], null, 4)",
    "JSON.stringify({ a: 1, b: 2, c: 3 }, ['c', 'a'])",
    "JSON.stringify(undefined)",
    "JSON.stringify(-0)",
    "JSON.stringify(1e21)",
    "JSON.stringify({ a: [1, 2] }, null, 20)",
    "JSON.parse('{\"a\": [1, 2, {\"b\": null}], \"c\": \"\\\\u00e9\"}')",
    "JSON.parse(' [1e3, -0.5, true, false] ')",
    "JSON.parse('{\"a\": 1, \"a\": 2, \"b\": 3}')",
    "JSON.parse('\"x\"')",
    "Object.keys({ b: 1, a: 2, 1: 3 })",
    "Object.values({ b: 1, a: 2 })",
    "Object.entries({ b: 1, a: [2] })",
    "Object.keys([4, 5])",
    "Object.keys('ab')",
    "Object.values('ab')",
    "Object.entries([7])",
    "Object.fromEntries([['a', 1], ['b', [2]], [3, 'c']])",
    "Object.assign({ a: 1 }, { b: 2 }, null, { a: 3 })",
    "Object.hasOwn({ a: 1 }, 'a')",
    "Object.hasOwn({ a: 1 }, 'b')",
    "Object.hasOwn([1], 0)",
    "Array.isArray([1])",
    "Array.isArray('a')",
    "Array.of(1, 'a', [2])",
    "Number.isNaN('abc')",
    "Number.isNaN(NaN)",
    "Number.isFinite('1')",
    "Number.isInteger(5.0)",
    "Number.isInteger(5.5)",
    "Number.isSafeInteger(2 ** 53)",
    "Number.parseFloat('1.5x')",
    "Number.parseInt('ff', 16)",
    "Number.MAX_SAFE_INTEGER",
    "Number.MIN_SAFE_INTEGER",
    "Number.EPSILON",
    "Number.MAX_VALUE",
    "Number.MIN_VALUE",
    "Number.POSITIVE_INFINITY",
    "String.fromCharCode(72, 105, 65536 + 33)",
    "String.fromCodePoint(128512, 65)",
];

#[test]
fn differential_with_node() {
    common::compare_with_node(DIFFERENTIAL, common::Form::Expression);
}

/// A function of more registers than the dispatch loop's fixed window (256) runs on the checked
/// path with the same results and fuel as the same work in a small function; helpers calling
/// each other across the two kinds of frames keep their registers.
#[test]
fn wide_functions_run_on_the_checked_path_with_the_same_results() {
    let lets: String = (0..300).map(|i| format!("let v{i} = n + {i}\n")).collect();
    // (in three statements: one sum of 300 terms would nest too deeply)
    let sums: String = (0..3)
        .map(|c| {
            let terms: Vec<String> = (100 * c..100 * c + 100).map(|i| format!("v{i}")).collect();
            format!("  let s{c} = {}\n", terms.join(" + "))
        })
        .collect();
    let agent = format!(
        "function small(n) {{\n  return n * 2\n}}\nfunction wide(n) {{\n{lets}{sums}  return s0 + s1 + s2 + small(v299)\n}}\nfunction main({{ k = 3 }}) {{\n  let i = 0\n  let t = 0\n  while (i < k) {{ t = t + wide(i) + small(i)\n i = i + 1 }}\n  return {{ t, arr: [{list}].length }}\n}}",
        list = (0..280).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
    );
    let program = common::agent_program(&agent, &[]);
    let widest = program.max_registers();
    assert!(
        widest > 256,
        "the test needs a wide function ({widest} registers)"
    );
    // expected: sum over i of (300 n + 44850 + 2 (n + 299)) + 2 i, with n = i
    let expected: i64 = (0..3)
        .map(|i| 300 * i + 44850 + 2 * (i + 299) + 2 * i)
        .sum();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let out = rt.block_on(ajs::Runner::default().run_program(
        &program,
        &json!({ "k": 3 }),
        &ajs::Options::default(),
    ));
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(
        out.result.to_json(),
        Some(json!({ "t": expected, "arr": 280 }))
    );
}

/// A frame that opened a `try` and was dropped by an unwind leaves its call-stack slot (with
/// its flag) to the next calls at its depth, which return with the results JavaScript gives.
#[test]
fn calls_after_an_unwind_return_as_before() {
    let agent = "function g(n) {\n  try { n = n + 1 } catch (e) { n = 0 }\n  if (n > 0) { Error('deep ' + n) }\n  return n\n}\nfunction h(n) {\n  return n * 2\n}\nfunction main() {\n  let s = 0\n  let i = 0\n  while (i < 3) {\n    try { s = s + g(i) } catch (e) { s = s + 100 }\n    s = s + h(i) + h(h(i))\n    i = i + 1\n  }\n  return { s }\n}";
    let program = common::agent_program(agent, &[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let out = rt.block_on(ajs::Runner::default().run_program(
        &program,
        &json!({}),
        &ajs::Options::default(),
    ));
    assert!(out.error.is_none(), "{:?}", out.error);
    // each round: 100 (the caught error) + 2 i + 4 i
    assert_eq!(out.result.to_json(), Some(json!({ "s": 318 })));
}

/// Programs whose widest function needs each window size of the dispatch loop (up to 32
/// registers, up to 256, more) give the results JavaScript gives.
#[test]
fn every_register_window_size_gives_the_same_results() {
    for n in [3usize, 20, 30, 40, 120, 250, 270] {
        let items: Vec<String> = (0..n).map(|i| format!("a * {i} + b")).collect();
        let code = format!(
            "let xs = [{}]\nlet t = 0\nlet i = 0\nwhile (i < xs.length) {{ t = t + xs[i]\n i = i + 1 }}\nreturn t",
            items.join(", ")
        );
        let expected: i64 = (0..n as i64).map(|i| 2 * i + 1).sum();
        assert_eq!(
            ok(&code, json!({ "a": 2, "b": 1 })),
            Some(json!(expected)),
            "{n} items"
        );
    }
}

/// `JSON.parse` and `JSON.stringify` give what Node gives for repeated keys (a repeated key keeps
/// its first place and takes the last value) in objects small and large (the parser indexes an
/// object's keys past 8 members), integer-like keys, replacer lists, indentation, numbers
/// (integers written without a string first, the rest as JavaScript prints them), and strings
/// with escapes, surrogates and control characters at their start, middle and end.
#[test]
fn json_round_trips_match_node() {
    let mut cases: Vec<String> = vec![
        r#"JSON.stringify(JSON.parse('{"a":1,"b":2,"a":3}'))"#.into(),
        r#"Object.keys(JSON.parse('{"b":1,"2":2,"a":3,"1":4,"b":5}'))"#.into(),
        r#"JSON.parse('"plain"')"#.into(),
        r#"JSON.parse('"\\n starts"')"#.into(),
        r#"JSON.parse('"ends \\t"')"#.into(),
        r#"JSON.parse('"mid\\"dle \\\\ \\/ \\b\\f\\r x"')"#.into(),
        r#"JSON.parse('"\\u0041\\ud83d\\ude00\\u00e9 and more"')"#.into(),
        r#"JSON.stringify('he said "hi"\n\u0001 ok x \ud83d\ude00 \\ end')"#.into(),
        // a lone surrogate (JSON cannot carry one back from Node: compared by its units)
        r#"[...JSON.stringify('a\ud800b')].map(c => c.charCodeAt(0))"#.into(),
        r#"JSON.parse('"x\\ud800"').charCodeAt(1)"#.into(),
        r#"JSON.stringify(['', 'a', '"', '\\', 'long plain text without escapes at all'])"#.into(),
        r#"JSON.stringify(JSON.parse('{"k":"v","n":[1,{"k":"w","k":"x"}],"e":{}}'))"#.into(),
        "JSON.stringify([0, -0, 1, -1, 42, -1234567, 9007199254740991, 9007199254740992, -9007199254740993, 1e21, 1.5, -0.000001, 123456789012345680000, 2 ** 64])".into(),
        "JSON.stringify({ b: 1, 2: 2, a: 3, 1: 4, c: undefined, d: [undefined, 1] })".into(),
        "JSON.stringify({ b: 1, 2: 2, a: 3, 1: 4 }, ['a', '1', 'zz'])".into(),
        "JSON.stringify({ b: 1, a: { y: 2, x: [3, { q: 'r' }] } }, null, 2)".into(),
        // objects that share keys (same keys, other orders, fewer, more, repeated, nested)
        r#"JSON.stringify(JSON.parse('[{"a":1,"b":2},{"a":3,"b":4},{"b":5,"a":6},{"a":7},{"a":8,"b":9,"c":10},{"a":1,"a":2,"b":3},{"b":{"b":{"a":1}},"a":[{"a":2,"b":3}]}]'))"#.into(),
        r#"JSON.parse('[{"id":1,"name":"x"},{"id":2,"name":"y"}]').map(o => Object.keys(o).join() + o.id + o.name).join('|')"#.into(),
        "JSON.stringify([{ id: 1, name: 'a' }, { id: 2, name: 'b' }, { name: 'c', id: 3 }].map(o => ({ ...o, extra: o.id * 2 })))".into(),
    ];
    for n in [7usize, 8, 9, 20] {
        let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        // repeats of the first, a middle and the last key, after all of them
        let repeats = format!(
            "\"k0\":\"first\",\"k{}\":\"mid\",\"k{}\":\"last\"",
            n / 2,
            n - 1
        );
        cases.push(format!(
            "JSON.stringify(JSON.parse('{{{},{repeats}}}'))",
            members.join(",")
        ));
        cases.push(format!(
            "Object.keys(JSON.parse('{{{},{repeats},\"new\":1}}')).join()",
            members.join(",")
        ));
    }
    let cases: Vec<&str> = cases.iter().map(String::as_str).collect();
    common::compare_with_node(&cases, common::Form::Expression);
}

/// Comparisons the compiler fuses with the branch on their result (`if`, `while` at the top and
/// the bottom, `?:`), against Node: every operator, with a register and with a constant on the
/// right, over numbers (NaN, ±0, infinities), strings, and, for `===` and `!==`, values of other
/// types; next to the same comparisons kept as values, and tests that cannot be fused (`||`,
/// `&&`, a comparison stored in a variable the branch tests).
#[test]
fn fused_branches_match_node() {
    let numbers = ["1", "2", "-0", "0", "1.5", "NaN", "Infinity", "-Infinity"];
    let strings = ["'a'", "'b'", "''", "'ab'", "'2'", "'10'"];
    let others = ["null", "undefined", "true", "false", "[1]", "{ a: 1 }"];
    let mut cases = Vec::new();
    let mut case = |op: &str, x: &str, y: &str| {
        // `y` also as a literal: a constant right operand (`JumpIfLtK` …; `JumpIfLtI` … for a
        // small integer)
        cases.push(format!(
            "const a = {x}\nconst b = {y}\nconst r = []\n\
             if (a {op} b) {{ r.push(1) }} else {{ r.push(0) }}\n\
             if (a {op} {y}) {{ r.push(1) }} else {{ r.push(0) }}\n\
             r.push(a {op} b ? 'y' : 'n')\n\
             r.push(a {op} b)\n\
             let n = 0\n\
             while (a {op} b) {{ n = n + 1\n if (n > 2) {{ break }} }}\n\
             let m = 0\n\
             while (m < 2 && a {op} {y}) {{ m = m + 1 }}\n\
             const t = a {op} b\n\
             if (t) {{ r.push('t') }}\n\
             if (n > 5 || a {op} b) {{ r.push('o') }}\n\
             return [r, n, m, t]"
        ));
    };
    for op in ["<", "<=", ">", ">=", "===", "!=="] {
        for x in numbers {
            for y in numbers {
                case(op, x, y);
            }
        }
        for x in strings {
            for y in strings {
                case(op, x, y);
            }
        }
    }
    for op in ["===", "!=="] {
        for x in others.iter().chain(&numbers[..2]).chain(&strings[..2]) {
            for y in others.iter().chain(&numbers[..2]).chain(&strings[..2]) {
                case(op, x, y);
            }
        }
    }
    // (in chunks: one Node command line holds at most 128 KB)
    for chunk in cases.chunks(100) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        common::compare_with_node(&chunk, common::Form::Block);
    }
}

/// Tests made of `&&`, `||` and `!` are lowered as branches (no value is made): the same
/// outcome, the same operands evaluated in the same order, as Node, for `if`, `while` (its test
/// at the top and again at the bottom) and `?:`, over truthy and falsy values of every kind.
#[test]
fn logical_tests_match_node() {
    let values = ["true", "false", "0", "1", "''", "'s'", "null", "NaN"];
    let shapes = [
        "(A && B) || C",
        "A && (B || C)",
        "!(A || B) && C",
        "!A || !(B && C)",
        "A || B || C",
        "(A || B) && !C",
        "!!A && (B || !C)",
    ];
    let mut cases = Vec::new();
    for shape in shapes {
        for (i, x) in values.iter().enumerate() {
            let (y, z) = (
                values[(i + 3) % values.len()],
                values[(i + 5) % values.len()],
            );
            // each operand logs that it ran; the comparison in it fuses with its branch
            let test = shape
                .replace('A', "(log.push('a') > 0 && x)")
                .replace('B', "(log.push('b') > 0 && y)")
                .replace('C', "(log.push('c') > 0 && z)");
            cases.push(format!(
                "const x = {x}\nconst y = {y}\nconst z = {z}\nconst log = []\n\
                 if ({test}) {{ log.push('then') }} else {{ log.push('else') }}\n\
                 let n = 0\n\
                 while (n < 3 && ({test})) {{ n = n + 1\n log.push('n') }}\n\
                 log.push(({test}) ? 'yes' : 'no')\n\
                 return [log, n]"
            ));
        }
    }
    let cases: Vec<&str> = cases.iter().map(String::as_str).collect();
    common::compare_with_node(&cases, common::Form::Block);
}

/// Spread into a builtin call counts arguments as JavaScript does: any number for the variadic
/// ones, extra arguments ignored and missing ones `undefined` for the others.
#[test]
fn spread_into_builtins_takes_any_number_of_arguments() {
    let make = "const a = []\nlet i = 0\nwhile (i < 300) { a.push(i % 277)\n i = i + 1 }\n";
    let cases: Vec<String> = [
        "return Math.max(...a)",
        "return Math.min(...a, -1)",
        "const b = [1]\nb.push(...a)\nreturn [b.length, b[2999], b[3000]]",
        "const b = [1, 2]\nb.splice(1, 0, ...a)\nreturn [b.length, b[0], b[1], b[3001]]",
        "const b = [9]\nb.unshift(...a)\nreturn [b.length, b[0], b[3000]]",
        "return [0].concat(...[a, a]).length",
        "return String.fromCharCode(...a.slice(0, 300).map(x => 65 + x % 26)).length",
        "return 'x'.padStart(...[3, 'ab', 'ignored'])",
        "return 'abc'.charAt(...[1, 2, 3])",
        "return 'x'.padStart(...[])",
        "return Math.max(...[])",
    ]
    .iter()
    .map(|c| format!("{make}{c}"))
    .collect();
    let cases: Vec<&str> = cases.iter().map(String::as_str).collect();
    common::compare_with_node(&cases, common::Form::Block);
}

/// Match results carry `index`, `input` and `groups` as in JavaScript (`matchAll` gives an array
/// here, an iterator there: spread it for Node).
#[test]
fn match_results_have_index_input_and_groups() {
    let cases = [
        "const m = /b/.exec('abc')\nreturn [m.index, m.input, m.groups, m.length, m[0]]",
        "const m = '2020-01-05'.match(/(?<y>\\d+)-(?<m>\\d+)-(?<d>\\d+)/)\nreturn [m.index, m.groups.y, m.groups.d, m.groups, JSON.stringify(m)]",
        "return [...'a1b22'.matchAll(/\\d+/g)].map(m => [m[0], m.index, m.input])",
        "return [...'a1b22'.matchAll(/(?<n>\\d+)/g)].map(m => m.groups.n + '@' + m.index)",
        "const m = /(?<a>x)|(?<b>y)/.exec('zy')\nreturn [m.groups.a, m.groups.b, Object.keys(m.groups), m.index]",
        "const m = /3/.exec(12345)\nreturn [m.input, m.index]",
        "const { index, input } = /c/.exec('abc')\nreturn [index, input]",
        "const re = /o/g\nre.exec('foo')\nconst m = re.exec('foo')\nreturn [m.index, re.lastIndex]",
        "const m = /b/.exec('abc')\nconst c = m.slice()\nreturn [c.index, m.map(x => x).index, m['index']]",
        "const all = []\nlet i = 0\nwhile (i < 50) { all.push(/(?<d>\\d)/.exec('ab' + i)); i = i + 1 }\nreturn all.map(m => m.index + m.groups.d).join()",
    ];
    common::compare_with_node(&cases, common::Form::Block);
}

/// Long left-leaning chains (`a + b + c + …`) are not nesting: hundreds of terms lower and run
/// as in JavaScript, whatever the operators along the chain.
#[test]
fn long_operator_chains_are_not_nesting() {
    let plus: Vec<String> = (0..400).map(|i| format!("x{}", i % 3)).collect();
    let mixed: Vec<String> = (0..300)
        .map(|i| match i % 4 {
            0 if i == 0 => format!("{i}"),
            0 => format!("+ {i}"),
            1 => format!("- {i} * 2"),
            2 => format!("+ '{i}'.length"),
            _ => format!("- {i} % 7"),
        })
        .collect();
    let words: Vec<String> = (0..200).map(|i| format!("'w{i}'")).collect();
    let cases = [
        format!(
            "const x0 = 1\nconst x1 = 2\nconst x2 = 3\nreturn {}",
            plus.join(" + ")
        ),
        format!("return {}", mixed.join(" ")),
        format!("return ({}).length", words.join(" + ")),
        format!("return {} < 5", words.join(" + ")),
        format!(
            "let s = 0\nif ({} > 10) {{ s = 1 }}\nreturn s",
            plus.join(" + ").replace('x', "")
        ),
    ];
    let cases: Vec<&str> = cases.iter().map(String::as_str).collect();
    common::compare_with_node(&cases, common::Form::Block);
}
