//! A per-device thread that must end before its device goes: a stop flag it polls, and a join that
//! is bounded (a thread stuck in a driver call is let go rather than freezing the game's teardown;
//! it holds its own clone of the device, so the device outlives it either way).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The thread's side: whether it is asked to stop.
#[derive(Clone)]
pub(crate) struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// True once the owner asked the thread to stop.
    pub(crate) fn is_set(&self) -> bool {
        // Acquire: pairs with the Release in `WatchThread::drop`.
        self.0.load(Ordering::Acquire)
    }
}

/// Owns one such thread; dropping it stops the thread and joins it, at most [`JOIN_BOUND`].
pub(crate) struct WatchThread {
    stop: StopFlag,
    finished: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Longest a drop waits for the thread: its longest driver wait (a fault query's timeout) and a
/// report being written, not an upload (which goes on detached, bounded by the upload timeout).
pub(crate) const JOIN_BOUND: Duration = Duration::from_secs(1);

impl WatchThread {
    /// Starts `body` on a thread named `name`; `body` returns once its [`StopFlag`] is set.
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(StopFlag) + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = StopFlag(Arc::new(AtomicBool::new(false)));
        let finished = Arc::new((Mutex::new(false), Condvar::new()));
        let thread = {
            let stop = stop.clone();
            let finished = finished.clone();
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || {
                    /// Says "finished" however the body ends (a panic unwinds through it too).
                    struct Finished(Arc<(Mutex<bool>, Condvar)>);
                    impl Drop for Finished {
                        fn drop(&mut self) {
                            *self.0 .0.lock().unwrap_or_else(|p| p.into_inner()) = true;
                            self.0 .1.notify_all();
                        }
                    }
                    let _finished = Finished(finished);
                    body(stop);
                })?
        };
        Ok(Self {
            stop,
            finished,
            thread: Some(thread),
        })
    }
}

impl Drop for WatchThread {
    fn drop(&mut self) {
        // Release: the thread's next Acquire load in `StopFlag::is_set` sees it.
        self.stop.0.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return;
        };
        // The thread itself may drop the last handle of what owns it: it is ending anyway.
        if thread.thread().id() == std::thread::current().id() {
            return;
        }
        thread.thread().unpark();
        let (done, changed) = &*self.finished;
        let (done, _) = changed
            .wait_timeout_while(
                done.lock().unwrap_or_else(|p| p.into_inner()),
                JOIN_BOUND,
                |d| !*d,
            )
            .unwrap_or_else(|p| p.into_inner());
        if *done {
            let _ = thread.join();
        } else {
            tracing::warn!(
                "GPU crash reporter: {} did not stop within {} ms; it ends on its own (it holds \
                 its own handle of the device)",
                thread.thread().name().unwrap_or("a watch thread"),
                JOIN_BOUND.as_millis()
            );
        }
    }
}
