//! The crash path: from a device loss or a stall to a report on disk, then to the outbox.
//!
//! Everything here may run while the render thread is stuck inside wgpu: every wgpu or driver call is
//! time-boxed on a helper thread, and GPU progress is read from marker memory, not asked of wgpu.
//! Every entry runs under [`guarded`]: a panic of ours is logged and counted, never the game's.
//!
//! What each thread does, at most (bounds are the constants below and the settings):
//! - device loss: the thread that saw it (Bevy's main thread, inside its render-error handling, or
//!   a panicking thread) only keeps the index on the lost device (a pin and a hold, two atomic
//!   stores) and starts a report thread; it returns at once, so a game that recovers does not
//!   stall. The report thread makes the fault query ([`QUERY_TIMEOUT`]) and the allocator report
//!   ([`QUERY_TIMEOUT`]) on the lost device (kept alive by its session until then), builds, writes
//!   and queues the report, then uploads it within `upload_timeout`. An app that quits on the loss
//!   waits for it (see [`CrashHandling::wait_for_reports`]).
//! - hang (the watchdog thread): the same queries, the report written, queued and uploaded at once;
//!   a loss of the same device, whenever it comes, joins it (see [`super::hang_then_loss`]). With
//!   `OnHang::Exit`, it waits up to `loss_wait_after_hang` for that loss before ending the process.
//! - a report that cannot be written to disk, or queued, is sent from memory (consent permitting);
//!   its notes say where it could not be written.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sentry::protocol::SessionStatus;
use tracing::{error, info, warn};

use super::crash_loop::{CrashLog, CrashLoopLimit, Upload};
use super::earlier_hang;
use super::exit::{exit_now, OnHang};
use super::hang_then_loss::ReportedHang;
use super::loss_turns::{IndexOnLostDevice, LossClaim, LossTurns};
use super::session::{DeviceSession, DeviceSessions, LossStart};
use super::uploads::RunningUploads;
use super::written::WrittenReports;
use crate::data_dir::REPORT_DIR_ENV;
use crate::deliver::{HeldEnvelope, Outbox, ReleaseHealth};
use crate::guard::guarded;
use crate::index::indexer::IndexerHandle;
use crate::index::{allocator_names, AddressIndex};
use crate::progress::Stall;
use crate::report::{self as report_model, write_report, CrashContext};
use crate::report::{ApplicationInfo, CrashKind, CrashReport};
use crate::time_box::with_timeout;
use crate::vulkan::fault::{FaultQueryError, RawFaultInfo};
use crate::vulkan::GpuCrashCapabilities;

/// Longest wait for wgpu or the driver while building a report (their locks may be held by a render
/// thread stuck on the GPU).
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the driver may take, while the GPU hangs, to answer a KHR fault query.
const HANG_FAULT_WAIT: Duration = Duration::from_millis(100);
/// Longest a report takes from its start to disk and outbox: the fault query and the allocator
/// report (each [`QUERY_TIMEOUT`], plus the KHR wait), and a second for writing and fsyncing the
/// report and its envelope. A loss waits this long for a hang report of its device still being
/// built.
const REPORT_BOUND: Duration = Duration::from_millis(2 * 2_000 + 100 + 1_000);
/// Time beyond the bounds above that a wait for the crash path allows: threads to start, envelopes
/// to be stamped.
const WAIT_MARGIN: Duration = Duration::from_secs(1);
/// Longest upload at a clean exit for the session's `exited` update alone: a player quitting waits
/// for nothing longer (what is not sent goes at the next launch).
const EXIT_SESSION_UPLOAD: Duration = Duration::from_secs(2);

/// A hang's note when the GPU had finished no frame of its device: the hang is in the first frames,
/// or the GPU was still busy with work from outside this process. On the H100 host (driver
/// 580.159.04, headless) an endless shader kept the GPU busy for other processes for 8+ minutes
/// after its own process ended, and each later process hung in its frame 1 (docs/driver-facts.md).
const NO_FRAME_COMPLETED_NOTE: &str =
    "the GPU had finished no frame of this device when it stalled: either this run's first frames \
     hang, or the GPU was still busy with work from before this process (on NVIDIA's Linux driver \
     an earlier process's endless shader kept the GPU busy for minutes after that process ended); \
     if an earlier run reported a hang shortly before, this report may be its consequence";

/// What is left to send of a report that is on disk and in the outbox (or could not be).
enum Delivery {
    /// No DSN, or held back by the crash-loop limit: nothing to send now.
    Nothing,
    /// Queued: flush the outbox.
    Flush,
    /// Could not be queued: send it from memory.
    FromMemory(Box<CrashReport>, Option<Vec<u8>>),
}

/// How the crash path reports and what it does after: the settings it was started with.
#[derive(Clone, Debug)]
pub(crate) struct CrashSettings {
    /// Where reports are written.
    pub report_dir: PathBuf,
    /// The application, as reports name it.
    pub application: ApplicationInfo,
    /// A stall this long is a hang.
    pub hang_timeout: Duration,
    /// What to do once a hang report is on disk.
    pub on_hang: OnHang,
    /// With [`OnHang::Exit`], how long to wait for the loss a hang may become.
    pub loss_wait_after_hang: Duration,
    /// Uploads of one crash per window.
    pub crash_loop: CrashLoopLimit,
    /// End the process once the loss report is done when the app quits on a loss.
    pub end_process_after_loss: bool,
}

/// What the crash path needs, shared by the loss handler, the watchdog thread and the panic hook.
#[derive(Clone)]
pub(crate) struct CrashHandling {
    pub indexer: Arc<IndexerHandle>,
    pub sessions: DeviceSessions,
    pub settings: Arc<CrashSettings>,
    pub reports: WrittenReports,
    pub outbox: Outbox,
    /// Release health: the session a crash ends `crashed` and a clean exit `exited`.
    pub health: ReleaseHealth,
    /// Who uses each mesh (kept by the application), for reports naming a mesh.
    pub asset_users: crate::assets::AssetUsers,
    log: Arc<Mutex<CrashLog>>,
    /// Loss reports and uploads running on threads of their own; the app's exit waits for them
    /// (bounded).
    work: RunningUploads,
    /// Loss reports are built one at a time, in the order the losses came.
    turns: LossTurns,
}

impl CrashHandling {
    pub(crate) fn new(
        indexer: Arc<IndexerHandle>,
        sessions: DeviceSessions,
        settings: CrashSettings,
        outbox: Outbox,
        health: ReleaseHealth,
    ) -> Self {
        Self {
            indexer,
            sessions,
            settings: Arc::new(settings),
            reports: WrittenReports::default(),
            outbox,
            health,
            asset_users: crate::assets::AssetUsers::default(),
            log: Arc::default(),
            work: RunningUploads::default(),
            turns: LossTurns::default(),
        }
    }

    /// The current device was reported lost (Bevy's render-error handler, or the panic hook): keeps
    /// the index on it and hands the report to a thread of its own, then returns. One report per
    /// device; a loss after the device's hang report joins that report.
    pub(crate) fn device_lost(&self, wgpu_description: &str, note: Option<String>) {
        let Some(session) = self.sessions.current() else {
            return;
        };
        if session.is_lost() {
            return; // this device's loss is already being reported
        }
        let started = Instant::now();
        let claim = LossClaim {
            turn: self.turns.ticket(),
            _index: IndexOnLostDevice::new(self.indexer.clone(), session.generation),
        };
        // Binding events from here on came after the loss reached us.
        let ring_at_loss = self.indexer.ring().claimed();
        let this = self.clone();
        let description = wgpu_description.to_owned();
        let job = move || {
            guarded("device-loss report", || {
                this.report_loss(&session, &description, note, ring_at_loss, claim)
            });
        };
        // Shared with the thread, so the job still runs here if no thread can be started.
        let job = Arc::new(Mutex::new(Some(job)));
        let for_thread = job.clone();
        let spawned = self.work.spawn("gpu-crash-report", move || {
            if let Some(job) = take(&for_thread) {
                job();
            }
        });
        if let Err(err) = spawned {
            warn!(
                "GPU crash reporter: cannot start a thread for the loss report ({err}); building \
                 it on this thread"
            );
            if let Some(job) = take(&job) {
                job();
            }
        }
        info!(
            "GPU crash reporter: device loss handed to its report thread in {} us",
            started.elapsed().as_micros()
        );
    }

    /// The report thread of a loss: decides with the session whether it joins a hang report, then
    /// builds, writes, queues and uploads.
    fn report_loss(
        &self,
        session: &Arc<DeviceSession>,
        wgpu_description: &str,
        note: Option<String>,
        ring_at_loss: u64,
        claim: LossClaim,
    ) {
        // Earlier losses' reports first: each is bounded by its build and its wait for a hang report.
        claim
            .turn
            .wait(REPORT_BOUND.saturating_mul(2) + WAIT_MARGIN);
        let follows = match session.begin_loss(REPORT_BOUND) {
            LossStart::AlreadyReported => return,
            LossStart::First => None,
            LossStart::AfterHang(hang) => Some(hang),
        };
        let started = Instant::now();
        let raw = query_fault_bounded(session, Duration::ZERO, true);
        let wgpu_note = (raw.description.is_none() && !wgpu_description.is_empty())
            .then(|| format!("wgpu: {wgpu_description}"));
        // The first frame the GPU did not finish is the one that faulted; binding events after its
        // work was submitted (or after the loss reached us) are after the fault.
        let cut = |index: &AddressIndex| {
            let faulting = session
                .timeline
                .as_ref()
                .and_then(|t| t.frame(t.completed() + 1));
            Some(report_model::fault_cut(
                index,
                faulting.as_ref(),
                ring_at_loss,
            ))
        };
        let (mut report, vendor_binary) =
            self.build(session, CrashKind::DeviceLost, raw, cut, None, wgpu_note);
        report.notes.extend(note);
        let vendor_binary = match follows {
            Some(hang) => {
                let vendor_binary = vendor_binary.or_else(|| hang.vendor_binary.clone());
                hang.merge_into(&mut report);
                info!(
                    "GPU crash reporter: the device loss follows its hang report: the same report, \
                     sent to the hang's Sentry issue"
                );
                vendor_binary
            }
            None => vendor_binary,
        };
        // A loss that joins its hang report is the same crash, counted once.
        let count = report.follows_hang.is_none();
        let delivery = self.settle(&mut report, vendor_binary.as_deref(), count);
        session.end_loss();
        // The index may move on to the next device, and the next loss's report may start.
        drop(claim);
        info!(
            "GPU crash reporter: device loss report on disk {} ms after it started, off the game's \
             threads",
            started.elapsed().as_millis()
        );
        self.send(delivery, &report.id);
    }

    /// The watchdog saw a stall of `hang_timeout`: report it at once (once per stall, never for a
    /// lost device), then apply `on_hang`.
    pub(crate) fn hang(&self, session: &Arc<DeviceSession>, stall: Stall) {
        if !session.begin_hang() {
            return; // the device is lost: its loss report covers the stall
        }
        let settled = guarded("hang report", || self.write_hang(session, stall));
        let (reported, delivery) = match settled {
            Some((reported, delivery)) => (Some(reported), Some(delivery)),
            None => (None, None),
        };
        let id = reported.as_ref().map(|r| r.report.id.clone());
        // Always, even after a panic: a loss waiting for this report goes on.
        session.end_hang(reported);
        if let (Some(delivery), Some(id)) = (delivery, id) {
            guarded("hang upload", || self.send(delivery, &id));
        }
        if let OnHang::Exit(code) = self.settings.on_hang {
            // A driver may still turn the hang into a loss with fault addresses: give it
            // `loss_wait_after_hang`, and its report the time it takes, before the process ends.
            if session.wait_for_loss(self.settings.loss_wait_after_hang) {
                session.wait_for_loss_report(REPORT_BOUND + WAIT_MARGIN);
            }
            self.wait_for_reports();
            self.print_closing_lines();
            exit_now(code);
        }
    }

    /// Builds, writes and queues the hang report.
    fn write_hang(&self, session: &Arc<DeviceSession>, stall: Stall) -> (ReportedHang, Delivery) {
        let raw = query_fault_bounded(session, HANG_FAULT_WAIT, false);
        let cut = stalled_frame_cut(session, stall);
        let (mut report, vendor_binary) = self.build(
            session,
            CrashKind::GpuHang,
            raw,
            |_: &AddressIndex| cut,
            Some(stall),
            None,
        );
        let delivery = self.settle(&mut report, vendor_binary.as_deref(), true);
        let reported = ReportedHang {
            report,
            vendor_binary,
            reported_at: Instant::now(),
        };
        (reported, delivery)
    }

    /// Builds a report of `kind` from what the index, the timeline and the driver know; `cut` reads
    /// the fault's ring position off the index.
    fn build(
        &self,
        session: &DeviceSession,
        kind: CrashKind,
        raw: RawFaultInfo,
        cut: impl FnOnce(&AddressIndex) -> Option<u64>,
        stall: Option<Stall>,
        wgpu_note: Option<String>,
    ) -> (CrashReport, Option<Vec<u8>>) {
        let watchdog_timeout = raw.watchdog_timeout;
        let allocator_device = session.device.clone();
        let allocator_blocks = with_timeout(QUERY_TIMEOUT, move || {
            allocator_device
                .generate_allocator_report()
                .map(|r| allocator_names::blocks_of(&r))
        })
        .flatten();
        // A hang before any frame finished may continue an earlier run's hang: looked up before the
        // index is locked (it reads report files).
        let no_frame_finished = stall.is_some()
            && session
                .timeline
                .as_ref()
                .is_some_and(|t| t.completed() == 0);
        let earlier = no_frame_finished
            .then(|| {
                earlier_hang::find(
                    &self.settings.report_dir,
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64),
                    &session.capabilities,
                    std::process::id(),
                )
            })
            .flatten();
        let mut index = self.indexer.flush();
        let cut = cut(&index);
        let ctx = CrashContext {
            capabilities: &session.capabilities,
            application: &self.settings.application,
            frame: self.indexer.ring().current_frame(),
            binding_events_dropped: self.indexer.ring().dropped(),
            allocator_blocks,
            timeline: session.timeline.as_ref(),
            cut,
            device_generation: session.generation,
            assets: Some(&session.assets),
            asset_users: Some(&self.asset_users),
            pipelines: Some(&session.pipelines),
        };
        let (mut report, vendor_binary) = report_model::build_report(kind, raw, &mut index, &ctx);
        report.notes.extend(wgpu_note);
        if earlier.is_some() {
            // The pipelines queued in this run's first frame only waited their turn: not named.
            report.running = None;
        }
        if let Some(stall) = stall {
            let submitted_at = session
                .timeline
                .as_ref()
                .and_then(|t| t.frame(stall.frame))
                .and_then(|f| f.submitted_at);
            report_model::add_hang_info(
                &mut report,
                &index,
                stall,
                submitted_at,
                self.settings.hang_timeout,
                watchdog_timeout,
            );
            if no_frame_finished {
                report.notes.push(NO_FRAME_COMPLETED_NOTE.to_owned());
            }
        }
        drop(index);
        if let Some(earlier) = earlier {
            report.summary = format!(
                "{}; {:.0} s after a GPU hang reported by an earlier run on this GPU (process {}, \
                 report {}): most likely the GPU was still busy with that run's work, so this \
                 report joins its issue",
                report.summary,
                earlier.ms_before as f64 / 1000.0,
                earlier.process_id,
                earlier.report_id
            );
            report.after_earlier_hang = Some(earlier);
        }
        (report, vendor_binary)
    }

    /// A report of masked, non-fatal faults (see [`super::fault_watch`]): `raw` resolved like a
    /// crash's fault, as of ring position `ring_at` (binding events after it came after the drain).
    pub(crate) fn build_non_fatal(
        &self,
        session: &DeviceSession,
        raw: RawFaultInfo,
        ring_at: u64,
    ) -> (CrashReport, Option<Vec<u8>>) {
        let (mut report, vendor_binary) = self.build(
            session,
            CrashKind::NonFatalFault,
            raw,
            |_: &AddressIndex| Some(ring_at),
            None,
            None,
        );
        // The pass the GPU runs now is not the one that faulted (the driver recovered earlier):
        // no stage in its fingerprint.
        report.gpu_stage = None;
        // Not a crash.
        report.crashes_this_run = 0;
        (report, vendor_binary)
    }

    /// Writes a non-fatal fault report and queues its (warning-level) event, then sends it within
    /// the upload timeout. Not a crash: the crash-loop limit and the closing lines leave it out
    /// (the fault watch rate-limits these per fingerprint).
    pub(crate) fn deliver_non_fatal(&self, report: &mut CrashReport, vendor_binary: Option<&[u8]>) {
        match write_report(&self.settings.report_dir, report, vendor_binary) {
            Ok(path) => {
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
                self.outbox
                    .keep_reports_in_budget(&self.settings.report_dir, Some(&path));
            }
            Err(err) => {
                warn!(
                    "GPU crash reporter: non-fatal fault report could not be written to {}: {err}",
                    self.settings.report_dir.display()
                );
                report.notes.push(format!(
                    "not saved on the player's machine: {} could not be written: {err}",
                    self.settings.report_dir.display()
                ));
            }
        }
        let delivery = self.queue(report, vendor_binary);
        self.send(delivery, &report.id);
    }

    /// Counts the crash (unless `count` is off: a loss joining its hang report), writes the report
    /// and queues its envelope, or holds it back under the crash-loop limit. What is left to send
    /// is returned.
    fn settle(
        &self,
        report: &mut CrashReport,
        vendor_binary: Option<&[u8]>,
        count: bool,
    ) -> Delivery {
        let upload = if count {
            self.log
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .count(report, self.settings.crash_loop)
        } else {
            Upload::Now { release: None }
        };
        match persist(&self.settings.report_dir, report, vendor_binary) {
            Ok(path) => {
                self.outbox
                    .keep_reports_in_budget(&self.settings.report_dir, Some(&path));
                self.reports.push(path);
            }
            Err(why) => report.notes.push(why),
        }
        match upload {
            Upload::Now { release } => {
                if let Some(old) = release {
                    // The previous window's held-back report goes first (oldest first).
                    if let Err(err) = self.outbox.release(old) {
                        error!("GPU crash reporter: {err}");
                    }
                }
                self.queue(report, vendor_binary)
            }
            Upload::Hold { key, replaces } => self.hold(report, vendor_binary, key, replaces),
        }
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
    ) -> Delivery {
        warn!(
            "GPU crash report held back: the same crash was uploaded {} time(s) in the last {} s \
             (crash loop); it is sent, counting {} earlier loss(es), when the app exits or the crash \
             recurs after the window",
            self.settings.crash_loop.max_uploads.saturating_sub(1),
            self.settings.crash_loop.window.as_secs(),
            report.suppressed_duplicates
        );
        if self.outbox.dsn().is_none() {
            return Delivery::Nothing;
        }
        // Held back, the crash's envelope cannot carry the session's end: it goes on its own.
        if let Some(session) = self.health.crash(report.event_id()) {
            session.queue_alone();
        }
        let (kept, delivery) = match self.outbox.hold(report, vendor_binary) {
            Ok(held) => {
                if let Some(old) = replaces {
                    // The new one (queued above) counts the old one's losses too.
                    old.discard();
                }
                (Some(held), Delivery::Nothing)
            }
            Err(err) => {
                error!(
                    "GPU crash report could not be held back in {}: {err}; it is queued to be sent \
                     now instead",
                    self.outbox.dir().display()
                );
                (replaces, self.queue(report, vendor_binary))
            }
        };
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keep_held(&key, kept);
        delivery
    }

    /// The app is exiting: lets the crash path's threads finish, ends the release-health session
    /// (`exited`; `crashed` on a lost device whose report did not end it; `abnormal` while
    /// panicking) and sends it and the held-back crash-loop reports, within the upload timeout.
    pub(crate) fn at_exit(&self) {
        // A GPU that hangs while the app quits is still a hang: the watchdog gets its time to say
        // so before the app's teardown stops it (its device's drop would wait on the GPU anyway).
        if let Some(session) = self.sessions.current() {
            let bound = self
                .settings
                .hang_timeout
                .saturating_add(REPORT_BOUND)
                .saturating_add(WAIT_MARGIN);
            if !session.wait_until_settled(bound) {
                warn!(
                    "GPU crash reporter: the GPU's work is still not done {} ms into the exit",
                    bound.as_millis()
                );
            }
        }
        self.wait_for_reports();
        let held: Vec<HeldEnvelope> = {
            let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            log.take_held()
        };
        let status = if self.sessions.current().is_some_and(|s| s.is_lost()) {
            SessionStatus::Crashed
        } else if std::thread::panicking() {
            SessionStatus::Abnormal
        } else {
            SessionStatus::Exited
        };
        let session_ended = self.health.end(status);
        if held.is_empty() && !session_ended {
            return;
        }
        let held_count = held.len();
        for envelope in held {
            if let Err(err) = self.outbox.release(envelope) {
                error!("GPU crash reporter: {err}");
            }
        }
        let upload_timeout = self.outbox.settings().upload_timeout;
        let budget = if held_count == 0 {
            upload_timeout.min(EXIT_SESSION_UPLOAD)
        } else {
            upload_timeout
        };
        let summary = self.outbox.flush(crate::deliver::deadline_in(budget));
        info!(
            "GPU crash reporter: at exit, {} envelope(s) sent ({held_count} held-back crash-loop              report(s), session ended: {session_ended})",
            summary.sent
        );
    }

    /// Waits for this run's loss reports and their uploads (from any thread; every waiter sees them
    /// end). Each ends by itself: its report within [`REPORT_BOUND`] (plus the wait for a hang
    /// report it joins), its upload within the upload timeout.
    pub(crate) fn wait_for_reports(&self) {
        let limit = REPORT_BOUND
            .saturating_mul(2)
            .saturating_add(self.outbox.settings().upload_timeout)
            .saturating_add(WAIT_MARGIN);
        if !self.work.wait(limit) {
            warn!(
                "GPU crash reporter: a report or upload still runs after {} ms; what it did not \
                 send stays in the outbox for the next launch",
                limit.as_millis()
            );
        }
    }

    /// Queues the report for upload; one that cannot be queued is to be sent from memory.
    fn queue(&self, report: &mut CrashReport, vendor_binary: Option<&[u8]>) -> Delivery {
        if self.outbox.dsn().is_none() {
            match self.outbox.dsn_error() {
                Some(err) => error!("GPU crash report not uploaded: bad Sentry DSN: {err}"),
                None => {
                    info!(
                        "GPU crash report not uploaded: no Sentry DSN configured (set SENTRY_DSN)"
                    )
                }
            }
            return Delivery::Nothing;
        }
        // The run's session ends with its first crash, its update in the crash's envelope; a fault
        // the driver survived only counts as an error of it.
        let session = self.health.report(report);
        let queued = self.outbox.enqueue_with_session(
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
            Ok(_) => Delivery::Flush,
            Err(err) => {
                error!("GPU crash report could not be queued for upload: {err}; sending it from memory");
                report
                    .notes
                    .push(format!("not queued for a later upload: {err}"));
                Delivery::FromMemory(Box::new(report.clone()), vendor_binary.map(<[u8]>::to_vec))
            }
        }
    }

    /// Sends what [`Self::settle`] left, on this thread, within `upload_timeout`. What does not go
    /// out stays in the outbox for the next launch.
    fn send(&self, delivery: Delivery, report_id: &str) {
        match delivery {
            Delivery::Nothing => {}
            Delivery::Flush => flush_and_say(&self.outbox, report_id),
            Delivery::FromMemory(report, vendor_binary) => {
                match self
                    .outbox
                    .send_from_memory(&report, vendor_binary.as_deref())
                {
                    Ok(_) => eprintln!(
                        "GPU crash report uploaded to Sentry from memory (event {}); no copy is on disk",
                        report.event_id()
                    ),
                    Err(why) => error!(
                        "GPU crash report {} is lost: not on disk, and not uploaded ({why})",
                        report.id
                    ),
                }
            }
        }
    }
}

/// Takes a job shared with a thread that may or may not have started.
fn take<F>(job: &Mutex<Option<F>>) -> Option<F> {
    job.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Ring position after the stalled frame's work was submitted: later binding events came after the
/// GPU stopped and do not resolve a hang's fault addresses. `None` without the frame's markers.
fn stalled_frame_cut(session: &DeviceSession, stall: Stall) -> Option<u64> {
    session
        .timeline
        .as_ref()
        .and_then(|t| t.frame(stall.frame))
        .and_then(|f| f.ring_after)
}

/// Longest a crash path's fault query waits for the non-fatal fault watch's drain in progress: the
/// watch's own wait on the driver, and some.
const DRAIN_WAIT: Duration = Duration::from_millis(500);

/// [`crate::vulkan::query_device_fault`] on its own thread, for at most [`QUERY_TIMEOUT`] plus the
/// KHR wait. Reports of this fault the non-fatal fault watch drained come first; the watch drains
/// nothing while this query runs (it holds the session's drain lock, see [`DeviceSession`]).
fn query_fault_bounded(
    session: &DeviceSession,
    khr_timeout: Duration,
    device_lost: bool,
) -> RawFaultInfo {
    let (device, caps): (wgpu::Device, GpuCrashCapabilities) =
        (session.device.clone(), session.capabilities.clone());
    let mut drain = session.drain_lock_for_crash(DRAIN_WAIT);
    let earlier = drain.as_deref_mut().map(std::mem::take).unwrap_or_default();
    let queried = with_timeout(QUERY_TIMEOUT + khr_timeout, {
        let earlier = earlier.clone();
        move || {
            crate::vulkan::query_device_fault(&device, &caps, khr_timeout, device_lost, &earlier)
        }
    });
    drop(drain);
    queried.unwrap_or_else(|| {
        let mut info = RawFaultInfo {
            errors: vec![FaultQueryError::TimedOut(QUERY_TIMEOUT + khr_timeout)],
            ..Default::default()
        };
        info.add_khr_reports(&earlier);
        info
    })
}

/// Flushes the outbox (this report and any other waiting) within `upload_timeout` and says what
/// happened.
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
) -> Result<PathBuf, String> {
    announce_summary(report);
    match write_report(dir, report, vendor_binary) {
        Ok(path) => {
            eprintln!("GPU crash report written to {}", path.display());
            tracing::error!("GPU crash report written to {}", path.display());
            Ok(path)
        }
        Err(err) => {
            tracing::error!(
                "GPU crash report could NOT be written to {}: {err} (set {REPORT_DIR_ENV} to a writable directory)",
                dir.display()
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
