//! The crash report: a serde model with a schema version, written to disk atomically before any
//! upload is attempted.
//!
//! Addresses are serialised as `"0x…"` strings: developers read GPU addresses in hex, and JSON numbers
//! above 2^53 lose precision in JavaScript dashboards.

mod build;
mod file;
mod html_text;
mod model;
mod page;
mod page_map;
mod page_timeline;
mod video_memory;
mod view;

pub use crate::capture::BindingKind;
pub use crate::index::IndexStats;
pub use crate::pipelines::{
    DrawnEntity, ExactCommand, ExactDraws, PipelineCandidate, PipelineKind, RunningBasis,
    RunningPipelines, ShaderStage,
};
pub use crate::progress::{BreadcrumbState, FrameBreadcrumbs, GpuBreadcrumb};
pub use crate::resolve::{
    AssetKind, AssetUser, BindingEventEntry, Culprit, FaultEntry, FaultVerdict, GpuAsset,
    ObjectState,
};
pub use crate::vulkan::fault::{FaultAccess, VendorBinaryHeader, VendorInfo};
pub use crate::vulkan::GpuCrashCapabilities;
#[cfg(test)]
pub(crate) use build::hang_report_for_tests;
#[cfg(feature = "test-support")]
pub(crate) use build::report_without_device;
pub(crate) use build::{add_hang_info, build_report, fault_cut, CrashContext};
#[cfg(any(test, feature = "test-support"))]
pub(crate) use file::write_report;
pub use file::{
    read_report, read_vendor_binary, ReportError, MAX_REPORT_BYTES, MAX_VENDOR_BINARY_BYTES,
};
pub(crate) use file::{
    remove_abandoned_temp_files, report_from_read, write_atomically, write_atomically_locked,
    write_atomically_locked_releasing, write_report_held,
};
pub use model::*;
pub use page::html_page;
pub use video_memory::{
    near_budget, AllocationFailures, FailedAllocation, MemoryHeap, VideoMemory, HEAPS_TIMED_OUT,
    NEAR_BUDGET_PERCENT, NO_BUDGET, NO_MEMORY_REPORT,
};
pub use view::{KindWords, NearObject, ReportView};
