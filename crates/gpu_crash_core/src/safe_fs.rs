//! Files on disk as the reporter must treat them: what it writes is the player's alone, what it
//! reads is hostile.
//!
//! - Folders are created `0700` and files `0600` on Unix (a report names the player's GPU, game and
//!   files; an envelope is what goes to the server): never what the umask gives, usually
//!   world-readable. Elsewhere the per-user data folder's own access rules apply.
//! - Files are created new ([`create_private_new`]): never written through a file or symlink that
//!   already has the name.
//! - Reads open only regular files, never through a symlink (`O_NOFOLLOW` on Unix), never block on a
//!   FIFO or a device (`O_NONBLOCK`), and stop at a size cap ([`read_capped`]): a report or envelope
//!   may name, or be, anything.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Creates `dir` and its missing parents, owner-only (`0700` on Unix). Existing folders are left
/// as they are: the player or developer chose them.
pub(crate) fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    crate::fs_seam::before_change()?;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Whether `dir` is a folder of this user's alone: not a symlink, owned by this user, and writable
/// by no one else (Unix). A folder in the shared temp folder that another user made first (to read
/// or plant reports) is not. Elsewhere: whether it is a folder, not a symlink.
pub(crate) fn is_own_private_dir(dir: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.is_dir() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: getuid has no preconditions and cannot fail.
        let me = unsafe { libc::getuid() };
        meta.uid() == me && meta.mode() & 0o022 == 0
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Whether `dir` is a folder this user owns that not everyone may write: not a symlink, owned by
/// this user, not world-writable (Unix; a group-writable folder under a `002` umask, or one shared
/// with a launcher's group, is accepted). Elsewhere: whether it is a folder, not a symlink.
pub(crate) fn is_own_dir(dir: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.is_dir() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: getuid has no preconditions and cannot fail.
        let me = unsafe { libc::getuid() };
        meta.uid() == me && meta.mode() & 0o002 == 0
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// `parent/name`, created owner-only if missing; an error if it is a symlink or not a folder (the
/// outbox follows no symlink: its `held/`, `sent/` or `failed/` must not lead elsewhere).
pub(crate) fn private_subdir(parent: &Path, name: &str) -> io::Result<std::path::PathBuf> {
    let dir = parent.join(name);
    create_private_dir_all(&dir)?;
    let meta = std::fs::symlink_metadata(&dir)?;
    if meta.file_type().is_symlink() {
        return Err(not_followed());
    }
    if !meta.is_dir() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a folder"));
    }
    Ok(dir)
}

/// Whether `path` is a regular file itself (a symlink to one is not).
pub(crate) fn is_plain_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Creates the file `path` for writing, owner-only (`0600` on Unix); fails if anything, a symlink
/// included, already has the name.
pub(crate) fn create_private_new(path: &Path) -> io::Result<File> {
    crate::fs_seam::before_write()?;
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(path)?;
    #[cfg(test)]
    crate::fs_seam::note_made(path);
    Ok(file)
}

/// `std::fs::remove_file`, through the kill seam (see [`crate::fs_seam`]).
pub(crate) fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    crate::fs_seam::before_change()?;
    std::fs::remove_file(path)
}

/// `std::fs::rename`, through the kill seam (see [`crate::fs_seam`]).
pub(crate) fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    crate::fs_seam::before_change()?;
    std::fs::rename(from, to.as_ref())?;
    #[cfg(test)]
    crate::fs_seam::note_made(to.as_ref());
    Ok(())
}

/// Empties the regular file `path` (never through a symlink), through the kill seam, keeping its
/// modification time: what frees an envelope's bytes once it is its own marker, which still says
/// when the envelope was written.
pub(crate) fn truncate_regular(path: &Path) -> io::Result<()> {
    crate::fs_seam::before_change()?;
    let mut options = OpenOptions::new();
    options.write(true);
    let file = open_regular_with(path, &mut options)?;
    let meta = file.metadata()?;
    file.set_len(0)?;
    match meta.modified() {
        Ok(written) => file.set_modified(written),
        Err(_) => Ok(()),
    }
}

/// Opens `path` for reading if it is a regular file, not a symlink; the error says which it is
/// otherwise.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    open_regular_with(path, &mut options)
}

/// Opens `path` with `options` if it is a regular file, not a symlink (see [`open_regular`]).
fn open_regular_with(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below anyway).
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(not_followed());
    }
    // O_NOFOLLOW refuses a symlink with ELOOP: said as the refusal it is.
    #[cfg(unix)]
    let file = options.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            return not_followed();
        }
        e
    })?;
    #[cfg(not(unix))]
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

fn not_followed() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a symbolic link (not followed)",
    )
}

/// Reads `file` whole if it holds at most `cap` bytes; never reads (nor allocates) more than
/// `cap + 1`. A file over the cap is an [`io::ErrorKind::FileTooLarge`] error.
pub(crate) fn read_capped(file: &mut File, cap: u64) -> io::Result<Vec<u8>> {
    let too_large = || {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than the {cap}-byte limit"),
        )
    };
    let len = file.metadata()?.len();
    if len > cap {
        return Err(too_large());
    }
    // The length is only a hint (the file may grow): the read itself stops past the cap.
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`open_regular`] then [`read_capped`].
pub(crate) fn read_regular_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    read_capped(&mut open_regular(path)?, cap)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Issue 51 item 12: a folder others may write into is not taken as this user's own.
    #[test]
    fn a_folder_others_may_write_is_not_ones_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("gpu-crash-own-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        create_private_dir_all(&dir).unwrap();
        assert!(is_own_private_dir(&dir));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!is_own_private_dir(&dir));
        let link = dir.with_extension("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(!is_own_private_dir(&link), "a symlink is not followed");
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("gpu-crash-safe-fs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_refuse_symlinks_fifos_devices_and_files_over_the_cap() {
        let dir = scratch("reads");
        let file = dir.join("a");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_regular_capped(&file, 5).unwrap(), b"12345");
        let err = read_regular_capped(&file, 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge, "{err}");

        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err = read_regular_capped(&link, 100).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");

        let err = read_regular_capped(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");

        let fifo = dir.join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `name` is a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let err = read_regular_capped(&fifo, 100).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn creation_is_owner_only_and_never_through_an_existing_name() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("create");
        let nested = dir.join("a/b");
        create_private_dir_all(&nested).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        let file = nested.join("f");
        drop(create_private_new(&file).unwrap());
        assert_eq!(mode(&file), 0o600);
        assert!(create_private_new(&file).is_err(), "created over a file");
        let link = nested.join("link");
        std::os::unix::fs::symlink(dir.join("victim"), &link).unwrap();
        assert!(
            create_private_new(&link).is_err(),
            "created through a symlink"
        );
        assert!(!dir.join("victim").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
