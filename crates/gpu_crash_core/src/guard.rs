//! Every entry into the crash path (Bevy's render-error handler, the watchdog, the panic hook, the
//! report and upload threads) runs through [`guarded`]: a panic in our code is logged and counted,
//! never propagated into the game, and never ends hang detection.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

/// Panics caught on the crash path in this process.
static CAUGHT: AtomicU64 = AtomicU64::new(0);

/// Runs `work`; a panic inside it is caught, logged with `what` and counted, and `None` returned.
///
/// Unwinding is asserted safe: what a panic leaves half-done is ours alone (a report not written, an
/// upload not made), and every lock the crash path shares is taken poison-tolerantly.
pub(crate) fn guarded<T>(what: &str, work: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(value) => Some(value),
        Err(payload) => {
            // Relaxed: a statistic; nothing is ordered by it.
            CAUGHT.fetch_add(1, Ordering::Relaxed);
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_owned());
            tracing::error!(
                "GPU crash reporter: a panic in its own {what} was caught and the game goes on: \
                 {message}"
            );
            None
        }
    }
}

/// Panics caught by [`guarded`] in this process so far.
pub(crate) fn caught_panics() -> u64 {
    // Relaxed: a statistic.
    CAUGHT.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_counted_and_the_caller_goes_on() {
        let before = caught_panics();
        assert_eq!(guarded("test", || 7), Some(7));
        let caught: Option<()> = guarded("test", || panic!("boom"));
        assert_eq!(caught, None);
        assert!(caught_panics() > before);
    }
}
