//! The address index: which GPU address ranges are live, which were recently freed, and what the
//! objects behind them are called.
//!
//! It folds [`BindingRecord`]s in the order the ring delivers them and tolerates what real drivers
//! send (see docs/driver-facts.md): duplicate binds of one range, unbinds never bound, several objects over one
//! range (aliasing), partial unbinds of sparse resources, reallocation as unbind + bind, and objects
//! flagged `INTERNAL_OBJECT` whose handles later become the application's. Memory is bounded by
//! [`IndexSettings`].

pub mod allocator_names;
mod indexer;
mod range_table;

use std::collections::VecDeque;

use bevy::platform::collections::hash_map::Entry;
use bevy::platform::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use serde::Serialize;

use crate::capture::{BindingKind, BindingRecord};
pub use indexer::{IndexerHandle, SharedIndex};
pub use range_table::{range_end, RangeTable};

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

/// Bounds on what the index keeps.
#[derive(Clone, Debug)]
pub struct IndexSettings {
    /// Live ranges kept; binds beyond it are counted in [`IndexStats::live_overflow`] and not indexed.
    pub max_live_bindings: usize,
    /// Freed ranges kept for use-after-free detection; the oldest is forgotten first
    /// (D3D12 DRED keeps 65,536).
    pub max_freed_bindings: usize,
    /// Most recent events kept verbatim for breadcrumbs and "what happened around the fault".
    pub max_recent_events: usize,
}

impl Default for IndexSettings {
    fn default() -> Self {
        Self {
            max_live_bindings: 1 << 20,
            max_freed_bindings: 65_536,
            max_recent_events: 4_096,
        }
    }
}

/// A resource's range with what the index knows of it (see [`AddressIndex::nearest_resource_below`]).
#[derive(Clone, Debug)]
pub struct ResourceRange {
    /// First address.
    pub base: u64,
    /// Length in bytes.
    pub size: u64,
    /// The object.
    pub key: ObjectKey,
    /// Its name, if known.
    pub name: Option<Arc<str>>,
    /// Ring sequence of its bind (0 when only its unbind was seen).
    pub bound_sequence: u64,
}

/// A range that is backed by an object now.
#[derive(Clone, Debug)]
pub struct LiveBinding {
    /// The object.
    pub key: ObjectKey,
    /// Frame of the bind event.
    pub bound_frame: u64,
    /// Ring sequence of the bind event.
    pub bound_sequence: u64,
    /// When the indexer saw the bind.
    pub bound_at: Instant,
    /// Still flagged `INTERNAL_OBJECT` (no event without the flag seen yet).
    pub internal: bool,
}

/// A range whose object was unbound (destroyed, freed or moved).
#[derive(Clone, Debug)]
pub struct FreedBinding {
    /// The object that was there.
    pub key: ObjectKey,
    /// Its name when it was freed, if one was ever learned.
    pub name: Option<Arc<str>>,
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
#[derive(Clone, Debug, Serialize)]
pub struct IndexedEvent {
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
    pub name: Option<Arc<str>>,
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
    /// Binds not indexed because `max_live_bindings` was reached.
    pub live_overflow: u64,
    /// Freed ranges forgotten because `max_freed_bindings` was reached.
    pub freed_evicted: u64,
}

/// Live and recently freed GPU address ranges with object names.
pub struct AddressIndex {
    settings: IndexSettings,
    next_id: u64,
    live: RangeTable<LiveBinding>,
    live_by_object: HashMap<ObjectKey, LiveIds>,
    freed: RangeTable<FreedBinding>,
    freed_order: VecDeque<u64>,
    names: HashMap<ObjectKey, Arc<str>>,
    recent: VecDeque<IndexedEvent>,
    stats: IndexStats,
    /// Names already allocated: labels repeat every frame, so each is allocated once.
    interned: HashSet<Arc<str>>,
    /// Reused list of matched live ids in `unbind`, so the steady state allocates nothing there.
    scratch: Vec<u64>,
}

/// Distinct names kept interned before the set is cleared (names in use stay alive by their `Arc`).
const MAX_INTERNED: usize = 16_384;

/// The live range ids of one object: almost always one, stored inline so that creating an object
/// allocates nothing here.
#[derive(Clone, Debug)]
enum LiveIds {
    One(u64),
    Many(Vec<u64>),
}

impl LiveIds {
    fn as_slice(&self) -> &[u64] {
        match self {
            LiveIds::One(id) => std::slice::from_ref(id),
            LiveIds::Many(ids) => ids,
        }
    }

    fn push(&mut self, id: u64) {
        match self {
            LiveIds::One(first) => *self = LiveIds::Many(vec![*first, id]),
            LiveIds::Many(ids) => ids.push(id),
        }
    }

    /// Removes `id`; true when none is left.
    fn remove(&mut self, id: u64) -> bool {
        match self {
            LiveIds::One(only) => *only == id,
            LiveIds::Many(ids) => {
                ids.retain(|&other| other != id);
                ids.is_empty()
            }
        }
    }
}

impl Default for AddressIndex {
    fn default() -> Self {
        Self::new(IndexSettings::default())
    }
}

impl AddressIndex {
    /// Empties the index (a new render device: nothing of the old one may resolve on it).
    pub fn reset(&mut self) {
        *self = Self::new(self.settings.clone());
    }

    /// An empty index with these bounds.
    pub fn new(settings: IndexSettings) -> Self {
        Self {
            settings,
            next_id: 0,
            live: RangeTable::default(),
            live_by_object: HashMap::new(),
            freed: RangeTable::default(),
            freed_order: VecDeque::new(),
            names: HashMap::new(),
            recent: VecDeque::new(),
            stats: IndexStats::default(),
            interned: HashSet::new(),
            scratch: Vec::new(),
        }
    }

    /// The bounds in force.
    pub fn settings(&self) -> &IndexSettings {
        &self.settings
    }

    /// Counters since creation.
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// Number of live ranges.
    pub fn live_len(&self) -> usize {
        self.live.len()
    }

    /// Number of freed ranges kept.
    pub fn freed_len(&self) -> usize {
        self.freed.len()
    }

    /// The most recent events, oldest first.
    pub fn recent_events(
        &self,
    ) -> impl DoubleEndedIterator<Item = &IndexedEvent> + ExactSizeIterator {
        self.recent.iter()
    }

    /// Ring sequence where the trailing run of unbinds (no bind after it) begins, if the recent
    /// events reach back to a bind. After a device loss that run is wgpu destroying every resource.
    pub fn trailing_unbind_run_start(&self) -> Option<u64> {
        let mut start = None;
        for event in self.recent.iter().rev() {
            if event.kind == BindingKind::Bind {
                return Some(start.unwrap_or(event.sequence + 1));
            }
            start = Some(event.sequence);
        }
        None
    }

    /// The name known for an object, if any.
    pub fn name_of(&self, key: ObjectKey) -> Option<&Arc<str>> {
        self.names.get(&key)
    }

    /// Records a name learned elsewhere (e.g. from wgpu's allocator report). Names of objects with no
    /// live range are not kept, so the table stays bounded by the live set.
    pub fn set_name(&mut self, key: ObjectKey, name: &str) {
        if self.live_by_object.contains_key(&key) {
            let name = self.intern(name);
            self.names.insert(key, name);
        }
    }

    /// Live ranges `(base, size, binding)` overlapping the inclusive interval `[lo, hi]`.
    pub fn live_overlapping(&self, lo: u64, hi: u64) -> Vec<(u64, u64, &LiveBinding)> {
        collect(&self.live, self.live.overlapping(lo, hi))
    }

    /// Freed ranges `(base, size, binding)` overlapping `[lo, hi]`, most recently freed first.
    pub fn freed_overlapping(&self, lo: u64, hi: u64) -> Vec<(u64, u64, &FreedBinding)> {
        let mut found = collect(&self.freed, self.freed.overlapping(lo, hi));
        found.sort_by_key(|b| std::cmp::Reverse(b.2.freed_at));
        found
    }

    /// The resource (not memory) that was live at ring position `as_of` (now, when `None`) and ends
    /// closest at or below `address`: the object an overrun most likely came from.
    pub fn nearest_resource_below(
        &self,
        address: u64,
        as_of: Option<u64>,
    ) -> Option<ResourceRange> {
        let memory = vk::ObjectType::DEVICE_MEMORY.as_raw();
        let live = self
            .live
            .nearest_ending_at_or_below_where(address, |b| {
                b.key.object_type != memory && as_of.is_none_or(|cut| b.bound_sequence < cut)
            })
            .and_then(|id| self.live.get(id))
            .map(|(base, size, b)| ResourceRange {
                base,
                size,
                key: b.key,
                name: self.names.get(&b.key).cloned(),
                bound_sequence: b.bound_sequence,
            });
        // Freed by the teardown after the cut-off: it was live when the GPU faulted.
        let freed_then_live = as_of
            .and_then(|cut| {
                self.freed.nearest_ending_at_or_below_where(address, |f| {
                    f.key.object_type != memory
                        && f.freed_sequence >= cut
                        && f.bound_sequence.is_none_or(|b| b < cut)
                })
            })
            .and_then(|id| self.freed.get(id))
            .map(|(base, size, f)| ResourceRange {
                base,
                size,
                key: f.key,
                name: f.name.clone(),
                bound_sequence: f.bound_sequence.unwrap_or(0),
            });
        [live, freed_then_live]
            .into_iter()
            .flatten()
            .max_by_key(|r| range_end(r.base, r.size))
    }

    /// The live range ending closest at or below `address`.
    pub fn nearest_live_below(&self, address: u64) -> Option<(u64, u64, &LiveBinding)> {
        let id = self.live.nearest_ending_at_or_below(address)?;
        self.live.get(id)
    }

    /// Every freed range `(base, size, binding)` kept, oldest first.
    pub fn freed_bindings(&self) -> impl DoubleEndedIterator<Item = (u64, u64, &FreedBinding)> {
        self.freed_order.iter().filter_map(|&id| self.freed.get(id))
    }

    /// Every live range `(base, size, binding)`, unordered.
    pub fn live_bindings(&self) -> impl Iterator<Item = (u64, u64, &LiveBinding)> {
        self.live.iter().map(|(_, b, s, v)| (b, s, v))
    }

    /// Folds one record in. `now` stamps it (the ring carries frames, not clock times, to keep the
    /// callback cheap).
    pub fn apply(&mut self, record: &BindingRecord, now: Instant) {
        let key = ObjectKey {
            object_type: record.object_type,
            handle: record.handle,
        };
        self.stats.events += 1;
        if let Some(name) = record.name() {
            if self.names.get(&key).map(|n| &**n) != Some(&*name) {
                let name = self.intern(&name);
                self.names.insert(key, name);
            }
        }
        match record.kind {
            BindingKind::Bind => self.bind(key, record, now),
            BindingKind::Unbind => self.unbind(key, record, now),
        }
        self.remember(key, record, now);
        if !self.live_by_object.contains_key(&key) {
            // The object has no live range left: its handle may be reused by a new object, so its
            // name now lives only in the freed entries and recent events.
            self.names.remove(&key);
        }
    }

    fn bind(&mut self, key: ObjectKey, record: &BindingRecord, now: Instant) {
        self.stats.binds += 1;
        let ids = self
            .live_by_object
            .get(&key)
            .map_or(&[][..], LiveIds::as_slice);
        if !record.is_internal_object() {
            // The driver now reports this handle as the application's: its earlier internal
            // bindings are the same object.
            for &id in ids {
                if let Some(binding) = self.live.get_mut(id) {
                    binding.internal = false;
                }
            }
        }
        let duplicate = ids.iter().any(|&id| {
            self.live
                .get(id)
                .is_some_and(|(base, size, _)| base == record.base && size == record.size)
        });
        if duplicate {
            self.stats.duplicate_binds += 1;
            return;
        }
        if self.live.len() >= self.settings.max_live_bindings {
            self.stats.live_overflow += 1;
            return;
        }
        let binding = LiveBinding {
            key,
            bound_frame: record.frame,
            bound_sequence: record.sequence,
            bound_at: now,
            internal: record.is_internal_object(),
        };
        self.insert_live(record.base, record.size, binding);
    }

    fn insert_live(&mut self, base: u64, size: u64, binding: LiveBinding) {
        let id = self.fresh_id();
        match self.live_by_object.entry(binding.key) {
            Entry::Occupied(mut ids) => ids.get_mut().push(id),
            Entry::Vacant(slot) => {
                slot.insert(LiveIds::One(id));
            }
        }
        self.live.insert(id, base, size, binding);
    }

    fn unbind(&mut self, key: ObjectKey, record: &BindingRecord, now: Instant) {
        self.stats.unbinds += 1;
        let (lo, end) = (record.base, range_end(record.base, record.size));
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        if let Some(own) = self.live_by_object.get(&key) {
            ids.extend(own.as_slice().iter().copied().filter(|&id| {
                self.live
                    .get(id)
                    .is_some_and(|(b, s, _)| b < end && range_end(b, s) > lo)
            }));
        }
        if ids.is_empty() {
            // Handle unknown (bound before capture, an internal handle, or a null handle): an exact
            // range match on an object of the same type is the same allocation.
            ids.extend(
                self.live
                    .overlapping(lo, lo)
                    .into_iter()
                    .filter(|&id| {
                        self.live.get(id).is_some_and(|(b, s, v)| {
                            b == record.base
                                && s == record.size
                                && v.key.object_type == key.object_type
                        })
                    })
                    .take(1),
            );
        }
        let name = self.names.get(&key).cloned();
        if ids.is_empty() {
            self.stats.unmatched_unbinds += 1;
            self.push_freed(record.base, record.size, key, name, None, record, now);
            self.scratch = ids;
            return;
        }
        for &id in &ids {
            let Some((base, size, binding)) = self.live.remove(id) else {
                continue;
            };
            self.forget_live_id(binding.key, id);
            let binding_end = range_end(base, size);
            let freed_lo = base.max(lo);
            let freed_end = binding_end.min(end);
            if base < lo {
                self.insert_live(base, lo - base, binding.clone());
            }
            if binding_end > end {
                self.insert_live(end, binding_end - end, binding.clone());
            }
            if base < lo || binding_end > end {
                self.stats.partial_unbinds += 1;
            }
            let name = name
                .clone()
                .or_else(|| self.names.get(&binding.key).cloned());
            self.push_freed(
                freed_lo,
                freed_end - freed_lo,
                binding.key,
                name,
                Some((binding.bound_frame, binding.bound_sequence)),
                record,
                now,
            );
        }
        self.scratch = ids;
    }

    fn forget_live_id(&mut self, key: ObjectKey, id: u64) {
        if self
            .live_by_object
            .get_mut(&key)
            .is_some_and(|ids| ids.remove(id))
        {
            self.live_by_object.remove(&key);
        }
    }

    /// The shared `Arc` of `name`, allocating only the first time a name is seen.
    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.interned.get(name) {
            return Arc::clone(known);
        }
        if self.interned.len() >= MAX_INTERNED {
            self.interned.clear();
        }
        let name: Arc<str> = Arc::from(name);
        self.interned.insert(Arc::clone(&name));
        name
    }

    #[allow(clippy::too_many_arguments)]
    fn push_freed(
        &mut self,
        base: u64,
        size: u64,
        key: ObjectKey,
        name: Option<Arc<str>>,
        bound: Option<(u64, u64)>,
        unbind: &BindingRecord,
        now: Instant,
    ) {
        if self.settings.max_freed_bindings == 0 {
            return;
        }
        while self.freed.len() >= self.settings.max_freed_bindings {
            let Some(oldest) = self.freed_order.pop_front() else {
                break;
            };
            if self.freed.remove(oldest).is_some() {
                self.stats.freed_evicted += 1;
            }
        }
        let id = self.fresh_id();
        self.freed.insert(
            id,
            base,
            size,
            FreedBinding {
                key,
                name,
                bound_frame: bound.map(|(frame, _)| frame),
                bound_sequence: bound.map(|(_, sequence)| sequence),
                freed_frame: unbind.frame,
                freed_sequence: unbind.sequence,
                freed_at: now,
            },
        );
        self.freed_order.push_back(id);
    }

    fn remember(&mut self, key: ObjectKey, record: &BindingRecord, now: Instant) {
        if self.settings.max_recent_events == 0 {
            return;
        }
        if self.recent.len() >= self.settings.max_recent_events {
            self.recent.pop_front();
        }
        self.recent.push_back(IndexedEvent {
            sequence: record.sequence,
            frame: record.frame,
            kind: record.kind,
            object_type: key.object_type,
            handle: key.handle,
            base: record.base,
            size: record.size,
            name: self.names.get(&key).cloned(),
            internal: record.is_internal_object(),
            seen_at: Some(now),
        });
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// `VkObjectType` as the name a developer recognises (`BUFFER`, `IMAGE`, `DEVICE_MEMORY`).
pub fn object_type_name(object_type: i32) -> String {
    format!("{:?}", vk::ObjectType::from_raw(object_type))
}

fn serialize_object_type<S: serde::Serializer>(raw: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&object_type_name(*raw))
}

fn collect<T>(table: &RangeTable<T>, ids: Vec<u64>) -> Vec<(u64, u64, &T)> {
    ids.into_iter().filter_map(|id| table.get(id)).collect()
}

#[cfg(test)]
mod tests;
