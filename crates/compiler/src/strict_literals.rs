//! Literals that strict-mode JavaScript refuses and sloppy mode reads as octal: AJS code is
//! strict (as modules and classes are), so `010`, `08` and the escapes `'\1'`, `'\08'`, `'\8'`
//! are syntax errors. (The parser runs in script mode and leaves these to a later check.)

/// The refusal of a numeric literal written as `raw`, if strict mode refuses it.
pub(crate) fn number(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    if b.len() < 2 || b[0] != b'0' || !b[1].is_ascii_digit() {
        return None;
    }
    let decimal = match raw.trim_start_matches('0') {
        "" => "0",
        d => d,
    };
    Some(if raw.bytes().all(|c| (b'0'..=b'7').contains(&c)) {
        format!(
            "SyntaxError: '{raw}' is a legacy octal literal, which strict-mode JavaScript (and AJS) refuses; write `0o{}` for octal or `{decimal}` for decimal",
            &raw[1..]
        )
    } else {
        format!(
            "SyntaxError: '{raw}' is a decimal literal with a leading zero, which strict-mode JavaScript (and AJS) refuses; write `{decimal}`"
        )
    })
}

/// The refusal of a string literal written as `raw` (quotes included), if it has an octal
/// escape (`\1`…`\7`, `\0` before a digit) or `\8`/`\9`.
pub(crate) fn string(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let next = b[i + 1];
        let zero_digit = next == b'0' && b.get(i + 2).is_some_and(u8::is_ascii_digit);
        if (b'1'..=b'9').contains(&next) || zero_digit {
            let esc = if zero_digit {
                &raw[i..i + 3]
            } else {
                &raw[i..i + 2]
            };
            return Some(format!(
                "SyntaxError: the escape '{esc}' is an octal escape, which strict-mode JavaScript (and AJS) refuses; write a \\x or \\u escape such as '\\x01'"
            ));
        }
        i += 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{number, string};

    #[test]
    fn legacy_octal_numbers_are_refused() {
        for raw in ["010", "00", "07", "08", "09", "0008", "01234567"] {
            assert!(number(raw).is_some_and(|m| m.contains(raw)), "{raw}");
        }
        for raw in [
            "0", "10", "0.5", "0e1", "0x10", "0o10", "0b1", "0.08", "1_000", "0n",
        ] {
            assert_eq!(number(raw), None, "{raw}");
        }
        assert!(number("010")
            .unwrap()
            .contains("write `0o10` for octal or `10` for decimal"));
        assert!(
            number("08").unwrap().contains("leading zero; write `8`")
                || number("08").unwrap().ends_with("write `8`")
        );
        assert!(number("00")
            .unwrap()
            .ends_with("write `0o0` for octal or `0` for decimal"));
    }

    #[test]
    fn octal_escapes_are_refused() {
        for raw in [
            r"'\1'", r"'\08'", r"'\8'", r"'\9'", r"'a\7b'", r"'\\\1'", r#""\00""#,
        ] {
            assert!(string(raw).is_some(), "{raw}");
        }
        for raw in [
            r"'\0'",
            r"'\0a'",
            r"'\\1'",
            r"'\x01'",
            r"'\u0031'",
            r"'1'",
            r"'\\'",
            r"'\'",
        ] {
            assert_eq!(string(raw), None, "{raw}");
        }
    }
}
