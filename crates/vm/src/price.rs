//! What a native or a non-number operator pays per unit of work, defined once.
//!
//! Every price bounds the work's time on its slowest known input (the fairness benchmark,
//! `cd benches && cargo run --release --bin fairness`, runs each native at adversarial sizes and
//! docs/costs.md says how each price was derived). A price is charged before the work starts,
//! so an unaffordable call ends Out of Fuel without running.

use std::cmp::Ordering;

use crate::error::OpResult;
use crate::machine::Vm;
use crate::value::Value;

/// Milli-fuel per UTF-16 code unit a native copies, compares or scans at memory speed.
pub const MILLI_PER_UNIT: u64 = 4;

/// Multiples of [`MILLI_PER_UNIT`] per code unit for work slower than a copy.
pub mod factor {
    /// Substring search (`indexOf`, `includes`, `split`, `replace`, ...) per haystack unit:
    /// linear (Knuth–Morris–Pratt), whatever the pattern.
    pub const SEARCH: u64 = 8;
    /// Whitespace trimming, padding and other per-unit loops that test each unit.
    pub const SCAN: u64 = 2;
    /// Case mapping of text with any non-ASCII unit, per input unit (up to 3 units out each,
    /// and the final-sigma rule's context).
    pub const CASE_MAP: u64 = 48;
    /// Case mapping of all-ASCII text, per unit (in and out).
    pub const CASE_MAP_ASCII: u64 = 4;
    /// Unicode normalization of non-ASCII text, per input unit (decomposing, reordering).
    pub const NORMALIZE: u64 = 32;
    /// Unicode normalization, per output unit (up to 18 per input unit), charged as made.
    pub const NORMALIZE_OUT: u64 = 16;
    /// `JSON.parse`, per input unit (numbers and escapes decoded, the tree built).
    pub const PARSE_JSON: u64 = 16;
    /// URI encoding and decoding, per input unit.
    pub const URI: u64 = 4;
    /// The `hash` atom, per unit hashed (converted to UTF-8, then digested).
    pub const HASH: u64 = 4;
    /// Parsing a number from text (`parseFloat`, `parseInt`, `+s`, `s * 1`), per unit.
    pub const PARSE_NUMBER: u64 = 4;
    /// A string a native makes per element (`split` pieces, `[...s]`, `Object.keys` of a
    /// string), per string made: an allocation and its heap bookkeeping.
    pub const NEW_STRING: u64 = 64;
    /// A property a native lists or inserts into an object or a set (`Object.keys`, `assign`,
    /// `fromEntries`, `{...o}`, `Set(xs)`), per property: its key hashed, stored, ordered.
    pub const PROPERTY: u64 = 128;
}

/// Milli-fuel per number `JSON.stringify` writes as text other than an integer's digits.
pub const MILLI_PER_NUMBER_TEXT: u64 = NEW_STRING_MILLI;

/// Milli-fuel per string a native makes ([`factor::NEW_STRING`] in milli).
pub const NEW_STRING_MILLI: u64 = factor::NEW_STRING * MILLI_PER_UNIT;

/// Milli-fuel per value of the example `Schema.fromExample` and `Schema.response` read (its
/// copy out of the VM is paid apart): the schema's maps, keys and required lists are built
/// per value, and the schema is copied back in.
pub const MILLI_PER_SCHEMA_NODE: u64 = 2048;

/// Milli-fuel per value `filter` and `Schema.isValid` check (the data's values and twice the
/// example's, whose schema is built first; their copies out are paid apart).
pub const MILLI_PER_CHECKED_NODE: u64 = 1024;

/// Milli-fuel per Date constructor or method call: civil-calendar arithmetic, a fixed amount
/// of work per call (`format` pays it three times).
pub const MILLI_PER_DATE_OP: u64 = 1000;

/// Milli-fuel per digit `toFixed`, `toPrecision` or `toString(radix)` may produce, for a
/// number near 1; scaled by [`Vm::charge_digits`] with the number's binary exponent (exact
/// expansion is big-number arithmetic per digit, on a number as wide as that exponent).
pub const MILLI_PER_DIGIT: u64 = 40;

impl Vm {
    /// Charges `units` code units of work `factor` times slower than a copy.
    pub(crate) fn charge_work(&mut self, units: usize, factor: u64) -> OpResult<()> {
        self.charge(
            (units as u64)
                .saturating_mul(MILLI_PER_UNIT)
                .saturating_mul(factor),
        )
    }

    /// Ends the run Out of Fuel, charging nothing, unless `units` of work `factor` times a
    /// copy's price is affordable (for work whose exact size is known only once it is done,
    /// then charged for that).
    pub(crate) fn afford_work(&mut self, units: usize, factor: u64) -> OpResult<()> {
        let milli = (units as u64)
            .saturating_mul(MILLI_PER_UNIT)
            .saturating_mul(factor);
        if milli > self.meter.fuel.left() {
            return self.charge(milli);
        }
        Ok(())
    }

    /// Charges for formatting `digits` decimal or radix digits of `x`: each digit's price grows
    /// with the width of `x`'s exact expansion (one more [`MILLI_PER_DIGIT`] per 128 bits of
    /// binary exponent).
    pub(crate) fn charge_digits(&mut self, digits: usize, x: f64) -> OpResult<()> {
        let e2 = if x.is_finite() && x != 0.0 {
            x.abs().log2().abs() as u64
        } else {
            0
        };
        let per = MILLI_PER_DIGIT.saturating_mul(1 + e2 / 128);
        self.charge((digits as u64).saturating_mul(per))
    }

    /// Charges for comparing two strings for equality: their length when it is equal
    /// (unequal lengths and the same string are answered without reading them).
    pub(crate) fn charge_str_eq(&mut self, a: Value, b: Value) -> OpResult<()> {
        if let (Value::Str(x), Value::Str(y)) = (a, b) {
            let (lx, ly) = (self.units(x).len(), self.units(y).len());
            if x != y && lx == ly {
                self.charge_units(lx)?;
            }
        }
        Ok(())
    }

    /// Charges for ordering two strings: the shorter one's length.
    pub(crate) fn charge_str_order(&mut self, a: Value, b: Value) -> OpResult<()> {
        if let (Value::Str(x), Value::Str(y)) = (a, b) {
            let n = self.units(x).len().min(self.units(y).len());
            self.charge_units(n)?;
        }
        Ok(())
    }

    /// Charges for `ToNumber` of a string operand (parsing is linear in its length).
    pub(crate) fn charge_to_number(&mut self, v: Value) -> OpResult<()> {
        if let Value::Str(g) = v {
            let n = self.units(g).len();
            self.charge_work(n, factor::PARSE_NUMBER)?;
        }
        Ok(())
    }
}

/// Lexicographic order of code unit sequences, at memory speed: equal chunks are skipped with
/// a vectorised equality test, and only the first differing chunk is compared unit by unit.
pub(crate) fn cmp_units(a: &[u16], b: &[u16]) -> Ordering {
    const CHUNK: usize = 64;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + CHUNK <= n && a[i..i + CHUNK] == b[i..i + CHUNK] {
        i += CHUNK;
    }
    a[i..].cmp(&b[i..])
}

#[cfg(test)]
mod tests {
    use super::cmp_units;

    #[test]
    fn cmp_units_orders_as_slices_do() {
        let long: Vec<u16> = vec![97; 200];
        let mut later = long.clone();
        later[130] = 98;
        let cases: [(&[u16], &[u16]); 6] = [
            (&[], &[]),
            (&[1], &[]),
            (&long, &later),
            (&later, &long),
            (&long[..150], &long),
            (&long, &long),
        ];
        for (a, b) in cases {
            assert_eq!(cmp_units(a, b), a.cmp(b), "{a:?} vs {b:?}");
        }
    }
}
