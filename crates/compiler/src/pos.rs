//! Byte offsets to line/column, and the pre-parse nesting bound.

use ajs_bytecode::SourcePos;

use crate::Fail;

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
        if let Some(starts) = Self::plain_starts(src) {
            return LineIndex {
                src,
                starts,
                ascii: true,
            };
        }
        let b = src.as_bytes();
        let mut starts: Starts = smallvec::smallvec![0];
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

    /// The line starts of an ASCII source in which only LF ends a line (the usual case), or
    /// `None` for any other source.
    fn plain_starts(src: &str) -> Option<Starts> {
        let b = src.as_bytes();
        if b.len() < 256 {
            let mut starts = Starts::new();
            starts.push(0);
            return plain_lines(b, |s| starts.push(s)).then_some(starts);
        }
        // (a longer source: whether it is plain is asked first, then its LFs are searched for,
        // both with vector instructions; into a plain vector, cheaper to push to)
        if !b.is_ascii() || memchr::memchr(b'\r', b).is_some() {
            return None;
        }
        let mut starts = Vec::with_capacity(b.len() / 32 + 1);
        starts.push(0);
        lf_lines(b, |s| starts.push(s));
        Some(Starts::from_vec(starts))
    }

    /// The positions of many offsets, [`Self::pos`] of each.
    #[cfg(test)]
    pub(crate) fn positions(&self, offsets: &[u32]) -> Vec<SourcePos> {
        let mut c = self.cursor();
        offsets.iter().map(|&o| c.pos(o)).collect()
    }

    /// A cursor for resolving many offsets one after the other, [`Self::pos`] of each: an offset
    /// on the line of the previous one or on one of the next lines (the usual order of an
    /// instruction stream) skips the line search.
    pub(crate) fn cursor(&self) -> Cursor<'_, 's> {
        // (of a source that is not ASCII, no line: every offset takes the general way)
        let (start, end) = if self.ascii {
            (0, self.starts.get(1).copied().unwrap_or(self.src.len()))
        } else {
            (usize::MAX, 0)
        };
        Cursor {
            idx: self,
            line: 0,
            start,
            end,
            len: if self.ascii { end } else { 0 },
            last: None,
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
}

/// Gives the start of every line after the first of `b` to `line`, when `b` is ASCII and only
/// LF ends its lines; false (having given some) otherwise. Eight bytes at a time, with bit
/// tricks exact for ASCII bytes (a byte below 0x80 plus 0x7F sets its top bit, with no carry
/// into the next byte, unless it is zero): whether any byte is non-ASCII or a CR is gathered
/// over the whole source, and each word's LFs are read off its mask of zero bytes.
#[inline(always)]
fn plain_lines(b: &[u8], mut line: impl FnMut(usize)) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    /// The top bit of every byte of `w` that is zero (when `w` is ASCII).
    fn zero_bytes(w: u64) -> u64 {
        !w.wrapping_add(LOW7) & HIGH
    }
    // the top bit of any byte: non-ASCII or (in an ASCII word) a CR
    let mut bad = 0u64;
    let mut i = 0;
    while let Some(&word) = b.get(i..).and_then(|r| r.first_chunk::<8>()) {
        let w = u64::from_le_bytes(word);
        bad |= w | zero_bytes(w ^ (ONES * u64::from(b'\r')));
        let mut lf = zero_bytes(w ^ (ONES * u64::from(b'\n')));
        while lf != 0 {
            line(i + lf.trailing_zeros() as usize / 8 + 1);
            lf &= lf - 1;
        }
        i += 8;
    }
    if bad & HIGH != 0 {
        return false;
    }
    let tail = b.get(i..).unwrap_or(&[]);
    for (k, &c) in tail.iter().enumerate() {
        match c {
            b'\n' => line(i + k + 1),
            b'\r' | 0x80.. => return false,
            _ => {}
        }
    }
    true
}

/// Gives the start of every line after the first of ASCII `b` (LF-terminated lines) to `line`,
/// eight bytes at a time (see [`plain_lines`]).
#[inline(always)]
fn lf_lines(b: &[u8], mut line: impl FnMut(usize)) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let lfs = |w: [u8; 8]| {
        let w = u64::from_le_bytes(w) ^ (ONES * u64::from(b'\n'));
        !w.wrapping_add(LOW7) & HIGH
    };
    // sixteen bytes a step (most have no LF)
    let mut chunks = b.chunks_exact(16);
    let mut i = 0;
    for pair in &mut chunks {
        let (w0, w1) = pair.split_at(8);
        let lf0 = lfs(w0.try_into().unwrap_or([0; 8]));
        let lf1 = lfs(w1.try_into().unwrap_or([0; 8]));
        if lf0 | lf1 != 0 {
            let mut lf = lf0;
            while lf != 0 {
                line(i + lf.trailing_zeros() as usize / 8 + 1);
                lf &= lf - 1;
            }
            let mut lf = lf1;
            while lf != 0 {
                line(i + 8 + lf.trailing_zeros() as usize / 8 + 1);
                lf &= lf - 1;
            }
        }
        i += 16;
    }
    for (k, &c) in chunks.remainder().iter().enumerate() {
        if c == b'\n' {
            line(i + k + 1);
        }
    }
}

/// Lines a [`Cursor`] walks over, either way, before it searches.
const WALK_LINES: usize = 8;

/// See [`LineIndex::cursor`].
pub(crate) struct Cursor<'i, 's> {
    idx: &'i LineIndex<'s>,
    /// The line last found (0-based) and its byte range (ASCII sources only: of any other, the
    /// range is empty, so that [`Self::pos`] need not ask).
    line: usize,
    start: usize,
    end: usize,
    /// `end - start`: an offset `start + d` with `d` below it is on the line (one comparison,
    /// of the column; two of the offset cost ~1.6 k instructions per compile of the 8 KB agent).
    len: usize,
    /// The last offset asked and its position (of a non-ASCII source).
    last: Option<(u32, SourcePos)>,
}

impl Cursor<'_, '_> {
    /// [`LineIndex::pos`] of `o`.
    #[inline(always)]
    pub(crate) fn pos(&mut self, o: u32) -> SourcePos {
        // on the line of the previous offset of an ASCII source (the usual case)
        let col = (o as usize).wrapping_sub(self.start);
        if col < self.len {
            return SourcePos {
                line: self.line as u32 + 1,
                col: col as u32,
            };
        }
        self.pos_next(o)
    }

    /// Moves the cursor to `line` (from `start` to `end`) and gives the position of `off` on it.
    #[inline(always)]
    fn enter(&mut self, line: usize, start: usize, end: usize, off: usize) -> SourcePos {
        self.line = line;
        self.start = start;
        self.end = end;
        self.len = end - start;
        SourcePos {
            line: line as u32 + 1,
            col: (off - start) as u32,
        }
    }

    /// [`Self::pos`] of an offset off the line of the previous one: on one of the next four
    /// lines (the usual move), or else [`Self::pos_elsewhere`]. (Out of line with little state:
    /// it saves two registers where the general walk saves six, ~30 instructions a move instead
    /// of ~56; 1,121.7 k -> 1,120.3 k instructions per compile of the 8 KB agent.)
    #[inline(never)]
    fn pos_next(&mut self, o: u32) -> SourcePos {
        let off = o as usize;
        // (of a source that is not ASCII, `start` is above every offset: the general way)
        if off >= self.end && off >= self.start {
            let starts: &[usize] = &self.idx.starts;
            let mut start = self.end;
            for line in self.line + 1..self.line + 5 {
                match starts.get(line + 1) {
                    Some(&end) if off < end => {
                        return self.enter(line, start, end, off);
                    }
                    Some(&end) => start = end,
                    None => break,
                }
            }
        }
        self.pos_elsewhere(o)
    }

    /// [`Self::pos`] of an offset off the line of the previous one, or of a non-ASCII source.
    #[inline(never)]
    fn pos_elsewhere(&mut self, o: u32) -> SourcePos {
        let idx = self.idx;
        if !idx.ascii {
            if let Some((lo, lp)) = self.last {
                if lo == o {
                    return lp;
                }
            }
            let p = idx.pos(o);
            self.last = Some((o, p));
            return p;
        }
        let off = o as usize;
        let starts: &[usize] = &idx.starts;
        let len = idx.src.len();
        // one of the next few lines (the usual move: on to the next one)
        if off >= self.end {
            let (mut line, mut end) = (self.line, self.end);
            for _ in 0..WALK_LINES {
                if line + 1 >= starts.len() {
                    break;
                }
                line += 1;
                let start = end;
                end = starts.get(line + 1).copied().unwrap_or(len);
                if off < end {
                    return self.enter(line, start, end, off);
                }
            }
        } else if off < self.start {
            // or of the last few (a loop's test after its body, a prologue's constants)
            let (mut line, mut start) = (self.line, self.start);
            for _ in 0..WALK_LINES {
                if line == 0 {
                    break;
                }
                line -= 1;
                let end = start;
                start = starts.get(line).copied().unwrap_or(0);
                if off >= start {
                    return self.enter(line, start, end, off);
                }
            }
        }
        let p = idx.pos(o);
        let i = p.line as usize - 1;
        self.line = i;
        self.start = starts.get(i).copied().unwrap_or(0);
        self.end = starts.get(i + 1).copied().unwrap_or(len);
        self.len = self.end.saturating_sub(self.start);
        p
    }
}

/// The bytes that matter in template text: `\\`, the backtick and `$`. Both scans step over any
/// other byte of the text in one go rather than one at a time (the agent's prescan,
/// 162.4 k -> 161.8 k instructions).
static TEXT_BYTES: [bool; 256] = byte_set(b"\\`$");

/// The table of the bytes in `bytes` (the scans' byte tables).
pub(crate) const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut k = 0;
    while k < bytes.len() {
        t[bytes[k] as usize] = true;
        k += 1;
    }
    t
}

/// Byte classes of [`check_nesting`]'s code state.
const N_OTHER: u8 = 0;
const N_SPACE: u8 = 1;
const N_QUOTE: u8 = 2;
const N_SLASH: u8 = 3;
const N_TICK: u8 = 4;
const N_OPEN: u8 = 5;
const N_CLOSE: u8 = 6;
const N_OP: u8 = 7;

static NEST_CLASS: [u8; 256] = {
    let mut t = [N_OTHER; 256];
    t[b' ' as usize] = N_SPACE;
    t[b'\t' as usize] = N_SPACE;
    t[b'\n' as usize] = N_SPACE;
    t[b'\r' as usize] = N_SPACE;
    t[b'\'' as usize] = N_QUOTE;
    t[b'"' as usize] = N_QUOTE;
    t[b'/' as usize] = N_SLASH;
    t[b'`' as usize] = N_TICK;
    t[b'(' as usize] = N_OPEN;
    t[b'[' as usize] = N_OPEN;
    t[b'{' as usize] = N_OPEN;
    t[b')' as usize] = N_CLOSE;
    t[b']' as usize] = N_CLOSE;
    t[b'}' as usize] = N_CLOSE;
    let ops = *b"!-+~?=";
    let mut k = 0;
    while k < ops.len() {
        t[ops[k] as usize] = N_OP;
        k += 1;
    }
    t
};

/// Refuses sources whose brackets nest deeper than `max` (strings, comments and template text are
/// skipped roughly; a regex literal may be miscounted, which can only over-estimate the depth),
/// or with a run of more than `4 * max` prefix or right-associative operator characters.
#[cfg(test)]
pub(crate) fn check_nesting(src: &str, max: usize) -> Result<(), Fail> {
    Nest::new(src.as_bytes(), max).scan(src.len())
}

/// The state of [`check_nesting`]'s scan, which can stop at any byte and go on later: the
/// merged pre-parse scan ([`prescan`]) runs it only over what its own lexer cannot vouch for.
pub(crate) struct Nest<'b> {
    b: &'b [u8],
    max: usize,
    /// Where the scan is: every byte before `i` is counted.
    i: usize,
    depth: usize,
    /// The depth at which each open template literal started (its text is read at that depth).
    templates: Vec<usize>,
    /// Consecutive prefix-operator characters.
    run: usize,
    /// Inside the text of the innermost template.
    in_text: bool,
    /// The top-level bracket open, when it opened in code with no template open.
    open_at: Option<usize>,
    /// The first template that started inside it (index of its backtick, depth there).
    tick: Option<(usize, usize)>,
    /// A template inside it was read otherwise than [`fast`] reads the simple ones (see
    /// [`Body::simple`]).
    complex: bool,
    /// The brackets that ended the substitutions [`fast`] read inside it (the first
    /// [`SUB_ENDS`]), and how many there were.
    sub_ends: [u32; SUB_ENDS],
    nsub: usize,
    /// Each such bracket that closed (see [`prescan_bodies`]).
    bodies: Vec<Body>,
}

/// Most substitution ends [`Nest`] keeps for a top-level bracket (one with more is not simple).
const SUB_ENDS: usize = 16;

/// A top-level bracket of [`prescan_bodies`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Body {
    /// The index of the bracket.
    pub open: u32,
    /// The index after the bracket that closed it.
    pub end: u32,
    /// The index of the backtick of the first template read between them, and the depth there
    /// (counting the bracket).
    pub tick: Option<(u32, u32)>,
    /// Every template between them was read by [`fast`] (its text, and the end of each of its
    /// substitutions: none was read by [`Nest::scan`]), and each of its substitutions is simple
    /// ([`simple_substitution`]: it ends at a `}`, with no brace, quote, backtick, `\` or `/`
    /// in it). The parameter rewrite, which reads template text as this scan does and a
    /// substitution by its braces, quotes, backticks and `\` alone, then reads each template,
    /// and so the whole bracket, as this scan does, and skips it as it skips one with no
    /// template (the agent's compile, 1,173.4 k -> 1,163.7 k instructions).
    pub simple: bool,
}

impl<'b> Nest<'b> {
    pub(crate) fn new(b: &'b [u8], max: usize) -> Nest<'b> {
        Nest {
            b,
            max,
            i: 0,
            depth: 0,
            templates: Vec::new(),
            run: 0,
            in_text: false,
            open_at: None,
            tick: None,
            complex: false,
            sub_ends: [0; SUB_ENDS],
            nsub: 0,
            bodies: Vec::new(),
        }
    }

    /// An opening bracket at `i` in code, at depth `depth` (before it).
    #[inline(always)]
    fn opening(&mut self, i: usize, depth: usize) {
        if depth == 0 && self.templates.is_empty() {
            self.open_at = Some(i);
            self.tick = None;
            self.complex = false;
            self.nsub = 0;
        }
    }

    /// A closing bracket at `i` in code, at depth `depth` (before it).
    #[inline(always)]
    fn closing(&mut self, i: usize, depth: usize) {
        if depth == 1 {
            self.closing_top(i);
        }
    }

    /// [`Self::closing`] at the top level (out of line: the hot loops that close brackets keep
    /// more of their state in registers, 161.8 k -> 160.9 k).
    #[cold]
    #[inline(never)]
    fn closing_top(&mut self, i: usize) {
        if let Some(o) = self.open_at.take() {
            self.bodies.push(Body {
                open: o as u32,
                end: i as u32 + 1,
                tick: self.tick.map(|(t, d)| (t as u32, d as u32)),
                simple: !self.complex
                    && self.nsub <= SUB_ENDS
                    && self
                        .sub_ends
                        .iter()
                        .take(self.nsub)
                        .all(|&e| simple_substitution(self.b, e as usize)),
            });
        }
    }

    /// A substitution of a template that [`fast`] reads ends at the bracket at `i` (checked
    /// when the top-level bracket closes: see [`Body::simple`]). (Two stores: a call here,
    /// in [`fast`]'s loop, cost it its registers, ~13 k instructions per compile of the 8 KB
    /// agent.)
    #[inline(always)]
    fn substitution_ends(&mut self, i: usize) {
        if let Some(slot) = self.sub_ends.get_mut(self.nsub) {
            *slot = i as u32;
        }
        self.nsub += 1;
    }

    fn too_deep(i: usize) -> Result<(), Fail> {
        Err(Fail::new(i as u32, "nesting too deep"))
    }

    /// Scans on until at least `stop` (a string or comment may end past it).
    pub(crate) fn scan(&mut self, stop: usize) -> Result<(), Fail> {
        let b = self.b;
        let n = b.len();
        let stop = stop.min(n);
        let max = self.max;
        let mut i = self.i;
        let mut run = self.run;
        let mut depth = self.depth;
        // (a template read here, not by `fast`: see `Body::simple`)
        if (self.in_text || !self.templates.is_empty()) && i < stop {
            self.complex = true;
        }
        let r = 'scan: {
            while i < stop {
                if self.in_text {
                    // template text, at the depth its template started: from one byte that
                    // matters to the next, not beyond `stop` (see [`TEXT_BYTES`])
                    let text = b.get(i..stop).unwrap_or(&[]);
                    match text.iter().position(|&c| TEXT_BYTES[c as usize]) {
                        Some(k) => i += k,
                        None => {
                            i = stop;
                            continue;
                        }
                    }
                    match b[i] {
                        b'\\' => i += 2,
                        b'`' => {
                            self.templates.pop();
                            self.in_text = false;
                            i += 1;
                        }
                        b'$' if b.get(i + 1) == Some(&b'{') => {
                            depth += 1;
                            if depth > max {
                                break 'scan Self::too_deep(i);
                            }
                            self.in_text = false;
                            i += 2;
                        }
                        _ => i += 1,
                    }
                    continue;
                }
                let class = NEST_CLASS[b[i] as usize];
                if class <= N_SPACE {
                    // words, numbers and other bytes end an operator run; white space does not
                    let mut k = class;
                    loop {
                        run &= (k as usize).wrapping_neg();
                        i += 1;
                        if i >= stop {
                            break;
                        }
                        k = NEST_CLASS[b[i] as usize];
                        if k > N_SPACE {
                            break;
                        }
                    }
                    continue;
                }
                let c = b[i];
                match class {
                    N_QUOTE => {
                        i += 1;
                        while i < n && b[i] != c && b[i] != b'\n' {
                            if b[i] == b'\\' {
                                i += 1;
                            }
                            i += 1;
                        }
                        i += 1;
                        run = 0;
                    }
                    N_SLASH if b.get(i + 1) == Some(&b'/') => {
                        while i < n && b[i] != b'\n' {
                            i += 1;
                        }
                    }
                    N_SLASH if b.get(i + 1) == Some(&b'*') => {
                        i += 2;
                        while i + 1 < n && !(b[i] == b'*' && b[i + 1] == b'/') {
                            i += 1;
                        }
                        i += 2;
                    }
                    N_SLASH => {
                        run = 0;
                        i += 1;
                    }
                    N_TICK => {
                        // (the only place a template starts)
                        if self.open_at.is_some() && self.tick.is_none() {
                            self.tick = Some((i, depth));
                        }
                        self.complex = true;
                        self.templates.push(depth);
                        self.in_text = true;
                        i += 1;
                        run = 0;
                    }
                    N_OPEN => {
                        self.opening(i, depth);
                        depth += 1;
                        if depth > max {
                            break 'scan Self::too_deep(i);
                        }
                        run = 0;
                        i += 1;
                    }
                    N_CLOSE => {
                        self.closing(i, depth);
                        depth = depth.saturating_sub(1);
                        run = 0;
                        i += 1;
                        if self.templates.last() == Some(&depth) {
                            self.in_text = true;
                        }
                    }
                    _ => {
                        // N_OP: prefix operators and right-associative chains recurse in the
                        // parser too
                        run += 1;
                        if run > max * 4 {
                            break 'scan Self::too_deep(i);
                        }
                        i += 1;
                    }
                }
            }
            Ok(())
        };
        self.i = i;
        self.run = run;
        self.depth = depth;
        r
    }

    /// Whether the scan is exactly at `p` in code (scanning up to it first): then the caller,
    /// which has lexed a token starting at `p` the same way, may apply its effect directly.
    #[inline]
    fn at(&mut self, p: usize) -> Result<bool, Fail> {
        if self.i < p {
            self.scan(p)?;
        }
        Ok(self.i == p && !self.in_text)
    }

    /// A token `[.., q)` that ends an operator run.
    #[inline]
    fn other(&mut self, q: usize) {
        self.run = 0;
        self.i = q;
    }

    /// One operator character at `p`.
    #[inline]
    fn op(&mut self, p: usize) -> Result<(), Fail> {
        if NEST_CLASS[self.b[p] as usize] == N_OP {
            self.run += 1;
            if self.run > self.max * 4 {
                return Self::too_deep(p);
            }
        } else {
            self.run = 0;
        }
        self.i = p + 1;
        Ok(())
    }

    /// An opening bracket at `p`.
    #[inline]
    fn open(&mut self, p: usize) -> Result<(), Fail> {
        self.opening(p, self.depth);
        self.depth += 1;
        if self.depth > self.max {
            return Self::too_deep(p);
        }
        self.run = 0;
        self.i = p + 1;
        Ok(())
    }

    /// A closing bracket at `p`, when no template is open (else the scan reads it itself).
    #[inline]
    fn close(&mut self, p: usize) -> bool {
        if !self.templates.is_empty() {
            return false;
        }
        self.closing(p, self.depth);
        self.depth = self.depth.saturating_sub(1);
        self.run = 0;
        self.i = p + 1;
        true
    }
}

/// The pre-parse scan: [`recursion_bound`] of `src`, or the error of [`check_nesting`] with
/// `max` when it refuses the source, in one pass over the bytes (the nesting scan is run by
/// itself only over the parts the bound's lexer may read differently: regex literals, lines
/// of uncertain tokens, template literals, odd strings and comments).
#[cfg(test)]
pub(crate) fn prescan(src: &str, max: usize) -> Result<usize, Fail> {
    prescan_bodies(src, max).map(|(bound, _)| bound)
}

/// What [`prescan_bodies`] finds: the bound and the top-level brackets.
pub(crate) type Scan = (usize, Vec<Body>);

/// [`prescan`], with the brackets the nesting scan read at the top level: for each bracket it
/// read in code at depth 0 with no template open, and that closed, its index, the index after
/// the bracket that closed it and where the first template between them starts. Up to that
/// template (or the closing bracket), the nesting scan lexes the source exactly as
/// [`crate::params`] lexes a function body (strings that end at a line end, comments,
/// brackets), so the parameter rewrite can skip that far.
pub(crate) fn prescan_bodies(src: &str, max: usize) -> Result<Scan, Fail> {
    let mut nest = Nest::new(src.as_bytes(), max);
    // (about one a function's parameters and one its body: the agent has one in 176 bytes; the
    // vector grown from nothing cost ~5 k instructions a compile)
    nest.bodies = Vec::with_capacity(src.len() / 128 + 8);
    let bound = bound(src, Some(&mut nest))?;
    nest.scan(src.len())?;
    Ok((bound, nest.bodies))
}

/// Stack units a bracket level counts for in [`recursion_bound`]: the parser spends about three
/// times the stack on a bracket level (`(`, `[`, `{`, `${`) as on an operator or a keyword.
pub(crate) const BRACKET_UNITS: usize = 3;

/// Whether plain word `w` (ASCII letters, digits, `_` and `$` only) is a keyword that can open
/// a nesting level without a bracket (`else if …`, `typeof typeof …`, a statement body without
/// braces), and what it says about a following `/`: after a reserved word that takes an
/// expression it starts a regex, after a contextual word it may do either, after any other word
/// it divides. (A word with escapes or non-ASCII letters may hide a keyword or a space: the
/// caller treats it as contextual.)
#[inline(always)]
fn classify(w: &[u8]) -> (bool, Prev) {
    // (most words are no keyword: their first byte and length say so)
    let lens = w.first().map_or(0, |&c| KEYWORD_LENS[c as usize]);
    if w.len() >= 16 || lens & (1 << w.len()) == 0 {
        return (false, Prev::Value);
    }
    classify_keyword(w)
}

/// [`classify`] of `b[i..i + len]` (a word of `len` bytes from `i`, `len` at least 1, whose first
/// byte is `c`): the slice is only taken for a word that may be a keyword (the agent's prescan,
/// 164.8 k -> 163.4 k instructions, against slicing every word).
#[inline(always)]
fn classify_at(b: &[u8], i: usize, c: u8, len: usize) -> (bool, Prev) {
    if len >= 16 || KEYWORD_LENS[c as usize] & (1 << len) == 0 {
        return (false, Prev::Value);
    }
    // and by its last byte (most words that pass the first test fail this one: `total`,
    // `result`, `id`; 163.4 k -> 162.4 k)
    let last = b
        .get(i + len - 1)
        .map_or(0, |&e| KEYWORD_LAST_LENS[e as usize]);
    if last & (1 << len) == 0 {
        return (false, Prev::Value);
    }
    classify_keyword(b.get(i..i + len).unwrap_or(&[]))
}

/// The words [`classify_keyword`] knows, and what each says (see [`classify`]): whether it
/// opens a nesting level, and what it makes of a following `/`. The one list of them: the
/// tables below are built from it.
const KEYWORD_CLASSES: [(&[u8], bool, Prev); 24] = [
    (b"case", true, Prev::Expr),
    (b"delete", true, Prev::Expr),
    (b"do", true, Prev::Expr),
    (b"else", true, Prev::Expr),
    (b"in", true, Prev::Expr),
    (b"instanceof", true, Prev::Expr),
    (b"new", true, Prev::Expr),
    (b"return", true, Prev::Expr),
    (b"throw", true, Prev::Expr),
    (b"typeof", true, Prev::Expr),
    (b"void", true, Prev::Expr),
    (b"extends", true, Prev::Expr),
    (b"yield", true, Prev::Unknown),
    (b"await", true, Prev::Unknown),
    (b"of", true, Prev::Unknown),
    (b"async", true, Prev::Unknown),
    (b"if", true, Prev::Value),
    (b"while", true, Prev::Value),
    (b"for", true, Prev::Value),
    (b"with", true, Prev::Value),
    (b"let", false, Prev::Unknown),
    (b"static", false, Prev::Unknown),
    (b"get", false, Prev::Unknown),
    (b"set", false, Prev::Unknown),
];

/// The words of [`KEYWORD_CLASSES`].
const KEYWORDS: [&[u8]; 24] = {
    let mut t: [&[u8]; 24] = [b""; 24];
    let mut k = 0;
    while k < t.len() {
        t[k] = KEYWORD_CLASSES[k].0;
        k += 1;
    }
    t
};

/// Per first byte, the lengths (as bits) of the [`KEYWORDS`] that start with it.
static KEYWORD_LENS: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut k = 0;
    while k < KEYWORDS.len() {
        let w = KEYWORDS[k];
        t[w[0] as usize] |= 1 << w.len();
        k += 1;
    }
    t
};

/// Per last byte, the lengths (as bits) of the [`KEYWORDS`] that end with it.
static KEYWORD_LAST_LENS: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut k = 0;
    while k < KEYWORDS.len() {
        let w = KEYWORDS[k];
        t[w[w.len() - 1] as usize] |= 1 << w.len();
        k += 1;
    }
    t
};

/// [`classify`] of a word of fewer than 16 bytes (longer ones are no keyword): by
/// [`short_word_class`], on the word alone in a window.
#[inline(never)]
fn classify_keyword(w: &[u8]) -> (bool, Prev) {
    let mut window = [0u8; 16];
    match window.get_mut(..w.len()) {
        Some(head) if !w.is_empty() && w.len() < 16 => head.copy_from_slice(w),
        _ => return (false, Prev::Value),
    }
    short_word_class(&window, w.len()).unwrap_or((false, Prev::Value))
}

/// The multiplier of [`KEYWORD_SLOTS`]'s hash (found by a search: the 23 keywords of up to eight
/// bytes go to 23 different slots of 32).
const KEYWORD_HASH: u64 = 0xd41e_13b7_92a1_fa9d;

/// The slot of the word whose bytes (up to eight, little-endian, the rest zero) are `w`.
#[inline(always)]
fn keyword_slot(w: u64) -> usize {
    (w.wrapping_mul(KEYWORD_HASH) >> 59) as usize
}

/// The first `n` bytes of eight, for `n` up to 8 (a table rather than two shifts).
static LOW_BYTES: [u64; 16] = {
    let mut t = [0u64; 16];
    let mut n = 1;
    while n <= 8 {
        t[n] = u64::MAX >> (64 - 8 * n);
        n += 1;
    }
    t
};

/// The bytes of each slot's keyword of [`KEYWORD_SLOTS`] alone (compared first: eight bytes an
/// entry are read with a scaled index).
static KEYWORD_KEYS: [u64; 32] = {
    let mut t = [0u64; 32];
    let mut k = 0;
    while k < 32 {
        t[k] = KEYWORD_SLOTS[k].0;
        k += 1;
    }
    t
};

/// [`classify_keyword`] of the [`KEYWORDS`] of up to eight bytes by the hash of their bytes: in
/// each slot a keyword's bytes as a number (0 in the slots no keyword takes) and its class. The
/// fast path reads a word's class from one slot, with no call and no filter (the agent's prescan,
/// 137.0 k -> 132.7 k instructions).
static KEYWORD_SLOTS: [(u64, bool, Prev); 32] = {
    let mut t = [(0u64, false, Prev::Value); 32];
    let mut k = 0;
    while k < KEYWORD_CLASSES.len() {
        let (w, nesting, prev) = KEYWORD_CLASSES[k];
        k += 1;
        if w.len() > 8 {
            // (`instanceof`, told by its length)
            continue;
        }
        let mut key = 0u64;
        let mut j = 0;
        while j < w.len() {
            key |= (w[j] as u64) << (8 * j);
            j += 1;
        }
        let slot = (key.wrapping_mul(KEYWORD_HASH) >> 59) as usize;
        assert!(t[slot].0 == 0, "two keywords in one slot");
        t[slot] = (key, nesting, prev);
    }
    t
};

/// [`classify_keyword`] of the plain word `w[..len]` (`len` below 16), `None` for a word that is
/// no keyword: by the hash of its bytes for up to eight ([`KEYWORD_SLOTS`]), `instanceof` by
/// its length and bytes.
#[inline(always)]
fn short_word_class(w: &[u8; 16], len: usize) -> Option<(bool, Prev)> {
    // (most words are no keyword: their first byte and length say so)
    if KEYWORD_LENS[w[0] as usize] & (1 << (len & 15)) == 0 {
        return None;
    }
    if len <= 8 {
        let head = u64::from_le_bytes(*w.first_chunk().unwrap_or(&[0; 8]));
        let word = head & LOW_BYTES[len & 15];
        let slot = keyword_slot(word);
        if KEYWORD_KEYS[slot] == word {
            let (_, nesting, next) = KEYWORD_SLOTS[slot];
            return Some((nesting, next));
        }
        None
    } else if len == 10 && w.first_chunk::<10>() == Some(b"instanceof") {
        // (the one longer keyword)
        Some((true, Prev::Expr))
    } else {
        None
    }
}

/// What the previous token says about a following `/`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Prev {
    /// A value ended (identifier, number, string, `]`): `/` divides.
    Value,
    /// An operator, an opening bracket or an expression keyword: `/` starts a regex.
    Expr,
    /// Either (`)`, `}`, `++`, contextual words).
    Unknown,
}

/// The open frames of [`recursion_bound`] and the running total.
#[derive(Default)]
struct Frames {
    /// Per open frame: `units` before it opened (times two), plus one when it is a template `${`.
    /// (When it closes, what it counted directly is gone and what it contained closed before:
    /// `units` go back to that value.)
    open: Vec<usize>,
    /// Units of every open frame and of what they directly contain.
    units: usize,
    /// The most `units` reached before the last time they went down (see [`Self::peak`]).
    max: usize,
}

impl Frames {
    fn unit(&mut self, n: usize) {
        self.units += n;
    }

    fn open(&mut self, template: bool) {
        self.open.push(self.units << 1 | usize::from(template));
        self.units += BRACKET_UNITS;
    }

    /// Closes the innermost frame; true when it was a template substitution.
    fn close(&mut self) -> bool {
        match self.open.pop() {
            Some(top) => {
                // (the units only go down here: the most so far is taken before)
                self.max = self.max.max(self.units);
                self.units = top >> 1;
                top & 1 != 0
            }
            None => false,
        }
    }

    /// The most `units` reached.
    fn peak(&self) -> usize {
        self.max.max(self.units)
    }

    /// Template text from `i` (after a backtick or a substitution's `}`): returns the index after
    /// the closing backtick (and true) or after a `${`, whose frame is then open (and false).
    fn template_text(&mut self, b: &[u8], mut i: usize) -> (usize, bool) {
        loop {
            // (from one byte that matters to the next, see [`TEXT_BYTES`])
            let rest = b.get(i..).unwrap_or(&[]);
            match rest.iter().position(|&c| TEXT_BYTES[c as usize]) {
                Some(k) => i += k,
                None => return (b.len(), true),
            }
            match b[i] {
                b'\\' => i += 2,
                b'`' => return (i + 1, true),
                b'$' if b.get(i + 1) == Some(&b'{') => {
                    self.open(true);
                    return (i + 2, false);
                }
                _ => i += 1,
            }
        }
    }

    /// Counts from `i` when the lexical state is not known (a `/` that may divide or start a
    /// regex): every opening bracket opens a frame, no closing bracket closes one, quotes are not
    /// trusted. With `line`, stops after the line (unless it ends in a `\` continuation) and
    /// returns the index there; returns `None` when the rest of the source must be counted this
    /// way (a backtick or block comment could span lines).
    fn uncertain(&mut self, b: &[u8], mut i: usize, line: bool) -> Option<usize> {
        while i < b.len() {
            let c = b[i];
            match c {
                b'(' | b'[' | b'{' => self.open(false),
                b'\n' | b'\r' if line => {
                    let continued = i > 0 && b[i - 1] == b'\\';
                    i += if c == b'\r' && b.get(i + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    };
                    if !continued {
                        return Some(i);
                    }
                    continue;
                }
                b'`' if line => return None,
                b'/' if line && b.get(i + 1) == Some(&b'*') => return None,
                _ if is_operator(c) => self.unit(1),
                _ if is_word_start(c) => {
                    let (j, plain) = word_end(b, i + 1);
                    if plain && classify(&b[i..j]).0 {
                        self.unit(1);
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        Some(b.len())
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

fn is_word_start(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'\\' | b'#' | b'@') || c >= 0x80
}

/// Byte classes for scanning words: [`WORD`] for an ASCII letter, digit, `_` or `$`, [`ODD`]
/// for a byte of a word that may hide a keyword or a space (non-ASCII, or a `\` escape).
static WORD_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if b.is_ascii_alphanumeric() || b == b'_' || b == b'$' {
            WORD
        } else if b >= 0x80 || b == b'\\' {
            ODD
        } else {
            0
        };
        c += 1;
    }
    t
};
const WORD: u8 = 1;
const ODD: u8 = 2;

/// The end of the word going on at `i`, and whether it is made of ASCII letters, digits, `_` and
/// `$` only.
#[inline(always)]
fn word_end(b: &[u8], i: usize) -> (usize, bool) {
    // (over the slice: no bounds check per byte; the agent's prescan 166.0 k -> 164.8 k
    // instructions against a loop unrolled four times)
    let rest = b.get(i..).unwrap_or(&[]);
    let n = rest
        .iter()
        .position(|&c| WORD_BYTES[c as usize] != WORD)
        .unwrap_or(rest.len());
    word_end_at(b, i + n)
}

/// [`word_end`] where the plain bytes end at `j`.
#[inline(always)]
fn word_end_at(b: &[u8], j: usize) -> (usize, bool) {
    match b.get(j) {
        Some(&c) if WORD_BYTES[c as usize] == ODD => odd_word_end(b, j),
        _ => (j, true),
    }
}

/// [`word_end`] from `i`, where a byte that is not plain goes on the word.
fn odd_word_end(b: &[u8], i: usize) -> (usize, bool) {
    let rest = b.get(i..).unwrap_or(&[]);
    let mut kinds = 0u8;
    for (k, &c) in rest.iter().enumerate() {
        let t = WORD_BYTES[c as usize];
        if t == 0 {
            return (i + k, kinds & ODD == 0);
        }
        kinds |= t;
    }
    (i + rest.len(), kinds & ODD == 0)
}

/// An upper bound on how deeply the parser can recurse on `src`, in units of roughly half a
/// kilobyte of stack: [`BRACKET_UNITS`] per open bracket, plus one per operator character and
/// per nesting keyword written directly inside each open bracket (or at the top level) before
/// the deepest point. What is inside a closed bracket cannot be open any more, so it stops
/// counting; where the tokens are uncertain (a `/` after `)` or `}` may divide or start a
/// regex) the count only grows. Strings, comments, templates and regexes are skipped the way the
/// lexer skips them.
#[cfg(test)]
pub(crate) fn recursion_bound(src: &str) -> usize {
    bound(src, None).unwrap_or(0)
}

/// [`recursion_bound`]; with `nest`, also drives that nesting scan (see [`prescan`]).
fn bound(src: &str, mut nest: Option<&mut Nest>) -> Result<usize, Fail> {
    let b = src.as_bytes();
    let mut f = Frames {
        open: Vec::with_capacity(16),
        ..Frames::default()
    };
    let mut prev = Prev::Expr;
    let mut i = 0;
    // a hashbang comment (and HTML-like comments below) may hide brackets from the parser
    if b.starts_with(b"#!") {
        match f.uncertain(b, 0, true) {
            Some(next) => i = next,
            None => return Ok(poisoned(&mut f, b, 0)),
        }
    }
    while i < b.len() {
        // the common tokens, while the nesting scan is exactly here in code
        if let Some(ns) = nest.as_deref_mut() {
            if ns.i == i && !ns.in_text {
                i = fast(b, i, &mut f, &mut prev, ns)?;
                if i >= b.len() {
                    break;
                }
            }
        }
        let c = b[i];
        let p = i;
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            // white space, before the nesting scan is brought here: that scan reads white space
            // as nothing, so where it is behind it reads it later to the same effect
            i += 1;
            while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
            }
            if let Some(ns) = nest.as_deref_mut() {
                if ns.i == p && !ns.in_text {
                    ns.i = i;
                }
            }
            continue;
        }
        // the nesting scan, when it is exactly here: the token's effect is applied directly
        let ns = match nest.as_deref_mut() {
            Some(ns) => {
                if ns.at(p)? {
                    Some(ns)
                } else {
                    None
                }
            }
            None => None,
        };
        match c {
            0x0B | 0x0C => {
                i += 1;
                if let Some(ns) = ns {
                    ns.other(i);
                }
            }
            b'(' | b'[' | b'{' => {
                f.open(false);
                prev = Prev::Expr;
                i += 1;
                if let Some(ns) = ns {
                    ns.open(p)?;
                }
            }
            b')' | b']' | b'}' => {
                i += 1;
                if let Some(ns) = ns {
                    ns.close(p);
                }
                prev = if c == b']' {
                    Prev::Value
                } else {
                    Prev::Unknown
                };
                if f.close() {
                    let (next, ended) = f.template_text(b, i);
                    i = next;
                    prev = if ended { Prev::Value } else { Prev::Expr };
                }
            }
            b'`' => {
                let (next, ended) = f.template_text(b, i + 1);
                i = next;
                prev = if ended { Prev::Value } else { Prev::Expr };
            }
            b'\'' | b'"' => {
                i += 1;
                // no line terminator escaped (the nesting scan ends a string at any '\n')
                let mut clean = true;
                loop {
                    match b.get(i) {
                        None => break,
                        Some(&q) if q == c => {
                            i += 1;
                            break;
                        }
                        // an unterminated string: the parser's recovery is not followed
                        Some(b'\n' | b'\r') => return Ok(poisoned(&mut f, b, i)),
                        Some(b'\\') => {
                            if matches!(b.get(i + 1), Some(b'\n' | b'\r')) {
                                clean = false;
                            }
                            i += if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') {
                                3
                            } else {
                                2
                            };
                        }
                        Some(_) => i += 1,
                    }
                }
                prev = Prev::Value;
                if let (Some(ns), true) = (ns, clean) {
                    ns.other(i);
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                    i += 1;
                }
                if let (Some(ns), true) = (ns, b.get(i).is_none_or(|&e| e == b'\n')) {
                    ns.i = i;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
                if let Some(ns) = ns {
                    ns.i = i;
                }
            }
            b'/' => match prev {
                Prev::Value => {
                    f.unit(1);
                    prev = Prev::Expr;
                    i += 1;
                    if let Some(ns) = ns {
                        ns.other(i);
                    }
                }
                Prev::Expr => {
                    // a regex literal: up to the `/` that is not escaped or in a class
                    let mut class = false;
                    i += 1;
                    loop {
                        match b.get(i) {
                            None | Some(b'\n' | b'\r') => return Ok(poisoned(&mut f, b, i)),
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
                Prev::Unknown => {
                    // closing a substitution frame by mistake would misread template text
                    if f.open.iter().any(|&o| o & 1 != 0) {
                        return Ok(poisoned(&mut f, b, i));
                    }
                    match f.uncertain(b, i, true) {
                        Some(next) => i = next,
                        None => return Ok(poisoned(&mut f, b, i)),
                    }
                }
            },
            b'<' if b[i..].starts_with(b"<!--") => match f.uncertain(b, i, true) {
                Some(next) => i = next,
                None => return Ok(poisoned(&mut f, b, i)),
            },
            b'-' if b[i..].starts_with(b"-->") => match f.uncertain(b, i, true) {
                Some(next) => i = next,
                None => return Ok(poisoned(&mut f, b, i)),
            },
            b'+' | b'-' if b.get(i + 1) == Some(&c) => {
                f.unit(2);
                prev = Prev::Unknown;
                i += 2;
                if let Some(ns) = ns {
                    ns.op(p)?;
                    ns.op(p + 1)?;
                }
            }
            _ if is_operator(c) => {
                f.unit(1);
                prev = Prev::Expr;
                i += 1;
                if let Some(ns) = ns {
                    ns.op(p)?;
                }
            }
            b'.' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i = word_end(b, i + 1).0;
                prev = Prev::Value;
                if let Some(ns) = ns {
                    ns.other(i);
                }
            }
            b'.' => {
                if b[i..].starts_with(b"...") {
                    f.unit(1);
                    i += 3;
                } else {
                    i += 1;
                }
                prev = Prev::Expr;
                if let Some(ns) = ns {
                    ns.other(i);
                }
            }
            b',' | b';' => {
                prev = Prev::Expr;
                i += 1;
                if let Some(ns) = ns {
                    ns.other(i);
                }
            }
            _ if c.is_ascii_digit() => {
                // a number (an exponent's sign counts as an operator, which only adds)
                while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'.' | b'_')) {
                    i += 1;
                }
                prev = Prev::Value;
                if let Some(ns) = ns {
                    ns.other(i);
                }
            }
            _ if is_word_start(c) => {
                let (j, plain) = word_end(b, i + 1);
                let (nesting, next) = if plain && WORD_BYTES[c as usize] == WORD {
                    classify_at(b, i, c, j - i)
                } else {
                    (false, Prev::Unknown)
                };
                if nesting {
                    f.unit(1);
                }
                prev = next;
                i = j;
                if let Some(ns) = ns {
                    ns.other(i);
                }
            }
            // anything else is a syntax error the parser may recover from: stop trusting
            _ => return Ok(poisoned(&mut f, b, i)),
        }
    }
    Ok(f.peak())
}

/// Byte classes of [`fast`]: [`F_SLOW`] for a byte whose token it leaves to [`bound`]'s general
/// step. (The classes it reads count from 0: its dispatch takes no subtraction, 121.6 k -> 119.4 k.)
const F_SLOW: u8 = 14;
const F_SPACE: u8 = 0;
/// An ASCII letter, `_` or `$`.
const F_WORD: u8 = 1;
const F_DIGIT: u8 = 2;
const F_OPEN: u8 = 3;
const F_CLOSE: u8 = 4;
/// An operator character that goes on the nesting scan's operator run: `=`, `!`, `~`, `?`.
const F_RUN: u8 = 5;
/// Any other operator character ([`is_operator`]) but `+`, `-` and `<`.
const F_OP: u8 = 6;
const F_QUOTE: u8 = 7;
const F_DOT: u8 = 8;
/// `,` and `;`.
const F_SEP: u8 = 9;
const F_SLASH: u8 = 10;
/// `+` and `-` (on the operator run; they may double, or start `-->`).
const F_SIGN: u8 = 11;
/// `<` (which may start `<!--`).
const F_LESS: u8 = 12;
/// A backtick.
const F_TICK: u8 = 13;

static FAST_CLASS: [u8; 256] = {
    let mut t = [F_SLOW; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = match b {
            b' ' | b'\t' | b'\n' | b'\r' => F_SPACE,
            b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'$' => F_WORD,
            b'0'..=b'9' => F_DIGIT,
            b'(' | b'[' | b'{' => F_OPEN,
            b')' | b']' | b'}' => F_CLOSE,
            b'=' | b'!' | b'~' | b'?' => F_RUN,
            b'>' | b'*' | b'%' | b'&' | b'|' | b'^' | b':' => F_OP,
            b'+' | b'-' => F_SIGN,
            b'<' => F_LESS,
            b'`' => F_TICK,
            b'\'' | b'"' => F_QUOTE,
            b'.' => F_DOT,
            b',' | b';' => F_SEP,
            b'/' => F_SLASH,
            _ => F_SLOW,
        };
        c += 1;
    }
    t
};

/// The bytes that matter to [`simple_substitution`]'s walk back: those the parameter rewrite
/// reads in a template's substitution ([`crate::params`]'s template bytes but `$`, which
/// matters there only before a `{`), `/`, which may start a comment the scans skip, and the
/// parentheses and square brackets, which it counts.
static SUBSTITUTION_STOP: [bool; 256] = byte_set(b"\\`{}'\"/()[]");

/// Whether the template substitution that the bracket at `i` ends (as the nesting scan reads
/// it, in [`fast`]) is simple (see [`Body::simple`]): the bracket is a `}`, and walking back
/// from it the first byte of [`SUBSTITUTION_STOP`] but the parentheses and square brackets
/// is the `{` of a `${`, with as many of them opening as closing after it. Then that `${`
/// opened the substitution: the scan counts every bracket after it (nothing between is a
/// string, a comment or a template), and had it been a `{` within the substitution, its depth
/// there would be above the template's, so that more brackets would close after it than open.
/// The parameter rewrite reads such a substitution, by its braces, quotes, backticks and `\`
/// alone, to the same `}`. (Checked when the top-level bracket closes, out of [`fast`]'s
/// loop.)
fn simple_substitution(b: &[u8], i: usize) -> bool {
    if b.get(i) != Some(&b'}') {
        return false;
    }
    let mut before = b.get(..i).unwrap_or(&[]);
    let mut open = 0usize;
    // (from one byte that matters to the next)
    while let Some(k) = before.iter().rposition(|&c| SUBSTITUTION_STOP[c as usize]) {
        let c = before[k];
        match c {
            b')' | b']' => open += 1,
            b'(' | b'[' => match open.checked_sub(1) {
                Some(n) => open = n,
                None => return false,
            },
            _ => return c == b'{' && open == 0 && k > 0 && before.get(k - 1) == Some(&b'$'),
        }
        before = &before[..k];
    }
    false
}

/// Where template text from `i` (after a backtick or a substitution's `}`) ends, read the way
/// both scans read it ([`Frames::template_text`] and [`Nest::scan`]: from one byte that matters
/// to the next, a `\` skipping the byte after it).
enum TextEnd {
    /// At the closing backtick at this index.
    Tick(usize),
    /// At the `${` at this index.
    Substitution(usize),
    /// At the end of the source (an unterminated template).
    End,
}

/// See [`TextEnd`].
fn text_end(b: &[u8], mut i: usize) -> TextEnd {
    loop {
        let rest = b.get(i..).unwrap_or(&[]);
        match rest.iter().position(|&c| TEXT_BYTES[c as usize]) {
            Some(k) => i += k,
            None => return TextEnd::End,
        }
        match b.get(i) {
            Some(b'\\') => i += 2,
            Some(b'`') => return TextEnd::Tick(i),
            Some(b'$') if b.get(i + 1) == Some(&b'{') => return TextEnd::Substitution(i),
            _ => i += 1,
        }
    }
}

/// The index of the first byte from `i` that is not white space.
#[inline(always)]
fn skip_space(b: &[u8], i: usize) -> usize {
    let rest = b.get(i..).unwrap_or(&[]);
    i + rest
        .iter()
        .position(|&d| FAST_CLASS[d as usize] != F_SPACE)
        .unwrap_or(rest.len())
}

/// Whether `d` goes on a number ([`bound`]'s: an ASCII letter or digit, `_` or `.`), told by
/// [`FAST_CLASS`] rather than by range tests (the agent's prescan, 157.7 k -> 157.1 k).
#[inline(always)]
fn number_byte(d: u8) -> bool {
    matches!(FAST_CLASS[d as usize], F_WORD | F_DIGIT | F_DOT) && d != b'$'
}

/// The bytes that end [`fast`]'s reading of a string: its quotes, a `\` and line terminators.
static STRING_STOP: [bool; 256] = byte_set(b"'\"\\\n\r");

/// The ASCII letters, digits, `_` and `$` ([`WORD`] of [`WORD_BYTES`]), as a table of flags: a
/// byte is tested with one compare against the table.
static PLAIN_WORD_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = WORD_BYTES[c] == WORD;
        c += 1;
    }
    t
};

/// What the byte that ends a plain word ([`short_word`]) says: [`END_ODD`] for a byte that
/// goes on the word ([`ODD`] of [`WORD_BYTES`]), 1 for a space (skipped with the word), 0 for any
/// other.
static WORD_END: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = if WORD_BYTES[c] == ODD { END_ODD } else { 0 };
        c += 1;
    }
    t[b' ' as usize] = 1;
    t
};
const END_ODD: u8 = 2;

/// The length of the word that starts `w` (whose first byte is a word byte), when a byte of
/// `w` ends its ASCII letters, digits, `_` and `$`: that byte is `w[len]`. Unrolled, one table
/// test a byte with no bounds check (most words are short: 4.7 bytes on the agent).
#[inline(always)]
fn short_word(w: &[u8; 16]) -> Option<(usize, usize)> {
    // (with the byte that ends it, widened once: used as an index and compared)
    macro_rules! ends_at {
        ($($k:literal)*) => {
            $(
                let d = usize::from(w[$k]);
                if !PLAIN_WORD_BYTES[d] {
                    return Some(($k, d));
                }
            )*
        };
    }
    ends_at!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    None
}

/// [`bound`]'s steps over the common tokens from `i`, where the nesting scan `ns` is too (in
/// code, not template text): white space, plain words, numbers, brackets, template text,
/// operators, strings without escapes, `.`, `,`, `;` and a dividing `/`. Each has the effect the
/// general step gives it (on the bound and on the nesting scan, which stays exactly here);
/// returns the index of the first token left to the general step (or the end).
///
/// One dispatch a token computes both: the two scans' state is in locals (the frames' stack
/// moved out of `f`, the running and most units; the nesting scan's depth and operator run),
/// out of line so that more of them stay in registers (inlined into [`bound`], 150.7 k ->
/// 143.3 k instructions on the agent). Template text is read once for both, which read it
/// alike ([`text_end`]): after a backtick, and after a closing bracket where the bound's frame
/// and the nesting scan agree that it ends a substitution (where they disagree, or a template
/// is unterminated, the general step reads the token and the nesting scan catches up by
/// itself).
#[inline(never)]
fn fast(
    b: &[u8],
    mut i: usize,
    f: &mut Frames,
    prev: &mut Prev,
    ns: &mut Nest,
) -> Result<usize, Fail> {
    let max = ns.max;
    let limit = max * 4;
    let mut run = ns.run;
    let mut depth = ns.depth;
    let mut pv = *prev;
    let mut open = std::mem::take(&mut f.open);
    let mut units = f.units;
    let mut most = f.max;
    let r = 'scan: {
        while let Some(&c) = b.get(i) {
            match FAST_CLASS[c as usize] {
                F_SPACE => i = skip_space(b, i + 1),
                F_WORD => {
                    run = 0;
                    // (the sixteen bytes asked for as a range, whose end is compared with the
                    // length: the rest of the source asked for and measured took an instruction
                    // more a word, 1,116.9 k -> 1,116.0 k instructions per compile of the 8 KB
                    // agent)
                    if let Some(w) = b.get(i..i + 16).and_then(|r| r.first_chunk::<16>()) {
                        if let Some((len, e)) = short_word(w) {
                            // (whether it ends in a space or goes on, by one table read:
                            // two tests of the byte cost 3.5 k instructions more a compile)
                            let end = WORD_END[e];
                            if end == END_ODD {
                                // (a word with an escape or a non-ASCII letter)
                                let j = odd_word_end(b, i + len).0;
                                pv = Prev::Unknown;
                                i = j + usize::from(b.get(j) == Some(&b' '));
                                continue;
                            }
                            pv = match short_word_class(w, len) {
                                Some((nesting, next)) => {
                                    units += usize::from(nesting);
                                    next
                                }
                                None => Prev::Value,
                            };
                            // (a space after a word is common: it needs no dispatch of its own)
                            i += len + usize::from(end);
                            continue;
                        }
                    }
                    // a long word, or one near the end
                    let (j, plain) = word_end(b, i + 1);
                    pv = if plain {
                        let (nesting, next) = classify_at(b, i, c, j - i);
                        units += usize::from(nesting);
                        next
                    } else {
                        Prev::Unknown
                    };
                    i = j + usize::from(b.get(j) == Some(&b' '));
                }
                F_OPEN => {
                    open.push(units << 1);
                    units += BRACKET_UNITS;
                    pv = Prev::Expr;
                    if depth == 0 && ns.templates.is_empty() {
                        ns.open_at = Some(i);
                        ns.tick = None;
                        ns.complex = false;
                        ns.nsub = 0;
                    }
                    depth += 1;
                    if depth > max {
                        break 'scan Nest::too_deep(i);
                    }
                    run = 0;
                    i += 1;
                }
                F_CLOSE => {
                    let after = depth.saturating_sub(1);
                    // whether the bound's frame is a template substitution's, and whether the
                    // nesting scan goes back to template text: when they agree, both read the
                    // text alike from here; otherwise the general step reads the bracket
                    let substitution = open.last().is_some_and(|&top| top & 1 != 0);
                    if (substitution || !ns.templates.is_empty())
                        && substitution != (ns.templates.last() == Some(&after))
                    {
                        break 'scan Ok(());
                    }
                    if substitution {
                        ns.substitution_ends(i);
                        let (q, next) = match text_end(b, i + 1) {
                            TextEnd::Tick(q) => (q, false),
                            TextEnd::Substitution(q) => (q, true),
                            // (unterminated: the general step's)
                            TextEnd::End => break 'scan Ok(()),
                        };
                        if let Some(top) = open.pop() {
                            most = most.max(units);
                            units = top >> 1;
                        }
                        if depth == 1 {
                            ns.closing_top(i);
                        }
                        depth = after;
                        run = 0;
                        if next {
                            // the next substitution
                            open.push(units << 1 | 1);
                            units += BRACKET_UNITS;
                            depth += 1;
                            if depth > max {
                                break 'scan Nest::too_deep(q);
                            }
                            pv = Prev::Expr;
                            i = q + 2;
                        } else {
                            // the template's end
                            ns.templates.pop();
                            pv = Prev::Value;
                            i = q + 1;
                        }
                        continue;
                    }
                    if let Some(top) = open.pop() {
                        // (the units only go down here: the most so far is taken before)
                        most = most.max(units);
                        units = top >> 1;
                    }
                    if depth == 1 {
                        ns.closing_top(i);
                    }
                    depth = after;
                    run = 0;
                    pv = if c == b']' {
                        Prev::Value
                    } else {
                        Prev::Unknown
                    };
                    // (and the white space after it: a line end and the next line's indent)
                    i = skip_space(b, i + 1);
                }
                F_TICK => {
                    let (q, substitution) = match text_end(b, i + 1) {
                        TextEnd::Tick(q) => (q, false),
                        TextEnd::Substitution(q) => (q, true),
                        // (unterminated: the general step's)
                        TextEnd::End => break 'scan Ok(()),
                    };
                    // (the only place a template starts)
                    if ns.open_at.is_some() && ns.tick.is_none() {
                        ns.tick = Some((i, depth));
                    }
                    run = 0;
                    if substitution {
                        ns.templates.push(depth);
                        open.push(units << 1 | 1);
                        units += BRACKET_UNITS;
                        depth += 1;
                        if depth > max {
                            break 'scan Nest::too_deep(q);
                        }
                        pv = Prev::Expr;
                        i = q + 2;
                    } else {
                        pv = Prev::Value;
                        i = q + 1;
                    }
                }
                F_RUN => {
                    units += 1;
                    pv = Prev::Expr;
                    run += 1;
                    if run > limit {
                        break 'scan Nest::too_deep(i);
                    }
                    i += 1 + usize::from(b.get(i + 1) == Some(&b' '));
                }
                F_OP => {
                    units += 1;
                    pv = Prev::Expr;
                    run = 0;
                    i += 1 + usize::from(b.get(i + 1) == Some(&b' '));
                }
                F_SIGN => {
                    let next = b.get(i + 1).copied();
                    if next == Some(c) {
                        if c == b'-' && b.get(i + 2) == Some(&b'>') {
                            break 'scan Ok(());
                        }
                        // `++` and `--`: two operator characters of the nesting scan's
                        units += 2;
                        pv = Prev::Unknown;
                        run += 2;
                        if run > limit {
                            break 'scan Nest::too_deep(i + usize::from(run - 1 <= limit));
                        }
                        i += 2;
                    } else {
                        units += 1;
                        pv = Prev::Expr;
                        run += 1;
                        if run > limit {
                            break 'scan Nest::too_deep(i);
                        }
                        i += 1 + usize::from(next == Some(b' '));
                    }
                }
                F_LESS => {
                    let next = b.get(i + 1).copied();
                    if next == Some(b'!') {
                        break 'scan Ok(());
                    }
                    units += 1;
                    pv = Prev::Expr;
                    run = 0;
                    i += 1 + usize::from(next == Some(b' '));
                }
                F_QUOTE => {
                    // a string with no escape and no line terminator
                    let rest = b.get(i + 1..).unwrap_or(&[]);
                    match rest.iter().position(|&q| STRING_STOP[q as usize]) {
                        Some(k) if rest.get(k) == Some(&c) => {
                            pv = Prev::Value;
                            run = 0;
                            i += k + 2;
                        }
                        _ => break 'scan Ok(()),
                    }
                }
                F_DIGIT => {
                    let rest = b.get(i + 1..).unwrap_or(&[]);
                    i += 1 + rest
                        .iter()
                        .position(|&d| !number_byte(d))
                        .unwrap_or(rest.len());
                    pv = Prev::Value;
                    run = 0;
                }
                F_DOT => {
                    run = 0;
                    // (by the byte after it, read once: not `b[i..].starts_with`, whose slice
                    // was set up before every token's dispatch, 160.9 k -> 157.7 k)
                    match b.get(i + 1) {
                        // (a member's name, the usual)
                        Some(&d) if FAST_CLASS[d as usize] == F_WORD => {
                            pv = Prev::Expr;
                            i += 1;
                        }
                        Some(d) if d.is_ascii_digit() => {
                            i = word_end(b, i + 1).0;
                            pv = Prev::Value;
                        }
                        Some(b'.') if b.get(i + 2) == Some(&b'.') => {
                            units += 1;
                            pv = Prev::Expr;
                            i += 3;
                        }
                        _ => {
                            pv = Prev::Expr;
                            i += 1;
                        }
                    }
                }
                F_SEP => {
                    pv = Prev::Expr;
                    run = 0;
                    i += 1 + usize::from(b.get(i + 1) == Some(&b' '));
                }
                F_SLASH => {
                    if pv != Prev::Value || matches!(b.get(i + 1), Some(b'/' | b'*')) {
                        break 'scan Ok(());
                    }
                    // a division
                    units += 1;
                    pv = Prev::Expr;
                    run = 0;
                    i += 1;
                }
                _ => break 'scan Ok(()),
            }
        }
        Ok(())
    };
    f.open = open;
    f.units = units;
    f.max = most;
    ns.i = i;
    ns.run = run;
    ns.depth = depth;
    *prev = pv;
    r.map(|()| i)
}

/// The bound when the rest of the source from `i` cannot be lexed with confidence.
fn poisoned(f: &mut Frames, b: &[u8], i: usize) -> usize {
    f.uncertain(b, i, false);
    f.peak()
}

/// The pre-parse scan as it was before the single-dispatch loop (1fe75a6), kept to check the
/// current one against (`prescan_matches_the_old_scan`): test code only. Its lexer (`bound`,
/// `fast`, `Frames`, the keyword test) is the old one as it was; what the single-dispatch loop
/// did not change (the nesting scan [`Nest`], the word scanners, the byte tables) it shares
/// with the current scan.
#[cfg(test)]
#[allow(dead_code)]
mod old {
    use super::{
        is_operator, is_word_start, word_end, Nest, Prev, Scan, BRACKET_UNITS, NEST_CLASS, N_OP,
        TEXT_BYTES, WORD, WORD_BYTES,
    };
    use crate::Fail;

    /// [`prescan`], with the brackets the nesting scan read at the top level: for each bracket it
    /// read in code at depth 0 with no template open, and that closed, its index, the index after
    /// the bracket that closed it and where the first template between them starts. Up to that
    /// template (or the closing bracket), the nesting scan lexes the source exactly as
    /// [`crate::params`] lexes a function body (strings that end at a line end, comments,
    /// brackets), so the parameter rewrite can skip that far.
    pub(crate) fn prescan_bodies(src: &str, max: usize) -> Result<Scan, Fail> {
        let mut nest = Nest::new(src.as_bytes(), max);
        let bound = bound(src, Some(&mut nest))?;
        nest.scan(src.len())?;
        Ok((bound, nest.bodies))
    }

    /// Whether plain word `w` (ASCII letters, digits, `_` and `$` only) is a keyword that can open
    /// a nesting level without a bracket (`else if …`, `typeof typeof …`, a statement body without
    /// braces), and what it says about a following `/`: after a reserved word that takes an
    /// expression it starts a regex, after a contextual word it may do either, after any other word
    /// it divides. (A word with escapes or non-ASCII letters may hide a keyword or a space: the
    /// caller treats it as contextual.)
    #[inline(always)]
    fn classify(w: &[u8]) -> (bool, Prev) {
        // (most words are no keyword: their first byte and length say so)
        let lens = w.first().map_or(0, |&c| KEYWORD_LENS[c as usize]);
        if w.len() >= 16 || lens & (1 << w.len()) == 0 {
            return (false, Prev::Value);
        }
        classify_keyword(w)
    }

    /// [`classify`] of `b[i..i + len]` (a word of `len` bytes from `i`, `len` at least 1, whose first
    /// byte is `c`): the slice is only taken for a word that may be a keyword (the agent's prescan,
    /// 164.8 k -> 163.4 k instructions, against slicing every word).
    #[inline(always)]
    fn classify_at(b: &[u8], i: usize, c: u8, len: usize) -> (bool, Prev) {
        if len >= 16 || KEYWORD_LENS[c as usize] & (1 << len) == 0 {
            return (false, Prev::Value);
        }
        // and by its last byte (most words that pass the first test fail this one: `total`,
        // `result`, `id`; 163.4 k -> 162.4 k)
        let last = b
            .get(i + len - 1)
            .map_or(0, |&e| KEYWORD_LAST_LENS[e as usize]);
        if last & (1 << len) == 0 {
            return (false, Prev::Value);
        }
        classify_keyword(b.get(i..i + len).unwrap_or(&[]))
    }

    /// The words [`classify_keyword`] knows.
    const KEYWORDS: [&[u8]; 24] = [
        b"case",
        b"delete",
        b"do",
        b"else",
        b"in",
        b"instanceof",
        b"new",
        b"return",
        b"throw",
        b"typeof",
        b"void",
        b"extends",
        b"yield",
        b"await",
        b"of",
        b"async",
        b"if",
        b"while",
        b"for",
        b"with",
        b"let",
        b"static",
        b"get",
        b"set",
    ];

    /// Per first byte, the lengths (as bits) of the [`KEYWORDS`] that start with it.
    static KEYWORD_LENS: [u16; 256] = {
        let mut t = [0u16; 256];
        let mut k = 0;
        while k < KEYWORDS.len() {
            let w = KEYWORDS[k];
            t[w[0] as usize] |= 1 << w.len();
            k += 1;
        }
        t
    };

    /// Per last byte, the lengths (as bits) of the [`KEYWORDS`] that end with it.
    static KEYWORD_LAST_LENS: [u16; 256] = {
        let mut t = [0u16; 256];
        let mut k = 0;
        while k < KEYWORDS.len() {
            let w = KEYWORDS[k];
            t[w[w.len() - 1] as usize] |= 1 << w.len();
            k += 1;
        }
        t
    };

    /// [`classify`] of any word (the reference of `the_keyword_hash_classifies_like_the_match`).
    #[inline(never)]
    pub(crate) fn classify_keyword(w: &[u8]) -> (bool, Prev) {
        match w {
            b"case" | b"delete" | b"do" | b"else" | b"in" | b"instanceof" | b"new" | b"return"
            | b"throw" | b"typeof" | b"void" | b"extends" => (true, Prev::Expr),
            b"yield" | b"await" | b"of" | b"async" => (true, Prev::Unknown),
            b"if" | b"while" | b"for" | b"with" => (true, Prev::Value),
            b"let" | b"static" | b"get" | b"set" => (false, Prev::Unknown),
            _ => (false, Prev::Value),
        }
    }

    /// The open frames of [`recursion_bound`] and the running total.
    #[derive(Default)]
    struct Frames {
        /// Per open frame: the units counted directly inside it, and whether it is a template `${`.
        open: Vec<(usize, bool)>,
        /// Units of every open frame and of what they directly contain.
        units: usize,
        /// The most `units` reached before the last time they went down (see [`Self::peak`]).
        max: usize,
    }

    impl Frames {
        fn unit(&mut self, n: usize) {
            if let Some(f) = self.open.last_mut() {
                f.0 += n;
            }
            self.units += n;
        }

        fn open(&mut self, template: bool) {
            self.open.push((0, template));
            self.units += BRACKET_UNITS;
        }

        /// Closes the innermost frame; true when it was a template substitution.
        fn close(&mut self) -> bool {
            match self.open.pop() {
                Some((n, template)) => {
                    // (the units only go down here: the most so far is taken before)
                    self.max = self.max.max(self.units);
                    self.units -= BRACKET_UNITS + n;
                    template
                }
                None => false,
            }
        }

        /// The most `units` reached.
        fn peak(&self) -> usize {
            self.max.max(self.units)
        }

        /// Template text from `i` (after a backtick or a substitution's `}`): returns the index after
        /// the closing backtick (and true) or after a `${`, whose frame is then open (and false).
        fn template_text(&mut self, b: &[u8], mut i: usize) -> (usize, bool) {
            loop {
                // (from one byte that matters to the next, see [`TEXT_BYTES`])
                let rest = b.get(i..).unwrap_or(&[]);
                match rest.iter().position(|&c| TEXT_BYTES[c as usize]) {
                    Some(k) => i += k,
                    None => return (b.len(), true),
                }
                match b[i] {
                    b'\\' => i += 2,
                    b'`' => return (i + 1, true),
                    b'$' if b.get(i + 1) == Some(&b'{') => {
                        self.open(true);
                        return (i + 2, false);
                    }
                    _ => i += 1,
                }
            }
        }

        /// Counts from `i` when the lexical state is not known (a `/` that may divide or start a
        /// regex): every opening bracket opens a frame, no closing bracket closes one, quotes are not
        /// trusted. With `line`, stops after the line (unless it ends in a `\` continuation) and
        /// returns the index there; returns `None` when the rest of the source must be counted this
        /// way (a backtick or block comment could span lines).
        fn uncertain(&mut self, b: &[u8], mut i: usize, line: bool) -> Option<usize> {
            while i < b.len() {
                let c = b[i];
                match c {
                    b'(' | b'[' | b'{' => self.open(false),
                    b'\n' | b'\r' if line => {
                        let continued = i > 0 && b[i - 1] == b'\\';
                        i += if c == b'\r' && b.get(i + 1) == Some(&b'\n') {
                            2
                        } else {
                            1
                        };
                        if !continued {
                            return Some(i);
                        }
                        continue;
                    }
                    b'`' if line => return None,
                    b'/' if line && b.get(i + 1) == Some(&b'*') => return None,
                    _ if is_operator(c) => self.unit(1),
                    _ if is_word_start(c) => {
                        let (j, plain) = word_end(b, i + 1);
                        if plain && classify(&b[i..j]).0 {
                            self.unit(1);
                        }
                        i = j;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
            Some(b.len())
        }
    }

    /// An upper bound on how deeply the parser can recurse on `src`, in units of roughly half a
    /// kilobyte of stack: [`BRACKET_UNITS`] per open bracket, plus one per operator character and
    /// per nesting keyword written directly inside each open bracket (or at the top level) before
    /// the deepest point. What is inside a closed bracket cannot be open any more, so it stops
    /// counting; where the tokens are uncertain (a `/` after `)` or `}` may divide or start a
    /// regex) the count only grows. Strings, comments, templates and regexes are skipped the way the
    /// lexer skips them.
    #[cfg(test)]
    pub(crate) fn recursion_bound(src: &str) -> usize {
        bound(src, None).unwrap_or(0)
    }

    /// [`recursion_bound`]; with `nest`, also drives that nesting scan (see [`prescan`]).
    fn bound(src: &str, mut nest: Option<&mut Nest>) -> Result<usize, Fail> {
        let b = src.as_bytes();
        let mut f = Frames::default();
        let mut prev = Prev::Expr;
        let mut i = 0;
        // a hashbang comment (and HTML-like comments below) may hide brackets from the parser
        if b.starts_with(b"#!") {
            match f.uncertain(b, 0, true) {
                Some(next) => i = next,
                None => return Ok(poisoned(&mut f, b, 0)),
            }
        }
        while i < b.len() {
            // the common tokens, while the nesting scan is exactly here in code
            if let Some(ns) = nest.as_deref_mut() {
                if ns.i == i && !ns.in_text {
                    i = fast(b, i, &mut f, &mut prev, ns)?;
                    if i >= b.len() {
                        break;
                    }
                }
            }
            let c = b[i];
            let p = i;
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                // white space, before the nesting scan is brought here: that scan reads white space
                // as nothing, so where it is behind it reads it later to the same effect
                i += 1;
                while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
                    i += 1;
                }
                if let Some(ns) = nest.as_deref_mut() {
                    if ns.i == p && !ns.in_text {
                        ns.i = i;
                    }
                }
                continue;
            }
            // the nesting scan, when it is exactly here: the token's effect is applied directly
            let ns = match nest.as_deref_mut() {
                Some(ns) => {
                    if ns.at(p)? {
                        Some(ns)
                    } else {
                        None
                    }
                }
                None => None,
            };
            match c {
                0x0B | 0x0C => {
                    i += 1;
                    if let Some(ns) = ns {
                        ns.other(i);
                    }
                }
                b'(' | b'[' | b'{' => {
                    f.open(false);
                    prev = Prev::Expr;
                    i += 1;
                    if let Some(ns) = ns {
                        ns.open(p)?;
                    }
                }
                b')' | b']' | b'}' => {
                    i += 1;
                    if let Some(ns) = ns {
                        ns.close(p);
                    }
                    prev = if c == b']' {
                        Prev::Value
                    } else {
                        Prev::Unknown
                    };
                    if f.close() {
                        let (next, ended) = f.template_text(b, i);
                        i = next;
                        prev = if ended { Prev::Value } else { Prev::Expr };
                    }
                }
                b'`' => {
                    let (next, ended) = f.template_text(b, i + 1);
                    i = next;
                    prev = if ended { Prev::Value } else { Prev::Expr };
                }
                b'\'' | b'"' => {
                    i += 1;
                    // no line terminator escaped (the nesting scan ends a string at any '\n')
                    let mut clean = true;
                    loop {
                        match b.get(i) {
                            None => break,
                            Some(&q) if q == c => {
                                i += 1;
                                break;
                            }
                            // an unterminated string: the parser's recovery is not followed
                            Some(b'\n' | b'\r') => return Ok(poisoned(&mut f, b, i)),
                            Some(b'\\') => {
                                if matches!(b.get(i + 1), Some(b'\n' | b'\r')) {
                                    clean = false;
                                }
                                i += if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n')
                                {
                                    3
                                } else {
                                    2
                                };
                            }
                            Some(_) => i += 1,
                        }
                    }
                    prev = Prev::Value;
                    if let (Some(ns), true) = (ns, clean) {
                        ns.other(i);
                    }
                }
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                        i += 1;
                    }
                    if let (Some(ns), true) = (ns, b.get(i).is_none_or(|&e| e == b'\n')) {
                        ns.i = i;
                    }
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    i += 2;
                    while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                        i += 1;
                    }
                    i += 2;
                    if let Some(ns) = ns {
                        ns.i = i;
                    }
                }
                b'/' => match prev {
                    Prev::Value => {
                        f.unit(1);
                        prev = Prev::Expr;
                        i += 1;
                        if let Some(ns) = ns {
                            ns.other(i);
                        }
                    }
                    Prev::Expr => {
                        // a regex literal: up to the `/` that is not escaped or in a class
                        let mut class = false;
                        i += 1;
                        loop {
                            match b.get(i) {
                                None | Some(b'\n' | b'\r') => return Ok(poisoned(&mut f, b, i)),
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
                    Prev::Unknown => {
                        // closing a substitution frame by mistake would misread template text
                        if f.open.iter().any(|o| o.1) {
                            return Ok(poisoned(&mut f, b, i));
                        }
                        match f.uncertain(b, i, true) {
                            Some(next) => i = next,
                            None => return Ok(poisoned(&mut f, b, i)),
                        }
                    }
                },
                b'<' if b[i..].starts_with(b"<!--") => match f.uncertain(b, i, true) {
                    Some(next) => i = next,
                    None => return Ok(poisoned(&mut f, b, i)),
                },
                b'-' if b[i..].starts_with(b"-->") => match f.uncertain(b, i, true) {
                    Some(next) => i = next,
                    None => return Ok(poisoned(&mut f, b, i)),
                },
                b'+' | b'-' if b.get(i + 1) == Some(&c) => {
                    f.unit(2);
                    prev = Prev::Unknown;
                    i += 2;
                    if let Some(ns) = ns {
                        ns.op(p)?;
                        ns.op(p + 1)?;
                    }
                }
                _ if is_operator(c) => {
                    f.unit(1);
                    prev = Prev::Expr;
                    i += 1;
                    if let Some(ns) = ns {
                        ns.op(p)?;
                    }
                }
                b'.' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                    i = word_end(b, i + 1).0;
                    prev = Prev::Value;
                    if let Some(ns) = ns {
                        ns.other(i);
                    }
                }
                b'.' => {
                    if b[i..].starts_with(b"...") {
                        f.unit(1);
                        i += 3;
                    } else {
                        i += 1;
                    }
                    prev = Prev::Expr;
                    if let Some(ns) = ns {
                        ns.other(i);
                    }
                }
                b',' | b';' => {
                    prev = Prev::Expr;
                    i += 1;
                    if let Some(ns) = ns {
                        ns.other(i);
                    }
                }
                _ if c.is_ascii_digit() => {
                    // a number (an exponent's sign counts as an operator, which only adds)
                    while i < b.len()
                        && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'.' | b'_'))
                    {
                        i += 1;
                    }
                    prev = Prev::Value;
                    if let Some(ns) = ns {
                        ns.other(i);
                    }
                }
                _ if is_word_start(c) => {
                    let (j, plain) = word_end(b, i + 1);
                    let (nesting, next) = if plain && WORD_BYTES[c as usize] == WORD {
                        classify_at(b, i, c, j - i)
                    } else {
                        (false, Prev::Unknown)
                    };
                    if nesting {
                        f.unit(1);
                    }
                    prev = next;
                    i = j;
                    if let Some(ns) = ns {
                        ns.other(i);
                    }
                }
                // anything else is a syntax error the parser may recover from: stop trusting
                _ => return Ok(poisoned(&mut f, b, i)),
            }
        }
        Ok(f.peak())
    }

    /// Byte classes of [`fast`]: [`F_SLOW`] for a byte whose token it leaves to [`bound`]'s general
    /// step.
    const F_SLOW: u8 = 0;
    const F_SPACE: u8 = 1;
    /// An ASCII letter, `_` or `$`.
    const F_WORD: u8 = 2;
    const F_DIGIT: u8 = 3;
    const F_OPEN: u8 = 4;
    const F_CLOSE: u8 = 5;
    /// An operator character ([`is_operator`]).
    const F_OP: u8 = 6;
    const F_QUOTE: u8 = 7;
    const F_DOT: u8 = 8;
    /// `,` and `;`.
    const F_SEP: u8 = 9;
    const F_SLASH: u8 = 10;

    static FAST_CLASS: [u8; 256] = {
        let mut t = [F_SLOW; 256];
        let mut c = 0;
        while c < 256 {
            let b = c as u8;
            t[c] = match b {
                b' ' | b'\t' | b'\n' | b'\r' => F_SPACE,
                b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'$' => F_WORD,
                b'0'..=b'9' => F_DIGIT,
                b'(' | b'[' | b'{' => F_OPEN,
                b')' | b']' | b'}' => F_CLOSE,
                b'=' | b'!' | b'<' | b'>' | b'+' | b'-' | b'*' | b'%' | b'&' | b'|' | b'^'
                | b'~' | b'?' | b':' => F_OP,
                b'\'' | b'"' => F_QUOTE,
                b'.' => F_DOT,
                b',' | b';' => F_SEP,
                b'/' => F_SLASH,
                _ => F_SLOW,
            };
            c += 1;
        }
        t
    };

    /// Whether `d` goes on a number ([`bound`]'s: an ASCII letter or digit, `_` or `.`), told by
    /// [`FAST_CLASS`] rather than by range tests (the agent's prescan, 157.7 k -> 157.1 k).
    #[inline(always)]
    fn number_byte(d: u8) -> bool {
        matches!(FAST_CLASS[d as usize], F_WORD | F_DIGIT | F_DOT) && d != b'$'
    }

    /// The bytes that end [`fast`]'s reading of a string: its quotes, a `\` and line terminators.
    static STRING_STOP: [bool; 256] = {
        let mut t = [false; 256];
        t[b'\'' as usize] = true;
        t[b'"' as usize] = true;
        t[b'\\' as usize] = true;
        t[b'\n' as usize] = true;
        t[b'\r' as usize] = true;
        t
    };

    /// [`bound`]'s steps over the common tokens from `i`, where the nesting scan `ns` is too (in
    /// code, not template text): white space, plain words, numbers, brackets outside templates,
    /// operators, strings without escapes, `.`, `,`, `;` and a dividing `/`. Each has the effect the
    /// general step gives it (on the bound and on the nesting scan, which stays exactly here);
    /// returns the index of the first token left to the general step (or the end).
    fn fast(
        b: &[u8],
        mut i: usize,
        f: &mut Frames,
        prev: &mut Prev,
        ns: &mut Nest,
    ) -> Result<usize, Fail> {
        let max = ns.max;
        let mut run = ns.run;
        let mut depth = ns.depth;
        let mut pv = *prev;
        let r = 'scan: {
            while let Some(&c) = b.get(i) {
                match FAST_CLASS[c as usize] {
                    F_SPACE => {
                        i += 1;
                        while b.get(i).is_some_and(|&c| FAST_CLASS[c as usize] == F_SPACE) {
                            i += 1;
                        }
                    }
                    F_WORD => {
                        let (j, plain) = word_end(b, i + 1);
                        pv = if plain {
                            let (nesting, next) = classify_at(b, i, c, j - i);
                            if nesting {
                                f.unit(1);
                            }
                            next
                        } else {
                            Prev::Unknown
                        };
                        run = 0;
                        // (a space after a word is common: it needs no dispatch of its own)
                        i = j + usize::from(b.get(j) == Some(&b' '));
                    }
                    F_OPEN => {
                        f.open(false);
                        pv = Prev::Expr;
                        ns.opening(i, depth);
                        depth += 1;
                        if depth > max {
                            break 'scan Nest::too_deep(i);
                        }
                        run = 0;
                        i += 1;
                    }
                    F_CLOSE => {
                        // (template frames are the general step's)
                        if !ns.templates.is_empty() || f.open.last().is_some_and(|o| o.1) {
                            break 'scan Ok(());
                        }
                        ns.closing(i, depth);
                        depth = depth.saturating_sub(1);
                        run = 0;
                        pv = if c == b']' {
                            Prev::Value
                        } else {
                            Prev::Unknown
                        };
                        f.close();
                        i += 1 + usize::from(b.get(i + 1) == Some(&b' '));
                    }
                    F_OP => {
                        let next = b.get(i + 1).copied();
                        if (c == b'+' || c == b'-') && next == Some(c) {
                            if c == b'-' && b.get(i + 2) == Some(&b'>') {
                                break 'scan Ok(());
                            }
                            // `++` and `--`: two operator characters of the nesting scan's
                            f.unit(2);
                            pv = Prev::Unknown;
                            run += 2;
                            if run > max * 4 {
                                break 'scan Nest::too_deep(i + usize::from(run - 1 <= max * 4));
                            }
                            i += 2;
                        } else {
                            if c == b'<' && next == Some(b'!') {
                                break 'scan Ok(());
                            }
                            f.unit(1);
                            pv = Prev::Expr;
                            if NEST_CLASS[c as usize] == N_OP {
                                run += 1;
                                if run > max * 4 {
                                    break 'scan Nest::too_deep(i);
                                }
                            } else {
                                run = 0;
                            }
                            i += 1 + usize::from(next == Some(b' '));
                        }
                    }
                    F_QUOTE => {
                        // a string with no escape and no line terminator
                        let mut j = i + 1;
                        while b.get(j).is_some_and(|&q| !STRING_STOP[q as usize]) {
                            j += 1;
                        }
                        if b.get(j) != Some(&c) {
                            break 'scan Ok(());
                        }
                        pv = Prev::Value;
                        run = 0;
                        i = j + 1;
                    }
                    F_DIGIT => {
                        i += 1;
                        while b.get(i).is_some_and(|&d| number_byte(d)) {
                            i += 1;
                        }
                        pv = Prev::Value;
                        run = 0;
                    }
                    F_DOT => {
                        if b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                            i = word_end(b, i + 1).0;
                            pv = Prev::Value;
                        } else {
                            // (not `b[i..].starts_with`, whose slice was set up before every
                            // token's dispatch: 160.9 k -> 157.7 k)
                            if b.get(i + 1) == Some(&b'.') && b.get(i + 2) == Some(&b'.') {
                                f.unit(1);
                                i += 3;
                            } else {
                                i += 1;
                            }
                            pv = Prev::Expr;
                        }
                        run = 0;
                    }
                    F_SEP => {
                        pv = Prev::Expr;
                        run = 0;
                        i += 1 + usize::from(b.get(i + 1) == Some(&b' '));
                    }
                    F_SLASH => {
                        if pv != Prev::Value || matches!(b.get(i + 1), Some(b'/' | b'*')) {
                            break 'scan Ok(());
                        }
                        // a division
                        f.unit(1);
                        pv = Prev::Expr;
                        run = 0;
                        i += 1;
                    }
                    _ => break 'scan Ok(()),
                }
            }
            Ok(())
        };
        ns.i = i;
        ns.run = run;
        ns.depth = depth;
        *prev = pv;
        r.map(|()| i)
    }

    /// The bound when the rest of the source from `i` cannot be lexed with confidence.
    fn poisoned(f: &mut Frames, b: &[u8], i: usize) -> usize {
        f.uncertain(b, i, false);
        f.peak()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first, plain version of [`check_nesting`], kept to check the fast one against.
    /// Refuses sources whose brackets nest deeper than `max` (strings, comments and template text are
    /// skipped roughly; a regex literal may be miscounted, which can only over-estimate the depth).
    fn check_nesting_reference(src: &str, max: usize) -> Result<(), Fail> {
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
                _ => {
                    run = 0;
                    // the rest of a word at once
                    while b
                        .get(i + 1)
                        .is_some_and(|&n| WORD_BYTES[n as usize] == WORD)
                    {
                        i += 1;
                    }
                }
            }
            i += 1;
        }
        Ok(())
    }

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

    /// Random sources over the bytes the scanners care about.
    fn random_sources(count: usize, max_len: usize, mut f: impl FnMut(&str)) {
        let alphabet: Vec<&str> = vec![
            "(", ")", "[", "]", "{", "}", "`", "'", "\"", "/", "\\", "*", "$", "${", "#", "@", "!",
            "+", "-", "=", "<", ">", "?", ":", ".", ",", ";", "\n", "\r", " ", "\t", "a", "x1",
            "1", "é", "\u{2028}", "\u{1}", "\u{b}", "if ", "else ", "return ", "typeof ", "let ",
            "//", "/*", "*/", "<!--", "-->", "++", "x => ", "~", "\r\n",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for _ in 0..count {
            let len = next() % max_len;
            let s: String = (0..len)
                .map(|_| alphabet[next() % alphabet.len()])
                .collect();
            f(&s);
        }
    }

    #[test]
    fn check_nesting_matches_its_reference() {
        let same = |s: &str, max: usize| {
            let a = check_nesting(s, max).map_err(|f| (f.offset, f.message));
            let b = check_nesting_reference(s, max).map_err(|f| (f.offset, f.message));
            assert_eq!(a, b, "{s:?} max {max}");
        };
        random_sources(200_000, 60, |s| {
            same(s, 2);
            same(s, 5);
            same(s, 256);
        });
        for k in [250, 256, 257, 300] {
            for (o, c) in [("(", ")"), ("[", "]"), ("{", "}"), ("`${", "}`")] {
                same(&format!("{}a{}", o.repeat(k), c.repeat(k)), 256);
            }
            same(&"!".repeat(k * 4), 256);
            same(&"- ".repeat(k * 4), 256);
        }
    }

    #[test]
    fn prescan_is_both_scans() {
        let same = |s: &str, max: usize| {
            let merged = prescan(s, max).map_err(|f| (f.offset, f.message));
            let want = check_nesting_reference(s, max)
                .map(|()| recursion_bound(s))
                .map_err(|f| (f.offset, f.message));
            assert_eq!(merged, want, "{s:?} max {max}");
        };
        random_sources(300_000, 60, |s| {
            same(s, 2);
            same(s, 6);
            same(s, 256);
        });
        random_sources(3_000, 2000, |s| {
            same(s, 40);
            same(s, 256);
        });
        let agent = include_str!("../../../benches/programs/agent_8k.js");
        same(agent, 256);
        same(agent, 5);
        for k in [250, 256, 257, 300] {
            for (o, c) in [("(", ")"), ("[", "]"), ("{", "}"), ("`${", "}`")] {
                same(&format!("{}a{}", o.repeat(k), c.repeat(k)), 256);
                same(&format!("x = (a) / {}a{}", o.repeat(k), c.repeat(k)), 256);
            }
            same(&"!".repeat(k * 4), 256);
            same(&"- ".repeat(k * 4), 256);
        }
    }

    #[test]
    fn word_end_matches_a_byte_walk() {
        fn reference(b: &[u8], i: usize) -> (usize, bool) {
            let mut j = i;
            while b.get(j).is_some_and(|&c| WORD_BYTES[c as usize] == WORD) {
                j += 1;
            }
            match b.get(j) {
                Some(&c) if WORD_BYTES[c as usize] == ODD => odd_word_end(b, j),
                _ => (j, true),
            }
        }
        let bytes = *b"aZ09_$ .(\\\x80\xff\xc3@`[{/:";
        let mut next = crate::test_rng::xorshift(0x3c6e_f372_fe94_f82b_u64);
        for _ in 0..50_000 {
            let len = next() % 30;
            let b: Vec<u8> = (0..len)
                .map(|_| {
                    if next().is_multiple_of(4) {
                        next() as u8
                    } else if next().is_multiple_of(3) {
                        bytes[next() % bytes.len()]
                    } else {
                        b"abcXYZ019_$"[next() % 11]
                    }
                })
                .collect();
            for i in 0..=len {
                assert_eq!(word_end(&b, i), reference(&b, i), "{b:?} from {i}");
            }
        }
    }

    #[test]
    fn template_text_ends_where_a_byte_walk_says() {
        // the first version of [`Frames::template_text`], a byte at a time
        fn reference(f: &mut Frames, b: &[u8], mut i: usize) -> (usize, bool) {
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'`' => return (i + 1, true),
                    b'$' if b.get(i + 1) == Some(&b'{') => {
                        f.open(true);
                        return (i + 2, false);
                    }
                    _ => i += 1,
                }
            }
            (b.len(), true)
        }
        let frames = Frames::default;
        let pieces = [
            "`",
            "\\",
            "$",
            "${",
            "{",
            "}",
            "a",
            "bcdefghijklmnopq",
            "\n",
            "\r",
            "é",
            "'",
            "$$",
            "\\`",
            "\\$",
            "\u{2028}",
        ];
        let mut next = crate::test_rng::xorshift(0xbb67_ae85_84ca_a73b_u64);
        for _ in 0..30_000 {
            let src = crate::test_rng::soup(&mut next, &pieces, 30);
            let b = src.as_bytes();
            for start in 0..=b.len() + 1 {
                let (mut f0, mut f1) = (frames(), frames());
                let got = f0.template_text(b, start);
                let want = reference(&mut f1, b, start);
                assert_eq!(
                    (got, f0.open, f0.units),
                    (want, f1.open, f1.units),
                    "{src:?}"
                );
            }
        }
    }

    #[test]
    fn number_bytes_are_the_general_steps() {
        for d in 0..=255u8 {
            let want = d.is_ascii_alphanumeric() || matches!(d, b'.' | b'_');
            assert_eq!(number_byte(d), want, "{d:#x}");
        }
    }

    #[test]
    fn the_keyword_filter_keeps_every_keyword() {
        let same = |w: &[u8]| {
            assert!(classify(w) == classify_keyword(w), "{w:?}");
            if let Some(&c) = w.first() {
                // (inside a longer source too)
                let b = [b"x.", w, b" y"].concat();
                assert!(classify_at(&b, 2, c, w.len()) == classify(w), "{w:?}");
            }
        };
        for w in KEYWORDS {
            assert!(classify(w) != (false, Prev::Value), "{w:?}");
            // every word one letter off, shorter or longer
            for k in 0..w.len() {
                for c in (b'a'..=b'z').chain(*b"A_$0") {
                    let mut v = w.to_vec();
                    v[k] = c;
                    same(&v);
                    v.insert(k, c);
                    same(&v);
                }
                same(&w[..k]);
                same(&[&w[k..], &w[..k]].concat());
            }
        }
        let letters: Vec<u8> = (b'a'..=b'z').chain(*b"_$A").collect();
        for &a in &letters {
            same(&[a]);
            for &b in &letters {
                same(&[a, b]);
                for &c in &letters {
                    same(&[a, b, c]);
                }
            }
        }
        same(b"");
        same(&[b'r'; 40]);
    }

    /// [`prescan_bodies`] and the scan it replaced ([`old`]), compared on `src` with `max`: the
    /// bound, the error (offset and message) and every body.
    fn same_as_old(src: &str, max: usize) {
        type Seen = Result<(usize, Vec<(u32, u32, Option<(u32, u32)>)>), (u32, String)>;
        let new: Seen = prescan_bodies(src, max)
            .map(|(n, v)| (n, v.iter().map(|b| (b.open, b.end, b.tick)).collect()))
            .map_err(|f| (f.offset, f.message));
        let old: Seen = old::prescan_bodies(src, max)
            .map(|(n, v)| (n, v.iter().map(|b| (b.open, b.end, b.tick)).collect()))
            .map_err(|f| (f.offset, f.message));
        assert_eq!(new, old, "{src:?} max {max}");
    }

    #[test]
    fn prescan_matches_the_old_scan() {
        let pieces = [
            "(",
            ")",
            "[",
            "]",
            "{",
            "}",
            "${",
            "`",
            "`a${",
            "}`",
            "'",
            "\"",
            "'a\\'b'",
            "\"\\\n\"",
            "'\\\r\n'",
            "\\",
            "/",
            "/x/g",
            "/[/]/",
            "//c\n",
            "/* (( */",
            "/*",
            "*/",
            "<!--",
            "-->",
            "--",
            "++",
            "+",
            "-",
            "<",
            ">",
            "=",
            "!",
            "~",
            "?",
            ":",
            "*",
            "%",
            "&",
            "|",
            "^",
            ".",
            "...",
            ".5",
            "1e+3",
            "0x1F",
            ",",
            ";",
            " ",
            "  ",
            "\n",
            "\r",
            "\r\n",
            "\t",
            "\n    ",
            "a",
            "b1",
            "$_",
            "x ",
            "name",
            "abcdefghijklmno",
            "abcdefghijklmnop",
            "abcdefghijklmnopqrstuvwxyz0123",
            "if",
            "if ",
            "else ",
            "return ",
            "return",
            "typeof ",
            "instanceof",
            "let ",
            "of",
            "in ",
            "new ",
            "await ",
            "yield ",
            "static",
            "get",
            "set",
            "async",
            "while",
            "for",
            "with",
            "do",
            "case",
            "void",
            "delete",
            "extends",
            "throw",
            "é",
            "aé",
            "\u{2028}",
            "\\u0061",
            "#",
            "#!",
            "@",
            "\u{1}",
            "\u{b}",
            "\u{c}",
            "x => ",
            "f(a, b)",
            "a.b.c",
            "(a) / b",
            "x / y",
        ];
        let mut next = crate::test_rng::xorshift(0x6a09_e667_f3bc_c908_u64);
        for round in 0..300_000 {
            let mut src = crate::test_rng::soup(&mut next, &pieces, 40);
            if round % 16 == 0 {
                src.insert_str(0, "#!");
            }
            for max in [1, 2, 3, 5, 256] {
                same_as_old(&src, max);
            }
        }
        // longer sources, deep ones, and the agent
        for _ in 0..3_000 {
            let src = crate::test_rng::soup(&mut next, &pieces, 600);
            for max in [4, 40, 256] {
                same_as_old(&src, max);
            }
        }
        let agent = include_str!("../../../benches/programs/agent_8k.js");
        for max in [3, 5, 8, 256] {
            same_as_old(agent, max);
        }
        for k in [250, 256, 257, 300] {
            for (o, c) in [("(", ")"), ("[", "]"), ("{", "}"), ("`${", "}`")] {
                same_as_old(&format!("{}a{}", o.repeat(k), c.repeat(k)), 256);
                same_as_old(&format!("x = (a) / {}a{}", o.repeat(k), c.repeat(k)), 256);
            }
            for op in ["!", "- ", "++", "--", "+ +", "a++", "=", "~"] {
                same_as_old(&op.repeat(k * 2), 256);
            }
        }
    }

    #[test]
    fn the_keyword_hash_classifies_like_the_match() {
        // `w` as the fast path sees it: in a 16-byte window, followed by a byte that ends it
        let same = |w: &[u8]| {
            if w.is_empty() || w.len() >= 16 || !w.iter().all(|&c| PLAIN_WORD_BYTES[c as usize]) {
                return;
            }
            for after in [b' ', b'(', b'.', 0xc3] {
                let mut window = [after; 16];
                window[..w.len()].copy_from_slice(w);
                let got = short_word_class(&window, w.len()).unwrap_or((false, Prev::Value));
                // (against the former scan's match over the keywords)
                assert_eq!(got, old::classify_keyword(w), "{w:?}");
                assert_eq!(classify_keyword(w), got, "{w:?}");
            }
        };
        for w in KEYWORDS {
            let window: [u8; 16] = [w, &[b' '; 16][w.len()..]].concat().try_into().unwrap();
            assert!(short_word_class(&window, w.len()).is_some(), "{w:?}");
            // every word one letter off, shorter or longer
            for k in 0..w.len() {
                for c in (b'a'..=b'z').chain(*b"AZ_$09") {
                    let mut v = w.to_vec();
                    v[k] = c;
                    same(&v);
                    v.insert(k, c);
                    same(&v);
                }
                same(&w[..k]);
                same(&[&w[k..], &w[..k]].concat());
                same(&[w, w].concat());
            }
        }
        let letters: Vec<u8> = (b'a'..=b'z').chain(*b"_$A0").collect();
        for &a in &letters {
            same(&[a]);
            for &b in &letters {
                same(&[a, b]);
                for &c in &letters {
                    same(&[a, b, c]);
                }
            }
        }
        let mut next = crate::test_rng::xorshift(0x1f83_d9ab_fb41_bd6b_u64);
        for _ in 0..200_000 {
            let len = 1 + next() % 15;
            let w: Vec<u8> = (0..len)
                .map(|_| b"etaoinsrhdlcufwy_$0"[next() % 19])
                .collect();
            same(&w);
        }
    }

    #[test]
    fn the_fast_path_agrees_on_what_it_leaves_to_the_general_step() {
        let same = |s: &str, max: usize| {
            let merged = prescan(s, max).map_err(|f| (f.offset, f.message));
            let want = check_nesting_reference(s, max)
                .map(|()| recursion_bound(s))
                .map_err(|f| (f.offset, f.message));
            assert_eq!(merged, want, "{s:?} max {max}");
        };
        let pieces = [
            "f((a), [b], {c: 1})",
            "'(('",
            "'a\\'(('",
            "\"[[\" + x",
            "'a\\\n(('",
            "// ((((\n",
            "/* {{{{ */",
            "/((/.test(x)",
            "x / (y) / z",
            "(a) /)/",
            "`((${a + `[[${ (b) }`}((`",
            "a++ + ++b - --c",
            "x --> y",
            "a <!-- b",
            "... rest",
            ".5 + 1.5e+3",
            "typeof typeof !!x",
            "if (a) b; else if (c) d",
            "return /a/",
            "x = y = z",
            "a ? b : c ? d : e",
            "\\u0061bc",
            "é(",
            "#x",
            "@y",
            "\u{b}",
            "\n\r\t ",
        ];
        let mut next = crate::test_rng::xorshift(0x51_7cc1_b727_220a_u64);
        for _ in 0..20_000 {
            let s: String = (0..next() % 12)
                .map(|_| pieces[next() % pieces.len()])
                .collect::<Vec<_>>()
                .join(if next().is_multiple_of(2) { " " } else { "" });
            for max in [1, 2, 3, 6, 256] {
                same(&s, max);
            }
        }
        // runs of `++` and `--` at the operator limit, ending on either character of a pair
        for k in 0..24 {
            for op in ["+", "-", "++", "--", "+ +", "!", "a++", "-- "] {
                for max in [1, 2, 3] {
                    same(&op.repeat(k), max);
                    same(&format!("x{}", op.repeat(k)), max);
                }
            }
        }
    }

    #[test]
    fn recursion_bound_counts_what_stays_open() {
        // siblings do not add up; nesting does
        assert_eq!(recursion_bound("f(a)\nf(b)\nf(c)"), 3);
        assert_eq!(recursion_bound("f(g(h(a)))"), 9);
        assert_eq!(recursion_bound("a ? b : c ? d : e"), 4);
        assert_eq!(recursion_bound("!!!!a"), 4);
        assert_eq!(recursion_bound("if (a) {} else if (b) {} else {}"), 7);
        // brackets in strings, comments, templates and regexes do not count
        assert_eq!(
            recursion_bound("'((((' + \"[[[\" // ((((\n/* {{{{ */ `((${a}((` + /((/"),
            4
        );
        // a `/` after `)` may start a regex: its closing brackets are not trusted
        assert!(recursion_bound("(a) /)))/; ((((a))))") >= 4 * BRACKET_UNITS);
        assert!(recursion_bound("if (a) /)/.test(b); ((((a))))") >= 4 * BRACKET_UNITS);
        // an unterminated string or regex, or an unknown byte: everything after counts
        assert!(recursion_bound("'a\n)))) ((((a))))") >= 4 * BRACKET_UNITS);
        assert!(recursion_bound("\u{1}))) ((((a))))") >= 4 * BRACKET_UNITS);
    }

    #[test]
    fn recursion_bound_ends_on_any_input() {
        let alphabet: Vec<char> = "()[]{}`'\"/\\*$#@!+-=<>?:.,;\n\r ax1é\u{2028}\u{1}"
            .chars()
            .collect();
        let mut seed = 0x2545_f491_u64;
        for len in 0..40 {
            for _ in 0..300 {
                let s: String = (0..len)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        alphabet[(seed >> 33) as usize % alphabet.len()]
                    })
                    .collect();
                recursion_bound(&s);
            }
        }
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
