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
