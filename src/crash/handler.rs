//! The crash path: from a device loss or a stall to a report on disk, then to the outbox.
//!
//! Everything here may run while the render thread is stuck inside wgpu: every wgpu or driver call is
//! time-boxed on a helper thread, and GPU progress is read from marker memory, not asked of wgpu.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::log::{error, info, warn};
use bevy::prelude::Resource;
use bevy::render::renderer::RenderDevice;

use super::bounded::with_timeout;
use super::exit::{exit_now, OnHang};
use super::session::{DeviceSession, DeviceSessions};
use crate::data_dir::REPORT_DIR_ENV;
use crate::deliver::event::fingerprint;
use crate::deliver::Outbox;
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
    /// Crashes held back in this window, and the outbox file of the latest (which counts them all).
    held: u32,
    held_envelope: Option<PathBuf>,
}

/// What to do with a report's upload.
#[derive(Debug, PartialEq, Eq)]
enum Upload {
    /// Enqueue and send now.
    Now,
    /// Enqueue in place of this earlier held-back envelope (if any), do not send yet.
    Hold {
        /// The fingerprint, to note the new envelope under.
        key: Vec<String>,
        replaces: Option<PathBuf>,
    },
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
    pub crash_loop: CrashLoopLimit,
    pub reports: GpuCrashReports,
    pub outbox: Outbox,
    log: Arc<Mutex<CrashLog>>,
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
            crash_loop,
            reports,
            outbox,
            log: Arc::default(),
        }
    }

    /// Bevy reported the device lost: one report per device.
    pub(crate) fn device_lost(&self, wgpu_description: &str) {
        let Some(session) = self.sessions.current() else {
            return;
        };
        if !session.mark_lost() {
            return; // this device's loss is already reported
        }
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
        self.write(
            &session,
            CrashKind::DeviceLost,
            raw,
            Some(cut),
            None,
            wgpu_note,
        );
    }

    /// The watchdog saw a stall of `hang_timeout`: report it (once per stall), then apply `on_hang`.
    pub(crate) fn hang(&self, session: &Arc<DeviceSession>, stall: Stall) {
        let raw = query_fault_bounded(session, Duration::from_millis(100), false);
        let path = self.write(session, CrashKind::GpuHang, raw, None, Some(stall), None);
        if let OnHang::Exit(code) = self.on_hang {
            if path.is_none() {
                error!("GPU hang: exiting although the report could not be written");
            }
            exit_now(code);
        }
    }

    /// Builds, writes and hands over a report; returns its path when it reached the disk.
    fn write(
        &self,
        session: &DeviceSession,
        kind: CrashKind,
        raw: RawFaultInfo,
        cut: Option<u64>,
        stall: Option<Stall>,
        wgpu_note: Option<String>,
    ) -> Option<PathBuf> {
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
        let upload = self.count_crash(&mut report);
        let path = persist_and_announce(&self.report_dir, &mut report, vendor_binary.as_deref());
        if let Some(path) = &path {
            self.reports.push(path.clone());
        }
        match upload {
            Upload::Now => deliver(&self.outbox, &report, vendor_binary.as_deref()),
            Upload::Hold { key, replaces } => {
                self.hold(&report, vendor_binary.as_deref(), key, replaces)
            }
        }
        path
    }

    /// Queues a held-back report in place of the previous one; it is sent later (see
    /// [`CrashLoopLimit`]).
    fn hold(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
        key: Vec<String>,
        replaces: Option<PathBuf>,
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
        let queued = match self.outbox.enqueue(report, vendor_binary) {
            Ok(path) => Some(path),
            Err(err) => {
                error!(
                    "GPU crash report could not be queued in {}: {err}",
                    self.outbox.dir().display()
                );
                None
            }
        };
        if queued.is_some() {
            if let Some(old) = replaces {
                // The new one counts the old one's losses too.
                let _ = std::fs::remove_file(old);
            }
        }
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = log.fingerprints.iter_mut().find(|f| f.key == key) {
            entry.held_envelope = queued;
        }
    }

    /// Sends the held-back crash-loop reports (the app is exiting), within the upload timeout.
    pub(crate) fn send_held_back(&self) {
        let held = {
            let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            log.fingerprints
                .iter()
                .filter_map(|f| f.held_envelope.as_ref())
                .any(|p| p.exists())
        };
        if held {
            let summary = self.outbox.flush_at_crash();
            info!(
                "GPU crash reporter: sent {} held-back crash-loop report(s) at exit",
                summary.sent
            );
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
        if now.saturating_duration_since(entry.window_start) >= limit.window {
            // A new window. A report held back in the old one is still in the outbox: the upload
            // below sends it first (oldest first), so it is not lost.
            entry.window_start = now;
            entry.uploaded = 0;
            entry.held = 0;
            entry.held_envelope = None;
        }
        if entry.uploaded + 1 < limit.max_uploads {
            entry.uploaded += 1;
            report.suppressed_duplicates = 0;
            return Upload::Now;
        }
        entry.held += 1;
        report.suppressed_duplicates = entry.held - 1;
        Upload::Hold {
            key: entry.key.clone(),
            replaces: entry.held_envelope.take(),
        }
    }
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

/// Queues the report for Sentry and uploads it within `upload_timeout`; what does not go out stays
/// in the outbox for the next launch. Called only once the report is on disk.
fn deliver(outbox: &Outbox, report: &CrashReport, vendor_binary: Option<&[u8]>) {
    if outbox.dsn().is_none() {
        match outbox.dsn_error() {
            Some(err) => error!("GPU crash report not uploaded: bad Sentry DSN: {err}"),
            None => {
                info!("GPU crash report not uploaded: no Sentry DSN configured (set SENTRY_DSN)")
            }
        }
        return;
    }
    match outbox.enqueue(report, vendor_binary) {
        Ok(_) => {
            let summary = outbox.flush_at_crash();
            if summary.sent > 0 {
                info!("GPU crash report uploaded ({} envelope(s))", summary.sent);
                eprintln!("GPU crash report uploaded to Sentry (event {})", report.id);
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
        Err(err) => error!(
            "GPU crash report could not be queued for upload in {}: {err}",
            outbox.dir().display()
        ),
    }
}

/// Writes the report and prints the human lines; on failure logs why and returns `None` (the game
/// keeps its own crash policy either way).
fn persist_and_announce(
    dir: &Path,
    report: &mut CrashReport,
    vendor_binary: Option<&[u8]>,
) -> Option<PathBuf> {
    for fault in &report.faults {
        eprintln!("{}", fault.summary);
        bevy::log::error!("{}", fault.summary);
    }
    if report.faults.is_empty() {
        eprintln!("{}", report.summary);
        bevy::log::error!("{}", report.summary);
    }
    match write_report(dir, report, vendor_binary) {
        Ok(path) => {
            eprintln!("GPU crash report written to {}", path.display());
            bevy::log::error!("GPU crash report written to {}", path.display());
            Some(path)
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
            None
        }
    }
}
