//! The layer's only output channel: single lines on stderr with a fixed prefix, so QA can grep them.

/// Prefix of every line the layer prints.
pub(crate) const PREFIX: &str = "[gpu_crash_drill]";

/// Prints one line to stderr. Never panics (a closed stderr is ignored).
pub(crate) fn log_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{PREFIX} {line}");
}
