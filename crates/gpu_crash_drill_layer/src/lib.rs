//! `VK_LAYER_gpu_crash_drill`: a Vulkan layer that makes GPU crashes happen on demand.
//!
//! Real GPU faults are rare, vendor specific and (on the machines this project uses) often do not even
//! lose the device, so the crash reporter's whole pipeline cannot be tested with them. This layer sits
//! between the application and any driver and:
//!
//! - **provides** `VK_EXT_device_address_binding_report` and `VK_EXT_device_fault` (or, with
//!   `GPU_CRASH_DRILL_API=khr`, `VK_KHR_device_fault` + `VK_KHR_shader_abort`) where the driver lacks
//!   them: advertised in `vkEnumerateDeviceExtensionProperties`, features in
//!   `vkGetPhysicalDeviceFeatures2`, removed from `vkCreateDevice` before the driver sees them, binding
//!   reports sent to the application's debug messengers from a deterministic address allocator
//!   (`state::bindings`, delivered by `messengers`);
//! - **provides** `VK_AMD_buffer_marker` where the driver lacks it, whatever the scenario
//!   (`commands`);
//! - **provides** `VK_EXT_memory_budget` (usage as allocated through the layer, budget the heap or
//!   `GPU_CRASH_DRILL_MEMORY_BUDGET`) and `VK_EXT_device_memory_report` (allocations, frees and the
//!   driver's refusals) where the driver lacks them (`video_memory`);
//! - **injects** the fault chosen by `GPU_CRASH_DRILL=<scenario>[:<label>]` after
//!   `GPU_CRASH_DRILL_AFTER` submissions (`fault`), and answers the fault queries from it.
//!
//! Module map, bottom to top (each module uses only those below it, as in wgpu-hal's `vulkan/`):
//!
//! - leaves: `log`, `loader` (loader-layer ABI), `manifest`, `config` (the environment),
//!   `chain_sizes` + `chain` (pNext chains);
//! - `state`: what the layer keeps per device, plain data: `bindings` (its own address space and
//!   binding events), `extensions` (what it provides), `commands` (command buffer tracking), `fault`
//!   (what was injected);
//! - `dispatch`: the next layer's entry points, the object maps, per-instance and per-device data;
//! - `hook_steps`: the steps every hook opens with (run inside [`guard`], find the device or
//!   instance, take the next layer's entry point, call it), so that each hook says only what it does
//!   differently;
//! - the hooked Vulkan concepts: `messengers` (binding reports delivered to the application),
//!   `native` (the driver's own binding reports), `video_memory` (the budget and memory report
//!   provided where the driver has none), `fault` (injection at submit and the fault
//!   queries), `commands` (what the layer records into command buffers), `device` (memory, buffers,
//!   images, queues), `instance` (instance, physical devices, device creation);
//! - `lib.rs`: the exported entry points and the proc-addr tables.
//!
//! No panic crosses the FFI boundary: every exported function and hook runs inside [`guard`].

// Bottom to top: each group uses only the groups above it in this list.
mod chain;
mod chain_sizes;
mod config;
mod loader;
mod log;
pub mod manifest;

// Per-device state, plain data.
mod state;

// The dispatch table: the next layer's entry points and the object maps.
mod dispatch;

// The steps every hook opens with (guard, find the device or instance, call the next layer).
mod hook_steps;

// The hooked Vulkan concepts, each above those it uses.
mod messengers;
mod native;
mod video_memory;

mod fault;

mod commands;

mod device;

mod instance;

use std::ffi::{c_char, CStr};

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
    use instance::*;
    Some(match name {
        b"vkGetInstanceProcAddr" => hook!(vkGetInstanceProcAddr, vk::PFN_vkGetInstanceProcAddr)?,
        b"vkCreateInstance" => hook!(create_instance, vk::PFN_vkCreateInstance)?,
        b"vkDestroyInstance" => hook!(destroy_instance, vk::PFN_vkDestroyInstance)?,
        b"vkCreateDevice" => hook!(create_device, vk::PFN_vkCreateDevice)?,
        b"vkEnumerateDeviceExtensionProperties" => hook!(
            enumerate_device_extension_properties,
            vk::PFN_vkEnumerateDeviceExtensionProperties
        )?,
        b"vkGetPhysicalDeviceFeatures2" => hook!(
            get_physical_device_features2,
            vk::PFN_vkGetPhysicalDeviceFeatures2
        )?,
        b"vkGetPhysicalDeviceFeatures2KHR" => hook!(
            get_physical_device_features2_khr,
            vk::PFN_vkGetPhysicalDeviceFeatures2
        )?,
        b"vkGetPhysicalDeviceProperties2" => hook!(
            get_physical_device_properties2,
            vk::PFN_vkGetPhysicalDeviceProperties2
        )?,
        b"vkGetPhysicalDeviceProperties2KHR" => hook!(
            get_physical_device_properties2_khr,
            vk::PFN_vkGetPhysicalDeviceProperties2
        )?,
        b"vkGetPhysicalDeviceMemoryProperties2" => hook!(
            video_memory::get_physical_device_memory_properties2,
            vk::PFN_vkGetPhysicalDeviceMemoryProperties2
        )?,
        b"vkGetPhysicalDeviceMemoryProperties2KHR" => hook!(
            video_memory::get_physical_device_memory_properties2_khr,
            vk::PFN_vkGetPhysicalDeviceMemoryProperties2
        )?,
        b"vkCreateDebugUtilsMessengerEXT" => hook!(
            create_debug_utils_messenger,
            vk::PFN_vkCreateDebugUtilsMessengerEXT
        )?,
        b"vkDestroyDebugUtilsMessengerEXT" => hook!(
            destroy_debug_utils_messenger,
            vk::PFN_vkDestroyDebugUtilsMessengerEXT
        )?,
        _ => return None,
    })
}

/// Instance hooks returned even when the next layer has no such entry point.
fn instance_hook_always(name: &[u8]) -> bool {
    matches!(
        name,
        b"vkGetInstanceProcAddr" | b"vkCreateInstance" | b"vkDestroyInstance" | b"vkCreateDevice"
    )
}

/// Our device-level hooks that wrap an entry point of the next layer.
fn device_hook(name: &[u8]) -> vk::PFN_vkVoidFunction {
    use device::*;
    Some(match name {
        b"vkGetDeviceProcAddr" => hook!(vkGetDeviceProcAddr, vk::PFN_vkGetDeviceProcAddr)?,
        b"vkDestroyDevice" => hook!(destroy_device, vk::PFN_vkDestroyDevice)?,
        b"vkAllocateMemory" => hook!(allocate_memory, vk::PFN_vkAllocateMemory)?,
        b"vkFreeMemory" => hook!(free_memory, vk::PFN_vkFreeMemory)?,
        b"vkMapMemory" => hook!(map_memory, vk::PFN_vkMapMemory)?,
        b"vkCreateBuffer" => hook!(create_buffer, vk::PFN_vkCreateBuffer)?,
        b"vkDestroyBuffer" => hook!(destroy_buffer, vk::PFN_vkDestroyBuffer)?,
        b"vkBindBufferMemory" => hook!(bind_buffer_memory, vk::PFN_vkBindBufferMemory)?,
        b"vkBindBufferMemory2" => hook!(bind_buffer_memory2, vk::PFN_vkBindBufferMemory2)?,
        b"vkBindBufferMemory2KHR" => hook!(bind_buffer_memory2_khr, vk::PFN_vkBindBufferMemory2)?,
        b"vkCreateImage" => hook!(create_image, vk::PFN_vkCreateImage)?,
        b"vkDestroyImage" => hook!(destroy_image, vk::PFN_vkDestroyImage)?,
        b"vkBindImageMemory" => hook!(bind_image_memory, vk::PFN_vkBindImageMemory)?,
        b"vkBindImageMemory2" => hook!(bind_image_memory2, vk::PFN_vkBindImageMemory2)?,
        b"vkBindImageMemory2KHR" => hook!(bind_image_memory2_khr, vk::PFN_vkBindImageMemory2)?,
        b"vkSetDebugUtilsObjectNameEXT" => hook!(
            set_debug_utils_object_name,
            vk::PFN_vkSetDebugUtilsObjectNameEXT
        )?,
        b"vkQueueSubmit" => hook!(queue_submit, vk::PFN_vkQueueSubmit)?,
        b"vkQueueSubmit2" => hook!(queue_submit2, vk::PFN_vkQueueSubmit2)?,
        b"vkQueueSubmit2KHR" => hook!(queue_submit2_khr, vk::PFN_vkQueueSubmit2)?,
        b"vkQueueBindSparse" => hook!(queue_bind_sparse, vk::PFN_vkQueueBindSparse)?,
        b"vkQueueWaitIdle" => hook!(queue_wait_idle, vk::PFN_vkQueueWaitIdle)?,
        b"vkDeviceWaitIdle" => hook!(device_wait_idle, vk::PFN_vkDeviceWaitIdle)?,
        b"vkWaitForFences" => hook!(wait_for_fences, vk::PFN_vkWaitForFences)?,
        b"vkGetFenceStatus" => hook!(get_fence_status, vk::PFN_vkGetFenceStatus)?,
        b"vkGetEventStatus" => hook!(get_event_status, vk::PFN_vkGetEventStatus)?,
        b"vkWaitSemaphores" => hook!(wait_semaphores, vk::PFN_vkWaitSemaphores)?,
        b"vkWaitSemaphoresKHR" => hook!(wait_semaphores_khr, vk::PFN_vkWaitSemaphores)?,
        b"vkGetSemaphoreCounterValue" => hook!(
            get_semaphore_counter_value,
            vk::PFN_vkGetSemaphoreCounterValue
        )?,
        b"vkGetSemaphoreCounterValueKHR" => hook!(
            get_semaphore_counter_value_khr,
            vk::PFN_vkGetSemaphoreCounterValue
        )?,
        b"vkGetQueryPoolResults" => hook!(get_query_pool_results, vk::PFN_vkGetQueryPoolResults)?,
        b"vkQueuePresentKHR" => hook!(queue_present_khr, vk::PFN_vkQueuePresentKHR)?,
        b"vkAcquireNextImageKHR" => hook!(acquire_next_image_khr, vk::PFN_vkAcquireNextImageKHR)?,
        b"vkAcquireNextImage2KHR" => {
            hook!(acquire_next_image2_khr, vk::PFN_vkAcquireNextImage2KHR)?
        }
        _ => return None,
    })
}

/// Device-level hooks that follow command buffers (`commands.rs`): returned from
/// `vkGetDeviceProcAddr` only for devices where the layer records into command buffers.
fn command_hook(name: &[u8]) -> vk::PFN_vkVoidFunction {
    use commands::*;
    Some(match name {
        b"vkCreateCommandPool" => hook!(create_command_pool, vk::PFN_vkCreateCommandPool)?,
        b"vkDestroyCommandPool" => hook!(destroy_command_pool, vk::PFN_vkDestroyCommandPool)?,
        b"vkResetCommandPool" => hook!(reset_command_pool, vk::PFN_vkResetCommandPool)?,
        b"vkAllocateCommandBuffers" => {
            hook!(allocate_command_buffers, vk::PFN_vkAllocateCommandBuffers)?
        }
        b"vkFreeCommandBuffers" => hook!(free_command_buffers, vk::PFN_vkFreeCommandBuffers)?,
        b"vkBeginCommandBuffer" => hook!(begin_command_buffer, vk::PFN_vkBeginCommandBuffer)?,
        b"vkEndCommandBuffer" => hook!(end_command_buffer, vk::PFN_vkEndCommandBuffer)?,
        b"vkResetCommandBuffer" => hook!(reset_command_buffer, vk::PFN_vkResetCommandBuffer)?,
        b"vkCmdBeginRenderPass" => hook!(cmd_begin_render_pass, vk::PFN_vkCmdBeginRenderPass)?,
        b"vkCmdBeginRenderPass2" => hook!(cmd_begin_render_pass2, vk::PFN_vkCmdBeginRenderPass2)?,
        b"vkCmdBeginRenderPass2KHR" => {
            hook!(cmd_begin_render_pass2_khr, vk::PFN_vkCmdBeginRenderPass2)?
        }
        b"vkCmdEndRenderPass" => hook!(cmd_end_render_pass, vk::PFN_vkCmdEndRenderPass)?,
        b"vkCmdEndRenderPass2" => hook!(cmd_end_render_pass2, vk::PFN_vkCmdEndRenderPass2)?,
        b"vkCmdEndRenderPass2KHR" => hook!(cmd_end_render_pass2_khr, vk::PFN_vkCmdEndRenderPass2)?,
        b"vkCmdBeginRendering" => hook!(cmd_begin_rendering, vk::PFN_vkCmdBeginRendering)?,
        b"vkCmdBeginRenderingKHR" => hook!(cmd_begin_rendering_khr, vk::PFN_vkCmdBeginRendering)?,
        b"vkCmdEndRendering" => hook!(cmd_end_rendering, vk::PFN_vkCmdEndRendering)?,
        b"vkCmdEndRenderingKHR" => hook!(cmd_end_rendering_khr, vk::PFN_vkCmdEndRendering)?,
        b"vkCmdBeginDebugUtilsLabelEXT" => hook!(
            cmd_begin_debug_utils_label,
            vk::PFN_vkCmdBeginDebugUtilsLabelEXT
        )?,
        b"vkCmdBindPipeline" => hook!(cmd_bind_pipeline, vk::PFN_vkCmdBindPipeline)?,
        b"vkDestroyPipeline" => hook!(destroy_pipeline, vk::PFN_vkDestroyPipeline)?,
        _ => return None,
    })
}

/// Entry points of the extensions the layer serves itself (fault queries, buffer markers).
fn fault_hook(name: &[u8]) -> vk::PFN_vkVoidFunction {
    use device::*;
    Some(match name {
        b"vkCmdWriteBufferMarkerAMD" => hook!(
            commands::cmd_write_buffer_marker_amd,
            vk::PFN_vkCmdWriteBufferMarkerAMD
        )?,
        b"vkGetDeviceFaultInfoEXT" => {
            hook!(get_device_fault_info_ext, vk::PFN_vkGetDeviceFaultInfoEXT)?
        }
        b"vkGetDeviceFaultReportsKHR" => hook!(
            get_device_fault_reports_khr,
            vulkan_fault_ffi::PfnGetDeviceFaultReportsKHR
        )?,
        b"vkGetDeviceFaultDebugInfoKHR" => hook!(
            get_device_fault_debug_info_khr,
            vulkan_fault_ffi::PfnGetDeviceFaultDebugInfoKHR
        )?,
        _ => return None,
    })
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
        let name = (unsafe { c_str(p_name) })?;
        let name = name.to_bytes();
        // Answered for any instance handle: while building the instance chain the loader may ask with
        // the handle of the instance being created, which the layer does not know yet (seen with
        // loader 1.3.239 and the NVIDIA driver).
        if matches!(name, b"vkGetInstanceProcAddr" | b"vkCreateInstance") {
            return instance_hook(name);
        }
        if instance == vk::Instance::null() {
            // No other global command is hooked, and there is no next layer to ask.
            return None;
        }
        // SAFETY: a valid instance handle. An instance the layer does not know (e.g. one still being
        // created) gets null: without its next layer there is nothing to forward to.
        let inst = (unsafe { dispatch::instance_of(instance) })?;
        // SAFETY: the next layer's GIPA with the instance it created.
        let next = unsafe { (inst.next_gipa)(instance, p_name) };
        if let Some(h) = instance_hook(name) {
            return if next.is_some() || instance_hook_always(name) {
                Some(h)
            } else {
                None
            };
        }
        if let Some(h) = fault_hook(name) {
            return Some(h);
        }
        if let Some(h) = device_hook(name).or_else(|| command_hook(name)) {
            return next.map(|_| h);
        }
        next
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
        let name = (unsafe { c_str(p_name) })?;
        let name: &CStr = name;
        let name = name.to_bytes();
        // SAFETY: a valid device handle.
        let dev = (unsafe { dispatch::device_of(device) })?;
        if name == b"vkGetDeviceProcAddr" {
            return device_hook(name);
        }
        let ext = dev.extensions;
        let ours = match name {
            b"vkGetDeviceFaultInfoEXT" => ext.ext_fault_enabled,
            b"vkGetDeviceFaultReportsKHR" | b"vkGetDeviceFaultDebugInfoKHR" => {
                ext.khr_fault_enabled && ext.provided.khr_fault
            }
            b"vkCmdWriteBufferMarkerAMD" => ext.buffer_marker_enabled,
            _ => false,
        };
        if ours {
            return fault_hook(name);
        }
        // SAFETY: the next layer's GDPA with the device it created.
        let next = unsafe { (dev.next_gdpa)(device, p_name) };
        if let Some(h) = command_hook(name) {
            // The label command may only be known to the next layer's GIPA (see `create_device`).
            let label_via_gipa = name == b"vkCmdBeginDebugUtilsLabelEXT"
                && dev.fns.cmd_begin_debug_utils_label.is_some();
            // Binds are frequent: the pipeline hooks only where `hang-in-pipeline` needs them.
            let wanted = match name {
                b"vkCmdBindPipeline" | b"vkDestroyPipeline" => commands::tracks_pipelines(&dev),
                _ => dev.tracks_commands,
            };
            return if wanted && (next.is_some() || label_via_gipa) {
                Some(h)
            } else {
                next
            };
        }
        match device_hook(name) {
            Some(h) if next.is_some() => Some(h),
            _ => next,
        }
    })
}
