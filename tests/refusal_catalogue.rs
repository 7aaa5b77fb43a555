//! The refusal catalogue (issue 29): every place the compiler refuses a program, found by
//! scanning its sources for the refusal constructors (`fail(`, `fail_at(`, `Fail::new(`), has a
//! program here that reaches it, and every message met says what to write instead (a clause
//! such as "write …"/"use …" followed by code). A new refusal site without an entry fails
//! `every_refusal_site_has_a_catalogue_entry`; a message without a replacement fails
//! `every_catalogued_refusal_names_a_replacement` (or, for a site no short program reaches,
//! `every_literal_refusal_names_a_replacement`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ajs_compiler::{compile, CompileOptions, Mode};

/// How an entry's program is compiled.
#[derive(Clone, Copy)]
enum How {
    /// Eval, with the context keys `o xs s x a b` and the atoms `httpFetch llmPredict`.
    E,
    /// An agent program, with the same atoms.
    A,
    /// Eval with no atoms granted.
    NoAtoms,
    /// A SafeFunction body whose parameter is named `constructor`.
    BadParam,
}

/// A program, written out or generated (for the limits a short program cannot reach).
enum Src {
    Text(&'static str),
    Gen(fn() -> String),
}

use How::*;
use Src::*;

/// (site key, how, program). A site key is the start of the site's message literal (up to its
/// first `{`), or `file.rs:expression` for a site whose message is computed.
const CATALOGUE: &[(&str, How, Src)] = &[
    // agent.rs
    (
        "Imports are not supported: remove the import",
        A,
        Text("import x from 'y'\nfunction main() { return {} }"),
    ),
    (
        "Exports are not supported: remove `export`",
        A,
        Text("export default function main() { return {} }"),
    ),
    (
        "Exports are not supported: remove `export`",
        A,
        Text("export function main() { return {} }"),
    ),
    (
        "Classes are not supported. AJS has no classes: write a top-level helper",
        A,
        Text("class A {}\nfunction main() { return {} }"),
    ),
    (
        "only function declarations may appear at the top level",
        A,
        Text("let x = 1\nfunction main() { return {} }"),
    ),
    (
        "Source must contain a function declaration",
        A,
        Text("// nothing"),
    ),
    (
        "Helper function cannot share a name with the entry function: …",
        A,
        Text("function f(a) { return a }\nfunction f() { return {} }"),
    ),
    (
        "Duplicate helper function name: …",
        A,
        Text("function g() { return 1 }\nfunction g() { return 2 }\nfunction main() { return {} }"),
    ),
    (
        "async functions and generators are not supported: atom calls",
        A,
        Text("async function main() { return {} }"),
    ),
    (
        "agent.rs:forbidden_msg",
        A,
        Text("function main({ constructor }) { return {} }"),
    ),
    (
        "agent.rs:strict_reserved_msg",
        A,
        Text("function main({ arguments }) { return {} }"),
    ),
    (
        "Unsupported parameter pattern: rest parameters",
        A,
        Text("function main(...args) { return {} }"),
    ),
    (
        "Unsupported parameter pattern: { ...rest }",
        A,
        Text("function main({ a, ...rest }) { return {} }"),
    ),
    (
        "Only simple parameter names are supported (rename",
        A,
        Text("function main({ [k]: v }) { return {} }"),
    ),
    (
        "an entry function takes one destructured object or plain parameters",
        A,
        Text("function main({ a }, b) { return {} }"),
    ),
    (
        "Helper '…' parameters must be plain identifiers",
        A,
        Text("function h({ a }) { return a }\nfunction main() { return {} }"),
    ),
    (
        "Unsupported parameter pattern: ArrayPattern",
        A,
        Text("function main([a, b]) { return {} }"),
    ),
    (
        "Duplicate parameter name: …",
        A,
        Text("function h(a, a) { return a }\nfunction main() { return {} }"),
    ),
    (
        "too many parameters (more than 255)",
        A,
        Gen(many_helper_params),
    ),
    (
        "Helper '…' expects … argument(s), got …",
        A,
        Text("function h(a, b) { return a }\nfunction main() { return { v: h(1) } }"),
    ),
    // call.rs
    (
        "computed method calls (o[k]()) are not supported",
        E,
        Text("o['a' + s]()"),
    ),
    (
        "calling a function expression is not supported in AJS; …",
        E,
        Text("(x => x)(1)"),
    ),
    (
        "only atoms, builtins (e.g. Math.max) and methods",
        E,
        Text("(a || b)()"),
    ),
    ("call.rs:forbidden_msg", E, Text("constructor(1)")),
    (
        "'…' is a variable, not a function",
        E,
        Text("let f = 1\nreturn f(2)"),
    ),
    ("'…' is a context value, not a function", E, Text("x(1)")),
    ("call.rs:m", E, Text("Promise.all([])")),
    (
        "atom '…' takes one object of named inputs",
        E,
        Text("httpFetch({ url: 'u' }, 2)"),
    ),
    ("call.rs:hints::builtin_call_msg", E, Text("String(x)")),
    (
        "call.rs:hints::undefined_call_msg",
        E,
        Text("structuredClone(o)"),
    ),
    (
        "call.rs:namespace_member_msg",
        E,
        Text("Object.groupBy(xs, x => x)"),
    ),
    ("call.rs:alt", E, Text("console.table(xs)")),
    ("call.rs:msg", E, Text("Map.groupBy(xs)")),
    (
        "call.rs:hints::method_msg",
        E,
        Text("Date('2024-01-02').getUTCDay()"),
    ),
    ("call.rs:hints::arity_msg", E, Text("s.trim(1)")),
    ("call.rs:hints::arity_msg", E, Text("filter(o)")),
    // replace.rs, callbacks.rs (replace with an arrow callback)
    (
        "a rest parameter needs a name",
        E,
        Text("s.replace(/a/g, (m, ...[x]) => x)"),
    ),
    // brackets.rs
    (
        "brackets.rs:message",
        A,
        Text("function main() {\n  let x = 1\n  if (x) {\n    x = 2\n  return { x }\n}\n"),
    ),
    ("… (the `…` at …:… is never closed", E, Text("f(1 2")),
    // expr.rs: strict-mode literals
    ("expr.rs:m", E, Text("010")),
    ("expr.rs:m", E, Text("'a\\1'")),
    // callbacks.rs
    ("callbacks.rs:msg", E, Text("xs.toSpliced(x => x)")),
    (
        "callbacks.rs:super::hints::callback_msg",
        E,
        Text("xs.map(parseInt)"),
    ),
    (
        "'…' takes … argument(s) in AJS, got …",
        E,
        Text("xs.map(x => x, 1)"),
    ),
    (
        "async callbacks are not supported",
        E,
        Text("xs.map(async x => x)"),
    ),
    (
        "rest parameters (...args) are not supported in callbacks",
        E,
        Text("xs.map((...a) => a)"),
    ),
    (
        "default values for callback parameters are not supported",
        E,
        Text("xs.map((x = 1) => x)"),
    ),
    (
        "this callback parameter receives nothing to destructure",
        E,
        Text("xs.map((x, i, arr, { a }) => a)"),
    ),
    (
        "a callback cannot assign to '…'",
        E,
        Text("let t = 0\nxs.forEach(x => { t += x })\nreturn t"),
    ),
    (
        "'…' takes a comparator written as an arrow function",
        E,
        Text("xs.sort(1)"),
    ),
    (
        "'…' takes 1 argument, got …",
        E,
        Text("xs.sort((a, b) => a - b, 1)"),
    ),
    (
        "the comparator must be a plain arrow function",
        E,
        Text("xs.sort(async (a, b) => a - b)"),
    ),
    // destructure.rs
    (
        "Identifier '…' has already been declared; rename one of them",
        E,
        Text("const { a, b: a } = o\nreturn a"),
    ),
    (
        "destructure.rs:forbidden_msg",
        E,
        Text("const { constructor: c } = o\nreturn c"),
    ),
    (
        "too many properties before ...rest",
        E,
        Gen(many_props_before_rest),
    ),
    // expr.rs
    ("expr.rs:hints::binary_op_msg", E, Text("'a' in o")),
    ("expr.rs:hints::unary_op_msg", E, Text("~x")),
    ("private fields are not supported in AJS", E, Text("o.#p")),
    ("expr.rs:hints::new_msg", E, Text("new Foo(1)")),
    ("'this' is not supported in AJS", E, Text("this.a")),
    ("expr.rs:ARROW_MSG", E, Text("xs.at(x => x)")),
    (
        "generators are not supported in AJS; build the values",
        E,
        Text("(function* () {})"),
    ),
    (
        "function expressions are not supported in AJS; …",
        E,
        Text("xs.at(function (x) { return x })"),
    ),
    (
        "Classes are not supported. AJS has no classes: write a top-level helper",
        E,
        Text("(class {})"),
    ),
    (
        "AJS has no await",
        A,
        Text("function main() { let r = await httpFetch({ url: 'u' })\nreturn {} }"),
    ),
    (
        "the comma operator (sequence expression)",
        E,
        Text("(x, xs)"),
    ),
    ("tagged templates are not supported", E, Text("s`x`")),
    ("BigInt literals are not supported", E, Text("10n")),
    (
        "assignment inside an expression is not supported",
        E,
        Text("let a1 = 1\nlet b1 = (a1 = 2)\nreturn b1"),
    ),
    (
        "'++'/'--' are only allowed as statements",
        E,
        Text("let i = 0\nlet j = i++\nreturn j"),
    ),
    (
        "'super' is not supported in AJS",
        E,
        Text("({ m: super.x })"),
    ),
    ("import is not available", E, Text("import('x')")),
    ("Math.… is a function: call it", E, Text("Math.max")),
    ("expr.rs:namespace_member_msg", E, Text("Number.NOPE")),
    (
        "template literal has too many parts",
        E,
        Gen(many_template_parts),
    ),
    (
        "getters and setters are not supported",
        E,
        Text("({ get a() { return 1 } })"),
    ),
    (
        "methods in object literals are not supported",
        E,
        Text("({ m() { return 1 } })"),
    ),
    ("expr.rs:forbidden_msg", E, Text("({ __proto__: 1 })")),
    (
        "unsupported object key; write an identifier",
        E,
        Text("({ 10n: 1 })"),
    ),
    // mod.rs
    ("nesting too deep (more than … levels)", E, Gen(deep_arrays)),
    ("mod.rs:forbidden_msg", BadParam, Text("return 1")),
    // parallel.rs
    (
        "parallel.rs:SHAPE",
        E,
        Text("let calls = []\nreturn parallel(calls)"),
    ),
    (
        "parallel() takes the items and at most one options object",
        E,
        Text("parallel([], {}, 1)"),
    ),
    (
        "spread is not supported inside parallel([...]); …",
        E,
        Text("parallel([...xs])"),
    ),
    ("parallel.rs:MSG", E, Text("parallel([], 1)")),
    (
        "unknown parallel() option '…'",
        E,
        Text("parallel([], { fast: true })"),
    ),
    // scope.rs
    (
        "Cannot access '…' before initialization",
        E,
        Text("let y = z\nlet z = 1\nreturn y"),
    ),
    (
        "scope.rs:forbidden_msg",
        E,
        Text("let prototype = 1\nreturn 1"),
    ),
    (
        "scope.rs:super::hints::builtin_value_msg",
        E,
        Text("let m = Math\nreturn m"),
    ),
    ("scope.rs:m", E, Text("let p = Promise\nreturn p")),
    (
        "'…' is an atom: call it",
        E,
        Text("let v = httpFetch\nreturn v"),
    ),
    (
        "Identifier '…' has already been declared; assign it without let",
        E,
        Text("let v = 1\nlet v = 2\nreturn v"),
    ),
    (
        "scope.rs:super::hints::undefined_msg",
        E,
        Text("typeof nope"),
    ),
    (
        "scope.rs:strict_reserved_msg",
        E,
        Text("let eval = 1\nreturn 1"),
    ),
    // spread.rs
    ("spread.rs:forbidden_msg", E, Text("o.constructor(...xs)")),
    (
        "….… cannot be called with spread arguments",
        E,
        Text("Math.foo(...xs)"),
    ),
    (
        "'…' cannot be called with spread arguments; only builtins and methods",
        E,
        Text("xs.frobnicate(...xs)"),
    ),
    (
        "'…' cannot be called with spread arguments; pass the values one by one",
        E,
        Text("Error(...xs)"),
    ),
    (
        "spread arguments are only supported for builtins and methods",
        E,
        Text("(xs[0])(...xs)"),
    ),
    // stmt.rs
    (
        "Unsupported statement type: DoWhileStatement",
        E,
        Text("do { } while (false)\nreturn 1"),
    ),
    (
        "stmt.rs:hints::for_msg",
        E,
        Text("for (let i = 0; i < xs.length; i++) { }\nreturn 1"),
    ),
    (
        "stmt.rs:hints::for_in_msg",
        E,
        Text("for (const k in o) { }\nreturn 1"),
    ),
    (
        "stmt.rs:hints::for_of_msg",
        E,
        Text("for (const v of xs) { }\nreturn 1"),
    ),
    (
        "stmt.rs:hints::switch_msg",
        E,
        Text("switch (x) { case 1: return 'a' }\nreturn 'b'"),
    ),
    (
        "stmt.rs:hints::throw_msg",
        E,
        Text("throw new Error('bad ' + x)\nreturn 1"),
    ),
    (
        "labels are not supported in AJS; use a flag variable with `break`",
        E,
        Text("while (true) { break outer }\nreturn 1"),
    ),
    (
        "labels are not supported in AJS; use a flag variable with `continue`",
        E,
        Text("while (true) { continue outer }\nreturn 1"),
    ),
    (
        "Unsupported statement type: LabeledStatement",
        E,
        Text("outer: while (true) { break outer }\nreturn 1"),
    ),
    (
        "Unsupported statement type: DebuggerStatement",
        E,
        Text("debugger\nreturn 1"),
    ),
    (
        "Unsupported statement type: WithStatement",
        A,
        Text("function main() { with (Math) { }\nreturn {} }"),
    ),
    (
        "call.rs:hints::undefined_call_msg",
        NoAtoms,
        Text("llmPredict({ prompt: 'hi' })"),
    ),
    (
        "generators are not supported in AJS; build the values",
        E,
        Text("function* g() {}\nreturn 1"),
    ),
    (
        "async functions are not supported in AJS",
        E,
        Text("async function g() {}\nreturn 1"),
    ),
    (
        "stmt.rs:hints::nested_function_msg",
        E,
        Text("function inner(a) { return a }\nreturn 1"),
    ),
    (
        "Unsupported statement type: ClassDeclaration",
        E,
        Text("class A {}\nreturn 1"),
    ),
    (
        "Imports are not supported: remove the import",
        E,
        Text("import x from 'y'\nreturn 1"),
    ),
    (
        "unsupported statement; write",
        E,
        Text("export const q = 1\nreturn 1"),
    ),
    ("AJS has no `var`", E, Text("var v = 1\nreturn v")),
    (
        "`using` declarations are not supported",
        E,
        Text("using r = o\nreturn 1"),
    ),
    (
        "stmt.rs:hints::function_value_msg",
        E,
        Text("const f = x => x + 1\nreturn f(2)"),
    ),
    (
        "`finally` is not supported in AJS",
        E,
        Text("try { } catch (e) { } finally { }\nreturn 1"),
    ),
    (
        "destructuring a caught error is not supported",
        E,
        Text("try { } catch ({ message }) { }\nreturn 1"),
    ),
    (
        "Assignment to constant variable '…'",
        E,
        Text("const c = 1\nc = 2\nreturn c"),
    ),
    (
        "Cannot assign to builtin '…'",
        E,
        Text("Math = 1\nreturn 1"),
    ),
    (
        "Cannot assign to builtin '…'",
        E,
        Text("JSON += 1\nreturn 1"),
    ),
    (
        "AJS has no member assignment (`o.k = v`, `a[i] = v`). Build",
        E,
        Text("o.n++\nreturn o"),
    ),
    (
        "stmt.rs:hints::member_assign_msg",
        E,
        Text("o.a.b = 1\nreturn o"),
    ),
    (
        "destructuring assignment is not supported",
        E,
        Text("let p = 1\nlet q = 2;\n[p, q] = [q, p]\nreturn p"),
    ),
    (
        "chained assignment (a = b = 1) is not supported",
        E,
        Text("let p = 1\nlet q = 2\np = q = 3\nreturn p"),
    ),
    (
        "stmt.rs:hints::compound_op_msg",
        E,
        Text("let y = 1\ny |= 2\nreturn y"),
    ),
    // stack.rs
    ("stack.rs:NESTING_MSG", E, Gen(deep_parens)),
    // lib.rs: Eval read as one expression
    (
        "… (code made of statements must `return` its result",
        E,
        Text("let total = 1\ntotal * 2"),
    ),
];

/// Sites no short program reaches (internal invariants, limits of a size the catalogue does not
/// build): their literal messages are still checked for a replacement.
const UNREACHED: &[(&str, &str)] = &[
    (
        "internal compiler error",
        "an invariant of the lowering; never reached",
    ),
    (
        "half-way (an internal test refusal",
        "a unit test's injected failure",
    ),
    (
        "sorting with a comparator needs .splice",
        "the native always exists",
    ),
    (
        "...rest in array patterns needs .slice",
        "the native always exists",
    ),
    ("rest parameters need .slice", "the native always exists"),
    (
        "'…' takes a pattern and a replacement",
        "is_replace_with_callback checked for two arguments, the second an arrow",
    ),
    (
        "spread (...) in array literals is not supported here",
        "spread elements take another path first",
    ),
    (
        "unsupported array element",
        "every element kind is handled first",
    ),
    (
        "unsupported argument",
        "every argument kind is handled first",
    ),
    ("a function needs a body", "the parser requires one"),
    (
        "Helper function must have a name",
        "the parser requires one",
    ),
    (
        "unsupported assignment target",
        "the parser refuses the others",
    ),
    (
        "unsupported computed key; write [k]: v",
        "every computed key is an expression",
    ),
    (
        "unsupported computed key; write { [k]: value }",
        "every computed key is an expression",
    ),
    (
        "unsupported key in a destructuring pattern",
        "every static key is a name, string or number",
    ),
    (
        "unsupported optional chain",
        "every chain element is a call or member",
    ),
    (
        "TypeScript syntax is not supported",
        "scripts are parsed as JavaScript",
    ),
    (
        "unsupported expression",
        "every JavaScript expression kind is handled first",
    ),
    (
        "Only simple parameter names are supported; write",
        "the parameter rewrite reads `a: b = 1` as an example value first",
    ),
    (
        "Unsupported parameter pattern: nested destructuring",
        "the parameter rewrite reads `a: { b }` as an example value first",
    ),
    (
        "generators (yield) are not supported",
        "the parser refuses yield outside a generator, and generators are refused first",
    ),
    (
        "invalid escape sequence in template literal",
        "the parser refuses it in an untagged template, and tagged ones are refused first",
    ),
    (
        "a destructuring declaration needs a value",
        "the parser refuses it first",
    ),
    (
        "Missing initializer in const declaration '…'",
        "the parser refuses it first",
    ),
    (
        "`try` needs a `catch` block in AJS",
        "`finally`, the only other form, is refused first",
    ),
    (
        "`break` outside a `while` loop",
        "the parser refuses it first",
    ),
    (
        "`continue` outside a `while` loop",
        "the parser refuses it first",
    ),
    (
        "too many constants (more than 65535)",
        "a program of 65536 constants (tests/limits.rs)",
    ),
    (
        "too many registers (more than 65535",
        "a program of 65536 live values",
    ),
    ("program too long", "a program of millions of instructions"),
    ("too many atoms", "65536 distinct atoms"),
    (
        "too many parameters or context keys used",
        "256 context keys (tests/limits.rs)",
    ),
    ("source is too large", "a source over 2 GiB"),
    (
        "nesting too deep for the stack this system grants",
        "a system without the stack it needs",
    ),
    ("mod.rs:msg", "the refusal constructors themselves"),
    (
        "lib.rs:message",
        "the parser's own diagnostics (SyntaxError: …)",
    ),
    (
        "SyntaxError: could not parse the code",
        "a parser that reports no diagnostic",
    ),
];

fn many_helper_params() -> String {
    let ps: Vec<String> = (0..256).map(|i| format!("p{i}")).collect();
    format!(
        "function h({}) {{ return 1 }}\nfunction main() {{ return {{}} }}",
        ps.join(", ")
    )
}

fn many_props_before_rest() -> String {
    let ps: Vec<String> = (0..256).map(|i| format!("k{i}")).collect();
    format!("const {{ {}, ...rest }} = o\nreturn rest", ps.join(", "))
}

fn many_template_parts() -> String {
    format!("`{}`", "${x}-".repeat(300))
}

fn deep_arrays() -> String {
    format!("{}1{}", "[".repeat(220), "]".repeat(220))
}

fn deep_parens() -> String {
    format!("{}1{}", "(".repeat(300), ")".repeat(300))
}

/// The message `how`/`src` is refused with.
fn refusal(how: How, src: &str) -> String {
    let names: &[&str] = match how {
        BadParam => &["constructor"],
        _ => &["o", "xs", "s", "x", "a", "b"],
    };
    let ext: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let atoms: Vec<String> = match how {
        NoAtoms => Vec::new(),
        _ => vec!["httpFetch".into(), "llmPredict".into()],
    };
    let opts = CompileOptions {
        mode: match how {
            A => Mode::Agent,
            E | NoAtoms => Mode::Eval,
            BadParam => Mode::FunctionBody,
        },
        externals: &ext,
        atoms: &atoms,
        source_name: "<source>",
    };
    match compile(src, &opts) {
        Ok(_) => panic!("{src:?} compiled; the catalogue expects a refusal"),
        Err(e) => e.message,
    }
}

/// Verbs that open a replacement clause.
const VERBS: &[&str] = &[
    "write ",
    "use ",
    "call ",
    "pass ",
    "declare ",
    "rename ",
    "remove ",
    "move ",
    "add ",
    "split ",
    "assign ",
    "put ",
    "give ",
    "list ",
    "name each",
    "name it",
    "compute ",
    "build ",
    "drop ",
    "convert ",
    "check ",
    "close ",
    "read ",
    "take ",
    "wrap ",
    "join ",
    "return ",
    "destructure ",
    "copy ",
    "e.g. ",
];

/// Whether `message` says what to write: a verb of [`VERBS`] followed by code (a bracket, an
/// operator, a quote, a backtick or a member access `a.b`).
fn has_replacement(message: &str) -> bool {
    let lower = message.to_lowercase();
    VERBS.iter().any(|v| {
        lower.match_indices(v).any(|(i, _)| {
            let rest = &message[i + v.len()..];
            let b = rest.as_bytes();
            rest.contains([
                '(', ')', '[', ']', '{', '}', '=', '\'', '`', '+', '?', '!', '<', '%',
            ]) || b
                .windows(3)
                .any(|w| w[0].is_ascii_alphanumeric() && w[1] == b'.' && w[2].is_ascii_alphabetic())
        })
    })
}

/// One refusal site: its file, the key of [`CATALOGUE`], and its literal message when the
/// message is a literal or a `format!` of one.
#[derive(Debug)]
struct Site {
    file: String,
    key: String,
    literal: Option<String>,
}

/// The compiler's sources.
fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("compiler sources")
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../compiler/src"),
        &mut out,
    );
    assert!(
        out.len() > 10,
        "the compiler's sources were not found: {out:?}"
    );
    out
}

/// The end (exclusive) of the bracketed text starting after an opening bracket at `from`, skipping
/// string literals.
fn close(s: &[u8], from: usize) -> usize {
    let (mut depth, mut i, mut in_str) = (1, from, false);
    while i < s.len() && depth > 0 {
        match (in_str, s[i]) {
            (true, b'\\') => i += 1,
            (true, b'"') => in_str = false,
            (false, b'"') => in_str = true,
            (false, b'(' | b'[' | b'{') => depth += 1,
            (false, b')' | b']' | b'}') => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    i - 1
}

/// The text of the first string literal of `s`, unescaped.
fn first_literal(s: &str) -> Option<String> {
    let start = s.find('"')? + 1;
    let mut out = String::new();
    let mut chars = s[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                '\n' => {
                    // a line continuation: the next line's leading blanks are dropped
                    let rest: String = chars.clone().collect();
                    let skip = rest.len() - rest.trim_start().len();
                    for _ in 0..skip {
                        chars.next();
                    }
                }
                other => out.push(other),
            },
            '"' => return Some(out),
            c => out.push(c),
        }
    }
    None
}

/// A message literal as a key: each `{…}` placeholder becomes `…`, `{{`/`}}` their brace.
fn template_key(lit: &str) -> String {
    let mut out = String::new();
    let mut chars = lit.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                for d in chars.by_ref() {
                    if d == '}' {
                        break;
                    }
                }
                out.push('…');
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether `message` holds the pieces of catalogue key `key` between its `…`, in order.
fn matches_key(message: &str, key: &str) -> bool {
    let mut at = 0;
    key.split('…')
        .filter(|p| !p.is_empty())
        .all(|p| match message[at..].find(p) {
            Some(i) => {
                at += i + p.len();
                true
            }
            None => false,
        })
}

/// Every refusal site of the compiler.
fn sites() -> Vec<Site> {
    let mut out = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).expect("read");
        // (a unit-test module is not the compiler's)
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => &text[..i],
            None => &text[..],
        };
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let b = text.as_bytes();
        for pat in ["fail(", "fail_at(", "Fail::new("] {
            for (i, _) in text.match_indices(pat) {
                let prev = i.checked_sub(1).map(|j| b[j]);
                if prev.is_some_and(|c| {
                    c.is_ascii_alphanumeric() || c == b'_' || c == b':' && pat != "Fail::new("
                }) {
                    continue;
                }
                if text[..i].ends_with("fn ") {
                    continue;
                }
                let open = i + pat.len();
                let end = close(b, open);
                let args = &text[open..end];
                // the message: the text after the first top-level comma
                let ab = args.as_bytes();
                let mut depth = 0;
                let mut in_str = false;
                let mut cut = None;
                let mut k = 0;
                while k < ab.len() {
                    match (in_str, ab[k]) {
                        (true, b'\\') => k += 1,
                        (true, b'"') => in_str = false,
                        (false, b'"') => in_str = true,
                        (false, b'(' | b'[' | b'{') => depth += 1,
                        (false, b')' | b']' | b'}') => depth -= 1,
                        (false, b',') if depth == 0 => {
                            cut = Some(k);
                            break;
                        }
                        _ => {}
                    }
                    k += 1;
                }
                let Some(cut) = cut else { continue };
                let msg = args[cut + 1..].trim().trim_end_matches(',').trim();
                let (key, literal) = if msg.starts_with('"') || msg.starts_with("format!(") {
                    let lit = first_literal(msg).unwrap_or_default();
                    // (only a format string has placeholders)
                    let key = if msg.starts_with("format!(") {
                        template_key(&lit)
                    } else {
                        lit.clone()
                    };
                    (key, Some(lit))
                } else {
                    let expr = msg.split('(').next().unwrap_or(msg).trim();
                    (format!("{file}:{expr}"), None)
                };
                out.push(Site {
                    file: file.clone(),
                    key,
                    literal,
                });
            }
        }
    }
    out
}

#[test]
fn the_site_scan_finds_the_refusals() {
    let sites = sites();
    // (a scan that found nothing would let every other check here pass)
    assert!(sites.len() > 150, "{} sites", sites.len());
    for must in [
        "stmt.rs:hints::for_of_msg",
        "expr.rs:hints::binary_op_msg",
        "AJS has no `var`",
    ] {
        assert!(
            sites.iter().any(|s| s.key.starts_with(must)),
            "{must} not found"
        );
    }
    assert!(has_replacement("write Object.hasOwn(o, k)"));
    assert!(has_replacement("use `let`"));
    assert!(!has_replacement(
        "the 'in' operator is not supported in AJS"
    ));
    assert!(!has_replacement("Check docs for available Math methods."));
}

#[test]
fn every_refusal_site_has_a_catalogue_entry() {
    let keys: BTreeSet<&str> = CATALOGUE.iter().map(|(k, _, _)| *k).collect();
    let unreached: BTreeSet<&str> = UNREACHED.iter().map(|(k, _)| *k).collect();
    let mut missing = BTreeSet::new();
    let mut found = BTreeSet::new();
    for s in sites() {
        // (the longest key that matches: a shorter one may be the start of a longer)
        let covered = keys
            .iter()
            .chain(unreached.iter())
            .filter(|k| {
                // a literal key is the start of the site's literal; a computed one is exact
                match &s.literal {
                    Some(_) => !k.is_empty() && s.key.starts_with(**k),
                    None => s.key == **k,
                }
            })
            .max_by_key(|k| k.len());
        match covered {
            Some(k) => {
                found.insert(*k);
            }
            None => {
                missing.insert(format!("{}: {}", s.file, s.key));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "refusal sites with no entry in tests/refusal_catalogue.rs (add a program that reaches each):\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
    let stale: Vec<&&str> = keys.iter().filter(|k| !found.contains(**k)).collect();
    assert!(
        stale.is_empty(),
        "catalogue keys that match no site: {stale:?}"
    );
}

#[test]
fn every_catalogued_refusal_names_a_replacement() {
    let mut bad = Vec::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (key, how, src) in CATALOGUE {
        let src = match src {
            Text(t) => t.to_string(),
            Gen(f) => f(),
        };
        let m = refusal(*how, &src);
        *seen.entry(key).or_default() += 1;
        let from_site = key.contains(".rs:") || matches_key(&m, key);
        if !from_site || !has_replacement(&m) {
            bad.push(format!("{key:?} ({}): {m}", &src[..src.len().min(60)]));
        }
    }
    assert!(
        bad.is_empty(),
        "refusals that do not come from their site or name no replacement:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_literal_refusal_names_a_replacement() {
    let internal = [
        "internal compiler error",
        "half-way",
        "SyntaxError: could not parse",
    ];
    let bad: Vec<String> = sites()
        .into_iter()
        // (a format string's message is checked where the catalogue reaches it)
        .filter(|s| !s.key.contains('…'))
        .filter_map(|s| s.literal.map(|l| (s.file, l)))
        .filter(|(_, l)| !internal.iter().any(|i| l.starts_with(i)))
        .filter(|(_, l)| !has_replacement(l))
        .map(|(f, l)| format!("{f}: {l}"))
        .collect();
    assert!(
        bad.is_empty(),
        "refusal literals with no replacement clause:\n{}",
        bad.join("\n")
    );
}

/// The refusals a model meets most, with the user's own names in the replacement.
#[test]
fn replacements_quote_the_users_code() {
    let cases: &[(How, &str, &str)] = &[
        (
            A,
            "function main({ user: { name } }) { return {} }",
            "write user: 'example' or user: { field: 'example' }",
        ),
        (E, "'id' in o", "Object.hasOwn(o, 'id')"),
        (E, "String(x)", "'' + x"),
        (E, "Number(s)", "parseFloat(s)"),
        (E, "Date('2024-01-02').getDay()", ".dayOfWeek"),
        (
            A,
            "function main({ d: 'x' }) { let t = Date(d)\nreturn { y: t.getFullYear() } }",
            "t.year",
        ),
        (E, "x | 0", "Math.trunc(x)"),
        (E, "x & 1", "x % 2"),
        (E, "x ** 2 ^ 2", "not a power"),
        (
            E,
            "const double = n => n * 2\nreturn double(x)",
            "function double(n)",
        ),
        (
            E,
            "for (const key in o) { }\nreturn 1",
            "Object.keys(o).forEach(key =>",
        ),
        (
            E,
            "for (const item of xs) { }\nreturn 1",
            "xs.forEach(item =>",
        ),
        (E, "o.total = 5\nreturn o", "o = { ...o, total: 5 }"),
        (
            E,
            "o.meta.seen = true\nreturn o",
            "o = { ...o, meta: { ...o.meta, seen: true } }",
        ),
        (E, "xs[0] = 5\nreturn xs", "xs.splice(0, 1, 5)"),
        (E, "delete o.a\nreturn o", "omit({ obj: o, keys: ['a'] })"),
        (
            E,
            "throw new Error('no ' + s)\nreturn 1",
            "Error('no ' + s)",
        ),
        (E, "new Cart(xs)", "makeCart(xs)"),
        (E, "o.hasOwnProperty(s)", "Object.hasOwn(o, s)"),
        (E, "s.contains('a')", "s.includes('a')"),
        (
            E,
            "switch (s) { case 'a': return 1 }\nreturn 2",
            "if (s === 'a')",
        ),
    ];
    for (how, src, want) in cases {
        let m = refusal(*how, src);
        assert!(m.contains(want), "{src:?}: {m}\n(wanted {want:?})");
    }
}
