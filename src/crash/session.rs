//! One render device's crash-reporting state. Bevy builds a new device after each renderer recovery;
//! each gets its own session, so nothing of an old device leaks into a new device's report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bevy::prelude::Resource;
use bevy::render::renderer::RenderDevice;

use super::hang_then_loss::PendingHang;
use crate::progress::GpuTimeline;
use crate::vulkan::GpuCrashCapabilities;

/// Everything the reporter knows about one render device.
pub(crate) struct DeviceSession {
    /// 1 for the app's first device, one more after each renderer recovery.
    pub generation: u32,
    pub device: RenderDevice,
    pub capabilities: GpuCrashCapabilities,
    /// GPU-written progress; `None` where the marker memory could not be made (watchdog off).
    pub timeline: Option<GpuTimeline>,
    /// Bevy assets behind this device's buffers and images (fed by the render world).
    pub assets: crate::assets::SharedAssetMap,
    loss_reported: AtomicBool,
    /// Set once this device's loss report is written and queued (after `loss_reported`).
    loss_report_done: AtomicBool,
    /// A hang report of this device waiting for the loss that may follow (see `hang_then_loss`).
    /// Locked only to put or take it, never across a wait.
    pending_hang: Mutex<Option<PendingHang>>,
}

impl DeviceSession {
    /// Marks the device lost; true the first time (one loss report per device).
    pub(crate) fn mark_lost(&self) -> bool {
        // AcqRel: the first caller wins; a later one (and the watchdog, via `is_lost`) sees it.
        !self.loss_reported.swap(true, Ordering::AcqRel)
    }

    pub(crate) fn is_lost(&self) -> bool {
        // Acquire: pairs with the swap in `mark_lost`.
        self.loss_reported.load(Ordering::Acquire)
    }

    /// The loss report is on disk and queued.
    pub(crate) fn mark_loss_report_done(&self) {
        // Release: a thread that sees it (Acquire below) sees the report's files.
        self.loss_report_done.store(true, Ordering::Release);
    }

    pub(crate) fn loss_report_done(&self) -> bool {
        // Acquire: pairs with the Release in `mark_loss_report_done`.
        self.loss_report_done.load(Ordering::Acquire)
    }

    pub(crate) fn put_pending_hang(&self, hang: PendingHang) {
        *self.pending_hang.lock().unwrap_or_else(|p| p.into_inner()) = Some(hang);
    }

    /// Takes the waiting hang report; exactly one of the loss handler and the watchdog gets it.
    pub(crate) fn take_pending_hang(&self) -> Option<PendingHang> {
        self.pending_hang
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
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
        let Some(timeline) = &self.timeline else {
            return;
        };
        if self.is_lost() || timeline.completed() >= timeline.last_submitted() {
            return;
        }
        // wgpu panics (instead of returning an error) when the device is lost and the loss has not
        // reached us yet (the game panicked first): this drop may run on the watchdog thread.
        let device = self.device.wgpu_device();
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            device.poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(RELEASE_WAIT),
            })
        }));
        match waited {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => bevy::log::warn!(
                "GPU crash reporter: the GPU did not finish its work within {RELEASE_WAIT:?} ({err}); \
                 freeing the progress markers anyway, before the device goes"
            ),
            Err(_) => bevy::log::warn!(
                "GPU crash reporter: wgpu refused to wait for the GPU (device lost or invalid); \
                 freeing the progress markers without waiting"
            ),
        }
    }
}

/// The sessions of this app, shared by both worlds, the error handler and the watchdog.
#[derive(Resource, Clone, Default)]
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

    /// Starts the session of render device `generation` (the old one is released).
    pub(crate) fn start(
        &self,
        generation: u32,
        device: RenderDevice,
        capabilities: GpuCrashCapabilities,
        timeline: Option<GpuTimeline>,
        assets: crate::assets::SharedAssetMap,
    ) -> Arc<DeviceSession> {
        let session = Arc::new(DeviceSession {
            generation,
            device,
            capabilities,
            timeline,
            assets,
            loss_reported: AtomicBool::new(false),
            loss_report_done: AtomicBool::new(false),
            pending_hang: Mutex::new(None),
        });
        let previous = self.lock().current.replace(session.clone());
        // Outside the lock: the old session's drop may wait for its GPU (bounded), and the watchdog
        // takes this lock every tick.
        drop(previous);
        session
    }
}
