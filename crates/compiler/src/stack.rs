//! The stack guard. oxc's parser recurses once per nesting level and has no limit of its own, and
//! a stack overflow aborts the process: before parsing, one scan bounds how deep the parse (and
//! the lowering after it) can recurse on a source, in units of stack, and the compile runs on a
//! stack known to hold that many (the caller's for a small bound, else a thread's sized from it).
//!
//! The bound: [`BRACKET_UNITS`] per open bracket (`(`, `[`, `{`, `${`) plus one per operator
//! character and per keyword that can nest without a bracket (`typeof typeof …`, `else if …`),
//! counted for everything written directly inside each open bracket before the deepest point.
//! What a bracket contained stops counting when it closes (the parser's frames for it have
//! returned), and a `,` or `;` ends the levels it can end ([`Scan::separator`]). Strings, comments, template text and regexes are skipped as oxc's lexer skips them;
//! where the scan cannot tell what the parser reads (a `/` that may divide or start a regex, an
//! HTML-like comment, an unterminated literal, a byte the lexer rejects) it counts every opening
//! bracket and no closing one, which can only over-estimate. The scan also hands the parameter
//! rewrite the top-level brackets it read plainly ([`Body`]), which that rewrite may skip.

use crate::{Fail, MAX_BRACKET_DEPTH};

/// Units a bracket level counts for: the parser spends up to about three times the stack on a
/// bracket level as on an operator or a keyword.
const BRACKET_UNITS: usize = 3;

/// Bytes of parser stack one unit may cost: about twice the most measured on any construct, for
/// the build profile in use (see docs/performance-log.md).
const STACK_PER_UNIT: usize = if cfg!(debug_assertions) { 4096 } else { 1280 };

/// Stack a compile needs besides its units: the lowering (its recursion is capped by
/// [`crate::MAX_NESTING`]) and the frames of a flat source, about twice the most measured.
const BASE_STACK: usize = if cfg!(debug_assertions) {
    2048 * 1024
} else {
    256 * 1024
};

/// Stack of the caller a compile may use (every thread Rust starts has 2 MiB): a compile whose
/// bound fits runs on the caller's thread, as every ordinary program does in a release build.
const INLINE_STACK: usize = 512 * 1024;

/// Most stack a compile thread gets; a source that would need more is refused as too deep.
const MAX_STACK: usize = 256 * 1024 * 1024;

/// The most units compiled on the caller's stack (none in a debug build).
const INLINE_UNITS: usize = INLINE_STACK.saturating_sub(BASE_STACK) / STACK_PER_UNIT;

/// The most units compiled at all.
const MAX_UNITS: usize = (MAX_STACK - BASE_STACK) / STACK_PER_UNIT;

/// The longest source compiled without a scan: a byte counts for at most [`BRACKET_UNITS`].
const SHORT_SOURCE: usize = INLINE_UNITS / BRACKET_UNITS;

/// Most consecutive prefix or right-associative operator characters (`!-+~?=`, white space
/// between them allowed).
const MAX_OPERATOR_RUN: usize = 4 * MAX_BRACKET_DEPTH;

/// The refusal of code nested deeper than the scan admits, with what to write instead.
pub(crate) const NESTING_MSG: &str = "nesting too deep; split the expression into statements with let (or close a bracket left open)";

/// Runs `compile` (the parse and lowering of `src`) on a stack big enough for it, or refuses
/// `src` as nested too deeply.
pub(crate) fn guarded<T: Send>(
    src: &str,
    compile: impl FnOnce(&[Body]) -> Result<T, Fail> + Send,
) -> Result<T, Fail> {
    // (`SHORT_SOURCE` is zero in a debug build)
    #[allow(clippy::absurd_extreme_comparisons)]
    let (units, bodies) = if src.len() <= SHORT_SOURCE {
        (src.len() * BRACKET_UNITS, Vec::new())
    } else {
        std::panic::catch_unwind(|| bound(src, MAX_UNITS))
            .unwrap_or_else(|_| Err(Fail::new(0, "internal compiler error")))?
    };
    let compile = move || compile(&bodies);
    let stack = BASE_STACK + units * STACK_PER_UNIT;
    if stack <= INLINE_STACK {
        return compile();
    }
    std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("ajs-compile".into())
            .stack_size(stack)
            .spawn_scoped(s, compile)
        {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err(Fail::new(0, "internal compiler error"))),
            Err(_) => Err(Fail::new(
                0,
                "nesting too deep for the stack this system grants (nest less deeply: split the expression into statements with let)",
            )),
        }
    })
}

/// What the previous token says about a following `/`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Prev {
    /// A value ended (identifier, number, string, `]`): `/` divides.
    Value,
    /// An operator, an opening bracket or a keyword that takes an expression: `/` starts a regex.
    Expr,
    /// Either (`)`, `}`, `++`, a word after which a line break may end the statement).
    Unknown,
}

/// A bracket the scan read at the top level, from its index to the index after the bracket that
/// closed it, with nothing between them that [`crate::params`] could read otherwise: no template,
/// regex, uncertain part, or `//` comment ended by anything but LF (strings end at their quote
/// on their line, brackets are brackets), so the parameter rewrite may skip it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Body {
    pub open: u32,
    pub end: u32,
}

/// An open bracket of [`bound`] (or the top level).
struct Frame {
    /// Where it opened, and [`Scan::murky`] then.
    at: usize,
    murky: usize,
    /// The units where it opened, and right after it opened.
    base: usize,
    floor: usize,
    /// The units it counts for statements written directly inside it (see [`Scan::separator`]).
    statements: usize,
    /// A template's `${`.
    template: bool,
}

/// The state of [`bound`].
struct Scan<'s> {
    b: &'s [u8],
    /// The open frames, the top level first.
    open: Vec<Frame>,
    /// Units of every open frame and of what each directly contains so far.
    units: usize,
    /// The most `units` reached before they last went down.
    peak: usize,
    max_units: usize,
    /// Open brackets as the depth limit counts them (every closing bracket closes one).
    depth: usize,
    /// Consecutive prefix or right-associative operator characters.
    run: usize,
    /// How many parts [`Body`] excludes the scan has read.
    murky: usize,
    /// The top-level brackets that closed with nothing murky inside.
    bodies: Vec<Body>,
}

/// The units of [`bound`] alone.
#[cfg(test)]
fn units(src: &str, max_units: usize) -> Result<usize, Fail> {
    bound(src, max_units).map(|(u, _)| u)
}

/// How many stack units compiling `src` may take (see the module comment), and the top-level
/// [`Body`]s; or a refusal: more than `max_units`, brackets nested deeper than
/// [`MAX_BRACKET_DEPTH`] or a run of more than [`MAX_OPERATOR_RUN`] operator characters.
pub(crate) fn bound(src: &str, max_units: usize) -> Result<(usize, Vec<Body>), Fail> {
    let b = src.as_bytes();
    let mut open = Vec::with_capacity(16);
    open.push(Frame {
        at: 0,
        murky: 0,
        base: 0,
        floor: 0,
        statements: 0,
        template: false,
    });
    let mut s = Scan {
        b,
        open,
        units: 0,
        peak: 0,
        max_units,
        depth: 0,
        run: 0,
        murky: 0,
        bodies: Vec::new(),
    };
    let u = scan(&mut s)?;
    Ok((u, s.bodies))
}

/// The scan of [`bound`].
fn scan(s: &mut Scan) -> Result<usize, Fail> {
    let b = s.b;
    let mut prev = Prev::Expr;
    let mut i = 0;
    // a hashbang comment (like HTML-like comments below) is read as uncertain
    if b.starts_with(b"#!") {
        i = s.uncertain(0, true)?;
    }
    while i < b.len() {
        let c = b[i];
        let p = i;
        match CLASS[c as usize] {
            SPACE => {
                i += 1;
                while b.get(i).is_some_and(|&c| CLASS[c as usize] == SPACE) {
                    i += 1;
                }
            }
            WORD => {
                s.run = 0;
                let mut j = i + 1;
                while b.get(j).is_some_and(|&c| CLASS[c as usize] <= DIGIT) {
                    j += 1;
                }
                if b.get(j).is_some_and(|&c| odd_byte(c)) {
                    let (end, hidden) = word_end(b, j);
                    prev = s.odd_word(p, hidden)?;
                    i = end;
                    continue;
                }
                let (nesting, next) = keyword(&b[i..j]);
                match nesting {
                    Nesting::None => {}
                    Nesting::Expression => s.unit(p)?,
                    Nesting::Statement => s.statement_unit(p)?,
                }
                prev = next;
                i = j;
            }
            OPEN => {
                s.open(p, false)?;
                s.run = 0;
                prev = Prev::Expr;
                i += 1;
            }
            CLOSE => {
                s.depth = s.depth.saturating_sub(1);
                s.run = 0;
                i += 1;
                prev = if c == b']' {
                    Prev::Value
                } else {
                    Prev::Unknown
                };
                if s.close(i) {
                    let (next, ended) = s.template_text(i)?;
                    i = next;
                    prev = if ended { Prev::Value } else { Prev::Expr };
                }
            }
            TICK => {
                s.run = 0;
                let (next, ended) = s.template_text(i + 1)?;
                i = next;
                prev = if ended { Prev::Value } else { Prev::Expr };
            }
            QUOTE => {
                s.run = 0;
                i += 1;
                loop {
                    match b.get(i) {
                        None => break,
                        Some(&q) if q == c => {
                            i += 1;
                            break;
                        }
                        // an unterminated string: the lexer's recovery is not followed
                        Some(b'\n' | b'\r') => return s.poisoned(i),
                        Some(b'\\') => i += 2,
                        Some(_) => i += 1,
                    }
                }
                prev = Prev::Value;
            }
            SLASH if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && !line_end(b, i) {
                    i += 1;
                }
                if b.get(i).is_some_and(|&c| c != b'\n') {
                    s.murky += 1;
                }
            }
            SLASH if b.get(i + 1) == Some(&b'*') => {
                i = match memchr::memmem::find(b.get(i + 2..).unwrap_or(&[]), b"*/") {
                    Some(k) => i + 2 + k + 2,
                    None => b.len(),
                };
            }
            SLASH => match prev {
                Prev::Value => {
                    s.unit(p)?;
                    s.run = 0;
                    prev = Prev::Expr;
                    i += 1;
                }
                Prev::Expr => {
                    // a regex literal: up to the `/` that is not escaped or in a class
                    s.run = 0;
                    s.murky += 1;
                    let mut class = false;
                    i += 1;
                    loop {
                        match b.get(i) {
                            None | Some(b'\n' | b'\r') => return s.poisoned(i),
                            _ if line_end(b, i) => return s.poisoned(i),
                            Some(b'\\') if line_end(b, i + 1) => return s.poisoned(i),
                            Some(b'\\') => i += 2,
                            Some(b'[') => {
                                class = true;
                                i += 1;
                            }
                            Some(b']') => {
                                class = false;
                                i += 1;
                            }
                            Some(b'/') if !class => {
                                i += 1;
                                break;
                            }
                            Some(_) => i += 1,
                        }
                    }
                    prev = Prev::Value;
                }
                Prev::Unknown => i = s.uncertain_line(i)?,
            },
            OPERATOR => {
                if b[i..].starts_with(b"<!--") || b[i..].starts_with(b"-->") {
                    i = s.uncertain_line(i)?;
                } else if matches!(c, b'+' | b'-') && b.get(i + 1) == Some(&c) {
                    s.operator(p)?;
                    s.operator(p + 1)?;
                    prev = Prev::Unknown;
                    i += 2;
                } else {
                    s.operator(p)?;
                    prev = Prev::Expr;
                    i += 1;
                }
            }
            DOT if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                s.run = 0;
                i = number_end(b, i + 1);
                prev = Prev::Value;
            }
            DOT => {
                s.run = 0;
                if b[i..].starts_with(b"...") {
                    s.unit(p)?;
                    i += 3;
                } else {
                    i += 1;
                }
                prev = Prev::Expr;
            }
            SEPARATOR => {
                s.run = 0;
                prev = Prev::Expr;
                i += 1;
                s.separator(c == b';' && statement_ends(b, i));
            }
            // a number (an exponent's sign counts as an operator, which only adds)
            DIGIT => {
                s.run = 0;
                i = number_end(b, i);
                prev = Prev::Value;
            }
            ODD_WORD => {
                s.run = 0;
                let (j, hidden) = word_end(b, i + usize::from(matches!(c, b'#' | b'@')));
                prev = s.odd_word(p, hidden)?;
                i = j;
            }
            // a byte the lexer rejects: its recovery is not followed
            _ => return s.poisoned(i),
        }
    }
    Ok(s.peak.max(s.units))
}

impl Scan<'_> {
    fn too_deep(at: usize) -> Fail {
        Fail::new(at as u32, NESTING_MSG)
    }

    /// One unit for an expression-level token at `at` (its construct ends by the next `,` or
    /// `;` directly in the same frame).
    #[inline]
    fn unit(&mut self, at: usize) -> Result<(), Fail> {
        self.units += 1;
        if self.units > self.max_units {
            return Err(Self::too_deep(at));
        }
        Ok(())
    }

    /// One unit for a statement-level token at `at` (`if`, `else`, a label's `:`: see
    /// [`Self::separator`]).
    #[inline]
    fn statement_unit(&mut self, at: usize) -> Result<(), Fail> {
        if let Some(top) = self.open.last_mut() {
            top.statements += 1;
        }
        self.unit(at)
    }

    /// A word at `at` with escapes or non-ASCII characters, `hidden` places in it that may
    /// split it into words (see [`word_end`]): one unit per piece they may split it into, each of
    /// which may be a keyword; what a following `/` does.
    fn odd_word(&mut self, at: usize, hidden: usize) -> Result<Prev, Fail> {
        if hidden == 0 {
            // (an identifier: no keyword is spelled with non-ASCII letters)
            return Ok(Prev::Value);
        }
        for _ in 0..=hidden {
            self.statement_unit(at)?;
        }
        Ok(Prev::Unknown)
    }

    /// An operator character at `at`.
    #[inline]
    fn operator(&mut self, at: usize) -> Result<(), Fail> {
        let c = self.b[at];
        if matches!(c, b'!' | b'-' | b'+' | b'~' | b'?' | b'=') {
            self.run += 1;
            if self.run > MAX_OPERATOR_RUN {
                return Err(Self::too_deep(at));
            }
        } else {
            self.run = 0;
        }
        if c == b':' {
            self.statement_unit(at)
        } else {
            self.unit(at)
        }
    }

    /// A `,` or `;` directly in the innermost frame: every expression written directly in it
    /// before has ended, so its units stop counting. With `statements`, a `;` not followed by
    /// `else` or `while`: every statement written directly in it has ended too (an `if` waits
    /// for its `else` past a `;`, a `do` for its `while`, a label for its statement).
    fn separator(&mut self, statements: bool) {
        self.peak = self.peak.max(self.units);
        if let Some(top) = self.open.last_mut() {
            if statements {
                top.statements = 0;
            }
            self.units = top.floor + top.statements;
        }
    }

    /// An opening bracket (or a template's `${`) at `at`.
    fn open(&mut self, at: usize, template: bool) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth > MAX_BRACKET_DEPTH {
            return Err(Self::too_deep(at));
        }
        let base = self.units;
        self.units += BRACKET_UNITS;
        self.open.push(Frame {
            at,
            murky: self.murky,
            base,
            floor: self.units,
            statements: 0,
            template,
        });
        if self.units > self.max_units {
            return Err(Self::too_deep(at));
        }
        Ok(())
    }

    /// Closes the innermost frame with the bracket before `end`; true when it was a template
    /// substitution.
    fn close(&mut self, end: usize) -> bool {
        if self.open.len() < 2 {
            return false;
        }
        match self.open.pop() {
            Some(top) => {
                self.peak = self.peak.max(self.units);
                self.units = top.base;
                if self.open.len() == 1 && top.murky == self.murky && !top.template {
                    self.bodies.push(Body {
                        open: top.at as u32,
                        end: end as u32,
                    });
                }
                top.template
            }
            None => false,
        }
    }

    /// Template text from `i` (after a backtick or a substitution's `}`): the index after the
    /// closing backtick (and true) or after a `${`, whose frame is then open (and false).
    fn template_text(&mut self, mut i: usize) -> Result<(usize, bool), Fail> {
        let b = self.b;
        self.murky += 1;
        loop {
            let rest = b.get(i..).unwrap_or(&[]);
            match memchr::memchr3(b'\\', b'`', b'$', rest) {
                Some(k) => i += k,
                None => return Ok((b.len(), true)),
            }
            match b[i] {
                b'\\' => i += 2,
                b'`' => return Ok((i + 1, true)),
                b'$' if b.get(i + 1) == Some(&b'{') => {
                    self.open(i, true)?;
                    return Ok((i + 2, false));
                }
                _ => i += 1,
            }
        }
    }

    /// The rest of the line from `i` read as uncertain (see [`Self::uncertain`]), unless a
    /// template substitution is open (closing it by mistake would misread its text as code):
    /// then the rest of the source.
    fn uncertain_line(&mut self, i: usize) -> Result<usize, Fail> {
        if self.open.iter().any(|f| f.template) {
            self.uncertain(i, false)?;
            return Ok(self.b.len());
        }
        self.uncertain(i, true)
    }

    /// Counts from `i` where the lexical state is not known: every opening bracket opens a
    /// frame, no closing bracket closes one, quotes and comments are not trusted. With `line`,
    /// stops after the line (LF or CR, unless escaped: no string or regex goes past one) and
    /// returns the index there; a backtick or a block comment may span lines, so after one the
    /// rest of the source is counted this way.
    fn uncertain(&mut self, i: usize, line: bool) -> Result<usize, Fail> {
        // (what opened in it is murky too)
        self.murky += 1;
        let r = self.uncertain_from(i, line);
        self.murky += 1;
        r
    }

    /// [`Self::uncertain`].
    fn uncertain_from(&mut self, mut i: usize, mut line: bool) -> Result<usize, Fail> {
        let b = self.b;
        while i < b.len() {
            let c = b[i];
            match c {
                b'(' | b'[' | b'{' => {
                    self.open(i, false)?;
                    self.run = 0;
                }
                b')' | b']' | b'}' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.run = 0;
                }
                b'\n' | b'\r' if line => {
                    let continued = i > 0 && b[i - 1] == b'\\';
                    i += if c == b'\r' && b.get(i + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    };
                    if !continued {
                        return Ok(i);
                    }
                    continue;
                }
                b'`' => line = false,
                b'/' if b.get(i + 1) == Some(&b'*') => line = false,
                b' ' | b'\t' | b'\n' | b'\r' => {}
                _ if is_operator(c) => self.operator(i)?,
                _ if is_word_start(c) => {
                    self.run = 0;
                    let (j, hidden) = word_end(b, i + usize::from(matches!(c, b'#' | b'@')));
                    if hidden > 0 {
                        for _ in 0..=hidden {
                            self.unit(i)?;
                        }
                    } else if keyword(&b[i..j]).0 != Nesting::None {
                        self.unit(i)?;
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => self.run = 0,
            }
            i += 1;
        }
        Ok(b.len())
    }

    /// The bound when the rest of the source from `i` cannot be lexed with confidence.
    fn poisoned(&mut self, i: usize) -> Result<usize, Fail> {
        self.uncertain(i, false)?;
        Ok(self.peak.max(self.units))
    }
}

// Byte classes of [`bound`] (a word's bytes are the classes up to `DIGIT`).
const WORD: u8 = 0;
const DIGIT: u8 = 1;
const SPACE: u8 = 2;
const OPEN: u8 = 3;
const CLOSE: u8 = 4;
const TICK: u8 = 5;
const QUOTE: u8 = 6;
const SLASH: u8 = 7;
const OPERATOR: u8 = 8;
const DOT: u8 = 9;
const SEPARATOR: u8 = 10;
/// A byte that starts a word that may hide a keyword or white space: `\`, non-ASCII, `#`, `@`.
const ODD_WORD: u8 = 11;
/// A byte the lexer rejects.
const OTHER: u8 = 12;

static CLASS: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = match b {
            b'0'..=b'9' => DIGIT,
            b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'$' => WORD,
            b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C => SPACE,
            b'(' | b'[' | b'{' => OPEN,
            b')' | b']' | b'}' => CLOSE,
            b'`' => TICK,
            b'\'' | b'"' => QUOTE,
            b'/' => SLASH,
            b'=' | b'!' | b'<' | b'>' | b'+' | b'-' | b'*' | b'%' | b'&' | b'|' | b'^' | b'~'
            | b'?' | b':' => OPERATOR,
            b'.' => DOT,
            b',' | b';' => SEPARATOR,
            b'\\' | b'#' | b'@' | 0x80..=0xFF => ODD_WORD,
            _ => OTHER,
        };
        c += 1;
    }
    t
};

/// Whether a line terminator (LF, CR, U+2028, U+2029) starts at `i`.
fn line_end(b: &[u8], i: usize) -> bool {
    match b.get(i) {
        Some(b'\n' | b'\r') => true,
        Some(0xE2) => b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xA8 | 0xA9)),
        _ => false,
    }
}

fn is_operator(c: u8) -> bool {
    matches!(
        c,
        b'=' | b'!'
            | b'<'
            | b'>'
            | b'+'
            | b'-'
            | b'*'
            | b'%'
            | b'&'
            | b'|'
            | b'^'
            | b'~'
            | b'?'
            | b':'
    )
}

/// An ASCII letter, digit, `_` or `$`.
fn word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
}

/// A byte that may go on a word without being a [`word_byte`]: a `\` escape or non-ASCII.
fn odd_byte(c: u8) -> bool {
    c == b'\\' || c >= 0x80
}

fn is_word_start(c: u8) -> bool {
    word_byte(c) || odd_byte(c) || matches!(c, b'#' | b'@')
}

/// The end of the word going on at `i`, and how many places in it may split it into words (a
/// `\` escape, which may spell a keyword, or a non-ASCII white space or line terminator).
fn word_end(b: &[u8], mut i: usize) -> (usize, usize) {
    let mut hidden = 0;
    while let Some(&c) = b.get(i) {
        if c == b'\\' || c >= 0x80 && unicode_space(b, i) {
            hidden += 1;
        } else if !word_byte(c) && !odd_byte(c) {
            break;
        }
        i += 1;
    }
    (i, hidden)
}

/// Whether a non-ASCII white space or line terminator of JavaScript (or U+180E, which once was
/// one) starts at `i`.
fn unicode_space(b: &[u8], i: usize) -> bool {
    let at = |k: usize| b.get(i + k).copied().unwrap_or(0);
    match at(0) {
        0xC2 => at(1) == 0xA0,
        0xE1 => matches!((at(1), at(2)), (0x9A, 0x80) | (0xA0, 0x8E)),
        0xE2 => matches!(
            (at(1), at(2)),
            (0x80, 0x80..=0x8A | 0xA8 | 0xA9 | 0xAF) | (0x81, 0x9F)
        ),
        0xE3 => at(1) == 0x80 && at(2) == 0x80,
        0xEF => at(1) == 0xBB && at(2) == 0xBF,
        _ => false,
    }
}

/// The end of the number going on at `i`.
fn number_end(b: &[u8], mut i: usize) -> usize {
    while b
        .get(i)
        .is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_'))
    {
        i += 1;
    }
    i
}

/// The nesting level a keyword can open without a bracket.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Nesting {
    None,
    /// `typeof typeof …`: ends by the next `,` or `;`.
    Expression,
    /// `else if …`, a statement body without braces: may go on past a `;`.
    Statement,
}

/// The words [`keyword`] knows: whether each can open a nesting level without a bracket, and
/// what it says about a following `/`: after a reserved word that takes an expression it starts
/// a regex; after a word that a line break may end a statement after, it may do either. (Any
/// other word is no nesting and divides.)
const KEYWORDS: [(&[u8], Nesting, Prev); 44] = {
    use Nesting::{Expression as E, None as N, Statement as S};
    use Prev::{Expr as X, Unknown as U, Value as V};
    [
        (b"case", E, X),
        (b"delete", E, X),
        (b"in", E, X),
        (b"instanceof", E, X),
        (b"new", E, X),
        (b"return", E, X),
        (b"throw", E, X),
        (b"typeof", E, X),
        (b"void", E, X),
        (b"extends", E, X),
        (b"do", S, X),
        (b"else", S, X),
        (b"yield", E, U),
        (b"await", E, U),
        (b"of", E, U),
        (b"async", E, U),
        (b"if", S, V),
        (b"while", S, V),
        (b"for", S, V),
        (b"with", S, V),
        (b"this", N, V),
        (b"super", N, V),
        (b"null", N, V),
        (b"true", N, V),
        (b"false", N, V),
        (b"let", N, U),
        (b"static", N, U),
        (b"get", N, U),
        (b"set", N, U),
        (b"break", N, U),
        (b"continue", N, U),
        (b"debugger", N, U),
        (b"default", N, U),
        (b"var", N, U),
        (b"const", N, U),
        (b"function", N, U),
        (b"class", N, U),
        (b"try", N, U),
        (b"catch", N, U),
        (b"finally", N, U),
        (b"switch", N, U),
        (b"import", N, U),
        (b"export", N, U),
        (b"enum", N, U),
    ]
};

/// Per first byte and per last byte, the lengths (as bits) of the [`KEYWORDS`] that start or
/// end with it: most words are no keyword, and these say so without comparing.
static KEYWORD_LENGTHS: [[u16; 256]; 2] = {
    let mut t = [[0u16; 256]; 2];
    let mut k = 0;
    while k < KEYWORDS.len() {
        let w = KEYWORDS[k].0;
        t[0][w[0] as usize] |= 1 << w.len();
        t[1][w[w.len() - 1] as usize] |= 1 << w.len();
        k += 1;
    }
    t
};

/// The bytes of a word of at most 16 as one number (zeros after it).
const fn packed(w: &[u8]) -> u128 {
    let mut v = 0u128;
    let mut k = 0;
    while k < w.len() && k < 16 {
        v |= (w[k] as u128) << (8 * k);
        k += 1;
    }
    v
}

/// [`KEYWORDS`]' words, [`packed`] (compared as numbers, not byte by byte).
static KEYWORDS_PACKED: [u128; KEYWORDS.len()] = {
    let mut t = [0u128; KEYWORDS.len()];
    let mut k = 0;
    while k < KEYWORDS.len() {
        t[k] = packed(KEYWORDS[k].0);
        k += 1;
    }
    t
};

/// What plain word `w` is (see [`KEYWORDS`]).
#[inline]
fn keyword(w: &[u8]) -> (Nesting, Prev) {
    let (Some(&first), Some(&last)) = (w.first(), w.last()) else {
        return (Nesting::None, Prev::Value);
    };
    let lengths = KEYWORD_LENGTHS[0][first as usize] & KEYWORD_LENGTHS[1][last as usize];
    if w.len() < 16 && lengths & (1 << w.len()) != 0 {
        let v = packed(w);
        if let Some(k) = KEYWORDS_PACKED.iter().position(|&p| p == v) {
            let (_, n, p) = KEYWORDS[k];
            return (n, p);
        }
    }
    (Nesting::None, Prev::Value)
}

/// Whether the statements before a `;` have all ended when the source goes on at `i`: the next
/// token is not `else` or `while` (nor may be: a comment or an escape could hide one).
fn statement_ends(b: &[u8], mut i: usize) -> bool {
    while b
        .get(i)
        .is_some_and(|&c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    match b.get(i) {
        None => true,
        Some(&c) if word_byte(c) => {
            let (j, odd) = word_end(b, i + 1);
            odd == 0 && !matches!(&b[i..j], b"else" | b"while")
        }
        Some(&c) => !(c == b'/' || c == b'<' || c == b'-' || odd_byte(c) || c < b' '),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hostile pieces: brackets, template holes, prefix operators, keywords, strings, comments,
    /// regexes, escapes, non-ASCII white space and line ends, a hashbang.
    const PIECES: [&str; 40] = [
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "${",
        "`",
        "!",
        "-",
        "~",
        "+",
        "=",
        ":",
        "?",
        "typeof ",
        "if",
        "else ",
        "do ",
        "a",
        "/",
        "'",
        "\"",
        "//",
        "/*",
        "*/",
        "\n",
        "#!",
        "<!--",
        "-->",
        "\\",
        ";",
        ",",
        "\u{a0}",
        "\u{2028}",
        "\\u0065lse",
        "break\n",
        "x => ",
        "é",
        "...",
    ];

    /// [`guarded`] skips the scan of a source of at most [`SHORT_SOURCE`] bytes, counting
    /// [`BRACKET_UNITS`] per byte: no byte counts for more.
    #[test]
    fn no_byte_counts_for_more_than_a_bracket() {
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1d_u64);
        for _ in 0..50_000 {
            let src = crate::test_rng::soup(&mut next, &PIECES, 30);
            if let Ok(u) = units(&src, usize::MAX) {
                assert!(u <= src.len() * BRACKET_UNITS, "{src:?}: {u} units");
            }
            for s in ["(".repeat(40), "${".repeat(40), "\u{a0}typeof".repeat(40)] {
                let u = units(&s, usize::MAX).unwrap_or(0);
                assert!(u <= s.len() * BRACKET_UNITS, "{s:?}: {u} units");
            }
        }
    }

    /// What the scan must count: every construct that nests without a bracket, and the ways a
    /// lexer that reads less than oxc's could miss a level.
    #[test]
    fn nesting_without_brackets_and_hidden_levels_count() {
        let at_least = |src: &str, n: usize| {
            let u = units(src, usize::MAX).unwrap_or(usize::MAX);
            assert!(u >= n, "{src:?}: {u} units, at least {n} levels");
        };
        for (piece, end) in [
            ("typeof ", "a"),
            ("!", "a"),
            ("a = ", "a"),
            ("a ? 1 : ", "1"),
            ("x => ", "x"),
            ("if (a) ", "x"),
            ("if (a) x; else ", "x"),
            ("a: ", "x"),
            ("do ", ";"),
            ("new ", "a"),
            ("typeof\u{a0}", "a"),
            ("typ\\u0065of ", "a"),
            ("a ** ", "a"),
        ] {
            at_least(&format!("{}{end}", piece.repeat(100)), 100);
        }
        // a line comment ends at U+2028: what follows is code
        at_least(&"//\u{2028}(\n".repeat(100), 100);
        // a regex after `break` and a line break (ASI): its brackets are not code
        at_least(
            &format!(
                "{}{}",
                "while (1) { break\n/[)]/\n".repeat(50),
                "}".repeat(50)
            ),
            50,
        );
        // an HTML-like comment and a `/` that may start a regex hide nothing
        at_least(&"(<!-- ))\n".repeat(100), 100);
        at_least(&"a = (b) / ( /)/\n".repeat(100), 100);
    }

    /// Deep and long sources, the parser's recursion at its worst: each gives an error or a
    /// program, never a stack overflow (which would abort the test binary), in debug builds too.
    #[test]
    fn deep_and_long_sources_give_an_error_or_a_program() {
        let deep = |open: &str, mid: &str, close: &str, n: usize| {
            format!("{}{mid}{}", open.repeat(n), close.repeat(n))
        };
        let mut sources = Vec::new();
        for n in [1_000, 100_000] {
            for (open, mid, close) in [
                ("(", "1", ")"),
                ("[", "1", "]"),
                ("{", "x", "}"),
                ("`${", "1", "}`"),
                ("({a:", "1", "})"),
                ("function f(){", "", "}"),
                ("f(x => ", "x", ")"),
                ("!", "a", ""),
                ("typeof ", "a", ""),
                ("typeof\u{a0}", "a", ""),
                ("a = ", "a", ""),
                ("a ** ", "a", ""),
                ("a ? 1 : ", "1", ""),
                ("x => ", "x", ""),
                ("if (a) ", "x", ""),
                ("if (a) x; else ", "x", ""),
                ("while (a) ", "x", ""),
                ("a: ", "x", ""),
                ("new ", "a", ""),
                ("a + ", "a", ""),
                ("a.b", "", ""),
                ("//\u{2028}(", "", ""),
            ] {
                sources.push(deep(open, mid, close, n));
            }
        }
        // about 4 MB each
        sources.push(deep("(", "1", ")", 2_000_000));
        sources.push(deep("typeof ", "a", "", 600_000));
        sources.push(deep("if (a) x; else ", "x", "", 270_000));
        sources.push(deep("a + ", "a", "", 1_000_000));
        sources.push(format!("[{}]", "1,".repeat(2_000_000)));
        let externals = vec!["a".to_string(), "f".to_string()];
        for src in &sources {
            for mode in [crate::Mode::Eval, crate::Mode::FunctionBody] {
                let opts = crate::CompileOptions {
                    mode,
                    externals: &externals,
                    ..crate::CompileOptions::default()
                };
                if let Ok(p) = crate::compile(src, &opts) {
                    p.verify().unwrap_or_else(|e| panic!("{}: {e}", &src[..60]));
                }
            }
        }
    }

    /// Sources made of one random motif repeated thousands of times: each compiles on the stack
    /// the guard grants it (an under-estimate would overflow it and abort the test binary).
    #[test]
    fn repeated_random_motifs_never_overflow() {
        let pieces = [
            "(",
            ")",
            "[",
            "]",
            "{",
            "}",
            "${",
            "`",
            "!",
            "-",
            "~",
            "+",
            "=",
            ":",
            "?",
            "typeof ",
            "if (a) ",
            "else ",
            "do ",
            "a",
            "/",
            "'",
            "//",
            "\n",
            "<!--",
            ";",
            ",",
            "\u{a0}",
            "x => ",
            "...",
            "new ",
            "a.b",
            "f(",
            "**",
            "while (a) ",
            "a: ",
            "return ",
            "1",
            "function f() {",
            "{a: ",
            "`${",
            "}`",
            "/x/",
            "async ",
            "yield ",
        ];
        let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15_u64);
        let externals = ["a".to_string(), "f".to_string()];
        for round in 0..300 {
            let motif = crate::test_rng::soup(&mut next, &pieces, 6);
            if motif.is_empty() {
                continue;
            }
            let src = motif.repeat(60_000 / motif.len());
            let mode = if round % 2 == 0 {
                crate::Mode::Eval
            } else {
                crate::Mode::FunctionBody
            };
            let opts = crate::CompileOptions {
                mode,
                externals: &externals,
                ..Default::default()
            };
            let _ = crate::compile(&src, &opts);
        }
    }

    #[test]
    fn separators_end_what_they_can() {
        let u = |src: &str| units(src, usize::MAX).unwrap_or(usize::MAX);
        // a flat program counts like one statement of it
        let flat = "x = x + 1;\n".repeat(1000);
        assert!(u(&flat) <= 3, "{}", u(&flat));
        let args = format!("f({})", "!a, ".repeat(1000));
        assert!(u(&args) <= 6, "{}", u(&args));
        // identifiers with non-ASCII letters are no keywords
        let accents = format!("[{}]", "café, ".repeat(1000));
        assert!(u(&accents) <= 6, "{}", u(&accents));
        // an `if` waits past its `;` for an `else`, a `do` for its `while`
        assert!(u(&"if (a) x = 1; else ".repeat(100)) >= 200);
        assert!(
            u(&format!(
                "{}x;{}",
                "do ".repeat(100),
                " while (a)".repeat(100)
            )) >= 100
        );
    }

    #[test]
    fn the_8k_agent_compiles_on_the_callers_stack_in_a_release_build() {
        let agent = include_str!("../../../benches/programs/agent_8k.js");
        let u = units(agent, MAX_UNITS).expect("the agent passes");
        // (the release build's constants)
        assert!(256 * 1024 + u * 1280 <= INLINE_STACK, "{u} units");
    }

    #[test]
    fn too_deep_is_refused_where_it_gets_too_deep() {
        let src = format!("{}1{}", "(".repeat(300), ")".repeat(300));
        let e = units(&src, MAX_UNITS).unwrap_err();
        assert_eq!((e.offset, e.message.as_str()), (256, NESTING_MSG));
        let src = format!("{}a", "!".repeat(2000));
        assert_eq!(units(&src, MAX_UNITS).unwrap_err().offset, 1024);
        let src = format!("{}a", "typeof ".repeat(100));
        assert_eq!(units(&src, 50).unwrap_err().offset, 7 * 50);
    }

    /// A source just under the bound for compiling on the caller's stack compiles within
    /// [`INLINE_STACK`] (in a debug build no source compiles there: vacuous).
    #[test]
    fn a_source_at_the_inline_bound_compiles_within_the_inline_stack() {
        let pieces = [
            ("(", "1", ")"),
            ("[", "1", "]"),
            ("`${", "1", "}`"),
            ("({a:", "1", "})"),
            ("!", "a", ""),
            ("a ? 1 : ", "1", ""),
            ("f(x => ", "x", ")"),
            ("typeof ", "a", ""),
        ];
        let mut sources = Vec::new();
        for (open, mid, close) in pieces {
            let mut n = 1;
            let make = |n: usize| format!("{}{mid}{}", open.repeat(n), close.repeat(n));
            #[allow(clippy::absurd_extreme_comparisons)]
            while units(&make(n + 1), MAX_UNITS).is_ok_and(|u| u <= INLINE_UNITS) {
                n += 1;
            }
            sources.push(make(n));
        }
        std::thread::Builder::new()
            .stack_size(INLINE_STACK)
            .spawn(move || {
                let externals = ["a".to_string(), "f".to_string()];
                for s in &sources {
                    let opts = crate::CompileOptions {
                        externals: &externals,
                        ..Default::default()
                    };
                    let _ = crate::compile(s, &opts);
                }
            })
            .unwrap()
            .join()
            .expect("no overflow");
    }
}
