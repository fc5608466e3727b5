//! Dispatch: the next layer's entry points per instance and device, and the global object maps.
//!
//! Dispatchable handles (instance, physical device, device, queue, command buffer) start with the
//! loader's dispatch-table pointer; objects of one instance (or one device) share it, so it is the
//! key that finds our per-instance / per-device data from any of them.
//!
//! Locking: one global `Mutex` guards the maps of `Arc`s; it is held only to look up or insert.
//! Per-device state has its own `Mutex`. No lock is ever held while calling down the chain or into an
//! application callback (either could call back into the layer), with two exceptions:
//!
//! - the leaf lock `DeviceData::drill_event` around `vkSetEvent` / `vkDestroyEvent` (see there);
//! - the read side of `InstanceData::messengers` around the delivery of the layer's own binding
//!   reports to the application's callbacks (`messengers::emit`). Its write side is taken only by
//!   `vkCreateDebugUtilsMessengerEXT` / `vkDestroyDebugUtilsMessengerEXT` to change the list, never
//!   while calling down the chain. An application callback must not call Vulkan commands (spec), so
//!   it cannot need the write side, and `emit` is only ever called with no other layer lock held.
//!
//! Order: no lock is taken while the maps lock is held (a lookup or insert only); a device's
//! `state` may be held while taking its `drill_event` (never the reverse); an instance's `messengers`
//! (either side) is taken with no other layer lock held, and no layer lock is taken while it is held.
//! `video_memory`'s books are a leaf lock too: held only to read or change them, with no other
//! layer lock taken meanwhile, never across a call down the chain or into the application.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use ash::vk::{self, Handle};

use crate::config::Config;
use crate::state::bindings::DeviceTracker;
use crate::state::commands::CommandTracker;
use crate::state::extensions::DeviceExtensions;
use crate::state::fault::FaultState;

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
        get_physical_device_features2: PFN_vkGetPhysicalDeviceFeatures2 = c"vkGetPhysicalDeviceFeatures2",
        get_physical_device_features2_khr: PFN_vkGetPhysicalDeviceFeatures2 = c"vkGetPhysicalDeviceFeatures2KHR",
        get_physical_device_properties: PFN_vkGetPhysicalDeviceProperties = c"vkGetPhysicalDeviceProperties",
        get_physical_device_queue_family_properties: PFN_vkGetPhysicalDeviceQueueFamilyProperties = c"vkGetPhysicalDeviceQueueFamilyProperties",
        get_physical_device_properties2: PFN_vkGetPhysicalDeviceProperties2 = c"vkGetPhysicalDeviceProperties2",
        get_physical_device_properties2_khr: PFN_vkGetPhysicalDeviceProperties2 = c"vkGetPhysicalDeviceProperties2KHR",
        get_physical_device_memory_properties: PFN_vkGetPhysicalDeviceMemoryProperties = c"vkGetPhysicalDeviceMemoryProperties",
        get_physical_device_memory_properties2: PFN_vkGetPhysicalDeviceMemoryProperties2 = c"vkGetPhysicalDeviceMemoryProperties2",
        get_physical_device_memory_properties2_khr: PFN_vkGetPhysicalDeviceMemoryProperties2 = c"vkGetPhysicalDeviceMemoryProperties2KHR",
        create_debug_utils_messenger: PFN_vkCreateDebugUtilsMessengerEXT = c"vkCreateDebugUtilsMessengerEXT",
        destroy_debug_utils_messenger: PFN_vkDestroyDebugUtilsMessengerEXT = c"vkDestroyDebugUtilsMessengerEXT",
    }
);

fn_table!(
    /// Device-level entry points of the next layer.
    DeviceFns {
        destroy_device: PFN_vkDestroyDevice = c"vkDestroyDevice",
        allocate_memory: PFN_vkAllocateMemory = c"vkAllocateMemory",
        free_memory: PFN_vkFreeMemory = c"vkFreeMemory",
        map_memory: PFN_vkMapMemory = c"vkMapMemory",
        create_buffer: PFN_vkCreateBuffer = c"vkCreateBuffer",
        destroy_buffer: PFN_vkDestroyBuffer = c"vkDestroyBuffer",
        get_buffer_memory_requirements: PFN_vkGetBufferMemoryRequirements = c"vkGetBufferMemoryRequirements",
        bind_buffer_memory: PFN_vkBindBufferMemory = c"vkBindBufferMemory",
        bind_buffer_memory2: PFN_vkBindBufferMemory2 = c"vkBindBufferMemory2",
        bind_buffer_memory2_khr: PFN_vkBindBufferMemory2 = c"vkBindBufferMemory2KHR",
        create_image: PFN_vkCreateImage = c"vkCreateImage",
        destroy_image: PFN_vkDestroyImage = c"vkDestroyImage",
        get_image_memory_requirements: PFN_vkGetImageMemoryRequirements = c"vkGetImageMemoryRequirements",
        bind_image_memory: PFN_vkBindImageMemory = c"vkBindImageMemory",
        bind_image_memory2: PFN_vkBindImageMemory2 = c"vkBindImageMemory2",
        bind_image_memory2_khr: PFN_vkBindImageMemory2 = c"vkBindImageMemory2KHR",
        set_debug_utils_object_name: PFN_vkSetDebugUtilsObjectNameEXT = c"vkSetDebugUtilsObjectNameEXT",
        queue_submit: PFN_vkQueueSubmit = c"vkQueueSubmit",
        queue_submit2: PFN_vkQueueSubmit2 = c"vkQueueSubmit2",
        queue_submit2_khr: PFN_vkQueueSubmit2 = c"vkQueueSubmit2KHR",
        queue_bind_sparse: PFN_vkQueueBindSparse = c"vkQueueBindSparse",
        queue_wait_idle: PFN_vkQueueWaitIdle = c"vkQueueWaitIdle",
        device_wait_idle: PFN_vkDeviceWaitIdle = c"vkDeviceWaitIdle",
        wait_for_fences: PFN_vkWaitForFences = c"vkWaitForFences",
        get_fence_status: PFN_vkGetFenceStatus = c"vkGetFenceStatus",
        get_event_status: PFN_vkGetEventStatus = c"vkGetEventStatus",
        wait_semaphores: PFN_vkWaitSemaphores = c"vkWaitSemaphores",
        wait_semaphores_khr: PFN_vkWaitSemaphores = c"vkWaitSemaphoresKHR",
        get_semaphore_counter_value: PFN_vkGetSemaphoreCounterValue = c"vkGetSemaphoreCounterValue",
        get_semaphore_counter_value_khr: PFN_vkGetSemaphoreCounterValue = c"vkGetSemaphoreCounterValueKHR",
        get_query_pool_results: PFN_vkGetQueryPoolResults = c"vkGetQueryPoolResults",
        queue_present_khr: PFN_vkQueuePresentKHR = c"vkQueuePresentKHR",
        acquire_next_image_khr: PFN_vkAcquireNextImageKHR = c"vkAcquireNextImageKHR",
        acquire_next_image2_khr: PFN_vkAcquireNextImage2KHR = c"vkAcquireNextImage2KHR",
        get_device_fault_info_ext: PFN_vkGetDeviceFaultInfoEXT = c"vkGetDeviceFaultInfoEXT",
        cmd_pipeline_barrier: PFN_vkCmdPipelineBarrier = c"vkCmdPipelineBarrier",
        cmd_fill_buffer: PFN_vkCmdFillBuffer = c"vkCmdFillBuffer",
        cmd_write_buffer_marker_amd: PFN_vkCmdWriteBufferMarkerAMD = c"vkCmdWriteBufferMarkerAMD",
        create_command_pool: PFN_vkCreateCommandPool = c"vkCreateCommandPool",
        destroy_command_pool: PFN_vkDestroyCommandPool = c"vkDestroyCommandPool",
        reset_command_pool: PFN_vkResetCommandPool = c"vkResetCommandPool",
        allocate_command_buffers: PFN_vkAllocateCommandBuffers = c"vkAllocateCommandBuffers",
        free_command_buffers: PFN_vkFreeCommandBuffers = c"vkFreeCommandBuffers",
        begin_command_buffer: PFN_vkBeginCommandBuffer = c"vkBeginCommandBuffer",
        end_command_buffer: PFN_vkEndCommandBuffer = c"vkEndCommandBuffer",
        reset_command_buffer: PFN_vkResetCommandBuffer = c"vkResetCommandBuffer",
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
        create_event: PFN_vkCreateEvent = c"vkCreateEvent",
        destroy_event: PFN_vkDestroyEvent = c"vkDestroyEvent",
        set_event: PFN_vkSetEvent = c"vkSetEvent",
        cmd_wait_events: PFN_vkCmdWaitEvents = c"vkCmdWaitEvents",
        cmd_begin_debug_utils_label: PFN_vkCmdBeginDebugUtilsLabelEXT = c"vkCmdBeginDebugUtilsLabelEXT",
        cmd_bind_pipeline: PFN_vkCmdBindPipeline = c"vkCmdBindPipeline",
        destroy_pipeline: PFN_vkDestroyPipeline = c"vkDestroyPipeline",
    }
);

/// What the layer remembers of the application, for the vendor binary header.
#[derive(Clone, Debug, Default)]
pub(crate) struct AppInfo {
    pub application_name: Option<String>,
    pub application_version: u32,
    pub engine_name: Option<String>,
    pub engine_version: u32,
    pub api_version: u32,
}

/// An application debug messenger the layer sends binding reports to.
#[derive(Clone, Copy)]
pub(crate) struct Messenger {
    pub handle: vk::DebugUtilsMessengerEXT,
    pub severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    pub types: vk::DebugUtilsMessageTypeFlagsEXT,
    pub callback: vk::PFN_vkDebugUtilsMessengerCallbackEXT,
    pub user_data: usize,
    /// The `native::WrappedMessenger` registered with the driver (a leaked `Box`, freed on destroy).
    pub wrapper: usize,
}

/// Per-instance data.
pub(crate) struct InstanceData {
    pub handle: vk::Instance,
    pub next_gipa: vk::PFN_vkGetInstanceProcAddr,
    pub fns: InstanceFns,
    pub config: Config,
    pub app: AppInfo,
    /// The application's debug messengers. `messengers::emit` holds the read side while it calls their
    /// callbacks; `vkDestroyDebugUtilsMessengerEXT` removes a messenger under the write side, so it
    /// waits for every delivery in flight and no callback of a destroyed messenger runs after the
    /// destroy returns (see the module doc for the locking order).
    pub messengers: RwLock<Vec<Messenger>>,
}

/// Per-device data.
pub(crate) struct DeviceData {
    pub handle: vk::Device,
    pub instance: Arc<InstanceData>,
    pub next_gdpa: vk::PFN_vkGetDeviceProcAddr,
    pub fns: DeviceFns,
    pub extensions: DeviceExtensions,
    pub physical: PhysicalInfo,
    /// Command pools, command buffers and render pass instances are tracked (`commands.rs`): only
    /// when the layer records into command buffers (buffer markers enabled, or a scenario that
    /// inserts a wait); otherwise those hooks are not even returned from `vkGetDeviceProcAddr`.
    pub tracks_commands: bool,
    /// Capabilities of each queue family (index = family), for where commands may be inserted.
    pub queue_families: Vec<vk::QueueFlags>,
    /// The layer's own event for scenarios that make the GPU wait (`vkCmdWaitEvents`), created with
    /// the device. A leaf lock: it is held across `vkSetEvent` / `vkDestroyEvent` (which never call
    /// back into the layer) so that the stall thread can never set a destroyed event.
    pub drill_event: Mutex<Option<vk::Event>>,
    pub state: Mutex<DeviceState>,
}

/// Physical device facts copied at device creation (for the vendor binary header).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PhysicalInfo {
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_version: u32,
    pub pipeline_cache_uuid: [u8; vk::UUID_SIZE],
}

/// Mutable per-device state.
pub(crate) struct DeviceState {
    pub tracker: DeviceTracker,
    pub fault: FaultState,
    pub commands: CommandTracker,
}

impl DeviceData {
    /// Locks the drill event slot (see `drill_event`).
    pub(crate) fn event_slot(&self) -> MutexGuard<'_, Option<vk::Event>> {
        self.drill_event.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the device state; a poisoned lock (a panic caught elsewhere) is still usable because every
    /// update leaves the state consistent.
    pub(crate) fn lock(&self) -> MutexGuard<'_, DeviceState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Default)]
struct Maps {
    instances: HashMap<usize, Arc<InstanceData>>,
    devices: HashMap<usize, Arc<DeviceData>>,
}

static MAPS: Mutex<Option<Maps>> = Mutex::new(None);

fn with_maps<R>(f: impl FnOnce(&mut Maps) -> R) -> R {
    let mut guard = MAPS.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Maps::default))
}

/// The loader dispatch key of a dispatchable handle.
///
/// # Safety
/// `handle` must be a valid dispatchable handle (non-null, created by the loader chain).
pub(crate) unsafe fn dispatch_key<H: Handle>(handle: H) -> usize {
    // SAFETY: dispatchable handles point at an object whose first word is the loader's dispatch table.
    unsafe { *(handle.as_raw() as usize as *const usize) }
}

pub(crate) fn insert_instance(key: usize, data: Arc<InstanceData>) {
    with_maps(|m| m.instances.insert(key, data));
}

pub(crate) fn remove_instance(key: usize) -> Option<Arc<InstanceData>> {
    with_maps(|m| m.instances.remove(&key))
}

/// Instance data by dispatch key (of the instance or one of its physical devices, which share the
/// instance's dispatch table in the Vulkan loader). An unknown key is `None`: the layer never guesses
/// which instance a handle belongs to; callers pass through or fail the call.
pub(crate) fn instance_by_key(key: usize) -> Option<Arc<InstanceData>> {
    with_maps(|m| m.instances.get(&key).cloned())
}

pub(crate) fn insert_device(key: usize, data: Arc<DeviceData>) {
    with_maps(|m| m.devices.insert(key, data));
}

pub(crate) fn remove_device(key: usize) -> Option<Arc<DeviceData>> {
    with_maps(|m| m.devices.remove(&key))
}

pub(crate) fn device_by_key(key: usize) -> Option<Arc<DeviceData>> {
    with_maps(|m| m.devices.get(&key).cloned())
}

/// Device data for any handle dispatched through a device (device, queue, command buffer).
///
/// # Safety
/// `handle` must be a valid dispatchable handle.
pub(crate) unsafe fn device_of<H: Handle + Copy>(handle: H) -> Option<Arc<DeviceData>> {
    if handle.as_raw() == 0 {
        return None;
    }
    // SAFETY: forwarded from the caller.
    device_by_key(unsafe { dispatch_key(handle) })
}

/// Instance data for an instance or physical device handle.
///
/// # Safety
/// `handle` must be a valid dispatchable handle.
pub(crate) unsafe fn instance_of<H: Handle + Copy>(handle: H) -> Option<Arc<InstanceData>> {
    if handle.as_raw() == 0 {
        return None;
    }
    // SAFETY: forwarded from the caller.
    instance_by_key(unsafe { dispatch_key(handle) })
}

pub(crate) const NO_DEVICE: vk::Result = vk::Result::ERROR_INITIALIZATION_FAILED;

/// Looks up the device of a dispatchable handle.
pub(crate) fn dev_of<H: Handle + Copy>(h: H) -> Option<Arc<DeviceData>> {
    // SAFETY: hooks are only called by the loader with valid dispatchable handles.
    unsafe { device_of(h) }
}

/// Reads a C string argument, tolerating null.
///
/// # Safety
/// `p` must be null or point at a NUL-terminated string.
pub(crate) unsafe fn c_str<'a>(p: *const c_char) -> Option<&'a CStr> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-null and NUL-terminated per the caller.
        Some(unsafe { CStr::from_ptr(p) })
    }
}

/// Casts one of our hook functions to the loader's generic function pointer type.
macro_rules! hook {
    ($f:expr, $pfn:ty) => {{
        let f: $pfn = $f;
        // SAFETY: all Vulkan entry points are returned as `PFN_vkVoidFunction` and cast back by the
        // caller to the signature of the name it asked for, which is `$pfn`.
        Some(unsafe { std::mem::transmute::<$pfn, unsafe extern "system" fn()>(f) })
    }};
}
pub(crate) use hook;

/// Fake instances for unit tests: a dispatchable handle is a pointer to a word holding its dispatch
/// key, so a boxed word that holds its own address is a handle the maps can know.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use crate::config::Config;

    /// Serializes the unit tests that use the global maps or the mock driver's state.
    pub(crate) fn serial() -> MutexGuard<'static, ()> {
        static LOCK: Mutex<()> = Mutex::new(());
        LOCK.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A dispatchable handle with a fresh dispatch key, known to the maps only once registered.
    pub(crate) struct FakeHandle(Box<usize>);

    impl FakeHandle {
        pub(crate) fn new() -> Self {
            let mut word = Box::new(0usize);
            *word = &*word as *const usize as usize;
            Self(word)
        }

        pub(crate) fn key(&self) -> usize {
            *self.0
        }

        pub(crate) fn as_handle<H: Handle>(&self) -> H {
            H::from_raw(self.key() as u64)
        }
    }

    unsafe extern "system" fn no_gipa(
        _instance: vk::Instance,
        _name: *const c_char,
    ) -> vk::PFN_vkVoidFunction {
        None
    }

    /// An instance registered in the maps under its handle's key; unregistered on drop.
    pub(crate) struct FakeInstance {
        pub handle: FakeHandle,
        pub data: Arc<InstanceData>,
    }

    impl FakeInstance {
        /// `api`: `GPU_CRASH_DRILL_API` (`None`: the default, `ext`).
        pub(crate) fn new(fns: InstanceFns, api: Option<&str>) -> Self {
            let handle = FakeHandle::new();
            let data = Arc::new(InstanceData {
                handle: handle.as_handle(),
                next_gipa: no_gipa,
                fns,
                config: Config::parse(None, api, None, None, None, &mut |_| {}),
                app: AppInfo::default(),
                messengers: RwLock::new(Vec::new()),
            });
            insert_instance(handle.key(), data.clone());
            Self { handle, data }
        }
    }

    impl Drop for FakeInstance {
        fn drop(&mut self) {
            remove_instance(self.handle.key());
        }
    }

    /// An instance table with no entry points.
    pub(crate) fn no_instance_fns() -> InstanceFns {
        // SAFETY: `get` returns null for every name.
        unsafe { InstanceFns::load(|_| None) }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    #[test]
    fn an_unknown_dispatch_key_finds_no_instance() {
        let _serial = serial();
        let only = FakeInstance::new(no_instance_fns(), None);
        assert!(Arc::ptr_eq(
            &instance_by_key(only.handle.key()).unwrap(),
            &only.data
        ));
        let stranger = FakeHandle::new();
        assert!(
            instance_by_key(stranger.key()).is_none(),
            "a key of no instance must not be taken for the only instance"
        );
        // SAFETY: a fake dispatchable handle (a word holding its key).
        let found = unsafe { instance_of(stranger.as_handle::<vk::PhysicalDevice>()) };
        assert!(found.is_none());
    }
}
