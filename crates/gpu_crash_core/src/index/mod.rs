//! The address index: which GPU address ranges are live, which were recently freed, and what the
//! objects behind them are called.
//!
//! It folds [`BindingRecord`](crate::capture::BindingRecord)s in the order the ring delivers them
//! and tolerates what real drivers send (see docs/driver-facts.md): duplicate binds of one range,
//! unbinds never bound, several objects over one range (aliasing), partial unbinds of sparse
//! resources, reallocation as unbind + bind, and objects flagged `INTERNAL_OBJECT` whose handles
//! later become the application's. Memory is bounded by [`IndexSettings`] and allocated when the
//! index is created: folding an event allocates nothing (but for a held teardown's list, below) and
//! does a bounded amount of work.
//!
//! Layout (BENCHMARKS.md has the measurements behind it):
//! - live ranges: a slab of 56-byte entries addressed by `u32` id, found by object (type, handle)
//!   through an open-addressing table sized once (`slab.rs`);
//! - freed ranges: a fixed ring overwritten in place, oldest first (`fixed_ring.rs`);
//! - recent events: a fixed ring of `Copy` records (`entries.rs`);
//! - names: interned once in a bounded arena and referred to by id (`names.rs`); names that do not
//!   fit are counted in [`IndexStats::names_dropped`] and the report says so.
//!
//! Files, one concern each, importing only downwards (`types` and `entries` import no sibling that
//! imports them; `fold`, `hold` and `query` add methods to [`AddressIndex`] and import none of
//! each other):
//! - `types.rs`: the public vocabulary (keys, settings, counters, query results);
//! - `entries.rs`: the records kept for freed ranges, recent events and held unbinds;
//! - this file: [`AddressIndex`]'s state, creation, reset and size;
//! - `fold.rs`: folding events in; `hold.rs`: holding a teardown's unbinds back; `query.rs`:
//!   what a report asks;
//! - `devices.rs`: which render device the index describes and which reports claim it;
//!   `drain.rs`: folding the ring into the index, by whichever thread may;
//!   `indexer.rs`: the threads that do it, and their handle.
//!
//! A teardown (a run of unbinds with no bind, as wgpu destroys every resource after a device loss,
//! before the report is built) would push out of the freed ring what a report needs: the objects
//! freed before the fault (a use-after-free's culprit) and, in a teardown longer than the ring, the
//! torn-down objects themselves (live at the fault). So once the freed ring is full, a run of more
//! unbinds than a sixteenth of the ring (4,096 at the default) holds the rest back instead of
//! evicting: the object's entry stays in the live slab, marked held (out of the object table and
//! out of live queries), its unbind noted in a side list of 16 B per held unbind. That list is
//! allocated when a run first holds an unbind and freed when the run ends (a few seconds per crash,
//! or a level's unload), so it costs nothing per live range allowed; it grows up to
//! `max_live_bindings`, and an unbind it cannot hold (the allocation failed) is folded as usual and
//! counted in [`IndexStats::held_overflow`]. Queries see held entries as freed ranges. The next bind
//! ends the run and moves them into the freed ring. While a fault may have happened and its report
//! is not built ([`AddressIndex::set_holding`]: the GPU stalled, the device is lost) binds do not
//! end it, since a game's other threads keep binding. A report built meanwhile sees every range as
//! it was, for a teardown of any size (up to `max_live_bindings` held).
//!
//! Address order (overlap and nearest-below queries) is only needed to resolve a fault, so it is not
//! kept per event: the first query after a change sorts the ranges (`order.rs`), tens of milliseconds
//! at a million ranges, and later queries reuse the sort until the next event.

pub mod allocator_names;
mod devices;
mod drain;
mod entries;
mod fixed_ring;
mod fold;
mod hold;
pub(crate) mod indexer;
mod names;
mod order;
mod query;
mod slab;
mod types;

use std::sync::OnceLock;

use entries::{FreedEntry, HeldFrom, HeldUnbind, Orders, RecentEntry};
use fixed_ring::FixedRing;
use names::NameArena;
use slab::{BaseTable, ObjectTable, Slab};
pub use types::{object_type_name, IndexSettings, IndexStats, IndexedEvent, ObjectKey};

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

impl Default for AddressIndex {
    fn default() -> Self {
        Self::new(IndexSettings::default())
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

    /// Frees live entry `id`, already out of its object's chain.
    #[inline]
    fn free_entry(&mut self, id: u32) {
        // Most entries are not indexed by base: no call for them.
        if self.slab[id].in_base_table() {
            self.at_base.remove(&mut self.slab, id);
        }
        let name = self.slab.remove(id);
        self.names.release(name);
    }
}

#[cfg(test)]
mod tests;
