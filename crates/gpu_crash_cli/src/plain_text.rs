//! Report text made safe for a terminal: a report is hostile input, and its strings (summary, labels,
//! notes, driver texts) must not move the cursor, retitle the window, clear the screen or reorder
//! what is shown. Control characters (C0, DEL, C1), bidirectional overrides and line/paragraph
//! separators are shown escaped (`\u{1b}`); everything else, non-ASCII included, as it is.

use std::borrow::Cow;

use gpu_crash_core::report::CrashReport;

/// `text` with every character that could steer a terminal escaped.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(steers_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if steers_terminal(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape_controls`] for a whole rendering: its own line breaks stay.
pub fn escape_controls_but_newlines(text: &str) -> String {
    text.split('\n')
        .map(escape_controls)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A copy of `report` with [`escape_controls`] applied to every string in it (through its JSON
/// form, so that every field, present and future, is covered); `report` itself if that fails.
pub fn escaped_report(report: CrashReport) -> CrashReport {
    let Ok(mut value) = serde_json::to_value(&report) else {
        return report;
    };
    escape_value(&mut value);
    serde_json::from_value(value).unwrap_or(report)
}

fn escape_value(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let Cow::Owned(escaped) = escape_controls(s) {
                *s = escaped;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(escape_value),
        serde_json::Value::Object(map) => map.values_mut().for_each(escape_value),
        _ => {}
    }
}

/// Control characters, and the invisible ones that reorder or break lines.
fn steers_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_keeps_the_rest() {
        assert_eq!(
            escape_controls("a\u{1b}[2Jb\u{9b}c\r\u{202e}d é"),
            "a\\u{1b}[2Jb\\u{9b}c\\u{d}\\u{202e}d é"
        );
        assert!(matches!(escape_controls("plain ü"), Cow::Borrowed(_)));
        assert_eq!(escape_controls_but_newlines("a\n\u{7}b\n"), "a\n\\u{7}b\n");
    }
}
