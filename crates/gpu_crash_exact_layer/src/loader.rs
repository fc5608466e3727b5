//! The loader-layer interface (`vk_layer.h`), which ash does not cover.
//!
//! Only what a layer needs: the negotiation struct and the link-info structures the loader chains into
//! `VkInstanceCreateInfo` / `VkDeviceCreateInfo` so each layer can find the next one's
//! `vkGetInstanceProcAddr` / `vkGetDeviceProcAddr`.

use std::ffi::{c_char, c_void};

use ash::vk;

/// `VK_LAYER_LINK_INFO` of `VkLayerFunction`.
pub(crate) const LAYER_LINK_INFO: u32 = 0;
/// `LAYER_NEGOTIATE_INTERFACE_STRUCT` of `VkNegotiateLayerStructType`.
pub(crate) const LAYER_NEGOTIATE_INTERFACE_STRUCT: u32 = 1;
/// Loader-layer interface version this layer implements.
pub(crate) const INTERFACE_VERSION: u32 = 2;

/// `PFN_GetPhysicalDeviceProcAddr`.
pub(crate) type PfnGetPhysicalDeviceProcAddr =
    unsafe extern "system" fn(vk::Instance, *const c_char) -> vk::PFN_vkVoidFunction;

/// `VkNegotiateLayerInterface`.
#[repr(C)]
pub struct NegotiateLayerInterface {
    pub s_type: u32,
    pub p_next: *mut c_void,
    pub loader_layer_interface_version: u32,
    pub pfn_get_instance_proc_addr: Option<vk::PFN_vkGetInstanceProcAddr>,
    pub pfn_get_device_proc_addr: Option<vk::PFN_vkGetDeviceProcAddr>,
    pub pfn_get_physical_device_proc_addr: Option<PfnGetPhysicalDeviceProcAddr>,
}

/// `VkLayerInstanceLink`.
#[repr(C)]
pub(crate) struct LayerInstanceLink {
    pub p_next: *mut LayerInstanceLink,
    pub pfn_next_get_instance_proc_addr: Option<vk::PFN_vkGetInstanceProcAddr>,
    pub pfn_next_get_physical_device_proc_addr: Option<PfnGetPhysicalDeviceProcAddr>,
}

/// `VkLayerInstanceCreateInfo`. The C union `u` is at most two pointers wide; only its first member
/// (`pLayerInfo`) is read, the second word keeps the size right.
#[repr(C)]
pub(crate) struct LayerInstanceCreateInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub function: u32,
    pub p_layer_info: *mut LayerInstanceLink,
    pub _union_rest: *mut c_void,
}

/// `VkLayerDeviceLink`.
#[repr(C)]
pub(crate) struct LayerDeviceLink {
    pub p_next: *mut LayerDeviceLink,
    pub pfn_next_get_instance_proc_addr: Option<vk::PFN_vkGetInstanceProcAddr>,
    pub pfn_next_get_device_proc_addr: Option<vk::PFN_vkGetDeviceProcAddr>,
}

/// `VkLayerDeviceCreateInfo` (its union is one pointer wide).
#[repr(C)]
pub(crate) struct LayerDeviceCreateInfo {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub function: u32,
    pub p_layer_info: *mut LayerDeviceLink,
}

/// Finds the loader's `VK_LAYER_LINK_INFO` node of `s_type` in a create-info `pNext` chain.
///
/// # Safety
/// `p_next` must be a valid Vulkan `pNext` chain.
unsafe fn find_link_info(mut p_next: *const c_void, s_type: vk::StructureType) -> *mut c_void {
    while !p_next.is_null() {
        let base = p_next.cast::<vk::BaseInStructure>();
        // SAFETY: every node of a valid chain starts with sType/pNext; the loader structs share the
        // layout of `LayerDeviceCreateInfo` up to `function` for both the instance and device variant.
        unsafe {
            if (*base).s_type == s_type
                && (*p_next.cast::<LayerDeviceCreateInfo>()).function == LAYER_LINK_INFO
            {
                return p_next.cast_mut();
            }
            p_next = (*base).p_next.cast();
        }
    }
    std::ptr::null_mut()
}

/// Takes this layer's link from the instance chain: returns the next `vkGetInstanceProcAddr` and
/// advances the loader's link pointer so the next layer finds its own.
///
/// # Safety
/// `create_info` must be the `VkInstanceCreateInfo` the loader passed to this layer.
pub(crate) unsafe fn take_instance_link(
    create_info: *const vk::InstanceCreateInfo<'_>,
) -> Option<vk::PFN_vkGetInstanceProcAddr> {
    // SAFETY: the caller passes the loader's create info, whose chain is valid.
    let node = unsafe {
        find_link_info(
            (*create_info).p_next,
            vk::StructureType::LOADER_INSTANCE_CREATE_INFO,
        )
    }
    .cast::<LayerInstanceCreateInfo>();
    if node.is_null() {
        return None;
    }
    // SAFETY: `node` is the loader's link node (loader memory, meant to be advanced by each layer);
    // `p_layer_info` points at this layer's link.
    unsafe {
        let link = (*node).p_layer_info;
        if link.is_null() {
            return None;
        }
        let gipa = (*link).pfn_next_get_instance_proc_addr;
        (*node).p_layer_info = (*link).p_next;
        gipa
    }
}

/// Takes this layer's link from the device chain: returns the next `vkGetInstanceProcAddr` and
/// `vkGetDeviceProcAddr` and advances the loader's link pointer.
///
/// # Safety
/// `create_info` must be the `VkDeviceCreateInfo` the loader passed to this layer.
pub(crate) unsafe fn take_device_link(
    create_info: *const vk::DeviceCreateInfo<'_>,
) -> Option<(vk::PFN_vkGetInstanceProcAddr, vk::PFN_vkGetDeviceProcAddr)> {
    // SAFETY: the caller passes the loader's create info, whose chain is valid.
    let node = unsafe {
        find_link_info(
            (*create_info).p_next,
            vk::StructureType::LOADER_DEVICE_CREATE_INFO,
        )
    }
    .cast::<LayerDeviceCreateInfo>();
    if node.is_null() {
        return None;
    }
    // SAFETY: as in `take_instance_link`.
    unsafe {
        let link = (*node).p_layer_info;
        if link.is_null() {
            return None;
        }
        let gipa = (*link).pfn_next_get_instance_proc_addr?;
        let gdpa = (*link).pfn_next_get_device_proc_addr?;
        (*node).p_layer_info = (*link).p_next;
        Some((gipa, gdpa))
    }
}
