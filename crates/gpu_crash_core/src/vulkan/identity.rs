//! The GPU's identity as reports name it: name, vendor, driver, versions, memory.

use std::ffi::CStr;

use ash::vk;

use super::capabilities::{
    decode_api_version, decode_driver_version, vendor_name, GpuCrashCapabilities,
};

/// The GPU's identity (name, vendor, driver, versions, memory); every capability off.
///
/// # Safety
/// `physical_device` belongs to `instance`.
pub(crate) unsafe fn identity(
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
) -> GpuCrashCapabilities {
    // SAFETY: the caller's contract.
    let properties = unsafe { instance.get_physical_device_properties(physical_device) };
    GpuCrashCapabilities {
        gpu_name: properties
            .device_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        vendor_id: properties.vendor_id,
        device_id: properties.device_id,
        vendor_name: vendor_name(properties.vendor_id).to_owned(),
        device_type: format!("{:?}", properties.device_type),
        driver_version_raw: properties.driver_version,
        driver_version: decode_driver_version(properties.vendor_id, properties.driver_version),
        api_version: decode_api_version(properties.api_version),
        memory_size_mb: device_local_mib(instance, physical_device),
        ..driver_identity(instance, physical_device, properties.api_version)
    }
}

/// Sum of the device-local heaps in MiB.
fn device_local_mib(instance: &ash::Instance, physical_device: vk::PhysicalDevice) -> u64 {
    // SAFETY: valid instance and physical device handles from wgpu.
    let memory = unsafe { instance.get_physical_device_memory_properties(physical_device) };
    memory
        .memory_heaps_as_slice()
        .iter()
        .filter(|heap| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|heap| heap.size)
        .sum::<u64>()
        / (1024 * 1024)
}

/// Driver name and info from `VkPhysicalDeviceDriverProperties` (Vulkan 1.2), empty before that.
fn driver_identity(
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
    api_version: u32,
) -> GpuCrashCapabilities {
    if api_version < vk::API_VERSION_1_2 {
        return GpuCrashCapabilities::default();
    }
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut properties2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver);
    // SAFETY: Vulkan 1.2 device: the driver-properties structure is core and may be chained.
    unsafe { instance.get_physical_device_properties2(physical_device, &mut properties2) };
    let text = |r: Result<&CStr, _>| {
        r.map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    GpuCrashCapabilities {
        driver_name: text(driver.driver_name_as_c_str()),
        driver_info: text(driver.driver_info_as_c_str()),
        driver_id: driver.driver_id.as_raw(),
        ..Default::default()
    }
}
