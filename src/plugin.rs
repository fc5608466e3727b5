//! Bevy wiring only: settings in, callbacks registered, resources out, one system per frame.

use std::path::PathBuf;
use std::time::Duration;

use bevy::prelude::*;
use bevy::render::error_handler::RenderErrorHandler;
use bevy::render::renderer::{render_system, RenderGraph, RenderGraphSystems};
use bevy::render::{Render, RenderApp, RenderPlugin, RenderStartup, RenderSystems};
use gpu_crash_core::{
    CrashLoopLimit, CrashReporter, DeliverySettings, OnHang, ReporterSettings, SettingsError,
};

use crate::render::device::{attach_render_device, follow_render_device};
use crate::render::frames::{begin_gpu_frame, mark_frame_submitting, submit_frame_end};
use crate::render::render_errors::{hook_render_errors, keep_error_hook};
use crate::resources::{GpuCrashCapabilities, GpuCrashReporter, GpuCrashReports};

/// The Bevy version this crate is built against (checked against Cargo.lock by a test).
pub const BEVY_VERSION: &str = "0.19.1";

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
    /// sized for a game (the index takes 29.3 MiB at the defaults; BENCHMARKS.md says why).
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
    /// What to do once a hang report is on disk. Default: end the process with
    /// [`OnHang::DEFAULT_EXIT_CODE`] once the driver has had `loss_wait_after_hang` to reset the
    /// device ([`OnHang::default`] says why), as the core's settings do.
    pub on_hang: OnHang,
    /// With [`OnHang::Exit`], how long to wait after the hang report for the device loss a driver's
    /// own lockup timeout may bring (amdgpu resets after 10 s, NVIDIA on Linux about 18 s after the
    /// hang began), with the fault addresses the hang report could not have, before the process
    /// ends; a GPU that finishes work again in that time ends nothing. Nothing else waits for it:
    /// the hang report is written and sent at once, and a loss of the same device that comes while
    /// the game still runs rewrites that report and joins its Sentry issue. At most 10 minutes.
    /// Default: 10 s.
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
        Self::from_settings(ReporterSettings::default(), true)
    }
}

impl GpuCrashReporterPlugin {
    /// The plugin with the reporter's settings `s`.
    fn from_settings(s: ReporterSettings, name_assets: bool) -> Self {
        Self {
            capture_address_bindings: s.capture_address_bindings,
            device_fault: s.device_fault,
            binding_ring_capacity: s.binding_ring_capacity,
            max_live_bindings: s.max_live_bindings,
            max_freed_bindings: s.max_freed_bindings,
            max_recent_events: s.max_recent_events,
            report_dir: s.report_dir,
            hang_timeout: s.hang_timeout,
            on_hang: s.on_hang,
            loss_wait_after_hang: s.loss_wait_after_hang,
            end_process_after_loss: s.end_process_after_loss,
            gpu_breadcrumbs: s.gpu_breadcrumbs,
            name_assets,
            crash_loop_limit: s.crash_loop_limit,
            application_name: s.application_name,
            application_version: s.application_version,
            delivery: s.delivery,
        }
    }

    /// The reporter's settings: these, and Bevy as the engine.
    fn reporter_settings(&self) -> ReporterSettings {
        ReporterSettings {
            capture_address_bindings: self.capture_address_bindings,
            device_fault: self.device_fault,
            binding_ring_capacity: self.binding_ring_capacity,
            max_live_bindings: self.max_live_bindings,
            max_freed_bindings: self.max_freed_bindings,
            max_recent_events: self.max_recent_events,
            report_dir: self.report_dir.clone(),
            hang_timeout: self.hang_timeout,
            on_hang: self.on_hang,
            loss_wait_after_hang: self.loss_wait_after_hang,
            end_process_after_loss: self.end_process_after_loss,
            gpu_breadcrumbs: self.gpu_breadcrumbs,
            crash_loop_limit: self.crash_loop_limit,
            application_name: self.application_name.clone(),
            application_version: self.application_version.clone(),
            engine_name: "Bevy".into(),
            engine_version: BEVY_VERSION.into(),
            delivery: self.delivery.clone(),
        }
    }

    /// These settings with every value the plugin cannot use brought into its range, and an error
    /// for each one that was not (see [`ReporterSettings::validated`]).
    pub fn validated(&self) -> (Self, Vec<SettingsError>) {
        let (settings, errors) = self.reporter_settings().validated();
        (Self::from_settings(settings, self.name_assets), errors)
    }
}

impl Plugin for GpuCrashReporterPlugin {
    fn build(&self, app: &mut App) {
        // Settings the reporter cannot use are logged in `finish`: the plugin is built before
        // Bevy's LogPlugin has a subscriber.
        let reporter = match CrashReporter::start(&self.reporter_settings()) {
            Ok(reporter) => reporter,
            Err(err) => {
                error!("GPU crash reporter disabled: {err}");
                return;
            }
        };
        let setup_error = if app.is_plugin_added::<RenderPlugin>() {
            let message = "GpuCrashReporterPlugin was added after RenderPlugin, so it cannot enable \
                 the fault extensions on the render device. Add it before DefaultPlugins: \
                 `App::new().add_plugins(GpuCrashReporterPlugin::default()).add_plugins(DefaultPlugins)`";
            error!("{message}");
            Some(message.to_owned())
        } else if cfg!(feature = "vulkan") {
            #[cfg(feature = "vulkan")]
            crate::vulkan_init::install(app, &reporter);
            None
        } else {
            let message = "bevy_gpu_crash_reporter was built without its `vulkan` feature: it \
                 has nothing to hook, and GPU crashes are not reported";
            warn!("{message}");
            Some(message.to_owned())
        };
        if self.name_assets {
            crate::assets::observe_users(app, reporter.asset_users().clone());
        }
        app.insert_resource(GpuCrashReports(reporter.written_reports().clone()))
            .insert_resource(ExitTheReporter(reporter.clone()))
            .insert_resource(GpuCrashReporter::new(reporter, setup_error))
            .add_systems(
                First,
                (
                    advance_capture_frame,
                    keep_error_hook.run_if(resource_exists_and_changed::<RenderErrorHandler>),
                    follow_render_device,
                ),
            )
            .add_systems(Last, end_the_run_when_the_app_exits);
    }

    fn finish(&self, app: &mut App) {
        let Some(reporter) = app.world().get_resource::<GpuCrashReporter>().cloned() else {
            return;
        };
        for err in reporter.settings_errors() {
            error!("GPU crash reporter: GpuCrashReporterPlugin::{err}");
        }
        if reporter.setup_error().is_some() {
            return;
        }
        #[cfg(feature = "vulkan")]
        crate::vulkan_init::warn_if_vulkan_not_asked_for(app);
        let capabilities = match reporter.created_device_capabilities() {
            Some(capabilities) => {
                info!("{}", capabilities.summary());
                for line in &capabilities.missing {
                    info!("GPU crash reporter: {line}");
                }
                GpuCrashCapabilities(capabilities)
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
        hook_render_errors(app.world_mut());
        let asset_paths = app
            .world()
            .get_resource::<AssetServer>()
            .map(|server| crate::assets::AssetPaths(server.clone()));
        #[cfg(feature = "pbr")]
        let material_names = crate::pipelines::MaterialTypeNames::from_registry(app);
        let Some(render_app) = app.get_sub_app_mut(RenderApp) else {
            return;
        };
        render_app
            .insert_resource(capabilities)
            .insert_resource(reporter.clone())
            .add_systems(RenderStartup, attach_render_device)
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
                    // exclusive system wait for a pool thread (see render::frames).
                    submit_frame_end
                        .after(RenderGraphSystems::Submit)
                        .before(RenderGraphSystems::Finish),
                ),
            );
        crate::breadcrumbs::install(render_app, reporter.breadcrumbs());
        #[cfg(feature = "pbr")]
        if self.gpu_breadcrumbs {
            // The draw lists are placed by the breadcrumbs' stages: nothing to name without them.
            crate::pipelines::install(render_app, material_names);
            render_app.configure_sets(
                Render,
                crate::pipelines::RecordDrawLists.after(begin_gpu_frame),
            );
        }
        if let Some(paths) = asset_paths {
            render_app.insert_resource(paths);
        }
        if self.name_assets {
            crate::assets::install(render_app);
        }
    }
}

fn advance_capture_frame(reporter: Res<GpuCrashReporter>, mut frame: Local<u64>) {
    *frame += 1;
    reporter.frame_tick(*frame);
}

/// The app quits at the end of this frame: the session ends and goes out now, while Bevy still runs,
/// so that [`ExitTheReporter`]'s drop in the teardown waits on nothing (see
/// [`CrashReporter::app_exiting`]).
fn end_the_run_when_the_app_exits(
    mut exits: MessageReader<AppExit>,
    reporter: Res<GpuCrashReporter>,
    mut done: Local<bool>,
) {
    if exits.read().next().is_some() && !*done {
        *done = true;
        reporter.app_exiting();
    }
}

/// Dropped with the app's main world when the app exits: the reporter's threads finish (bounded)
/// and a crash-loop report held back for later goes out then (an `AppExit` written by the app's
/// render-error handler ends the run before any schedule could see it, so a system would miss it).
#[derive(Resource)]
struct ExitTheReporter(CrashReporter);

impl Drop for ExitTheReporter {
    fn drop(&mut self) {
        self.0.at_exit();
    }
}
