//! Reports on disk: written atomically before any upload is attempted, read back with serde.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::CrashReport;

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
    /// The report file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The report's path.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
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
        /// [`super::SCHEMA_VERSION`].
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
/// fsync, rename, fsync of the directory. Returns the report's path.
pub(crate) fn write_report(
    dir: &Path,
    report: &mut CrashReport,
    vendor_binary: Option<&[u8]>,
) -> Result<PathBuf, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
        dir: dir.to_owned(),
        source,
    })?;
    let path = dir.join(report.file_name());
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
    write_atomically(&path, &json).map_err(|source| ReportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Temp file in the same directory, fsync, rename over `path`, fsync the directory.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_with(path, bytes, false).map(drop)
}

/// [`write_atomically`], returning the file open and exclusively locked (`File::try_lock`): the lock
/// is taken before the file gets its name, so no other process can claim it in between.
pub(crate) fn write_atomically_locked(path: &Path, bytes: &[u8]) -> std::io::Result<std::fs::File> {
    write_atomically_with(path, bytes, true)
}

fn write_atomically_with(path: &Path, bytes: &[u8], lock: bool) -> std::io::Result<std::fs::File> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        if lock {
            file.try_lock().map_err(std::io::Error::from)?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(file)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Reads a report back.
#[doc(alias = "load_report")]
pub fn read_report(path: &Path) -> Result<CrashReport, ReportError> {
    let bytes = std::fs::read(path).map_err(|source| ReportError::Read {
        path: path.to_owned(),
        source,
    })?;
    let json = |source| ReportError::Json {
        path: path.to_owned(),
        source,
    };
    // The version first: a newer schema may not parse as this one, and "newer" is the useful answer.
    #[derive(serde::Deserialize)]
    struct Version {
        schema_version: u64,
    }
    let version: Version = serde_json::from_slice(&bytes).map_err(json)?;
    if version.schema_version > u64::from(super::SCHEMA_VERSION) {
        return Err(ReportError::NewerSchema {
            path: path.to_owned(),
            found: version.schema_version,
            supported: super::SCHEMA_VERSION,
        });
    }
    serde_json::from_slice(&bytes).map_err(json)
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
            events_after_fault: vec![],
            device_generation: 1,
            crashes_this_run: 1,
            ms_since_previous_crash: None,
            suppressed_duplicates: 0,
            follows_hang: None,
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
}
