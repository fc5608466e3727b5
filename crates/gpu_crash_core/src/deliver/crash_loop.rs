//! The crash-loop limit: a game that survives its crashes (renderer recovery) and crashes again and
//! again must not flood the project. Each crash is counted into its report and gets an upload
//! decision: now, or held back in place of the previous held-back one.

use std::time::{Duration, Instant};

use super::sentry_event::fingerprint;
use super::HeldEnvelope;
use crate::report::CrashReport;

/// How many reports of one fingerprint may be uploaded within [`CrashLoopLimit::window`]: a game that
/// survives its crashes (renderer recovery) and crashes again and again must not flood the project.
///
/// The first `max_uploads - 1` reports of a fingerprint in a window upload at once; later ones are
/// held back: each replaces the previous held-back one in the outbox and counts the losses it stands
/// for (`suppressed_duplicates`). The held-back report is the window's last upload: it goes out when
/// the app exits, when the same crash comes again after the window, or at the next launch. Every
/// report is still written to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashLoopLimit {
    /// Uploads of the same fingerprint in one window, the held-back summary included. Default: 3.
    pub max_uploads: u32,
    /// The window. Default: 10 minutes.
    pub window: Duration,
}

impl Default for CrashLoopLimit {
    fn default() -> Self {
        Self {
            max_uploads: 3,
            window: Duration::from_secs(600),
        }
    }
}

/// Crashes of this run, for "how many, how long since the last" and the crash-loop limit.
#[derive(Default)]
pub(crate) struct CrashLog {
    count: u32,
    last_at: Option<Instant>,
    fingerprints: Vec<FingerprintLog>,
}

/// One fingerprint's uploads in its current window.
struct FingerprintLog {
    key: Vec<String>,
    window_start: Instant,
    uploaded: u32,
    /// Crashes held back in this window, and the envelope of the latest (which counts them all).
    held: u32,
    held_envelope: Option<HeldEnvelope>,
}

/// What to do with a report's upload.
#[derive(Debug)]
pub(crate) enum Upload {
    /// Enqueue and send now, after releasing the previous window's held-back envelope, if any.
    Now { release: Option<HeldEnvelope> },
    /// Hold back in place of this earlier held-back envelope (if any), do not send yet.
    Hold {
        /// The fingerprint, to note the new envelope under.
        key: Vec<String>,
        replaces: Option<HeldEnvelope>,
    },
}

impl CrashLog {
    /// Counts the crash into the report (how many this run, since when) and decides its upload under
    /// the crash-loop limit.
    pub(crate) fn count(&mut self, report: &mut CrashReport, limit: CrashLoopLimit) -> Upload {
        let now = Instant::now();
        let log = self;
        log.count += 1;
        report.crashes_this_run = log.count;
        report.ms_since_previous_crash = log
            .last_at
            .map(|t| now.saturating_duration_since(t).as_millis() as u64);
        log.last_at = Some(now);
        let key = fingerprint(report);
        let index = match log.fingerprints.iter().position(|f| f.key == key) {
            Some(i) => i,
            None => {
                log.fingerprints.push(FingerprintLog {
                    key,
                    window_start: now,
                    uploaded: 0,
                    held: 0,
                    held_envelope: None,
                });
                log.fingerprints.len() - 1
            }
        };
        let entry = &mut log.fingerprints[index];
        let mut release = None;
        if now.saturating_duration_since(entry.window_start) >= limit.window {
            // A new window. A report held back in the old one is released into the outbox: the
            // upload below sends it first (oldest first), so it is not lost.
            entry.window_start = now;
            entry.uploaded = 0;
            entry.held = 0;
            release = entry.held_envelope.take();
        }
        if entry.uploaded + 1 < limit.max_uploads {
            entry.uploaded += 1;
            report.suppressed_duplicates = 0;
            return Upload::Now { release };
        }
        entry.held += 1;
        report.suppressed_duplicates = entry.held - 1;
        Upload::Hold {
            key: entry.key.clone(),
            replaces: entry.held_envelope.take(),
        }
    }

    /// Notes `kept` as the held-back envelope of fingerprint `key`.
    pub(crate) fn keep_held(&mut self, key: &[String], kept: Option<HeldEnvelope>) {
        if let Some(entry) = self.fingerprints.iter_mut().find(|f| f.key == key) {
            entry.held_envelope = kept;
        }
    }

    /// Every held-back envelope, taken (the app exits: they go out now).
    pub(crate) fn take_held(&mut self) -> Vec<HeldEnvelope> {
        self.fingerprints
            .iter_mut()
            .filter_map(|f| f.held_envelope.take())
            .collect()
    }
}
