//! Bevy wiring only: settings in, callbacks registered, resources out, one system per frame.

use bevy::prelude::*;
use bevy::render::error_handler::RenderErrorHandler;
use bevy::render::renderer::{render_system, RenderGraph, RenderGraphSystems};
use bevy::render::{Render, RenderApp, RenderPlugin, RenderStartup, RenderSystems};
use gpu_crash_core::{CrashReporter, ReporterSettings};

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
///
/// Every setting is a field of [`ReporterSettings`], the core's settings, shared with plain wgpu
/// applications and documented there; the plugin adds only what is Bevy's own:
///
/// ```no_run
/// use std::time::Duration;
/// use bevy::prelude::*;
/// use bevy_gpu_crash_reporter::{GpuCrashReporterPlugin, ReporterSettings};
///
/// App::new()
///     .add_plugins(GpuCrashReporterPlugin {
///         settings: ReporterSettings {
///             hang_timeout: Duration::from_secs(3),
///             application_version: env!("CARGO_PKG_VERSION").into(),
///             ..default()
///         },
///         ..default()
///     })
///     .add_plugins(DefaultPlugins)
///     .run();
/// ```
#[derive(Clone, Debug)]
pub struct GpuCrashReporterPlugin {
    /// The reporter's settings (capture, index, hang and loss handling, delivery). The engine
    /// fields are always set to Bevy and its version.
    pub settings: ReporterSettings,
    /// Keep a map of the Bevy assets behind GPU ranges (meshes inside Bevy's shared slab buffers,
    /// image assets), so a fault names `models/tree.glb#Mesh3/Primitive0` and not "general mesh
    /// slab 3". Work only on frames whose meshes or images changed. Default: `true`.
    pub name_assets: bool,
}

impl Default for GpuCrashReporterPlugin {
    fn default() -> Self {
        Self {
            settings: ReporterSettings::default(),
            name_assets: true,
        }
    }
}

impl GpuCrashReporterPlugin {
    /// The reporter's settings: these, and Bevy as the engine.
    fn reporter_settings(&self) -> ReporterSettings {
        ReporterSettings {
            engine_name: "Bevy".into(),
            engine_version: BEVY_VERSION.into(),
            ..self.settings.clone()
        }
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
        if self.settings.gpu_breadcrumbs {
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
