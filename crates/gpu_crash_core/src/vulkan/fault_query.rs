//! Asking a device what faulted, through whichever fault extension it has.

use super::capabilities::GpuCrashCapabilities;
use super::fault;

/// Asks the device what faulted: KHR reports (waiting up to `khr_timeout`) and, after a loss, the
/// KHR debug info and the EXT fault info. Safe to call on a lost device; what failed is in
/// `errors`; never panics on driver errors. `earlier`: KHR reports of this fault that were drained
/// before (by the non-fatal fault watch, which drains whatever the driver has), read first.
pub fn query_device_fault(
    device: &wgpu::Device,
    capabilities: &GpuCrashCapabilities,
    khr_timeout: std::time::Duration,
    device_lost: bool,
    earlier: &[fault::KhrFaultReport],
) -> fault::RawFaultInfo {
    let mut info = fault::RawFaultInfo::default();
    if !capabilities.has_device_fault() {
        info.add_khr_reports(earlier);
        return info;
    }
    query_vulkan_device_fault(
        device,
        capabilities,
        khr_timeout,
        device_lost,
        earlier,
        info,
    )
}

/// Waits up to `timeout` for `VK_KHR_device_fault` reports and drains them, without the debug info
/// (for a device that lives on: masked faults are reported with `DEVICE_LOST` clear). Nothing
/// without `VK_KHR_device_fault`. A wait that ends without a report is no error.
pub fn wait_for_fault_reports(
    device: &wgpu::Device,
    capabilities: &GpuCrashCapabilities,
    timeout: std::time::Duration,
) -> (Vec<fault::KhrFaultReport>, Vec<fault::FaultQueryError>) {
    if !capabilities.device_fault_khr {
        return (Vec::new(), Vec::new());
    }
    // SAFETY: we only read raw handles and call the fault query, which the spec allows at any time.
    let Some(hal) = (unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        return (Vec::new(), vec![fault::FaultQueryError::NotVulkan]);
    };
    let instance = hal.shared_instance().raw_instance();
    let timeout_ns = timeout.as_nanos().min(u128::from(u64::MAX)) as u64;
    // SAFETY: VK_KHR_device_fault is enabled on this live device (capabilities say so; the caller
    // holds a clone of the device).
    let (reports, mut errors) =
        unsafe { fault::drain_khr_reports(instance, hal.raw_device().handle(), timeout_ns) };
    errors.retain(|e| {
        !matches!(
            e,
            fault::FaultQueryError::Driver {
                result: ash::vk::Result::TIMEOUT,
                ..
            }
        )
    });
    (reports, errors)
}

/// [`query_device_fault`] on a device built with the Vulkan backend.
fn query_vulkan_device_fault(
    device: &wgpu::Device,
    capabilities: &GpuCrashCapabilities,
    khr_timeout: std::time::Duration,
    device_lost: bool,
    earlier: &[fault::KhrFaultReport],
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
                earlier,
            )
        };
    } else {
        info.add_khr_reports(earlier);
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
