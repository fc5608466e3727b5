//! A windowed Bevy game with the plugin: a real window through winit on X11, on a virtual X server
//! (`Xvfb`, started by each test), Vulkan on lavapipe through the real loader and Mesa's X11
//! swapchain, and the crash drill layer where a fault is needed. What a shipped game has and the
//! headless tests do not: a swapchain, recreated on each resize, and a window the player minimises
//! or closes.
//!
//! - the drill's use-after-free names the same object with the same verdict as the same game
//!   headless;
//! - 20 resizes (the swapchain and every size-dependent view texture recreated each time) write no
//!   report and leave the address index no bigger than after warm-up;
//! - 30 s minimised, with no frame rendered (the game idles in the background, as
//!   `WinitSettings::desktop_app` games do), with the default `hang_timeout`, is no hang;
//! - the player closes the window while the GPU hangs (with the default `on_hang`, and with
//!   `OnHang::KeepWaiting`): the hang report is on disk and names the stage, and the run's
//!   release-health session ends `crashed`.
//!
//! The test plays the window manager itself, through its own X connection (x11rb): it resizes the
//! window with `ConfigureWindow`, minimises it as a window manager does (unmaps it, sets `WM_STATE`
//! iconic, moves the focus away) and closes it with `WM_DELETE_WINDOW`, the message a window
//! manager sends when the player clicks the close button; a game that does not answer is then
//! killed (SIGKILL), as a window manager's "Force Quit" does. The game learns of each only through
//! the X events winit reads, as it would under a desktop. Xvfb has no window manager: nothing else
//! moves the window.
//!
//! The game runs this test binary again (`child`, ignored, started by the tests) because the Vulkan
//! loader reads its environment once per process; it reads commands on stdin (`stats`, `frames`,
//! `quit`) and says what it did on stderr, in lines starting with `windowed child:`.
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bevy::app::ScheduleRunnerPlugin;
use bevy::core_pipeline::prepass::DepthPrepass;
use bevy::core_pipeline::tonemapping::Tonemapping;
use bevy::prelude::*;
use bevy::render::render_resource::{
    Buffer, BufferDescriptor, BufferUsages, CachedPipelineState, PipelineCache,
};
use bevy::render::renderer::RenderDevice;
use bevy::render::settings::{Backends, RenderCreation, WgpuSettings};
use bevy::render::view::ExtractedWindows;
use bevy::render::{Render, RenderApp, RenderPlugin, RenderSystems};
use bevy::window::{WindowCloseRequested, WindowResized, WindowResolution};
use bevy::winit::{UpdateMode, WinitPlugin, WinitSettings};
use bevy_gpu_crash_reporter::report::{CrashKind, CrashReport, FaultVerdict, ObjectState};
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{
    DeliverySettings, Dsn, GpuCrashReporter, GpuCrashReporterPlugin, OnHang,
};
use sentry::protocol::{EnvelopeItem, SessionStatus};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    AtomEnum, ClientMessageEvent, ConfigureWindowAux, ConnectionExt as _, EventMask, InputFocus,
    MapState, PropMode, Window as XWindow,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

/// The game window's title (how the test finds it on the X server).
const TITLE: &str = "windowed_game";
/// The window's size at start, and after the last resize.
const WIDTH: u32 = 320;
const HEIGHT: u32 = 240;
/// The game's streamed buffer, created each frame and destroyed the next (a level chunk streamed in
/// and out). Larger than wgpu's memory blocks (130 MiB, never written, so never touched), so it gets
/// memory of its own, whose addresses the drill layer never hands out again: a drilled
/// use-after-free of it resolves the same way each run (as `tiny_game`'s `terrain_chunk`).
const CHUNK: &str = "streamed_level_chunk";
const CHUNK_BYTES: u64 = 130 << 20;
/// Bevy's label of the main opaque pass of a 3D camera: where the drilled hang stops the GPU.
const MAIN_PASS: &str = "main_opaque_pass_3d";
/// The release the sessions name (`application_name@application_version`).
const VERSION: &str = "0.5.0";
/// The child's environment: what it does (`MODE_VAR`), headless instead of windowed, and a DSN.
const MODE_VAR: &str = "WINDOWED_GAME_MODE";
const HEADLESS_VAR: &str = "WINDOWED_GAME_HEADLESS";
const DSN_VAR: &str = "WINDOWED_GAME_DSN";
/// `keep-waiting` in the child's environment: `OnHang::KeepWaiting` instead of the default.
const ON_HANG_VAR: &str = "WINDOWED_GAME_ON_HANG";
/// The prefix of the child's own lines on stderr.
const SAYS: &str = "windowed child: ";
/// Longest a child may run before the test gives up on it (start-up on lavapipe compiles the PBR
/// pipelines on 2 shared cores).
const CHILD_DEADLINE: Duration = Duration::from_secs(240);

// ------------------------------------------------------------------------- the virtual X server

/// A virtual X server of one test, on a display number it picked itself; killed on drop.
struct Xvfb {
    process: Child,
    display: String,
}

impl Xvfb {
    fn start(dir: &Path) -> Self {
        let log = std::fs::File::create(dir.join("xvfb.log")).unwrap();
        let mut process = Command::new("Xvfb")
            // `-displayfd 1`: the first free display number, written to stdout once it listens.
            // `-noreset`: the server does not reset when its last client leaves (a game that ended
            // and the test's own connection); during such a reset it refused the next connection.
            .args(["-displayfd", "1", "-screen", "0", "1024x768x24"])
            .args(["-nolisten", "tcp", "-noreset"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start Xvfb ({e}): the windowed game needs a virtual X server; \
                     install it with `apt-get install xvfb` (.ci/run does)"
                )
            });
        let stdout = process.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let number: u32 = line.trim().parse().unwrap_or_else(|_| {
            let _ = process.kill();
            panic!(
                "Xvfb gave no display number ({line:?}); its log: {}",
                std::fs::read_to_string(dir.join("xvfb.log")).unwrap_or_default()
            )
        });
        Self {
            process,
            display: format!(":{number}"),
        }
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

// --------------------------------------------------------------------- the window manager's part

/// The test's own X client, doing what a window manager does to the game's window.
struct Wm {
    conn: RustConnection,
    root: XWindow,
    wm_protocols: u32,
    wm_delete_window: u32,
    wm_state: u32,
    net_wm_state: u32,
    net_wm_state_hidden: u32,
}

impl Wm {
    fn connect(display: &str) -> Self {
        let (conn, screen) = x11rb::connect(Some(display))
            .unwrap_or_else(|e| panic!("cannot connect to the X server {display}: {e}"));
        let root = conn.setup().roots[screen].root;
        let atom = |name: &str| {
            conn.intern_atom(false, name.as_bytes())
                .unwrap()
                .reply()
                .unwrap()
                .atom
        };
        let (wm_protocols, wm_delete_window, wm_state) = (
            atom("WM_PROTOCOLS"),
            atom("WM_DELETE_WINDOW"),
            atom("WM_STATE"),
        );
        let (net_wm_state, net_wm_state_hidden) =
            (atom("_NET_WM_STATE"), atom("_NET_WM_STATE_HIDDEN"));
        Self {
            conn,
            root,
            wm_protocols,
            wm_delete_window,
            wm_state,
            net_wm_state,
            net_wm_state_hidden,
        }
    }

    /// The game's top-level window once it is mapped (no window manager reparents it).
    fn game_window(&self, game: &Game) -> XWindow {
        let until = Instant::now() + CHILD_DEADLINE;
        loop {
            let children = self.conn.query_tree(self.root).unwrap().reply().unwrap();
            for window in children.children {
                let name = self
                    .conn
                    .get_property(false, window, AtomEnum::WM_NAME, AtomEnum::STRING, 0, 64)
                    .unwrap()
                    .reply()
                    .map(|p| p.value)
                    .unwrap_or_default();
                let viewable = self
                    .conn
                    .get_window_attributes(window)
                    .unwrap()
                    .reply()
                    .is_ok_and(|a| a.map_state == MapState::VIEWABLE);
                if name == TITLE.as_bytes() && viewable {
                    return window;
                }
            }
            game.assert_running("while the test looked for its window");
            assert!(Instant::now() < until, "no window: {}", game.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Gives `window` the keyboard focus, as a window manager does to the window it activates.
    fn focus(&self, window: XWindow) {
        self.conn
            .set_input_focus(InputFocus::PARENT, window, x11rb::CURRENT_TIME)
            .unwrap()
            .check()
            .expect("focus the game window");
    }

    /// The player drags the window's border: the X server resizes it, winit reads the
    /// `ConfigureNotify`.
    fn resize(&self, window: XWindow, width: u32, height: u32) {
        self.conn
            .configure_window(
                window,
                &ConfigureWindowAux::new().width(width).height(height),
            )
            .unwrap()
            .check()
            .expect("resize the game window");
    }

    /// Minimises `window` as a window manager does (ICCCM 4.1.4, EWMH): unmaps it, marks it
    /// iconic and hidden, and gives the focus back to the root.
    fn minimise(&self, window: XWindow) {
        const ICONIC: u32 = 3;
        self.conn.unmap_window(window).unwrap().check().unwrap();
        self.conn
            .change_property32(
                PropMode::REPLACE,
                window,
                self.wm_state,
                self.wm_state,
                &[ICONIC, 0],
            )
            .unwrap()
            .check()
            .unwrap();
        self.conn
            .change_property32(
                PropMode::REPLACE,
                window,
                self.net_wm_state,
                AtomEnum::ATOM,
                &[self.net_wm_state_hidden],
            )
            .unwrap()
            .check()
            .unwrap();
        self.conn
            .set_input_focus(InputFocus::POINTER_ROOT, self.root, x11rb::CURRENT_TIME)
            .unwrap()
            .check()
            .unwrap();
    }

    /// Restores a minimised `window`: maps it, marks it normal, focuses it once it is viewable.
    fn restore(&self, window: XWindow) {
        const NORMAL: u32 = 1;
        self.conn.map_window(window).unwrap().check().unwrap();
        self.conn
            .change_property32(
                PropMode::REPLACE,
                window,
                self.wm_state,
                self.wm_state,
                &[NORMAL, 0],
            )
            .unwrap()
            .check()
            .unwrap();
        self.conn
            .change_property32(
                PropMode::REPLACE,
                window,
                self.net_wm_state,
                AtomEnum::ATOM,
                &[],
            )
            .unwrap()
            .check()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while !self
            .conn
            .get_window_attributes(window)
            .unwrap()
            .reply()
            .is_ok_and(|a| a.map_state == MapState::VIEWABLE)
        {
            assert!(Instant::now() < until, "the window was not mapped again");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.focus(window);
    }

    /// The player clicks the window's close button: the window manager sends `WM_DELETE_WINDOW`
    /// (ICCCM 4.2.8.1), which winit turns into `CloseRequested`.
    fn close(&self, window: XWindow) {
        let message = ClientMessageEvent::new(
            32,
            window,
            self.wm_protocols,
            [self.wm_delete_window, x11rb::CURRENT_TIME, 0, 0, 0],
        );
        self.conn
            .send_event(false, window, EventMask::NO_EVENT, message)
            .unwrap()
            .check()
            .expect("send WM_DELETE_WINDOW");
    }
}

// ------------------------------------------------------------------------------ the game process

/// The running game: its stdin for commands, and its stderr lines as they come, with their time.
struct Game {
    process: Child,
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Vec<(SystemTime, String)>>>,
}

impl Game {
    fn spawn(mut command: Command) -> Self {
        command.stdin(Stdio::piped()).stderr(Stdio::piped());
        let mut process = command.spawn().expect("spawn the game");
        let stderr = BufReader::new(process.stderr.take().unwrap());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                sink.lock().unwrap().push((SystemTime::now(), line));
            }
        });
        Self {
            stdin: process.stdin.take(),
            process,
            lines,
        }
    }

    fn log(&self) -> String {
        let lines = self.lines.lock().unwrap();
        let mut log = String::new();
        for (_, line) in lines.iter() {
            log.push_str(line);
            log.push('\n');
        }
        log
    }

    /// How many lines came so far (a position for [`Self::wait_for`]).
    fn seen(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    /// The first line from position `from` on that contains `needle`, with its position and the
    /// time it came; panics with the log when none comes within `timeout` or the game ended.
    fn wait_for(
        &mut self,
        from: usize,
        needle: &str,
        timeout: Duration,
    ) -> (usize, String, SystemTime) {
        let until = Instant::now() + timeout;
        loop {
            {
                let lines = self.lines.lock().unwrap();
                if let Some((i, (at, line))) = lines
                    .iter()
                    .enumerate()
                    .skip(from)
                    .find(|(_, (_, l))| l.contains(needle))
                {
                    return (i, line.clone(), *at);
                }
            }
            if let Some(status) = self.process.try_wait().unwrap() {
                // Lines may still be in the pipe: one more look after the reader caught up.
                std::thread::sleep(Duration::from_millis(200));
                let log = self.log();
                if let Some(line) = log.lines().skip(from).find(|l| l.contains(needle)) {
                    return (from, line.to_owned(), SystemTime::now());
                }
                panic!("the game ended ({status}) before {needle:?}:\n{log}");
            }
            assert!(
                Instant::now() < until,
                "no {needle:?} within {timeout:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn assert_running(&self, when: &str) {
        // `try_wait` needs `&mut`; a shared look through the pid is enough here.
        // SAFETY: `kill` with signal 0 only checks that the process exists.
        let alive = unsafe { libc::kill(self.process.id() as libc::pid_t, 0) } == 0;
        assert!(alive, "the game ended {when}:\n{}", self.log());
    }

    /// Sends one command line to the game.
    fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("the game's stdin");
        writeln!(stdin, "{command}").expect("write to the game");
        stdin.flush().unwrap();
    }

    /// Sends `stats` and returns the index line it answers.
    fn index_stats(&mut self) -> IndexLine {
        let from = self.seen();
        self.send("stats");
        let (_, line, _) = self.wait_for(from, "index live=", Duration::from_secs(60));
        IndexLine::parse(&line)
    }

    /// Waits for the game to end by itself within `timeout`; `None` if it did not.
    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = self.process.try_wait().unwrap() {
                // Let the reader take the last lines.
                std::thread::sleep(Duration::from_millis(200));
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL, as a window manager's "Force Quit" (or a launcher) ends a game that does not answer.
    fn force_quit(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Game {
    fn drop(&mut self) {
        if self.process.try_wait().ok().flatten().is_none() {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

/// The game's answer to `stats`: the address index's live and freed ranges and its counters.
#[derive(Clone, Copy, Debug)]
struct IndexLine {
    live: usize,
    freed: usize,
    binds: u64,
    unbinds: u64,
    overflow: u64,
    dropped: u64,
    rendered: u64,
}

impl IndexLine {
    fn parse(line: &str) -> Self {
        let fields: BTreeMap<&str, u64> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect();
        let get = |k: &str| {
            *fields
                .get(k)
                .unwrap_or_else(|| panic!("no {k} in {line:?}"))
        };
        Self {
            live: get("live") as usize,
            freed: get("freed") as usize,
            binds: get("binds"),
            unbinds: get("unbinds"),
            overflow: get("overflow"),
            dropped: get("dropped"),
            rendered: get("rendered"),
        }
    }
}

/// The game in `mode`, windowed on `xvfb` (or headless without one), reporting into
/// `reports_dir`, under the drill layer with `drill` (`Some("")`: the layer loaded, no fault).
fn game_command(
    reports_dir: &Path,
    mode: &str,
    xvfb: Option<&Xvfb>,
    drill: Option<&str>,
) -> Command {
    let mut command = common::child_command(reports_dir, drill.filter(|s| !s.is_empty()));
    if drill == Some("") {
        // The layer provides the binding reports lavapipe lacks, so the index has ranges to count.
        command
            .env("VK_LAYER_PATH", common::drill_layer_dir())
            .env("VK_INSTANCE_LAYERS", "VK_LAYER_gpu_crash_drill");
    }
    command
        .env(MODE_VAR, mode)
        .env_remove(DSN_VAR)
        .env_remove(ON_HANG_VAR)
        .env_remove("WAYLAND_DISPLAY");
    match xvfb {
        Some(xvfb) => {
            command
                .env("DISPLAY", &xvfb.display)
                .env_remove(HEADLESS_VAR)
                // One pixel per pixel whatever Xvfb says of its screen's size.
                .env("WINIT_X11_SCALE_FACTOR", "1");
        }
        None => {
            command.env(HEADLESS_VAR, "1").env_remove("DISPLAY");
        }
    }
    command
}

/// The one report in `dir`; panics with `log` unless there is exactly one.
fn only_report(dir: &Path, log: &str) -> CrashReport {
    let mut reports = common::read_reports(dir);
    assert_eq!(
        reports.len(),
        1,
        "one report, not {}: {:#?}\n{log}",
        reports.len(),
        reports
            .iter()
            .map(|r| (r.timestamp_ms, r.application.process_id, &r.summary))
            .collect::<Vec<_>>()
    );
    reports.remove(0)
}

// ----------------------------------------------------------------------------------- the tests

/// Lets one game at a time start: from its launch until it has drawn its level for a while. On
/// lavapipe the first draws of each pipeline JIT-compile their shader variants inside the "GPU"
/// (llvmpipe compiles them at draw time); two games doing that at once on 2 cores stalled one
/// frame for 5 to 15 s, which the reporter rightly calls a hang (no GPU progress for
/// `hang_timeout`; seen with a cold Mesa shader cache and other builds on the machine). One game
/// at a time fills the Mesa shader cache for the next, which then compiles nothing.
static START: Mutex<()> = Mutex::new(());

/// The game's line once it is warm, before the next game may start and before the tests measure
/// anything: every pipeline compiled, and the level drawn with them for 10 frames.
const WARM: &str = "warm";

fn start_gate() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed while holding it left nothing half-done that the next must avoid.
    START.lock().unwrap_or_else(|p| p.into_inner())
}

/// The drill's use-after-free of the game's streamed chunk, windowed and then headless, aimed once
/// the game has drawn its level for a while (`GPU_CRASH_DRILL_AIM`): the same verdict, the same
/// named object, in the same state.
#[test]
fn the_drill_names_the_same_object_windowed_as_headless() {
    let dir = common::scratch_dir("windowed-drill");
    let xvfb = Xvfb::start(&dir);
    let mut verdicts = Vec::new();
    for (name, xvfb) in [("windowed", Some(&xvfb)), ("headless", None)] {
        let reports_dir = dir.join(name).join("reports");
        let aim = dir.join(name).join("aim");
        let mut command = game_command(&reports_dir, "drill", xvfb, Some("use-after-free"));
        command.env("GPU_CRASH_DRILL_AIM", &aim);
        let gate = start_gate();
        let mut game = Game::spawn(command);
        game.wait_for(0, &format!("{SAYS}{WARM}"), CHILD_DEADLINE);
        drop(gate);
        std::fs::write(&aim, format!("{CHUNK}\n")).unwrap();
        let status = game.wait_exit(CHILD_DEADLINE);
        let log = game.log();
        assert!(status.is_some(), "{name}: the game did not end:\n{log}");
        assert_eq!(
            status.unwrap().code(),
            Some(1),
            "{name}: the drilled loss ends the game as Bevy does:\n{log}"
        );
        if xvfb.is_some() {
            assert!(
                log.contains(&format!("{SAYS}swapchain {WIDTH}x{HEIGHT}")),
                "the windowed game presented into its window before the fault:\n{log}"
            );
        }
        let report = only_report(&reports_dir, &log);
        assert_eq!(
            report.kind,
            CrashKind::DeviceLost,
            "{name}: {}",
            report.summary
        );
        assert!(
            report.hang.is_none(),
            "{name}: no hang before the loss: {log}"
        );
        assert_eq!(report.faults.len(), 1, "{name}: {report:#?}");
        let fault = &report.faults[0];
        let culprit = fault
            .culprit
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no culprit: {}", fault.summary));
        println!("{name}: {}", fault.summary);
        verdicts.push((fault.verdict, culprit.name.clone(), culprit.state));
    }
    let expected = (
        FaultVerdict::UseAfterFree,
        Some(CHUNK.to_owned()),
        ObjectState::Freed,
    );
    assert_eq!(verdicts[0], expected, "windowed");
    assert_eq!(verdicts[1], expected, "headless");
}

/// `samples` answers to `stats`, half a second apart.
fn index_samples(game: &mut Game, samples: usize) -> Vec<IndexLine> {
    (0..samples)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(500));
            game.index_stats()
        })
        .collect()
}

/// The player resizes the window 20 times, each size drawn before the next (the swapchain and the
/// camera's size-dependent textures recreated each time): no report, and the address index holds
/// no more live ranges at the warm-up size afterwards than before.
#[test]
fn twenty_resizes_write_no_report_and_leave_the_index_as_it_was() {
    let dir = common::scratch_dir("windowed-resize");
    let reports_dir = dir.join("reports");
    let xvfb = Xvfb::start(&dir);
    let gate = start_gate();
    // The drill layer without a fault: it provides the binding reports lavapipe lacks.
    let mut game = Game::spawn(game_command(&reports_dir, "play", Some(&xvfb), Some("")));
    let wm = Wm::connect(&xvfb.display);
    let window = wm.game_window(&game);
    wm.focus(window);
    game.wait_for(0, &format!("{SAYS}{WARM}"), CHILD_DEADLINE);
    drop(gate);
    let warm = index_samples(&mut game, 5);
    let start = Instant::now();
    for i in 0..20u32 {
        // Nineteen sizes, wider and narrower, then back to the warm-up size.
        let (width, height) = if i == 19 {
            (WIDTH, HEIGHT)
        } else {
            (WIDTH + 16 * (i % 7) - 48, HEIGHT + 16 * (i % 5) - 32)
        };
        let from = game.seen();
        wm.resize(window, width, height);
        let (_, line, _) = game.wait_for(
            from,
            &format!("{SAYS}swapchain {width}x{height} "),
            Duration::from_secs(60),
        );
        // That frame drawn and presented, and the next begun, before the next size.
        let frame: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        game.wait_for(
            from,
            &format!("{SAYS}frame {} done", frame + 1),
            Duration::from_secs(60),
        );
    }
    let resizing = start.elapsed();
    // The textures of the last sizes go once the GPU is done with them (wgpu frees them a frame or
    // two later): a second of frames first.
    std::thread::sleep(Duration::from_secs(1));
    let after = index_samples(&mut game, 5);
    game.send("quit");
    let status = game.wait_exit(Duration::from_secs(60));
    let log = game.log();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{log}");
    let reports = common::read_reports(&reports_dir);
    assert!(
        reports.is_empty(),
        "no report: {:?}\n{log}",
        reports.iter().map(|r| &r.summary).collect::<Vec<_>>()
    );
    let swapchains = log.matches(&format!("{SAYS}swapchain ")).count();
    assert_eq!(
        swapchains, 21,
        "the first swapchain and one per resize:\n{log}"
    );

    let (first, last) = (warm[0], after[after.len() - 1]);
    println!("20 resizes in {resizing:?}");
    println!("index after warm-up: {warm:?}");
    println!("index after the resizes: {after:?}");
    assert!(
        first.binds > 0,
        "the layer's binding reports reached the index: {first:?}"
    );
    assert_eq!((last.overflow, last.dropped), (0, 0), "{last:?}");
    assert!(
        last.rendered >= first.rendered + 40,
        "at least two frames drawn at each size: {first:?} -> {last:?}"
    );
    // The bound: the fewest live ranges of five samples, before and after. A frame's transient
    // objects (staging buffers, the streamed chunk, wgpu's deferred frees) come and go, and one
    // sample in three or so caught some dozens more (164 then 222, seen); the fewest of five is the
    // level's own set. Each resize recreates several size-dependent textures (the view's main
    // textures, its depth and prepass depth); one of them kept live per resize, a leak, adds at
    // least 20 to every sample. Fewer than 20 more is no leak.
    let warm_min = warm.iter().map(|s| s.live).min().unwrap();
    let after_min = after.iter().map(|s| s.live).min().unwrap();
    println!(
        "live ranges (fewest of 5) {warm_min} -> {after_min}; freed ranges remembered {} -> {} \
         (at most max_freed_bindings); binds during the resizes and the samples {}, unbinds {}",
        warm[0].freed,
        last.freed,
        last.binds - first.binds,
        last.unbinds - first.unbinds,
    );
    assert!(
        after_min < warm_min + 20,
        "live ranges grew with the resizes: {warm:?} -> {after:?}"
    );
}

/// The player minimises the window for 30 s. The game idles in the background (no frame at all:
/// `WinitSettings` low-power while unfocused, as `desktop_app` games do), so the GPU has nothing to
/// do and the reporter's watchdog sees no frame; with the default `hang_timeout` that is no hang.
/// Restored, it draws again and quits cleanly, with no report.
#[test]
fn thirty_seconds_minimised_is_no_hang() {
    let dir = common::scratch_dir("windowed-minimise");
    let reports_dir = dir.join("reports");
    let xvfb = Xvfb::start(&dir);
    let gate = start_gate();
    let mut game = Game::spawn(game_command(&reports_dir, "background", Some(&xvfb), None));
    let wm = Wm::connect(&xvfb.display);
    let window = wm.game_window(&game);
    wm.focus(window);
    game.wait_for(0, &format!("{SAYS}{WARM}"), CHILD_DEADLINE);
    drop(gate);
    let minimised_at = SystemTime::now();
    wm.minimise(window);
    std::thread::sleep(Duration::from_secs(30));
    game.assert_running("while minimised");
    let restored_at = SystemTime::now();
    wm.restore(window);
    // Drawing again after the restore.
    let from = game.seen();
    let (_, line, _) = game.wait_for(from, " done", Duration::from_secs(60));
    let first_after: u64 = line.split(' ').rev().nth(1).unwrap().parse().unwrap();
    game.wait_for(
        from,
        &format!("{SAYS}frame {} done", first_after + 20),
        Duration::from_secs(120),
    );
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis();
    let from = game.seen();
    game.send(&format!("frames {} {}", ms(minimised_at), ms(restored_at)));
    let (_, line, _) = game.wait_for(from, "frames between", Duration::from_secs(30));
    game.send("quit");
    let status = game.wait_exit(Duration::from_secs(60));
    let log = game.log();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{log}");
    let reports = common::read_reports(&reports_dir);
    assert!(
        reports.is_empty(),
        "no report for a minimised game: {:?}\n{log}",
        reports.iter().map(|r| &r.summary).collect::<Vec<_>>()
    );
    // The frames drawn while minimised, in ms after the unmap: the game's last ones, in flight or
    // begun before the focus change reached it, then none.
    let offsets: Vec<u64> = line
        .split_once(" at ")
        .map(|(_, list)| {
            list.split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let idle_from = offsets.last().copied().unwrap_or(0);
    let idle = (ms(restored_at) - ms(minimised_at)) as u64 - idle_from;
    println!(
        "minimised {} ms: {} frames drawn in its first {idle_from} ms, then none for {idle} ms",
        ms(restored_at) - ms(minimised_at),
        offsets.len()
    );
    assert!(
        idle >= 25_000,
        "the game drew while minimised (ms after the unmap: {offsets:?}):\n{log}"
    );
}

/// The GPU hangs in the main pass (the drill's `hang-in-pass`, after 150 submissions: mid-game);
/// two seconds later the player clicks the close button; a game that does not end is force-quit
/// (SIGKILL). Twice: with the plugin's default `on_hang`, and with
/// `OnHang::KeepWaiting` (a game that waits for the driver). Each time the hang report is on disk
/// and names the stage, and the run's release-health session ends `crashed`: sent by the game
/// itself if it got to exit, else by its next launch (which ends its own `exited`).
///
/// The close itself does nothing while the GPU hangs (seen with gdb, lavapipe: the render thread
/// blocked in `vkQueueSubmit` behind the hung work, winit's thread in the main app's update waiting
/// for the render app, so nothing reads the X events): what ends the game is the reporter's
/// `OnHang::Exit` or the window manager's kill.
#[test]
fn closing_the_window_during_a_hang_keeps_the_report_and_ends_the_session_crashed() {
    let dir = common::scratch_dir("windowed-hang-close");
    let xvfb = Xvfb::start(&dir);
    // Nothing listens there: every update waits in the outbox, where the test reads it.
    let dsn = format!(
        "http://public@127.0.0.1:{}/1",
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    );
    let defaults = GpuCrashReporterPlugin::default().settings;
    for on_hang in ["default", "keep-waiting"] {
        let reports_dir = dir.join(on_hang).join("reports");
        let (report, log, ended) = hang_and_close(&reports_dir, &xvfb, &dsn, on_hang);
        let policy = match on_hang {
            "default" => defaults.on_hang,
            _ => OnHang::KeepWaiting,
        };
        match (ended, policy) {
            (Some(status), OnHang::Exit(code)) => {
                assert_eq!(
                    status.code(),
                    Some(code),
                    "{on_hang}: OnHang::Exit ended it:\n{log}"
                )
            }
            (None, OnHang::KeepWaiting) => {}
            (ended, policy) => panic!("{on_hang} ({policy:?}): ended {ended:?}:\n{log}"),
        }
        assert_eq!(report.kind, CrashKind::GpuHang, "{}\n{log}", report.summary);
        assert_eq!(
            report.gpu_stage.as_deref(),
            Some("Core3d MainPass of camera \"main\""),
            "{}",
            report.summary
        );
        let hang = report.hang.as_ref().expect("a hang section");
        assert_eq!(
            u128::from(hang.hang_timeout_ms),
            defaults.hang_timeout.as_millis()
        );
        assert_eq!(
            report.drill.as_deref(),
            Some(format!("hang-in-pass:{MAIN_PASS}").as_str())
        );

        // The hung run's session: its update (it got to exit) or its file (killed), which its
        // next launch, a short calm run of the same game, ends.
        let outbox = reports_dir.join("outbox");
        let hung_sid = match session_files(&outbox).as_slice() {
            [] => {
                let updates = session_updates(&outbox);
                assert_eq!(updates.len(), 1, "{on_hang}: {updates:?}\n{log}");
                updates[0].0.clone()
            }
            [sid] => {
                let sid = sid.clone();
                let mut next = game_command(&reports_dir, "calm", Some(&xvfb), None);
                next.env(DSN_VAR, &dsn);
                let gate = start_gate();
                let mut next = Game::spawn(next);
                let status = next.wait_exit(CHILD_DEADLINE);
                drop(gate);
                let next_log = next.log();
                assert_eq!(status.and_then(|s| s.code()), Some(0), "{next_log}");
                let others: Vec<_> = session_updates(&outbox)
                    .into_iter()
                    .filter(|(s, _)| *s != sid)
                    .map(|(_, status)| status)
                    .collect();
                assert_eq!(
                    others,
                    [SessionStatus::Exited],
                    "{on_hang}: the next launch's own session:\n{next_log}"
                );
                assert_eq!(
                    common::read_reports(&reports_dir).len(),
                    1,
                    "the next launch wrote no report"
                );
                sid
            }
            more => panic!("{on_hang}: one session file, not {more:?}"),
        };
        let updates = session_updates(&outbox);
        println!("{on_hang}: session updates (sid, status): {updates:?}");
        let hung: Vec<SessionStatus> = updates
            .iter()
            .filter(|(sid, _)| *sid == hung_sid)
            .map(|(_, status)| *status)
            .collect();
        assert_eq!(
            hung,
            [SessionStatus::Crashed],
            "{on_hang}: the hung run's session ends crashed, once: {updates:?}\n{log}"
        );
        assert!(session_files(&outbox).is_empty(), "{on_hang}");
    }
}

/// One hung run for the test above, with `on_hang` (`default` or `keep-waiting`): its one report,
/// its log, and its exit status (`None`: force-quit).
fn hang_and_close(
    reports_dir: &Path,
    xvfb: &Xvfb,
    dsn: &str,
    on_hang: &str,
) -> (CrashReport, String, Option<ExitStatus>) {
    let scenario = format!("hang-in-pass:{MAIN_PASS}");
    let mut command = game_command(reports_dir, "play", Some(xvfb), Some(&scenario));
    command
        .env(DSN_VAR, dsn)
        .env(ON_HANG_VAR, on_hang)
        .env("GPU_CRASH_DRILL_AFTER", "150");
    let gate = start_gate();
    let mut game = Game::spawn(command);
    let wm = Wm::connect(&xvfb.display);
    let window = wm.game_window(&game);
    wm.focus(window);
    // The hang comes around frame 50, once the level has been drawn for a while.
    let (_, _, hung_at) = game.wait_for(0, "injected hang in pass", CHILD_DEADLINE);
    drop(gate);
    std::thread::sleep(Duration::from_secs(2));
    let closed_at = Instant::now();
    wm.close(window);
    // How long the player waits before the window manager's "Force Quit": long enough for the
    // default `OnHang::Exit` (the report at `hang_timeout`, then `loss_wait_after_hang`), with
    // some seconds to spare; a game that keeps waiting never ends by itself, 10 s are enough.
    let defaults = GpuCrashReporterPlugin::default().settings;
    let patience = match on_hang {
        "keep-waiting" => Duration::from_secs(10),
        _ => defaults.hang_timeout + defaults.loss_wait_after_hang + Duration::from_secs(6),
    };
    let ended = game.wait_exit(patience);
    if ended.is_none() {
        game.force_quit();
    }
    let log = game.log();
    let warm_first = log.find(&format!("{SAYS}{WARM}")) < log.find("injected hang in pass");
    println!("{on_hang}: the game was warm before the hang: {warm_first}");
    let report = only_report(reports_dir, &log);
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    let after = report.timestamp_ms.saturating_sub(ms(hung_at));
    println!(
        "{on_hang}: reported {after} ms after the drill hung the GPU; the game {}; its close \
         request seen: {}; {}",
        match ended {
            Some(status) => format!(
                "ended by itself {} ms after the close: {status}",
                closed_at.elapsed().as_millis()
            ),
            None => format!("was force-quit {patience:?} after the close"),
        },
        log.contains(&format!("{SAYS}close requested")),
        report.summary
    );
    let timeout = report.hang.as_ref().map_or(0, |h| h.hang_timeout_ms);
    assert!(
        after + 500 >= timeout && after <= timeout + 10_000,
        "{on_hang}: reported {after} ms after the drill hung the GPU (timeout {timeout} ms)"
    );
    (report, log, ended)
}

/// The session ids of the `*.session` files in `outbox`.
fn session_files(outbox: &Path) -> Vec<String> {
    entries(outbox)
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            Some(name.strip_suffix(".session")?.to_owned())
        })
        .collect()
}

/// `(sid, status)` of every session update waiting in `outbox` (and its `failed/`).
fn session_updates(outbox: &Path) -> Vec<(String, SessionStatus)> {
    let mut paths = entries(outbox);
    paths.extend(entries(&outbox.join("failed")));
    paths
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "envelope"))
        .flat_map(|p| {
            let envelope = sentry::Envelope::from_slice(&std::fs::read(&p).unwrap())
                .unwrap_or_else(|e| panic!("{} is no envelope: {e}", p.display()));
            envelope
                .items()
                .filter_map(|item| match item {
                    EnvelopeItem::SessionUpdate(u) => {
                        Some((u.session_id.simple().to_string(), u.status))
                    }
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default()
}

// ------------------------------------------------------------------------------------ the child

/// The game: a lit level in a window (or offscreen, headless), its streamed chunk, and what
/// `WINDOWED_GAME_MODE` asks: `drill` (play until the drilled fault ends it), `play` (play, answer
/// stdin's commands), `background` (as `play`, idling while unfocused), `calm` (quit after 30
/// frames).
#[test]
#[ignore = "child process entry point: the tests above start it"]
fn child() {
    common::use_runtime_dir();
    let mode = std::env::var(MODE_VAR).expect("WINDOWED_GAME_MODE");
    let headless = std::env::var_os(HEADLESS_VAR).is_some();
    let mut reporter = GpuCrashReporterPlugin {
        settings: ReporterSettings {
            application_name: Some("windowed_game".into()),
            application_version: VERSION.into(),
            ..default()
        },
        ..default()
    };
    if std::env::var(ON_HANG_VAR).as_deref() == Ok("keep-waiting") {
        reporter.settings.on_hang = OnHang::KeepWaiting;
    }
    if let Ok(dsn) = std::env::var(DSN_VAR) {
        let dsn: Dsn = dsn.parse().expect("a valid DSN");
        let reports_dir = PathBuf::from(std::env::var("GPU_CRASH_REPORT_DIR").unwrap());
        reporter.settings.delivery = DeliverySettings {
            dsn_from_env: false,
            upload_timeout: Duration::from_secs(2),
            ..DeliverySettings::new(Some(dsn), reports_dir.join("outbox"))
        };
    }
    let rendered = Rendered::default();
    let mut app = App::new();
    app.add_plugins(reporter);
    if headless {
        app.add_plugins(common::headless_default_plugins())
            .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO));
    } else {
        app.add_plugins(windowed_plugins());
        if mode == "background" {
            // Renders while focused, idles in the background: the app updates only on a window
            // event (or once a minute).
            app.insert_resource(WinitSettings {
                focused_mode: UpdateMode::Continuous,
                unfocused_mode: UpdateMode::reactive_low_power(Duration::from_secs(60)),
            });
        }
    }
    common::small_shadow_maps(&mut app);
    app.insert_resource(Mode(mode))
        .insert_resource(rendered.clone())
        .insert_resource(stdin_commands())
        .add_systems(Startup, level)
        .add_systems(Update, (stream_level_chunk, answer_commands, window_notes));
    app.sub_app_mut(RenderApp)
        .insert_resource(rendered)
        .add_systems(
            Render,
            (count_frame, note_warm).in_set(RenderSystems::Cleanup),
        )
        .add_systems(Render, note_swapchain.in_set(RenderSystems::Queue));
    let exit = app.run();
    eprintln!("{SAYS}app returned {exit:?}");
    common::exit_process(exit);
}

/// `DefaultPlugins` with the game's window, on Vulkan; winit's event loop on the test's thread.
fn windowed_plugins() -> impl PluginGroup {
    DefaultPlugins
        .set(WindowPlugin {
            primary_window: Some(Window {
                title: TITLE.into(),
                resolution: WindowResolution::new(WIDTH, HEIGHT),
                ..default()
            }),
            ..default()
        })
        .set(RenderPlugin {
            render_creation: RenderCreation::Automatic(Box::new(WgpuSettings {
                backends: Some(Backends::VULKAN),
                ..default()
            })),
            ..default()
        })
        .set(WinitPlugin {
            run_on_any_thread: true,
        })
}

#[derive(Resource)]
struct Mode(String);

/// Frames the render world finished, with the wall-clock time of each (both worlds).
#[derive(Resource, Clone, Default)]
struct Rendered(Arc<(AtomicU64, Mutex<Vec<u64>>)>);

/// The lines read from stdin, for the main world.
#[derive(Resource)]
struct StdinCommands(Mutex<Receiver<String>>);

fn stdin_commands() -> StdinCommands {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    StdinCommands(Mutex::new(rx))
}

fn level(
    mut commands: Commands,
    mut images: ResMut<Assets<Image>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    if std::env::var_os(HEADLESS_VAR).is_some() {
        commands.spawn((
            common::main_camera(&mut images, WIDTH, HEIGHT),
            Tonemapping::AcesFitted,
        ));
    } else {
        // The same camera, into the window.
        commands.spawn((
            Name::new("main"),
            Camera3d::default(),
            DepthPrepass,
            // Bevy's default tonemapper needs the `tonemapping_luts` feature, which the crate's
            // minimal Bevy features leave out.
            Tonemapping::AcesFitted,
            Transform::from_xyz(0.0, 4.0, 9.0).looking_at(Vec3::ZERO, Vec3::Y),
        ));
    }
    common::shadowed_scene(&mut commands, &mut meshes, &mut materials, 1);
}

/// The game's streamed level chunk: made each frame, the previous one destroyed.
fn stream_level_chunk(device: Res<RenderDevice>, mut last: Local<Option<Buffer>>) {
    if let Some(buffer) = last.take() {
        buffer.destroy();
    }
    *last = Some(device.create_buffer(&BufferDescriptor {
        label: Some(CHUNK),
        size: CHUNK_BYTES,
        usage: BufferUsages::VERTEX | BufferUsages::COPY_DST,
        mapped_at_creation: false,
    }));
}

/// stdin's commands: `stats` (the index's ranges and counters, and frames rendered), `frames
/// <from ms> <to ms>` (frames rendered in that wall-clock interval), `quit`. `calm` quits by
/// itself at frame 30; any mode gives up after 20,000 frames.
fn answer_commands(
    commands: Res<StdinCommands>,
    mode: Res<Mode>,
    reporter: Res<GpuCrashReporter>,
    rendered: Res<Rendered>,
    mut frame: Local<u64>,
    mut exit: MessageWriter<AppExit>,
) {
    *frame += 1;
    if (mode.0 == "calm" && *frame == 30) || *frame > 20_000 {
        exit.write(AppExit::Success);
    }
    let lines: Vec<String> = commands.0.lock().unwrap().try_iter().collect();
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["stats"] => {
                let (live, freed) = reporter.indexed_ranges();
                let stats = reporter.index_stats();
                eprintln!(
                    "{SAYS}index live={live} freed={freed} binds={} unbinds={} overflow={} \
                     dropped={} rendered={}",
                    stats.binds,
                    stats.unbinds,
                    stats.live_overflow,
                    reporter.binding_events_dropped(),
                    rendered.0 .0.load(Ordering::Relaxed)
                );
            }
            ["frames", from, to] => {
                let (from, to): (u64, u64) = (from.parse().unwrap(), to.parse().unwrap());
                let times = rendered.0 .1.lock().unwrap();
                let inside: Vec<u64> = times
                    .iter()
                    .copied()
                    .filter(|t| (from..to).contains(t))
                    .collect();
                let offsets: Vec<String> = inside.iter().map(|t| (t - from).to_string()).collect();
                eprintln!(
                    "{SAYS}frames between {from} and {to}: {} at {}",
                    inside.len(),
                    offsets.join(",")
                );
            }
            ["quit"] => {
                exit.write(AppExit::Success);
            }
            _ => eprintln!("{SAYS}unknown command {line:?}"),
        }
    }
}

/// Says when the window is resized or asked to close (main world).
fn window_notes(
    mut resized: MessageReader<WindowResized>,
    mut close: MessageReader<WindowCloseRequested>,
) {
    for r in resized.read() {
        eprintln!("{SAYS}resized to {}x{}", r.width, r.height);
    }
    if close.read().next().is_some() {
        eprintln!("{SAYS}close requested");
    }
}

/// Render world: each frame rendered, counted, timed and said.
fn count_frame(rendered: Res<Rendered>) {
    // Relaxed: a counter read by the test's commands; nothing else is ordered by it.
    let n = rendered.0 .0.fetch_add(1, Ordering::Relaxed) + 1;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut times = rendered.0 .1.lock().unwrap();
    if let Some(last) = times.last().copied().filter(|last| now - last > 1_000) {
        eprintln!("{SAYS}frame {n} came {} ms after the last", now - last);
    }
    times.push(now);
    drop(times);
    eprintln!("{SAYS}frame {n} done");
}

/// Render world: says [`WARM`] once every pipeline queued so far has been compiled and used for 10
/// frames (on lavapipe the first frames that draw with a pipeline compile its shader variants).
fn note_warm(cache: Res<PipelineCache>, mut ready: Local<u32>) {
    if *ready > 10 {
        return;
    }
    let mut pipelines = cache.pipelines().peekable();
    let any = pipelines.peek().is_some();
    if any && pipelines.all(|p| matches!(p.state, CachedPipelineState::Ok(_))) {
        *ready += 1;
        if *ready > 10 {
            eprintln!("{SAYS}{WARM}");
        }
    } else {
        *ready = 0;
    }
}

/// Render world: says the size of the swapchain texture the frame draws into, each time it
/// changes (a new swapchain), with the number the frame will have once done.
fn note_swapchain(
    windows: Res<ExtractedWindows>,
    rendered: Res<Rendered>,
    mut last: Local<Option<(u32, u32)>>,
) {
    for window in windows.values() {
        if let Some(texture) = window.swap_chain_texture.as_ref() {
            let size = texture.texture.size();
            let size = (size.width, size.height);
            if *last != Some(size) {
                *last = Some(size);
                // Relaxed: see `count_frame`.
                let frame = rendered.0 .0.load(Ordering::Relaxed) + 1;
                eprintln!("{SAYS}swapchain {}x{} {frame}", size.0, size.1);
            }
        }
    }
}
