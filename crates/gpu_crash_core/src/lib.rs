//! # gpu_crash_core
//!
//! GPU crash reports that name the guilty GPU object, for any wgpu application on Vulkan: an editor,
//! a CAD tool, an emulator, a game on its own engine. `bevy_gpu_crash_reporter` is this crate behind
//! a Bevy plugin.
//!
//! ```no_run
//! use gpu_crash_core::{CrashReporter, ReporterSettings};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let reporter = CrashReporter::start(&ReporterSettings::default())?;
//! let instance = reporter.create_instance(wgpu::InstanceDescriptor::new_without_display_handle());
//! let adapter = instance.request_adapter(&Default::default()).await?;
//! // The fault extensions enabled, the device watched, wgpu's device-lost callback hooked.
//! let (device, queue) = reporter.request_device(&adapter, &Default::default()).await?;
//! # let scratch = device.create_buffer(&wgpu::BufferDescriptor {
//! #     label: Some("scratch"), size: 256, usage: wgpu::BufferUsages::COPY_DST, mapped_at_creation: false });
//! // Each frame: its work inside GPU breadcrumbs of its labels, then the frame's completion marker
//! // (the hang watchdog reads it).
//! let mut frame = reporter.begin_frame(&device, &queue);
//! frame.encode("main pass", |encoder| {
//!     encoder.clear_buffer(&scratch, 0, None);
//! });
//! frame.submit();
//! if reporter.is_device_lost() {
//!     // The report's verdict printed last, the process ended without exit handlers.
//!     reporter.end_process(1);
//! }
//! // At exit: reports and uploads finish (bounded), then the device may go.
//! reporter.at_exit();
//! reporter.detach();
//! # Ok(()) }
//! ```
//!
//! ## How it works
//!
//! ```text
//! driver threads ─▶ messenger callback ─▶ BindingRing ─▶ AddressIndex ─▶ resolver ─▶ report ─▶ Sentry
//!                   (no alloc, no lock)   (lock-free)    (live + freed)
//! ```
//!
//! The callbacks enable `VK_EXT_debug_utils`, `VK_EXT_device_address_binding_report`,
//! `VK_EXT_device_fault`, `VK_KHR_device_fault` and `VK_KHR_shader_abort` where the driver offers
//! them; every GPU address range bound and freed is recorded; on a device loss or a GPU hang a
//! [`report::CrashReport`] is written to disk, then uploaded to Sentry.
//!
//! The flow is one-way, a module each: `capture` -> `index` -> `resolve` -> `report` -> `deliver`,
//! with the raw Vulkan in `vulkan`, the GPU's progress in `progress`, the application's assets in
//! `assets`, its pipelines and draw lists in `pipelines` (what code was running where the GPU
//! stopped), and the crash path (sessions, watchdog, loss handling) in `crash`; [`CrashReporter`]
//! on top.

#![warn(missing_docs)]
// Internals that only this workspace's tests, benches and examples reach (`test_support`) are dead
// in a normal build.
#![cfg_attr(not(feature = "test-support"), allow(dead_code))]

mod assets;
mod background;
mod capture;
mod crash;
mod data_dir;
mod deliver;
mod frame;
mod fs_seam;
mod guard;
mod index;
mod pipelines;
mod prefetch;
mod progress;
pub mod report;
mod reporter;
mod resolve;
mod safe_fs;
mod serde_hex;
mod settings;
#[cfg(all(target_os = "linux", any(test, feature = "test-support")))]
mod test_permissions;
mod time_box;
mod vulkan;
mod wgpu_device;

pub use assets::{
    AssetKey, AssetMap, AssetName, AssetUsers, ImageTenant, ListedUsers, MeshData, MeshTenant,
    MeshUser, SharedAssetMap, Stamp,
};
pub use crash::{BreadcrumbRecorder, Mark, WrittenReports};
pub use data_dir::{game_data_dir, user_data_dir, OUTBOX_DIR_NAME, REPORTS_DIR_NAME};
pub use deliver::{
    envelope_report_id, outbox_dir_of, session_files, CrashLoopLimit, DeliverySettings, Dsn,
    DsnError, FlushSummary, Outbox, OutboxError, SessionFileState, SessionTracking, UploadConsent,
    UploadState, DEFAULT_OUTBOX_NAME, OUTBOX_POINTER_NAME,
};
pub use frame::GpuFrame;
pub use pipelines::{
    DrawnEntity, PassPipelines, PipelineInfo, PipelineKind, PipelineLedger, PipelineUse,
    PipelineUsers, ShaderStage,
};
pub use progress::{FRAME_LABEL, PRE_CAMERA_LABEL};
pub use reporter::{AttachedDevice, CrashReporter, IndexedAssets, StartError};
pub use settings::{OnHang, ReporterSettings, SettingsError};
pub use vulkan::markers::BreadcrumbWriter;
pub use vulkan::texture::{image_placement, ImagePlacement};
pub use vulkan::{
    DriverRule, FaultFeatures, GpuCrashCapabilities, ProbeError, DRIVER_ID_AMD_PROPRIETARY,
};
pub use wgpu_device::DeviceError;

/// Internals for this workspace's tests, benches and examples (feature `test-support`). Not part
/// of the API: no stability.
#[cfg(feature = "test-support")]
pub mod test_support {
    pub use crate::capture::messenger::{address_binding_callback, MessengerTarget};
    pub use crate::capture::{BindingKind, BindingRecord, BindingRing, RingConsumer};
    pub use crate::deliver::envelope::build_envelope;
    pub use crate::deliver::sentry_event::sentry_event;
    pub use crate::index::indexer::IndexerHandle;
    pub use crate::index::{
        allocator_names, object_type_name, AddressIndex, IndexSettings, IndexStats,
    };
    pub use crate::resolve::{fault_range, resolve, FaultAddress, ResolveContext};
    #[cfg(target_os = "linux")]
    pub use crate::test_permissions::drop_file_permission_override;
    pub use crate::vulkan::messenger::set_cost_floor_now;

    /// An asset map of `meshes` meshes, `images` images and `freed` freed meshes: what
    /// `examples/memory_footprint.rs` weighs.
    pub fn filled_asset_map(meshes: usize, images: usize, freed: usize) -> Box<dyn std::any::Any> {
        Box::new(crate::assets::filled_for_footprint(meshes, images, freed))
    }

    /// Builds and writes the report of a device loss faulting at `address`, from `index`, as the
    /// crash path does once the driver answered its fault query (no allocator report, GPU timeline
    /// or asset map): what `benches/resolve.rs`'s `loss_to_disk` group times. Returns the report's
    /// bytes on disk.
    pub fn loss_report_to_disk(
        index: &mut AddressIndex,
        address: FaultAddress,
        dir: &std::path::Path,
    ) -> Result<u64, crate::report::ReportError> {
        let raw = crate::vulkan::fault::RawFaultInfo {
            addresses: vec![address],
            ..Default::default()
        };
        let (mut report, vendor_binary) = crate::report::report_without_device(
            crate::report::CrashKind::DeviceLost,
            raw,
            index,
            0,
        );
        let path = crate::report::write_report(dir, &mut report, vendor_binary.as_deref())?;
        Ok(std::fs::metadata(path).map_or(0, |m| m.len()))
    }

    /// The reporter's address index, every binding event published so far folded in.
    pub fn index_of(reporter: &crate::CrashReporter) -> std::sync::MutexGuard<'_, AddressIndex> {
        reporter.index()
    }
}
