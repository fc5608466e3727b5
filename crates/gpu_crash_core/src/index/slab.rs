//! The live set: a slab of fixed-size [`LiveEntry`]s addressed by `u32` id, and two open-addressing
//! tables into it, all allocated once from the settings.
//!
//! - [`ObjectTable`]: object (type, handle) -> the first of its live entries (the others follow
//!   through `LiveEntry::next`; almost every object has one, sparse resources and NVIDIA memory a few).
//! - [`BaseTable`]: (type, base) -> live entries of null handles and of objects flagged
//!   `INTERNAL_OBJECT`, the ones an unbind may name by a handle they were not bound under.
//!
//! Both use linear probing with backward-shift deletion (no tombstones, so a frame's churn never
//! lengthens probe runs) and are sized to at most half full at `max_live_bindings`.

use super::names::{NameId, NO_NAME};
use crate::prefetch::prefetch;

/// No entry.
pub(crate) const NONE: u32 = u32::MAX;

/// `LiveEntry::next` of an entry whose unbind is held back during an unbind run (see the index's
/// module documentation): out of its object's chain and the object table, not live to queries.
pub(crate) const HELD: u32 = u32::MAX - 1;

/// Largest number of live entries (ids fit in the 29 low bits of `LiveEntry::base_next`).
pub(crate) const MAX_ENTRIES: usize = 1 << 28;

const BASE_NEXT_MASK: u32 = (1 << 29) - 1;
const NO_BASE_NEXT: u32 = BASE_NEXT_MASK;
const OCCUPIED: u32 = 1 << 29;
const IN_BASE_TABLE: u32 = 1 << 30;
const INTERNAL: u32 = 1 << 31;

/// One live range: 56 bytes (the flags share a word with a link to stay under the 96 B per live
/// binding that BENCHMARKS.md measures with the tables).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LiveEntry {
    pub base: u64,
    pub size: u64,
    pub handle: u64,
    pub bound_sequence: u64,
    pub bound_frame: u64,
    pub object_type: i32,
    pub name: NameId,
    /// Next live entry of the same object; on the free list, the next free entry.
    pub next: u32,
    /// Bits 0-28: next entry in the same [`BaseTable`] chain; bit 29 occupied; bit 30 in the base
    /// table; bit 31 `INTERNAL_OBJECT`.
    base_next: u32,
}

impl LiveEntry {
    pub(crate) fn new(
        record: &crate::capture::BindingRecord,
        base: u64,
        size: u64,
        name: NameId,
    ) -> Self {
        let mut entry = Self {
            base,
            size,
            handle: record.handle,
            bound_sequence: record.sequence,
            bound_frame: record.frame,
            object_type: record.object_type,
            name,
            next: NONE,
            base_next: OCCUPIED | NO_BASE_NEXT,
        };
        entry.set_internal(record.is_internal_object());
        entry
    }

    /// A new entry for part `[base, base + size)` of this one: same object, bind and flags, unlinked.
    pub(crate) fn piece(&self, base: u64, size: u64) -> Self {
        Self {
            base,
            size,
            next: NONE,
            base_next: OCCUPIED | NO_BASE_NEXT | (self.base_next & INTERNAL),
            ..*self
        }
    }

    pub(crate) fn is_occupied(&self) -> bool {
        self.base_next & OCCUPIED != 0
    }

    pub(crate) fn is_internal(&self) -> bool {
        self.base_next & INTERNAL != 0
    }

    pub(crate) fn set_internal(&mut self, internal: bool) {
        if internal {
            self.base_next |= INTERNAL;
        } else {
            self.base_next &= !INTERNAL;
        }
    }

    pub(crate) fn in_base_table(&self) -> bool {
        self.base_next & IN_BASE_TABLE != 0
    }

    fn base_link(&self) -> u32 {
        match self.base_next & BASE_NEXT_MASK {
            NO_BASE_NEXT => NONE,
            id => id,
        }
    }

    fn set_base_link(&mut self, id: u32) {
        let id = if id == NONE { NO_BASE_NEXT } else { id };
        self.base_next = (self.base_next & !BASE_NEXT_MASK) | id;
    }
}

/// The slab: entries by id, freed ids reused through a free list.
pub(crate) struct Slab {
    entries: Vec<LiveEntry>,
    capacity: usize,
    free: u32,
    len: usize,
}

impl Slab {
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.min(MAX_ENTRIES);
        Self {
            entries: Vec::with_capacity(capacity),
            capacity,
            free: NONE,
            len: 0,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.free = NONE;
        self.len = 0;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    pub(crate) fn memory(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<LiveEntry>()
    }

    /// Stores `entry`; the caller checked [`Self::is_full`].
    pub(crate) fn insert(&mut self, entry: LiveEntry) -> u32 {
        self.len += 1;
        if self.free != NONE {
            let id = self.free;
            self.free = self.entries[id as usize].next;
            self.entries[id as usize] = entry;
            id
        } else {
            // Below the capacity reserved in `new`: no reallocation.
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        }
    }

    /// Frees `id` (the caller unlinked it from both tables); returns its name, whose reference
    /// passes to the caller.
    #[inline]
    pub(crate) fn remove(&mut self, id: u32) -> NameId {
        let slot = &mut self.entries[id as usize];
        let name = slot.name;
        slot.base_next = NO_BASE_NEXT;
        slot.name = NO_NAME;
        slot.next = self.free;
        self.free = id;
        self.len -= 1;
        name
    }

    /// Every live entry with its id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &LiveEntry)> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_occupied())
            .map(|(id, e)| (id as u32, e))
    }
}

impl std::ops::Index<u32> for Slab {
    type Output = LiveEntry;
    fn index(&self, id: u32) -> &LiveEntry {
        &self.entries[id as usize]
    }
}

impl std::ops::IndexMut<u32> for Slab {
    fn index_mut(&mut self, id: u32) -> &mut LiveEntry {
        &mut self.entries[id as usize]
    }
}

/// SplitMix64's finaliser: every input bit reaches the top bits the tables use as bucket.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[inline]
pub(crate) fn object_hash(object_type: i32, handle: u64) -> u64 {
    mix(handle ^ (object_type as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

#[inline]
fn base_hash(object_type: i32, base: u64) -> u64 {
    mix(base.rotate_left(17) ^ (object_type as u32 as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
}

/// Buckets for `entries` live entries: a power of two, at most half full.
fn buckets_for(entries: usize) -> usize {
    (entries.min(MAX_ENTRIES) * 2).next_power_of_two().max(16)
}

/// Object (type, handle) -> first live entry. A bucket is `(hash >> 32) << 32 | (id + 1)`, 0 when
/// empty: the hash's top 32 bits reject most non-matching buckets without reading the slab, and
/// give the home bucket for backward-shift deletion.
pub(crate) struct ObjectTable {
    buckets: Vec<u64>,
    bits: u32,
}

impl ObjectTable {
    pub(crate) fn new(max_entries: usize) -> Self {
        let n = buckets_for(max_entries);
        Self {
            buckets: vec![0; n],
            bits: n.trailing_zeros(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.buckets.fill(0);
    }

    pub(crate) fn memory(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<u64>()
    }

    #[inline]
    fn home_of_tag(&self, tag: u32) -> usize {
        (tag >> (32 - self.bits)) as usize
    }

    /// Starts loading the home bucket of `(object_type, handle)` (see [`prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self, object_type: i32, handle: u64) {
        let tag = Self::tag(object_type, handle);
        prefetch(self.buckets.as_ptr().wrapping_add(self.home_of_tag(tag)));
    }

    /// The tag of `(object_type, handle)` in a bucket (its hash's top 32 bits), for
    /// [`Self::find_tagged`] and [`Self::set_tagged`]: folding an event hashes its object once.
    #[inline]
    pub(crate) fn tag(object_type: i32, handle: u64) -> u32 {
        (object_hash(object_type, handle) >> 32) as u32
    }

    /// `Ok(bucket)` holding the object's first entry, or `Err(bucket)` where it would go.
    #[inline]
    pub(crate) fn find(&self, slab: &Slab, object_type: i32, handle: u64) -> Result<usize, usize> {
        self.find_tagged(slab, Self::tag(object_type, handle), object_type, handle)
    }

    /// [`Self::find`] for an object whose [`Self::tag`] is `tag`.
    #[inline]
    pub(crate) fn find_tagged(
        &self,
        slab: &Slab,
        tag: u32,
        object_type: i32,
        handle: u64,
    ) -> Result<usize, usize> {
        let mask = self.buckets.len() - 1;
        let mut bucket = self.home_of_tag(tag);
        loop {
            let b = self.buckets[bucket];
            if b == 0 {
                return Err(bucket);
            }
            if (b >> 32) as u32 == tag {
                let e = &slab[(b as u32) - 1];
                if e.handle == handle && e.object_type == object_type {
                    return Ok(bucket);
                }
            }
            bucket = (bucket + 1) & mask;
        }
    }

    /// The first entry of the object in `bucket` (from [`Self::find`]).
    #[inline]
    pub(crate) fn first(&self, bucket: usize) -> u32 {
        (self.buckets[bucket] as u32) - 1
    }

    /// Points `bucket` (found or empty) at `id` for the object `(object_type, handle)`.
    #[inline]
    pub(crate) fn set(&mut self, bucket: usize, object_type: i32, handle: u64, id: u32) {
        self.set_tagged(bucket, Self::tag(object_type, handle), id);
    }

    /// [`Self::set`] for an object whose [`Self::tag`] is `tag`.
    #[inline]
    pub(crate) fn set_tagged(&mut self, bucket: usize, tag: u32, id: u32) {
        self.buckets[bucket] = (u64::from(tag) << 32) | (id as u64 + 1);
    }

    /// Empties `bucket`, shifting later members of its probe run back.
    pub(crate) fn remove(&mut self, mut hole: usize) {
        let mask = self.buckets.len() - 1;
        let mut next = (hole + 1) & mask;
        loop {
            let b = self.buckets[next];
            if b == 0 {
                break;
            }
            let home = self.home_of_tag((b >> 32) as u32);
            // Move `next` into the hole unless its home lies cyclically in (hole, next].
            if (next.wrapping_sub(home) & mask) >= (next.wrapping_sub(hole) & mask) {
                self.buckets[hole] = b;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.buckets[hole] = 0;
    }
}

/// (type, base) -> a chain of live entries through `LiveEntry::base_next`, for entries an unbind may
/// name by another handle (null handles, `INTERNAL_OBJECT`). Buckets hold `id + 1` only (the slab
/// gives the key): these lookups are off the hot path.
pub(crate) struct BaseTable {
    buckets: Vec<u32>,
    bits: u32,
}

impl BaseTable {
    pub(crate) fn new(max_entries: usize) -> Self {
        let n = buckets_for(max_entries);
        Self {
            buckets: vec![0; n],
            bits: n.trailing_zeros(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.buckets.fill(0);
    }

    pub(crate) fn memory(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<u32>()
    }

    fn home(&self, object_type: i32, base: u64) -> usize {
        (base_hash(object_type, base) >> (64 - self.bits)) as usize
    }

    fn find(&self, slab: &Slab, object_type: i32, base: u64) -> Result<usize, usize> {
        let mask = self.buckets.len() - 1;
        let mut bucket = self.home(object_type, base);
        loop {
            let b = self.buckets[bucket];
            if b == 0 {
                return Err(bucket);
            }
            let e = &slab[b - 1];
            if e.base == base && e.object_type == object_type {
                return Ok(bucket);
            }
            bucket = (bucket + 1) & mask;
        }
    }

    /// Live entries indexed at `(object_type, base)`.
    pub(crate) fn chain<'a>(
        &self,
        slab: &'a Slab,
        object_type: i32,
        base: u64,
    ) -> impl Iterator<Item = u32> + 'a {
        let first = match self.find(slab, object_type, base) {
            Ok(bucket) => self.buckets[bucket] - 1,
            Err(_) => NONE,
        };
        std::iter::successors((first != NONE).then_some(first), move |&id| {
            let next = slab[id].base_link();
            (next != NONE).then_some(next)
        })
    }

    /// Indexes live entry `id` under its (type, base).
    pub(crate) fn insert(&mut self, slab: &mut Slab, id: u32) {
        let (object_type, base) = (slab[id].object_type, slab[id].base);
        match self.find(slab, object_type, base) {
            Ok(bucket) => {
                let first = self.buckets[bucket] - 1;
                slab[id].set_base_link(first);
                self.buckets[bucket] = id + 1;
            }
            Err(bucket) => {
                slab[id].set_base_link(NONE);
                self.buckets[bucket] = id + 1;
            }
        }
        slab[id].base_next |= IN_BASE_TABLE;
    }

    /// Unindexes live entry `id` (a no-op for entries not in the table).
    pub(crate) fn remove(&mut self, slab: &mut Slab, id: u32) {
        if !slab[id].in_base_table() {
            return;
        }
        slab[id].base_next &= !IN_BASE_TABLE;
        let (object_type, base) = (slab[id].object_type, slab[id].base);
        let Ok(bucket) = self.find(slab, object_type, base) else {
            return;
        };
        let next = slab[id].base_link();
        let first = self.buckets[bucket] - 1;
        if first == id {
            if next == NONE {
                self.remove_bucket(slab, bucket);
            } else {
                self.buckets[bucket] = next + 1;
            }
            return;
        }
        let mut prev = first;
        while slab[prev].base_link() != NONE {
            if slab[prev].base_link() == id {
                slab[prev].set_base_link(next);
                return;
            }
            prev = slab[prev].base_link();
        }
    }

    fn remove_bucket(&mut self, slab: &Slab, mut hole: usize) {
        let mask = self.buckets.len() - 1;
        let mut next = (hole + 1) & mask;
        loop {
            let b = self.buckets[next];
            if b == 0 {
                break;
            }
            let e = &slab[b - 1];
            let home = self.home(e.object_type, e.base);
            if (next.wrapping_sub(home) & mask) >= (next.wrapping_sub(hole) & mask) {
                self.buckets[hole] = b;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.buckets[hole] = 0;
    }
}
