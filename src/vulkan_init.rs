//! The reporter's callbacks on Bevy's `raw_vulkan_init`: they run inside `RenderPlugin::build`, while
//! wgpu creates the instance and the device, and say what they enabled in Bevy's
//! `AdditionalVulkanFeatures` for other plugins to see.

use bevy::prelude::*;
use bevy::render::renderer::raw_vulkan_init::RawVulkanInitSettings;
use bevy::render::RenderPlugin;
use gpu_crash_core::CrashReporter;

/// Marker in Bevy's `AdditionalVulkanFeatures`: `VK_EXT_device_address_binding_report` is on.
pub struct AddressBindingReportEnabled;
/// Marker in Bevy's `AdditionalVulkanFeatures`: `VK_EXT_device_fault` is on.
pub struct DeviceFaultExtEnabled;
/// Marker in Bevy's `AdditionalVulkanFeatures`: `VK_KHR_device_fault` is on.
pub struct DeviceFaultKhrEnabled;
/// Marker in Bevy's `AdditionalVulkanFeatures`: `VK_KHR_shader_abort` is on.
pub struct ShaderAbortKhrEnabled;

/// Registers the reporter's instance and device callbacks on Bevy's settings.
pub(crate) fn install(app: &mut App, reporter: &CrashReporter) {
    let on_instance = reporter.clone();
    let on_device = reporter.clone();
    let mut settings = app
        .world_mut()
        .get_resource_or_init::<RawVulkanInitSettings>();
    // SAFETY: the instance callback only adds an extension the loader reports as available; the
    // device callback only adds extensions the device offers and enables features it supports,
    // and removes nothing.
    unsafe {
        settings.add_create_instance_callback(move |args, _features| {
            on_instance.on_create_instance(args)
        });
        settings.add_create_device_callback(move |args, adapter, markers| {
            let enabled = on_device.on_create_device(args, adapter);
            if enabled.report_address_binding {
                markers.insert::<AddressBindingReportEnabled>();
            }
            if enabled.device_fault_ext {
                markers.insert::<DeviceFaultExtEnabled>();
            }
            if enabled.device_fault_khr {
                markers.insert::<DeviceFaultKhrEnabled>();
            }
            if enabled.shader_abort {
                markers.insert::<ShaderAbortKhrEnabled>();
            }
        });
    }
}

/// Says once what our dependency does to the app's backend choice: Bevy's `raw_vulkan_init` feature,
/// which this crate turns on for the whole app, makes Bevy 0.19 create a Vulkan-only instance and
/// ignore `WgpuSettings::backends` (other backends only if Vulkan fails to start). An app that asked
/// for a backend set without Vulkan (e.g. DX12 only) gets Vulkan anyway: say so.
pub(crate) fn warn_if_vulkan_not_asked_for(app: &App) {
    use bevy::render::settings::{Backends, RenderCreation};
    let from_settings = app
        .get_added_plugins::<RenderPlugin>()
        .first()
        .and_then(|render| match &render.render_creation {
            RenderCreation::Automatic(settings) => settings.backends,
            RenderCreation::Manual(_) => None,
        });
    let from_env = std::env::var("WGPU_BACKEND")
        .ok()
        .map(|v| Backends::from_comma_list(&v));
    if let Some(asked) = from_env.or(from_settings) {
        if !asked.contains(Backends::VULKAN) {
            warn!(
                "GPU crash reporter: the app asks for {asked:?} without Vulkan, but this plugin turns \
                 on Bevy's `raw_vulkan_init`, under which Bevy 0.19 always tries Vulkan first and \
                 ignores the backend setting; the game renders through Vulkan where a Vulkan driver \
                 exists. Remove the plugin for a non-Vulkan build."
            );
        }
    }
}
