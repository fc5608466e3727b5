//! Each render device Bevy creates (the first, and one per renderer recovery) is attached to the
//! reporter, and the main world's capabilities follow the live device.

use bevy::prelude::*;
use bevy::render::renderer::RenderDevice;

use crate::assets::DeviceAssets;
use crate::resources::{GpuCrashCapabilities, GpuCrashReporter};

/// Render world, whenever it gets a (new) render device: the reporter attaches it (its messenger,
/// marker memory and session), and its capabilities and asset map become resources.
pub(crate) fn attach_render_device(
    mut commands: Commands,
    device: Res<RenderDevice>,
    reporter: Res<GpuCrashReporter>,
) {
    let Some(attached) = reporter.attach(device.wgpu_device()) else {
        return; // not Vulkan: nothing to watch
    };
    // A new device starts an empty asset map: Bevy's mesh allocator (slab ids) and images are
    // rebuilt with it.
    commands.insert_resource(DeviceAssets(attached.assets));
    #[cfg(feature = "pbr")]
    commands.insert_resource(crate::pipelines::DevicePipelines(attached.pipelines));
    commands.insert_resource(GpuCrashCapabilities(attached.capabilities));
}

/// Main world: keeps `GpuCrashCapabilities` in step with the live device.
pub(crate) fn follow_render_device(
    mut commands: Commands,
    reporter: Res<GpuCrashReporter>,
    mut seen: Local<u32>,
) {
    let Some(generation) = reporter.device_generation() else {
        return;
    };
    if generation != *seen {
        *seen = generation;
        if let Some(capabilities) = reporter.capabilities() {
            commands.insert_resource(GpuCrashCapabilities(capabilities));
        }
    }
}
