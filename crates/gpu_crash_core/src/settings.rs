//! What the reporter is asked to do: one settings struct for every part (capture, index, crash
//! path, delivery), checked once at start ([`ReporterSettings::validated`]) so that no part gets a
//! value it cannot use.

use std::path::PathBuf;
use std::time::Duration;

use crate::crash::OnHang;
use crate::deliver::CrashLoopLimit;
use crate::deliver::DeliverySettings;
use crate::index::IndexSettings;

/// The reporter's settings. Bevy's `GpuCrashReporterPlugin` has the same fields (and documents
/// each); a wgpu application fills this directly.
#[derive(Clone, Debug)]
pub struct ReporterSettings {
    /// Enable `VK_EXT_device_address_binding_report` where offered and record every GPU address
    /// range bound and unbound, so a faulting address can be named. Default: `true`.
    pub capture_address_bindings: bool,
    /// Enable `VK_EXT_device_fault` / `VK_KHR_device_fault` (+ `VK_KHR_shader_abort`) where
    /// offered. Default: `true`.
    pub device_fault: bool,
    /// Binding events the lock-free ring holds between two drains (rounded up to a power of two).
    /// Default: 32,768.
    pub binding_ring_capacity: usize,
    /// Live GPU address ranges indexed. Default: 262,144.
    pub max_live_bindings: usize,
    /// Recently freed ranges kept for use-after-free verdicts. Default: 65,536.
    pub max_freed_bindings: usize,
    /// Most recent binding events kept for breadcrumbs. Default: 4,096.
    pub max_recent_events: usize,
    /// Where crash reports are written (`GPU_CRASH_REPORT_DIR` overrides it); `None`: a
    /// per-application data directory.
    pub report_dir: Option<PathBuf>,
    /// How long submitted GPU work may stay incomplete before the watchdog writes a `gpu_hang`
    /// report. Default: 5 s.
    pub hang_timeout: Duration,
    /// What to do once a hang report is on disk. Default: end the process with
    /// [`OnHang::DEFAULT_EXIT_CODE`] once the driver has had `loss_wait_after_hang` to reset the
    /// device ([`OnHang::default`] says why).
    pub on_hang: OnHang,
    /// With [`OnHang::Exit`], how long to wait after the hang report for the device loss a
    /// driver's own lockup timeout may bring. Default: 10 s.
    pub loss_wait_after_hang: Duration,
    /// When the application quits on a device loss, end the process as soon as the loss report is
    /// done, without exit handlers (which would tear the driver down under threads still inside
    /// it). Default: `true`.
    pub end_process_after_loss: bool,
    /// Enable `VK_AMD_buffer_marker` where offered and record breadcrumbs. Default: `true`.
    pub gpu_breadcrumbs: bool,
    /// Uploads of one crash per window in a crash loop. Default: 3 per 10 minutes.
    pub crash_loop_limit: CrashLoopLimit,
    /// Application name for reports and the default report directory; `None`: the executable's
    /// name.
    pub application_name: Option<String>,
    /// Application version for reports and the Sentry release. Default: empty.
    pub application_version: String,
    /// The engine reports name (Bevy's plugin says "Bevy" and its version). Default: "wgpu".
    pub engine_name: String,
    /// The engine's version. Default: empty.
    pub engine_version: String,
    /// Sentry delivery.
    pub delivery: DeliverySettings,
}

impl Default for ReporterSettings {
    fn default() -> Self {
        let index = IndexSettings::default();
        Self {
            capture_address_bindings: true,
            device_fault: true,
            binding_ring_capacity: 32_768,
            max_live_bindings: index.max_live_bindings,
            max_freed_bindings: index.max_freed_bindings,
            max_recent_events: index.max_recent_events,
            report_dir: None,
            hang_timeout: Duration::from_secs(5),
            on_hang: OnHang::default(),
            loss_wait_after_hang: Duration::from_secs(10),
            end_process_after_loss: true,
            gpu_breadcrumbs: true,
            crash_loop_limit: CrashLoopLimit::default(),
            application_name: None,
            application_version: String::new(),
            engine_name: "wgpu".into(),
            engine_version: String::new(),
            delivery: DeliverySettings::default(),
        }
    }
}

/// A setting the reporter cannot use as given: logged at start, and the value it names used
/// instead (the application runs on).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{setting} = {given} is out of range ({range}); using {used}")]
pub struct SettingsError {
    /// The setting, e.g. `hang_timeout`.
    pub setting: &'static str,
    /// The value given.
    pub given: String,
    /// What it may be.
    pub range: &'static str,
    /// The value used instead.
    pub used: String,
}

/// Keeps a setting (a duration, a count) inside `[min, max]`, noting an error when it was not.
fn clamp_setting<T: Copy + Ord + std::fmt::Debug>(
    errors: &mut Vec<SettingsError>,
    setting: &'static str,
    value: &mut T,
    (min, max): (T, T),
    range: &'static str,
) {
    let clamped = (*value).clamp(min, max);
    if clamped != *value {
        errors.push(SettingsError {
            setting,
            given: format!("{value:?}"),
            range,
            used: format!("{clamped:?}"),
        });
        *value = clamped;
    }
}

impl ReporterSettings {
    /// These settings with every value the reporter cannot use brought into its range, and an
    /// error for each one that was not: durations that would overflow the clock or make every
    /// frame a hang, and counts that would reserve more memory than a machine has.
    pub fn validated(&self) -> (Self, Vec<SettingsError>) {
        const HOUR: Duration = Duration::from_secs(3600);
        let mut s = self.clone();
        let mut errors = Vec::new();
        let e = &mut errors;
        let minutes_10 = (Duration::ZERO, Duration::from_secs(600));
        clamp_setting(
            e,
            "hang_timeout",
            &mut s.hang_timeout,
            (Duration::from_millis(100), HOUR),
            "100 ms to 1 h",
        );
        clamp_setting(
            e,
            "loss_wait_after_hang",
            &mut s.loss_wait_after_hang,
            minutes_10,
            "at most 10 min",
        );
        clamp_setting(
            e,
            "delivery.upload_timeout",
            &mut s.delivery.upload_timeout,
            minutes_10,
            "at most 10 min",
        );
        clamp_setting(
            e,
            "crash_loop_limit.window",
            &mut s.crash_loop_limit.window,
            (Duration::ZERO, 24 * 30 * HOUR),
            "at most 30 days",
        );
        clamp_setting(
            e,
            "crash_loop_limit.max_uploads",
            &mut s.crash_loop_limit.max_uploads,
            (1, u32::MAX),
            "at least 1",
        );
        clamp_setting(
            e,
            "binding_ring_capacity",
            &mut s.binding_ring_capacity,
            (64, 1 << 22),
            "64 to 4,194,304 events",
        );
        clamp_setting(
            e,
            "max_live_bindings",
            &mut s.max_live_bindings,
            (0, 1 << 26),
            "at most 67,108,864",
        );
        clamp_setting(
            e,
            "max_freed_bindings",
            &mut s.max_freed_bindings,
            (0, 1 << 24),
            "at most 16,777,216",
        );
        clamp_setting(
            e,
            "max_recent_events",
            &mut s.max_recent_events,
            (0, 1 << 20),
            "at most 1,048,576",
        );
        (s, errors)
    }

    /// The index's share of the settings.
    pub(crate) fn index(&self) -> IndexSettings {
        IndexSettings {
            max_live_bindings: self.max_live_bindings,
            max_freed_bindings: self.max_freed_bindings,
            max_recent_events: self.max_recent_events,
            ..IndexSettings::default()
        }
    }
}
