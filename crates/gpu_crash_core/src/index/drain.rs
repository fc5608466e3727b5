//! Draining the ring into the index: who may fold, in what order, and how the ring keeps emptying
//! while the lowest-priority thread that usually folds sits preempted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use super::devices::{DeviceClaims, DeviceFilter, DeviceVerdict};
use super::fold::PREFETCH_AHEAD;
use super::AddressIndex;
use crate::capture::{BindingRecord, RingConsumer};

/// The index shared between the indexer threads and whoever resolves a fault.
pub type SharedIndex = Arc<Mutex<AddressIndex>>;

/// Locks the index even if a panicking thread poisoned it: the data is still the best we have.
pub(crate) fn lock(index: &SharedIndex) -> MutexGuard<'_, AddressIndex> {
    index
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The ring's consumer, shared by the indexer threads and a crash handler's flush, in two locks so
/// that the background thread, at the lowest priority and preempted whenever a game thread wants
/// its core, never holds what the others need to empty the ring:
/// - `source`, the ring and the records `staged` out of it. Only threads of normal priority copy
///   the ring (the urgent thread at a frame tick, half full or idle; a flush); the background
///   thread holds `source` only to swap `staged` out, a pointer's worth of work;
/// - `fold`, held by whoever folds, for a whole drain; the background thread folds what was
///   staged, the others (behind, or a crash) the ring too.
///
/// A thread that finds `fold` taken goes on staging the ring instead, and folds once it gets it.
pub(super) struct SharedConsumer {
    source: Mutex<Source>,
    fold: Mutex<FoldState>,
    /// Callers waiting for `fold` now: the background thread gives it up between chunks while one
    /// waits, so a flush is not kept waiting for the lowest-priority thread's whole drain.
    waiting: AtomicUsize,
    /// The ring's capacity (fixed at its creation), so the urgent thread's every wake need not lock
    /// `source` to learn it.
    ring_capacity: usize,
    claims: Arc<Mutex<DeviceClaims>>,
    /// A cost measurement (`GPU_CRASH_REPORTER_COST_NO_FOLD`): drain and drop.
    no_fold: bool,
    /// Tests: the background thread stops here after its first chunk, as if preempted.
    #[cfg(test)]
    stall: Mutex<Option<Stall>>,
}

/// Where records come from, oldest first: `staged`, then the ring.
struct Source {
    ring: RingConsumer,
    /// Records copied out of the ring for the background thread to fold (or by a thread that
    /// found `fold` taken), oldest first, up to [`staged_limit`] records. Grows on a thread of
    /// ours, never the driver's; in a steady game it swaps allocations with the fold's `chunk`.
    staged: Vec<BindingRecord>,
}

/// The ring holds a few frames' events; staged ones wait on a folder preempted for longer than that:
/// up to four rings' worth (131,072 records, 15 MiB, at the default capacity of 32,768), then the
/// ring fills and counts its drops, as always. In a steady game `staged` and the fold's `chunk` each
/// hold about a quarter ring (8,192 records, under 1 MiB); they grow past it only while the fold is
/// held up.
fn staged_limit(ring_capacity: usize) -> usize {
    ring_capacity.saturating_mul(4)
}

/// How long a thread that staged the ring sleeps before it looks for `fold` again: the ring fills
/// from half in milliseconds only in a level load, which also wakes the urgent thread at once.
const STAGED_WAIT: Duration = Duration::from_millis(1);

/// Records folded per lock of the index (a resolver waiting for it waits microseconds), and copied
/// out of the ring per lock of `source` by a thread that folds the ring itself.
const CHUNK: usize = 256;

/// The fold's state: the device its index describes, and what waits for a pin to end.
struct FoldState {
    device: DeviceFilter,
    /// The claims as this drain found them (a copy: the crash path changes claims without waiting
    /// for a drain, and the next drain applies them).
    claims: DeviceClaims,
    /// A newer device's records drained while the index was pinned to an older one, oldest first;
    /// folded once the pin ends, before anything newer (allocated once, at most a chunk unless a
    /// staged run was deferred).
    deferred: Vec<BindingRecord>,
    /// Where the deferred records are folded from (swapped with `deferred`, so a record deferred
    /// again lands in an allocation of the same size).
    refold: Vec<BindingRecord>,
    /// The records being folded, taken from `staged` or copied out of the ring; those before
    /// `done` are folded (the background thread gives the rest up to a waiting caller).
    chunk: Vec<BindingRecord>,
    done: usize,
}

impl SharedConsumer {
    /// The consumer of `ring`, its index on no device yet, with its chunks allocated.
    pub(super) fn new(ring: RingConsumer, claims: Arc<Mutex<DeviceClaims>>, no_fold: bool) -> Self {
        Self {
            ring_capacity: ring.ring().capacity(),
            source: Mutex::new(Source {
                ring,
                staged: Vec::new(),
            }),
            fold: Mutex::new(FoldState {
                device: DeviceFilter::default(),
                claims: DeviceClaims::default(),
                deferred: Vec::with_capacity(CHUNK),
                refold: Vec::with_capacity(CHUNK),
                chunk: Vec::with_capacity(CHUNK),
                done: 0,
            }),
            waiting: AtomicUsize::new(0),
            claims,
            no_fold,
            #[cfg(test)]
            stall: Mutex::new(None),
        }
    }

    fn source(&self) -> MutexGuard<'_, Source> {
        self.source.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `fold`: the background thread waits for it; the others stage the ring while it is
    /// taken (so the ring keeps emptying behind a preempted background thread), counted in
    /// `waiting` meanwhile.
    fn fold(&self, drainer: Drainer) -> MutexGuard<'_, FoldState> {
        if drainer == Drainer::Background {
            return self.fold.lock().unwrap_or_else(|p| p.into_inner());
        }
        let mut counted = false;
        let state = loop {
            match self.fold.try_lock() {
                Ok(state) => break state,
                Err(TryLockError::Poisoned(poisoned)) => break poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    if !counted {
                        // Relaxed: a hint the background thread reads between chunks; the mutex
                        // orders the fold's state itself.
                        self.waiting.fetch_add(1, Ordering::Relaxed);
                        counted = true;
                    }
                    self.stage();
                    match drainer {
                        Drainer::Flush => std::thread::sleep(STAGED_WAIT),
                        _ => std::thread::park_timeout(STAGED_WAIT),
                    }
                }
            }
        };
        if counted {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        state
    }

    /// Copies what the ring holds into `staged`, up to its limit; returns how many records are
    /// staged now.
    pub(super) fn stage(&self) -> usize {
        let mut source = self.source();
        let Source { ring, staged } = &mut *source;
        let room = staged_limit(self.ring_capacity).saturating_sub(staged.len());
        ring.copy_into(room, staged);
        staged.len()
    }

    /// The ring's capacity.
    pub(super) fn ring_capacity(&self) -> usize {
        self.ring_capacity
    }

    /// Whether the ring's records are drained and dropped, not folded (a cost measurement).
    pub(super) fn no_fold(&self) -> bool {
        self.no_fold
    }

    /// Moves all of `staged` into `chunk` (emptied first): false when nothing was staged. The
    /// background thread's only use of `source`: a swap, so a preemption inside it is unlikely.
    fn take_staged(&self, chunk: &mut Vec<BindingRecord>) -> bool {
        chunk.clear();
        let mut source = self.source();
        if source.staged.is_empty() {
            return false;
        }
        // The staged allocation moves to the fold; `staged` keeps the chunk's.
        std::mem::swap(&mut source.staged, chunk);
        true
    }

    /// Copies up to [`CHUNK`] records out of the ring into `chunk` (emptied first): false when the
    /// ring is empty. For threads of normal priority.
    fn take_ring(&self, chunk: &mut Vec<BindingRecord>) -> bool {
        chunk.clear();
        self.source().ring.copy_into(CHUNK, chunk) > 0
    }
}

/// Tests: where the background thread stops, as if preempted while it holds `fold`.
#[cfg(test)]
struct Stall {
    /// Told when the thread stops.
    entered: std::sync::mpsc::Sender<()>,
    /// Waited on before it goes on.
    resume: std::sync::mpsc::Receiver<()>,
}

#[cfg(test)]
impl SharedConsumer {
    fn stall_here(&self, drainer: Drainer) {
        if drainer != Drainer::Background {
            return;
        }
        let stall = self.stall.lock().unwrap().take();
        if let Some(stall) = stall {
            stall.entered.send(()).unwrap();
            stall.resume.recv().unwrap();
        }
    }
}

/// Who drains the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Drainer {
    /// The background thread: waits for `fold`, folds what was staged (never the ring itself), and
    /// stops after a chunk when another caller waits for `fold`.
    Background,
    /// The urgent thread or the last drain: stages the ring while `fold` is taken, then folds
    /// what was staged and the ring until both are empty. Sleeps between looks by parking (the
    /// callback unparks it at half full).
    Urgent,
    /// A crash handler's flush: as `Urgent`, but sleeps between looks without parking (the
    /// caller's thread may use its park token for something else).
    Flush,
}

/// Folds what waits into the index, oldest first: the rest of a chunk a background drain gave up,
/// then `staged`, then (not the background thread) the ring, a chunk per lock of the index (see
/// [`Drainer`] for who waits for what, and when it stops early).
pub(super) fn drain_and_fold(shared: &SharedConsumer, index: &SharedIndex, drainer: Drainer) {
    if shared.no_fold {
        let mut source = shared.source();
        source.staged.clear();
        while source.ring.drain(CHUNK, |_| {}) > 0 {}
        return;
    }
    let mut state = shared.fold(drainer);
    let FoldState {
        device,
        claims,
        deferred,
        refold,
        chunk,
        done,
    } = &mut *state;
    claims.clone_from(&shared.claims.lock().unwrap_or_else(|p| p.into_inner()));
    apply_hold(claims, device, index);
    if !deferred.is_empty() {
        if claims.pins.contains(device.generation) {
            return; // the newer device's events wait until the report is built
        }
        std::mem::swap(refold, deferred);
        fold_records(device, index, claims, deferred, refold, 0..refold.len());
        refold.clear();
        if !deferred.is_empty() {
            return; // the next device is pinned too: its report comes first
        }
    }
    loop {
        if *done == chunk.len() {
            *done = 0;
            let taken = shared.take_staged(chunk)
                || (drainer != Drainer::Background && shared.take_ring(chunk));
            if !taken {
                break;
            }
        }
        let end = (*done + CHUNK).min(chunk.len());
        let all = fold_records(device, index, claims, deferred, chunk, *done..end);
        *done = if all { end } else { chunk.len() };
        #[cfg(test)]
        shared.stall_here(drainer);
        if !all {
            break; // pinned: the rest waits in `deferred`, `staged` and the ring
        }
        // Relaxed: see `SharedConsumer::waiting`.
        if drainer == Drainer::Background && shared.waiting.load(Ordering::Relaxed) > 0 {
            break; // the urgent thread or a flush takes over from here
        }
    }
    // Again for the device the index describes now: the chunks may have started a newer one.
    apply_hold(claims, device, index);
}

/// Folds `records[range]` in order, [`CHUNK`] per lock of the index, each prefetching for the
/// record [`PREFETCH_AHEAD`] later (past the range too). When one is deferred (a newer device's
/// while the index is pinned) every record after it follows it into `deferred`, and false says so.
fn fold_records(
    device: &mut DeviceFilter,
    index: &SharedIndex,
    claims: &DeviceClaims,
    deferred: &mut Vec<BindingRecord>,
    records: &[BindingRecord],
    range: std::ops::Range<usize>,
) -> bool {
    let mut start = range.start;
    while start < range.end {
        let end = (start + CHUNK).min(range.end);
        let mut fold = Fold::new(device, index, claims, deferred);
        for i in start..end {
            if !fold.one(&records[i], records.get(i + PREFETCH_AHEAD)) {
                fold.deferred.extend_from_slice(&records[i + 1..]);
                return false;
            }
        }
        start = end;
    }
    true
}

/// Sets the index's hold as asked for the device it describes now (a reset for a newer device ended
/// any hold of an older one).
fn apply_hold(claims: &DeviceClaims, device: &DeviceFilter, index: &SharedIndex) {
    let wanted = claims.holds.contains(device.generation);
    let mut index = lock(index);
    if wanted != index.holding() {
        index.set_holding(wanted);
    }
}

/// Folding records into the index under one lock of it, each judged by its device.
struct Fold<'a> {
    device: &'a mut DeviceFilter,
    index: MutexGuard<'a, AddressIndex>,
    claims: &'a DeviceClaims,
    /// Whether the index's device is pinned (its report is being built).
    pinned: bool,
    deferred: &'a mut Vec<BindingRecord>,
    now: Instant,
}

impl<'a> Fold<'a> {
    fn new(
        device: &'a mut DeviceFilter,
        index: &'a SharedIndex,
        claims: &'a DeviceClaims,
        deferred: &'a mut Vec<BindingRecord>,
    ) -> Self {
        Self {
            pinned: claims.pins.contains(device.generation),
            device,
            index: lock(index),
            claims,
            deferred,
            now: Instant::now(),
        }
    }

    /// Folds `record`, starting to load what `ahead` (a record folded a few later) will touch.
    /// While the index's device is pinned, a record of a newer device is kept in `deferred`
    /// instead, and false says to stop: everything after it waits too.
    fn one(&mut self, record: &BindingRecord, ahead: Option<&BindingRecord>) -> bool {
        if self.pinned && self.device.is_newer(record) {
            self.deferred.push(*record);
            return false;
        }
        // Overlap the cache misses of records folded in turn (see `AddressIndex::apply_all`).
        if let Some(ahead) = ahead {
            self.index.prefetch(ahead);
        }
        match self.device.judge(record) {
            DeviceVerdict::Apply => self.index.apply(record, self.now),
            DeviceVerdict::ResetThenApply => {
                self.index.reset();
                self.index.apply(record, self.now);
                // The new device may be pinned too (lost again before its report was built).
                self.pinned = self.claims.pins.contains(self.device.generation);
            }
            DeviceVerdict::Drop => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{BindingKind, BindingRing};
    use crate::index::IndexSettings;
    use ash::vk;
    use std::sync::atomic::AtomicBool;

    /// Ring, consumer and index as `IndexerHandle::spawn` wires them, without its threads.
    fn parts(ring_capacity: usize) -> (Arc<BindingRing>, SharedConsumer, SharedIndex) {
        let (ring, consumer) = BindingRing::with_capacity(ring_capacity);
        let claims = Arc::new(Mutex::new(DeviceClaims::default()));
        let shared = SharedConsumer::new(consumer, claims, false);
        let index = Arc::new(Mutex::new(AddressIndex::new(IndexSettings::default())));
        (ring, shared, index)
    }

    /// Starts a background drain on a thread of its own and returns once it has stopped after its
    /// first chunk, holding `fold` as if preempted: its thread, and what makes it go on.
    fn stalled_background_drain(
        shared: &Arc<SharedConsumer>,
        index: &SharedIndex,
    ) -> (std::thread::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
        let (entered, stalled) = std::sync::mpsc::channel();
        let (resume, resumed) = std::sync::mpsc::channel();
        *shared.stall.lock().unwrap() = Some(Stall {
            entered,
            resume: resumed,
        });
        let background = {
            let (shared, index) = (shared.clone(), index.clone());
            std::thread::spawn(move || drain_and_fold(&shared, &index, Drainer::Background))
        };
        stalled.recv().unwrap();
        (background, resume)
    }

    /// The background thread, preempted at the lowest priority while it folds, must not keep a
    /// crash's flush waiting for its whole drain: with one waiting, it stops after the chunk in
    /// hand, and the next folder goes on with the rest, in order.
    #[test]
    fn the_background_drain_gives_the_fold_up_between_chunks_to_a_waiter() {
        let (ring, shared, index) = parts(1 << 14);
        let bind = |n: u64| {
            BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::BUFFER,
                n + 1,
                n << 16,
                64,
            )
        };
        for n in 0..3 * CHUNK as u64 {
            ring.push(bind(n)).unwrap();
        }
        assert_eq!(shared.stage(), 3 * CHUNK);
        assert!(
            ring.is_empty(),
            "staged: the background thread never reads the ring"
        );
        // What a caller waiting in `SharedConsumer::fold` looks like.
        shared.waiting.fetch_add(1, Ordering::Relaxed);
        drain_and_fold(&shared, &index, Drainer::Background);
        assert_eq!(
            lock(&index).stats().binds,
            CHUNK as u64,
            "one chunk, then the waiter's turn"
        );
        // The urgent thread does not stop for waiters, and folds the ring too.
        ring.push(bind(3 * CHUNK as u64)).unwrap();
        drain_and_fold(&shared, &index, Drainer::Urgent);
        assert!(ring.is_empty());
        assert_eq!(lock(&index).stats().binds, 3 * CHUNK as u64 + 1);
        shared.waiting.fetch_sub(1, Ordering::Relaxed);
        for n in 1..2 * CHUNK as u64 {
            ring.push(bind(n + 3 * CHUNK as u64)).unwrap();
        }
        // The background thread folds only what was staged.
        drain_and_fold(&shared, &index, Drainer::Background);
        assert_eq!(lock(&index).stats().binds, 3 * CHUNK as u64 + 1);
        shared.stage();
        // Nobody waiting: it folds everything staged.
        drain_and_fold(&shared, &index, Drainer::Background);
        assert!(ring.is_empty());
        assert_eq!(lock(&index).stats().binds, 5 * CHUNK as u64);
    }

    /// The background thread, preempted at the lowest priority in the middle of its drain (a game
    /// keeping both cores of a 2-core machine busy), must not keep the ring from emptying: the
    /// urgent thread copies it aside and folds it, in order, once the background thread is back.
    /// Before, the urgent thread waited on the consumer the background thread held, and the ring
    /// overflowed.
    #[test]
    fn a_preempted_background_drain_does_not_make_the_ring_overflow() {
        const CAPACITY: usize = 4 * CHUNK;
        let (ring, shared, index) = parts(CAPACITY);
        let shared = Arc::new(shared);
        // Buffer n is bound at position 2n and freed at 2n + 1: folded out of order, a free
        // before its bind would leave the buffer live.
        let event =
            |n: u64, kind| BindingRecord::new(kind, vk::ObjectType::BUFFER, n + 1, n << 16, 64);
        let mut pushed = 0u64;
        let mut push_pair = |ring: &BindingRing| {
            ring.push(event(pushed, BindingKind::Bind)).unwrap();
            ring.push(event(pushed, BindingKind::Unbind)).unwrap();
            pushed += 1;
        };
        for _ in 0..CHUNK {
            push_pair(&ring);
        }
        shared.stage();
        let (background, resume) = stalled_background_drain(&shared, &index);
        let urgent_stop = Arc::new(AtomicBool::new(false));
        let urgent = {
            let (shared, index, stop) = (shared.clone(), index.clone(), urgent_stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    drain_and_fold(&shared, &index, Drainer::Urgent);
                }
            })
        };
        // Three rings' worth of events while the background thread is stopped (within the staged
        // limit of four), in bursts that fill the ring to three quarters at most before the urgent
        // thread empties it.
        for _ in 0..6 {
            for _ in 0..CAPACITY / 4 {
                push_pair(&ring);
            }
            let started = Instant::now();
            while ring.len() > CAPACITY / 4 {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "the ring did not empty while the background drain was stopped"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(ring.dropped(), 0);
        resume.send(()).unwrap();
        background.join().unwrap();
        urgent_stop.store(true, Ordering::Release);
        urgent.join().unwrap();
        drain_and_fold(&shared, &index, Drainer::Flush);
        let index = lock(&index);
        assert_eq!(index.stats().binds, pushed);
        assert_eq!(index.live_len(), 0, "every free folded after its bind");
        assert_eq!(ring.dropped(), 0);
    }

    /// A hang's watchdog asking to hold unbinds (or a loss report pinning the index) is not kept
    /// waiting by a background drain preempted at the lowest priority: the drain works on a copy
    /// of the claims. Before, it held their lock until it was done.
    #[test]
    fn a_preempted_background_drain_does_not_hold_the_claims() {
        let (ring, shared, index) = parts(4 * CHUNK);
        let shared = Arc::new(shared);
        for n in 0..2 * CHUNK as u64 {
            ring.push(BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::BUFFER,
                n + 1,
                n << 16,
                64,
            ))
            .unwrap();
        }
        shared.stage();
        let (background, resume) = stalled_background_drain(&shared, &index);
        let free = shared.claims.try_lock().is_ok();
        resume.send(()).unwrap();
        background.join().unwrap();
        assert!(
            free,
            "the claims' lock was free while the drain was stopped"
        );
        assert_eq!(lock(&index).stats().binds, 2 * CHUNK as u64);
    }
}
