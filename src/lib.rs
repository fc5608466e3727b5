//! # bevy_gpu_crash_reporter
//!
//! A Bevy plugin that turns GPU crashes of shipped games into reports that name the guilty GPU
//! object, instead of a bare `VK_ERROR_DEVICE_LOST`.
//!
//! ## Quick start
//!
//! ```no_run
//! use bevy::prelude::*;
//! use bevy_gpu_crash_reporter::GpuCrashReporterPlugin;
//!
//! App::new()
//!     // Before DefaultPlugins: it enables extensions while the render device is created.
//!     .add_plugins(GpuCrashReporterPlugin::default())
//!     .add_plugins(DefaultPlugins)
//!     .run();
//! ```
//!
//! ## How it works
//!
//! ```text
//! driver threads ─▶ messenger callback ─▶ BindingRing ─▶ AddressIndex ─▶ resolver ─▶ report ─▶ Sentry
//!                   (no alloc, no lock)   (lock-free)    (live + freed)
//! ```
//!
//! - [`vulkan`]: enables `VK_EXT_debug_utils`, `VK_EXT_device_address_binding_report`,
//!   `VK_EXT_device_fault`, `VK_KHR_device_fault` and `VK_KHR_shader_abort` where offered, through
//!   Bevy's `raw_vulkan_init`, and registers the binding messenger. Raw Vulkan lives only there.
//! - [`capture`]: the messenger callback and the lock-free [`capture::BindingRing`].
//! - [`index`]: the [`index::AddressIndex`] of live and recently freed GPU address ranges with names.
//!
//! [`GpuCrashCapabilities`] says what the driver gave; [`GpuCrashReporter`] gives access to the index.

mod breadcrumbs;
pub mod capture;
mod crash;
mod data_dir;
pub mod deliver;
pub mod index;
mod plugin;
pub mod postmortem;
mod progress;
pub mod report;
pub mod resolve;
pub mod vulkan;

use std::sync::{Arc, MutexGuard};

use bevy::prelude::Resource;

pub use breadcrumbs::{BreadcrumbRecorder, GpuBreadcrumbs};
pub use crash::CrashLoopLimit;
pub use plugin::{BindingMessengerGuard, GpuCrashReporterPlugin, GpuCrashReports};
pub use postmortem::OnHang;
pub use vulkan::markers::BreadcrumbWriter;
pub use vulkan::GpuCrashCapabilities;

/// The Bevy version this crate is built against (checked against Cargo.lock by a test).
pub const BEVY_VERSION: &str = "0.19.1";

use index::{AddressIndex, IndexerHandle};

/// The reporter's live state, in both the main and the render world.
#[derive(Resource, Clone)]
pub struct GpuCrashReporter {
    indexer: Arc<IndexerHandle>,
    setup_error: Option<String>,
}

impl GpuCrashReporter {
    fn new(indexer: Arc<IndexerHandle>) -> Self {
        Self {
            indexer,
            setup_error: None,
        }
    }

    /// Folds every binding event published so far and returns the locked index.
    pub fn index(&self) -> MutexGuard<'_, AddressIndex> {
        self.indexer.flush()
    }

    /// Binding events the ring had to drop because it was full (never silently lost).
    pub fn binding_events_dropped(&self) -> u64 {
        self.indexer.ring().dropped()
    }

    /// Why the plugin could not hook the render device (e.g. added after `RenderPlugin`), if so.
    pub fn setup_error(&self) -> Option<&str> {
        self.setup_error.as_deref()
    }

    /// Ring position so far: binding events from here on are later than now.
    pub(crate) fn ring_position(&self) -> u64 {
        self.indexer.ring().claimed()
    }

    /// The main world's frame counter, as stamped on binding events.
    pub(crate) fn current_frame(&self) -> u64 {
        self.indexer.ring().current_frame()
    }
}
