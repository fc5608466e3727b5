//! One device's crash-reporting state. An application may build a new device after a loss (Bevy's
//! renderer recovery does); each gets its own session, so nothing of an old device leaks into a new
//! device's report.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::hang_then_loss::ReportedHang;
use super::watch_thread::WatchThread;
use crate::progress::GpuTimeline;
use crate::vulkan::fault::KhrFaultReport;
use crate::vulkan::{BindingMessenger, GpuCrashCapabilities, MemoryReportCounters};

/// Everything the reporter knows about one device.
pub(crate) struct DeviceSession {
    /// 1 for the app's first device, one more after each renderer recovery.
    pub generation: u32,
    /// The device's binding messenger, if one was registered. Declared before `device`, so it is
    /// destroyed before the device (which holds the Vulkan instance) can go.
    pub messenger: Option<BindingMessenger>,
    pub device: wgpu::Device,
    pub capabilities: GpuCrashCapabilities,
    /// GPU-written progress; `None` where the marker memory could not be made (watchdog off).
    pub timeline: Option<GpuTimeline>,
    /// The application's assets behind this device's buffers and images (fed by the application).
    pub assets: crate::assets::SharedAssetMap,
    /// This device's pipelines and the draw lists as they changed (fed by the application).
    pub pipelines: crate::pipelines::PipelineLedger,
    /// What the driver's memory report counted on this device (`VK_EXT_device_memory_report`);
    /// `None` where it is not enabled.
    pub memory_report: Option<Arc<MemoryReportCounters>>,
    /// Set (inside `fault`'s lock) when the device's loss reaches us; read without the lock every
    /// watchdog tick, by the panic hook and by the fault watch (which holds its own handle).
    lost: LostFlag,
    /// Where this device's fault reporting stands: the one place that decides whether a hang and a
    /// loss are one fault (see [`FaultPhase`]).
    fault: Mutex<FaultPhase>,
    /// Signalled whenever `fault` changes.
    fault_changed: Condvar,
    /// `VK_KHR_device_fault` reports the non-fatal fault watch drained that belong to the crash
    /// path (`DEVICE_LOST` or `WATCHDOG_TIMEOUT` set): the next loss or hang report reads them
    /// first. The watch holds this lock while it drains, so a crash path's fault query that takes it
    /// sees every report the watch drained before, and none is drained during its query.
    /// Shared with the watch, which holds no handle of the session while it waits on the driver.
    drained: Arc<DrainSlot>,
    /// The non-fatal fault watch of this device, if one runs; stopped before the device goes.
    fault_watch: Mutex<Option<WatchThread>>,
    /// Set on the thread that learns of the loss (wgpu's device-lost callback, inside the submit
    /// or poll that saw it), before its report is begun on a thread of its own: what the
    /// application's frame loop reads (`CrashReporter::is_device_lost`) without waiting on that
    /// thread.
    loss_told: AtomicBool,
}

/// What the driver calls back into for one device, made by the device callback before the device
/// existed: kept by the device's session.
#[derive(Default)]
pub(crate) struct DeviceCallbacks {
    /// The binding messenger, if one was registered.
    pub messenger: Option<BindingMessenger>,
    /// The memory report's counters, where `VK_EXT_device_memory_report` is enabled.
    pub memory_report: Option<Arc<MemoryReportCounters>>,
}

/// Whether a device is lost, as the session marks it in `begin_loss`.
#[derive(Clone, Default)]
pub(crate) struct LostFlag(Arc<AtomicBool>);

impl LostFlag {
    pub(crate) fn is_set(&self) -> bool {
        // Acquire: pairs with the Release in `DeviceSession::begin_loss`.
        self.0.load(Ordering::Acquire)
    }
}

/// `VK_KHR_device_fault` reports the non-fatal fault watch drained that belong to the crash path
/// (`DEVICE_LOST` or `WATCHDOG_TIMEOUT` set): the next loss or hang report reads them first. The
/// watch holds this lock while it drains, so a crash path's fault query that takes it sees every
/// report the watch drained before, and none is drained during its query.
#[derive(Default)]
pub(crate) struct DrainSlot {
    reports: Mutex<Vec<KhrFaultReport>>,
    /// Crash paths waiting for the lock: the watch does not take it again meanwhile (the lock is
    /// not fair, and the watch takes it back at once after each wait).
    crash_wants: AtomicUsize,
}

impl DrainSlot {
    /// The lock, for the watch's drain: first lets a crash path that waits for it go first.
    pub(crate) fn lock_for_watch(&self) -> MutexGuard<'_, Vec<KhrFaultReport>> {
        // Relaxed: a hint of who goes first; the mutex orders the reports themselves. A stale 0
        // costs the crash path one more wait of the watch (it polls for its whole bound).
        while self.crash_wants.load(Ordering::Relaxed) > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.reports.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lock, for a crash path's fault query: waits at most `wait` for a drain in progress (a
    /// driver stuck in the watch's query must not hold a crash report back); `None` after that.
    pub(crate) fn lock_for_crash(
        &self,
        wait: Duration,
    ) -> Option<MutexGuard<'_, Vec<KhrFaultReport>>> {
        let until = Instant::now().checked_add(wait);
        // Relaxed: see `lock_for_watch`.
        self.crash_wants.fetch_add(1, Ordering::Relaxed);
        let guard = loop {
            match self.reports.try_lock() {
                Ok(guard) => break Some(guard),
                Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
            if until.is_none_or(|u| Instant::now() >= u) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        // Held (or given up): the watch may block on the lock from here on.
        self.crash_wants.fetch_sub(1, Ordering::Relaxed);
        guard
    }
}

/// Where one device's fault reporting stands. Every change happens under one lock, whichever of the
/// watchdog (a hang) and the loss handler (a device loss) gets there first, so one fault is one
/// report whatever the timing: a loss that arrives while the hang report is being built waits for
/// it and then joins it, and a stall seen after the loss is no second report.
enum FaultPhase {
    /// Nothing reported.
    Healthy,
    /// The watchdog is building and sending a hang report.
    HangReporting,
    /// A hang report was written and sent (or queued); a later loss of this device joins it.
    HangReported(Box<ReportedHang>),
    /// The device is lost; its report is being built (`done: false`) or is queued.
    Lost { done: bool },
}

/// What the loss handler is to report, decided by [`DeviceSession::begin_loss`].
pub(crate) enum LossStart {
    /// This device's loss is already reported (or being reported): nothing to do.
    AlreadyReported,
    /// No hang report of this device: a report of its own.
    First,
    /// The loss of a device whose hang was reported: the same fault, the same report.
    AfterHang(Box<ReportedHang>),
}

impl DeviceSession {
    fn phase(&self) -> MutexGuard<'_, FaultPhase> {
        self.fault.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The watchdog saw a stall: true when it is to report it (the device is not lost and no hang
    /// report of it is being built). A stall after an earlier hang that the GPU recovered from is a
    /// new fault: its report replaces the earlier one as the one a later loss joins.
    pub(crate) fn begin_hang(&self) -> bool {
        let mut phase = self.phase();
        match *phase {
            FaultPhase::Healthy | FaultPhase::HangReported(_) => {
                *phase = FaultPhase::HangReporting;
                true
            }
            FaultPhase::HangReporting | FaultPhase::Lost { .. } => false,
        }
    }

    /// The hang report is written and sent (`Some`), or could not be built (`None`).
    pub(crate) fn end_hang(&self, reported: Option<ReportedHang>) {
        let mut phase = self.phase();
        if matches!(*phase, FaultPhase::HangReporting) {
            *phase = match reported {
                Some(hang) => FaultPhase::HangReported(Box::new(hang)),
                None => FaultPhase::Healthy,
            };
        }
        self.fault_changed.notify_all();
    }

    /// The device is lost: marks it so at once (the watchdog stops judging it) and decides what to
    /// report. A hang report still being built is waited for, at most `hang_wait`, so the loss joins
    /// it instead of becoming a second report.
    pub(crate) fn begin_loss(&self, hang_wait: Duration) -> LossStart {
        let mut phase = self.phase();
        if matches!(*phase, FaultPhase::Lost { .. }) {
            return LossStart::AlreadyReported;
        }
        // Release: the watchdog, the panic hook and the fault watch (Acquire in `LostFlag::is_set`)
        // stop at once.
        self.lost.0.store(true, Ordering::Release);
        let until = Instant::now().checked_add(hang_wait);
        while matches!(*phase, FaultPhase::HangReporting) {
            let left = until.map_or(hang_wait, |u| u.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                break;
            }
            phase = self
                .fault_changed
                .wait_timeout(phase, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let before = std::mem::replace(&mut *phase, FaultPhase::Lost { done: false });
        self.fault_changed.notify_all();
        match before {
            FaultPhase::HangReported(hang) => LossStart::AfterHang(hang),
            _ => LossStart::First,
        }
    }

    /// The loss report is on disk and queued (or could not be).
    pub(crate) fn end_loss(&self) {
        *self.phase() = FaultPhase::Lost { done: true };
        self.fault_changed.notify_all();
    }

    /// Waits, at most `wait`, until the loss report is done; returns whether it is.
    pub(crate) fn wait_for_loss_report(&self, wait: Duration) -> bool {
        self.wait_for_phase(wait, |p| matches!(p, FaultPhase::Lost { done: true }))
    }

    /// Waits, at most `wait`, until the device is reported lost; returns whether it was.
    pub(crate) fn wait_for_loss(&self, wait: Duration) -> bool {
        self.wait_for_phase(wait, |p| matches!(p, FaultPhase::Lost { .. }))
    }

    /// Waits, at most `wait`, until the fault phase is `reached`; returns whether it is.
    fn wait_for_phase(&self, wait: Duration, reached: impl Fn(&FaultPhase) -> bool) -> bool {
        let (phase, _) = self
            .fault_changed
            .wait_timeout_while(self.phase(), wait, |p| !reached(p))
            .unwrap_or_else(|p| p.into_inner());
        reached(&phase)
    }

    /// Waits, at most `wait`, until the GPU has finished what was submitted to this device or
    /// this device's fault is reported (a hang report sent, or the loss's report done); returns
    /// whether it did. At once for a healthy GPU. Polls: the GPU's progress is marker memory, read
    /// without waiting on wgpu.
    pub(crate) fn wait_until_settled(&self, wait: Duration) -> bool {
        let Some(timeline) = &self.timeline else {
            return true;
        };
        let until = Instant::now().checked_add(wait);
        loop {
            let reported = matches!(
                *self.phase(),
                FaultPhase::HangReported(_) | FaultPhase::Lost { done: true }
            );
            if reported || timeline.completed() >= timeline.last_submitted() {
                return true;
            }
            if until.is_none_or(|u| Instant::now() >= u) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether a hang was reported on this device and the GPU has not finished its work since:
    /// still hung (a GPU that recovered has caught up with what was submitted).
    pub(crate) fn still_hung(&self) -> bool {
        let hung = matches!(*self.phase(), FaultPhase::HangReported(_));
        hung && self
            .timeline
            .as_ref()
            .is_some_and(|t| t.completed() < t.last_submitted())
    }

    /// What the fault watch shares with the session: the drained reports' slot and the lost flag.
    pub(crate) fn watch_handles(&self) -> (Arc<DrainSlot>, LostFlag) {
        (self.drained.clone(), self.lost.clone())
    }

    /// The drained reports' lock for a crash path's fault query (see [`DrainSlot::lock_for_crash`]).
    pub(crate) fn drain_lock_for_crash(
        &self,
        wait: Duration,
    ) -> Option<MutexGuard<'_, Vec<KhrFaultReport>>> {
        self.drained.lock_for_crash(wait)
    }

    /// Keeps `watch` (the device's non-fatal fault watch) until the session ends.
    pub(crate) fn keep_fault_watch(&self, watch: WatchThread) {
        *self.fault_watch.lock().unwrap_or_else(|p| p.into_inner()) = Some(watch);
    }

    /// Stops the non-fatal fault watch (bounded: see [`WatchThread`]): the device is lost, or
    /// going.
    pub(crate) fn stop_fault_watch(&self) {
        let watch = self
            .fault_watch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(watch);
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.is_set()
    }

    /// The application learned of this device's loss (its report may still be to begin).
    pub(crate) fn tell_loss(&self) {
        // Release: pairs with the Acquire in `loss_known`; nothing else is published with it.
        self.loss_told.store(true, Ordering::Release);
    }

    /// Whether the device's loss is known: told by the application or marked by its report.
    pub(crate) fn loss_known(&self) -> bool {
        // Acquire: pairs with the Release in `tell_loss`.
        self.loss_told.load(Ordering::Acquire) || self.is_lost()
    }
}

/// Longest wait for the GPU when a device's session ends (app exit, renderer recovery): a hung GPU
/// must not freeze the exit.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

impl Drop for DeviceSession {
    /// Lets the GPU finish what we submitted (bounded; skipped on a lost device, where nothing runs
    /// any more) before the marker memory is freed: it goes with this session, while the device still
    /// lives (the marker buffer holds a device handle of its own).
    fn drop(&mut self) {
        // First: the watch calls into the driver on this device.
        self.stop_fault_watch();
        let Some(timeline) = &self.timeline else {
            return;
        };
        if self.is_lost() || timeline.completed() >= timeline.last_submitted() {
            return;
        }
        // wgpu panics (instead of returning an error) when the device is lost and the loss has not
        // reached us yet (the game panicked first): this drop may run on the watchdog thread.
        let device = &self.device;
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            device.poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(RELEASE_WAIT),
            })
        }));
        match waited {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => tracing::warn!(
                "GPU crash reporter: the GPU did not finish its work within {RELEASE_WAIT:?} ({err}); \
                 freeing the progress markers anyway, before the device goes"
            ),
            Err(_) => tracing::warn!(
                "GPU crash reporter: wgpu refused to wait for the GPU (device lost or invalid); \
                 freeing the progress markers without waiting"
            ),
        }
    }
}

/// The sessions of this app, shared by the application's threads, the loss handler and the watchdog.
#[derive(Clone, Default)]
pub(crate) struct DeviceSessions(Arc<Mutex<Sessions>>);

#[derive(Default)]
struct Sessions {
    current: Option<Arc<DeviceSession>>,
}

impl DeviceSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live device's session, if one was started.
    pub(crate) fn current(&self) -> Option<Arc<DeviceSession>> {
        self.lock().current.clone()
    }

    /// Ends the current session (the application exits): the device, its messenger and its
    /// markers are let go (the markers after the GPU's work, bounded).
    pub(crate) fn end(&self) {
        let ended = self.lock().current.take();
        drop(ended);
    }

    /// Starts the session of device `generation` (the old one is released).
    pub(crate) fn start(
        &self,
        generation: u32,
        callbacks: DeviceCallbacks,
        device: wgpu::Device,
        capabilities: GpuCrashCapabilities,
        timeline: Option<GpuTimeline>,
        assets: crate::assets::SharedAssetMap,
    ) -> Arc<DeviceSession> {
        let DeviceCallbacks {
            messenger,
            memory_report,
        } = callbacks;
        let session = Arc::new(DeviceSession {
            generation,
            messenger,
            device,
            capabilities,
            timeline,
            assets,
            pipelines: crate::pipelines::PipelineLedger::default(),
            memory_report,
            lost: LostFlag::default(),
            fault: Mutex::new(FaultPhase::Healthy),
            fault_changed: Condvar::new(),
            drained: Arc::default(),
            fault_watch: Mutex::default(),
            loss_told: AtomicBool::new(false),
        });
        let previous = self.lock().current.replace(session.clone());
        // Outside the lock: the old session's drop may wait for its GPU (bounded), and the watchdog
        // takes this lock every tick.
        drop(previous);
        session
    }
}
