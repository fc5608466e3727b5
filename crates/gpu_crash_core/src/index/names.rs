//! `NameArena`: object names interned in a fixed byte arena and referred to by `u32` id.
//!
//! Labels repeat (`frame_uniforms_0` every frame), so each distinct name is stored once and every
//! holder (a live range, a freed range, a recent event) keeps its id and one reference. Everything is
//! allocated once, from [`IndexSettings::max_name_bytes`](super::IndexSettings::max_name_bytes):
//!
//! - `bytes`: the arena. Each name is a record `[id: u32 LE][len: u8][len bytes]`, appended.
//! - `slots`: per id its offset, length, hash and reference count.
//! - `table`: open addressing (linear probing) from the name's hash to its id, for interning. A
//!   bucket holds the id and, in the bits the ids leave free, some of the hash: a probe past
//!   another name is rejected without reading its slot (a cache miss at scale).
//!
//! A name whose last reference goes stays interned ("dead"), so a label that comes back (the next
//! frame's buffer) is found again for free. When the arena or the ids run out, and at least a quarter
//! of either is dead, one compaction pass slides the live records down and forgets the dead ones: a
//! pass is bounded by the arena size and frees at least a quarter of it, so its cost per interned name
//! is bounded too. When nothing can be freed the name is dropped (the index counts it in
//! `IndexStats::names_dropped`); the holder then has no name, which a report shows as the type and handle.

use crate::prefetch::prefetch;

/// Id of an interned name; [`NO_NAME`] for none.
pub(crate) type NameId = u32;

/// No name.
pub(crate) const NO_NAME: NameId = u32::MAX;

/// `name`, or `fallback` when the event carried none.
pub(crate) fn name_or(name: NameId, fallback: NameId) -> NameId {
    if name == NO_NAME {
        fallback
    } else {
        name
    }
}

/// Longest name kept, in bytes (the record header stores the length in one byte); longer names
/// (only from [`super::AddressIndex::set_name`]: ring records carry at most 72) are cut at a
/// character boundary.
pub(crate) const MAX_NAME_LEN: usize = 255;

/// Bytes of a name record's header: id (4) and length (1).
const HEADER: usize = 5;

/// Arena bytes per id slot: the number of ids is `max_name_bytes / BYTES_PER_NAME`, sized for names
/// of ~27 bytes on average (wgpu and Bevy labels are 10-30 characters).
pub(crate) const BYTES_PER_NAME: usize = 32;

#[derive(Clone, Copy, Debug, Default)]
struct NameSlot {
    /// Offset of the name's record in `bytes`; for a free slot, the next free id.
    offset: u32,
    /// The name's hash (its top bits are the home bucket in `table`).
    hash: u32,
    /// Holders of this id; 0 = dead (still interned until the next compaction).
    refs: u32,
    len: u16,
}

/// See the module documentation.
pub(crate) struct NameArena {
    bytes: Vec<u8>,
    slots: Vec<NameSlot>,
    max_names: usize,
    /// Head of the free id list (linked through `NameSlot::offset`), `NO_NAME` when empty.
    free: NameId,
    /// Ids on the free list.
    free_len: usize,
    /// Names interned or found lately, by [`recent_slot`], [`NO_NAME`] for none: games label
    /// buffers by kind ("mesh vertex buffer", "mesh index buffer", ...), so an event's name is
    /// usually one of a few seen just before, and comparing its bytes with one candidate is
    /// cheaper than hashing and probing the table. Forgotten by a compaction, which may free ids.
    recent: [RecentName; RECENT_NAMES],
    /// One bit per entry of `recent`: found there since the last time a name asked for the entry.
    /// A name found again in the table takes an entry only when its bit is clear (a second
    /// chance, as in CLOCK), so per-object labels that come back (a streamed chunk reloaded) do
    /// not push out the kind names hit hundreds of times a frame.
    recent_used: u64,
    /// Per bucket `tag << id_bits | (id + 1)`, 0 = empty (see [`NameArena::bucket_value`]).
    table: Vec<u32>,
    table_bits: u32,
    /// Bits of a bucket holding `id + 1`; the rest hold the hash's tag.
    id_bits: u32,
    dead_bytes: usize,
    dead_names: usize,
}

/// Entries of [`NameArena`]'s recent-names cache (one bit each in `NameArena::recent_used`).
const RECENT_NAMES: usize = 64;
const _: () = assert!(RECENT_NAMES <= u64::BITS as usize);

/// Where a name goes in the recent-names cache: its length and its first and last 8 bytes mixed (a
/// few instructions; names that collide only evict each other).
#[inline]
fn recent_slot(name: &RecentName) -> usize {
    let key = name.head ^ name.tail.rotate_left(29) ^ u64::from(name.len);
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - RECENT_NAMES.trailing_zeros())) as usize
}

/// An entry of the recent-names cache: the id, and the name's length and first and last 8 bytes,
/// which decide a hit on names of up to 16 bytes without reading the arena (and reject almost
/// every miss on longer ones). Looking a kind name up through its slot and arena record took 86
/// instructions (callgrind, `indexer_fold`'s workload).
#[derive(Clone, Copy)]
struct RecentName {
    id: NameId,
    /// `u32::MAX` for an empty entry: no name is that long.
    len: u32,
    head: u64,
    tail: u64,
}

impl RecentName {
    const NONE: Self = Self {
        id: NO_NAME,
        len: u32::MAX,
        head: 0,
        tail: 0,
    };

    /// The cache's view of `bytes` (for the id `id`).
    #[inline(always)]
    fn of(bytes: &[u8], id: NameId) -> Self {
        let n = bytes.len();
        Self {
            id,
            len: n as u32,
            head: word(&bytes[..n.min(8)]),
            tail: word(&bytes[n.saturating_sub(8)..]),
        }
    }

    /// Same length and first and last 8 bytes (ids aside).
    #[inline(always)]
    fn same_ends(&self, other: &Self) -> bool {
        self.len == other.len && self.head == other.head && self.tail == other.tail
    }
}

/// `a == b` for slices of equal length, 8 bytes at a time: names are short (10-30 bytes), where a
/// call to the C library's `memcmp` cost more than the comparison (BENCHMARKS.md, issue 35).
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len();
    if n < 8 {
        return word(a) == word(b);
    }
    // Whole words, then the last 8 bytes (overlapping the last whole word when n is not a
    // multiple of 8).
    let mut i = 0;
    while i + 8 <= n {
        if word(&a[i..i + 8]) != word(&b[i..i + 8]) {
            return false;
        }
        i += 8;
    }
    word(&a[n - 8..]) == word(&b[n - 8..])
}

/// Up to 8 bytes as a little-endian word, zero-padded.
#[inline(always)]
fn word(b: &[u8]) -> u64 {
    if let Ok(w) = <[u8; 8]>::try_from(b) {
        return u64::from_le_bytes(w);
    }
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

/// FxHash-style hash of a name, finished with a multiply so the top bits (the bucket) mix all input.
fn hash_name(bytes: &[u8]) -> u32 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        h = (h.rotate_left(5) ^ word).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h.rotate_left(5) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    ((h ^ (h >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32
}

impl NameArena {
    /// An empty arena of `max_bytes` bytes (at least 256) and `max_bytes / 32` ids.
    pub(crate) fn new(max_bytes: usize) -> Self {
        let max_bytes = max_bytes.clamp(HEADER + MAX_NAME_LEN, u32::MAX as usize);
        let max_names = (max_bytes / BYTES_PER_NAME).max(8);
        let buckets = (max_names * 2).next_power_of_two();
        Self {
            bytes: Vec::with_capacity(max_bytes),
            slots: Vec::with_capacity(max_names),
            max_names,
            free: NO_NAME,
            free_len: 0,
            recent: [RecentName::NONE; RECENT_NAMES],
            recent_used: 0,
            table: vec![0; buckets],
            table_bits: buckets.trailing_zeros(),
            // `max_names` ids as `id + 1`, never 0. `max_names` is below 2^27, so the tag keeps
            // 5 bits at least (15 at the default 65,536 names).
            id_bits: u32::BITS - (max_names as u32).leading_zeros(),
            dead_bytes: 0,
            dead_names: 0,
        }
    }

    /// Forgets every name, keeping the allocations.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.slots.clear();
        self.free = NO_NAME;
        self.free_len = 0;
        self.recent = [RecentName::NONE; RECENT_NAMES];
        self.recent_used = 0;
        self.table.fill(0);
        self.dead_bytes = 0;
        self.dead_names = 0;
    }

    /// Heap bytes held (all allocated up front).
    pub(crate) fn memory(&self) -> usize {
        self.bytes.capacity()
            + self.slots.capacity() * std::mem::size_of::<NameSlot>()
            + self.table.capacity() * std::mem::size_of::<u32>()
    }

    /// The name of `id` (`""` for [`NO_NAME`]).
    pub(crate) fn get(&self, id: NameId) -> &str {
        if id == NO_NAME {
            return "";
        }
        let slot = self.slots[id as usize];
        let start = slot.offset as usize + HEADER;
        // Interned from `&str` only (see `intern`), so always UTF-8; the fallback is unreachable.
        std::str::from_utf8(&self.bytes[start..start + slot.len as usize]).unwrap_or("")
    }

    /// `Some(name)` unless `id` is [`NO_NAME`].
    pub(crate) fn name(&self, id: NameId) -> Option<&str> {
        (id != NO_NAME).then(|| self.get(id))
    }

    /// One more holder of `id`.
    #[inline]
    pub(crate) fn acquire(&mut self, id: NameId) {
        if id != NO_NAME {
            let slot = &mut self.slots[id as usize];
            if slot.refs == 0 {
                self.dead_bytes -= HEADER + slot.len as usize;
                self.dead_names -= 1;
            }
            slot.refs += 1;
        }
    }

    /// One holder fewer of `id`; at zero the name is dead but stays findable until a compaction.
    #[inline]
    pub(crate) fn release(&mut self, id: NameId) {
        if id != NO_NAME {
            let slot = &mut self.slots[id as usize];
            slot.refs -= 1;
            if slot.refs == 0 {
                self.dead_bytes += HEADER + slot.len as usize;
                self.dead_names += 1;
            }
        }
    }

    fn home(&self, hash: u32) -> usize {
        (hash >> (32 - self.table_bits)) as usize
    }

    /// The bits of a bucket that hold `id + 1`.
    #[inline]
    fn id_mask(&self) -> u32 {
        u32::MAX >> (u32::BITS - self.id_bits)
    }

    /// The tag of `hash` in a bucket: its low bits, above the id's (the home bucket takes the
    /// hash's top bits, so the tag adds others).
    #[inline]
    fn tag(&self, hash: u32) -> u32 {
        hash << self.id_bits
    }

    /// The bucket value of `id` with `hash`.
    #[inline]
    fn bucket_value(&self, id: NameId, hash: u32) -> u32 {
        self.tag(hash) | (id + 1)
    }

    /// The id in bucket value `value` (not 0).
    #[inline]
    fn id_in(&self, value: u32) -> NameId {
        (value & self.id_mask()) - 1
    }

    /// Bucket holding `name`, or `Err(empty bucket)` where it would go.
    fn find(&self, name: &[u8], hash: u32) -> Result<usize, usize> {
        let mask = self.table.len() - 1;
        let (tag, id_mask) = (self.tag(hash), self.id_mask());
        let mut bucket = self.home(hash);
        loop {
            let entry = self.table[bucket];
            if entry == 0 {
                return Err(bucket);
            }
            if entry & !id_mask != tag {
                bucket = (bucket + 1) & mask;
                continue;
            }
            let slot = &self.slots[self.id_in(entry) as usize];
            if slot.hash == hash && slot.len as usize == name.len() {
                let start = slot.offset as usize + HEADER;
                if same_bytes(&self.bytes[start..start + name.len()], name) {
                    return Ok(bucket);
                }
            }
            bucket = (bucket + 1) & mask;
        }
    }

    /// The id of `bytes` if it is among the names interned or found lately, without a reference
    /// taken: one candidate, compared byte for byte; no hashing of the whole name, no probing.
    /// Stored names are UTF-8, so a match means `bytes` are too.
    #[inline]
    pub(crate) fn recent(&mut self, bytes: &[u8]) -> Option<NameId> {
        let (entry, id) = self.recent_entry(bytes)?;
        self.recent_used |= 1 << entry;
        Some(id)
    }

    /// The recent-names cache's entry for `bytes` and its id, if it holds them.
    #[inline(always)]
    fn recent_entry(&self, bytes: &[u8]) -> Option<(usize, NameId)> {
        let (entry, cached) = self.recent_same_ends(bytes)?;
        if bytes.len() > 16 {
            // The bytes between the first and last 8, from the arena.
            let start = self.slots[cached.id as usize].offset as usize + HEADER;
            let middle = 8..bytes.len() - 8;
            let stored = &self.bytes[start + middle.start..start + middle.end];
            if !same_bytes(stored, &bytes[middle]) {
                return None;
            }
        }
        Some((entry, cached.id))
    }

    /// The recent-names cache's entry for `bytes` and what it holds, if that has the same length
    /// and first and last 8 bytes (the whole name up to 16 bytes; see [`RecentName`]).
    #[inline(always)]
    fn recent_same_ends(&self, bytes: &[u8]) -> Option<(usize, RecentName)> {
        let key = RecentName::of(bytes, NO_NAME);
        let entry = recent_slot(&key);
        let cached = self.recent[entry];
        cached.same_ends(&key).then_some((entry, cached))
    }

    /// Starts loading the table bucket that interning `bytes` probes first, unless the recent-names
    /// cache holds them (no probe then). Called a few records ahead: the table (512 KiB at the
    /// default budget) is mostly out of cache, and a new per-object label's first probe waiting on
    /// it was a tenth of the `indexer_fold` bench's samples. A hint only: no effect on the result.
    #[inline]
    pub(crate) fn prefetch(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        // The ends decide almost every hit (see `RecentName`); a false hit only skips a hint.
        if self.recent_same_ends(bytes).is_some() {
            return;
        }
        let home = self.home(hash_name(&bytes[..bytes.len().min(MAX_NAME_LEN)]));
        prefetch(self.table.as_ptr().wrapping_add(home));
    }

    /// Offers `id` (found again in the table) an entry of the recent-names cache: taken unless the
    /// entry's name was found since the last offer, which clears its bit instead.
    fn offer_recent(&mut self, name: &[u8], id: NameId) {
        let cached = RecentName::of(name, id);
        let entry = recent_slot(&cached);
        let bit = 1u64 << entry;
        if self.recent_used & bit != 0 {
            self.recent_used &= !bit;
        } else {
            self.recent[entry] = cached;
        }
    }

    /// The id of `name` with one reference taken for the caller, or `None` (counted) when it does not
    /// fit. Names longer than [`MAX_NAME_LEN`] are cut at a character boundary. Never allocates.
    pub(crate) fn intern(&mut self, name: &str) -> Option<NameId> {
        let mut len = name.len().min(MAX_NAME_LEN);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        let name = &name.as_bytes()[..len];
        if let Some(id) = self.recent(name) {
            self.acquire(id);
            return Some(id);
        }
        let hash = hash_name(name);
        let mut bucket = match self.find(name, hash) {
            Ok(bucket) => {
                let id = self.id_in(self.table[bucket]);
                self.acquire(id);
                self.offer_recent(name, id);
                return Some(id);
            }
            Err(bucket) => bucket,
        };
        let need = HEADER + name.len();
        if !self.has_room(need) {
            let compactable = self.dead_bytes * 4 >= self.bytes.capacity()
                || self.dead_names * 4 >= self.max_names;
            if compactable {
                self.compact();
                // Compaction only removes names, so `name` is still absent: take its new bucket.
                bucket = match self.find(name, hash) {
                    Ok(bucket) | Err(bucket) => bucket,
                };
            }
            if !compactable || !self.has_room(need) {
                return None;
            }
        }
        let id = if self.free != NO_NAME {
            let id = self.free;
            self.free = self.slots[id as usize].offset;
            self.free_len -= 1;
            // The next intern writes that slot; ids come back in arena order, far apart.
            if self.free != NO_NAME {
                prefetch(self.slots.as_ptr().wrapping_add(self.free as usize));
            }
            id
        } else {
            self.slots.push(NameSlot::default());
            (self.slots.len() - 1) as NameId
        };
        let offset = self.bytes.len();
        // Within capacity (checked by `has_room`): no reallocation.
        self.bytes.extend_from_slice(&id.to_le_bytes());
        self.bytes.push(name.len() as u8);
        self.bytes.extend_from_slice(name);
        self.slots[id as usize] = NameSlot {
            offset: offset as u32,
            hash,
            refs: 1,
            len: name.len() as u16,
        };
        // Not cached yet: a name seen once (a per-object label) would only push out one that repeats.
        self.table[bucket] = self.bucket_value(id, hash);
        Some(id)
    }

    /// Distinct names some holder still uses (dead names awaiting compaction left out).
    pub(crate) fn in_use(&self) -> usize {
        self.slots.len() - self.free_len - self.dead_names
    }

    /// Most distinct names the arena can hold at once (`max_name_bytes / 32`).
    pub(crate) fn max_names(&self) -> usize {
        self.max_names
    }

    fn has_room(&self, need: usize) -> bool {
        self.bytes.len() + need <= self.bytes.capacity()
            && (self.free != NO_NAME || self.slots.len() < self.max_names)
    }

    /// Slides the records of names still held down to the start of the arena and forgets the dead
    /// ones (their buckets and ids are freed). Linear in the arena's used bytes; allocates nothing.
    fn compact(&mut self) {
        let mut read = 0;
        let mut write = 0;
        while read < self.bytes.len() {
            let id = u32::from_le_bytes([
                self.bytes[read],
                self.bytes[read + 1],
                self.bytes[read + 2],
                self.bytes[read + 3],
            ]);
            let size = HEADER + self.bytes[read + 4] as usize;
            if self.slots[id as usize].refs == 0 {
                self.remove_from_table(id);
                self.slots[id as usize].offset = self.free;
                self.free = id;
                self.free_len += 1;
            } else {
                self.bytes.copy_within(read..read + size, write);
                self.slots[id as usize].offset = write as u32;
                write += size;
            }
            read += size;
        }
        self.bytes.truncate(write);
        self.recent = [RecentName::NONE; RECENT_NAMES];
        self.recent_used = 0;
        self.dead_bytes = 0;
        self.dead_names = 0;
    }

    /// Removes `id`'s bucket, shifting later members of its probe run back (no tombstones, so probe
    /// runs stay as short as the load allows).
    fn remove_from_table(&mut self, id: NameId) {
        let mask = self.table.len() - 1;
        let hash = self.slots[id as usize].hash;
        let value = self.bucket_value(id, hash);
        let mut hole = self.home(hash);
        while self.table[hole] != value {
            hole = (hole + 1) & mask;
        }
        let mut next = (hole + 1) & mask;
        while self.table[next] != 0 {
            let home = self.home(self.slots[self.id_in(self.table[next]) as usize].hash);
            // Move `next` into the hole unless its home lies cyclically in (hole, next].
            if (next.wrapping_sub(home) & mask) >= (next.wrapping_sub(hole) & mask) {
                self.table[hole] = self.table[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.table[hole] = 0;
    }

    /// Names with at least one holder, for tests.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.slots.iter().filter(|s| s.refs > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_once_and_counts_holders() {
        let mut names = NameArena::new(4096);
        let a = names.intern("particles").unwrap();
        let b = names.intern("particles").unwrap();
        assert_eq!(a, b);
        assert_eq!(names.get(a), "particles");
        let c = names.intern("vertices").unwrap();
        assert_ne!(a, c);
        names.release(a);
        names.release(b);
        // Dead but still interned: the same id comes back.
        assert_eq!(names.intern("particles"), Some(a));
        assert_eq!(names.held(), 2);
        assert_eq!(names.in_use(), 2);
    }

    #[test]
    fn full_arena_drops_then_compaction_reclaims_dead_names() {
        let mut names = NameArena::new(HEADER + MAX_NAME_LEN); // 260 bytes, 8 ids
        let mut ids = Vec::new();
        for i in 0..8 {
            ids.push(names.intern(&format!("name_{i:03}")).unwrap());
        }
        // Out of ids, nothing dead: dropped.
        assert_eq!(names.intern("one_too_many"), None);
        // Free a quarter: the next new name compacts and fits.
        names.release(ids[0]);
        names.release(ids[3]);
        let n = names.intern("after_compaction").unwrap();
        assert_eq!(names.get(n), "after_compaction");
        for (i, &id) in ids.iter().enumerate() {
            if i != 0 && i != 3 {
                assert_eq!(names.get(id), format!("name_{i:03}"));
                assert_eq!(names.intern(&format!("name_{i:03}")), Some(id));
            }
        }
        assert_eq!(names.in_use(), 7);
        // The dead ones are gone from the table: interning them again makes new records.
        assert!(names.intern("name_000").is_some());
        assert_eq!(names.in_use(), 8);
        assert_eq!(
            names.memory(),
            NameArena::new(HEADER + MAX_NAME_LEN).memory()
        );
    }

    /// The recent-names shortcut finds only the very name, and never an id a compaction freed.
    #[test]
    fn recent_names_are_found_again_and_forgotten_by_compaction() {
        let mut names = NameArena::new(HEADER + MAX_NAME_LEN); // 8 ids
        let a = names.intern("mesh vertex buffer").unwrap();
        assert_eq!(
            names.recent(b"mesh vertex buffer"),
            None,
            "seen once: not cached"
        );
        assert_eq!(names.intern("mesh vertex buffer"), Some(a));
        assert_eq!(
            names.recent(b"mesh vertex buffer"),
            Some(a),
            "seen again: cached"
        );
        assert_eq!(names.recent(b"mesh vertex buffe"), None);
        assert_eq!(names.recent(b"mesh index buffer!"), None);
        assert_eq!(names.intern("mesh vertex buffer"), Some(a));
        names.release(a);
        names.release(a);
        names.release(a);
        // Fill the ids, then free a quarter: the next new name compacts, freeing `a` (dead).
        let ids: Vec<_> = (0..7)
            .map(|i| names.intern(&format!("n{i}")).unwrap())
            .collect();
        names.release(ids[0]);
        let b = names.intern("after").unwrap();
        assert_eq!(
            names.recent(b"mesh vertex buffer"),
            None,
            "forgotten: its id was freed"
        );
        assert_eq!(names.get(b), "after");
        assert_eq!(names.intern("after"), Some(b));
        assert_eq!(names.recent(b"after"), Some(b));
        names.release(b);
        assert_ne!(names.intern("mesh vertex buffer"), None);
        assert_eq!(names.in_use(), 8);
    }

    /// The recent-names cache entry `name` goes to.
    fn slot_of(name: &str) -> usize {
        recent_slot(&RecentName::of(name.as_bytes(), NO_NAME))
    }

    /// Names longer than 16 bytes that share their length and first and last 8 bytes share a
    /// cache entry: the bytes between decide, so one is never taken for the other.
    #[test]
    fn recent_names_differing_only_in_the_middle_are_told_apart() {
        let mut names = NameArena::new(1 << 16);
        let (a, b) = ("shadow_map_A_of_light", "shadow_map_B_of_light");
        assert_eq!(slot_of(a), slot_of(b));
        let a_id = names.intern(a).unwrap();
        assert_eq!(
            names.intern(a),
            Some(a_id),
            "found in the table: offered the entry"
        );
        assert_eq!(names.recent(a.as_bytes()), Some(a_id));
        assert_eq!(names.recent(b.as_bytes()), None, "same ends, other middle");
        let b_id = names.intern(b).unwrap();
        assert_ne!(a_id, b_id);
        // Short names: the ends are the whole name.
        let short = names.intern("vertex buffer").unwrap();
        assert_eq!(names.intern("vertex buffer"), Some(short));
        assert_eq!(names.recent(b"vertex buffer"), Some(short));
        assert_eq!(names.recent(b"vertex buffes"), None);
        assert_eq!(names.recent(b"vertex"), None);
    }

    /// A label that comes back now and then (a per-object name found again in the table) must not
    /// push a kind name in constant use out of the recent-names cache: each such eviction sent the
    /// kind name's next event to hash and probe the table (12 probes a frame of the `indexer_fold`
    /// bench's churn, BENCHMARKS.md).
    #[test]
    fn a_returning_label_does_not_push_out_a_name_in_constant_use() {
        let mut names = NameArena::new(1 << 16);
        let kind = "mesh vertex buffer";
        let held = names.intern(kind).unwrap();
        assert_eq!(names.intern(kind), Some(held), "seen again: cached");
        // A per-object label that lands on the kind name's cache entry.
        let label = (0..)
            .map(|i| format!("chunk_{i:08}_lod0"))
            .find(|l| slot_of(l) == slot_of(kind))
            .unwrap();
        let label_id = names.intern(&label).unwrap();
        for _ in 0..3 {
            // The kind name is found between two returns of the label, as a frame's binds do.
            assert_eq!(names.recent(kind.as_bytes()), Some(held));
            assert_eq!(names.intern(&label), Some(label_id));
        }
        assert_eq!(names.recent(kind.as_bytes()), Some(held), "still cached");
        // Once the kind name is no longer found, the label gets the entry at its second offer.
        assert_eq!(names.intern(&label), Some(label_id));
        assert_eq!(
            names.recent(label.as_bytes()),
            None,
            "the first offer cleared the bit"
        );
        assert_eq!(names.intern(&label), Some(label_id));
        assert_eq!(names.recent(label.as_bytes()), Some(label_id));
        assert_eq!(names.recent(kind.as_bytes()), None);
    }

    #[test]
    fn long_names_are_cut_at_a_char_boundary() {
        let mut names = NameArena::new(1 << 16);
        let long = "é".repeat(200); // 400 bytes
        let id = names.intern(&long).unwrap();
        assert_eq!(names.get(id).len(), 254);
        assert!(names.get(id).chars().all(|c| c == 'é'));
    }

    #[test]
    fn churn_of_unique_names_stays_within_the_arena() {
        let mut names = NameArena::new(4096);
        let before = names.memory();
        let mut held = std::collections::VecDeque::new();
        for i in 0..100_000u32 {
            let id = names.intern(&format!("transient_{i}"));
            assert!(id.is_some(), "dead names must be reclaimed");
            held.extend(id);
            if held.len() > 32 {
                names.release(held.pop_front().unwrap());
            }
        }
        assert_eq!(names.memory(), before);
        for &id in &held {
            assert!(names.get(id).starts_with("transient_"));
        }
    }
}
