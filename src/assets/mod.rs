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
