//! The one hang rule: submitted work the GPU has not completed for `hang_timeout`.
//!
//! Pure state, fed by the watchdog with what the GPU wrote (the last completed frame) and what the
//! render thread submitted, so it holds whether or not the app submits, polls or renders: no pending
//! work is never a hang, however long nothing is submitted.

use std::time::{Duration, Instant};

/// Work the GPU has not finished, as the watchdog sees it on one tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    /// Oldest frame submitted and not completed.
    pub frame: u64,
    /// When it was submitted.
    pub submitted_at: Instant,
    /// Frames submitted and not completed.
    pub count: u64,
}

/// A stall long enough to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stall {
    /// The frame the GPU is stuck in.
    pub frame: u64,
    /// Since when no progress was made on it (its submission, or the GPU's last progress if later).
    pub since: Instant,
    /// Frames submitted and not completed.
    pub pending: u64,
}

/// Remembers progress between ticks and reports each stall once.
#[derive(Debug)]
pub(crate) struct HangRule {
    timeout: Duration,
    last_completed: Option<u64>,
    progress_at: Option<Instant>,
    reported: Option<u64>,
}

impl HangRule {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            last_completed: None,
            progress_at: None,
            reported: None,
        }
    }

    /// The watchdog's tick came far later than its period, because the whole process was stopped (a
    /// debugger, SIGSTOP, a machine that slept): the GPU's progress in that time went unseen, so the
    /// stall clock restarts at `now` and the rule judges afresh from there.
    pub(crate) fn resume(&mut self, now: Instant) {
        self.progress_at = Some(now);
    }

    /// How long the GPU has made no progress on pending work, as of the last [`Self::observe`] (which
    /// must have seen the same `completed`); `None` when nothing is pending.
    pub(crate) fn stalled_for(&self, now: Instant, pending: Option<Pending>) -> Option<Duration> {
        let pending = pending?;
        let since = self
            .progress_at
            .map_or(pending.submitted_at, |p| p.max(pending.submitted_at));
        Some(now.saturating_duration_since(since))
    }

    /// One watchdog tick: `completed` is the last frame the GPU finished, `pending` the oldest work
    /// not finished (if any). Returns a stall the first time it has lasted `timeout`; a stall already
    /// returned is not returned again until the GPU makes progress.
    pub(crate) fn observe(
        &mut self,
        now: Instant,
        completed: u64,
        pending: Option<Pending>,
    ) -> Option<Stall> {
        if self.last_completed != Some(completed) {
            self.last_completed = Some(completed);
            self.progress_at = Some(now);
            self.reported = None;
        }
        let pending = pending?;
        let since = match self.progress_at {
            Some(progress) => progress.max(pending.submitted_at),
            None => pending.submitted_at,
        };
        if now.saturating_duration_since(since) < self.timeout
            || self.reported == Some(pending.frame)
        {
            return None;
        }
        self.reported = Some(pending.frame);
        Some(Stall {
            frame: pending.frame,
            since,
            pending: pending.count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(5);

    fn pending(frame: u64, at: Instant) -> Option<Pending> {
        Some(Pending {
            frame,
            submitted_at: at,
            count: 1,
        })
    }

    #[test]
    fn nothing_pending_is_never_a_hang() {
        let start = Instant::now();
        let mut rule = HangRule::new(T);
        for s in 0..1000 {
            assert_eq!(rule.observe(start + T * s, 7, None), None);
        }
    }

    #[test]
    fn pending_work_without_progress_is_a_hang_once() {
        let start = Instant::now();
        let mut rule = HangRule::new(T);
        assert_eq!(rule.observe(start, 7, pending(8, start)), None);
        let late = start + T - Duration::from_millis(1);
        assert_eq!(rule.observe(late, 7, pending(8, start)), None);
        let stall = rule.observe(start + T, 7, pending(8, start)).unwrap();
        assert_eq!((stall.frame, stall.since), (8, start));
        assert_eq!(
            rule.observe(start + T * 9, 7, pending(8, start)),
            None,
            "once"
        );
    }

    #[test]
    fn a_slow_frame_that_finishes_is_not_a_hang_and_a_later_stall_is_judged_afresh() {
        let start = Instant::now();
        let mut rule = HangRule::new(T);
        rule.observe(start, 7, pending(8, start));
        assert_eq!(rule.observe(start + T / 2, 7, pending(8, start)), None);
        // Frame 8 completes after 4.9 s: no report.
        let done = start + Duration::from_millis(4_900);
        assert_eq!(rule.observe(done, 8, None), None);
        // A later real hang of frame 9 is reported, measured from its own submission.
        let at = done + Duration::from_secs(60);
        assert_eq!(rule.observe(at, 8, pending(9, at)), None);
        let stall = rule.observe(at + T, 8, pending(9, at)).unwrap();
        assert_eq!(stall.frame, 9);
        // After the GPU recovers and stalls again on frame 12, that is a new report.
        assert_eq!(rule.observe(at + T * 2, 11, pending(12, at + T * 2)), None);
        assert!(rule
            .observe(at + T * 3, 11, pending(12, at + T * 2))
            .is_some());
    }

    #[test]
    fn after_a_stopped_process_resumes_the_stall_is_judged_afresh() {
        let start = Instant::now();
        let mut rule = HangRule::new(T);
        assert_eq!(rule.observe(start, 7, pending(8, start)), None);
        // The process was stopped for three timeouts; frame 8 still reads pending on the first tick.
        let woke = start + T * 3;
        rule.resume(woke);
        assert_eq!(rule.observe(woke, 7, pending(8, start)), None);
        assert_eq!(rule.observe(woke + T / 2, 7, pending(8, start)), None);
        // A GPU that really stays stuck is still reported, a timeout after the wake.
        let stall = rule.observe(woke + T, 7, pending(8, start)).unwrap();
        assert_eq!((stall.frame, stall.since), (8, woke));
    }

    #[test]
    fn a_stall_is_measured_from_the_last_progress_when_that_is_later() {
        let start = Instant::now();
        let mut rule = HangRule::new(T);
        // Frame 9 was submitted long ago, but the GPU finished frame 8 only now.
        rule.observe(start, 7, pending(8, start));
        let progress = start + T * 2;
        assert_eq!(rule.observe(progress, 8, pending(9, start)), None);
        assert_eq!(rule.observe(progress + T / 2, 8, pending(9, start)), None);
        assert_eq!(
            rule.observe(progress + T, 8, pending(9, start))
                .unwrap()
                .since,
            progress
        );
    }
}
