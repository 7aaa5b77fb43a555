//! Names AJS gives a meaning to: the builtin names and namespaces, the names it does not have
//! (with what to use instead), and the natives by name (a hash table built once).

use super::*;

pub(super) fn forbidden(name: &str) -> bool {
    ajs_bytecode::FORBIDDEN_NAMES.contains(&name)
}

/// The compile-time refusal of a forbidden name: the run-time message, and another name to use.
pub(super) fn forbidden_msg(name: &str) -> String {
    let base = name.trim_matches('_');
    format!(
        "{}; use another name, e.g. {base}Name",
        ajs_bytecode::forbidden_message(name)
    )
}

/// A name strict-mode JavaScript (which AJS follows) refuses as a binding: `eval`, `arguments`
/// and the words reserved in strict mode.
pub(super) fn strict_reserved(name: &str) -> bool {
    matches!(
        name,
        "eval"
            | "arguments"
            | "let"
            | "static"
            | "yield"
            | "implements"
            | "interface"
            | "package"
            | "private"
            | "protected"
            | "public"
    )
}

/// The refusal of a [`strict_reserved`] binding, with what to write instead.
pub(super) fn strict_reserved_msg(name: &str) -> String {
    format!(
        "SyntaxError: '{name}' cannot be a variable or parameter name (strict-mode JavaScript reserves it); rename it, e.g. '{name}Value'"
    )
}

/// Shortest name of [`is_builtin_name`] and [`unsupported_builtin`]: a shorter name (most
/// variable names) is neither, without comparing it with each.
pub(super) const SHORTEST_BUILTIN: usize = 3;

/// Whether `name` is a builtin name of AJS (builtins win over context keys).
pub(super) fn is_builtin_name(name: &str) -> bool {
    name.len() >= SHORTEST_BUILTIN
        && (is_namespace_name(name)
            || matches!(
                name,
                "Error"
                    | "parseInt"
                    | "parseFloat"
                    | "isNaN"
                    | "isFinite"
                    | "encodeURI"
                    | "decodeURI"
                    | "encodeURIComponent"
                    | "decodeURIComponent"
                    | "filter"
                    | "undefined"
                    | "NaN"
                    | "Infinity"
            ))
}

/// Whether `name` is the name of a namespace of builtins (`Math`, `JSON`, `console`, …).
pub(super) fn is_namespace_name(name: &str) -> bool {
    may_be_namespace_name(name)
        && matches!(
            name,
            "Math"
                | "console"
                | "JSON"
                | "Array"
                | "Object"
                | "String"
                | "Number"
                | "Boolean"
                | "Schema"
                | "Date"
                | "Set"
        )
}

/// Whether `name` may be one of [`is_namespace_name`]: each is capitalized but `console` (a
/// lower-case name is looked at no further).
#[inline(always)]
pub(super) fn may_be_namespace_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase()) || name == "console"
}

/// Names that do not exist in AJS, with what to use instead (reference §3.4).
pub(super) fn unsupported_builtin(name: &str) -> Option<String> {
    if name.len() < SHORTEST_BUILTIN {
        return None;
    }
    Some(match name {
        "RegExp" => "RegExp is not available. Write a regex literal such as /\\d+/g (patterns cannot be built at run time), or use string methods (includes, split) or the regexMatch atom.".into(),
        "Promise" => "Promise is not needed. All operations are implicitly async. To make several atom calls at once, use parallel([...]).".into(),
        "Map" => "Map is not available. Use plain objects instead: o = { ...o, [key]: value }, o[key], Object.keys(o).".into(),
        "WeakMap" => "WeakMap is not available. Use a plain object: o = { ...o, [key]: value }.".into(),
        "WeakSet" => "WeakSet is not available. Use Set([…]) with add/has.".into(),
        "Symbol" => "Symbol is not available. Use a string key: o['my-key'].".into(),
        "Proxy" | "Reflect" => format!(
            "{name} is not available. Read and build objects directly: o[k], {{ ...o, [k]: v }}, Object.keys(o)."
        ),
        "Function" => "Function constructor is not available. Write a top-level helper function f(x) { … }.".into(),
        "eval" => "eval is not available. Code is compiled, not evaluated: write the code directly.".into(),
        "setTimeout" => "setTimeout is not available (AJS has no timers). Do the work directly; to retry, loop with while and try/catch.".into(),
        "setInterval" => "setInterval is not available (AJS has no timers). Repeat the work with a while loop.".into(),
        "fetch" => "fetch is not available. Use the httpFetch atom: let body = httpFetch({ url }) (the body, parsed when JSON; responseType: 'full' for { ok, status, headers, body }).".into(),
        "require" | "import" => {
            format!("{name} is not available. Remove it and call the atoms (httpFetch, llmPredict, …) and builtins by name.")
        }
        "process" | "window" | "document" | "global" => {
            format!("{name} is not available. AJS runs in a sandboxed environment: take what you need as a parameter of the entry function.")
        }
        "globalThis" => "globalThis is not available. Use builtins directly: Math.max(a, b), JSON.stringify(x).".into(),
        _ => return None,
    })
}

/// The message for a member of a builtin namespace that AJS does not have (reference §3.3): an
/// alternative when there is one, the function hint when it is a function read as a value.
pub(super) fn namespace_member_msg(ns: &str, m: &str) -> String {
    let alt = match (ns, m) {
        (_, "prototype") | ("Object", "getPrototypeOf") => {
            Some("Prototype access is not allowed. Read own properties: Object.keys(o), o.k.")
        }
        ("Object", "create") => Some("Use object literals instead: { key: value }."),
        ("Object", "defineProperty" | "defineProperties") => {
            Some("Property descriptors are not supported. Write o = { ...o, key: value }.")
        }
        ("Object", "setPrototypeOf") => {
            Some("Prototype modification is not allowed. Copy the fields: { ...base, ...extra }.")
        }
        _ => None,
    };
    if let Some(alt) = alt {
        return format!("{ns}.{m} is not available. {alt}");
    }
    if native_member(ns, m).is_some() {
        return format!("{ns}.{m} is a function: call it, e.g. {ns}.{m}(x)");
    }
    if let Some(alt) = super::hints::namespace_alternative(ns, m) {
        return format!("{ns}.{m} is not supported in AJS; {alt}");
    }
    let have = super::hints::namespace_members(ns);
    if have.is_empty() {
        return format!("{ns}.{m} is not supported in AJS; use the builtins docs/ajs-for-models.md lists, e.g. Math.max(a, b), Object.keys(o)");
    }
    format!("{ns}.{m} is not supported in AJS; use one of {have}")
}

/// The native `ns.m` (`ns` a namespace such as `Math`, or empty for a method: `.push`).
/// (Looked up by its two parts: the name is not put together first.)
pub(super) fn native_member(ns: &str, m: &str) -> Option<NativeId> {
    debug_assert!(!ns.contains('.'));
    native_by(NativeKey { ns: Some(ns), m })
}

/// [`NativeId::lookup`] through a hash table built once (the first native of each name, as
/// `lookup` finds it): a name is hashed once instead of compared at every step of a search.
/// The table's keys are the fixed native names, never guest text, so a plain multiplicative
/// hash serves (a guest's name is only looked up: see [`native_by`]).
pub(super) fn native(name: &str) -> Option<NativeId> {
    native_by(NativeKey::of(name))
}

pub(super) fn native_by(key: NativeKey<'_>) -> Option<NativeId> {
    type Table = Vec<Option<(NativeKey<'static>, NativeId)>>;
    static BY_NAME: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    let table = BY_NAME.get_or_init(|| {
        let mut t: Table = vec![None; NATIVE_SLOTS];
        // (at most a quarter of the slots: a test checks that every native fits)
        for &n in NativeId::all().iter().take(NATIVE_SLOTS / 4) {
            let key = NativeKey::of(n.js_name());
            let mut i = key.slot();
            // (the first native of each name, as `lookup` finds it)
            while let Some(Some((k, _))) = t.get(i) {
                if *k == key {
                    break;
                }
                i = (i + 1) & (NATIVE_SLOTS - 1);
            }
            if let Some(slot @ None) = t.get_mut(i) {
                *slot = Some((key, n));
            }
        }
        t
    });
    // From the key's slot on to the first empty one (the table is fixed, and at most a
    // quarter full: a guest's name can only be looked up, over the few slots the natives' own
    // names share).
    let mut i = key.slot();
    let mut found = None;
    while let Some(Some((k, n))) = table.get(i) {
        if *k == key {
            found = Some(*n);
            break;
        }
        i = (i + 1) & (NATIVE_SLOTS - 1);
    }
    debug_assert_eq!(found, NativeId::lookup(&key.to_string()));
    found
}

/// Slots of [`native_by`]'s table: a power of two, at least four per native.
pub(super) const NATIVE_SLOTS: usize = 1024;

/// A native's name split at its first dot: `Math.max` is `Math` and `max`, `.push` is `` and
/// `push`, `parseInt` has no namespace.
#[derive(Clone, Copy)]
pub(super) struct NativeKey<'a> {
    pub(super) ns: Option<&'a str>,
    pub(super) m: &'a str,
}

impl<'a> NativeKey<'a> {
    pub(super) fn of(name: &'a str) -> Self {
        match name.split_once('.') {
            Some((ns, m)) => NativeKey { ns: Some(ns), m },
            None => NativeKey { ns: None, m: name },
        }
    }
}

/// (Compared by [`same_bytes`], not by two calls of `memcmp` per native looked up.)
impl PartialEq for NativeKey<'_> {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        same_bytes(self.m.as_bytes(), other.m.as_bytes())
            && match (self.ns, other.ns) {
                (None, None) => true,
                (Some(a), Some(b)) => same_bytes(a.as_bytes(), b.as_bytes()),
                _ => false,
            }
    }
}

impl Eq for NativeKey<'_> {}

impl NativeKey<'_> {
    /// The key's first slot in [`native_by`]'s table: a multiplicative hash of the words of
    /// [`hash_words`] of both parts and their lengths (a missing namespace as one no name has).
    /// (Not a `HashMap` of the names, hashed through `Hasher` in three writes: it cost more.)
    #[inline]
    pub(super) fn slot(&self) -> usize {
        let (m0, m1) = hash_words(self.m.as_bytes());
        let (n0, n1, nlen) = match self.ns {
            Some(ns) => {
                let (n0, n1) = hash_words(ns.as_bytes());
                (n0, n1, ns.len() as u64)
            }
            None => (0, 0, u64::MAX),
        };
        let h = (m0 ^ (self.m.len() as u64).wrapping_mul(MIX_K)).wrapping_mul(MIX_K) ^ m1;
        let h = (h ^ n0).wrapping_mul(MIX_K) ^ n1 ^ nlen;
        (h.wrapping_mul(MIX_K) >> 54) as usize
    }
}

impl std::fmt::Display for NativeKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ns {
            Some(ns) => write!(f, "{ns}.{}", self.m),
            None => f.write_str(self.m),
        }
    }
}

/// `a == b` for two slices of one length, a short one (most names) compared by two overlapping
/// words, without a call to `memcmp`.
#[inline(always)]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // (each pair of windows covers the whole of a slice of its lengths)
    if let (Some(ah), Some(bh)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        if n <= 16 {
            let (at, bt) = (a.last_chunk::<8>(), b.last_chunk::<8>());
            return ah == bh && at == bt;
        }
        return a == b;
    }
    if let (Some(ah), Some(bh)) = (a.first_chunk::<4>(), b.first_chunk::<4>()) {
        return ah == bh && a.last_chunk::<4>() == b.last_chunk::<4>();
    }
    // up to three bytes: the first, the middle and the last
    a.first() == b.first() && a.get(n / 2) == b.get(n / 2) && a.last() == b.last()
}

#[cfg(test)]
mod tests {
    /// Every native is found by its name in the natives' table (which holds at most a quarter
    /// of its slots), as `NativeId::lookup` finds it, and names of no native are not, also
    /// names that share a native's slot.
    #[test]
    fn the_natives_table_finds_what_lookup_finds() {
        use super::{native, native_member, NATIVE_SLOTS};
        use ajs_bytecode::NativeId;
        assert!(NativeId::all().len() * 4 <= NATIVE_SLOTS);
        for &n in NativeId::all() {
            let name = n.js_name();
            assert_eq!(native(name), NativeId::lookup(name), "{name}");
            let (ns, m) = name.split_once('.').unwrap_or(("", name));
            if !ns.is_empty() {
                assert_eq!(native_member(ns, m), NativeId::lookup(name), "{name}");
            }
            for other in [format!("{name}x"), format!("x{name}"), name.to_uppercase()] {
                assert_eq!(native(&other), NativeId::lookup(&other), "{other}");
            }
        }
        for name in [
            "",
            ".",
            "..",
            "a.b.c",
            "Math.",
            ".max",
            "max",
            "Math.maxx",
            "push",
        ] {
            assert_eq!(native(name), NativeId::lookup(name), "{name}");
        }
    }

    /// The table of native names finds what `NativeId::lookup` finds, for every native's name
    /// and for names that are none (a namespace or a method alone, a prefix, a longer name).
    #[test]
    fn the_native_table_is_the_lookup() {
        use ajs_bytecode::natives::NativeId;
        let mut names: Vec<String> = Vec::new();
        for &n in NativeId::all() {
            let name = n.js_name();
            names.push(name.to_string());
            names.push(format!("{name}x"));
            names.push(name[..name.len() / 2].to_string());
            if let Some((ns, m)) = name.split_once('.') {
                names.push(ns.to_string());
                names.push(m.to_string());
                names.push(format!(".{m}"));
            }
        }
        names.extend(["", ".", "Math.", "x.y.z"].map(String::from));
        for name in &names {
            assert_eq!(super::native(name), NativeId::lookup(name), "{name:?}");
        }
    }

    /// `same_bytes` is `==`, at every length up to 40, for equal slices and slices differing in
    /// any one byte.
    #[test]
    fn same_bytes_is_equality() {
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..20_000 {
            let n = next() % 41;
            let a: Vec<u8> = (0..n).map(|_| b"ab_"[next() % 3]).collect();
            let mut b = a.clone();
            assert!(super::same_bytes(&a, &b));
            if n > 0 {
                let i = next() % n;
                b[i] = b"ab_z"[next() % 4];
            }
            assert_eq!(super::same_bytes(&a, &b), a == b, "{a:?} {b:?}");
            assert!(!super::same_bytes(&a, &a[..n / 2]) || n == 0);
        }
    }
}
