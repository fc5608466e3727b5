//! A tiny headless Bevy game with the GPU crash reporter, and nothing of this repository's own
//! examples: what a studio's game looks like to `gpu-crash drill` (tests/drill.rs drills it).
//!
//! Each frame it creates a labelled vertex buffer, `terrain_chunk`, and drops the previous one, as
//! games stream meshes. It is created empty (no staging buffer) and larger than wgpu's memory blocks
//! (130 MiB; never written, so never touched), so it gets memory of its own, whose addresses the
//! drill layer never hands out again: a drilled `use-after-free:terrain_chunk` resolves the same way
//! every run (a small buffer's freed range is often re-bound by wgpu's staging buffers before the
//! fault is raised, which makes the verdict `inside_live_object`). With `TINY_GAME_CAMERA=1` a 3D camera named
//! "main" renders into an offscreen image, so Bevy's `main_opaque_pass_3d` runs and the drill's
//! `hang-in-pass` has a pass to hang in; with `TINY_GAME_SCENE=1` too, a small lit PBR level. After `TINY_GAME_FRAMES` frames (default 600) it exits normally. A drilled hang ends it
//! with exit code 3 once the report is written (`OnHang::Exit(3)`), a device loss with Bevy's own
//! error exit. `TINY_GAME_OUTBOX` puts the Sentry outbox where a studio might (its
//! `DeliverySettings::outbox_dir`), away from the report folder.

use std::time::Duration;

use bevy::app::ScheduleRunnerPlugin;
use bevy::asset::RenderAssetUsages;
use bevy::camera::RenderTarget;
use bevy::prelude::*;
use bevy::render::render_resource::{
    Buffer, BufferDescriptor, BufferUsages, Extent3d, TextureDimension, TextureFormat,
    TextureUsages,
};
use bevy::render::renderer::RenderDevice;
use bevy::window::ExitCondition;
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{DeliverySettings, GpuCrashReporterPlugin, OnHang};

fn main() -> AppExit {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // Set before any other thread exists.
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let frames = std::env::var("TINY_GAME_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600u32);
    let mut app = App::new();
    // `TINY_GAME_NO_REPORTER=1`: the same game without the reporter, the control run of what the
    // reporter changes (tests/clean_exit.rs).
    if std::env::var_os("TINY_GAME_NO_REPORTER").is_none_or(|v| v != "1") {
        app.add_plugins(GpuCrashReporterPlugin {
            settings: ReporterSettings {
                hang_timeout: Duration::from_secs(2),
                on_hang: OnHang::Exit(3),
                delivery: match std::env::var_os("TINY_GAME_OUTBOX") {
                    Some(outbox_dir) => DeliverySettings {
                        outbox_dir: outbox_dir.into(),
                        ..default()
                    },
                    None => default(),
                },
                ..default()
            },
            ..default()
        });
    }
    // Headless: no window, and no winit, which would want a display server at build time (the
    // workspace's Linux tests build Bevy with `bevy_winit` for tests/windowed_game.rs).
    let plugins = DefaultPlugins.build();
    #[cfg(target_os = "linux")]
    let plugins = plugins.disable::<bevy::winit::WinitPlugin>();
    app.add_plugins(plugins.set(WindowPlugin {
        primary_window: None,
        exit_condition: ExitCondition::DontExit,
        ..default()
    }))
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .insert_resource(FramesLeft(frames))
    .add_systems(
        Startup,
        (
            spawn_camera.run_if(|| std::env::var_os("TINY_GAME_CAMERA").is_some_and(|v| v == "1")),
            spawn_scene.run_if(|| std::env::var_os("TINY_GAME_SCENE").is_some_and(|v| v == "1")),
        ),
    )
    .add_systems(Update, (stream_mesh_data, exit_after_frames))
    .run()
}

#[derive(Resource)]
struct FramesLeft(u32);

/// A small lit level for the camera: PBR meshes on a ground, a shadowed sun and a shadowed point
/// light. Bevy compiles their pipelines (shadow, prepass, main pass variants) on its async compute
/// pool over the first frames: a game that quits early quits while they compile.
fn spawn_scene(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    commands.spawn((
        Mesh3d(meshes.add(Plane3d::default().mesh().size(20.0, 20.0))),
        MeshMaterial3d(materials.add(Color::srgb(0.3, 0.5, 0.3))),
    ));
    let painted = materials.add(StandardMaterial {
        base_color: Color::srgb(0.8, 0.2, 0.1),
        perceptual_roughness: 0.4,
        ..default()
    });
    let shapes = [
        meshes.add(Cuboid::default()),
        meshes.add(Sphere::new(0.6).mesh().uv(16, 8)),
        meshes.add(Torus::new(0.3, 0.7)),
    ];
    for (i, shape) in shapes.iter().enumerate() {
        commands.spawn((
            Mesh3d(shape.clone()),
            MeshMaterial3d(painted.clone()),
            Transform::from_xyz(i as f32 * 2.5 - 2.5, 0.7, 0.0),
        ));
    }
    commands.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(3.0, 8.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    commands.spawn((
        PointLight {
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(0.0, 3.0, 3.0),
    ));
    commands.insert_resource(bevy::light::PointLightShadowMap { size: 128 });
    commands.insert_resource(bevy::light::DirectionalLightShadowMap { size: 256 });
}

/// A 3D camera drawing into a 256x256 image: no window exists.
fn spawn_camera(mut commands: Commands, mut images: ResMut<Assets<Image>>) {
    let mut target = Image::new_fill(
        Extent3d {
            width: 256,
            height: 256,
            depth_or_array_layers: 1,
        },
        TextureDimension::D2,
        &[0, 0, 0, 255],
        TextureFormat::Rgba8UnormSrgb,
        RenderAssetUsages::default(),
    );
    target.texture_descriptor.usage |= TextureUsages::RENDER_ATTACHMENT | TextureUsages::COPY_SRC;
    commands.spawn((
        Name::new("main"),
        Camera3d::default(),
        RenderTarget::Image(images.add(target).into()),
    ));
}

/// One labelled buffer per frame, the previous one freed (after the new one exists).
fn stream_mesh_data(device: Res<RenderDevice>, mut last: Local<Option<Buffer>>) {
    *last = Some(device.create_buffer(&BufferDescriptor {
        label: Some("terrain_chunk"),
        size: 130 * 1024 * 1024,
        usage: BufferUsages::VERTEX | BufferUsages::COPY_DST,
        mapped_at_creation: false,
    }));
}

fn exit_after_frames(mut left: ResMut<FramesLeft>, mut exit: MessageWriter<AppExit>) {
    left.0 = left.0.saturating_sub(1);
    if left.0 == 0 {
        exit.write(AppExit::Success);
    }
}
