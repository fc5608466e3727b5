//! Hand-written FFI for `VK_KHR_device_fault` and `VK_KHR_shader_abort`.
//!
//! ash 0.38 (Vulkan 1.3.281) predates both extensions, so the structures, enums and function pointer
//! types are transcribed here from Vulkan-Headers 359 (`reference/vulkan_device_fault_headers.h`).
//! Every structure is `#[repr(C)]` and `tests/layout.rs` compiles the C header with gcc and compares
//! size, alignment and the offset and size of every field, so a transcription error fails the tests.
//!
//! Where the KHR types are aliases of the EXT ones that ash already has (address type, vendor binary
//! header version), ash's types are reused so values can flow between the two APIs without casts.

use std::ffi::{c_char, c_void, CStr};

use ash::vk;

/// `VK_KHR_DEVICE_FAULT_EXTENSION_NAME`.
pub const KHR_DEVICE_FAULT_NAME: &CStr = c"VK_KHR_device_fault";
/// `VK_KHR_DEVICE_FAULT_SPEC_VERSION`.
pub const KHR_DEVICE_FAULT_SPEC_VERSION: u32 = 1;
/// `VK_KHR_SHADER_ABORT_EXTENSION_NAME`.
pub const KHR_SHADER_ABORT_NAME: &CStr = c"VK_KHR_shader_abort";
/// `VK_KHR_SHADER_ABORT_SPEC_VERSION`.
pub const KHR_SHADER_ABORT_SPEC_VERSION: u32 = 1;

/// `VkStructureType` values of the two extensions, as ash's newtype so they can be compared with
/// the `s_type` of any ash structure while walking a `pNext` chain.
pub mod structure_type {
    use ash::vk::StructureType;

    /// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_FEATURES_KHR`.
    pub const PHYSICAL_DEVICE_FAULT_FEATURES_KHR: StructureType =
        StructureType::from_raw(1000573000);
    /// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_PROPERTIES_KHR`.
    pub const PHYSICAL_DEVICE_FAULT_PROPERTIES_KHR: StructureType =
        StructureType::from_raw(1000573001);
    /// `VK_STRUCTURE_TYPE_DEVICE_FAULT_INFO_KHR`.
    pub const DEVICE_FAULT_INFO_KHR: StructureType = StructureType::from_raw(1000573002);
    /// `VK_STRUCTURE_TYPE_DEVICE_FAULT_DEBUG_INFO_KHR`.
    pub const DEVICE_FAULT_DEBUG_INFO_KHR: StructureType = StructureType::from_raw(1000573003);
    /// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ABORT_FEATURES_KHR`.
    pub const PHYSICAL_DEVICE_SHADER_ABORT_FEATURES_KHR: StructureType =
        StructureType::from_raw(1000233000);
    /// `VK_STRUCTURE_TYPE_DEVICE_FAULT_SHADER_ABORT_MESSAGE_INFO_KHR`.
    pub const DEVICE_FAULT_SHADER_ABORT_MESSAGE_INFO_KHR: StructureType =
        StructureType::from_raw(1000233001);
    /// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ABORT_PROPERTIES_KHR`.
    pub const PHYSICAL_DEVICE_SHADER_ABORT_PROPERTIES_KHR: StructureType =
        StructureType::from_raw(1000233002);
}

/// `VkDeviceFaultFlagsKHR`: what one fault report contains (`VkDeviceFaultFlagBitsKHR`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceFaultFlagsKHR(pub u32);

impl DeviceFaultFlagsKHR {
    /// The fault lost the device.
    pub const DEVICE_LOST: Self = Self(0x0000_0001);
    /// `faultAddressInfo` is valid.
    pub const MEMORY_ADDRESS: Self = Self(0x0000_0002);
    /// `instructionAddressInfo` is valid.
    pub const INSTRUCTION_ADDRESS: Self = Self(0x0000_0004);
    /// `vendorInfo` is valid.
    pub const VENDOR: Self = Self(0x0000_0008);
    /// The fault is a watchdog timeout (a hang), not a page fault.
    pub const WATCHDOG_TIMEOUT: Self = Self(0x0000_0010);
    /// More faults happened than the implementation could record.
    pub const OVERFLOW: Self = Self(0x0000_0020);

    /// The empty set.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// True when every bit of `other` is set in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for DeviceFaultFlagsKHR {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for DeviceFaultFlagsKHR {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

/// Implements `Send`/`Sync` for a plain-data FFI struct.
///
/// These structs are inert data, like ash's own (which implement both for the same reason): the raw
/// pointers they hold (`pNext`, output buffers) are only dereferenced by Vulkan calls, which are
/// `unsafe` and whose callers must guarantee the pointees are valid. Moving or sharing the struct
/// itself between threads dereferences nothing.
macro_rules! plain_ffi_data {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: see the macro documentation: plain data, pointers are never dereferenced by Rust.
            unsafe impl Send for $t {}
            // SAFETY: as above; shared references only allow reading the plain fields.
            unsafe impl Sync for $t {}
        )*
    };
}

/// `VkPhysicalDeviceFaultFeaturesKHR`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhysicalDeviceFaultFeaturesKHR {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub device_fault: vk::Bool32,
    pub device_fault_vendor_binary: vk::Bool32,
    pub device_fault_report_masked: vk::Bool32,
    pub device_fault_device_lost_on_masked: vk::Bool32,
}

impl Default for PhysicalDeviceFaultFeaturesKHR {
    fn default() -> Self {
        Self {
            s_type: structure_type::PHYSICAL_DEVICE_FAULT_FEATURES_KHR,
            p_next: std::ptr::null_mut(),
            device_fault: vk::FALSE,
            device_fault_vendor_binary: vk::FALSE,
            device_fault_report_masked: vk::FALSE,
            device_fault_device_lost_on_masked: vk::FALSE,
        }
    }
}

/// `VkPhysicalDeviceFaultPropertiesKHR`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhysicalDeviceFaultPropertiesKHR {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub max_device_fault_count: u32,
}

impl Default for PhysicalDeviceFaultPropertiesKHR {
    fn default() -> Self {
        Self {
            s_type: structure_type::PHYSICAL_DEVICE_FAULT_PROPERTIES_KHR,
            p_next: std::ptr::null_mut(),
            max_device_fault_count: 0,
        }
    }
}

/// `VkDeviceFaultAddressInfoKHR` (same layout as `VkDeviceFaultAddressInfoEXT`).
///
/// Per the spec, a `reported_address` with precision `P` (a power of two) means the fault lies in
/// `[addr & !(P - 1), (addr & !(P - 1)) + P - 1]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceFaultAddressInfoKHR {
    pub address_type: vk::DeviceFaultAddressTypeEXT,
    pub reported_address: vk::DeviceAddress,
    pub address_precision: vk::DeviceSize,
}

/// `VkDeviceFaultVendorInfoKHR` (same layout as `VkDeviceFaultVendorInfoEXT`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DeviceFaultVendorInfoKHR {
    pub description: [c_char; vk::MAX_DESCRIPTION_SIZE],
    pub vendor_fault_code: u64,
    pub vendor_fault_data: u64,
}

impl Default for DeviceFaultVendorInfoKHR {
    fn default() -> Self {
        Self {
            description: [0; vk::MAX_DESCRIPTION_SIZE],
            vendor_fault_code: 0,
            vendor_fault_data: 0,
        }
    }
}

/// `VkDeviceFaultInfoKHR`: one fault report returned by `vkGetDeviceFaultReportsKHR`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DeviceFaultInfoKHR {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub flags: DeviceFaultFlagsKHR,
    pub group_id: u64,
    pub description: [c_char; vk::MAX_DESCRIPTION_SIZE],
    pub fault_address_info: DeviceFaultAddressInfoKHR,
    pub instruction_address_info: DeviceFaultAddressInfoKHR,
    pub vendor_info: DeviceFaultVendorInfoKHR,
}

impl Default for DeviceFaultInfoKHR {
    fn default() -> Self {
        Self {
            s_type: structure_type::DEVICE_FAULT_INFO_KHR,
            p_next: std::ptr::null_mut(),
            flags: DeviceFaultFlagsKHR::empty(),
            group_id: 0,
            description: [0; vk::MAX_DESCRIPTION_SIZE],
            fault_address_info: DeviceFaultAddressInfoKHR::default(),
            instruction_address_info: DeviceFaultAddressInfoKHR::default(),
            vendor_info: DeviceFaultVendorInfoKHR::default(),
        }
    }
}

/// `VkDeviceFaultDebugInfoKHR`: the vendor binary crash dump, from `vkGetDeviceFaultDebugInfoKHR`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DeviceFaultDebugInfoKHR {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub vendor_binary_size: u32,
    pub p_vendor_binary_data: *mut c_void,
}

impl Default for DeviceFaultDebugInfoKHR {
    fn default() -> Self {
        Self {
            s_type: structure_type::DEVICE_FAULT_DEBUG_INFO_KHR,
            p_next: std::ptr::null_mut(),
            vendor_binary_size: 0,
            p_vendor_binary_data: std::ptr::null_mut(),
        }
    }
}

/// `VkDeviceFaultVendorBinaryHeaderVersionOneKHR`: the header at the start of a vendor binary.
///
/// The same layout serves `VK_EXT_device_fault` (`VkDeviceFaultVendorBinaryHeaderVersionOneEXT` is a
/// typedef of it in the C header; ash's `vk::DeviceFaultVendorBinaryHeaderVersionOneEXT` matches too),
/// so one parser reads vendor binaries from both APIs. The application and engine names are
/// NUL-terminated strings at `application_name_offset` / `engine_name_offset` from the start of the
/// binary (0 means absent).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceFaultVendorBinaryHeaderVersionOneKHR {
    pub header_size: u32,
    pub header_version: vk::DeviceFaultVendorBinaryHeaderVersionEXT,
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_version: u32,
    pub pipeline_cache_uuid: [u8; vk::UUID_SIZE],
    pub application_name_offset: u32,
    pub application_version: u32,
    pub engine_name_offset: u32,
    pub engine_version: u32,
    pub api_version: u32,
}

/// `VkPhysicalDeviceShaderAbortFeaturesKHR`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhysicalDeviceShaderAbortFeaturesKHR {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub shader_abort: vk::Bool32,
}

impl Default for PhysicalDeviceShaderAbortFeaturesKHR {
    fn default() -> Self {
        Self {
            s_type: structure_type::PHYSICAL_DEVICE_SHADER_ABORT_FEATURES_KHR,
            p_next: std::ptr::null_mut(),
            shader_abort: vk::FALSE,
        }
    }
}

/// `VkDeviceFaultShaderAbortMessageInfoKHR`: chained into [`DeviceFaultDebugInfoKHR`] to receive the
/// message a shader passed to its abort instruction.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DeviceFaultShaderAbortMessageInfoKHR {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub message_data_size: u64,
    pub p_message_data: *mut c_void,
}

impl Default for DeviceFaultShaderAbortMessageInfoKHR {
    fn default() -> Self {
        Self {
            s_type: structure_type::DEVICE_FAULT_SHADER_ABORT_MESSAGE_INFO_KHR,
            p_next: std::ptr::null_mut(),
            message_data_size: 0,
            p_message_data: std::ptr::null_mut(),
        }
    }
}

/// `VkPhysicalDeviceShaderAbortPropertiesKHR`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhysicalDeviceShaderAbortPropertiesKHR {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub max_shader_abort_message_size: u64,
}

impl Default for PhysicalDeviceShaderAbortPropertiesKHR {
    fn default() -> Self {
        Self {
            s_type: structure_type::PHYSICAL_DEVICE_SHADER_ABORT_PROPERTIES_KHR,
            p_next: std::ptr::null_mut(),
            max_shader_abort_message_size: 0,
        }
    }
}

plain_ffi_data!(
    PhysicalDeviceFaultFeaturesKHR,
    PhysicalDeviceFaultPropertiesKHR,
    DeviceFaultInfoKHR,
    DeviceFaultDebugInfoKHR,
    PhysicalDeviceShaderAbortFeaturesKHR,
    DeviceFaultShaderAbortMessageInfoKHR,
    PhysicalDeviceShaderAbortPropertiesKHR,
);

/// `PFN_vkGetDeviceFaultReportsKHR`.
pub type PfnGetDeviceFaultReportsKHR = unsafe extern "system" fn(
    device: vk::Device,
    timeout: u64,
    p_fault_counts: *mut u32,
    p_fault_info: *mut DeviceFaultInfoKHR,
) -> vk::Result;

/// `PFN_vkGetDeviceFaultDebugInfoKHR`.
pub type PfnGetDeviceFaultDebugInfoKHR = unsafe extern "system" fn(
    device: vk::Device,
    p_debug_info: *mut DeviceFaultDebugInfoKHR,
) -> vk::Result;

/// Device-level entry points of `VK_KHR_device_fault`; `None` where the device does not expose them
/// (extension not enabled or not supported).
#[derive(Clone, Copy, Debug, Default)]
pub struct KhrDeviceFaultFns {
    pub get_device_fault_reports: Option<PfnGetDeviceFaultReportsKHR>,
    pub get_device_fault_debug_info: Option<PfnGetDeviceFaultDebugInfoKHR>,
}

impl KhrDeviceFaultFns {
    /// Loads the entry points through `vkGetDeviceProcAddr`.
    ///
    /// # Safety
    /// `device` must be a valid device created from `instance` and not yet destroyed.
    pub unsafe fn load(instance: &ash::Instance, device: vk::Device) -> Self {
        // SAFETY: the caller guarantees `device` belongs to `instance` and is alive; the names are
        // NUL-terminated literals.
        let reports = unsafe {
            instance.get_device_proc_addr(device, c"vkGetDeviceFaultReportsKHR".as_ptr())
        };
        // SAFETY: as above.
        let debug = unsafe {
            instance.get_device_proc_addr(device, c"vkGetDeviceFaultDebugInfoKHR".as_ptr())
        };
        Self {
            // SAFETY: the loader returned the entry point for exactly this name, whose C signature is
            // `PFN_vkGetDeviceFaultReportsKHR`; `Option<fn>` has the same layout for both pointer types.
            get_device_fault_reports: unsafe {
                std::mem::transmute::<vk::PFN_vkVoidFunction, Option<PfnGetDeviceFaultReportsKHR>>(
                    reports,
                )
            },
            // SAFETY: as above, for `PFN_vkGetDeviceFaultDebugInfoKHR`.
            get_device_fault_debug_info: unsafe {
                std::mem::transmute::<vk::PFN_vkVoidFunction, Option<PfnGetDeviceFaultDebugInfoKHR>>(
                    debug,
                )
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_contains() {
        let f = DeviceFaultFlagsKHR::DEVICE_LOST | DeviceFaultFlagsKHR::MEMORY_ADDRESS;
        assert!(f.contains(DeviceFaultFlagsKHR::DEVICE_LOST));
        assert!(f.contains(DeviceFaultFlagsKHR::MEMORY_ADDRESS));
        assert!(!f.contains(DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT));
        assert!(!f.contains(DeviceFaultFlagsKHR::DEVICE_LOST | DeviceFaultFlagsKHR::VENDOR));
        assert!(f.contains(DeviceFaultFlagsKHR::empty()));
    }

    #[test]
    fn defaults_set_structure_type() {
        assert_eq!(
            PhysicalDeviceFaultFeaturesKHR::default().s_type.as_raw(),
            1000573000
        );
        assert_eq!(DeviceFaultInfoKHR::default().s_type.as_raw(), 1000573002);
        assert_eq!(
            DeviceFaultShaderAbortMessageInfoKHR::default()
                .s_type
                .as_raw(),
            1000233001
        );
    }
}
