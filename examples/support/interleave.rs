//! Blocks of frames alternating two states inside one process (A, B, A, B, ...): a cost measured as
//! the ratio of the two states' frame time and CPU time. On a host whose processes fall into fast and
//! slow modes (the NVIDIA hosts), blocks of one process share its mode, so the ratio's spread is far
//! smaller than between processes.

use std::time::{Duration, Instant};

use super::frame_timing::{median, thread_cpu_times};

/// Frames after a switch that are not timed: work queued in one state (a buffer destroyed, an event
/// in flight) is finished a frame or two later, in the next state.
const SWITCH_SETTLE_FRAMES: usize = 2;

/// The bookkeeping: call [`Self::frame_started`] at the start of every frame.
pub struct BlockInterleave {
    block: usize,
    warmup: usize,
    /// Timed frames wanted (both states together).
    frames: usize,
    last: Option<Instant>,
    /// Frames started so far (warm-up included).
    started: usize,
    /// Per block: its frame times (not the first after a switch) and the process CPU time over it.
    /// Even blocks are state A, odd ones B.
    blocks: Vec<(Vec<Duration>, f64)>,
    cpu_mark: f64,
}

/// What the frame starting now should do.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing new: warm-up, or inside a block.
    Go,
    /// A block starts: switch to state A (`true`) or B (`false`).
    Switch { a: bool },
    /// Every block is timed: print the summary and exit.
    Done,
}

/// The two states compared, over whole block pairs.
pub struct InterleaveSummary {
    pub block: usize,
    pub pairs: usize,
    /// A's mean frame over B's.
    pub ratio_mean: f64,
    /// The median of each pair's A / B mean frame.
    pub ratio_pairs_median: f64,
    /// A's process CPU over B's.
    pub ratio_cpu: f64,
    pub a_mean_us: f64,
    pub b_mean_us: f64,
    pub a_cpu_us_per_frame: f64,
    pub b_cpu_us_per_frame: f64,
}

impl BlockInterleave {
    pub fn new(block: usize, warmup: usize, frames: usize) -> Self {
        Self {
            block,
            warmup,
            frames,
            last: None,
            started: 0,
            blocks: Vec::new(),
            cpu_mark: 0.0,
        }
    }

    pub fn frame_started(&mut self, now: Instant) -> Step {
        let previous = self.last.replace(now);
        let frame = self.started; // index of the frame starting now
        self.started += 1;
        if frame < self.warmup {
            return Step::Go;
        }
        let timed = frame - self.warmup; // this frame's index among measured frames
                                         // The frame that just ended (index timed - 1) belongs to the last block.
        if timed > 0 && (timed - 1) % self.block >= SWITCH_SETTLE_FRAMES {
            if let (Some(previous), Some(block)) = (previous, self.blocks.last_mut()) {
                block.0.push(now - previous);
            }
        }
        if !timed.is_multiple_of(self.block) {
            return Step::Go;
        }
        let cpu = process_cpu_us();
        let since = cpu - self.cpu_mark;
        self.cpu_mark = cpu;
        if let Some(block) = self.blocks.last_mut() {
            block.1 = since;
        }
        if timed >= self.frames {
            return Step::Done;
        }
        let a = self.blocks.len().is_multiple_of(2);
        self.blocks.push((Vec::new(), 0.0));
        Step::Switch { a }
    }

    pub fn summary(&self) -> InterleaveSummary {
        let mean_us = |times: &[Duration]| {
            times.iter().map(|d| d.as_secs_f64() * 1e6).sum::<f64>() / times.len().max(1) as f64
        };
        let (mut a, mut b, mut a_cpu, mut b_cpu) = (Vec::new(), Vec::new(), 0.0, 0.0);
        let mut pair_ratios = Vec::new();
        for pair in self.blocks.chunks_exact(2) {
            let ((a_times, a_block_cpu), (b_times, b_block_cpu)) = (&pair[0], &pair[1]);
            pair_ratios.push(mean_us(a_times) / mean_us(b_times));
            a.extend_from_slice(a_times);
            b.extend_from_slice(b_times);
            a_cpu += a_block_cpu;
            b_cpu += b_block_cpu;
        }
        let pairs = pair_ratios.len();
        let per_frame = (pairs * self.block).max(1) as f64;
        InterleaveSummary {
            block: self.block,
            pairs,
            ratio_mean: mean_us(&a) / mean_us(&b),
            ratio_pairs_median: median(&pair_ratios),
            ratio_cpu: a_cpu / b_cpu,
            a_mean_us: mean_us(&a),
            b_mean_us: mean_us(&b),
            a_cpu_us_per_frame: a_cpu / per_frame,
            b_cpu_us_per_frame: b_cpu / per_frame,
        }
    }
}

/// The process's CPU time in microseconds, summed over its live threads (ns precision).
fn process_cpu_us() -> f64 {
    thread_cpu_times().iter().map(|t| t.ns() as f64 / 1e3).sum()
}
