//! The plugin's resources: the reporter, what the driver gave it, and the reports written. Each is
//! the core's type as a Bevy resource (its methods and fields through `Deref`).

use std::ops::Deref;
use std::path::PathBuf;

use bevy::prelude::Resource;
use gpu_crash_core::{CrashReporter, WrittenReports};

/// The reporter's live state, in both the main and the render world: what it has indexed, the
/// settings it could not use, and (through `Deref`) every [`CrashReporter`] method.
#[derive(Resource, Clone)]
pub struct GpuCrashReporter {
    core: CrashReporter,
    setup_error: Option<String>,
}

impl GpuCrashReporter {
    pub(crate) fn new(core: CrashReporter, setup_error: Option<String>) -> Self {
        Self { core, setup_error }
    }

    /// Why the plugin could not hook the render device (e.g. added after `RenderPlugin`), if so.
    pub fn setup_error(&self) -> Option<&str> {
        self.setup_error.as_deref()
    }
}

impl Deref for GpuCrashReporter {
    type Target = CrashReporter;

    fn deref(&self) -> &CrashReporter {
        &self.core
    }
}

/// GPU identity and the crash-reporting capabilities that ended up enabled on the render device
/// (fields through `Deref`). Inserted into both the main and the render world once the renderer
/// exists, and again for each new render device; everything is off when the backend is not Vulkan.
#[derive(Resource, Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuCrashCapabilities(pub gpu_crash_core::GpuCrashCapabilities);

impl Deref for GpuCrashCapabilities {
    type Target = gpu_crash_core::GpuCrashCapabilities;

    fn deref(&self) -> &gpu_crash_core::GpuCrashCapabilities {
        &self.0
    }
}

/// Reports written during this run, newest last (main world).
#[derive(Resource, Clone, Default, Debug)]
pub struct GpuCrashReports(pub(crate) WrittenReports);

impl GpuCrashReports {
    /// A snapshot of the paths.
    pub fn written(&self) -> Vec<PathBuf> {
        self.0.written()
    }
}

impl Deref for GpuCrashReports {
    type Target = WrittenReports;

    fn deref(&self) -> &WrittenReports {
        &self.0
    }
}
