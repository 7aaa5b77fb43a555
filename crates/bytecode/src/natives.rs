//! The builtin functions and methods a program may call, declared once.
//!
//! The compiler resolves a call such as `Math.max(a, b)` or `xs.push(x)` to a [`NativeId`]; the
//! VM implements each id. Arity bounds are checked by the verifier, so a native never sees an
//! argument count it was not declared with. A method's receiver counts as its first argument.

pub mod jsregex;

macro_rules! define_natives {
    ($( $(#[doc = $doc:literal])* $id:ident = $js:literal, $min:literal ..= $max:literal; )*) => {
        /// A builtin function or method.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum NativeId {
            $( $(#[doc = $doc])* $id, )*
        }

        const ALL: &[NativeId] = &[$( NativeId::$id, )*];
        const NAMES: &[&str] = &[$( $js, )*];
        const ARITY: &[(u8, u8)] = &[$( ($min, $max), )*];
    };
}

define_natives! {
    /// `Math.abs(x)`.
    MathAbs = "Math.abs", 0..=255;
    /// `Math.ceil(x)`.
    MathCeil = "Math.ceil", 0..=255;
    /// `Math.floor(x)`.
    MathFloor = "Math.floor", 0..=255;
    /// `Math.round(x)`.
    MathRound = "Math.round", 0..=255;
    /// `Math.trunc(x)`.
    MathTrunc = "Math.trunc", 0..=255;
    /// `Math.sign(x)`.
    MathSign = "Math.sign", 0..=255;
    /// `Math.sqrt(x)`.
    MathSqrt = "Math.sqrt", 0..=255;
    /// `Math.cbrt(x)`.
    MathCbrt = "Math.cbrt", 0..=255;
    /// `Math.pow(x, y)`.
    MathPow = "Math.pow", 0..=255;
    /// `Math.exp(x)`.
    MathExp = "Math.exp", 0..=255;
    /// `Math.expm1(x)`.
    MathExpm1 = "Math.expm1", 0..=255;
    /// `Math.log(x)`.
    MathLog = "Math.log", 0..=255;
    /// `Math.log2(x)`.
    MathLog2 = "Math.log2", 0..=255;
    /// `Math.log10(x)`.
    MathLog10 = "Math.log10", 0..=255;
    /// `Math.log1p(x)`.
    MathLog1p = "Math.log1p", 0..=255;
    /// `Math.sin(x)`.
    MathSin = "Math.sin", 0..=255;
    /// `Math.cos(x)`.
    MathCos = "Math.cos", 0..=255;
    /// `Math.tan(x)`.
    MathTan = "Math.tan", 0..=255;
    /// `Math.asin(x)`.
    MathAsin = "Math.asin", 0..=255;
    /// `Math.acos(x)`.
    MathAcos = "Math.acos", 0..=255;
    /// `Math.atan(x)`.
    MathAtan = "Math.atan", 0..=255;
    /// `Math.atan2(y, x)`.
    MathAtan2 = "Math.atan2", 0..=255;
    /// `Math.sinh(x)`.
    MathSinh = "Math.sinh", 0..=255;
    /// `Math.cosh(x)`.
    MathCosh = "Math.cosh", 0..=255;
    /// `Math.tanh(x)`.
    MathTanh = "Math.tanh", 0..=255;
    /// `Math.asinh(x)`.
    MathAsinh = "Math.asinh", 0..=255;
    /// `Math.acosh(x)`.
    MathAcosh = "Math.acosh", 0..=255;
    /// `Math.atanh(x)`.
    MathAtanh = "Math.atanh", 0..=255;
    /// `Math.hypot(…)`.
    MathHypot = "Math.hypot", 0..=255;
    /// `Math.min(…)`.
    MathMin = "Math.min", 0..=255;
    /// `Math.max(…)`.
    MathMax = "Math.max", 0..=255;
    /// `Math.clz32(x)`.
    MathClz32 = "Math.clz32", 0..=255;
    /// `Math.imul(a, b)`.
    MathImul = "Math.imul", 0..=255;
    /// `Math.fround(x)`.
    MathFround = "Math.fround", 0..=255;
    /// `Math.random()`: from the host's randomness source.
    MathRandom = "Math.random", 0..=255;
    /// `console.log(…)`: to the run's log.
    ConsoleLog = "console.log", 0..=255;
    /// `console.info(…)`.
    ConsoleInfo = "console.info", 0..=255;
    /// `console.warn(…)`.
    ConsoleWarn = "console.warn", 0..=255;
    /// `console.error(…)`.
    ConsoleError = "console.error", 0..=255;
    /// `array.push(…)`: appends, returns the new length.
    Push = ".push", 1..=255;
    /// `parseInt(string, radix?)`.
    ParseInt = "parseInt", 0..=2;
    /// `parseFloat(string)`.
    ParseFloat = "parseFloat", 0..=1;
    /// `isNaN(x)` (coercing).
    IsNaN = "isNaN", 0..=1;
    /// `isFinite(x)` (coercing).
    IsFinite = "isFinite", 0..=1;
    /// `encodeURIComponent(s)`.
    EncodeUriComponent = "encodeURIComponent", 0..=1;
    /// `decodeURIComponent(s)`.
    DecodeUriComponent = "decodeURIComponent", 0..=1;
    /// `encodeURI(s)`.
    EncodeUri = "encodeURI", 0..=1;
    /// `decodeURI(s)`.
    DecodeUri = "decodeURI", 0..=1;
    /// `JSON.parse(text)`: parse errors are guest errors.
    JsonParse = "JSON.parse", 0..=1;
    /// `JSON.stringify(value, replacer?, space?)`.
    JsonStringify = "JSON.stringify", 0..=3;
    /// `Object.keys(o)`.
    ObjectKeys = "Object.keys", 0..=1;
    /// `Object.values(o)`.
    ObjectValues = "Object.values", 0..=1;
    /// `Object.entries(o)`.
    ObjectEntries = "Object.entries", 0..=1;
    /// `Object.fromEntries(entries)`.
    ObjectFromEntries = "Object.fromEntries", 0..=1;
    /// `Object.assign(target, ...sources)`: copies into a fresh object, never mutates.
    ObjectAssign = "Object.assign", 0..=255;
    /// `Object.hasOwn(o, key)`.
    ObjectHasOwn = "Object.hasOwn", 0..=2;
    /// `Array.isArray(x)`.
    ArrayIsArray = "Array.isArray", 0..=1;
    /// `Array.of(...)`.
    ArrayOf = "Array.of", 0..=255;
    /// `Array.from(iterable)`: a new array from an array, a string (its code points), a Set, or
    /// an object with a numeric `length` (that many `undefined`). A map callback is lowered by
    /// the compiler after this call.
    ArrayFrom = "Array.from", 1..=1;
    /// `Number.isNaN(x)` (no coercion).
    NumberIsNaN = "Number.isNaN", 0..=1;
    /// `Number.isFinite(x)` (no coercion).
    NumberIsFinite = "Number.isFinite", 0..=1;
    /// `Number.isInteger(x)`.
    NumberIsInteger = "Number.isInteger", 0..=1;
    /// `Number.isSafeInteger(x)`.
    NumberIsSafeInteger = "Number.isSafeInteger", 0..=1;
    /// `Number.parseFloat(string)`.
    NumberParseFloat = "Number.parseFloat", 0..=1;
    /// `Number.parseInt(string, radix?)`.
    NumberParseInt = "Number.parseInt", 0..=2;
    /// `String.fromCharCode(...codes)`.
    StringFromCharCode = "String.fromCharCode", 0..=255;
    /// `String.fromCodePoint(...points)`.
    StringFromCodePoint = "String.fromCodePoint", 0..=255;
    /// `s.toUpperCase()`.
    ToUpperCase = ".toUpperCase", 1..=1;
    /// `s.toLowerCase()`.
    ToLowerCase = ".toLowerCase", 1..=1;
    /// `s.trim()`.
    Trim = ".trim", 1..=1;
    /// `s.trimStart()`.
    TrimStart = ".trimStart", 1..=1;
    /// `s.trimEnd()`.
    TrimEnd = ".trimEnd", 1..=1;
    /// `s.charAt(i)`.
    CharAt = ".charAt", 1..=2;
    /// `s.charCodeAt(i)`.
    CharCodeAt = ".charCodeAt", 1..=2;
    /// `s.codePointAt(i)`.
    CodePointAt = ".codePointAt", 1..=2;
    /// `s.includes(t, pos?)` / `a.includes(x, from?)`.
    Includes = ".includes", 1..=3;
    /// `s.indexOf(t, pos?)` / `a.indexOf(x, from?)`.
    IndexOf = ".indexOf", 1..=3;
    /// `s.lastIndexOf(t, pos?)` / `a.lastIndexOf(x, from?)`.
    LastIndexOf = ".lastIndexOf", 1..=3;
    /// `s.startsWith(t, pos?)`.
    StartsWith = ".startsWith", 1..=3;
    /// `s.endsWith(t, end?)`.
    EndsWith = ".endsWith", 1..=3;
    /// `s.slice(start?, end?)` / `a.slice(start?, end?)`.
    Slice = ".slice", 1..=3;
    /// `s.substring(start, end?)`.
    Substring = ".substring", 1..=3;
    /// `s.split(separator?, limit?)` (string separators).
    Split = ".split", 1..=3;
    /// `s.repeat(n)`.
    Repeat = ".repeat", 1..=2;
    /// `s.padStart(n, fill?)`.
    PadStart = ".padStart", 1..=3;
    /// `s.padEnd(n, fill?)`.
    PadEnd = ".padEnd", 1..=3;
    /// `s.concat(...)` / `a.concat(...)`.
    Concat = ".concat", 1..=255;
    /// `s.at(i)` / `a.at(i)`.
    At = ".at", 1..=2;
    /// `s.replace(pattern, replacement)` (string patterns).
    Replace = ".replace", 1..=3;
    /// `s.replaceAll(pattern, replacement)` (string patterns).
    ReplaceAll = ".replaceAll", 1..=3;
    /// `s.localeCompare(t)`: code-unit order.
    LocaleCompare = ".localeCompare", 1..=4;
    /// `v.toString(radix?)`.
    ToString = ".toString", 1..=2;
    /// `a.join(separator?)`.
    Join = ".join", 1..=2;
    /// `a.reverse()`: in place.
    Reverse = ".reverse", 1..=1;
    /// `a.pop()`.
    Pop = ".pop", 1..=1;
    /// `a.shift()`.
    Shift = ".shift", 1..=1;
    /// `a.unshift(...)`: returns the new length.
    Unshift = ".unshift", 1..=255;
    /// `a.splice(start, deleteCount?, ...items)`: returns the removed elements.
    Splice = ".splice", 1..=255;
    /// `a.fill(value, start?, end?)`: in place.
    Fill = ".fill", 1..=4;
    /// `a.flat(depth?)`.
    Flat = ".flat", 1..=2;
    /// `a.toReversed()`.
    ToReversed = ".toReversed", 1..=1;
    /// `n.toFixed(digits?)`.
    ToFixed = ".toFixed", 1..=2;
    /// `n.toPrecision(p?)`.
    ToPrecision = ".toPrecision", 1..=2;
    /// `a.sort()` without a comparator: in place, stable, compared as strings.
    Sort = ".sort", 1..=1;
    /// `a.toSorted()`.
    ToSorted = ".toSorted", 1..=1;
    /// `s.substr(start, length?)`.
    Substr = ".substr", 1..=3;
    /// `s.normalize(form?)`: NFC, NFD, NFKC, NFKD.
    Normalize = ".normalize", 1..=2;
    /// A regular-expression literal: (pattern, flags) → a regex value. Not callable by name.
    RegexNew = "%regex", 2..=2;
    /// `re.test(s)`.
    Test = ".test", 1..=2;
    /// `re.exec(s)`.
    Exec = ".exec", 1..=2;
    /// `s.match(re)`.
    Match = ".match", 1..=2;
    /// `s.matchAll(re)`: an array of match arrays.
    MatchAll = ".matchAll", 2..=2;
    /// `s.search(re)`.
    Search = ".search", 1..=2;
    /// `Set(items?)`: a set, deduplicated by SameValueZero; crosses out as an array.
    SetNew = "Set", 0..=1;
    /// `set.add(x)`, `date.add({ days, … })`.
    Add = ".add", 2..=2;
    /// `set.remove(x)`.
    Remove = ".remove", 2..=2;
    /// `set.has(x)`.
    Has = ".has", 2..=2;
    /// `set.clear()`.
    Clear = ".clear", 1..=1;
    /// `set.toArray()`.
    ToArray = ".toArray", 1..=1;
    /// `set.union(other)`.
    Union = ".union", 2..=2;
    /// `set.intersection(other)`.
    Intersection = ".intersection", 2..=2;
    /// `set.diff(other)`, `date.diff(other, unit?)`.
    Diff = ".diff", 2..=3;
    /// `Date(init?)`: UTC; from the host clock when no argument.
    DateNew = "Date", 0..=1;
    /// `Date.now()`: epoch milliseconds from the host clock.
    DateNow = "Date.now", 0..=0;
    /// `date.format(fmt?)`.
    Format = ".format", 1..=2;
    /// `date.isBefore(other)`.
    IsBefore = ".isBefore", 2..=2;
    /// `date.isAfter(other)`.
    IsAfter = ".isAfter", 2..=2;
    /// `date.getTime()`.
    GetTime = ".getTime", 1..=1;
    /// `date.toISOString()`.
    ToIsoString = ".toISOString", 1..=1;
    /// `template({ tmpl, vars })`: `{{name}}` placeholders.
    AtomTemplate = "template", 0..=1;
    /// `regexMatch({ pattern, value })` → boolean.
    AtomRegexMatch = "regexMatch", 0..=1;
    /// `pick({ obj, keys })`.
    AtomPick = "pick", 0..=1;
    /// `omit({ obj, keys })`.
    AtomOmit = "omit", 0..=1;
    /// `merge({ a, b })`: shallow `{ ...a, ...b }`.
    AtomMerge = "merge", 0..=1;
    /// `keys({ obj })`.
    AtomKeys = "keys", 0..=1;
    /// `split({ str, sep })`.
    AtomSplit = "split", 0..=1;
    /// `join({ list, sep })`.
    AtomJoin = "join", 0..=1;
    /// `len({ list })`: length of an array or string, else 0.
    AtomLen = "len", 0..=1;
    /// `jsonParse({ str })`.
    AtomJsonParse = "jsonParse", 0..=1;
    /// `jsonStringify({ value })`.
    AtomJsonStringify = "jsonStringify", 0..=1;
    /// `hash({ value, algorithm? })`: SHA-256 hex.
    AtomHash = "hash", 0..=1;
    /// `random({ min?, max?, format?, length? })`: from the host randomness source.
    AtomRandom = "random", 0..=1;
    /// `uuid()`: a v4 UUID from the host randomness source.
    AtomUuid = "uuid", 0..=1;
    /// `filter(data, schemaOrExample)`: validates `data` against a JSON Schema (or the schema of
    /// an example value) and returns it stripped to the schema's properties.
    Filter = "filter", 2..=2;
    /// `Schema.fromExample(example)`: the JSON Schema an example value implies.
    SchemaFromExample = "Schema.fromExample", 1..=1;
    /// `Schema.response(name, schemaOrExample)`: a structured-output response format.
    SchemaResponse = "Schema.response", 2..=2;
    /// `Schema.isValid(data, schemaOrExample)`: whether `filter` would accept `data`.
    SchemaIsValid = "Schema.isValid", 2..=2;
    /// `s.replace(pattern, fn)` / `s.replaceAll(…)`, first half: (s, pattern, all) → one array
    /// per match of the callback's arguments, `[match, ...captures, offset, input]` and the
    /// named groups object last when the pattern names any. Not callable by name.
    ReplaceMatches = "%replaceMatches", 3..=3;
    /// Second half: (s, matches, results) → `s` with each match replaced by its callback's
    /// result as a string. Not callable by name.
    ReplaceJoin = "%replaceJoin", 3..=3;
}

impl NativeId {
    /// Every native, in id order.
    pub fn all() -> &'static [NativeId] {
        ALL
    }
    /// The id as encoded in bytecode.
    pub fn to_u16(self) -> u16 {
        self as u16
    }
    /// The native with this id, if any.
    pub fn from_u16(n: u16) -> Option<NativeId> {
        ALL.get(n as usize).copied()
    }
    /// The name as written in JavaScript: `Math.max`, or `.push` for a method.
    pub fn js_name(self) -> &'static str {
        NAMES[self as usize]
    }
    /// Inclusive bounds on the argument count (a method's receiver included).
    pub fn arity(self) -> (u8, u8) {
        ARITY[self as usize]
    }
    /// True for methods (called on a receiver).
    pub fn is_method(self) -> bool {
        self.js_name().starts_with('.')
    }
    /// Looks up a builtin function by its full name (`Math.max`) or a method by `.name`.
    pub fn lookup(name: &str) -> Option<NativeId> {
        // the indices of NAMES sorted by name (a stable sort: the first of equal names first)
        static BY_NAME: std::sync::OnceLock<Vec<u16>> = std::sync::OnceLock::new();
        let by_name = BY_NAME.get_or_init(|| {
            let mut v: Vec<u16> = (0..NAMES.len() as u16).collect();
            v.sort_by_key(|&i| NAMES[i as usize]);
            v
        });
        let at = by_name.partition_point(|&i| NAMES[i as usize] < name);
        by_name
            .get(at)
            .filter(|&&i| NAMES[i as usize] == name)
            .map(|&i| ALL[i as usize])
    }
    /// The pure utility atom of this name (decision 21): called by name with one object of
    /// named inputs, implemented by the VM.
    pub fn pure_atom(name: &str) -> Option<NativeId> {
        PURE_ATOMS
            .contains(&name)
            .then(|| NativeId::lookup(name))
            .flatten()
    }
}

/// The pure utility atoms of decision 21, implemented in the VM.
pub const PURE_ATOMS: &[&str] = &[
    "template",
    "regexMatch",
    "pick",
    "omit",
    "merge",
    "keys",
    "split",
    "join",
    "len",
    "jsonParse",
    "jsonStringify",
    "hash",
    "random",
    "uuid",
];

/// Numeric constants of the `Math` namespace, resolved at compile time.
pub const MATH_CONSTANTS: &[(&str, f64)] = &[
    ("PI", std::f64::consts::PI),
    ("E", std::f64::consts::E),
    ("LN2", std::f64::consts::LN_2),
    ("LN10", std::f64::consts::LN_10),
    ("LOG2E", std::f64::consts::LOG2_E),
    ("LOG10E", std::f64::consts::LOG10_E),
    ("SQRT2", std::f64::consts::SQRT_2),
    ("SQRT1_2", std::f64::consts::FRAC_1_SQRT_2),
];

/// Numeric constants of the `Number` namespace, resolved at compile time.
pub const NUMBER_CONSTANTS: &[(&str, f64)] = &[
    ("MAX_SAFE_INTEGER", 9_007_199_254_740_991.0),
    ("MIN_SAFE_INTEGER", -9_007_199_254_740_991.0),
    ("MAX_VALUE", f64::MAX),
    ("MIN_VALUE", 5e-324),
    ("EPSILON", f64::EPSILON),
    ("POSITIVE_INFINITY", f64::INFINITY),
    ("NEGATIVE_INFINITY", f64::NEG_INFINITY),
    ("NaN", f64::NAN),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_the_first_native_of_each_name() {
        for &n in NativeId::all() {
            let first = NativeId::all()
                .iter()
                .position(|m| m.js_name() == n.js_name())
                .map(|i| NativeId::all()[i]);
            assert_eq!(NativeId::lookup(n.js_name()), first);
        }
        for missing in ["", "Math.", "Math.maxx", ".nope", "zzz", "\u{1F600}"] {
            assert_eq!(NativeId::lookup(missing), None);
        }
    }
}
