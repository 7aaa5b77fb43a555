//! Numbers to strings and strings to numbers, exactly as JavaScript does.

/// `Number.prototype.toString()` / `String(n)`.
pub fn number_to_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n == 0.0 {
        return "0".into();
    }
    if n.is_infinite() {
        return if n > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    // integers below 2^53 (the common case) print as their digits
    let i = n as i64;
    if i as f64 == n && i.unsigned_abs() < 1 << 53 {
        return i.to_string();
    }
    let mut buf = ryu_js::Buffer::new();
    buf.format_finite(n).to_string()
}

pub(crate) fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{A}' | '\u{B}' | '\u{C}' | '\u{D}' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// JavaScript's `ToNumber` applied to a string.
pub fn string_to_number(s: &str) -> f64 {
    let t = s.trim_matches(is_js_whitespace);
    if t.is_empty() {
        return 0.0;
    }
    let radix = |p: &str, r: u32| -> f64 {
        if p.is_empty() || !p.chars().all(|c| c.is_digit(r)) {
            return f64::NAN;
        }
        p.chars().fold(0.0, |acc, c| {
            acc * r as f64 + c.to_digit(r).unwrap_or(0) as f64
        })
    };
    if let Some(p) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return radix(p, 16);
    }
    if let Some(p) = t.strip_prefix("0o").or_else(|| t.strip_prefix("0O")) {
        return radix(p, 8);
    }
    if let Some(p) = t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
        return radix(p, 2);
    }
    let (sign, body) = match t.as_bytes()[0] {
        b'+' => (1.0, &t[1..]),
        b'-' => (-1.0, &t[1..]),
        _ => (1.0, t),
    };
    if body == "Infinity" {
        return sign * f64::INFINITY;
    }
    // StrDecimalLiteral: digits [. digits] [e[+-]digits], or . digits [...]
    let b = body.as_bytes();
    let mut i = 0;
    let mut digits = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return f64::NAN;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return f64::NAN;
        }
    }
    if i != b.len() {
        return f64::NAN;
    }
    body.parse::<f64>().map(|v| sign * v).unwrap_or(f64::NAN)
}

/// JavaScript's `ToInt32`.
pub fn to_int32(n: f64) -> i32 {
    if !n.is_finite() {
        return 0;
    }
    let m = n.trunc() % 4_294_967_296.0;
    let m = if m < 0.0 { m + 4_294_967_296.0 } else { m };
    (m as u64 as u32) as i32
}

/// JavaScript's `ToUint32`.
pub fn to_uint32(n: f64) -> u32 {
    to_int32(n) as u32
}

/// Whether a UTF-16 code unit is JavaScript white space or a line terminator (`trim`).
pub(crate) fn is_ws_unit(u: u16) -> bool {
    char::from_u32(u as u32).is_some_and(is_js_whitespace)
}

/// Guard digits formatted past the `need` digits [`exact_digits`] must get right.
const GUARD_DIGITS: usize = 20;

/// Most significant digits an `x` (finite, positive) can have exactly: those of its integer
/// significand times `5^-q` (a power-of-two exponent `q < 0`) or times `2^q`.
fn exact_len_bound(x: f64) -> usize {
    if x == 0.0 || !x.is_finite() {
        return 1;
    }
    let bits = x.abs().to_bits();
    let (exp, frac) = ((bits >> 52) & 0x7ff, bits & ((1 << 52) - 1));
    let (m, q) = if exp == 0 {
        (frac, -1074i64)
    } else {
        (frac | (1 << 52), exp as i64 - 1075)
    };
    let m_digits = (64 - m.leading_zeros()) as f64 * std::f64::consts::LOG10_2;
    let scale = if q < 0 {
        -q as f64 * 0.69897
    } else {
        q as f64 * std::f64::consts::LOG10_2
    };
    (m_digits + scale) as usize + 3
}

/// Significant digits [`exact_digits`] formats for `x` when `need` are needed: the price of
/// the call, in digits, before any is made.
pub(crate) fn exact_digits_cost(x: f64, need: usize) -> usize {
    exact_len_bound(x).min(need + GUARD_DIGITS)
}

/// Digits `to_fixed(x, f)` formats (its price; the same estimate of `x`'s exponent).
pub(crate) fn to_fixed_cost(x: f64, f: usize) -> usize {
    if !x.is_finite() || x.abs() >= 1e21 || x == 0.0 {
        return 24;
    }
    let e = x.abs().log10().floor() as i32;
    exact_digits_cost(x.abs(), (e + 3 + f as i32).max(1) as usize) + f
}

/// Digits `to_radix_string(x, radix)` can produce: the bits of `x`'s integer part and of its
/// fraction down to its last significant bit, in base `radix`.
pub(crate) fn radix_digits_bound(x: f64, radix: u32) -> usize {
    if x == 0.0 || !x.is_finite() {
        return 24;
    }
    let e2 = x.abs().log2().floor() as i64;
    let frac = if x.fract() == 0.0 {
        0
    } else {
        (53 - e2).clamp(0, 1127)
    };
    let bits = e2.max(0) + 1 + frac;
    (bits as f64 / (radix as f64).log2()) as usize + 2
}

/// The first `need` exact decimal digits (truncated, not rounded) of a finite, non-negative
/// `x` in scientific form: the digits (no leading zero unless `x` is 0; trailing zeros dropped)
/// and the exponent of the first one. Formats `need` plus guard digits, rounded, unless
/// rounding there could have carried into the first `need` (the guard digits all zero); then
/// every digit `x` has, exactly.
fn exact_digits(x: f64, need: usize) -> (Vec<u8>, i32) {
    digits_guarded(x, need, GUARD_DIGITS)
}

/// [`exact_digits`] with `guard` guard digits.
fn digits_guarded(x: f64, need: usize, guard: usize) -> (Vec<u8>, i32) {
    let all = exact_len_bound(x);
    let n = all.min(need + guard);
    let (d, e) = sci_digits(x, n);
    if n == all || d.len() > need {
        return (d, e);
    }
    sci_digits(x, all)
}

/// `x` rounded to `n` significant digits: its digits, trailing zeros dropped, and exponent.
fn sci_digits(x: f64, n: usize) -> (Vec<u8>, i32) {
    let s = format!("{:.*e}", n.max(1) - 1, x);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mut digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    (digits, exp.parse().unwrap_or(0))
}

/// Rounds the digit string to `n` significant digits, halves away from zero (JavaScript picks the
/// larger candidate on ties). Returns the digits (exactly `n`) and the possibly bumped exponent.
fn round_digits(mut d: Vec<u8>, mut e: i32, n: usize) -> (Vec<u8>, i32) {
    let up = d.get(n).is_some_and(|&c| c >= b'5');
    d.resize(n.max(d.len()), b'0');
    d.truncate(n);
    if up {
        let mut i = n;
        loop {
            if i == 0 {
                d.insert(0, b'1');
                d.truncate(n);
                e += 1;
                break;
            }
            i -= 1;
            if d[i] == b'9' {
                d[i] = b'0';
            } else {
                d[i] += 1;
                break;
            }
        }
    }
    (d, e)
}

/// `Number.prototype.toFixed(f)` for `f` in 0..=100.
pub fn to_fixed(x: f64, f: usize) -> String {
    if !x.is_finite() || x.abs() >= 1e21 {
        return number_to_string(x);
    }
    if x < 0.0 {
        return format!("-{}", to_fixed(-x, f));
    }
    let x = x.abs(); // -0 prints as 0
    let e = if x == 0.0 {
        0
    } else {
        x.log10().floor() as i32
    };
    // digits kept: integer digits (e + 1) plus f decimals, and one to round by
    let (d, e) = exact_digits(x, (e + 3 + f as i32).max(1) as usize);
    let keep = e + 1 + f as i32;
    let (digits, e) = if x == 0.0 || keep < 0 {
        (Vec::new(), 0)
    } else if keep == 0 {
        // only the rounding digit exists
        if d[0] >= b'5' {
            (vec![b'1'], e + 1)
        } else {
            (Vec::new(), 0)
        }
    } else {
        round_digits(d, e, keep as usize)
    };
    // the value is digits × 10^(e + 1 - len)
    let mut int_part = String::new();
    let mut frac = vec![b'0'; f];
    if digits.is_empty() {
        int_part.push('0');
    } else {
        let point = e + 1; // digits before the decimal point
        for (i, &c) in digits.iter().enumerate() {
            let pos = i as i32;
            if pos < point {
                int_part.push(c as char);
            } else {
                let k = (pos - point) as usize;
                if k < f {
                    frac[k] = c;
                }
            }
        }
        if point <= 0 {
            int_part.push('0');
            // leading zeros of the fraction: digits start at position -point
            let shift = (-point) as usize;
            let mut fr = vec![b'0'; f];
            for (i, &c) in digits.iter().enumerate() {
                if shift + i < f {
                    fr[shift + i] = c;
                }
            }
            frac = fr;
        } else if (int_part.len() as i32) < point {
            for _ in int_part.len() as i32..point {
                int_part.push('0');
            }
        }
    }
    if f == 0 {
        int_part
    } else {
        format!("{int_part}.{}", String::from_utf8_lossy(&frac))
    }
}

/// `Number.prototype.toPrecision(p)` for `p` in 1..=100.
pub fn to_precision(x: f64, p: usize) -> String {
    if !x.is_finite() {
        return number_to_string(x);
    }
    let neg = x < 0.0;
    let x = x.abs();
    let (digits, e) = if x == 0.0 {
        (vec![b'0'; p], 0)
    } else {
        let (d, e) = exact_digits(x, p + 1);
        round_digits(d, e, p)
    };
    let ds = String::from_utf8_lossy(&digits).into_owned();
    let body = if e < -6 || e >= p as i32 {
        let mut m = ds[..1].to_string();
        if p > 1 {
            m.push('.');
            m.push_str(&ds[1..]);
        }
        format!("{m}e{}{}", if e >= 0 { "+" } else { "-" }, e.abs())
    } else if e >= 0 {
        let k = e as usize + 1;
        if k < p {
            format!("{}.{}", &ds[..k], &ds[k..])
        } else {
            ds
        }
    } else {
        format!("0.{}{}", "0".repeat((-(e + 1)) as usize), ds)
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// `Number.prototype.toString(radix)` for a radix other than 10 (V8's algorithm).
pub fn to_radix_string(value: f64, radix: u32) -> String {
    if !value.is_finite() {
        return number_to_string(value);
    }
    if value == 0.0 {
        return "0".into();
    }
    const CHARS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let r = radix as f64;
    let negative = value < 0.0;
    let value = value.abs();
    let mut integer = value.floor();
    let mut fraction = value - integer;
    let next = f64::from_bits(value.to_bits() + 1);
    let mut delta = (0.5 * (next - value)).max(f64::from_bits(1));
    let mut frac_digits: Vec<u8> = Vec::new();
    if fraction >= delta {
        loop {
            fraction *= r;
            delta *= r;
            let digit = fraction as usize;
            frac_digits.push(CHARS[digit]);
            fraction -= digit as f64;
            if (fraction > 0.5 || (fraction == 0.5 && (digit & 1) == 1)) && fraction + delta > 1.0 {
                // round up, propagating carries
                loop {
                    match frac_digits.pop() {
                        None => {
                            integer += 1.0;
                            break;
                        }
                        Some(c) => {
                            let d = if c > b'9' { c - b'a' + 10 } else { c - b'0' } as u32;
                            if d + 1 < radix {
                                frac_digits.push(CHARS[d as usize + 1]);
                                break;
                            }
                        }
                    }
                }
                break;
            }
            if fraction < delta {
                break;
            }
        }
    }
    let mut int_digits: Vec<u8> = Vec::new();
    // exponent of the double viewed as a 53-bit integer significand × 2^e
    let exponent = |d: f64| -> i32 {
        let bits = d.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        if biased == 0 {
            -1074
        } else {
            biased - 0x3ff - 52
        }
    };
    while exponent(integer / r) > 0 {
        integer /= r;
        int_digits.push(b'0');
    }
    loop {
        let rem = integer % r;
        int_digits.push(CHARS[rem as usize]);
        integer = (integer - rem) / r;
        if integer <= 0.0 {
            break;
        }
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.extend(int_digits.iter().rev().map(|&c| c as char));
    if !frac_digits.is_empty() {
        out.push('.');
        out.extend(frac_digits.iter().map(|&c| c as char));
    }
    out
}

/// `parseInt(s, radix)` with `radix` already converted by `ToInt32`.
pub fn parse_int(s: &str, radix: i32) -> f64 {
    let t = s.trim_start_matches(is_js_whitespace);
    let (sign, mut t) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    let mut r = radix;
    let mut strip = true;
    if r != 0 {
        if !(2..=36).contains(&r) {
            return f64::NAN;
        }
        if r != 16 {
            strip = false;
        }
    } else {
        r = 10;
    }
    if strip && (t.starts_with("0x") || t.starts_with("0X")) {
        t = &t[2..];
        r = 16;
    }
    let end = t
        .char_indices()
        .find(|(_, c)| !c.is_digit(r as u32))
        .map_or(t.len(), |(i, _)| i);
    let digits = &t[..end];
    if digits.is_empty() {
        return f64::NAN;
    }
    let v = if r == 10 {
        digits.parse::<f64>().unwrap_or(f64::NAN)
    } else {
        digits.chars().fold(0.0, |acc, c| {
            acc * r as f64 + c.to_digit(r as u32).unwrap_or(0) as f64
        })
    };
    sign * v
}

/// `parseFloat(s)`.
pub fn parse_float(s: &str) -> f64 {
    let t = s.trim_start_matches(is_js_whitespace);
    let b = t.as_bytes();
    let mut i = 0;
    let sign = match b.first() {
        Some(b'-') => {
            i = 1;
            -1.0
        }
        Some(b'+') => {
            i = 1;
            1.0
        }
        _ => 1.0,
    };
    if t[i..].starts_with("Infinity") {
        return sign * f64::INFINITY;
    }
    let start = i;
    let mut digits = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if i < b.len() && b[i] == b'.' {
        let dot = i;
        i += 1;
        let mut frac = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
            frac += 1;
        }
        if frac == 0 && digits == 0 {
            i = dot;
        }
        digits += frac;
    }
    if digits == 0 {
        return f64::NAN;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let es = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > es {
            i = j;
        }
    }
    t[start..i]
        .parse::<f64>()
        .map(|v| sign * v)
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_javascript() {
        assert_eq!(number_to_string(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(number_to_string(1e21), "1e+21");
        assert_eq!(number_to_string(-0.0), "0");
        assert_eq!(number_to_string(f64::NAN), "NaN");
        assert_eq!(number_to_string(123.0), "123");
        assert_eq!(number_to_string(1e-7), "1e-7");
    }

    #[test]
    fn integers_print_as_the_general_path_prints_them() {
        let mut n = 1.0f64;
        let mut xs = vec![1.0, 7.0, 10.0, 99.0, 12345.0, 9_007_199_254_740_991.0];
        while n < 1e16 {
            xs.extend([n, n - 1.0, n + 1.0, n * 3.0]);
            n *= 10.0;
        }
        for x in xs {
            for x in [x, -x] {
                let mut buf = ryu_js::Buffer::new();
                assert_eq!(number_to_string(x), buf.format_finite(x), "{x}");
            }
        }
    }

    #[test]
    fn parses_like_javascript() {
        assert_eq!(string_to_number(" 12 "), 12.0);
        assert_eq!(string_to_number(""), 0.0);
        assert_eq!(string_to_number("0x1f"), 31.0);
        assert!(string_to_number("12px").is_nan());
        assert_eq!(string_to_number("-Infinity"), f64::NEG_INFINITY);
        assert_eq!(string_to_number(".5"), 0.5);
        assert!(string_to_number("1e").is_nan());
        assert!(string_to_number("inf").is_nan());
    }

    #[test]
    fn formats_like_javascript() {
        assert_eq!(to_fixed(1234.5678, 2), "1234.57");
        assert_eq!(to_fixed(0.5, 0), "1");
        assert_eq!(to_fixed(2.5, 0), "3");
        assert_eq!(to_fixed(1.005, 2), "1.00");
        assert_eq!(to_fixed(-1.5, 0), "-2");
        assert_eq!(to_fixed(0.000001, 2), "0.00");
        assert_eq!(to_fixed(-0.0001, 2), "-0.00");
        assert_eq!(to_fixed(0.05, 1), "0.1");
        assert_eq!(to_fixed(123.0, 3), "123.000");
        assert_eq!(to_fixed(0.0, 2), "0.00");
        assert_eq!(to_fixed(99.99, 1), "100.0");
        assert_eq!(to_fixed(0.4, 0), "0");
        assert_eq!(to_fixed(0.6, 0), "1");
        assert_eq!(to_fixed(0.001, 2), "0.00");
        assert_eq!(to_fixed(0.009, 2), "0.01");
        assert_eq!(to_precision(123.456, 4), "123.5");
        assert_eq!(to_precision(0.000123, 2), "0.00012");
        assert_eq!(to_precision(123456.0, 2), "1.2e+5");
        assert_eq!(to_precision(0.0, 3), "0.00");
        assert_eq!(to_precision(1e-7, 1), "1e-7");
        assert_eq!(to_precision(9.99, 2), "10");
        assert_eq!(to_radix_string(255.0, 16), "ff");
        assert_eq!(to_radix_string(-10.0, 2), "-1010");
        assert_eq!(to_radix_string(0.5, 2), "0.1");
        assert_eq!(parse_int("08", 0), 8.0);
        assert_eq!(parse_int("0x1f", 0), 31.0);
        assert_eq!(parse_int("  -42px", 0), -42.0);
        assert!(parse_int("px", 0).is_nan());
        assert_eq!(parse_float("3.25abc"), 3.25);
        assert_eq!(parse_float(".5"), 0.5);
        assert_eq!(parse_float("1e"), 1.0);
        assert!(parse_float(".").is_nan());
    }

    /// The digits `exact_digits` gives agree with every digit of `x` formatted exactly, on the
    /// values where a shortcut could go wrong: short expansions, runs of 9s and 0s, denormals.
    #[test]
    fn exact_digits_agree_with_the_full_expansion() {
        let mut xs = vec![
            0.49999999999999994,
            0.5,
            0.1,
            1.005,
            5e-324,
            1e21 - 65536.0,
            9007199254740993.0,
            1e-6,
            123.456,
            0.125,
            2.5,
            1.45,
            8.345,
            0.000001234,
            1.7976931348623157e308,
            2.2250738585072014e-308,
            999.9999999999999,
            0.9999999999999999,
            4.35,
            1.0 / 3.0,
        ];
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..300 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let x = f64::from_bits(seed >> 1);
            if x.is_finite() && x > 0.0 {
                xs.push(x);
            }
        }
        for x in xs {
            let (full, fe) = sci_digits(x, 1101);
            for (need, guard) in [1, 2, 3, 5, 17, 18, 21, 40, 101, 123]
                .into_iter()
                .flat_map(|n| [(n, 1), (n, 2), (n, GUARD_DIGITS)])
            {
                let (d, e) = digits_guarded(x, need, guard);
                let pad = |mut v: Vec<u8>| {
                    v.resize(need.max(v.len()), b'0');
                    v.truncate(need);
                    v
                };
                assert_eq!(
                    (pad(d), e),
                    (pad(full.clone()), fe),
                    "{x:e}, {need}+{guard} digits"
                );
            }
        }
    }
}
