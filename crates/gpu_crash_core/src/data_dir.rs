//! The per-application data folder (reports, outbox), in one place, and where reports go.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Folder of a game's reports inside its data directory.
pub const REPORTS_DIR_NAME: &str = "gpu-crash-reports";
/// Folder of a game's outbox inside its data directory.
pub const OUTBOX_DIR_NAME: &str = "gpu-crash-outbox";

/// The per-user folder that holds each game's data directory: `%LOCALAPPDATA%` on Windows,
/// `~/Library/Application Support` on macOS, `$XDG_DATA_HOME` or `~/.local/share` elsewhere (`~`:
/// `HOME`, else the user's home directory in the password database). When none is known, a folder of
/// this user's own in the temp folder (`gpu-crash-<uid>`, created `0700`): reports saved there say
/// so in a note, and the plugin logs it.
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
    let home = var("HOME").or_else(home_from_password_database);
    let base = if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library/Application Support"))
    } else {
        var("XDG_DATA_HOME").or_else(|| home.map(|h| h.join(".local/share")))
    };
    base.unwrap_or_else(temp_fallback)
}

/// The last resort: this user's own folder inside the temp folder every user shares.
fn temp_fallback() -> PathBuf {
    #[cfg(unix)]
    {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        std::env::temp_dir().join(format!("gpu-crash-{uid}"))
    }
    #[cfg(not(unix))]
    {
        std::env::temp_dir().join("gpu-crash")
    }
}

/// `report_dir`, unless it lies in the temp-folder fallback and that folder is not this user's
/// alone (another local user created `gpu-crash-<uid>` first, to read or plant reports): then a
/// fresh folder of this process's own beside it (issue 51 item 12).
pub(crate) fn own_temp_fallback(report_dir: PathBuf) -> PathBuf {
    let fallback = temp_fallback();
    if !report_dir.starts_with(&fallback) {
        return report_dir;
    }
    if crate::safe_fs::create_private_dir_all(&fallback).is_ok()
        && crate::safe_fs::is_own_private_dir(&fallback)
    {
        return report_dir;
    }
    let own = fallback.with_file_name(format!(
        "{}-{}-{}",
        fallback
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    tracing::error!(
        "GPU crash reporter: {} is not this user's own folder (another user made it, or others may          write into it): reports go to {} instead",
        fallback.display(),
        own.display()
    );
    match report_dir.strip_prefix(&fallback) {
        Ok(rest) => own.join(rest),
        Err(_) => own,
    }
}

/// Whether `dir` lies in the temp-folder fallback of [`user_data_dir`] (no data folder was known).
pub(crate) fn in_temp_fallback(dir: &Path) -> bool {
    dir.starts_with(temp_fallback())
}

/// The note a report saved in the temp-folder fallback carries.
pub(crate) fn temp_fallback_note(dir: &Path) -> String {
    format!(
        "saved in {}, under the temp folder: no data folder is known for this user (HOME and the \
         password database name none); the folder is the user's own (0700 on Unix) but the system \
         may clear it",
        dir.display()
    )
}

/// The current user's home directory from the password database (`getpwuid_r`), for a process
/// started without `HOME` (a service, `env -i`); `None` if it names none, `/` or a missing folder.
#[cfg(unix)]
fn home_from_password_database() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: `passwd` is a plain C struct of integers and pointers; all zeroes is a valid value.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes only into `entry` and `buf` (whose length it is given) and sets
    // `found` to `&entry` or null; all outlive the call.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || entry.pw_dir.is_null() {
        return None;
    }
    // SAFETY: on success `pw_dir` points to a NUL-terminated string inside `buf`, alive here.
    let dir = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) };
    let dir = PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()));
    (dir.is_absolute() && dir != Path::new("/") && dir.is_dir()).then_some(dir)
}

#[cfg(not(unix))]
fn home_from_password_database() -> Option<PathBuf> {
    None
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
        if cfg!(windows) {
            // A user name with a space, as Windows makes them ("Jane Doe").
            let local = env(&[("LOCALAPPDATA", r"C:\Users\Jane Doe\AppData\Local")]);
            assert_eq!(
                report_dir_with(local, None, "game"),
                Path::new(r"C:\Users\Jane Doe\AppData\Local\game\gpu-crash-reports")
            );
        }
        if cfg!(target_os = "macos") {
            assert_eq!(
                report_dir_with(without, None, "game"),
                Path::new("/home/p/Library/Application Support/game/gpu-crash-reports")
            );
        }
        let empty = env(&[(REPORT_DIR_ENV, ""), ("HOME", "/home/p")]);
        assert_eq!(report_dir_with(empty, Some(setting), "game"), setting);
    }

    /// Issue 32 item 7: with no `HOME` (a service, `env -i`), reports do not go to the temp folder
    /// every user of the machine shares.
    #[cfg(unix)]
    #[test]
    fn without_home_the_data_dir_is_not_the_shared_temp_dir() {
        let dir = user_data_dir_with(|_| None);
        assert_ne!(dir, std::env::temp_dir(), "the shared temp folder");
    }
}
