//! The indexer thread's cost per binding event: draining the ring and folding what it drained into
//! the [`AddressIndex`] (names interned included), as `src/index/indexer.rs` does once a quarter of
//! the ring waits (about 4 frames of this churn; it drained every frame before).
//!
//! `cargo bench --bench indexer_fold`; results land under `target/criterion/indexer_fold/<name>`.
//!
//! Workload: the `frame_overhead` example's churn, 1,000 buffers created and destroyed a frame. A
//! frame's ring holds the binds of 1,000 new buffers and the unbinds of the previous frame's 1,000
//! (wgpu destroys late), so about 1,000 buffers are live. Names are what a game labels buffers by:
//! a few kind names over and over ("mesh vertex buffer", ...), and every tenth buffer a name of its
//! own (a per-chunk label). Unbinds carry no name (the driver names the object only at bind).
//!
//! Each iteration pushes 1 or 4 frames' records (2,000 each) into a default-sized ring (not timed),
//! then times the drain and fold (`support/churn.rs`'s `fold_drains`): the ring copied aside, as the
//! indexer's urgent thread does, then each record folded with `AddressIndex::prefetch` 8 records
//! ahead and `AddressIndex::apply`, as its background thread does (besides locking, uncontended
//! here, and its per-record device check).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gpu_crash_core::test_support::{AddressIndex, IndexSettings};
use gpu_crash_core::test_support::{BindingRecord, BindingRing};

#[path = "support/churn.rs"]
mod churn;
use churn::{fold_drains, frame_records, push_frame, FRAMES, PER_FRAME};

/// The plugin's default `binding_ring_capacity`.
const RING: usize = 32_768;

/// Times draining and folding `frames_per_drain` frames at a time (each iteration one drain), as the
/// indexer's background thread does: it wakes once a quarter of the ring waits (8,192 records, about 4
/// frames of this churn), and the bench of one frame per drain is what it did before. `frames` were
/// built with buffers living `lifetime` frames.
fn drain_every(
    b: &mut criterion::Bencher<'_>,
    frames: &[Vec<BindingRecord>],
    frames_per_drain: u64,
    lifetime: u64,
) {
    b.iter_custom(|iters| {
        let (ring, mut consumer) = BindingRing::with_capacity(RING);
        let mut index = AddressIndex::new(IndexSettings::default());
        let mut staged = Vec::new();
        let mut total = Duration::ZERO;
        for it in 0..iters {
            for f in 0..frames_per_drain {
                push_frame(&ring, frames, it * frames_per_drain + f, lifetime);
            }
            let start = Instant::now();
            fold_drains(&mut consumer, &mut index, &mut staged, start);
            total += start.elapsed();
        }
        std::hint::black_box(index.stats());
        total
    })
}

fn indexer_fold(c: &mut Criterion) {
    let mut group = c.benchmark_group("indexer_fold");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(2 * PER_FRAME));
    // Replayed with handles moved on each lap, so every frame's buffers are new objects and each
    // unbind matches the bind of a frame before.
    let frames: Vec<Vec<BindingRecord>> = (0..FRAMES).map(|f| frame_records(f, 1)).collect();
    group.bench_function("churn_1000_buffers_a_frame", |b| {
        drain_every(b, &frames, 1, 1)
    });
    // What the background thread drains now: a quarter ring, about 4 frames of this churn.
    group.throughput(Throughput::Elements(4 * 2 * PER_FRAME));
    group.bench_function("churn_1000_buffers_4_frames_a_drain", |b| {
        drain_every(b, &frames, 4, 1)
    });
    // The control: the same drains, but buffers live 5 frames, so no bind meets its unbind in one.
    let frames_5: Vec<Vec<BindingRecord>> = (0..FRAMES).map(|f| frame_records(f, 5)).collect();
    group.bench_function("churn_1000_buffers_4_frames_a_drain_living_5", |b| {
        drain_every(b, &frames_5, 4, 5)
    });
    group.finish();
}

criterion_group!(benches, indexer_fold);
criterion_main!(benches);
