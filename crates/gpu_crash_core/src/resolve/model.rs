//! What the resolver concludes about a fault address: verdict, culprits, the binding events around
//! it. Part of the report model (re-exported by `report`).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::capture::BindingKind;
use crate::index::{object_type_name, IndexedEvent};
use crate::serde_hex::{hex, hex_opt, hex_pair};
use crate::vulkan::fault::FaultAccess;

/// The reporter's judgement of one fault address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultVerdict {
    /// The address lies in a range whose object was freed, and in no live range.
    UseAfterFree,
    /// The address lies in no live or freed range but just past the end of a live object.
    OutOfBounds,
    /// The address lies inside a live object (bad index within bounds, wrong format, hardware issue).
    InsideLiveObject,
    /// Nothing known lives or lived there.
    UnknownAddress,
}

impl FaultVerdict {
    /// The snake_case name, as in JSON, tags and fingerprints.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UseAfterFree => "use_after_free",
            Self::OutOfBounds => "out_of_bounds",
            Self::InsideLiveObject => "inside_live_object",
            Self::UnknownAddress => "unknown_address",
        }
    }
}

/// Whether a culprit object still existed at the time of the fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectState {
    /// Still bound.
    Live,
    /// Unbound before the fault.
    Freed,
}

/// A GPU object that may explain a fault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Culprit {
    /// The wgpu/Bevy label or Vulkan debug name, if known.
    pub name: Option<String>,
    /// What to call it in one line: `buffer "particles"`, or `BUFFER 0x5a` when unnamed.
    pub label: String,
    /// `VkObjectType` name, e.g. `BUFFER`.
    pub object_type: String,
    /// Vulkan handle.
    #[serde(with = "hex")]
    pub handle: u64,
    /// First GPU address of its range.
    #[serde(with = "hex")]
    pub base: u64,
    /// Size of its range in bytes.
    pub size: u64,
    /// Live or freed.
    pub state: ObjectState,
    /// Fault address minus `base` (may exceed `size` for overruns).
    pub offset: i64,
    /// For freed objects: milliseconds between the unbind and the fault.
    pub freed_ms_ago: Option<u64>,
    /// For freed objects: frames between the unbind and the fault.
    pub freed_frames_ago: Option<u64>,
    /// For overruns: bytes between the end of the object and the fault address.
    pub bytes_past_end: Option<u64>,
    /// Why this candidate ranks where it does.
    pub reason: String,
    /// `vkGetDeviceMemoryOpaqueCaptureAddress` of the backing memory, for capture/replay tools.
    #[serde(with = "hex_opt", default)]
    pub opaque_capture_address: Option<u64>,
    /// Why `opaque_capture_address` is missing, when it is.
    pub capture_replay_note: Option<String>,
    /// The Bevy asset whose bytes the fault address is in (a mesh inside a shared slab buffer, an
    /// image), when the reporter knows it.
    #[serde(default)]
    pub asset: Option<GpuAsset>,
}

/// What kind of Bevy asset data a culprit's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssetKind {
    /// A mesh's vertex data in one of Bevy's mesh slab buffers.
    MeshVertexData,
    /// A mesh's index data in one of Bevy's mesh slab buffers.
    MeshIndexData,
    /// An image (texture) asset.
    Image,
}

impl AssetKind {
    /// `mesh` or `image`: how a summary line names the asset.
    pub fn noun(self) -> &'static str {
        match self {
            Self::MeshVertexData | Self::MeshIndexData => "mesh",
            Self::Image => "image",
        }
    }

    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MeshVertexData => "mesh_vertex_data",
            Self::MeshIndexData => "mesh_index_data",
            Self::Image => "image",
        }
    }
}

/// An entity that uses an asset (e.g. a `Mesh3d` of that mesh), as the report lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssetUser {
    /// The entity, as Bevy prints it (`12v0`).
    pub entity: String,
    /// Its `Name`, when it has one.
    pub name: Option<String>,
}

/// The Bevy asset a fault address is in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuAsset {
    /// Mesh vertex data, mesh index data or image.
    pub kind: AssetKind,
    /// The asset path (`models/tree.glb#Mesh3/Primitive0`), read when the asset reached the GPU.
    pub path: Option<String>,
    /// The asset id (`AssetId<Mesh>{ index: 3, generation: 0}`): the name of an asset without path.
    pub asset_id: String,
    /// Why there is no path, when there is none (e.g. added with `Assets::add`).
    pub no_path: Option<String>,
    /// Entities using the asset when it was indexed, with their `Name`s (at most a few).
    pub entities: Vec<AssetUser>,
    /// How many entities used it in all.
    pub entity_count: u32,
    /// Where the asset's bytes lie inside the culprit object, `[first, end)` from its base.
    pub byte_range: [u64; 2],
    /// Fault address minus the asset's first byte.
    pub byte_offset: i64,
    /// The vertex or index the fault address is in (meshes).
    pub element: Option<u64>,
    /// Bytes per vertex or index (meshes).
    pub element_size: Option<u64>,
    /// Whether the asset still had these bytes when the GPU faulted.
    pub state: ObjectState,
    /// For a freed asset: frames between its removal and the fault.
    pub freed_frames_ago: Option<u64>,
    /// For a freed asset: milliseconds between its removal and the fault.
    pub freed_ms_ago: Option<u64>,
    /// The object holding it, e.g. `general mesh slab 3`.
    pub container: String,
}

impl GpuAsset {
    /// The path, or the asset id with "(no asset path)".
    pub fn display_name(&self) -> String {
        match &self.path {
            Some(path) => format!("\"{path}\""),
            None => format!("{} (no asset path)", self.asset_id),
        }
    }

    /// `vertex 5`, `index 17` or `byte 4096`: where in the asset the fault is.
    pub fn place(&self) -> String {
        let offset = self.byte_offset.max(0) as u64;
        match (self.kind, self.element) {
            (AssetKind::MeshVertexData, Some(e)) => format!("vertex {e}"),
            (AssetKind::MeshIndexData, Some(e)) => format!("index {e}"),
            _ => format!("byte {offset}"),
        }
    }

    /// What groups the same bug across runs: the kind and the path; without a path the kind only
    /// (asset ids differ between runs).
    pub fn fingerprint_part(&self) -> String {
        match &self.path {
            Some(path) => format!("{} \"{path}\"", self.kind.as_str()),
            None => format!("{} (no asset path)", self.kind.as_str()),
        }
    }
}

/// One address the driver reported, resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultEntry {
    /// `reportedAddress`.
    #[serde(with = "hex")]
    pub address: u64,
    /// The inclusive range `[lo, hi]` the fault lies in, from `addressPrecision`.
    #[serde(with = "hex_pair")]
    pub address_range: [u64; 2],
    /// `addressPrecision` in bytes.
    pub precision: u64,
    /// Read, write, execute, instruction, none.
    pub access: FaultAccess,
    /// The verdict.
    pub verdict: FaultVerdict,
    /// The most likely object, or null.
    pub culprit: Option<Culprit>,
    /// Every candidate, best first (aliasing puts several objects over one address).
    pub candidates: Vec<Culprit>,
    /// One human line, e.g.
    /// `GPU fault: write at 0x1000f010 is 16 bytes past the end of buffer "particles" (live) -> out_of_bounds`.
    pub summary: String,
    /// Binding events that touched the fault range, oldest first.
    pub nearby_events: Vec<BindingEventEntry>,
}

/// A binding event as the report shows it (breadcrumbs, "what happened around the fault").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingEventEntry {
    /// Position in the index's event order.
    pub sequence: u64,
    /// Frame of the event.
    pub frame: u64,
    /// Bind or unbind.
    pub kind: BindingKind,
    /// `VkObjectType` name.
    pub object_type: String,
    /// Object handle.
    #[serde(with = "hex")]
    pub handle: u64,
    /// First address.
    #[serde(with = "hex")]
    pub base: u64,
    /// Length in bytes.
    pub size: u64,
    /// Name known for the object at the time.
    pub name: Option<String>,
    /// `INTERNAL_OBJECT` flag.
    pub internal: bool,
    /// Milliseconds between the event and the crash.
    pub ms_before_crash: Option<u64>,
}

impl BindingEventEntry {
    /// Converts an index event, timing it against the crash.
    pub fn from_indexed(event: &IndexedEvent<'_>, crash_at: Instant) -> Self {
        Self {
            sequence: event.sequence,
            frame: event.frame,
            kind: event.kind,
            object_type: object_type_name(event.object_type),
            handle: event.handle,
            base: event.base,
            size: event.size,
            name: event.name.map(str::to_owned),
            internal: event.internal,
            ms_before_crash: event
                .seen_at
                .map(|t| crash_at.saturating_duration_since(t).as_millis() as u64),
        }
    }
}
