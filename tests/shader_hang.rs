//! A real shader hang, no drill: a game's own material whose WGSL fragment shader loops until a
//! uniform says stop, told at frame 40 to loop forever. The GPU (on lavapipe, its CPU threads) never
//! finishes the main camera's main pass; the report must come within `hang_timeout` plus a few
//! seconds and name the stage the GPU was in.
//!
//! The scene looks like a small game level: Bevy PBR materials on a ground and nine meshes, a
//! shadowed directional light and a shadowed point light, two cameras (the main one with a depth
//! prepass, and a minimap), and the endless material, loaded from `tests/assets/shaders/` through
//! the asset server like any game's shader.
//!
//! The child runs this test binary again (`child`, ignored, started by the parent): it never ends by
//! itself once its GPU is hung, so the parent kills it at a deadline, and the report must already be
//! on disk. `SHADER_HANG_ASSETS` points the child at the assets when the binary runs elsewhere.
//!
//! On a GPU host without Rust (the NVIDIA host of scripts/gpu-validation.sh), build and carry the
//! child with the assets:
//!
//! ```sh
//! cargo test --release --test shader_hang --no-run   # prints target/release/deps/shader_hang-<hash>
//! mkdir -p /tmp/pk-sh && cp target/release/deps/shader_hang-<hash> /tmp/pk-sh/shader_hang
//! strip /tmp/pk-sh/shader_hang && cp -r tests/assets /tmp/pk-sh/assets
//! ```
//!
//! and run it there on the real driver (no drill layer, no `VK_DRIVER_FILES`):
//!
//! ```sh
//! cd DIR && SHADER_HANG_ASSETS=$PWD/assets GPU_CRASH_REPORT_DIR=/tmp/sh/reports \
//!   timeout -s KILL 120 ./shader_hang --exact child --ignored --nocapture
//! ```
//!
//! Expected: exit code 3 (`OnHang::Exit` after the report), stderr `shader child: loop forever` then
//! `GPU hang in frame N during Core3d MainPass of camera "main"`, and one `gpu-crash-*.json` in
//! `/tmp/sh/reports`. There the loop really never ends: the driver may reset the GPU (NVIDIA: a device
//! loss some 30 s later, after this process has exited).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bevy::app::ScheduleRunnerPlugin;
use bevy::camera::visibility::RenderLayers;
use bevy::core_pipeline::tonemapping::Tonemapping;
use bevy::core_pipeline::{Core3d, Core3dSystems};
use bevy::pbr::{Material, MaterialPlugin};
use bevy::prelude::*;
use bevy::render::render_resource::{
    AsBindGroup, CachedComputePipelineId, ComputePassDescriptor, ComputePipelineDescriptor,
    PipelineCache, PipelineDescriptor, ShaderType,
};
use bevy::render::renderer::RenderContext;
use bevy::render::{Render, RenderApp, RenderStartup, RenderSystems};
use bevy::shader::{Shader, ShaderRef};
use bevy_gpu_crash_reporter::report::{
    CrashKind, CrashReport, PipelineKind, RunningBasis, RunningPipelines,
};
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{GpuBreadcrumbs, GpuCrashReporterPlugin, OnHang};

const HANG_TIMEOUT: Duration = Duration::from_secs(3);
/// The endless material's shader, under the assets dir.
const SHADER_PATH: &str = "shaders/endless_loop.wgsl";
/// The game's compute shader, its pipeline's label and its breadcrumb.
const PARTICLES_SHADER: &str = "shaders/particles.wgsl";
const PARTICLES_PIPELINE: &str = "particle_simulation_pipeline";
const PARTICLES: &str = "game: particle simulation";
/// The frame (main world) from which the game tells the shader to loop forever, once its pipeline
/// exists (so the hang starts within a frame of the line the parent times it by).
const LOOP_FOREVER_AT: u32 = 40;
/// The phase before the first camera (the plugin's label for it).
const PRE_CAMERA: &str = bevy_gpu_crash_reporter::gpu_crash_core::PRE_CAMERA_LABEL;
/// `finite` in the child's environment: the game never tells the shader to loop forever (drilled
/// hangs).
const LOOP_VAR: &str = "SHADER_HANG_LOOP";
/// Set in the child's environment: the plugin with its default settings (5 s hang timeout, the game
/// keeps waiting on a hang), as a game adds it with one line.
const DEFAULTS_VAR: &str = "SHADER_HANG_DEFAULTS";
/// The child's line when it sets the loop to forever.
const FOREVER_LINE: &str = "shader child: loop forever";
/// How long the parent lets the child run: start-up on lavapipe (PBR pipelines compiled on 2 cores)
/// plus the hang and its report, with room.
const CHILD_DEADLINE: Duration = Duration::from_secs(180);

/// Runs the child (with `env`) until its endless shader is reported and the child ended; checks the
/// one report's kind, time and the exit, and returns it.
fn endless_shader_report(name: &str, env: &[(&str, &str)]) -> CrashReport {
    let dir = common::scratch_dir(name);
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, None);
    for (k, v) in env {
        command.env(k, v);
    }
    let (status, log, forever_at) = run_child(command);
    let forever_at = forever_at.unwrap_or_else(|| panic!("the child never looped forever: {log}"));
    let reports = common::read_reports(&reports_dir);
    assert_eq!(
        reports.len(),
        1,
        "one hang report for the endless shader (child status {status:?}): {log}"
    );
    let report = &reports[0];
    assert_eq!(report.kind, CrashKind::GpuHang, "{}", report.summary);
    // Written within hang_timeout plus a few seconds of the game's switch (generous: lavapipe on a
    // shared 2-core machine).
    let forever_ms = forever_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let after = Duration::from_millis(report.timestamp_ms.saturating_sub(forever_ms));
    assert!(
        after <= HANG_TIMEOUT + Duration::from_secs(10),
        "reported {after:?} after the shader was told to loop forever: {}",
        report.summary
    );
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(3),
        "OnHang::Exit ended the hung process: {log}"
    );
    reports.into_iter().next().unwrap()
}

/// Runs the child until it ends, or kills it at [`CHILD_DEADLINE`] (the GPU still hung and nothing
/// ended the process; the report, if any, was on disk before). Returns its exit status (`None`:
/// killed), its stderr, and the wall-clock time its "loop forever" line arrived.
fn run_child(
    mut command: std::process::Command,
) -> (Option<std::process::ExitStatus>, String, Option<SystemTime>) {
    command.stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn child");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut log = String::new();
        let mut forever_at = None;
        for line in stderr.lines().map_while(Result::ok) {
            if forever_at.is_none() && line.contains(FOREVER_LINE) {
                forever_at = Some(SystemTime::now());
            }
            log.push_str(&line);
            log.push('\n');
        }
        (log, forever_at)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > CHILD_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (log, forever_at) = reader.join().unwrap();
    (status, log, forever_at)
}

#[test]
fn a_shader_that_never_ends_is_reported_within_the_timeout_naming_its_stage() {
    let report = endless_shader_report("shader-hang", &[]);
    // The stage: the main camera's main pass, the only pass that runs the endless fragment shader.
    assert_eq!(
        report.gpu_stage.as_deref(),
        Some("Core3d MainPass of camera \"main\""),
        "{}\n{:#?}",
        report.summary,
        report.breadcrumbs
    );
    assert!(
        report.summary.contains("Core3d MainPass"),
        "{}",
        report.summary
    );
    assert_names_the_endless_material(&report);
}

/// The plugin as a game adds it with one line: the default 5 s `hang_timeout` and the default
/// `on_hang` (the report, then the driver's `loss_wait_after_hang` of 10 s, then the end of the
/// process with `OnHang::DEFAULT_EXIT_CODE`), Bevy's pipelined rendering on, the game submitting
/// frames until its render thread blocks in Bevy's submit behind the endless work (lavapipe's
/// queue is full). The report still comes, within the timeout plus a few seconds, and the process
/// ends by itself rather than freezing. (Seen with gdb attached 8 s into the hang, 2026-12-07,
/// lavapipe, before the completion marker moved into Bevy's submit: the render thread inside our
/// own marker's submit -> `wgpu::Queue::submit` -> lavapipe's submit, the watchdog parked between
/// ticks, the report on disk.)
#[test]
fn with_default_settings_a_shader_that_never_ends_is_reported_though_the_submit_blocks() {
    let timeout = GpuCrashReporterPlugin::default().settings.hang_timeout;
    let dir = common::scratch_dir("shader-hang-defaults");
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, None);
    command.env(DEFAULTS_VAR, "1");
    let grace = GpuCrashReporterPlugin::default()
        .settings
        .loss_wait_after_hang;
    let (status, log, forever_at, ended_after_report) =
        run_child_until_it_ends(command, &reports_dir, timeout, grace);
    let forever_at = forever_at.unwrap_or_else(|| panic!("the child never looped forever: {log}"));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(OnHang::DEFAULT_EXIT_CODE),
        "the hung game ends by itself with the default exit code: {log}"
    );
    let ended_after_report = ended_after_report.expect("a report before the end");
    assert!(
        // The report is seen on disk up to a poll (100 ms) after it is written.
        ended_after_report + Duration::from_secs(1) >= grace
            && ended_after_report <= grace + Duration::from_secs(10),
        "ended {ended_after_report:?} after its report, the driver given {grace:?}: {log}"
    );
    let reports = common::read_reports(&reports_dir);
    assert_eq!(reports.len(), 1, "one hang report: {log}");
    let report = &reports[0];
    assert_eq!(report.kind, CrashKind::GpuHang, "{}", report.summary);
    let forever_ms = forever_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let after = Duration::from_millis(report.timestamp_ms.saturating_sub(forever_ms));
    assert!(
        after <= timeout + Duration::from_secs(10),
        "reported {after:?} after the shader was told to loop forever: {}",
        report.summary
    );
    assert_eq!(
        report.gpu_stage.as_deref(),
        Some("Core3d MainPass of camera \"main\""),
        "{}",
        report.summary
    );
    assert_names_the_endless_material(report);
}

/// Runs the child until it ends by itself, or until `timeout` plus `grace` plus 40 s after its "loop
/// forever" line, when it is killed (`None`). Returns its exit status, its stderr, when it said
/// "loop forever", and how long after its report was first seen on disk it ended.
fn run_child_until_it_ends(
    mut command: std::process::Command,
    reports_dir: &std::path::Path,
    timeout: Duration,
    grace: Duration,
) -> (
    Option<std::process::ExitStatus>,
    String,
    Option<SystemTime>,
    Option<Duration>,
) {
    command.stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn child");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let forever = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let forever_seen = forever.clone();
    let reader = std::thread::spawn(move || {
        let mut log = String::new();
        let mut forever_at = None;
        for line in stderr.lines().map_while(Result::ok) {
            if forever_at.is_none() && line.contains(FOREVER_LINE) {
                forever_at = Some(SystemTime::now());
                *forever_seen.lock().unwrap() = Some(Instant::now());
            }
            log.push_str(&line);
            log.push('\n');
        }
        (log, forever_at)
    });
    let started = Instant::now();
    let mut report_at = None;
    let status = loop {
        if report_at.is_none() && !common::read_reports(reports_dir).is_empty() {
            report_at = Some(Instant::now());
        }
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        let forever = *forever.lock().unwrap();
        let give_up = forever.map_or(started + CHILD_DEADLINE, |f| {
            f + timeout + grace + Duration::from_secs(40)
        });
        if Instant::now() > give_up {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let ended_after_report = report_at.map(|r| r.elapsed());
    let (log, forever_at) = reader.join().unwrap();
    (status, log, forever_at, ended_after_report)
}

/// What was running: the stage's pipelines, ranked, the game's material first, named by its type,
/// shader file and entity.
fn assert_names_the_endless_material(report: &CrashReport) {
    let running = running_of(report);
    assert_eq!(running.basis, RunningBasis::QueuedInStage);
    assert_eq!(running.stage, "Core3d MainPass");
    assert_eq!(running.camera.as_deref(), Some("main"));
    let first = &running.candidates[0];
    assert_eq!(
        first.material.as_deref(),
        Some("shader_hang::EndlessMaterial"),
        "{running:#?}"
    );
    assert_eq!(first.main_shader(), Some(SHADER_PATH), "{running:#?}");
    assert!(
        first
            .entities
            .iter()
            .any(|e| e.name.as_deref() == Some("glowing crystal")),
        "{running:#?}"
    );
    // Bevy's own PBR pipeline for the level's StandardMaterial meshes is queued there too.
    assert!(
        running.candidates.len() >= 2
            && running.candidates[1..]
                .iter()
                .all(|c| !c.shaders.iter().any(|s| s.is_own())),
        "{running:#?}"
    );
    assert!(
        report
            .summary
            .contains("likely EndlessMaterial (shaders/endless_loop.wgsl"),
        "{}",
        report.summary
    );
}

/// The drill's `hang-in-pipeline`, in the pipeline Bevy made for the game's material (Bevy labels
/// it `opaque_mesh_pipeline`, its own StandardMaterial one `pbr_opaque_mesh_pipeline`): the GPU
/// really stops right after the main pass that binds it, the shader itself never loops forever,
/// and the report names the same material, shader file and entity.
#[test]
fn a_hang_drilled_in_the_game_material_pipeline_names_its_material_shader_and_entity() {
    let report = drilled_report(
        "shader-hang-drilled-material",
        "hang-in-pipeline:opaque_mesh_pipeline",
    );
    assert_eq!(
        report.gpu_stage.as_deref(),
        Some("Core3d MainPass of camera \"main\""),
        "{}",
        report.summary
    );
    assert_names_the_endless_material(&report);
}

/// The drill's hang in one of Bevy's own pipelines, StandardMaterial's shadow and prepass pipeline
/// (`pbr_prepass_pipeline`; the game material's is `prepass_pipeline`): the first pass that binds
/// it is a shadow pass (the point light's, before the cameras, or the directional light's first
/// cascade, in the main camera's prepass stage), and the report ranks that pipeline first, with no
/// game shader above it.
#[test]
fn a_hang_drilled_in_a_bevy_pipeline_names_that_pipeline() {
    let report = drilled_report(
        "shader-hang-drilled-bevy",
        "hang-in-pipeline:pbr_prepass_pipeline",
    );
    let running = running_of(&report);
    // Which shadow pass binds it first depends on which shadow phases had meshes in that frame.
    let (camera, stage) = match report.gpu_stage.as_deref() {
        Some(PRE_CAMERA) => (None, PRE_CAMERA),
        Some("Core3d Prepass of camera \"main\"") => (Some("main"), "Core3d Prepass"),
        other => panic!("hung in a shadow pass, not {other:?}: {}", report.summary),
    };
    assert_eq!(
        (running.camera.as_deref(), running.stage.as_str()),
        (camera, stage)
    );
    let first = &running.candidates[0];
    assert_eq!(
        first.label.as_deref(),
        Some("pbr_prepass_pipeline"),
        "{running:#?}"
    );
    assert_eq!(
        first.main_shader(),
        Some("embedded://bevy_pbr/prepass/prepass.wgsl"),
        "{running:#?}"
    );
    // The cascades' pipeline is listed with its draw list.
    assert!(
        running
            .candidates
            .iter()
            .any(|c| c.label.as_deref() == Some("pbr_prepass_pipeline")
                && c.passes.iter().any(|p| p == "Shadow")),
        "{running:#?}"
    );
    assert!(
        report.summary.contains("likely pbr_prepass_pipeline"),
        "{}",
        report.summary
    );
}

/// The drill's hang at the bind of the game's own compute pipeline: the GPU stops inside the game's
/// breadcrumb around the compute pass (before its dispatch), and the report names the compute
/// pipeline and its shader file, noted by the game with `GpuBreadcrumbs::note_compute_pipeline`.
#[test]
fn a_hang_drilled_in_the_game_compute_pass_names_its_compute_pipeline() {
    let report = drilled_report(
        "shader-hang-drilled-compute",
        &format!("hang-in-pipeline:{PARTICLES_PIPELINE}"),
    );
    assert_eq!(
        report.gpu_stage.as_deref(),
        Some(PARTICLES),
        "{}",
        report.summary
    );
    let running = running_of(&report);
    assert_eq!(
        (running.camera.as_deref(), running.stage.as_str()),
        (None, PARTICLES)
    );
    let first = &running.candidates[0];
    assert_eq!(first.kind, PipelineKind::Compute, "{running:#?}");
    assert_eq!(
        first.label.as_deref(),
        Some(PARTICLES_PIPELINE),
        "{running:#?}"
    );
    assert_eq!(first.main_shader(), Some(PARTICLES_SHADER), "{running:#?}");
    assert!(
        report
            .summary
            .contains("likely particle_simulation_pipeline (shaders/particles.wgsl)"),
        "{}",
        report.summary
    );
}

/// Environment for a child in exact mode: `GPU_CRASH_EXACT=1` (as QA sets it) and the exact layer
/// in the loader's layer path (after the drill's, when the child runs under the drill).
fn exact_env(drilled: bool) -> Vec<(&'static str, String)> {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("exact-layer");
    common::ship_exact_layer(&dir);
    let path = if drilled {
        format!("{}:{}", common::drill_layer_dir().display(), dir.display())
    } else {
        dir.display().to_string()
    };
    vec![("GPU_CRASH_EXACT", "1".into()), ("VK_LAYER_PATH", path)]
}

/// Exact mode and the drill's hang at the bind of the game's compute pipeline (before its dispatch,
/// outside any render pass): the report names the dispatch the GPU did not finish, its pipeline and
/// shader file (the pipeline the game noted), `basis` exact.
#[test]
fn in_exact_mode_a_hang_at_the_game_compute_pipeline_names_its_dispatch() {
    let exact = exact_env(true);
    let envs: Vec<(&str, &str)> = exact.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let report = drilled_report_with(
        "shader-hang-exact-compute",
        &format!("hang-in-pipeline:{PARTICLES_PIPELINE}"),
        &envs,
    );
    assert!(report.gpu.exact_layer, "{:?}", report.gpu.missing);
    let running = running_of(&report);
    assert_eq!(running.basis, RunningBasis::Exact, "{running:#?}");
    let first = &running.candidates[0];
    assert_eq!(
        (first.kind, first.label.as_deref()),
        (PipelineKind::Compute, Some(PARTICLES_PIPELINE)),
        "{running:#?}"
    );
    assert_eq!(first.main_shader(), Some(PARTICLES_SHADER), "{running:#?}");
    let exact = running.exact.as_ref().unwrap();
    let command = exact.first_unfinished.as_ref().unwrap();
    assert_eq!(command.kind, "dispatch", "{exact:#?}");
    assert_eq!(command.sharing_marker, 1, "{exact:#?}");
    assert_eq!(
        command.labels.last().map(String::as_str),
        Some("particles"),
        "{exact:#?}"
    );
    assert!(exact.last_finished.is_some(), "{exact:#?}");
    assert!(
        report.summary.contains(&format!(
            "exact: dispatch with pipeline \"{PARTICLES_PIPELINE}\" in particles was the first"
        )),
        "{}",
        report.summary
    );
}

/// Exact mode and the real endless shader. Where the driver has `VK_AMD_buffer_marker` (NVIDIA,
/// AMD) every draw has its own marker, and the report names the endless material's draw, `basis`
/// exact. lavapipe has no such marker and core Vulkan can write one only outside a render pass, so
/// the draws of the main camera's opaque pass share the marker after the pass: the report says the
/// GPU did not finish that pass (the layer's record, beside the list) and ranks its pipelines as
/// without exact mode.
#[test]
fn in_exact_mode_the_endless_shader_is_named_as_precisely_as_the_driver_marks() {
    let exact = exact_env(false);
    let envs: Vec<(&str, &str)> = exact.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let report = endless_shader_report("shader-hang-exact", &envs);
    assert!(report.gpu.exact_layer, "{:?}", report.gpu.missing);
    let running = running_of(&report);
    let exact = running.exact.as_ref().expect("the exact layer's record");
    let command = exact.first_unfinished.as_ref().unwrap();
    assert_eq!(command.kind, "draw", "{exact:#?}");
    assert_eq!(
        command.labels.last().map(String::as_str),
        Some("main_opaque_pass_3d"),
        "{exact:#?}"
    );
    match exact.marker.as_str() {
        "amd_buffer_marker" => {
            assert_eq!(running.basis, RunningBasis::Exact, "{running:#?}");
            assert_eq!(command.sharing_marker, 1);
            let first = &running.candidates[0];
            assert_eq!(
                first.material.as_deref(),
                Some("shader_hang::EndlessMaterial"),
                "{running:#?}"
            );
            assert_eq!(first.main_shader(), Some(SHADER_PATH), "{running:#?}");
        }
        "update_buffer" => {
            assert!(command.sharing_marker > 1, "{exact:#?}");
            assert_names_the_endless_material(&report);
            assert!(
                report
                    .summary
                    .contains("exact mode: the GPU did not finish render pass main_opaque_pass_3d"),
                "{}",
                report.summary
            );
        }
        other => panic!("unknown marker {other}"),
    }
}

/// The report's ranked pipelines; fails the test when it has none.
fn running_of(report: &CrashReport) -> &RunningPipelines {
    report
        .running
        .as_ref()
        .unwrap_or_else(|| panic!("no running pipelines: {}", report.summary))
}

/// Runs the child under the drill's `scenario` with the shader's loop left finite; returns its one
/// hang report once it ended with `OnHang::Exit`'s code.
fn drilled_report(name: &str, scenario: &str) -> CrashReport {
    drilled_report_with(name, scenario, &[])
}

/// [`drilled_report`] with `env` added to the child's environment.
fn drilled_report_with(name: &str, scenario: &str, env: &[(&str, &str)]) -> CrashReport {
    let dir = common::scratch_dir(name);
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, Some(scenario));
    command.env(LOOP_VAR, "finite");
    for (k, v) in env {
        command.env(k, v);
    }
    let (status, log, _) = run_child(command);
    assert!(
        log.contains("injected hang at pipeline"),
        "the drill hung the GPU at the pipeline: {log}"
    );
    assert_eq!(status.and_then(|s| s.code()), Some(3), "{log}");
    let reports = common::read_reports(&reports_dir);
    assert_eq!(reports.len(), 1, "{log}");
    let report = reports.into_iter().next().unwrap();
    assert_eq!(report.kind, CrashKind::GpuHang, "{}", report.summary);
    report
}

/// `gpu_breadcrumbs: false` is honoured on a CPU device too: the hang is reported, in its frame,
/// with no stage markers recorded.
#[test]
fn without_gpu_breadcrumbs_the_hang_is_reported_with_its_frame_only() {
    let report = endless_shader_report(
        "shader-hang-no-breadcrumbs",
        &[("SHADER_HANG_BREADCRUMBS", "off")],
    );
    assert_eq!(
        report.gpu_stage.as_deref(),
        Some("frame"),
        "{}",
        report.summary
    );
}

// ------------------------------------------------------------------------------------ the child

/// The level, until the GPU hangs in the endless shader and the reporter ends the process.
#[test]
#[ignore = "child process entry point: the test above starts it (and the NVIDIA host, see scripts)"]
fn child() {
    common::use_runtime_dir();
    common::trace_segfaults_if_asked();
    let assets = std::env::var_os("SHADER_HANG_ASSETS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/assets"));
    let ready = PipelineReady::default();
    let mut app = App::new();
    let reporter = if std::env::var_os(DEFAULTS_VAR).is_some() {
        // What a game gets from one line: the default timeout, and the game waits on a hang.
        GpuCrashReporterPlugin {
            settings: ReporterSettings {
                application_name: Some("shader_hang".into()),
                ..default()
            },
            ..default()
        }
    } else {
        GpuCrashReporterPlugin {
            settings: ReporterSettings {
                hang_timeout: HANG_TIMEOUT,
                on_hang: OnHang::Exit(3),
                loss_wait_after_hang: Duration::from_secs(1),
                application_name: Some("shader_hang".into()),
                gpu_breadcrumbs: std::env::var("SHADER_HANG_BREADCRUMBS").as_deref() != Ok("off"),
                ..default()
            },
            ..default()
        }
    };
    // `SHADER_HANG_NO_REPORTER=1`: the same game without the plugin, the control run of where the
    // render thread blocks once the GPU hangs (see the defaults test above).
    if std::env::var_os("SHADER_HANG_NO_REPORTER").is_none_or(|v| v != "1") {
        app.add_plugins(reporter);
    }
    app.add_plugins(common::headless_default_plugins().set(AssetPlugin {
        file_path: assets.display().to_string(),
        ..default()
    }))
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .add_plugins(MaterialPlugin::<EndlessMaterial>::default())
    .insert_resource(ready.clone())
    .add_systems(Startup, level)
    .add_systems(Update, loop_forever_at_frame_40);
    common::small_shadow_maps(&mut app);
    let shader: Handle<Shader> = app.world().resource::<AssetServer>().load(SHADER_PATH);
    app.insert_resource(EndlessShader(shader.clone()));
    let particles: Handle<Shader> = app.world().resource::<AssetServer>().load(PARTICLES_SHADER);
    app.sub_app_mut(RenderApp)
        .insert_resource(ready)
        .insert_resource(EndlessShader(shader))
        .insert_resource(ParticleShader(particles))
        .add_systems(RenderStartup, queue_particle_pipeline)
        .add_systems(Render, note_endless_pipeline.in_set(RenderSystems::Cleanup))
        .add_systems(Core3d, simulate_particles.in_set(Core3dSystems::Prepass));
    let exit = app.run();
    common::exit_process(exit);
}

/// The game's material: a colour, and how many times its fragment shader loops.
#[derive(Asset, TypePath, AsBindGroup, Debug, Clone)]
struct EndlessMaterial {
    #[uniform(0)]
    params: EndlessParams,
}

#[derive(ShaderType, Debug, Clone, Copy)]
struct EndlessParams {
    color: Vec4,
    /// The loop ends once its counter passes this; `u32::MAX` never (the counter wraps).
    stop_after: u32,
}

impl Material for EndlessMaterial {
    fn fragment_shader() -> ShaderRef {
        SHADER_PATH.into()
    }
}

/// The particle simulation's compute shader (render world).
#[derive(Resource)]
struct ParticleShader(Handle<Shader>);

/// The particle simulation's compute pipeline (render world).
#[derive(Resource)]
struct ParticlePipeline(CachedComputePipelineId);

fn queue_particle_pipeline(
    mut commands: Commands,
    cache: Res<PipelineCache>,
    shader: Res<ParticleShader>,
) {
    let id = cache.queue_compute_pipeline(ComputePipelineDescriptor {
        label: Some(PARTICLES_PIPELINE.into()),
        shader: shader.0.clone(),
        entry_point: Some("main".into()),
        ..default()
    });
    commands.insert_resource(ParticlePipeline(id));
}

/// The game's compute pass in each view's prepass stage, in a breadcrumb of its own that notes its
/// pipeline (no draw list shows a compute pass).
fn simulate_particles(
    mut ctx: RenderContext,
    breadcrumbs: GpuBreadcrumbs,
    pipeline: Option<Res<ParticlePipeline>>,
    cache: Res<PipelineCache>,
) {
    let Some(id) = pipeline.map(|p| p.0) else {
        return;
    };
    let Some(compute) = cache.get_compute_pipeline(id) else {
        return;
    };
    breadcrumbs.begin(&mut ctx, PARTICLES);
    breadcrumbs.note_compute_pipeline(PARTICLES, id);
    {
        let mut pass = ctx
            .command_encoder()
            .begin_compute_pass(&ComputePassDescriptor {
                label: Some("particles"),
                timestamp_writes: None,
            });
        pass.set_pipeline(compute);
        pass.dispatch_workgroups(1, 1, 1);
    }
    breadcrumbs.end(&mut ctx, PARTICLES);
}

/// The endless shader's handle, in both worlds.
#[derive(Resource, Clone)]
struct EndlessShader(Handle<Shader>);

/// Set by the render world once a pipeline with the endless shader exists.
#[derive(Resource, Clone, Default)]
struct PipelineReady(Arc<AtomicBool>);

#[derive(Resource)]
struct Endless(Handle<EndlessMaterial>);

fn level(
    mut commands: Commands,
    mut images: ResMut<Assets<Image>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut endless: ResMut<Assets<EndlessMaterial>>,
) {
    commands.spawn((
        common::main_camera(&mut images, 160, 96),
        // Bevy's default tonemapper needs the `tonemapping_luts` feature, which the crate's minimal
        // Bevy features leave out.
        Tonemapping::AcesFitted,
        // The level (layer 0) and the crystal (layer 1): only this camera draws the endless shader.
        RenderLayers::from_layers(&[0, 1]),
    ));
    commands.spawn(common::minimap_camera(&mut images, 64));
    common::shadowed_scene(&mut commands, &mut meshes, &mut materials, 1);
    let material = endless.add(EndlessMaterial {
        params: EndlessParams {
            color: Vec4::new(0.2, 0.6, 1.0, 1.0),
            stop_after: 16,
        },
    });
    commands.spawn((
        Name::new("glowing crystal"),
        Mesh3d(meshes.add(Cuboid::new(1.0, 1.6, 1.0))),
        MeshMaterial3d(material.clone()),
        Transform::from_xyz(0.0, 1.2, 4.0),
        // Not in the minimap: on lavapipe, whose shader loops end after 65,535 iterations, a
        // second camera drawing it would take the hang over once the main pass got through.
        RenderLayers::layer(1),
    ));
    commands.insert_resource(Endless(material));
}

/// Render world: notes when a render pipeline with the endless shader has been created.
fn note_endless_pipeline(
    cache: Res<PipelineCache>,
    shader: Res<EndlessShader>,
    ready: Res<PipelineReady>,
) {
    // Relaxed: a flag read once per frame by the main world; nothing else is ordered by it.
    if ready.0.load(Ordering::Relaxed) {
        return;
    }
    let created = cache.pipelines().any(|p| {
        matches!(
            &p.state,
            bevy::render::render_resource::CachedPipelineState::Ok(_)
        ) && matches!(&p.descriptor, PipelineDescriptor::RenderPipelineDescriptor(d)
                if d.fragment.as_ref().is_some_and(|f| f.shader.id() == shader.0.id()))
    });
    if created {
        eprintln!("shader child: endless pipeline created");
        // Relaxed: as above.
        ready.0.store(true, Ordering::Relaxed);
    }
}

/// From frame 40, once the endless pipeline exists, the game sets the loop to never end.
fn loop_forever_at_frame_40(
    mut frame: Local<u32>,
    mut done: Local<bool>,
    ready: Res<PipelineReady>,
    endless: Res<Endless>,
    mut materials: ResMut<Assets<EndlessMaterial>>,
    mut exit: MessageWriter<AppExit>,
) {
    *frame += 1;
    // Relaxed: see `note_endless_pipeline`.
    let forever = std::env::var(LOOP_VAR).as_deref() != Ok("finite");
    if forever && !*done && *frame >= LOOP_FOREVER_AT && ready.0.load(Ordering::Relaxed) {
        if let Some(mut material) = materials.get_mut(&endless.0) {
            material.params.stop_after = u32::MAX;
            *done = true;
            eprintln!("{FOREVER_LINE} (frame {})", *frame);
        }
    }
    if *frame == 3_000 {
        eprintln!("shader child: no report after {} frames", *frame);
        exit.write(AppExit::Success);
    }
}
