//! Report strings made safe to put in a page: reports are hostile input (a label is whatever the
//! game, a driver or a crafted file says), so every string goes through [`esc`] before it reaches
//! HTML or SVG.

/// Characters of one string kept on the page: a label is a line, not a document.
pub(super) const MAX_TEXT_CHARS: usize = 300;

/// `text` as HTML/SVG character data or attribute value: `& < > " '` escaped, control characters
/// written as `\u{..}` (they would not show, or would fake line breaks), cut to
/// [`MAX_TEXT_CHARS`] characters with an ellipsis.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_TEXT_CHARS * 2));
    for (i, c) in text.chars().enumerate() {
        if i == MAX_TEXT_CHARS {
            out.push('…');
            break;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control()
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// `256 B`, `64 KiB`, `130 MiB`: sizes as people write them.
pub(super) fn bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = n as f64;
    let (value, unit) = if f >= KIB * KIB * KIB {
        (f / (KIB * KIB * KIB), "GiB")
    } else if f >= KIB * KIB {
        (f / (KIB * KIB), "MiB")
    } else if f >= KIB {
        (f / KIB, "KiB")
    } else {
        return format!("{n} B");
    };
    format!("{value:.1} {unit}").replace(".0 ", " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_quotes_and_controls_are_escaped() {
        assert_eq!(
            esc("<script src='http://x'>\"a\"&\u{1b}[2J\n"),
            "&lt;script src=&#39;http://x&#39;&gt;&quot;a&quot;&amp;\\u{1b}[2J\\u{a}"
        );
        assert_eq!(esc("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn long_strings_are_cut() {
        let long = "x".repeat(10_000);
        assert_eq!(esc(&long).chars().count(), MAX_TEXT_CHARS + 1);
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(bytes(256), "256 B");
        assert_eq!(bytes(64 * 1024), "64 KiB");
        assert_eq!(bytes(136_314_884), "130 MiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
    }
}
