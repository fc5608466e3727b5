//! The report's schema (version [`SCHEMA_VERSION`]): what a [`CrashReport`] holds. Its parts that
//! other stages produce (binding kinds, index statistics, breadcrumbs, culprits, vendor info) are
//! defined where they are made and named here.

use serde::{Deserialize, Serialize};

use crate::index::IndexStats;
use crate::pipelines::RunningPipelines;
use crate::progress::FrameBreadcrumbs;
use crate::resolve::{BindingEventEntry, Culprit, FaultEntry};
use crate::vulkan::fault::{VendorBinaryHeader, VendorInfo};
use crate::vulkan::GpuCrashCapabilities;

use super::video_memory::VideoMemory;

/// Bumped on any incompatible change of [`CrashReport`].
/// 3: culprits name their Bevy asset (`asset`), and a fault in freed mesh bytes of a live slab is
/// `use_after_free`.
/// 4: `kind` may be `non_fatal_fault` (a fault the driver recovered from, reported by
/// `VK_KHR_device_fault` with masked reports while the device lives on), with [`NonFatalInfo`] in
/// `non_fatal`. Reports of version 3 read as before (`non_fatal` is absent: null).
/// 5: `running`: the pipelines that may have been running where the GPU stopped (named by label,
/// shader files, material and entities). Reports of version 4 read as before (`running` is null).
/// 6: `after_earlier_hang`: a hang before any frame finished, shortly after an earlier run's GPU
/// hang report on the same GPU, names that report and joins its Sentry issue. Reports of version 5
/// read as before (`after_earlier_hang` is null).
/// 7: `video_memory`: each heap's size, usage and budget at the fault, whether one was near its
/// budget, and the allocations that failed since the device was made. Reports of version 6 read as
/// before (`video_memory` is null).
pub const SCHEMA_VERSION: u32 = 7;

/// What happened to the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashKind {
    /// The driver reported `VK_ERROR_DEVICE_LOST`.
    DeviceLost,
    /// Submitted GPU work stopped completing while the device was not reported lost.
    GpuHang,
    /// A fault the driver recovered from (a masked `VK_KHR_device_fault` report, `DEVICE_LOST`
    /// clear): the game went on. The same bug may lose the device on another player's GPU.
    NonFatalFault,
}

/// What a `non_fatal_fault` report stands for: one or more masked faults with the same
/// fingerprint, counted under the per-fingerprint rate limit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NonFatalInfo {
    /// Masked faults this report counts (the first one's addresses are the report's faults).
    pub count: u64,
    /// Milliseconds from the first to the last fault counted.
    pub span_ms: u64,
    /// `VkDeviceFaultFlagBitsKHR` names of the first fault's report, e.g. `MEMORY_ADDRESS`.
    pub flags: Vec<String>,
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
    /// The pipelines that may have been running in [`CrashReport::gpu_stage`], ranked, with their
    /// shader files and materials (schema 5); null without a stage or where the application told
    /// the reporter of no pipelines.
    #[serde(default)]
    pub running: Option<RunningPipelines>,
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
    /// Set when this report is a device loss that came after this same fault's GPU hang report had
    /// been sent: the file is the hang report's (same id), rewritten with the loss's facts, and it
    /// reaches Sentry as a second event of the hang's issue.
    #[serde(default)]
    pub follows_hang: Option<HangFollowUp>,
    /// For `non_fatal_fault`: how many masked faults the report counts (schema 4).
    #[serde(default)]
    pub non_fatal: Option<NonFatalInfo>,
    /// Set on a hang before any frame of this run finished, minutes after an earlier run reported a
    /// GPU hang on the same GPU: most likely the GPU was still busy with that run's work (schema 6).
    #[serde(default)]
    pub after_earlier_hang: Option<EarlierHang>,
    /// Video memory at the fault: heaps, usage and budget, failed allocations (schema 7); null
    /// where it could not be read (not Vulkan, or the read timed out) and in older reports.
    #[serde(default)]
    pub video_memory: Option<VideoMemory>,
}

/// The earlier run's GPU hang report that a hang at this run's start most likely continues.
///
/// On the H100 host (driver 580.159.04, no display) an endless shader kept the GPU busy for other
/// processes for 8+ minutes after its own process had ended, and each process started meanwhile
/// hung in its first frame, in whatever pass came first: without this link each would be an issue
/// of its own, blaming a pipeline that only waited its turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierHang {
    /// The earlier report's id (its file `gpu-crash-<time>-<id>.json` in the same folder).
    pub report_id: String,
    /// The Sentry event id it was sent under.
    pub event_id: String,
    /// The Sentry issue's fingerprint this report joins (the earlier report's own, or the issue
    /// it joined in turn).
    pub fingerprint: Vec<String>,
    /// The earlier run's process id.
    pub process_id: u32,
    /// Milliseconds from the earlier report to this one.
    pub ms_before: u64,
}

/// How a device loss joins the GPU hang report of the same fault, sent before the loss came.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HangFollowUp {
    /// The Sentry event id the hang report was sent under (its report id).
    pub hang_event_id: String,
    /// This report's own Sentry event id (Sentry drops a second event with an id it has seen), kept
    /// so a retried upload is still one event.
    pub event_id: String,
    /// The hang event's fingerprint: the loss's event joins the hang's issue.
    pub fingerprint: Vec<String>,
    /// Milliseconds from the hang report to the loss.
    pub loss_after_ms: u64,
}

fn first_generation() -> u32 {
    1
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
    /// The Sentry event id this report is sent under: its id, or for a loss that follows its hang
    /// report, the follow-up's own ([`HangFollowUp::event_id`]).
    pub fn event_id(&self) -> &str {
        self.follows_hang
            .as_ref()
            .map_or(self.id.as_str(), |f| f.event_id.as_str())
    }

    /// The report's file name: `gpu-crash-<time>-<id>.json`, with the whole id, so two reports of
    /// the same millisecond never share a name.
    pub fn file_name(&self) -> String {
        format!("gpu-crash-{}-{}.json", self.timestamp_ms, self.id)
    }
}
