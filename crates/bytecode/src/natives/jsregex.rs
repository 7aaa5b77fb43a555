//! JavaScript regular-expression syntax translated to the syntax of a linear-time engine
//! (Rust's `regex` crate), decision 23. Features that need backtracking (backreferences,
//! lookahead, lookbehind) are refused with a message saying so; so are the `y`, `d` and `v` flags.
//!
//! The translation keeps JavaScript's meaning where the engines differ: `\d \w \s \b` are
//! JavaScript's (ASCII digits and word characters, JavaScript's whitespace set), `.` stops at
//! every JavaScript line terminator, `[^]` matches anything, and every literal character is
//! written as `\x{…}` so no character is special by accident.

/// Longest pattern accepted, in characters (reference §6.6).
pub const MAX_PATTERN_LEN: usize = 1000;

/// A translated pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsRegex {
    /// The pattern in the linear-time engine's syntax (flags `i m s` already inlined).
    pub rust: String,
    /// `g`.
    pub global: bool,
    /// `i`.
    pub ignore_case: bool,
    /// `m`.
    pub multiline: bool,
    /// `s`.
    pub dot_all: bool,
    /// `u`.
    pub unicode: bool,
    /// Capture groups (not counting the whole match).
    pub groups: usize,
}

const WS: &str = "\\x{9}\\x{A}\\x{B}\\x{C}\\x{D}\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
const WORD: &str = "0-9A-Za-z_";
const BACKTRACK: &str =
    "need a backtracking regex engine, which AJS does not have (patterns run in linear time)";
/// What to write instead of a lookaround: the pattern without it, the rest checked in code.
const INSTEAD_LOOKAROUND: &str = "; match without it and check the rest in code (a second regex, `startsWith`, `endsWith`, `includes`, or a `while` loop over the string)";
/// What to write instead of a backreference: capture both parts, compare them in code.
const INSTEAD_BACKREF: &str = "; capture both parts and compare them in code (`m[1] === m[2]`)";

/// Checks the flags and translates `pattern`.
///
/// # Errors
/// A message for a refused feature or flag, or a syntax error.
pub fn translate(pattern: &str, flags: &str) -> Result<JsRegex, String> {
    let n = pattern.chars().count();
    if n > MAX_PATTERN_LEN {
        return Err(format!("Regex pattern too long ({n} > {MAX_PATTERN_LEN})"));
    }
    let mut r = JsRegex {
        rust: String::new(),
        global: false,
        ignore_case: false,
        multiline: false,
        dot_all: false,
        unicode: false,
        groups: 0,
    };
    for f in flags.chars() {
        let slot = match f {
            'g' => &mut r.global,
            'i' => &mut r.ignore_case,
            'm' => &mut r.multiline,
            's' => &mut r.dot_all,
            'u' => &mut r.unicode,
            'y' => return Err("The regex flag 'y' (sticky) is not supported in AJS".into()),
            'd' => return Err("The regex flag 'd' (match indices) is not supported in AJS".into()),
            'v' => return Err("The regex flag 'v' is not supported in AJS; use 'u'".into()),
            _ => return Err(format!("Invalid regular expression flags '{flags}'")),
        };
        if *slot {
            return Err(format!("Invalid regular expression flags '{flags}'"));
        }
        *slot = true;
    }
    let s: Vec<char> = pattern.chars().collect();
    let has_names = s
        .windows(4)
        .any(|w| w[..3] == ['(', '?', '<'] && !matches!(w[3], '=' | '!'));
    let mut p = Parser {
        names: Vec::new(),
        has_names,
        s,
        i: 0,
        out: String::new(),
        re: &mut r,
        depth: 0,
    };
    p.disjunction()?;
    if p.i < p.s.len() {
        return Err(p.err("Unmatched ')'"));
    }
    let body = std::mem::take(&mut p.out);
    r.rust = if r.ignore_case {
        format!("(?i){body}")
    } else {
        body
    };
    Ok(r)
}

struct Parser<'r> {
    /// Capture group names seen so far (JavaScript refuses a name twice).
    names: Vec<String>,
    /// The pattern has a named group (then `\k` always starts a named reference).
    has_names: bool,
    s: Vec<char>,
    i: usize,
    out: String,
    re: &'r mut JsRegex,
    depth: usize,
}

/// A character that may start a JavaScript group name (IdentifierStartChar).
fn id_start(c: char) -> bool {
    c == '$' || c == '_' || unicode_ident::is_xid_start(c)
}

/// A character that may continue a JavaScript group name (IdentifierPartChar).
fn id_continue(c: char) -> bool {
    c == '$' || c == '\u{200C}' || c == '\u{200D}' || unicode_ident::is_xid_continue(c)
}

/// The engine's name for the JavaScript capture group `name` (any identifier, `$` and `π`
/// included): `g` and the hex digits of its UTF-8, which every engine accepts and
/// [`js_group_name`] reverses.
pub fn engine_group_name(name: &str) -> String {
    let mut out = String::with_capacity(1 + 2 * name.len());
    out.push('g');
    for b in name.bytes() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The JavaScript name behind a group name [`engine_group_name`] made (`None` for any other).
pub fn js_group_name(engine: &str) -> Option<String> {
    let hex = engine.strip_prefix('g')?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn lit(c: char) -> String {
    if c.is_ascii_alphanumeric() {
        c.to_string()
    } else {
        format!("\\x{{{:X}}}", c as u32)
    }
}

impl Parser<'_> {
    fn err(&self, m: &str) -> String {
        let src: String = self.s.iter().collect();
        format!("Invalid regular expression: /{src}/: {m}")
    }
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }
    fn at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn disjunction(&mut self) -> Result<(), String> {
        loop {
            self.alternative()?;
            if self.eat('|') {
                self.out.push('|');
            } else {
                return Ok(());
            }
        }
    }

    fn alternative(&mut self) -> Result<(), String> {
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                return Ok(());
            }
            self.term()?;
        }
        Ok(())
    }

    fn term(&mut self) -> Result<(), String> {
        let c = self.peek().unwrap_or('\0');
        // assertions
        match c {
            '^' => {
                self.i += 1;
                self.out
                    .push_str(if self.re.multiline { "(?m:^)" } else { "^" });
                return self.no_quantifier();
            }
            '$' => {
                self.i += 1;
                self.out
                    .push_str(if self.re.multiline { "(?m:$)" } else { "$" });
                return self.no_quantifier();
            }
            '\\' if matches!(self.at(1), Some('b' | 'B')) => {
                let b = self.at(1) == Some('b');
                self.i += 2;
                self.out.push_str(if b { "(?-u:\\b)" } else { "(?-u:\\B)" });
                return self.no_quantifier();
            }
            '(' if self.at(1) == Some('?')
                && (matches!(self.at(2), Some('=' | '!'))
                    || (self.at(2) == Some('<') && matches!(self.at(3), Some('=' | '!')))) =>
            {
                let what = if self.at(2) == Some('<') {
                    "Lookbehind (?<= or (?<!)"
                } else {
                    "Lookahead (?= or (?!)"
                };
                return Err(format!("{what} {BACKTRACK}{INSTEAD_LOOKAROUND}"));
            }
            _ => {}
        }
        let start = self.out.len();
        self.atom()?;
        self.quantifier(start)
    }

    fn no_quantifier(&mut self) -> Result<(), String> {
        if matches!(self.peek(), Some('*' | '+' | '?'))
            || (self.peek() == Some('{') && self.counted().is_some())
        {
            return Err(self.err("Nothing to repeat"));
        }
        Ok(())
    }

    /// A counted quantifier `{n}`, `{n,}`, `{n,m}` at the cursor: its text and length.
    fn counted(&self) -> Option<(String, usize)> {
        let mut k = self.i + 1;
        let digits = |k: &mut usize| {
            let st = *k;
            while self.s.get(*k).is_some_and(|c| c.is_ascii_digit()) {
                *k += 1;
            }
            (st < *k).then(|| self.s[st..*k].iter().collect::<String>())
        };
        let a = digits(&mut k)?;
        let mut text = format!("{{{a}");
        if self.s.get(k) == Some(&',') {
            k += 1;
            text.push(',');
            if let Some(b) = digits(&mut k) {
                let (x, y): (u64, u64) =
                    (a.parse().unwrap_or(u64::MAX), b.parse().unwrap_or(u64::MAX));
                if y < x {
                    return Some(("!".into(), 0));
                }
                text.push_str(&b);
            }
        }
        if self.s.get(k) != Some(&'}') {
            return None;
        }
        text.push('}');
        Some((text, k + 1 - self.i))
    }

    fn quantifier(&mut self, atom_start: usize) -> Result<(), String> {
        let q = match self.peek() {
            Some(c @ ('*' | '+' | '?')) => {
                self.i += 1;
                c.to_string()
            }
            Some('{') => match self.counted() {
                Some((t, _)) if t == "!" => {
                    return Err(self.err("numbers out of order in {} quantifier"))
                }
                Some((t, len)) => {
                    self.i += len;
                    t
                }
                None if self.re.unicode => return Err(self.err("Incomplete quantifier")),
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        if atom_start == self.out.len() {
            return Err(self.err("Nothing to repeat"));
        }
        self.out.push_str(&q);
        if self.eat('?') {
            self.out.push('?');
        }
        if matches!(self.peek(), Some('*' | '+' | '?'))
            || (self.peek() == Some('{') && self.counted().is_some())
        {
            return Err(self.err("Nothing to repeat"));
        }
        Ok(())
    }

    fn atom(&mut self) -> Result<(), String> {
        let Some(c) = self.peek() else {
            return Ok(());
        };
        self.i += 1;
        match c {
            '.' => self.out.push_str(if self.re.dot_all {
                "(?s:.)"
            } else {
                "[^\\x{A}\\x{D}\\x{2028}\\x{2029}]"
            }),
            '(' => {
                self.depth += 1;
                if self.depth > 100 {
                    return Err(self.err("groups nested too deeply"));
                }
                if self.eat('?') {
                    if self.eat(':') {
                        self.out.push_str("(?:");
                    } else if self.eat('<') {
                        let name = self
                            .group_name()
                            .ok_or_else(|| self.err("Invalid capture group name"))?;
                        if self.names.contains(&name) {
                            return Err(self.err("Duplicate capture group name"));
                        }
                        self.re.groups += 1;
                        self.out
                            .push_str(&format!("(?P<{}>", engine_group_name(&name)));
                        self.names.push(name);
                    } else {
                        return Err(self.err("Invalid group"));
                    }
                } else {
                    self.re.groups += 1;
                    self.out.push('(');
                }
                self.disjunction()?;
                if !self.eat(')') {
                    return Err(self.err("Unterminated group"));
                }
                self.depth -= 1;
                self.out.push(')');
            }
            ')' => return Err(self.err("Unmatched ')'")),
            '[' => self.class()?,
            '*' | '+' | '?' => return Err(self.err("Nothing to repeat")),
            '{' if self.re.unicode || {
                self.i -= 1;
                let q = self.counted().is_some();
                self.i += 1;
                q
            } =>
            {
                return Err(self.err("Nothing to repeat"))
            }
            ']' | '}' if self.re.unicode => return Err(self.err("Lone quantifier brackets")),
            '\\' => {
                let e = self.escape(false)?;
                let one = e
                    .strip_prefix("\\x{")
                    .and_then(|h| u32::from_str_radix(h.strip_suffix('}')?, 16).ok())
                    .and_then(char::from_u32)
                    .or_else(|| {
                        e.chars()
                            .next()
                            .filter(|c| c.is_ascii_alphanumeric() && e.len() == 1)
                    });
                match one {
                    Some(c) => self.out.push_str(&self.literal(c)),
                    None => self.out.push_str(&e),
                }
            }
            c => self.out.push_str(&self.literal(c)),
        }
        Ok(())
    }

    /// An escape after `\` (the backslash consumed). `in_class`: inside `[...]`.
    fn escape(&mut self, in_class: bool) -> Result<String, String> {
        let Some(c) = self.peek() else {
            return Err(self.err("\\ at end of pattern"));
        };
        self.i += 1;
        Ok(match c {
            'd' => "[0-9]".to_string(),
            'D' => "[^0-9]".to_string(),
            'w' => format!("[{WORD}]"),
            'W' => format!("[^{WORD}]"),
            's' => format!("[{WS}]"),
            'S' => format!("[^{WS}]"),
            'b' if in_class => lit('\u{8}'),
            't' => lit('\t'),
            'n' => lit('\n'),
            'v' => lit('\u{B}'),
            'f' => lit('\u{C}'),
            'r' => lit('\r'),
            '0' if !self.peek().is_some_and(|d| d.is_ascii_digit()) => lit('\0'),
            '1'..='9' | '0' => {
                return Err(format!(
                    "Backreferences (\\{c}) {BACKTRACK}{INSTEAD_BACKREF}"
                ));
            }
            // with the `u` flag or a named group in the pattern, `\k` must start a reference
            'k' if self.re.unicode || self.has_names => {
                if self.peek() != Some('<') {
                    return Err(self.err("Invalid named reference"));
                }
                return Err(format!(
                    "Named backreferences (\\k<name>) {BACKTRACK}{INSTEAD_BACKREF}"
                ));
            }
            'c' => match self.peek() {
                Some(l) if l.is_ascii_alphabetic() => {
                    self.i += 1;
                    lit(char::from((l as u8) % 32))
                }
                _ if self.re.unicode => return Err(self.err("Invalid unicode escape")),
                _ => {
                    self.i -= 1;
                    lit('\\')
                }
            },
            'x' => match self.hex(2) {
                Some(v) => lit(char::from_u32(v).unwrap_or('\u{FFFD}')),
                None => lit('x'),
            },
            'u' => {
                if self.peek() == Some('{') && self.re.unicode {
                    self.i += 1;
                    let st = self.i;
                    while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                        self.i += 1;
                    }
                    let h: String = self.s[st..self.i].iter().collect();
                    let v = u32::from_str_radix(&h, 16).ok().filter(|v| *v <= 0x10FFFF);
                    if !self.eat('}') || v.is_none() {
                        return Err(self.err("Invalid Unicode escape"));
                    }
                    return self.code_point(v.unwrap_or(0));
                }
                match self.hex(4) {
                    Some(hi) if (0xD800..0xDC00).contains(&hi) => {
                        if self.at(0) == Some('\\') && self.at(1) == Some('u') {
                            let save = self.i;
                            self.i += 2;
                            match self.hex(4) {
                                Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                    let v = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                    return self.code_point(v);
                                }
                                _ => self.i = save,
                            }
                        }
                        return self.code_point(hi);
                    }
                    Some(v) => return self.code_point(v),
                    None if self.re.unicode => return Err(self.err("Invalid Unicode escape")),
                    None => lit('u'),
                }
            }
            'p' | 'P' if self.re.unicode => {
                if !self.eat('{') {
                    return Err(self.err("Invalid property name"));
                }
                let st = self.i;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '=')
                {
                    self.i += 1;
                }
                let name: String = self.s[st..self.i].iter().collect();
                if !self.eat('}') || name.is_empty() {
                    return Err(self.err("Invalid property name"));
                }
                format!("\\{c}{{{name}}}")
            }
            c if self.re.unicode && c.is_ascii_alphanumeric() => {
                return Err(self.err("Invalid escape"));
            }
            c => lit(c),
        })
    }

    /// A group name after `(?<`, through its `>`: identifier characters, literal or written as
    /// `\uXXXX` (a surrogate pair as two), or `\u{…}`, with or without the `u` flag.
    fn group_name(&mut self) -> Option<String> {
        let mut name = String::new();
        loop {
            let c = match self.peek()? {
                '>' => {
                    self.i += 1;
                    return (!name.is_empty()).then_some(name);
                }
                '\\' if self.at(1) == Some('u') => {
                    self.i += 2;
                    self.name_escape()?
                }
                c => {
                    self.i += 1;
                    c
                }
            };
            let ok = if name.is_empty() {
                id_start(c)
            } else {
                id_continue(c)
            };
            if !ok {
                return None;
            }
            name.push(c);
        }
    }

    /// The character of a `\u` escape in a group name (the `\u` consumed).
    fn name_escape(&mut self) -> Option<char> {
        if self.eat('{') {
            let st = self.i;
            while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                self.i += 1;
            }
            let h: String = self.s[st..self.i].iter().collect();
            let v = u32::from_str_radix(&h, 16).ok()?;
            return self.eat('}').then(|| char::from_u32(v)).flatten();
        }
        let hi = self.hex(4)?;
        if (0xD800..0xDC00).contains(&hi) && self.at(0) == Some('\\') && self.at(1) == Some('u') {
            self.i += 2;
            let lo = self.hex(4).filter(|lo| (0xDC00..0xE000).contains(lo))?;
            return char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
        }
        char::from_u32(hi)
    }

    /// `c` as a literal outside a class. With `i` and without `u` JavaScript compares
    /// characters by their single-character upper case, not by Unicode case folding: the few
    /// folding pairs that differ (the Kelvin and Angstrom signs, long s, ...) stay apart.
    fn literal(&self, c: char) -> String {
        if !self.re.ignore_case || self.re.unicode {
            return lit(c);
        }
        match c {
            'k' | 'K' => "(?-i:[kK])".into(),
            's' | 'S' => "(?-i:[sS])".into(),
            '\u{E5}' | '\u{C5}' => "(?-i:[\\x{E5}\\x{C5}])".into(),
            '\u{3C9}' | '\u{3A9}' => "(?-i:[\\x{3C9}\\x{3A9}])".into(),
            '\u{212A}' | '\u{17F}' | '\u{212B}' | '\u{2126}' | '\u{DF}' | '\u{1E9E}'
            | '\u{390}' | '\u{1FD3}' | '\u{3B0}' | '\u{1FE3}' | '\u{FB05}' | '\u{FB06}' => {
                format!("(?-i:{})", lit(c))
            }
            c => lit(c),
        }
    }

    fn code_point(&self, v: u32) -> Result<String, String> {
        match char::from_u32(v) {
            Some(c) => Ok(lit(c)),
            None => Err(self.err("a lone surrogate (\\uD800-\\uDFFF) cannot be matched in AJS")),
        }
    }

    fn hex(&mut self, n: usize) -> Option<u32> {
        let h: String = self.s.get(self.i..self.i + n)?.iter().collect();
        if h.len() != n || !h.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.i += n;
        u32::from_str_radix(&h, 16).ok()
    }

    /// One class atom: a single character (its code point) or a class escape (its text).
    fn class_atom(&mut self) -> Result<Result<u32, String>, String> {
        let Some(c) = self.peek() else {
            return Err(self.err("Unterminated character class"));
        };
        self.i += 1;
        if c != '\\' {
            return Ok(Ok(c as u32));
        }
        if matches!(self.peek(), Some('d' | 'D' | 'w' | 'W' | 's' | 'S')) {
            let e = self.escape(true)?;
            return Ok(Err(e));
        }
        if self.peek() == Some('-') {
            self.i += 1;
            return Ok(Ok('-' as u32));
        }
        if self.re.unicode && matches!(self.peek(), Some('p' | 'P')) {
            return Ok(Err(self.escape(true)?));
        }
        let e = self.escape(true)?;
        // a single character written as \x{…} or alphanumeric
        let v = if let Some(h) = e.strip_prefix("\\x{").and_then(|h| h.strip_suffix('}')) {
            u32::from_str_radix(h, 16).unwrap_or(0xFFFD)
        } else {
            e.chars().next().map_or(0, |c| c as u32)
        };
        Ok(Ok(v))
    }

    fn class(&mut self) -> Result<(), String> {
        let neg = self.eat('^');
        if self.eat(']') {
            self.out.push_str(if neg {
                "(?s:.)"
            } else {
                "[^\\x{0}-\\x{10FFFF}]"
            });
            return Ok(());
        }
        let mut body = String::new();
        loop {
            if self.eat(']') {
                break;
            }
            let a = self.class_atom()?;
            if self.peek() == Some('-') && self.at(1).is_some_and(|c| c != ']') {
                self.i += 1;
                let b = self.class_atom()?;
                match (a, b) {
                    (Ok(x), Ok(y)) => {
                        if y < x {
                            return Err(self.err("Range out of order in character class"));
                        }
                        let cx = char::from_u32(x)
                            .ok_or_else(|| self.err("a lone surrogate cannot be matched in AJS"))?;
                        let cy = char::from_u32(y)
                            .ok_or_else(|| self.err("a lone surrogate cannot be matched in AJS"))?;
                        body.push_str(&format!("{}-{}", lit(cx), lit(cy)));
                    }
                    (x, y) => {
                        if self.re.unicode {
                            return Err(self.err("Invalid character class"));
                        }
                        for part in [x, Ok('-' as u32), y] {
                            match part {
                                Ok(v) => {
                                    body.push_str(&lit(char::from_u32(v).unwrap_or('\u{FFFD}')))
                                }
                                Err(e) => body.push_str(&e),
                            }
                        }
                    }
                }
                continue;
            }
            match a {
                Ok(v) => match char::from_u32(v) {
                    Some(c) => body.push_str(&lit(c)),
                    None => return Err(self.err("a lone surrogate cannot be matched in AJS")),
                },
                Err(e) => body.push_str(&e),
            }
        }
        self.out.push('[');
        if neg {
            self.out.push('^');
        }
        self.out.push_str(&body);
        self.out.push(']');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::translate;

    #[test]
    fn refuses_backtracking_features_and_flags() {
        for p in [
            "(a)\\1",
            "a(?=b)",
            "a(?!b)",
            "(?<=a)b",
            "(?<!a)b",
            "(?<n>a)\\k<n>",
        ] {
            let e = translate(p, "").unwrap_err();
            assert!(e.contains("backtracking"), "{p}: {e}");
        }
        assert!(translate("a", "y").unwrap_err().contains("sticky"));
        assert!(translate("a", "gg").is_err());
        assert!(translate("(", "").is_err());
        assert!(translate("*", "").is_err());
        assert!(translate(&"a".repeat(1001), "")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn group_names_take_unicode_escapes() {
        use super::{engine_group_name, translate};
        for (p, name) in [
            ("(?<\\u{03C0}>a)", "\u{3C0}"),
            ("(?<_\\u200C>a)", "_\u{200C}"),
            ("(?<\\ud835\\udcd1>a)", "\u{1D4D1}"),
            ("(?<a\\u0062>a)", "ab"),
        ] {
            let r = translate(p, "").unwrap();
            assert!(r.rust.contains(&engine_group_name(name)), "{p}: {}", r.rust);
        }
        for p in [
            "(?<\\u0031>a)",
            "(?<a\\u{110000}>a)",
            "(?<\\ud835>a)",
            "(?<a\\u00>a)",
        ] {
            assert!(translate(p, "").unwrap_err().contains("group name"), "{p}");
        }
    }

    #[test]
    fn early_errors_of_k_and_c_escapes() {
        assert!(translate("(?<a>.)\\k", "")
            .unwrap_err()
            .contains("named reference"));
        assert!(translate("\\k", "u")
            .unwrap_err()
            .contains("named reference"));
        assert!(
            translate("\\k<a>", "").is_ok(),
            "a literal k<a> without named groups"
        );
        assert!(translate("\\c0", "u").unwrap_err().contains("escape"));
        assert!(translate("\\c0", "").is_ok());
    }

    #[test]
    fn ignore_case_without_u_keeps_folding_pairs_apart() {
        let r = translate("\\u212ak", "i").unwrap();
        assert_eq!(r.rust, "(?i)(?-i:\\x{212A})(?-i:[kK])");
        assert_eq!(translate("k", "iu").unwrap().rust, "(?i)k");
        assert_eq!(translate("k", "").unwrap().rust, "k");
    }

    #[test]
    fn translates_javascript_classes() {
        let r = translate("\\d+\\.\\w*[^a-c\\s]", "gi").unwrap();
        assert!(r.global && r.ignore_case);
        assert!(r.rust.starts_with("(?i)[0-9]+"));
        assert_eq!(translate("(a)(?:b)(?<n>c)", "").unwrap().groups, 2);
    }
}
