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
//! The plugin enables `VK_EXT_debug_utils`, `VK_EXT_device_address_binding_report`,
//! `VK_EXT_device_fault`, `VK_KHR_device_fault` and `VK_KHR_shader_abort` where the driver offers
//! them (through Bevy's `raw_vulkan_init`), records every GPU address range bound and freed, and on a
//! device loss or GPU hang writes a [`report::CrashReport`] to disk, then uploads it to Sentry.
//!
//! ## The public API
//!
//! - [`GpuCrashReporterPlugin`] and its settings ([`DeliverySettings`], [`OnHang`],
//!   [`CrashLoopLimit`], [`UploadConsent`], [`Dsn`]), checked at startup ([`SettingsError`]);
//! - the resources [`GpuCrashReporter`], [`GpuCrashCapabilities`] and [`GpuCrashReports`];
//! - the report model, [`report`], read back with serde ([`report::read_report`]);
//! - GPU breadcrumbs for a game's own passes: [`GpuBreadcrumbs`];
//! - for tools that work on saved reports without a game (the `gpu-crash` CLI): the [`Outbox`]
//!   that uploads them as the plugin does, where games keep them ([`game_data_dir`]), and what the
//!   plugin would get on a GPU ([`GpuCrashCapabilities::probe`]).
//!
//! Everything else is internal and may change in any release.

// Without the `vulkan` feature the pipeline is compiled (the public API stays the same) but never
// started: nothing would call it.
#![cfg_attr(not(feature = "vulkan"), allow(dead_code, unused_imports))]

mod assets;
mod breadcrumbs;
mod capture;
mod crash;
mod data_dir;
mod deliver;
mod index;
mod plugin;
mod progress;
pub mod report;
mod resolve;
mod safe_fs;
mod serde_hex;
mod vulkan;

use std::sync::{Arc, MutexGuard};

use bevy::prelude::Resource;

pub use breadcrumbs::GpuBreadcrumbs;
pub use crash::{CrashLoopLimit, OnHang};
pub use data_dir::{game_data_dir, user_data_dir, OUTBOX_DIR_NAME, REPORTS_DIR_NAME};
pub use deliver::{
    DeliverySettings, Dsn, DsnError, FlushSummary, Outbox, OutboxError, UploadConsent, UploadState,
};
pub use plugin::{GpuCrashReporterPlugin, GpuCrashReports, SettingsError};
pub use vulkan::markers::BreadcrumbWriter;
pub use vulkan::{GpuCrashCapabilities, ProbeError};

/// The Bevy version this crate is built against (checked against Cargo.lock by a test).
pub const BEVY_VERSION: &str = "0.19.1";

/// Internals for this crate's own tests, benches and examples. Not part of the API: no stability.
#[doc(hidden)]
pub mod __test_support {
    pub use crate::capture::messenger::{address_binding_callback, MessengerTarget};
    pub use crate::capture::{BindingKind, BindingRecord, BindingRing, RingConsumer};
    pub use crate::deliver::{build_envelope, sentry_event, FlushSummary, Outbox};
    pub use crate::index::{
        allocator_names, object_type_name, AddressIndex, IndexSettings, IndexStats, IndexerHandle,
    };
    pub use crate::plugin::BindingMessengerGuard;
    pub use crate::resolve::{fault_range, resolve, FaultAddress, ResolveContext};
    pub use crate::vulkan::messenger::set_cost_floor_now;

    /// An asset map holding `meshes` meshes (vertex and index data each, in 16 slabs, paths like a
    /// glTF primitive's) and `images` image assets, then `freed` more meshes placed and removed (the
    /// freed history, bounded): what `examples/memory_footprint.rs` weighs.
    pub fn filled_asset_map(meshes: usize, images: usize, freed: usize) -> Box<dyn std::any::Any> {
        Box::new(crate::assets::filled_for_footprint(meshes, images, freed))
    }

    /// The reporter's address index, every binding event published so far folded in.
    pub fn index_of(reporter: &crate::GpuCrashReporter) -> std::sync::MutexGuard<'_, AddressIndex> {
        reporter.index()
    }
}

use index::{AddressIndex, IndexerHandle};

/// What [`GpuCrashReporter::indexed_assets`] returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexedAssets {
    /// Meshes whose vertex or index data lies in a mesh slab.
    pub meshes: usize,
    /// Image assets with a Vulkan image.
    pub images: usize,
    /// Heap bytes of the asset map, approximately.
    pub bytes: usize,
}

/// The reporter's live state, in both the main and the render world.
#[derive(Resource, Clone)]
pub struct GpuCrashReporter {
    indexer: Arc<IndexerHandle>,
    sessions: crash::DeviceSessions,
    setup_error: Option<String>,
    settings_errors: Vec<plugin::SettingsError>,
}

impl GpuCrashReporter {
    fn new(indexer: Arc<IndexerHandle>, sessions: crash::DeviceSessions) -> Self {
        Self {
            indexer,
            sessions,
            setup_error: None,
            settings_errors: Vec::new(),
        }
    }

    /// Command buffers of the plugin's own (breadcrumb markers and each frame's completion marker)
    /// recorded on the current render device so far: what breadcrumbs cost is counted in these.
    pub fn marker_command_buffers(&self) -> u64 {
        self.sessions
            .current()
            .and_then(|session| {
                let timeline = session.timeline.as_ref()?;
                Some(timeline.marker_command_buffers())
            })
            .unwrap_or(0)
    }

    /// Folds every binding event published so far and returns the locked index.
    pub(crate) fn index(&self) -> MutexGuard<'_, AddressIndex> {
        self.indexer.flush()
    }

    /// What the address index has seen so far (binding events, binds, unbinds, overflows), every
    /// event published so far folded in.
    pub fn index_stats(&self) -> report::IndexStats {
        self.index().stats().clone()
    }

    /// GPU address ranges live now and freed ranges remembered: `(live, freed)`.
    pub fn indexed_ranges(&self) -> (usize, usize) {
        let index = self.index();
        (index.live_len(), index.freed_len())
    }

    /// Bevy assets the reporter can name on the current render device: meshes placed in Bevy's mesh
    /// slabs, image assets, and the heap bytes that map holds (see BENCHMARKS.md for bytes per entry).
    pub fn indexed_assets(&self) -> IndexedAssets {
        let Some(session) = self.sessions.current() else {
            return IndexedAssets::default();
        };
        let map = session.assets.lock();
        IndexedAssets {
            meshes: map.mesh_count(),
            images: map.image_count(),
            bytes: map.memory(),
        }
    }

    /// Binding events the ring had to drop because it was full (never silently lost).
    pub fn binding_events_dropped(&self) -> u64 {
        self.indexer.ring().dropped()
    }

    /// Settings the plugin could not use as given, and what it used instead (each also logged at
    /// startup).
    pub fn settings_errors(&self) -> &[plugin::SettingsError] {
        &self.settings_errors
    }

    /// Why the plugin could not hook the render device (e.g. added after `RenderPlugin`), if so.
    pub fn setup_error(&self) -> Option<&str> {
        self.setup_error.as_deref()
    }

    /// Holds unbinds of render device `generation` back in the index while a fault may have
    /// happened on it and its report is not built (see `AddressIndex::set_holding`); the hold ends
    /// with [`Self::release_hold`] or with the device.
    pub(crate) fn hold_unbinds(&self, generation: u32) {
        self.indexer.hold_unbinds(generation);
    }

    /// Ends the hold of device `generation` (not another device's).
    pub(crate) fn release_hold(&self, generation: u32) {
        self.indexer.release_hold(generation);
    }

    /// Keeps the index on device `generation` while its loss report is built (see
    /// `IndexerHandle::pin_device`).
    pub(crate) fn pin_device(&self, generation: u32) {
        self.indexer.pin_device(generation);
    }

    /// Ends [`Self::pin_device`] of `generation`.
    pub(crate) fn unpin_device(&self, generation: u32) {
        self.indexer.unpin_device(generation);
    }

    /// Panics in the reporter's own crash path caught in this process (each logged, none reached
    /// the game).
    pub fn crash_path_panics(&self) -> u64 {
        crash::caught_panics()
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
