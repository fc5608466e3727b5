//! Device-level hooks: address bookkeeping on allocate/bind/destroy, the fault trigger on submit,
//! `VK_ERROR_DEVICE_LOST` after loss, and the fault queries.
//!
//! Every hook but `vkDestroyDevice` (which takes the device out of the maps) opens with the steps of
//! `hook_steps`: a handle the layer does not know (which the loader never produces) gets
//! `VK_ERROR_INITIALIZATION_FAILED` rather than a crash.

use std::ffi::c_void;
use std::sync::Arc;

use ash::vk::{self, Handle};
use vulkan_fault_ffi::{DeviceFaultDebugInfoKHR, DeviceFaultInfoKHR};

use crate::commands;
use crate::dispatch::{self, DeviceData, DeviceFns, DeviceState};
use crate::fault::{self, SubmitAction};
use crate::hook_steps::{call_next, forward, on_device, OUT_OF_MEMORY};
use crate::log::guard;
use crate::messengers::emit;
use crate::native;
use crate::state::bindings::BindingEvent;
use crate::state::fault::WaitInjection;
use crate::video_memory;

fn report(dev: &DeviceData, events: &[BindingEvent]) {
    if dev.extensions.binding_report_enabled {
        emit(&dev.instance, events);
    }
}

/// Takes a freed object out of the device's tracker and reports its unbind, both under the device's
/// lock. A submission on another thread picks a drilled use-after-free's target under that lock too,
/// so it sees the object freed only once the application's messenger has the unbind, as a real
/// driver reports it inside the destroy call. Reported after the lock was let go (and after the call
/// down), a fault injected in between found the reporter's index still holding the object live: 1
/// report of 20 in `tests/recovery.rs`'s crash loop, under load.
fn untrack_and_report(
    dev: &DeviceData,
    untrack: impl FnOnce(&mut DeviceState) -> Option<BindingEvent>,
) {
    let mut state = dev.lock();
    let event = untrack(&mut state);
    report(dev, event.as_slice());
}

pub(crate) unsafe extern "system" fn destroy_device(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard("vkDestroyDevice", (), || {
        if device == vk::Device::null() {
            return;
        }
        // SAFETY: valid device handle.
        let Some(dev) = dispatch::remove_device(unsafe { dispatch::dispatch_key(device) }) else {
            return;
        };
        video_memory::device_destroyed(device);
        let waited = dev.lock().fault.wait != WaitInjection::Armed;
        {
            // Emptied under the slot lock: a stall thread that has not fired yet finds nothing.
            let mut slot = dev.event_slot();
            if let Some(event) = slot.take() {
                // SAFETY: the layer's event of this device. A wait on it may still hold the GPU (a
                // stall not released yet, a hang-in-pass): release it and let the work drain, so
                // neither the event nor the device is destroyed under pending work.
                unsafe {
                    if waited {
                        if let Some(set) = dev.fns.set_event {
                            let _ = set(device, event);
                        }
                        if let Some(idle) = dev.fns.device_wait_idle {
                            let _ = idle(device);
                        }
                    }
                    if let Some(destroy) = dev.fns.destroy_event {
                        destroy(device, event, std::ptr::null());
                    }
                }
            }
        }
        if let Some(next) = dev.fns.destroy_device {
            // SAFETY: forwarded unchanged.
            unsafe { next(device, p_allocator) };
        }
    })
}

pub(crate) unsafe extern "system" fn allocate_memory(
    device: vk::Device,
    p_info: *const vk::MemoryAllocateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_memory: *mut vk::DeviceMemory,
) -> vk::Result {
    let next = |f: &DeviceFns| f.allocate_memory;
    forward(
        "vkAllocateMemory",
        OUT_OF_MEMORY,
        device,
        next,
        |dev, next| {
            // SAFETY: forwarded unchanged.
            let r = native::with_current(dev, || unsafe {
                next(device, p_info, p_allocator, p_memory)
            });
            // SAFETY: the application's valid info; on success the new handle is in `p_memory`.
            unsafe { video_memory::allocated(dev, p_info, p_memory, r) };
            // With a driver that reports its own addresses, `native.rs` learnt them during the call.
            if r == vk::Result::SUCCESS && !dev.extensions.binding_report_native {
                // SAFETY: success: valid info and output.
                let (memory, size) = unsafe { ((*p_memory).as_raw(), (*p_info).allocation_size) };
                let ev = dev.lock().tracker.allocate(memory, size);
                report(dev, &[ev]);
            }
            r
        },
    )
}

pub(crate) unsafe extern "system" fn free_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    on_device("vkFreeMemory", (), device, |dev| {
        untrack_and_report(dev, |state| state.tracker.free(memory.as_raw()));
        video_memory::freed(dev, memory);
        call_next(dev.fns.free_memory, |next| {
            // SAFETY: forwarded unchanged.
            native::with_current(dev, || unsafe { next(device, memory, p_allocator) })
        });
    })
}

pub(crate) unsafe extern "system" fn map_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    flags: vk::MemoryMapFlags,
    pp_data: *mut *mut c_void,
) -> vk::Result {
    let next = |f: &DeviceFns| f.map_memory;
    let failed = vk::Result::ERROR_MEMORY_MAP_FAILED;
    unless_lost("vkMapMemory", failed, device, next, |_, next| {
        // SAFETY: forwarded unchanged.
        unsafe { next(device, memory, offset, size, flags, pp_data) }
    })
}

pub(crate) unsafe extern "system" fn create_buffer(
    device: vk::Device,
    p_info: *const vk::BufferCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_buffer: *mut vk::Buffer,
) -> vk::Result {
    let next = |f: &DeviceFns| f.create_buffer;
    forward(
        "vkCreateBuffer",
        OUT_OF_MEMORY,
        device,
        next,
        |dev, next| {
            // SAFETY: forwarded unchanged.
            let r = unsafe { next(device, p_info, p_allocator, p_buffer) };
            if r == vk::Result::SUCCESS {
                // SAFETY: success: valid output handle.
                let buffer = unsafe { *p_buffer };
                let mut req = vk::MemoryRequirements::default();
                if let Some(get) = dev.fns.get_buffer_memory_requirements {
                    // SAFETY: a freshly created buffer of this device; valid output.
                    unsafe { get(device, buffer, &mut req) };
                }
                dev.lock().tracker.create_resource(
                    vk::ObjectType::BUFFER,
                    buffer.as_raw(),
                    req.size,
                );
            }
            r
        },
    )
}

pub(crate) unsafe extern "system" fn destroy_buffer(
    device: vk::Device,
    buffer: vk::Buffer,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    let next = |f: &DeviceFns| f.destroy_buffer;
    let object = (vk::ObjectType::BUFFER, buffer.as_raw());
    // SAFETY: forwarded unchanged.
    destroy_resource("vkDestroyBuffer", device, object, next, |next| unsafe {
        next(device, buffer, p_allocator)
    })
}

pub(crate) unsafe extern "system" fn create_image(
    device: vk::Device,
    p_info: *const vk::ImageCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_image: *mut vk::Image,
) -> vk::Result {
    let next = |f: &DeviceFns| f.create_image;
    forward("vkCreateImage", OUT_OF_MEMORY, device, next, |dev, next| {
        // SAFETY: forwarded unchanged.
        let r = unsafe { next(device, p_info, p_allocator, p_image) };
        if r == vk::Result::SUCCESS {
            // SAFETY: success: valid info and output handle.
            let (image, flags) = unsafe { (*p_image, (*p_info).flags) };
            let mut req = vk::MemoryRequirements::default();
            // Disjoint multi-planar images have per-plane requirements only (size stays 0).
            if !flags.contains(vk::ImageCreateFlags::DISJOINT) {
                if let Some(get) = dev.fns.get_image_memory_requirements {
                    // SAFETY: a freshly created non-disjoint image; valid output.
                    unsafe { get(device, image, &mut req) };
                }
            }
            dev.lock()
                .tracker
                .create_resource(vk::ObjectType::IMAGE, image.as_raw(), req.size);
        }
        r
    })
}

pub(crate) unsafe extern "system" fn destroy_image(
    device: vk::Device,
    image: vk::Image,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    let next = |f: &DeviceFns| f.destroy_image;
    let object = (vk::ObjectType::IMAGE, image.as_raw());
    // SAFETY: forwarded unchanged.
    destroy_resource("vkDestroyImage", device, object, next, |next| unsafe {
        next(device, image, p_allocator)
    })
}

/// `vkDestroyBuffer` / `vkDestroyImage`: the object's unbind reported (`untrack_and_report`), then
/// `call` with the next layer's entry point (inside `native::with_current`: a driver with its own
/// binding report reports the unbind during the call).
fn destroy_resource<F>(
    what: &str,
    device: vk::Device,
    (ty, handle): (vk::ObjectType, u64),
    next: impl FnOnce(&DeviceFns) -> Option<F>,
    call: impl FnOnce(F),
) {
    on_device(what, (), device, |dev| {
        untrack_and_report(dev, |state| state.tracker.destroy_resource(ty, handle));
        call_next(next(&dev.fns), |f| native::with_current(dev, || call(f)));
    })
}

/// Records successful binds at the layer's own addresses (unless the driver reports its own, which
/// `native.rs` learns during the call down; then only each bind's memory offset is recorded, to
/// place images the driver reports at their whole memory block).
fn record_binds(
    dev: &DeviceData,
    ty: vk::ObjectType,
    binds: impl Iterator<Item = (u64, u64, u64)>,
) {
    if dev.extensions.binding_report_native {
        let mut st = dev.lock();
        for (handle, _, offset) in binds.filter(|&(_, memory, _)| memory != 0) {
            st.tracker.note_bind_offset(ty, handle, offset);
        }
        return;
    }
    let events: Vec<_> = {
        let mut st = dev.lock();
        binds
            .filter(|&(_, memory, _)| memory != 0)
            .filter_map(|(handle, memory, offset)| {
                st.tracker.bind_resource(ty, handle, memory, offset)
            })
            .collect()
    };
    report(dev, &events);
}

/// One bind of a `VkBind{Buffer,Image}MemoryInfo`: the buffer and image bind hooks are one path
/// ([`bind_memory`]) over these two types.
trait BindInfo {
    /// `BUFFER` or `IMAGE`.
    const OBJECT_TYPE: vk::ObjectType;
    /// The bound object, its memory and the offset in that memory (raw handles).
    fn bind(&self) -> (u64, u64, u64);
}

impl BindInfo for vk::BindBufferMemoryInfo<'_> {
    const OBJECT_TYPE: vk::ObjectType = vk::ObjectType::BUFFER;
    fn bind(&self) -> (u64, u64, u64) {
        (
            self.buffer.as_raw(),
            self.memory.as_raw(),
            self.memory_offset,
        )
    }
}

impl BindInfo for vk::BindImageMemoryInfo<'_> {
    const OBJECT_TYPE: vk::ObjectType = vk::ObjectType::IMAGE;
    fn bind(&self) -> (u64, u64, u64) {
        (
            self.image.as_raw(),
            self.memory.as_raw(),
            self.memory_offset,
        )
    }
}

/// The six bind hooks (buffers and images; `vkBind*Memory`, `2` and `2KHR`): `call` with the next
/// layer's entry point, inside `native::with_current` (a driver with its own binding report tells
/// the layer its addresses during the call), then, if it succeeded, every bind of `infos` recorded.
/// The first versions pass their arguments as one info.
fn bind_memory<'a, I: BindInfo + 'a, F>(
    what: &str,
    device: vk::Device,
    next: impl FnOnce(&DeviceFns) -> Option<F>,
    call: impl FnOnce(F) -> vk::Result,
    infos: impl FnOnce() -> &'a [I],
) -> vk::Result {
    forward(what, OUT_OF_MEMORY, device, next, |dev, next| {
        let r = native::with_current(dev, || call(next));
        if r == vk::Result::SUCCESS {
            // Swapchain-image binds carry a null memory and are skipped by `record_binds`.
            record_binds(dev, I::OBJECT_TYPE, infos().iter().map(I::bind));
        }
        r
    })
}

/// The application's array of `count` elements at `p`; none for null.
///
/// # Safety
/// `p` must be null or valid for `count` elements for `'a`.
unsafe fn array<'a, T>(p: *const T, count: u32) -> &'a [T] {
    if p.is_null() {
        &[]
    } else {
        // SAFETY: non-null and valid for `count` elements per the caller.
        unsafe { std::slice::from_raw_parts(p, count as usize) }
    }
}

/// The six bind hooks, each on [`bind_memory`] with its name, its info type and its entry point.
macro_rules! bind_hook {
    // `vkBind{Buffer,Image}Memory`: the arguments as one info.
    ($name:literal, fn $hook:ident($object:ident: $ty:ty) => $info:ident.$next:ident) => {
        pub(crate) unsafe extern "system" fn $hook(
            device: vk::Device,
            $object: $ty,
            memory: vk::DeviceMemory,
            offset: vk::DeviceSize,
        ) -> vk::Result {
            let info = vk::$info {
                $object,
                memory,
                memory_offset: offset,
                ..Default::default()
            };
            bind_memory(
                $name,
                device,
                |f| f.$next,
                // SAFETY: forwarded unchanged.
                |next| unsafe { next(device, $object, memory, offset) },
                || std::slice::from_ref(&info),
            )
        }
    };
    // `vkBind{Buffer,Image}Memory2[KHR]`: the next layer's command of that name, else its alias.
    ($name:literal, fn $hook:ident(*const $info:ident) => $next:ident | $alias:ident) => {
        pub(crate) unsafe extern "system" fn $hook(
            device: vk::Device,
            count: u32,
            p_infos: *const vk::$info<'_>,
        ) -> vk::Result {
            bind_memory(
                $name,
                device,
                |f| f.$next.or(f.$alias),
                // SAFETY: forwarded unchanged.
                |next| unsafe { next(device, count, p_infos) },
                // SAFETY: the call succeeded, so `p_infos` holds `count` valid infos.
                || unsafe { array(p_infos, count) },
            )
        }
    };
}

bind_hook!("vkBindBufferMemory", fn bind_buffer_memory(buffer: vk::Buffer) => BindBufferMemoryInfo.bind_buffer_memory);
bind_hook!("vkBindBufferMemory2", fn bind_buffer_memory2(*const BindBufferMemoryInfo) => bind_buffer_memory2 | bind_buffer_memory2_khr);
bind_hook!("vkBindBufferMemory2KHR", fn bind_buffer_memory2_khr(*const BindBufferMemoryInfo) => bind_buffer_memory2_khr | bind_buffer_memory2);
bind_hook!("vkBindImageMemory", fn bind_image_memory(image: vk::Image) => BindImageMemoryInfo.bind_image_memory);
bind_hook!("vkBindImageMemory2", fn bind_image_memory2(*const BindImageMemoryInfo) => bind_image_memory2 | bind_image_memory2_khr);
bind_hook!("vkBindImageMemory2KHR", fn bind_image_memory2_khr(*const BindImageMemoryInfo) => bind_image_memory2_khr | bind_image_memory2);

pub(crate) unsafe extern "system" fn set_debug_utils_object_name(
    device: vk::Device,
    p_name_info: *const vk::DebugUtilsObjectNameInfoEXT<'_>,
) -> vk::Result {
    on_device(
        "vkSetDebugUtilsObjectNameEXT",
        OUT_OF_MEMORY,
        device,
        |dev| {
            let r = match dev.fns.set_debug_utils_object_name {
                // SAFETY: forwarded unchanged.
                Some(next) => unsafe { next(device, p_name_info) },
                None => vk::Result::SUCCESS,
            };
            if r == vk::Result::SUCCESS && !p_name_info.is_null() {
                // SAFETY: valid name info; the name is null or a C string.
                let (ty, handle, name) = unsafe {
                    let i = &*p_name_info;
                    (
                        i.object_type,
                        i.object_handle,
                        dispatch::c_str(i.p_object_name).map(|s| s.to_string_lossy().into_owned()),
                    )
                };
                let mut st = dev.lock();
                if ty == vk::ObjectType::PIPELINE {
                    if let Some(want) = commands::hang_pipeline_label(dev) {
                        st.commands
                            .name_pipeline(handle, name.as_deref() == Some(want));
                    }
                }
                st.tracker.set_name(ty, handle, name);
            }
            r
        },
    )
}

/// The submission hooks (`VK_ERROR_DEVICE_LOST` after a panic): the fault trigger first, which
/// may lose the device or swallow the work; then `call` with the entry point `next` picks.
/// `contains(cb)` tells whether the submission includes command buffer `cb` (to notice the one
/// holding the drill's wait).
fn submit<F>(
    what: &str,
    queue: vk::Queue,
    contains: impl Fn(u64) -> bool,
    next: impl FnOnce(&DeviceFns) -> Option<F>,
    call: impl FnOnce(F) -> vk::Result,
) -> vk::Result {
    on_device(
        what,
        vk::Result::ERROR_DEVICE_LOST,
        queue,
        |dev| match fault::on_submit(dev, queue.as_raw()) {
            SubmitAction::Lost => vk::Result::ERROR_DEVICE_LOST,
            SubmitAction::Swallow => vk::Result::SUCCESS,
            SubmitAction::CallDown => {
                let waiting = fault::pending_wait(dev).filter(|&cb| contains(cb));
                let r = call_next(next(&dev.fns), call);
                if let (vk::Result::SUCCESS, Some(cb)) = (r, waiting) {
                    fault::wait_submitted(dev, cb, queue.as_raw());
                }
                r
            }
        },
    )
}

/// Whether `vkQueueSubmit` infos include `cb`.
///
/// # Safety
/// `p_submits` null or valid for `count` infos with valid command buffer arrays.
unsafe fn submits_contain(count: u32, p_submits: *const vk::SubmitInfo<'_>, cb: u64) -> bool {
    // SAFETY: per the caller.
    unsafe { array(p_submits, count) }.iter().any(|s| {
        // SAFETY: per the caller.
        unsafe { array(s.p_command_buffers, s.command_buffer_count) }
            .iter()
            .any(|c| c.as_raw() == cb)
    })
}

/// Whether `vkQueueSubmit2` infos include `cb`.
///
/// # Safety
/// `p_submits` null or valid for `count` infos with valid command buffer info arrays.
unsafe fn submits2_contain(count: u32, p_submits: *const vk::SubmitInfo2<'_>, cb: u64) -> bool {
    // SAFETY: per the caller.
    unsafe { array(p_submits, count) }.iter().any(|s| {
        // SAFETY: per the caller.
        unsafe { array(s.p_command_buffer_infos, s.command_buffer_info_count) }
            .iter()
            .any(|c| c.command_buffer.as_raw() == cb)
    })
}

/// `vkQueueBindSparse` holds no command buffers.
///
/// # Safety
/// None: `unsafe` only to stand beside [`submits_contain`] in `submit_hook!`.
unsafe fn binds_contain(_count: u32, _p_infos: *const vk::BindSparseInfo<'_>, _cb: u64) -> bool {
    false
}

/// The submission hooks, each on [`submit`] with its name, its info type, how to find a command
/// buffer in it, and its entry point (a command and, for a promoted one, its alias as a fallback).
macro_rules! submit_hook {
    ($name:literal, fn $hook:ident($info:ty, $contains:ident) => $($field:ident)|+) => {
        pub(crate) unsafe extern "system" fn $hook(
            queue: vk::Queue,
            count: u32,
            p_infos: *const $info,
            fence: vk::Fence,
        ) -> vk::Result {
            submit(
                $name,
                queue,
                // SAFETY: the application's valid submit infos.
                |cb| unsafe { $contains(count, p_infos, cb) },
                |f| None$(.or(f.$field))+,
                // SAFETY: forwarded unchanged.
                |next| unsafe { next(queue, count, p_infos, fence) },
            )
        }
    };
}

submit_hook!("vkQueueSubmit", fn queue_submit(vk::SubmitInfo<'_>, submits_contain) => queue_submit);
submit_hook!("vkQueueSubmit2", fn queue_submit2(vk::SubmitInfo2<'_>, submits2_contain) => queue_submit2 | queue_submit2_khr);
submit_hook!("vkQueueSubmit2KHR", fn queue_submit2_khr(vk::SubmitInfo2<'_>, submits2_contain) => queue_submit2_khr | queue_submit2);
submit_hook!("vkQueueBindSparse", fn queue_bind_sparse(vk::BindSparseInfo<'_>, binds_contain) => queue_bind_sparse);

/// [`forward`] for a command that reports a loss: once the drill lost the device it answers
/// `VK_ERROR_DEVICE_LOST` without calling down (checked before the entry point is taken).
fn unless_lost<H: Handle + Copy, F>(
    what: &str,
    on_panic: vk::Result,
    handle: H,
    next: impl FnOnce(&DeviceFns) -> Option<F>,
    body: impl FnOnce(&Arc<DeviceData>, F) -> vk::Result,
) -> vk::Result {
    on_device(what, on_panic, handle, |dev| {
        if fault::is_lost(dev) {
            return vk::Result::ERROR_DEVICE_LOST;
        }
        call_next(next(&dev.fns), |f| body(dev, f))
    })
}

/// Hooks that only need "return `VK_ERROR_DEVICE_LOST` once lost, else call down".
macro_rules! lost_gate {
    ($name:literal, fn $hook:ident($h:ident : $ht:ty $(, $a:ident : $t:ty)*) => $($field:ident)|+) => {
        pub(crate) unsafe extern "system" fn $hook($h: $ht $(, $a: $t)*) -> vk::Result {
            let next = |f: &DeviceFns| None$(.or(f.$field))+;
            unless_lost($name, vk::Result::ERROR_DEVICE_LOST, $h, next, |_, next| {
                // SAFETY: forwarded unchanged.
                unsafe { next($h $(, $a)*) }
            })
        }
    };
}

/// Waits that hung work can block: like `lost_gate!`, and under `after-hang` they end with
/// `VK_ERROR_DEVICE_LOST` at the simulated reset even while blocked (`fault::wait_sliced`).
macro_rules! hang_wait {
    ($name:literal, fn $hook:ident($h:ident : $ht:ty $(, $a:ident : $t:ty)*; $timeout:ident) => $($field:ident)|+) => {
        pub(crate) unsafe extern "system" fn $hook($h: $ht $(, $a: $t)*, $timeout: u64) -> vk::Result {
            let next = |f: &DeviceFns| None$(.or(f.$field))+;
            unless_lost($name, vk::Result::ERROR_DEVICE_LOST, $h, next, |dev, next| {
                // SAFETY: forwarded unchanged but for a timeout no longer than the application's.
                fault::wait_sliced(dev, $timeout, |t| unsafe { next($h $(, $a)*, t) })
            })
        }
    };
}

/// `vkQueueWaitIdle` (`queue`) and `vkDeviceWaitIdle` (`None`): `VK_ERROR_DEVICE_LOST` once lost, and
/// under `after-hang` blocked by hung work until the simulated reset (`fault::idle_blocked_by_hang`),
/// both before the entry point is taken; else `call` with it.
fn wait_idle<H: Handle + Copy, F>(
    what: &str,
    handle: H,
    queue: Option<u64>,
    next: impl FnOnce(&DeviceFns) -> Option<F>,
    call: impl FnOnce(F) -> vk::Result,
) -> vk::Result {
    on_device(what, vk::Result::ERROR_DEVICE_LOST, handle, |dev| {
        if fault::is_lost(dev) {
            return vk::Result::ERROR_DEVICE_LOST;
        }
        if let Some(r) = fault::idle_blocked_by_hang(dev, queue) {
            return r;
        }
        call_next(next(&dev.fns), call)
    })
}

pub(crate) unsafe extern "system" fn queue_wait_idle(queue: vk::Queue) -> vk::Result {
    let next = |f: &DeviceFns| f.queue_wait_idle;
    // SAFETY: forwarded unchanged.
    let call = |f: vk::PFN_vkQueueWaitIdle| unsafe { f(queue) };
    wait_idle("vkQueueWaitIdle", queue, Some(queue.as_raw()), next, call)
}

pub(crate) unsafe extern "system" fn device_wait_idle(device: vk::Device) -> vk::Result {
    let next = |f: &DeviceFns| f.device_wait_idle;
    // SAFETY: forwarded unchanged.
    let call = |f: vk::PFN_vkDeviceWaitIdle| unsafe { f(device) };
    wait_idle("vkDeviceWaitIdle", device, None, next, call)
}

hang_wait!("vkWaitForFences", fn wait_for_fences(device: vk::Device, count: u32, p_fences: *const vk::Fence, wait_all: vk::Bool32; timeout) => wait_for_fences);
lost_gate!("vkGetFenceStatus", fn get_fence_status(device: vk::Device, fence: vk::Fence) => get_fence_status);
lost_gate!("vkGetEventStatus", fn get_event_status(device: vk::Device, event: vk::Event) => get_event_status);
hang_wait!("vkWaitSemaphores", fn wait_semaphores(device: vk::Device, p_info: *const vk::SemaphoreWaitInfo<'_>; timeout) => wait_semaphores | wait_semaphores_khr);
hang_wait!("vkWaitSemaphoresKHR", fn wait_semaphores_khr(device: vk::Device, p_info: *const vk::SemaphoreWaitInfo<'_>; timeout) => wait_semaphores_khr | wait_semaphores);
lost_gate!("vkGetSemaphoreCounterValue", fn get_semaphore_counter_value(device: vk::Device, semaphore: vk::Semaphore, p_value: *mut u64) => get_semaphore_counter_value | get_semaphore_counter_value_khr);
lost_gate!("vkGetSemaphoreCounterValueKHR", fn get_semaphore_counter_value_khr(device: vk::Device, semaphore: vk::Semaphore, p_value: *mut u64) => get_semaphore_counter_value_khr | get_semaphore_counter_value);
lost_gate!("vkGetQueryPoolResults", fn get_query_pool_results(device: vk::Device, pool: vk::QueryPool, first: u32, count: u32, size: usize, p_data: *mut c_void, stride: vk::DeviceSize, flags: vk::QueryResultFlags) => get_query_pool_results);
lost_gate!("vkQueuePresentKHR", fn queue_present_khr(queue: vk::Queue, p_info: *const vk::PresentInfoKHR<'_>) => queue_present_khr);
lost_gate!("vkAcquireNextImageKHR", fn acquire_next_image_khr(device: vk::Device, swapchain: vk::SwapchainKHR, timeout: u64, semaphore: vk::Semaphore, fence: vk::Fence, p_index: *mut u32) => acquire_next_image_khr);
lost_gate!("vkAcquireNextImage2KHR", fn acquire_next_image2_khr(device: vk::Device, p_info: *const vk::AcquireNextImageInfoKHR<'_>, p_index: *mut u32) => acquire_next_image2_khr);

pub(crate) unsafe extern "system" fn get_device_fault_info_ext(
    device: vk::Device,
    p_counts: *mut vk::DeviceFaultCountsEXT<'_>,
    p_info: *mut vk::DeviceFaultInfoEXT<'_>,
) -> vk::Result {
    on_device(
        "vkGetDeviceFaultInfoEXT",
        vk::Result::ERROR_UNKNOWN,
        device,
        |dev| {
            // SAFETY: arguments as the spec requires.
            unsafe { fault::get_fault_info_ext(dev, p_counts, p_info) }
        },
    )
}

pub(crate) unsafe extern "system" fn get_device_fault_reports_khr(
    device: vk::Device,
    timeout: u64,
    p_count: *mut u32,
    p_infos: *mut DeviceFaultInfoKHR,
) -> vk::Result {
    on_device(
        "vkGetDeviceFaultReportsKHR",
        vk::Result::ERROR_UNKNOWN,
        device,
        |dev| {
            // SAFETY: arguments as the spec requires.
            unsafe { fault::get_fault_reports_khr(dev, timeout, p_count, p_infos) }
        },
    )
}

pub(crate) unsafe extern "system" fn get_device_fault_debug_info_khr(
    device: vk::Device,
    p_info: *mut DeviceFaultDebugInfoKHR,
) -> vk::Result {
    on_device(
        "vkGetDeviceFaultDebugInfoKHR",
        vk::Result::ERROR_UNKNOWN,
        device,
        |dev| {
            // SAFETY: arguments as the spec requires.
            unsafe { fault::get_fault_debug_info_khr(dev, p_info) }
        },
    )
}
