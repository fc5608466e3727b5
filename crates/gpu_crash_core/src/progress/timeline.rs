//! What the render thread submitted (a ledger of frames) next to what the GPU finished (the marker
//! buffer): the one source of truth for the hang watchdog and for GPU breadcrumbs.
//!
//! The render thread writes the ledger once per frame and per breadcrumb (a short lock it holds only
//! inside our own systems); the watchdog reads markers with plain loads and the ledger under the
//! same lock, so neither waits for wgpu.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::breadcrumb::{BreadcrumbState, FrameBreadcrumbs, GpuBreadcrumb};
use super::hang_rule::Pending;
use crate::vulkan::exact::ExactLayer;
use crate::vulkan::markers::{marker_word, MarkerBuffer, COMPLETED_WORD, MARKERS_PER_FRAME};

/// Frames the ledger remembers (besides the oldest pending one, which it always keeps).
const LEDGER_FRAMES: usize = 256;
/// Frames still in flight whose breadcrumbs a report lists.
const REPORTED_FRAMES: usize = 3;

/// One breadcrumb: a labelled region of a frame's GPU work, with a begun and a finished marker.
#[derive(Clone, Debug)]
pub(crate) struct Breadcrumb {
    /// What ran, e.g. `Core3d MainPass` or a game's own label.
    pub label: &'static str,
    /// The camera it ran for, if any.
    pub camera: Option<Arc<str>>,
    /// Index of its "begun" marker in the frame's slot ("finished" is the next one).
    pub marker: usize,
    /// Set once the "finished" marker was recorded.
    pub closed: bool,
}

/// One frame of the ledger.
#[derive(Clone, Debug)]
pub(crate) struct FrameEntry {
    pub frame: u64,
    /// Ring position when the frame's rendering began (before its first submit).
    pub ring_before: u64,
    /// Ring position right before the frame's completion marker was submitted (after its last
    /// submit): every binding event after it came after all of the frame's work was submitted.
    pub ring_after: Option<u64>,
    pub submitted_at: Option<Instant>,
    /// When the watchdog first saw the GPU finish it.
    pub completed_seen_at: Option<Instant>,
    pub breadcrumbs: Vec<Breadcrumb>,
    /// Breadcrumbs that did not fit in the frame's marker slot (none recorded for them).
    pub breadcrumbs_dropped: u32,
    /// The frame's completion marker was submitted: later work belongs to the next frame.
    ended: bool,
    /// Begun by a breadcrumb recorded after the previous frame's completion marker (e.g. a game's
    /// Cleanup-time work), before the render graph began it.
    early: bool,
}

#[derive(Default)]
struct Ledger {
    /// Frames are numbered per device, from 1.
    last_begun: u64,
    frames: VecDeque<FrameEntry>,
    /// The oldest frame that was still pending when the ledger had to forget it: a hang is measured
    /// from it, however many frames wgpu queues behind it.
    pinned: Option<FrameEntry>,
}

/// GPU progress of one device: marker memory plus the ledger of submitted frames.
pub(crate) struct GpuTimeline {
    markers: Arc<MarkerBuffer>,
    ledger: Mutex<Ledger>,
    /// The last frame whose completion marker was submitted (0: none yet).
    last_submitted: AtomicU64,
    /// Command buffers of our own recorded for breadcrumbs and frame ends, since the device started.
    marker_command_buffers: AtomicU64,
    /// Exact mode's layer on this device, where it sits there: which draw the GPU was in.
    exact: Option<ExactLayer>,
}

impl GpuTimeline {
    pub(crate) fn new(markers: Arc<MarkerBuffer>) -> Self {
        Self {
            markers,
            ledger: Mutex::default(),
            last_submitted: AtomicU64::new(0),
            marker_command_buffers: AtomicU64::new(0),
            exact: None,
        }
    }

    /// With exact mode's layer on the device (see [`ExactLayer`]).
    pub(crate) fn with_exact(mut self, exact: Option<ExactLayer>) -> Self {
        self.exact = exact;
        self
    }

    /// What exact mode's layer says the GPU finished (never waits); `None` without it.
    pub(crate) fn exact_progress(&self) -> Option<crate::pipelines::ExactDraws> {
        self.exact.as_ref()?.progress()
    }

    pub(crate) fn markers(&self) -> &MarkerBuffer {
        &self.markers
    }

    /// Counts one command buffer of ours (render thread).
    pub(crate) fn count_marker_command_buffer(&self) {
        // Relaxed: a statistic; nothing is ordered by it.
        self.marker_command_buffers.fetch_add(1, Ordering::Relaxed);
    }

    /// Command buffers of ours recorded so far on this device.
    pub(crate) fn marker_command_buffers(&self) -> u64 {
        // Relaxed: a statistic, read for benchmarks.
        self.marker_command_buffers.load(Ordering::Relaxed)
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last frame whose completion marker was submitted.
    pub(crate) fn last_submitted(&self) -> u64 {
        // Acquire: pairs with the Release in `current_frame_submitting`, so the ledger entry is there.
        self.last_submitted.load(Ordering::Acquire)
    }

    /// The last frame the GPU finished, as it wrote it (widened from 32 bits against the last
    /// submitted frame; frames start at 1, so 0 means none).
    pub(crate) fn completed(&self) -> u64 {
        widen(self.markers.read(COMPLETED_WORD), self.last_submitted())
    }

    /// Render thread, before the frame's first submit: starts the next frame's entry and returns its
    /// number (the entry a breadcrumb already began after the previous frame's end, if there is one).
    pub(crate) fn begin_frame(&self, ring_position: u64) -> u64 {
        let completed = self.completed();
        let mut ledger = self.ledger();
        if let Some(entry) = ledger.frames.back_mut().filter(|e| e.early && !e.ended) {
            entry.early = false;
            return entry.frame;
        }
        Self::push_frame(&mut ledger, ring_position, completed, false)
    }

    /// Render thread, once the frame's completion marker is recorded: whatever is submitted later
    /// (a game's Cleanup-time work) is covered by the next frame's marker, and its breadcrumbs go
    /// there.
    pub(crate) fn end_frame(&self) {
        if let Some(entry) = self.ledger().frames.back_mut() {
            entry.ended = true;
        }
    }

    fn push_frame(ledger: &mut Ledger, ring_position: u64, completed: u64, early: bool) -> u64 {
        ledger.last_begun += 1;
        let frame = ledger.last_begun;
        if ledger.frames.len() >= LEDGER_FRAMES {
            if let Some(old) = ledger.frames.pop_front() {
                let pinned_is_stale = ledger.pinned.as_ref().is_none_or(|p| p.frame <= completed);
                if old.frame > completed && pinned_is_stale {
                    ledger.pinned = Some(old);
                }
            }
        }
        ledger.frames.push_back(FrameEntry {
            frame,
            ring_before: ring_position,
            ring_after: None,
            submitted_at: None,
            completed_seen_at: None,
            breadcrumbs: Vec::new(),
            breadcrumbs_dropped: 0,
            ended: false,
            early,
        });
        frame
    }

    /// Render thread: opens a breadcrumb in the current frame and returns its marker word, or `None`
    /// when the frame's markers are used up (counted, so the report says the list ran out).
    pub(crate) fn open_breadcrumb(
        &self,
        label: &'static str,
        camera: Option<Arc<str>>,
    ) -> Option<(u64, usize)> {
        let completed = self.completed();
        let mut ledger = self.ledger();
        let last = ledger.frames.back()?;
        if last.ended {
            // After the frame's completion marker: the next frame's marker covers this work.
            let ring_before = last.ring_after.unwrap_or(last.ring_before);
            Self::push_frame(&mut ledger, ring_before, completed, true);
        }
        let entry = ledger.frames.back_mut()?;
        let marker = entry.breadcrumbs.len() * 2;
        if marker + 1 >= MARKERS_PER_FRAME {
            entry.breadcrumbs_dropped += 1;
            return None;
        }
        entry.breadcrumbs.push(Breadcrumb {
            label,
            camera,
            marker,
            closed: false,
        });
        Some((entry.frame, marker_word(entry.frame, marker)))
    }

    /// Render thread: the word of the "finished" marker of the innermost open breadcrumb `label`.
    pub(crate) fn close_breadcrumb(&self, label: &'static str) -> Option<(u64, usize)> {
        let mut ledger = self.ledger();
        let entry = ledger.frames.back_mut()?;
        let frame = entry.frame;
        let crumb = entry
            .breadcrumbs
            .iter_mut()
            .rev()
            .find(|b| !b.closed && b.label == label)?;
        crumb.closed = true;
        Some((frame, marker_word(frame, crumb.marker + 1)))
    }

    /// Render thread, right before submitting the completion marker of the current frame.
    pub(crate) fn current_frame(&self) -> Option<u64> {
        self.ledger().frames.back().map(|e| e.frame)
    }

    /// Render thread, right before the current frame's work is submitted: from then on it is
    /// pending. Only the first call of a frame counts (the frame's first submit), so callers at each
    /// possible first submit need not check.
    pub(crate) fn current_frame_submitting(&self, ring_position: u64, at: Instant) {
        let frame = {
            let mut ledger = self.ledger();
            let Some(entry) = ledger.frames.back_mut() else {
                return;
            };
            if entry.frame <= self.last_submitted() {
                return;
            }
            entry.ring_after = Some(ring_position);
            entry.submitted_at = Some(at);
            entry.frame
        };
        // Release: the entry above is complete before the watchdog can see the frame as submitted.
        self.last_submitted.fetch_max(frame, Ordering::Release);
    }

    /// Watchdog: the oldest pending frame, after noting completion times.
    pub(crate) fn pending(&self, now: Instant) -> (u64, Option<Pending>) {
        let submitted = self.last_submitted();
        let completed = self.completed();
        let mut ledger = self.ledger();
        for entry in ledger.frames.iter_mut().rev() {
            if entry.frame > completed {
                continue;
            }
            if entry.completed_seen_at.is_some() {
                break;
            }
            entry.completed_seen_at = Some(now);
        }
        if completed >= submitted {
            return (completed, None);
        }
        let oldest = completed + 1;
        let submitted_at = Self::entry(&ledger, oldest)
            .and_then(|e| e.submitted_at)
            .or_else(|| {
                // Forgotten (more than the ledger's depth queued behind a hang): the earliest
                // submission the ledger still knows is the best bound we have.
                ledger.frames.iter().find_map(|e| e.submitted_at)
            });
        let pending = submitted_at.map(|submitted_at| Pending {
            frame: oldest,
            submitted_at,
            count: submitted - completed,
        });
        (completed, pending)
    }

    fn entry(ledger: &Ledger, frame: u64) -> Option<&FrameEntry> {
        ledger
            .frames
            .iter()
            .rev()
            .find(|e| e.frame == frame)
            .or(ledger.pinned.as_ref().filter(|p| p.frame == frame))
    }

    /// A copy of frame `frame`'s entry, if the ledger still has it.
    pub(crate) fn frame(&self, frame: u64) -> Option<FrameEntry> {
        Self::entry(&self.ledger(), frame).cloned()
    }

    /// The frames for a report's timeline, oldest first.
    pub(crate) fn recent_frames(&self, count: usize) -> Vec<FrameEntry> {
        let ledger = self.ledger();
        let skip = ledger.frames.len().saturating_sub(count);
        ledger.frames.iter().skip(skip).cloned().collect()
    }

    /// The breadcrumbs of the oldest frames still in flight, as the GPU left them.
    pub(crate) fn breadcrumbs_in_flight(&self) -> Vec<FrameBreadcrumbs> {
        let completed = self.completed();
        let submitted = self.last_submitted();
        let ledger = self.ledger();
        (completed + 1..=submitted)
            .take(REPORTED_FRAMES)
            .filter_map(|frame| Self::entry(&ledger, frame))
            .map(|entry| FrameBreadcrumbs {
                frame: entry.frame,
                dropped: entry.breadcrumbs_dropped,
                breadcrumbs: entry
                    .breadcrumbs
                    .iter()
                    .map(|b| {
                        let reached = |marker| {
                            self.markers.read(marker_word(entry.frame, marker))
                                == entry.frame as u32
                        };
                        let state = match (reached(b.marker), reached(b.marker + 1)) {
                            (_, true) => BreadcrumbState::Completed,
                            (true, false) => BreadcrumbState::Started,
                            (false, false) => BreadcrumbState::NotStarted,
                        };
                        GpuBreadcrumb {
                            label: b.label.to_owned(),
                            camera: b.camera.as_deref().map(str::to_owned),
                            state,
                        }
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The frame number whose low 32 bits the GPU wrote, next to the last submitted frame. The GPU may
/// finish a frame before the render thread records it as submitted: that counts as `submitted`.
fn widen(written: u32, submitted: u64) -> u64 {
    let behind = (submitted as u32).wrapping_sub(written);
    if behind > u32::MAX / 2 {
        submitted // written is ahead of what the ledger calls submitted
    } else {
        submitted.saturating_sub(u64::from(behind))
    }
}

#[cfg(test)]
mod tests {
    use super::widen;

    #[test]
    fn widening_handles_none_behind_ahead_and_wrap() {
        assert_eq!(widen(0, 0), 0);
        assert_eq!(widen(0, 5), 0, "nothing written yet");
        assert_eq!(widen(3, 5), 3);
        assert_eq!(
            widen(6, 5),
            5,
            "the GPU finished before the ledger saw the submit"
        );
        let big = (1u64 << 32) + 7;
        assert_eq!(widen(5, big), big - 2, "across the 32-bit wrap");
        assert_eq!(widen(u32::MAX, big), (1u64 << 32) - 1);
    }
}
