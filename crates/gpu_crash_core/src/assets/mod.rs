//! Assets: which of the application's assets a GPU range belongs to. Bevy packs many meshes into one
//! slab buffer and leaves most textures unlabelled, so the Vulkan object a fault resolves to
//! ("general mesh slab 3") says little to a game developer; this module keeps, per device, the mesh
//! and image assets behind those objects, fed by the application only when its assets change.
//!
//! Flow: the application (Bevy: the adapter's render-world systems) -> [`AssetMap`] (shared with the
//! crash path) -> `resolve::assets` names the asset of each culprit.

mod map;
mod slab_label;
mod users;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub(crate) use map::Tenancy;
pub use map::{AssetKey, AssetMap, AssetName, ImageTenant, MeshData, MeshTenant, Stamp};
pub(crate) use slab_label::MeshSlabLabel;
pub use users::{AssetUsers, ListedUsers, MeshUser};

/// One device's asset map, shared by the application's side (writer) and the crash path (reader).
#[derive(Clone, Default)]
pub struct SharedAssetMap(Arc<Mutex<AssetMap>>);

/// How long the crash path waits for the map's lock: the application holds it only to apply one
/// frame's changes (no GPU or wgpu call under it), so a longer wait means that thread is stuck.
const CRASH_LOCK_WAIT: Duration = Duration::from_millis(100);

impl SharedAssetMap {
    /// The writer's lock (held while applying one frame's changes).
    pub fn lock(&self) -> MutexGuard<'_, AssetMap> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The crash path's reader: gives up rather than wait on a stuck render thread.
    pub(crate) fn lock_for_crash(&self) -> Option<MutexGuard<'_, AssetMap>> {
        crate::time_box::try_lock_for(&self.0, CRASH_LOCK_WAIT)
    }
}

/// An asset map holding `meshes` meshes (vertex and index data each, in 16 slabs, paths like a glTF
/// primitive's) and `images` image assets, then `freed` more meshes placed and removed (the freed
/// history, bounded): what `examples/memory_footprint.rs` weighs.
#[cfg(feature = "test-support")]
pub(crate) fn filled_for_footprint(meshes: usize, images: usize, freed: usize) -> AssetMap {
    use crate::vulkan::texture::ImagePlacement;
    use std::time::Instant;
    let at = Stamp {
        sequence: 1,
        frame: 1,
        at: Instant::now(),
    };
    let mut assets = AssetMap::default();
    let mesh = |i: usize| AssetKey::Uuid(i as u128);
    let place = |assets: &mut AssetMap, i: usize| {
        let name = Arc::new(AssetName {
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
                MeshTenant {
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
        assets.place_image(ImageTenant {
            asset: AssetKey::Uuid(i as u128),
            name: Arc::new(AssetName {
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
