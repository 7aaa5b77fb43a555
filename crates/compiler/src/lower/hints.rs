//! What to write instead: the replacement each refusal names, quoting the user's own code
//! (names, short member chains, literals) where it is short enough to quote.

use super::*;

/// Longest piece of the user's code a message quotes.
const MAX_QUOTE: usize = 40;

/// The user's code for `e` when it is a name, a literal, a member chain or a call of those and
/// at most [`MAX_QUOTE`] bytes long.
pub(super) fn quote(e: &Expression) -> Option<String> {
    let mut s = String::new();
    write_expr(e, &mut s, 0)?;
    (s.len() <= MAX_QUOTE).then_some(s)
}

/// [`quote`], or `default` when `e` cannot be quoted.
pub(super) fn quote_or(e: &Expression, default: &str) -> String {
    quote(e).unwrap_or_else(|| default.to_string())
}

fn write_expr(e: &Expression, out: &mut String, depth: u32) -> Option<()> {
    if depth > 8 || out.len() > MAX_QUOTE {
        return None;
    }
    match e.without_parentheses() {
        Expression::Identifier(id) => out.push_str(id.name.as_str()),
        Expression::ThisExpression(_) => out.push_str("this"),
        Expression::StringLiteral(s) => {
            let v = s.value.as_str();
            if v.len() > 24 || v.contains(['\'', '\\', '\n', '\r']) {
                return None;
            }
            out.push('\'');
            out.push_str(v);
            out.push('\'');
        }
        Expression::NumericLiteral(n) => match &n.raw {
            Some(raw) => out.push_str(raw.as_str()),
            None => out.push_str(&n.value.to_string()),
        },
        Expression::BooleanLiteral(b) => out.push_str(if b.value { "true" } else { "false" }),
        Expression::NullLiteral(_) => out.push_str("null"),
        Expression::StaticMemberExpression(m) => {
            write_expr(&m.object, out, depth + 1)?;
            out.push_str(if m.optional { "?." } else { "." });
            out.push_str(m.property.name.as_str());
        }
        Expression::ComputedMemberExpression(m) => {
            write_expr(&m.object, out, depth + 1)?;
            out.push_str(if m.optional { "?.[" } else { "[" });
            write_expr(&m.expression, out, depth + 1)?;
            out.push(']');
        }
        Expression::CallExpression(c) => {
            write_expr(&c.callee, out, depth + 1)?;
            out.push('(');
            for (i, a) in c.arguments.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_expr(a.as_expression()?, out, depth + 1)?;
            }
            out.push(')');
        }
        Expression::ArrayExpression(a) => {
            out.push('[');
            for (i, el) in a.elements.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_expr(el.as_expression()?, out, depth + 1)?;
            }
            out.push(']');
        }
        Expression::BinaryExpression(b) if b.operator.is_arithmetic() => {
            write_expr(&b.left, out, depth + 1)?;
            out.push(' ');
            out.push_str(b.operator.as_str());
            out.push(' ');
            write_expr(&b.right, out, depth + 1)?;
        }
        Expression::UnaryExpression(u) if u.operator == UnaryOperator::UnaryNegation => {
            out.push('-');
            write_expr(&u.argument, out, depth + 1)?;
        }
        _ => return None,
    }
    Some(())
}

/// Whether `e` is the number literal `v`.
fn is_number(e: &Expression, v: f64) -> bool {
    matches!(e.without_parentheses(), Expression::NumericLiteral(n) if n.value == v)
}

/// What to write for the bitwise `x op y` (`op` without a trailing `=`): an expression when one
/// does the same for the numbers a program means, else a sentence.
fn bit_replacement(
    op: &str,
    x: &str,
    y: &str,
    right: Option<&Expression>,
) -> Result<String, String> {
    let zero = right.is_some_and(|r| is_number(r, 0.0));
    let mask = right.and_then(|r| match r.without_parentheses() {
        Expression::NumericLiteral(n)
            if n.value >= 1.0
                && n.value < 2f64.powi(31)
                && ((n.value + 1.0) as u64).is_power_of_two() =>
        {
            Some(n.value + 1.0)
        }
        _ => None,
    });
    match op {
        "|" if zero => Ok(format!("Math.trunc({x})")),
        "|" => Err(format!(
            "AJS has no bit operations: to truncate a number write Math.trunc({x}); for flags keep booleans, e.g. {{ read: true, write: false }}"
        )),
        "&" => match mask {
            Some(m) => Ok(format!("{x} % {m}")),
            None => Err(format!(
                "AJS has no bit operations: for {x} & 1 write {x} % 2; to read bit n of a non-negative integer write Math.floor({x} / 2 ** n) % 2"
            )),
        },
        "^" => Err(format!(
            "'^' is exclusive-or in JavaScript, not a power: for a power write {x} ** {y} (or Math.pow({x}, {y})); AJS has no bit operations (for two booleans write {x} !== {y})"
        )),
        "<<" => Ok(format!("{x} * 2 ** {y}")),
        ">>" => Ok(format!("Math.floor({x} / 2 ** {y})")),
        ">>>" if zero => Ok(format!("Math.trunc({x})")),
        ">>>" => Ok(format!("Math.floor({x} / 2 ** {y})")),
        _ => Err("AJS has no bit operations; use Math.floor, Math.trunc, % and **".to_string()),
    }
}

/// The refusal of the binary operator `op` (`in`, `instanceof`, the bitwise ones) in `a op b`.
pub(super) fn binary_op_msg(op: &str, a: Option<&Expression>, b: Option<&Expression>) -> String {
    let x = a.map_or_else(|| "a".to_string(), |a| quote_or(a, "a"));
    let y = b.map_or_else(|| "b".to_string(), |b| quote_or(b, "b"));
    let tail = match op {
        "in" => format!("write Object.hasOwn({y}, {x}) (or {y}[{x}] !== undefined)"),
        "instanceof" => {
            let class = b.and_then(|b| match b.without_parentheses() {
                Expression::Identifier(id) => Some(id.name.as_str()),
                _ => None,
            });
            match class {
                Some("Array") => format!("write Array.isArray({x})"),
                Some("Error") => format!(
                    "a caught error is its message string: write typeof {x} === 'string'"
                ),
                Some("Date") => format!(
                    "AJS has no classes; write typeof {x}?.timestamp === 'number' to test for a Date"
                ),
                _ => format!(
                    "AJS has no classes; write Array.isArray({x}) or typeof {x} === 'object', or test a field, e.g. {x}.type === '…'"
                ),
            }
        }
        _ => match bit_replacement(op, &x, &y, b) {
            Ok(r) => format!("AJS has no bit operations: write {r}"),
            Err(s) => s,
        },
    };
    format!("the '{op}' operator is not supported in AJS; {tail}")
}

/// The refusal of the compound assignment `x op= y` of a bitwise operator.
pub(super) fn compound_op_msg(op: &str, target: &str, rhs: &Expression) -> String {
    let bare = op.trim_end_matches('=');
    let y = quote_or(rhs, "y");
    let tail = match bit_replacement(bare, target, &y, Some(rhs)) {
        Ok(r) => format!("AJS has no bit operations: write {target} = {r}"),
        Err(s) => s,
    };
    format!("the '{op}' operator is not supported in AJS; {tail}")
}

/// The refusal of the unary operator `op` (`~`, `void`, `delete`) applied to `arg`.
pub(super) fn unary_op_msg(op: &str, arg: &Expression) -> String {
    let x = quote_or(arg, "x");
    let tail = match op {
        "void" => "write undefined".to_string(),
        "delete" => match arg.without_parentheses() {
            Expression::StaticMemberExpression(m) => {
                let o = quote_or(&m.object, "o");
                let k = m.property.name.as_str();
                format!("objects do not change in place: write {o} = omit({{ obj: {o}, keys: ['{k}'] }}), or const {{ {k}: _, ...rest }} = {o}")
            }
            Expression::ComputedMemberExpression(m) => {
                let o = quote_or(&m.object, "o");
                let k = quote_or(&m.expression, "k");
                format!("objects do not change in place: write {o} = omit({{ obj: {o}, keys: [{k}] }}) (for an array: {o}.splice({k}, 1))")
            }
            _ => "write omit({ obj: o, keys: ['k'] }) to drop a property".to_string(),
        },
        _ => match arg.without_parentheses() {
            Expression::UnaryExpression(u) if u.operator == UnaryOperator::BitwiseNot => {
                format!("AJS has no bit operations: for ~~{} write Math.trunc({})", quote_or(&u.argument, "x"), quote_or(&u.argument, "x"))
            }
            Expression::CallExpression(c) => match c.callee.without_parentheses() {
                Expression::StaticMemberExpression(m) if m.property.name == "indexOf" => {
                    let s = quote_or(&m.object, "s");
                    let t = c.arguments.first().and_then(|a| a.as_expression()).map_or_else(|| "t".to_string(), |a| quote_or(a, "t"));
                    format!("AJS has no bit operations: for ~{s}.indexOf({t}) write {s}.includes({t})")
                }
                _ => format!("AJS has no bit operations: ~{x} is -{x} - 1 for an integer; to truncate write Math.trunc({x})"),
            },
            _ => format!("AJS has no bit operations: ~{x} is -{x} - 1 for an integer; to truncate write Math.trunc({x})"),
        },
    };
    format!("the '{op}' operator is not supported in AJS; {tail}")
}

/// What a method call `r.m(…)` that AJS does not have should be written as (`r` the receiver's
/// code), or `None` when nothing specific is known.
fn method_alternative(r: &str, m: &str, args: &[&Expression]) -> Option<String> {
    let arg = |i: usize, d: &str| {
        args.get(i)
            .map_or_else(|| d.to_string(), |a| quote_or(a, d))
    };
    const DATE: &str = "a Date has the fields year month (1–12) day hours minutes seconds dayOfWeek (0 = Sunday) timestamp value and the methods add diff isBefore isAfter format getTime toISOString";
    let field = |f: &str| Some(format!("write {r}.{f} ({DATE})"));
    match m {
        "getDay" | "getUTCDay" => field("dayOfWeek"),
        "getFullYear" | "getUTCFullYear" | "getYear" => field("year"),
        "getMonth" | "getUTCMonth" => Some(format!(
            "write {r}.month - 1 (AJS months are 1–12: {r}.month is usually what you want; {DATE})"
        )),
        "getDate" | "getUTCDate" => field("day"),
        "getHours" | "getUTCHours" => field("hours"),
        "getMinutes" | "getUTCMinutes" => field("minutes"),
        "getSeconds" | "getUTCSeconds" => field("seconds"),
        "getMilliseconds" | "getUTCMilliseconds" => Some(format!("write {r}.timestamp % 1000 ({DATE})")),
        "valueOf" => Some(format!("write {r}.getTime() for a Date, or {r} itself")),
        "getTimezoneOffset" => Some("write 0: AJS dates are in UTC".to_string()),
        "toJSON" | "toUTCString" | "toGMTString" => Some(format!("write {r}.toISOString()")),
        "toDateString" | "toLocaleDateString" => Some(format!("write {r}.format('date') (YYYY-MM-DD)")),
        "toTimeString" | "toLocaleTimeString" => Some(format!("write {r}.format('time') (HH:mm:ss)")),
        "toLocaleString" => Some(format!(
            "write {r}.format('YYYY-MM-DD HH:mm:ss') for a Date, {r}.toFixed(2) for a number"
        )),
        s if s.starts_with("set")
            && matches!(
                s.trim_start_matches("set").trim_start_matches("UTC"),
                "FullYear" | "Month" | "Date" | "Hours" | "Minutes" | "Seconds" | "Milliseconds" | "Time"
            ) =>
        {
            Some(format!(
                "a Date never changes: write {r} = {r}.add({{ days: n }}) (also years months hours minutes seconds ms; negative to go back), or build one with Date('2024-01-15T10:00:00Z')"
            ))
        }
        "hasOwnProperty" => Some(format!("write Object.hasOwn({r}, {})", arg(0, "key"))),
        "call" | "apply" | "bind" => Some(
            "functions are not values in AJS: call the function directly, with spread for a list of arguments, e.g. Math.max(...xs)"
                .to_string(),
        ),
        "entries" => Some(format!("write Object.entries({r}) (for an array: {r}.map((x, i) => [i, x]))")),
        "keys" => Some(format!("write Object.keys({r}) (for an array: {r}.map((x, i) => i))")),
        "values" => Some(format!("write Object.values({r}) (for an array or a Set: {r} itself, or {r}.toArray())")),
        "contains" => Some(format!("write {r}.includes({})", arg(0, "x"))),
        "trimLeft" => Some(format!("write {r}.trimStart()")),
        "trimRight" => Some(format!("write {r}.trimEnd()")),
        "toLocaleLowerCase" => Some(format!("write {r}.toLowerCase()")),
        "toLocaleUpperCase" => Some(format!("write {r}.toUpperCase()")),
        "size" => Some(format!("write {r}.size (a property, not a method)")),
        "length" => Some(format!("write {r}.length (a property, not a method)")),
        "delete" => Some(format!(
            "write {r}.remove({}) for a Set; for an object {r} = omit({{ obj: {r}, keys: [{}] }})",
            arg(0, "x"),
            arg(0, "k")
        )),
        "get" => Some(format!("AJS has no Map: use a plain object and write {r}[{}]", arg(0, "k"))),
        "set" => Some(format!(
            "AJS has no Map: use a plain object and write {r} = {{ ...{r}, [{}]: {} }}",
            arg(0, "k"),
            arg(1, "v")
        )),
        "with" => Some(format!(
            "write {r}.map((x, j) => j === {} ? {} : x)",
            arg(0, "i"),
            arg(1, "v")
        )),
        "toSpliced" => Some(format!("write {r}.slice() and then .splice(…) on the copy")),
        "json" | "text" | "blob" | "arrayBuffer" => Some(
            "httpFetch already returns the body, parsed when it is JSON: use the result directly (add responseType: 'full' to get { ok, status, headers, body })"
                .to_string(),
        ),
        "then" | "catch" | "finally" => Some(
            "atom calls are synchronous in AJS: write let r = httpFetch({ url }) and wrap it in try { … } catch (e) { … }"
                .to_string(),
        ),
        "forEach" | "map" | "filter" => None,
        _ => None,
    }
}

/// The refusal of a method call `obj.m(…)` naming a method AJS does not have.
pub(super) fn method_msg(obj: &Expression, m: &str, args: &[&Expression]) -> String {
    let r = quote_or(obj, "xs");
    let tail = method_alternative(&r, m, args).unwrap_or_else(|| match closest_method(m) {
        Some(near) => format!("did you mean {r}.{near}(…)? Use one of the string, array, number, Date and Set methods docs/ajs-for-models.md lists, or a builtin such as Object.keys({r})"),
        None => format!("use one of the string, array, number, Date and Set methods docs/ajs-for-models.md lists, or a builtin such as Object.keys({r})"),
    });
    format!("Security Error: method '{m}' is not callable in AJS; {tail}")
}

/// The method AJS has whose name is nearest `m` (one edit away, two for a name of eight bytes or
/// more; case ignored).
fn closest_method(m: &str) -> Option<&'static str> {
    let lower = m.to_ascii_lowercase();
    let most = match m.len() {
        0..4 => return None,
        4..8 => 1,
        _ => 2,
    };
    let mut best: Option<(usize, &'static str)> = None;
    for n in NativeId::all() {
        let Some(name) = n.js_name().strip_prefix('.') else {
            continue;
        };
        if name.starts_with('%') {
            continue;
        }
        let d = edit_distance(&lower, &name.to_ascii_lowercase());
        if d <= most && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, name));
        }
    }
    best.map(|(_, n)| n)
}

/// Levenshtein distance of two short ASCII-ish names (by bytes).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The refusal of calling the builtin `name` as a function when it is not one
/// (`String(x)`, `Number(x)`, `Math(…)`).
pub(super) fn builtin_call_msg(name: &str, args: &[&Expression]) -> String {
    let a = args
        .first()
        .map_or_else(|| "x".to_string(), |a| quote_or(a, "x"));
    let tail = match name {
        "String" => {
            format!("write '' + {a} (or `${{{a}}}`; JSON.stringify({a}) for an array or object)")
        }
        "Number" => format!("write +{a} (the same conversion) or parseFloat({a})"),
        "Boolean" => format!("write !!{a}"),
        "Array" => {
            format!("write Array.from({{ length: {a} }}, () => 0), or an array literal [ … ]")
        }
        "Object" => format!("write {{ ...{a} }} for a copy, or an object literal {{ … }}"),
        ns => {
            let first = NativeId::all()
                .iter()
                .filter_map(|n| n.js_name().strip_prefix(ns)?.strip_prefix('.'))
                .next()
                .unwrap_or("keys");
            format!("{ns} is a namespace, not a function: call one of its members, e.g. {ns}.{first}(…)")
        }
    };
    format!("'{name}(...)' is not supported in AJS; {tail}")
}

/// The members of namespace `ns` AJS has, listed for a message.
pub(super) fn namespace_members(ns: &str) -> String {
    let mut out = String::new();
    for n in NativeId::all() {
        if let Some(m) = n
            .js_name()
            .strip_prefix(ns)
            .and_then(|m| m.strip_prefix('.'))
        {
            if !out.is_empty() {
                out.push_str(", ");
            }
            out.push_str(ns);
            out.push('.');
            out.push_str(m);
        }
    }
    out
}

/// What to write for the namespace member `ns.m` AJS does not have, when something specific
/// is known.
pub(super) fn namespace_alternative(ns: &str, m: &str) -> Option<&'static str> {
    Some(match (ns, m) {
        ("Object", "groupBy") => {
            "write xs.reduce((g, x) => ({ ...g, [x.kind]: [...(g[x.kind] ?? []), x] }), {})"
        }
        ("Object", "freeze" | "seal" | "preventExtensions") => {
            "AJS values never change in place anyway: use the object itself"
        }
        ("Object", "is") => "write a === b (NaN: Number.isNaN(a))",
        ("Object", "getOwnPropertyNames") => "write Object.keys(o)",
        ("Date", "parse") => "write Date(s).timestamp",
        ("Date", "UTC") => {
            "write Date('2024-01-31T00:00:00Z').timestamp (months are 1–12 in the string)"
        }
        ("Array", "from") => "write Array.from(xs) or [...xs]",
        ("Promise", _) => {
            "call the atoms directly; several at once: parallel([a({ … }), b({ … })])"
        }
        ("JSON", "parse" | "stringify") => "write JSON.parse(text) / JSON.stringify(value)",
        ("String", "raw") => "write a plain string literal, with \\\\ for a backslash",
        _ => return None,
    })
}

/// The refusal of `new X(…)` (`name` the class's name when written as one).
pub(super) fn new_msg(name: Option<&str>, args: &[&Expression]) -> String {
    let list = args
        .iter()
        .map(|a| quote_or(a, "…"))
        .collect::<Vec<_>>()
        .join(", ");
    let tail = match name {
        Some("Date") => format!("write Date({list}) (no 'new'): Date() is now, Date('2024-01-15') or Date(ms) a given time"),
        Some("Set") => format!("write Set({list}) (no 'new')"),
        Some("Map") => "AJS has no Map: use a plain object, o = { ...o, [key]: value } and o[key]".into(),
        Some("Array") => format!("write Array.from({{ length: {} }}, () => 0), or an array literal [ … ]", if list.is_empty() { "n" } else { &list }),
        Some("Object") => "write an object literal { key: value }".into(),
        Some("Error" | "TypeError" | "RangeError") => {
            format!("write Error({}) (no 'new', no throw): calling Error raises it", if list.is_empty() { "'message'" } else { &list })
        }
        Some("RegExp") => "write a regex literal such as /\\d+/g (patterns cannot be built at run time)".into(),
        Some("Promise") => "call the atoms directly: let r = httpFetch({ url }); several at once: parallel([a({ … }), b({ … })])".into(),
        Some("WeakMap") => "use a plain object".into(),
        Some("WeakSet") => "write Set([…])".into(),
        Some("Intl") => "AJS has no Intl: format numbers with n.toFixed(2) and dates with d.format('YYYY-MM-DD')".into(),
        Some("URL" | "URLSearchParams") => {
            "build the URL as a string, escaping values with encodeURIComponent(v)".into()
        }
        Some("Function") => "write a top-level helper function".into(),
        Some(n) => format!(
            "AJS has no classes: write a top-level helper that returns an object literal, e.g. function make{n}({list}) {{ return {{ … }} }}, and call make{n}({list})"
        ),
        None => "AJS has no classes: write a top-level helper that returns an object literal".into(),
    };
    format!("The 'new' keyword is not supported in AJS; {tail}")
}

/// The refusal of an assignment to the member `target` (`o.k`, `a[i]`) with `op` and `rhs`
/// (`in_callback`: written inside a callback, where outer variables are read-only).
pub(super) fn member_assign_msg(
    target: &MemberExpression,
    op: AssignmentOperator,
    rhs: &Expression,
    in_callback: bool,
) -> String {
    let v = quote_or(rhs, "v");
    let (obj, key, computed) = match target {
        MemberExpression::StaticMemberExpression(m) => {
            (&m.object, m.property.name.to_string(), false)
        }
        MemberExpression::ComputedMemberExpression(m) => {
            (&m.object, quote_or(&m.expression, "k"), true)
        }
        MemberExpression::PrivateFieldExpression(_) => {
            return "AJS has no member assignment (`o.k = v`, `a[i] = v`). Build a new object or array instead, e.g. o = { ...o, k: v }, or use arr.push(v)".to_string();
        }
    };
    let o = quote_or(obj, "o");
    let read = if computed {
        format!("{o}[{key}]")
    } else {
        format!("{o}.{key}")
    };
    let value = match op {
        AssignmentOperator::Assign => v.clone(),
        other => format!("{read} {} {v}", other.as_str().trim_end_matches('=')),
    };
    let field = if computed {
        format!("[{key}]: {value}")
    } else {
        format!("{key}: {value}")
    };
    let index_like = computed
        && match target {
            MemberExpression::ComputedMemberExpression(m) => {
                match m.expression.without_parentheses() {
                    Expression::NumericLiteral(_) => true,
                    Expression::Identifier(id) => {
                        matches!(id.name.as_str(), "i" | "j" | "n" | "idx" | "index" | "pos")
                    }
                    _ => false,
                }
            }
            _ => false,
        };
    let whole = nested_update(obj, &format!("{{ ...{o}, {field} }}"), 0);
    if index_like {
        return format!("AJS has no member assignment (`o.k = v`, `a[i] = v`): write {o}.splice({key}, 1, {value}) for an array (or {o} = {o}.map((x, j) => j === {key} ? {value} : x))");
    }
    if in_callback {
        let splice = if computed {
            format!("for an array write {o}.splice({key}, 1, {value}) (a mutating method is allowed in a callback); ")
        } else {
            String::new()
        };
        return format!("AJS has no member assignment (`o.k = v`, `a[i] = v`), and a callback cannot reassign {o}: {splice}for an object build it with reduce, e.g. items.reduce((acc, x) => ({{ ...acc, {field} }}), {{}}), or walk the items with while, where {o} = {{ ...{o}, {field} }} is allowed: let i = 0 / while (i < items.length) {{ …; i++ }}");
    }
    let write = if computed {
        format!("write {whole} for an object, or {o}.splice({key}, 1, {value}) for an array")
    } else {
        format!("write {whole}")
    };
    format!("AJS has no member assignment (`o.k = v`, `a[i] = v`): {write} (in a reduce callback, return {{ ...{o}, {field} }} instead)")
}

/// `root = { …copies… }` that sets `obj` to `value` (code) by copying each object on the way
/// from the variable at its root (`o.a = { ...o.a, b: 1 }` becomes `o = { ...o, a: { ...o.a, b: 1 } }`).
fn nested_update(obj: &Expression, value: &str, depth: u32) -> String {
    match obj.without_parentheses() {
        Expression::StaticMemberExpression(m) if depth < 3 => {
            let parent = quote_or(&m.object, "o");
            let k = m.property.name.as_str();
            nested_update(
                &m.object,
                &format!("{{ ...{parent}, {k}: {value} }}"),
                depth + 1,
            )
        }
        e => format!("{} = {value}", quote_or(e, "o")),
    }
}

/// The name a `for…in`/`for…of` binds (`k` in `for (const k in o)`).
fn loop_name<'a>(left: &'a ForStatementLeft) -> Option<&'a str> {
    match left {
        ForStatementLeft::VariableDeclaration(d) => match &d.declarations.first()?.id {
            BindingPattern::BindingIdentifier(b) => Some(b.name.as_str()),
            _ => None,
        },
        ForStatementLeft::AssignmentTargetIdentifier(id) => Some(id.name.as_str()),
        _ => None,
    }
}

/// The refusal of `for (k in o)`.
pub(super) fn for_in_msg(f: &ForInStatement) -> String {
    let k = loop_name(&f.left).unwrap_or("k");
    let o = quote_or(&f.right, "o");
    format!("Unsupported statement type: ForInStatement. AJS has no `for...in`: write Object.keys({o}).forEach({k} => {{ … }}), or walk the keys with `while`: const keys = Object.keys({o}) / let i = 0 / while (i < keys.length) {{ const {k} = keys[i]; …; i++ }}")
}

/// The refusal of `for (x of xs)`.
pub(super) fn for_of_msg(f: &ForOfStatement) -> String {
    let x = loop_name(&f.left).unwrap_or("x");
    let xs = quote_or(&f.right, "items");
    if f.r#await {
        return format!("Unsupported statement type: ForOfStatement. AJS has no `for await`: atom calls are synchronous; write {xs}.forEach({x} => {{ … }}), or parallel({xs}.map({x} => httpFetch({{ … }}))) for calls at once");
    }
    format!("Unsupported statement type: ForOfStatement. AJS has no `for...of`: write {xs}.forEach({x} => {{ … }}) (a callback cannot assign outer variables: for a total use {xs}.reduce), or use `while` with a counter: let i = 0 / while (i < {xs}.length) {{ const {x} = {xs}[i]; …; i++ }}")
}

/// The refusal of `for (init; test; update)`.
pub(super) fn for_msg(f: &ForStatement) -> String {
    let init = match &f.init {
        Some(ForStatementInit::VariableDeclaration(d)) => d.declarations.first().and_then(|d| {
            let BindingPattern::BindingIdentifier(b) = &d.id else {
                return None;
            };
            Some(format!("let {} = {}", b.name, quote(d.init.as_ref()?)?))
        }),
        _ => None,
    };
    let test = f.test.as_ref().and_then(|t| match t.without_parentheses() {
        Expression::BinaryExpression(b) => Some(format!(
            "{} {} {}",
            quote(&b.left)?,
            b.operator.as_str(),
            quote(&b.right)?
        )),
        _ => None,
    });
    let update = match &f.update {
        Some(Expression::UpdateExpression(u)) => match &u.argument {
            SimpleAssignmentTarget::AssignmentTargetIdentifier(id) => Some(format!(
                "{}{}",
                id.name,
                if u.operator == UpdateOperator::Increment {
                    "++"
                } else {
                    "--"
                }
            )),
            _ => None,
        },
        _ => None,
    };
    let example = match (init, test, update) {
        (Some(i), Some(t), Some(u)) => format!("{i} / while ({t}) {{ …; {u} }}"),
        _ => "let i = 0 / while (i < items.length) { …; i++ }".to_string(),
    };
    format!("Unsupported statement type: ForStatement. AJS has no `for` loops: write {example} (or items.forEach(x => {{ … }}))")
}

/// The refusal of `throw x`.
pub(super) fn throw_msg(arg: &Expression) -> String {
    let inner = match arg.without_parentheses() {
        Expression::NewExpression(n) => n.arguments.first().and_then(|a| a.as_expression()),
        Expression::CallExpression(c) => c.arguments.first().and_then(|a| a.as_expression()),
        e => Some(e),
    };
    let m = inner.map_or_else(|| "'message'".to_string(), |e| quote_or(e, "'message'"));
    format!("'throw' is not supported in AJS: write Error({m}) (calling Error raises the error; catch (e) then gets the message string)")
}

/// The refusal of a function declared inside a function (`name` its name).
pub(super) fn nested_function_msg(name: &str) -> String {
    format!("Unsupported statement type: FunctionDeclaration. AJS has no nested functions: move function {name}(…) {{ … }} to the top level, before the entry function (a helper sees only its parameters: pass it what it needs), or pass an arrow directly to a method, e.g. items.map(x => x * 2)")
}

/// The refusal of `const name = x => …` (or a function expression): a function as a value.
pub(super) fn function_value_msg(name: &str, params: &FormalParameters) -> String {
    let list = params
        .items
        .iter()
        .map(|p| match &p.pattern {
            BindingPattern::BindingIdentifier(b) => b.name.as_str(),
            _ => "…",
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!("functions are not values in AJS: write a top-level helper function {name}({list}) {{ return … }} before the entry function and call it by name (helpers see only their parameters), or pass the arrow directly to a method, e.g. items.filter(x => x > 1)")
}

/// The refusal of calling `name`, which is nothing AJS knows (`agent`: in a function body or an
/// agent, where a helper function may be declared).
pub(super) fn undefined_call_msg(name: &str, agent: bool) -> String {
    let tail = match name {
        "structuredClone" => "write JSON.parse(JSON.stringify(x)) (or { ...o } / [...xs] for one level)".to_string(),
        "print" | "alert" => "write console.log(x)".to_string(),
        "sleep" | "delay" | "wait" => "AJS has no timers: do the work directly; to retry, loop with while and try/catch".to_string(),
        "atob" | "btoa" => "AJS has no base64 functions: pass the data as text".to_string(),
        "queueMicrotask" | "setImmediate" => "AJS has no task queue: do the work directly".to_string(),
        "httpFetch" | "llmPredict" => format!(
            "this host does not grant the '{name}' capability (ask for it, or take the data as a parameter of the entry function)"
        ),
        _ if agent => format!(
            "declare it as a top-level helper function {name}(…) {{ … }} before the entry function, or call an atom, a builtin (e.g. Math.max) or a method (e.g. items.push)"
        ),
        _ => "call an atom (a host operation), a builtin (e.g. Math.max) or a method (e.g. items.push)".to_string(),
    };
    format!("'{name}' is not defined: {tail}")
}

/// The refusal of reading `name`, declared nowhere (`function`: in a function body or an agent,
/// not an Eval).
pub(super) fn undefined_msg(name: &str, function: bool) -> String {
    if function {
        format!("'{name}' is not defined; declare it first (let {name} = …), or take it as a parameter (an agent's entry: function main({{ {name}: 'example' }}))")
    } else {
        format!(
            "'{name}' is not defined; declare it first (let {name} = …), or pass it in the context"
        )
    }
}

/// The refusal of a call of `native` with too many (`too_many`) or too few arguments, with a
/// call of the right count.
pub(super) fn arity_msg(native: NativeId, too_many: bool) -> String {
    let name = native.js_name();
    let (recv, bare) = match name.strip_prefix('.') {
        Some(m) => ("x.", m),
        None => ("", name),
    };
    let (min, max) = native.arity();
    let skip = usize::from(native.is_method());
    let example = |n: usize| {
        let args = ["a", "b", "c", "d"]
            .iter()
            .take(n)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        format!("{recv}{bare}({args})")
    };
    if too_many {
        let most = usize::from(max).saturating_sub(skip);
        if most > 4 {
            return format!("too many arguments to {recv}{bare} (at most {most}); for a longer list spread an array: {recv}{bare}(...xs)");
        }
        return format!(
            "too many arguments to {recv}{bare} (at most {most}); drop the rest: {}",
            example(most)
        );
    }
    let least = usize::from(min).saturating_sub(skip);
    format!(
        "{recv}{bare} needs at least {least} argument(s); pass them: {}",
        example(least)
    )
}

/// The refusal of using the builtin `name` as a value (`xs.map(parseInt)`, `let m = Math`).
pub(super) fn builtin_value_msg(name: &str) -> String {
    if is_namespace_name(name) {
        let members = namespace_members(name);
        let first = members
            .split(", ")
            .next()
            .filter(|m| !m.is_empty())
            .unwrap_or("Math.max");
        return format!("'{name}' is a builtin and cannot be used as a value here; call one of its members, e.g. {first}(…)");
    }
    match name {
        "undefined" | "NaN" | "Infinity" => format!("'{name}' cannot be used here; write it as a value: let v = {name}"),
        _ => format!("'{name}' is a builtin and cannot be used as a value here; call it, e.g. {name}(x), and to pass it to a method write an arrow: xs.map(x => {name}(x))"),
    }
}

/// The refusal of a callback method given something other than an arrow (`xs.map(f)`).
pub(super) fn callback_msg(obj: &Expression, m: &str, arg: Option<&Expression>) -> String {
    let r = quote_or(obj, "items");
    let (params, call) = if m == "reduce" || m == "reduceRight" {
        ("(acc, x)", "acc, x")
    } else {
        ("x", "x")
    };
    let body = match arg.map(|a| a.without_parentheses()) {
        // (the conversion builtins are no functions in AJS: their operator forms)
        Some(Expression::Identifier(id)) if id.name == "Boolean" => "!!x".to_string(),
        Some(Expression::Identifier(id)) if id.name == "String" => "'' + x".to_string(),
        Some(Expression::Identifier(id)) if id.name == "Number" => "+x".to_string(),
        Some(Expression::Identifier(id)) if id.name == "parseInt" => "parseInt(x, 10)".to_string(),
        Some(Expression::Identifier(id)) => format!("{}({call})", id.name),
        Some(Expression::StaticMemberExpression(s)) => format!(
            "{}({call})",
            quote_or(&s.object, "o").to_owned() + "." + s.property.name.as_str()
        ),
        _ => "…".to_string(),
    };
    format!("'{m}' takes a callback written as an arrow function, e.g. {r}.{m}({params} => {body}) (functions are not values in AJS)")
}

/// The refusal of `switch (x) { case a: … }`, as the `if`/`else if` chain it is.
pub(super) fn switch_msg(s: &SwitchStatement) -> String {
    let x = quote_or(&s.discriminant, "x");
    let mut tests = s
        .cases
        .iter()
        .filter_map(|c| c.test.as_ref())
        .map(|t| quote_or(t, "'a'"));
    let a = tests.next().unwrap_or_else(|| "'a'".to_string());
    let b = tests.next().unwrap_or_else(|| "'b'".to_string());
    format!("Unsupported statement type: SwitchStatement. AJS has no `switch`. Use `if`/`else if`: if ({x} === {a}) {{ … }} else if ({x} === {b}) {{ … }} else {{ … }}")
}
