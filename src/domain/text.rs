//! Text measures shared by every rule: lengths in UTF-16 code units (like JavaScript's
//! `String.length`), cuts that never leave half a surrogate pair, JavaScript-style trim and
//! lower-casing.

/// Length in UTF-16 code units (storage-model §1: every "chars" threshold counts these).
pub fn u16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The first `n` UTF-16 units of `s`. A cut that would split a surrogate pair drops the
/// dangling high surrogate too (storage-model §1), so the result is always valid text.
pub fn cut_u16(s: &str, n: usize) -> &str {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        let w = c.len_utf16();
        if units + w > n {
            return &s[..i];
        }
        units += w;
    }
    s
}

/// Number of Unicode scalar values.
pub fn code_points(s: &str) -> usize {
    s.chars().count()
}

/// JavaScript `trim()`: strips Unicode White_Space and line terminators at both ends.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// JavaScript's `\s` / trim set: White_Space plus the BOM (U+FEFF).
pub fn is_js_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// Unicode default lower-case mapping, as JavaScript `toLowerCase` (final sigma included).
pub fn lower(s: &str) -> String {
    s.to_lowercase()
}

/// Digits grouped by commas every three (storage-model §1 "grouped"), whatever the locale.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_lengths_count_surrogate_pairs_twice() {
        assert_eq!(u16_len("abc"), 3);
        assert_eq!(u16_len("😀"), 2);
        assert_eq!(u16_len("中文"), 2);
    }

    #[test]
    fn cut_drops_a_dangling_high_surrogate() {
        assert_eq!(cut_u16("a😀b", 2), "a");
        assert_eq!(cut_u16("a😀b", 3), "a😀");
        assert_eq!(cut_u16("abc", 10), "abc");
        assert_eq!(cut_u16("abc", 0), "");
    }

    #[test]
    fn grouping_is_locale_free() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn trim_strips_unicode_space_and_line_breaks() {
        assert_eq!(js_trim("\u{3000} a b\n\r\t"), "a b");
        assert_eq!(js_trim("\u{feff}x"), "x");
    }

    #[test]
    fn lower_handles_final_sigma_like_javascript() {
        assert_eq!(lower("ΟΔΟΣ"), "οδος");
        assert_eq!(lower("ABC"), "abc");
    }
}
