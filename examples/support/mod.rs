//! Set-up shared by the examples (and the tests): a headless Bevy app rendering through Vulkan
//! only, and the crash drill's GPU workload.
// Each example (and the tests) uses part of this module.
#![allow(dead_code)]
//! (Not an example of its own: Cargo builds `examples/<dir>/` only when it holds a `main.rs`.)

pub mod frame_timing;
pub mod interleave;

use std::time::Duration;

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::settings::{Backends, RenderCreation, WgpuSettings};
use bevy::render::RenderPlugin;
use bevy::window::ExitCondition;

/// `DefaultPlugins` without a window and without exiting for want of one, on the Vulkan backend.
///
/// Without winit too: the tests' Bevy has `bevy_winit` on Linux (tests/windowed_game.rs opens a
/// real window), and its plugin would open a connection to a display server at build time, which a
/// headless machine has not got (it panics).
pub fn headless_vulkan_plugins() -> impl PluginGroup {
    let plugins = DefaultPlugins.build();
    #[cfg(target_os = "linux")]
    let plugins = plugins.disable::<bevy::winit::WinitPlugin>();
    plugins
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
        })
}

/// [`headless_vulkan_plugins`] plus a loop runner: what a crash drill in CI or on a headless GPU
/// server needs. Add `GpuCrashReporterPlugin` before it.
pub fn headless_vulkan(app: &mut App) -> &mut App {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // Process-global, but set before any other thread exists.
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    app.add_plugins(headless_vulkan_plugins())
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
}

use bevy::render::render_resource::{
    Buffer, BufferDescriptor, BufferUsages, Extent3d, Texture, TextureDescriptor, TextureDimension,
    TextureFormat, TextureUsages,
};
use bevy::render::renderer::RenderDevice;

/// The crash drill's GPU workload, created and freed through ordinary Bevy/wgpu calls: three
/// long-lived labelled buffers, and per frame a `frame_uniforms_N` buffer and a `shadow_atlas`
/// texture that are destroyed the next frame.
#[derive(Default)]
pub struct DrillWorkload {
    frame: u64,
    keep: Vec<Buffer>,
    last: Vec<Buffer>,
    last_textures: Vec<Texture>,
}

impl DrillWorkload {
    /// One frame of the workload. `extra` may add buffers (freed next frame, like the others); it
    /// runs after `frame_uniforms_N` and before the texture, so allocation order is fixed.
    pub fn frame(
        &mut self,
        device: &RenderDevice,
        extra: impl FnOnce(&RenderDevice, &mut Vec<Buffer>),
    ) {
        self.frame += 1;
        if self.keep.is_empty() {
            // "particles" is read back by the CPU, so it lives in host-visible memory of its own
            // and nothing is mapped right after it: an overrun of it faults, as on a real GPU.
            self.keep.push(device.create_buffer(&BufferDescriptor {
                label: Some("particles"),
                size: 256 * 1024,
                usage: BufferUsages::MAP_READ | BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
            for label in ["terrain_vertices", "light_grid"] {
                self.keep.push(device.create_buffer(&BufferDescriptor {
                    label: Some(label),
                    size: 256 * 1024,
                    usage: BufferUsages::STORAGE | BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }));
            }
        }
        for buffer in self.last.drain(..) {
            buffer.destroy();
        }
        for texture in self.last_textures.drain(..) {
            texture.destroy();
        }
        let frame = self.frame;
        // Rotating sizes, as real per-frame data varies: the allocator then reuses freed ranges
        // only in part, which leaves unmapped holes where a use-after-free really faults.
        self.last.push(device.create_buffer(&BufferDescriptor {
            label: Some(&format!("frame_uniforms_{}", frame % 4)),
            size: 16 * 1024 * (frame % 4 + 1),
            usage: BufferUsages::UNIFORM | BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }));
        extra(device, &mut self.last);
        self.last_textures
            .push(device.create_texture(&TextureDescriptor {
                label: Some("shadow_atlas"),
                size: Extent3d {
                    width: 256,
                    height: 256,
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: 1,
                dimension: TextureDimension::D2,
                format: TextureFormat::Rgba8Unorm,
                usage: TextureUsages::TEXTURE_BINDING | TextureUsages::COPY_DST,
                view_formats: &[],
            }));
    }
}

/// A render target for a headless camera: an RGBA image of `width` x `height` a camera can draw into
/// (`RenderTarget::Image`), where no window exists.
pub fn offscreen_target(
    images: &mut Assets<Image>,
    width: u32,
    height: u32,
) -> bevy::camera::RenderTarget {
    use bevy::asset::RenderAssetUsages;
    use bevy::render::render_resource::{Extent3d, TextureDimension, TextureFormat, TextureUsages};
    let mut target = Image::new_fill(
        Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        TextureDimension::D2,
        &[0, 0, 0, 255],
        TextureFormat::Rgba8UnormSrgb,
        RenderAssetUsages::default(),
    );
    target.texture_descriptor.usage |= TextureUsages::RENDER_ATTACHMENT | TextureUsages::COPY_SRC;
    bevy::camera::RenderTarget::Image(images.add(target).into())
}
