//! Agent parameter lists are not JavaScript: `function f({ texts: ['a'] })` and `f(a: 5)` type a
//! parameter by an example value (decision 8). Before parsing, every such `:` is rewritten to
//! `=` (one byte for one byte, so every position stays where the user wrote it) and whether the
//! parameter was written `name: example` at the top level (required) is remembered.

use std::borrow::Cow;

use crate::pos::Body;

/// One parameter as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RawParam<'s> {
    /// (borrowed from the source: a name is never rewritten)
    pub name: Cow<'s, str>,
    /// `name` alone or `name: example` at the top level of the list.
    pub required: bool,
}

/// The parameters of one top-level function, in source order.
#[derive(Clone, Debug, PartialEq, Default)]
pub(crate) struct RawFunction<'s> {
    /// (a few inline: no allocation per function)
    pub params: smallvec::SmallVec<[RawParam<'s>; 4]>,
}

/// The bytes that matter in a template literal ([`Scanner::string`]): `\\`, the backtick, `$`,
/// braces and quotes.
static TEMPLATE_BYTES: [bool; 256] = crate::pos::byte_set(b"\\`${}'\"");

struct Scanner<'a> {
    /// The source, and its bytes.
    src: &'a str,
    b: &'a [u8],
    /// The rewritten text, copied from `src` at the first rewrite (`None`: nothing rewritten).
    /// Edited in place (each `:` becomes `=`, one byte for one), so its positions are `src`'s.
    out: Option<String>,
}

/// Per byte: [`IDENT_START`] for a byte that may start an identifier (an ASCII letter, `_`, `$`
/// or any non-ASCII byte), [`IDENT_PART`] for one that may go on one (those and the digits). A
/// table rather than range tests: looked up per byte of every parameter list.
static IDENT_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        if b.is_ascii_alphabetic() || b == b'_' || b == b'$' || b >= 0x80 {
            t[c] = IDENT_START | IDENT_PART;
        } else if b.is_ascii_digit() {
            t[c] = IDENT_PART;
        }
        c += 1;
    }
    t
};
const IDENT_START: u8 = 1;
const IDENT_PART: u8 = 2;

#[inline(always)]
fn is_ident_start(c: u8) -> bool {
    IDENT_BYTES[c as usize] & IDENT_START != 0
}
#[inline(always)]
fn is_ident(c: u8) -> bool {
    IDENT_BYTES[c as usize] & IDENT_PART != 0
}

impl<'a> Scanner<'a> {
    /// A scanner of `src` that has written nothing yet.
    fn new(src: &'a str) -> Self {
        Scanner {
            src,
            b: src.as_bytes(),
            out: None,
        }
    }

    /// Skips whitespace and comments from `i`.
    fn ws(&self, mut i: usize) -> usize {
        let b = self.b;
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if b.get(i) == Some(&b'/') && b.get(i + 1) == Some(&b'/') {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            } else if b.get(i) == Some(&b'/') && b.get(i + 1) == Some(&b'*') {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i = (i + 2).min(b.len());
            } else {
                return i;
            }
        }
    }

    /// Skips a string or template literal starting at `i` (the quote); returns the index after it.
    fn string(&self, mut i: usize) -> usize {
        let b = self.b;
        let q = b[i];
        i += 1;
        if q != b'`' {
            // up to the closing quote or the end of the line
            while i < b.len() {
                let c = b[i];
                if c == b'\\' {
                    i += 2;
                } else if c == q || c == b'\n' {
                    return i + 1;
                } else {
                    i += 1;
                }
            }
            return b.len();
        }
        // a template literal: from one byte that matters to the next (any other byte is only
        // stepped over, not visited one by one)
        let mut depth = 0usize;
        loop {
            let rest = b.get(i..).unwrap_or(&[]);
            i += rest
                .iter()
                .position(|&c| TEMPLATE_BYTES[c as usize])
                .unwrap_or(rest.len());
            let Some(&c) = b.get(i) else {
                return b.len();
            };
            if c == b'\\' {
                i += 2;
                continue;
            }
            if depth == 0 && c == b'`' {
                return i + 1;
            }
            if c == b'$' && b.get(i + 1) == Some(&b'{') {
                depth += 1;
                i += 2;
                continue;
            }
            if depth > 0 && c == b'}' {
                depth -= 1;
            } else if depth > 0 && c == b'{' {
                depth += 1;
            } else if depth > 0 && (c == b'\'' || c == b'"' || c == b'`') {
                i = self.string(i);
                continue;
            }
            i += 1;
        }
    }

    /// The identifier starting at `i`: its bytes and the index after it.
    fn ident(&self, i: usize) -> Option<(&'a [u8], usize)> {
        let b = self.b;
        if i >= b.len() || !is_ident_start(b[i]) {
            return None;
        }
        let mut j = i;
        while j < b.len() && is_ident(b[j]) {
            j += 1;
        }
        Some((&b[i..j], j))
    }

    /// Skips an expression up to (not including) a `,` or one of `close` at bracket depth 0.
    fn skip_expr(&self, mut i: usize, close: u8) -> usize {
        let b = self.b;
        let mut depth = 0usize;
        while i < b.len() {
            let c = b[i];
            match c {
                b'\'' | b'"' | b'`' => {
                    i = self.string(i);
                    continue;
                }
                b'/' if matches!(b.get(i + 1), Some(b'/') | Some(b'*')) => {
                    i = self.ws(i);
                    continue;
                }
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    if depth == 0 {
                        return i;
                    }
                    depth -= 1;
                }
                b',' if depth == 0 => return i,
                _ if c == close && depth == 0 => return i,
                _ => {}
            }
            i += 1;
        }
        i
    }

    /// Reads `name [: example | = default]` at `i`; rewrites a `:` to `=`. Returns the parameter
    /// and the index after it, or `None` when no name starts there (the parser then reports it).
    fn param(&mut self, i: usize, close: u8, top: bool) -> Option<(RawParam<'a>, usize)> {
        let (name, j) = self.ident(i)?;
        // (a name made of whole characters is borrowed from the source)
        let name = match self.src.get(i..j) {
            Some(text) => Cow::Borrowed(text),
            None => String::from_utf8_lossy(name),
        };
        let k = self.ws(j);
        let (required, end) = match self.b.get(k) {
            Some(b':') => {
                let src = self.src;
                self.out
                    .get_or_insert_with(|| src.to_string())
                    .replace_range(k..k + 1, "=");
                (top, self.skip_expr(k + 1, close))
            }
            Some(b'=') if self.b.get(k + 1) != Some(&b'>') => (false, self.skip_expr(k + 1, close)),
            _ => (true, k),
        };
        Some((RawParam { name, required }, end))
    }

    /// Rewrites the parameter list whose `(` is at `open`; returns its parameters and the index
    /// after the `)`.
    fn list(&mut self, open: usize) -> (RawFunction<'a>, usize) {
        let b = self.b;
        let mut f = RawFunction::default();
        let mut i = open + 1;
        loop {
            i = self.ws(i);
            match b.get(i) {
                None => return (f, i),
                Some(b')') => return (f, i + 1),
                Some(b',') => i += 1,
                Some(b'{') => {
                    i += 1;
                    loop {
                        i = self.ws(i);
                        match b.get(i) {
                            None => return (f, i),
                            Some(b'}') => {
                                i += 1;
                                break;
                            }
                            Some(b',') => i += 1,
                            _ => match self.param(i, b'}', false) {
                                Some((p, next)) => {
                                    f.params.push(p);
                                    i = next;
                                }
                                None => i = self.skip_expr(i + 1, b'}'),
                            },
                        }
                    }
                    // a default for the whole pattern (`{ a } = {}`)
                    let k = self.ws(i);
                    if b.get(k) == Some(&b'=') {
                        i = self.skip_expr(k + 1, b')');
                    }
                }
                _ => match self.param(i, b')', true) {
                    Some((p, next)) => {
                        f.params.push(p);
                        i = next;
                    }
                    None => i = self.skip_expr(i + 1, b')'),
                },
            }
        }
    }
}

/// Classes of the bytes that matter inside a function body ([`Scanner::body`]): brackets,
/// quotes, the backtick and `/`; 0 for any other byte.
const B_OPEN: u8 = 1;
const B_CLOSE: u8 = 2;
const B_QUOTE: u8 = 3;
const B_TICK: u8 = 4;
const B_SLASH: u8 = 5;

static BODY_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'(' as usize] = B_OPEN;
    t[b'[' as usize] = B_OPEN;
    t[b'{' as usize] = B_OPEN;
    t[b')' as usize] = B_CLOSE;
    t[b']' as usize] = B_CLOSE;
    t[b'}' as usize] = B_CLOSE;
    t[b'\'' as usize] = B_QUOTE;
    t[b'"' as usize] = B_QUOTE;
    t[b'`' as usize] = B_TICK;
    t[b'/' as usize] = B_SLASH;
    t
};

/// The index of the first byte of [`BODY_BYTES`] at or after `i` (or the length of `b`), found
/// sixteen bytes at a time.
#[inline]
fn skip_plain(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..).and_then(|r| r.first_chunk::<16>()) {
        if let Some(k) = chunk.iter().position(|&c| BODY_BYTES[c as usize] != 0) {
            return i + k;
        }
        i += 16;
    }
    while b.get(i).is_some_and(|&c| BODY_BYTES[c as usize] == 0) {
        i += 1;
    }
    i
}

impl Scanner<'_> {
    /// Skips from `i` inside brackets (a function body, usually), `depth` of them open, up to
    /// the byte after the bracket that closes the last of them or the end of the source: inside
    /// brackets only strings, comments and brackets matter.
    fn body(&self, mut i: usize, depth: &mut usize) -> usize {
        let b = self.b;
        let mut d = *depth;
        let end = loop {
            i = skip_plain(b, i);
            let Some(&c) = b.get(i) else {
                break i;
            };
            match BODY_BYTES[c as usize] {
                B_OPEN => {
                    d += 1;
                    i += 1;
                }
                B_CLOSE => {
                    d -= 1;
                    i += 1;
                    if d == 0 {
                        break i;
                    }
                }
                B_QUOTE => {
                    // [`Self::string`] of a quoted string, inline: up to the closing quote or
                    // the end of the line
                    i += 1;
                    loop {
                        match b.get(i) {
                            None => break,
                            Some(&q) if q == c || q == b'\n' => {
                                i += 1;
                                break;
                            }
                            Some(b'\\') => i += 2,
                            Some(_) => i += 1,
                        }
                    }
                    i = i.min(b.len());
                }
                B_TICK => i = self.string(i),
                _ => {
                    if matches!(b.get(i + 1), Some(b'/') | Some(b'*')) {
                        i = self.ws(i);
                    } else {
                        i += 1;
                    }
                }
            }
        };
        *depth = d;
        end
    }
}

/// Rewrites the parameter lists of top-level `function` declarations; returns the rewritten
/// source (same length, same positions; borrowed when nothing is rewritten) and each function's
/// parameters in source order.
#[cfg(test)]
pub(crate) fn rewrite(source: &str) -> (Cow<'_, str>, Vec<RawFunction<'_>>) {
    rewrite_with(source, &[])
}

/// [`rewrite`]: `bodies` are the top-level brackets of [`crate::pos::prescan_bodies`] (in
/// source order; none is fine): a body whose opening bracket is one of them is read from its
/// first template on, or not at all when it has none (that scan read the rest as this one
/// would).
pub(crate) fn rewrite_with<'s>(
    source: &'s str,
    bodies: &[Body],
) -> (Cow<'s, str>, Vec<RawFunction<'s>>) {
    let mut s = Scanner::new(source);
    let b = s.b;
    // sized for the top-level parentheses (each a function's parameter list at most): its
    // elements are large, so it is never grown
    let lists = bodies
        .iter()
        .filter(|o| b.get(o.open as usize) == Some(&b'('))
        .count();
    let mut fns = Vec::with_capacity(lists);
    let mut depth = 0usize;
    let mut i = 0;
    // the next of `bodies` that may open at or after `i`
    let mut next_body = 0;
    while i < b.len() {
        if depth > 0 {
            i = s.body(i, &mut depth);
            continue;
        }
        let c = b[i];
        match c {
            b'\'' | b'"' | b'`' => {
                i = s.string(i);
                continue;
            }
            b'/' if matches!(b.get(i + 1), Some(b'/') | Some(b'*')) => {
                i = s.ws(i);
                continue;
            }
            b'(' | b'[' | b'{' => {
                while bodies.get(next_body).is_some_and(|o| (o.open as usize) < i) {
                    next_body += 1;
                }
                if let Some(body) = bodies.get(next_body).filter(|o| o.open as usize == i) {
                    let end = body.end as usize;
                    match body.tick {
                        // (no template, or only simple ones: see `Body::simple`)
                        _ if (body.tick.is_none() || body.simple) && end > i && end <= b.len() => {
                            i = end;
                            continue;
                        }
                        Some((t, d)) if (t as usize) > i && (t as usize) < end && d >= 1 => {
                            // on from the template, inside `d` brackets
                            i = t as usize;
                            depth = d as usize;
                            continue;
                        }
                        _ => {}
                    }
                }
                depth += 1;
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ if depth == 0 && is_ident_start(c) && (i == 0 || !is_ident(b[i - 1])) => {
                let Some((word, j)) = s.ident(i) else {
                    i += 1;
                    continue;
                };
                if word == b"function" {
                    let mut k = s.ws(j);
                    if b.get(k) == Some(&b'*') {
                        k = s.ws(k + 1);
                    }
                    if let Some((_, after)) = s.ident(k) {
                        k = s.ws(after);
                    }
                    if b.get(k) == Some(&b'(') {
                        let (f, after) = s.list(k);
                        fns.push(f);
                        i = after;
                        continue;
                    }
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let out = match s.out {
        None => Cow::Borrowed(source),
        Some(out) => Cow::Owned(out),
    };
    (out, fns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identifier_table_is_the_byte_tests() {
        for c in 0..=255u8 {
            let start = c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80;
            assert_eq!(is_ident_start(c), start, "{c:#x}");
            assert_eq!(is_ident(c), start || c.is_ascii_digit(), "{c:#x}");
        }
    }

    /// The first version of [`Scanner::body`], kept to check the fast one against.
    fn body_reference(s: &Scanner, mut i: usize, depth: &mut usize) -> usize {
        let b = s.b;
        loop {
            while b.get(i).is_some_and(|&c| BODY_BYTES[c as usize] == 0) {
                i += 1;
            }
            let Some(&c) = b.get(i) else {
                return i;
            };
            match c {
                b'\'' | b'"' | b'`' => i = s.string(i),
                b'/' if matches!(b.get(i + 1), Some(b'/') | Some(b'*')) => i = s.ws(i),
                b'(' | b'[' | b'{' => {
                    *depth += 1;
                    i += 1;
                }
                b')' | b']' | b'}' => {
                    *depth -= 1;
                    i += 1;
                    if *depth == 0 {
                        return i;
                    }
                }
                _ => i += 1,
            }
        }
    }

    /// The first version of [`Scanner::string`], a byte at a time, kept to check it against.
    fn string_reference(s: &Scanner, mut i: usize) -> usize {
        let b = s.b;
        let q = b[i];
        i += 1;
        let mut depth = 0usize;
        while i < b.len() {
            let c = b[i];
            if c == b'\\' {
                i += 2;
                continue;
            }
            if q == b'`' {
                if depth == 0 && c == b'`' {
                    return i + 1;
                }
                if c == b'$' && b.get(i + 1) == Some(&b'{') {
                    depth += 1;
                    i += 2;
                    continue;
                }
                if depth > 0 && c == b'}' {
                    depth -= 1;
                } else if depth > 0 && c == b'{' {
                    depth += 1;
                } else if depth > 0 && (c == b'\'' || c == b'"' || c == b'`') {
                    i = string_reference(s, i);
                    continue;
                }
            } else if c == q || c == b'\n' {
                return i + 1;
            }
            i += 1;
        }
        b.len()
    }

    #[test]
    fn a_string_ends_where_its_reference_says() {
        let pieces = [
            "`",
            "'",
            "\"",
            "\\",
            "$",
            "${",
            "{",
            "}",
            "\n",
            "\r",
            "a",
            "bcdefghijklmnopq",
            " ",
            "é",
            "/",
            "//",
            "/*",
            "*/",
            "(",
            ")",
            "$$",
            "\\`",
            "\u{2028}",
        ];
        let mut next = crate::test_rng::xorshift(0x6a09_e667_f3bc_c908_u64);
        for _ in 0..30_000 {
            let src = crate::test_rng::soup(&mut next, &pieces, 40);
            let s = Scanner::new(&src);
            for (start, &c) in src.as_bytes().iter().enumerate() {
                if matches!(c, b'`' | b'\'' | b'"') {
                    assert_eq!(
                        s.string(start),
                        string_reference(&s, start),
                        "{src:?} from {start}"
                    );
                }
            }
        }
    }

    #[test]
    fn skipping_the_prescans_bodies_changes_nothing() {
        let same = |src: &str| {
            let Ok((_, bodies)) = crate::pos::prescan_bodies(src, 256) else {
                return;
            };
            assert_eq!(rewrite_with(src, &bodies), rewrite(src), "{src:?}");
        };
        let pieces = [
            "function f(",
            "function (",
            "function* g(",
            "a: 1",
            "b = 2",
            ", ",
            ")",
            "(",
            " {",
            "{",
            "}",
            "[",
            "]",
            "`",
            "${",
            "'",
            "\"",
            "\\",
            "\n",
            "//",
            "/*",
            "*/",
            "/",
            "x",
            " return { y: 1 } ",
            ":",
            "é",
            "\r",
            "`${ /* } */ }`",
            "`a${ '}' }b`",
            "`${ { } }`",
            "`${ ( }`",
            "// `\n",
            "'`'",
            "function h(a: `x`) { ",
            "function k(s = '}') {",
            // simple substitutions, and ones that are nearly so (a bracket of another kind, a
            // brace, a template or a comment inside)
            "`a${x}b`",
            "`${ f(x)[1] }`",
            "`${ a ) }`",
            "`${ (a }`",
            "`${ [ }`",
            "`${ a ${ b } }`",
            "`${ `x` }`",
            "`${ x // }\n }`",
            "`${ a\\}",
            "${",
            "$",
            "}`",
            "`t$${y}`",
            "`\\${z}`",
            " function m(a: 1) { return `${a.b(c)}` } ",
        ];
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1d_u64);
        for _ in 0..100_000 {
            let src = crate::test_rng::soup(&mut next, &pieces, 30);
            same(&src);
        }
        // the agent, and the agent with a piece put in, in many places
        let agent = include_str!("../../../benches/programs/agent_8k.js");
        same(agent);
        for _ in 0..1_000 {
            let mut at = next() % agent.len();
            while !agent.is_char_boundary(at) {
                at -= 1;
            }
            let piece = pieces[next() % pieces.len()];
            same(&format!("{}{piece}{}", &agent[..at], &agent[at..]));
        }
    }

    #[test]
    fn a_body_ends_where_its_reference_says() {
        let pieces = [
            "(",
            ")",
            "[",
            "]",
            "{",
            "}",
            "'",
            "\"",
            "`",
            "${",
            "/",
            "//",
            "/*",
            "*/",
            "\\",
            "\n",
            "a",
            "bcdefghijklmnopqrstu",
            " ",
            "x = 'a(b' + \"c]\"",
            "é",
        ];
        let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15_u64);
        for _ in 0..20_000 {
            let src = crate::test_rng::soup(&mut next, &pieces, 40);
            let s = Scanner::new(&src);
            for start in 0..=src.len() {
                for depth in [1, 2, 3] {
                    let (mut d0, mut d1) = (depth, depth);
                    let got = s.body(start, &mut d0);
                    let want = body_reference(&s, start, &mut d1);
                    assert_eq!((got, d0), (want, d1), "{src:?} from {start}, depth {depth}");
                }
            }
        }
    }

    #[test]
    fn rewrites_examples_keeping_positions() {
        let src = "function summarize({ texts: ['a'], n = 2, k }) { return { x: 1 } }";
        let (out, fns) = rewrite(src);
        assert_eq!(
            out,
            "function summarize({ texts= ['a'], n = 2, k }) { return { x: 1 } }"
        );
        assert_eq!(
            fns[0].params[..],
            [
                RawParam {
                    name: "texts".into(),
                    required: false
                },
                RawParam {
                    name: "n".into(),
                    required: false
                },
                RawParam {
                    name: "k".into(),
                    required: true
                },
            ]
        );
        let (out, fns) = rewrite("function h(a, b: 'x') { return a }\nfunction main(q: { a: 1, b: [1, 2] }, z = 'a:b') {}");
        assert_eq!(out, "function h(a, b= 'x') { return a }\nfunction main(q= { a: 1, b: [1, 2] }, z = 'a:b') {}");
        assert_eq!(fns.len(), 2);
        assert!(fns[1].params[0].required && !fns[1].params[1].required);
    }
}
