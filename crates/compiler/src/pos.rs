//! Byte offsets to line/column, and the pre-parse nesting bound.

use ajs_bytecode::SourcePos;

use crate::Fail;

/// Maps byte offsets of a source to JavaScript line (1-based) and column (0-based, UTF-16 units).
#[derive(Debug, Clone)]
pub struct LineIndex<'s> {
    src: &'s str,
    starts: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    /// Indexes the line starts of `src` (line terminators: LF, CRLF, CR, U+2028, U+2029).
    pub fn new(src: &'s str) -> LineIndex<'s> {
        let mut starts = vec![0];
        let mut it = src.char_indices().peekable();
        while let Some((i, c)) = it.next() {
            match c {
                '\n' | '\u{2028}' | '\u{2029}' => starts.push(i + c.len_utf8()),
                '\r' => {
                    if let Some(&(_, '\n')) = it.peek() {
                        continue;
                    }
                    starts.push(i + 1);
                }
                _ => {}
            }
        }
        LineIndex { src, starts }
    }

    /// The position of byte `offset` (clamped into the source).
    pub fn pos(&self, offset: u32) -> SourcePos {
        let mut off = (offset as usize).min(self.src.len());
        while off > 0 && !self.src.is_char_boundary(off) {
            off -= 1;
        }
        let line = match self.starts.binary_search(&off) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let start = self.starts.get(line).copied().unwrap_or(0).min(off);
        let col = self
            .src
            .get(start..off)
            .map_or(0, |s| s.encode_utf16().count());
        SourcePos {
            line: line as u32 + 1,
            col: col as u32,
        }
    }
}

/// Refuses sources whose brackets nest deeper than `max` (strings, comments and template text are
/// skipped roughly; a regex literal may be miscounted, which can only over-estimate the depth).
pub(crate) fn check_nesting(src: &str, max: usize) -> Result<(), Fail> {
    enum Frame {
        Bracket,
        TemplateExpr,
    }
    let b = src.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut in_template = 0usize; // number of template frames whose text we are inside
    let mut template_stack: Vec<usize> = Vec::new(); // stack depth at which each template opened
    let mut i = 0;
    let mut run = 0usize; // consecutive prefix-operator run
    while i < b.len() {
        let c = b[i];
        if in_template > 0 && template_stack.last() == Some(&stack.len()) {
            // inside template text
            match c {
                b'\\' => i += 2,
                b'`' => {
                    template_stack.pop();
                    in_template -= 1;
                    i += 1;
                }
                b'$' if b.get(i + 1) == Some(&b'{') => {
                    stack.push(Frame::TemplateExpr);
                    if stack.len() > max {
                        return Err(Fail::new(i as u32, "nesting too deep"));
                    }
                    i += 2;
                }
                _ => i += 1,
            }
            continue;
        }
        match c {
            b'\'' | b'"' => {
                i += 1;
                while i < b.len() && b[i] != c && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                run = 0;
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'`' => {
                template_stack.push(stack.len());
                in_template += 1;
                i += 1;
                run = 0;
                continue;
            }
            b'(' | b'[' | b'{' => {
                stack.push(Frame::Bracket);
                if stack.len() > max {
                    return Err(Fail::new(i as u32, "nesting too deep"));
                }
                run = 0;
            }
            b')' | b']' | b'}' => {
                stack.pop();
                run = 0;
            }
            // prefix operators and right-associative chains recurse in the parser too
            b'!' | b'-' | b'+' | b'~' | b'?' | b'=' => {
                run += 1;
                if run > max * 4 {
                    return Err(Fail::new(i as u32, "nesting too deep"));
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => run = 0,
        }
        i += 1;
    }
    Ok(())
}
