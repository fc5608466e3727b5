//! Nothing lost, and nothing of ours in the game's way, on lavapipe under the crash drill layer:
//! - a report that could be written but not queued, in a run that could not upload it either,
//!   reaches Sentry at the next launch;
//! - settings no game should pass (durations beyond the clock, rings larger than memory) are
//!   reported at startup and replaced, and the game runs and reports as usual;
//! - a game that quits on its device loss ends right after the report and its upload, before its
//!   exit handlers could tear the driver down under threads still inside it.
//!
//! Each case runs this test binary again as a child (`child` below) because the Vulkan loader reads
//! its environment once per process.

mod common;
mod deliver_support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::report::CrashReport;
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{DeliverySettings, GpuCrashReporterPlugin};

/// The per-frame buffer the drill frees and then writes into.
const SCRATCH: &str = "nothing_lost_scratch";

fn run_child(reports_dir: &Path, mode: &str, drill: bool, env: &[(&str, &str)]) -> Output {
    let scenario = format!("use-after-free:{SCRATCH}");
    let mut command = common::child_command(reports_dir, drill.then_some(scenario.as_str()));
    command.env("NOTHING_LOST_MODE", mode);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("spawn child")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The crash's run can write its report but not queue it (the outbox's folder is blocked by a file)
/// and cannot upload it either (the server is down): at the next launch, online, the report is
/// queued and sent.
#[test]
fn a_report_neither_queued_nor_sent_reaches_sentry_at_the_next_launch() {
    let server = deliver_support::bugsink("nothing_lost");
    let dir = common::scratch_dir("nothing-lost-requeue");
    let reports_dir = dir.join("reports");
    std::fs::create_dir_all(&reports_dir).unwrap();
    let blocker = reports_dir.join("outbox");
    std::fs::write(&blocker, b"a file where the outbox folder should be").unwrap();
    let offline = format!("http://public@127.0.0.1:{}/1", deliver_support::free_port());
    let crashed = run_child(&reports_dir, "game", true, &[("SENTRY_DSN", &offline)]);
    let first = stderr(&crashed);
    assert!(
        first.contains("could not be queued for upload"),
        "the queue failed: {first}"
    );
    let reports: Vec<CrashReport> = common::read_reports(&reports_dir);
    assert_eq!(reports.len(), 1, "{first}");
    let report = &reports[0];
    assert!(
        server.event(report.event_id()).is_none(),
        "not sent by the crashed run"
    );

    std::fs::remove_file(&blocker).unwrap();
    let next = run_child(&reports_dir, "calm", false, &[("SENTRY_DSN", &server.dsn)]);
    let second = stderr(&next);
    assert_eq!(next.status.code(), Some(0), "{second}");
    let event = server
        .event(report.event_id())
        .unwrap_or_else(|| panic!("sent at the next launch: {second}"));
    let verdict = serde_json::to_value(report.faults[0].verdict).unwrap();
    assert_eq!(event["data"]["tags"]["gpu.verdict"], verdict, "{event:#}");
}

/// Durations beyond what the clock can add, a zero hang timeout, and rings and indexes larger than
/// any machine's memory: each is logged at startup with the value used instead, and the game runs,
/// loses its device as drilled and reports it.
#[test]
fn settings_no_game_should_pass_are_replaced_and_the_game_reports_as_usual() {
    let dir = common::scratch_dir("nothing-lost-settings");
    let reports_dir = dir.join("reports");
    let output = run_child(&reports_dir, "nonsense-settings", true, &[]);
    let log = stderr(&output);
    assert!(!log.contains("panicked"), "{log}");
    assert_eq!(output.status.code(), Some(1), "the drilled loss: {log}");
    for setting in [
        "hang_timeout",
        "loss_wait_after_hang",
        "delivery.upload_timeout",
        "binding_ring_capacity",
        "max_freed_bindings",
    ] {
        assert!(
            log.contains(&format!("GpuCrashReporterPlugin::{setting} = ")),
            "{setting} was reported: {log}"
        );
    }
    let reports: Vec<CrashReport> = common::read_reports(&reports_dir);
    assert_eq!(reports.len(), 1, "{log}");
    let fault = reports[0].faults.first().unwrap_or_else(|| panic!("{log}"));
    assert_eq!(
        fault.culprit.as_ref().and_then(|c| c.name.as_deref()),
        Some(SCRATCH),
        "{}",
        fault.summary
    );
}

/// Bevy's default handler quits on the loss: the process ends with its exit code as soon as the
/// report is on disk, without running exit handlers (on NVIDIA those tore the driver down under
/// Bevy's pipeline compiler: SIGSEGV after the report). The report is complete.
#[test]
fn a_game_that_quits_on_its_loss_ends_right_after_the_report() {
    let dir = common::scratch_dir("nothing-lost-exit");
    let reports_dir = dir.join("reports");
    let output = run_child(&reports_dir, "game", true, &[]);
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "Bevy's exit code: {log}");
    assert!(
        log.contains("ending the process now (exit code 1), its report done"),
        "{log}"
    );
    assert!(
        !log.contains("nothing_lost child: app returned"),
        "the process ended before App::run returned: {log}"
    );
    let reports: Vec<CrashReport> = common::read_reports(&reports_dir);
    assert_eq!(reports.len(), 1, "{log}");
}

// ------------------------------------------------------------------------------------ the child

/// A headless game with a transient buffer per frame. `game`: default settings, quits on the
/// loss (Bevy's default); `calm`: 60 frames, no fault; `nonsense-settings`: `game` with absurd
/// settings.
#[test]
#[ignore = "child process entry point: the tests above start it"]
fn child() {
    common::use_runtime_dir();
    let mode = std::env::var("NOTHING_LOST_MODE").expect("NOTHING_LOST_MODE");
    let mut plugin = GpuCrashReporterPlugin {
        settings: ReporterSettings {
            application_name: Some("nothing_lost".into()),
            ..default()
        },
        ..default()
    };
    if mode == "nonsense-settings" {
        plugin.settings.hang_timeout = Duration::ZERO;
        plugin.settings.loss_wait_after_hang = Duration::MAX;
        plugin.settings.binding_ring_capacity = usize::MAX;
        plugin.settings.max_freed_bindings = usize::MAX;
        plugin.settings.delivery = DeliverySettings {
            upload_timeout: Duration::MAX,
            ..default()
        };
    }
    let mut app = App::new();
    app.add_plugins(plugin)
        .add_plugins(common::headless_default_plugins())
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
        .insert_resource(Calm(mode == "calm"))
        .add_systems(Update, (per_frame_buffer, end_a_calm_run));
    let exit = app.run();
    eprintln!("nothing_lost child: app returned");
    common::exit_process(exit);
}

#[derive(Resource)]
struct Calm(bool);

fn per_frame_buffer(device: Res<RenderDevice>, mut last: Local<Option<Buffer>>) {
    if let Some(buffer) = last.take() {
        buffer.destroy();
    }
    *last = Some(device.create_buffer(&BufferDescriptor {
        label: Some(SCRATCH),
        size: 64 * 1024,
        usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
        mapped_at_creation: false,
    }));
}

/// A calm run ends after 60 frames, after its startup upload has had time to go out; any run ends
/// after a minute.
fn end_a_calm_run(calm: Res<Calm>, mut frames: Local<u32>, mut exit: MessageWriter<AppExit>) {
    *frames += 1;
    if calm.0 && *frames == 60 {
        // The startup upload runs on its own thread: give it a moment before the exit.
        std::thread::sleep(Duration::from_secs(6));
        exit.write(AppExit::Success);
    }
    if *frames > 100_000 {
        exit.write(AppExit::error());
    }
}
