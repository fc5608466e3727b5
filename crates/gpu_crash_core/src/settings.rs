//! What the reporter is asked to do: one settings struct for every part (capture, index, crash
//! path, delivery), checked once at start ([`ReporterSettings::validated`]) so that no part gets a
//! value it cannot use.

use std::path::PathBuf;
use std::time::Duration;

use crate::deliver::CrashLoopLimit;
use crate::deliver::DeliverySettings;
use crate::index::IndexSettings;
use crate::vulkan::DriverRule;

/// The reporter's settings: the one place each setting is declared and documented. A wgpu
/// application fills this and passes it to [`crate::CrashReporter::start`]; Bevy's
/// `GpuCrashReporterPlugin` holds it as its `settings` field. [`ReporterSettings::validated`] runs
/// once, at start, and every part then reads the validated copy.
///
/// ```
/// use std::time::Duration;
/// use gpu_crash_core::{OnHang, ReporterSettings};
///
/// let settings = ReporterSettings {
///     hang_timeout: Duration::from_secs(3),
///     on_hang: OnHang::Exit(OnHang::DEFAULT_EXIT_CODE),
///     application_version: "1.4.2".into(),
///     ..ReporterSettings::default()
/// };
/// let (used, errors) = settings.validated();
/// assert!(errors.is_empty());
/// assert_eq!(used.hang_timeout, Duration::from_secs(3));
/// ```
#[derive(Clone, Debug)]
pub struct ReporterSettings {
    /// Enable `VK_EXT_device_address_binding_report` where offered and record every GPU address
    /// range that is bound and unbound, so a faulting address can be named. Default: `true`.
    pub capture_address_bindings: bool,
    /// Drivers to leave the binding report off on although they offer it (the first rule that
    /// holds decides; the capabilities line and every report of such a device say which and why).
    /// What the binding report costs over a long session is each driver's own: flat on NVIDIA's
    /// Linux driver in 11 minutes of heavy churn (BENCHMARKS.md), growing on AMD's Windows driver
    /// by another project's measurement (see [`DriverRule`]). Default: [`DriverRule::defaults`],
    /// AMD's proprietary driver; `Vec::new()` keeps it on everywhere.
    pub binding_report_off_on: Vec<DriverRule>,
    /// Enable `VK_EXT_device_fault` / `VK_KHR_device_fault` (+ `VK_KHR_shader_abort`) where offered,
    /// so a device loss comes with fault addresses and vendor data. Default: `true`.
    pub device_fault: bool,
    /// Binding events the lock-free ring holds between two drains (rounded up to a power of two;
    /// 128 bytes each). Events beyond it are counted as dropped. Default: 32,768 (4 MiB).
    pub binding_ring_capacity: usize,
    /// Live GPU address ranges indexed; binds beyond it are counted, not stored. Default: 262,144,
    /// sized for a game (the index takes 29.3 MiB at the defaults; BENCHMARKS.md says why).
    pub max_live_bindings: usize,
    /// Recently freed ranges kept for use-after-free verdicts (D3D12 DRED keeps 65,536). Default:
    /// 65,536.
    pub max_freed_bindings: usize,
    /// Most recent binding events kept for breadcrumbs. Default: 4,096.
    pub max_recent_events: usize,
    /// Where crash reports are written. The environment variable `GPU_CRASH_REPORT_DIR` overrides
    /// it; `None` means a per-application data directory (e.g.
    /// `~/.local/share/<app>/gpu-crash-reports`).
    pub report_dir: Option<PathBuf>,
    /// How long submitted GPU work may stay incomplete, with the device not reported lost, before
    /// the watchdog writes a `gpu_hang` report. Default: 5 s.
    pub hang_timeout: Duration,
    /// What to do once a hang report is on disk. Default: end the process with
    /// [`OnHang::DEFAULT_EXIT_CODE`] once the driver has had `loss_wait_after_hang` to reset the
    /// device ([`OnHang::default`] says why).
    pub on_hang: OnHang,
    /// With [`OnHang::Exit`], how long to wait after the hang report for the device loss a
    /// driver's own lockup timeout may bring (amdgpu resets after 10 s, NVIDIA on Linux about 18 s
    /// after the hang began), with the fault addresses the hang report could not have, before the
    /// process ends; a GPU that finishes work again in that time ends nothing. Nothing else waits
    /// for it: the hang report is written and sent at once, and a loss of the same device that
    /// comes while the game still runs rewrites that report and joins its Sentry issue. At most 10
    /// minutes. Default: 10 s.
    pub loss_wait_after_hang: Duration,
    /// When the application quits because its device was lost (Bevy's default
    /// `RenderErrorHandler` does), end the process as soon as the loss report is on disk and its
    /// upload done (or timed out), with the application's exit code, without running exit
    /// handlers. Exit handlers and the engine's teardown would tear the driver down under threads
    /// still inside it (Bevy's pipeline compiler on NVIDIA: a SIGSEGV after the report, a second
    /// crash dialog for the player). `false` lets the application exit its own way (e.g. to save
    /// the game after a loss). Default: `true`.
    pub end_process_after_loss: bool,
    /// Enable `VK_AMD_buffer_marker` where offered and mark the start and end of each render stage
    /// (Bevy: each camera's), so a report says which stage the GPU was in. Default: `true`. In Bevy
    /// it costs a command buffer per stage boundary of each camera, plus one at the frame's start
    /// (6 a frame with one 3D camera, whatever the shadowed lights): ×1.004 frame time, ×0.996 CPU
    /// in BENCHMARKS.md's realistic scene on an H200 (batch 17). `false` keeps the hang watchdog
    /// and its frame markers, and a hang report then names the frame, not the stage.
    pub gpu_breadcrumbs: bool,
    /// Exact mode: enable `VK_LAYER_gpu_crash_exact` (shipped beside the executable), which marks
    /// the GPU's progress after every draw and dispatch, so a hang or loss report names the draw
    /// the GPU did not finish instead of ranking the stage's pipelines (README "Exact mode"). It
    /// costs every draw a marker write on the GPU and a lock and a few map operations on the CPU
    /// (not measured yet). `GPU_CRASH_EXACT=1` (or `0`) overrides it, for QA. Default: `false`.
    pub exact_mode: bool,
    /// A crash loop (a renderer that recovers and crashes again) uploads at most this many reports
    /// of one kind per window; the rest are counted in the next upload. Default: 3 per 10 minutes.
    pub crash_loop_limit: CrashLoopLimit,
    /// Application name for reports and the default report directory; `None`: the executable's
    /// name.
    pub application_name: Option<String>,
    /// Application version for reports and the Sentry release (`name@version`). Default: empty.
    pub application_version: String,
    /// The engine reports name. Default: "wgpu"; Bevy's plugin always sets "Bevy" and its version.
    pub engine_name: String,
    /// The engine's version. Default: empty.
    pub engine_version: String,
    /// Sentry delivery: DSN (or the `SENTRY_DSN` environment variable), release, environment,
    /// player consent, privacy switches, upload timeout, outbox bounds. Without a DSN, reports
    /// stay on disk and the log says where. The outbox defaults to `<report dir>/outbox`.
    pub delivery: DeliverySettings,
}

impl Default for ReporterSettings {
    fn default() -> Self {
        let index = IndexSettings::default();
        Self {
            capture_address_bindings: true,
            binding_report_off_on: DriverRule::defaults(),
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
            exact_mode: false,
            crash_loop_limit: CrashLoopLimit::default(),
            application_name: None,
            application_version: String::new(),
            engine_name: "wgpu".into(),
            engine_version: String::new(),
            delivery: DeliverySettings::default(),
        }
    }
}

/// What the watchdog does once a hang report is safely on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnHang {
    /// Keep the game running (it may recover, or the player may wait).
    KeepWaiting,
    /// After the report, give the driver `loss_wait_after_hang` to reset the device (a loss in that
    /// time joins the report, with whatever fault addresses it brings), then exit the process with
    /// this code: a hung GPU rarely recovers, and a game frozen forever is worse than a crash the
    /// player can restart from.
    Exit(i32),
}

impl OnHang {
    /// The exit code of [`OnHang::default`]: 75, `EX_TEMPFAIL` of BSD's `sysexits.h` ("a temporary
    /// failure; the user is invited to retry"). Not a panic's 101, an abort's 134 (3 on Windows) or
    /// a signal's, so a launcher or a player's log tells a GPU hang from the game's own crash.
    pub const DEFAULT_EXIT_CODE: i32 = 75;
}

/// What a shipped game wants: the report first, then, after `loss_wait_after_hang` (10 s) for the
/// driver's reset, the process ends with [`OnHang::DEFAULT_EXIT_CODE`]. Drivers document resetting
/// a hung GPU after 2 s (Windows' TDR) or 10 s (amdgpu's lockup timeout); NVIDIA on Linux lost the
/// device 13.5 s after the report of a hang in a pass, and never, in 8 minutes, for a runaway
/// shader (docs/driver-facts.md): waiting on the driver can freeze the game for good.
impl Default for OnHang {
    fn default() -> Self {
        OnHang::Exit(Self::DEFAULT_EXIT_CODE)
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
        s.binding_report_off_on.retain(|rule| {
            let keep = rule.names_a_driver();
            if !keep {
                errors.push(SettingsError {
                    setting: "binding_report_off_on",
                    given: format!("{rule:?}"),
                    range: "a rule naming a vendor, a driver ID or a non-empty text",
                    used: "the rule left out (it would hold for every driver)".into(),
                });
            }
            keep
        });
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
