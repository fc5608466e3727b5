//! The game survives its GPU crash: with an app whose `RenderErrorHandler` returns
//! `Recover(default())`, Bevy rebuilds its renderer after each device loss, and every loss gets its
//! own report for its own device (generation 1, 2, 3...). A crash loop does not flood the project,
//! and the app's own policy is never changed by the plugin.
//!
//! On lavapipe under the crash drill layer, which re-arms its use-after-free on every new device.
//! Each case runs this test binary again as a child (`child` below, an ignored test that only the
//! parent starts) because the Vulkan loader reads its environment once per process.

mod common;
mod deliver_support;

use std::path::PathBuf;
use std::process::Output;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::error_handler::{ErrorType, RenderError, RenderErrorHandler, RenderErrorPolicy};
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy::render::settings::RenderCreation;
use bevy_gpu_crash_reporter::report::{CrashKind, CrashReport, FaultVerdict};
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{CrashLoopLimit, GpuCrashReporterPlugin};

const SCRATCH: &str = "recovery_scratch";
/// A buffer that lives from a device's 30th frame on (with `RECOVERY_CHURN`): the drill's
/// `in-bounds` target.
const TARGET: &str = "recovery_terrain";

struct Run {
    dir: PathBuf,
    output: Output,
    reports: Vec<CrashReport>,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

/// Runs the child with `policy` until it has seen `losses` device losses (or its time is up).
fn run(name: &str, policy: &str, losses: u32, env: &[(&str, &str)]) -> Run {
    run_drill(
        name,
        &format!("use-after-free:{SCRATCH}"),
        policy,
        losses,
        env,
    )
}

/// [`run`] with the drill's `scenario`.
fn run_drill(name: &str, scenario: &str, policy: &str, losses: u32, env: &[(&str, &str)]) -> Run {
    let dir = common::scratch_dir(&format!("recovery-{name}"));
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, Some(scenario));
    command
        .env("RECOVERY_POLICY", policy)
        .env("RECOVERY_LOSSES", losses.to_string());
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().expect("spawn child");
    let mut reports: Vec<CrashReport> = common::read_reports(&reports_dir);
    reports.sort_by_key(|r| r.crashes_this_run);
    Run {
        dir,
        output,
        reports,
    }
}

#[test]
fn three_losses_give_three_reports_one_per_device_generation() {
    let run = run("three", "recover", 3, &[]);
    let stderr = run.stderr();
    assert_eq!(run.output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("recovery child: loss 3"), "{stderr}");
    assert_eq!(run.reports.len(), 3, "{stderr}");
    for (i, report) in run.reports.iter().enumerate() {
        let generation = i as u32 + 1;
        assert_eq!(report.device_generation, generation, "{}", report.summary);
        assert_eq!(report.crashes_this_run, generation);
        assert_eq!(report.kind, CrashKind::DeviceLost);
        let fault = &report.faults[0];
        assert_eq!(
            fault.verdict,
            FaultVerdict::UseAfterFree,
            "{}",
            fault.summary
        );
        let culprit = fault.culprit.as_ref().unwrap();
        assert_eq!(culprit.name.as_deref(), Some(SCRATCH), "{}", fault.summary);
        assert_eq!(
            report.ms_since_previous_crash.is_some(),
            generation > 1,
            "generation {generation}"
        );
    }
    // The index of a new device starts empty: the old device's ranges are not "live" on it. With
    // carried-over state each report would count every earlier device's binds as well.
    let binds: Vec<u64> = run.reports.iter().map(|r| r.index_stats.binds).collect();
    eprintln!("binds per device: {binds:?}");
    assert!(
        binds.iter().all(|&b| b > 0 && b < binds[0] * 3 / 2),
        "each report counts its own device's binds only: {binds:?}"
    );
}

/// 20 losses within seconds, at most 3 uploads: two at once, the last held back and sent at exit,
/// counting the 17 losses it stands for. Checked in a real Bugsink.
#[test]
fn a_crash_loop_uploads_at_most_the_limit_and_the_last_counts_the_rest() {
    let server = deliver_support::bugsink("recovery");
    let run = run(
        "loop",
        "recover",
        20,
        &[
            ("SENTRY_DSN", server.dsn.as_str()),
            ("RECOVERY_MAX_UPLOADS", "3"),
        ],
    );
    let stderr = run.stderr();
    assert_eq!(run.output.status.code(), Some(0), "{stderr}");
    assert_eq!(
        run.reports.len(),
        20,
        "every loss is written to disk: {stderr}"
    );
    let uploaded: Vec<&CrashReport> = run
        .reports
        .iter()
        .filter(|r| server.event(&r.id).is_some())
        .collect();
    let generations: Vec<u32> = uploaded.iter().map(|r| r.device_generation).collect();
    assert_eq!(generations, vec![1, 2, 20], "uploaded: {stderr}");
    let last = uploaded[2];
    assert_eq!(last.suppressed_duplicates, 17);
    let stored = server.event(&last.id).unwrap();
    assert_eq!(stored["data"]["extra"]["suppressed_duplicates"], 17);
    assert_eq!(stored["data"]["tags"]["gpu.crashes_this_run"], "20");
    assert_eq!(stored["data"]["tags"]["gpu.device_generation"], "20");
    let outbox = run.dir.join("reports").join("outbox");
    let left = std::fs::read_dir(&outbox)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().is_file())
                .count()
        })
        .unwrap_or(0);
    assert_eq!(
        left, 0,
        "held-back reports are sent or replaced, none left behind"
    );
}

/// A game that survives its losses never waits for the network: with a server that answers after
/// 10 s, the reporting on the main thread (fault query, allocator report, build, write, enqueue) and
/// the longest main-thread frame around each loss are measured and printed; both stay far below
/// the server's delay, which a blocking upload would add to them.
#[test]
fn a_loss_the_game_survives_does_not_wait_for_a_slow_server() {
    use deliver_support::{Action, ScriptedServer};
    let slow = ScriptedServer::start(
        0,
        vec![],
        Action::Delayed(
            Duration::from_secs(10),
            Box::new(Action::Respond(200, vec![], "{}".into())),
        ),
    );
    let dsn = format!("http://public@127.0.0.1:{}/1", slow.port);
    let run = run("slow-server", "recover", 3, &[("SENTRY_DSN", dsn.as_str())]);
    let stderr = run.stderr();
    assert_eq!(run.output.status.code(), Some(0), "{stderr}");
    assert_eq!(run.reports.len(), 3, "{stderr}");
    let handled: Vec<u64> = numbers_after(&stderr, "device loss handed to its report thread in ")
        .into_iter()
        .map(|us| us / 1000)
        .collect();
    let frames: Vec<u64> = numbers_after(&stderr, "longest main-thread frame around the loss: ");
    eprintln!("main thread per loss: reporting {handled:?} ms, longest frame {frames:?} ms");
    assert_eq!(handled.len(), 3, "{stderr}");
    // The last loss ends the run before its frames are counted.
    assert_eq!(frames.len(), 2, "{stderr}");
    assert!(
        handled.iter().chain(&frames).all(|&ms| ms < 5_000),
        "the main thread waited for the 10 s server: reporting {handled:?} ms, frames {frames:?} ms"
    );
    assert!(
        !slow.seen().is_empty(),
        "the uploads were attempted in the background: {stderr}"
    );
}

/// A driver that takes 1.5 s to answer the fault query after a loss (the drill's
/// `GPU_CRASH_DRILL_FAULT_QUERY_DELAY_MS=1500:lost`; the reporter gives a query 2 s): a game that
/// recovers does not wait for it. The
/// main thread only hands the loss to a report thread; Bevy builds the new device at once, and the
/// report still names the culprit on the lost device (the index stays on that device until its
/// report has read it). The longest main-thread frame around each loss is printed; a main thread
/// that made the query itself would take at least the 1.5 s.
#[test]
fn a_loss_on_a_driver_whose_fault_query_takes_1_5_s_does_not_stall_the_main_thread() {
    let run = run(
        "slow-fault-query",
        "recover",
        3,
        &[("GPU_CRASH_DRILL_FAULT_QUERY_DELAY_MS", "1500:lost")],
    );
    let stderr = run.stderr();
    assert_eq!(run.output.status.code(), Some(0), "{stderr}");
    assert_eq!(run.reports.len(), 3, "{stderr}");
    for report in &run.reports {
        let fault = &report.faults[0];
        assert_eq!(
            fault.culprit.as_ref().and_then(|c| c.name.as_deref()),
            Some(SCRATCH),
            "device {}: {}",
            report.device_generation,
            fault.summary
        );
        assert_eq!(
            fault.verdict,
            FaultVerdict::UseAfterFree,
            "{}",
            fault.summary
        );
    }
    let frames: Vec<u64> = numbers_after(&stderr, "longest main-thread frame around the loss: ");
    eprintln!("longest main-thread frame around each loss: {frames:?} ms (fault query: 1500 ms)");
    assert_eq!(frames.len(), 2, "{stderr}");
    assert!(
        frames.iter().all(|&ms| ms < 1_500),
        "the main thread waited for the driver's 1.5 s fault query: {frames:?} ms"
    );
}

/// The unbind hold belongs to its device. Device 1 is lost without a stall before it (the loss
/// handler holds the index's unbinds while it reports); the game recovers and device 2 streams
/// buffers (512 created and dropped a frame: 15,000 before the faulting buffer is made, far more
/// than its 1,024 freed ranges and 8,192 live ranges), then faults inside a live buffer. A hold left over from device 1 would have kept every
/// unbind of device 2 in a live slot once its freed ring was full, until no bind could be indexed
/// and the fault could not be named.
#[test]
fn a_recovered_device_starts_without_the_lost_devices_unbind_hold() {
    let run = run_drill(
        "hold-per-device",
        &format!("in-bounds:{TARGET}"),
        "recover",
        2,
        &[
            ("GPU_CRASH_DRILL_AFTER", "200"),
            ("RECOVERY_CHURN", "512"),
            ("RECOVERY_MAX_LIVE", "8192"),
            ("RECOVERY_MAX_FREED", "1024"),
        ],
    );
    let stderr = run.stderr();
    assert_eq!(run.reports.len(), 2, "{stderr}");
    let second = &run.reports[1];
    assert_eq!(second.device_generation, 2);
    eprintln!("device 2's index at the fault: {:?}", second.index_stats);
    assert_eq!(
        second.index_stats.live_overflow, 0,
        "every bind of device 2 was indexed: {:?}",
        second.index_stats
    );
    let fault = &second.faults[0];
    assert_eq!(
        fault.verdict,
        FaultVerdict::InsideLiveObject,
        "{}",
        fault.summary
    );
    assert_eq!(
        fault.culprit.as_ref().and_then(|c| c.name.as_deref()),
        Some(TARGET),
        "{}",
        fault.summary
    );
}

/// The player's disk refuses the report (here: its directory lies under a regular file, so every
/// write fails as on a read-only or full disk): the event still reaches Sentry, sent from memory,
/// its notes say the disk copy is missing, and so does the log.
#[test]
fn a_report_that_cannot_be_written_still_reaches_bugsink() {
    let server = deliver_support::bugsink("recovery");
    let blocker = common::scratch_dir("recovery-unwritable-blocker").join("not-a-directory");
    std::fs::write(&blocker, b"a file where the report directory should be").unwrap();
    let unwritable = blocker.join("reports");
    let run = run(
        "unwritable",
        "default",
        1,
        &[
            ("SENTRY_DSN", server.dsn.as_str()),
            ("GPU_CRASH_REPORT_DIR", unwritable.to_str().unwrap()),
        ],
    );
    let stderr = run.stderr();
    assert!(run.reports.is_empty(), "{stderr}");
    assert!(
        stderr.contains("GPU crash report could NOT be written to"),
        "the log says why the disk copy is missing: {stderr}"
    );
    let marker = "uploaded to Sentry from memory (event ";
    let id = stderr
        .lines()
        .find_map(|l| {
            Some(
                l[l.find(marker)? + marker.len()..]
                    .split(')')
                    .next()?
                    .to_owned(),
            )
        })
        .unwrap_or_else(|| panic!("sent from memory: {stderr}"));
    let event = server
        .event(&id)
        .unwrap_or_else(|| panic!("event {id} in Bugsink: {stderr}"));
    let notes = event["data"]["extra"]["notes"].to_string();
    assert!(
        notes.contains("not saved on the player's machine"),
        "{notes}"
    );
    assert_eq!(event["data"]["tags"]["gpu.verdict"], "use_after_free");
}

/// The integers that follow `marker` on the lines that hold it.
fn numbers_after(log: &str, marker: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|line| {
            let rest = &line[line.find(marker)? + marker.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

#[test]
fn stop_rendering_keeps_the_app_running_with_one_report() {
    let run = run("stop", "stop", 1, &[]);
    let stderr = run.stderr();
    assert_eq!(run.output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("recovery child: still running 120 frames after the loss"),
        "{stderr}"
    );
    assert_eq!(run.reports.len(), 1, "{stderr}");
    assert_eq!(run.reports[0].device_generation, 1);
}

#[test]
fn the_default_policy_still_exits_with_one_report() {
    let run = run("default", "default", 1, &[]);
    let stderr = run.stderr();
    assert_ne!(
        run.output.status.code(),
        Some(0),
        "Bevy's default quits: {stderr}"
    );
    assert!(!stderr.contains("recovery child: timed out"), "{stderr}");
    assert_eq!(run.reports.len(), 1, "{stderr}");
}

// ------------------------------------------------------------------------------------ the child

static LOSSES: AtomicU32 = AtomicU32::new(0);

fn target_losses() -> u32 {
    std::env::var("RECOVERY_LOSSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// The app's own policy, as a game would write it.
fn app_handler(error: &RenderError, main: &mut World, _render: &mut World) -> RenderErrorPolicy {
    let policy = std::env::var("RECOVERY_POLICY").unwrap_or_default();
    if error.ty == ErrorType::DeviceLost {
        let n = LOSSES.fetch_add(1, Ordering::SeqCst) + 1;
        eprintln!("recovery child: loss {n}");
        if policy == "recover" && n >= target_losses() {
            main.write_message(AppExit::Success);
        }
    }
    match policy.as_str() {
        "stop" => RenderErrorPolicy::StopRendering,
        _ => RenderErrorPolicy::Recover(RenderCreation::default()),
    }
}

/// The app each case runs: the plugin, a labelled scratch buffer per frame, and the app's policy.
#[test]
#[ignore = "child process entry point: the tests above start it with RECOVERY_POLICY set"]
fn child() {
    common::use_runtime_dir();
    let max_uploads = std::env::var("RECOVERY_MAX_UPLOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CrashLoopLimit::default().max_uploads);
    let setting = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let defaults = GpuCrashReporterPlugin::default().settings;
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin {
        settings: ReporterSettings {
            application_name: Some("recovery".into()),
            crash_loop_limit: CrashLoopLimit {
                max_uploads,
                ..default()
            },
            max_live_bindings: setting("RECOVERY_MAX_LIVE").unwrap_or(defaults.max_live_bindings),
            max_freed_bindings: setting("RECOVERY_MAX_FREED")
                .unwrap_or(defaults.max_freed_bindings),
            ..default()
        },
        ..default()
    })
    .add_plugins(common::headless_default_plugins())
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .add_systems(Update, (per_frame_buffers, watch_the_run))
    .add_systems(Last, longest_frame_around_each_loss);
    if std::env::var("RECOVERY_POLICY").as_deref() != Ok("default") {
        app.insert_resource(RenderErrorHandler(app_handler));
    }
    let exit = app.run();
    common::exit_process(exit);
}

/// A scratch buffer as games make for transient data: from the 20th frame on a device (after its
/// start-up allocations settled), created on even frames and dropped on odd ones, so its range is
/// free when the drill's use-after-free fires and nothing else is mistaken for the culprit.
///
/// With `RECOVERY_CHURN=n`, also `n` small buffers created and dropped every frame (a streaming
/// game), and from the 30th frame on a device a long-lived `recovery_terrain` buffer.
fn per_frame_buffers(
    device: Res<RenderDevice>,
    mut frames_on_device: Local<u32>,
    mut last: Local<Vec<Buffer>>,
    mut terrain: Local<Option<Buffer>>,
) {
    if device.is_changed() {
        *frames_on_device = 0;
        last.clear(); // buffers of a lost device
        *terrain = None;
    }
    *frames_on_device += 1;
    for buffer in last.drain(..) {
        buffer.destroy();
    }
    let churn: usize = std::env::var("RECOVERY_CHURN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for _ in 0..churn {
        last.push(device.create_buffer(&BufferDescriptor {
            label: Some("recovery_stream_chunk"),
            size: 256,
            usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
    if churn > 0 && *frames_on_device == 30 {
        *terrain = Some(device.create_buffer(&BufferDescriptor {
            label: Some(TARGET),
            size: 256 * 1024,
            usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
    if *frames_on_device < 20 || *frames_on_device % 2 == 1 {
        return;
    }
    last.push(device.create_buffer(&BufferDescriptor {
        label: Some(SCRATCH),
        size: 96 * 1024,
        usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
        mapped_at_creation: false,
    }));
}

/// Ends a `stop` run 120 frames after the loss (the app kept running) and any run after 90 s.
fn watch_the_run(
    mut started: Local<Option<Instant>>,
    mut after_loss: Local<u32>,
    mut exit: MessageWriter<AppExit>,
) {
    let started = *started.get_or_insert_with(Instant::now);
    if started.elapsed() > Duration::from_secs(90) {
        eprintln!("recovery child: timed out");
        exit.write(AppExit::error());
        return;
    }
    if std::env::var("RECOVERY_POLICY").as_deref() == Ok("stop")
        && LOSSES.load(Ordering::SeqCst) > 0
    {
        *after_loss += 1;
        if *after_loss == 120 {
            eprintln!("recovery child: still running 120 frames after the loss");
            exit.write(AppExit::Success);
        }
    }
}

/// The main thread's longest frame from the one that saw a loss to three frames after it (Bevy's
/// own renderer rebuild included), printed once per loss.
fn longest_frame_around_each_loss(
    mut last: Local<Option<Instant>>,
    mut seen_losses: Local<u32>,
    mut window: Local<(u32, Duration)>,
) {
    let now = Instant::now();
    let frame = last.map_or(Duration::ZERO, |t| now - t);
    *last = Some(now);
    let losses = LOSSES.load(Ordering::SeqCst);
    if losses != *seen_losses {
        *seen_losses = losses;
        *window = (4, Duration::ZERO);
    }
    if window.0 > 0 {
        window.1 = window.1.max(frame);
        window.0 -= 1;
        if window.0 == 0 {
            eprintln!(
                "recovery child: longest main-thread frame around the loss: {} ms",
                window.1.as_millis()
            );
        }
    }
}
