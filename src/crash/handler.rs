//! The crash path: from a device loss or a stall to a report on disk, then to the outbox.
//!
//! Everything here may run while the render thread is stuck inside wgpu: every wgpu or driver call is
//! time-boxed on a helper thread, and GPU progress is read from marker memory, not asked of wgpu.
//!
//! What the thread that reports does, at most (bounds are the constants below and the settings):
//! - device loss (the main thread, inside Bevy's render-error handling): the fault query
//!   ([`QUERY_TIMEOUT`]), the allocator report ([`QUERY_TIMEOUT`]), building the report, writing it
//!   and its envelope (fsyncs). The upload runs on its own thread; the app's exit waits for it for at
//!   most `upload_timeout`, so a game that recovers never stalls on the network and one that quits
//!   still sends.
//! - hang (the watchdog thread): the same, then up to `loss_wait_after_hang` for the loss that may
//!   follow (see [`super::hang_then_loss`]), then the upload within `upload_timeout`.
//! - a report that cannot be written to disk, or queued, is sent from memory (consent permitting);
//!   its notes say where it could not be written.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::log::{error, info, warn};
use bevy::prelude::Resource;
use bevy::render::renderer::RenderDevice;

use super::bounded::with_timeout;
use super::exit::{exit_now, OnHang};
use super::hang_then_loss::PendingHang;
use super::session::{DeviceSession, DeviceSessions};
use super::uploads::RunningUploads;
use crate::data_dir::REPORT_DIR_ENV;
use crate::deliver::event::fingerprint;
use crate::deliver::{HeldEnvelope, Outbox};
use crate::index::allocator_names;
use crate::progress::Stall;
use crate::report::{self as report_model, write_report, CrashContext};
use crate::report::{ApplicationInfo, CrashKind, CrashReport};
use crate::vulkan::fault::{FaultQueryError, RawFaultInfo};
use crate::vulkan::GpuCrashCapabilities;
use crate::{GpuCrashReporter, GpuCrashReports};

/// Longest wait for wgpu or the driver while building a report (their locks may be held by a render
/// thread stuck on the GPU).
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the driver may take, after our hang report, to ask for fault info once more (KHR).
const HANG_FAULT_WAIT: Duration = Duration::from_millis(100);
/// How often the watchdog looks for the loss after a hang report.
const LOSS_POLL: Duration = Duration::from_millis(20);
/// Time beyond `upload_timeout` an exit waits for an upload: building and stamping its envelope.
const UPLOAD_WAIT_MARGIN: Duration = Duration::from_secs(1);

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
struct CrashLog {
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
enum Upload {
    /// Enqueue and send now, after releasing the previous window's held-back envelope, if any.
    Now { release: Option<HeldEnvelope> },
    /// Hold back in place of this earlier held-back envelope (if any), do not send yet.
    Hold {
        /// The fingerprint, to note the new envelope under.
        key: Vec<String>,
        replaces: Option<HeldEnvelope>,
    },
}

/// Where the upload of a report runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UploadOn {
    /// A thread of its own: the reporting thread is the game's main thread.
    Background,
    /// The reporting thread (the watchdog), within `upload_timeout`.
    ThisThread,
}

/// What the crash path needs, shared by the error handler (main world) and the watchdog thread.
#[derive(Resource, Clone)]
pub(crate) struct CrashHandling {
    pub reporter: GpuCrashReporter,
    pub sessions: DeviceSessions,
    pub report_dir: PathBuf,
    pub application: ApplicationInfo,
    pub hang_timeout: Duration,
    pub on_hang: OnHang,
    pub loss_wait_after_hang: Duration,
    pub crash_loop: CrashLoopLimit,
    pub reports: GpuCrashReports,
    pub outbox: Outbox,
    /// Entities using each mesh (main-world observers), for reports naming a mesh.
    pub asset_users: crate::assets::AssetUsers,
    log: Arc<Mutex<CrashLog>>,
    /// Uploads running on their own threads; the app's exit waits for them (bounded).
    uploads: RunningUploads,
}

impl CrashHandling {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        reporter: GpuCrashReporter,
        sessions: DeviceSessions,
        report_dir: PathBuf,
        application: ApplicationInfo,
        hang_timeout: Duration,
        on_hang: OnHang,
        loss_wait_after_hang: Duration,
        crash_loop: CrashLoopLimit,
        reports: GpuCrashReports,
        outbox: Outbox,
    ) -> Self {
        Self {
            reporter,
            sessions,
            report_dir,
            application,
            hang_timeout,
            on_hang,
            loss_wait_after_hang,
            crash_loop,
            reports,
            outbox,
            asset_users: crate::assets::AssetUsers::default(),
            log: Arc::default(),
            uploads: RunningUploads::default(),
        }
    }

    /// Bevy reported the device lost: one report per device.
    pub(crate) fn device_lost(&self, wgpu_description: &str, note: Option<String>) {
        let Some(session) = self.sessions.current() else {
            return;
        };
        if !session.mark_lost() {
            return; // this device's loss is already reported
        }
        let started = Instant::now();
        // What is torn down from now on (wgpu destroys everything after a loss) stays in the index.
        self.reporter.hold_unbinds(true);
        let raw = query_fault_bounded(&session, Duration::ZERO, true);
        let wgpu_note = (raw.description.is_none() && !wgpu_description.is_empty())
            .then(|| format!("wgpu: {wgpu_description}"));
        // The first frame the GPU did not finish is the one that faulted; binding events after its
        // work was submitted (or after wgpu's teardown) are after the fault.
        let cut = {
            let index = self.reporter.index();
            let faulting = session
                .timeline
                .as_ref()
                .and_then(|t| t.frame(t.completed() + 1));
            report_model::fault_cut(&index, faulting.as_ref(), self.reporter.ring_position())
        };
        let (mut report, vendor_binary) = self.build(
            &session,
            CrashKind::DeviceLost,
            raw,
            Some(cut),
            None,
            wgpu_note,
        );
        report.notes.extend(note);
        let mut vendor_binary = vendor_binary;
        if let Some(hang) = session.take_pending_hang() {
            if vendor_binary.is_none() {
                vendor_binary = hang.vendor_binary.clone();
            }
            if let Some(provisional) = hang.merge_into(&mut report) {
                provisional.discard();
            }
            info!(
                "GPU crash reporter: the device loss follows the hang report; one report for both"
            );
        }
        self.finish(report, vendor_binary, UploadOn::Background, true);
        session.mark_loss_report_done();
        info!(
            "GPU crash reporter: device loss reported in {} ms on the thread that saw it; the \
             upload runs in the background",
            started.elapsed().as_millis()
        );
    }

    /// The watchdog saw a stall of `hang_timeout`: report it (once per stall), wait a while for the
    /// loss that may follow (one report for both), then apply `on_hang`.
    pub(crate) fn hang(&self, session: &Arc<DeviceSession>, stall: Stall) {
        let raw = query_fault_bounded(session, HANG_FAULT_WAIT, false);
        let (mut report, vendor_binary) = self.build(
            session,
            CrashKind::GpuHang,
            raw,
            stalled_frame_cut(session, stall),
            Some(stall),
            None,
        );
        // Provisional: on disk and held back now, so a process killed while it waits loses nothing.
        report.crashes_this_run = self.crashes_so_far() + 1;
        if let Ok(path) = persist(
            &self.report_dir,
            &mut report,
            vendor_binary.as_deref(),
            true,
        ) {
            self.reports.push(path);
        }
        let held = self.hold_provisional(&report, vendor_binary.as_deref());
        session.put_pending_hang(PendingHang {
            report,
            vendor_binary,
            held,
            reported_at: Instant::now(),
        });
        let waited_until = Instant::now() + self.loss_wait_after_hang;
        while Instant::now() < waited_until && !session.is_lost() {
            std::thread::sleep(LOSS_POLL);
        }
        if session.is_lost() {
            // The loss handler takes the hang report and replaces it. Wait for its report to be
            // queued (bounded by its own queries), so an exit below does not cut it off.
            let done_by = Instant::now() + QUERY_TIMEOUT * 3;
            while !session.loss_report_done() && Instant::now() < done_by {
                std::thread::sleep(LOSS_POLL);
            }
        }
        // Still here: no loss came in time (or its handler is stuck): the hang report stands.
        if let Some(pending) = session.take_pending_hang() {
            self.finish_hang(session, stall, pending);
        }
        if let OnHang::Exit(code) = self.on_hang {
            self.wait_for_uploads();
            exit_now(code);
        }
    }

    /// No loss followed the hang in time: ask the driver once more when the process is about to end
    /// (its last chance to say more), then send the hang report.
    fn finish_hang(&self, session: &Arc<DeviceSession>, stall: Stall, pending: PendingHang) {
        let later = matches!(self.on_hang, OnHang::Exit(_))
            .then(|| query_fault_bounded(session, HANG_FAULT_WAIT, false))
            .filter(|raw| raw.description.is_some() || !raw.addresses.is_empty());
        let (report, vendor_binary, announce) = match later {
            Some(raw) => {
                let (mut report, vendor_binary) = self.build(
                    session,
                    CrashKind::GpuHang,
                    raw,
                    stalled_frame_cut(session, stall),
                    Some(stall),
                    None,
                );
                let vendor_binary = vendor_binary.or_else(|| pending.vendor_binary.clone());
                if let Some(provisional) = pending.merge_into(&mut report) {
                    provisional.discard();
                }
                (report, vendor_binary, true)
            }
            None => {
                if let Some(provisional) = pending.held {
                    provisional.discard();
                }
                (pending.report, pending.vendor_binary, false)
            }
        };
        self.finish(report, vendor_binary, UploadOn::ThisThread, announce);
    }

    /// Builds a report of `kind` from what the index, the timeline and the driver know.
    fn build(
        &self,
        session: &DeviceSession,
        kind: CrashKind,
        raw: RawFaultInfo,
        cut: Option<u64>,
        stall: Option<Stall>,
        wgpu_note: Option<String>,
    ) -> (CrashReport, Option<Vec<u8>>) {
        let watchdog_timeout = raw.watchdog_timeout;
        let allocator_device = session.device.clone();
        let allocator_blocks = with_timeout(QUERY_TIMEOUT, move || {
            allocator_device
                .wgpu_device()
                .generate_allocator_report()
                .map(|r| allocator_names::blocks_of(&r))
        })
        .flatten();
        let ctx = CrashContext {
            capabilities: &session.capabilities,
            application: &self.application,
            frame: self.reporter.current_frame(),
            binding_events_dropped: self.reporter.binding_events_dropped(),
            allocator_blocks,
            timeline: session.timeline.as_ref(),
            cut,
            device_generation: session.generation,
            assets: Some(&session.assets),
            asset_users: Some(&self.asset_users),
        };
        let mut index = self.reporter.index();
        let (mut report, vendor_binary) = report_model::build_report(kind, raw, &mut index, &ctx);
        report.notes.extend(wgpu_note);
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
                self.hang_timeout,
                watchdog_timeout,
            );
        }
        drop(index);
        (report, vendor_binary)
    }

    /// Counts the crash, writes the report (again, for a hang report written provisionally) and
    /// hands it to the upload: now, or held back by the crash-loop limit.
    fn finish(
        &self,
        mut report: CrashReport,
        vendor_binary: Option<Vec<u8>>,
        on: UploadOn,
        announce: bool,
    ) {
        let upload = self.count_crash(&mut report);
        match persist(
            &self.report_dir,
            &mut report,
            vendor_binary.as_deref(),
            announce,
        ) {
            Ok(path) => self.reports.push(path),
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
                self.upload(report, vendor_binary, on);
            }
            Upload::Hold { key, replaces } => {
                self.hold(&report, vendor_binary.as_deref(), key, replaces)
            }
        }
    }

    /// The hang report's envelope, held back while the loss may still come.
    fn hold_provisional(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
    ) -> Option<HeldEnvelope> {
        self.outbox.dsn()?;
        self.outbox
            .hold(report, vendor_binary)
            .map_err(|err| warn!("GPU crash reporter: cannot hold the hang report back: {err}"))
            .ok()
    }

    fn crashes_so_far(&self) -> u32 {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).count
    }

    /// Queues a held-back report in place of the previous one; it is sent later (see
    /// [`CrashLoopLimit`]).
    fn hold(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
        key: Vec<String>,
        replaces: Option<HeldEnvelope>,
    ) {
        warn!(
            "GPU crash report held back: the same crash was uploaded {} time(s) in the last {} s \
             (crash loop); it is sent, counting {} earlier loss(es), when the app exits or the crash \
             recurs after the window",
            self.crash_loop.max_uploads.saturating_sub(1),
            self.crash_loop.window.as_secs(),
            report.suppressed_duplicates
        );
        if self.outbox.dsn().is_none() {
            return;
        }
        let kept = match self.outbox.hold(report, vendor_binary) {
            Ok(held) => {
                if let Some(old) = replaces {
                    // The new one counts the old one's losses too.
                    old.discard();
                }
                Some(held)
            }
            Err(err) => {
                error!(
                    "GPU crash report could not be held back in {}: {err}",
                    self.outbox.dir().display()
                );
                replaces
            }
        };
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = log.fingerprints.iter_mut().find(|f| f.key == key) {
            entry.held_envelope = kept;
        }
    }

    /// The app is exiting: lets running uploads finish and sends the held-back crash-loop
    /// reports, each within the upload timeout.
    pub(crate) fn at_exit(&self) {
        self.wait_for_uploads();
        let held: Vec<HeldEnvelope> = {
            let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            log.fingerprints
                .iter_mut()
                .filter_map(|f| f.held_envelope.take())
                .collect()
        };
        if held.is_empty() {
            return;
        }
        for envelope in held {
            if let Err(err) = self.outbox.release(envelope) {
                error!("GPU crash reporter: {err}");
            }
        }
        let summary = self.outbox.flush_at_crash();
        info!(
            "GPU crash reporter: sent {} held-back crash-loop report(s) at exit",
            summary.sent
        );
    }

    /// Waits for this run's background uploads (from any thread; every waiter sees them end). Each
    /// ends by itself within the upload timeout; the margin covers building its envelope.
    pub(crate) fn wait_for_uploads(&self) {
        let limit = self.outbox.settings().upload_timeout + UPLOAD_WAIT_MARGIN;
        if !self.uploads.wait(limit) {
            warn!(
                "GPU crash reporter: an upload still runs after {} ms; what it did not send stays \
                 in the outbox for the next launch",
                limit.as_millis()
            );
        }
    }

    /// Queues the report and uploads it (on `on`); a report that cannot be queued is sent from
    /// memory. What does not go out stays in the outbox for the next launch.
    fn upload(&self, mut report: CrashReport, vendor_binary: Option<Vec<u8>>, on: UploadOn) {
        let outbox = self.outbox.clone();
        if outbox.dsn().is_none() {
            match outbox.dsn_error() {
                Some(err) => error!("GPU crash report not uploaded: bad Sentry DSN: {err}"),
                None => {
                    info!(
                        "GPU crash report not uploaded: no Sentry DSN configured (set SENTRY_DSN)"
                    )
                }
            }
            return;
        }
        let queued = match outbox.enqueue(&report, vendor_binary.as_deref()) {
            Ok(_) => true,
            Err(err) => {
                error!("GPU crash report could not be queued for upload: {err}; sending it from memory");
                report
                    .notes
                    .push(format!("not queued for a later upload: {err}"));
                false
            }
        };
        let work = move || {
            if queued {
                flush_and_say(&outbox, &report.id);
            } else {
                match outbox.send_from_memory(&report, vendor_binary.as_deref()) {
                    Ok(_) => eprintln!(
                        "GPU crash report uploaded to Sentry from memory (event {}); no copy is on disk",
                        report.id
                    ),
                    Err(why) => error!(
                        "GPU crash report {} is lost: not on disk, and not uploaded ({why})",
                        report.id
                    ),
                }
            }
        };
        match on {
            UploadOn::ThisThread => work(),
            UploadOn::Background => {
                if let Err(err) = self.uploads.spawn(work) {
                    error!(
                        "GPU crash reporter: cannot start the upload thread ({err}); the report waits \
                         in the outbox for the next launch"
                    );
                }
            }
        }
    }

    /// Counts the crash into the report (how many this run, since when) and decides its upload under
    /// the crash-loop limit.
    fn count_crash(&self, report: &mut CrashReport) -> Upload {
        let now = Instant::now();
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.count += 1;
        report.crashes_this_run = log.count;
        report.ms_since_previous_crash = log
            .last_at
            .map(|t| now.saturating_duration_since(t).as_millis() as u64);
        log.last_at = Some(now);
        let key = fingerprint(report);
        let limit = self.crash_loop;
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

/// [`crate::vulkan::query_device_fault`] on its own thread, for at most [`QUERY_TIMEOUT`] plus the
/// KHR wait.
fn query_fault_bounded(
    session: &DeviceSession,
    khr_timeout: Duration,
    device_lost: bool,
) -> RawFaultInfo {
    let (device, caps): (RenderDevice, GpuCrashCapabilities) =
        (session.device.clone(), session.capabilities.clone());
    with_timeout(QUERY_TIMEOUT + khr_timeout, move || {
        crate::vulkan::query_device_fault(device.wgpu_device(), &caps, khr_timeout, device_lost)
    })
    .unwrap_or_else(|| RawFaultInfo {
        errors: vec![FaultQueryError::TimedOut(QUERY_TIMEOUT + khr_timeout)],
        ..Default::default()
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
    announce: bool,
) -> Result<PathBuf, String> {
    if announce {
        announce_summary(report);
    }
    match write_report(dir, report, vendor_binary) {
        Ok(path) => {
            eprintln!("GPU crash report written to {}", path.display());
            bevy::log::error!("GPU crash report written to {}", path.display());
            Ok(path)
        }
        Err(err) => {
            bevy::log::error!(
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
        bevy::log::error!("{}", fault.summary);
    }
    if report.faults.is_empty() {
        eprintln!("{}", report.summary);
        bevy::log::error!("{}", report.summary);
    }
}
