//! What to write instead when a method is called on a value that has no such method, or on
//! `null`/`undefined`: each message names the replacement.

/// The message of calling method `m` on a value of kind `kind` (`string`, `array`, `number`,
/// `boolean`, `object`, `Set`, `Date`, `regular expression`) that has no method of that name.
pub(crate) fn not_a_function(m: &str, kind: &str) -> String {
    let a = if matches!(kind.as_bytes().first(), Some(b'a' | b'o' | b'u')) {
        "an"
    } else {
        "a"
    };
    format!("'{m}' is not a function on {a} {kind}; {}", hint(m, kind))
}

/// Methods only arrays have among the common ones (a missing value's default is then `[]`).
const ARRAY_ONLY: &[&str] = &[
    "map",
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "some",
    "every",
    "forEach",
    "reduce",
    "reduceRight",
    "flatMap",
    "flat",
    "join",
    "push",
    "pop",
    "shift",
    "unshift",
    "splice",
    "sort",
    "toSorted",
    "reverse",
    "toReversed",
    "fill",
];

/// The message of calling method `m` on `null` or `undefined` (`what`).
pub(crate) fn on_nullish(m: &str, what: &str) -> String {
    let default = if ARRAY_ONLY.contains(&m) { "[]" } else { "''" };
    format!(
        "Cannot call method '{m}' on {what}; the value is missing: write v?.{m}(…) to get undefined instead, or give a default first: (v ?? {default}).{m}(…)"
    )
}

/// What to write instead of `x.m(…)` for an `x` of kind `kind`.
fn hint(m: &str, kind: &str) -> String {
    const CALLBACKS: &[&str] = &[
        "map",
        "filter",
        "find",
        "findIndex",
        "some",
        "every",
        "forEach",
        "reduce",
        "flatMap",
    ];
    match (kind, m) {
        ("string", "push" | "pop" | "shift" | "unshift" | "splice" | "reverse" | "sort") => {
            "strings do not change and have no array methods: split it first, s.split(''), or build a new string: s = s + x".to_string()
        }
        ("string", "toArray") => "write s.split('') for its characters".to_string(),
        ("string", "join") => "it is already a string".to_string(),
        ("string", m) if CALLBACKS.contains(&m) => format!("split it first: s.split('').{m}(…), or s.split(' ') for words"),
        ("array", "toUpperCase" | "toLowerCase" | "trim" | "split" | "replace" | "replaceAll" | "startsWith" | "endsWith" | "padStart" | "padEnd" | "charAt" | "match") => {
            format!("it is an array: map over it, xs.map(x => x.{m}(…)), or join it first: xs.join(', ').{m}(…)")
        }
        ("array", "toArray") => "it is already an array".to_string(),
        ("array", "has") => "write xs.includes(x)".to_string(),
        ("array", "add") => "write xs.push(x)".to_string(),
        ("array" | "string", "toFixed" | "toPrecision") => "convert it first: parseFloat(x).toFixed(2)".to_string(),
        ("number" | "boolean", m) if ARRAY_ONLY.contains(&m) || m == "toArray" => {
            format!("the value is a {kind}, not an array: check it first with Array.isArray(x), or wrap it: [x].{m}(…)")
        }
        ("number" | "boolean", _) => format!("convert it to a string first: ('' + x).{m}(…)"),
        ("object", "push") => "objects have no push: write o = { ...o, [key]: value } (or keep an array)".to_string(),
        ("object", "length") => "write Object.keys(o).length".to_string(),
        ("object", "includes") => "write Object.values(o).includes(x) (or Object.hasOwn(o, key) for a key)".to_string(),
        ("object", m) if CALLBACKS.contains(&m) => {
            format!("write Object.values(o).{m}(…), or Object.entries(o).{m}(([k, v]) => …)")
        }
        ("Set", "push") => "write s.add(x)".to_string(),
        ("Set", "includes") => "write s.has(x)".to_string(),
        ("Set", "delete") => "write s.remove(x)".to_string(),
        ("Set", m) if CALLBACKS.contains(&m) || m == "join" || m == "slice" => {
            format!("write s.toArray().{m}(…)")
        }
        _ => format!(
            "check what the value is first (typeof x, Array.isArray(x)); {m} belongs to another type"
        ),
    }
}
