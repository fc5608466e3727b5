//! A plain wgpu renderer written from README's "Without Bevy" section alone
//! (`crates/gpu_crash_core/examples/instanced_quads.rs`: instanced quads into an offscreen target,
//! its own labels, its pass inside a breadcrumb through `GpuFrame`) gets through a loss and a hang
//! on lavapipe, under the crash drill through the real loader, without a panic's backtrace or a
//! freeze: each run ends by itself, with the report's verdict as its last lines.
//!
//! - a use-after-free with README's loop (it checks `is_device_lost` after each submit): exit 1, or
//!   101 where its `device.poll` learned of the loss first (wgpu panics there);
//! - the same with a loop that never checks and polls the lost device on (wgpu panics in
//!   `Device::poll`): the reporter's panic hook ends the process after the report, exit 101, the
//!   panic told in one line, no backtrace;
//! - a hang in its pass with the default `on_hang`: the report, the driver's 10 s, exit 75.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use gpu_crash_core::report::{CrashKind, CrashReport, FaultVerdict, ObjectState, RunningBasis};
use gpu_crash_core::{OnHang, ReporterSettings};

const VICTIM: &str = "quad_instances_gen1";

/// Builds the example and returns its path (beside this test binary's `deps/`).
fn instanced_quads() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "gpu_crash_core",
            "--example",
            "instanced_quads",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "building examples/instanced_quads failed");
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    profile_dir.join("examples").join("instanced_quads")
}

/// Runs the renderer under the drill `drill` (after `after` submissions) with `envs`, writing its
/// reports to `reports_dir`. Returns its output and how long it ran.
fn run(drill: &str, after: u32, envs: &[(&str, &str)], reports_dir: &Path) -> (Output, Duration) {
    run_exe(&instanced_quads(), drill, after, envs, reports_dir)
}

/// [`run`] with the renderer at `exe`.
fn run_exe(
    exe: &Path,
    drill: &str,
    after: u32,
    envs: &[(&str, &str)],
    reports_dir: &Path,
) -> (Output, Duration) {
    common::use_runtime_dir();
    let mut command = Command::new(exe);
    command
        .env("VK_DRIVER_FILES", common::LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", common::LAVAPIPE_ICD)
        .env("VK_LAYER_PATH", common::drill_layer_dir())
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_gpu_crash_drill")
        .env("GPU_CRASH_DRILL", drill)
        .env("GPU_CRASH_DRILL_AFTER", after.to_string())
        .env("GPU_CRASH_REPORT_DIR", reports_dir)
        .env_remove("SENTRY_DSN");
    for (key, value) in envs {
        command.env(key, value);
    }
    let started = Instant::now();
    let output = command.output().expect("run the renderer");
    (output, started.elapsed())
}

fn log_of(output: &Output) -> (String, String) {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let log = format!(
        "exit: {:?}\nstdout:\n{}\nstderr:\n{stderr}",
        output.status,
        String::from_utf8_lossy(&output.stdout)
    );
    (stderr, log)
}

/// The one report in `reports_dir`.
fn the_report(reports_dir: &Path, log: &str) -> CrashReport {
    let mut reports = common::read_reports(reports_dir);
    assert_eq!(reports.len(), 1, "one report: {log}");
    reports.remove(0)
}

/// The last lines on stderr are the reporter's: `first_line`, the report, what to run next.
fn assert_ends_with_the_verdict(stderr: &str, first_line: &str, log: &str) {
    let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
    assert_eq!(tail.len(), 3, "{log}");
    assert_eq!(tail[2], first_line, "{log}");
    assert!(tail[1].starts_with("GPU crash report: "), "{log}");
    assert!(
        tail[0].trim_start().starts_with("next: gpu-crash show "),
        "{log}"
    );
}

/// A use-after-free of its instance buffer: the report names it, freed.
fn assert_names_the_freed_instances(report: &CrashReport, log: &str) -> String {
    assert_eq!(report.kind, CrashKind::DeviceLost, "{log}");
    assert_eq!(report.application.name, "instanced_quads");
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
    fault.summary.clone()
}

#[test]
fn readme_loop_ends_after_a_use_after_free_with_the_verdict_last() {
    let dir = common::scratch_dir("wgpu-readme-loss");
    let reports_dir = dir.join("reports");
    // One submit a frame; generation 1 is destroyed at frame 30.
    let (output, _) = run(&format!("use-after-free:{VICTIM}"), 35, &[], &reports_dir);
    let (stderr, log) = log_of(&output);
    // Which call learns of the loss first is the driver's timing: a submit (wgpu's device-lost
    // callback, then the loop's `is_device_lost` check and its `end_process(1)`), or the loop's
    // `device.poll` (wgpu panics; the reporter ends the process, 101). Either way it ends by
    // itself, the verdict last, without a backtrace.
    let code = output.status.code();
    assert!(matches!(code, Some(1) | Some(101)), "{log}");
    if code == Some(101) {
        assert_one_line_for_the_panic(&stderr, &log);
    } else {
        assert!(!stderr.contains("panicked"), "no panic: {log}");
    }
    let report = the_report(&reports_dir, &log);
    let summary = assert_names_the_freed_instances(&report, &log);
    assert_ends_with_the_verdict(&stderr, &summary, &log);
}

/// wgpu's panic on the lost device is told in the reporter's one line, without a backtrace.
fn assert_one_line_for_the_panic(stderr: &str, log: &str) {
    assert_eq!(stderr.matches("panicked").count(), 1, "one panic: {log}");
    assert!(
        stderr.contains("GPU crash reporter: after the GPU device was lost, main panicked at "),
        "{log}"
    );
    assert!(!stderr.contains("stack backtrace"), "no backtrace: {log}");
}

#[test]
fn a_loop_that_polls_the_lost_device_on_ends_after_the_report_not_with_a_backtrace() {
    let dir = common::scratch_dir("wgpu-readme-naive-loss");
    let reports_dir = dir.join("reports");
    let (output, _) = run(
        &format!("use-after-free:{VICTIM}"),
        35,
        &[("QUADS_IGNORE_LOSS", "1")],
        &reports_dir,
    );
    let (stderr, log) = log_of(&output);
    // wgpu's own panic in `Device::poll` on the lost device, told in one line, then the
    // reporter's lines and the panic's exit code, without unwinding.
    assert_eq!(output.status.code(), Some(101), "{log}");
    assert_one_line_for_the_panic(&stderr, &log);
    assert!(stderr.contains("Device::poll"), "{log}");
    let report = the_report(&reports_dir, &log);
    let summary = assert_names_the_freed_instances(&report, &log);
    assert_ends_with_the_verdict(&stderr, &summary, &log);
}

#[test]
fn a_hang_in_its_pass_is_reported_and_the_process_ends_with_the_default_code() {
    let dir = common::scratch_dir("wgpu-readme-hang");
    let reports_dir = dir.join("reports");
    let defaults = ReporterSettings::default();
    assert_eq!(defaults.on_hang, OnHang::Exit(OnHang::DEFAULT_EXIT_CODE));
    let (output, ran) = run("hang-in-pass:quads main pass", 20, &[], &reports_dir);
    let (stderr, log) = log_of(&output);
    assert_eq!(
        output.status.code(),
        Some(OnHang::DEFAULT_EXIT_CODE),
        "ends by itself after the hang report: {log}"
    );
    let report = the_report(&reports_dir, &log);
    assert_eq!(report.kind, CrashKind::GpuHang, "{log}");
    assert!(
        report.summary.contains("draw quads"),
        "the hang is placed in the renderer's breadcrumb: {}",
        report.summary
    );
    // The hang timeout, then the driver's wait; the frames before the hang take a few seconds.
    let bound = defaults.hang_timeout + defaults.loss_wait_after_hang + Duration::from_secs(30);
    assert!(ran < bound, "ran {ran:?}: {log}");
    let last_lines = stderr.lines().rev().take(3).collect::<Vec<_>>();
    assert!(
        last_lines[0]
            .trim_start()
            .starts_with("next: gpu-crash show "),
        "the reporter's lines come last: {log}"
    );
}

/// Exact mode, as a game ships it: the renderer's folder holds the exact layer and its manifest
/// (the reporter points the loader at them); `GPU_CRASH_EXACT=1` turns it on, as QA would. The drill
/// hangs the GPU right after the pass label, before the pass's one draw: the report names that draw
/// by its pipeline's and pass's own labels, `basis` exact, and the draw of the frame before as the
/// last one finished.
#[test]
fn in_exact_mode_a_hang_names_the_draw_by_its_own_labels() {
    let dir = common::scratch_dir("wgpu-readme-exact");
    let reports_dir = dir.join("reports");
    let game = dir.join("game");
    common::ship_exact_layer(&game);
    let exe = game.join("instanced_quads");
    std::fs::copy(instanced_quads(), &exe).unwrap();
    let (output, _) = run_exe(
        &exe,
        "hang-in-pass:quads main pass",
        20,
        &[("GPU_CRASH_EXACT", "1")],
        &reports_dir,
    );
    let (stderr, log) = log_of(&output);
    assert_eq!(
        output.status.code(),
        Some(OnHang::DEFAULT_EXIT_CODE),
        "{log}"
    );
    assert!(stderr.contains("[gpu_crash_exact] exact mode"), "{log}");
    let report = the_report(&reports_dir, &log);
    assert!(report.gpu.exact_layer, "{:?}", report.gpu.missing);
    let running = report.running.as_ref().expect("what was running");
    assert_eq!(running.basis, RunningBasis::Exact, "{running:#?}");
    assert_eq!(running.candidates.len(), 1, "{running:#?}");
    assert_eq!(
        running.candidates[0].label.as_deref(),
        Some("quads pipeline"),
        "{running:#?}"
    );
    let exact = running.exact.as_ref().unwrap();
    let first = exact.first_unfinished.as_ref().unwrap();
    assert_eq!(
        (
            first.kind.as_str(),
            first.labels.as_slice(),
            first.sharing_marker
        ),
        ("draw", ["quads main pass".to_owned()].as_slice(), 1),
        "{exact:#?}"
    );
    let last = exact
        .last_finished
        .as_ref()
        .expect("the frame before's draw");
    assert_eq!(last.pipeline_label.as_deref(), Some("quads pipeline"));
    assert!(
        report.summary.contains(
            "exact: draw with pipeline \"quads pipeline\" in quads main pass was the first"
        ),
        "{}",
        report.summary
    );
}

/// Exact mode asked for without the layer file beside the renderer (nor known to the loader): the
/// report says why it is off and the hang is reported as without it.
#[test]
fn without_the_layer_file_exact_mode_says_why_and_reports_as_before() {
    let dir = common::scratch_dir("wgpu-readme-exact-missing");
    let reports_dir = dir.join("reports");
    let (output, _) = run(
        "hang-in-pass:quads main pass",
        20,
        &[("GPU_CRASH_EXACT", "1")],
        &reports_dir,
    );
    let (stderr, log) = log_of(&output);
    assert_eq!(
        output.status.code(),
        Some(OnHang::DEFAULT_EXIT_CODE),
        "{log}"
    );
    assert!(!stderr.contains("[gpu_crash_exact]"), "{log}");
    let report = the_report(&reports_dir, &log);
    assert!(!report.gpu.exact_layer);
    assert!(
        report.gpu.missing.iter().any(|l| l.starts_with(
            "exact mode: VK_LAYER_gpu_crash_exact.json is neither known to the Vulkan loader nor beside the executable"
        )),
        "{:?}",
        report.gpu.missing
    );
    assert!(report.summary.contains("draw quads"), "{}", report.summary);
    assert!(
        report
            .running
            .as_ref()
            .is_none_or(|r| r.basis != RunningBasis::Exact),
        "{:?}",
        report.running
    );
}
