//! GPU breadcrumbs in a scene that looks like a game: a 3D camera with a depth prepass, a shadowed
//! directional light (4 cascades) and 4 shadowed point lights (24 cube-face shadow views, which Bevy
//! renders before the cameras), and optionally a second 3D camera drawing into another image.
//!
//! Each case hangs the GPU inside one pass with the crash drill layer's `hang-in-pass`, which really
//! stops the GPU right after the pass's debug label, and checks the report: the pass's camera and
//! stage are named, every earlier stage completed, every later one not started. On lavapipe the layer
//! also provides `VK_AMD_buffer_marker` (emulated with `vkCmdFillBuffer`), so the same marker path
//! runs as on NVIDIA and AMD drivers.
//!
//! Each case runs this test binary again as a child (`child` below, an ignored test that only the
//! parents start) because the Vulkan loader reads its environment once per process.

mod common;
mod deliver_support;

use std::process::Output;
use std::time::Duration;

use bevy::app::ScheduleRunnerPlugin;
use bevy::camera::Hdr;
use bevy::core_pipeline::tonemapping::Tonemapping;
use bevy::core_pipeline::{Core3d, Core3dSystems};
use bevy::prelude::*;
use bevy::render::renderer::RenderContext;
use bevy::render::RenderApp;
use bevy_gpu_crash_reporter::report::{
    BreadcrumbState, CrashKind, CrashReport, FrameBreadcrumbs, GpuBreadcrumb,
};
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{BreadcrumbWriter, GpuBreadcrumbs, GpuCrashReporterPlugin, OnHang};

const HANG_TIMEOUT: Duration = Duration::from_secs(3);
/// The game's own breadcrumb, recorded with the public API inside the prepass stage.
const GAME_WORK: &str = "game: particle simulation";
/// The phase before the first camera (the plugin's label for it).
const PRE_CAMERA: &str = "Before cameras (shadow views, preprocessing)";
/// A 3D camera's stages with stock Bevy + bevy_pbr: EarlyPostProcess has no systems, so no stage.
const STAGES: [&str; 3] = ["Core3d Prepass", "Core3d MainPass", "Core3d PostProcess"];
/// Environment of the child: which scene, and how many game breadcrumbs per frame.
const SCENE_VAR: &str = "BREADCRUMBS_TEST_SCENE";
const GAME_CRUMBS_VAR: &str = "BREADCRUMBS_TEST_GAME_CRUMBS";

fn run(name: &str, scenario: &str, env: &[(&str, &str)]) -> (Output, Vec<CrashReport>) {
    let dir = common::scratch_dir(&format!("breadcrumbs-{name}"));
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, Some(scenario));
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().expect("spawn child");
    let reports = common::read_reports(&reports_dir);
    (output, reports)
}

/// Runs the one-camera scene hung in `pass` and returns its single hang report and the frame that
/// hung.
fn hang_in(name: &str, pass: &str, env: &[(&str, &str)]) -> (CrashReport, FrameBreadcrumbs) {
    let (output, reports) = run(name, &format!("hang-in-pass:{pass}"), env);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let wanted = pass.split('#').next().unwrap();
    assert!(
        stderr.contains(&format!("injected hang in pass \"{wanted}")),
        "the layer hung the GPU in the pass: {stderr}"
    );
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert_eq!(reports.len(), 1, "{stderr}");
    let report = reports.into_iter().next().unwrap();
    assert_eq!(report.kind, CrashKind::GpuHang);
    assert_eq!(
        report.gpu.breadcrumbs,
        Some(BreadcrumbWriter::AmdBufferMarker),
        "the layer's VK_AMD_buffer_marker ran"
    );
    let frame = report
        .breadcrumbs
        .iter()
        .find(|f| f.in_flight().is_some())
        .unwrap_or_else(|| panic!("no breadcrumb in flight: {:#?}", report.breadcrumbs))
        .clone();
    (report, frame)
}

/// The stage breadcrumbs of `camera` in `frame`, in recording order.
fn stages_of<'a>(frame: &'a FrameBreadcrumbs, camera: &str) -> Vec<&'a GpuBreadcrumb> {
    frame
        .breadcrumbs
        .iter()
        .filter(|b| b.camera.as_deref() == Some(camera) && b.label.starts_with("Core3d "))
        .collect()
}

/// Asserts that `camera`'s stages are exactly [`STAGES`] and that the GPU stopped inside `hung`:
/// every earlier stage completed, `hung` started and not finished, every later one not started.
fn assert_hung_in_stage(frame: &FrameBreadcrumbs, camera: &str, hung: &str) {
    let stages = stages_of(frame, camera);
    let labels: Vec<&str> = stages.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(labels, STAGES, "{frame:#?}");
    let at = STAGES.iter().position(|s| *s == hung).unwrap();
    for (i, stage) in stages.iter().enumerate() {
        let expected = match i.cmp(&at) {
            std::cmp::Ordering::Less => BreadcrumbState::Completed,
            std::cmp::Ordering::Equal => BreadcrumbState::Started,
            std::cmp::Ordering::Greater => BreadcrumbState::NotStarted,
        };
        assert_eq!(stage.state, expected, "{}: {frame:#?}", stage.label);
    }
    let in_flight = frame.in_flight().unwrap();
    assert_eq!(in_flight.label, hung, "{frame:#?}");
    assert_eq!(in_flight.camera.as_deref(), Some(camera), "{frame:#?}");
}

/// The pre-camera phase of `frame`: recorded once, at the start, with no camera.
fn pre_camera(frame: &FrameBreadcrumbs) -> &GpuBreadcrumb {
    let phases: Vec<&GpuBreadcrumb> = frame
        .breadcrumbs
        .iter()
        .filter(|b| b.label == PRE_CAMERA)
        .collect();
    assert_eq!(phases.len(), 1, "{frame:#?}");
    assert_eq!(phases[0].camera, None);
    phases[0]
}

/// Shadow views run the camera schedule too, but get no stage breadcrumbs: every stage breadcrumb
/// of the frame belongs to a camera.
fn assert_only_camera_stages(frame: &FrameBreadcrumbs) {
    let stray: Vec<&GpuBreadcrumb> = frame
        .breadcrumbs
        .iter()
        .filter(|b| b.label.starts_with("Core3d ") && b.camera.is_none())
        .collect();
    assert!(
        stray.is_empty(),
        "stage breadcrumbs without a camera: {stray:#?}"
    );
}

#[test]
fn a_hang_in_the_prepass_names_the_cameras_prepass() {
    let (report, frame) = hang_in("prepass", "early prepass", &[]);
    assert_hung_in_stage(&frame, "main", "Core3d Prepass");
    assert_eq!(pre_camera(&frame).state, BreadcrumbState::Completed);
    assert_only_camera_stages(&frame);
    assert!(
        report
            .summary
            .contains("during Core3d Prepass of camera \"main\""),
        "{}",
        report.summary
    );
}

#[test]
fn a_hang_in_the_main_opaque_pass_names_that_stage_and_lands_in_bugsink() {
    let server = deliver_support::bugsink("breadcrumbs");
    let (report, frame) = hang_in(
        "opaque",
        "main_opaque_pass_3d",
        &[("SENTRY_DSN", server.dsn.as_str())],
    );
    assert_hung_in_stage(&frame, "main", "Core3d MainPass");
    assert_eq!(pre_camera(&frame).state, BreadcrumbState::Completed);
    assert_only_camera_stages(&frame);
    // The game's own breadcrumb, recorded in the prepass stage, completed before the main pass.
    let game = frame
        .breadcrumbs
        .iter()
        .find(|b| b.label == GAME_WORK)
        .unwrap_or_else(|| panic!("{GAME_WORK} missing: {frame:#?}"));
    assert_eq!(game.state, BreadcrumbState::Completed);
    assert!(
        report
            .summary
            .contains("during Core3d MainPass of camera \"main\""),
        "{}",
        report.summary
    );

    // The Sentry event: the stage as a tag, the breadcrumbs in its breadcrumb list, and the stage
    // in the fingerprint (hangs in different stages are different issues).
    let stored = server
        .event(&report.id)
        .unwrap_or_else(|| panic!("event {} not in Bugsink", report.id));
    let event = &stored["data"];
    assert_eq!(
        event["tags"]["gpu.pass"], "Core3d MainPass of camera \"main\"",
        "{event:#}"
    );
    let crumbs = event["breadcrumbs"]["values"].as_array().unwrap();
    let pass_crumbs: Vec<&str> = crumbs
        .iter()
        .filter(|c| c["category"] == "gpu.pass")
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(
        pass_crumbs
            .iter()
            .any(|m| m.contains("Core3d MainPass of camera \"main\": started, not finished")),
        "{pass_crumbs:#?}"
    );
    assert!(
        pass_crumbs.iter().any(|m| m.contains(GAME_WORK)),
        "{pass_crumbs:#?}"
    );
    assert!(
        event["fingerprint"].to_string().contains("Core3d MainPass"),
        "{}",
        event["fingerprint"]
    );
}

#[test]
fn a_hang_in_tonemapping_names_the_post_process_stage() {
    let (_, frame) = hang_in("tonemapping", "tonemapping", &[]);
    assert_hung_in_stage(&frame, "main", "Core3d PostProcess");
}

/// `upscaling` is ordered only after the PostProcess set: the camera's last boundary still follows it.
#[test]
fn a_hang_in_upscaling_is_inside_the_cameras_last_stage() {
    let (_, frame) = hang_in("upscaling", "upscaling", &[]);
    assert_hung_in_stage(&frame, "main", "Core3d PostProcess");
}

/// Point-light shadow maps are rendered before any camera: the report names the pre-camera phase,
/// and no camera stage has started.
#[test]
fn a_hang_in_a_point_light_shadow_pass_is_the_pre_camera_phase() {
    let (report, frame) = hang_in("shadow", "shadow_point_light_0_+x", &[]);
    let phase = pre_camera(&frame);
    assert_eq!(phase.state, BreadcrumbState::Started, "{frame:#?}");
    assert_eq!(frame.in_flight().unwrap().label, PRE_CAMERA);
    let stages = stages_of(&frame, "main");
    assert_eq!(stages.len(), STAGES.len(), "{frame:#?}");
    assert!(
        stages
            .iter()
            .all(|b| b.state == BreadcrumbState::NotStarted),
        "{frame:#?}"
    );
    assert_only_camera_stages(&frame);
    assert!(
        report.summary.contains(&format!("during {PRE_CAMERA}")),
        "{}",
        report.summary
    );
}

/// Two 3D cameras, the second unnamed and drawing into its own image: a hang in the second one's
/// main pass names it by kind and order (stable across runs, never an entity id), and the first
/// camera's stages all completed before it.
#[test]
fn a_hang_in_the_second_cameras_main_pass_names_the_second_camera() {
    let (report, frame) = hang_in(
        "two-cameras",
        "main_opaque_pass_3d#2",
        &[(SCENE_VAR, "two-cameras")],
    );
    assert_hung_in_stage(&frame, "Camera3d #1", "Core3d MainPass");
    let first = stages_of(&frame, "main");
    assert_eq!(first.len(), STAGES.len(), "{frame:#?}");
    assert!(
        first.iter().all(|b| b.state == BreadcrumbState::Completed),
        "{frame:#?}"
    );
    let first_at = frame
        .breadcrumbs
        .iter()
        .position(|b| b.camera.as_deref() == Some("main"))
        .unwrap();
    let second_at = frame
        .breadcrumbs
        .iter()
        .position(|b| b.camera.as_deref() == Some("Camera3d #1"))
        .unwrap();
    assert!(first_at < second_at, "cameras in order: {frame:#?}");
    assert!(
        report
            .summary
            .contains("during Core3d MainPass of camera \"Camera3d #1\""),
        "{}",
        report.summary
    );
}

/// A game that records more breadcrumbs than a frame's marker slot holds: the report says the list
/// ran out instead of silently dropping the rest.
#[test]
fn a_frame_with_more_breadcrumbs_than_markers_says_it_ran_out() {
    let (report, frame) = hang_in("budget", "tonemapping", &[(GAME_CRUMBS_VAR, "80")]);
    assert!(frame.dropped > 0, "{frame:#?}");
    let note = frame.ran_out().unwrap();
    assert!(
        note.starts_with(&format!(
            "breadcrumbs ran out after {}",
            frame.breadcrumbs.len()
        )),
        "{note}"
    );
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("breadcrumbs ran out after")),
        "{:#?}",
        report.notes
    );
}

// ------------------------------------------------------------------------------------ the child

/// The scene of `SCENE_VAR` (see the module docs), until the drill hangs the GPU.
#[test]
#[ignore = "child process entry point: the tests above start it"]
fn child() {
    common::use_runtime_dir();
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin {
        settings: ReporterSettings {
            hang_timeout: HANG_TIMEOUT,
            on_hang: OnHang::Exit(3),
            application_name: Some("breadcrumbs".into()),
            ..default()
        },
        ..default()
    })
    .add_plugins(common::headless_default_plugins())
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .add_systems(Startup, scene)
    .add_systems(Update, stop_after_a_while);
    common::small_shadow_maps(&mut app);
    app.sub_app_mut(RenderApp)
        .add_systems(Core3d, game_work.in_set(Core3dSystems::Prepass));
    let exit = app.run();
    common::exit_process(exit);
}

fn scene(
    mut commands: Commands,
    mut images: ResMut<Assets<Image>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    commands.spawn((
        common::main_camera(&mut images, 192, 128),
        // HDR: only then does Bevy run a tonemapping pass (otherwise the material shaders tonemap).
        Hdr,
        // Bevy's default tonemapper needs the `tonemapping_luts` feature, which the crate's
        // minimal Bevy features leave out.
        Tonemapping::AcesFitted,
    ));
    if std::env::var(SCENE_VAR).as_deref() == Ok("two-cameras") {
        // A second view, e.g. a minimap: unnamed, after the main camera.
        commands.spawn(common::minimap_camera(&mut images, 96));
    }
    common::shadowed_scene(&mut commands, &mut meshes, &mut materials, 4);
}

/// The game's own GPU work, labelled with the public breadcrumb API (`GAME_CRUMBS_VAR` times).
fn game_work(mut ctx: RenderContext, breadcrumbs: GpuBreadcrumbs, mut count: Local<Option<u32>>) {
    let count = *count.get_or_insert_with(|| {
        std::env::var(GAME_CRUMBS_VAR)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1)
    });
    for _ in 0..count {
        breadcrumbs.begin(&mut ctx, GAME_WORK);
        breadcrumbs.end(&mut ctx, GAME_WORK);
    }
}

/// The drill hangs the GPU long before this; a run that gets here had no hang.
fn stop_after_a_while(mut frames: Local<u32>, mut exit: MessageWriter<AppExit>) {
    *frames += 1;
    if *frames == 600 {
        eprintln!("breadcrumbs child: no hang after 600 frames");
        exit.write(AppExit::Success);
    }
}
