//! The second user: a plain wgpu application (`crates/gpu_crash_core/examples/wgpu_app.rs`, no Bevy)
//! creates its device through `gpu_crash_core`, runs under the crash drill on lavapipe through the
//! real Vulkan loader, and its report names its own labelled buffer with the verdict, on disk and as
//! an event in a real Bugsink.

mod common;
#[path = "deliver_support/mod.rs"]
mod deliver_support;

use std::process::Command;

use gpu_crash_core::report::{read_report, CrashKind, FaultVerdict, ObjectState};

const VICTIM: &str = "particle_positions_v1";

#[test]
fn a_plain_wgpu_app_reports_a_drilled_use_after_free_of_its_own_buffer() {
    let server = deliver_support::bugsink("without_bevy");
    let dir = common::scratch_dir("without_bevy");
    let reports_dir = dir.join("reports");
    common::use_runtime_dir();
    let output = Command::new(common::wgpu_app())
        .env("VK_DRIVER_FILES", common::LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", common::LAVAPIPE_ICD)
        .env("VK_LAYER_PATH", common::drill_layer_dir())
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_gpu_crash_drill")
        .env("GPU_CRASH_DRILL", format!("use-after-free:{VICTIM}"))
        // Two submissions a frame; the victim is freed at frame 20.
        .env("GPU_CRASH_DRILL_AFTER", "60")
        .env("GPU_CRASH_REPORT_DIR", &reports_dir)
        .env("SENTRY_DSN", &server.dsn)
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let log = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(output.status.code(), Some(1), "ends on the loss: {log}");

    let reports = common::read_reports(&reports_dir);
    assert_eq!(reports.len(), 1, "one report: {log}");
    let report = &reports[0];
    assert_eq!(report.kind, CrashKind::DeviceLost, "{log}");
    assert_eq!(report.application.name, "wgpu_app");
    assert_eq!(
        report.application.engine_name, "wgpu",
        "no Bevy in the report"
    );
    let fault = report.faults.first().expect("a fault address");
    assert_eq!(
        fault.verdict,
        FaultVerdict::UseAfterFree,
        "{}",
        fault.summary
    );
    let culprit = fault.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.name.as_deref(), Some(VICTIM), "{}", fault.summary);
    assert_eq!(culprit.state, ObjectState::Freed);
    // The last lines are the reporter's: the verdict, the report, what to run next.
    let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
    assert_eq!(tail[2], fault.summary, "{log}");
    assert!(tail[1].starts_with("GPU crash report: "), "{log}");
    assert!(
        tail[0].trim_start().starts_with("next: gpu-crash show "),
        "{log}"
    );
    // The report read back through the public reader, as `gpu-crash show` does.
    let path = std::fs::read_dir(&reports_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    assert_eq!(read_report(&path).unwrap().id, report.id);
    assert!(
        server.event(report.event_id()).is_some(),
        "Bugsink has the event of report {}: {log}",
        report.id
    );
}
