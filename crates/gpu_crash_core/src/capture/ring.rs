//! `BindingRing`: a bounded, lock-free, multi-producer single-consumer ring of [`BindingRecord`]s.
//!
//! Producers are driver threads inside the messenger callback: they must never allocate, lock,
//! block or panic. A full ring drops the new record and counts it, so nothing is lost silently.
//! The algorithm is Dmitry Vyukov's bounded queue (as in crossbeam's `ArrayQueue`): every slot
//! carries a sequence number that says whose turn it is, so producers only contend on `tail`.
//! The single consumer is the [`RingConsumer`], unique by construction.
//!
//! A record's place in the total order ([`BindingRecord::sequence`]) is the position its producer
//! claimed, and the consumer reads positions in order: so the consumer stamps it on pop. The
//! messenger callback writes its event into the claimed slot in place ([`BindingRing::push_with`]:
//! the fields and the name's own bytes, no record built and copied); [`BindingRing::push`] copies a
//! whole record, as crossbeam's `ArrayQueue` copies its value (BENCHMARKS.md compares the two).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;

use super::record::BindingRecord;

/// One ring slot: sequence number plus record, 128 bytes so two slots never share a cache line pair
/// unevenly and a producer writing one slot does not disturb its neighbours' sequence numbers.
#[repr(C, align(128))]
struct Slot {
    /// `== position`: free for the producer that claims `position`.
    /// `== position + 1`: holds the record written at `position`, ready for the consumer.
    sequence: AtomicU64,
    /// Always a whole record (`BindingRecord::EMPTY` before the first lap), so a producer may
    /// overwrite it in place, field by field ([`BindingRing::push_with`]).
    record: UnsafeCell<BindingRecord>,
}

/// How many positions ahead of the one it wrote a producer asks the cache for, and a consumer ahead
/// of the one it read. The ring (4 MiB at the default capacity) is larger than a core's L2, so a slot
/// a lap old is out of cache: without the hint every push stalled on its two line misses. Measured on
/// lavapipe through the drill layer (BENCHMARKS.md, 2026-12-05, issue 25): the thread that creates
/// buffers spent about 225 ns more per event than at the floor with the 4 MiB ring, 75 ns with a
/// 512 KiB one. Four positions cover the driver's bursts (NVIDIA reports 3-4 events per buffer
/// back to back); events further apart leave the prefetch all the time it needs.
const PREFETCH_POSITIONS_AHEAD: u64 = 4;

/// How far ahead the consumer prefetches: it pops back to back (a few ns each) while each slot it
/// reads sits in the producer's cache, a cross-core transfer of about 100 ns away, so it must ask
/// further ahead than a producer, whose events come microseconds apart.
const CONSUMER_PREFETCH_AHEAD: u64 = 16;

/// Asks the CPU to bring both cache lines of `slot` into this core's cache (`PREFETCHT0`; the x86_64
/// baseline has no write prefetch, and a line no other core holds arrives exclusive, so the write that
/// follows needs no second request): a hint that changes nothing the program computes.
#[inline(always)]
fn prefetch_slot(slot: &Slot) {
    #[cfg(target_arch = "x86_64")]
    {
        let line = slot as *const Slot as *const i8;
        // SAFETY: a prefetch never faults and changes no state the program can observe; both
        // addresses lie inside the slot (128 bytes, two 64-byte lines); SSE is x86_64 baseline.
        unsafe {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(line);
            _mm_prefetch::<_MM_HINT_T0>(line.add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

/// Keeps the hot counters on their own cache lines so producers and the consumer do not false-share.
#[repr(align(128))]
struct CachePadded<T>(T);

/// Exponential spinning after a lost compare-and-swap (as crossbeam's `Backoff`): bounded, no
/// syscall, no allocation, so still fit for the driver's threads.
#[derive(Default)]
struct Backoff {
    step: u32,
}

impl Backoff {
    const SPIN_LIMIT: u32 = 6;

    #[inline]
    fn spin(&mut self) {
        for _ in 0..(1u32 << self.step.min(Self::SPIN_LIMIT)) {
            std::hint::spin_loop();
        }
        if self.step <= Self::SPIN_LIMIT {
            self.step += 1;
        }
    }
}

/// The producer side of the ring, shared with driver threads through the messenger's user data.
pub struct BindingRing {
    slots: Box<[Slot]>,
    mask: u64,
    /// Pushes check for half full only at positions where `position & wake_check_mask == 0`: the
    /// check reads `head`, a line the consumer writes, and need not be paid on every event.
    wake_check_mask: u64,
    /// Next position a producer will claim.
    tail: CachePadded<AtomicU64>,
    /// Next position the consumer will read; producers read it only to decide when to wake it.
    head: CachePadded<AtomicU64>,
    dropped: CachePadded<AtomicU64>,
    /// Set by the producer that first sees the ring half full, cleared by the consumer after a drain,
    /// so a burst wakes the consumer once instead of once per event.
    wake_requested: AtomicBool,
    /// The consumer's thread, unparked when the ring passes half full. `Thread::unpark` neither
    /// allocates nor locks (an atomic swap and, if the thread sleeps, a futex wake).
    consumer_thread: OnceLock<Thread>,
    /// The reporter's frame counter, stamped into every record by the callback.
    frame: AtomicU64,
}

// SAFETY: slots are only written by the producer that won the CAS on `tail` for that position and only
// read by the single consumer after the producer published it with a Release store of `sequence`;
// every other field is atomic or immutable after construction.
unsafe impl Sync for BindingRing {}
// SAFETY: BindingRecord is plain data (Copy), so moving the ring between threads is sound.
unsafe impl Send for BindingRing {}

/// Why a push did not store the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingFull;

impl BindingRing {
    /// Creates a ring with room for `capacity` records (rounded up to a power of two, at least 2) and
    /// its one consumer.
    pub fn with_capacity(capacity: usize) -> (Arc<BindingRing>, RingConsumer) {
        let capacity = capacity.max(2).next_power_of_two();
        let slots = (0..capacity)
            .map(|position| Slot {
                sequence: AtomicU64::new(position as u64),
                record: UnsafeCell::new(BindingRecord::EMPTY),
            })
            .collect();
        let ring = Arc::new(BindingRing {
            slots,
            mask: capacity as u64 - 1,
            // Every 64th position, or more often for small rings, so a quarter of the ring never
            // passes unchecked.
            wake_check_mask: (capacity as u64 / 4).clamp(1, 64).next_power_of_two() - 1,
            tail: CachePadded(AtomicU64::new(0)),
            head: CachePadded(AtomicU64::new(0)),
            dropped: CachePadded(AtomicU64::new(0)),
            wake_requested: AtomicBool::new(false),
            consumer_thread: OnceLock::new(),
            frame: AtomicU64::new(0),
        });
        let consumer = RingConsumer {
            ring: Arc::clone(&ring),
        };
        (ring, consumer)
    }

    /// How many records fit.
    pub fn capacity(&self) -> usize {
        self.mask as usize + 1
    }

    /// Records refused because the ring was full, since creation.
    pub fn dropped(&self) -> u64 {
        self.dropped.0.load(Ordering::Relaxed)
    }

    /// Records waiting for the consumer (a snapshot; producers may be adding more).
    pub fn len(&self) -> usize {
        let tail = self.tail.0.load(Ordering::Relaxed);
        let head = self.head.0.load(Ordering::Relaxed);
        tail.wrapping_sub(head).min(self.mask + 1) as usize
    }

    /// True when no record is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Positions claimed so far: every record with a smaller `sequence` was pushed before this call.
    pub fn claimed(&self) -> u64 {
        // Acquire is not needed for a cut-off point: it only has to be monotonic.
        self.tail.0.load(Ordering::Relaxed)
    }

    /// The frame number the callback stamps into records.
    pub fn current_frame(&self) -> u64 {
        // Relaxed: the frame number is a label for humans, not a synchronisation point.
        self.frame.load(Ordering::Relaxed)
    }

    /// Advances the frame number (called once per frame by the reporter).
    pub fn set_frame(&self, frame: u64) {
        self.frame.store(frame, Ordering::Relaxed);
    }

    /// Registers the thread to unpark when the ring passes half full.
    pub fn set_consumer_thread(&self, thread: Thread) {
        let _ = self.consumer_thread.set(thread);
    }

    /// Stores `record`, or counts it as dropped when the ring is full. Lock-free, allocation-free,
    /// panic-free: safe to call from the messenger callback on any driver thread.
    #[inline]
    pub fn push(&self, record: BindingRecord) -> Result<(), RingFull> {
        self.push_with(|slot| *slot = record)
    }

    /// Claims the next position and lets `fill` write its record in place (the previous lap's
    /// record is there: `fill` must set every field a reader uses, as [`BindingRecord::overwrite`]
    /// does), or counts a drop when the ring is full. What the messenger callback calls: writing
    /// in place spares the driver's thread building a 120-byte record and copying it. Lock-free,
    /// allocation-free; panic-free when `fill` is.
    #[inline]
    pub(crate) fn push_with(&self, fill: impl FnOnce(&mut BindingRecord)) -> Result<(), RingFull> {
        let (position, slot) = self.claim()?;
        // SAFETY: winning the position makes this producer the only writer of this slot until it
        // bumps the sequence; the consumer will not read it before that. The slot always holds a
        // whole record, so a `&mut` to it is valid.
        fill(unsafe { &mut *slot.record.get() });
        // Release: makes the record visible to the consumer's Acquire load.
        slot.sequence
            .store(position.wrapping_add(1), Ordering::Release);
        prefetch_slot(self.slot_at(position.wrapping_add(PREFETCH_POSITIONS_AHEAD)));
        self.maybe_wake_consumer(position);
        Ok(())
    }

    /// Claims the next free position for this producer, or counts a drop when the ring is full.
    #[inline(always)]
    fn claim(&self) -> Result<(u64, &Slot), RingFull> {
        // Relaxed: the position is only a starting guess; the slot's sequence (Acquire below) is what
        // decides whether we may write.
        let mut position = self.tail.0.load(Ordering::Relaxed);
        let mut backoff = Backoff::default();
        loop {
            let slot = self.slot_at(position);
            // Acquire: pairs with the consumer's Release in `release_slot`, so once we see the slot
            // free the consumer has finished reading the previous record in it.
            let sequence = slot.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position) as i64;
            if lag == 0 {
                // Relaxed CAS: claiming the position needs no ordering of its own; the slot's
                // sequence publishes the data.
                match self.tail.0.compare_exchange_weak(
                    position,
                    position.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Ok((position, slot)),
                    Err(current) => {
                        // Lost the race: back off before retrying, so two producers stop
                        // bouncing the `tail` cache line (the two-producer rows of BENCHMARKS.md).
                        backoff.spin();
                        position = current;
                    }
                }
            } else if lag < 0 {
                // The slot still holds a record from one lap ago: the ring is full.
                self.dropped.0.fetch_add(1, Ordering::Relaxed);
                return Err(RingFull);
            } else {
                // Another producer claimed this position; retry from the fresh tail.
                backoff.spin();
                position = self.tail.0.load(Ordering::Relaxed);
            }
        }
    }

    /// Frees the slot of `position`, which the consumer has read, for the producer a lap on.
    #[inline(always)]
    fn release_slot(&self, position: u64) {
        // Release: the consumer's reads of the record happen before a producer reuses the slot.
        self.slot_at(position)
            .sequence
            .store(position.wrapping_add(self.mask + 1), Ordering::Release);
    }

    #[inline(always)]
    fn slot_at(&self, position: u64) -> &Slot {
        let index = (position & self.mask) as usize;
        debug_assert!(index < self.slots.len());
        // SAFETY: `mask` is the slot count minus one (a power of two, set in `with_capacity`), so
        // `index` is in bounds; the check this skips ran three times an event in the indexer.
        unsafe { self.slots.get_unchecked(index) }
    }

    #[inline]
    fn maybe_wake_consumer(&self, position: u64) {
        if position & self.wake_check_mask != 0 {
            return;
        }
        // Relaxed: a stale head only makes the wake-up a little early or late, never unsafe.
        let occupied = position
            .wrapping_add(1)
            .wrapping_sub(self.head.0.load(Ordering::Relaxed));
        // A plain load first: past half full, most pushes find the wake-up already requested and
        // must not each write the shared flag's cache line.
        if occupied > self.mask / 2
            && !self.wake_requested.load(Ordering::Relaxed)
            && !self.wake_requested.swap(true, Ordering::AcqRel)
        {
            if let Some(thread) = self.consumer_thread.get() {
                thread.unpark();
            }
        }
    }
}

/// The one consumer of a [`BindingRing`]. Not `Clone`: the ring's correctness needs a single reader.
pub struct RingConsumer {
    ring: Arc<BindingRing>,
}

impl RingConsumer {
    /// The ring this consumer reads.
    pub fn ring(&self) -> &Arc<BindingRing> {
        &self.ring
    }

    /// Takes the oldest published record, if any.
    pub fn pop(&mut self) -> Option<BindingRecord> {
        // Relaxed: only this consumer writes `head`.
        let position = self.ring.head.0.load(Ordering::Relaxed);
        let mut record = MaybeUninit::uninit();
        if !self.take_into(position, &mut record) {
            return None;
        }
        self.ring
            .head
            .0
            .store(position.wrapping_add(1), Ordering::Relaxed);
        // SAFETY: `take_into` returned true, so it wrote the record.
        Some(unsafe { record.assume_init() })
    }

    /// Writes the record at `position` (the next one this consumer reads) into `place` once its
    /// producer has published it, and says whether it did: copied out, then stamped with its place
    /// (the copy, not the slot: a copy that read back a stamp just stored in the slot stalled on
    /// every record, BENCHMARKS.md 2026-12-06 night), its slot freed for the producers. The caller
    /// publishes the consumer's position. Written into `place`, not returned: returned in an
    /// `Option`, the record went through the stack (43 more instructions an event, callgrind).
    #[inline(always)]
    fn take_into(&self, position: u64, place: &mut MaybeUninit<BindingRecord>) -> bool {
        let ring = &*self.ring;
        let slot = ring.slot_at(position);
        // Acquire: pairs with the producer's Release store, making the record's bytes visible.
        if slot.sequence.load(Ordering::Acquire) != position.wrapping_add(1) {
            return false; // empty, or the producer of this position has not finished writing
        }
        // SAFETY: the sequence says the producer finished writing this slot and no producer may
        // touch it again until we release it below; this consumer is the only reader.
        let record = place.write(unsafe { *slot.record.get() });
        // Positions are claimed in total order and read in that order: this is the record's place.
        record.sequence = position;
        ring.release_slot(position);
        prefetch_slot(ring.slot_at(position.wrapping_add(CONSUMER_PREFETCH_AHEAD)));
        true
    }

    /// Appends up to `max` records to `out`, in order and stamped, copied straight out of their slots
    /// and the slots freed for the producers; returns how many. What the indexer copies the ring
    /// aside with: one tight loop (no visitor, the room reserved once, the consumer's position
    /// published once a call), as it runs on every event at the frame's priority.
    pub fn copy_into(&mut self, max: usize, out: &mut Vec<BindingRecord>) -> usize {
        let ring = &*self.ring;
        ring.wake_requested.store(false, Ordering::Release);
        // Relaxed: only this consumer writes `head`.
        let start = ring.head.0.load(Ordering::Relaxed);
        // Relaxed: only a bound on how much room to reserve; each slot's sequence (Acquire, below)
        // says whether its record is there.
        let claimed = ring.tail.0.load(Ordering::Relaxed).wrapping_sub(start);
        let want = claimed.min(ring.mask + 1).min(max as u64) as usize;
        out.reserve(want);
        let mut copied = 0;
        for (n, place) in out.spare_capacity_mut()[..want].iter_mut().enumerate() {
            if !self.take_into(start.wrapping_add(n as u64), place) {
                break; // the producer of this position has not finished writing
            }
            copied = n + 1;
        }
        // SAFETY: the first `copied` places past the length were written above.
        unsafe { out.set_len(out.len() + copied) };
        // Relaxed: producers read `head` only to decide when to wake us (and `len` for a snapshot).
        ring.head
            .0
            .store(start.wrapping_add(copied as u64), Ordering::Relaxed);
        copied
    }

    /// Pops up to `max` records into `sink`; returns how many. Clears the half-full wake request so
    /// the next burst wakes the consumer again.
    pub fn drain(&mut self, max: usize, mut sink: impl FnMut(BindingRecord)) -> usize {
        self.ring.wake_requested.store(false, Ordering::Release);
        let mut taken = 0;
        while taken < max {
            match self.pop() {
                Some(record) => {
                    sink(record);
                    taken += 1;
                }
                None => break,
            }
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::record::BindingKind;
    use ash::vk;

    /// A fresh ring whose next position is `start` (as after `start` pushes and pops).
    fn ring_starting_at(capacity: usize, start: u64) -> (Arc<BindingRing>, RingConsumer) {
        let (ring, consumer) = BindingRing::with_capacity(capacity);
        for j in 0..ring.mask + 1 {
            let position = start + j;
            ring.slots[(position & ring.mask) as usize]
                .sequence
                .store(position, Ordering::Relaxed);
        }
        ring.tail.0.store(start, Ordering::Relaxed);
        ring.head.0.store(start, Ordering::Relaxed);
        (ring, consumer)
    }

    #[test]
    fn sequences_go_on_past_two_to_the_32_on_every_target() {
        let start = u64::from(u32::MAX) - 3;
        let (ring, mut consumer) = ring_starting_at(8, start);
        let mut sequences = Vec::new();
        for n in 0..20 {
            ring.push(record(n)).unwrap();
            consumer.drain(usize::MAX, |r| sequences.push(r.sequence));
        }
        let expected: Vec<u64> = (start..start + 20).collect();
        assert_eq!(sequences, expected);
        assert_eq!(ring.claimed(), start + 20);
        assert!(ring.claimed() > u64::from(u32::MAX));
    }

    fn record(n: u64) -> BindingRecord {
        BindingRecord::new(BindingKind::Bind, vk::ObjectType::BUFFER, n, n * 16, 16)
    }

    #[test]
    fn slot_is_128_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 128);
    }

    #[test]
    fn fifo_and_exact_drop_count_single_thread() {
        let (ring, mut consumer) = BindingRing::with_capacity(8);
        for n in 0..11 {
            let _ = ring.push(record(n));
        }
        assert_eq!(ring.dropped(), 3);
        assert_eq!(ring.len(), 8);
        let popped: Vec<(u64, u64)> = std::iter::from_fn(|| consumer.pop())
            .map(|r| (r.handle, r.sequence))
            .collect();
        // The consumer stamps each record with its position (drops take none).
        assert_eq!(popped, (0..8).map(|n| (n, n)).collect::<Vec<_>>());
        assert!(ring.is_empty());
        // Wraps around after draining; positions go on, whatever the producer left in `sequence`.
        for n in 100..108 {
            let mut r = record(n);
            r.sequence = 12_345;
            ring.push(r).unwrap();
        }
        let mut sequences = Vec::new();
        assert_eq!(
            consumer.drain(usize::MAX, |r| sequences.push(r.sequence)),
            8
        );
        assert_eq!(sequences, (8..16).collect::<Vec<_>>());
        assert_eq!(ring.claimed(), 16);
    }

    /// `copy_into` gives what `drain` gives, in order and stamped, up to `max`; it frees the slots it
    /// read for the producers and stops at a position claimed but not yet written, taking it on a
    /// later call once its producer publishes it.
    #[test]
    fn copy_into_copies_in_order_up_to_max_and_stops_at_an_unwritten_slot() {
        let (ring, mut consumer) = BindingRing::with_capacity(8);
        for n in 0..6 {
            ring.push(record(n)).unwrap();
        }
        let mut out = vec![record(99)];
        assert_eq!(consumer.copy_into(4, &mut out), 4);
        let seen = |out: &[BindingRecord]| -> Vec<(u64, u64)> {
            out.iter().map(|r| (r.handle, r.sequence)).collect()
        };
        // Appended after what `out` held, stamped with their positions.
        assert_eq!(seen(&out), vec![(99, 0), (0, 0), (1, 1), (2, 2), (3, 3)]);
        assert_eq!(ring.len(), 2);
        // The four slots read are free again: six more fit (2 waiting + 6 = 8).
        for n in 6..12 {
            ring.push(record(n)).unwrap();
        }
        assert_eq!(ring.dropped(), 0);
        out.clear();
        assert_eq!(consumer.copy_into(usize::MAX, &mut out), 8);
        assert_eq!(seen(&out), (4..12).map(|n| (n, n)).collect::<Vec<_>>());
        assert!(ring.is_empty());
        assert_eq!(consumer.copy_into(usize::MAX, &mut out), 0);

        // A producer that claimed position 12 and has not written it yet holds back 13 behind it.
        let (position, slot) = ring.claim().unwrap();
        assert_eq!(position, 12);
        ring.push(record(13)).unwrap();
        out.clear();
        assert_eq!(consumer.copy_into(usize::MAX, &mut out), 0);
        // SAFETY: this test won position 12, so it is the slot's only writer until it publishes.
        unsafe { *slot.record.get() = record(12) };
        slot.sequence.store(position + 1, Ordering::Release);
        assert_eq!(consumer.copy_into(usize::MAX, &mut out), 2);
        assert_eq!(seen(&out), vec![(12, 12), (13, 13)]);
        // Every slot is free again: a full lap fits.
        for n in 14..22 {
            ring.push(record(n)).unwrap();
        }
        assert_eq!(ring.dropped(), 0);
    }

    #[test]
    fn capacity_rounds_up_to_power_of_two() {
        let (ring, _consumer) = BindingRing::with_capacity(1000);
        assert_eq!(ring.capacity(), 1024);
    }
}
