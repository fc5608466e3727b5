//! What a report asks the index: ranges live or freed at an address, the nearest resource below it,
//! names, recent events and the trailing unbind run. Address order is built by the first query
//! after a change (`order.rs`) and reused until the next event.

use ash::vk;

use super::entries::{FreedEntry, Orders};
use super::order::{range_end, AddressOrder};
use super::slab::HELD;
use super::types::{FreedBinding, IndexedEvent, LiveBinding, ObjectKey, ResourceRange};
use super::AddressIndex;

impl AddressIndex {
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

    /// The name known for an object with a live range, if any.
    pub fn name_of(&self, key: ObjectKey) -> Option<&str> {
        let first = self.first_entry(key)?;
        self.names.name(self.slab[first].name)
    }

    /// Distinct names the index holds now (used by a live range, a kept freed range or a recent
    /// event); at most `max_name_bytes / 32`.
    pub fn names_in_use(&self) -> usize {
        self.names.in_use()
    }

    /// What a report says when names were not kept: how many, from when, and why (the name arena's
    /// budget, [`IndexSettings::max_name_bytes`]), so "unnamed" is not read as "never named".
    /// `None` when every name was kept.
    ///
    /// [`IndexSettings::max_name_bytes`]: super::IndexSettings::max_name_bytes
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
}
