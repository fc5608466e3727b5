//! Added after `RenderPlugin`, the plugin must say so and how to fix it, never silently do nothing.

mod common;

use bevy::prelude::*;
use bevy_gpu_crash_reporter::{GpuCrashCapabilities, GpuCrashReporter, GpuCrashReporterPlugin};

#[test]
fn added_after_render_plugin_reports_how_to_fix_the_order() {
    let _serial = one_app_at_a_time();
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
/// still runs first: the hook re-wraps whatever handler is current. Proven by calling the installed
/// handler as Bevy does (inside `World::resource_scope`, which re-inserts it with a new change tick)
/// twice, with frames between: the app's handler runs each time and its policy comes back.
#[test]
fn an_app_handler_installed_later_is_wrapped_not_replaced() {
    use bevy::render::error_handler::{
        ErrorType, RenderError, RenderErrorHandler, RenderErrorPolicy,
    };
    use std::sync::atomic::{AtomicU32, Ordering};
    static APP_HANDLER_RAN: AtomicU32 = AtomicU32::new(0);
    let _serial = one_app_at_a_time();
    common::use_lavapipe();
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin::default())
        .add_plugins(common::headless_default_plugins());
    common::finish(&mut app);
    app.update();
    fn app_policy(_: &RenderError, _: &mut World, _: &mut World) -> RenderErrorPolicy {
        APP_HANDLER_RAN.fetch_add(1, Ordering::SeqCst);
        RenderErrorPolicy::StopRendering
    }
    app.insert_resource(RenderErrorHandler(app_policy));
    app.update();
    let mut render_world = World::new();
    for round in 1..=2 {
        let error = RenderError {
            ty: ErrorType::Validation,
            description: "plugin_order test".into(),
            source: None,
        };
        let policy = app
            .world_mut()
            .resource_scope(|main, handler: Mut<RenderErrorHandler>| {
                (handler.0)(&error, main, &mut render_world)
            });
        assert!(
            matches!(policy, RenderErrorPolicy::StopRendering),
            "round {round}: the app's policy comes back"
        );
        assert_eq!(
            APP_HANDLER_RAN.load(Ordering::SeqCst),
            round,
            "round {round}: the app's own handler ran"
        );
        app.update();
        app.update();
    }
}

/// One Bevy app at a time in this process, without the Khronos validation layer that wgpu's
/// debug-build instance flags load when it is installed: this binary segfaulted at exit in 3 of 10
/// runs, in the layer's `__cxa_finalize` during `dlclose`, while a pipeline-compilation task dropped
/// the last wgpu instance on a task-pool thread (`WGPU_VALIDATION=0`: 0 of 10). These tests check the
/// hook, not the validation layer; tests/lavapipe_plugin.rs runs under it on purpose.
fn one_app_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    // Process-global, set before this test's first Vulkan call (the lock orders the tests).
    std::env::set_var("WGPU_VALIDATION", "0");
    guard
}
