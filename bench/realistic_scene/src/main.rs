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
//! * 6: the plugin with `name_assets: false` (no asset map: config 1 against 6 is its cost).
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
use std::time::{Duration, Instant};

use bevy::app::ScheduleRunnerPlugin;
use bevy::core_pipeline::tonemapping::Tonemapping;
use bevy::light::CascadeShadowConfigBuilder;
use bevy::prelude::*;
use bevy::render::renderer::RenderAdapterInfo;
use bevy_gpu_crash_reporter::{GpuCrashCapabilities, GpuCrashReporter, GpuCrashReporterPlugin};
use support::frame_timing::{self, median, wait_for_gpu, FrameTimes, RunResult};
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
                        Ok(c) if CONFIGS.contains(&c) => c,
                        _ => panic!("--configs takes a list of 0, 1, 2, 3, 6 (got {list:?})"),
                    })
                    .collect();
            }
            other => panic!(
                "unknown argument {other}; usage: realistic_scene [--no-plugin | --no-breadcrumbs] \
                 [--compare] [--rounds N] [--frames N] [--warmup N] [--meshes N] [--churn N] \
                 [--seed N] [--configs 0,2,3,1,6] [--no-asset-map] [--interleave-names BLOCK]"
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
    if args.compare {
        compare(&args);
        return AppExit::Success;
    }
    let mut app = App::new();
    if args.plugin != 0 {
        // Before DefaultPlugins: the plugin hooks the creation of the Vulkan instance and device.
        app.add_plugins(GpuCrashReporterPlugin {
            gpu_breadcrumbs: args.plugin != 3,
            capture_address_bindings: args.plugin != 2,
            name_assets: args.plugin != 6,
            application_name: Some("realistic_scene".into()),
            report_dir: Some(std::env::temp_dir().join("realistic_scene_reports")),
            ..default()
        });
    }
    app.add_plugins(support::headless_vulkan_plugins())
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
        .insert_resource(FrameTimes::new(args.plugin, args.warmup, args.frames))
        .insert_resource(SceneConfig {
            meshes: args.meshes,
            churn: args.churn,
        })
        .insert_resource(Rng(args.seed))
        .insert_resource(FrameCount(0))
        .add_systems(Startup, setup_scene)
        .add_systems(Update, (churn_meshes, animate).chain());
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
         {}x{} offscreen, seed {}",
        args.rounds,
        names,
        args.frames,
        args.warmup,
        args.meshes,
        args.churn,
        FRESH_EVERY,
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
