//! Release health (Sentry sessions) through the real plugin on lavapipe, the crash drill layer and a
//! counting Sentry endpoint (`scripts/counting-sentry.py`), whose received envelopes are parsed with
//! sentry-types as session updates:
//! - a clean run ends its session `exited`;
//! - a drilled device loss ends it `crashed`, in the crash's own envelope;
//! - a run killed with SIGKILL mid-game is ended `abnormal` by the next launch;
//! - a run that could not reach the server has its session sent by the next launch;
//! - without consent, nothing is sent (the update waits in the outbox).
//!
//! Each case runs this test binary again as a child (`child` below) because the Vulkan loader reads
//! its environment once per process.

mod common;
#[path = "deliver_support/mod.rs"]
mod deliver_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{DeliverySettings, Dsn, GpuCrashReporterPlugin, UploadConsent};
use sentry::protocol::{EnvelopeItem, SessionStatus, SessionUpdate};
use sentry::Envelope;

/// The per-frame buffer the drill frees and then writes into.
const SCRATCH: &str = "release_health_scratch";
/// The release the child's crash events and sessions name.
const RELEASE: &str = "release_health@1.2.3";

// ------------------------------------------------------------------------ the counting endpoint

/// `scripts/counting-sentry.py` on a port of its own, keeping every envelope it receives.
struct CountingSentry {
    process: Child,
    dir: PathBuf,
    dsn: String,
}

impl CountingSentry {
    fn start(dir: &Path) -> Self {
        let port = deliver_support::free_port();
        let dir = dir.join("sentry");
        let process = std::process::Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/counting-sentry.py"))
            .args(["serve", &port.to_string()])
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 scripts/counting-sentry.py");
        let until = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < until,
                "the counting endpoint did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            process,
            dir,
            dsn: format!("http://public@127.0.0.1:{port}/1"),
        }
    }

    /// Every envelope received so far, oldest first, parsed with sentry-types.
    fn envelopes(&self) -> Vec<Envelope> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(self.dir.join("envelopes"))
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        paths.retain(|p| p.extension().is_some_and(|e| e == "envelope"));
        paths.sort();
        paths
            .iter()
            .map(|p| {
                Envelope::from_slice(&std::fs::read(p).unwrap())
                    .unwrap_or_else(|e| panic!("{} is no envelope: {e}", p.display()))
            })
            .collect()
    }
}

impl Drop for CountingSentry {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The session updates of `envelope`.
fn sessions_in(envelope: &Envelope) -> Vec<SessionUpdate<'static>> {
    envelope
        .items()
        .filter_map(|item| match item {
            EnvelopeItem::SessionUpdate(update) => Some(update.clone()),
            _ => None,
        })
        .collect()
}

/// Every session update received, oldest first.
fn all_sessions(server: &CountingSentry) -> Vec<SessionUpdate<'static>> {
    server.envelopes().iter().flat_map(sessions_in).collect()
}

/// `(sid, status)` of each update, for messages.
fn brief(updates: &[SessionUpdate<'_>]) -> Vec<(String, SessionStatus)> {
    updates
        .iter()
        .map(|u| (u.session_id.simple().to_string(), u.status))
        .collect()
}

/// The session ids of the `*.session` files (running or left) in `outbox`.
fn session_files(outbox: &Path) -> Vec<String> {
    files_with(outbox, ".session")
}

/// The session envelopes waiting in `outbox`.
fn session_envelopes(outbox: &Path) -> Vec<String> {
    files_with(outbox, ".envelope")
        .into_iter()
        .filter(|n| n.contains("-session-"))
        .collect()
}

fn files_with(dir: &Path, suffix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(suffix))
                .collect()
        })
        .unwrap_or_default()
}

// --------------------------------------------------------------------------------- the runs

fn child_run(reports_dir: &Path, mode: &str, dsn: &str, drill: bool) -> std::process::Command {
    let scenario = format!("use-after-free:{SCRATCH}");
    let mut command = common::child_command(reports_dir, drill.then_some(scenario.as_str()));
    command
        .env("RELEASE_HEALTH_MODE", mode)
        .env("RELEASE_HEALTH_DSN", dsn)
        .env_remove("SENTRY_RELEASE")
        .env_remove("SENTRY_ENVIRONMENT");
    command
}

fn run(reports_dir: &Path, mode: &str, dsn: &str, drill: bool) -> Output {
    child_run(reports_dir, mode, dsn, drill)
        .output()
        .expect("spawn child")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A DSN nothing answers at.
fn offline_dsn() -> String {
    format!("http://public@127.0.0.1:{}/1", deliver_support::free_port())
}

// ----------------------------------------------------------------------------------- the tests

/// A game that quits on its own ends its session `exited`, sent at its exit: one update, with the
/// release the crash events name, a duration, and nothing left on disk.
#[test]
fn a_clean_run_ends_its_session_exited() {
    let dir = common::scratch_dir("release-health-clean");
    let reports_dir = dir.join("reports");
    let server = CountingSentry::start(&dir);
    let output = run(&reports_dir, "calm", &server.dsn, false);
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{log}");
    let updates = all_sessions(&server);
    assert_eq!(updates.len(), 1, "{:?}\n{log}", brief(&updates));
    let update = &updates[0];
    assert_eq!(update.status, SessionStatus::Exited, "{log}");
    assert!(update.init, "the first (and only) update of the session");
    assert_eq!(update.attributes.release, RELEASE);
    assert_eq!(update.attributes.environment.as_deref(), Some("production"));
    assert!(update.duration.is_some_and(|d| d > 0.0), "{update:?}");
    assert_eq!(update.errors, 0);
    let outbox = reports_dir.join("outbox");
    assert!(session_files(&outbox).is_empty(), "the session file went");
    assert!(session_envelopes(&outbox).is_empty(), "and its envelope");
}

/// A drilled use-after-free loses the device: the crash's envelope carries the session's `crashed`
/// update (Sentry counts the session crashed as it takes the event), and no other update of that
/// session is sent (no `exited` from the exit that follows).
#[test]
fn a_drilled_loss_ends_the_session_crashed_in_the_crash_envelope() {
    let dir = common::scratch_dir("release-health-crash");
    let reports_dir = dir.join("reports");
    let server = CountingSentry::start(&dir);
    let output = run(&reports_dir, "game", &server.dsn, true);
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "the drilled loss: {log}");
    let envelopes = server.envelopes();
    let crash = envelopes
        .iter()
        .find(|e| e.event().is_some())
        .unwrap_or_else(|| panic!("the crash event was sent: {log}"));
    let reports = common::read_reports(&reports_dir);
    assert_eq!(reports.len(), 1, "{log}");
    assert_eq!(
        crash.event().unwrap().event_id.simple().to_string(),
        reports[0].event_id()
    );
    let in_crash = sessions_in(crash);
    assert_eq!(
        in_crash.len(),
        1,
        "one session update in the crash's envelope: {log}"
    );
    let update = &in_crash[0];
    assert_eq!(update.status, SessionStatus::Crashed);
    assert!(update.errors >= 1 && update.init, "{update:?}");
    assert_eq!(update.attributes.release, RELEASE);
    assert_eq!(
        crash.event().unwrap().release.as_deref(),
        Some(RELEASE),
        "the event and the session name one release"
    );
    let updates = all_sessions(&server);
    assert_eq!(updates.len(), 1, "no other update: {:?}", brief(&updates));
    assert!(session_files(&reports_dir.join("outbox")).is_empty());
}

/// A game killed with SIGKILL mid-game cannot say so: its session file stays, and the next launch
/// sends that session `abnormal` (then its own, `exited`, at its exit).
#[test]
fn a_run_killed_mid_game_is_abnormal_at_the_next_launch() {
    let dir = common::scratch_dir("release-health-kill");
    let reports_dir = dir.join("reports");
    let outbox = reports_dir.join("outbox");
    let server = CountingSentry::start(&dir);
    let marker = reports_dir.join("mid-game");
    let mut game = child_run(&reports_dir, "forever", &server.dsn, false)
        .env("RELEASE_HEALTH_MARKER", &marker)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let until = Instant::now() + Duration::from_secs(300);
    while !marker.exists() {
        assert!(Instant::now() < until, "the game never reached frame 30");
        assert!(game.try_wait().unwrap().is_none(), "the game ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    let killed = session_files(&outbox);
    assert_eq!(killed.len(), 1, "the running session's file: {killed:?}");
    let killed_sid = killed[0].trim_end_matches(".session").to_owned();
    // `Child::kill` is SIGKILL on Unix: no exit handler, no at_exit.
    game.kill().unwrap();
    game.wait().unwrap();
    assert!(
        all_sessions(&server).is_empty(),
        "a killed run sends nothing itself"
    );

    let next = run(&reports_dir, "calm", &server.dsn, false);
    let log = stderr(&next);
    assert_eq!(next.status.code(), Some(0), "{log}");
    let updates = all_sessions(&server);
    let abnormal: Vec<_> = updates
        .iter()
        .filter(|u| u.session_id.simple().to_string() == killed_sid)
        .collect();
    assert_eq!(abnormal.len(), 1, "{:?}\n{log}", brief(&updates));
    assert_eq!(abnormal[0].status, SessionStatus::Abnormal);
    assert_eq!(abnormal[0].attributes.release, RELEASE);
    assert_eq!(
        abnormal[0].duration, None,
        "Sentry keeps durations of exited sessions only"
    );
    assert_eq!(
        updates
            .iter()
            .filter(|u| u.status == SessionStatus::Exited)
            .count(),
        1,
        "the next launch's own session: {:?}",
        brief(&updates)
    );
    assert!(session_files(&outbox).is_empty(), "{log}");
}

/// A run that cannot reach the server keeps its `exited` update in the outbox; the next launch,
/// online, sends it (and its own at its exit).
#[test]
fn an_offline_session_reaches_sentry_at_the_next_launch() {
    let dir = common::scratch_dir("release-health-offline");
    let reports_dir = dir.join("reports");
    let outbox = reports_dir.join("outbox");
    let server = CountingSentry::start(&dir);
    let offline = run(&reports_dir, "calm", &offline_dsn(), false);
    let log = stderr(&offline);
    assert_eq!(offline.status.code(), Some(0), "{log}");
    let waiting = session_envelopes(&outbox);
    assert_eq!(waiting.len(), 1, "the update waits in the outbox: {log}");
    let offline_sid = waiting[0]
        .trim_end_matches(".envelope")
        .rsplit('-')
        .next()
        .unwrap()
        .to_owned();

    let online = run(&reports_dir, "calm", &server.dsn, false);
    let log = stderr(&online);
    assert_eq!(online.status.code(), Some(0), "{log}");
    let updates = all_sessions(&server);
    assert_eq!(updates.len(), 2, "{:?}\n{log}", brief(&updates));
    assert!(updates.iter().all(|u| u.status == SessionStatus::Exited));
    assert!(
        updates
            .iter()
            .any(|u| u.session_id.simple().to_string() == offline_sid),
        "the offline run's session: {:?}",
        brief(&updates)
    );
    assert!(session_envelopes(&outbox).is_empty(), "{log}");
}

/// The player has not agreed to uploads: nothing reaches the server; the session's update waits
/// in the outbox, as a crash report does, for a later launch with consent.
#[test]
fn without_consent_no_session_is_sent() {
    let dir = common::scratch_dir("release-health-consent");
    let reports_dir = dir.join("reports");
    let server = CountingSentry::start(&dir);
    let output = child_run(&reports_dir, "calm", &server.dsn, false)
        .env("RELEASE_HEALTH_CONSENT", "no")
        .output()
        .expect("spawn child");
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{log}");
    assert_eq!(server.envelopes().len(), 0, "nothing sent: {log}");
    assert_eq!(
        session_envelopes(&reports_dir.join("outbox")).len(),
        1,
        "the update waits for consent: {log}"
    );
}

// ------------------------------------------------------------------------------------ the child

/// A headless game with a transient buffer per frame, reporting to `RELEASE_HEALTH_DSN`.
/// `calm`: 60 frames, no fault, then exits; `game`: quits on its drilled loss (Bevy's default);
/// `forever`: runs until killed, touching `RELEASE_HEALTH_MARKER` at frame 30.
#[test]
#[ignore = "child process entry point: the tests above start it"]
fn child() {
    common::use_runtime_dir();
    let mode = std::env::var("RELEASE_HEALTH_MODE").expect("RELEASE_HEALTH_MODE");
    let dsn: Dsn = std::env::var("RELEASE_HEALTH_DSN")
        .expect("RELEASE_HEALTH_DSN")
        .parse()
        .expect("a valid DSN");
    let consent = match std::env::var("RELEASE_HEALTH_CONSENT").as_deref() {
        // Asked at each upload, as a game's settings toggle would be.
        Ok("no") => UploadConsent::Callback(Arc::new(|| false)),
        _ => UploadConsent::Granted,
    };
    let reports_dir = PathBuf::from(std::env::var("GPU_CRASH_REPORT_DIR").unwrap());
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin {
        settings: ReporterSettings {
            application_name: Some("release_health".into()),
            application_version: "1.2.3".into(),
            delivery: DeliverySettings {
                dsn_from_env: false,
                upload_consent: consent,
                upload_timeout: Duration::from_secs(2),
                ..DeliverySettings::new(Some(dsn), reports_dir.join("outbox"))
            },
            ..default()
        },
        ..default()
    })
    .add_plugins(common::headless_default_plugins())
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .insert_resource(Mode(mode))
    .add_systems(Update, (per_frame_buffer, pace));
    let exit = app.run();
    eprintln!("release_health child: app returned");
    common::exit_process(exit);
}

#[derive(Resource)]
struct Mode(String);

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

fn pace(mode: Res<Mode>, mut frames: Local<u32>, mut exit: MessageWriter<AppExit>) {
    *frames += 1;
    match (mode.0.as_str(), *frames) {
        ("forever", 30) => {
            let marker = std::env::var("RELEASE_HEALTH_MARKER").unwrap();
            std::fs::write(marker, b"frame 30").unwrap();
        }
        ("forever", _) => std::thread::sleep(Duration::from_millis(10)),
        ("calm", 30) => {
            // The startup upload runs on its own thread: give it a moment.
            std::thread::sleep(Duration::from_secs(2));
        }
        ("calm", 60) => {
            exit.write(AppExit::Success);
        }
        _ => {}
    }
    if *frames > 100_000 {
        exit.write(AppExit::error());
    }
}
