//! Holding unbinds back during a teardown (see the module documentation of `index`): which unbinds
//! are held, where the held run is kept (a list allocated only while it holds), and how a held run
//! ends in the freed ring.

use std::sync::OnceLock;
use std::time::Instant;

use super::entries::{FreedEntry, HeldFrom, HeldUnbind};
use super::names::{name_or, NameId};
use super::order::range_end;
use super::slab::{self, HELD, NONE};
use super::AddressIndex;
use crate::capture::BindingRecord;

/// Unbinds in a run before the rest are held back (unless holding is on): a sixteenth of the freed
/// ring, at most 4,096 (the default ring's sixteenth). A frame's ordinary churn (a game destroying a
/// thousand buffers in a row) folds as before, and a teardown costs the freed ring only that many of
/// its oldest ranges.
fn long_unbind_run(max_freed_bindings: usize) -> u32 {
    (max_freed_bindings / 16).min(4_096) as u32
}

impl AddressIndex {
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
    pub(super) fn try_hold(
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
        // The run's start is recorded with its first held unbind, not before: an unbind that is
        // not held must not leave a start behind for a later run.
        let from = self.held_from.unwrap_or(HeldFrom {
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
        self.held_from = Some(from);
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
    pub(super) fn release_held(&mut self) {
        if self.held.capacity() == 0 {
            debug_assert!(
                self.held_from.is_none(),
                "a run's start without a held unbind"
            );
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

    /// A held unbind as the freed range it becomes when the run ends.
    pub(super) fn held_entry(&self, h: &HeldUnbind) -> FreedEntry {
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
}
