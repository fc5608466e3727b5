//! Folding binding events into the index, one record at a time in ring order: binds, unbinds
//! (partial, aliased, unmatched, by an internal or null handle), names learned from events or set
//! later, and the freed and recent-event rings. Allocates nothing; bounded work per event.

use std::sync::OnceLock;
use std::time::Instant;

use super::entries::{FreedBy, FreedEntry, RecentEntry};
use super::names::{name_or, NameId, MAX_NAME_LEN, NO_NAME};
use super::order::range_end;
use super::slab::{LiveEntry, ObjectTable, NONE};
use super::types::ObjectKey;
use super::{AddressIndex, UnbindRun};
use crate::capture::{BindingKind, BindingRecord};

/// How many records ahead [`AddressIndex::apply_all`] prefetches (enough to cover a memory latency
/// with the work of folding the records in between).
pub const PREFETCH_AHEAD: usize = 8;

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

impl AddressIndex {
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

    /// Starts loading what folding `record` reads first (its object's bucket, a likely cache and
    /// TLB miss once the table outgrows the cache, and a new name's bucket in the name table); a
    /// hint, no effect on the result. Call it a few records before [`Self::apply`] on that record,
    /// as [`Self::apply_all`] and the indexer do.
    #[inline]
    pub fn prefetch(&self, record: &BindingRecord) {
        if record.handle != 0 {
            self.objects.prefetch(record.object_type, record.handle);
        }
        self.names.prefetch(record.name_bytes());
    }

    /// Folds `records` in order, exactly as [`Self::apply`] on each, prefetching `PREFETCH_AHEAD`
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
        let tag = ObjectTable::tag(record.object_type, record.handle);
        let found = if record.handle != 0 {
            self.objects
                .find_tagged(&self.slab, tag, record.object_type, record.handle)
        } else {
            Err(usize::MAX)
        };
        let first = found.ok().map(|bucket| self.objects.first(bucket));
        let name = self.event_name(record, first);
        match record.kind {
            BindingKind::Bind => {
                if !self.holding && self.held.capacity() != 0 {
                    self.release_held();
                }
                self.unbind_run = UnbindRun {
                    last_bind: Some(record.sequence),
                    first_unbind_since: None,
                    unbinds: 0,
                };
                self.bind(record, found, tag, name);
            }
            BindingKind::Unbind => {
                let run = &mut self.unbind_run;
                run.first_unbind_since = run.first_unbind_since.or(Some(record.sequence));
                run.unbinds = run.unbinds.saturating_add(1);
                self.unbind(record, found, name, now);
            }
        }
        self.remember(record, name, now);
    }

    /// The event's name: the one it carries (which the object's live ranges then take too), else
    /// the object's. No reference is taken for the event itself: only interning forgets names (a
    /// compaction drops those nobody holds), and nothing after this in [`Self::apply`] interns, so
    /// the name stays valid while the event is folded; each holder it reaches takes its own.
    #[inline(always)]
    fn event_name(&mut self, record: &BindingRecord, first: Option<u32>) -> NameId {
        let known = first.map_or(NO_NAME, |id| self.slab[id].name);
        let carried = record.name_bytes();
        if carried.is_empty() {
            return known;
        }
        // A label seen lately (a kind name, over and over): no UTF-8 check, hash or probe.
        if let Some(id) = self.names.recent(carried) {
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
                    // The reference interning took is not the event's (see above).
                    self.names.release(id);
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
        known
    }

    /// Folds a bind; `found` is what the object table's lookup of the record's object (whose
    /// [`ObjectTable::tag`] is `tag`) gave.
    fn bind(
        &mut self,
        record: &BindingRecord,
        found: Result<usize, usize>,
        tag: u32,
        name: NameId,
    ) {
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
            self.objects.set_tagged(bucket, tag, id);
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

    /// Adds a freed range, overwriting the oldest when the ring is full. `bound` is the live entry
    /// it came from, `None` for an unbind that matched nothing.
    #[inline(always)]
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
