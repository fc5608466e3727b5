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
