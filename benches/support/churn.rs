//! The churn `indexer_fold` times and `fold_instructions` counts: 1,000 buffers created and destroyed
//! a frame, labelled by kind ("mesh vertex buffer", ...) and one in ten by a label of its own (a
//! per-chunk name). Shared by `#[path]` so both replay the same records.

use std::time::Instant;

use ash::vk;
use gpu_crash_core::test_support::{
    AddressIndex, BindingKind, BindingRecord, BindingRing, RingConsumer,
};

/// Buffers created (and, a frame later, destroyed) per frame.
pub const PER_FRAME: u64 = 1_000;

/// Labels a game gives buffers by kind; they repeat every frame.
const KINDS: [&str; 6] = [
    "mesh vertex buffer",
    "mesh index buffer",
    "frame_uniforms_0",
    "instance data",
    "skin joints",
    "particle storage",
];

/// The name of the frame's `i`-th buffer: by kind, one in ten a label of its own.
pub fn name(buffer: u64) -> String {
    if buffer.is_multiple_of(10) {
        format!("chunk_{buffer:08}_lod0")
    } else {
        KINDS[(buffer % KINDS.len() as u64) as usize].to_owned()
    }
}

fn buffer_record(kind: BindingKind, buffer: u64, frame: u64) -> BindingRecord {
    let r = BindingRecord::new(
        kind,
        vk::ObjectType::BUFFER,
        0x5a00_0000_0000 + buffer,
        // 4 KiB buffers in 64 KiB strides, as suballocated buffers look.
        0x1_0000_0000 + (buffer % (1 << 20)) * 0x1_0000,
        4096,
    )
    .with_frame(frame);
    match kind {
        BindingKind::Bind => r.with_name(&name(buffer)),
        BindingKind::Unbind => r,
    }
}

/// Frames replayed in a loop (their records are built once: formatting names is not the indexer's
/// work).
pub const FRAMES: u64 = 64;

/// Records of frame `frame` of the loop: its 1,000 binds, then the unbinds of the buffers bound
/// `lifetime` frames before (wrapping round the loop: for frame 0 and a lifetime of 1, its last frame).
pub fn frame_records(frame: u64, lifetime: u64) -> Vec<BindingRecord> {
    let first = frame * PER_FRAME;
    let bound = (frame + FRAMES - lifetime) % FRAMES * PER_FRAME;
    (first..first + PER_FRAME)
        .map(|b| buffer_record(BindingKind::Bind, b, frame))
        .chain((bound..bound + PER_FRAME).map(|b| buffer_record(BindingKind::Unbind, b, frame)))
        .collect()
}

/// Pushes the records of the `n`th frame of a replay of `frames` (built with buffers living
/// `lifetime` frames) into `ring`, each lap's handles moved on so every frame's buffers are new
/// objects and each unbind matches the bind of a frame before.
pub fn push_frame(ring: &BindingRing, frames: &[Vec<BindingRecord>], n: u64, lifetime: u64) {
    let (lap, frame) = (n / FRAMES, n % FRAMES);
    for record in &frames[frame as usize] {
        let mut r = *record;
        // The unbinds of a lap's first frames are of the previous lap's last buffers.
        let lap_of = match r.kind {
            BindingKind::Unbind if frame < lifetime => lap.wrapping_sub(1),
            _ => lap,
        };
        r.handle = r.handle.wrapping_add(lap_of << 32);
        let _ = ring.push(r);
    }
}

/// The indexer's prefetch distance (`fold.rs`).
const PREFETCH_AHEAD: usize = 8;

/// Drains the ring and folds it into `index` as the indexer does: the urgent thread copies the ring
/// aside (`staged`, its allocation kept from drain to drain, as the indexer's swaps keep theirs),
/// then the background thread folds the copies in order, each record prefetching what the record
/// `PREFETCH_AHEAD` later will touch (`drain.rs`, besides locking, uncontended here, the fold's
/// chunks of 256 and its per-record device check). Both threads' work an event, in one function
/// that callgrind's `--toggle-collect='*fold_drains*'` counts alone (not inlined).
#[inline(never)]
pub fn fold_drains(
    consumer: &mut RingConsumer,
    index: &mut AddressIndex,
    staged: &mut Vec<BindingRecord>,
    now: Instant,
) {
    staged.clear();
    consumer.copy_into(usize::MAX, staged);
    for (i, record) in staged.iter().enumerate() {
        if let Some(ahead) = staged.get(i + PREFETCH_AHEAD) {
            index.prefetch(ahead);
        }
        index.apply(record, now);
    }
}
