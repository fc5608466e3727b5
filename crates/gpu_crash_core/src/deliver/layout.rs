//! Where a game's outbox is, for every tool that reads its report folder: one rule, used by the
//! reporter when it starts and by `gpu-crash list`/`upload`.
//!
//! The outbox is `<report folder>/outbox` unless the game configured another
//! (`DeliverySettings::outbox_dir`); then the report folder holds [`OUTBOX_POINTER_NAME`], one line
//! with the outbox's absolute path, written when the reporter starts.

use std::path::{Path, PathBuf};

use tracing::warn;

use crate::report::write_atomically;
use crate::safe_fs;

/// The outbox's folder name inside the report folder, by default.
pub const DEFAULT_OUTBOX_NAME: &str = "outbox";
/// The file in a report folder that names the game's outbox when it is elsewhere.
pub const OUTBOX_POINTER_NAME: &str = "gpu-crash-outbox.path";
/// The largest pointer file read: one path.
const POINTER_READ_CAP: u64 = 4096;

/// The outbox the game keeps for the reports of `report_dir` (see the module docs). A pointer that
/// is not a plain file, is too long, does not hold an absolute path, or names anything but an
/// existing folder of this user's that not everyone may write (no symlink) is ignored: a report folder is
/// hostile input (a player's copied to a developer's machine), and `gpu-crash upload` writes and
/// renames files in the outbox it names.
pub fn outbox_dir_of(report_dir: &Path) -> PathBuf {
    let pointer = report_dir.join(OUTBOX_POINTER_NAME);
    let named = safe_fs::read_regular_capped(&pointer, POINTER_READ_CAP)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .map(|text| PathBuf::from(text.trim_end_matches(['\n', '\r'])))
        .filter(|path| path.is_absolute() && safe_fs::is_own_dir(path));
    named.unwrap_or_else(|| report_dir.join(DEFAULT_OUTBOX_NAME))
}

/// Says in `report_dir` where the outbox is when it is not the default one (and removes an old
/// pointer when it is), so that tools find what the game wrote.
pub(crate) fn record_outbox_dir(report_dir: &Path, outbox_dir: &Path) {
    let pointer = report_dir.join(OUTBOX_POINTER_NAME);
    if outbox_dir == report_dir.join(DEFAULT_OUTBOX_NAME) {
        let _ = crate::safe_fs::remove_file(&pointer);
        return;
    }
    let absolute = if outbox_dir.is_absolute() {
        outbox_dir.to_owned()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(outbox_dir),
            Err(_) => return,
        }
    };
    if outbox_dir_of(report_dir) == absolute {
        return;
    }
    let written = safe_fs::create_private_dir_all(report_dir)
        .and_then(|()| write_atomically(&pointer, format!("{}\n", absolute.display()).as_bytes()));
    if let Err(e) = written {
        warn!(
            "GPU crash reporter: cannot write {} ({e}); `gpu-crash list` will not find the outbox {}",
            pointer.display(),
            absolute.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outbox_is_found_where_the_game_put_it() {
        let dir = crate::deliver::tests::fresh_dir("layout");
        let reports = dir.join("reports");
        assert_eq!(outbox_dir_of(&reports), reports.join("outbox"));
        let elsewhere = dir.join("elsewhere");
        record_outbox_dir(&reports, &elsewhere);
        // Named, but not followed until the folder exists as one of this user's.
        assert_eq!(outbox_dir_of(&reports), reports.join("outbox"));
        safe_fs::create_private_dir_all(&elsewhere).unwrap();
        assert_eq!(outbox_dir_of(&reports), elsewhere);
        record_outbox_dir(&reports, &reports.join("outbox"));
        assert!(!reports.join(OUTBOX_POINTER_NAME).exists());
        // Hostile: a relative path, or a huge file, is not followed.
        std::fs::write(reports.join(OUTBOX_POINTER_NAME), "../../etc\n").unwrap();
        assert_eq!(outbox_dir_of(&reports), reports.join("outbox"));
        std::fs::write(reports.join(OUTBOX_POINTER_NAME), vec![b'/'; 10_000]).unwrap();
        assert_eq!(outbox_dir_of(&reports), reports.join("outbox"));
        // A folder anyone may write (the temp dir), or a link to the real outbox, is not followed;
        // one the user's group may write (a `002` umask) is.
        std::fs::write(reports.join(OUTBOX_POINTER_NAME), "/tmp\n").unwrap();
        assert_eq!(outbox_dir_of(&reports), reports.join("outbox"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o770)).unwrap();
            std::fs::write(
                reports.join(OUTBOX_POINTER_NAME),
                format!("{}\n", elsewhere.display()),
            )
            .unwrap();
            assert_eq!(outbox_dir_of(&reports), elsewhere);
            let link = dir.join("link-to-elsewhere");
            std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
            std::fs::write(
                reports.join(OUTBOX_POINTER_NAME),
                format!("{}\n", link.display()),
            )
            .unwrap();
            assert_eq!(outbox_dir_of(&reports), reports.join("outbox"));
        }
    }
}
