//! The indexer thread: the ring's single consumer, folding records into the [`AddressIndex`].
//!
//! It wakes once per frame (the plugin calls [`IndexerHandle::frame_tick`]) and also whenever the
//! ring passes half full (the callback unparks it), so a level load that binds 100,000 resources
//! within one frame is folded while it happens instead of overflowing the ring.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{AddressIndex, IndexSettings, PREFETCH_AHEAD};
use crate::capture::{BindingRecord, BindingRing, RingConsumer};

/// The index shared between the indexer thread and whoever resolves a fault.
pub type SharedIndex = Arc<Mutex<AddressIndex>>;

/// Records folded per lock of the index, so a resolver waiting for the lock waits microseconds; the
/// batch (120 KiB) stays in a core's L2 between the copy out of the ring and the fold.
const BATCH: usize = 1_024;
/// Longest sleep without a frame tick or wake-up (keeps the index fresh in a stalled app).
const IDLE_WAKE: Duration = Duration::from_millis(100);
/// A cost measurement (BENCHMARKS.md, `frame_overhead --no-fold`): records are drained from the ring
/// and dropped, not folded, so a run shows the callback and the ring without the index.
pub(crate) const COST_NO_FOLD_VAR: &str = "GPU_CRASH_REPORTER_COST_NO_FOLD";

/// Owns the indexer thread; dropping it stops the thread after a last drain.
pub struct IndexerHandle {
    ring: Arc<BindingRing>,
    index: SharedIndex,
    consumer: Arc<Mutex<Consumer>>,
    /// Whether the index holds unbinds back (see [`AddressIndex::set_holding`]); applied by the
    /// next drain.
    hold_unbinds: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl IndexerHandle {
    /// Creates the ring, the index and the thread that connects them.
    pub fn spawn(ring_capacity: usize, settings: IndexSettings) -> std::io::Result<Self> {
        let (ring, consumer) = BindingRing::with_capacity(ring_capacity);
        let index: SharedIndex = Arc::new(Mutex::new(AddressIndex::new(settings)));
        let hold_unbinds = Arc::new(AtomicBool::new(false));
        let no_fold = std::env::var_os(COST_NO_FOLD_VAR).is_some_and(|v| !v.is_empty());
        if no_fold {
            bevy::log::warn!(
                "GPU crash reporter: {COST_NO_FOLD_VAR} is set: binding events are drained and \
                 dropped, not indexed (a cost measurement, BENCHMARKS.md); reports will not name \
                 GPU objects"
            );
        }
        let consumer = Arc::new(Mutex::new(Consumer {
            ring: consumer,
            device: DeviceFilter::default(),
            hold_unbinds: hold_unbinds.clone(),
            holding: false,
            no_fold,
            batch: Vec::with_capacity(BATCH),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (index, consumer, stop) = (index.clone(), consumer.clone(), stop.clone());
            std::thread::Builder::new()
                .name("gpu-crash-indexer".into())
                .spawn(move || {
                    // Acquire: pairs with the Release in Drop so the last drain sees every push.
                    while !stop.load(Ordering::Acquire) {
                        std::thread::park_timeout(IDLE_WAKE);
                        drain_into(&consumer, &index);
                    }
                    drain_into(&consumer, &index);
                })?
        };
        ring.set_consumer_thread(thread.thread().clone());
        Ok(Self {
            ring,
            index,
            consumer,
            hold_unbinds,
            stop,
            thread: Some(thread),
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

    /// Starts a new frame: later records carry `frame`, and the thread folds what arrived so far.
    pub fn frame_tick(&self, frame: u64) {
        self.ring.set_frame(frame);
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
    }

    /// Asks the index to hold unbinds back (a fault may have happened, its report is not built yet)
    /// or to stop; the next drain applies it. Called by the watchdog and the loss handler, never
    /// blocks.
    pub fn hold_unbinds(&self, on: bool) {
        // Release: the drain that Acquire-loads it folds under the new setting.
        self.hold_unbinds.store(on, Ordering::Release);
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
    }

    /// Folds everything published so far, on this thread, and returns the locked index: what a crash
    /// handler calls before resolving, so the last events before the fault are in.
    pub fn flush(&self) -> MutexGuard<'_, AddressIndex> {
        drain_into(&self.consumer, &self.index);
        lock(&self.index)
    }
}

impl Drop for IndexerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// Locks the index even if a panicking thread poisoned it: the data is still the best we have.
pub(crate) fn lock(index: &SharedIndex) -> MutexGuard<'_, AddressIndex> {
    index
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The ring's consumer and the device its index describes.
struct Consumer {
    ring: RingConsumer,
    device: DeviceFilter,
    hold_unbinds: Arc<AtomicBool>,
    /// The setting the index has now.
    holding: bool,
    /// [`COST_NO_FOLD_VAR`]: drain and drop.
    no_fold: bool,
    /// The records of one batch, allocated once: a drain (every frame, and on the crash path)
    /// allocates nothing.
    batch: Vec<BindingRecord>,
}

/// Keeps the index to one render device: the first event of a newer device generation (a renderer
/// recovery) empties it, and events of older generations (the old device's teardown, which its
/// messenger still reports while the new device starts) are dropped. Untagged events (0) pass.
#[derive(Default)]
struct DeviceFilter {
    generation: u8,
}

/// What to do with one record.
#[derive(Debug, PartialEq, Eq)]
enum DeviceVerdict {
    Apply,
    ResetThenApply,
    Drop,
}

impl DeviceFilter {
    fn judge(&mut self, record: &BindingRecord) -> DeviceVerdict {
        let tag = record.device_generation();
        if tag == 0 || tag == self.generation {
            return DeviceVerdict::Apply;
        }
        // Tags wrap 255 -> 1 (see `generation_tag`): newer is a short forward distance.
        let forward = if tag > self.generation {
            tag - self.generation
        } else {
            (255 - self.generation) + tag
        };
        if self.generation == 0 || forward < 128 {
            self.generation = tag;
            DeviceVerdict::ResetThenApply
        } else {
            DeviceVerdict::Drop
        }
    }
}

fn drain_into(consumer: &Mutex<Consumer>, index: &SharedIndex) {
    let mut consumer = consumer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let Consumer {
        ring,
        device,
        hold_unbinds,
        holding,
        no_fold,
        batch,
    } = &mut *consumer;
    if *no_fold {
        while ring.drain(BATCH, |_| {}) > 0 {}
        return;
    }
    // Acquire: pairs with the Release in `IndexerHandle::hold_unbinds`.
    let wanted = hold_unbinds.load(Ordering::Acquire);
    if wanted != *holding {
        lock(index).set_holding(wanted);
        *holding = wanted;
    }
    loop {
        batch.clear();
        ring.drain(BATCH, |record| batch.push(record));
        if batch.is_empty() {
            break;
        }
        let now = Instant::now();
        let mut index = lock(index);
        for (i, record) in batch.iter().enumerate() {
            // Overlap the cache misses of records folded in turn (see `AddressIndex::apply_all`).
            if let Some(ahead) = batch.get(i + PREFETCH_AHEAD) {
                index.prefetch(ahead);
            }
            match device.judge(record) {
                DeviceVerdict::Apply => index.apply(record, now),
                DeviceVerdict::ResetThenApply => {
                    index.reset();
                    index.apply(record, now);
                }
                DeviceVerdict::Drop => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::record::generation_tag;
    use crate::capture::BindingKind;
    use ash::vk;

    fn tagged(generation: u32) -> BindingRecord {
        BindingRecord::new(BindingKind::Bind, vk::ObjectType::BUFFER, 1, 0x1000, 64)
            .with_device_generation(generation_tag(generation))
    }

    #[test]
    fn newer_device_resets_older_device_is_dropped() {
        let mut filter = DeviceFilter::default();
        assert_eq!(filter.judge(&tagged(1)), DeviceVerdict::ResetThenApply);
        assert_eq!(filter.judge(&tagged(1)), DeviceVerdict::Apply);
        assert_eq!(filter.judge(&tagged(2)), DeviceVerdict::ResetThenApply);
        assert_eq!(filter.judge(&tagged(1)), DeviceVerdict::Drop);
        assert_eq!(filter.judge(&tagged(2)), DeviceVerdict::Apply);
        let untagged = BindingRecord::new(BindingKind::Bind, vk::ObjectType::BUFFER, 1, 0, 1);
        assert_eq!(filter.judge(&untagged), DeviceVerdict::Apply);
    }

    #[test]
    fn generations_wrap_past_255() {
        let mut filter = DeviceFilter::default();
        filter.judge(&tagged(255));
        assert_eq!(filter.judge(&tagged(256)), DeviceVerdict::ResetThenApply);
        assert_eq!(generation_tag(256), 1);
        assert_eq!(filter.judge(&tagged(255)), DeviceVerdict::Drop);
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
