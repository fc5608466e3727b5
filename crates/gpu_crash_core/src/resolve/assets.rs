//! From the Vulkan object a fault resolved to, to the Bevy asset a developer recognises: the mesh
//! whose bytes of a shared slab buffer the address is in, or the image asset a `VkImage` is.
//!
//! Three refinements of the object-level verdict, each from what the asset map knew at the fault
//! cut-off:
//! - an image on a driver that reports images at their whole memory block (NVIDIA) is placed inside
//!   the block by its allocation, so the image that really holds the address wins;
//! - every candidate gets the asset its bytes belong to;
//! - an address inside a live slab buffer whose mesh bytes were freed is a use-after-free of that
//!   mesh (the buffer lives on; the data the GPU read does not).

use std::time::Instant;

use super::model::{
    AssetKind, AssetUser, Culprit, FaultEntry, FaultVerdict, GpuAsset, ObjectState,
};
use super::{access_word, summary_line, FaultAddress};
use crate::assets::{AssetMap, AssetUsers, MeshData, MeshSlabLabel, Tenancy};

/// Why an asset has no path.
pub(crate) const NO_PATH: &str =
    "no asset path: added with `Assets::add` (or loaded without a path), \
     or its handles were gone when it reached the GPU";

/// What the asset naming reads.
pub(crate) struct AssetLookup<'a> {
    pub map: &'a AssetMap,
    pub users: Option<&'a AssetUsers>,
    /// The fault cut-off (ring position), as for the index.
    pub cut: Option<u64>,
    pub now: Instant,
    pub frame: u64,
}

impl AssetLookup<'_> {
    fn freed_ago<T>(&self, t: &Tenancy<T>) -> (Option<u64>, Option<u64>) {
        match t.freed {
            Some(f) => (
                Some(self.frame.saturating_sub(f.frame)),
                Some(self.now.saturating_duration_since(f.at).as_millis() as u64),
            ),
            None => (None, None),
        }
    }
}

/// Live or freed at the cut-off.
fn state_of<T>(t: &Tenancy<T>) -> ObjectState {
    if t.freed.is_some() {
        ObjectState::Freed
    } else {
        ObjectState::Live
    }
}

/// Names the assets of `entry`'s candidates and, where the asset map knows better, refines the
/// culprit, the verdict and the summary.
pub(crate) fn name_assets(entry: &mut FaultEntry, lookup: &AssetLookup<'_>) {
    place_images(entry, lookup);
    for candidate in &mut entry.candidates {
        candidate.asset = asset_of(candidate, lookup);
    }
    if let Some(first) = entry.candidates.first_mut() {
        let mesh_freed_in_live_slab = entry.verdict == FaultVerdict::InsideLiveObject
            && first.state == ObjectState::Live
            && first
                .asset
                .as_ref()
                .is_some_and(|a| a.kind != AssetKind::Image && a.state == ObjectState::Freed);
        if mesh_freed_in_live_slab {
            entry.verdict = FaultVerdict::UseAfterFree;
            let asset = first.asset.as_ref().expect("checked above");
            first.reason = format!(
                "{}; the slab buffer is live, but the mesh data at this offset was freed {} frames \
                 before the fault",
                first.reason,
                asset.freed_frames_ago.unwrap_or(0)
            );
        }
    }
    entry.culprit = (entry.verdict != FaultVerdict::UnknownAddress)
        .then(|| entry.candidates.first().cloned())
        .flatten();
    let fault = FaultAddress {
        address: entry.address,
        precision: entry.precision,
        access: entry.access,
    };
    entry.summary = match entry.culprit.as_ref() {
        Some(c @ Culprit { asset: Some(a), .. }) => asset_summary(fault, entry.verdict, c, a),
        culprit => summary_line(fault, entry.verdict, culprit),
    };
}

/// An image reported over its whole memory block (or found through the memory object) is placed at
/// its allocation: when one really holds the address, it becomes the culprit, at its own range.
fn place_images(entry: &mut FaultEntry, lookup: &AssetLookup<'_>) {
    let address = entry.address;
    let mut hits: Vec<(Culprit, bool)> = Vec::new(); // (placed image, live)
    for c in &entry.candidates {
        let placed = match c.object_type.as_str() {
            "IMAGE" => lookup
                .map
                .image(c.handle, lookup.cut)
                .filter(|t| c.size > t.tenant.placement.size)
                .map(|t| (c.clone(), c.base + t.tenant.placement.offset, t)),
            "DEVICE_MEMORY" if address >= c.base => lookup
                .map
                .images_in_memory(c.handle, address - c.base, lookup.cut)
                .into_iter()
                .next()
                .map(|t| {
                    let handle = t.tenant.placement.image;
                    // The image's own candidate, when the index has it, keeps its name.
                    let image = entry
                        .candidates
                        .iter()
                        .find(|i| i.object_type == "IMAGE" && i.handle == handle)
                        .cloned()
                        .unwrap_or_else(|| Culprit {
                            name: None,
                            label: format!("IMAGE {handle:#x}"),
                            object_type: "IMAGE".to_owned(),
                            handle,
                            ..c.clone()
                        });
                    (image, c.base + t.tenant.placement.offset, t)
                }),
            _ => None,
        };
        let Some((mut image, base, t)) = placed else {
            continue;
        };
        let size = t.tenant.placement.size;
        if address < base || address - base >= size {
            continue;
        }
        let live = t.freed.is_none();
        let (frames, ms) = lookup.freed_ago(&t);
        image.base = base;
        image.size = size;
        image.offset = (address - base) as i64;
        image.state = state_of(&t);
        image.freed_frames_ago = frames;
        image.freed_ms_ago = ms;
        image.bytes_past_end = None;
        image.reason = format!(
            "image placed inside its memory block by its allocation (offset {:#x}, {} bytes): the \
             driver reports images over the whole block",
            t.tenant.placement.offset, size
        );
        hits.push((image, live));
    }
    // Live first; the first of each kind wins.
    hits.sort_by_key(|(_, live)| !live);
    let Some((image, live)) = hits.into_iter().next() else {
        return;
    };
    // A buffer that holds the address exactly explains it better than any image in the block.
    let buffer_holds_it = entry
        .candidates
        .first()
        .is_some_and(|c| c.object_type == "BUFFER" && c.offset >= 0 && (c.offset as u64) < c.size);
    if buffer_holds_it && entry.verdict != FaultVerdict::UnknownAddress {
        return;
    }
    // The index already had the image at its own range (drivers that report images exactly).
    let already = entry.candidates.first().is_some_and(|c| {
        c.object_type == "IMAGE" && c.handle == image.handle && c.base == image.base
    });
    if already {
        return;
    }
    entry
        .candidates
        .retain(|c| !(c.object_type == "IMAGE" && c.handle == image.handle));
    entry.candidates.insert(0, image);
    entry.verdict = if live {
        FaultVerdict::InsideLiveObject
    } else {
        FaultVerdict::UseAfterFree
    };
}

/// The asset whose bytes `c.offset` is in.
fn asset_of(c: &Culprit, lookup: &AssetLookup<'_>) -> Option<GpuAsset> {
    if c.offset < 0 {
        return None;
    }
    let offset = c.offset as u64;
    match c.object_type.as_str() {
        "BUFFER" => {
            let slab = MeshSlabLabel::parse(c.name.as_deref()?)?;
            let t = lookup.map.mesh_at(slab.slab, offset, lookup.cut)?;
            let tenant = &t.tenant;
            let byte_offset = offset - t.start;
            let (entities, entity_count) = lookup
                .users
                .and_then(|u| u.users_of(tenant.mesh))
                .map(|(listed, count)| {
                    let users = listed
                        .into_iter()
                        .map(|(user, name)| AssetUser {
                            entity: user.shown_as,
                            name,
                        })
                        .collect::<Vec<_>>();
                    (users, count)
                })
                .unwrap_or_default();
            let (freed_frames_ago, freed_ms_ago) = lookup.freed_ago(&t);
            Some(GpuAsset {
                kind: match tenant.data {
                    MeshData::Vertex => AssetKind::MeshVertexData,
                    MeshData::Index => AssetKind::MeshIndexData,
                },
                path: tenant.name.path.clone(),
                asset_id: tenant.name.id.clone(),
                no_path: tenant.name.path.is_none().then(|| NO_PATH.to_owned()),
                entities,
                entity_count,
                byte_range: [t.start, t.start + tenant.len],
                byte_offset: byte_offset as i64,
                element: Some(byte_offset / tenant.element_size.max(1)),
                element_size: Some(tenant.element_size),
                state: state_of(&t),
                freed_frames_ago,
                freed_ms_ago,
                container: slab.describe(),
            })
        }
        "IMAGE" => {
            let t = lookup.map.image(c.handle, lookup.cut)?;
            let placement = t.tenant.placement;
            // Still reported over its whole block (not the winner): its bytes start at its offset.
            let start = if c.size > placement.size {
                placement.offset
            } else {
                0
            };
            // Reported over its block, and the address is not in its bytes: not this asset.
            if offset < start || offset - start >= placement.size {
                return None;
            }
            let (freed_frames_ago, freed_ms_ago) = lookup.freed_ago(&t);
            Some(GpuAsset {
                kind: AssetKind::Image,
                path: t.tenant.name.path.clone(),
                asset_id: t.tenant.name.id.clone(),
                no_path: t.tenant.name.path.is_none().then(|| NO_PATH.to_owned()),
                entities: Vec::new(),
                entity_count: 0,
                byte_range: [start, start.saturating_add(placement.size.min(c.size))],
                byte_offset: offset as i64 - start as i64,
                element: None,
                element_size: None,
                state: state_of(&t),
                freed_frames_ago,
                freed_ms_ago,
                container: c.label.clone(),
            })
        }
        _ => None,
    }
}

/// `GPU fault: write at 0x… is in vertex 5 of mesh "models/tree.glb#Mesh3/Primitive0" (general
/// mesh slab 3, freed 2 frames before) -> use_after_free`.
fn asset_summary(
    fault: FaultAddress,
    verdict: FaultVerdict,
    culprit: &Culprit,
    asset: &GpuAsset,
) -> String {
    let noun = asset.kind.noun();
    let whereabouts = match (asset.state, culprit.state) {
        (ObjectState::Freed, _) => format!(
            "{noun} freed {} frames before; its bytes were in {}",
            asset.freed_frames_ago.unwrap_or(0),
            asset.container
        ),
        (ObjectState::Live, ObjectState::Freed) => format!(
            "{}, freed {} frames before",
            asset.container,
            culprit.freed_frames_ago.unwrap_or(0)
        ),
        (ObjectState::Live, ObjectState::Live) => asset.container.clone(),
    };
    format!(
        "GPU fault: {} at {:#x} is in {} of {noun} {} ({whereabouts}) -> {}",
        access_word(fault.access),
        fault.address,
        asset.place(),
        asset.display_name(),
        verdict.as_str()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ash::vk;

    use super::*;
    use crate::assets::{AssetKey, AssetName, ImageTenant, MeshTenant, Stamp};
    use crate::capture::{BindingKind, BindingRecord};
    use crate::index::{AddressIndex, ObjectKey};
    use crate::resolve::{resolve, FaultAccess, ResolveContext};
    use crate::vulkan::texture::ImagePlacement;

    const SLAB: &str = "general mesh slab 3 (vertex buffer)";
    const SLAB_BASE: u64 = 0x1000_0000;

    fn stamp(sequence: u64) -> Stamp {
        Stamp {
            sequence,
            frame: sequence,
            at: Instant::now(),
        }
    }

    fn name(path: Option<&str>) -> Arc<AssetName> {
        Arc::new(AssetName {
            id: "AssetId<Mesh>{ index: 4, generation: 0}".into(),
            path: path.map(str::to_owned),
        })
    }

    fn tree(since: u64) -> MeshTenant {
        MeshTenant {
            mesh: AssetKey::Uuid(4),
            name: name(Some("models/tree.glb#Mesh3/Primitive0")),
            data: MeshData::Vertex,
            len: 3200,
            element_size: 32,
            since: stamp(since),
        }
    }

    fn fault_at(index: &AddressIndex, map: &AssetMap, address: u64) -> FaultEntry {
        let now = Instant::now();
        let ctx = ResolveContext {
            index,
            now,
            frame: 50,
            as_of: None,
        };
        let fault = FaultAddress {
            address,
            precision: 4,
            access: FaultAccess::Write,
        };
        let mut entry = resolve(&ctx, fault);
        name_assets(
            &mut entry,
            &AssetLookup {
                map,
                users: None,
                cut: None,
                now,
                frame: 50,
            },
        );
        entry
    }

    fn slab_index() -> AddressIndex {
        let mut index = AddressIndex::default();
        index.apply(
            &BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::BUFFER,
                0x33,
                SLAB_BASE,
                0x10000,
            ),
            Instant::now(),
        );
        index.set_name(ObjectKey::new(vk::ObjectType::BUFFER, 0x33), SLAB);
        index
    }

    #[test]
    fn a_fault_in_a_slab_names_the_mesh_and_the_vertex() {
        let index = slab_index();
        let mut map = AssetMap::default();
        map.place_mesh(3, 0x800, tree(1));
        let entry = fault_at(&index, &map, SLAB_BASE + 0x800 + 5 * 32 + 4);
        assert_eq!(entry.verdict, FaultVerdict::InsideLiveObject);
        let asset = entry.culprit.as_ref().unwrap().asset.as_ref().unwrap();
        assert_eq!(
            (asset.element, asset.byte_offset, asset.byte_range),
            (Some(5), 164, [0x800, 0x800 + 3200])
        );
        assert_eq!(
            entry.summary,
            format!(
                "GPU fault: write at {:#x} is in vertex 5 of mesh \
                 \"models/tree.glb#Mesh3/Primitive0\" (general mesh slab 3) -> inside_live_object",
                entry.address
            )
        );
    }

    #[test]
    fn freed_mesh_bytes_in_a_live_slab_are_a_use_after_free_of_the_last_tenant() {
        let index = slab_index();
        let mut map = AssetMap::default();
        map.place_mesh(3, 0x800, tree(1));
        map.free_mesh(tree(1).mesh, stamp(48));
        let entry = fault_at(&index, &map, SLAB_BASE + 0x800 + 5 * 32);
        assert_eq!(entry.verdict, FaultVerdict::UseAfterFree);
        let culprit = entry.culprit.as_ref().unwrap();
        assert_eq!(culprit.state, ObjectState::Live);
        let asset = culprit.asset.as_ref().unwrap();
        assert_eq!(
            (asset.state, asset.freed_frames_ago),
            (ObjectState::Freed, Some(2))
        );
        assert!(
            entry.summary.contains(
                "(mesh freed 2 frames before; its bytes were in general mesh slab 3) -> \
                 use_after_free"
            ),
            "{}",
            entry.summary
        );
        // Bytes no mesh ever held stay inside the live slab.
        let gap = fault_at(&index, &map, SLAB_BASE + 0x10);
        assert_eq!(gap.verdict, FaultVerdict::InsideLiveObject);
        assert!(gap.culprit.unwrap().asset.is_none());
    }

    #[test]
    fn images_reported_over_their_whole_block_are_placed_by_their_allocation() {
        // NVIDIA: every image of a 128 MiB block is reported at the block's low alias with the
        // block's size (docs/driver-facts.md).
        const ALIAS: u64 = 0x640_0000;
        const BLOCK: u64 = 128 << 20;
        let mut index = AddressIndex::default();
        let t0 = Instant::now();
        for (ty, handle) in [
            (vk::ObjectType::DEVICE_MEMORY, 0x100),
            (vk::ObjectType::IMAGE, 0xa),
            (vk::ObjectType::IMAGE, 0xb),
        ] {
            index.apply(
                &BindingRecord::new(BindingKind::Bind, ty, handle, ALIAS, BLOCK),
                t0,
            );
        }
        let mut map = AssetMap::default();
        for (n, image, offset, size) in [(1u128, 0xa, 0, 0x1_0000), (2, 0xb, 0x14_bc00, 0x40_0000)]
        {
            map.place_image(ImageTenant {
                asset: AssetKey::Uuid(n),
                name: Arc::new(AssetName {
                    id: format!("image {n}"),
                    path: Some(format!("textures/{n}.ktx2")),
                }),
                placement: ImagePlacement {
                    image,
                    memory: 0x100,
                    offset,
                    size,
                },
                since: stamp(0),
            });
        }
        let entry = fault_at(&index, &map, ALIAS + 0x14_bc00 + 0x100);
        assert_eq!(entry.verdict, FaultVerdict::InsideLiveObject);
        let culprit = entry.culprit.as_ref().unwrap();
        assert_eq!(
            (culprit.handle, culprit.base, culprit.size, culprit.offset),
            (0xb, ALIAS + 0x14_bc00, 0x40_0000, 0x100)
        );
        let asset = culprit.asset.as_ref().unwrap();
        assert_eq!(asset.path.as_deref(), Some("textures/2.ktx2"));
        assert_eq!(asset.byte_offset, 0x100);
        // The other image is still a candidate, but not over this address.
        assert!(entry.candidates.iter().any(|c| c.handle == 0xa));
        // In a gap between the two images: no image asset is named for it.
        let gap = fault_at(&index, &map, ALIAS + 0x12_0000);
        assert!(gap.candidates.iter().all(|c| c.asset.is_none()), "{gap:#?}");
    }
}
