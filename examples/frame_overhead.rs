//! Frame overhead of the GPU crash reporter: a headless Bevy app that creates and destroys 1,000
//! labelled GPU buffers per frame, with the plugin or without it (`--no-plugin`).
//!
//! The plugin hooks device creation, so "with" and "without" must be two processes. `--compare`
//! does that: it runs this executable alternately without and with the plugin (`--rounds` pairs, the
//! environment passed through, e.g. a Vulkan layer), then prints each run's median frame time, the
//! median of those medians per side, and the ratio.
//!
//! ```sh
//! VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
//!   cargo run --release --example frame_overhead -- --compare --rounds 3 --frames 300
//! ```
//!
//! One run prints a line `frame_overhead plugin=<0|1> frames=<n> median_us=.. mean_us=.. p90_us=..
//! events=.. dropped=..` (events: binding events the reporter indexed; 0 when the driver gives no
//! binding report).

use std::process::Command;
use std::time::{Duration, Instant};

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy::render::settings::{Backends, RenderCreation, WgpuSettings};
use bevy::render::RenderPlugin;
use bevy::window::ExitCondition;
use bevy_gpu_crash_reporter::{GpuCrashReporter, GpuCrashReporterPlugin};

/// Buffers created (and, a frame later, destroyed) per frame.
const BUFFERS_PER_FRAME: usize = 1_000;

struct Args {
    plugin: bool,
    compare: bool,
    rounds: usize,
    frames: usize,
    warmup: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        plugin: true,
        compare: false,
        rounds: 3,
        frames: 300,
        warmup: 60,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} takes a number"))
        };
        match a.as_str() {
            "--no-plugin" => args.plugin = false,
            "--compare" => args.compare = true,
            "--rounds" => args.rounds = number("--rounds"),
            "--frames" => args.frames = number("--frames"),
            "--warmup" => args.warmup = number("--warmup"),
            other => panic!(
                "unknown argument {other}; usage: frame_overhead [--no-plugin] [--compare] \
                 [--rounds N] [--frames N] [--warmup N]"
            ),
        }
    }
    args
}

fn main() -> AppExit {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // SAFETY (process-global, but no other thread exists yet).
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let args = parse_args();
    if args.compare {
        compare(&args);
        return AppExit::Success;
    }
    let mut app = App::new();
    if args.plugin {
        app.add_plugins(GpuCrashReporterPlugin {
            application_name: Some("frame_overhead".into()),
            report_dir: Some(std::env::temp_dir().join("frame_overhead_reports")),
            ..default()
        });
    }
    app.add_plugins(
        DefaultPlugins
            .set(WindowPlugin {
                primary_window: None,
                exit_condition: ExitCondition::DontExit,
                ..default()
            })
            .set(RenderPlugin {
                render_creation: RenderCreation::Automatic(Box::new(WgpuSettings {
                    backends: Some(Backends::VULKAN),
                    ..default()
                })),
                ..default()
            }),
    )
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .insert_resource(FrameTimes {
        plugin: args.plugin,
        warmup: args.warmup,
        frames: args.frames,
        last: None,
        seen: 0,
        times: Vec::with_capacity(args.frames),
    })
    .add_systems(First, time_frame)
    .add_systems(Update, churn_buffers);
    app.run()
}

#[derive(Resource)]
struct FrameTimes {
    plugin: bool,
    warmup: usize,
    frames: usize,
    last: Option<Instant>,
    seen: usize,
    times: Vec<Duration>,
}

/// Frame time = time between the starts of two consecutive main-world frames (with pipelined
/// rendering that includes waiting for the render world).
fn time_frame(
    mut times: ResMut<FrameTimes>,
    reporter: Option<Res<GpuCrashReporter>>,
    mut exit: MessageWriter<AppExit>,
) {
    let now = Instant::now();
    if let Some(last) = times.last.replace(now) {
        times.seen += 1;
        if times.seen > times.warmup {
            times.times.push(now - last);
        }
    }
    if times.times.len() < times.frames || times.frames == 0 {
        return;
    }
    let (events, dropped) = reporter
        .map(|r| (r.index().stats().events, r.binding_events_dropped()))
        .unwrap_or((0, 0));
    let mut sorted = times.times.clone();
    sorted.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = sorted.iter().map(|d| us(*d)).sum::<f64>() / sorted.len() as f64;
    println!(
        "frame_overhead plugin={} frames={} median_us={:.1} mean_us={:.1} p90_us={:.1} events={} dropped={}",
        u8::from(times.plugin),
        sorted.len(),
        us(sorted[sorted.len() / 2]),
        mean,
        us(sorted[sorted.len() * 9 / 10]),
        events,
        dropped
    );
    times.frames = 0;
    exit.write(AppExit::Success);
}

#[derive(Default)]
struct Churn {
    last: Vec<Buffer>,
}

fn churn_buffers(device: Res<RenderDevice>, mut churn: Local<Churn>) {
    for buffer in churn.last.drain(..) {
        buffer.destroy();
    }
    for _ in 0..BUFFERS_PER_FRAME {
        churn.last.push(device.create_buffer(&BufferDescriptor {
            label: Some("particle_chunk"),
            size: 4096,
            usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
}

/// One child run's result line, parsed.
struct RunResult {
    median_us: f64,
    events: u64,
    dropped: u64,
}

fn run_child(args: &Args, plugin: bool) -> RunResult {
    let exe = std::env::current_exe().expect("own executable");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--frames",
        &args.frames.to_string(),
        "--warmup",
        &args.warmup.to_string(),
    ]);
    if !plugin {
        cmd.arg("--no-plugin");
    }
    let out = cmd.output().expect("run frame_overhead");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("frame_overhead "))
        .unwrap_or_else(|| {
            panic!(
                "child run (plugin={plugin}) printed no result ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    println!("  {line}");
    let field = |name: &str| -> f64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    RunResult {
        median_us: field("median_us"),
        events: field("events") as u64,
        dropped: field("dropped") as u64,
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn compare(args: &Args) {
    println!(
        "frame_overhead --compare: {} rounds of (without, with) plugin, {} frames each after {} warm-up, {} buffers created+destroyed per frame",
        args.rounds, args.frames, args.warmup, BUFFERS_PER_FRAME
    );
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let (mut events, mut dropped) = (0, 0);
    for _ in 0..args.rounds {
        without.push(run_child(args, false).median_us);
        let r = run_child(args, true);
        with.push(r.median_us);
        events += r.events;
        dropped += r.dropped;
    }
    let (a, b) = (median(&mut without), median(&mut with));
    println!(
        "frame_overhead summary: median frame without plugin {a:.1} us, with plugin {b:.1} us, \
         ratio {:.4} (overhead {:+.2}%); binding events indexed per plugin run {}, dropped {}",
        b / a,
        (b / a - 1.0) * 100.0,
        events / args.rounds.max(1) as u64,
        dropped
    );
}
