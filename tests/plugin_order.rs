//! Added after `RenderPlugin`, the plugin must say so and how to fix it, never silently do nothing.

mod common;

use bevy::prelude::*;
use bevy_gpu_crash_reporter::{GpuCrashCapabilities, GpuCrashReporter, GpuCrashReporterPlugin};

#[test]
fn added_after_render_plugin_reports_how_to_fix_the_order() {
    common::use_lavapipe();
    let mut app = App::new();
    app.add_plugins(common::headless_default_plugins())
        .add_plugins(GpuCrashReporterPlugin::default());
    common::finish(&mut app);
    app.update();
    let reporter = app.world().resource::<GpuCrashReporter>();
    let error = reporter.setup_error().expect("a setup error");
    assert!(error.contains("after RenderPlugin"), "{error}");
    assert!(error.contains("before DefaultPlugins"), "{error}");
    // The renderer still works, without our capabilities.
    assert!(app.world().get_resource::<GpuCrashCapabilities>().is_none());
}

/// An app that installs its own `RenderErrorHandler` after startup keeps its policy, and our report
/// still runs first: the hook re-wraps whatever handler is current.
#[test]
fn an_app_handler_installed_later_is_wrapped_not_replaced() {
    use bevy::render::error_handler::{RenderErrorHandler, RenderErrorPolicy};
    common::use_lavapipe();
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin::default())
        .add_plugins(common::headless_default_plugins());
    common::finish(&mut app);
    app.update();
    fn app_policy(
        _: &bevy::render::error_handler::RenderError,
        _: &mut World,
        _: &mut World,
    ) -> RenderErrorPolicy {
        RenderErrorPolicy::StopRendering
    }
    app.insert_resource(RenderErrorHandler(app_policy));
    app.update();
    let installed = app.world().resource::<RenderErrorHandler>().0;
    let theirs = RenderErrorHandler(app_policy).0;
    assert_ne!(
        installed as usize, theirs as usize,
        "ours must be in front again"
    );
}
