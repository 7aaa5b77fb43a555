//! A small deterministic generator for the randomised tests of the scanners.

/// A xorshift64 generator from `seed` (which must not be 0): each call gives the next value.
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> usize {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed as usize
    }
}
