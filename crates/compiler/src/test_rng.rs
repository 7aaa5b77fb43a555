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

/// A source of up to `max - 1` pieces, each drawn from `pieces` by `next`.
pub(crate) fn soup(next: &mut impl FnMut() -> usize, pieces: &[&str], max: usize) -> String {
    (0..next() % max)
        .map(|_| pieces[next() % pieces.len()])
        .collect()
}
