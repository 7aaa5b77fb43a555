//! The constant pool of a program: numbers and strings interned by content.

use super::*;

/// The string constants of a program by content. A table of slots, two for each string by a
/// cheap hash of it ([`string_hash`]: its top bits, then its low bits), holds the first string
/// of each slot and is checked against the pool: a string whose first slot is empty, or whose
/// second is while another string holds its first, is new, without any other lookup (a second
/// slot spares the keyed maps most strings). A string whose two slots others hold is hashed
/// once with std's keyed SipHash (a guest cannot choose strings that collide there: a guest's
/// strings colliding in the table cost a keyed lookup each, no chain),
/// and the map from that hash to the constant's index hashes no further; the rare strings whose
/// keyed hash another string has already are kept in a second, ordinary map. (Not the keyed
/// maps alone: they hash every new string and grow with them.)
pub(crate) struct StrMap {
    /// The index of the string constant of each slot (`NO_STRING`: none), a power of two of
    /// them; made at the first string, `wanted` of them.
    pub(super) slots: Vec<u16>,
    pub(super) wanted: usize,
    /// The strings whose slot another holds (made at the first of them: a program without
    /// strings, such as most Eval snippets, makes neither).
    pub(super) keyed: Option<Box<Keyed>>,
}

/// The strings of a [`StrMap`] whose slot another string holds, by keyed hash.
#[derive(Default)]
pub(crate) struct Keyed {
    pub(super) keys: RandomState,
    pub(super) by_hash: HashMap<u64, u16, BuildHasherDefault<Prehashed>>,
    pub(super) collided: HashMap<Vec<u16>, u16>,
}

/// An empty slot of [`StrMap`] (no constant has this index: there are at most
/// [`MAX_CONSTANTS`]).
pub(super) const NO_STRING: u16 = NO_CONSTANT;

/// An empty slot of a table of constants (no constant has this index: there are at most
/// [`MAX_CONSTANTS`]).
pub(super) const NO_CONSTANT: u16 = u16::MAX;

const _: () = assert!(MAX_CONSTANTS <= NO_CONSTANT as usize);

/// Slots of a [`StrMap`] for a program of unknown size, and at most.
pub(super) const STRING_SLOTS: usize = 64;
pub(super) const MAX_STRING_SLOTS: usize = 1 << 16;

impl Default for StrMap {
    fn default() -> Self {
        StrMap {
            slots: Vec::new(),
            wanted: STRING_SLOTS,
            keyed: None,
        }
    }
}

impl StrMap {
    /// A map for about `n` strings (four slots each, so that few share one).
    pub(super) fn with_capacity(n: usize) -> StrMap {
        StrMap {
            wanted: n
                .saturating_mul(4)
                .clamp(STRING_SLOTS, MAX_STRING_SLOTS)
                .next_power_of_two(),
            ..StrMap::default()
        }
    }

    /// The slot of the string whose [`string_hash`] is `h`: its top bits.
    #[inline]
    pub(super) fn slot(&mut self, h: u32) -> usize {
        if self.slots.is_empty() {
            self.make_slots();
        }
        (h >> (32 - self.slots.len().trailing_zeros())) as usize
    }

    /// The second slot of the string whose [`string_hash`] is `h` (its low bits), where it is
    /// when its first held another string (after [`Self::slot`]: the slots are made).
    #[inline]
    pub(super) fn second_slot(&self, h: u32) -> usize {
        h as usize & self.slots.len().wrapping_sub(1)
    }

    #[cold]
    pub(super) fn make_slots(&mut self) {
        self.slots = vec![NO_STRING; self.wanted];
    }

    /// Sets slot `slot` (empty) to constant `k`.
    #[inline]
    pub(super) fn fill(&mut self, slot: usize, k: u16) {
        if let Some(s) = self.slots.get_mut(slot) {
            *s = k;
        }
    }

    /// The keyed maps.
    pub(super) fn keyed(&mut self) -> &mut Keyed {
        self.keyed.get_or_insert_with(Box::default)
    }
}

impl Keyed {
    /// The keyed hash of the string of `units` (`ascii`: its bytes, when the caller has them).
    /// An ASCII string is hashed as its bytes, in one write: half the bytes of its units and no
    /// length prefix; any other as a marker byte no ASCII string starts with, then its units.
    pub(super) fn hash(&self, units: &[u16], ascii: Option<&[u8]>) -> u64 {
        let mut h = self.keys.build_hasher();
        match ascii {
            Some(bytes) => h.write(bytes),
            None if units.iter().all(|&u| u < 0x80) => {
                h.write(&units.iter().map(|&u| u as u8).collect::<Vec<u8>>());
            }
            None => {
                h.write_u8(0xFF);
                units.hash(&mut h);
            }
        }
        h.finish()
    }

    /// The index of the string constant `units` (`ascii`: its bytes, when the caller has them),
    /// or its hash and whether that hash is taken.
    pub(super) fn find(
        &self,
        units: &[u16],
        ascii: Option<&[u8]>,
        constants: &[Constant],
    ) -> Result<u16, (u64, bool)> {
        let hash = self.hash(units, ascii);
        match self.by_hash.get(&hash) {
            None => Err((hash, false)),
            Some(&k) => match constants.get(k as usize) {
                Some(Constant::String(s)) if s.as_slice() == units => Ok(k),
                _ => self.collided.get(units).copied().ok_or((hash, true)),
            },
        }
    }

    pub(super) fn insert(&mut self, hash: u64, collided: bool, units: &[u16], k: u16) {
        if collided {
            self.collided.insert(units.to_vec(), k);
        } else {
            self.by_hash.insert(hash, k);
        }
    }
}

/// The number constants of a program by their bits ([`num_bits`]), as [`StrMap`] keeps strings:
/// a direct-mapped table, by a cheap hash of the bits, holds the first number of each slot
/// (checked against the pool: an empty slot means a new number), and a keyed map (std's SipHash,
/// made at the first of them) the numbers whose slot another holds. (Not a keyed map alone,
/// behind a cache of recent numbers: it hashes every new number.)
#[derive(Default)]
pub(crate) struct NumMap {
    /// The index of the number constant of each slot (`NO_CONSTANT`: none), a power of two of
    /// them; made at the first number, `wanted` of them (at least `NUMBER_SLOTS`).
    pub(super) slots: Vec<u16>,
    pub(super) wanted: usize,
    pub(super) keyed: Option<HashMap<u64, u16>>,
}

/// Slots of a [`NumMap`] for a program of unknown size.
pub(super) const NUMBER_SLOTS: usize = 64;

impl NumMap {
    /// A map for about `n` numbers (four slots each).
    pub(super) fn with_capacity(n: usize) -> NumMap {
        NumMap {
            wanted: n.saturating_mul(4).clamp(NUMBER_SLOTS, MAX_STRING_SLOTS),
            ..NumMap::default()
        }
    }

    /// The slot of the number of bits `bits`.
    #[inline]
    pub(super) fn slot(&mut self, bits: u64) -> usize {
        if self.slots.is_empty() {
            self.make_slots();
        }
        let h = (bits ^ (bits >> 32)).wrapping_mul(MIX_K);
        (h >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    #[cold]
    pub(super) fn make_slots(&mut self) {
        self.slots = vec![NO_CONSTANT; self.wanted.max(NUMBER_SLOTS).next_power_of_two()];
    }
}

/// A cheap hash of the string `units` ([`StrMap`]'s slot is its top bits): multiplicative, of
/// its length and of two words of its units taken as bytes (each unit's low byte; see
/// [`hash_words`]).
/// (Of the units of a string, or of the bytes of an ASCII string: the same hash.)
#[inline]
pub(super) fn string_hash(units: &[u16]) -> u32 {
    let n = units.len();
    // (little-endian: the first unit in the low byte)
    let pack = |s: &[u16]| {
        s.iter()
            .rev()
            .fold(0u64, |w, &u| w << 8 | u64::from(u as u8))
    };
    let (w0, w1) = if n >= 8 {
        (pack(&units[..8]), pack(&units[n - 8..]))
    } else if n >= 4 {
        (pack(&units[..4]), pack(&units[n - 4..]))
    } else if n > 0 {
        (pack(&[units[0], units[n / 2], units[n - 1]]), 0)
    } else {
        (0, 0)
    };
    mix_words(n, w0, w1)
}

/// The two words [`string_hash`] mixes, of the bytes `b`: its first and last eight (which
/// overlap when it has fewer than sixteen), or four, or (of up to three) its first, middle
/// and last byte. Between them they hold every byte of a string of up to sixteen.
#[inline(always)]
pub(super) fn hash_words(b: &[u8]) -> (u64, u64) {
    let n = b.len();
    if let (Some(h), Some(t)) = (b.first_chunk::<8>(), b.last_chunk::<8>()) {
        (u64::from_le_bytes(*h), u64::from_le_bytes(*t))
    } else if let (Some(h), Some(t)) = (b.first_chunk::<4>(), b.last_chunk::<4>()) {
        (
            u64::from(u32::from_le_bytes(*h)),
            u64::from(u32::from_le_bytes(*t)),
        )
    } else if let (Some(&first), Some(&mid), Some(&last)) = (b.first(), b.get(n / 2), b.last()) {
        (
            u64::from(first) | u64::from(mid) << 8 | u64::from(last) << 16,
            0,
        )
    } else {
        (0, 0)
    }
}

/// The hash of a string of length `n` by its two words ([`hash_words`]).
#[inline(always)]
pub(super) fn mix_words(n: usize, w0: u64, w1: u64) -> u32 {
    let h = (w0 ^ (n as u64).wrapping_mul(MIX_K)).wrapping_mul(MIX_K) ^ w1;
    (h.wrapping_mul(MIX_K) >> 32) as u32
}

/// The multiplier of the compiler's multiplicative hashes (2^64 over the golden ratio).
pub(super) const MIX_K: u64 = 0x9E37_79B9_7F4A_7C15;

/// [`string_hash`] of the bytes of `s` when it is ASCII, `None` when it is not. (A string of up
/// to sixteen bytes is checked by the words it is hashed by, which hold all its bytes.)
#[inline]
pub(super) fn ascii_hash(s: &str) -> Option<u32> {
    let bytes = s.as_bytes();
    let (w0, w1) = hash_words(bytes);
    let ascii = if bytes.len() > 16 {
        bytes.is_ascii()
    } else {
        (w0 | w1) & 0x8080_8080_8080_8080 == 0
    };
    ascii.then(|| mix_words(bytes.len(), w0, w1))
}

/// Whether `c` is the string constant of the ASCII `bytes`.
#[inline]
pub(super) fn is_ascii_constant(c: Option<&Constant>, bytes: &[u8]) -> bool {
    matches!(c, Some(Constant::String(s))
        if s.len() == bytes.len() && s.iter().zip(bytes).all(|(&u, &c)| u == u16::from(c)))
}

/// The key of a number in the pool: its bits, every NaN as the one NaN.
pub(super) fn num_bits(v: f64) -> u64 {
    if v.is_nan() {
        f64::NAN.to_bits()
    } else {
        v.to_bits()
    }
}

/// The hasher of a map keyed by a hash already computed: the key is the hash.
#[derive(Default)]
pub(super) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl<'o> Lowerer<'o> {
    /// (Inlined: as a call, its constant is passed in memory and its result returned there.)
    #[inline(always)]
    pub(super) fn add_constant(&mut self, c: Constant, span: Span) -> R<ConstIdx> {
        if self.constants.len() >= MAX_CONSTANTS {
            return fail(span, "too many constants (more than 65535); split the code into helper functions (function part(x) { … }), or pass long data in as an argument");
        }
        self.constants.push(c);
        Ok(ConstIdx((self.constants.len() - 1) as u16))
    }

    /// (Inline, the lookup of a number whose slot holds it: the usual case, not worth a call.)
    #[inline(always)]
    pub(super) fn num_const(&mut self, v: f64, span: Span) -> R<ConstIdx> {
        let bits = num_bits(v);
        let slot = self.num_map.slot(bits);
        match self.num_map.slots.get(slot).copied() {
            Some(k) if matches!(self.constants.get(k as usize), Some(Constant::Number(x)) if num_bits(*x) == bits) => {
                Ok(ConstIdx(k))
            }
            _ => self.num_const_new(v, bits, slot, span),
        }
    }

    /// [`Self::num_const`] of a number that its slot (`slot`) does not hold.
    #[inline(never)]
    pub(super) fn num_const_new(
        &mut self,
        v: f64,
        bits: u64,
        slot: usize,
        span: Span,
    ) -> R<ConstIdx> {
        match self.num_map.slots.get(slot).copied() {
            Some(NO_CONSTANT) => {
                let k = self.add_constant(Constant::Number(v), span)?;
                if let Some(s) = self.num_map.slots.get_mut(slot) {
                    *s = k.0;
                }
                return Ok(k);
            }
            Some(k) if matches!(self.constants.get(k as usize), Some(Constant::Number(x)) if num_bits(*x) == bits) => {
                return Ok(ConstIdx(k))
            }
            _ => {}
        }
        // the slot holds another number: the keyed map
        match self
            .num_map
            .keyed
            .get_or_insert_with(HashMap::new)
            .entry(bits)
        {
            Entry::Occupied(e) => Ok(ConstIdx(*e.get())),
            Entry::Vacant(e) => {
                if self.constants.len() >= MAX_CONSTANTS {
                    return fail(span, "too many constants (more than 65535); split the code into helper functions (function part(x) { … }), or pass long data in as an argument");
                }
                self.constants.push(Constant::Number(v));
                let k = (self.constants.len() - 1) as u16;
                e.insert(k);
                Ok(ConstIdx(k))
            }
        }
    }

    /// The constant of the string of UTF-16 `units` (added when new).
    pub(super) fn str_const_slice(&mut self, units: &[u16], span: Span) -> R<ConstIdx> {
        self.str_const_cow(Cow::Borrowed(units), span)
    }

    /// The constant of the string of UTF-16 `units`, owned or borrowed (an owned one becomes the
    /// constant when new, without a copy).
    pub(super) fn str_const_cow(&mut self, units: Cow<'_, [u16]>, span: Span) -> R<ConstIdx> {
        let h = string_hash(&units);
        let mut slot = self.str_map.slot(h);
        match self.str_map.slots.get(slot).copied() {
            Some(NO_STRING) => {}
            Some(k) if self.is_string(k, &units) => return Ok(ConstIdx(k)),
            // (the first slot holds another string: the second)
            _ => {
                slot = self.str_map.second_slot(h);
                match self.str_map.slots.get(slot).copied() {
                    Some(NO_STRING) => {}
                    Some(k) if self.is_string(k, &units) => return Ok(ConstIdx(k)),
                    _ => return self.str_const_keyed(&units, None, span),
                }
            }
        }
        let units = match units {
            Cow::Owned(units) => StrUnits::from_vec(units),
            Cow::Borrowed(units) => StrUnits::from_slice(units),
        };
        let k = self.add_constant(Constant::String(units), span)?;
        self.str_map.fill(slot, k.0);
        Ok(k)
    }

    /// Whether constant `k` is the string of `units`.
    #[inline]
    pub(super) fn is_string(&self, k: u16, units: &[u16]) -> bool {
        matches!(self.constants.get(k as usize), Some(Constant::String(s)) if s.as_slice() == units)
    }

    /// [`Self::str_const_slice`] when the slot of `units` holds another string: by the keyed maps
    /// (`ascii`: the string's bytes, when it is ASCII and the caller has them).
    pub(super) fn str_const_keyed(
        &mut self,
        units: &[u16],
        ascii: Option<&[u8]>,
        span: Span,
    ) -> R<ConstIdx> {
        let (hash, collided) = match self.str_map.keyed().find(units, ascii, &self.constants) {
            Ok(k) => return Ok(ConstIdx(k)),
            Err(miss) => miss,
        };
        let k = self.add_constant(Constant::String(StrUnits::from_slice(units)), span)?;
        self.str_map.keyed().insert(hash, collided, units, k.0);
        Ok(k)
    }

    pub(super) fn str_const_units(&mut self, units: Vec<u16>, span: Span) -> R<ConstIdx> {
        self.str_const_cow(Cow::Owned(units), span)
    }

    pub(super) fn str_const(&mut self, s: &str, span: Span) -> R<ConstIdx> {
        let Some(h) = ascii_hash(s) else {
            // encoded into the scratch buffer: a constant seen before costs no allocation
            let mut units = std::mem::take(&mut self.bufs.units);
            units.clear();
            units.reserve(s.len());
            for u in s.encode_utf16() {
                units.push(u);
            }
            let r = self.str_const_slice(&units, span);
            self.bufs.units = units;
            return r;
        };
        // An ASCII string is looked up by its bytes (not encoded first), and a new one is widened
        // straight into its constant (not encoded into the scratch buffer, copied and probed
        // twice).
        let bytes = s.as_bytes();
        let mut slot = self.str_map.slot(h);
        for second in [false, true] {
            if second {
                slot = self.str_map.second_slot(h);
            }
            match self.str_map.slots.get(slot).copied() {
                Some(NO_STRING) => {
                    let k = self.add_constant(Constant::String(widen(bytes)), span)?;
                    self.str_map.fill(slot, k.0);
                    return Ok(k);
                }
                Some(k) if is_ascii_constant(self.constants.get(k as usize), bytes) => {
                    return Ok(ConstIdx(k))
                }
                _ => {}
            }
        }
        // both slots hold other strings: the keyed maps, in one probe
        let keyed = self.str_map.keyed();
        let hash = keyed.hash(&[], Some(bytes));
        match keyed.by_hash.entry(hash) {
            Entry::Vacant(e) => {
                if self.constants.len() >= MAX_CONSTANTS {
                    return fail(span, "too many constants (more than 65535); split the code into helper functions (function part(x) { … }), or pass long data in as an argument");
                }
                self.constants.push(Constant::String(widen(bytes)));
                let k = (self.constants.len() - 1) as u16;
                e.insert(k);
                Ok(ConstIdx(k))
            }
            Entry::Occupied(e)
                if is_ascii_constant(self.constants.get(*e.get() as usize), bytes) =>
            {
                Ok(ConstIdx(*e.get()))
            }
            Entry::Occupied(_) => {
                // another string has its keyed hash: the units way, by the map of such strings
                let mut units = std::mem::take(&mut self.bufs.units);
                units.clear();
                units.extend(bytes.iter().map(|&b| u16::from(b)));
                let r = self.str_const_keyed(&units, Some(bytes), span);
                self.bufs.units = units;
                r
            }
        }
    }
}

/// The UTF-16 units of a string literal (lone surrogates kept when oxc encoded them).
pub(super) fn string_units(s: &StringLiteral) -> Vec<u16> {
    let v = s.value.as_str();
    if s.lone_surrogates {
        // oxc encodes a lone surrogate as U+FFFD followed by 4 hex digits; U+FFFD itself as "fffd"
        let mut out = Vec::new();
        let mut it = v.chars().peekable();
        while let Some(c) = it.next() {
            if c == '\u{FFFD}' {
                let hex: String = it.by_ref().take(4).collect();
                if let Ok(u) = u16::from_str_radix(&hex, 16) {
                    out.push(u);
                    continue;
                }
                out.push(0xFFFD);
                out.extend(hex.encode_utf16());
            } else {
                let mut buf = [0u16; 2];
                out.extend_from_slice(c.encode_utf16(&mut buf));
            }
        }
        out
    } else {
        v.encode_utf16().collect()
    }
}

/// JavaScript's `Number.prototype.toString()` for property keys.
pub(crate) fn js_number_to_string(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let neg = v < 0.0;
    let a = v.abs();
    // shortest round-trip digits and exponent from Rust's `{:e}` ("d.ddde±x")
    let e = format!("{a:e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1; // decimal point position
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&digits);
        s.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        s.push_str(&digits[..n as usize]);
        s.push('.');
        s.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n('0', (-n) as usize));
        s.push_str(&digits);
    } else {
        s.push_str(&digits[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(if n > 0 { '+' } else { '-' });
        s.push_str(&(n - 1).abs().to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::js_number_to_string as s;
    use super::*;

    #[test]
    fn a_string_whose_hash_is_taken_is_kept_apart() {
        let units = |t: &str| t.encode_utf16().collect::<Vec<u16>>();
        let (a, b) = (units("a"), units("b"));
        let mut m = Keyed::default();
        let mut constants = vec![Constant::String(a.clone().into())];
        let ha = m.hash(&a, None);
        m.insert(ha, false, &a, 0);
        // as if "b" hashed like "a": its hash leads to the constant "a"
        let hb = m.hash(&b, None);
        m.by_hash.insert(hb, 0);
        assert_eq!(m.find(&b, None, &constants), Err((hb, true)));
        constants.push(Constant::String(b.clone().into()));
        m.insert(hb, true, &b, 1);
        assert_eq!(m.find(&b, None, &constants), Ok(1));
        assert_eq!(m.find(&a, Some(b"a"), &constants), Ok(0));
        assert_eq!(
            m.find(&units("c"), None, &constants).map_err(|e| e.1),
            Err(false)
        );
    }

    /// Every string constant is in the pool once, however many share a slot of the direct-mapped
    /// table (64 slots for an Eval or a function body): ASCII strings, others, and strings
    /// with lone surrogates, each written several times and in both quotes.
    #[test]
    fn each_string_is_one_constant() {
        use crate::{compile, CompileOptions, Mode};
        let mut items = Vec::new();
        for i in 0..600 {
            let text = match i % 3 {
                0 => format!("s{i}"),
                1 => format!("é{i}✓"),
                _ => format!("\\ud800{i}"),
            };
            items.push(format!("'{text}'"));
            items.push(format!("\"{text}\""));
        }
        let src = format!("return [{}, {}]", items.join(", "), items.join(", "));
        let opts = CompileOptions {
            mode: Mode::FunctionBody,
            ..CompileOptions::default()
        };
        let program = compile(&src, &opts).expect("compiles");
        let strings: Vec<&[u16]> = program
            .constants
            .iter()
            .filter_map(|c| match c {
                Constant::String(s) => Some(s.as_slice()),
                _ => None,
            })
            .collect();
        let distinct: std::collections::HashSet<&[u16]> = strings.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            strings.len(),
            "a string is in the pool twice"
        );
        assert_eq!(distinct.len(), 600);
    }

    /// The hash of an ASCII string by its bytes is the hash of its units (the two ways a string
    /// constant is looked up find the same slot), at every length up to 40; a string that is
    /// not ASCII has no byte hash.
    #[test]
    fn the_byte_hash_is_the_units_hash() {
        let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let n = next() % 41;
            let ascii = !next().is_multiple_of(4);
            let s: String = (0..n)
                .map(|_| match next() % 5 {
                    0 if !ascii => 'é',
                    1 if !ascii => '✓',
                    k => ['a', 'b', '_', '~', '\0'][k],
                })
                .collect();
            let units: Vec<u16> = s.encode_utf16().collect();
            match super::ascii_hash(&s) {
                Some(h) => assert_eq!(h, super::string_hash(&units), "{s:?}"),
                None => assert!(!s.is_ascii(), "{s:?}"),
            }
        }
    }

    /// Every number constant is in the pool once (by its bits, every NaN as one), however many
    /// share a slot of the direct-mapped table.
    #[test]
    fn each_number_is_one_constant() {
        use crate::{compile, CompileOptions, Mode};
        let items: Vec<String> = (0..600)
            .map(|i| match i % 4 {
                0 => format!("{i}"),
                1 => format!("{i}.5"),
                2 => format!("{}e300", i),
                _ => format!("-{i}"),
            })
            .collect();
        let src = format!(
            "return [{}, {}, NaN, 0 / 0, Infinity, -0, 0]",
            items.join(", "),
            items.join(", ")
        );
        let opts = CompileOptions {
            mode: Mode::FunctionBody,
            ..CompileOptions::default()
        };
        let program = compile(&src, &opts).expect("compiles");
        let bits: Vec<u64> = program
            .constants
            .iter()
            .filter_map(|c| match c {
                Constant::Number(v) => Some(super::num_bits(*v)),
                _ => None,
            })
            .collect();
        let distinct: std::collections::HashSet<u64> = bits.iter().copied().collect();
        assert_eq!(distinct.len(), bits.len(), "a number is in the pool twice");
        assert!(distinct.len() >= 600);
    }

    #[test]
    fn numbers_print_like_javascript() {
        assert_eq!(s(1.0), "1");
        assert_eq!(s(-0.0), "0");
        assert_eq!(s(1.5), "1.5");
        assert_eq!(s(100.0), "100");
        assert_eq!(s(1e21), "1e+21");
        assert_eq!(s(1.25e-7), "1.25e-7");
        assert_eq!(s(0.000001), "0.000001");
        assert_eq!(s(123456789012345680000.0), "123456789012345680000");
        assert_eq!(s(0.1), "0.1");
        assert_eq!(s(-2.5), "-2.5");
    }
}
