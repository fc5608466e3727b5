//! The hang watchdog: a thread that reads GPU progress from marker memory and reports a stall once it
//! has lasted `hang_timeout`. It never calls wgpu or Vulkan: on a real fault the render thread is
//! stuck inside wgpu holding its locks, and the watchdog must not wait behind it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::session::{DeviceSession, DeviceSessions};
use crate::guard::guarded;
use crate::progress::{HangRule, Stall};

/// Owns the watchdog thread; dropping it stops the thread.
pub(crate) struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts watching whichever device is current, every `tick`. `on_stall` runs on the watchdog
    /// thread, once per stall; the watchdog keeps running after it (a later stall is judged afresh).
    /// `on_suspect(generation, true)` runs when device `generation`'s pending work has made no
    /// progress for [`suspect_after`] of `hang_timeout` (a fault may have happened: the index holds
    /// what it would forget), `(generation, false)` when the GPU progresses again or a new device
    /// comes; a lost device stays suspect. Both run on the watchdog thread, inside [`guarded`], as
    /// does `on_stall`: a panic in either is logged and the watchdog goes on.
    pub(crate) fn spawn(
        tick: Duration,
        hang_timeout: Duration,
        sessions: DeviceSessions,
        mut on_stall: impl FnMut(&Arc<DeviceSession>, Stall) + Send + 'static,
        mut on_suspect: impl FnMut(u32, bool) + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("gpu-crash-watchdog".into())
                .spawn(move || {
                    let mut watched: Option<(u32, HangRule)> = None;
                    // The device generation the index holds unbinds for, if any.
                    let mut suspected: Option<u32> = None;
                    let mut last_tick = Instant::now();
                    // Acquire: pairs with the Release in Drop.
                    while !stop.load(Ordering::Acquire) {
                        std::thread::park_timeout(tick);
                        let now = Instant::now();
                        let stopped =
                            now.saturating_duration_since(last_tick) > stopped_after(tick);
                        last_tick = now;
                        let Some(session) = sessions.current() else {
                            continue;
                        };
                        let Some(timeline) = &session.timeline else {
                            continue;
                        };
                        if let Some(old) = suspected.filter(|g| *g != session.generation) {
                            suspected = None;
                            guarded("watchdog", || on_suspect(old, false));
                        }
                        if session.is_lost() {
                            continue; // the loss report covers it; a new device gets a new rule
                        }
                        let rule = match &mut watched {
                            Some((generation, rule)) if *generation == session.generation => rule,
                            _ => {
                                &mut watched
                                    .insert((session.generation, HangRule::new(hang_timeout)))
                                    .1
                            }
                        };
                        if stopped {
                            rule.resume(now);
                        }
                        let (completed, pending) = timeline.pending(now);
                        let stall = rule.observe(now, completed, pending);
                        let suspect = rule
                            .stalled_for(now, pending)
                            .is_some_and(|d| d >= suspect_after(hang_timeout));
                        if suspect != suspected.is_some() {
                            suspected = suspect.then_some(session.generation);
                            guarded("watchdog", || on_suspect(session.generation, suspect));
                        }
                        if let Some(stall) = stall {
                            if !stop.load(Ordering::Acquire) {
                                guarded("watchdog", || on_stall(&session, stall));
                            }
                        }
                    }
                })?
        };
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

/// Pending work without progress this long may be a fault: a quarter of `hang_timeout` (1.25 s at
/// the default), past any healthy frame, early enough that a game's teardown while the GPU is hung
/// (a level unloaded, wgpu destroying everything after the loss) finds the index holding.
pub(crate) fn suspect_after(hang_timeout: Duration) -> Duration {
    hang_timeout / 4
}

/// A tick this much later than its period means the process was stopped (a debugger, SIGSTOP, a
/// machine that slept with the game open), not that the GPU was slow: far beyond any scheduling delay
/// of a loaded machine, and well below a hang timeout (the tick is a twentieth of it).
fn stopped_after(tick: Duration) -> Duration {
    (tick * 8).max(Duration::from_secs(1))
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Release: the thread's next Acquire load sees it and exits.
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
