//! What the driver gave us: GPU identity and which crash-reporting features are active.

use serde::{Deserialize, Serialize};

/// GPU identity and the crash-reporting capabilities that ended up enabled on the render device.
///
/// Inserted as a resource into both the main and the render world once the renderer exists.
/// Everything is `false`/empty when the render backend is not Vulkan.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuCrashCapabilities {
    /// `VkPhysicalDeviceProperties::deviceName`, e.g. "NVIDIA H200" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub gpu_name: String,
    /// PCI vendor ID (0x10de NVIDIA, 0x1002 AMD, 0x8086 Intel, 0x10005 Mesa software).
    pub vendor_id: u32,
    /// PCI device ID.
    pub device_id: u32,
    /// Human vendor name derived from `vendor_id`.
    pub vendor_name: String,
    /// `VkPhysicalDeviceType`, e.g. "DISCRETE_GPU" or "CPU".
    pub device_type: String,
    /// `VkPhysicalDeviceDriverProperties::driverName`, e.g. "NVIDIA" or "llvmpipe".
    pub driver_name: String,
    /// `driverInfo`, e.g. "580.159.04" or "Mesa 22.3.6".
    pub driver_info: String,
    /// `VkPhysicalDeviceDriverProperties::driverID` as a number (4 NVIDIA proprietary, 13
    /// llvmpipe); 0 before Vulkan 1.2.
    #[serde(default)]
    pub driver_id: i32,
    /// Raw `driverVersion`.
    pub driver_version_raw: u32,
    /// `driverVersion` decoded the way its vendor encodes it.
    pub driver_version: String,
    /// Device Vulkan API version, e.g. "1.3.230".
    pub api_version: String,
    /// Device-local memory in MiB (sum of `DEVICE_LOCAL` heaps), for Sentry's `gpu.memory_size`.
    #[serde(default)]
    pub memory_size_mb: u64,
    /// `VK_EXT_debug_utils` enabled on the instance (needed for the binding messenger).
    pub debug_utils: bool,
    /// Our address-binding messenger is registered.
    pub binding_messenger: bool,
    /// `VK_EXT_device_address_binding_report` with `reportAddressBinding` enabled.
    pub address_binding_report: bool,
    /// `VK_EXT_device_fault` with `deviceFault` enabled.
    pub device_fault_ext: bool,
    /// `VK_KHR_device_fault` with `deviceFault` enabled.
    pub device_fault_khr: bool,
    /// `deviceFaultVendorBinary` enabled (EXT or KHR): the driver can hand over a vendor crash dump.
    pub device_fault_vendor_binary: bool,
    /// `VK_KHR_shader_abort` with `shaderAbort` enabled.
    pub shader_abort_khr: bool,
    /// `VK_KHR_device_fault`'s `deviceFaultReportMasked` enabled: faults the driver recovered from
    /// are reported while the device lives (the non-fatal fault watch runs).
    #[serde(default)]
    pub device_fault_report_masked: bool,
    /// `VK_AMD_buffer_marker` enabled: breadcrumbs around each render stage.
    #[serde(default)]
    pub buffer_marker: bool,
    /// `VK_EXT_memory_budget` enabled: reports give each heap's usage and budget at the fault.
    #[serde(default)]
    pub memory_budget: bool,
    /// `VK_EXT_device_memory_report` with `deviceMemoryReport` enabled: reports count the
    /// allocations that failed since the device was made.
    #[serde(default)]
    pub device_memory_report: bool,
    /// The GPU writes its progress into memory the watchdog reads: hang detection is on.
    #[serde(default)]
    pub gpu_progress: bool,
    /// How GPU breadcrumbs are written; `None` when there are none.
    #[serde(default)]
    pub breadcrumbs: Option<crate::vulkan::markers::BreadcrumbWriter>,
    /// Exact mode's layer (`VK_LAYER_gpu_crash_exact`) marks every draw and dispatch of this
    /// device: a hang or loss report names the draw the GPU did not finish.
    #[serde(default)]
    pub exact_layer: bool,
    /// Why a capability is off, one short line each (e.g. "VK_EXT_device_fault: not offered by the driver").
    pub missing: Vec<String>,
}

impl GpuCrashCapabilities {
    /// The `missing` line saying why exact mode is off, when it was asked for and is.
    pub fn exact_mode_missing(&self) -> Option<&str> {
        self.missing
            .iter()
            .find(|l| l.starts_with(crate::vulkan::exact::MISSING_PREFIX))
            .map(String::as_str)
    }

    /// True when a device loss can come with fault addresses.
    pub fn has_device_fault(&self) -> bool {
        self.device_fault_ext || self.device_fault_khr
    }

    /// The one startup log line.
    pub fn summary(&self) -> String {
        let on_off = |b: bool| if b { "on" } else { "off" };
        format!(
            "GPU crash reporter: {} ({} {:#06x}:{:#06x}, driver {} {}, Vulkan {}); binding report {}, \
             device fault EXT {}, KHR {}, vendor binary {}, shader abort {}, messenger {}, buffer marker {}",
            self.gpu_name,
            self.vendor_name,
            self.vendor_id,
            self.device_id,
            self.driver_name,
            if self.driver_info.is_empty() {
                &self.driver_version
            } else {
                &self.driver_info
            },
            self.api_version,
            on_off(self.address_binding_report),
            on_off(self.device_fault_ext),
            on_off(self.device_fault_khr),
            on_off(self.device_fault_vendor_binary),
            on_off(self.shader_abort_khr),
            on_off(self.binding_messenger),
            on_off(self.buffer_marker),
        )
    }
}

/// Vendor name for a PCI (or Khronos) vendor ID.
pub fn vendor_name(vendor_id: u32) -> &'static str {
    match vendor_id {
        0x10de => "NVIDIA",
        0x1002 | 0x1022 => "AMD",
        0x8086 => "Intel",
        0x13b5 => "ARM",
        0x5143 => "Qualcomm",
        0x1010 => "Imagination",
        0x106b => "Apple",
        0x10005 => "Mesa",
        0x10001..=0x10004 | 0x10006..=0x1ffff => "Khronos-registered vendor",
        _ => "unknown",
    }
}

/// Decodes `driverVersion` with the vendor's own packing (NVIDIA 10.8.8.6 bits, Intel on Windows
/// 18.14); everyone else uses `VK_MAKE_API_VERSION`.
pub fn decode_driver_version(vendor_id: u32, version: u32) -> String {
    match vendor_id {
        0x10de => format!(
            "{}.{}.{}.{}",
            version >> 22,
            (version >> 14) & 0xff,
            (version >> 6) & 0xff,
            version & 0x3f
        ),
        0x8086 if cfg!(windows) => format!("{}.{}", version >> 14, version & 0x3fff),
        _ => decode_api_version(version),
    }
}

/// `VK_API_VERSION_MAJOR.MINOR.PATCH`.
pub fn decode_api_version(version: u32) -> String {
    format!(
        "{}.{}.{}",
        ash::vk::api_version_major(version),
        ash::vk::api_version_minor(version),
        ash::vk::api_version_patch(version)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_driver_version_decodes_like_the_driver_says() {
        // 580.159.04 as the NVIDIA driver packs it.
        let packed = (580 << 22) | (159 << 14) | (4 << 6);
        assert_eq!(decode_driver_version(0x10de, packed), "580.159.4.0");
        assert_eq!(
            decode_driver_version(0x10005, ash::vk::make_api_version(0, 22, 3, 6)),
            "22.3.6"
        );
        assert_eq!(vendor_name(0x10de), "NVIDIA");
        assert_eq!(vendor_name(0x10005), "Mesa");
    }
}
