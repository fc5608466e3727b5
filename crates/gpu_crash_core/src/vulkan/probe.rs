//! What the plugin would get on a GPU, found without Bevy (`gpu-crash doctor`): a device created the
//! way the plugin's device callback creates Bevy's, through the same decisions ([`super::plan`]).

use std::ffi::CStr;

use ash::vk;

use super::capabilities::GpuCrashCapabilities;
use super::driver_rule::DriverRule;
use super::features::FeatureChain;
use super::identity::identity;
use super::markers::{BreadcrumbWriter, MarkerError};
use super::plan;
use super::request::ExtensionRequest;
use crate::capture::BindingRing;

/// Why a GPU could not be probed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The device offers no queue family (nothing could render on it).
    #[error("the device has no queue family")]
    NoQueueFamily,
    /// `vkEnumerateDeviceExtensionProperties` failed.
    #[error("vkEnumerateDeviceExtensionProperties failed: {0}")]
    EnumerateExtensions(vk::Result),
    /// `vkCreateDevice` failed with the extensions and features the plugin would enable.
    #[error("vkCreateDevice with the plugin's extensions failed: {0}")]
    CreateDevice(vk::Result),
}

impl GpuCrashCapabilities {
    /// What the plugin would get on `physical_device`, with its default settings: a device is
    /// created with the extensions and features the plugin's device callback would enable (the
    /// same decisions and the same [`Self::missing`] lines), the binding messenger is registered
    /// and the memory the GPU progress markers need is looked for; then everything is destroyed.
    ///
    /// `instance_api_version` is the version `instance` was created with; `debug_utils` says
    /// whether it has `VK_EXT_debug_utils` enabled (the plugin enables it where the loader offers it).
    ///
    /// # Safety
    /// `instance` was created from `entry` and outlives the call; `physical_device` belongs to it.
    pub unsafe fn probe(
        entry: &ash::Entry,
        instance: &ash::Instance,
        physical_device: vk::PhysicalDevice,
        instance_api_version: u32,
        debug_utils: bool,
    ) -> Result<Self, ProbeError> {
        // SAFETY: valid physical device of `instance` (the caller's contract).
        let offered: Vec<String> =
            unsafe { instance.enumerate_device_extension_properties(physical_device) }
                .map_err(ProbeError::EnumerateExtensions)?
                .iter()
                .filter_map(|e| e.extension_name_as_c_str().ok())
                .map(|n| n.to_string_lossy().into_owned())
                .collect();
        let offered_by_device =
            |name: &CStr| offered.iter().any(|o| o.as_str() == name.to_string_lossy());
        let request = ExtensionRequest::default();
        // SAFETY: the caller's contract.
        let identity = unsafe { identity(instance, physical_device) };
        // SAFETY: the caller's contract.
        let mut plan = unsafe {
            plan::plan_device(
                instance,
                physical_device,
                instance_api_version,
                debug_utils,
                request,
                &offered_by_device,
                plan::binding_report_rule(&DriverRule::defaults(), &identity),
            )
        };
        let request = plan.request_after_rules(request);
        let mut missing = std::mem::take(&mut plan.missing);
        // The messenger is registered before the device, as the plugin does; its events go into a
        // ring nobody reads, dropped with it.
        let (ring, _consumer) = BindingRing::with_capacity(1024);
        // SAFETY: the instance outlives the messenger, dropped at the end of this function.
        let messenger = unsafe {
            plan::register_messenger(entry, instance, debug_utils, request, ring, 1, &mut missing)
        };

        // SAFETY: valid physical device of `instance`.
        let families =
            unsafe { instance.get_physical_device_queue_family_properties(physical_device) };
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::GRAPHICS))
            .or(if families.is_empty() { None } else { Some(0) })
            .ok_or(ProbeError::NoQueueFamily)? as u32;
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let names: Vec<*const std::ffi::c_char> =
            plan.extensions.iter().map(|n| n.as_ptr()).collect();
        let mut create_info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&names);
        let mut chain = FeatureChain::enabling(plan.enabled);
        // SAFETY: the chain is boxed and lives until the end of this function.
        unsafe { chain.prepend_to(plan.enabled, &mut create_info) };
        // SAFETY: valid create info: one queue of an existing family, extensions the device offers,
        // feature structures of those extensions with bits it supports.
        let device = unsafe { instance.create_device(physical_device, &create_info, None) }
            .map_err(ProbeError::CreateDevice)?;

        // The GPU progress markers: the plugin's marker buffer needs a host-visible, host-coherent
        // memory type for a transfer-destination buffer; its writer follows VK_AMD_buffer_marker.
        // SAFETY: `device` is a live device of `physical_device` of `instance`.
        let (gpu_progress, breadcrumbs) =
            match unsafe { marker_memory_type(instance, physical_device, &device) } {
                Ok(()) => (
                    true,
                    Some(if plan.buffer_marker {
                        BreadcrumbWriter::AmdBufferMarker
                    } else {
                        BreadcrumbWriter::FillBuffer
                    }),
                ),
                Err(err) => {
                    missing.push(plan::progress_markers_off(&err));
                    (false, None)
                }
            };
        // SAFETY: nothing of the device is in use any more.
        unsafe { device.destroy_device(None) };
        let capabilities = GpuCrashCapabilities {
            gpu_progress,
            breadcrumbs,
            ..plan.capabilities(debug_utils, messenger.is_some(), missing, identity)
        };
        drop(messenger);
        Ok(capabilities)
    }
}

/// Whether the device has the memory the plugin's GPU progress markers go into: host-visible and
/// host-coherent, for a transfer-destination buffer (as `markers::MarkerBuffer::create` asks).
///
/// # Safety
/// `device` is a live device of `physical_device` of `instance`.
unsafe fn marker_memory_type(
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
    device: &ash::Device,
) -> Result<(), MarkerError> {
    let info = vk::BufferCreateInfo::default()
        .size(4096)
        .usage(vk::BufferUsageFlags::TRANSFER_DST)
        .sharing_mode(vk::SharingMode::EXCLUSIVE);
    // SAFETY: valid create info on a live device.
    let buffer =
        unsafe { device.create_buffer(&info, None) }.map_err(|result| MarkerError::Vulkan {
            call: "vkCreateBuffer",
            result,
        })?;
    // SAFETY: `buffer` was just created on `device`; it is destroyed right after.
    let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
    // SAFETY: as above.
    unsafe { device.destroy_buffer(buffer, None) };
    // SAFETY: valid physical device of `instance`.
    let memory = unsafe { instance.get_physical_device_memory_properties(physical_device) };
    let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let found = memory
        .memory_types_as_slice()
        .iter()
        .enumerate()
        .any(|(i, t)| {
            requirements.memory_type_bits & (1 << i) != 0 && t.property_flags.contains(wanted)
        });
    if found {
        Ok(())
    } else {
        Err(MarkerError::NoHostCoherentMemory)
    }
}
