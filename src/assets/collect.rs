//! Render-world systems that keep the asset map: right after Bevy places this frame's meshes in its
//! slabs (`allocate_and_free_meshes`) and prepares this frame's images (`prepare_assets::<GpuImage>`).
//! A frame with no extracted, modified or removed mesh or image returns at once: no per-frame cost
//! when no asset changed. Everything is gathered before the map's lock is taken, so the crash path
//! never waits on Bevy's allocator or the asset server.

use std::collections::HashMap;
use std::sync::Arc;

use bevy::asset::{AssetId, AssetServer};
use bevy::image::Image;
use bevy::prelude::*;
use bevy::render::mesh::allocator::{
    allocate_and_free_meshes, ElementClass, MeshAllocationKey, MeshAllocator,
};
use bevy::render::mesh::RenderMesh;
use bevy::render::render_asset::{prepare_assets, ExtractedAssets, RenderAssets};
use bevy::render::slab_allocator::SlabItemLayout;
use bevy::render::texture::GpuImage;
use bevy::render::{Render, RenderSystems};

use gpu_crash_core::{
    image_placement, AssetName, ImageTenant, MeshData, MeshTenant, SharedAssetMap,
};

use super::asset_key;
use crate::resources::GpuCrashReporter;

/// The asset server, in the render world: paths are read when an asset reaches the GPU
/// (`AssetServer::get_path` is `None` later, once the asset's handles are gone).
#[derive(Resource, Clone)]
pub(crate) struct AssetPaths(pub AssetServer);

/// The current render device's asset map (render world), replaced with each new device.
#[derive(Resource, Clone)]
pub(crate) struct DeviceAssets(pub SharedAssetMap);

/// Adds the systems to the render app.
///
/// `prepare_assets` drains the extracted and removed lists, so what must be read of them is read
/// before it runs: meshes right after Bevy's allocator (which runs before it), images in two steps.
pub(crate) fn install(render_app: &mut SubApp) {
    render_app.init_resource::<ImageChanges>().add_systems(
        Render,
        (
            index_meshes
                .after(allocate_and_free_meshes)
                .before(prepare_assets::<RenderMesh>),
            note_image_changes.before(prepare_assets::<GpuImage>),
            index_images.after(prepare_assets::<GpuImage>),
        )
            .in_set(RenderSystems::PrepareAssets),
    );
}

/// This frame's extracted and removed images, noted before `prepare_assets` drains them.
#[derive(Resource, Default)]
struct ImageChanges {
    extracted: Vec<AssetId<Image>>,
    removed: Vec<AssetId<Image>>,
}

/// `AssetId<Mesh>{ index: 3, generation: 0}`: Bevy's own form, without the type's module path.
fn id_text<A: bevy::asset::Asset>(id: AssetId<A>) -> String {
    format!("{id:?}").replace(std::any::type_name::<A>(), short_type_name::<A>())
}

fn short_type_name<A>() -> &'static str {
    let full = std::any::type_name::<A>();
    full.rsplit("::").next().unwrap_or(full)
}

fn asset_name<A: bevy::asset::Asset>(id: AssetId<A>, paths: Option<&AssetPaths>) -> AssetName {
    AssetName {
        id: id_text(id),
        path: paths.and_then(|p| p.0.get_path(id).map(|path| path.to_string())),
    }
}

/// Mirrors this frame's mesh frees and placements (Bevy frees every extracted mesh before placing it
/// again, and each removed one).
fn index_meshes(
    extracted: Res<ExtractedAssets<RenderMesh>>,
    allocator: Res<MeshAllocator>,
    paths: Option<Res<AssetPaths>>,
    map: Option<Res<DeviceAssets>>,
    reporter: Res<GpuCrashReporter>,
) {
    if extracted.added.is_empty() && extracted.removed.is_empty() {
        return;
    }
    let Some(map) = map else {
        return;
    };
    let at = reporter.asset_stamp();
    let mut placed = Vec::new();
    // `added` holds every mesh extracted this frame (Bevy's allocator reads it the same way).
    for mesh in &extracted.added {
        let name = Arc::new(asset_name(*mesh, paths.as_deref()));
        for (class, data) in [
            (ElementClass::Vertex, MeshData::Vertex),
            (ElementClass::Index, MeshData::Index),
        ] {
            let key = MeshAllocationKey::new(*mesh, class);
            let Some(&slab) = allocator.key_to_slab.get(&key) else {
                continue;
            };
            let (Some(slice), Some(layout)) = (
                allocator.slab_allocation_slice(&key, slab),
                allocator.slabs.get(&slab).map(|s| *s.element_layout()),
            ) else {
                continue;
            };
            let element_size = layout.size();
            placed.push((
                slab.id.get(),
                u64::from(slice.range.start) * element_size,
                MeshTenant {
                    mesh: asset_key(*mesh),
                    name: name.clone(),
                    data,
                    len: u64::from(slice.range.end - slice.range.start) * element_size,
                    element_size,
                    since: at,
                },
            ));
        }
    }
    let mut map = map.0.lock();
    for mesh in extracted
        .removed
        .iter()
        .chain(extracted.modified.iter())
        .chain(extracted.added.iter())
    {
        map.free_mesh(asset_key(*mesh), at);
    }
    for (slab, start, tenant) in placed {
        map.place_mesh(slab, start, tenant);
    }
}

/// Extracted images not yet seen prepared: the `VkImage` each had before, and frames waited.
type Waiting = HashMap<AssetId<Image>, (Option<u64>, u32)>;

/// Frames an extracted image is looked for before it is given up (Bevy's upload budget defers a
/// large image by a few frames at most).
const MAX_FRAMES_WAITING: u32 = 600;

fn note_image_changes(
    extracted: Res<ExtractedAssets<GpuImage>>,
    mut changes: ResMut<ImageChanges>,
) {
    changes
        .extracted
        .extend(extracted.extracted.iter().map(|(id, _)| *id));
    changes.removed.extend(extracted.removed.iter().copied());
}

/// Mirrors this frame's prepared and removed images. An image Bevy defers to a later frame (its
/// upload budget) is looked for again each frame until it is prepared or removed.
fn index_images(
    mut changes: ResMut<ImageChanges>,
    images: Res<RenderAssets<GpuImage>>,
    paths: Option<Res<AssetPaths>>,
    map: Option<Res<DeviceAssets>>,
    reporter: Res<GpuCrashReporter>,
    // Extracted images not yet seen prepared, with the `VkImage` they had before (a changed image
    // still shows its old texture until it is prepared again).
    // Frames waited are bounded, so an image that never gets a Vulkan texture is not looked for
    // every frame forever.
    mut waiting: Local<Waiting>,
) {
    if changes.extracted.is_empty() && changes.removed.is_empty() && waiting.is_empty() {
        return;
    }
    let ImageChanges { extracted, removed } = std::mem::take(&mut *changes);
    let Some(map) = map else {
        return;
    };
    let at = reporter.asset_stamp();
    for image in &removed {
        waiting.remove(image);
    }
    let mut prepared = Vec::new();
    {
        let map = map.0.lock();
        for image in extracted {
            waiting.insert(image, (map.image_of(asset_key(image)), 0));
        }
    }
    waiting.retain(|image, (before, frames)| {
        *frames += 1;
        let Some(placement) = images
            .get(*image)
            .and_then(|gpu| image_placement(&gpu.texture))
            .filter(|p| *before != Some(p.image))
        // still the old texture
        else {
            return *frames < MAX_FRAMES_WAITING;
        };
        prepared.push(ImageTenant {
            asset: asset_key(*image),
            name: Arc::new(asset_name(*image, paths.as_deref())),
            placement,
            since: at,
        });
        false
    });
    let mut map = map.0.lock();
    for image in &removed {
        map.free_image(asset_key(*image), at);
    }
    for tenant in prepared {
        map.place_image(tenant);
    }
}
