//! Bevy's assets behind GPU ranges: meshes inside Bevy's shared slab buffers and image assets, kept
//! in the reporter's asset map by render-world systems (`collect`) only on frames whose assets
//! changed, and the entities drawing each mesh by main-world observers (`users`).

mod collect;
mod users;

use bevy::asset::{Asset, AssetId};
use gpu_crash_core::AssetKey;

pub(crate) use collect::{install, AssetPaths, DeviceAssets};
pub(crate) use users::observe as observe_users;

/// The reporter's opaque key for a Bevy asset id.
pub(crate) fn asset_key<A: Asset>(id: AssetId<A>) -> AssetKey {
    match id {
        AssetId::Index { index, .. } => AssetKey::Slot(index.to_bits()),
        AssetId::Uuid { uuid } => AssetKey::Uuid(uuid.as_u128()),
    }
}
