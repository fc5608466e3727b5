//! `AssetMap`: which Bevy mesh owns which bytes of each mesh slab, and which image asset each
//! `VkImage` is, with a bounded history of the tenants that left, each stamped with the binding ring's
//! position so a report sees the map as it stood when the GPU faulted (as the address index does).
//!
//! Plain Rust: the render-world systems in `collect.rs` feed it, the resolver reads it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::vulkan::texture::ImagePlacement;

/// Freed mesh and image tenants remembered for use-after-free verdicts ("last tenant").
pub const MAX_FREED_TENANTS: usize = 4096;

/// An asset's identity as the application knows it (Bevy: an `AssetId`), opaque here: only compared
/// and hashed, never shown (a report shows [`AssetName`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AssetKey {
    /// A slot of the application's asset storage (Bevy: `AssetIndex::to_bits`).
    Slot(u64),
    /// A UUID the application gave the asset.
    Uuid(u128),
}

/// When something happened, in the three clocks a report speaks: binding-ring position (the fault
/// cut-off), frame, wall time.
#[derive(Clone, Copy, Debug)]
pub struct Stamp {
    /// Binding-ring position: events before it happened before this.
    pub sequence: u64,
    /// The application's frame.
    pub frame: u64,
    /// Wall time.
    pub at: Instant,
}

/// An asset as a report names it.
#[derive(Debug, PartialEq, Eq)]
pub struct AssetName {
    /// `AssetKey{ index: 3, generation: 0 }` style, stable within a run.
    pub id: String,
    /// The asset path, read when the asset reached the GPU; `None` for `Assets::add` assets.
    pub path: Option<String>,
}

/// Which of a mesh's data a slab allocation holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MeshData {
    /// Vertex data.
    Vertex,
    /// Index data.
    Index,
}

/// One mesh's data inside a slab buffer.
#[derive(Clone, Debug)]
pub struct MeshTenant {
    /// The mesh asset.
    pub mesh: AssetKey,
    /// How reports name it.
    pub name: Arc<AssetName>,
    /// Which of its data this allocation holds.
    pub data: MeshData,
    /// Byte length of its allocation (whole elements).
    pub len: u64,
    /// Bytes per vertex or index.
    pub element_size: u64,
    /// When it was placed there.
    pub since: Stamp,
}

#[derive(Clone, Debug)]
struct FreedMesh {
    slab: u32,
    start: u64,
    tenant: MeshTenant,
    freed: Stamp,
}

/// An image asset on the GPU.
#[derive(Clone, Debug)]
pub struct ImageTenant {
    /// The image asset.
    pub asset: AssetKey,
    /// How reports name it.
    pub name: Arc<AssetName>,
    /// Where its bytes are.
    pub placement: ImagePlacement,
    /// When it was placed there.
    pub since: Stamp,
}

#[derive(Clone, Debug)]
struct FreedImage {
    tenant: ImageTenant,
    freed: Stamp,
}

/// A tenant as it stood at the fault cut-off.
#[derive(Clone, Debug)]
pub(crate) struct Tenancy<T> {
    pub tenant: T,
    /// First byte of its allocation in the slab (meshes; 0 for images).
    pub start: u64,
    /// `None`: live at the cut-off; otherwise when it left.
    pub freed: Option<Stamp>,
}

/// See the module documentation.
#[derive(Default)]
pub struct AssetMap {
    /// Slab id -> allocation start byte -> tenant.
    slabs: HashMap<u32, BTreeMap<u64, MeshTenant>>,
    /// Where each mesh's data lies: (slab, start) per data kind.
    mesh_places: HashMap<AssetKey, Vec<(u32, u64)>>,
    freed_meshes: VecDeque<FreedMesh>,
    images: HashMap<u64, ImageTenant>,
    image_of_asset: HashMap<AssetKey, u64>,
    freed_images: VecDeque<FreedImage>,
}

/// Live at `cut` (placed before it, not gone before it); `None` means now.
fn placed_before(since: &Stamp, cut: Option<u64>) -> bool {
    cut.is_none_or(|c| since.sequence < c)
}

impl AssetMap {
    /// Meshes indexed now (each counted once, however many slabs hold its data).
    pub fn mesh_count(&self) -> usize {
        self.mesh_places.len()
    }

    /// Images indexed now.
    pub fn image_count(&self) -> usize {
        self.images.len()
    }

    /// Mesh `mesh`'s `data` now lies at `[start, start + len)` of slab `slab`.
    pub fn place_mesh(&mut self, slab: u32, start: u64, tenant: MeshTenant) {
        self.mesh_places
            .entry(tenant.mesh)
            .or_default()
            .push((slab, start));
        if let Some(old) = self.slabs.entry(slab).or_default().insert(start, tenant) {
            // Bevy freed it without telling us (cannot happen: frees come first); keep it as history.
            let freed = old.since;
            self.remember_mesh(slab, start, old, freed);
        }
    }

    /// Mesh `mesh` left the GPU (removed, or about to be placed again after a change).
    pub fn free_mesh(&mut self, mesh: AssetKey, at: Stamp) {
        let Some(places) = self.mesh_places.remove(&mesh) else {
            return;
        };
        for (slab, start) in places {
            let Some(tenants) = self.slabs.get_mut(&slab) else {
                continue;
            };
            if let Some(tenant) = tenants.remove(&start) {
                if tenants.is_empty() {
                    self.slabs.remove(&slab);
                }
                self.remember_mesh(slab, start, tenant, at);
            }
        }
    }

    fn remember_mesh(&mut self, slab: u32, start: u64, tenant: MeshTenant, freed: Stamp) {
        if self.freed_meshes.len() == MAX_FREED_TENANTS {
            self.freed_meshes.pop_front();
        }
        self.freed_meshes.push_back(FreedMesh {
            slab,
            start,
            tenant,
            freed,
        });
    }

    /// The mesh data at byte `offset` of slab `slab` as of `cut`: the tenant then, or the last one
    /// that left before it.
    pub(crate) fn mesh_at(
        &self,
        slab: u32,
        offset: u64,
        cut: Option<u64>,
    ) -> Option<Tenancy<MeshTenant>> {
        let contains = |start: u64, len: u64| offset >= start && offset - start < len.max(1);
        let live = self.slabs.get(&slab).and_then(|tenants| {
            let (&start, tenant) = tenants.range(..=offset).next_back()?;
            (contains(start, tenant.len) && placed_before(&tenant.since, cut)).then(|| Tenancy {
                tenant: tenant.clone(),
                start,
                freed: None,
            })
        });
        if live.is_some() {
            return live;
        }
        // Most recently freed first: the last tenant before the cut-off.
        self.freed_meshes
            .iter()
            .rev()
            .find(|f| {
                f.slab == slab
                    && contains(f.start, f.tenant.len)
                    && placed_before(&f.tenant.since, cut)
            })
            .map(|f| Tenancy {
                tenant: f.tenant.clone(),
                start: f.start,
                // Freed after the cut-off: still there when the GPU faulted.
                freed: cut.is_none_or(|c| f.freed.sequence < c).then_some(f.freed),
            })
    }

    /// Image asset `tenant.asset` is now `VkImage` `tenant.placement.image`; an earlier image of the
    /// same asset (re-prepared after a change) is gone.
    pub fn place_image(&mut self, tenant: ImageTenant) {
        let (image, asset, since) = (tenant.placement.image, tenant.asset, tenant.since);
        if let Some(old) = self.image_of_asset.insert(asset, image) {
            if old != image {
                self.free_image_handle(old, since);
            }
        }
        if let Some(old) = self.images.insert(image, tenant) {
            // A handle the driver reused for another asset: the old tenant is history.
            if old.asset != asset && self.image_of_asset.get(&old.asset) == Some(&image) {
                self.image_of_asset.remove(&old.asset);
            }
            self.remember_image(old, since);
        }
    }

    /// The `VkImage` image asset `asset` has now.
    pub fn image_of(&self, asset: AssetKey) -> Option<u64> {
        self.image_of_asset.get(&asset).copied()
    }

    /// Image asset `asset` left the GPU.
    pub fn free_image(&mut self, asset: AssetKey, at: Stamp) {
        if let Some(image) = self.image_of_asset.remove(&asset) {
            self.free_image_handle(image, at);
        }
    }

    fn free_image_handle(&mut self, image: u64, at: Stamp) {
        if let Some(tenant) = self.images.remove(&image) {
            self.remember_image(tenant, at);
        }
    }

    fn remember_image(&mut self, tenant: ImageTenant, freed: Stamp) {
        if self.freed_images.len() == MAX_FREED_TENANTS {
            self.freed_images.pop_front();
        }
        self.freed_images.push_back(FreedImage { tenant, freed });
    }

    /// The image asset that `VkImage` `image` was at `cut`.
    pub(crate) fn image(&self, image: u64, cut: Option<u64>) -> Option<Tenancy<ImageTenant>> {
        if let Some(t) = self
            .images
            .get(&image)
            .filter(|t| placed_before(&t.since, cut))
        {
            return Some(Tenancy {
                tenant: t.clone(),
                start: 0,
                freed: None,
            });
        }
        self.freed_images
            .iter()
            .rev()
            .find(|f| f.tenant.placement.image == image && placed_before(&f.tenant.since, cut))
            .map(|f| Tenancy {
                tenant: f.tenant.clone(),
                start: 0,
                freed: cut.is_none_or(|c| f.freed.sequence < c).then_some(f.freed),
            })
    }

    /// The image assets whose allocation in `VkDeviceMemory` `memory` contains byte `offset` of it,
    /// as of `cut`, live ones first.
    pub(crate) fn images_in_memory(
        &self,
        memory: u64,
        offset: u64,
        cut: Option<u64>,
    ) -> Vec<Tenancy<ImageTenant>> {
        let inside = |p: &ImagePlacement| {
            p.memory == memory && offset >= p.offset && offset - p.offset < p.size.max(1)
        };
        let live = self
            .images
            .values()
            .filter(|t| inside(&t.placement) && placed_before(&t.since, cut))
            .map(|t| Tenancy {
                tenant: t.clone(),
                start: 0,
                freed: None,
            });
        let freed = self
            .freed_images
            .iter()
            .rev()
            .filter(|f| inside(&f.tenant.placement) && placed_before(&f.tenant.since, cut))
            .map(|f| Tenancy {
                tenant: f.tenant.clone(),
                start: 0,
                freed: cut.is_none_or(|c| f.freed.sequence < c).then_some(f.freed),
            });
        let mut all: Vec<_> = live.chain(freed).collect();
        all.sort_by_key(|t| t.freed.map(|f| std::cmp::Reverse(f.sequence)));
        all
    }

    /// Heap bytes held, approximately: table entries and names (strings counted by length).
    pub fn memory(&self) -> usize {
        use std::mem::size_of;
        let names = |n: &AssetName| {
            size_of::<AssetName>() + n.id.len() + n.path.as_ref().map_or(0, String::len)
        };
        // A BTreeMap entry costs its key and value plus about a third again in node overhead.
        let slab_entries: usize = self.slabs.values().map(BTreeMap::len).sum();
        let mesh_tenant = size_of::<u64>() + size_of::<MeshTenant>();
        let mut bytes = slab_entries * mesh_tenant * 4 / 3
            + self.slabs.capacity() * (size_of::<u32>() + size_of::<BTreeMap<u64, MeshTenant>>())
            + self.mesh_places.capacity() * (size_of::<AssetKey>() + size_of::<Vec<(u32, u64)>>())
            + self.mesh_places.values().map(Vec::capacity).sum::<usize>() * size_of::<(u32, u64)>()
            + self.freed_meshes.capacity() * size_of::<FreedMesh>()
            + self.images.capacity() * (size_of::<u64>() + size_of::<ImageTenant>())
            + self.image_of_asset.capacity() * (size_of::<AssetKey>() + size_of::<u64>())
            + self.freed_images.capacity() * size_of::<FreedImage>();
        // Names are shared by a mesh's vertex and index tenants: count each once, live ones only.
        let mut seen = std::collections::HashSet::new();
        for tenant in self.slabs.values().flat_map(BTreeMap::values) {
            if seen.insert(Arc::as_ptr(&tenant.name)) {
                bytes += names(&tenant.name);
            }
        }
        for tenant in self.images.values() {
            bytes += names(&tenant.name);
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(sequence: u64) -> Stamp {
        Stamp {
            sequence,
            frame: sequence,
            at: Instant::now(),
        }
    }

    fn mesh(n: u128) -> AssetKey {
        AssetKey::Uuid(n)
    }

    fn tenant(n: u128, path: &str, len: u64, since: u64) -> MeshTenant {
        MeshTenant {
            mesh: mesh(n),
            name: Arc::new(AssetName {
                id: format!("mesh {n}"),
                path: Some(path.to_owned()),
            }),
            data: MeshData::Vertex,
            len,
            element_size: 32,
            since: stamp(since),
        }
    }

    fn path_at(map: &AssetMap, slab: u32, offset: u64, cut: Option<u64>) -> Option<(String, bool)> {
        map.mesh_at(slab, offset, cut).map(|t| {
            (
                t.tenant.name.path.clone().unwrap_or_default(),
                t.freed.is_some(),
            )
        })
    }

    #[test]
    fn a_slab_offset_names_its_mesh_and_the_last_tenant_after_a_removal() {
        let mut map = AssetMap::default();
        map.place_mesh(3, 0, tenant(1, "rock.mesh", 320, 10));
        map.place_mesh(3, 320, tenant(2, "tree.mesh", 640, 10));
        assert_eq!(
            path_at(&map, 3, 479, None),
            Some(("tree.mesh".into(), false))
        );
        assert_eq!(
            path_at(&map, 3, 319, None),
            Some(("rock.mesh".into(), false))
        );
        assert_eq!(path_at(&map, 3, 960, None), None, "past every tenant");
        assert_eq!(path_at(&map, 4, 0, None), None, "another slab");

        map.free_mesh(mesh(2), stamp(20));
        assert_eq!(map.mesh_count(), 1);
        assert_eq!(
            path_at(&map, 3, 479, None),
            Some(("tree.mesh".into(), true))
        );
        // As of before the removal, it was still there.
        assert_eq!(
            path_at(&map, 3, 479, Some(15)),
            Some(("tree.mesh".into(), false))
        );
        // A new tenant in the hole wins from its placement on; before it, the freed one.
        map.place_mesh(3, 320, tenant(5, "bush.mesh", 64, 30));
        assert_eq!(
            path_at(&map, 3, 330, None),
            Some(("bush.mesh".into(), false))
        );
        assert_eq!(
            path_at(&map, 3, 330, Some(25)),
            Some(("tree.mesh".into(), true))
        );
        // Bytes of the old tenant past the new one's end: still the old tenant's.
        assert_eq!(
            path_at(&map, 3, 500, None),
            Some(("tree.mesh".into(), true))
        );
    }

    #[test]
    fn freed_history_is_bounded() {
        let mut map = AssetMap::default();
        for i in 0..(MAX_FREED_TENANTS as u128 + 10) {
            map.place_mesh(1, i as u64 * 64, tenant(i, "m", 64, i as u64));
            map.free_mesh(mesh(i), stamp(i as u64 + 1));
        }
        assert_eq!(map.freed_meshes.len(), MAX_FREED_TENANTS);
        assert_eq!(path_at(&map, 1, 0, None), None, "the oldest fell out");
        assert!(path_at(&map, 1, (MAX_FREED_TENANTS as u64 + 9) * 64, None).is_some());
    }

    fn image_tenant(n: u128, image: u64, memory: u64, offset: u64, since: u64) -> ImageTenant {
        ImageTenant {
            asset: AssetKey::Uuid(n),
            name: Arc::new(AssetName {
                id: format!("image {n}"),
                path: Some(format!("textures/{n}.img")),
            }),
            placement: ImagePlacement {
                image,
                memory,
                offset,
                size: 0x1000,
            },
            since: stamp(since),
        }
    }

    #[test]
    fn images_by_handle_and_by_place_in_their_memory() {
        let mut map = AssetMap::default();
        map.place_image(image_tenant(1, 0xa, 0x100, 0x0, 1));
        map.place_image(image_tenant(2, 0xb, 0x100, 0x2000, 1));
        let path = |t: &Tenancy<ImageTenant>| t.tenant.name.path.clone().unwrap();
        assert_eq!(path(&map.image(0xb, None).unwrap()), "textures/2.img");
        let inside = map.images_in_memory(0x100, 0x2010, None);
        assert_eq!(inside.len(), 1);
        assert_eq!(path(&inside[0]), "textures/2.img");
        assert!(
            map.images_in_memory(0x100, 0x1800, None).is_empty(),
            "a gap"
        );
        assert!(
            map.images_in_memory(0x200, 0x10, None).is_empty(),
            "other memory"
        );

        // Re-prepared (modified): a new VkImage; the old handle is history of the same asset.
        map.place_image(image_tenant(2, 0xc, 0x100, 0x4000, 5));
        assert_eq!(map.image_count(), 2);
        let old = map.image(0xb, None).unwrap();
        assert!(old.freed.is_some());
        assert!(
            map.image(0xb, Some(3)).unwrap().freed.is_none(),
            "live then"
        );
        map.free_image(AssetKey::Uuid(1), stamp(9));
        assert_eq!(map.image_count(), 1);
        assert!(map.image(0xa, None).unwrap().freed.is_some());
    }
}
