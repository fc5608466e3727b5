//! The crash report: a serde model with a schema version, written to disk atomically before any
//! upload is attempted.
//!
//! Addresses are serialised as `"0x…"` strings: developers read GPU addresses in hex, and JSON numbers
//! above 2^53 lose precision in JavaScript dashboards.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use std::time::Instant;

pub use crate::capture::BindingKind;
pub use crate::index::IndexStats;
use crate::index::{object_type_name, IndexedEvent};
pub use crate::vulkan::GpuCrashCapabilities;

/// Bumped on any incompatible change of [`CrashReport`].
pub const SCHEMA_VERSION: u32 = 2;

/// What happened to the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashKind {
    /// The driver reported `VK_ERROR_DEVICE_LOST`.
    DeviceLost,
    /// Submitted GPU work stopped completing while the device was not reported lost.
    GpuHang,
}

/// How the faulting address was accessed (`VkDeviceFaultAddressTypeKHR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAccess {
    /// No access type (`NONE`).
    None,
    /// Invalid read.
    Read,
    /// Invalid write.
    Write,
    /// Execution of invalid memory.
    Execute,
    /// An instruction pointer (unknown, invalid or faulting).
    Instruction,
}

/// The reporter's judgement of one fault address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultVerdict {
    /// The address lies in a range whose object was freed, and in no live range.
    UseAfterFree,
    /// The address lies in no live or freed range but just past the end of a live object.
    OutOfBounds,
    /// The address lies inside a live object (bad index within bounds, wrong format, hardware issue).
    InsideLiveObject,
    /// Nothing known lives or lived there.
    UnknownAddress,
}

impl FaultVerdict {
    /// The snake_case name, as in JSON, tags and fingerprints.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UseAfterFree => "use_after_free",
            Self::OutOfBounds => "out_of_bounds",
            Self::InsideLiveObject => "inside_live_object",
            Self::UnknownAddress => "unknown_address",
        }
    }
}

/// Whether a culprit object still existed at the time of the fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectState {
    /// Still bound.
    Live,
    /// Unbound before the fault.
    Freed,
}

/// A GPU object that may explain a fault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Culprit {
    /// The wgpu/Bevy label or Vulkan debug name, if known.
    pub name: Option<String>,
    /// What to call it in one line: `buffer "particles"`, or `BUFFER 0x5a` when unnamed.
    pub label: String,
    /// `VkObjectType` name, e.g. `BUFFER`.
    pub object_type: String,
    /// Vulkan handle.
    #[serde(with = "hex")]
    pub handle: u64,
    /// First GPU address of its range.
    #[serde(with = "hex")]
    pub base: u64,
    /// Size of its range in bytes.
    pub size: u64,
    /// Live or freed.
    pub state: ObjectState,
    /// Fault address minus `base` (may exceed `size` for overruns).
    pub offset: i64,
    /// For freed objects: milliseconds between the unbind and the fault.
    pub freed_ms_ago: Option<u64>,
    /// For freed objects: frames between the unbind and the fault.
    pub freed_frames_ago: Option<u64>,
    /// For overruns: bytes between the end of the object and the fault address.
    pub bytes_past_end: Option<u64>,
    /// Why this candidate ranks where it does.
    pub reason: String,
    /// `vkGetDeviceMemoryOpaqueCaptureAddress` of the backing memory, for capture/replay tools.
    #[serde(with = "hex_opt", default)]
    pub opaque_capture_address: Option<u64>,
    /// Why `opaque_capture_address` is missing, when it is.
    pub capture_replay_note: Option<String>,
}

/// One address the driver reported, resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultEntry {
    /// `reportedAddress`.
    #[serde(with = "hex")]
    pub address: u64,
    /// The inclusive range `[lo, hi]` the fault lies in, from `addressPrecision`.
    #[serde(with = "hex_pair")]
    pub address_range: [u64; 2],
    /// `addressPrecision` in bytes.
    pub precision: u64,
    /// Read, write, execute, instruction, none.
    pub access: FaultAccess,
    /// The verdict.
    pub verdict: FaultVerdict,
    /// The most likely object, or null.
    pub culprit: Option<Culprit>,
    /// Every candidate, best first (aliasing puts several objects over one address).
    pub candidates: Vec<Culprit>,
    /// One human line, e.g.
    /// `GPU fault: write at 0x1000f010 is 16 bytes past the end of buffer "particles" (live) -> out_of_bounds`.
    pub summary: String,
    /// Binding events that touched the fault range, oldest first.
    pub nearby_events: Vec<BindingEventEntry>,
}

/// A binding event as the report shows it (breadcrumbs, "what happened around the fault").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingEventEntry {
    /// Position in the index's event order.
    pub sequence: u64,
    /// Frame of the event.
    pub frame: u64,
    /// Bind or unbind.
    pub kind: BindingKind,
    /// `VkObjectType` name.
    pub object_type: String,
    /// Object handle.
    #[serde(with = "hex")]
    pub handle: u64,
    /// First address.
    #[serde(with = "hex")]
    pub base: u64,
    /// Length in bytes.
    pub size: u64,
    /// Name known for the object at the time.
    pub name: Option<String>,
    /// `INTERNAL_OBJECT` flag.
    pub internal: bool,
    /// Milliseconds between the event and the crash.
    pub ms_before_crash: Option<u64>,
}

impl BindingEventEntry {
    /// Converts an index event, timing it against the crash.
    pub fn from_indexed(event: &IndexedEvent<'_>, crash_at: Instant) -> Self {
        Self {
            sequence: event.sequence,
            frame: event.frame,
            kind: event.kind,
            object_type: object_type_name(event.object_type),
            handle: event.handle,
            base: event.base,
            size: event.size,
            name: event.name.map(str::to_owned),
            internal: event.internal,
            ms_before_crash: event
                .seen_at
                .map(|t| crash_at.saturating_duration_since(t).as_millis() as u64),
        }
    }
}

/// A `VkDeviceFaultVendorInfoEXT`/`KHR`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorInfo {
    /// Vendor description.
    pub description: String,
    /// `vendorFaultCode`.
    #[serde(with = "hex")]
    pub fault_code: u64,
    /// `vendorFaultData`.
    #[serde(with = "hex")]
    pub fault_data: u64,
}

/// The parsed `VkDeviceFaultVendorBinaryHeaderVersionOneEXT`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorBinaryHeader {
    /// `headerSize`.
    pub header_size: u32,
    /// `headerVersion`.
    pub header_version: u32,
    /// `vendorID`.
    pub vendor_id: u32,
    /// `deviceID`.
    pub device_id: u32,
    /// `driverVersion`.
    pub driver_version: u32,
    /// `pipelineCacheUUID` as 32 hex digits.
    pub pipeline_cache_uuid: String,
    /// Application name found at `applicationNameOffset`.
    pub application_name: Option<String>,
    /// `applicationVersion`.
    pub application_version: u32,
    /// Engine name found at `engineNameOffset`.
    pub engine_name: Option<String>,
    /// `engineVersion`.
    pub engine_version: u32,
    /// `apiVersion`.
    pub api_version: u32,
}

/// The vendor's binary crash dump: kept raw in a sibling file, header parsed when valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorBinaryInfo {
    /// Bytes.
    pub size: u64,
    /// File name next to the report JSON.
    pub file_name: Option<String>,
    /// The parsed header, when it validated.
    pub header: Option<VendorBinaryHeader>,
    /// Why the header could not be parsed (the bytes are kept anyway).
    pub parse_error: Option<String>,
}

/// The application as the report names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplicationInfo {
    /// Application name (package name unless configured).
    pub name: String,
    /// Application version.
    pub version: String,
    /// Engine name, e.g. "Bevy".
    pub engine_name: String,
    /// Engine version.
    pub engine_version: String,
    /// Executable path, unless left out for privacy.
    pub executable: Option<String>,
    /// Process id.
    pub process_id: u32,
}

/// Everything known about one GPU crash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrashReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// 32 hex digits; also the Sentry event id, so an upload retried is one event.
    pub id: String,
    /// Device lost or GPU hang.
    pub kind: CrashKind,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// RFC 3339 UTC time.
    pub time: String,
    /// The one human line for the whole crash (first fault's summary or a hang line).
    pub summary: String,
    /// Resolved fault addresses.
    pub faults: Vec<FaultEntry>,
    /// GPU identity and what was enabled.
    pub gpu: GpuCrashCapabilities,
    /// Driver's fault description.
    pub description: Option<String>,
    /// Vendor fault infos.
    pub vendor_infos: Vec<VendorInfo>,
    /// Vendor binary crash dump.
    pub vendor_binary: Option<VendorBinaryInfo>,
    /// `VK_KHR_shader_abort` message.
    pub shader_abort_message: Option<String>,
    /// Binding events the ring dropped before the crash.
    pub binding_events_dropped: u64,
    /// Index counters at the crash.
    pub index_stats: IndexStats,
    /// The last binding events before the crash, oldest first.
    pub recent_events: Vec<BindingEventEntry>,
    /// Frame number at the crash.
    pub frame: u64,
    /// Application identity.
    pub application: ApplicationInfo,
    /// The crash-drill scenario, when the fault was injected by `VK_LAYER_gpu_crash_drill`.
    pub drill: Option<String>,
    /// Notes on what could not be gathered (e.g. "fault query returned VK_ERROR_UNKNOWN").
    pub notes: Vec<String>,
    /// For `gpu_hang`: what stalled and which objects were freed while work was pending.
    #[serde(default)]
    pub hang: Option<HangInfo>,
    /// The last frames: when their GPU work was submitted and whether it completed.
    #[serde(default)]
    pub frames: Vec<FrameTiming>,
    /// The render stage the GPU was executing when it stopped, e.g. `Core3d MainPass of camera
    /// "main"` (from GPU breadcrumbs); null when no breadcrumb was in flight or none were recorded.
    #[serde(default)]
    pub gpu_stage: Option<String>,
    /// GPU breadcrumbs of the frames still in flight, oldest frame first, as the GPU left them.
    #[serde(default)]
    pub breadcrumbs: Vec<FrameBreadcrumbs>,
    /// Binding events after the fault (after the faulting frame's work was submitted, or wgpu's
    /// teardown after the loss): kept for reading, never used to resolve the fault.
    #[serde(default)]
    pub events_after_fault: Vec<BindingEventEntry>,
    /// Which device of this run it was: 1 for the first, one more after each renderer recovery.
    #[serde(default = "first_generation")]
    pub device_generation: u32,
    /// Device losses and hangs in this run so far, this one included.
    #[serde(default)]
    pub crashes_this_run: u32,
    /// Milliseconds since the previous crash of this run, if there was one.
    #[serde(default)]
    pub ms_since_previous_crash: Option<u64>,
    /// Crashes with the same fingerprint that were counted instead of uploaded (crash-loop limit).
    #[serde(default)]
    pub suppressed_duplicates: u32,
}

fn first_generation() -> u32 {
    1
}

/// How far the GPU got with one breadcrumb.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreadcrumbState {
    /// Its end marker was written: all its work finished.
    Completed,
    /// Its begin marker was written, its end marker not: the GPU was inside it.
    Started,
    /// Neither marker was written.
    NotStarted,
}

impl BreadcrumbState {
    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Started => "started",
            Self::NotStarted => "not_started",
        }
    }

    /// In words, for people: `completed`, `started, not finished`, `not started`.
    pub fn describe(self) -> &'static str {
        match self {
            BreadcrumbState::Completed => "completed",
            BreadcrumbState::Started => "started, not finished",
            BreadcrumbState::NotStarted => "not started",
        }
    }
}

/// One labelled region of a frame's GPU work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuBreadcrumb {
    /// What ran, e.g. `Core3d MainPass`, or a game's own label.
    pub label: String,
    /// The camera it ran for (its `Name`, else its entity), if any.
    pub camera: Option<String>,
    /// How far the GPU got.
    pub state: BreadcrumbState,
}

impl GpuBreadcrumb {
    /// `Core3d MainPass of camera "main"`.
    pub fn describe(&self) -> String {
        match &self.camera {
            Some(camera) => format!("{} of camera {camera:?}", self.label),
            None => self.label.clone(),
        }
    }
}

/// The breadcrumbs of one frame still in flight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameBreadcrumbs {
    /// Frame number (the reporter's count of rendered frames).
    pub frame: u64,
    /// In recording order.
    pub breadcrumbs: Vec<GpuBreadcrumb>,
}

impl FrameBreadcrumbs {
    /// The innermost breadcrumb the GPU was inside: the last one started and not finished.
    pub fn in_flight(&self) -> Option<&GpuBreadcrumb> {
        self.breadcrumbs
            .iter()
            .rev()
            .find(|b| b.state == BreadcrumbState::Started)
    }
}

/// What the watchdog saw when it declared a hang.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HangInfo {
    /// Oldest frame whose GPU work never completed.
    pub oldest_pending_frame: u64,
    /// Frames submitted but not completed.
    pub pending_frames: u64,
    /// Milliseconds since the oldest pending work was submitted.
    pub stalled_ms: u64,
    /// The `hang_timeout` setting in milliseconds.
    pub hang_timeout_ms: u64,
    /// Resources unbound while GPU work was pending, most recent first: a GPU still using one of
    /// them is the classic cause of a hang (descriptor use-after-free).
    pub suspects: Vec<Culprit>,
    /// A `VK_KHR_device_fault` report said `WATCHDOG_TIMEOUT`.
    pub driver_watchdog_timeout: bool,
}

/// One frame's GPU work as the reporter tracked it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameTiming {
    /// Frame number.
    pub frame: u64,
    /// Milliseconds between the submit and the report.
    pub submitted_ms_before_report: u64,
    /// Milliseconds from submit to completion; null when it never completed.
    pub completed_after_ms: Option<u64>,
}

impl CrashReport {
    /// The report's file name: `gpu-crash-<time>-<id>.json`, with the whole id, so two reports of
    /// the same millisecond never share a name.
    pub fn file_name(&self) -> String {
        format!("gpu-crash-{}-{}.json", self.timestamp_ms, self.id)
    }
}

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
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
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
    serde_json::from_slice(&bytes).map_err(|source| ReportError::Json {
        path: path.to_owned(),
        source,
    })
}

mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:#x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        parse(&text).map_err(serde::de::Error::custom)
    }

    pub fn parse(text: &str) -> Result<u64, String> {
        let digits = text.strip_prefix("0x").unwrap_or(text);
        u64::from_str_radix(digits, 16).map_err(|e| format!("bad hex address {text:?}: {e}"))
    }
}

mod hex_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => super::hex::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| super::hex::parse(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

mod hex_pair {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[u64; 2], s: S) -> Result<S::Ok, S::Error> {
        [format!("{:#x}", v[0]), format!("{:#x}", v[1])].serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; 2], D::Error> {
        let [lo, hi] = <[String; 2]>::deserialize(d)?;
        let parse = |t: &str| super::hex::parse(t).map_err(serde::de::Error::custom);
        Ok([parse(&lo)?, parse(&hi)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
