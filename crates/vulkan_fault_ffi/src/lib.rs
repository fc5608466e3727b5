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

/// The entry point of `VK_LAYER_gpu_crash_exact` (`crates/gpu_crash_exact_layer`), the layer a game
/// ships beside its executable for exact mode: not a Khronos API, so it lives here, beside the other
/// hand-written FFI, shared by the layer that answers it and the reporter that asks.
///
/// The reporter finds it with `vkGetDeviceProcAddr(device, GET_EXACT_PROGRESS_NAME)`: the layer
/// answers that name for every device it sits on, and nothing else does (null without the layer).
pub mod exact {
    use std::ffi::{c_char, CStr};

    use ash::vk;

    /// The layer's name, as an application enables it.
    pub const LAYER_NAME: &CStr = c"VK_LAYER_gpu_crash_exact";
    /// The layer's loader manifest, which a game ships beside its executable.
    pub const MANIFEST_FILE_NAME: &str = "VK_LAYER_gpu_crash_exact.json";
    /// The device-level command the layer answers (`GCR`: this project's author suffix).
    pub const GET_EXACT_PROGRESS_NAME: &CStr = c"vkGetGpuCrashExactProgressGCR";
    /// [`ExactProgress::version`] of this layout.
    pub const PROGRESS_VERSION: u32 = 1;

    /// How the layer marks the GPU's progress.
    pub mod marker {
        /// `vkCmdWriteBufferMarkerAMD` after every draw and dispatch, into mapped memory.
        pub const AMD_BUFFER_MARKER: u32 = 1;
        /// Core Vulkan where the driver lacks `VK_AMD_buffer_marker`: a full barrier and
        /// `vkCmdUpdateBuffer`, valid outside render pass instances only: after each dispatch, and
        /// after each render pass instance for all of its draws (they share that marker).
        pub const UPDATE_BUFFER: u32 = 2;
    }

    /// What a marked command was.
    pub mod kind {
        /// `vkCmdDraw*`.
        pub const DRAW: u32 = 1;
        /// `vkCmdDispatch*`.
        pub const DISPATCH: u32 = 2;
    }

    /// Bytes of [`ExactCommand::pipeline_name`], NUL included.
    pub const NAME_BYTES: usize = 128;
    /// Bytes of [`ExactCommand::labels`], NUL included.
    pub const LABELS_BYTES: usize = 512;

    /// One marked command (a draw or dispatch) as the layer recorded it.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct ExactCommand {
        /// 1 when this record holds a command, 0 when there is none.
        pub present: u32,
        /// [`kind`].
        pub kind: u32,
        /// The layer's sequence number of the command (recording order, per device, from 1).
        pub sequence: u64,
        /// The `VkCommandBuffer` it was recorded into.
        pub command_buffer: u64,
        /// Its place among the marked commands of its command buffer (0 = the first).
        pub index_in_command_buffer: u32,
        /// Among the pipelines bound in its render pass instance (or, outside one, its command
        /// buffer) that carry the same debug name, the place of its own (0 = the first bound): tells
        /// apart pipelines an engine labels alike (Bevy names every custom material's
        /// `opaque_mesh_pipeline`).
        pub same_name_ordinal: u32,
        /// The `VkPipeline` bound for it (0: none).
        pub pipeline: u64,
        /// Marked commands that share its marker, itself included: 1 where its marker follows it
        /// directly; the draws of its render pass instance where the marker could only follow the
        /// instance ([`marker::UPDATE_BUFFER`]). With more than one, "not finished" means that one
        /// of them, or the work before them, did not finish.
        pub sharing_marker: u32,
        /// The pipeline's debug name (`vkSetDebugUtilsObjectNameEXT`, wgpu's label), NUL-terminated,
        /// cut to fit; empty when it has none.
        pub pipeline_name: [c_char; NAME_BYTES],
        /// The debug-label stack open at the command, outermost first, joined by `" > "`,
        /// NUL-terminated, cut to fit (wgpu puts each pass's label there).
        pub labels: [c_char; LABELS_BYTES],
    }

    /// What the GPU finished of the work submitted to the device, as the layer's markers show it.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct ExactProgress {
        /// [`PROGRESS_VERSION`]; the caller sets it, the layer answers only the layouts it knows.
        pub version: u32,
        /// [`marker`].
        pub marker: u32,
        /// Commands marked since the device was created.
        pub marked_commands: u64,
        /// Marked commands submitted whose marker the GPU has not written.
        pub unfinished_commands: u64,
        /// The last marked command, in submission order, whose marker the GPU wrote before the first
        /// one it did not write.
        pub last_finished: ExactCommand,
        /// The first marked command, in submission order, whose marker the GPU has not written: the
        /// draw or dispatch the GPU was in (or had not yet reached).
        pub first_unfinished: ExactCommand,
    }

    /// `vkGetGpuCrashExactProgressGCR`: fills `progress` (whose `version` the caller set). Never
    /// waits for the GPU. `VK_SUCCESS`, or `VK_ERROR_INITIALIZATION_FAILED` for a version or device
    /// the layer does not know.
    pub type PfnGetExactProgress =
        unsafe extern "system" fn(device: vk::Device, progress: *mut ExactProgress) -> vk::Result;

    impl ExactCommand {
        /// An empty record.
        pub const EMPTY: Self = Self {
            present: 0,
            kind: 0,
            sequence: 0,
            command_buffer: 0,
            index_in_command_buffer: 0,
            same_name_ordinal: 0,
            pipeline: 0,
            sharing_marker: 0,
            pipeline_name: [0; NAME_BYTES],
            labels: [0; LABELS_BYTES],
        };
    }

    impl ExactProgress {
        /// An empty answer of this layout's version, for the caller to pass.
        pub const fn new() -> Self {
            Self {
                version: PROGRESS_VERSION,
                marker: 0,
                marked_commands: 0,
                unfinished_commands: 0,
                last_finished: ExactCommand::EMPTY,
                first_unfinished: ExactCommand::EMPTY,
            }
        }
    }

    impl Default for ExactProgress {
        fn default() -> Self {
            Self::new()
        }
    }

    /// Copies `text` into a fixed C string field, cut at a character boundary to fit with its NUL.
    pub fn write_c_str(field: &mut [c_char], text: &str) {
        let room = field.len().saturating_sub(1);
        let mut end = text.len().min(room);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        for (dst, &src) in field.iter_mut().zip(&text.as_bytes()[..end]) {
            *dst = src as c_char;
        }
        if let Some(nul) = field.get_mut(end) {
            *nul = 0;
        }
    }

    /// Reads a fixed C string field (up to its first NUL), replacing invalid UTF-8.
    pub fn read_c_str(field: &[c_char]) -> String {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn c_strings_are_cut_at_a_character_boundary_and_read_back() {
            let mut field = [0 as c_char; 6];
            write_c_str(&mut field, "ab\u{e9}cdef"); // é is two bytes: "ab" + é + "c" fills 5
            assert_eq!(read_c_str(&field), "ab\u{e9}c");
            write_c_str(&mut field, "x");
            assert_eq!(read_c_str(&field), "x");
            let mut tiny = [0 as c_char; 3];
            write_c_str(&mut tiny, "a\u{e9}");
            assert_eq!(
                read_c_str(&tiny),
                "a",
                "the two-byte character does not fit with the NUL"
            );
        }
    }
}
