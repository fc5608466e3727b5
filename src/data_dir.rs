//! The per-application data folder (reports, outbox), in one place, and where reports go.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Folder of a game's reports inside its data directory.
pub const REPORTS_DIR_NAME: &str = "gpu-crash-reports";
/// Folder of a game's outbox inside its data directory.
pub const OUTBOX_DIR_NAME: &str = "gpu-crash-outbox";

/// The per-user folder that holds each game's data directory: `%LOCALAPPDATA%` on Windows,
/// `~/Library/Application Support` on macOS, `$XDG_DATA_HOME` or `~/.local/share` elsewhere; the
/// temp folder when none is known.
pub fn user_data_dir() -> PathBuf {
    user_data_dir_with(|name| std::env::var_os(name))
}

/// The data directory of the game `application` (by default its executable's name), where the
/// plugin keeps [`REPORTS_DIR_NAME`] and [`OUTBOX_DIR_NAME`] unless configured otherwise.
pub fn game_data_dir(application: &str) -> PathBuf {
    user_data_dir().join(application)
}

/// [`user_data_dir`] reading the environment through `env` (tests pass their own).
fn user_data_dir_with(env: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = var("HOME");
    let base = if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library/Application Support"))
    } else {
        var("XDG_DATA_HOME").or_else(|| home.map(|h| h.join(".local/share")))
    };
    base.unwrap_or_else(std::env::temp_dir)
}

/// `<data dir>/<application>` ([`game_data_dir`]); `env` reads the environment.
pub(crate) fn app_data_dir(env: impl Fn(&str) -> Option<OsString>, application: &str) -> PathBuf {
    user_data_dir_with(env).join(application)
}

/// Environment variable that overrides the report directory.
pub(crate) const REPORT_DIR_ENV: &str = "GPU_CRASH_REPORT_DIR";

/// Where reports go: `GPU_CRASH_REPORT_DIR`, else the setting, else a per-application data directory
/// (`$XDG_DATA_HOME/<app>/gpu-crash-reports`, `%LOCALAPPDATA%\<app>\gpu-crash-reports`,
/// `~/Library/Application Support/<app>/gpu-crash-reports`).
pub(crate) fn report_dir(setting: Option<&Path>, application: &str) -> PathBuf {
    report_dir_with(|name| std::env::var_os(name), setting, application)
}

/// [`report_dir`] reading the environment through `env` (so tests need not touch the process's).
fn report_dir_with(
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
    setting: Option<&Path>,
    application: &str,
) -> PathBuf {
    if let Some(dir) = env(REPORT_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = setting {
        return dir.to_owned();
    }
    app_data_dir(env, application).join(REPORTS_DIR_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_dir_prefers_env_then_setting() {
        let setting = Path::new("/tmp/from-setting");
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let with_env = env(&[(REPORT_DIR_ENV, "/tmp/from-env"), ("HOME", "/home/p")]);
        assert_eq!(
            report_dir_with(with_env, Some(setting), "game"),
            Path::new("/tmp/from-env")
        );
        let without = env(&[("HOME", "/home/p")]);
        assert_eq!(report_dir_with(without, Some(setting), "game"), setting);
        if cfg!(target_os = "linux") {
            assert_eq!(
                report_dir_with(without, None, "game"),
                Path::new("/home/p/.local/share/game/gpu-crash-reports")
            );
            let xdg = env(&[("HOME", "/home/p"), ("XDG_DATA_HOME", "/data")]);
            assert_eq!(
                report_dir_with(xdg, None, "game"),
                Path::new("/data/game/gpu-crash-reports")
            );
        }
        let empty = env(&[(REPORT_DIR_ENV, ""), ("HOME", "/home/p")]);
        assert_eq!(report_dir_with(empty, Some(setting), "game"), setting);
    }
}
