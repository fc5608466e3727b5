//! Reports on disk: written atomically (owner-only) before any upload is attempted, read back with
//! serde as hostile input: through no symlink, at most [`MAX_REPORT_BYTES`], and a vendor binary only
//! from the report's own folder, at most [`MAX_VENDOR_BINARY_BYTES`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::model::{CrashReport, SCHEMA_VERSION};
use crate::safe_fs;

/// The largest report file read back (64 MiB): far over any report the plugin writes (its lists are
/// bounded; a report with ten thousand binding events is a few MiB), far under what would hurt a
/// tool that reads a folder of them.
pub const MAX_REPORT_BYTES: u64 = 64 * 1024 * 1024;
/// The largest vendor binary read back for an upload (64 MiB); one over the upload's attachment
/// limit is left out anyway (see `DeliverySettings::max_attachment_bytes`).
pub const MAX_VENDOR_BINARY_BYTES: u64 = 64 * 1024 * 1024;

/// Why a report could not be written or read back.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report directory could not be created.
    #[error("cannot create the report directory {}: {source}", .dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The report file could not be written (full disk, permissions).
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The report's path.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The report file could not be read (or is a symlink, or not a regular file).
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The report's path.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is larger than any report (or vendor binary) this crate writes.
    #[error("{} is larger than the {limit}-byte limit of what is read back", .path.display())]
    TooLarge {
        /// The file's path.
        path: PathBuf,
        /// [`MAX_REPORT_BYTES`] or [`MAX_VENDOR_BINARY_BYTES`].
        limit: u64,
    },
    /// The report names a vendor binary that is not a plain file name in the report's own folder
    /// (an absolute path, `..`, a subfolder): it is not read.
    #[error(
        "{} names its vendor binary {name:?}, which is not a file name in the report's folder; it \
         is not read",
        .path.display()
    )]
    ForeignVendorBinary {
        /// The report's path.
        path: PathBuf,
        /// The name it gives.
        name: String,
    },
    /// The report was written by a newer version of this crate, with a schema this one cannot read.
    #[error(
        "{} is a crash report of schema version {found}; this version reads up to {supported} \
         (update bevy_gpu_crash_reporter / gpu-crash)",
        .path.display()
    )]
    NewerSchema {
        /// The report's path.
        path: PathBuf,
        /// Its `schema_version`.
        found: u64,
        /// [`SCHEMA_VERSION`].
        supported: u32,
    },
    /// The report could not be serialised, or a file is not a crash report of this schema.
    #[error("{} is not a crash report: {source}", .path.display())]
    Json {
        /// The report's path.
        path: PathBuf,
        /// serde_json's reason.
        source: serde_json::Error,
    },
}

/// Writes `report` (and the vendor binary as a sibling file) into `dir` atomically: temporary file,
/// fsync, rename, fsync of the directory. Returns the report's path. (The crash path uses
/// [`write_report_held`].)
#[cfg(any(test, feature = "test-support"))]
pub(crate) fn write_report(
    dir: &Path,
    report: &mut CrashReport,
    vendor_binary: Option<&[u8]>,
) -> Result<PathBuf, ReportError> {
    write_report_held(dir, report, vendor_binary).map(|(path, _held)| path)
}

/// [`write_report`], the report's file returned open and exclusively locked (taken before the
/// file got its name): held until the report is queued, so that a startup requeue of another
/// process never queues it first (see `deliver::requeue`).
pub(crate) fn write_report_held(
    dir: &Path,
    report: &mut CrashReport,
    vendor_binary: Option<&[u8]>,
) -> Result<(PathBuf, std::fs::File), ReportError> {
    safe_fs::create_private_dir_all(dir).map_err(|source| ReportError::CreateDir {
        dir: dir.to_owned(),
        source,
    })?;
    let path = dir.join(report.file_name());
    if crate::data_dir::in_temp_fallback(dir) {
        let note = crate::data_dir::temp_fallback_note(dir);
        if !report.notes.contains(&note) {
            report.notes.push(note);
        }
    }
    if let (Some(bytes), Some(info)) = (vendor_binary, report.vendor_binary.as_mut()) {
        let name = path
            .with_extension("vendor.bin")
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        // The JSON matters more than the vendor dump: a failed dump write is noted, not fatal.
        match name.as_ref().map(|n| write_atomically(&dir.join(n), bytes)) {
            Some(Ok(())) => info.file_name = name,
            Some(Err(err)) => report.notes.push(format!(
                "vendor binary could not be written next to the report: {err}"
            )),
            None => {}
        }
    }
    let json = serde_json::to_vec_pretty(report).map_err(|source| ReportError::Json {
        path: path.clone(),
        source,
    })?;
    let held = write_atomically_locked(&path, &json).map_err(|source| ReportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok((path, held))
}

/// Temp file in the same directory (created new and owner-only), fsync, rename over `path`, fsync
/// the directory.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_with(path, bytes, false, || {}).map(drop)
}

/// [`write_atomically`], returning the file open and exclusively locked (`File::try_lock`): the lock
/// is taken before the file gets its name, so no other process can claim it in between.
pub(crate) fn write_atomically_locked(path: &Path, bytes: &[u8]) -> std::io::Result<std::fs::File> {
    write_atomically_with(path, bytes, true, || {})
}

/// [`write_atomically_locked`], running `before_rename` once the new file is written and synced,
/// just before it takes the name: where a file held open cannot be replaced (Windows without POSIX
/// rename semantics), the caller lets go of the old one there, for the moment of the rename only.
pub(crate) fn write_atomically_locked_releasing(
    path: &Path,
    bytes: &[u8],
    before_rename: impl FnOnce(),
) -> std::io::Result<std::fs::File> {
    write_atomically_with(path, bytes, true, before_rename)
}

/// Numbers this process's temp files: two threads writing one name (a startup requeue and a crash)
/// never share one.
static TEMP_FILES: AtomicU64 = AtomicU64::new(0);

fn write_atomically_with(
    path: &Path,
    bytes: &[u8],
    lock: bool,
    before_rename: impl FnOnce(),
) -> std::io::Result<std::fs::File> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}{TEMP_MARK}{}-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id(),
        // Relaxed: only uniqueness matters, and fetch_add is unique under any ordering.
        TEMP_FILES.fetch_add(1, Ordering::Relaxed)
    ));
    let result: std::io::Result<std::fs::File> = (|| {
        let mut file = match safe_fs::create_private_new(&tmp) {
            // Left by a process of the same id that died mid-write (or planted): not ours to trust.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                crate::safe_fs::remove_file(&tmp)?;
                safe_fs::create_private_new(&tmp)?
            }
            other => other?,
        };
        // Locked while it is written, whatever the caller asked: a temp file nobody holds was left
        // by a killed writer (see `remove_abandoned_temp_files`).
        file.try_lock().map_err(std::io::Error::from)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        before_rename();
        crate::safe_fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(file)
    })();
    if result.is_err() {
        let _ = crate::safe_fs::remove_file(&tmp);
    }
    let file = result?;
    if !lock {
        // Only the writer needed it.
        let _ = file.unlock();
    }
    Ok(file)
}

/// What a temp file of [`write_atomically`] has in its name: `.<name>.tmp-<pid>-<n>`.
const TEMP_MARK: &str = ".tmp-";

/// Removes the temp files of [`write_atomically`] in `dir` that no writer holds: a process killed
/// between creating one and renaming it leaves it behind, and a game killed at random over months
/// would pile them up. A writer holds its temp file locked until the rename; a lock is dropped
/// with its process. Returns how many were removed.
pub(crate) fn remove_abandoned_temp_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') || !name.contains(TEMP_MARK) {
            continue;
        }
        let Ok(file) = safe_fs::open_regular(&entry.path()) else {
            continue;
        };
        if file.try_lock().is_ok() && crate::safe_fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Reads a report back: a regular file (no symlink followed) of at most [`MAX_REPORT_BYTES`].
#[doc(alias = "load_report")]
pub fn read_report(path: &Path) -> Result<CrashReport, ReportError> {
    let bytes = read_capped(path, MAX_REPORT_BYTES)?;
    parse_report(path, &bytes)
}

/// A report from `bytes` already read (through a handle that holds the file's lock: on Windows a
/// locked range cannot be read through another handle, the locking process's own included), or
/// the read's error; `path` names the file in errors.
pub(crate) fn report_from_read(
    path: &Path,
    read: std::io::Result<Vec<u8>>,
) -> Result<CrashReport, ReportError> {
    let bytes = read.map_err(|source| read_error(path, MAX_REPORT_BYTES, source))?;
    parse_report(path, &bytes)
}

fn parse_report(path: &Path, bytes: &[u8]) -> Result<CrashReport, ReportError> {
    let json = |source| ReportError::Json {
        path: path.to_owned(),
        source,
    };
    // The version first: a newer schema may not parse as this one, and "newer" is the useful answer.
    #[derive(serde::Deserialize)]
    struct Version {
        schema_version: u64,
    }
    let version: Version = serde_json::from_slice(bytes).map_err(json)?;
    if version.schema_version > u64::from(SCHEMA_VERSION) {
        return Err(ReportError::NewerSchema {
            path: path.to_owned(),
            found: version.schema_version,
            supported: SCHEMA_VERSION,
        });
    }
    serde_json::from_slice(bytes).map_err(json)
}

/// The vendor binary `report` (read from `report_path`) names, if it names one: only a plain file
/// name in the report's own folder, a regular file (no symlink followed) of at most
/// [`MAX_VENDOR_BINARY_BYTES`]. A report is hostile input: its name could be `/home/qa/.ssh/id_ed25519`
/// or `/dev/zero`.
pub fn read_vendor_binary(
    report_path: &Path,
    report: &CrashReport,
) -> Result<Option<Vec<u8>>, ReportError> {
    let Some(name) = report
        .vendor_binary
        .as_ref()
        .and_then(|v| v.file_name.as_deref())
    else {
        return Ok(None);
    };
    if !is_plain_file_name(name) {
        return Err(ReportError::ForeignVendorBinary {
            path: report_path.to_owned(),
            name: name.to_owned(),
        });
    }
    let dir = report_path.parent().unwrap_or(Path::new("."));
    read_capped(&dir.join(name), MAX_VENDOR_BINARY_BYTES).map(Some)
}

/// One normal path component, the same on every platform: no separator of any platform, no drive
/// or stream colon, no `.` or `..`, no NUL.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', ':', '\0'])
}

/// [`safe_fs::read_regular_capped`] with the errors as [`ReportError`]s.
fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>, ReportError> {
    safe_fs::read_regular_capped(path, limit).map_err(|source| read_error(path, limit, source))
}

fn read_error(path: &Path, limit: u64, source: std::io::Error) -> ReportError {
    if source.kind() == std::io::ErrorKind::FileTooLarge {
        ReportError::TooLarge {
            path: path.to_owned(),
            limit,
        }
    } else {
        ReportError::Read {
            path: path.to_owned(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::*;

    fn report() -> CrashReport {
        CrashReport {
            schema_version: SCHEMA_VERSION,
            id: "0123456789abcdef0123456789abcdef".into(),
            kind: CrashKind::DeviceLost,
            timestamp_ms: 1,
            time: "1970-01-01T00:00:00.001Z".into(),
            summary: "s".into(),
            faults: vec![],
            gpu: GpuCrashCapabilities::default(),
            description: None,
            vendor_infos: vec![],
            vendor_binary: Some(VendorBinaryInfo {
                size: 3,
                file_name: None,
                header: None,
                parse_error: None,
            }),
            shader_abort_message: None,
            binding_events_dropped: 0,
            index_stats: IndexStats::default(),
            recent_events: vec![],
            frame: 0,
            application: ApplicationInfo::default(),
            drill: None,
            notes: vec![],
            hang: None,
            frames: vec![],
            gpu_stage: None,
            breadcrumbs: vec![],
            running: None,
            events_after_fault: vec![],
            device_generation: 1,
            crashes_this_run: 1,
            ms_since_previous_crash: None,
            suppressed_duplicates: 0,
            follows_hang: None,
            non_fatal: None,
            after_earlier_hang: None,
            video_memory: None,
        }
    }

    #[test]
    fn round_trips_with_hex_addresses_and_a_sibling_vendor_binary() {
        let dir = std::env::temp_dir().join(format!("gcr-report-{}", std::process::id()));
        let mut r = report();
        let path = write_report(&dir, &mut r, Some(&[1, 2, 3])).unwrap();
        let back = read_report(&path).unwrap();
        assert_eq!(back, r);
        let name = back.vendor_binary.unwrap().file_name.unwrap();
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), [1, 2, 3]);
        assert!(std::fs::read_dir(&dir).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp-")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_report_of_a_newer_schema_says_so() {
        let dir = std::env::temp_dir().join(format!("gcr-schema-{}", std::process::id()));
        let mut r = report();
        let path = write_report(&dir, &mut r, None).unwrap();
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        json["schema_version"] = (SCHEMA_VERSION + 1).into();
        json["kind"] = "a_kind_of_the_future".into();
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        let err = read_report(&path).unwrap_err();
        assert!(
            matches!(err, ReportError::NewerSchema { found, supported: SCHEMA_VERSION, .. }
                if found == u64::from(SCHEMA_VERSION) + 1),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 32 item 7: reports, vendor binaries and the folder they are created in are the
    /// player's alone, whatever the umask.
    #[cfg(unix)]
    #[test]
    fn reports_and_their_folder_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("gcr-modes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("reports");
        let mut r = report();
        let path = write_report(&dir, &mut r, Some(&[1, 2, 3])).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700, "report folder");
        assert_eq!(mode(&path), 0o600, "report");
        let vendor = dir.join(r.vendor_binary.unwrap().file_name.unwrap());
        assert_eq!(mode(&vendor), 0o600, "vendor binary");
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Issue 32 item 6: a file far over any report's size is refused before it is read (a sparse
    /// file here: nothing is allocated on disk).
    #[test]
    fn a_file_over_the_report_size_cap_is_refused_unread() {
        let dir = std::env::temp_dir().join(format!("gcr-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gpu-crash-1-huge.json");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(256 << 20)
            .unwrap();
        let err = read_report(&path).unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
