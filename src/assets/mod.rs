//! Assets: which Bevy asset a GPU range belongs to. Bevy packs many meshes into one slab buffer and
//! leaves most textures unlabelled, so the Vulkan object a fault resolves to ("general mesh slab 3")
//! says little to a game developer; this module keeps, per render device, the mesh and image assets
//! behind those objects, fed by render-world systems only on frames whose assets changed.
//!
//! Flow: `collect` (render world) -> `AssetMap` (shared with the crash path) -> `resolve::assets`
//! names the asset of each culprit.

mod collect;
mod map;
mod slab_label;
mod users;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bevy::prelude::Resource;

pub(crate) use collect::{install, AssetPaths};
pub(crate) use map::{AssetMap, ImagePlacement, MeshData, Tenancy};
#[cfg(test)]
pub(crate) use map::{AssetName, ImageTenant, MeshTenant, Stamp};
pub(crate) use slab_label::MeshSlabLabel;
pub(crate) use users::{observe as observe_users, AssetUsers};

/// One render device's asset map, shared by the render world (writer) and the crash path (reader).
#[derive(Resource, Clone, Default)]
pub(crate) struct SharedAssetMap(Arc<Mutex<AssetMap>>);

/// How long the crash path waits for the map's lock: the render world holds it only to apply one
/// frame's changes (no GPU or wgpu call under it), so a longer wait means that thread is stuck.
const CRASH_LOCK_WAIT: Duration = Duration::from_millis(100);

impl SharedAssetMap {
    /// The render world's writer lock (held while applying one frame's changes).
    pub(crate) fn lock(&self) -> MutexGuard<'_, AssetMap> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The crash path's reader: gives up rather than wait on a stuck render thread.
    pub(crate) fn lock_for_crash(&self) -> Option<MutexGuard<'_, AssetMap>> {
        crate::crash::bounded::try_lock_for(&self.0, CRASH_LOCK_WAIT)
    }
}

/// See `__test_support::filled_asset_map`.
pub(crate) fn filled_for_footprint(meshes: usize, images: usize, freed: usize) -> AssetMap {
    use bevy::asset::AssetId;
    use std::time::Instant;
    let at = map::Stamp {
        sequence: 1,
        frame: 1,
        at: Instant::now(),
    };
    let mut assets = AssetMap::default();
    let mesh = |i: usize| AssetId::Uuid {
        uuid: uuid::Uuid::from_u128(i as u128),
    };
    let place = |assets: &mut AssetMap, i: usize| {
        let name = Arc::new(map::AssetName {
            id: format!("AssetId<Mesh>{{ index: {i}, generation: 0}}"),
            path: Some(format!(
                "models/level_03/props/crate_{i:05}.glb#Mesh0/Primitive0"
            )),
        });
        for (data, slab, element_size) in
            [(MeshData::Vertex, 0u32, 32u64), (MeshData::Index, 16, 4)]
        {
            assets.place_mesh(
                slab + (i % 16) as u32,
                (i / 16) as u64 * 4096,
                map::MeshTenant {
                    mesh: mesh(i),
                    name: name.clone(),
                    data,
                    len: 4096,
                    element_size,
                    since: at,
                },
            );
        }
    };
    for i in 0..meshes {
        place(&mut assets, i);
    }
    for i in 0..images {
        assets.place_image(map::ImageTenant {
            asset: AssetId::Uuid {
                uuid: uuid::Uuid::from_u128(i as u128),
            },
            name: Arc::new(map::AssetName {
                id: format!("AssetId<Image>{{ index: {i}, generation: 0}}"),
                path: Some(format!("textures/level_03/props/crate_{i:05}_albedo.ktx2")),
            }),
            placement: ImagePlacement {
                image: 0x1000 + i as u64,
                memory: 0x10,
                offset: i as u64 * 0x10_0000,
                size: 0x10_0000,
            },
            since: at,
        });
    }
    for i in meshes..meshes + freed {
        place(&mut assets, i);
        assets.free_mesh(mesh(i), at);
    }
    assets
}
