//! Byte offsets to line and column.

use ajs_bytecode::SourcePos;

/// Line starts: a source of a few lines needs no allocation.
type Starts = smallvec::SmallVec<[usize; 8]>;

/// Maps byte offsets of a source to JavaScript line (1-based) and column (0-based, UTF-16 units).
#[derive(Debug, Clone)]
pub struct LineIndex<'s> {
    src: &'s str,
    /// The byte offset of every line's first byte.
    starts: Starts,
    /// The whole source is ASCII: a column is a byte distance.
    ascii: bool,
}

impl<'s> LineIndex<'s> {
    /// Indexes the line starts of `src` (line terminators: LF, CRLF, CR, U+2028, U+2029).
    pub fn new(src: &'s str) -> LineIndex<'s> {
        let b = src.as_bytes();
        let mut starts: Starts = smallvec::smallvec![0];
        // (U+2028 and U+2029 are E2 80 A8 and E2 80 A9)
        for i in memchr::memchr3_iter(b'\n', b'\r', 0xE2, b) {
            match b[i] {
                b'\n' => starts.push(i + 1),
                // CRLF ends its line at the LF
                b'\r' if b.get(i + 1) != Some(&b'\n') => starts.push(i + 1),
                0xE2 if b.get(i + 1) == Some(&0x80)
                    && matches!(b.get(i + 2), Some(0xA8 | 0xA9)) =>
                {
                    starts.push(i + 3)
                }
                _ => {}
            }
        }
        LineIndex {
            src,
            starts,
            ascii: src.is_ascii(),
        }
    }

    /// The positions of many offsets, [`Self::pos`] of each.
    #[cfg(test)]
    pub(crate) fn positions(&self, offsets: &[u32]) -> Vec<SourcePos> {
        let mut c = self.cursor();
        offsets.iter().map(|&o| c.pos(o)).collect()
    }

    /// A cursor for resolving many offsets one after the other, [`Self::pos`] of each.
    pub(crate) fn cursor(&self) -> Cursor<'_, 's> {
        Cursor {
            idx: self,
            line: 0,
            start: 0,
            len: 0,
        }
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

    /// The byte range of line `line` (0-based), without its end when it is the last.
    fn line_range(&self, line: usize) -> (usize, usize) {
        let start = self.starts.get(line).copied().unwrap_or(self.src.len());
        let end = self.starts.get(line + 1).copied().unwrap_or(self.src.len());
        (start, end)
    }
}

/// Lines [`Cursor`] looks through, forwards, before it searches.
const WALK_LINES: usize = 4;

/// See [`LineIndex::cursor`]: it remembers the line of the last offset (of an ASCII source), so
/// an offset on that line or one of the next few (the usual order of an instruction stream)
/// takes no search.
pub(crate) struct Cursor<'i, 's> {
    idx: &'i LineIndex<'s>,
    /// The line last found (0-based), its first byte and its length (zero when not known).
    line: usize,
    start: usize,
    len: usize,
}

impl Cursor<'_, '_> {
    /// [`LineIndex::pos`] of `o`.
    #[inline]
    pub(crate) fn pos(&mut self, o: u32) -> SourcePos {
        let col = (o as usize).wrapping_sub(self.start);
        if col < self.len {
            return SourcePos {
                line: self.line as u32 + 1,
                col: col as u32,
            };
        }
        self.pos_elsewhere(o)
    }

    /// [`Self::pos`] of an offset off the line of the previous one.
    fn pos_elsewhere(&mut self, o: u32) -> SourcePos {
        let idx = self.idx;
        if !idx.ascii {
            return idx.pos(o);
        }
        let off = o as usize;
        // one of the next few lines (the usual move), else a search
        let mut line = self.line;
        loop {
            line += 1;
            let (start, end) = idx.line_range(line);
            if off < start || line > self.line + WALK_LINES {
                line = idx.pos(o).line as usize - 1;
                break;
            }
            if off < end {
                break;
            }
        }
        let (start, end) = idx.line_range(line);
        self.line = line;
        self.start = start;
        self.len = end - start;
        SourcePos {
            line: line as u32 + 1,
            col: (off.min(idx.src.len()) - start) as u32,
        }
    }
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
    fn positions_of_long_sources_match_a_character_walk() {
        // (a source of 256 bytes or more takes the other way to its line starts)
        let pieces = [
            "a",
            "bc",
            "\n",
            "\n\n",
            "0123456789abcde",
            "\r",
            "\r\n",
            "é",
            "\u{2028}",
            " ",
        ];
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1d_u64);
        for round in 0..400 {
            // ASCII with LFs only in most rounds, any piece in some
            let kinds = if round % 4 == 0 { pieces.len() } else { 5 };
            let mut src = String::new();
            while src.len() < 256 + round % 40 {
                src.push_str(pieces[next() % kinds]);
            }
            let idx = LineIndex::new(&src);
            for off in 0..=src.len() {
                if src.is_char_boundary(off) {
                    let p = idx.pos(off as u32);
                    assert_eq!((p.line, p.col), reference(&src, off), "{src:?} at {off}");
                }
            }
            // a cursor's walks, forwards and backwards, short and long
            let offsets: Vec<u32> = (0..300)
                .map(|_| {
                    let o = (next() % (src.len() + 3)) as u32;
                    if next().is_multiple_of(3) {
                        o
                    } else {
                        o / 4
                    }
                })
                .collect();
            let many = idx.positions(&offsets);
            for (k, &off) in offsets.iter().enumerate() {
                assert_eq!(many[k], idx.pos(off), "{src:?} at {off}");
            }
        }
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
            "\n\nx\n",
            "0123456\n89abcdef\n\n\n\n\n\n\n\n\n\nx\x0b\n\x0b\x0b\n\x7f\x0c\ny\n",
            "a long line of plain text, more than eight bytes\nand another\n\tindented\n",
            "0123456789abcdef0123456789abcdef\r",
            "0123456789abcdef012345678é9abcdef\n",
        ] {
            let idx = LineIndex::new(src);
            let offsets: Vec<u32> = (0..=src.len() as u32 + 2)
                .chain((0..=src.len() as u32).rev())
                .collect();
            let many = idx.positions(&offsets);
            for (k, &off) in offsets.iter().enumerate() {
                let p = idx.pos(off);
                assert_eq!(many[k], p);
                let off = off as usize;
                if off <= src.len() && src.is_char_boundary(off) {
                    assert_eq!((p.line, p.col), reference(src, off), "{src:?} at {off}");
                }
            }
        }
    }
}
