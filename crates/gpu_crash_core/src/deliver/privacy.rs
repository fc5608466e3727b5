//! What leaves the player's machine: application names and paths only when allowed.
//!
//! Without [`DeliverySettings::include_paths`], every string of the report is scrubbed of absolute
//! paths (they name the player's home folder, user name and install layout): the home folder becomes
//! `~`, and each absolute path is cut to `<path>/` and its last part when that looks like a file name
//! (`wgpu_core.rs:1234:26`, `tree.glb`: they help a developer and name no one), else to `<path>`.
//! The walk is over the report's JSON form, so notes, panic texts, breadcrumbs, labels and every
//! field added later are covered alike.

use serde_json::Value;

use super::settings::DeliverySettings;
use crate::report::CrashReport;

/// What a scrubbed path's folders become.
const PATH: &str = "<path>";

/// A copy of `report` without what `settings` says to leave out: the application name (also in the
/// vendor binary header) unless [`DeliverySettings::include_application_names`], and the executable
/// path and every other absolute path (see the module docs) unless
/// [`DeliverySettings::include_paths`].
pub fn redacted_report(report: &CrashReport, settings: &DeliverySettings) -> CrashReport {
    let mut r = report.clone();
    if !settings.include_application_names {
        r.application.name.clear();
        if let Some(header) = r
            .vendor_binary
            .as_mut()
            .and_then(|vendor| vendor.header.as_mut())
        {
            header.application_name = None;
        }
    }
    if !settings.include_paths {
        r.application.executable = None;
        r = without_paths(r);
    }
    r
}

/// `report` with every string scrubbed (see the module docs).
fn without_paths(report: CrashReport) -> CrashReport {
    let home = home_dir();
    let scrubbed = serde_json::to_value(&report).map(|mut value| {
        scrub_value(&mut value, home.as_deref());
        value
    });
    match scrubbed.and_then(serde_json::from_value) {
        Ok(r) => r,
        // The report's own JSON read back: cannot fail but for a bug; then the free texts go.
        Err(e) => {
            let mut r = report;
            r.notes = vec![format!(
                "notes left out: they could not be scrubbed of paths: {e}"
            )];
            r.description = None;
            r.shader_abort_message = None;
            r.breadcrumbs.clear();
            r
        }
    }
}

fn scrub_value(value: &mut Value, home: Option<&str>) {
    match value {
        Value::String(s) => {
            if let Some(clean) = scrub_text(s, home) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub_value(v, home)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub_value(v, home)),
        _ => {}
    }
}

/// The home folder, as text, if it is long enough to be told from other text.
fn home_dir() -> Option<String> {
    ["HOME", "USERPROFILE"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .map(|h| h.trim_end_matches(['/', '\\']).to_owned())
        .find(|h| h.len() > 1)
}

/// `text` without absolute paths (see the module docs), or `None` when it holds none.
pub(crate) fn scrub_text(text: &str, home: Option<&str>) -> Option<String> {
    let homed = home
        .filter(|h| text.contains(h))
        .map(|h| text.replace(h, "~"));
    let text = homed.as_deref().unwrap_or(text);
    let mut changed = homed.is_some();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut at_boundary = true;
    while let Some(c) = rest.chars().next() {
        if at_boundary && starts_path(rest) {
            let end = path_end(rest);
            let (path, after) = rest.split_at(end);
            match short_form(path) {
                Some(short) => {
                    out.push_str(&short);
                    changed = true;
                }
                None => out.push_str(path),
            }
            rest = after;
            at_boundary = false;
            continue;
        }
        out.push(c);
        at_boundary = c.is_whitespace() || "\"'`(<[{=,;|".contains(c);
        rest = &rest[c.len_utf8()..];
    }
    changed.then_some(out)
}

/// `/x`, `~/x`, `C:\x`, `C:/x` or `\\x`.
fn starts_path(s: &str) -> bool {
    let b = s.as_bytes();
    let sep = |i: usize| b.get(i).is_some_and(|&c| c == b'/' || c == b'\\');
    let real = |i: usize| {
        b.get(i)
            .is_some_and(|&c| !c.is_ascii_whitespace() && c != b'/')
    };
    (b.first() == Some(&b'/') && real(1))
        || (b.first() == Some(&b'~') && sep(1))
        || (b.first().is_some_and(u8::is_ascii_alphabetic) && b.get(1) == Some(&b':') && sep(2))
        || (b.first() == Some(&b'\\') && b.get(1) == Some(&b'\\'))
}

/// Where the path at the start of `s` ends: at the first character that ends a path, except a
/// space followed by a word with a separator in it (`D:\Games\John Smith\save.dat`: a folder name
/// with a space). A word such as `and/or` after a path is taken with it: hiding too much is the
/// safe side.
fn path_end(s: &str) -> usize {
    let mut end = s.find(ends_path).unwrap_or(s.len());
    while s[end..].starts_with(' ') {
        let word_start = end + 1;
        let word_len = s[word_start..]
            .find(ends_path)
            .unwrap_or(s.len() - word_start);
        let word = &s[word_start..word_start + word_len];
        if word.is_empty() || starts_path(word) || !word.contains(['/', '\\']) {
            break;
        }
        end = word_start + word_len;
    }
    end
}

fn ends_path(c: char) -> bool {
    c.is_whitespace() || "\"'`()<>[]{},;|".contains(c)
}

/// What `path` becomes: `<path>/` and its last part when that looks like a file name, else
/// `<path>`; `None` for a root-level name such as `/dev` or `/16` (no folder to hide).
fn short_form(path: &str) -> Option<String> {
    let rooted_elsewhere = path.starts_with('~') || path.as_bytes().get(1) == Some(&b':');
    let parts: Vec<&str> = path
        .split(['/', '\\'])
        .filter(|p| !p.is_empty())
        .skip(usize::from(rooted_elsewhere))
        .collect();
    if parts.len() < 2 && !rooted_elsewhere {
        return None;
    }
    let ends_in_folder = path.ends_with(['/', '\\']);
    // A user's folder name (`/home/<name>`, `C:\Users\<name>`) is never kept, dots or not.
    let names_a_user = parts.len() >= 2
        && ["home", "Users", "users", "Documents and Settings"].contains(&parts[parts.len() - 2]);
    let last = parts.last().filter(|last| {
        !ends_in_folder && !names_a_user && !last.starts_with('.') && last.contains('.')
    });
    Some(match last {
        Some(name) => format!("{PATH}/{name}"),
        None => PATH.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::scrub_text;

    #[test]
    fn absolute_paths_lose_their_folders_and_keep_file_names() {
        let scrub = |s: &str| scrub_text(s, Some("/home/qa")).unwrap_or_else(|| s.to_owned());
        assert_eq!(
            scrub("panicked at /rustc/abc/library/core/src/option.rs:12:5: boom"),
            "panicked at <path>/option.rs:12:5: boom"
        );
        assert_eq!(scrub("see /home/qa/x.log"), "see <path>/x.log");
        assert_eq!(scrub("in \"/home/john.doe\""), "in \"<path>\"");
        assert_eq!(scrub(r"C:\Users\qa\AppData\game.exe"), "<path>/game.exe");
        assert_eq!(scrub("dir /opt/studio/builds/"), "dir <path>");
        assert_eq!(scrub(r"\\server\share\dump.bin"), "<path>/dump.bin");
        // Issue 51 item 12: a folder name with a space is part of the path.
        assert_eq!(
            scrub(r"D:\Games\John Smith\saves\slot1.sav failed"),
            "<path>/slot1.sav failed"
        );
        assert_eq!(
            scrub("/home/qa/My Games/x.log: denied"),
            "<path>/x.log: denied"
        );
        // Not paths, or nothing to hide.
        for kept in [
            "read/write",
            "frames 10-15 / 16",
            "/dev",
            "models/tree.mesh",
            "https://o1.ingest.sentry.io/api/42/",
            "buffer \"particles\" at 0x1000",
        ] {
            assert_eq!(scrub_text(kept, Some("/home/qa")), None, "{kept}");
        }
    }
}
