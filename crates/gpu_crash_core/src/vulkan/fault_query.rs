//! Asking a device what faulted, through whichever fault extension it has.

use super::capabilities::GpuCrashCapabilities;
use super::fault;

/// Asks the device what faulted: KHR reports (waiting up to `khr_timeout`) and, after a loss, the
/// KHR debug info and the EXT fault info. Safe to call on a lost device; what failed is in
/// `errors`; never panics on driver errors.
pub fn query_device_fault(
    device: &wgpu::Device,
    capabilities: &GpuCrashCapabilities,
    khr_timeout: std::time::Duration,
    device_lost: bool,
) -> fault::RawFaultInfo {
    let info = fault::RawFaultInfo::default();
    if !capabilities.has_device_fault() {
        return info;
    }
    query_vulkan_device_fault(device, capabilities, khr_timeout, device_lost, info)
}

/// [`query_device_fault`] on a device built with the Vulkan backend.
fn query_vulkan_device_fault(
    device: &wgpu::Device,
    capabilities: &GpuCrashCapabilities,
    khr_timeout: std::time::Duration,
    device_lost: bool,
    mut info: fault::RawFaultInfo,
) -> fault::RawFaultInfo {
    // SAFETY: we only read raw handles and call fault queries, which the spec allows on a lost device.
    let Some(hal) = (unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        info.errors.push(fault::FaultQueryError::NotVulkan);
        return info;
    };
    let instance = hal.shared_instance().raw_instance();
    let raw = hal.raw_device();
    if capabilities.device_fault_khr {
        // SAFETY: VK_KHR_device_fault is enabled on this live device (capabilities say so).
        info = unsafe {
            fault::query_khr(
                instance,
                raw.handle(),
                khr_timeout.as_nanos().min(u128::from(u64::MAX)) as u64,
                device_lost,
                capabilities.shader_abort_khr,
            )
        };
    }
    // EXT fault info is defined after a loss only (NVIDIA answers VK_ERROR_UNKNOWN before).
    if capabilities.device_fault_ext && device_lost && info.addresses.is_empty() {
        // SAFETY: VK_EXT_device_fault and deviceFault are enabled on this device.
        let ext =
            unsafe { fault::query_ext(instance, raw, capabilities.device_fault_vendor_binary) };
        let errors = std::mem::take(&mut info.errors);
        let watchdog = info.watchdog_timeout;
        info = fault::RawFaultInfo {
            errors: errors.into_iter().chain(ext.errors.clone()).collect(),
            watchdog_timeout: watchdog,
            ..ext
        };
    }
    info
}
