//! One fault, one report: a GPU hang that the driver later turns into a device loss.
//!
//! Drivers with a lockup timeout of their own reset a hung GPU after it (amdgpu: 10 s, against our
//! default `hang_timeout` of 5 s), and the device is then lost, often with fault addresses and a
//! vendor binary the hang report could not have. The hang report is written to disk at once (a
//! process killed now loses nothing) and its envelope is held back (see `Outbox::hold`) for
//! [`crate::GpuCrashReporterPlugin::loss_wait_after_hang`]. A loss of the same device within that
//! time replaces it: the same report id and file, the loss's fault info and verdict, the hang's
//! stall kept; one Sentry event is sent. Otherwise the hang report is sent as it is.

use std::time::Instant;

use crate::deliver::HeldEnvelope;
use crate::report::CrashReport;

/// A hang report written to disk and held back, waiting for the loss that may follow.
pub(crate) struct PendingHang {
    pub report: CrashReport,
    /// Its raw vendor binary, written beside it.
    pub vendor_binary: Option<Vec<u8>>,
    /// The provisional envelope in `held/`; `None` without a DSN or when it could not be written.
    pub held: Option<HeldEnvelope>,
    /// When the hang report was written.
    pub reported_at: Instant,
}

impl PendingHang {
    /// Makes `later` (a loss report of the same device, or a hang report rebuilt with fault info
    /// asked for later) the one report of this fault: the hang report's id and time, so its file on
    /// disk and its envelope are replaced rather than joined by a second; the hang's stall section;
    /// a note and a summary that say both happened. Returns the provisional envelope, to discard
    /// once the new one is queued.
    pub(crate) fn merge_into(self, later: &mut CrashReport) -> Option<HeldEnvelope> {
        let hang = self.report;
        later.id = hang.id;
        later.timestamp_ms = hang.timestamp_ms;
        later.time = hang.time;
        if later.gpu_stage.is_none() {
            later.gpu_stage = hang.gpu_stage;
        }
        let waited = self.reported_at.elapsed().as_millis();
        if let Some(info) = &hang.hang {
            if later.hang.is_none() {
                later.summary = format!(
                    "{} (after a GPU hang of {} ms in frame {})",
                    later.summary, info.stalled_ms, info.oldest_pending_frame
                );
            }
        }
        later.notes.insert(
            0,
            format!(
                "this report replaces the GPU hang report of the same id, written {waited} ms \
                 earlier: {}",
                hang.summary
            ),
        );
        if later.hang.is_none() {
            later.hang = hang.hang;
        }
        self.held
    }
}
