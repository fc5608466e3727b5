//! Reports that tell the truth, on lavapipe with a headless Bevy app and the plugin:
//! - a healthy pause (main thread blocked, or no frames at all) is never a hang, including a pause
//!   that holds Bevy's task pool while the render thread is between a frame's submit and its
//!   completion marker;
//! - a real GPU stall shorter than `hang_timeout` writes nothing, and a later real hang in the same
//!   process is still reported;
//! - the render thread blocked after the frame's submit (a Cleanup-time system, a present waiting for
//!   vsync) and the whole process stopped (SIGSTOP) are not hangs, and a later real hang in the same
//!   process is still reported;
//! - the drill's `hang` is reported within `hang_timeout` + 1 s;
//! - a use-after-free whose range is re-bound before the loss is seen resolves as of the fault;
//! - a hang the driver turns into a device loss a moment later is one report and one Sentry issue,
//!   with the loss's fault info.
//!
//! Each case runs this test binary again as a child (`child` below, an ignored test that only the
//! parent starts) because the Vulkan loader reads its environment once per process.

mod common;
mod deliver_support;

use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ash::vk;
use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::pipelined_rendering::PipelinedRenderingPlugin;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::renderer::{RenderGraph, RenderGraphSystems};
use bevy::render::{Render, RenderApp, RenderSystems};
use bevy_gpu_crash_reporter::report::{CrashKind, CrashReport, FaultVerdict};
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{GpuBreadcrumbs, GpuCrashReporterPlugin, OnHang};

const HANG_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a hang report waits for a loss to follow: short here, so the cases without a loss end
/// soon after their hang report.
const LOSS_WAIT: Duration = Duration::from_secs(1);
/// The game's breadcrumb around the hang it records in Cleanup.
const CLEANUP_WORK: &str = "truth: cleanup work";

struct Run {
    dir: std::path::PathBuf,
    output: Output,
    reports: Vec<CrashReport>,
    took: Duration,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

/// Runs the child in `mode`, with the drill layer when `drill` names a scenario.
///
/// One child at a time: lavapipe's "GPU" is CPU threads, and a child whose GPU is really hung spins
/// one at 100%; next to it, on a 2-core machine, a healthy child's frames can take seconds (seen once
/// in a full test run: the pause case reported a hang when the stall case ran beside it).
fn run(name: &str, mode: &str, drill: Option<&str>, env: &[(&str, &str)]) -> Run {
    run_in(
        common::scratch_dir(&format!("truth-{name}")),
        mode,
        drill,
        env,
    )
}

/// [`run`] in `dir`, which may hold an earlier run's reports (they are in [`Run::reports`] too).
fn run_in(dir: std::path::PathBuf, mode: &str, drill: Option<&str>, env: &[(&str, &str)]) -> Run {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, drill);
    command.env("TRUTH_MODE", mode);
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let output = command.output().expect("spawn child");
    let took = started.elapsed();
    let mut reports: Vec<CrashReport> = common::read_reports(&reports_dir);
    reports.sort_by_key(|r| r.timestamp_ms);
    Run {
        dir,
        output,
        reports,
        took,
    }
}

#[test]
fn main_thread_blocked_for_three_timeouts_is_not_a_hang() {
    let run = run("pause", "pause", None, &[]);
    assert_eq!(
        run.output.status.code(),
        Some(0),
        "{}\nreports: {:#?}",
        run.stderr(),
        run.reports
    );
    assert!(run.took >= HANG_TIMEOUT * 3, "the pause happened");
    assert!(
        run.reports.is_empty(),
        "a healthy pause was reported: {:#?}",
        run.reports
    );
    assert!(
        run.stderr().contains("truth child: paused"),
        "{}",
        run.stderr()
    );
}

/// The same pause, landing where the `pause` case lands only by chance (a game saw it in 2 of 18
/// runs; this test's `pause` 0 of 50): the game's blocking work holds Bevy's compute task pool,
/// which both worlds' systems run on (one thread on a 2-core machine), while the render thread is
/// between the frame's "submitting" stamp and the submit of its completion marker. The render
/// thread then waits for the pool through the whole pause; a marker submitted from a parallel
/// system left the frame pending, and the pause was reported as a GPU hang. Three runs: each one
/// lands in the window by construction (before the fix, 10 of 10 runs were reported).
#[test]
fn a_pause_that_holds_the_task_pool_mid_frame_is_not_a_hang() {
    for attempt in 0..3 {
        let run = run("pause-in-window", "pause-in-window", None, &[]);
        let stderr = run.stderr();
        assert!(
            stderr.contains("truth child: paused (the task pool, in the render thread's window)"),
            "attempt {attempt}: the pause happened in the window: {stderr}"
        );
        assert!(
            run.reports.is_empty(),
            "attempt {attempt}: a healthy pause was reported: {:#?}",
            run.reports
        );
        assert_eq!(run.output.status.code(), Some(0), "{stderr}");
        assert!(run.took >= HANG_TIMEOUT * 3, "the pause happened");
    }
}

#[test]
fn no_frames_for_three_timeouts_is_not_a_hang() {
    let run = run("idle", "idle", None, &[]);
    assert_eq!(run.output.status.code(), Some(0), "{}", run.stderr());
    assert!(
        run.reports.is_empty(),
        "an app that stopped submitting was reported: {:#?}",
        run.reports
    );
    assert!(
        run.stderr().contains("truth child: idle"),
        "{}",
        run.stderr()
    );
}

#[test]
fn drill_hang_is_reported_within_the_timeout_plus_one_second() {
    let run = run("hang", "frames", Some("hang"), &[]);
    assert_eq!(run.output.status.code(), Some(3), "{}", run.stderr());
    assert_eq!(run.reports.len(), 1, "{}", run.stderr());
    let report = &run.reports[0];
    assert_eq!(report.kind, CrashKind::GpuHang);
    let hang = report.hang.as_ref().unwrap();
    assert!(
        hang.stalled_ms >= 2_000 && hang.stalled_ms <= 3_000,
        "declared after {} ms",
        hang.stalled_ms
    );
    assert!(
        report.summary.starts_with("GPU hang in frame"),
        "{}",
        report.summary
    );
    // The drill's hang frees nothing wrongly: no object is blamed.
    assert!(hang.suspects.is_empty(), "{:#?}", hang.suspects);
    assert!(report.summary.contains("no suspect"), "{}", report.summary);
    // Frames had completed before it: not the note of a GPU that never finished one.
    assert!(
        !report.notes.iter().any(|n| n.contains(NO_FRAME_NOTE)),
        "{:#?}",
        report.notes
    );
}

/// The note a hang carries when the GPU had finished no frame of its device.
const NO_FRAME_NOTE: &str = "the GPU had finished no frame of this device";

/// A GPU that never finishes the first frame (on the H100 host: still busy with an earlier
/// process's endless shader, 8+ minutes after that process ended) is reported as a hang, and the
/// report says that no frame of this device had finished, so it is not read as a bug of frame 1.
#[test]
fn a_hang_before_any_frame_finished_says_so() {
    let run = run(
        "first-frame",
        "frames",
        Some("hang"),
        &[("GPU_CRASH_DRILL_AFTER", "0")],
    );
    assert_eq!(run.output.status.code(), Some(3), "{}", run.stderr());
    assert_eq!(run.reports.len(), 1, "{}", run.stderr());
    let report = &run.reports[0];
    assert_eq!(report.kind, CrashKind::GpuHang);
    assert!(
        report.notes.iter().any(|n| n.contains(NO_FRAME_NOTE)),
        "{}\n{:#?}",
        report.summary,
        report.notes
    );
}

/// A relaunch on a GPU still busy with an earlier run's hang (on the H100 host, each process started
/// in the 8+ minutes after an endless shader's report hung in its frame 1) is not a second issue
/// blaming the pipeline that came first: its report names the earlier run's hang report, names no
/// ranked pipeline, and its Sentry event joins the earlier report's issue.
#[test]
fn a_hang_at_a_relaunch_soon_after_an_earlier_runs_hang_joins_its_issue() {
    let server = deliver_support::bugsink("hang_truth");
    let dir = common::scratch_dir("truth-relaunch");
    let dsn = ("SENTRY_DSN", server.dsn.as_str());
    let first = run_in(dir.clone(), "frames", Some("hang"), &[dsn]);
    assert_eq!(first.reports.len(), 1, "{}", first.stderr());
    let earlier = first.reports[0].clone();
    assert!(earlier.after_earlier_hang.is_none(), "{}", earlier.summary);

    let second = run_in(
        dir,
        "frames",
        Some("hang"),
        &[dsn, ("GPU_CRASH_DRILL_AFTER", "0")],
    );
    let stderr = second.stderr();
    assert_eq!(second.output.status.code(), Some(3), "{stderr}");
    assert_eq!(second.reports.len(), 2, "{stderr}");
    let relaunch = second.reports.iter().find(|r| r.id != earlier.id).unwrap();
    assert_eq!(relaunch.kind, CrashKind::GpuHang);
    let link = relaunch
        .after_earlier_hang
        .as_ref()
        .unwrap_or_else(|| panic!("names the earlier hang: {}\n{stderr}", relaunch.summary));
    assert_eq!(link.report_id, earlier.id);
    assert_eq!(link.event_id, earlier.event_id());
    assert_eq!(link.process_id, earlier.application.process_id);
    assert_ne!(link.process_id, relaunch.application.process_id);
    assert!(
        relaunch
            .summary
            .contains("after a GPU hang reported by an earlier run on this GPU"),
        "{}",
        relaunch.summary
    );
    assert!(relaunch.running.is_none(), "{:#?}", relaunch.running);
    let earlier_event = server
        .event(earlier.event_id())
        .unwrap_or_else(|| panic!("the earlier hang reached Bugsink: {}", first.stderr()));
    let relaunch_event = server
        .event(relaunch.event_id())
        .unwrap_or_else(|| panic!("the relaunch's hang reached Bugsink: {stderr}"));
    assert_eq!(earlier_event["issue"], relaunch_event["issue"], "one issue");
    assert_eq!(
        relaunch_event["data"]["tags"]["gpu.after_earlier_hang"],
        earlier.id.as_str(),
        "{relaunch_event:#}"
    );
}

#[test]
fn a_short_stall_writes_nothing_and_a_later_real_hang_is_still_reported() {
    let run = run("stall", "stall-then-hang", Some("stall:1000"), &[]);
    let stderr = run.stderr();
    assert!(
        stderr.contains("injected stall"),
        "the layer stalled the GPU: {stderr}"
    );
    let report =
        only_the_later_real_hang(run.output.status.code(), &run.reports, &stderr, 40, "stall");
    // The hang was recorded in Cleanup, after the frame's completion marker (the layer provides
    // VK_AMD_buffer_marker): the report still names the game's breadcrumb around it.
    assert_eq!(
        report.gpu_stage.as_deref(),
        Some(CLEANUP_WORK),
        "{}\n{:#?}",
        report.summary,
        report.breadcrumbs
    );
}

/// The frame's completion marker goes to the GPU before Bevy presents and before Cleanup: a render
/// thread blocked there for three timeouts is the CPU's time, not the GPU's.
#[test]
fn render_thread_blocked_after_the_submit_is_not_a_hang_and_a_later_real_hang_is() {
    let run = run("cleanup-block", "cleanup-block-then-hang", None, &[]);
    let stderr = run.stderr();
    assert!(
        stderr.contains("truth child: render thread blocked"),
        "the render thread blocked: {stderr}"
    );
    assert!(run.took >= HANG_TIMEOUT * 3, "the block happened");
    only_the_later_real_hang(
        run.output.status.code(),
        &run.reports,
        &stderr,
        100,
        "block",
    );
}

/// The whole process stopped for three timeouts (a debugger, SIGSTOP, a laptop asleep with the game
/// open), then continued: the watchdog's first tick after the stop restarts its stall clock instead of
/// counting the stop as the GPU's. A real hang later in the same process is still reported.
#[test]
#[cfg(unix)] // SIGSTOP
fn a_stopped_process_is_not_a_hang_and_a_later_real_hang_is() {
    let (code, reports, log) = stopped_run(
        "sigstop",
        "stop-then-hang",
        None,
        "truth child: stop me",
        Duration::ZERO,
    );
    only_the_later_real_hang(code, &reports, &log, 100, "stop");
}

/// The same with GPU work pending through the stop (the drill holds the GPU 7 s from its submission
/// 30; the process is stopped for 6 s of it, from 0.3 s in, once the layer's stall thread sleeps):
/// the GPU ran 1 s of it while the process did, less than `hang_timeout`. Without the restarted
/// clock the first tick after the stop sees 6.3 s of stall.
#[test]
#[cfg(unix)] // SIGSTOP
fn a_process_stopped_while_the_gpu_is_busy_is_not_a_hang() {
    let (code, reports, log) = stopped_run(
        "sigstop-busy",
        "frames",
        Some("stall:7000"),
        "injected stall",
        Duration::from_millis(300),
    );
    assert!(log.contains("stall released"), "{log}");
    assert_eq!(code, Some(0), "{log}");
    assert!(
        reports.is_empty(),
        "a stopped process was reported: {reports:#?}"
    );
}

/// Runs the child in `mode` (with the drill when `drill` names a scenario), stops it with SIGSTOP for
/// three timeouts `settle` after its log shows `stop_at`, then continues it. Returns its exit code,
/// reports and log.
#[cfg(unix)]
fn stopped_run(
    name: &str,
    mode: &str,
    drill: Option<&str>,
    stop_at: &str,
    settle: Duration,
) -> (Option<i32>, Vec<CrashReport>, String) {
    use std::io::{BufRead, BufReader};
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::scratch_dir(&format!("truth-{name}"));
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, drill);
    command
        .env("TRUTH_MODE", mode)
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("spawn child");
    let pid = child.id() as i32;
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    let mut stopped = false;
    for line in stderr.lines() {
        let line = line.unwrap();
        if !stopped && line.contains(stop_at) {
            stopped = true;
            std::thread::sleep(settle);
            // SAFETY: plain signals to our own child process.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            std::thread::sleep(HANG_TIMEOUT * 3);
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
        log.push_str(&line);
        log.push('\n');
    }
    let status = child.wait().unwrap();
    assert!(stopped, "the child never reached `{stop_at}`: {log}");
    (status.code(), common::read_reports(&reports_dir), log)
}

/// The child's own real hang (recorded at render frame 150) is its only report, after `after` frames:
/// whatever happened before it (`what`) was not reported. Returns that report.
fn only_the_later_real_hang<'a>(
    code: Option<i32>,
    reports: &'a [CrashReport],
    log: &str,
    after: u64,
    what: &str,
) -> &'a CrashReport {
    assert!(
        log.contains("truth child: GPU hang recorded"),
        "the child hung the GPU itself later: {log}"
    );
    assert_eq!(code, Some(3), "{log}");
    assert_eq!(reports.len(), 1, "only the real hang: {reports:#?}");
    let report = &reports[0];
    assert_eq!(report.kind, CrashKind::GpuHang);
    let pending = report.hang.as_ref().unwrap().oldest_pending_frame;
    assert!(
        pending > after,
        "the hang came after the {what}: frame {pending}"
    );
    report
}

/// Found as a user: the range the drill faulted in gets re-bound by the next frame's buffer before
/// the report is built. The layer delays the loss until that re-bind (deterministic); the verdict
/// must still be use-after-free of the freed buffer, with the re-bind listed as after the fault.
#[test]
fn a_range_re_bound_after_the_fault_does_not_change_the_verdict() {
    let run = run(
        "rebind",
        "rebind",
        Some("use-after-free:truth_scratch"),
        &[("GPU_CRASH_DRILL_LOSS", "after-rebind")],
    );
    let stderr = run.stderr();
    assert!(
        stderr.contains("re-bound"),
        "the layer saw the re-bind: {stderr}"
    );
    assert_eq!(run.reports.len(), 1, "{stderr}");
    let report = &run.reports[0];
    assert_eq!(report.kind, CrashKind::DeviceLost, "{stderr}");
    let fault = &report.faults[0];
    assert_eq!(
        fault.verdict,
        FaultVerdict::UseAfterFree,
        "{}",
        fault.summary
    );
    let culprit = fault.culprit.as_ref().unwrap();
    assert_eq!(culprit.name.as_deref(), Some("truth_scratch"));
    let [lo, hi] = fault.address_range;
    assert!(
        report.events_after_fault.iter().any(|e| e.kind
            == bevy_gpu_crash_reporter::report::BindingKind::Bind
            && e.base <= hi
            && lo < e.base + e.size),
        "the re-bind is kept as after the fault: {:#?}",
        report.events_after_fault
    );
}

/// The driver resets the hung GPU 3.5 s after the hang (as amdgpu does after its lockup timeout),
/// 1.5 s after our 2 s hang report, and the device is lost with a fault address inside the live
/// `truth_scratch` buffer: one report on disk (the hang's id, the loss's verdict, the stall kept) and
/// one issue in Bugsink, holding the hang's event (sent at once) and the loss's.
#[test]
fn a_hang_then_a_loss_of_the_same_device_is_one_report_and_one_issue() {
    let server = deliver_support::bugsink("hang_truth");
    let run = run(
        "hang-then-loss",
        "until-exit",
        Some("hang"),
        &[
            ("GPU_CRASH_DRILL_LOSS", "after-hang:3500@truth_scratch"),
            ("SENTRY_DSN", server.dsn.as_str()),
            ("TRUTH_LOSS_WAIT_MS", "10000"),
        ],
    );
    let stderr = run.stderr();
    assert_eq!(run.reports.len(), 1, "one report for both: {stderr}");
    let report = &run.reports[0];
    assert_eq!(report.kind, CrashKind::DeviceLost, "{stderr}");
    let hang = report.hang.as_ref().expect("the hang's stall is kept");
    assert!(hang.stalled_ms >= 2_000, "{hang:#?}");
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("replaces the GPU hang report")),
        "{:#?}",
        report.notes
    );
    let fault = report.faults.first().unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(
        fault.verdict,
        FaultVerdict::InsideLiveObject,
        "{}",
        fault.summary
    );
    assert_eq!(
        fault.culprit.as_ref().and_then(|c| c.name.as_deref()),
        Some("truth_scratch"),
        "{}",
        fault.summary
    );
    assert!(
        report.summary.contains("after a GPU hang"),
        "{}",
        report.summary
    );
    let follow_up = report
        .follows_hang
        .as_ref()
        .expect("follows its hang report");
    let loss = server
        .event(&follow_up.event_id)
        .unwrap_or_else(|| panic!("the loss reached Bugsink: {stderr}"));
    assert_eq!(
        loss["data"]["tags"]["gpu.verdict"], "inside_live_object",
        "{loss:#}"
    );
    assert_eq!(
        loss["data"]["tags"]["gpu.fault_kind"], "device_lost",
        "{loss:#}"
    );
    let hang_event = server
        .event(&follow_up.hang_event_id)
        .unwrap_or_else(|| panic!("the hang reached Bugsink: {stderr}"));
    assert_eq!(hang_event["issue"], loss["issue"], "one issue");
    // Two events, both sent; nothing waits or is held.
    let outbox = run.dir.join("reports").join("outbox");
    assert_eq!(files_in(&outbox.join("sent")), 2, "{stderr}");
    assert_eq!(files_in(&outbox), 0, "{stderr}");
    assert_eq!(files_in(&outbox.join("held")), 0, "{stderr}");
}

fn files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().is_file())
                .count()
        })
        .unwrap_or(0)
}

/// The app each case runs: the plugin, labelled per-frame buffers, and the mode's behaviour.
#[test]
#[ignore = "child process entry point: the tests above start it with TRUTH_MODE set"]
fn child() {
    let mode = std::env::var("TRUTH_MODE").expect("TRUTH_MODE");
    common::use_runtime_dir();
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin {
        settings: ReporterSettings {
            hang_timeout: hang_timeout(),
            on_hang: OnHang::Exit(3),
            loss_wait_after_hang: std::env::var("TRUTH_LOSS_WAIT_MS")
                .ok()
                .and_then(|ms| ms.parse().ok())
                .map_or(LOSS_WAIT, Duration::from_millis),
            application_name: Some("hang_truth".into()),
            ..default()
        },
        ..default()
    });
    if mode == "rebind" {
        // Main and render world take turns: the next frame's buffer is created strictly after the
        // faulting frame's work was submitted.
        app.add_plugins(
            common::headless_default_plugins()
                .build()
                .disable::<PipelinedRenderingPlugin>(),
        );
    } else {
        app.add_plugins(common::headless_default_plugins());
    }
    app.insert_resource(Mode(mode.clone()))
        .add_systems(Update, (per_frame_buffers, drive, block_in_window).chain());
    app.sub_app_mut(RenderApp)
        .insert_resource(Mode(mode.clone()))
        .add_systems(Render, hang_gpu_when_asked.in_set(RenderSystems::Cleanup))
        .add_systems(RenderGraph, open_window.in_set(RenderGraphSystems::Submit));
    if mode == "idle" {
        // No frames at all for a while: the whole app stops, as under a reactive update mode.
        app.set_runner(|mut app| {
            common::finish(&mut app);
            for frame in 0..90u32 {
                app.update();
                if frame == 30 {
                    eprintln!("truth child: idle");
                    std::thread::sleep(HANG_TIMEOUT * 3);
                }
                if let Some(exit) = app.should_exit() {
                    return exit;
                }
            }
            AppExit::Success
        });
    } else {
        app.add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO));
    }
    let exit = app.run();
    common::exit_process(exit);
}

#[derive(Resource, Clone)]
struct Mode(String);

#[derive(Default)]
struct Buffers {
    frame: u64,
    last: Vec<Buffer>,
}

/// A 96 KiB scratch buffer created and dropped every frame, as games do with transient data.
///
/// In `rebind` mode it lives every other frame from frame 20 on (after start-up allocations have
/// settled): in the frames between, its range is free, so the drill's use-after-free lands in a range
/// nothing else covers, and the next frame's buffer re-binds it after the fault.
fn per_frame_buffers(mode: Res<Mode>, device: Res<RenderDevice>, mut buffers: Local<Buffers>) {
    buffers.frame += 1;
    for buffer in buffers.last.drain(..) {
        buffer.destroy();
    }
    if mode.0 == "rebind" && (buffers.frame < 20 || buffers.frame % 2 == 1) {
        return;
    }
    let rebind_tenant = mode.0 == "rebind" && buffers.frame > 20;
    buffers.last.push(device.create_buffer(&BufferDescriptor {
        // In `rebind` mode only the first is the drill's target; later tenants of its range have
        // another name, so a verdict that takes them for the culprit is told apart.
        label: Some(if rebind_tenant {
            "truth_rebind"
        } else {
            "truth_scratch"
        }),
        size: 96 * 1024,
        usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
        mapped_at_creation: false,
    }));
}

/// What the main world does per mode; ends the run after enough frames.
fn drive(mode: Res<Mode>, mut frame: Local<u32>, mut exit: MessageWriter<AppExit>) {
    *frame += 1;
    match mode.0.as_str() {
        "pause" if *frame == 30 => {
            eprintln!("truth child: paused");
            std::thread::sleep(hang_timeout() * 3);
        }
        "pause" if *frame >= 60 => {
            exit.write(AppExit::Success);
        }
        "pause-in-window" if *frame >= 100 => {
            exit.write(AppExit::Success);
        }
        "idle" | "pause" | "pause-in-window" => {}
        // Frames go on while the GPU is hung (nothing here waits for it), until the crash path ends
        // the process.
        "until-exit" => {}
        _ if *frame >= 1_200 => {
            eprintln!("truth child: no report after {} frames", *frame);
            exit.write(AppExit::Success);
        }
        _ => {}
    }
}

/// `pause-in-window`: the main world is ready to start its blocking work.
static ARMED: AtomicBool = AtomicBool::new(false);
/// `pause-in-window`: the render thread is between its frame's "submitting" stamp and the frame's
/// completion marker, and waits there for the blocking work to start.
static IN_WINDOW: AtomicBool = AtomicBool::new(false);
/// `pause-in-window`: the game's blocking work has started on the compute task pool.
static BLOCKING: AtomicBool = AtomicBool::new(false);

/// `pause-in-window`, main world (exclusive, on the main thread), from frame 30: the game's blocking
/// work (a synchronous load), started on Bevy's compute task pool, where every system of both worlds
/// runs (one thread on a 2-core machine), as the `pause` mode's sleeping system is; but started while
/// the render thread is in the window of [`open_window`], which the `pause` mode hits only by chance.
/// A frame whose render thread never comes by (it waits for this frame's extraction) tries again.
fn block_in_window(world: &mut World, mut frame: Local<u32>) {
    *frame += 1;
    // Acquire/Release on these flags: each side only waits for the other's store.
    if world.resource::<Mode>().0 != "pause-in-window"
        || *frame < 30
        || BLOCKING.load(Ordering::Acquire)
    {
        return;
    }
    ARMED.store(true, Ordering::Release);
    let deadline = Instant::now() + Duration::from_millis(500);
    while !IN_WINDOW.load(Ordering::Acquire) {
        if Instant::now() > deadline {
            return;
        }
        std::thread::yield_now();
    }
    let pause = hang_timeout() * 3;
    bevy::tasks::ComputeTaskPool::get()
        .spawn(async move {
            BLOCKING.store(true, Ordering::Release);
            eprintln!("truth child: paused (the task pool, in the render thread's window)");
            std::thread::sleep(pause);
        })
        .detach();
}

/// `pause-in-window`, render graph: ordered in `Submit`, so after the frame's "submitting" stamp and
/// before its completion marker, and exclusive, so it runs on the render thread itself. Once the main
/// world is armed, waits there (up to a second) until the blocking work holds the pool.
fn open_window(world: &mut World) {
    if world.resource::<Mode>().0 != "pause-in-window"
        || !ARMED.load(Ordering::Acquire)
        || BLOCKING.load(Ordering::Acquire)
    {
        return;
    }
    IN_WINDOW.store(true, Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs(1);
    while !BLOCKING.load(Ordering::Acquire) && Instant::now() < deadline {
        std::thread::yield_now();
    }
    IN_WINDOW.store(false, Ordering::Release);
}

/// The child's `hang_timeout`: [`HANG_TIMEOUT`], or `TRUTH_HANG_TIMEOUT_MS` (to run the `pause`
/// mode by hand as a game would, e.g. with the default 5 s).
fn hang_timeout() -> Duration {
    std::env::var("TRUTH_HANG_TIMEOUT_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(HANG_TIMEOUT, Duration::from_millis)
}

/// Render world: in `stall-then-hang` mode, at frame 150 (long after the layer's stall at submission
/// 30 ended), records a real GPU hang: a wait on an event nobody sets. `cleanup-block-then-hang`
/// first blocks the render thread here (Cleanup, after the frame's submit) for three timeouts at
/// frame 40; `stop-then-hang` asks the parent to stop the process at frame 40.
fn hang_gpu_when_asked(
    mode: Res<Mode>,
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
    breadcrumbs: GpuBreadcrumbs,
    mut frame: Local<u32>,
) {
    *frame += 1;
    match (mode.0.as_str(), *frame) {
        ("cleanup-block-then-hang", 40) => {
            eprintln!("truth child: render thread blocked");
            std::thread::sleep(HANG_TIMEOUT * 3);
            return;
        }
        ("stop-then-hang", 40) => {
            eprintln!("truth child: stop me");
            return;
        }
        ("stall-then-hang" | "cleanup-block-then-hang" | "stop-then-hang", 150) => {}
        _ => return,
    }
    // SAFETY: raw handles of wgpu's live Vulkan device; the event is never destroyed (the process
    // ends with the hang report).
    let raw = unsafe { device.wgpu_device().as_hal::<wgpu::hal::api::Vulkan>() }
        .expect("Vulkan")
        .raw_device()
        .clone();
    // SAFETY: valid device; default create info.
    let event = unsafe { raw.create_event(&vk::EventCreateInfo::default(), None) }.unwrap();
    let mut encoder = device.create_command_encoder(&default());
    // SAFETY: an encoder used only through the raw API; a wait on a host event outside any pass.
    unsafe {
        encoder.as_hal_mut::<wgpu::hal::api::Vulkan, _, _>(|hal| {
            let command_buffer = hal.expect("Vulkan encoder").raw_handle();
            raw.cmd_wait_events(
                command_buffer,
                &[event],
                vk::PipelineStageFlags::HOST,
                vk::PipelineStageFlags::ALL_COMMANDS,
                &[],
                &[],
                &[],
            );
        })
    };
    // The game's own breadcrumb around its Cleanup-time work, submitted after the frame's completion
    // marker: the next frame's marker covers it, and its breadcrumb goes with that frame.
    let begin = breadcrumbs.begin_command_buffer(&device, CLEANUP_WORK);
    let end = breadcrumbs.end_command_buffer(&device, CLEANUP_WORK);
    queue.submit(begin.into_iter().chain([encoder.finish()]).chain(end));
    eprintln!("truth child: GPU hang recorded");
}
