//! The index's public vocabulary: object keys, the settings that bound it, its counters, and the
//! views its queries return. Plain data; nothing here reads the index.

use std::time::Instant;

use ash::vk;
use serde::Serialize;

use crate::capture::BindingKind;

/// Identifies a Vulkan object the way the binding report does: type plus handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// Raw `VkObjectType`.
    pub object_type: i32,
    /// The 64-bit handle (dispatchable handles are pointers, non-dispatchable ones opaque ids).
    pub handle: u64,
}

impl ObjectKey {
    /// Key for a handle of a given type.
    pub fn new(object_type: vk::ObjectType, handle: u64) -> Self {
        Self {
            object_type: object_type.as_raw(),
            handle,
        }
    }

    /// The object type as Vulkan spells it.
    pub fn vk_object_type(&self) -> vk::ObjectType {
        vk::ObjectType::from_raw(self.object_type)
    }
}

/// Bounds on what the index keeps. Everything is allocated when the index is created (pages are
/// touched as they fill); [`AddressIndex::memory`](super::AddressIndex::memory) says how much.
///
/// The defaults are sized for a game, not for the worst case. wgpu suballocates buffers and
/// textures from large memory blocks, so a scene binds about one range per buffer or texture plus
/// one or two per memory block (the NVIDIA driver binds some memory twice): we estimate tens of
/// thousands for a large game (not measured; the Bevy scene of docs/gpu-validation.md has 25).
/// 262,144 live ranges leaves several times that and costs 29.3 MiB in all at the defaults (80 B
/// per live range allowed; 88 B per freed range kept, the recent events and a 2 MiB name arena;
/// BENCHMARKS.md), plus 16 B per unbind held back while a teardown is held (allocated only then);
/// the old bound of 1,048,576 would reserve 4x as much for live ranges. A game that
/// binds more sees [`IndexStats::live_overflow`] count the binds not indexed, and can raise the
/// bound.
#[derive(Clone, Debug)]
pub struct IndexSettings {
    /// Live ranges kept; binds beyond it are counted in [`IndexStats::live_overflow`] and not
    /// indexed. Default 262,144 (see above); at most 2^28.
    pub max_live_bindings: usize,
    /// Freed ranges kept for use-after-free detection; the oldest is forgotten first
    /// (D3D12 DRED keeps 65,536). Default 65,536.
    pub max_freed_bindings: usize,
    /// Most recent events kept verbatim for breadcrumbs and "what happened around the fault".
    /// Default 4,096.
    pub max_recent_events: usize,
    /// Bytes of the name arena: the names' budget. It holds `max_name_bytes / 32` distinct names
    /// (names still used by a live range, a kept freed range or a recent event) and costs about
    /// 1.75x this in heap (ids and their lookup table included). Default 2 MiB: 65,536 names, one
    /// per kept freed range, 3.5 MiB of heap; labels by kind ("mesh vertex buffer") take one name
    /// each, so only per-object labels can fill it. Names that do not fit are dropped, counted in
    /// [`IndexStats::names_dropped`] from [`IndexStats::first_name_dropped_at`], and the report
    /// says so ([`AddressIndex::names_not_kept_note`]). Keeping 1,000,000 distinct names takes
    /// 32 MiB here: 52.5 MiB more heap, 148.7 B per live binding at 1,000,000 live instead of
    /// 93.6 B (BENCHMARKS.md), past the index's 96 B budget, so the default keeps 65,536.
    ///
    /// [`AddressIndex::names_not_kept_note`]: super::AddressIndex::names_not_kept_note
    pub max_name_bytes: usize,
}

impl Default for IndexSettings {
    fn default() -> Self {
        Self {
            max_live_bindings: 262_144,
            max_freed_bindings: 65_536,
            max_recent_events: 4_096,
            max_name_bytes: 2 << 20,
        }
    }
}

/// A resource's range with what the index knows of it (see
/// [`AddressIndex::nearest_resource_below`](super::AddressIndex::nearest_resource_below)).
#[derive(Clone, Copy, Debug)]
pub struct ResourceRange<'a> {
    /// First address.
    pub base: u64,
    /// Length in bytes.
    pub size: u64,
    /// The object.
    pub key: ObjectKey,
    /// Its name, if known.
    pub name: Option<&'a str>,
    /// Ring sequence of its bind (0 when only its unbind was seen).
    pub bound_sequence: u64,
}

/// A range that is backed by an object now.
#[derive(Clone, Copy, Debug)]
pub struct LiveBinding {
    /// The object.
    pub key: ObjectKey,
    /// Frame of the bind event.
    pub bound_frame: u64,
    /// Ring sequence of the bind event.
    pub bound_sequence: u64,
    /// Still flagged `INTERNAL_OBJECT` (no event without the flag seen yet).
    pub internal: bool,
}

/// A range whose object was unbound (destroyed, freed or moved).
#[derive(Clone, Copy, Debug)]
pub struct FreedBinding<'a> {
    /// The object that was there.
    pub key: ObjectKey,
    /// Its name when it was freed, if one was ever learned.
    pub name: Option<&'a str>,
    /// Frame of the matching bind, `None` when the unbind matched no bind we saw.
    pub bound_frame: Option<u64>,
    /// Ring sequence of the matching bind, `None` when the unbind matched no bind we saw.
    pub bound_sequence: Option<u64>,
    /// Frame of the unbind.
    pub freed_frame: u64,
    /// Ring sequence of the unbind.
    pub freed_sequence: u64,
    /// When the indexer saw the unbind.
    pub freed_at: Instant,
}

/// A binding event as the index saw it, kept for breadcrumbs.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct IndexedEvent<'a> {
    /// Position in the ring's total order.
    pub sequence: u64,
    /// Frame of the event.
    pub frame: u64,
    /// Bind or unbind.
    pub kind: BindingKind,
    /// Raw `VkObjectType`; serialised as its name, e.g. `BUFFER`.
    #[serde(serialize_with = "serialize_object_type")]
    pub object_type: i32,
    /// Object handle.
    pub handle: u64,
    /// First address.
    pub base: u64,
    /// Length in bytes.
    pub size: u64,
    /// Name carried by the event or known for the object then.
    pub name: Option<&'a str>,
    /// `INTERNAL_OBJECT` flag.
    pub internal: bool,
    /// When the indexer saw it (not serialised: reports carry relative times).
    #[serde(skip)]
    pub seen_at: Option<Instant>,
}

/// Counters that say how faithful the index is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct IndexStats {
    /// Records folded in.
    pub events: u64,
    /// Bind records.
    pub binds: u64,
    /// Unbind records.
    pub unbinds: u64,
    /// Binds of a range the same object already had live (the NVIDIA driver repeats some).
    pub duplicate_binds: u64,
    /// Unbinds that matched no live range (bind before capture began, or dropped).
    pub unmatched_unbinds: u64,
    /// Unbinds that covered only part of a live range (sparse resources).
    pub partial_unbinds: u64,
    /// Binds (or pieces left by partial unbinds) not indexed because `max_live_bindings` was reached.
    pub live_overflow: u64,
    /// Freed ranges forgotten because `max_freed_bindings` was reached.
    pub freed_evicted: u64,
    /// Names not kept because the name arena (`max_name_bytes`) was full of names in use.
    #[serde(default)]
    pub names_dropped: u64,
    /// Ring sequence of the first event whose name was not kept (the arena full of names in use):
    /// objects named from then on may show as unnamed. `None` when every name was kept.
    #[serde(default)]
    pub first_name_dropped_at: Option<u64>,
    /// Unbinds a teardown could not hold back (the held list could not grow: out of memory), folded
    /// as usual instead, pushing the oldest freed range out.
    #[serde(default)]
    pub held_overflow: u64,
}

/// `VkObjectType` as the name a developer recognises (`BUFFER`, `IMAGE`, `DEVICE_MEMORY`).
pub fn object_type_name(object_type: i32) -> String {
    format!("{:?}", vk::ObjectType::from_raw(object_type))
}

fn serialize_object_type<S: serde::Serializer>(raw: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&object_type_name(*raw))
}
