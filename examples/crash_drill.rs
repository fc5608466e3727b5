//! The crash drill: a headless Bevy app that creates and frees labelled GPU buffers and textures
//! every frame through ordinary Bevy/wgpu APIs, with the GPU crash reporter watching.
//!
//! Run it with `cargo xtask drill` to put the `VK_LAYER_gpu_crash_drill` fault-injection layer under it
//! (`GPU_CRASH_DRILL=use-after-free` and friends, see README), or plainly with
//! `cargo run --example crash_drill` to see what the reporter captures on your driver.
//!
//! Environment: `CRASH_DRILL_FRAMES` (default 300) frames to run before exiting normally;
//! `CRASH_DRILL_HANG_TIMEOUT_MS` (default 5000) the watchdog's hang timeout.
//!
//! Under a drill it prints one line per fault, e.g.
//! `GPU fault: write at 0x1000c0240 is 0 bytes past the end of buffer "particles" (live) -> out_of_bounds`,
//! then the report's path, and exits non-zero (1 on device loss, 3 on a hang).

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use bevy::prelude::*;
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{
    GpuCrashCapabilities, GpuCrashReporter, GpuCrashReporterPlugin, OnHang,
};

fn main() -> AppExit {
    let frames = std::env::var("CRASH_DRILL_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300u32);
    let hang_timeout = std::env::var("CRASH_DRILL_HANG_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(5));
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin {
        settings: ReporterSettings {
            hang_timeout,
            // A drill hang must end the run once the report is on disk.
            on_hang: OnHang::Exit(3),
            application_name: Some("crash_drill".into()),
            application_version: env!("CARGO_PKG_VERSION").into(),
            ..default()
        },
        ..default()
    });
    support::headless_vulkan(&mut app)
        .insert_resource(DrillFrames {
            remaining: frames,
            total: frames,
        })
        .add_systems(Update, (churn_gpu_resources, finish_after_frames).chain())
        .run()
}

#[derive(Resource)]
struct DrillFrames {
    remaining: u32,
    total: u32,
}

/// The drill's workload: labelled buffers and textures created and freed every frame.
fn churn_gpu_resources(device: Res<RenderDevice>, mut workload: Local<support::DrillWorkload>) {
    workload.frame(&device, |_, _| {});
}

fn finish_after_frames(
    mut frames: ResMut<DrillFrames>,
    reporter: Res<GpuCrashReporter>,
    capabilities: Option<Res<GpuCrashCapabilities>>,
    mut exit: MessageWriter<AppExit>,
) {
    frames.remaining = frames.remaining.saturating_sub(1);
    if frames.remaining > 0 {
        return;
    }
    let stats = reporter.index_stats();
    let (live, freed) = reporter.indexed_ranges();
    println!(
        "crash drill: {} frames, no fault. GPU: {}. Binding events: {} ({} binds, {} unbinds, {} dropped); \
         live ranges {}, freed ranges {}",
        frames.total,
        capabilities
            .map(|c| c.gpu_name.clone())
            .unwrap_or_else(|| "not Vulkan".into()),
        stats.events,
        stats.binds,
        stats.unbinds,
        reporter.binding_events_dropped(),
        live,
        freed,
    );
    exit.write(AppExit::Success);
}
