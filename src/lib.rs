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
//! The work is done by [`gpu_crash_core`], which any wgpu application can use; this crate is its
//! Bevy adapter: the plugin registers the core's callbacks on Bevy's `raw_vulkan_init`, attaches
//! each render device, keeps the frame's GPU ledger and Core3d stage breadcrumbs in the render
//! graph, maps Bevy's meshes and images to the GPU ranges they live in, and hears of a device loss
//! from Bevy's `RenderErrorHandler`. On a device loss or GPU hang a [`report::CrashReport`] is
//! written to disk, then uploaded to Sentry.
//!
//! ## The public API
//!
//! - [`GpuCrashReporterPlugin`] and its settings ([`DeliverySettings`], [`OnHang`],
//!   [`CrashLoopLimit`], [`UploadConsent`], [`Dsn`]), checked at startup ([`SettingsError`]);
//! - the resources [`GpuCrashReporter`], [`GpuCrashCapabilities`] and [`GpuCrashReports`];
//! - the report model, [`report`], read back with serde ([`report::read_report`]);
//! - GPU breadcrumbs for a game's own passes: [`GpuBreadcrumbs`];
//! - for tools that work on saved reports without a game: the [`Outbox`] that uploads them as the
//!   plugin does, and where games keep them ([`game_data_dir`]).
//!
//! Everything else is internal and may change in any release.

#![warn(missing_docs)]

mod assets;
mod breadcrumbs;
#[cfg(feature = "pbr")]
mod pipelines;
mod plugin;
mod render;
mod resources;
#[cfg(feature = "vulkan")]
mod vulkan_init;

pub use breadcrumbs::GpuBreadcrumbs;
pub use gpu_crash_core;
pub use gpu_crash_core::report;
pub use gpu_crash_core::{
    game_data_dir, user_data_dir, BreadcrumbWriter, CrashLoopLimit, DeliverySettings, DriverRule,
    Dsn, DsnError, FlushSummary, IndexedAssets, OnHang, Outbox, OutboxError, ReporterSettings,
    SessionTracking, SettingsError, UploadConsent, UploadState, OUTBOX_DIR_NAME, REPORTS_DIR_NAME,
};
/// A cost measurement's switch (feature `cost-switches`; BENCHMARKS.md), not for games.
#[cfg(feature = "cost-switches")]
#[doc(hidden)]
pub use pipelines::set_pipeline_naming_paused;
pub use plugin::{GpuCrashReporterPlugin, BEVY_VERSION};
pub use resources::{GpuCrashCapabilities, GpuCrashReporter, GpuCrashReports};
