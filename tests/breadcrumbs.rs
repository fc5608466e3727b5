//! GPU breadcrumbs: a GPU that hangs inside the main opaque pass of a 3D camera gets a report that
//! says so. On lavapipe under the crash drill layer, whose `hang-in-pass` really stops the GPU right
//! after the pass's debug label, and which provides `VK_AMD_buffer_marker` (emulated with
//! `vkCmdFillBuffer`) so the same marker path runs as on NVIDIA and AMD drivers.
//!
//! The case runs this test binary again as a child (`child` below, an ignored test that only the
//! parent starts) because the Vulkan loader reads its environment once per process.

mod common;
mod deliver_support;

use std::process::Output;
use std::time::Duration;

use bevy::app::ScheduleRunnerPlugin;
use bevy::core_pipeline::{Core3d, Core3dSystems};
use bevy::prelude::*;
use bevy::render::renderer::RenderContext;
use bevy::render::RenderApp;
use bevy_gpu_crash_reporter::report::{BreadcrumbState, CrashKind, CrashReport};
use bevy_gpu_crash_reporter::{BreadcrumbWriter, GpuBreadcrumbs, GpuCrashReporterPlugin, OnHang};

const HANG_TIMEOUT: Duration = Duration::from_secs(2);
/// wgpu's debug label of bevy_core_pipeline's main opaque pass (`main_opaque_pass_3d_node.rs`).
const MAIN_OPAQUE_PASS: &str = "main_opaque_pass_3d";
/// The game's own breadcrumb, recorded with the public API inside the prepass stage.
const GAME_WORK: &str = "game: particle simulation";

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

#[test]
fn a_hang_in_the_main_opaque_pass_names_that_pass_and_lands_in_bugsink() {
    let server = deliver_support::bugsink("breadcrumbs");
    let (output, reports) = run(
        "opaque",
        &format!("hang-in-pass:{MAIN_OPAQUE_PASS}"),
        &[("SENTRY_DSN", server.dsn.as_str())],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("injected hang in pass \"{MAIN_OPAQUE_PASS}\"")),
        "the layer hung the GPU in the pass: {stderr}"
    );
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert_eq!(reports.len(), 1, "{stderr}");
    let report = &reports[0];
    assert_eq!(report.kind, CrashKind::GpuHang);

    // The frame in flight: every stage of camera "main" in recording order, with its state.
    let frame = report
        .breadcrumbs
        .iter()
        .find(|f| f.in_flight().is_some())
        .unwrap_or_else(|| panic!("no breadcrumb in flight: {:#?}", report.breadcrumbs));
    let state_of = |label: &str| {
        let at = frame
            .breadcrumbs
            .iter()
            .position(|b| b.label == label)
            .unwrap_or_else(|| panic!("{label} missing: {:#?}", frame.breadcrumbs));
        (at, frame.breadcrumbs[at].state)
    };
    let (prepass, prepass_state) = state_of("Core3d Prepass");
    let (game, game_state) = state_of(GAME_WORK);
    let (main, main_state) = state_of("Core3d MainPass");
    let (post, post_state) = state_of("Core3d PostProcess");
    assert!(prepass < game && game < main && main < post, "{frame:#?}");
    assert_eq!(prepass_state, BreadcrumbState::Completed, "{frame:#?}");
    assert_eq!(game_state, BreadcrumbState::Completed, "{frame:#?}");
    assert_eq!(main_state, BreadcrumbState::Started, "{frame:#?}");
    assert_eq!(post_state, BreadcrumbState::NotStarted, "{frame:#?}");
    let in_flight = frame.in_flight().unwrap();
    assert_eq!(in_flight.label, "Core3d MainPass");
    assert_eq!(in_flight.camera.as_deref(), Some("main"));
    assert!(
        report
            .summary
            .contains("during Core3d MainPass of camera \"main\""),
        "{}",
        report.summary
    );
    // The report says which marker mechanism ran: here the layer's VK_AMD_buffer_marker.
    assert_eq!(
        report.gpu.breadcrumbs,
        Some(BreadcrumbWriter::AmdBufferMarker)
    );

    // The Sentry event: the pass as a tag, the breadcrumbs in its breadcrumb list, and the stage
    // in the fingerprint (hangs in different passes are different issues).
    let stored = server
        .event(&report.id)
        .unwrap_or_else(|| panic!("event {} not in Bugsink: {stderr}", report.id));
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

// ------------------------------------------------------------------------------------ the child

/// A 3D camera named "main" drawing one cube into an offscreen image, and a game breadcrumb.
#[test]
#[ignore = "child process entry point: the test above starts it"]
fn child() {
    common::use_runtime_dir();
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin {
        hang_timeout: HANG_TIMEOUT,
        on_hang: OnHang::Exit(3),
        application_name: Some("breadcrumbs".into()),
        ..default()
    })
    .add_plugins(common::headless_default_plugins())
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .add_systems(Startup, scene)
    .add_systems(Update, stop_after_a_while);
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
        Name::new("main"),
        Camera3d::default(),
        common::offscreen_target(&mut images, 256, 256),
        Transform::from_xyz(0.0, 1.5, 4.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    commands.spawn((
        Mesh3d(meshes.add(Cuboid::default())),
        MeshMaterial3d(materials.add(StandardMaterial::default())),
    ));
    commands.spawn(DirectionalLight::default());
}

/// The game's own GPU work, labelled with the public breadcrumb API.
fn game_work(mut ctx: RenderContext, breadcrumbs: GpuBreadcrumbs) {
    breadcrumbs.begin(&mut ctx, GAME_WORK);
    breadcrumbs.end(&mut ctx, GAME_WORK);
}

/// The drill hangs the GPU long before this; a run that gets here had no hang.
fn stop_after_a_while(mut frames: Local<u32>, mut exit: MessageWriter<AppExit>) {
    *frames += 1;
    if *frames == 3_000 {
        eprintln!("breadcrumbs child: no hang after 3000 frames");
        exit.write(AppExit::Success);
    }
}
