//! The whole postmortem on lavapipe under `VK_LAYER_gpu_crash_drill`: every scenario, both fault
//! APIs, with and without labels, on buffers this test creates itself.
//!
//! The loader reads its environment once per process, so each case re-runs this test binary as a
//! child (`child_app`) with the drill's environment; the parent reads the report the child wrote.

mod common;
#[path = "deliver_support/mod.rs"]
mod deliver_support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::report::{CrashKind, CrashReport, FaultVerdict, ObjectState};
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{GpuCrashReporterPlugin, OnHang};

const CHILD_ENV: &str = "DRILL_POSTMORTEM_CHILD";

struct Drill {
    output: Output,
    reports: Vec<CrashReport>,
    dir: PathBuf,
}

/// Runs the child app under the drill and collects what it wrote.
fn drill(name: &str, api: &str, scenario: &str, extra_env: &[(&str, &str)]) -> Drill {
    let dir = common::scratch_dir(&format!("drill-{name}-{api}"));
    let reports_dir = dir.join("reports");
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "child_app",
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
        .env("GPU_CRASH_DRILL_API", api)
        .env("GPU_CRASH_REPORT_DIR", &reports_dir)
        .env_remove("SENTRY_DSN");
    for (k, v) in extra_env {
        command.env(k, v);
    }
    let output = command.output().expect("spawn child");
    let mut reports: Vec<CrashReport> = common::read_reports(&reports_dir);
    reports.sort_by_key(|r| r.timestamp_ms);
    Drill {
        output,
        reports,
        dir,
    }
}

impl Drill {
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

/// The object the layer blamed, from its fault description: `... buffer "label" (0x...) [...)`.
fn injected_label(report: &CrashReport) -> Option<String> {
    let description = report.description.as_deref()?;
    let start = description.find('"')? + 1;
    let end = start + description[start..].find('"')?;
    Some(description[start..end].to_owned())
}

fn check_memory_fault(
    name: &str,
    scenario: &str,
    verdict: FaultVerdict,
    state: ObjectState,
    label: Option<&str>,
) {
    for api in ["ext", "khr"] {
        let run = drill(name, api, scenario, &[]);
        let report = run.only_report();
        assert_eq!(
            report.kind,
            CrashKind::DeviceLost,
            "{api}: {}",
            run.stderr()
        );
        assert_eq!(
            run.output.status.code(),
            Some(1),
            "{api}: the app's own policy (exit) still applies"
        );
        assert_eq!(report.faults.len(), 1, "{api}: {report:#?}");
        let fault = &report.faults[0];
        assert_eq!(
            fault.verdict, verdict,
            "{api}: {}\n{:#?}",
            fault.summary, fault.candidates
        );
        let culprit = fault.culprit.as_ref().expect("a culprit");
        assert_eq!(culprit.state, state, "{api}: {}", fault.summary);
        let expected = label.map(str::to_owned).or_else(|| injected_label(report));
        assert_eq!(culprit.name, expected, "{api}: {}", fault.summary);
        assert!(
            run.stderr().contains(&fault.summary),
            "{api}: the human line is printed"
        );
        // The run's last lines are ours, below whatever Bevy prints while the app quits: the
        // verdict, where the report is, and what to run next.
        let stderr = run.stderr();
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        assert_eq!(tail[2], fault.summary, "{api}: {stderr}");
        assert!(tail[1].starts_with("GPU crash report: "), "{api}: {stderr}");
        assert!(
            tail[0].trim_start().starts_with("next: gpu-crash show "),
            "{api}: {stderr}"
        );
        assert_eq!(report.drill.as_deref(), Some(scenario));
        if api == "khr" {
            assert!(
                report
                    .shader_abort_message
                    .as_deref()
                    .is_some_and(|m| m.contains("shader abort")),
                "KHR path reads the shader abort message: {report:#?}"
            );
        } else {
            let binary = report.vendor_binary.as_ref().expect("vendor binary (EXT)");
            assert!(binary.header.is_some(), "{binary:?}");
            assert!(run
                .dir
                .join("reports")
                .join(binary.file_name.as_ref().unwrap())
                .is_file());
        }
    }
}

#[test]
fn use_after_free_default_target() {
    check_memory_fault(
        "uaf",
        "use-after-free",
        FaultVerdict::UseAfterFree,
        ObjectState::Freed,
        None,
    );
}

#[test]
fn use_after_free_of_a_labelled_test_buffer() {
    check_memory_fault(
        "uaf-label",
        "use-after-free:test_scratch_1",
        FaultVerdict::UseAfterFree,
        ObjectState::Freed,
        Some("test_scratch_1"),
    );
}

#[test]
fn out_of_bounds_default_target() {
    check_memory_fault(
        "oob",
        "out-of-bounds",
        FaultVerdict::OutOfBounds,
        ObjectState::Live,
        None,
    );
}

#[test]
fn out_of_bounds_of_a_labelled_test_buffer() {
    check_memory_fault(
        "oob-label",
        "out-of-bounds:test_vertex_pool",
        FaultVerdict::OutOfBounds,
        ObjectState::Live,
        Some("test_vertex_pool"),
    );
}

#[test]
fn in_bounds_default_target() {
    check_memory_fault(
        "inb",
        "in-bounds",
        FaultVerdict::InsideLiveObject,
        ObjectState::Live,
        None,
    );
}

#[test]
fn in_bounds_of_a_labelled_test_buffer() {
    check_memory_fault(
        "inb-label",
        "in-bounds:test_vertex_pool",
        FaultVerdict::InsideLiveObject,
        ObjectState::Live,
        Some("test_vertex_pool"),
    );
}

#[test]
fn hang_gives_a_gpu_hang_report_within_the_timeout_plus_two_seconds() {
    for api in ["ext", "khr"] {
        let run = drill("hang", api, "hang", &[]);
        let report = run.only_report();
        assert_eq!(report.kind, CrashKind::GpuHang, "{api}: {}", run.stderr());
        assert_eq!(
            run.output.status.code(),
            Some(3),
            "{api}: on_hang exit code"
        );
        let hang = report.hang.as_ref().expect("hang section");
        assert_eq!(hang.hang_timeout_ms, 2_000);
        assert!(
            hang.stalled_ms >= hang.hang_timeout_ms
                && hang.stalled_ms <= hang.hang_timeout_ms + 2_000,
            "{api}: declared after {} ms",
            hang.stalled_ms
        );
        assert_eq!(
            hang.driver_watchdog_timeout,
            api == "khr",
            "{api}: KHR reports WATCHDOG_TIMEOUT"
        );
        assert!(
            report.summary.starts_with("GPU hang in frame"),
            "{}",
            report.summary
        );
        assert!(run.stderr().contains("GPU hang in frame"));
    }
}

#[test]
fn unwritable_report_dir_gives_a_clear_line_and_no_panic() {
    // A path below a regular file cannot be created, whoever runs the test (root included).
    let blocker = common::scratch_dir("drill-unwritable").join("not-a-dir");
    std::fs::write(&blocker, b"x").unwrap();
    let run = drill(
        "unwritable",
        "ext",
        "use-after-free",
        &[(
            "GPU_CRASH_REPORT_DIR",
            blocker.join("reports").to_str().unwrap(),
        )],
    );
    let stderr = run.stderr();
    assert!(
        stderr.contains("GPU crash report could NOT be written"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(run.output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("GPU fault:"),
        "the verdict is still printed: {stderr}"
    );
}

/// Every drill scenario, uploaded by the child itself, lands in a real Bugsink as an event a
/// developer can act on (checked through Bugsink's REST API).
#[test]
fn each_drill_scenario_lands_in_bugsink() {
    let server = deliver_support::bugsink("drill_postmortem");
    for (scenario, kind, verdict) in [
        (
            "use-after-free",
            "VK_ERROR_DEVICE_LOST",
            Some("use_after_free"),
        ),
        (
            "out-of-bounds:test_vertex_pool",
            "VK_ERROR_DEVICE_LOST",
            Some("out_of_bounds"),
        ),
        (
            "in-bounds:test_vertex_pool",
            "VK_ERROR_DEVICE_LOST",
            Some("inside_live_object"),
        ),
        ("hang", "GPU_HANG", None),
    ] {
        let run = drill(
            &format!("bugsink-{}", scenario.replace(':', "-")),
            "ext",
            scenario,
            &[("SENTRY_DSN", server.dsn.as_str())],
        );
        let report = run.only_report();
        let stored = server.event(&report.id).unwrap_or_else(|| {
            panic!(
                "{scenario}: event {} not in Bugsink:\n{}",
                report.id,
                run.stderr()
            )
        });
        let event = &stored["data"];
        assert_eq!(event["level"], "fatal", "{scenario}");
        assert_eq!(event["exception"]["values"][0]["type"], kind, "{scenario}");
        assert_eq!(
            event["exception"]["values"][0]["value"],
            report.summary.as_str()
        );
        assert_eq!(event["contexts"]["gpu"]["api_type"], "Vulkan");
        assert!(event["contexts"]["gpu"]["name"]
            .as_str()
            .unwrap()
            .contains("llvmpipe"));
        assert_eq!(event["tags"]["drill"], scenario, "{scenario}");
        if let Some(verdict) = verdict {
            assert_eq!(event["tags"]["gpu.verdict"], verdict, "{scenario}");
            let fingerprint = event["fingerprint"].to_string();
            assert!(fingerprint.contains(verdict), "{fingerprint}");
            assert!(
                !fingerprint.contains("0x1"),
                "no addresses in the fingerprint: {fingerprint}"
            );
        }
        // Delivered means gone from the outbox.
        let outbox = run.dir.join("reports").join("outbox");
        let pending = std::fs::read_dir(&outbox)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "envelope"))
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(pending, 0, "{scenario}: envelope left behind after a 2xx");
    }
}

#[test]
fn full_disk_gives_a_clear_line_and_no_panic() {
    // A file-size limit of 4 KiB makes writes fail with EFBIG, as ENOSPC would on a full disk: the
    // report JSON (several KiB) cannot be written. SIGXFSZ is ignored so the write fails instead of
    // killing the process; both settings survive the exec into the child.
    let dir = common::scratch_dir("drill-full");
    let reports = dir.join("reports");
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 8; exec \"$0\" \"$@\"")
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_app",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .env("VK_DRIVER_FILES", common::LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", common::LAVAPIPE_ICD)
        .env("VK_LAYER_PATH", common::drill_layer_dir())
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_gpu_crash_drill")
        .env("GPU_CRASH_DRILL", "use-after-free")
        .env("GPU_CRASH_REPORT_DIR", &reports)
        .env("MESA_SHADER_CACHE_DISABLE", "true")
        .env_remove("SENTRY_DSN");
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("GPU crash report could NOT be written"),
        "{stderr}"
    );
    assert!(stderr.contains("File too large"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let leftovers: Vec<_> = std::fs::read_dir(&reports)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        leftovers
            .iter()
            .all(|n| !n.to_string_lossy().ends_with(".json")),
        "no half-written report: {leftovers:?}"
    );
}

#[test]
fn report_is_on_disk_and_kept_in_the_outbox_when_the_server_is_unreachable() {
    // Port 9 on loopback: nothing listens, the upload fails fast.
    let run = drill(
        "offline",
        "ext",
        "out-of-bounds",
        &[(
            "SENTRY_DSN",
            "http://0123456789abcdef0123456789abcdef@127.0.0.1:9/1",
        )],
    );
    let report = run.only_report();
    let outbox = run.dir.join("reports").join("outbox");
    let pending: Vec<_> = std::fs::read_dir(&outbox)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "envelope"))
        .collect();
    assert_eq!(pending.len(), 1, "the envelope waits for the next launch");
    assert!(pending[0]
        .file_name()
        .to_string_lossy()
        .contains(&report.id));
    let stderr = run.stderr();
    let written = stderr
        .find("GPU crash report written to")
        .expect("written line");
    let queued = stderr.find("queued for upload").expect("queued line");
    assert!(written < queued, "disk before upload:\n{stderr}");
}

/// The app the drill runs: the plugin plus labelled buffers this test owns. Not a test on its own.
#[test]
#[ignore = "child process entry point: the tests above start it with DRILL_POSTMORTEM_CHILD set"]
fn child_app() {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "child_app runs only as the child of the tests above"
    );
    common::use_runtime_dir();
    let exit = App::new()
        .add_plugins(GpuCrashReporterPlugin {
            settings: ReporterSettings {
                hang_timeout: Duration::from_secs(2),
                on_hang: OnHang::Exit(3),
                application_name: Some("drill_postmortem".into()),
                ..default()
            },
            ..default()
        })
        .add_plugins(common::headless_default_plugins())
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
        .add_systems(Update, test_owned_buffers)
        .run();
    common::exit_process(exit);
}

#[derive(Default)]
struct Owned {
    frame: u64,
    pool: Option<Buffer>,
    scratch: Vec<Buffer>,
}

fn test_owned_buffers(
    device: Res<RenderDevice>,
    mut owned: Local<Owned>,
    mut exit: MessageWriter<AppExit>,
) {
    owned.frame += 1;
    if owned.pool.is_none() {
        owned.pool = Some(device.create_buffer(&BufferDescriptor {
            label: Some("test_vertex_pool"),
            size: 96 * 1024,
            usage: BufferUsages::VERTEX | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
    for buffer in owned.scratch.drain(..) {
        buffer.destroy();
    }
    let n = owned.frame % 3;
    let buffer = device.create_buffer(&BufferDescriptor {
        label: Some(&format!("test_scratch_{n}")),
        size: 8 * 1024 * (n + 1),
        usage: BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    owned.scratch.push(buffer);
    if owned.frame > 600 {
        exit.write(AppExit::Success); // the drill never fired: the parent's assertions say why
    }
}
