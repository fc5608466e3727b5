//! The indexer thread: the ring's single consumer, folding records into the [`AddressIndex`].
//!
//! It wakes once per frame (the plugin calls [`IndexerHandle::frame_tick`]) and also whenever the
//! ring passes half full (the callback unparks it), so a level load that binds 100,000 resources
//! within one frame is folded while it happens instead of overflowing the ring.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{AddressIndex, IndexSettings};
use crate::capture::{BindingRing, RingConsumer};

/// The index shared between the indexer thread and whoever resolves a fault.
pub type SharedIndex = Arc<Mutex<AddressIndex>>;

/// Records folded per lock of the index, so a resolver waiting for the lock waits microseconds.
const BATCH: usize = 4_096;
/// Longest sleep without a frame tick or wake-up (keeps the index fresh in a stalled app).
const IDLE_WAKE: Duration = Duration::from_millis(100);

/// Owns the indexer thread; dropping it stops the thread after a last drain.
pub struct IndexerHandle {
    ring: Arc<BindingRing>,
    index: SharedIndex,
    consumer: Arc<Mutex<RingConsumer>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl IndexerHandle {
    /// Creates the ring, the index and the thread that connects them.
    pub fn spawn(ring_capacity: usize, settings: IndexSettings) -> std::io::Result<Self> {
        let (ring, consumer) = BindingRing::with_capacity(ring_capacity);
        let index: SharedIndex = Arc::new(Mutex::new(AddressIndex::new(settings)));
        let consumer = Arc::new(Mutex::new(consumer));
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

fn drain_into(consumer: &Mutex<RingConsumer>, index: &SharedIndex) {
    let mut consumer = consumer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        batch.clear();
        consumer.drain(BATCH, |record| batch.push(record));
        if batch.is_empty() {
            break;
        }
        let now = Instant::now();
        let mut index = lock(index);
        for record in &batch {
            index.apply(record, now);
        }
    }
}
