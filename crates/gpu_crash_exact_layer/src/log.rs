//! The layer's only output channel: single lines on stderr with a fixed prefix.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Prefix of every line the layer prints.
pub(crate) const PREFIX: &str = "[gpu_crash_exact]";

/// Prints one line to stderr. Never panics (a closed stderr is ignored).
pub(crate) fn log_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{PREFIX} {line}");
}

/// Runs a hook body, turning a panic into `fallback` and one log line instead of unwinding into C.
pub(crate) fn guard<R>(what: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            log_line(&format!(
                "internal error in {what}; the call was not completed"
            ));
            fallback
        }
    }
}
