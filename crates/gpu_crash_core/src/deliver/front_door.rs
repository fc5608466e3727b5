//! Delivery's one front door: the crash path hands a built report over once, and everything after
//! it is decided here, in one place.
//!
//! ```text
//! crash/ ──report──▶ Delivery::submit_crash / submit_non_fatal ──▶ disk (report, budget)
//!                                                               ──▶ crash-loop limit (count, hold)
//!                                                               ──▶ release health (session end)
//!                                                               ──▶ outbox (envelope) ──▶ Ticket
//!        ──Ticket──▶ Delivery::send (flush within upload_timeout, or from memory)
//!        ──status──▶ Delivery::at_exit (held-back reports, the session's end, a bounded flush)
//! ```
//!
//! The crash path decides what happened (a loss, a hang, a loss that follows its hang, a fault the
//! driver survived, how the run ended); this decides what is kept, counted, held back, queued and
//! sent, and in which order.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sentry::protocol::SessionStatus;
use tracing::{error, info, warn};

use super::crash_loop::{CrashLog, CrashLoopLimit, Upload};
use super::{DeliverySettings, HeldEnvelope, Outbox, ReleaseHealth, SessionTracking};
use crate::report::{write_report_held, CrashReport};

/// Longest upload at a clean exit for the session's `exited` update alone: a player quitting waits
/// for nothing longer (what is not sent goes at the next launch).
const EXIT_SESSION_UPLOAD: Duration = Duration::from_secs(2);
/// How long the startup flush may send what earlier runs left.
const STARTUP_FLUSH: Duration = Duration::from_secs(60);

/// What is left to do for a report after [`Delivery::submit_crash`] (see [`Delivery::send`]).
pub(crate) struct Ticket {
    /// The report's file, when it was written.
    pub written: Option<PathBuf>,
    send: Send,
}

/// What is left to send of a report that is on disk and in the outbox (or could not be).
enum Send {
    /// No DSN, or held back by the crash-loop limit: nothing to send now.
    Nothing,
    /// Queued: flush the outbox.
    Flush,
    /// Could not be queued: send it from memory.
    FromMemory(Box<CrashReport>, Option<Vec<u8>>),
}

/// The reports' way from the crash path to the server. Cheap to clone; every clone is the same.
#[derive(Clone)]
pub(crate) struct Delivery(Arc<Inner>);

struct Inner {
    outbox: Outbox,
    health: ReleaseHealth,
    report_dir: PathBuf,
    crash_loop: CrashLoopLimit,
    log: Mutex<CrashLog>,
}

impl Delivery {
    /// Delivery for the reports of `report_dir` under `settings`, for the application named
    /// `app_name` at `app_version` (the release sessions name). Starts what a launch does: the
    /// startup flush of what earlier runs left (on its own thread) and, per run, the session.
    pub(crate) fn start(
        settings: DeliverySettings,
        report_dir: PathBuf,
        app: (&str, &str),
        crash_loop: CrashLoopLimit,
    ) -> Self {
        super::record_outbox_dir(&report_dir, &settings.outbox_dir);
        let delivery = Self::new(Outbox::new(settings), report_dir, app, crash_loop);
        let outbox = &delivery.0.outbox;
        let started = if outbox.dsn().is_some() {
            // Off this thread: reports an earlier run wrote but never queued (killed between the
            // two) are queued, then what an earlier run could not upload is sent.
            outbox
                .spawn_startup_flush(delivery.0.report_dir.clone(), STARTUP_FLUSH)
                .map(drop)
        } else {
            // Nothing to send, but the folders stay within their budgets over months.
            outbox.spawn_tidy(delivery.0.report_dir.clone()).map(drop)
        };
        if let Err(err) = started {
            warn!("GPU crash reporter: could not start the upload thread: {err}");
        }
        if outbox.settings().session_tracking == SessionTracking::PerRun {
            delivery.0.health.start();
        }
        delivery
    }

    /// Delivery through `outbox`, nothing started (the lifetime simulation starts its own launches).
    pub(crate) fn new(
        outbox: Outbox,
        report_dir: PathBuf,
        (app_name, app_version): (&str, &str),
        crash_loop: CrashLoopLimit,
    ) -> Self {
        let health = ReleaseHealth::new(outbox.clone(), app_name, app_version);
        Self(Arc::new(Inner {
            outbox,
            health,
            report_dir,
            crash_loop,
            log: Mutex::default(),
        }))
    }

    /// The outbox (the lifetime simulation starts its launches through it).
    #[cfg(test)]
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.0.outbox
    }

    /// The limit of one upload at crash time.
    pub(crate) fn upload_timeout(&self) -> Duration {
        self.0.outbox.settings().upload_timeout
    }

    /// Starts a release-health session (ending a running one `exited`). False when sessions are off.
    pub(crate) fn start_session(&self) -> bool {
        self.0.health.start()
    }

    /// Ends the running session `exited` (the game's own session boundary) and sends its update
    /// off this thread, within the upload timeout (offline: at the next upload). False when none
    /// runs.
    pub(crate) fn end_session(&self) -> bool {
        let ended = self.0.health.end(SessionStatus::Exited);
        if ended {
            let outbox = &self.0.outbox;
            let _ = outbox.spawn_background_flush(outbox.settings().upload_timeout);
        }
        ended
    }

    fn log(&self) -> std::sync::MutexGuard<'_, CrashLog> {
        // Plain counters and envelopes: a panic elsewhere while holding the lock leaves them whole.
        self.0.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A crash report (a loss, a hang, or a loss that follows its hang report): counts it (unless
    /// `counted` is off: a loss joining its hang report is the same crash), writes it, keeps the
    /// report folder within its budget, and queues its envelope with the session's end, or holds
    /// it back under the crash-loop limit. Nothing is sent yet: see [`Self::send`].
    pub(crate) fn submit_crash(
        &self,
        report: &mut CrashReport,
        vendor_binary: Option<&[u8]>,
        counted: bool,
    ) -> Ticket {
        let upload = if counted {
            self.log().count(report, self.0.crash_loop)
        } else {
            Upload::Now { release: None }
        };
        // Held (locked) until it is queued: another process's startup requeue leaves it alone.
        let (written, _held) = match persist(&self.0.report_dir, report, vendor_binary) {
            Ok((path, held)) => {
                self.0
                    .outbox
                    .keep_reports_in_budget(&self.0.report_dir, Some(&path));
                (Some(path), Some(held))
            }
            Err(why) => {
                report.notes.push(why);
                (None, None)
            }
        };
        let send = match upload {
            Upload::Now { release } => {
                if let Some(old) = release {
                    // The previous window's held-back report goes too.
                    if let Err(err) = self.0.outbox.release(old) {
                        error!("GPU crash reporter: {err}");
                    }
                }
                self.queue(report, vendor_binary)
            }
            Upload::Hold { key, replaces } => self.hold(report, vendor_binary, key, replaces),
        };
        Ticket { written, send }
    }

    /// A fault the driver survived (a warning): written, kept within the budget and queued. Not a
    /// crash: the crash-loop limit leaves it out (the fault watch rate-limits these), and the
    /// session counts it as an error and goes on.
    pub(crate) fn submit_non_fatal(
        &self,
        report: &mut CrashReport,
        vendor_binary: Option<&[u8]>,
    ) -> Ticket {
        let report_dir = &self.0.report_dir;
        let (written, _held) = match write_report_held(report_dir, report, vendor_binary) {
            Ok((path, held)) => {
                warn!(
                    "GPU fault the driver recovered from (non-fatal, the game goes on): {}; report \
                     written to {}",
                    report.summary,
                    path.display()
                );
                eprintln!(
                    "GPU fault the driver recovered from (non-fatal): {}\n  report: {}",
                    report.summary,
                    path.display()
                );
                self.0
                    .outbox
                    .keep_reports_in_budget(report_dir, Some(&path));
                (Some(path), Some(held))
            }
            Err(err) => {
                warn!(
                    "GPU crash reporter: non-fatal fault report could not be written to {}: {err}",
                    report_dir.display()
                );
                report.notes.push(format!(
                    "not saved on the player's machine: {} could not be written: {err}",
                    report_dir.display()
                ));
                (None, None)
            }
        };
        let send = self.queue(report, vendor_binary);
        Ticket { written, send }
    }

    /// Queues a held-back report in place of the previous one; it is sent later (see
    /// [`CrashLoopLimit`]). One that cannot be held back is queued to be sent now instead: over
    /// the limit, but not lost.
    fn hold(
        &self,
        report: &mut CrashReport,
        vendor_binary: Option<&[u8]>,
        key: Vec<String>,
        replaces: Option<HeldEnvelope>,
    ) -> Send {
        let limit = self.0.crash_loop;
        warn!(
            "GPU crash report held back: the same crash was uploaded {} time(s) in the last {} s \
             (crash loop); it is sent, counting {} earlier loss(es), when the app exits or the crash \
             recurs after the window",
            limit.max_uploads.saturating_sub(1),
            limit.window.as_secs(),
            report.suppressed_duplicates
        );
        let outbox = &self.0.outbox;
        if outbox.dsn().is_none() {
            return Send::Nothing;
        }
        // Held back, the crash's envelope cannot carry the session's end: it goes on its own.
        if let Some(session) = self.0.health.report(report) {
            session.queue_alone();
        }
        let (kept, send) = match outbox.hold(report, vendor_binary) {
            Ok(held) => {
                if let Some(old) = replaces {
                    // The new one (queued above) counts the old one's losses too.
                    old.discard();
                }
                (Some(held), Send::Nothing)
            }
            Err(err) => {
                error!(
                    "GPU crash report could not be held back in {}: {err}; it is queued to be sent \
                     now instead",
                    outbox.dir().display()
                );
                (replaces, self.queue(report, vendor_binary))
            }
        };
        self.log().keep_held(&key, kept);
        send
    }

    /// Queues the report for upload, with the session's end when it is a crash; one that cannot be
    /// queued is to be sent from memory.
    fn queue(&self, report: &mut CrashReport, vendor_binary: Option<&[u8]>) -> Send {
        let outbox = &self.0.outbox;
        if outbox.dsn().is_none() {
            match outbox.dsn_error() {
                Some(err) => error!("GPU crash report not uploaded: bad Sentry DSN: {err}"),
                None => {
                    info!(
                        "GPU crash report not uploaded: no Sentry DSN configured (set SENTRY_DSN)"
                    )
                }
            }
            return Send::Nothing;
        }
        // The run's session ends with its first crash, its update in the crash's envelope; a fault
        // the driver survived only counts as an error of it.
        let session = self.0.health.report(report);
        let queued = outbox.enqueue_with_session(
            report,
            vendor_binary,
            session.as_ref().map(|s| s.update()),
        );
        match (&queued, session) {
            (Ok(_), Some(session)) => session.queued_with_crash(),
            (Err(_), Some(session)) => session.queue_alone(),
            (_, None) => {}
        }
        match queued {
            Ok(_) => Send::Flush,
            Err(err) => {
                error!(
                    "GPU crash report could not be queued for upload: {err}; sending it from memory"
                );
                report
                    .notes
                    .push(format!("not queued for a later upload: {err}"));
                Send::FromMemory(Box::new(report.clone()), vendor_binary.map(<[u8]>::to_vec))
            }
        }
    }

    /// Sends what [`Self::submit_crash`] left, on this thread, within `upload_timeout`. What does
    /// not go out stays in the outbox for the next launch.
    pub(crate) fn send(&self, ticket: Ticket, report_id: &str) {
        let outbox = &self.0.outbox;
        match ticket.send {
            Send::Nothing => {}
            Send::Flush => flush_and_say(outbox, report_id),
            Send::FromMemory(report, vendor_binary) => {
                match outbox.send_from_memory(&report, vendor_binary.as_deref()) {
                    Ok(_) => eprintln!(
                        "GPU crash report uploaded to Sentry from memory (event {}); its envelope \
                         could not be queued",
                        report.event_id()
                    ),
                    Err(why) => error!(
                        "GPU crash report {} not uploaded ({why}) and not queued: a later launch \
                         queues it from its report file, if that was written",
                        report.id
                    ),
                }
            }
        }
    }

    /// The run ends with `status`: the held-back crash-loop reports are released, the session ends,
    /// and both are flushed (the upload timeout with held-back reports, else at most
    /// [`EXIT_SESSION_UPLOAD`]). What is not sent goes at the next launch.
    pub(crate) fn at_exit(&self, status: SessionStatus) {
        // An upload on the wire (the startup flush's) is answered and recorded before the process
        // goes, or the next launch sends it again; no other starts.
        if !self.0.outbox.wind_down(self.upload_timeout()) {
            warn!("GPU crash reporter: an upload was still unanswered at exit; it is sent again at the next launch");
        }
        let held = self.log().take_held();
        let session_ended = self.0.health.end(status);
        if held.is_empty() && !session_ended {
            return;
        }
        let outbox = &self.0.outbox;
        let held_count = held.len();
        for envelope in held {
            if let Err(err) = outbox.release(envelope) {
                error!("GPU crash reporter: {err}");
            }
        }
        let upload_timeout = self.upload_timeout();
        let budget = if held_count == 0 {
            upload_timeout.min(EXIT_SESSION_UPLOAD)
        } else {
            upload_timeout
        };
        let summary = outbox.flush_for_exit(super::deadline_in(budget));
        info!(
            "GPU crash reporter: at exit, {} envelope(s) sent ({held_count} held-back crash-loop \
             report(s), session ended: {session_ended})",
            summary.sent
        );
    }
}

/// Flushes the outbox (this report first, then any other waiting) within `upload_timeout` and
/// says what happened.
fn flush_and_say(outbox: &Outbox, report_id: &str) {
    let summary = outbox.flush_at_crash();
    if summary.sent > 0 {
        info!("GPU crash report uploaded ({} envelope(s))", summary.sent);
        eprintln!("GPU crash report uploaded to Sentry (event {report_id})");
    } else {
        warn!(
            "GPU crash report not uploaded yet ({}); it stays in {} for the next launch",
            summary
                .last_error
                .as_deref()
                .or(summary.stopped.as_deref())
                .unwrap_or("no attempt"),
            outbox.dir().display()
        );
    }
}

/// Writes the report and prints the human lines; on failure logs why and returns it as a note for
/// the report (the game keeps its own crash policy either way).
fn persist(
    dir: &Path,
    report: &mut CrashReport,
    vendor_binary: Option<&[u8]>,
) -> Result<(PathBuf, std::fs::File), String> {
    announce_summary(report);
    match write_report_held(dir, report, vendor_binary) {
        Ok((path, held)) => {
            eprintln!("GPU crash report written to {}", path.display());
            tracing::error!("GPU crash report written to {}", path.display());
            Ok((path, held))
        }
        Err(err) => {
            tracing::error!(
                "GPU crash report could NOT be written to {}: {err} (set {} to a writable directory)",
                dir.display(),
                crate::data_dir::REPORT_DIR_ENV
            );
            eprintln!(
                "GPU crash report could NOT be written to {}: {err}",
                dir.display()
            );
            Err(format!(
                "not saved on the player's machine: {} could not be written: {err}",
                dir.display()
            ))
        }
    }
}

fn announce_summary(report: &CrashReport) {
    for fault in &report.faults {
        eprintln!("{}", fault.summary);
        tracing::error!("{}", fault.summary);
    }
    if report.faults.is_empty() {
        eprintln!("{}", report.summary);
        tracing::error!("{}", report.summary);
    }
}
