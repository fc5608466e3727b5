//! Frame time of the GPU crash reporter in a realistic 3D scene: a headless Bevy app renders
//! thousands of PBR meshes (several shapes and `StandardMaterial`s, one emissive, one alpha-blended)
//! under a shadowed directional light and shadowed point lights into a 1920x1080 offscreen image.
//! Every mesh moves every frame, and every frame `--churn` meshes are despawned and as many spawned,
//! half of them with freshly created `Mesh` assets (uploaded, and freed when their entity goes).
//!
//! The plugin hooks device creation, so the configurations must be separate processes. `--compare`
//! runs this executable `--rounds` times per configuration, the configurations alternating within
//! each round (the environment passed through, e.g. `VK_DRIVER_FILES`):
//!
//! * 0: no plugin,
//! * 1: `GpuCrashReporterPlugin` with everything on (address-binding capture, GPU breadcrumbs),
//! * 2: the plugin with `capture_address_bindings: false`,
//! * 3: the plugin with `gpu_breadcrumbs: false`,
//! * 6: the plugin with `name_assets: false` (no asset map: config 1 against 6 is its cost),
//! * 4 (`--floor`, not in `--compare`'s default list): the plugin with everything on and
//!   `GPU_CRASH_REPORTER_COST_FLOOR` set: the driver's binding report stays on, our messenger
//!   callback returns at once (nothing decoded, pushed or indexed): the driver's share alone.
//!
//! `--buffer-churn N` adds N labelled wgpu buffers (4 KiB, `churn_buffer_<frame>_<i>`, every label
//! distinct) created through Bevy's `RenderDevice` every frame and destroyed the next frame.
//!
//! `--minutes M` (issue 47's long session): one process runs M minutes after the warm-up and prints
//! one `realistic_scene_minute` line a minute (frames, mean and p90 frame, process CPU, the CPU of
//! the reporter's own threads (`comm` starting `gpu-crash`), the time the buffer churn and the GPU
//! wait took a frame, the index's counters and ranges, binding events dropped, the asset map's bytes,
//! RSS) and one `realistic_scene_minute_threads` line (CPU seconds that minute of the busiest thread
//! groups): whether any cost grows with time, and where.
//!
//! One run prints `realistic_scene plugin=<0|1|3> frames=.. median_us=.. mean_us=.. p90_us=..
//! cpu_us_per_frame=.. events=.. dropped=..` (events: binding events the reporter indexed, 0 where
//! the driver gives no binding report). `--compare` prints, per configuration, the median over the
//! rounds of the runs' medians and p90s, every round's median, and the ratios against no plugin
//! (and breadcrumbs on / off), also as the median of per-round ratios. `--configs 3,1` runs only the
//! listed configurations.
//!
//! ```sh
//! cd bench/realistic_scene && cargo build --release
//! ../../target/release/realistic_scene --compare --rounds 5 --frames 600 --warmup 120
//! ```
//!
//! The run harness, GPU wait and offscreen target are the root crate's `examples/support/`
//! (`frame_timing.rs`, `mod.rs`), shared with `examples/frame_overhead.rs`.

#[path = "../../../examples/support/mod.rs"]
mod support;

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bevy::app::ScheduleRunnerPlugin;
use bevy::core_pipeline::tonemapping::Tonemapping;
use bevy::light::CascadeShadowConfigBuilder;
use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::{RenderAdapterInfo, RenderDevice};
use bevy_gpu_crash_reporter::{
    GpuCrashCapabilities, GpuCrashReporter, GpuCrashReporterPlugin, ReporterSettings,
};
use support::frame_timing::{
    self, median, process_cpu_time, thread_cpu_times, wait_for_gpu, FrameTimes, RunResult,
    ThreadCpu,
};
use support::interleave::{BlockInterleave, Step};
use support::offscreen_target;

/// Size of the offscreen render target.
const WIDTH: u32 = 1920;
const HEIGHT: u32 = 1080;
/// Every `FRESH_EVERY`-th spawned mesh gets a `Mesh` asset of its own, created that frame.
const FRESH_EVERY: usize = 2;
/// The configurations `--compare` runs, in the order of its first round.
const CONFIGS: [u8; 5] = [0, 2, 3, 1, 6];

fn config_name(plugin: u8) -> &'static str {
    match plugin {
        0 => "no plugin",
        1 => "plugin (all on)",
        2 => "plugin, capture_address_bindings: false",
        3 => "plugin, gpu_breadcrumbs: false",
        6 => "plugin, name_assets: false",
        4 => "plugin, binding report on, callback returns at once (GPU_CRASH_REPORTER_COST_FLOOR)",
        _ => "?",
    }
}

struct Args {
    /// 0: no plugin, 1: plugin with everything on, 3: plugin without GPU breadcrumbs.
    plugin: u8,
    compare: bool,
    rounds: usize,
    frames: usize,
    warmup: usize,
    meshes: usize,
    churn: usize,
    seed: u64,
    /// The configurations `--compare` runs (default: all of [`CONFIGS`]).
    configs: Vec<u8>,
    /// `--interleave-names BLOCK`: one process, the pipeline naming paused and resumed every BLOCK
    /// frames (0: off).
    interleave_names: usize,
    /// `--buffer-churn N`: labelled buffers created (and destroyed the next frame) every frame.
    buffer_churn: usize,
    /// `--minutes M`: a long session of M minutes, one line a minute (0: off).
    minutes: u32,
}

fn parse_args() -> Args {
    let mut args = Args {
        plugin: 1,
        compare: false,
        rounds: 3,
        frames: 300,
        warmup: 60,
        meshes: 3_000,
        churn: 50,
        seed: 0x5eed_cafe,
        configs: CONFIGS.to_vec(),
        interleave_names: 0,
        buffer_churn: 0,
        minutes: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} takes a number"))
        };
        match a.as_str() {
            "--no-plugin" => args.plugin = 0,
            "--no-bindings" => args.plugin = 2,
            "--no-breadcrumbs" => args.plugin = 3,
            "--no-asset-map" => args.plugin = 6,
            "--floor" => args.plugin = 4,
            "--buffer-churn" => args.buffer_churn = number("--buffer-churn") as usize,
            "--minutes" => args.minutes = number("--minutes") as u32,
            "--compare" => args.compare = true,
            "--rounds" => args.rounds = number("--rounds") as usize,
            "--frames" => args.frames = number("--frames") as usize,
            "--warmup" => args.warmup = number("--warmup") as usize,
            "--meshes" => args.meshes = number("--meshes") as usize,
            "--churn" => args.churn = number("--churn") as usize,
            "--seed" => args.seed = number("--seed"),
            "--interleave-names" => {
                args.interleave_names = number("--interleave-names").max(4) as usize
            }
            "--configs" => {
                let list = it.next().unwrap_or_default();
                args.configs = list
                    .split(',')
                    .map(|c| match c.parse() {
                        Ok(c) if CONFIGS.contains(&c) || c == 4 => c,
                        _ => panic!("--configs takes a list of 0, 1, 2, 3, 4, 6 (got {list:?})"),
                    })
                    .collect();
            }
            other => panic!(
                "unknown argument {other}; usage: realistic_scene [--no-plugin | --no-breadcrumbs] \
                 [--compare] [--rounds N] [--frames N] [--warmup N] [--meshes N] [--churn N] \
                 [--seed N] [--configs 0,2,3,1,6] [--no-asset-map] [--floor] \
                 [--interleave-names BLOCK] [--buffer-churn N] [--minutes M]"
            ),
        }
    }
    assert!(args.frames > 0, "--frames must be at least 1");
    assert!(
        args.churn <= args.meshes,
        "--churn cannot exceed --meshes (meshes replaced per frame out of those alive)"
    );
    args
}

fn main() -> AppExit {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // SAFETY (process-global, but no other thread exists yet).
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let args = parse_args();
    if args.plugin == 4 {
        // The binding report stays on; the messenger's callback returns at once. Read when the
        // messenger is registered (process-global, but no other thread exists yet).
        std::env::set_var("GPU_CRASH_REPORTER_COST_FLOOR", "1");
    }
    if args.compare {
        compare(&args);
        return AppExit::Success;
    }
    let mut app = App::new();
    if args.plugin != 0 {
        // Before DefaultPlugins: the plugin hooks the creation of the Vulkan instance and device.
        app.add_plugins(GpuCrashReporterPlugin {
            settings: ReporterSettings {
                gpu_breadcrumbs: args.plugin != 3,
                capture_address_bindings: args.plugin != 2,
                application_name: Some("realistic_scene".into()),
                report_dir: Some(std::env::temp_dir().join("realistic_scene_reports")),
                ..default()
            },
            name_assets: args.plugin != 6,
            ..default()
        });
    }
    app.add_plugins(support::headless_vulkan_plugins())
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
        .insert_resource(FrameTimes::new(args.plugin, args.warmup, args.frames))
        .insert_resource(SceneConfig {
            meshes: args.meshes,
            churn: args.churn,
            buffer_churn: args.buffer_churn,
        })
        .insert_resource(Rng(args.seed))
        .insert_resource(FrameCount(0))
        .add_systems(Startup, setup_scene)
        .add_systems(Update, (churn_meshes, animate).chain());
    if args.buffer_churn > 0 {
        app.add_systems(Update, churn_buffers);
    }
    if args.minutes > 0 {
        app.insert_resource(LongSession::new(args.plugin, args.warmup, args.minutes))
            .add_systems(First, long_session_minute);
        app.sub_app_mut(bevy::render::RenderApp).add_systems(
            bevy::render::Render,
            timed_wait_for_gpu.in_set(bevy::render::RenderSystems::Cleanup),
        );
        return app.run();
    }
    if args.interleave_names > 0 {
        app.insert_resource(NamesInterleave(BlockInterleave::new(
            args.interleave_names,
            args.warmup,
            args.frames,
        )))
        .add_systems(First, interleave_names);
    } else {
        app.add_systems(First, time_frame);
    }
    app.sub_app_mut(bevy::render::RenderApp).add_systems(
        bevy::render::Render,
        wait_for_gpu.in_set(bevy::render::RenderSystems::Cleanup),
    );
    app.run()
}

// ---------------------------------------------------------------------------------------------
// The scene.

/// SplitMix64: a small deterministic generator, so every run (and configuration) sees the same
/// scene and the same churn.
#[derive(Resource)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }

    fn index(&mut self, len: usize) -> usize {
        (self.next_u64() % len as u64) as usize
    }
}

#[derive(Resource)]
struct SceneConfig {
    meshes: usize,
    churn: usize,
    /// Labelled buffers created (and destroyed the next frame) every frame.
    buffer_churn: usize,
}

/// Main-world frames since start (the animation clock: fixed steps, so every run moves the same).
#[derive(Resource)]
struct FrameCount(u64);

/// The long-lived shapes and materials spawned meshes pick from.
#[derive(Resource)]
struct SceneAssets {
    shapes: Vec<Handle<Mesh>>,
    materials: Vec<Handle<StandardMaterial>>,
}

/// Scene meshes alive, oldest first: the churn despawns from the front.
#[derive(Resource, Default)]
struct LiveMeshes(VecDeque<Entity>);

/// Per-mesh motion: a spin about `axis` and a vertical bob about `base`.
#[derive(Component)]
struct Animated {
    base: Vec3,
    axis: Dir3,
    spin: f32,
    bob: f32,
    phase: f32,
}

/// The volume meshes live in (x and z in [-HALF_EXTENT, HALF_EXTENT]).
const HALF_EXTENT: f32 = 40.0;

fn setup_scene(
    mut commands: Commands,
    mut images: ResMut<Assets<Image>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    config: Res<SceneConfig>,
    mut rng: ResMut<Rng>,
) {
    commands.spawn((
        Name::new("main"),
        Camera3d::default(),
        // Tonemapping without the LUTs (the root crate's Bevy features do not include
        // `tonemapping_luts`, and the default TonyMcMapface needs them).
        Tonemapping::AcesFitted,
        offscreen_target(&mut images, WIDTH, HEIGHT),
        Transform::from_xyz(0.0, 38.0, 62.0).looking_at(Vec3::new(0.0, 0.0, -4.0), Vec3::Y),
    ));

    let shapes = vec![
        meshes.add(Cuboid::new(1.0, 1.0, 1.0)),
        meshes.add(Sphere::new(0.6).mesh().uv(24, 16)),
        meshes.add(Torus::new(0.25, 0.6)),
        meshes.add(Cylinder::new(0.45, 1.2)),
        meshes.add(Capsule3d::new(0.35, 0.8)),
    ];
    let materials = vec![
        // Painted dielectric.
        materials.add(StandardMaterial {
            base_color: Color::srgb(0.8, 0.25, 0.2),
            perceptual_roughness: 0.6,
            ..default()
        }),
        // Polished gold.
        materials.add(StandardMaterial {
            base_color: Color::srgb(1.0, 0.78, 0.34),
            metallic: 1.0,
            perceptual_roughness: 0.2,
            ..default()
        }),
        // Rough blue plastic.
        materials.add(StandardMaterial {
            base_color: Color::srgb(0.15, 0.35, 0.85),
            perceptual_roughness: 0.9,
            reflectance: 0.3,
            ..default()
        }),
        // Brushed steel.
        materials.add(StandardMaterial {
            base_color: Color::srgb(0.6, 0.62, 0.65),
            metallic: 0.9,
            perceptual_roughness: 0.45,
            ..default()
        }),
        // Emissive.
        materials.add(StandardMaterial {
            base_color: Color::srgb(0.1, 0.9, 0.4),
            emissive: LinearRgba::rgb(0.4, 4.0, 1.5),
            ..default()
        }),
        // Alpha-blended glass: drawn in the transparent pass, sorted back to front.
        materials.add(StandardMaterial {
            base_color: Color::srgba(0.7, 0.85, 1.0, 0.35),
            alpha_mode: AlphaMode::Blend,
            perceptual_roughness: 0.1,
            ..default()
        }),
    ];

    // Ground plane: receives the shadows.
    commands.spawn((
        Name::new("ground"),
        Mesh3d(
            meshes.add(
                Plane3d::default()
                    .mesh()
                    .size(2.0 * HALF_EXTENT + 10.0, 2.0 * HALF_EXTENT + 10.0),
            ),
        ),
        MeshMaterial3d(materials[2].clone()),
        Transform::from_xyz(0.0, -1.0, 0.0),
    ));

    commands.spawn((
        Name::new("sun"),
        DirectionalLight {
            illuminance: 8_000.0,
            shadow_maps_enabled: true,
            ..default()
        },
        CascadeShadowConfigBuilder {
            num_cascades: 4,
            maximum_distance: 140.0,
            ..default()
        }
        .build(),
        Transform::from_xyz(20.0, 40.0, 15.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let light_colors = [
        Color::srgb(1.0, 0.6, 0.3),
        Color::srgb(0.4, 0.6, 1.0),
        Color::srgb(1.0, 0.3, 0.7),
        Color::srgb(0.6, 1.0, 0.5),
    ];
    for (i, color) in light_colors.into_iter().enumerate() {
        let (x, z) = match i {
            0 => (-20.0, -20.0),
            1 => (20.0, -20.0),
            2 => (-20.0, 20.0),
            _ => (20.0, 20.0),
        };
        commands.spawn((
            Name::new(format!("lamp_{i}")),
            PointLight {
                color,
                intensity: 4_000_000.0,
                range: 35.0,
                shadow_maps_enabled: true,
                ..default()
            },
            Transform::from_xyz(x, 8.0, z),
        ));
    }

    let assets = SceneAssets { shapes, materials };
    let mut live = LiveMeshes::default();
    for _ in 0..config.meshes {
        live.0
            .push_back(spawn_mesh(&mut commands, &assets, &mut rng, None));
    }
    commands.insert_resource(assets);
    commands.insert_resource(live);
}

/// Spawns one scene mesh at a random place, with `fresh` as its mesh or else a shared shape.
fn spawn_mesh(
    commands: &mut Commands,
    assets: &SceneAssets,
    rng: &mut Rng,
    fresh: Option<Handle<Mesh>>,
) -> Entity {
    let mesh = fresh.unwrap_or_else(|| assets.shapes[rng.index(assets.shapes.len())].clone());
    let material = assets.materials[rng.index(assets.materials.len())].clone();
    let base = Vec3::new(
        rng.range(-HALF_EXTENT, HALF_EXTENT),
        rng.range(0.0, 6.0),
        rng.range(-HALF_EXTENT, HALF_EXTENT),
    );
    let axis = Dir3::new(Vec3::new(
        rng.range(-1.0, 1.0),
        rng.range(0.2, 1.0),
        rng.range(-1.0, 1.0),
    ))
    .unwrap_or(Dir3::Y);
    let scale = rng.range(0.5, 1.4);
    let animated = Animated {
        base,
        axis,
        spin: rng.range(0.5, 3.0),
        bob: rng.range(0.2, 1.0),
        phase: rng.range(0.0, std::f32::consts::TAU),
    };
    commands
        .spawn((
            Mesh3d(mesh),
            MeshMaterial3d(material),
            Transform::from_translation(base).with_scale(Vec3::splat(scale)),
            animated,
        ))
        .id()
}

/// A mesh asset of its own for a churned-in entity: a random shape with random proportions and
/// tessellation, so its vertex and index data are new every time.
fn fresh_mesh(rng: &mut Rng) -> Mesh {
    match rng.index(3) {
        0 => Cuboid::new(
            rng.range(0.5, 1.5),
            rng.range(0.5, 1.5),
            rng.range(0.5, 1.5),
        )
        .into(),
        1 => Sphere::new(rng.range(0.4, 0.8))
            .mesh()
            .uv(8 + rng.index(24) as u32, 6 + rng.index(16) as u32),
        _ => Torus::new(rng.range(0.15, 0.35), rng.range(0.5, 0.8))
            .mesh()
            .minor_resolution(8 + rng.index(16))
            .major_resolution(12 + rng.index(24))
            .build(),
    }
}

/// Per-frame asset churn: despawn the `churn` oldest meshes and spawn as many new ones, every
/// `FRESH_EVERY`-th with a new `Mesh` asset. A despawned entity drops the last handle of its fresh
/// mesh, so Bevy removes the asset and frees its GPU data; the new ones are uploaded (through wgpu
/// staging buffers created for the copy).
fn churn_meshes(
    mut commands: Commands,
    mut live: ResMut<LiveMeshes>,
    assets: Res<SceneAssets>,
    config: Res<SceneConfig>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut rng: ResMut<Rng>,
) {
    for _ in 0..config.churn {
        if let Some(entity) = live.0.pop_front() {
            commands.entity(entity).despawn();
        }
    }
    for i in 0..config.churn {
        let fresh = (i % FRESH_EVERY == 0).then(|| meshes.add(fresh_mesh(&mut rng)));
        let entity = spawn_mesh(&mut commands, &assets, &mut rng, fresh);
        live.0.push_back(entity);
    }
}

/// Every mesh spins and bobs, on a fixed 60 Hz clock (deterministic, whatever the frame time).
fn animate(mut frame: ResMut<FrameCount>, mut query: Query<(&Animated, &mut Transform)>) {
    frame.0 += 1;
    let t = frame.0 as f32 / 60.0;
    query.par_iter_mut().for_each(|(a, mut transform)| {
        transform.rotation = Quat::from_axis_angle(a.axis.into(), a.phase + t * a.spin);
        transform.translation = a.base + Vec3::Y * (a.bob * (a.phase + t * 2.0 * a.spin).sin());
    });
}

// ---------------------------------------------------------------------------------------------
// Measurement (examples/support/frame_timing.rs).

fn time_frame(
    mut times: ResMut<FrameTimes>,
    reporter: Option<Res<GpuCrashReporter>>,
    capabilities: Option<Res<GpuCrashCapabilities>>,
    adapter: Option<Res<RenderAdapterInfo>>,
    mut exit: MessageWriter<AppExit>,
) {
    let marker_buffers = reporter.as_ref().map_or(0, |r| r.marker_command_buffers());
    let Some(summary) = times.frame_started(Instant::now(), marker_buffers) else {
        return;
    };
    println!(
        "realistic_scene_info plugin={} adapter={:?} binding_report={} buffer_marker={}",
        summary.plugin,
        adapter.map(|a| a.name.clone()).unwrap_or_default(),
        capabilities
            .as_ref()
            .is_some_and(|c| c.address_binding_report),
        capabilities.as_ref().is_some_and(|c| c.buffer_marker),
    );
    println!("{}", summary.line("realistic_scene", reporter.as_deref()));
    if let Some(reporter) = &reporter {
        let assets = reporter.indexed_assets();
        println!(
            "realistic_scene_assets plugin={} meshes={} images={} bytes={}",
            summary.plugin, assets.meshes, assets.images, assets.bytes
        );
    }
    exit.write(AppExit::Success);
}

// ---------------------------------------------------------------------------------------------
// --buffer-churn: labelled buffers made and destroyed every frame.

/// Nanoseconds the buffer churn took (create and destroy), summed over frames.
static CHURN_NS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds the render world waited for the GPU (`--minutes` only), summed over frames.
static GPU_WAIT_NS: AtomicU64 = AtomicU64::new(0);

/// Size of one churned buffer.
const CHURN_BUFFER_BYTES: u64 = 4096;

/// The buffers made last frame, destroyed this frame.
#[derive(Default)]
struct BufferChurn {
    frame: u64,
    last: Vec<Buffer>,
    label: String,
}

/// Every frame: destroys the buffers made last frame and makes `buffer_churn` new ones through
/// Bevy's `RenderDevice`, each with a label of its own (`churn_buffer_<frame>_<i>`), as a game that
/// streams labelled per-frame data does. Each is bound to memory when made (a binding report) and
/// unbound when destroyed (another).
fn churn_buffers(
    device: Res<RenderDevice>,
    config: Res<SceneConfig>,
    mut churn: Local<BufferChurn>,
) {
    let started = Instant::now();
    let churn = &mut *churn;
    for buffer in churn.last.drain(..) {
        buffer.destroy();
    }
    for i in 0..config.buffer_churn {
        churn.label.clear();
        let _ = write!(churn.label, "churn_buffer_{}_{i}", churn.frame);
        churn.last.push(device.create_buffer(&BufferDescriptor {
            label: Some(&churn.label),
            size: CHURN_BUFFER_BYTES,
            usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
    }
    churn.frame += 1;
    CHURN_NS.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// [`wait_for_gpu`], its time summed into [`GPU_WAIT_NS`].
fn timed_wait_for_gpu(device: Res<RenderDevice>) {
    let started = Instant::now();
    wait_for_gpu(device);
    GPU_WAIT_NS.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

// ---------------------------------------------------------------------------------------------
// --minutes: a long session, one line a minute (issue 47).

/// Prefix of the reporter's own threads' names (`comm`, at most 15 bytes): gpu-crash-indexer (as
/// `gpu-crash-index`), gpu-crash-burst, gpu-crash-watchdog, gpu-crash-query, gpu-crash-upload, ...
/// The messenger callback runs on the thread that binds (the game's and the driver's), not here.
const OUR_THREADS: &str = "gpu-crash";

/// What one minute's line is computed from: the frame times since the minute began and the
/// counters at its start.
#[derive(Resource)]
struct LongSession {
    plugin: u8,
    warmup: usize,
    minutes: u32,
    /// Every minute printed; the app is exiting.
    done: bool,
    /// Frames started so far (warm-up included).
    seen: usize,
    last: Option<Instant>,
    /// The minute now running (1-based; 0 during the warm-up).
    minute: u32,
    minute_started: Instant,
    times: Vec<Duration>,
    cpu_at: Duration,
    threads_at: Vec<ThreadCpu>,
    churn_ns_at: u64,
    gpu_wait_ns_at: u64,
    events_at: u64,
}

impl LongSession {
    fn new(plugin: u8, warmup: usize, minutes: u32) -> Self {
        Self {
            plugin,
            warmup,
            minutes,
            done: false,
            seen: 0,
            last: None,
            minute: 0,
            minute_started: Instant::now(),
            times: Vec::new(),
            cpu_at: Duration::ZERO,
            threads_at: Vec::new(),
            churn_ns_at: 0,
            gpu_wait_ns_at: 0,
            events_at: 0,
        }
    }

    /// Starts minute `minute` at `now` with the counters as they are.
    fn begin_minute(&mut self, minute: u32, now: Instant, events: u64) {
        self.minute = minute;
        self.minute_started = now;
        self.times.clear();
        self.cpu_at = process_cpu_time().unwrap_or_default();
        self.threads_at = thread_cpu_times();
        self.churn_ns_at = CHURN_NS.load(Ordering::Relaxed);
        self.gpu_wait_ns_at = GPU_WAIT_NS.load(Ordering::Relaxed);
        self.events_at = events;
    }
}

/// Resident set size in KiB (`VmRSS` of `/proc/self/status`), 0 where that does not exist.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU seconds between two snapshots by thread group (digits folded to `#`), largest first, and
/// the part of the reporter's own threads.
fn minute_threads(start: &[ThreadCpu], end: &[ThreadCpu]) -> (Vec<(String, f64)>, f64) {
    // cpu_by_thread_name gives microseconds per "frame"; with 1 frame, microseconds.
    let groups: Vec<(String, f64)> = frame_timing::cpu_by_thread_name(start, end, 1)
        .into_iter()
        .map(|(name, us)| (name, us / 1e6))
        .collect();
    // A fold from +0.0: a sum of no threads (no plugin) prints 0, not -0.
    let ours = groups
        .iter()
        .filter(|(name, _)| name.starts_with(OUR_THREADS))
        .fold(0.0, |total, (_, s)| total + s);
    (groups, ours)
}

fn long_session_minute(
    mut state: ResMut<LongSession>,
    reporter: Option<Res<GpuCrashReporter>>,
    capabilities: Option<Res<GpuCrashCapabilities>>,
    adapter: Option<Res<RenderAdapterInfo>>,
    mut exit: MessageWriter<AppExit>,
) {
    if state.done {
        return;
    }
    let now = Instant::now();
    let Some(last) = state.last.replace(now) else {
        return;
    };
    state.seen += 1;
    if state.seen == state.warmup.max(1) {
        println!(
            "realistic_scene_info plugin={} adapter={:?} binding_report={} buffer_marker={}",
            state.plugin,
            adapter.map(|a| a.name.clone()).unwrap_or_default(),
            capabilities
                .as_ref()
                .is_some_and(|c| c.address_binding_report),
            capabilities.as_ref().is_some_and(|c| c.buffer_marker),
        );
        let events = reporter.as_ref().map_or(0, |r| r.index_stats().events);
        state.begin_minute(1, now, events);
        return;
    }
    if state.minute == 0 {
        return;
    }
    state.times.push(now - last);
    if now - state.minute_started < Duration::from_secs(60) {
        return;
    }
    // The minute is over: its line, then the next minute (the index's counters, read here, fold
    // everything published first: that frame's time lands in the next minute).
    let wall = (now - state.minute_started).as_secs_f64();
    let mut sorted = state.times.clone();
    sorted.sort();
    let n = sorted.len().max(1);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean_ms = sorted.iter().map(|d| ms(*d)).sum::<f64>() / n as f64;
    let p90_ms = sorted.get(n * 9 / 10).map_or(f64::NAN, |d| ms(*d));
    let max_ms = sorted.last().map_or(f64::NAN, |d| ms(*d));
    let cpu_s = (process_cpu_time()
        .unwrap_or_default()
        .saturating_sub(state.cpu_at))
    .as_secs_f64();
    let threads_now = thread_cpu_times();
    let (groups, ours_s) = minute_threads(&state.threads_at, &threads_now);
    let per_frame_ms =
        |ns_now: u64, ns_at: u64| ns_now.saturating_sub(ns_at) as f64 / 1e6 / n as f64;
    let churn_ms = per_frame_ms(CHURN_NS.load(Ordering::Relaxed), state.churn_ns_at);
    let gpu_wait_ms = per_frame_ms(GPU_WAIT_NS.load(Ordering::Relaxed), state.gpu_wait_ns_at);
    let mut index = String::new();
    let mut events_now = 0;
    if let Some(reporter) = &reporter {
        let stats = reporter.index_stats();
        let (live, freed) = reporter.indexed_ranges();
        let assets = reporter.indexed_assets();
        events_now = stats.events;
        let _ = write!(
            index,
            " events={} events_minute={} binds={} unbinds={} live={live} freed={freed} \
             unmatched_unbinds={} live_overflow={} freed_evicted={} names_dropped={} \
             ring_dropped={} asset_meshes={} asset_images={} asset_bytes={}",
            stats.events,
            stats.events.saturating_sub(state.events_at),
            stats.binds,
            stats.unbinds,
            stats.unmatched_unbinds,
            stats.live_overflow,
            stats.freed_evicted,
            stats.names_dropped,
            reporter.binding_events_dropped(),
            assets.meshes,
            assets.images,
            assets.bytes,
        );
    }
    println!(
        "realistic_scene_minute plugin={} minute={} wall_s={wall:.1} frames={} mean_ms={mean_ms:.3} \
         p90_ms={p90_ms:.3} max_ms={max_ms:.3} cpu_s={cpu_s:.2} ours_cpu_s={ours_s:.3} \
         churn_ms={churn_ms:.3} gpu_wait_ms={gpu_wait_ms:.3} rss_mib={:.1}{index}",
        state.plugin,
        state.minute,
        sorted.len(),
        rss_kib() as f64 / 1024.0,
    );
    println!(
        "realistic_scene_minute_threads plugin={} minute={} cpu_s={}",
        state.plugin,
        state.minute,
        groups
            .iter()
            .take(10)
            .map(|(name, s)| format!("{name}:{s:.2}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    if state.minute >= state.minutes {
        exit.write(AppExit::Success);
        state.done = true;
        return;
    }
    let next = state.minute + 1;
    state.begin_minute(next, Instant::now(), events_now);
}

// ---------------------------------------------------------------------------------------------
// --interleave-names: the pipeline naming's cost inside one process.

/// Blocks of frames alternating the pipeline naming on (A) and paused (B) (the plugin's
/// `cost-switches`): the two states' mean frame and process CPU within one process.
#[derive(Resource)]
struct NamesInterleave(BlockInterleave);

fn interleave_names(mut state: ResMut<NamesInterleave>, mut exit: MessageWriter<AppExit>) {
    match state.0.frame_started(Instant::now()) {
        Step::Go => {}
        #[cfg(feature = "pipeline_names")]
        Step::Switch { a } => bevy_gpu_crash_reporter::set_pipeline_naming_paused(!a),
        #[cfg(not(feature = "pipeline_names"))]
        Step::Switch { .. } => {}
        Step::Done => {
            let s = state.0.summary();
            println!(
                "realistic_scene_names_interleave block={} pairs={} ratio_mean={:.4} \
                 ratio_pairs_median={:.4} ratio_cpu={:.4} on_mean_us={:.1} paused_mean_us={:.1}",
                s.block,
                s.pairs,
                s.ratio_mean,
                s.ratio_pairs_median,
                s.ratio_cpu,
                s.a_mean_us,
                s.b_mean_us,
            );
            exit.write(AppExit::Success);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// --compare: child processes, alternating.

/// One run of configuration `plugin` in a child process; prints its lines and its wall time.
fn run_child(args: &Args, plugin: u8) -> RunResult {
    let child_args = [
        "--frames",
        &args.frames.to_string(),
        "--warmup",
        &args.warmup.to_string(),
        "--meshes",
        &args.meshes.to_string(),
        "--churn",
        &args.churn.to_string(),
        "--seed",
        &args.seed.to_string(),
        "--buffer-churn",
        &args.buffer_churn.to_string(),
    ]
    .map(str::to_owned);
    let started = Instant::now();
    let run = frame_timing::run_child("realistic_scene", &child_args, plugin);
    for prefix in ["realistic_scene_info ", "realistic_scene_assets "] {
        if let Some(info) = run.stdout.lines().find(|l| l.starts_with(prefix)) {
            println!("  {info}");
        }
    }
    println!(
        "  {} wall_s={:.1}",
        run.line,
        started.elapsed().as_secs_f64()
    );
    run
}

/// The runs of one configuration, in round order.
#[derive(Default)]
struct ConfigRuns {
    median_us: Vec<f64>,
    mean_us: Vec<f64>,
    marker_cbs: Vec<f64>,
    p90_us: Vec<f64>,
    cpu_us: Vec<f64>,
    events: Vec<u64>,
    dropped: Vec<u64>,
}

fn compare(args: &Args) {
    let configs = &args.configs;
    let names: Vec<&str> = configs.iter().map(|&c| config_name(c)).collect();
    println!(
        "realistic_scene --compare: {} rounds of {:?} (order rotated each round), {} frames each \
         after {} warm-up; {} meshes, {} replaced per frame (one in {} with a new Mesh asset), \
         {} labelled buffers made and destroyed per frame, {}x{} offscreen, seed {}",
        args.rounds,
        names,
        args.frames,
        args.warmup,
        args.meshes,
        args.churn,
        FRESH_EVERY,
        args.buffer_churn,
        WIDTH,
        HEIGHT,
        args.seed
    );
    let mut runs: [ConfigRuns; 7] = Default::default();
    for round in 0..args.rounds {
        println!("round {}", round + 1);
        // Rotate the order, so no configuration always runs first (or right after another).
        for k in 0..configs.len() {
            let plugin = configs[(round + k) % configs.len()];
            let r = run_child(args, plugin);
            let c = &mut runs[plugin as usize];
            c.median_us.push(r.median_us);
            c.mean_us.push(r.mean_us);
            c.marker_cbs.push(r.marker_cbs_per_frame);
            c.p90_us.push(r.p90_us);
            c.cpu_us.push(r.cpu_us);
            c.events.push(r.events);
            c.dropped.push(r.dropped);
        }
    }
    for &plugin in configs {
        let c = &runs[plugin as usize];
        let rounds: Vec<String> = c.median_us.iter().map(|m| format!("{m:.0}")).collect();
        println!(
            "realistic_scene summary [{}]: median frame {:.1} us, mean frame {:.1} us, p90 {:.1} \
             us, CPU/frame {:.1} us (medians over rounds); round medians [{}] us; binding events \
             per run {:?}, dropped {:?}; marker command buffers per frame {:?}",
            config_name(plugin),
            median(&c.median_us),
            median(&c.mean_us),
            median(&c.p90_us),
            median(&c.cpu_us),
            rounds.join(", "),
            c.events,
            c.dropped,
            c.marker_cbs,
        );
    }
    let ran = |c: u8| configs.contains(&c);
    for &plugin in configs.iter().filter(|&&c| c != 0 && ran(0)) {
        print_ratio(
            &format!("{} / no plugin", config_name(plugin)),
            &runs[plugin as usize],
            &runs[0],
        );
    }
    if ran(1) && ran(3) {
        print_ratio(
            "breadcrumbs: all on / gpu_breadcrumbs false",
            &runs[1],
            &runs[3],
        );
    }
    if ran(1) && ran(6) {
        print_ratio("asset map: all on / name_assets false", &runs[1], &runs[6]);
    }
}

/// Two ways to compare configuration `a` with `b`: the ratio of their medians over rounds, and the
/// median of the per-round ratios (both ran in the same round, minutes apart at most, so drifts of
/// the machine cancel), with every round's ratio so the spread shows. Per round both the runs'
/// median and mean frames: on the H200 frame times are bimodal and a run's median can jump between
/// the modes, its mean does not.
fn print_ratio(what: &str, a: &ConfigRuns, b: &ConfigRuns) {
    let per_round =
        |x: &[f64], y: &[f64]| -> Vec<f64> { x.iter().zip(y).map(|(x, y)| x / y).collect() };
    let paired = per_round(&a.median_us, &b.median_us);
    let paired_mean = per_round(&a.mean_us, &b.mean_us);
    let paired_cpu = per_round(&a.cpu_us, &b.cpu_us);
    let list = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let frame = median(&a.median_us) / median(&b.median_us);
    println!(
        "realistic_scene ratio [{what}]: median {:.3} ({:+.1}%), p90 {:.3}, CPU/frame {:.3}; \
         per round: median {:.3} [{}], mean {:.3} [{}], CPU/frame {:.3} [{}]",
        frame,
        (frame - 1.0) * 100.0,
        median(&a.p90_us) / median(&b.p90_us),
        median(&a.cpu_us) / median(&b.cpu_us),
        median(&paired),
        list(&paired),
        median(&paired_mean),
        list(&paired_mean),
        median(&paired_cpu),
        list(&paired_cpu),
    );
}
