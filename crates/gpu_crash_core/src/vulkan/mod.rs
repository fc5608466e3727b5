//! Everything that touches raw Vulkan: enabling the fault extensions on the device through wgpu's
//! instance and device creation callbacks (`Instance::init_with_callback`,
//! `Adapter::open_with_callback`; Bevy's `raw_vulkan_init` calls them), registering the binding
//! messenger, reading the GPU's identity, asking the device what faulted, reading video memory at
//! the fault (`VK_EXT_memory_budget`, `VK_EXT_device_memory_report`).
//!
//! The callbacks run while wgpu creates the instance and the device.
//! Whatever the driver lacks is marked off in [`GpuCrashCapabilities::missing`]; the game runs as before.

mod capabilities;
mod driver_rule;
pub(crate) mod exact;
pub mod fault;
mod fault_query;
mod features;
mod identity;
pub(crate) mod markers;
mod memory_budget;
mod memory_report;
pub(crate) mod messenger;
mod plan;
mod probe;
mod request;
mod setup;
pub mod texture;

pub use capabilities::GpuCrashCapabilities;
pub use driver_rule::{DriverRule, DRIVER_ID_AMD_PROPRIETARY};
pub use fault_query::{query_device_fault, wait_for_fault_reports};
pub use features::FaultFeatures;
pub(crate) use markers::create_marker_buffer;
#[cfg(test)]
pub(crate) use memory_budget::HeapReading;
pub(crate) use memory_budget::{read_video_memory, VideoMemoryReading};
#[cfg(test)]
pub(crate) use memory_report::LastAllocationFailure;
pub(crate) use memory_report::{AllocationFailureReading, MemoryReportCounters};
pub use messenger::BindingMessenger;
pub(crate) use plan::progress_markers_off;
pub use probe::ProbeError;
pub use request::ExtensionRequest;
pub use setup::VulkanSetup;
