//! The indexer threads: the ring's consumer, folding records into the [`AddressIndex`].
//!
//! Two threads share the ring's consumer (`drain.rs`: one folds at a time, oldest records first):
//! - the **urgent** thread, at normal priority, is the one that empties the ring. It wakes at a
//!   frame tick ([`IndexerHandle::frame_tick`]) once a quarter of the ring is waiting, when the
//!   ring passes half full (the callback unparks it), every 100 ms, and when a crash claims the
//!   index. It copies the ring aside for the background thread, a few nanoseconds an event, and
//!   folds itself only when a claim changed or the background thread is more than a ring behind
//!   (a level load that binds 100,000 resources on cores the game keeps busy);
//! - the **background** thread folds what was copied aside, at the lowest priority
//!   ([`crate::background`]), so the steady fold takes only CPU time the game leaves idle. Folding
//!   a few frames' events at once costs less per event than a frame's at a time (the index's
//!   tables are cold after each frame of the game's own work: BENCHMARKS.md, issue 35), and
//!   nothing reads the index without [`IndexerHandle::flush`] first, so it being a few frames
//!   behind is never seen. It never holds the ring: preempted for as long as a busy 2-core machine
//!   keeps it waiting, it cannot make the ring overflow (before, it held the ring while it folded,
//!   and dropped events under two busy loops: BENCHMARKS.md, issue 35).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::devices::DeviceClaims;
pub(crate) use super::drain::lock;
pub use super::drain::SharedIndex;
use super::drain::{drain_and_fold, Drainer, SharedConsumer};
use super::{AddressIndex, IndexSettings};
use crate::capture::record::generation_tag;
use crate::capture::BindingRing;

/// Longest sleep of the urgent thread (stages what a game with few binding events left waiting).
const IDLE_WAKE: Duration = Duration::from_millis(100);
/// The background thread is woken at a frame tick once `capacity / FOLD_AT_SHARE` records wait:
/// a quarter, half way to the urgent thread's half full.
const FOLD_AT_SHARE: usize = 4;
/// The control of a cost measurement (BENCHMARKS.md, issue 35): set, every frame tick wakes the
/// background thread, as before it waited for a quarter of the ring.
pub(crate) const COST_FOLD_EVERY_FRAME_VAR: &str = "GPU_CRASH_REPORTER_COST_FOLD_EVERY_FRAME";
/// A cost measurement (BENCHMARKS.md, `frame_overhead --no-fold`): records are drained from the ring
/// and dropped, not folded, so a run shows the callback and the ring without the index.
pub(crate) const COST_NO_FOLD_VAR: &str = "GPU_CRASH_REPORTER_COST_NO_FOLD";
/// The control of a cost measurement (BENCHMARKS.md, issue 35): set, the background thread keeps
/// normal priority, as before it was lowered.
pub(crate) const COST_NORMAL_PRIORITY_VAR: &str = "GPU_CRASH_REPORTER_COST_INDEXER_NORMAL_PRIORITY";

/// Owns the indexer threads; dropping it stops both after a last drain.
pub struct IndexerHandle {
    ring: Arc<BindingRing>,
    index: SharedIndex,
    consumer: Arc<SharedConsumer>,
    /// Which devices' unbinds are held and which devices' index a report still reads.
    claims: Arc<Mutex<DeviceClaims>>,
    /// Set by a claim's change, so the urgent thread's next wake applies it with a drain.
    claims_changed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    /// Folds the steady stream of events, a quarter ring at a time, at the lowest priority.
    background: Option<JoinHandle<()>>,
    /// Folds at normal priority when the ring passes half full or a crash claims the index.
    urgent: Option<JoinHandle<()>>,
    /// Records waiting at a frame tick that wake the background thread.
    fold_at: usize,
}

impl IndexerHandle {
    /// Creates the ring, the index and the thread that connects them.
    pub fn spawn(ring_capacity: usize, settings: IndexSettings) -> std::io::Result<Self> {
        let (ring, consumer) = BindingRing::with_capacity(ring_capacity);
        let index: SharedIndex = Arc::new(Mutex::new(AddressIndex::new(settings)));
        let claims = Arc::new(Mutex::new(DeviceClaims::default()));
        let no_fold = std::env::var_os(COST_NO_FOLD_VAR).is_some_and(|v| !v.is_empty());
        if no_fold {
            tracing::warn!(
                "GPU crash reporter: {COST_NO_FOLD_VAR} is set: binding events are drained and \
                 dropped, not indexed (a cost measurement, BENCHMARKS.md); reports will not name \
                 GPU objects"
            );
        }
        let consumer = Arc::new(SharedConsumer::new(consumer, claims.clone(), no_fold));
        let stop = Arc::new(AtomicBool::new(false));
        let claims_changed = Arc::new(AtomicBool::new(false));
        let lower = std::env::var_os(COST_NORMAL_PRIORITY_VAR).is_none_or(|v| v.is_empty());
        let background = {
            let (index, consumer, stop) = (index.clone(), consumer.clone(), stop.clone());
            std::thread::Builder::new()
                .name("gpu-crash-indexer".into())
                .spawn(move || {
                    if lower && !crate::background::lower_this_thread() {
                        tracing::debug!("GPU crash reporter: the indexer keeps normal priority");
                    }
                    // Acquire: pairs with the Release in Drop so the last drain sees every push.
                    while !stop.load(Ordering::Acquire) {
                        std::thread::park();
                        drain_and_fold(&consumer, &index, Drainer::Background);
                    }
                    drain_and_fold(&consumer, &index, Drainer::Urgent);
                })?
        };
        let urgent = {
            let (index, consumer, stop) = (index.clone(), consumer.clone(), stop.clone());
            let (changed, background) = (claims_changed.clone(), background.thread().clone());
            std::thread::Builder::new()
                .name("gpu-crash-burst".into())
                .spawn(move || {
                    // Acquire: as above.
                    while !stop.load(Ordering::Acquire) {
                        std::thread::park_timeout(IDLE_WAKE);
                        stage_or_fold(&consumer, &index, &changed, &background);
                    }
                    drain_and_fold(&consumer, &index, Drainer::Urgent);
                })?
        };
        ring.set_consumer_thread(urgent.thread().clone());
        let every_frame =
            std::env::var_os(COST_FOLD_EVERY_FRAME_VAR).is_some_and(|v| !v.is_empty());
        let fold_at = if every_frame {
            0
        } else {
            ring.capacity() / FOLD_AT_SHARE
        };
        Ok(Self {
            fold_at,
            ring,
            index,
            consumer,
            claims,
            claims_changed,
            stop,
            background: Some(background),
            urgent: Some(urgent),
        })
    }

    /// The ring the messenger callback pushes into.
    pub fn ring(&self) -> &Arc<BindingRing> {
        &self.ring
    }

    /// The index.
    pub fn index(&self) -> &SharedIndex {
        &self.index
    }

    /// Starts a new frame: later records carry `frame`, and once a quarter of the ring is waiting the
    /// urgent thread stages it for the background thread to fold.
    pub fn frame_tick(&self, frame: u64) {
        self.ring.set_frame(frame);
        if !fold_due(self.ring.len(), self.fold_at) {
            return;
        }
        if let Some(thread) = &self.urgent {
            thread.thread().unpark();
        }
    }

    /// Asks the index to hold unbinds of render device `generation` back (a fault may have happened
    /// on it, its report is not built yet); the next drain applies it. Each hold ends with its own
    /// [`Self::release_hold`] (the watchdog and a loss report hold and release independently), and
    /// none outlives its device: the index of a newer device starts without. Never blocks on the
    /// index.
    pub fn hold_unbinds(&self, generation: u32) {
        self.claims().holds.push(generation_tag(generation));
        self.wake();
    }

    /// Ends one hold of device `generation` (another holder's, or another device's, stays).
    pub fn release_hold(&self, generation: u32) {
        self.claims().holds.remove_one(generation_tag(generation));
        self.wake();
    }

    /// Keeps the index on render device `generation` until [`Self::unpin_device`]: a report of that
    /// device's loss is built on a thread of its own while the game goes on, and a recovered
    /// device's first events must not empty the index under it. They wait in the ring meanwhile
    /// (beyond its capacity they are counted as dropped, as always). With several devices pinned
    /// (a recovered device lost again before the first report was built), the index moves on one
    /// device at a time, as each one's report is done.
    pub fn pin_device(&self, generation: u32) {
        self.claims().pins.push(generation_tag(generation));
    }

    /// Ends one [`Self::pin_device`] of `generation`.
    pub fn unpin_device(&self, generation: u32) {
        self.claims().pins.remove_one(generation_tag(generation));
        self.wake();
    }

    fn claims(&self) -> MutexGuard<'_, DeviceClaims> {
        self.claims.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A claim changed: the urgent thread applies it now, whatever the game leaves idle.
    fn wake(&self) {
        // Release: pairs with the urgent thread's Acquire swap; the claims themselves are under
        // their mutex.
        self.claims_changed.store(true, Ordering::Release);
        if let Some(thread) = &self.urgent {
            thread.thread().unpark();
        }
    }

    /// Folds everything published so far, on this thread, and returns the locked index: what a crash
    /// handler calls before resolving, so the last events before the fault are in.
    pub fn flush(&self) -> MutexGuard<'_, AddressIndex> {
        drain_and_fold(&self.consumer, &self.index, Drainer::Flush);
        lock(&self.index)
    }
}

impl Drop for IndexerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for thread in [self.background.take(), self.urgent.take()]
            .into_iter()
            .flatten()
        {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// The urgent thread's work at each wake: a claim changed, or the background thread is more than a
/// ring behind (a level load on cores the game keeps busy): it folds, at normal priority. Otherwise
/// it copies the ring aside and leaves the fold to the background thread, which never holds the
/// ring: preempted at the lowest priority, it cannot keep the ring from emptying.
fn stage_or_fold(
    consumer: &SharedConsumer,
    index: &SharedIndex,
    claims_changed: &AtomicBool,
    background: &std::thread::Thread,
) {
    // Acquire: pairs with the Release in `IndexerHandle::wake`.
    if consumer.no_fold() || claims_changed.swap(false, Ordering::Acquire) {
        drain_and_fold(consumer, index, Drainer::Urgent);
        return;
    }
    let staged = consumer.stage();
    if staged > consumer.ring_capacity() {
        drain_and_fold(consumer, index, Drainer::Urgent);
    } else if staged > 0 {
        background.unpark();
    }
}

/// Whether a frame tick wakes the urgent thread to stage the ring: `pending` records wait, `fold_at` is the
/// handle's threshold (0: every tick, the cost control).
fn fold_due(pending: usize, fold_at: usize) -> bool {
    pending > 0 && pending >= fold_at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::devices::tests::tagged;
    use std::time::Instant;

    /// A hold asked for by a lost device's report ends with that device: the recovered device's
    /// index starts without it (it would otherwise hold every unbind once its freed ring is full,
    /// filling its live slots with held ranges), and a later hold of the new device still applies.
    #[test]
    fn a_hold_ends_with_its_device_and_a_new_device_can_hold_again() {
        let indexer = IndexerHandle::spawn(64, IndexSettings::default()).unwrap();
        indexer.ring().push(tagged(1)).unwrap();
        indexer.hold_unbinds(1);
        assert!(indexer.flush().holding(), "device 1 holds");
        let mut next = tagged(2);
        next.base = 0x9000;
        indexer.ring().push(next).unwrap();
        assert!(
            !indexer.flush().holding(),
            "device 2 starts without the hold"
        );
        indexer.release_hold(1);
        indexer.hold_unbinds(2);
        assert!(indexer.flush().holding(), "device 2's own hold applies");
        indexer.release_hold(1);
        assert!(
            indexer.flush().holding(),
            "device 1's release leaves device 2's hold"
        );
        indexer.release_hold(2);
        assert!(!indexer.flush().holding());
    }

    /// While a loss report reads device 1's index, device 2's first events wait; once the report is
    /// done they reset the index and are folded, none lost.
    #[test]
    fn a_pinned_device_keeps_its_index_until_unpinned() {
        let indexer = IndexerHandle::spawn(64, IndexSettings::default()).unwrap();
        indexer.ring().push(tagged(1)).unwrap();
        assert_eq!(indexer.flush().live_len(), 1);
        indexer.pin_device(1);
        for i in 0..3u64 {
            let mut next = tagged(2);
            next.handle = 10 + i;
            next.base = 0x9000 + i * 0x100;
            indexer.ring().push(next).unwrap();
        }
        {
            let index = indexer.flush();
            assert_eq!(index.live_len(), 1, "still device 1's index");
            assert_eq!(index.live_overlapping(0x1000, 0x1001).len(), 1);
        }
        indexer.unpin_device(1);
        let index = indexer.flush();
        assert_eq!(index.live_len(), 3, "device 2's events, in");
        assert_eq!(index.live_overlapping(0x1000, 0x1001).len(), 0);
    }

    /// Device 2 is lost (and pinned) before device 1's report is done, and device 3 already sends
    /// events: the index moves to device 2 only when device 1 is unpinned, and to device 3 only
    /// when device 2 is.
    #[test]
    fn pinned_devices_are_left_one_at_a_time() {
        let indexer = IndexerHandle::spawn(64, IndexSettings::default()).unwrap();
        let on = |generation: u32, base: u64| {
            let mut record = tagged(generation);
            record.handle = u64::from(generation);
            record.base = base;
            record
        };
        indexer.ring().push(on(1, 0x1000)).unwrap();
        assert_eq!(indexer.flush().live_len(), 1);
        indexer.pin_device(1);
        indexer.ring().push(on(2, 0x2000)).unwrap();
        indexer.pin_device(2);
        indexer.ring().push(on(3, 0x3000)).unwrap();
        let first = |indexer: &IndexerHandle| {
            let index = indexer.flush();
            [0x1000, 0x2000, 0x3000]
                .into_iter()
                .find(|base| !index.live_overlapping(*base, base + 1).is_empty())
        };
        assert_eq!(
            first(&indexer),
            Some(0x1000),
            "device 1's report reads device 1"
        );
        indexer.unpin_device(1);
        assert_eq!(first(&indexer), Some(0x2000), "then device 2's");
        indexer.unpin_device(2);
        assert_eq!(first(&indexer), Some(0x3000), "then device 3");
    }

    /// The steady fold runs at the lowest priority, the half-full and crash-claim fold at normal
    /// priority (a game that keeps every core busy must not starve it into dropping events).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_per_frame_fold_runs_in_idle_time_and_the_urgent_one_does_not() {
        use crate::background::tests::nice_of;
        use crate::background::LOWERED_NICE;
        let indexer = IndexerHandle::spawn(64, IndexSettings::default()).unwrap();
        // Other tests of this process spawn and drop indexers too: wait until some thread of each
        // name has the wanted niceness (ours does within microseconds; before this change no
        // thread was lowered and none was named `gpu-crash-burst`).
        let some_thread_with = |name: &str, nice: libc::c_int| {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(5) {
                let found = std::fs::read_dir("/proc/self/task")
                    .unwrap()
                    .flatten()
                    .filter(|task| {
                        std::fs::read_to_string(task.path().join("comm"))
                            .is_ok_and(|comm| comm.trim_end() == name)
                    })
                    .filter_map(|task| task.file_name().to_str()?.parse::<libc::id_t>().ok())
                    .any(|tid| nice_of(tid) == nice);
                if found {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            false
        };
        assert!(some_thread_with("gpu-crash-index", LOWERED_NICE));
        // The urgent thread keeps the niceness it was created with (this thread's).
        assert!(some_thread_with("gpu-crash-burst", nice_of(0)));
        drop(indexer);
    }

    /// A frame tick wakes the background fold only once a quarter of the ring waits: folding a few
    /// frames' events at once cost 60 ns an event against 85 ns a frame at a time (BENCHMARKS.md).
    #[test]
    fn a_frame_tick_folds_once_a_quarter_of_the_ring_waits() {
        assert!(!fold_due(0, 16), "nothing waits");
        assert!(
            !fold_due(15, 16),
            "under a quarter: the next tick or the idle wake"
        );
        assert!(fold_due(16, 16));
        assert!(fold_due(1, 0), "the cost control: every tick");
        assert!(!fold_due(0, 0));

        let indexer = IndexerHandle::spawn(64, IndexSettings::default()).unwrap();
        assert_eq!(indexer.fold_at, 16, "a quarter of the ring");
    }

    /// The steady path end to end: a frame tick with a quarter of the ring waiting has the urgent
    /// thread copy it aside and the background thread fold it, so the index has the records
    /// without a flush.
    #[test]
    fn a_frame_tick_gets_the_ring_folded_without_a_flush() {
        let indexer = IndexerHandle::spawn(64, IndexSettings::default()).unwrap();
        for i in 0..16u64 {
            let mut record = tagged(1);
            record.handle = i + 1;
            record.base = 0x1000 * (i + 1);
            indexer.ring().push(record).unwrap();
        }
        indexer.frame_tick(1);
        let started = Instant::now();
        while lock(indexer.index()).live_len() < 16 {
            assert!(started.elapsed() < Duration::from_secs(10), "not folded");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(indexer.ring().is_empty());
    }

    #[test]
    fn reset_forgets_the_old_device() {
        let indexer = IndexerHandle::spawn(64, IndexSettings::default()).unwrap();
        indexer.ring().push(tagged(1)).unwrap();
        assert_eq!(indexer.flush().live_len(), 1);
        let mut other = tagged(2);
        other.handle = 2;
        other.base = 0x9000;
        indexer.ring().push(other).unwrap();
        indexer
            .ring()
            .push(tagged(1).with_name("late teardown"))
            .unwrap();
        let index = indexer.flush();
        assert_eq!(index.live_len(), 1);
        assert_eq!(index.live_overlapping(0x9000, 0x9001).len(), 1);
    }
}
