//! What the outbox remembers of envelopes that left it: an empty marker of the envelope's name in
//! `sent/` (a server accepted it) or `dropped/` (the outbox let it go unsent: over its bounds, or
//! discarded because a later report stands for it).
//!
//! Markers make a report go out once however often it is queued again (`sent/`), and tell the
//! startup requeue which reports on disk the outbox already dealt with (both; see
//! [`super::requeue`]). Each folder keeps the newest [`MAX_MARKERS`]. No symlink is followed: a
//! marker is created new, a symlink in its place is removed first, and a folder that is a symlink is
//! not written into.

use std::path::{Path, PathBuf};

use crate::safe_fs;

/// Subdirectory of markers of sent envelopes.
pub(crate) const SENT_DIR: &str = "sent";
/// Subdirectory of markers of envelopes dropped unsent.
pub(crate) const DROPPED_DIR: &str = "dropped";
/// Markers kept per folder: far more than the outbox holds, a few bytes of metadata each.
pub(crate) const MAX_MARKERS: usize = 1000;

/// The marker of `envelope_name` in `outbox/<kind>`.
pub(crate) fn marker(outbox: &Path, kind: &str, envelope_name: &str) -> PathBuf {
    outbox.join(kind).join(envelope_name)
}

/// Whether `outbox/<kind>` holds a marker (a regular file, not a symlink) of `envelope_name`.
pub(crate) fn has(outbox: &Path, kind: &str, envelope_name: &str) -> bool {
    safe_fs::is_plain_file(&marker(outbox, kind, envelope_name))
}

/// Leaves the marker of `envelope_name` in `outbox/<kind>`, dropping the oldest beyond
/// [`MAX_MARKERS`]. An existing marker is refreshed (its time is when the envelope last left).
pub(crate) fn record(outbox: &Path, kind: &str, envelope_name: &str) -> std::io::Result<()> {
    let dir = safe_fs::private_subdir(outbox, kind)?;
    let path = dir.join(envelope_name);
    // Whatever has the name (an old marker, a planted symlink) goes: removing a symlink removes the
    // link, never what it points to.
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    drop(safe_fs::create_private_new(&path)?);
    trim(&dir);
    Ok(())
}

/// Drops the oldest markers (by name: report time) beyond [`MAX_MARKERS`].
fn trim(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    if names.len() <= MAX_MARKERS {
        return;
    }
    names.sort();
    for old in &names[..names.len() - MAX_MARKERS] {
        let _ = std::fs::remove_file(old);
    }
}
