//! Faults the driver recovered from, and shader aborts, as a studio sees them in Sentry: through
//! the real loader, lavapipe and `VK_LAYER_gpu_crash_drill` in its KHR mode (`masked:` queues
//! masked, non-fatal `VK_KHR_device_fault` reports while the device lives), into a real Bugsink.
//!
//! Each case re-runs this test binary as a child (`child`) with the drill's environment (the
//! loader reads its environment once per process); the parent reads the reports the child wrote
//! and the events Bugsink stored.

mod common;
#[path = "deliver_support/mod.rs"]
mod deliver_support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::report::{CrashKind, CrashReport, FaultVerdict};
use bevy_gpu_crash_reporter::GpuCrashReporterPlugin;
use bevy_gpu_crash_reporter::ReporterSettings;
use serde_json::Value;

const CHILD_ENV: &str = "NON_FATAL_FAULTS_CHILD";
/// The live buffer the drill's faults land in.
const POOL: &str = "test_vertex_pool";
/// How long the child plays: the masked fault comes in its first fraction of a second, its report
/// a gather time (1 s) later.
const PLAY_FOR: Duration = Duration::from_secs(5);
/// What the child prints when it quits on its own, having played [`PLAY_FOR`].
const PLAYED: &str = "[child] played to the end";

struct Run {
    output: Output,
    reports: Vec<CrashReport>,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn only_report(&self) -> &CrashReport {
        assert_eq!(
            self.reports.len(),
            1,
            "expected one report; child stderr:\n{}",
            self.stderr()
        );
        &self.reports[0]
    }
}

/// Runs the child under the drill in KHR mode with `scenario`, uploading to this binary's Bugsink.
fn run(name: &str, scenario: &str) -> Run {
    let server = deliver_support::bugsink("non_fatal_faults");
    let dir = common::scratch_dir(&format!("non-fatal-{name}"));
    let reports_dir = dir.join("reports");
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .env("VK_DRIVER_FILES", common::LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", common::LAVAPIPE_ICD)
        .env("VK_LAYER_PATH", common::drill_layer_dir())
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_gpu_crash_drill")
        .env("GPU_CRASH_DRILL", scenario)
        .env("GPU_CRASH_DRILL_API", "khr")
        .env("GPU_CRASH_DRILL_AFTER", "20")
        .env("GPU_CRASH_REPORT_DIR", &reports_dir)
        .env("SENTRY_DSN", &server.dsn)
        .output()
        .expect("spawn child");
    let mut reports = common::read_reports(&reports_dir);
    reports.sort_by_key(|r| r.timestamp_ms);
    Run { output, reports }
}

fn stored_event(report: &CrashReport, run: &Run) -> Value {
    deliver_support::bugsink("non_fatal_faults")
        .event(&report.id)
        .unwrap_or_else(|| {
            panic!(
                "event {} not in Bugsink; child stderr:\n{}",
                report.id,
                run.stderr()
            )
        })
}

/// Checks what every non-fatal report of `POOL` says, on disk and in Bugsink, and returns the event.
fn check_non_fatal(run: &Run, count: u64) -> Value {
    let stderr = run.stderr();
    assert!(stderr.contains("injected masked"), "{stderr}");
    // The game went on: it played to its end and quit with success.
    assert!(stderr.contains(PLAYED), "{stderr}");
    assert_eq!(run.output.status.code(), Some(0), "{stderr}");
    let report = run.only_report();
    assert_eq!(report.kind, CrashKind::NonFatalFault, "{stderr}");
    let non_fatal = report.non_fatal.as_ref().expect("non_fatal info");
    assert_eq!(non_fatal.count, count, "{stderr}");
    assert!(
        !non_fatal.flags.iter().any(|f| f == "DEVICE_LOST"),
        "{non_fatal:?}"
    );
    let fault = report
        .faults
        .first()
        .expect("the fault address is resolved");
    assert_eq!(fault.verdict, FaultVerdict::InsideLiveObject, "{stderr}");
    let culprit = fault.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.name.as_deref(), Some(POOL), "{}", fault.summary);

    let stored = stored_event(report, run);
    let e = &stored["data"];
    assert_eq!(e["level"], "warning", "{e:#}");
    assert_eq!(e["exception"]["values"][0]["type"], "GPU_FAULT_RECOVERED");
    let title = e["exception"]["values"][0]["value"].as_str().unwrap();
    assert!(title.contains(POOL), "the title names the object: {title}");
    assert_eq!(
        e["exception"]["values"][0]["mechanism"]["handled"], true,
        "not a crash"
    );
    assert_eq!(e["tags"]["gpu.culprit"], POOL);
    assert_eq!(e["tags"]["gpu.fault_kind"], "non_fatal_fault");
    assert_eq!(e["tags"]["gpu.non_fatal_count"], count.to_string());
    assert_eq!(e["extra"]["non_fatal_count"], count);
    let fingerprint = e["fingerprint"].to_string();
    assert!(
        fingerprint.contains("non_fatal_fault") && !fingerprint.contains("device_lost"),
        "its own fingerprint, not the device loss's: {fingerprint}"
    );
    e.clone()
}

#[test]
fn a_masked_fault_is_one_warning_event_naming_the_object_and_the_game_goes_on() {
    let run = run("one", &format!("masked:{POOL}"));
    check_non_fatal(&run, 1);
}

#[test]
fn a_thousand_masked_faults_in_a_second_are_one_event_with_the_count() {
    let run = run("storm", &format!("masked:{POOL}x1000"));
    let event = check_non_fatal(&run, 1000);
    let title = event["exception"]["values"][0]["value"].as_str().unwrap();
    assert!(title.contains("1000 times"), "{title}");
}

#[test]
fn a_shader_abort_is_its_own_issue_titled_with_the_shaders_message() {
    let run = run("abort", &format!("out-of-bounds:{POOL}"));
    let report = run.only_report();
    assert_eq!(report.kind, CrashKind::DeviceLost, "{}", run.stderr());
    let message = report
        .shader_abort_message
        .clone()
        .expect("the KHR drill's shader abort message");
    assert!(message.contains("shader abort"), "{message}");
    let stored = stored_event(report, &run);
    let e = &stored["data"];
    assert_eq!(e["level"], "fatal");
    assert_eq!(e["exception"]["values"][0]["type"], "SHADER_ABORT");
    assert_eq!(e["exception"]["values"][0]["value"], message.as_str());
    assert_eq!(e["fingerprint"][1], "shader_abort", "{}", e["fingerprint"]);
    assert_eq!(e["fingerprint"][2], message.as_str());
    assert_eq!(e["tags"]["gpu.shader_abort"], message.as_str());
    // The loss is still told: its summary and verdict.
    assert_eq!(e["extra"]["crash_summary"], report.summary.as_str());
    assert_eq!(e["tags"]["gpu.verdict"], "out_of_bounds");
    // The issue is titled with the shader's message.
    let server = deliver_support::bugsink("non_fatal_faults");
    let issue_id = stored["issue"].as_str().unwrap();
    let issue = server
        .issues()
        .into_iter()
        .find(|i| i["id"] == issue_id)
        .expect("issue listed");
    assert_eq!(issue["calculated_type"], "SHADER_ABORT", "{issue:#}");
    assert_eq!(issue["calculated_value"], message.as_str(), "{issue:#}");
}

/// The game the drill runs: the plugin, a live labelled buffer and a transient one per frame; it
/// quits by itself after [`PLAY_FOR`]. Not a test on its own.
#[test]
#[ignore = "child process entry point: the tests above start it"]
fn child() {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "child runs only as the child of the tests above"
    );
    common::use_runtime_dir();
    let exit = App::new()
        .add_plugins(GpuCrashReporterPlugin {
            settings: ReporterSettings {
                application_name: Some("non_fatal_faults".into()),
                ..default()
            },
            ..default()
        })
        .add_plugins(common::headless_default_plugins())
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::from_millis(5)))
        .add_systems(Update, play)
        .run();
    common::exit_process(exit);
}

#[derive(Default)]
struct Game {
    started: Option<Instant>,
    frame: u64,
    pool: Option<Buffer>,
    scratch: Vec<Buffer>,
}

fn play(device: Res<RenderDevice>, mut game: Local<Game>, mut exit: MessageWriter<AppExit>) {
    let started = *game.started.get_or_insert_with(Instant::now);
    game.frame += 1;
    if game.pool.is_none() {
        game.pool = Some(device.create_buffer(&BufferDescriptor {
            label: Some(POOL),
            size: 96 * 1024,
            usage: BufferUsages::VERTEX | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
    for buffer in game.scratch.drain(..) {
        buffer.destroy();
    }
    game.scratch.push(device.create_buffer(&BufferDescriptor {
        label: Some("test_scratch"),
        size: 8 * 1024,
        usage: BufferUsages::STORAGE,
        mapped_at_creation: false,
    }));
    if started.elapsed() >= PLAY_FOR {
        eprintln!("{PLAYED} (frame {})", game.frame);
        exit.write(AppExit::Success);
    }
}
