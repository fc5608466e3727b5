//! Held envelopes: on disk, so a process that dies loses nothing, but not sent until their own rule
//! lets them go.
//!
//! Two rules hold an envelope back: the crash-loop limit (the window's last upload goes out at exit or
//! when the crash recurs after the window) and a GPU hang, whose report waits a while for the device
//! loss that often follows, so that one fault is one Sentry event. Held envelopes live in `held/`,
//! which no flush reads, and stay locked (see [`super::claim`]) while their process lives. A held
//! envelope whose process died (unlocked) is moved back into the outbox by the next flush of any
//! process: "at the next launch" for a crashed game. No symlink in `held/` (nor `held/` itself as
//! one) is followed.

use std::path::{Path, PathBuf};

use super::claim::Claim;
use super::ledger::{self, DROPPED_DIR};

/// Subdirectory of held envelopes.
pub(crate) const HELD_DIR: &str = "held";

/// An envelope in `held/`, locked by this process. Dropping it without [`Self::release`] or
/// [`Self::discard`] unlocks it: the next flush (of any process) then sends it.
#[derive(Debug)]
pub(crate) struct HeldEnvelope {
    claim: Claim,
}

impl HeldEnvelope {
    pub(crate) fn new(path: PathBuf, file: std::fs::File) -> Self {
        Self {
            claim: Claim::from_locked(path, file),
        }
    }

    /// Where it is held.
    pub(crate) fn path(&self) -> &Path {
        self.claim.path()
    }

    /// Moves it into `outbox_dir` for the next flush; returns its new path.
    pub(crate) fn release_into(mut self, outbox_dir: &Path) -> std::io::Result<PathBuf> {
        let target = outbox_dir.join(self.claim.path().file_name().unwrap_or_default());
        crate::safe_fs::rename(self.claim.path(), &target)?;
        sync_dir(outbox_dir);
        self.claim.renamed(target.clone());
        Ok(target)
    }

    /// Deletes it: a later report stands for it (it counts its losses, or it is the same fault with
    /// more known). Its marker in `dropped/` keeps the startup requeue from queuing its report again
    /// (a report rewritten after this, as a hang report merged into its loss report is, is queued).
    pub(crate) fn discard(self) {
        let path = self.claim.path();
        if let Some(outbox) = path.parent().and_then(Path::parent) {
            // The envelope itself becomes the marker (emptied): this works on a full disk too.
            let _ = ledger::retire(outbox, DROPPED_DIR, path);
        }
    }
}

/// Moves every held envelope of `held_dir` that no live process holds into `outbox_dir`. Returns
/// how many.
pub(crate) fn release_orphans(held_dir: &Path, outbox_dir: &Path) -> usize {
    if std::fs::symlink_metadata(held_dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return 0; // not followed
    }
    let Ok(entries) = std::fs::read_dir(held_dir) else {
        return 0;
    };
    let mut released = 0;
    // `DirEntry::file_type` does not follow symlinks: only regular files are held envelopes.
    let files = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path());
    for path in files {
        let is_envelope = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .is_some_and(|n| {
                !n.starts_with('.') && n.ends_with(&format!(".{}", super::envelope::ENVELOPE_EXT))
            });
        if !is_envelope {
            continue;
        }
        // Locked: its process lives and will release it by its rule. Unreadable now: next time.
        let Ok(Some(claim)) = Claim::try_new(&path) else {
            continue;
        };
        let target = outbox_dir.join(path.file_name().unwrap_or_default());
        if crate::safe_fs::rename(claim.path(), &target).is_ok() {
            released += 1;
        }
    }
    if released > 0 {
        sync_dir(outbox_dir);
        tracing::info!(
            "GPU crash reporter: {released} crash report(s) held back by an earlier run are queued \
             for upload"
        );
    }
    released
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::deliver::{DeliverySettings, Outbox};
    use crate::report::hang_report_for_tests;

    fn outbox(name: &str) -> Outbox {
        let dir =
            std::env::temp_dir().join(format!("gpu-crash-held-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Nothing listens on port 9: every upload fails at once, and the envelope stays.
        let dsn = "http://public@127.0.0.1:9/1".parse().unwrap();
        Outbox::new(DeliverySettings {
            dsn_from_env: false,
            upload_timeout: Duration::from_millis(200),
            ..DeliverySettings::new(Some(dsn), dir)
        })
    }

    /// Another report's flush does not send a held envelope (a crash loop's, a hang waiting for its
    /// loss): it leaves on its own rule, or when its process is gone.
    #[test]
    fn a_held_envelope_leaves_only_on_its_own_rule_or_when_its_process_is_gone() {
        let outbox = outbox("rule");
        let held = outbox.hold(&hang_report_for_tests(), None).unwrap();
        let other = outbox.enqueue(&hang_report_for_tests(), None).unwrap();
        let summary = outbox.flush(Instant::now() + Duration::from_secs(2));
        assert!(summary.attempts >= 1, "{summary:?}");
        assert_eq!(summary.sent, 0);
        assert!(held.path().exists(), "still held");
        assert_eq!(outbox.pending(), vec![other.clone()], "only the queued one");

        // Released by its rule: queued for the next flush.
        let released = outbox.release(held).unwrap();
        assert_eq!(outbox.pending().len(), 2);
        assert!(released.exists());

        // A held envelope whose holder is gone (dropped here; a process that died) is queued by the
        // next flush of anyone.
        let orphan = outbox.hold(&hang_report_for_tests(), None).unwrap();
        let orphan_name = orphan.path().file_name().unwrap().to_owned();
        drop(orphan);
        outbox.flush(Instant::now());
        assert!(
            outbox
                .pending()
                .iter()
                .any(|p| p.file_name() == Some(&orphan_name)),
            "{:?}",
            outbox.pending()
        );
    }
}
