//! Counts the indexer's work an event, for `valgrind --tool=callgrind`: the `indexer_fold` bench's
//! churn (`benches/support/churn.rs`), drained and folded 4 frames at a time as the
//! indexer's threads do, in one function (`churn::fold_drains`) that callgrind can count alone:
//!
//! ```sh
//! cargo build --release --example fold_instructions
//! valgrind --tool=callgrind --toggle-collect='*fold_drains*' target/release/examples/fold_instructions 100
//! ```
//!
//! Instructions an event = callgrind's "Collected" / the events printed. Counts, unlike times, do
//! not move with the machine's load, so each step of issue 35's fold work was kept or dropped by
//! its count (BENCHMARKS.md).

use std::time::Instant;

use gpu_crash_core::test_support::{AddressIndex, BindingRecord, BindingRing, IndexSettings};

#[path = "../benches/support/churn.rs"]
mod churn;
use churn::{fold_drains, frame_records, push_frame, FRAMES};

/// Frames a drain: a quarter of the default ring, as the background thread wakes.
const FRAMES_A_DRAIN: u64 = 4;

fn main() {
    let drains: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let lifetime = 1;
    let frames: Vec<Vec<BindingRecord>> = (0..FRAMES).map(|f| frame_records(f, lifetime)).collect();
    let (ring, mut consumer) = BindingRing::with_capacity(32_768);
    let mut index = AddressIndex::new(IndexSettings::default());
    let mut staged = Vec::new();
    for drain in 0..drains {
        for f in 0..FRAMES_A_DRAIN {
            push_frame(&ring, &frames, drain * FRAMES_A_DRAIN + f, lifetime);
        }
        fold_drains(&mut consumer, &mut index, &mut staged, Instant::now());
    }
    println!(
        "fold_instructions: {} events in {drains} drains of {FRAMES_A_DRAIN} frames",
        index.stats().events
    );
}
