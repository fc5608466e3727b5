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

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sentry::protocol::SessionStatus;
use tracing::{info, warn};

use super::earlier_hang;
use super::exit::exit_now;
use super::hang_then_loss::ReportedHang;
use super::loss_turns::{IndexOnLostDevice, LossClaim, LossTurns};
use super::session::{DeviceSession, DeviceSessions, LossStart};
use super::uploads::RunningUploads;
use super::written::WrittenReports;
use crate::deliver::{Delivery, Ticket};
use crate::guard::guarded;
use crate::index::indexer::IndexerHandle;
use crate::index::{allocator_names, AddressIndex};
use crate::progress::Stall;
use crate::report::{self as report_model, CrashContext};
use crate::report::{ApplicationInfo, CrashKind, CrashReport};
use crate::settings::{OnHang, ReporterSettings};
use crate::time_box::with_timeout;
use crate::vulkan::fault::{FaultQueryError, RawFaultInfo};
use crate::vulkan::{GpuCrashCapabilities, VideoMemoryReading};

/// Longest wait for wgpu or the driver while building a report (their locks may be held by a render
/// thread stuck on the GPU).
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the driver may take, while the GPU hangs, to answer a KHR fault query.
const HANG_FAULT_WAIT: Duration = Duration::from_millis(100);
/// Longest wait for the driver's memory heaps at a fault: two physical-device queries, which take
/// no device lock; bounded all the same, as every driver call on the crash path is.
const MEMORY_READ_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest a report takes from its start to disk and outbox: the fault query and the allocator
/// report (each [`QUERY_TIMEOUT`], plus the KHR wait), the memory heaps ([`MEMORY_READ_TIMEOUT`]),
/// and a second for writing and fsyncing the report and its envelope. A loss waits this long for a
/// hang report of its device still being built.
const REPORT_BOUND: Duration = Duration::from_millis(2 * 2_000 + 100 + 500 + 1_000);
/// Time beyond the bounds above that a wait for the crash path allows: threads to start, envelopes
/// to be stamped.
const WAIT_MARGIN: Duration = Duration::from_secs(1);

/// A hang's note when the GPU had finished no frame of its device: the hang is in the first frames,
/// or the GPU was still busy with work from outside this process. On the H100 host (driver
/// 580.159.04, headless) an endless shader kept the GPU busy for other processes for 8+ minutes
/// after its own process ended, and each later process hung in its frame 1 (docs/driver-facts.md).
const NO_FRAME_COMPLETED_NOTE: &str =
    "the GPU had finished no frame of this device when it stalled: either this run's first frames \
     hang, or the GPU was still busy with work from before this process (on NVIDIA's Linux driver \
     an earlier process's endless shader kept the GPU busy for minutes after that process ended); \
     if an earlier run reported a hang shortly before, this report may be its consequence";

/// How the crash path reports and what it does after: the settings it was started with, and
/// what start resolved from them.
#[derive(Clone, Debug)]
pub(crate) struct CrashSettings {
    /// Where reports are written (the setting, the environment and the data folder resolved).
    pub report_dir: PathBuf,
    /// The application, as reports name it.
    pub application: ApplicationInfo,
    /// The reporter's settings, validated once at start and read as they are here (hang timeout,
    /// what to do after a hang or a loss): no part keeps copies of single fields.
    pub chosen: ReporterSettings,
}

/// What the crash path needs, shared by the loss handler, the watchdog thread and the panic hook.
#[derive(Clone)]
pub(crate) struct CrashHandling {
    pub indexer: Arc<IndexerHandle>,
    pub sessions: DeviceSessions,
    pub settings: Arc<CrashSettings>,
    pub reports: WrittenReports,
    /// Everything after a report is built: disk, crash-loop limit, sessions, outbox, upload.
    pub delivery: Delivery,
    /// Who uses each mesh (kept by the application), for reports naming a mesh.
    pub asset_users: crate::assets::AssetUsers,
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
        delivery: Delivery,
    ) -> Self {
        Self {
            indexer,
            sessions,
            settings: Arc::new(settings),
            reports: WrittenReports::default(),
            delivery,
            asset_users: crate::assets::AssetUsers::default(),
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
        self.delivery.send(delivery, &report.id);
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
            guarded("hang upload", || self.delivery.send(delivery, &id));
        }
        if let OnHang::Exit(code) = self.settings.chosen.on_hang {
            // A driver may still turn the hang into a loss with fault addresses: give it
            // `loss_wait_after_hang`, and its report the time it takes, before the process ends.
            // A GPU that catches up in that time (a long stall, not a hang) ends nothing.
            match wait_out_the_hang(session, self.settings.chosen.loss_wait_after_hang) {
                AfterHang::Lost => {
                    session.wait_for_loss_report(REPORT_BOUND + WAIT_MARGIN);
                }
                AfterHang::Recovered => {
                    warn!(
                        "GPU crash reporter: the GPU finished its work again after the hang report; \
                         the game goes on"
                    );
                    return;
                }
                AfterHang::StillHung => {}
            }
            self.wait_for_reports();
            // The session ends as the run does: crashed, with the hang (no exit handler runs).
            self.delivery.at_exit(SessionStatus::Crashed);
            self.print_closing_lines();
            exit_now(code);
        }
    }

    /// Builds, writes and queues the hang report.
    fn write_hang(&self, session: &Arc<DeviceSession>, stall: Stall) -> (ReportedHang, Ticket) {
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
        let video_memory = read_video_memory_bounded(session);
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
            video_memory,
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
                self.settings.chosen.hang_timeout,
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

    /// Hands a non-fatal fault report to delivery (a warning-level event) and sends it within the
    /// upload timeout. Not a crash: the crash-loop limit and the closing lines leave it out (the
    /// fault watch rate-limits these per fingerprint).
    pub(crate) fn deliver_non_fatal(&self, report: &mut CrashReport, vendor_binary: Option<&[u8]>) {
        let ticket = self.delivery.submit_non_fatal(report, vendor_binary);
        self.delivery.send(ticket, &report.id);
    }

    /// Hands a crash report to delivery (counted unless `count` is off: a loss joining its hang
    /// report) and notes the file it wrote; the ticket says what is left to send.
    fn settle(
        &self,
        report: &mut CrashReport,
        vendor_binary: Option<&[u8]>,
        count: bool,
    ) -> Ticket {
        let ticket = self.delivery.submit_crash(report, vendor_binary, count);
        if let Some(path) = &ticket.written {
            self.reports.push(path.clone());
        }
        ticket
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
                .chosen
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
        let status = if self
            .sessions
            .current()
            .is_some_and(|s| s.is_lost() || s.still_hung())
        {
            SessionStatus::Crashed
        } else if std::thread::panicking() {
            SessionStatus::Abnormal
        } else {
            SessionStatus::Exited
        };
        self.delivery.at_exit(status);
    }

    /// Waits for this run's loss reports and their uploads (from any thread; every waiter sees them
    /// end). Each ends by itself: its report within [`REPORT_BOUND`] (plus the wait for a hang
    /// report it joins), its upload within the upload timeout.
    pub(crate) fn wait_for_reports(&self) {
        let limit = REPORT_BOUND
            .saturating_mul(2)
            .saturating_add(self.delivery.upload_timeout())
            .saturating_add(WAIT_MARGIN);
        if !self.work.wait(limit) {
            warn!(
                "GPU crash reporter: a report or upload still runs after {} ms; what it did not \
                 send stays in the outbox for the next launch",
                limit.as_millis()
            );
        }
    }
}

/// How a hang stood at the end of the wait after its report.
enum AfterHang {
    /// The device was lost (the driver reset it).
    Lost,
    /// The GPU finished more work: a long stall, not a hang.
    Recovered,
    /// Neither.
    StillHung,
}

/// Waits up to `wait` after a hang report for the device's loss or the GPU's progress.
fn wait_out_the_hang(session: &DeviceSession, wait: Duration) -> AfterHang {
    const SLICE: Duration = Duration::from_millis(250);
    let completed = || session.timeline.as_ref().map(|t| t.completed());
    let at_report = completed();
    let until = Instant::now().checked_add(wait);
    loop {
        let left = until.map_or(SLICE, |u| u.saturating_duration_since(Instant::now()));
        if session.wait_for_loss(left.min(SLICE)) {
            return AfterHang::Lost;
        }
        if completed() > at_report {
            return AfterHang::Recovered;
        }
        if left.is_zero() {
            return AfterHang::StillHung;
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

/// [`crate::vulkan::read_video_memory`] on its own thread, for at most [`MEMORY_READ_TIMEOUT`];
/// `None` when the device is not Vulkan. When the driver does not answer in time, the failed
/// allocations counted so far (our own atomics) still go in, with no heaps and a note saying why.
fn read_video_memory_bounded(session: &DeviceSession) -> Option<VideoMemoryReading> {
    let device = session.device.clone();
    let capabilities = session.capabilities.clone();
    let counters = session.memory_report.clone();
    let read = with_timeout(MEMORY_READ_TIMEOUT, move || {
        crate::vulkan::read_video_memory(&device, &capabilities, counters.as_deref())
    });
    match read {
        Some(reading) => reading,
        None => {
            warn!(
                "GPU crash reporter: the driver did not tell its memory heaps within {} ms; the \
                 report goes without them",
                MEMORY_READ_TIMEOUT.as_millis()
            );
            Some(VideoMemoryReading {
                heaps: Vec::new(),
                memory_budget: false,
                allocation_failures: session.memory_report.as_deref().map(|c| c.read()),
                heaps_timed_out: true,
            })
        }
    }
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
