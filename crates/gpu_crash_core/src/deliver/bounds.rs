//! The outbox's bounds: what goes first when it holds more than its settings allow (see
//! [`super::outbox`]).

use std::path::{Path, PathBuf};

use tracing::warn;

use super::claim::Claim;
use super::envelope_name::{EnvelopeClass, EnvelopeName};
use super::ledger::{self, DROPPED_DIR};
use super::outbox::{list_envelopes, Outbox};

/// Session updates' own envelopes the outbox keeps beside its `max_outbox_files` reports: a few
/// hundred bytes each, so a player offline for months (one a launch) keeps the last 500 launches'.
pub(crate) const MAX_SESSION_ENVELOPES: usize = 500;

impl Outbox {
    /// Whether an envelope named `name` of about `bytes` would be the first to go: the outbox has no
    /// room for it (files or bytes) and it is worth least of all.
    pub(crate) fn would_be_dropped(&self, name: &str, bytes: u64) -> bool {
        let settings = &self.inner.settings;
        // Reports only: session updates have a count of their own (see `enforce_bounds`).
        let pending: Vec<PathBuf> = self
            .pending()
            .into_iter()
            .filter(|p| EnvelopeName::of(p).is_none_or(|n| n.class != EnvelopeClass::Session))
            .collect();
        let pending_bytes: u64 = pending
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        let fits = pending.len() < settings.max_outbox_files
            && pending_bytes.saturating_add(bytes) <= settings.max_outbox_bytes;
        if fits {
            return false;
        }
        let rank = drop_rank(Path::new(name));
        pending.iter().all(|p| rank <= drop_rank(p))
    }

    /// Drops what is worth least until the outbox is within its bounds (a process killed after
    /// writing an envelope and before its bounds check leaves it over them).
    pub(crate) fn keep_within_bounds(&self) {
        self.enforce_bounds(&self.inner.dir, None);
    }

    /// Drops the oldest envelopes of `dir` until it is within the count and byte bounds.
    pub(super) fn enforce_bounds(&self, dir: &Path, keep: Option<&Path>) {
        let settings = &self.inner.settings;
        let mut files: Vec<(PathBuf, u64)> = list_envelopes(dir)
            .into_iter()
            .map(|p| {
                let len = std::fs::metadata(&p).map_or(0, |m| m.len());
                (p, len)
            })
            .collect();
        // By worth: session updates first (a count on a chart), then warnings (faults the driver
        // survived), then crash reports; the oldest of each first.
        files.sort_by_key(|(p, _)| drop_rank(p));
        let is_session =
            |p: &Path| EnvelopeName::of(p).is_some_and(|n| n.class == EnvelopeClass::Session);
        // Session updates (a few hundred bytes each) have a count of their own: a week offline
        // must not cost a player's sessions their place beside the crash reports, nor the reverse.
        let mut sessions = files.iter().filter(|(p, _)| is_session(p)).count();
        let mut others = files.len() - sessions;
        let mut total: u64 = files.iter().map(|(_, l)| l).sum();
        let mut i = 0;
        while i < files.len() {
            let (path, len) = &files[i];
            let session = is_session(path);
            let over_count = if session {
                sessions > MAX_SESSION_ENVELOPES
            } else {
                others > settings.max_outbox_files
            };
            if !over_count && total <= settings.max_outbox_bytes {
                if others <= settings.max_outbox_files && sessions <= MAX_SESSION_ENVELOPES {
                    break;
                }
                i += 1;
                continue;
            }
            // Only what this check can claim: never what a flush (of any process) is sending.
            let claim = match Claim::try_new(path) {
                Ok(Some(claim)) if Some(path.as_path()) != keep => claim,
                _ => {
                    i += 1;
                    continue;
                }
            };
            // Its marker in `dropped/`, so that the startup requeue does not queue its report
            // again (the envelope itself, emptied: it needs no free space).
            let removed = ledger::retire(&self.inner.dir, DROPPED_DIR, path).map(|_| ());
            drop(claim);
            match removed {
                Ok(()) => warn!(
                    "GPU crash reporter: {} holds {} file(s), {} bytes (limits {} files and {} \
                     session updates, {} bytes): dropped {}",
                    dir.display(),
                    files.len(),
                    total,
                    settings.max_outbox_files,
                    MAX_SESSION_ENVELOPES,
                    settings.max_outbox_bytes,
                    path.display()
                ),
                Err(e) => warn!("GPU crash reporter: cannot drop {}: {e}", path.display()),
            }
            total -= len;
            if session {
                sessions -= 1;
            } else {
                others -= 1;
            }
            files.remove(i);
        }
    }
}

/// Where `path` stands when the outbox is over its bounds: lowest goes first. Sessions, then
/// warnings, then crash reports ([`EnvelopeClass`]'s order), each oldest first; a name that does not
/// read as ours first of all.
fn drop_rank(path: &Path) -> (u8, EnvelopeClass, u128) {
    match EnvelopeName::of(path) {
        Some(n) => (1, n.class, n.time_ms),
        None => (0, EnvelopeClass::Session, 0),
    }
}
