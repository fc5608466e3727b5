//! `VK_LAYER_gpu_crash_exact`: the Vulkan layer a game ships beside its executable for the crash
//! reporter's exact mode.
//!
//! The reporter enables it at instance creation when exact mode is on (`gpu_crash_core`'s
//! `vulkan/exact.rs`). On every device it then:
//!
//! - marks the GPU's progress after **every draw and dispatch** with `vkCmdWriteBufferMarkerAMD`
//!   where the driver has `VK_AMD_buffer_marker` (AMD, RADV, NVIDIA; valid inside render pass
//!   instances). Elsewhere (lavapipe) with core Vulkan, which writes buffers only outside render
//!   pass instances: a barrier and `vkCmdUpdateBuffer` after each dispatch, and after each render
//!   pass instance for all of its draws (those then share one marker, and the answer says so);
//! - keeps, per marked command, what it was: the pipeline bound (handle and debug name, with its
//!   place among pipelines of the same name bound in the same labelled region) and the debug-label
//!   stack open around it (wgpu labels every pass);
//! - logs the order in which command buffers are submitted;
//! - answers `vkGetGpuCrashExactProgressGCR` (`vulkan_fault_ffi::exact`): the last marked command the
//!   GPU finished and the first it did not, read without waiting, also while the GPU hangs.
//!
//! It changes nothing else: every other call passes through, and on a device where it cannot mark
//! (no marker extension, no timestamps) it says so in one `[gpu_crash_exact]` line and only passes
//! calls through. No panic crosses the FFI boundary (`log::guard`).
//!
//! Module map, bottom to top: `log`, `loader` (the loader-layer ABI), `manifest`; `dispatch` (the
//! next layer's entry points and the object maps); `device` (instances, devices, marker memory);
//! `record` (command buffers); `progress` (submits and the answer); `lib.rs`: the exported entry
//! points and the proc-addr tables.

mod loader;
mod log;
pub mod manifest;

mod dispatch;

mod device;
mod record;

mod progress;

use std::ffi::c_char;

use ash::vk;

use crate::dispatch::{c_str, hook};
use crate::log::guard;

/// Loader entry point (interface version 2): hands the loader our proc-addr functions.
///
/// # Safety
/// Called by the loader with a valid `VkNegotiateLayerInterface`.
#[no_mangle]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    p_version: *mut loader::NegotiateLayerInterface,
) -> vk::Result {
    guard(
        "vkNegotiateLoaderLayerInterfaceVersion",
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            // SAFETY: the loader passes a valid, writable negotiation struct.
            let Some(v) = (unsafe { p_version.as_mut() }) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            if v.s_type != loader::LAYER_NEGOTIATE_INTERFACE_STRUCT
                || v.loader_layer_interface_version < loader::INTERFACE_VERSION
            {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            }
            v.loader_layer_interface_version = loader::INTERFACE_VERSION;
            v.pfn_get_instance_proc_addr = Some(vkGetInstanceProcAddr);
            v.pfn_get_device_proc_addr = Some(vkGetDeviceProcAddr);
            v.pfn_get_physical_device_proc_addr = None;
            vk::Result::SUCCESS
        },
    )
}

/// Our instance-level hooks by name.
fn instance_hook(name: &[u8]) -> vk::PFN_vkVoidFunction {
    use device::*;
    match name {
        b"vkGetInstanceProcAddr" => hook!(vkGetInstanceProcAddr, vk::PFN_vkGetInstanceProcAddr),
        b"vkCreateInstance" => hook!(create_instance, vk::PFN_vkCreateInstance),
        b"vkDestroyInstance" => hook!(destroy_instance, vk::PFN_vkDestroyInstance),
        b"vkCreateDevice" => hook!(create_device, vk::PFN_vkCreateDevice),
        _ => None,
    }
}

/// Our device-level hooks that wrap an entry point of the next layer.
fn device_hook(name: &[u8]) -> vk::PFN_vkVoidFunction {
    use progress::*;
    use record::*;
    match name {
        b"vkGetDeviceProcAddr" => hook!(vkGetDeviceProcAddr, vk::PFN_vkGetDeviceProcAddr),
        b"vkDestroyDevice" => hook!(device::destroy_device, vk::PFN_vkDestroyDevice),
        b"vkBeginCommandBuffer" => hook!(begin_command_buffer, vk::PFN_vkBeginCommandBuffer),
        b"vkFreeCommandBuffers" => hook!(free_command_buffers, vk::PFN_vkFreeCommandBuffers),
        b"vkSetDebugUtilsObjectNameEXT" => hook!(
            set_debug_utils_object_name,
            vk::PFN_vkSetDebugUtilsObjectNameEXT
        ),
        b"vkDestroyPipeline" => hook!(destroy_pipeline, vk::PFN_vkDestroyPipeline),
        b"vkCmdBindPipeline" => hook!(cmd_bind_pipeline, vk::PFN_vkCmdBindPipeline),
        b"vkCmdBeginDebugUtilsLabelEXT" => hook!(
            cmd_begin_debug_utils_label,
            vk::PFN_vkCmdBeginDebugUtilsLabelEXT
        ),
        b"vkCmdEndDebugUtilsLabelEXT" => hook!(
            cmd_end_debug_utils_label,
            vk::PFN_vkCmdEndDebugUtilsLabelEXT
        ),
        b"vkCmdDraw" => hook!(cmd_draw, vk::PFN_vkCmdDraw),
        b"vkCmdDrawIndexed" => hook!(cmd_draw_indexed, vk::PFN_vkCmdDrawIndexed),
        b"vkCmdDrawIndirect" => hook!(cmd_draw_indirect, vk::PFN_vkCmdDrawIndirect),
        b"vkCmdDrawIndexedIndirect" => {
            hook!(cmd_draw_indexed_indirect, vk::PFN_vkCmdDrawIndexedIndirect)
        }
        b"vkCmdDrawIndirectCount" => hook!(cmd_draw_indirect_count, vk::PFN_vkCmdDrawIndirectCount),
        b"vkCmdDrawIndirectCountKHR" => {
            hook!(cmd_draw_indirect_count_khr, vk::PFN_vkCmdDrawIndirectCount)
        }
        b"vkCmdDrawIndexedIndirectCount" => hook!(
            cmd_draw_indexed_indirect_count,
            vk::PFN_vkCmdDrawIndexedIndirectCount
        ),
        b"vkCmdDrawIndexedIndirectCountKHR" => hook!(
            cmd_draw_indexed_indirect_count_khr,
            vk::PFN_vkCmdDrawIndexedIndirectCount
        ),
        b"vkCmdDispatch" => hook!(cmd_dispatch, vk::PFN_vkCmdDispatch),
        b"vkCmdDispatchIndirect" => hook!(cmd_dispatch_indirect, vk::PFN_vkCmdDispatchIndirect),
        b"vkCmdDispatchBase" => hook!(cmd_dispatch_base, vk::PFN_vkCmdDispatchBase),
        b"vkCmdBeginRenderPass" => hook!(cmd_begin_render_pass, vk::PFN_vkCmdBeginRenderPass),
        b"vkCmdBeginRenderPass2" => hook!(cmd_begin_render_pass2, vk::PFN_vkCmdBeginRenderPass2),
        b"vkCmdBeginRenderPass2KHR" => {
            hook!(cmd_begin_render_pass2_khr, vk::PFN_vkCmdBeginRenderPass2)
        }
        b"vkCmdEndRenderPass" => hook!(cmd_end_render_pass, vk::PFN_vkCmdEndRenderPass),
        b"vkCmdEndRenderPass2" => hook!(cmd_end_render_pass2, vk::PFN_vkCmdEndRenderPass2),
        b"vkCmdEndRenderPass2KHR" => hook!(cmd_end_render_pass2_khr, vk::PFN_vkCmdEndRenderPass2),
        b"vkCmdBeginRendering" => hook!(cmd_begin_rendering, vk::PFN_vkCmdBeginRendering),
        b"vkCmdBeginRenderingKHR" => hook!(cmd_begin_rendering_khr, vk::PFN_vkCmdBeginRendering),
        b"vkCmdEndRendering" => hook!(cmd_end_rendering, vk::PFN_vkCmdEndRendering),
        b"vkCmdEndRenderingKHR" => hook!(cmd_end_rendering_khr, vk::PFN_vkCmdEndRendering),
        b"vkQueueSubmit" => hook!(queue_submit, vk::PFN_vkQueueSubmit),
        b"vkQueueSubmit2" => hook!(queue_submit2, vk::PFN_vkQueueSubmit2),
        b"vkQueueSubmit2KHR" => hook!(queue_submit2_khr, vk::PFN_vkQueueSubmit2),
        _ => None,
    }
}

/// The layer's own command (no next layer has it).
fn own_hook(name: &[u8]) -> vk::PFN_vkVoidFunction {
    match name {
        b"vkGetGpuCrashExactProgressGCR" => hook!(
            progress::get_exact_progress,
            vulkan_fault_ffi::exact::PfnGetExactProgress
        ),
        _ => None,
    }
}

/// The layer's `vkGetInstanceProcAddr`.
///
/// # Safety
/// Called by the loader or application with a valid (or null) instance and a C string.
#[no_mangle]
pub unsafe extern "system" fn vkGetInstanceProcAddr(
    instance: vk::Instance,
    p_name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    guard("vkGetInstanceProcAddr", None, || {
        // SAFETY: a C string per the spec.
        let name = (unsafe { c_str(p_name) })?.to_bytes();
        // Answered for any instance handle: while building the instance chain the loader may ask
        // with the handle of the instance being created, which the layer does not know yet.
        if matches!(name, b"vkGetInstanceProcAddr" | b"vkCreateInstance") {
            return instance_hook(name);
        }
        if instance == vk::Instance::null() {
            return None;
        }
        let inst = dispatch::instance_of(instance)?;
        // SAFETY: the next layer's GIPA with the instance it created.
        let next = unsafe { (inst.next_gipa)(instance, p_name) };
        if let Some(h) = instance_hook(name) {
            return Some(h);
        }
        if let Some(h) = own_hook(name) {
            return Some(h);
        }
        match device_hook(name) {
            Some(h) if next.is_some() => Some(h),
            _ => next,
        }
    })
}

/// The layer's `vkGetDeviceProcAddr`.
///
/// # Safety
/// Called by the loader or application with a valid device and a C string.
#[no_mangle]
pub unsafe extern "system" fn vkGetDeviceProcAddr(
    device: vk::Device,
    p_name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    guard("vkGetDeviceProcAddr", None, || {
        // SAFETY: a C string per the spec.
        let name = (unsafe { c_str(p_name) })?.to_bytes();
        let dev = dispatch::device_of(device)?;
        if name == b"vkGetDeviceProcAddr" {
            return device_hook(name);
        }
        if let Some(h) = own_hook(name) {
            return Some(h);
        }
        // SAFETY: the next layer's GDPA with the device it created.
        let next = unsafe { (dev.next_gdpa)(device, p_name) };
        // The debug-utils commands may be known only to the instance's GIPA (see `create_device`).
        let via_gipa = match name {
            b"vkCmdBeginDebugUtilsLabelEXT" => dev.fns.cmd_begin_debug_utils_label.is_some(),
            b"vkCmdEndDebugUtilsLabelEXT" => dev.fns.cmd_end_debug_utils_label.is_some(),
            b"vkSetDebugUtilsObjectNameEXT" => dev.fns.set_debug_utils_object_name.is_some(),
            _ => false,
        };
        match device_hook(name) {
            // Without marks the hooks would only call down: the application gets the next layer's
            // entry points directly (no cost on a device the layer cannot mark).
            Some(h) if (next.is_some() || via_gipa) && dev.marks.is_some() => Some(h),
            Some(h) if name == b"vkDestroyDevice" && next.is_some() => Some(h),
            _ => next,
        }
    })
}
