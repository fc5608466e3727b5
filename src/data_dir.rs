//! The per-application data folder (reports, outbox), in one place.

use std::ffi::OsString;
use std::path::PathBuf;

/// `<data dir>/<application>`: `%LOCALAPPDATA%` on Windows, `~/Library/Application Support` on
/// macOS, `$XDG_DATA_HOME` or `~/.local/share` elsewhere; the temp folder when none is known.
/// `env` reads the environment (tests pass their own).
pub(crate) fn app_data_dir(env: impl Fn(&str) -> Option<OsString>, application: &str) -> PathBuf {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = var("HOME");
    let base = if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library/Application Support"))
    } else {
        var("XDG_DATA_HOME").or_else(|| home.map(|h| h.join(".local/share")))
    };
    base.unwrap_or_else(std::env::temp_dir).join(application)
}
