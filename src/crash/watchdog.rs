//! The hang watchdog: a thread that reads GPU progress from marker memory and reports a stall once it
//! has lasted `hang_timeout`. It never calls wgpu or Vulkan: on a real fault the render thread is
//! stuck inside wgpu holding its locks, and the watchdog must not wait behind it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::session::{DeviceSession, DeviceSessions};
use crate::progress::{HangRule, Stall};

/// Owns the watchdog thread; dropping it stops the thread.
pub(crate) struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts watching whichever device is current, every `tick`. `on_stall` runs on the watchdog
    /// thread, once per stall; the watchdog keeps running after it (a later stall is judged afresh).
    pub(crate) fn spawn(
        tick: Duration,
        hang_timeout: Duration,
        sessions: DeviceSessions,
        mut on_stall: impl FnMut(&Arc<DeviceSession>, Stall) + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("gpu-crash-watchdog".into())
                .spawn(move || {
                    let mut watched: Option<(u32, HangRule)> = None;
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
                        if let Some(stall) = rule.observe(now, completed, pending) {
                            if !stop.load(Ordering::Acquire) {
                                on_stall(&session, stall);
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
