//! Calls into wgpu or the driver at crash time, bounded in time.

use std::time::Duration;

/// Runs `work` on its own thread and waits at most `timeout`: at crash time wgpu's locks may be
/// held by a render thread stuck on the GPU, and the report must not wait with it.
pub(crate) fn with_timeout<T: Send + 'static>(
    timeout: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("gpu-crash-query".into())
        .spawn(move || {
            let _ = send.send(work());
        })
        .ok()?;
    receive.recv_timeout(timeout).ok()
}

/// Takes `mutex` if it comes free within `wait`, polling: at crash time a lock held by the game's
/// threads for long (they may be stuck) must not hold the report back. A poisoned lock is taken.
pub(crate) fn try_lock_for<T>(
    mutex: &std::sync::Mutex<T>,
    wait: Duration,
) -> Option<std::sync::MutexGuard<'_, T>> {
    let until = deadline_after(wait);
    loop {
        match mutex.try_lock() {
            Ok(guard) => return Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// `now + wait`, saturating: a wait too long for the clock (a setting of `Duration::MAX`) is a wait
/// of about a century, never a panic.
pub(crate) fn deadline_after(wait: Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(wait)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}
