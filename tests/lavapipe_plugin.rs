//! The plugin in a real headless Bevy app on lavapipe, under the Khronos validation layer.
//!
//! One test per process: the loader reads its environment once, and the validation layer's log must
//! belong to this app alone.

mod common;

use bevy::prelude::*;
use bevy::render::render_resource::{BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy::render::{Render, RenderApp};
use bevy_gpu_crash_reporter::{
    __test_support::BindingMessengerGuard, GpuCrashCapabilities, GpuCrashReporter,
    GpuCrashReporterPlugin,
};
use std::sync::{Arc, Mutex};

/// What of the validation log would be the plugin's fault: its messenger, its feature chains and
/// extension lists, and anything it leaked at instance destruction.
const PLUGIN_CALLS: &[&str] = &[
    "DebugUtilsMessenger",
    "vkCreateDebugUtilsMessengerEXT",
    "vkDestroyDebugUtilsMessengerEXT",
    "AddressBinding",
    "DeviceFault",
    "ShaderAbort",
    "pNext",
    "ppEnabledExtensionNames",
    "vkGetPhysicalDeviceFeatures2",
    "vkDestroyInstance",
    "vkDestroyDevice",
];

#[test]
fn plugin_runs_on_lavapipe_and_shuts_down_clean_under_validation() {
    common::use_lavapipe();
    let dir = common::scratch_dir("lavapipe_plugin");
    let validation_log = common::enable_validation_layer(&dir);

    {
        let mut app = App::new();
        app.add_plugins(GpuCrashReporterPlugin::default())
            .add_plugins(common::headless_default_plugins())
            .add_systems(Update, churn_buffers);
        // Pipelined rendering moves the render world to its own thread at cleanup: look into it
        // from a render-world system.
        let seen = RenderWorldProbe::default();
        app.sub_app_mut(RenderApp)
            .insert_resource(seen.clone())
            .add_systems(Render, probe_render_world);
        common::finish(&mut app);

        let capabilities = app.world().resource::<GpuCrashCapabilities>().clone();
        println!("{}", capabilities.summary());
        assert!(
            capabilities.gpu_name.contains("llvmpipe"),
            "not on lavapipe: {capabilities:?}"
        );
        assert_eq!(capabilities.vendor_name, "Mesa");
        assert!(
            capabilities.debug_utils,
            "lavapipe exposes VK_EXT_debug_utils"
        );
        assert!(capabilities.binding_messenger, "messenger not registered");
        assert!(
            !capabilities.address_binding_report,
            "lavapipe has no binding report"
        );
        assert!(!capabilities.device_fault_ext && !capabilities.device_fault_khr);
        assert!(!capabilities.shader_abort_khr);
        assert!(capabilities
            .missing
            .iter()
            .any(|m| m
                .starts_with("VK_EXT_device_address_binding_report: not offered by the driver")));
        assert!(capabilities
            .missing
            .iter()
            .any(|m| m.starts_with("VK_EXT_device_fault: not offered by the driver")));
        assert!(!capabilities.driver_name.is_empty() && capabilities.api_version.starts_with("1."));

        for _ in 0..20 {
            app.update();
        }

        // The messenger moved into the render world, next to the device that keeps the instance alive.
        let (messenger, render_capabilities) =
            seen.0.lock().unwrap().clone().expect("render world ran");
        assert_ne!(messenger, Some(ash::vk::DebugUtilsMessengerEXT::null()));
        assert!(
            messenger.is_some(),
            "no messenger guard in the render world"
        );
        // Once the render device's session started, the main world follows it (GPU progress
        // markers are made there, after `finish`).
        let capabilities = app.world().resource::<GpuCrashCapabilities>().clone();
        assert!(
            capabilities.gpu_progress,
            "GPU progress markers on lavapipe (barrier + fill)"
        );
        assert_eq!(
            render_capabilities,
            Some(capabilities.clone()),
            "both worlds see the same capabilities"
        );
        let reporter = app.world().resource::<GpuCrashReporter>();
        assert!(reporter.setup_error().is_none());
        assert_eq!(reporter.binding_events_dropped(), 0);
        // lavapipe sends no binding events: the index stays empty rather than inventing ranges.
        assert_eq!(reporter.index_stats().events, 0);
    } // the app drops here: messenger, device, instance, in that order

    // Pipeline compilations still running on Bevy's task pools hold the last wgpu instance and
    // destroy it when they finish. Leaving the process before that raced the validation layer's
    // unloading (segfault in its `__cxa_finalize`, seen in a full test run), so give them time.
    std::thread::sleep(std::time::Duration::from_secs(2));

    let log = std::fs::read_to_string(&validation_log)
        .unwrap_or_else(|e| panic!("validation layer wrote no log at {validation_log:?}: {e}"));
    assert!(
        log.contains("Validation Information") || log.contains("khronos-validation"),
        "the validation layer did not run (its log has no status message):\n{log}"
    );
    let ours: Vec<&str> = log
        .split("\n\n")
        .filter(|m| m.contains("Validation Error") || m.contains("Validation Warning"))
        .filter(|m| PLUGIN_CALLS.iter().any(|call| m.contains(call)))
        .collect();
    assert!(
        ours.is_empty(),
        "validation messages about the plugin's calls:\n{}",
        ours.join("\n---\n")
    );
}

type ProbeResult = (
    Option<ash::vk::DebugUtilsMessengerEXT>,
    Option<GpuCrashCapabilities>,
);

#[derive(Resource, Clone, Default)]
struct RenderWorldProbe(Arc<Mutex<Option<ProbeResult>>>);

fn probe_render_world(
    probe: Res<RenderWorldProbe>,
    guard: Option<Res<BindingMessengerGuard>>,
    capabilities: Option<Res<GpuCrashCapabilities>>,
) {
    *probe.0.lock().unwrap() = Some((
        guard.map(|g| g.messenger().handle()),
        capabilities.map(|c| c.clone()),
    ));
}

/// Ordinary Bevy/wgpu resource churn, so the device is exercised while the messenger is registered.
fn churn_buffers(device: Res<RenderDevice>, mut frame: Local<u32>) {
    *frame += 1;
    let buffer = device.create_buffer(&BufferDescriptor {
        label: Some("churn"),
        size: 4096 * u64::from(*frame % 4 + 1),
        usage: BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    buffer.destroy();
}
