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
//! plugin=4 (`--floor`): the plugin with everything on, but its messenger callback returns at once
//! (`GPU_CRASH_REPORTER_COST_FLOOR`): the driver still makes every binding report, nothing of ours
//! runs on it. `--configs 0,2,4,1` then splits the plugin's cost in three, each as the median of
//! per-round ratios and in ms per frame: debug-utils naming (no plugin -> capture off), the driver's
//! binding report (capture off -> floor), ours (floor -> everything on).
//!
//! plugin=5 (`--no-fold`): everything on, but the indexer drops what it drains instead of folding it
//! (`GPU_CRASH_REPORTER_COST_NO_FOLD`): `--configs 0,2,4,5,1` splits ours in two, the callback and
//! the ring (floor -> no fold) and the index (no fold -> everything on).
//!
//! `FRAME_OVERHEAD_RING=<records>` sets the plugin's `binding_ring_capacity` (a control run: does the
//! ring's size, 4 MiB at the default, cost the thread that creates buffers its cache?).
//! `FRAME_OVERHEAD_SMALL_INDEX=1` sizes the index's tables at a sixteenth of the defaults (16,384
//! live, 4,096 freed, 512 recent events): does the fold's share of a 2-core frame come from its
//! tables taking the game's cache? `FRAME_OVERHEAD_SMALL_INDEX=live` shrinks only the live tables
//! (16,384 live: the object table 256 KiB instead of 4 MiB), so the freed ring keeps the teardown
//! hold's threshold of the defaults.
//!
//! `FRAME_OVERHEAD_FLUSH_EVERY=<frames>` times what a crash's first step waits for, every that many
//! frames: folding every event published so far (`GpuCrashReporter::index_stats`), which waits for
//! the lowest-priority fold thread when it holds the fold. After the result line, a line
//! `frame_overhead_flush flushes=.. median_us=.. p99_us=.. max_us=..` (with `--frames` only).
//!
//! `--interleave <block>`: one process, everything on, our capture switched to the floor and back
//! every `block` frames (`GPU_CRASH_REPORTER_COST_INTERLEAVE`): ours as the ratio of the two states'
//! frame time and CPU time within one process, each block pair's ratio and their median. On a host
//! whose processes fall into fast and slow modes (the NVIDIA hosts), blocks of one process share its
//! mode. With `--compare`, `--rounds` such processes and the median and spread of their ratios.
//!
//! `--scene` adds a 3D camera rendering 400 lit cubes into a 1280x720 offscreen image, so the
//! core-pipeline breadcrumbs (per camera stage) are recorded; `--churn 0` turns the buffer churn off.

#[path = "support/mod.rs"]
mod support;

use support::frame_timing::{self, median, wait_for_gpu, FrameTimes, RunResult};
use support::interleave::{BlockInterleave, Step};

use std::time::Instant;

use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{GpuCrashReporter, GpuCrashReporterPlugin};

/// Buffers created (and, a frame later, destroyed) per frame.
const BUFFERS_PER_FRAME: usize = 1_000;

struct Args {
    /// 0: no plugin, 1: plugin, 2: plugin without binding capture, 3: plugin without breadcrumbs,
    /// 4: plugin whose binding callback returns at once (the driver's floor), 5: plugin whose
    /// indexer drops what it drains.
    plugin: u8,
    /// The configurations `--compare` alternates, in this order within a round.
    configs: Vec<u8>,
    scene: bool,
    churn: usize,
    compare: bool,
    rounds: usize,
    frames: usize,
    warmup: usize,
    /// Frames per block of `--interleave` (0: off).
    interleave: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        plugin: 1,
        configs: vec![0, 2, 3, 1],
        scene: false,
        churn: BUFFERS_PER_FRAME,
        compare: false,
        rounds: 3,
        frames: 300,
        warmup: 60,
        interleave: 0,
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
            "--floor" => args.plugin = 4,
            "--no-fold" => args.plugin = 5,
            "--configs" => {
                args.configs = it
                    .next()
                    .map(|list| {
                        list.split(',')
                            .map(|c| c.trim().parse().expect("--configs takes e.g. 0,2,4,1"))
                            .collect()
                    })
                    .expect("--configs takes a list")
            }
            "--scene" => args.scene = true,
            "--churn" => args.churn = number("--churn"),
            "--compare" => args.compare = true,
            "--rounds" => args.rounds = number("--rounds"),
            "--frames" => args.frames = number("--frames"),
            "--warmup" => args.warmup = number("--warmup"),
            "--interleave" => args.interleave = number("--interleave").max(4),
            other => panic!(
                "unknown argument {other}; usage: frame_overhead [--no-plugin | --no-bindings | \
                 --no-breadcrumbs | --floor | --no-fold] [--scene] [--churn N] [--compare] [--configs 0,2,4,1] \
                 [--rounds N] [--frames N] [--warmup N] [--interleave BLOCK]"
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
    if args.compare && args.interleave > 0 {
        compare_interleaved(&args);
        return AppExit::Success;
    }
    if args.compare {
        compare(&args);
        return AppExit::Success;
    }
    if args.interleave > 0 {
        // SAFETY (process-global, but no other thread exists yet).
        std::env::set_var("GPU_CRASH_REPORTER_COST_INTERLEAVE", "1");
    }
    if args.plugin == 4 {
        // SAFETY (process-global, but no other thread exists yet).
        std::env::set_var("GPU_CRASH_REPORTER_COST_FLOOR", "1");
    }
    if args.plugin == 5 {
        // SAFETY (process-global, but no other thread exists yet).
        std::env::set_var("GPU_CRASH_REPORTER_COST_NO_FOLD", "1");
    }
    let mut app = App::new();
    if args.plugin != 0 {
        // A control for where the fold's share of a 2-core frame goes (BENCHMARKS.md, issue 35):
        // the index's tables a sixteenth of their default size (the freed ring 0.35 instead of 5.6
        // MiB), so they compete less with the game's data for the caches.
        let small_index = std::env::var("FRAME_OVERHEAD_SMALL_INDEX").ok();
        let defaults = ReporterSettings::default();
        let (max_live_bindings, max_freed_bindings, max_recent_events) =
            if small_index.as_deref() == Some("live") {
                (
                    16_384,
                    defaults.max_freed_bindings,
                    defaults.max_recent_events,
                )
            } else if small_index.is_some() {
                (16_384, 4_096, 512)
            } else {
                (
                    defaults.max_live_bindings,
                    defaults.max_freed_bindings,
                    defaults.max_recent_events,
                )
            };
        app.add_plugins(GpuCrashReporterPlugin {
            settings: ReporterSettings {
                max_live_bindings,
                max_freed_bindings,
                max_recent_events,
                capture_address_bindings: args.plugin != 2,
                gpu_breadcrumbs: args.plugin != 3,
                application_name: Some("frame_overhead".into()),
                binding_ring_capacity: std::env::var("FRAME_OVERHEAD_RING")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(
                        GpuCrashReporterPlugin::default()
                            .settings
                            .binding_ring_capacity,
                    ),
                report_dir: Some(std::env::temp_dir().join("frame_overhead_reports")),
                ..default()
            },
            ..default()
        });
    }
    support::headless_vulkan(&mut app)
        .insert_resource(ChurnPerFrame(args.churn))
        .add_systems(Update, churn_buffers);
    if args.interleave > 0 {
        app.insert_resource(Interleave(BlockInterleave::new(
            args.interleave,
            args.warmup,
            args.frames,
        )))
        .add_systems(First, interleave_frame);
    } else {
        app.insert_resource(FrameTimes::new(args.plugin, args.warmup, args.frames))
            .add_systems(First, time_frame);
        let flush_every = std::env::var("FRAME_OVERHEAD_FLUSH_EVERY").ok();
        if let Some(every) = flush_every
            .and_then(|v| v.parse().ok())
            .filter(|&n: &u64| n > 0)
        {
            app.insert_resource(FlushWaits {
                every,
                frame: 0,
                waits_us: Vec::new(),
            })
            .add_systems(Update, time_flush);
        }
    }
    if args.scene {
        app.add_systems(Startup, scene);
        app.sub_app_mut(bevy::render::RenderApp).add_systems(
            bevy::render::Render,
            wait_for_gpu.in_set(bevy::render::RenderSystems::Cleanup),
        );
    }
    app.run()
}

/// Frame time = time between the starts of two consecutive main-world frames (with pipelined
/// rendering that includes waiting for the render world).
fn time_frame(
    mut times: ResMut<FrameTimes>,
    reporter: Option<Res<GpuCrashReporter>>,
    flushes: Option<Res<FlushWaits>>,
    mut exit: MessageWriter<AppExit>,
) {
    let marker_buffers = reporter.as_ref().map_or(0, |r| r.marker_command_buffers());
    if let Some(summary) = times.frame_started(Instant::now(), marker_buffers) {
        println!("{}", summary.line("frame_overhead", reporter.as_deref()));
        if let Some(flushes) = flushes {
            println!("{}", flushes.line());
        }
        exit.write(AppExit::Success);
    }
}

/// `FRAME_OVERHEAD_FLUSH_EVERY`: how long folding everything published took, each time it was asked.
#[derive(Resource)]
struct FlushWaits {
    every: u64,
    frame: u64,
    waits_us: Vec<f64>,
}

impl FlushWaits {
    /// `frame_overhead_flush flushes=.. median_us=.. p99_us=.. max_us=..`
    fn line(&self) -> String {
        let mut waits = self.waits_us.clone();
        waits.sort_by(f64::total_cmp);
        let at = |q: f64| {
            waits
                .get(((waits.len() as f64 - 1.0) * q).round() as usize)
                .copied()
        };
        format!(
            "frame_overhead_flush flushes={} median_us={:.1} p99_us={:.1} max_us={:.1}",
            waits.len(),
            at(0.5).unwrap_or(0.0),
            at(0.99).unwrap_or(0.0),
            at(1.0).unwrap_or(0.0),
        )
    }
}

/// Every `every` frames, times the fold of everything published (a crash's first step).
fn time_flush(mut flushes: ResMut<FlushWaits>, reporter: Option<Res<GpuCrashReporter>>) {
    flushes.frame += 1;
    let Some(reporter) = reporter else { return };
    if flushes.frame.is_multiple_of(flushes.every) {
        let started = Instant::now();
        let _ = reporter.index_stats();
        let waited = started.elapsed().as_secs_f64() * 1e6;
        flushes.waits_us.push(waited);
    }
}

/// `--interleave`: blocks of frames alternating between everything on (A) and the floor (B) in one
/// process.
#[derive(Resource)]
struct Interleave(BlockInterleave);

fn interleave_frame(
    mut state: ResMut<Interleave>,
    reporter: Option<Res<GpuCrashReporter>>,
    mut exit: MessageWriter<AppExit>,
) {
    match state.0.frame_started(Instant::now()) {
        Step::Go => {}
        Step::Switch { a } => gpu_crash_core::test_support::set_cost_floor_now(!a),
        Step::Done => {
            println!("{}", interleave_summary(&state.0, reporter.as_deref()));
            exit.write(AppExit::Success);
        }
    }
}

/// `frame_overhead_interleave block=.. pairs=.. ratio_mean=.. ratio_pairs_median=.. ratio_cpu=..
/// on_mean_us=.. floor_mean_us=.. on_cpu_us_per_frame=.. floor_cpu_us_per_frame=.. events=.. dropped=..`
fn interleave_summary(state: &BlockInterleave, reporter: Option<&GpuCrashReporter>) -> String {
    let s = state.summary();
    let (events, dropped) = reporter
        .map(|r| (r.index_stats().events, r.binding_events_dropped()))
        .unwrap_or((0, 0));
    format!(
        "frame_overhead_interleave block={} pairs={} ratio_mean={:.4} ratio_pairs_median={:.4} \
         ratio_cpu={:.4} on_mean_us={:.1} floor_mean_us={:.1} on_cpu_us_per_frame={:.1} \
         floor_cpu_us_per_frame={:.1} events={events} dropped={dropped}",
        s.block,
        s.pairs,
        s.ratio_mean,
        s.ratio_pairs_median,
        s.ratio_cpu,
        s.a_mean_us,
        s.b_mean_us,
        s.a_cpu_us_per_frame,
        s.b_cpu_us_per_frame,
    )
}

/// `--compare --interleave`: `rounds` interleaved processes, their ratios' median and spread.
fn compare_interleaved(args: &Args) {
    println!(
        "frame_overhead --compare --interleave {}: {} processes, each {} timed frames after {} warm-up \
         in blocks of {} frames alternating everything on / floor, {} buffers created+destroyed per frame",
        args.interleave, args.rounds, args.frames, args.warmup, args.interleave, args.churn
    );
    let exe = std::env::current_exe().expect("own executable");
    let mut ratios: [Vec<f64>; 3] = Default::default();
    for _ in 0..args.rounds {
        let out = std::process::Command::new(&exe)
            .args(["--interleave", &args.interleave.to_string()])
            .args(["--frames", &args.frames.to_string()])
            .args(["--warmup", &args.warmup.to_string()])
            .args(["--churn", &args.churn.to_string()])
            .output()
            .expect("run an interleaved child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(line) = stdout
            .lines()
            .find(|l| l.starts_with("frame_overhead_interleave "))
        else {
            println!("  child printed no result ({})", out.status);
            continue;
        };
        println!("  {line}");
        for (i, name) in ["ratio_mean", "ratio_pairs_median", "ratio_cpu"]
            .iter()
            .enumerate()
        {
            if let Some(v) = frame_timing::line_field(line, name) {
                ratios[i].push(v);
            }
        }
    }
    let spread = |v: &[f64]| {
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(*x), hi.max(*x))
            });
        format!("x{:.3} ({lo:.3}-{hi:.3})", median(v))
    };
    println!(
        "frame_overhead interleaved [ours: everything on / floor, one process]: mean frame {}, \
         block pairs' median {}, CPU/frame {} (median over {} processes, min-max)",
        spread(&ratios[0]),
        spread(&ratios[1]),
        spread(&ratios[2]),
        ratios[0].len()
    );
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
fn run_child(args: &Args, plugin: u8) -> RunResult {
    let mut child_args: Vec<String> = [
        "--frames",
        &args.frames.to_string(),
        "--warmup",
        &args.warmup.to_string(),
        "--churn",
        &args.churn.to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    if args.scene {
        child_args.push("--scene".into());
    }
    frame_timing::run_child("frame_overhead", &child_args, plugin)
}

fn compare(args: &Args) {
    println!(
        "frame_overhead --compare: {} rounds of configurations {:?} (0 no plugin, 2 capture off, 3 \
         no breadcrumbs, 4 floor, 5 no fold, 1 everything on; order rotated each round), {} frames each after \
         {} warm-up, {} buffers created+destroyed per frame, 3D scene {}",
        args.rounds,
        args.configs,
        args.frames,
        args.warmup,
        args.churn,
        if args.scene { "on" } else { "off" }
    );
    // Per configuration: each round's run.
    let mut runs: [Vec<RunResult>; 6] = Default::default();
    for round in 0..args.rounds {
        let n = args.configs.len();
        for k in 0..n {
            let plugin = args.configs[(round + k) % n];
            let r = run_child(args, plugin);
            println!("  {}", r.line);
            runs[plugin as usize].push(r);
        }
    }
    let ran = |c: u8| !runs[c as usize].is_empty();
    let names = [
        "no plugin",
        "plugin",
        "plugin without binding capture",
        "plugin without breadcrumbs",
        "floor (binding report dropped unread)",
        "no fold (events drained and dropped, not indexed)",
    ];
    for &plugin in &args.configs {
        let r = &runs[plugin as usize];
        let of = |f: fn(&RunResult) -> f64| median(&r.iter().map(f).collect::<Vec<_>>());
        println!(
            "frame_overhead summary [{}]: median frame {:.1} us, mean frame {:.1} us, CPU/frame {:.1} \
             us (medians over rounds); binding events per run {:?}, dropped {:?}",
            names[plugin as usize],
            of(|r| r.median_us),
            of(|r| r.mean_us),
            of(|r| r.cpu_us),
            r.iter().map(|r| r.events).collect::<Vec<_>>(),
            r.iter().map(|r| r.dropped).collect::<Vec<_>>(),
        );
        println!(
            "frame_overhead threads [{}]: CPU us/frame by thread, medians over rounds: {}",
            names[plugin as usize],
            frame_timing::thread_medians(r, 1.0)
                .iter()
                .map(|(name, us)| format!("{name} {us:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    // Events per frame, from the everything-on runs (start-up and warm-up events included).
    let events_per_frame = ran(1).then(|| {
        median(&runs[1].iter().map(|r| r.events as f64).collect::<Vec<_>>())
            / (args.warmup + args.frames) as f64
    });
    let share = |what: &str, a: u8, b: u8| {
        if !(ran(a) && ran(b)) {
            return;
        }
        let paired = |f: fn(&RunResult) -> f64| -> Vec<f64> {
            runs[a as usize]
                .iter()
                .zip(&runs[b as usize])
                .map(|(x, y)| f(x) / f(y))
                .collect()
        };
        let (mean, cpu) = (paired(|r| r.mean_us), paired(|r| r.cpu_us));
        let of = |c: u8, f: fn(&RunResult) -> f64| {
            median(&runs[c as usize].iter().map(f).collect::<Vec<_>>())
        };
        let extra_ms = (of(a, |r| r.mean_us) - of(b, |r| r.mean_us)) / 1000.0;
        let list = |v: &[f64]| {
            v.iter()
                .map(|r| format!("{r:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let per_event = events_per_frame
            .filter(|e| *e > 0.0)
            .map(|e| format!(", {:.0} ns per binding event", extra_ms * 1e6 / e))
            .unwrap_or_default();
        println!(
            "frame_overhead share [{what}]: mean frame x{:.3} per round [{}], CPU/frame x{:.3} [{}]; \
             {extra_ms:+.3} ms per frame{per_event}",
            median(&mean),
            list(&mean),
            median(&cpu),
            list(&cpu),
        );
    };
    share("debug-utils naming: capture off / no plugin", 2, 0);
    share("the driver's binding report: floor / capture off", 4, 2);
    share("ours: everything on / floor", 1, 4);
    share("callback and ring: no fold / floor", 5, 4);
    share("the index: everything on / no fold", 1, 5);
    share("all: everything on / no plugin", 1, 0);
    share("breadcrumbs: everything on / no breadcrumbs", 1, 3);
    if let Some(e) = events_per_frame {
        println!("frame_overhead summary: about {e:.0} binding events per frame (everything on)");
    }
}
