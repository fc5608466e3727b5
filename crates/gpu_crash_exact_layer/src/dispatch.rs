//! Dispatch: the next layer's entry points per instance and device, and the maps that find them.
//!
//! Dispatchable handles (instance, physical device, device, queue, command buffer) start with the
//! loader's dispatch-table pointer; objects of one instance (or one device) share it, so it is the
//! key that finds our data from any of them.
//!
//! Locking: each map is an `RwLock` held only to look up (read) or insert and remove (write); no
//! other lock is taken while it is held, and no call goes down the chain while it is held.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::sync::{Arc, RwLock};

use ash::vk::{self, Handle};

use crate::device::Device;

/// Declares a table of optional next-layer entry points, loaded by name.
macro_rules! fn_table {
    ($(#[$m:meta])* $name:ident { $($field:ident : $pfn:ident = $cname:literal,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy)]
        pub(crate) struct $name {
            $(pub $field: Option<vk::$pfn>,)*
        }
        impl $name {
            /// Loads every entry point with `get` (the next layer's proc-addr function).
            ///
            /// # Safety
            /// `get` must return, for each name, null or an entry point with that name's signature.
            pub(crate) unsafe fn load(mut get: impl FnMut(&CStr) -> vk::PFN_vkVoidFunction) -> Self {
                Self {
                    $(
                        // SAFETY: the caller guarantees `get` returns an entry point of this name,
                        // whose C signature is `$pfn`; both are plain `extern "system"` function
                        // pointers wrapped in `Option`, so the layouts match.
                        $field: unsafe {
                            std::mem::transmute::<vk::PFN_vkVoidFunction, Option<vk::$pfn>>(get($cname))
                        },
                    )*
                }
            }
        }
    };
}

fn_table!(
    /// Instance-level entry points of the next layer.
    InstanceFns {
        destroy_instance: PFN_vkDestroyInstance = c"vkDestroyInstance",
        enumerate_device_extension_properties: PFN_vkEnumerateDeviceExtensionProperties = c"vkEnumerateDeviceExtensionProperties",
        get_physical_device_memory_properties: PFN_vkGetPhysicalDeviceMemoryProperties = c"vkGetPhysicalDeviceMemoryProperties",
    }
);

fn_table!(
    /// Device-level entry points of the next layer.
    DeviceFns {
        destroy_device: PFN_vkDestroyDevice = c"vkDestroyDevice",
        begin_command_buffer: PFN_vkBeginCommandBuffer = c"vkBeginCommandBuffer",
        free_command_buffers: PFN_vkFreeCommandBuffers = c"vkFreeCommandBuffers",
        cmd_bind_pipeline: PFN_vkCmdBindPipeline = c"vkCmdBindPipeline",
        cmd_draw: PFN_vkCmdDraw = c"vkCmdDraw",
        cmd_draw_indexed: PFN_vkCmdDrawIndexed = c"vkCmdDrawIndexed",
        cmd_draw_indirect: PFN_vkCmdDrawIndirect = c"vkCmdDrawIndirect",
        cmd_draw_indexed_indirect: PFN_vkCmdDrawIndexedIndirect = c"vkCmdDrawIndexedIndirect",
        cmd_draw_indirect_count: PFN_vkCmdDrawIndirectCount = c"vkCmdDrawIndirectCount",
        cmd_draw_indirect_count_khr: PFN_vkCmdDrawIndirectCount = c"vkCmdDrawIndirectCountKHR",
        cmd_draw_indexed_indirect_count: PFN_vkCmdDrawIndexedIndirectCount = c"vkCmdDrawIndexedIndirectCount",
        cmd_draw_indexed_indirect_count_khr: PFN_vkCmdDrawIndexedIndirectCount = c"vkCmdDrawIndexedIndirectCountKHR",
        cmd_dispatch: PFN_vkCmdDispatch = c"vkCmdDispatch",
        cmd_dispatch_indirect: PFN_vkCmdDispatchIndirect = c"vkCmdDispatchIndirect",
        cmd_dispatch_base: PFN_vkCmdDispatchBase = c"vkCmdDispatchBase",
        cmd_begin_debug_utils_label: PFN_vkCmdBeginDebugUtilsLabelEXT = c"vkCmdBeginDebugUtilsLabelEXT",
        cmd_end_debug_utils_label: PFN_vkCmdEndDebugUtilsLabelEXT = c"vkCmdEndDebugUtilsLabelEXT",
        set_debug_utils_object_name: PFN_vkSetDebugUtilsObjectNameEXT = c"vkSetDebugUtilsObjectNameEXT",
        destroy_pipeline: PFN_vkDestroyPipeline = c"vkDestroyPipeline",
        queue_submit: PFN_vkQueueSubmit = c"vkQueueSubmit",
        queue_submit2: PFN_vkQueueSubmit2 = c"vkQueueSubmit2",
        queue_submit2_khr: PFN_vkQueueSubmit2 = c"vkQueueSubmit2KHR",
        cmd_write_buffer_marker_amd: PFN_vkCmdWriteBufferMarkerAMD = c"vkCmdWriteBufferMarkerAMD",
        cmd_pipeline_barrier: PFN_vkCmdPipelineBarrier = c"vkCmdPipelineBarrier",
        cmd_update_buffer: PFN_vkCmdUpdateBuffer = c"vkCmdUpdateBuffer",
        cmd_begin_render_pass: PFN_vkCmdBeginRenderPass = c"vkCmdBeginRenderPass",
        cmd_begin_render_pass2: PFN_vkCmdBeginRenderPass2 = c"vkCmdBeginRenderPass2",
        cmd_begin_render_pass2_khr: PFN_vkCmdBeginRenderPass2 = c"vkCmdBeginRenderPass2KHR",
        cmd_end_render_pass: PFN_vkCmdEndRenderPass = c"vkCmdEndRenderPass",
        cmd_end_render_pass2: PFN_vkCmdEndRenderPass2 = c"vkCmdEndRenderPass2",
        cmd_end_render_pass2_khr: PFN_vkCmdEndRenderPass2 = c"vkCmdEndRenderPass2KHR",
        cmd_begin_rendering: PFN_vkCmdBeginRendering = c"vkCmdBeginRendering",
        cmd_begin_rendering_khr: PFN_vkCmdBeginRendering = c"vkCmdBeginRenderingKHR",
        cmd_end_rendering: PFN_vkCmdEndRendering = c"vkCmdEndRendering",
        cmd_end_rendering_khr: PFN_vkCmdEndRendering = c"vkCmdEndRenderingKHR",
        create_buffer: PFN_vkCreateBuffer = c"vkCreateBuffer",
        destroy_buffer: PFN_vkDestroyBuffer = c"vkDestroyBuffer",
        get_buffer_memory_requirements: PFN_vkGetBufferMemoryRequirements = c"vkGetBufferMemoryRequirements",
        allocate_memory: PFN_vkAllocateMemory = c"vkAllocateMemory",
        free_memory: PFN_vkFreeMemory = c"vkFreeMemory",
        bind_buffer_memory: PFN_vkBindBufferMemory = c"vkBindBufferMemory",
        map_memory: PFN_vkMapMemory = c"vkMapMemory",
    }
);

/// What the layer keeps per instance.
pub(crate) struct Instance {
    pub handle: vk::Instance,
    pub next_gipa: vk::PFN_vkGetInstanceProcAddr,
    pub fns: InstanceFns,
}

static INSTANCES: RwLock<Option<HashMap<usize, Arc<Instance>>>> = RwLock::new(None);
static DEVICES: RwLock<Option<HashMap<usize, Arc<Device>>>> = RwLock::new(None);

/// The loader's dispatch-table pointer of a dispatchable handle (null for a null handle).
pub(crate) fn key<H: Handle>(handle: H) -> usize {
    let raw = handle.as_raw() as usize;
    if raw == 0 {
        return 0;
    }
    // SAFETY: a dispatchable handle is a pointer to an object whose first word is the loader's
    // dispatch-table pointer (the loader-layer interface guarantees it).
    unsafe { *(raw as *const usize) }
}

fn get<T>(map: &RwLock<Option<HashMap<usize, Arc<T>>>>, key: usize) -> Option<Arc<T>> {
    let map = map.read().unwrap_or_else(|p| p.into_inner());
    map.as_ref()?.get(&key).cloned()
}

fn put<T>(map: &RwLock<Option<HashMap<usize, Arc<T>>>>, key: usize, value: Option<Arc<T>>) {
    let mut map = map.write().unwrap_or_else(|p| p.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    match value {
        Some(v) => {
            map.insert(key, v);
        }
        None => {
            map.remove(&key);
        }
    }
}

/// The instance of an instance or physical device handle.
pub(crate) fn instance_of<H: Handle>(handle: H) -> Option<Arc<Instance>> {
    get(&INSTANCES, key(handle))
}

pub(crate) fn set_instance(key: usize, instance: Option<Arc<Instance>>) {
    put(&INSTANCES, key, instance);
}

/// The device of a device, queue or command buffer handle.
pub(crate) fn device_of<H: Handle>(handle: H) -> Option<Arc<Device>> {
    get(&DEVICES, key(handle))
}

pub(crate) fn set_device(key: usize, device: Option<Arc<Device>>) {
    put(&DEVICES, key, device);
}

/// A C string argument, `None` for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string that outlives the returned reference.
pub(crate) unsafe fn c_str<'a>(p: *const c_char) -> Option<&'a CStr> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
}

/// Casts one of our hooks to `PFN_vkVoidFunction`, checked against its Vulkan signature.
macro_rules! hook {
    ($f:expr, $pfn:ty) => {{
        let f: $pfn = $f;
        // SAFETY: a function pointer of a Vulkan signature returned through the generic
        // PFN_vkVoidFunction type, as vkGet*ProcAddr does; the caller casts it back to `$pfn`.
        Some(unsafe { std::mem::transmute::<$pfn, unsafe extern "system" fn()>(f) })
    }};
}
pub(crate) use hook;
