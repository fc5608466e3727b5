//! Bevy wiring only: settings in, callbacks registered, resources out, one system per frame.

use std::sync::Arc;

use bevy::prelude::*;
use bevy::render::renderer::raw_vulkan_init::RawVulkanInitSettings;
use bevy::render::renderer::RenderDevice;
use bevy::render::{RenderApp, RenderPlugin, RenderStartup};

use crate::index::{IndexSettings, IndexerHandle};
use crate::vulkan::{BindingMessenger, ExtensionRequest, GpuCrashCapabilities, VulkanSetup};
use crate::GpuCrashReporter;

/// Turns GPU crashes into reports that name the guilty GPU object.
///
/// Add it **before** `DefaultPlugins` (it must register its Vulkan callbacks before `RenderPlugin`
/// creates the device):
///
/// ```no_run
/// use bevy::prelude::*;
/// use bevy_gpu_crash_reporter::GpuCrashReporterPlugin;
///
/// App::new()
///     .add_plugins(GpuCrashReporterPlugin::default())
///     .add_plugins(DefaultPlugins)
///     .run();
/// ```
#[derive(Clone, Debug)]
pub struct GpuCrashReporterPlugin {
    /// Enable `VK_EXT_device_address_binding_report` where offered and record every GPU address
    /// range that is bound and unbound, so a faulting address can be named. Default: `true`.
    pub capture_address_bindings: bool,
    /// Enable `VK_EXT_device_fault` / `VK_KHR_device_fault` (+ `VK_KHR_shader_abort`) where offered,
    /// so a device loss comes with fault addresses and vendor data. Default: `true`.
    pub device_fault: bool,
    /// Binding events the lock-free ring holds between two drains (rounded up to a power of two;
    /// 128 bytes each). Events beyond it are counted as dropped. Default: 32,768 (4 MiB).
    pub binding_ring_capacity: usize,
    /// Live GPU address ranges indexed; binds beyond it are counted, not stored. Default: 1,048,576.
    pub max_live_bindings: usize,
    /// Recently freed ranges kept for use-after-free verdicts (D3D12 DRED keeps 65,536). Default: 65,536.
    pub max_freed_bindings: usize,
    /// Most recent binding events kept for breadcrumbs. Default: 4,096.
    pub max_recent_events: usize,
}

impl Default for GpuCrashReporterPlugin {
    fn default() -> Self {
        let index = IndexSettings::default();
        Self {
            capture_address_bindings: true,
            device_fault: true,
            binding_ring_capacity: 32_768,
            max_live_bindings: index.max_live_bindings,
            max_freed_bindings: index.max_freed_bindings,
            max_recent_events: index.max_recent_events,
        }
    }
}

/// The shared Vulkan setup, kept in the main world so `finish` and the render world can reach it.
#[derive(Resource, Clone)]
struct VulkanSetupHandle(Arc<VulkanSetup>);

/// Owns the binding messenger in the render world, next to a clone of the render device: the device
/// keeps the Vulkan instance alive, so the messenger is always destroyed before its instance.
#[derive(Resource)]
pub struct BindingMessengerGuard {
    messenger: BindingMessenger,
    _device: RenderDevice,
}

impl BindingMessengerGuard {
    /// The registered messenger.
    pub fn messenger(&self) -> &BindingMessenger {
        &self.messenger
    }
}

impl Plugin for GpuCrashReporterPlugin {
    fn build(&self, app: &mut App) {
        let indexer = match IndexerHandle::spawn(
            self.binding_ring_capacity,
            IndexSettings {
                max_live_bindings: self.max_live_bindings,
                max_freed_bindings: self.max_freed_bindings,
                max_recent_events: self.max_recent_events,
            },
        ) {
            Ok(indexer) => Arc::new(indexer),
            Err(err) => {
                error!("GPU crash reporter disabled: could not start its indexer thread: {err}");
                return;
            }
        };
        let mut reporter = GpuCrashReporter::new(indexer.clone());
        if app.is_plugin_added::<RenderPlugin>() {
            let message = "GpuCrashReporterPlugin was added after RenderPlugin, so it cannot enable \
                 the fault extensions on the render device. Add it before DefaultPlugins: \
                 `App::new().add_plugins(GpuCrashReporterPlugin::default()).add_plugins(DefaultPlugins)`";
            error!("{message}");
            reporter.setup_error = Some(message.to_owned());
        } else {
            let setup = VulkanSetup::new(
                indexer.ring().clone(),
                ExtensionRequest {
                    address_binding_report: self.capture_address_bindings,
                    device_fault: self.device_fault,
                },
            );
            setup.install(
                &mut app
                    .world_mut()
                    .get_resource_or_init::<RawVulkanInitSettings>(),
            );
            app.insert_resource(VulkanSetupHandle(setup));
        }
        app.insert_resource(reporter)
            .add_systems(First, advance_capture_frame);
    }

    fn finish(&self, app: &mut App) {
        let Some(setup) = app.world().get_resource::<VulkanSetupHandle>().cloned() else {
            return;
        };
        let capabilities = {
            let outcome = setup.0.outcome();
            outcome.capabilities.clone()
        };
        let capabilities = match capabilities {
            Some(capabilities) => {
                info!("{}", capabilities.summary());
                for line in &capabilities.missing {
                    info!("GPU crash reporter: {line}");
                }
                capabilities
            }
            None => {
                warn!(
                    "GPU crash reporter: the render device was not created through Vulkan \
                     (other backend, or no GPU); GPU crash capture is off"
                );
                GpuCrashCapabilities::default()
            }
        };
        app.insert_resource(capabilities.clone());
        let reporter = app.world().resource::<GpuCrashReporter>().clone();
        if let Some(render_app) = app.get_sub_app_mut(RenderApp) {
            render_app
                .insert_resource(capabilities)
                .insert_resource(reporter)
                .insert_resource(setup)
                .add_systems(RenderStartup, adopt_binding_messenger);
        }
    }
}

/// Runs whenever the render world gets a (new) render device: moves the messenger the device
/// callback registered into a guard that lives exactly as long as that device.
fn adopt_binding_messenger(
    mut commands: Commands,
    setup: Res<VulkanSetupHandle>,
    device: Res<RenderDevice>,
) {
    let mut outcome = setup.0.outcome();
    if let Some(messenger) = outcome.messenger.take() {
        commands.insert_resource(BindingMessengerGuard {
            messenger,
            _device: device.clone(),
        });
    }
    if let Some(capabilities) = outcome.capabilities.clone() {
        commands.insert_resource(capabilities);
    }
}

fn advance_capture_frame(reporter: Res<GpuCrashReporter>, mut frame: Local<u64>) {
    *frame += 1;
    reporter.indexer.frame_tick(*frame);
}
