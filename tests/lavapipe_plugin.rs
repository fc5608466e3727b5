//! The plugin in a real headless Bevy app on lavapipe, under the Khronos validation layer.
//!
//! One app per process: the loader reads its environment once, and the validation layer's log must
//! belong to that app alone. The first test runs its app in this process; the breadcrumb test runs
//! this binary again as a child (`child`, an ignored test only it starts).

mod common;

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::render_resource::{BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy::render::{Render, RenderApp};
use bevy_gpu_crash_reporter::{GpuCrashCapabilities, GpuCrashReporter, GpuCrashReporterPlugin};
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

        // The messenger went to the render device's session, next to the device that keeps the
        // instance alive.
        let (messenger, render_capabilities) =
            seen.0.lock().unwrap().clone().expect("render world ran");
        assert_ne!(messenger, Some(0));
        assert!(messenger.is_some(), "no messenger in the device's session");
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
    let ours = messages_about(&log, PLUGIN_CALLS);
    assert!(
        ours.is_empty(),
        "validation messages about the plugin's calls:\n{}",
        ours.join("\n---\n")
    );
}

/// Validation errors and warnings of `log` that mention any of `calls`.
fn messages_about<'a>(log: &'a str, calls: &[&str]) -> Vec<&'a str> {
    log.split("\n\n")
        .filter(|m| m.contains("Validation Error") || m.contains("Validation Warning"))
        .filter(|m| calls.iter().any(|call| m.contains(call)))
        .collect()
}

/// What of the validation log would be the breadcrumbs' fault: every raw Vulkan call they make, by
/// name (the marker buffer's creation, allocation, binding, mapping and destruction; the frame
/// markers' barriers and fills; the `vkCmdWriteBufferMarkerAMD` stage markers; the raw command
/// buffers, begun and ended inside wgpu's encoders and submitted with the frame), any message about
/// the marker buffer or its memory (named, so the validation layer prints the name with the object),
/// any synchronization hazard, and the device's destruction (objects of ours still alive then:
/// VUID-vkDestroyDevice-device-05137). wgpu and Bevy make some of the same calls; on lavapipe they
/// cause no validation message at all, so a message here is worth a look whoever caused it.
const MARKER_CALLS: &[&str] = &[
    "gpu_crash_reporter progress marker",
    "vkCmdWriteBufferMarkerAMD",
    "vkCmdFillBuffer",
    "vkCmdPipelineBarrier",
    "vkCreateBuffer",
    "vkAllocateMemory",
    "vkBindBufferMemory",
    "vkMapMemory",
    "vkDestroyBuffer",
    "vkFreeMemory",
    "vkBeginCommandBuffer",
    "vkEndCommandBuffer",
    "vkQueueSubmit",
    "SYNC-HAZARD",
    "vkDestroyDevice",
];

/// Breadcrumbs in a 3D scene with shadowed lights, on lavapipe under the crash drill layer (which
/// provides `VK_AMD_buffer_marker`, so both marker paths run: stage markers and the frame's barrier +
/// fill), under the validation layer with synchronization validation; the app exits with frames in
/// flight.
#[test]
fn breadcrumb_markers_are_valid_under_synchronization_validation() {
    let dir = common::scratch_dir("lavapipe_plugin-markers");
    let validation_log = common::validation_settings(&dir, true);
    let output = common::child_command(&dir.join("reports"), None)
        .env("VK_LAYER_SETTINGS_PATH", dir.join("vk_layer_settings.txt"))
        // The validation layer above the drill layer: it checks our calls as the application
        // makes them, before the drill layer emulates the marker extension.
        .env(
            "VK_LAYER_PATH",
            format!(
                "{}:{}",
                common::drill_layer_dir().display(),
                common::SYSTEM_LAYER_DIR
            ),
        )
        .env(
            "VK_INSTANCE_LAYERS",
            "VK_LAYER_KHRONOS_validation:VK_LAYER_gpu_crash_drill",
        )
        .output()
        .expect("spawn child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let counts = stdout
        .lines()
        .find_map(|l| l.split("marker command buffers: ").nth(1))
        .unwrap_or_else(|| panic!("the child printed no count: {stdout}"));
    let (buffers, frames) = counts.split_once(" in frames: ").unwrap();
    let (buffers, frames): (u64, u64) = (buffers.parse().unwrap(), frames.parse().unwrap());
    // Frame start, the camera's three stage boundaries and its end boundary, the frame's end: six
    // per frame, none per shadow view (4 cascades and 6 cube faces run the same schedule).
    assert!(
        frames > 20 && buffers <= 6 * (frames + 2),
        "{buffers} marker command buffers in {frames} frames"
    );
    assert!(
        buffers >= 5 * frames.saturating_sub(10),
        "breadcrumbs ran: {buffers} marker command buffers in {frames} frames"
    );

    let log = std::fs::read_to_string(&validation_log)
        .unwrap_or_else(|e| panic!("validation layer wrote no log at {validation_log:?}: {e}"));
    assert!(
        log.contains("Validation Information") || log.contains("khronos-validation"),
        "the validation layer did not run (its log has no status message):\n{log}"
    );
    let ours = messages_about(&log, MARKER_CALLS);
    assert!(
        ours.is_empty(),
        "validation messages about the breadcrumbs' calls:\n{}",
        ours.join("\n---\n")
    );
}

/// The breadcrumb test's app: a named 3D camera with a depth prepass, a shadowed directional light
/// and a shadowed point light; quits after 60 frames, with frames still in flight.
#[test]
#[ignore = "child process entry point: the test above starts it"]
fn child() {
    common::use_runtime_dir();
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin::default())
        .add_plugins(common::headless_default_plugins())
        .add_plugins(ScheduleRunnerPlugin::run_loop(std::time::Duration::ZERO))
        .add_systems(Startup, scene)
        .add_systems(Update, quit_after_60_frames);
    common::small_shadow_maps(&mut app);
    let exit = app.run();
    common::exit_process(exit);
}

fn scene(
    mut commands: Commands,
    mut images: ResMut<Assets<Image>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    commands.spawn(common::main_camera(&mut images, 128, 96));
    common::shadowed_scene(&mut commands, &mut meshes, &mut materials, 1);
}

/// Prints the plugin's marker command buffers per rendered frame, then quits.
fn quit_after_60_frames(
    mut frames: Local<u64>,
    mut counted_from: Local<Option<(u64, u64)>>,
    reporter: Res<GpuCrashReporter>,
    mut exit: MessageWriter<AppExit>,
) {
    *frames += 1;
    // Count from frame 20, once pipelines are compiled and every stage renders.
    if *frames == 20 {
        *counted_from = Some((reporter.marker_command_buffers(), *frames));
    }
    if *frames == 60 {
        let (buffers, frame) = counted_from.unwrap();
        println!(
            "marker command buffers: {} in frames: {}",
            reporter.marker_command_buffers() - buffers,
            *frames - frame
        );
        exit.write(AppExit::Success);
    }
}

type ProbeResult = (Option<u64>, Option<GpuCrashCapabilities>);

#[derive(Resource, Clone, Default)]
struct RenderWorldProbe(Arc<Mutex<Option<ProbeResult>>>);

fn probe_render_world(
    probe: Res<RenderWorldProbe>,
    reporter: Res<GpuCrashReporter>,
    capabilities: Option<Res<GpuCrashCapabilities>>,
) {
    *probe.0.lock().unwrap() = Some((
        reporter.binding_messenger(),
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
