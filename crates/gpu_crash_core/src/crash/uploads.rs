//! Crash-path work (loss reports, uploads) that runs on threads of its own, and waiting for it from
//! any thread.
//!
//! The loss handler (main thread) starts the report and returns; the app's exit, the render-error
//! hook of an app that quits, and the watchdog before `OnHang::Exit` all wait for all of it.
//! A count, not join handles: two threads that wait at once (the main thread quitting on the loss,
//! the watchdog exiting after the hang it reported) must both see the upload end, or the one that
//! ends the process first cuts it off.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How many uploads run, and a condition variable signalled when one ends.
#[derive(Clone, Default)]
pub(crate) struct RunningUploads(Arc<(Mutex<usize>, Condvar)>);

impl RunningUploads {
    /// Runs `work` on a new thread named `name`, counted until it returns (or panics).
    pub(crate) fn spawn(
        &self,
        name: &str,
        work: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<()> {
        *self.count() += 1;
        let finished = Finished(self.clone());
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let _finished = finished;
                work();
            })
            .map(drop)
        // A thread that could not start drops `finished` with the closure: the count goes back.
    }

    /// Waits until no upload runs, for at most `limit`. Returns whether all ended.
    pub(crate) fn wait(&self, limit: Duration) -> bool {
        let (count, ended) = &*self.0;
        let guard = count.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = ended
            .wait_timeout_while(guard, limit, |running| *running > 0)
            .unwrap_or_else(|p| p.into_inner());
        *guard == 0
    }

    fn count(&self) -> std::sync::MutexGuard<'_, usize> {
        self.0 .0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Counts an upload as ended when dropped (at the end of its thread, or with a closure whose thread
/// never started).
struct Finished(RunningUploads);

impl Drop for Finished {
    fn drop(&mut self) {
        let mut running = self.0.count();
        *running = running.saturating_sub(1);
        self.0 .0 .1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn every_waiter_sees_the_upload_end() {
        let uploads = RunningUploads::default();
        uploads
            .spawn("test", || std::thread::sleep(Duration::from_millis(200)))
            .unwrap();
        let other = uploads.clone();
        let waiter = std::thread::spawn(move || other.wait(Duration::from_secs(5)));
        let started = Instant::now();
        assert!(uploads.wait(Duration::from_secs(5)));
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert!(waiter.join().unwrap(), "the second waiter also saw it end");
    }

    #[test]
    fn a_wait_is_bounded_and_a_panicking_upload_still_ends() {
        let uploads = RunningUploads::default();
        uploads
            .spawn("test", || std::thread::sleep(Duration::from_secs(2)))
            .unwrap();
        assert!(!uploads.wait(Duration::from_millis(50)), "bounded");
        let panicking = RunningUploads::default();
        panicking.spawn("test", || panic!("upload failed")).unwrap();
        assert!(panicking.wait(Duration::from_secs(5)));
    }
}
