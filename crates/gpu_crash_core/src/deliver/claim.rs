//! Claims on outbox files, shared by every process and thread that uses one outbox.
//!
//! A game started twice, a launcher and its game, or the `gpu-crash` CLI next to a running game may
//! all flush the same outbox. A claim is an exclusive advisory lock on the envelope file (`flock` on
//! Unix, `LockFileEx` on Windows, through `std::fs::File::try_lock`), taken before the file is read
//! and held until it was sent and deleted, moved to `failed/`, or left alone:
//! - two flushes never send one envelope: the second one's lock fails, or it gets the lock only after
//!   the first deleted the file, and then finds the name no longer leads to the file it locked;
//! - bounds enforcement deletes only files it could claim, so it never deletes what another flush is
//!   sending;
//! - the operating system drops the lock when its process dies (killed mid-upload, `OnHang::Exit`),
//!   so nothing stays claimed for ever.
//!
//! Locks are per open file, not per process: two threads of one process conflict the same way.
//!
//! Outbox files are hostile input too: a claim opens only a regular file, never through a symlink,
//! and reads at most a given number of bytes (see [`crate::safe_fs`]).

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use crate::safe_fs;

/// An outbox file this flush (or this bounds check) holds exclusively; released when dropped.
#[derive(Debug)]
pub(crate) struct Claim {
    path: PathBuf,
    file: File,
}

impl Claim {
    /// Claims `path`. `Ok(None)` when another claim holds it or it is gone (sent and deleted by
    /// another process in the meantime); `Err` when it exists but cannot be opened or locked now
    /// (permissions, no file descriptors left, I/O error; or it is a symlink or not a regular file).
    pub(crate) fn try_new(path: &Path) -> std::io::Result<Option<Self>> {
        let file = match safe_fs::open_regular(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
        if !still_named(&file, path) {
            return Ok(None); // the holder before us sent it and deleted (or moved) it
        }
        Ok(Some(Self {
            path: path.to_owned(),
            file,
        }))
    }

    /// Takes over a file this process just wrote and locked (see `HeldEnvelope`).
    pub(crate) fn from_locked(path: PathBuf, file: File) -> Self {
        Self { path, file }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes, read through the locked handle; an [`std::io::ErrorKind::FileTooLarge`]
    /// error past `cap` bytes (nothing past `cap + 1` is read).
    pub(crate) fn read(&mut self, cap: u64) -> std::io::Result<Vec<u8>> {
        safe_fs::read_capped(&mut self.file, cap)
    }

    /// The claim now names the file's new path (after a rename, which keeps the lock: it is on the
    /// file, not on its name).
    pub(crate) fn renamed(&mut self, to: PathBuf) {
        self.path = to;
    }
}

/// Whether `path` still names the file `file` was opened from.
#[cfg(unix)]
fn still_named(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Whether `path` still names the file `file` was opened from: not deleted, and the same volume
/// and file index (Windows' inode). A name alone says nothing there: Rust opens files with delete
/// sharing, and where POSIX delete semantics are missing (FAT drives, older Windows) a file deleted
/// while another handle holds it keeps its name, pending deletion, until that handle closes; a
/// name re-created since is another file. Wine reports such a file as neither pending deletion nor
/// unlinked (measured under Wine 8): there a deleted envelope can be claimed (and sent) again.
/// Where the file system tells neither, the name's existence decides, as before.
#[cfg(windows)]
fn still_named(file: &File, path: &Path) -> bool {
    if deleted(file) == Some(true) {
        return false;
    }
    // A deleted name still pending fails to open.
    let Ok(named) = File::open(path) else {
        return false;
    };
    match (file_id(file), file_id(&named)) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// Whether the file was deleted: pending deletion (its name kept until the last handle closes) or
/// with no name left (POSIX delete semantics); `None` when the file system does not say.
#[cfg(windows)]
fn deleted(file: &File) -> Option<bool> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        FileStandardInfo, GetFileInformationByHandleEx, FILE_STANDARD_INFO,
    };
    // SAFETY: a plain-data struct of integers and booleans, for the call to fill.
    let mut info: FILE_STANDARD_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: `file`'s handle is open for the call; `info` is writable and its size is passed.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            file.as_raw_handle(),
            FileStandardInfo,
            (&mut info as *mut FILE_STANDARD_INFO).cast(),
            std::mem::size_of::<FILE_STANDARD_INFO>() as u32,
        )
    } != 0;
    ok.then_some(info.DeletePending || info.NumberOfLinks == 0)
}

/// The file's volume serial number and 64-bit file index.
#[cfg(windows)]
fn file_id(file: &File) -> Option<(u32, u32, u32)> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION,
    };
    // SAFETY: a plain-data struct of integers, for the call to fill.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: `file`'s handle is open for the call, and `info` is writable and of the size asked.
    let ok = unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } != 0;
    ok.then_some((
        info.dwVolumeSerialNumber,
        info.nFileIndexHigh,
        info.nFileIndexLow,
    ))
}

/// Whether `path` still names the file: without a file identity to compare, its name exists.
#[cfg(not(any(unix, windows)))]
fn still_named(_file: &File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("gpu-crash-claim-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_second_claim_of_a_claimed_file_fails_and_succeeds_once_released() {
        let dir = scratch("twice");
        let path = dir.join("a.envelope");
        std::fs::write(&path, b"x").unwrap();
        let mut first = Claim::try_new(&path).unwrap().expect("first claim");
        assert!(Claim::try_new(&path).unwrap().is_none(), "claimed twice");
        assert_eq!(first.read(1).unwrap(), b"x");
        drop(first);
        assert!(Claim::try_new(&path).unwrap().is_some());
    }

    #[test]
    fn a_file_deleted_while_waiting_is_not_claimed() {
        let dir = scratch("deleted");
        let path = dir.join("a.envelope");
        std::fs::write(&path, b"x").unwrap();
        let first = Claim::try_new(&path).unwrap().unwrap();
        // Opened before the holder deleted it, locked after: the name leads elsewhere now.
        let late = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        drop(first);
        late.try_lock().unwrap();
        assert!(!still_named(&late, &path));
        // Re-created under the same name (the same report queued again): a new file.
        std::fs::write(&path, b"y").unwrap();
        assert!(!still_named(&late, &path));
        assert!(Claim::try_new(&path).unwrap().is_some());
    }

    #[test]
    fn a_missing_file_is_no_claim_and_no_error() {
        let dir = scratch("missing");
        assert!(Claim::try_new(&dir.join("gone.envelope"))
            .unwrap()
            .is_none());
    }
}
