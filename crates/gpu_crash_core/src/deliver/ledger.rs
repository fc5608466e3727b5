//! What the outbox remembers of envelopes that left it: an empty marker of the envelope's name in
//! `sent/` (a server accepted it) or `dropped/` (the outbox let it go unsent: over its bounds, or
//! discarded because a later report stands for it).
//!
//! Markers make a report go out once however often it is queued again (`sent/`), and tell the
//! startup requeue which reports on disk the outbox already dealt with (both; see
//! [`super::requeue`]). A marker lives as long as the report it stands for: no count near the report
//! budget trims it (a trimmed marker let a report be sent again at every launch, issue 51 item 1).
//! The startup requeue removes the markers of reports no longer on disk ([`forget_gone`]), and a
//! session's marker once its envelope is gone; in an outbox the game put elsewhere, which may serve
//! folders it cannot see, report markers beyond [`REPORT_MARKERS_KEPT`] of each kind. No symlink is followed: a marker is created new, a symlink in
//! its place is removed first, and a folder that is a symlink is not written into.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::envelope_name::{EnvelopeClass, EnvelopeName};

use crate::safe_fs;

/// Subdirectory of markers of sent envelopes.
pub(crate) const SENT_DIR: &str = "sent";
/// Subdirectory of markers of envelopes dropped unsent.
pub(crate) const DROPPED_DIR: &str = "dropped";

/// The marker of `envelope_name` in `outbox/<kind>`.
pub(crate) fn marker(outbox: &Path, kind: &str, envelope_name: &str) -> PathBuf {
    outbox.join(kind).join(envelope_name)
}

/// Whether `outbox/<kind>` holds a marker (a regular file, not a symlink) of `envelope_name`.
pub(crate) fn has(outbox: &Path, kind: &str, envelope_name: &str) -> bool {
    safe_fs::is_plain_file(&marker(outbox, kind, envelope_name))
}

/// Leaves the marker of `envelope_name` in `outbox/<kind>`. An existing marker is refreshed (its
/// time is when the envelope last left).
pub(crate) fn record(outbox: &Path, kind: &str, envelope_name: &str) -> std::io::Result<()> {
    let dir = safe_fs::private_subdir(outbox, kind)?;
    let path = dir.join(envelope_name);
    // Whatever has the name (an old marker, a planted symlink) goes: removing a symlink removes the
    // link, never what it points to.
    match crate::safe_fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    drop(safe_fs::create_private_new(&path)?);
    Ok(())
}

/// Makes the envelope at `path` its own marker in `outbox/<kind>`: moved there and emptied, its
/// time still when the envelope was written (what the startup requeue and the report budget compare
/// with the report's own time, see [`super::requeue`]). A rename needs no free space, so this works on a full disk, where a new marker file could not be
/// created; where the rename fails (a file open elsewhere on Windows), an empty marker is created
/// and the envelope removed, the marker first. Returns the marker's path, or `Err` with the
/// envelope still where it was.
pub(crate) fn retire(outbox: &Path, kind: &str, path: &Path) -> std::io::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let moved = safe_fs::private_subdir(outbox, kind).and_then(|dir| {
        let target = dir.join(&name);
        safe_fs::rename(path, &target).map(|()| target)
    });
    match moved {
        Ok(marker) => {
            // Only the bytes go: a marker that keeps them is still a marker.
            let _ = safe_fs::truncate_regular(&marker);
            Ok(marker)
        }
        Err(_) => {
            let written = std::fs::metadata(path).and_then(|m| m.modified());
            record(outbox, kind, &name)?;
            let marker = marker(outbox, kind, &name);
            // Its time, too, is when the envelope was written (see above).
            if let (Ok(written), Ok(file)) = (written, safe_fs::open_regular(&marker)) {
                let _ = file.set_modified(written);
            }
            safe_fs::remove_file(path)?;
            Ok(marker)
        }
    }
}

/// Removes the markers (in `sent/` and `dropped/`) that stand for nothing any more: a report's
/// whose id is not in `reports_on_disk`, a session's whose envelope is no longer in the outbox.
/// Only markers older than `before` go: a process beside this one may have written a report and
/// its marker after `reports_on_disk` was listed. `None`: the outbox is not the report folder's
/// own and may serve folders this process cannot see (a launcher's), so report markers are kept,
/// the newest [`REPORT_MARKERS_KEPT`] of each kind, far more than any report budget keeps reports.
/// Returns how many were removed.
pub(crate) fn forget_gone(
    outbox: &Path,
    reports_on_disk: Option<&HashSet<String>>,
    before: SystemTime,
) -> usize {
    let mut removed = 0;
    for kind in [SENT_DIR, DROPPED_DIR] {
        for entry in entries_of(outbox, kind) {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Only our markers: a name that is not an outbox name is left alone.
            let Some(parsed) = EnvelopeName::parse(&name) else {
                continue;
            };
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let old = meta.modified().is_ok_and(|t| t < before);
            let stands_for_something = !old
                || match parsed.class {
                    // A dropped session's marker is the only word of its drop (sessions go
                    // first from a full outbox): kept, the newest few, see below.
                    EnvelopeClass::Session if kind == DROPPED_DIR => true,
                    EnvelopeClass::Session => outbox.join(&name).exists(),
                    _ => reports_on_disk.is_none_or(|on_disk| on_disk.contains(&parsed.report_id)),
                };
            if !stands_for_something {
                if safe_fs::remove_file(entry.path()).is_ok() {
                    removed += 1;
                }
            } else if meta.len() > 0 {
                // A marker that kept its envelope's bytes (killed between the move and the
                // emptying, or emptied while locked elsewhere): only its name is needed.
                let _ = safe_fs::truncate_regular(&entry.path());
            }
        }
    }
    let trimmed = if reports_on_disk.is_none() {
        trim_report_markers(outbox)
    } else {
        0
    };
    removed + trim_dropped_sessions(outbox) + trimmed
}

/// Report markers kept of each kind in an outbox that is not its report folder's own (see
/// [`forget_gone`]): ten times the default report budget (100), so a marker goes only long after
/// its report has.
pub(crate) const REPORT_MARKERS_KEPT: usize = 1000;

/// Removes the oldest report markers (by name: the report's time) beyond [`REPORT_MARKERS_KEPT`]
/// in `sent/` and in `dropped/`. Returns how many.
fn trim_report_markers(outbox: &Path) -> usize {
    let mut removed = 0;
    for kind in [SENT_DIR, DROPPED_DIR] {
        let mut markers: Vec<PathBuf> = entries_of(outbox, kind)
            .into_iter()
            .map(|e| e.path())
            .filter(|p| EnvelopeName::of(p).is_some_and(|n| n.class != EnvelopeClass::Session))
            .collect();
        if markers.len() <= REPORT_MARKERS_KEPT {
            continue;
        }
        markers.sort();
        let excess = markers.len() - REPORT_MARKERS_KEPT;
        removed += markers[..excess]
            .iter()
            .filter(|p| safe_fs::remove_file(p).is_ok())
            .count();
    }
    removed
}

/// Removes the `sent/` markers of report `report_id` (its report was removed by the report budget:
/// they can never bring it back). `dropped/` markers stay until the next startup: they say what
/// went unsent.
pub(crate) fn forget_report(outbox: &Path, report_id: &str) {
    for entry in entries_of(outbox, SENT_DIR) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if EnvelopeName::parse(&name).is_some_and(|n| n.report_id == report_id) {
            let _ = safe_fs::remove_file(entry.path());
        }
    }
}

/// Dropped sessions' markers kept: they only say that a count went unsent (no state is read from
/// them), and a player offline for weeks drops one a launch.
pub(crate) const DROPPED_SESSIONS_KEPT: usize = 200;

/// Removes the oldest dropped sessions' markers beyond [`DROPPED_SESSIONS_KEPT`] (by name: the
/// sessions' start). Returns how many.
fn trim_dropped_sessions(outbox: &Path) -> usize {
    let mut sessions: Vec<PathBuf> = entries_of(outbox, DROPPED_DIR)
        .into_iter()
        .map(|e| e.path())
        .filter(|p| EnvelopeName::of(p).is_some_and(|n| n.class == EnvelopeClass::Session))
        .collect();
    if sessions.len() <= DROPPED_SESSIONS_KEPT {
        return 0;
    }
    sessions.sort();
    let excess = sessions.len() - DROPPED_SESSIONS_KEPT;
    sessions[..excess]
        .iter()
        .filter(|p| safe_fs::remove_file(p).is_ok())
        .count()
}

/// The entries of the marker folder `outbox/<kind>`; none when it is missing or not a folder of
/// its own. Never through a symlink: a planted `sent -> ~/Documents` must not lead a clean-up into
/// the player's files.
fn entries_of(outbox: &Path, kind: &str) -> Vec<std::fs::DirEntry> {
    let dir = outbox.join(kind);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(Result::ok).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(outbox: &Path, kind: &str) -> Vec<String> {
        let mut names: Vec<String> = entries_of(outbox, kind)
            .iter()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Issue 51 review: an outbox the game put elsewhere never learns which reports exist, yet its
    /// markers do not pile up over months of launches: a sent session's marker goes once its
    /// envelope is gone, report markers beyond [`REPORT_MARKERS_KEPT`] go oldest first, and a
    /// marker that kept its envelope's bytes is emptied.
    #[test]
    fn an_outbox_elsewhere_keeps_a_bounded_number_of_markers() {
        let outbox = crate::deliver::tests::fresh_dir("ledger-elsewhere");
        for t in 0..(REPORT_MARKERS_KEPT as u64 + 30) {
            record(
                outbox.as_path(),
                SENT_DIR,
                &format!("{t:020}-r{t}.envelope"),
            )
            .unwrap();
        }
        for t in 0..40u64 {
            let sid = format!("{t:032x}");
            record(
                &outbox,
                SENT_DIR,
                &format!("{t:020}-session-{sid}.envelope"),
            )
            .unwrap();
        }
        // One session's update still waits: its marker (of an earlier update) stays.
        let waiting = format!("{:020}-session-{:032x}.envelope", 39, 39);
        std::fs::write(outbox.join(&waiting), b"x").unwrap();
        // A marker killed between its move and its emptying.
        std::fs::write(
            marker(&outbox, SENT_DIR, "00000000000000000999-r999.envelope"),
            b"big",
        )
        .unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(1);
        forget_gone(&outbox, None, later);
        let sent = names(&outbox, SENT_DIR);
        let reports: Vec<&String> = sent.iter().filter(|n| !n.contains("-session-")).collect();
        assert_eq!(reports.len(), REPORT_MARKERS_KEPT);
        assert_eq!(
            reports[0],
            &format!("{:020}-r30.envelope", 30),
            "the oldest went"
        );
        let sessions: Vec<&String> = sent.iter().filter(|n| n.contains("-session-")).collect();
        assert_eq!(sessions, [&waiting]);
        let emptied = marker(&outbox, SENT_DIR, "00000000000000000999-r999.envelope");
        assert_eq!(std::fs::metadata(emptied).unwrap().len(), 0);
        // The report folder's own outbox keeps every report marker whose report is on disk.
        let on_disk: HashSet<String> = (0..2000u64).map(|t| format!("r{t}")).collect();
        for t in 2000..2100u64 {
            record(&outbox, SENT_DIR, &format!("{t:020}-r{t}.envelope")).unwrap();
        }
        forget_gone(&outbox, Some(&on_disk), later);
        assert_eq!(
            names(&outbox, SENT_DIR)
                .iter()
                .filter(|n| !n.contains("-session-"))
                .count(),
            REPORT_MARKERS_KEPT,
            "reports r2000.. are not on disk: their markers went; the rest stayed, uncounted"
        );
    }
}
