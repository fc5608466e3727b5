//! Bevy wiring only: settings in, callbacks registered, resources out, one system per frame.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bevy::prelude::*;
use bevy::render::error_handler::RenderErrorHandler;
#[cfg(feature = "vulkan")]
use bevy::render::renderer::raw_vulkan_init::RawVulkanInitSettings;
use bevy::render::renderer::{render_system, RenderDevice, RenderGraph, RenderGraphSystems};
use bevy::render::{Render, RenderApp, RenderPlugin, RenderStartup, RenderSystems};

use crate::crash::frames::{begin_gpu_frame, mark_frame_submitting, submit_frame_end};
use crate::crash::render_errors::{hook_render_errors, keep_error_hook};
use crate::crash::{CrashHandling, CrashLoopLimit, DeviceSessions, OnHang, Watchdog};
use crate::data_dir::report_dir;
use crate::deliver::{DeliverySettings, Outbox};
use crate::index::{IndexSettings, IndexerHandle};
use crate::progress::GpuTimeline;
use crate::report::ApplicationInfo;
use crate::vulkan::{BindingMessenger, ExtensionRequest, GpuCrashCapabilities, VulkanSetup};
use crate::GpuCrashReporter;

/// Turns GPU crashes into reports that name the guilty GPU object.
///
/// Add it **before** `DefaultPlugins` (it must register its Vulkan callbacks before `RenderPlugin`
/// creates the device):
///
/// ```no_run
/// use bevy::prelude::*;
/// use bevy_gpu_crash_reporter::GpuCrashReporterPlugin;
///
/// App::new()
///     .add_plugins(GpuCrashReporterPlugin::default())
///     .add_plugins(DefaultPlugins)
///     .run();
/// ```
#[derive(Clone, Debug)]
pub struct GpuCrashReporterPlugin {
    /// Enable `VK_EXT_device_address_binding_report` where offered and record every GPU address
    /// range that is bound and unbound, so a faulting address can be named. Default: `true`.
    pub capture_address_bindings: bool,
    /// Enable `VK_EXT_device_fault` / `VK_KHR_device_fault` (+ `VK_KHR_shader_abort`) where offered,
    /// so a device loss comes with fault addresses and vendor data. Default: `true`.
    pub device_fault: bool,
    /// Binding events the lock-free ring holds between two drains (rounded up to a power of two;
    /// 128 bytes each). Events beyond it are counted as dropped. Default: 32,768 (4 MiB).
    pub binding_ring_capacity: usize,
    /// Live GPU address ranges indexed; binds beyond it are counted, not stored. Default: 262,144,
    /// sized for a game (the index takes 29.3 MiB at the defaults; [`IndexSettings`] says why).
    pub max_live_bindings: usize,
    /// Recently freed ranges kept for use-after-free verdicts (D3D12 DRED keeps 65,536). Default: 65,536.
    pub max_freed_bindings: usize,
    /// Most recent binding events kept for breadcrumbs. Default: 4,096.
    pub max_recent_events: usize,
    /// Where crash reports are written. The environment variable `GPU_CRASH_REPORT_DIR` overrides it;
    /// `None` means a per-application data directory (e.g. `~/.local/share/<app>/gpu-crash-reports`).
    pub report_dir: Option<PathBuf>,
    /// How long submitted GPU work may stay incomplete, with the device not reported lost, before the
    /// watchdog writes a `gpu_hang` report. Default: 5 s.
    pub hang_timeout: Duration,
    /// What to do once a hang report is on disk. Default: [`OnHang::KeepWaiting`].
    pub on_hang: OnHang,
    /// With [`OnHang::Exit`], how long to wait after the hang report for the device loss a driver's
    /// own lockup timeout may bring (amdgpu resets after 10 s, NVIDIA on Linux about 18 s after the
    /// hang began), with the fault addresses the hang report could not have, before the process
    /// ends. Nothing else waits for it: the hang report is written and sent at once, and a loss of
    /// the same device, whenever it comes, rewrites that report and joins its Sentry issue. At most
    /// 10 minutes. Default: 10 s.
    pub loss_wait_after_hang: Duration,
    /// When the app quits because its device was lost (Bevy's default `RenderErrorHandler` does),
    /// end the process as soon as the loss report is on disk and its upload done (or timed out),
    /// with the app's exit code, without running exit handlers. Exit handlers and Bevy's teardown
    /// would tear the driver down under threads still inside it (Bevy's pipeline compiler on
    /// NVIDIA: a SIGSEGV after the report, a second crash dialog for the player). `false` lets the
    /// app exit its own way (e.g. to save the game after a loss). Default: `true`.
    pub end_process_after_loss: bool,
    /// Enable `VK_AMD_buffer_marker` where offered and mark the start and end of each camera's render
    /// stages, so a report says which stage of which camera the GPU was in. Default: `true`. Costs a
    /// command buffer per stage boundary of each camera, plus one at the frame's start (6 a frame with
    /// one 3D camera, whatever the shadowed lights): ×1.004 frame time, ×0.996 CPU in BENCHMARKS.md's
    /// realistic scene on an H200 (batch 17). `false` keeps the hang watchdog and its frame markers,
    /// and a hang report then names the frame, not the stage.
    pub gpu_breadcrumbs: bool,
    /// Keep a map of the Bevy assets behind GPU ranges (meshes inside Bevy's shared slab buffers,
    /// image assets), so a fault names `models/tree.glb#Mesh3/Primitive0` and not "general mesh
    /// slab 3". Work only on frames whose meshes or images changed. Default: `true`.
    pub name_assets: bool,
    /// A crash loop (a renderer that recovers and crashes again) uploads at most this many reports
    /// of one kind per window; the rest are counted in the next upload. Default: 3 per 10 minutes.
    pub crash_loop_limit: CrashLoopLimit,
    /// Application name for reports and the default report directory; `None`: the executable's name.
    pub application_name: Option<String>,
    /// Application version for reports and the Sentry release (`name@version`). Default: empty.
    pub application_version: String,
    /// Sentry delivery: DSN (or the `SENTRY_DSN` environment variable), release, environment,
    /// player consent, privacy switches, upload timeout, outbox bounds. Without a DSN, reports stay
    /// on disk and the log says where. The outbox defaults to `<report dir>/outbox`.
    pub delivery: DeliverySettings,
}

impl Default for GpuCrashReporterPlugin {
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
            on_hang: OnHang::KeepWaiting,
            loss_wait_after_hang: Duration::from_secs(10),
            end_process_after_loss: true,
            gpu_breadcrumbs: true,
            name_assets: true,
            crash_loop_limit: CrashLoopLimit::default(),
            application_name: None,
            application_version: String::new(),
            delivery: DeliverySettings::default(),
        }
    }
}

/// Reports written during this run, newest last (main world).
#[derive(Resource, Clone, Default, Debug)]
pub struct GpuCrashReports {
    /// Paths of the report JSON files.
    pub paths: Arc<Mutex<Vec<PathBuf>>>,
}

impl GpuCrashReports {
    /// A snapshot of the paths.
    pub fn written(&self) -> Vec<PathBuf> {
        self.paths.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records a written report; a report rewritten in place (a hang report replaced by the loss
    /// that followed) is listed once.
    pub(crate) fn push(&self, path: PathBuf) {
        let mut paths = self.paths.lock().unwrap_or_else(|p| p.into_inner());
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
}

/// Owns the hang watchdog in the main world: dropping the app stops the thread.
#[derive(Resource)]
struct WatchdogGuard(#[allow(dead_code)] Watchdog);

/// The shared Vulkan setup, kept in the main world so `finish` and the render world can reach it.
#[derive(Resource, Clone)]
struct VulkanSetupHandle(Arc<VulkanSetup>);

/// Owns the binding messenger in the render world, next to a clone of the render device: the device
/// keeps the Vulkan instance alive, so the messenger is always destroyed before its instance.
#[derive(Resource)]
pub struct BindingMessengerGuard {
    messenger: BindingMessenger,
    _device: RenderDevice,
}

impl BindingMessengerGuard {
    /// The registered messenger.
    pub fn messenger(&self) -> &BindingMessenger {
        &self.messenger
    }
}

impl GpuCrashReporterPlugin {
    /// Registers our `raw_vulkan_init` callbacks, which run while `RenderPlugin` creates the device.
    #[cfg(feature = "vulkan")]
    fn install_vulkan_setup(&self, app: &mut App, indexer: &IndexerHandle) {
        let setup = VulkanSetup::new(
            indexer.ring().clone(),
            ExtensionRequest {
                address_binding_report: self.capture_address_bindings,
                device_fault: self.device_fault,
                buffer_marker: self.gpu_breadcrumbs,
            },
        );
        setup.install(
            &mut app
                .world_mut()
                .get_resource_or_init::<RawVulkanInitSettings>(),
        );
        app.insert_resource(VulkanSetupHandle(setup));
    }
}

/// A setting the plugin cannot use as given: logged at startup, and the value it names used
/// instead (the game runs on; [`GpuCrashReporter::settings_errors`] lists them).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("GpuCrashReporterPlugin::{setting} = {given} is out of range ({range}); using {used}")]
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

impl GpuCrashReporterPlugin {
    /// These settings with every value the plugin cannot use brought into its range, and an error
    /// for each one that was not: durations that would overflow the clock or make every frame a
    /// hang, and counts that would reserve more memory than a machine has.
    pub fn validated(&self) -> (Self, Vec<SettingsError>) {
        const HOUR: Duration = Duration::from_secs(3600);
        let mut s = self.clone();
        let mut errors = Vec::new();
        let e = &mut errors;
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
            (Duration::ZERO, Duration::from_secs(600)),
            "at most 10 min",
        );
        clamp_setting(
            e,
            "delivery.upload_timeout",
            &mut s.delivery.upload_timeout,
            (Duration::ZERO, Duration::from_secs(600)),
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
}

impl Plugin for GpuCrashReporterPlugin {
    fn build(&self, app: &mut App) {
        // Logged in `finish`: the plugin is built before Bevy's LogPlugin has a subscriber.
        let (settings, settings_errors) = self.validated();
        settings.build_validated(app, settings_errors);
    }

    fn finish(&self, app: &mut App) {
        if let Some(reporter) = app.world().get_resource::<GpuCrashReporter>() {
            for err in reporter.settings_errors() {
                error!("GPU crash reporter: {err}");
            }
        }
        self.validated().0.finish_validated(app);
    }
}

impl GpuCrashReporterPlugin {
    fn build_validated(&self, app: &mut App, settings_errors: Vec<SettingsError>) {
        let indexer = match IndexerHandle::spawn(
            self.binding_ring_capacity,
            IndexSettings {
                max_live_bindings: self.max_live_bindings,
                max_freed_bindings: self.max_freed_bindings,
                max_recent_events: self.max_recent_events,
                ..IndexSettings::default()
            },
        ) {
            Ok(indexer) => Arc::new(indexer),
            Err(err) => {
                error!("GPU crash reporter disabled: could not start its indexer thread: {err}");
                return;
            }
        };
        let sessions = DeviceSessions::default();
        let mut reporter = GpuCrashReporter::new(indexer.clone(), sessions.clone());
        reporter.settings_errors = settings_errors;
        if app.is_plugin_added::<RenderPlugin>() {
            let message = "GpuCrashReporterPlugin was added after RenderPlugin, so it cannot enable \
                 the fault extensions on the render device. Add it before DefaultPlugins: \
                 `App::new().add_plugins(GpuCrashReporterPlugin::default()).add_plugins(DefaultPlugins)`";
            error!("{message}");
            reporter.setup_error = Some(message.to_owned());
        } else {
            #[cfg(feature = "vulkan")]
            self.install_vulkan_setup(app, &indexer);
            #[cfg(not(feature = "vulkan"))]
            {
                let message = "bevy_gpu_crash_reporter was built without its `vulkan` feature: it \
                     has nothing to hook, and GPU crashes are not reported";
                warn!("{message}");
                reporter.setup_error = Some(message.to_owned());
            }
        }
        let application_name = self.application_name.clone().unwrap_or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "bevy_app".into())
        });
        let application = ApplicationInfo {
            name: application_name.clone(),
            version: self.application_version.clone(),
            engine_name: "Bevy".into(),
            engine_version: crate::BEVY_VERSION.into(),
            executable: std::env::current_exe()
                .ok()
                .map(|p| p.display().to_string()),
            process_id: std::process::id(),
        };
        let reports = GpuCrashReports::default();
        let report_dir = report_dir(self.report_dir.as_deref(), &application_name);
        let mut delivery = self.delivery.clone();
        if delivery.outbox_dir == crate::deliver::default_outbox_dir() {
            delivery.outbox_dir = report_dir.join("outbox");
        }
        if crate::data_dir::in_temp_fallback(&report_dir) {
            warn!(
                "GPU crash reporter: no data folder is known for this user (no HOME, none in the \
                 password database): crash reports go to {}, under the temp folder (owner-only, but \
                 the system may clear it); set GPU_CRASH_REPORT_DIR or the plugin's report_dir",
                report_dir.display()
            );
        }
        let outbox = Outbox::new(delivery);
        if outbox.dsn().is_some() {
            // Off the main thread: reports an earlier run wrote but never queued (killed between
            // the two) are queued, then what an earlier run could not upload (offline, killed
            // mid-upload) is sent.
            if let Err(err) =
                outbox.spawn_startup_flush(report_dir.clone(), Duration::from_secs(60))
            {
                warn!("GPU crash reporter: could not start the upload thread: {err}");
            }
        }
        let mut crash = CrashHandling::new(
            reporter.clone(),
            sessions.clone(),
            report_dir,
            application,
            self.hang_timeout,
            self.on_hang,
            self.loss_wait_after_hang,
            self.crash_loop_limit,
            reports.clone(),
            outbox,
        );
        crash.end_process_after_loss = self.end_process_after_loss;
        if self.name_assets {
            crate::assets::observe_users(app, crash.asset_users.clone());
        }
        app.insert_resource(reporter)
            .insert_resource(reports)
            .insert_resource(sessions)
            .insert_resource(crash)
            .add_systems(
                First,
                (
                    advance_capture_frame,
                    keep_error_hook.run_if(resource_exists_and_changed::<RenderErrorHandler>),
                    follow_device_session,
                    start_watchdog.run_if(not(resource_exists::<WatchdogGuard>)),
                ),
            );
        crate::crash::panic_hook::install(app.world().resource::<CrashHandling>().clone());
        app.insert_resource(SendHeldBackOnExit(
            app.world().resource::<CrashHandling>().clone(),
        ));
    }

    fn finish_validated(&self, app: &mut App) {
        #[cfg(feature = "vulkan")]
        warn_if_vulkan_not_asked_for(app);
        let Some(setup) = app.world().get_resource::<VulkanSetupHandle>().cloned() else {
            return;
        };
        let capabilities = setup.0.outcome().capabilities.clone();
        let capabilities = match capabilities {
            Some(capabilities) => {
                info!("{}", capabilities.summary());
                for line in &capabilities.missing {
                    info!("GPU crash reporter: {line}");
                }
                capabilities
            }
            None => {
                warn!(
                    "GPU crash reporter: the render device was not created through Vulkan \
                     (other backend, or no GPU); GPU crash capture is off"
                );
                GpuCrashCapabilities::default()
            }
        };
        app.insert_resource(capabilities.clone());
        let reporter = app.world().resource::<GpuCrashReporter>().clone();
        let crash = app.world().resource::<CrashHandling>().clone();
        let sessions = app.world().resource::<DeviceSessions>().clone();
        hook_render_errors(app.world_mut());
        let asset_paths = app
            .world()
            .get_resource::<AssetServer>()
            .map(|server| crate::assets::AssetPaths(server.clone()));
        if let Some(render_app) = app.get_sub_app_mut(RenderApp) {
            render_app
                .insert_resource(capabilities)
                .insert_resource(reporter)
                .insert_resource(setup)
                .insert_resource(crash)
                .insert_resource(sessions.clone())
                .add_systems(RenderStartup, start_device_session)
                .add_systems(
                    Render,
                    begin_gpu_frame
                        .in_set(RenderSystems::Render)
                        .before(render_system),
                )
                .add_systems(
                    RenderGraph,
                    (
                        mark_frame_submitting
                            .after(RenderGraphSystems::Render)
                            .before(RenderGraphSystems::Submit),
                        // Right after the graph's submit, before Bevy presents (see the system), and
                        // before every Finish system: a parallel one started first would make this
                        // exclusive system wait for a pool thread (see crash::frames).
                        submit_frame_end
                            .after(RenderGraphSystems::Submit)
                            .before(RenderGraphSystems::Finish),
                    ),
                );
            crate::breadcrumbs::install(render_app, sessions);
            if self.name_assets {
                crate::assets::install(render_app);
                if let Some(paths) = asset_paths {
                    render_app.insert_resource(paths);
                }
            }
        }
    }
}

/// Says once what our dependency does to the app's backend choice: Bevy's `raw_vulkan_init` feature,
/// which this crate turns on for the whole app, makes Bevy 0.19 create a Vulkan-only instance and
/// ignore `WgpuSettings::backends` (other backends only if Vulkan fails to start). An app that asked
/// for a backend set without Vulkan (e.g. DX12 only) gets Vulkan anyway: say so.
#[cfg(feature = "vulkan")]
fn warn_if_vulkan_not_asked_for(app: &App) {
    use bevy::render::settings::{Backends, RenderCreation};
    let from_settings = app
        .get_added_plugins::<RenderPlugin>()
        .first()
        .and_then(|render| match &render.render_creation {
            RenderCreation::Automatic(settings) => settings.backends,
            RenderCreation::Manual(_) => None,
        });
    let from_env = std::env::var("WGPU_BACKEND")
        .ok()
        .map(|v| Backends::from_comma_list(&v));
    if let Some(asked) = from_env.or(from_settings) {
        if !asked.contains(Backends::VULKAN) {
            warn!(
                "GPU crash reporter: the app asks for {asked:?} without Vulkan, but this plugin turns \
                 on Bevy's `raw_vulkan_init`, under which Bevy 0.19 always tries Vulkan first and \
                 ignores the backend setting; the game renders through Vulkan where a Vulkan driver \
                 exists. Remove the plugin for a non-Vulkan build."
            );
        }
    }
}

/// Runs whenever the render world gets a (new) render device: adopts the messenger the device
/// callback registered, makes the device's marker memory and starts its session.
fn start_device_session(
    mut commands: Commands,
    setup: Res<VulkanSetupHandle>,
    device: Res<RenderDevice>,
    crash: Res<CrashHandling>,
) {
    let mut outcome = setup.0.outcome();
    if let Some(messenger) = outcome.messenger.take() {
        commands.insert_resource(BindingMessengerGuard {
            messenger,
            _device: device.clone(),
        });
    }
    let Some(mut capabilities) = outcome.capabilities.clone() else {
        return; // not Vulkan: nothing to watch
    };
    let generation = outcome.device_callback_runs;
    drop(outcome);
    let timeline = match crate::vulkan::create_marker_buffer(
        &device,
        capabilities.buffer_marker,
        capabilities.debug_utils,
        setup.0.request().buffer_marker,
    ) {
        Ok(markers) => {
            capabilities.gpu_progress = true;
            capabilities.breadcrumbs = Some(markers.writer());
            Some(GpuTimeline::new(Arc::new(markers)))
        }
        Err(err) => {
            let line = crate::vulkan::progress_markers_off(&err);
            warn!("GPU crash reporter: {line}");
            capabilities.missing.push(line);
            None
        }
    };
    // A new device starts an empty asset map: Bevy's mesh allocator (slab ids) and images are
    // rebuilt with it.
    let assets = crate::assets::SharedAssetMap::default();
    commands.insert_resource(assets.clone());
    let session = crash.sessions.start(
        generation,
        device.clone(),
        capabilities.clone(),
        timeline,
        assets,
    );
    if session.generation > 1 {
        info!(
            "GPU crash reporter: watching render device {} (after renderer recovery)",
            session.generation
        );
    }
    commands.insert_resource(capabilities);
}

fn advance_capture_frame(reporter: Res<GpuCrashReporter>, mut frame: Local<u64>) {
    *frame += 1;
    reporter.indexer.frame_tick(*frame);
}

/// Main world: keeps `GpuCrashCapabilities` in step with the live device.
fn follow_device_session(
    mut commands: Commands,
    sessions: Res<DeviceSessions>,
    mut seen: Local<u32>,
) {
    if let Some(session) = sessions.current() {
        if session.generation != *seen {
            *seen = session.generation;
            commands.insert_resource(session.capabilities.clone());
        }
    }
}

/// Dropped with the app's main world when the app exits: a crash-loop report held back for later
/// goes out then (an `AppExit` written by the app's render-error handler ends the run before any
/// schedule could see it, so a system would miss it).
#[derive(Resource)]
struct SendHeldBackOnExit(CrashHandling);

impl Drop for SendHeldBackOnExit {
    fn drop(&mut self) {
        crate::crash::panic_hook::forget();
        self.0.at_exit();
    }
}

/// Starts the hang watchdog once (it follows whichever device is current).
fn start_watchdog(
    mut commands: Commands,
    crash: Res<CrashHandling>,
    sessions: Res<DeviceSessions>,
    mut failed: Local<bool>,
) {
    if *failed || sessions.current().is_none() {
        return;
    }
    let tick =
        (crash.hang_timeout / 20).clamp(Duration::from_millis(10), Duration::from_millis(250));
    let handling = crash.clone();
    let reporter = crash.reporter.clone();
    match Watchdog::spawn(
        tick,
        crash.hang_timeout,
        sessions.clone(),
        move |session, stall| handling.hang(session, stall),
        move |generation, suspect| {
            if suspect {
                reporter.hold_unbinds(generation);
            } else {
                reporter.release_hold(generation);
            }
        },
    ) {
        Ok(watchdog) => commands.insert_resource(WatchdogGuard(watchdog)),
        Err(err) => {
            *failed = true;
            error!("GPU crash reporter: could not start the hang watchdog: {err}");
        }
    }
}
