//! Byte offsets to line/column, and the pre-parse nesting bound.

use ajs_bytecode::SourcePos;

use crate::Fail;

/// Maps byte offsets of a source to JavaScript line (1-based) and column (0-based, UTF-16 units).
#[derive(Debug, Clone)]
pub struct LineIndex<'s> {
    src: &'s str,
    starts: Vec<usize>,
    /// The whole source is ASCII: a column is a byte distance.
    ascii: bool,
}

impl<'s> LineIndex<'s> {
    /// Indexes the line starts of `src` (line terminators: LF, CRLF, CR, U+2028, U+2029).
    pub fn new(src: &'s str) -> LineIndex<'s> {
        let b = src.as_bytes();
        let mut starts = vec![0];
        let mut ascii = true;
        for (i, &c) in b.iter().enumerate() {
            // every byte of interest is a control byte or 0xE2 (U+2028/U+2029 are E2 80 A8/A9)
            if c > b'\r' && c != 0xE2 {
                if c >= 0x80 {
                    ascii = false;
                }
                continue;
            }
            match c {
                b'\n' => starts.push(i + 1),
                // CRLF ends its line at the LF
                b'\r' if b.get(i + 1) != Some(&b'\n') => starts.push(i + 1),
                0xE2 => {
                    ascii = false;
                    if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xA8 | 0xA9)) {
                        starts.push(i + 3);
                    }
                }
                _ => {}
            }
        }
        LineIndex { src, starts, ascii }
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
        let col = if self.ascii {
            off - start
        } else {
            self.src
                .get(start..off)
                .map_or(0, |s| s.encode_utf16().count())
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Line and column the slow way: walk the characters up to `offset`.
    fn reference(src: &str, offset: usize) -> (u32, u32) {
        let (mut line, mut col) = (1u32, 0u32);
        let mut it = src.char_indices().peekable();
        while let Some((i, c)) = it.next() {
            if i >= offset {
                break;
            }
            match c {
                '\r' if matches!(it.peek(), Some(&(_, '\n'))) => col += 1,
                '\n' | '\r' | '\u{2028}' | '\u{2029}' => {
                    line += 1;
                    col = 0;
                }
                _ => col += c.len_utf16() as u32,
            }
        }
        (line, col)
    }

    #[test]
    fn positions_match_a_character_walk() {
        for src in [
            "",
            "a\nbc\r\nd\re",
            "\n\n\r\r\n",
            "x = 'é'\ny = '😀' + z\u{2028}w\u{2029}v",
            "\u{2027}\u{2030}ab\u{2028}",
            "ascii only\nline two\n",
        ] {
            let idx = LineIndex::new(src);
            for off in (0..=src.len()).filter(|&o| src.is_char_boundary(o)) {
                let p = idx.pos(off as u32);
                assert_eq!((p.line, p.col), reference(src, off), "{src:?} at {off}");
            }
        }
    }
}
