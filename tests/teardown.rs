//! A device loss after a teardown of 100,000 objects: a game unloads its level while the GPU is hung
//! on a read of the level's terrain, and the driver resets the GPU (device lost) only afterwards.
//! The report is built after the teardown, and the culprit must resolve as it was at the fault:
//! live, named, neither freed nor forgotten (more objects were torn down than the 65,536 freed
//! ranges the index keeps).
//!
//! On lavapipe under the crash drill layer: `hang`, then `GPU_CRASH_DRILL_LOSS=after-hang` with a
//! read fault inside `level_terrain` (the object of that name live when the GPU hung). The case runs
//! this test binary again as a child (`child` below) because the Vulkan loader reads its environment
//! once per process.

mod common;

use std::time::{Duration, Instant};

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::report::{CrashKind, CrashReport, FaultVerdict, ObjectState};
use bevy_gpu_crash_reporter::GpuCrashReporterPlugin;
use bevy_gpu_crash_reporter::ReporterSettings;

/// Buffers of the level besides the terrain: more than the 65,536 freed ranges the index keeps.
const LEVEL_CHUNKS: usize = 100_000;
/// Created per frame while the level streams in.
const CHUNKS_PER_FRAME: usize = 10_000;
const CULPRIT: &str = "level_terrain";
/// The level is unloaded this long after it finished loading: after the drill's hang (submission
/// 120, a fraction of a second later) has lasted a quarter of `hang_timeout` (from then the index
/// holds what it would forget), before the loss (3 s after the hang).
const UNLOAD_AFTER: Duration = Duration::from_secs(2);
/// No hang report before the loss: one device-loss report.
const HANG_TIMEOUT: Duration = Duration::from_secs(4);

#[test]
fn a_loss_after_a_teardown_of_100_000_objects_resolves_the_culprit_as_at_the_fault() {
    let dir = common::scratch_dir("teardown");
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, Some("hang"));
    command
        .env("GPU_CRASH_DRILL_AFTER", "120")
        .env("GPU_CRASH_DRILL_LOSS", format!("after-hang:3000@{CULPRIT}"));
    let output = command.output().expect("spawn child");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let hang_at = stderr
        .find("injected hang")
        .expect("the drill hung the GPU");
    let unloaded_at = stderr
        .find("teardown child: level unloaded")
        .unwrap_or_else(|| panic!("the level was unloaded: {stderr}"));
    let reset_at = stderr.find("simulated watchdog reset 3000").expect("reset");
    assert!(
        hang_at < unloaded_at && unloaded_at < reset_at,
        "hang, then teardown, then loss: {stderr}"
    );
    assert!(
        stderr[reset_at..].contains(&format!("inside buffer \"{CULPRIT}\"")),
        "{stderr}"
    );
    let reports: Vec<CrashReport> = common::read_reports(&reports_dir);
    assert_eq!(reports.len(), 1, "{stderr}");
    let report = &reports[0];
    assert_eq!(report.kind, CrashKind::DeviceLost, "{stderr}");
    eprintln!(
        "binds {}, unbinds {} folded before the report; {} dropped",
        report.index_stats.binds, report.index_stats.unbinds, report.binding_events_dropped
    );
    assert_eq!(report.binding_events_dropped, 0, "every event was seen");
    assert!(
        report.index_stats.unbinds as usize > LEVEL_CHUNKS,
        "the teardown came before the report: {:?}",
        report.index_stats
    );
    let fault = &report.faults[0];
    assert_eq!(
        fault.verdict,
        FaultVerdict::InsideLiveObject,
        "{}",
        fault.summary
    );
    let culprit = fault.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.name.as_deref(), Some(CULPRIT), "{}", fault.summary);
    assert_eq!(culprit.state, ObjectState::Live, "{}", fault.summary);
}

/// The game: the plugin and a level of 100,001 buffers streamed in over ten frames, the terrain
/// first, unloaded all at once later.
#[test]
#[ignore = "child process entry point: the test above starts it"]
fn child() {
    common::use_runtime_dir();
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin {
        settings: ReporterSettings {
            application_name: Some("teardown".into()),
            hang_timeout: HANG_TIMEOUT,
            // The teardown is one burst of 100,000 unbinds: room for it between two drains.
            binding_ring_capacity: 1 << 18,
            ..default()
        },
        ..default()
    })
    .add_plugins(common::headless_default_plugins())
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .add_systems(Update, stream_the_level);
    let exit = app.run();
    common::exit_process(exit);
}

#[derive(Default)]
struct Level {
    terrain: Option<Buffer>,
    chunks: Vec<Buffer>,
    loaded_at: Option<Instant>,
    unloaded_at: Option<Instant>,
}

fn stream_the_level(
    device: Res<RenderDevice>,
    mut level: Local<Level>,
    mut exit: MessageWriter<AppExit>,
) {
    if let Some(unloaded) = level.unloaded_at {
        if unloaded.elapsed() > Duration::from_secs(30) {
            eprintln!("teardown child: no loss");
            exit.write(AppExit::Success);
        }
        return;
    }
    if let Some(loaded) = level.loaded_at {
        if loaded.elapsed() >= UNLOAD_AFTER {
            // Terrain first: the first unbind of the teardown.
            level.terrain = None;
            level.chunks.clear();
            level.unloaded_at = Some(Instant::now());
            eprintln!("teardown child: level unloaded");
        }
        return;
    }
    if level.terrain.is_none() {
        level.terrain = Some(device.create_buffer(&BufferDescriptor {
            label: Some(CULPRIT),
            size: 256 * 1024,
            usage: BufferUsages::VERTEX | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
    for _ in 0..CHUNKS_PER_FRAME {
        level.chunks.push(device.create_buffer(&BufferDescriptor {
            label: Some("level_chunk"),
            size: 256,
            usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
    if level.chunks.len() >= LEVEL_CHUNKS {
        level.loaded_at = Some(Instant::now());
        eprintln!("teardown child: level loaded");
    }
}
