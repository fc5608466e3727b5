//! The address index: which GPU address ranges are live, which were recently freed, and what the
//! objects behind them are called.
//!
//! It folds [`BindingRecord`]s in the order the ring delivers them and tolerates what real drivers
//! send (see docs/driver-facts.md): duplicate binds of one range, unbinds never bound, several objects over one
//! range (aliasing), partial unbinds of sparse resources, reallocation as unbind + bind, and objects
//! flagged `INTERNAL_OBJECT` whose handles later become the application's. Memory is bounded by
//! [`IndexSettings`] and allocated when the index is created: folding an event allocates nothing and
//! does a bounded amount of work.
//!
//! Layout (BENCHMARKS.md has the measurements behind it):
//! - live ranges: a slab of 56-byte entries addressed by `u32` id, found by object (type, handle)
//!   through an open-addressing table sized once (`slab.rs`);
//! - freed ranges: a fixed ring overwritten in place, oldest first;
//! - recent events: a fixed ring of `Copy` records;
//! - names: interned once in a bounded arena and referred to by id (`names.rs`); names that do not
//!   fit are counted in [`IndexStats::names_dropped`].
//!
//! A teardown (a run of unbinds with no bind, as wgpu destroys every resource after a device loss,
//! before the report is built) would push out of the freed ring what a report needs: the objects
//! freed before the fault (a use-after-free's culprit) and, in a teardown longer than the ring, the
//! torn-down objects themselves (live at the fault). So once the freed ring is full, a run of more
//! unbinds than a sixteenth of the ring (4,096 at the default) holds the rest back instead of
//! evicting: the object's entry stays in the live
//! slab, marked held (out of the object table and out of live queries), its unbind noted in a side
//! list of 16 B per held unbind. That list is allocated when a run first holds an unbind and freed
//! when the run ends (a few seconds per crash, or a level's unload), so it costs nothing per live
//! range allowed; it grows up to `max_live_bindings`, and an unbind it cannot hold (the allocation
//! failed) is folded as usual and counted in [`IndexStats::held_overflow`]. Queries see held
//! entries as freed ranges. The next bind ends the run
//! and moves them into the freed ring. While a fault may have happened and its report is not built
//! ([`AddressIndex::set_holding`]: the GPU stalled, the device is lost) binds do not end it, since a
//! game's other threads keep binding. A report built meanwhile sees every range as it was, for a
//! teardown of any size (up to `max_live_bindings` held).
//!
//! Address order (overlap and nearest-below queries) is only needed to resolve a fault, so it is not
//! kept per event: the first query after a change sorts the ranges (`order.rs`), tens of milliseconds
//! at a million ranges, and later queries reuse the sort until the next event.

pub mod allocator_names;
mod fixed_ring;
mod indexer;
mod names;
mod order;
mod slab;

use std::sync::OnceLock;
use std::time::Instant;

use ash::vk;
use serde::Serialize;

use crate::capture::{BindingKind, BindingRecord};
use fixed_ring::FixedRing;
pub use indexer::IndexerHandle;
use names::{NameArena, NameId, MAX_NAME_LEN, NO_NAME};
pub use order::range_end;
use order::AddressOrder;
use slab::{BaseTable, LiveEntry, ObjectTable, Slab, HELD, NONE};

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
/// touched as they fill); [`AddressIndex::memory`] says how much.
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
    /// (names still used by a live range, a kept freed range or a recent event) and costs about 1.75x
    /// this in heap (ids and their lookup table included). Default 2 MiB: 65,536 names, one per kept
    /// freed range, 3.5 MiB of heap; labels by kind ("mesh vertex buffer") take one name each, so
    /// only per-object labels can fill it. Names that do not fit are dropped, counted in
    /// [`IndexStats::names_dropped`] from [`IndexStats::first_name_dropped_at`], and the report says
    /// so ([`AddressIndex::names_not_kept_note`]). Keeping 1,000,000 distinct names takes 32 MiB
    /// here: 52.5 MiB more heap, 148.7 B per live binding at 1,000,000 live instead of 93.6 B
    /// (BENCHMARKS.md), past the index's 96 B budget, so the default keeps 65,536.
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

/// A resource's range with what the index knows of it (see [`AddressIndex::nearest_resource_below`]).
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

/// A freed range in the freed ring.
#[derive(Clone, Copy)]
struct FreedEntry {
    base: u64,
    size: u64,
    handle: u64,
    bound_frame: u64,
    bound_sequence: u64,
    freed_frame: u64,
    freed_sequence: u64,
    freed_at: Instant,
    object_type: i32,
    name: NameId,
    /// The unbind matched a bind we saw (`bound_*` are valid).
    matched: bool,
}

/// An event in the recent-events ring.
#[derive(Clone, Copy)]
struct RecentEntry {
    sequence: u64,
    frame: u64,
    handle: u64,
    base: u64,
    size: u64,
    seen_at: Instant,
    object_type: i32,
    name: NameId,
    kind: BindingKind,
    internal: bool,
}

/// An unbind held back during an unbind run (see the module documentation): 16 bytes, in a list
/// that exists only while a run holds unbinds.
#[derive(Clone, Copy)]
struct HeldUnbind {
    /// The live entry it unbinds (marked [`HELD`]).
    id: u32,
    /// The name the freed range gets.
    name: NameId,
    /// Ring sequence and frame of the unbind, after those of the run's first held unbind.
    sequence_offset: u32,
    frame_offset: u32,
}

/// Where the held unbinds of the current run start.
#[derive(Clone, Copy)]
struct HeldFrom {
    sequence: u64,
    frame: u64,
    seen_at: Instant,
}

/// Live and freed ranges in address order, built by the first query after a change.
struct Orders {
    /// Ids are slab ids (held entries left out).
    live: AddressOrder,
    /// Ids are physical slots of the freed ring, then `freed capacity + i` for held unbind `i`.
    freed: AddressOrder,
}

/// What an unbind's freed range records of the unbind.
#[derive(Clone, Copy)]
struct FreedBy {
    object_type: i32,
    handle: u64,
    sequence: u64,
    frame: u64,
}

impl FreedBy {
    fn record(record: &BindingRecord) -> Self {
        Self {
            object_type: record.object_type,
            handle: record.handle,
            sequence: record.sequence,
            frame: record.frame,
        }
    }
}

/// Live and recently freed GPU address ranges with object names.
pub struct AddressIndex {
    settings: IndexSettings,
    slab: Slab,
    objects: ObjectTable,
    at_base: BaseTable,
    freed: FixedRing<FreedEntry>,
    recent: FixedRing<RecentEntry>,
    names: NameArena,
    stats: IndexStats,
    /// Where the current run of unbinds began, tracked as events arrive (see
    /// [`Self::trailing_unbind_run_start`]).
    unbind_run: UnbindRun,
    /// Unbinds held back in the current run: empty and unallocated outside a held run, grown as the
    /// run holds more (up to `max_live_bindings`), freed when it ends.
    held: Vec<HeldUnbind>,
    held_from: Option<HeldFrom>,
    /// Hold unbinds across binds too (see [`Self::set_holding`]).
    holding: bool,
    /// Address order for queries; emptied by every change.
    order: OnceLock<Orders>,
}

/// The latest bind and the first unbind after it, by ring sequence.
#[derive(Clone, Copy, Default)]
struct UnbindRun {
    last_bind: Option<u64>,
    first_unbind_since: Option<u64>,
    /// Unbinds since the latest bind.
    unbinds: u32,
}

/// Unbinds in a run before the rest are held back (unless holding is on): a sixteenth of the freed
/// ring, at most 4,096 (the default ring's sixteenth). A frame's ordinary churn (a game destroying a
/// thousand buffers in a row) folds as before, and a teardown costs the freed ring only that many of
/// its oldest ranges.
fn long_unbind_run(max_freed_bindings: usize) -> u32 {
    (max_freed_bindings / 16).min(4_096) as u32
}

/// How many records ahead [`AddressIndex::apply_all`] prefetches (enough to cover a memory latency
/// with the work of folding the records in between).
pub const PREFETCH_AHEAD: usize = 8;

impl Default for AddressIndex {
    fn default() -> Self {
        Self::new(IndexSettings::default())
    }
}

/// `bytes` as UTF-8 with invalid sequences replaced by U+FFFD (as `String::from_utf8_lossy`), in
/// `buf` when a replacement is needed, so nothing is allocated; cut at [`MAX_NAME_LEN`] bytes.
fn lossy_utf8<'a>(bytes: &'a [u8], buf: &'a mut [u8; MAX_NAME_LEN]) -> &'a str {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s;
    }
    let mut len = 0;
    'chunks: for chunk in bytes.utf8_chunks() {
        let replacement = if chunk.invalid().is_empty() {
            ""
        } else {
            "\u{FFFD}"
        };
        for piece in [chunk.valid(), replacement] {
            for c in piece.chars() {
                let n = c.len_utf8();
                if len + n > buf.len() {
                    break 'chunks;
                }
                c.encode_utf8(&mut buf[len..len + n]);
                len += n;
            }
        }
    }
    std::str::from_utf8(&buf[..len]).unwrap_or("")
}

/// `name`, or `fallback` when the event carried none.
fn name_or(name: NameId, fallback: NameId) -> NameId {
    if name == NO_NAME {
        fallback
    } else {
        name
    }
}

impl AddressIndex {
    /// An empty index with these bounds; allocates everything it will ever hold.
    pub fn new(settings: IndexSettings) -> Self {
        Self {
            slab: Slab::new(settings.max_live_bindings),
            objects: ObjectTable::new(settings.max_live_bindings),
            at_base: BaseTable::new(settings.max_live_bindings),
            freed: FixedRing::new(settings.max_freed_bindings),
            recent: FixedRing::new(settings.max_recent_events),
            names: NameArena::new(settings.max_name_bytes),
            stats: IndexStats::default(),
            unbind_run: UnbindRun::default(),
            held: Vec::new(),
            held_from: None,
            holding: false,
            order: OnceLock::new(),
            settings,
        }
    }

    /// Empties the index (a new render device: nothing of the old one may resolve on it). Keeps the
    /// allocations and the settings.
    pub fn reset(&mut self) {
        self.slab.clear();
        self.objects.clear();
        self.at_base.clear();
        self.freed.clear();
        self.recent.clear();
        self.names.clear();
        self.stats = IndexStats::default();
        self.unbind_run = UnbindRun::default();
        self.held = Vec::new(); // their names went with the arena
        self.held_from = None;
        // A hold belongs to the device that asked for it: the new device starts without one.
        self.holding = false;
        self.order = OnceLock::new();
    }

    /// The bounds in force.
    pub fn settings(&self) -> &IndexSettings {
        &self.settings
    }

    /// Counters since creation (or the last [`Self::reset`]).
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// Heap bytes the index holds for folding: fixed at creation by the settings, whatever it folds,
    /// plus 16 B per unbind held back while a run holds some (none otherwise; freed when the run
    /// ends). Not included: the address order the first query after a change builds (24 bytes per
    /// live or kept freed range, freed on the next change).
    pub fn memory(&self) -> usize {
        self.slab.memory()
            + self.objects.memory()
            + self.at_base.memory()
            + self.freed.memory()
            + self.recent.memory()
            + self.names.memory()
            + self.held.capacity() * std::mem::size_of::<HeldUnbind>()
    }

    /// Number of live ranges.
    pub fn live_len(&self) -> usize {
        self.slab.len() - self.held.len()
    }

    /// Number of freed ranges kept (unbinds held back in a teardown included).
    pub fn freed_len(&self) -> usize {
        self.freed.len() + self.held.len()
    }

    /// The most recent events, oldest first.
    pub fn recent_events(
        &self,
    ) -> impl DoubleEndedIterator<Item = IndexedEvent<'_>> + ExactSizeIterator {
        self.recent.iter().map(|e| IndexedEvent {
            sequence: e.sequence,
            frame: e.frame,
            kind: e.kind,
            object_type: e.object_type,
            handle: e.handle,
            base: e.base,
            size: e.size,
            name: self.names.name(e.name),
            internal: e.internal,
            seen_at: Some(e.seen_at),
        })
    }

    /// Ring sequence where the trailing run of unbinds (no bind after it) begins, if a bind was ever
    /// folded. After a device loss that run is wgpu destroying every resource. Tracked as events
    /// arrive, so it is exact however long the run (not bounded by the recent events kept).
    pub fn trailing_unbind_run_start(&self) -> Option<u64> {
        let run = self.unbind_run;
        run.last_bind
            .map(|bind| run.first_unbind_since.unwrap_or(bind + 1))
    }

    /// Unbinds in the trailing run (since the latest bind).
    pub fn trailing_unbind_run_len(&self) -> u32 {
        self.unbind_run.unbinds
    }

    /// First live entry of an object, if it has any (null handles name no object).
    fn first_entry(&self, key: ObjectKey) -> Option<u32> {
        if key.handle == 0 {
            return None;
        }
        self.objects
            .find(&self.slab, key.object_type, key.handle)
            .ok()
            .map(|bucket| self.objects.first(bucket))
    }

    /// The name known for an object with a live range, if any.
    pub fn name_of(&self, key: ObjectKey) -> Option<&str> {
        let first = self.first_entry(key)?;
        self.names.name(self.slab[first].name)
    }

    /// Records a name learned elsewhere (e.g. from wgpu's allocator report). Names of objects with no
    /// live range are not kept, so the names stay bounded by what the index holds.
    pub fn set_name(&mut self, key: ObjectKey, name: &str) {
        let Some(first) = self.first_entry(key) else {
            return;
        };
        match self.names.intern(name) {
            Some(id) => {
                self.rename_object(first, id);
                self.names.release(id);
            }
            None => self.stats.names_dropped += 1,
        }
    }

    /// Distinct names the index holds now (used by a live range, a kept freed range or a recent
    /// event); at most `max_name_bytes / 32`.
    pub fn names_in_use(&self) -> usize {
        self.names.in_use()
    }

    /// What a report says when names were not kept: how many, from when, and why (the name arena's
    /// budget, [`IndexSettings::max_name_bytes`]), so "unnamed" is not read as "never named".
    /// `None` when every name was kept.
    pub fn names_not_kept_note(&self) -> Option<String> {
        let stats = &self.stats;
        if stats.names_dropped == 0 {
            return None;
        }
        let from = stats
            .first_name_dropped_at
            .map(|s| format!(" from ring sequence {s} on"))
            .unwrap_or_default();
        Some(format!(
            "{} object names were not kept{from}: the name arena (max_name_bytes {} B, {} distinct \
             names) was full of names still in use; objects named after it filled may show as \
             unnamed (raise IndexSettings::max_name_bytes, 32 B of it and 56 B of heap per \
             distinct name, to keep them)",
            stats.names_dropped,
            self.settings.max_name_bytes,
            self.names.max_names(),
        ))
    }

    /// Gives every live entry of the object starting at `first` the name `id`.
    fn rename_object(&mut self, first: u32, id: NameId) {
        let mut cur = first;
        while cur != NONE {
            let old = self.slab[cur].name;
            if old != id {
                self.names.acquire(id);
                self.slab[cur].name = id;
                self.names.release(old);
            }
            cur = self.slab[cur].next;
        }
    }

    fn orders(&self) -> &Orders {
        self.order.get_or_init(|| {
            let first_held = self.settings.max_freed_bindings as u32;
            Orders {
                live: AddressOrder::build(
                    self.slab
                        .iter()
                        .filter(|(_, e)| e.next != HELD)
                        .map(|(id, e)| (e.base, e.size, id)),
                ),
                freed: AddressOrder::build(
                    self.freed
                        .slots()
                        .map(|(slot, f)| (f.base, f.size, slot as u32))
                        .chain(self.held.iter().enumerate().map(|(i, h)| {
                            let e = &self.slab[h.id];
                            (e.base, e.size, first_held + i as u32)
                        })),
                ),
            }
        })
    }

    /// The freed range behind an id of the freed order: a slot of the freed ring, or a held unbind.
    fn freed_entry(&self, id: u32) -> FreedEntry {
        let first_held = self.settings.max_freed_bindings;
        match (id as usize).checked_sub(first_held) {
            None => *self.freed.at_slot(id as usize),
            Some(i) => self.held_entry(&self.held[i]),
        }
    }

    /// A held unbind as the freed range it becomes when the run ends.
    fn held_entry(&self, h: &HeldUnbind) -> FreedEntry {
        let e = &self.slab[h.id];
        let from = self.held_from.expect("held unbinds have a start");
        FreedEntry {
            base: e.base,
            size: e.size,
            handle: e.handle,
            bound_frame: e.bound_frame,
            bound_sequence: e.bound_sequence,
            freed_frame: from.frame + u64::from(h.frame_offset),
            freed_sequence: from.sequence + u64::from(h.sequence_offset),
            freed_at: from.seen_at,
            object_type: e.object_type,
            name: h.name,
            matched: true,
        }
    }

    /// How recently an id of the freed order was freed (higher is more recent).
    fn freed_recency(&self, id: u32) -> usize {
        let first_held = self.settings.max_freed_bindings;
        match (id as usize).checked_sub(first_held) {
            None => self.freed.age_rank(id as usize),
            Some(i) => first_held + i,
        }
    }

    fn live_at(&self, id: u32) -> (u64, u64, LiveBinding) {
        let e = &self.slab[id];
        (
            e.base,
            e.size,
            LiveBinding {
                key: ObjectKey {
                    object_type: e.object_type,
                    handle: e.handle,
                },
                bound_frame: e.bound_frame,
                bound_sequence: e.bound_sequence,
                internal: e.is_internal(),
            },
        )
    }

    fn freed_view(&self, f: &FreedEntry) -> (u64, u64, FreedBinding<'_>) {
        (
            f.base,
            f.size,
            FreedBinding {
                key: ObjectKey {
                    object_type: f.object_type,
                    handle: f.handle,
                },
                name: self.names.name(f.name),
                bound_frame: f.matched.then_some(f.bound_frame),
                bound_sequence: f.matched.then_some(f.bound_sequence),
                freed_frame: f.freed_frame,
                freed_sequence: f.freed_sequence,
                freed_at: f.freed_at,
            },
        )
    }

    /// Live ranges `(base, size, binding)` overlapping the inclusive interval `[lo, hi]`. The first
    /// query after a change sorts the index (see the module documentation).
    pub fn live_overlapping(&self, lo: u64, hi: u64) -> Vec<(u64, u64, LiveBinding)> {
        self.orders()
            .live
            .overlapping(lo, hi)
            .map(|id| self.live_at(id))
            .collect()
    }

    /// Freed ranges `(base, size, binding)` overlapping `[lo, hi]`, most recently freed first.
    pub fn freed_overlapping(&self, lo: u64, hi: u64) -> Vec<(u64, u64, FreedBinding<'_>)> {
        let mut ids: Vec<u32> = self.orders().freed.overlapping(lo, hi).collect();
        // By the unbind's ring sequence: held unbinds enter the ring after later unmatched ones.
        ids.sort_unstable_by_key(|&id| {
            std::cmp::Reverse((self.freed_entry(id).freed_sequence, self.freed_recency(id)))
        });
        ids.into_iter()
            .map(|id| self.freed_view(&self.freed_entry(id)))
            .collect()
    }

    /// The resource (not memory) that was live at ring position `as_of` (now, when `None`) and ends
    /// closest at or below `address`: the object an overrun most likely came from.
    pub fn nearest_resource_below(
        &self,
        address: u64,
        as_of: Option<u64>,
    ) -> Option<ResourceRange<'_>> {
        let memory = vk::ObjectType::DEVICE_MEMORY.as_raw();
        let orders = self.orders();
        let live = orders
            .live
            .nearest_ending_at_or_below_where(address, |id| {
                let e = &self.slab[id];
                e.object_type != memory && as_of.is_none_or(|cut| e.bound_sequence < cut)
            })
            .map(|id| {
                let e = &self.slab[id];
                ResourceRange {
                    base: e.base,
                    size: e.size,
                    key: ObjectKey {
                        object_type: e.object_type,
                        handle: e.handle,
                    },
                    name: self.names.name(e.name),
                    bound_sequence: e.bound_sequence,
                }
            });
        // Freed by the teardown after the cut-off: it was live when the GPU faulted.
        let freed_then_live = as_of
            .and_then(|cut| {
                orders
                    .freed
                    .nearest_ending_at_or_below_where(address, |id| {
                        let f = self.freed_entry(id);
                        f.object_type != memory
                            && f.freed_sequence >= cut
                            && (!f.matched || f.bound_sequence < cut)
                    })
            })
            .map(|id| {
                let f = self.freed_entry(id);
                ResourceRange {
                    base: f.base,
                    size: f.size,
                    key: ObjectKey {
                        object_type: f.object_type,
                        handle: f.handle,
                    },
                    name: self.names.name(f.name),
                    bound_sequence: if f.matched { f.bound_sequence } else { 0 },
                }
            });
        [live, freed_then_live]
            .into_iter()
            .flatten()
            .max_by_key(|r| range_end(r.base, r.size))
    }

    /// The live range ending closest at or below `address`.
    pub fn nearest_live_below(&self, address: u64) -> Option<(u64, u64, LiveBinding)> {
        let id = self
            .orders()
            .live
            .nearest_ending_at_or_below_where(address, |_| true)?;
        Some(self.live_at(id))
    }

    /// Every freed range `(base, size, binding)` kept, oldest first (unbinds held back in a
    /// teardown last).
    pub fn freed_bindings(&self) -> impl DoubleEndedIterator<Item = (u64, u64, FreedBinding<'_>)> {
        let held = self.held.iter().map(|h| self.held_entry(h));
        self.freed
            .iter()
            .copied()
            .chain(held)
            .map(|f| self.freed_view(&f))
    }

    /// Every live range `(base, size, binding)`, unordered.
    pub fn live_bindings(&self) -> impl Iterator<Item = (u64, u64, LiveBinding)> + '_ {
        self.slab
            .iter()
            .filter(|(_, e)| e.next != HELD)
            .map(|(id, _)| self.live_at(id))
    }

    /// Starts loading what folding `record` reads first (its object's bucket, a likely cache and
    /// TLB miss once the table outgrows the cache); a hint, no effect on the result. Call it a few
    /// records before [`Self::apply`] on that record, as [`Self::apply_all`] does.
    #[inline]
    pub fn prefetch(&self, record: &BindingRecord) {
        if record.handle != 0 {
            self.objects.prefetch(record.object_type, record.handle);
        }
    }

    /// Folds `records` in order, exactly as [`Self::apply`] on each, prefetching [`PREFETCH_AHEAD`]
    /// records ahead so that their cache misses overlap.
    pub fn apply_all(&mut self, records: &[BindingRecord], now: Instant) {
        for (i, record) in records.iter().enumerate() {
            if let Some(ahead) = records.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            self.apply(record, now);
        }
    }

    /// Folds one record in. `now` stamps it (the ring carries frames, not clock times, to keep the
    /// callback cheap). Allocates nothing; the work is bounded by the object's live ranges (one,
    /// almost always) and probe runs of tables at most half full.
    pub fn apply(&mut self, record: &BindingRecord, now: Instant) {
        self.stats.events += 1;
        if self.order.get().is_some() {
            self.order = OnceLock::new();
        }
        let found = if record.handle != 0 {
            self.objects
                .find(&self.slab, record.object_type, record.handle)
        } else {
            Err(usize::MAX)
        };
        let first = found.ok().map(|bucket| self.objects.first(bucket));
        let name = self.event_name(record, first);
        match record.kind {
            BindingKind::Bind => {
                if !self.holding {
                    self.release_held();
                }
                self.unbind_run = UnbindRun {
                    last_bind: Some(record.sequence),
                    first_unbind_since: None,
                    unbinds: 0,
                };
                self.bind(record, found, name);
            }
            BindingKind::Unbind => {
                let run = &mut self.unbind_run;
                run.first_unbind_since = run.first_unbind_since.or(Some(record.sequence));
                run.unbinds = run.unbinds.saturating_add(1);
                self.unbind(record, found, name, now);
            }
        }
        self.remember(record, name, now);
        self.names.release(name);
    }

    /// The event's name, with one reference for the caller: the one it carries (which the object's
    /// live ranges then take too), else the object's.
    fn event_name(&mut self, record: &BindingRecord, first: Option<u32>) -> NameId {
        let known = first.map_or(NO_NAME, |id| self.slab[id].name);
        let carried = record.name_bytes();
        if carried.is_empty() {
            self.names.acquire(known);
            return known;
        }
        // A label seen lately (a kind name, over and over): no UTF-8 check, hash or probe.
        if let Some(id) = self.names.recent(carried) {
            self.names.acquire(id);
            if id != known {
                if let Some(first) = first {
                    self.rename_object(first, id);
                }
            }
            return id;
        }
        let mut buf = [0u8; MAX_NAME_LEN];
        let name = lossy_utf8(carried, &mut buf);
        if known == NO_NAME || self.names.get(known) != name {
            match self.names.intern(name) {
                Some(id) => {
                    if let Some(first) = first {
                        self.rename_object(first, id);
                    }
                    return id;
                }
                None => {
                    self.stats.names_dropped += 1;
                    self.stats
                        .first_name_dropped_at
                        .get_or_insert(record.sequence);
                }
            }
        }
        self.names.acquire(known);
        known
    }

    fn bind(&mut self, record: &BindingRecord, found: Result<usize, usize>, name: NameId) {
        self.stats.binds += 1;
        let internal = record.is_internal_object();
        let (object_type, handle, base, size) =
            (record.object_type, record.handle, record.base, record.size);
        let duplicate = if handle != 0 {
            let mut duplicate = false;
            let mut cur = found.map_or(NONE, |bucket| self.objects.first(bucket));
            while cur != NONE {
                let e = &mut self.slab[cur];
                if !internal {
                    // The driver now reports this handle as the application's: its earlier
                    // internal bindings are the same object.
                    e.set_internal(false);
                }
                duplicate |= e.base == base && e.size == size;
                cur = e.next;
            }
            duplicate
        } else {
            // Null handles name no object: a duplicate is another null-handle range just like it.
            self.at_base
                .chain(&self.slab, object_type, base)
                .any(|id| self.slab[id].handle == 0 && self.slab[id].size == size)
        };
        if duplicate {
            self.stats.duplicate_binds += 1;
            return;
        }
        if self.slab.is_full() {
            self.stats.live_overflow += 1;
            return;
        }
        self.names.acquire(name);
        let id = self.slab.insert(LiveEntry::new(record, base, size, name));
        if handle != 0 {
            // Becomes the object's first entry; the others follow it.
            let (Ok(bucket) | Err(bucket)) = found;
            self.slab[id].next = found.map_or(NONE, |bucket| self.objects.first(bucket));
            self.objects.set(bucket, object_type, handle, id);
        }
        if handle == 0 || internal {
            self.at_base.insert(&mut self.slab, id);
        }
    }

    fn unbind(
        &mut self,
        record: &BindingRecord,
        found: Result<usize, usize>,
        name: NameId,
        now: Instant,
    ) {
        self.stats.unbinds += 1;
        let (lo, end) = (record.base, range_end(record.base, record.size));
        if let Ok(bucket) = found {
            if self.try_hold(record, bucket, name, now) {
                return;
            }
        }
        let mut matched = false;
        if let Ok(bucket) = found {
            let first = self.objects.first(bucket);
            let (mut head, mut prev, mut cur) = (first, NONE, first);
            while cur != NONE {
                let e = self.slab[cur];
                let next = e.next;
                let e_end = range_end(e.base, e.size);
                if e.base >= end || e_end <= lo {
                    prev = cur;
                    cur = next;
                    continue;
                }
                matched = true;
                let (left, right) = (e.base < lo, e_end > end);
                if left || right {
                    self.stats.partial_unbinds += 1;
                }
                let freed_lo = e.base.max(lo);
                self.push_freed(
                    freed_lo,
                    e_end.min(end) - freed_lo,
                    Some(&e),
                    name_or(name, e.name),
                    FreedBy::record(record),
                    now,
                );
                if !left && !right {
                    if prev == NONE {
                        head = next;
                    } else {
                        self.slab[prev].next = next;
                    }
                    self.free_entry(cur);
                    cur = next;
                    continue;
                }
                // Keep what the unbind did not cover: the left piece (or else the right one) in
                // place, the right one of a split as a new entry after it.
                if left {
                    self.reshape(cur, e.base, lo - e.base);
                } else {
                    self.reshape(cur, end, e_end - end);
                }
                prev = cur;
                if left && right {
                    if self.slab.is_full() {
                        self.stats.live_overflow += 1;
                    } else {
                        self.names.acquire(e.name);
                        let piece = self.slab.insert(e.piece(end, e_end - end));
                        self.slab[piece].next = next;
                        self.slab[cur].next = piece;
                        if e.in_base_table() {
                            self.at_base.insert(&mut self.slab, piece);
                        }
                        prev = piece;
                    }
                }
                cur = next;
            }
            if head != first {
                if head == NONE {
                    self.objects.remove(bucket);
                } else {
                    self.objects
                        .set(bucket, record.object_type, record.handle, head);
                }
            }
        }
        if matched {
            return;
        }
        // Handle unknown (bound before capture, an internal handle, or a null handle): an exact
        // range match on a null-handle or internal object of the same type is the same allocation.
        let candidate = self
            .at_base
            .chain(&self.slab, record.object_type, record.base)
            .find(|&id| self.slab[id].size == record.size);
        match candidate {
            Some(id) => {
                let e = self.slab[id];
                self.push_freed(
                    e.base,
                    e.size,
                    Some(&e),
                    name_or(name, e.name),
                    FreedBy::record(record),
                    now,
                );
                self.unlink_from_object(id);
                self.free_entry(id);
            }
            None => {
                self.stats.unmatched_unbinds += 1;
                self.push_freed(
                    record.base,
                    record.size,
                    None,
                    name,
                    FreedBy::record(record),
                    now,
                );
            }
        }
    }

    /// Moves live entry `id` to `[base, base + size)`, re-indexing it by base if it is indexed so.
    fn reshape(&mut self, id: u32, base: u64, size: u64) {
        let indexed = self.slab[id].in_base_table() && self.slab[id].base != base;
        if indexed {
            self.at_base.remove(&mut self.slab, id);
        }
        self.slab[id].base = base;
        self.slab[id].size = size;
        if indexed {
            self.at_base.insert(&mut self.slab, id);
        }
    }

    /// Takes live entry `id` out of its object's chain (found through the object table).
    fn unlink_from_object(&mut self, id: u32) {
        let (object_type, handle) = (self.slab[id].object_type, self.slab[id].handle);
        if handle == 0 {
            return;
        }
        let Ok(bucket) = self.objects.find(&self.slab, object_type, handle) else {
            return;
        };
        let first = self.objects.first(bucket);
        let next = self.slab[id].next;
        if first == id {
            if next == NONE {
                self.objects.remove(bucket);
            } else {
                self.objects.set(bucket, object_type, handle, next);
            }
            return;
        }
        let mut prev = first;
        while self.slab[prev].next != NONE {
            if self.slab[prev].next == id {
                self.slab[prev].next = next;
                return;
            }
            prev = self.slab[prev].next;
        }
    }

    /// While a fault may have happened and its report is not built yet (the GPU has stalled, or the
    /// device is lost), unbinds are held back whatever comes between them (a game's other threads
    /// keep binding): nothing freed before or after the fault leaves the index until the report is
    /// built, up to `max_live_bindings` held. Turning it off moves what was held into the freed ring.
    pub fn set_holding(&mut self, on: bool) {
        if self.holding == on {
            return;
        }
        if !on {
            self.order = OnceLock::new();
            self.release_held();
        }
        self.holding = on;
    }

    /// Whether unbinds are held back now (see [`Self::set_holding`]).
    pub fn holding(&self) -> bool {
        self.holding
    }

    /// Holds an unbind back instead of pushing the oldest freed range out of a full ring (see the
    /// module documentation). Only the plain case: the object's one live entry, covered exactly, not
    /// indexed by base. Returns whether it did.
    fn try_hold(
        &mut self,
        record: &BindingRecord,
        bucket: usize,
        name: NameId,
        now: Instant,
    ) -> bool {
        let ring = self.settings.max_freed_bindings;
        let long_run = self.unbind_run.unbinds > long_unbind_run(ring);
        if ring == 0
            || self.freed.len() < ring
            || !(self.holding || long_run)
            || self.held.len() >= self.settings.max_live_bindings
        {
            return false;
        }
        let id = self.objects.first(bucket);
        let e = self.slab[id];
        let exact = e.base == record.base
            && range_end(e.base, e.size) == range_end(record.base, record.size);
        if e.next != NONE || e.in_base_table() || !exact {
            return false;
        }
        let from = *self.held_from.get_or_insert(HeldFrom {
            sequence: record.sequence,
            frame: record.frame,
            seen_at: now,
        });
        let offsets = (
            record
                .sequence
                .checked_sub(from.sequence)
                .map(u32::try_from),
            record.frame.checked_sub(from.frame).map(u32::try_from),
        );
        let (Some(Ok(sequence_offset)), Some(Ok(frame_offset))) = offsets else {
            return false;
        };
        if self.held.len() == self.held.capacity() && !self.grow_held() {
            self.stats.held_overflow += 1;
            return false;
        }
        let name = name_or(name, e.name);
        self.names.acquire(name);
        self.objects.remove(bucket);
        self.slab[id].next = HELD;
        self.held.push(HeldUnbind {
            id,
            name,
            sequence_offset,
            frame_offset,
        });
        true
    }

    /// Room for more held unbinds: doubles the list (from 1,024), up to `max_live_bindings`. False
    /// when the allocation fails (the unbind is then folded as usual).
    #[cold]
    fn grow_held(&mut self) -> bool {
        let bound = self.settings.max_live_bindings.min(slab::MAX_ENTRIES);
        let want = (self.held.capacity() * 2).max(1_024).min(bound);
        want > self.held.len() && self.held.try_reserve_exact(want - self.held.len()).is_ok()
    }

    /// Ends the run's held unbinds: each becomes the freed range it stands for (pushing the oldest
    /// out, as any unbind does) and its live entry is freed; the list's memory is returned. Work
    /// bounded by the run's length.
    fn release_held(&mut self) {
        if self.held.capacity() == 0 {
            return;
        }
        for i in 0..self.held.len() {
            let held = self.held[i];
            // The held unbind's name reference passes to the freed range.
            let freed = self.held_entry(&held);
            if let Some(old) = self.freed.push(freed) {
                self.stats.freed_evicted += 1;
                self.names.release(old.name);
            }
            self.slab[held.id].next = NONE;
            self.free_entry(held.id);
        }
        self.held = Vec::new();
        self.held_from = None;
    }

    /// Frees live entry `id`, already out of its object's chain.
    fn free_entry(&mut self, id: u32) {
        self.at_base.remove(&mut self.slab, id);
        let entry = self.slab.remove(id);
        self.names.release(entry.name);
    }

    /// Adds a freed range, overwriting the oldest when the ring is full. `bound` is the live entry
    /// it came from, `None` for an unbind that matched nothing.
    fn push_freed(
        &mut self,
        base: u64,
        size: u64,
        bound: Option<&LiveEntry>,
        name: NameId,
        unbind: FreedBy,
        now: Instant,
    ) {
        if self.settings.max_freed_bindings == 0 {
            return;
        }
        self.names.acquire(name);
        let (object_type, handle) = bound.map_or((unbind.object_type, unbind.handle), |e| {
            (e.object_type, e.handle)
        });
        let entry = FreedEntry {
            base,
            size,
            handle,
            bound_frame: bound.map_or(0, |e| e.bound_frame),
            bound_sequence: bound.map_or(0, |e| e.bound_sequence),
            freed_frame: unbind.frame,
            freed_sequence: unbind.sequence,
            freed_at: now,
            object_type,
            name,
            matched: bound.is_some(),
        };
        if let Some(old) = self.freed.push(entry) {
            self.stats.freed_evicted += 1;
            self.names.release(old.name);
        }
    }

    fn remember(&mut self, record: &BindingRecord, name: NameId, now: Instant) {
        if self.settings.max_recent_events == 0 {
            return;
        }
        self.names.acquire(name);
        let event = RecentEntry {
            sequence: record.sequence,
            frame: record.frame,
            handle: record.handle,
            base: record.base,
            size: record.size,
            seen_at: now,
            object_type: record.object_type,
            name,
            kind: record.kind,
            internal: record.is_internal_object(),
        };
        if let Some(old) = self.recent.push(event) {
            self.names.release(old.name);
        }
    }
}

/// `VkObjectType` as the name a developer recognises (`BUFFER`, `IMAGE`, `DEVICE_MEMORY`).
pub fn object_type_name(object_type: i32) -> String {
    format!("{:?}", vk::ObjectType::from_raw(object_type))
}

fn serialize_object_type<S: serde::Serializer>(raw: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&object_type_name(*raw))
}

#[cfg(test)]
mod tests;
