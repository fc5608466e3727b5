//! Frame overhead of the GPU crash reporter: a headless Bevy app that creates and destroys 1,000
//! labelled GPU buffers per frame, with the plugin, without it (`--no-plugin`), or with it but
//! without the address-binding capture (`--no-bindings`: `capture_address_bindings: false`).
//!
//! The plugin hooks device creation, so the configurations must be separate processes. `--compare`
//! does that: it runs this executable in turn without the plugin, with it but no binding capture,
//! and with it (`--rounds` rounds, the environment passed through, e.g. a Vulkan layer), then prints
//! each run's median frame time and process CPU time per frame, the median over rounds per
//! configuration, and the ratios against the run without the plugin.
//!
//! ```sh
//! VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
//!   cargo run --release --example frame_overhead -- --compare --rounds 3 --frames 300
//! ```
//!
//! One run prints a line `frame_overhead plugin=<0|1|2|3> frames=<n> median_us=.. mean_us=.. p90_us=..
//! events=.. dropped=..` (events: binding events the reporter indexed; 0 when the driver gives no
//! binding report). plugin=0: no plugin, 1: plugin, 2: plugin without binding capture, 3: plugin
//! without GPU breadcrumbs (`gpu_breadcrumbs: false`).
//!
//! `--scene` adds a 3D camera rendering 400 lit cubes into a 1280x720 offscreen image, so the
//! core-pipeline breadcrumbs (per camera stage) are recorded; `--churn 0` turns the buffer churn off.

#[path = "support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::{GpuCrashReporter, GpuCrashReporterPlugin};

/// Buffers created (and, a frame later, destroyed) per frame.
const BUFFERS_PER_FRAME: usize = 1_000;

struct Args {
    /// 0: no plugin, 1: plugin, 2: plugin without binding capture, 3: plugin without breadcrumbs.
    plugin: u8,
    scene: bool,
    churn: usize,
    compare: bool,
    rounds: usize,
    frames: usize,
    warmup: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        plugin: 1,
        scene: false,
        churn: BUFFERS_PER_FRAME,
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
            "--no-plugin" => args.plugin = 0,
            "--no-bindings" => args.plugin = 2,
            "--no-breadcrumbs" => args.plugin = 3,
            "--scene" => args.scene = true,
            "--churn" => args.churn = number("--churn"),
            "--compare" => args.compare = true,
            "--rounds" => args.rounds = number("--rounds"),
            "--frames" => args.frames = number("--frames"),
            "--warmup" => args.warmup = number("--warmup"),
            other => panic!(
                "unknown argument {other}; usage: frame_overhead [--no-plugin | --no-bindings | \
                 --no-breadcrumbs] [--scene] [--churn N] [--compare] [--rounds N] [--frames N] \
                 [--warmup N]"
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
    if args.plugin != 0 {
        app.add_plugins(GpuCrashReporterPlugin {
            capture_address_bindings: args.plugin != 2,
            gpu_breadcrumbs: args.plugin != 3,
            application_name: Some("frame_overhead".into()),
            report_dir: Some(std::env::temp_dir().join("frame_overhead_reports")),
            ..default()
        });
    }
    support::headless_vulkan(&mut app)
        .insert_resource(FrameTimes {
            plugin: args.plugin,
            warmup: args.warmup,
            frames: args.frames,
            last: None,
            seen: 0,
            times: Vec::with_capacity(args.frames),
            cpu_start: None,
        })
        .insert_resource(ChurnPerFrame(args.churn))
        .add_systems(First, time_frame)
        .add_systems(Update, churn_buffers);
    if args.scene {
        app.add_systems(Startup, scene);
        // Offscreen, nothing throttles the CPU to the GPU (a window's present would): without a
        // wait the queue grows until the driver gives up (seen on the H200: device lost after 17 s).
        // One frame in flight, as with vsync off and a blocking present.
        app.sub_app_mut(bevy::render::RenderApp).add_systems(
            bevy::render::Render,
            wait_for_gpu.in_set(bevy::render::RenderSystems::Cleanup),
        );
    }
    app.run()
}

#[derive(Resource)]
struct FrameTimes {
    plugin: u8,
    warmup: usize,
    frames: usize,
    last: Option<Instant>,
    seen: usize,
    times: Vec<Duration>,
    /// Process CPU time (all threads) when measuring began.
    cpu_start: Option<Duration>,
}

/// CPU time of the whole process so far (user + system, all threads, 10 ms ticks), from
/// `/proc/self/stat`; `None` where that does not exist.
fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // CLK_TCK is 100 on Linux x86-64.
    Some(Duration::from_millis(ticks * 10))
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
        if times.seen == times.warmup {
            times.cpu_start = process_cpu_time();
        }
        if times.seen > times.warmup {
            times.times.push(now - last);
        }
    }
    if times.times.len() < times.frames || times.frames == 0 {
        return;
    }
    let (events, dropped) = reporter
        .map(|r| (r.index_stats().events, r.binding_events_dropped()))
        .unwrap_or((0, 0));
    let mut sorted = times.times.clone();
    sorted.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = sorted.iter().map(|d| us(*d)).sum::<f64>() / sorted.len() as f64;
    let cpu = match (times.cpu_start, process_cpu_time()) {
        (Some(a), Some(b)) => us(b.saturating_sub(a)) / sorted.len() as f64,
        _ => f64::NAN,
    };
    println!(
        "frame_overhead plugin={} frames={} median_us={:.1} mean_us={:.1} p90_us={:.1} \
         cpu_us_per_frame={:.1} events={} dropped={}",
        times.plugin,
        sorted.len(),
        us(sorted[sorted.len() / 2]),
        mean,
        us(sorted[sorted.len() * 9 / 10]),
        cpu,
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

#[derive(Resource)]
struct ChurnPerFrame(usize);

fn churn_buffers(
    device: Res<RenderDevice>,
    per_frame: Res<ChurnPerFrame>,
    mut churn: Local<Churn>,
) {
    for buffer in churn.last.drain(..) {
        buffer.destroy();
    }
    for _ in 0..per_frame.0 {
        churn.last.push(device.create_buffer(&BufferDescriptor {
            label: Some("particle_chunk"),
            size: 4096,
            usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
}

/// Waits until the GPU has finished everything submitted so far.
fn wait_for_gpu(device: Res<RenderDevice>) {
    let _ = device
        .wgpu_device()
        .poll(bevy::render::render_resource::PollType::wait_indefinitely());
}

/// A 3D camera drawing 400 lit cubes (20 x 20, two materials) into a 1280x720 offscreen image.
fn scene(
    mut commands: Commands,
    mut images: ResMut<Assets<Image>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    commands.spawn((
        Name::new("main"),
        Camera3d::default(),
        support::offscreen_target(&mut images, 1280, 720),
        Transform::from_xyz(0.0, 18.0, 24.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let cube = meshes.add(Cuboid::new(0.8, 0.8, 0.8));
    let looks = [
        materials.add(StandardMaterial::from(Color::srgb(0.8, 0.3, 0.2))),
        materials.add(StandardMaterial {
            metallic: 0.9,
            perceptual_roughness: 0.3,
            ..default()
        }),
    ];
    for i in 0..400 {
        let (x, z) = ((i % 20) as f32 - 9.5, (i / 20) as f32 - 9.5);
        commands.spawn((
            Mesh3d(cube.clone()),
            MeshMaterial3d(looks[i % 2].clone()),
            Transform::from_xyz(x, 0.0, z),
        ));
    }
    commands.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(4.0, 10.0, 6.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
}

/// One child run's result line, parsed.
struct RunResult {
    median_us: f64,
    cpu_us: f64,
    events: u64,
    dropped: u64,
}

fn run_child(args: &Args, plugin: u8) -> RunResult {
    let exe = std::env::current_exe().expect("own executable");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--frames",
        &args.frames.to_string(),
        "--warmup",
        &args.warmup.to_string(),
        "--churn",
        &args.churn.to_string(),
    ]);
    if args.scene {
        cmd.arg("--scene");
    }
    match plugin {
        0 => {
            cmd.arg("--no-plugin");
        }
        2 => {
            cmd.arg("--no-bindings");
        }
        3 => {
            cmd.arg("--no-breadcrumbs");
        }
        _ => {}
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
        cpu_us: field("cpu_us_per_frame"),
        events: field("events") as u64,
        dropped: field("dropped") as u64,
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if !n.is_multiple_of(2) {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn compare(args: &Args) {
    println!(
        "frame_overhead --compare: {} rounds of (no plugin, plugin without binding capture, plugin \
         without breadcrumbs, plugin), {} frames each after {} warm-up, {} buffers created+destroyed \
         per frame, 3D scene {}",
        args.rounds,
        args.frames,
        args.warmup,
        args.churn,
        if args.scene { "on" } else { "off" }
    );
    // Per configuration (0: none, 1: plugin, 2: no bindings, 3: no breadcrumbs): medians, CPU.
    let mut frame: [Vec<f64>; 4] = Default::default();
    let mut cpu: [Vec<f64>; 4] = Default::default();
    let (mut events, mut dropped) = (0, 0);
    for _ in 0..args.rounds {
        for plugin in [0u8, 2, 3, 1] {
            let r = run_child(args, plugin);
            frame[plugin as usize].push(r.median_us);
            cpu[plugin as usize].push(r.cpu_us);
            if plugin == 1 {
                events += r.events;
                dropped += r.dropped;
            }
        }
    }
    let f: Vec<f64> = frame.iter_mut().map(|v| median(v)).collect();
    let c: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
    for (plugin, name) in [
        (2, "plugin without binding capture"),
        (3, "plugin without breadcrumbs"),
        (1, "plugin"),
    ] {
        println!(
            "frame_overhead summary [{name}]: median frame {:.1} us vs {:.1} us without plugin, \
             ratio {:.3} ({:+.1}%); process CPU per frame {:.1} us vs {:.1} us, ratio {:.3}",
            f[plugin],
            f[0],
            f[plugin] / f[0],
            (f[plugin] / f[0] - 1.0) * 100.0,
            c[plugin],
            c[0],
            c[plugin] / c[0],
        );
    }
    println!(
        "frame_overhead summary [breadcrumbs]: median frame with {:.1} us vs without {:.1} us, \
         ratio {:.3}; process CPU per frame ratio {:.3}",
        f[1],
        f[3],
        f[1] / f[3],
        c[1] / c[3]
    );
    println!(
        "frame_overhead summary: binding events indexed per plugin run {}, dropped {} in all",
        events / args.rounds.max(1) as u64,
        dropped
    );
}
