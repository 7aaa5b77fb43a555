//! Where an unbalanced bracket starts. When the parse fails (or the stack guard refuses a
//! source as nested too deeply), the error the parser gives for a missing `}` is often far
//! from it (at the end of the program); one linear pass pairs the brackets, skipping strings,
//! comments, template text and regex literals, and names the bracket that never closes (or the
//! one that closes nothing). Indentation picks among candidates: a block closed by a `}`
//! indented less than the line that opened it is the likeliest to have lost its own `}`.

use crate::pos::LineIndex;
use crate::{Fail, MAX_BRACKET_DEPTH};

/// Deepest bracket nesting the pass follows (deeper, it gives up: the parse refused the source
/// long before, and the pass's memory stays bounded).
const MAX_DEPTH: usize = 16 * MAX_BRACKET_DEPTH;

/// A bracket that opened and has not closed yet.
#[derive(Clone, Copy)]
struct Open {
    /// `(`, `[`, `{`, or `$` for a template's `${`.
    kind: u8,
    at: usize,
    /// The indentation of the line it is on.
    indent: usize,
    line_start: usize,
}

/// What is wrong with the brackets of a source.
enum Unbalanced {
    /// The bracket at this offset never closes.
    Unclosed(usize, u8),
    /// The closing bracket at this offset closes nothing.
    Extra(usize, u8),
}

/// `f` with its position moved to the unbalanced bracket of `src`, when there is one that the
/// error does not already point at (a syntax error on another line, or "nesting too deep").
pub(crate) fn explain(src: &str, f: Fail) -> Fail {
    let syntax = f.message.starts_with("SyntaxError");
    if !syntax && f.message != crate::stack::NESTING_MSG {
        return f;
    }
    let Some(u) = unbalanced(src.as_bytes()) else {
        return f;
    };
    let idx = LineIndex::new(src);
    let at = match u {
        Unbalanced::Unclosed(at, _) | Unbalanced::Extra(at, _) => at,
    };
    let (err, here) = (idx.pos(f.offset), idx.pos(at as u32));
    // (an unclosed bracket is named when the parser stopped on a later line, a closing bracket
    // too many only when the parser stopped further away: it found what follows the wrong
    // close; on the bracket's own line the parser's position stays, the bracket named in it)
    let keep = match u {
        Unbalanced::Unclosed(..) => f.offset < at as u32 || err.line == here.line,
        Unbalanced::Extra(..) => err.line.abs_diff(here.line) <= 1,
    };
    if syntax && keep {
        if let (Unbalanced::Unclosed(_, k), true) = (u, err.line == here.line) {
            let (open, close) = pair(k);
            return Fail::new(
                f.offset,
                format!(
                    "{} (the `{open}` at {}:{} is never closed: add the missing `{close}` where it should end)",
                    f.message, here.line, here.col
                ),
            );
        }
        return f;
    }
    let found = format!(
        "{} at {}:{}",
        f.message.trim_start_matches("SyntaxError: "),
        err.line,
        err.col
    );
    let message = match u {
        Unbalanced::Unclosed(_, k) => {
            let (open, close) = pair(k);
            format!("SyntaxError: this `{open}` is never closed: add the missing `{close}` where it should end (the parser stopped later: {found})")
        }
        Unbalanced::Extra(_, k) => {
            let c = k as char;
            format!("SyntaxError: this `{c}` closes nothing: remove it, or add the bracket it should close before it (the parser stopped: {found})")
        }
    };
    Fail::new(at as u32, message)
}

/// The opening and closing text of the bracket recorded as `k` (`$` stands for `${`).
fn pair(k: u8) -> (&'static str, &'static str) {
    match k {
        b'(' => ("(", ")"),
        b'[' => ("[", "]"),
        b'$' => ("${", "}"),
        _ => ("{", "}"),
    }
}

/// The first unbalanced bracket of `b`, if any.
fn unbalanced(b: &[u8]) -> Option<Unbalanced> {
    let mut stack: Vec<Open> = Vec::new();
    // (the first block closed by a `}` indented less than its opening line)
    let mut suspect: Option<Open> = None;
    let mut line_start = 0usize;
    // whether a `/` here divides (after a value) or starts a regex
    let mut after_value = false;
    let mut i = 0usize;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' | b'\r' => {
                line_start = i + 1;
                i += 1;
                continue;
            }
            b' ' | b'\t' => {
                i += 1;
                continue;
            }
            b'\'' | b'"' => {
                i = skip_string(b, i);
                after_value = true;
                continue;
            }
            b'`' => {
                match template_text(b, i + 1) {
                    (j, true) => {
                        i = j;
                        after_value = true;
                    }
                    (j, false) => {
                        stack.push(open_at(b'$', j - 2, b, line_start));
                        i = j;
                        after_value = false;
                    }
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && !matches!(b[i], b'\n' | b'\r') {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = memchr::memmem::find(&b[i + 2..], b"*/").map_or(b.len(), |k| i + 2 + k + 2);
                continue;
            }
            b'/' if !after_value => {
                i = skip_regex(b, i);
                after_value = true;
                continue;
            }
            b'(' | b'[' | b'{' => {
                if stack.len() >= MAX_DEPTH {
                    return None;
                }
                stack.push(open_at(c, i, b, line_start));
                after_value = false;
            }
            b')' | b']' | b'}' => {
                let want = match c {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                let Some(top) = stack.pop() else {
                    return Some(Unbalanced::Extra(i, c));
                };
                let kind_ok = top.kind == want || (top.kind == b'$' && c == b'}');
                if !kind_ok {
                    // the innermost bracket is closed by the wrong kind: it lost its own
                    let deeper = stack.iter().any(|o| o.kind == want);
                    return Some(match suspect {
                        Some(s) => Unbalanced::Unclosed(s.at, s.kind),
                        None if deeper => Unbalanced::Unclosed(top.at, top.kind),
                        None => Unbalanced::Extra(i, c),
                    });
                }
                let first_on_line = b[line_start..i].iter().all(|&x| x == b' ' || x == b'\t');
                if suspect.is_none()
                    && c == b'}'
                    && top.line_start != line_start
                    && first_on_line
                    && i - line_start < top.indent
                {
                    suspect = Some(top);
                }
                if top.kind == b'$' {
                    // back in the template's text
                    match template_text(b, i + 1) {
                        (j, true) => {
                            i = j;
                            after_value = true;
                        }
                        (j, false) => {
                            stack.push(open_at(b'$', j - 2, b, line_start));
                            i = j;
                            after_value = false;
                        }
                    }
                    continue;
                }
                after_value = c != b'}';
            }
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'_'
                        || b[i] == b'$'
                        || b[i] >= 0x80)
                {
                    i += 1;
                }
                // a regex may follow these words, a division any other word or number
                after_value = !matches!(
                    &b[start..i],
                    b"return"
                        | b"typeof"
                        | b"case"
                        | b"in"
                        | b"of"
                        | b"delete"
                        | b"void"
                        | b"throw"
                        | b"new"
                        | b"else"
                        | b"do"
                        | b"instanceof"
                        | b"yield"
                );
                continue;
            }
            _ => after_value = false,
        }
        i += 1;
    }
    // (at the end, the innermost bracket left open is the one the parser wanted closed first)
    stack.last().map(|last| match suspect {
        Some(s) => Unbalanced::Unclosed(s.at, s.kind),
        None => Unbalanced::Unclosed(last.at, last.kind),
    })
}

fn open_at(kind: u8, at: usize, b: &[u8], line_start: usize) -> Open {
    let indent = b[line_start..]
        .iter()
        .take_while(|&&x| x == b' ' || x == b'\t')
        .count();
    Open {
        kind,
        at,
        indent,
        line_start,
    }
}

/// The index after the string literal starting at `i` (or after its line, unterminated).
fn skip_string(b: &[u8], i: usize) -> usize {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            x if x == q => return j + 1,
            b'\\' => j += 2,
            b'\n' | b'\r' => return j,
            _ => j += 1,
        }
    }
    b.len()
}

/// The index after the regex literal starting at `i` (or after its line, unterminated).
fn skip_regex(b: &[u8], i: usize) -> usize {
    let mut class = false;
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'[' => {
                class = true;
                j += 1;
            }
            b']' => {
                class = false;
                j += 1;
            }
            b'/' if !class => return j + 1,
            b'\n' | b'\r' => return j,
            _ => j += 1,
        }
    }
    b.len()
}

/// Template text from `i`: the index after its closing backtick (and true) or after a `${`
/// (and false).
fn template_text(b: &[u8], mut i: usize) -> (usize, bool) {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'`' => return (i + 1, true),
            b'$' if b.get(i + 1) == Some(&b'{') => return (i + 2, false),
            _ => i += 1,
        }
    }
    (b.len(), true)
}

#[cfg(test)]
mod tests {
    use crate::{compile, CompileOptions, Mode};

    fn error(src: &str, mode: Mode) -> (String, u32, u32) {
        let opts = CompileOptions {
            mode,
            ..CompileOptions::default()
        };
        let e = compile(src, &opts).expect_err("does not compile");
        (e.message, e.line, e.column)
    }

    /// A program of about 2,000 lines of statements and callbacks.
    fn long_body(n: usize) -> Vec<String> {
        (0..n)
            .flat_map(|i| {
                [
                    format!("  let r{i} = items.filter(x => x.n > {i}).map(x => {{"),
                    format!("    if (x.tag === 't{i}') {{"),
                    format!("      return {{ id: x.id, label: `#${{x.id}}-{i}`, ok: /^[a-z]+$/.test(x.tag) }}"),
                    "    }".to_string(),
                    format!("    return {{ id: x.id, ok: (x.n * 3 + 1) / 2 > {i} }}"),
                    "  })".to_string(),
                    format!("  total = total + r{i}.length"),
                ]
            })
            .collect()
    }

    fn program(body: &[String]) -> String {
        format!(
            "function main({{ items: [{{ id: 1, n: 2, tag: 'a' }}] }}) {{\n  let total = 0\n{}\n  return {{ total }}\n}}\n",
            body.join("\n")
        )
    }

    #[test]
    fn a_missing_brace_early_is_reported_where_its_block_opens() {
        let mut body = long_body(290);
        assert!(body.len() > 2000);
        // line 5 of the source: the `if` whose `}` is missing
        assert_eq!(body[1], "    if (x.tag === 't0') {");
        body[3] = String::new();
        let (msg, line, col) = error(&program(&body), Mode::Agent);
        assert_eq!((line, col), (4, 24), "{msg}");
        assert!(
            msg.starts_with("SyntaxError: this `{` is never closed: add the missing `}`"),
            "{msg}"
        );
        // a helper that lost its closing brace, before the entry
        let src = format!(
            "function helper(x) {{\n  if (x > 1) {{\n    return x * 2\n  return x\n}}\n{}",
            program(&long_body(290))
        );
        let (msg, line, col) = error(&src, Mode::Agent);
        assert_eq!((line, col), (2, 13), "{msg}");
        assert!(msg.contains("never closed"), "{msg}");
    }

    #[test]
    fn an_extra_paren_is_reported_where_it_opens() {
        let mut body = long_body(290);
        body[6] = "  total = total + (r0.length".to_string();
        let (msg, line, col) = error(&program(&body), Mode::Agent);
        assert_eq!((line, col), (9, 18), "{msg}");
        assert!(
            msg.starts_with("SyntaxError: this `(` is never closed: add the missing `)`")
                && msg.contains(
                    "(the parser stopped later: Expected `,` or `)` but found `let` at 10:2)"
                ),
            "{msg}"
        );
    }

    #[test]
    fn an_extra_closing_brace_is_named() {
        let src = format!(
            "let t = 0\n}}\n{}\nreturn t",
            (0..2000)
                .map(|i| format!("t = t + {i}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let (msg, line, _) = error(&src, Mode::FunctionBody);
        assert_eq!(line, 2, "{msg}");
    }

    #[test]
    fn too_deep_and_unclosed_names_the_innermost_bracket() {
        let (msg, line, col) = error(&format!("1 + {}", "[".repeat(300)), Mode::Eval);
        assert!(
            msg.starts_with("SyntaxError: this `[` is never closed"),
            "{msg}"
        );
        assert_eq!((line, col), (1, 303));
        // balanced but too deep, or deeper than the pass follows: the guard's refusal stands
        let (msg, ..) = error(
            &format!("{}1{}", "(".repeat(300), ")".repeat(300)),
            Mode::Eval,
        );
        assert_eq!(msg, crate::stack::NESTING_MSG);
        let (msg, ..) = error(&"(".repeat(100_000), Mode::Eval);
        assert_eq!(msg, crate::stack::NESTING_MSG);
        // on the bracket's own line the parser's position stays, the bracket named
        let (msg, line, col) = error("[1, (2 + ", Mode::Eval);
        assert_eq!(
            (msg.as_str(), line, col),
            (
                "SyntaxError: Unexpected token (the `(` at 1:4 is never closed: add the missing `)` where it should end)",
                1,
                9
            )
        );
    }

    #[test]
    fn strings_comments_templates_and_regexes_do_not_count() {
        for balanced in [
            "let a = '{(' + \"[\" // }\nreturn a",
            "let a = `${ 1 + [2].length } {`\n/* ) */ return a",
            "let a = /[)}]/.test('x') ? 1 / 2 : 3\nreturn a",
            "let a = `a${`b${ { k: '}' }.k }`}`\nreturn a",
        ] {
            assert!(
                super::unbalanced(balanced.as_bytes()).is_none(),
                "{balanced}"
            );
        }
    }
}
