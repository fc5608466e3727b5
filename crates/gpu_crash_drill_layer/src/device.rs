//! Device-level hooks: address bookkeeping on allocate/bind/destroy, the fault trigger on submit,
//! `VK_ERROR_DEVICE_LOST` after loss, and the fault queries.
//!
//! Every hook looks up the device by dispatch key; a handle the layer does not know (which the loader
//! never produces) gets `VK_ERROR_INITIALIZATION_FAILED` rather than a crash.

use std::ffi::c_void;

use ash::vk::{self, Handle};
use vulkan_fault_ffi::{DeviceFaultDebugInfoKHR, DeviceFaultInfoKHR};

use crate::commands;
use crate::dispatch::{self, dev_of, DeviceData, DeviceState, NO_DEVICE};
use crate::fault::{self, SubmitAction};
use crate::log::guard;
use crate::messengers::emit;
use crate::native;
use crate::state::bindings::BindingEvent;
use crate::state::fault::WaitInjection;

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
    guard(
        "vkAllocateMemory",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            let Some(dev) = dev_of(device) else {
                return NO_DEVICE;
            };
            let Some(next) = dev.fns.allocate_memory else {
                return NO_DEVICE;
            };
            // SAFETY: forwarded unchanged.
            let r = native::with_current(&dev, || unsafe {
                next(device, p_info, p_allocator, p_memory)
            });
            // With a driver that reports its own addresses, `native.rs` learnt them during the call.
            if r == vk::Result::SUCCESS && !dev.extensions.binding_report_native {
                // SAFETY: success: valid info and output.
                let (memory, size) = unsafe { ((*p_memory).as_raw(), (*p_info).allocation_size) };
                let ev = dev.lock().tracker.allocate(memory, size);
                report(&dev, &[ev]);
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
    guard("vkFreeMemory", (), || {
        let Some(dev) = dev_of(device) else { return };
        untrack_and_report(&dev, |state| state.tracker.free(memory.as_raw()));
        if let Some(next) = dev.fns.free_memory {
            // SAFETY: forwarded unchanged.
            native::with_current(&dev, || unsafe { next(device, memory, p_allocator) });
        }
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
    guard("vkMapMemory", vk::Result::ERROR_MEMORY_MAP_FAILED, || {
        let Some(dev) = dev_of(device) else {
            return NO_DEVICE;
        };
        if fault::is_lost(&dev) {
            return vk::Result::ERROR_DEVICE_LOST;
        }
        let Some(next) = dev.fns.map_memory else {
            return NO_DEVICE;
        };
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
    guard(
        "vkCreateBuffer",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            let Some(dev) = dev_of(device) else {
                return NO_DEVICE;
            };
            let Some(next) = dev.fns.create_buffer else {
                return NO_DEVICE;
            };
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
    guard("vkDestroyBuffer", (), || {
        let Some(dev) = dev_of(device) else { return };
        untrack_and_report(&dev, |state| {
            state
                .tracker
                .destroy_resource(vk::ObjectType::BUFFER, buffer.as_raw())
        });
        if let Some(next) = dev.fns.destroy_buffer {
            // SAFETY: forwarded unchanged.
            native::with_current(&dev, || unsafe { next(device, buffer, p_allocator) });
        }
    })
}

pub(crate) unsafe extern "system" fn create_image(
    device: vk::Device,
    p_info: *const vk::ImageCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_image: *mut vk::Image,
) -> vk::Result {
    guard(
        "vkCreateImage",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            let Some(dev) = dev_of(device) else {
                return NO_DEVICE;
            };
            let Some(next) = dev.fns.create_image else {
                return NO_DEVICE;
            };
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
        },
    )
}

pub(crate) unsafe extern "system" fn destroy_image(
    device: vk::Device,
    image: vk::Image,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard("vkDestroyImage", (), || {
        let Some(dev) = dev_of(device) else { return };
        untrack_and_report(&dev, |state| {
            state
                .tracker
                .destroy_resource(vk::ObjectType::IMAGE, image.as_raw())
        });
        if let Some(next) = dev.fns.destroy_image {
            // SAFETY: forwarded unchanged.
            native::with_current(&dev, || unsafe { next(device, image, p_allocator) });
        }
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

pub(crate) unsafe extern "system" fn bind_buffer_memory(
    device: vk::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    guard(
        "vkBindBufferMemory",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            let Some(dev) = dev_of(device) else {
                return NO_DEVICE;
            };
            let Some(next) = dev.fns.bind_buffer_memory else {
                return NO_DEVICE;
            };
            // SAFETY: forwarded unchanged.
            let r = native::with_current(&dev, || unsafe { next(device, buffer, memory, offset) });
            if r == vk::Result::SUCCESS {
                record_binds(
                    &dev,
                    vk::ObjectType::BUFFER,
                    std::iter::once((buffer.as_raw(), memory.as_raw(), offset)),
                );
            }
            r
        },
    )
}

unsafe fn bind_buffer_memory2_with(
    which: fn(&DeviceData) -> Option<vk::PFN_vkBindBufferMemory2>,
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    let Some(dev) = dev_of(device) else {
        return NO_DEVICE;
    };
    let Some(next) = which(&dev) else {
        return NO_DEVICE;
    };
    // SAFETY: forwarded unchanged.
    let r = native::with_current(&dev, || unsafe { next(device, count, p_infos) });
    if r == vk::Result::SUCCESS && !p_infos.is_null() {
        // SAFETY: `p_infos` holds `count` valid elements.
        let infos = unsafe { std::slice::from_raw_parts(p_infos, count as usize) };
        record_binds(
            &dev,
            vk::ObjectType::BUFFER,
            infos
                .iter()
                .map(|i| (i.buffer.as_raw(), i.memory.as_raw(), i.memory_offset)),
        );
    }
    r
}

pub(crate) unsafe extern "system" fn bind_buffer_memory2(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    guard(
        "vkBindBufferMemory2",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            // SAFETY: forwarded from the application.
            unsafe {
                bind_buffer_memory2_with(
                    |d| d.fns.bind_buffer_memory2.or(d.fns.bind_buffer_memory2_khr),
                    device,
                    count,
                    p_infos,
                )
            }
        },
    )
}

pub(crate) unsafe extern "system" fn bind_buffer_memory2_khr(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    guard(
        "vkBindBufferMemory2KHR",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            // SAFETY: forwarded from the application.
            unsafe {
                bind_buffer_memory2_with(
                    |d| d.fns.bind_buffer_memory2_khr.or(d.fns.bind_buffer_memory2),
                    device,
                    count,
                    p_infos,
                )
            }
        },
    )
}

pub(crate) unsafe extern "system" fn bind_image_memory(
    device: vk::Device,
    image: vk::Image,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    guard(
        "vkBindImageMemory",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            let Some(dev) = dev_of(device) else {
                return NO_DEVICE;
            };
            let Some(next) = dev.fns.bind_image_memory else {
                return NO_DEVICE;
            };
            // SAFETY: forwarded unchanged.
            let r = native::with_current(&dev, || unsafe { next(device, image, memory, offset) });
            if r == vk::Result::SUCCESS {
                record_binds(
                    &dev,
                    vk::ObjectType::IMAGE,
                    std::iter::once((image.as_raw(), memory.as_raw(), offset)),
                );
            }
            r
        },
    )
}

unsafe fn bind_image_memory2_with(
    which: fn(&DeviceData) -> Option<vk::PFN_vkBindImageMemory2>,
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindImageMemoryInfo<'_>,
) -> vk::Result {
    let Some(dev) = dev_of(device) else {
        return NO_DEVICE;
    };
    let Some(next) = which(&dev) else {
        return NO_DEVICE;
    };
    // SAFETY: forwarded unchanged.
    let r = native::with_current(&dev, || unsafe { next(device, count, p_infos) });
    if r == vk::Result::SUCCESS && !p_infos.is_null() {
        // SAFETY: `p_infos` holds `count` valid elements.
        let infos = unsafe { std::slice::from_raw_parts(p_infos, count as usize) };
        // Swapchain-image binds carry a null memory and are skipped by `record_binds`.
        record_binds(
            &dev,
            vk::ObjectType::IMAGE,
            infos
                .iter()
                .map(|i| (i.image.as_raw(), i.memory.as_raw(), i.memory_offset)),
        );
    }
    r
}

pub(crate) unsafe extern "system" fn bind_image_memory2(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindImageMemoryInfo<'_>,
) -> vk::Result {
    guard(
        "vkBindImageMemory2",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            // SAFETY: forwarded from the application.
            unsafe {
                bind_image_memory2_with(
                    |d| d.fns.bind_image_memory2.or(d.fns.bind_image_memory2_khr),
                    device,
                    count,
                    p_infos,
                )
            }
        },
    )
}

pub(crate) unsafe extern "system" fn bind_image_memory2_khr(
    device: vk::Device,
    count: u32,
    p_infos: *const vk::BindImageMemoryInfo<'_>,
) -> vk::Result {
    guard(
        "vkBindImageMemory2KHR",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            // SAFETY: forwarded from the application.
            unsafe {
                bind_image_memory2_with(
                    |d| d.fns.bind_image_memory2_khr.or(d.fns.bind_image_memory2),
                    device,
                    count,
                    p_infos,
                )
            }
        },
    )
}

pub(crate) unsafe extern "system" fn set_debug_utils_object_name(
    device: vk::Device,
    p_name_info: *const vk::DebugUtilsObjectNameInfoEXT<'_>,
) -> vk::Result {
    guard(
        "vkSetDebugUtilsObjectNameEXT",
        vk::Result::ERROR_OUT_OF_HOST_MEMORY,
        || {
            let Some(dev) = dev_of(device) else {
                return NO_DEVICE;
            };
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
                    if let Some(want) = commands::hang_pipeline_label(&dev) {
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

/// Runs a queue submission through the fault trigger. `contains(cb)` tells whether the submission
/// includes command buffer `cb` (to notice the one holding the drill's wait).
fn submit(
    queue: vk::Queue,
    contains: impl Fn(u64) -> bool,
    call_down: impl FnOnce(&DeviceData) -> Option<vk::Result>,
) -> vk::Result {
    let Some(dev) = dev_of(queue) else {
        return NO_DEVICE;
    };
    match fault::on_submit(&dev, queue.as_raw()) {
        SubmitAction::Lost => vk::Result::ERROR_DEVICE_LOST,
        SubmitAction::Swallow => vk::Result::SUCCESS,
        SubmitAction::CallDown => {
            let waiting = fault::pending_wait(&dev).filter(|&cb| contains(cb));
            let r = call_down(&dev).unwrap_or(NO_DEVICE);
            if let (vk::Result::SUCCESS, Some(cb)) = (r, waiting) {
                fault::wait_submitted(&dev, cb, queue.as_raw());
            }
            r
        }
    }
}

/// Whether `vkQueueSubmit` infos include `cb`.
///
/// # Safety
/// `p_submits` null or valid for `count` infos with valid command buffer arrays.
unsafe fn submits_contain(count: u32, p_submits: *const vk::SubmitInfo<'_>, cb: u64) -> bool {
    if p_submits.is_null() {
        return false;
    }
    // SAFETY: per the caller.
    unsafe { std::slice::from_raw_parts(p_submits, count as usize) }
        .iter()
        .filter(|s| !s.p_command_buffers.is_null())
        .any(|s| {
            // SAFETY: per the caller.
            unsafe {
                std::slice::from_raw_parts(s.p_command_buffers, s.command_buffer_count as usize)
            }
            .iter()
            .any(|c| c.as_raw() == cb)
        })
}

/// Whether `vkQueueSubmit2` infos include `cb`.
///
/// # Safety
/// `p_submits` null or valid for `count` infos with valid command buffer info arrays.
unsafe fn submits2_contain(count: u32, p_submits: *const vk::SubmitInfo2<'_>, cb: u64) -> bool {
    if p_submits.is_null() {
        return false;
    }
    // SAFETY: per the caller.
    unsafe { std::slice::from_raw_parts(p_submits, count as usize) }
        .iter()
        .filter(|s| !s.p_command_buffer_infos.is_null())
        .any(|s| {
            // SAFETY: per the caller.
            unsafe {
                std::slice::from_raw_parts(
                    s.p_command_buffer_infos,
                    s.command_buffer_info_count as usize,
                )
            }
            .iter()
            .any(|c| c.command_buffer.as_raw() == cb)
        })
}

pub(crate) unsafe extern "system" fn queue_submit(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    guard("vkQueueSubmit", vk::Result::ERROR_DEVICE_LOST, || {
        // SAFETY: the application's valid submit infos.
        let contains = |cb| unsafe { submits_contain(count, p_submits, cb) };
        submit(queue, contains, |d| {
            // SAFETY: forwarded unchanged.
            d.fns
                .queue_submit
                .map(|f| unsafe { f(queue, count, p_submits, fence) })
        })
    })
}

pub(crate) unsafe extern "system" fn queue_submit2(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    guard("vkQueueSubmit2", vk::Result::ERROR_DEVICE_LOST, || {
        // SAFETY: the application's valid submit infos.
        let contains = |cb| unsafe { submits2_contain(count, p_submits, cb) };
        submit(queue, contains, |d| {
            let f = d.fns.queue_submit2.or(d.fns.queue_submit2_khr);
            // SAFETY: forwarded unchanged.
            f.map(|f| unsafe { f(queue, count, p_submits, fence) })
        })
    })
}

pub(crate) unsafe extern "system" fn queue_submit2_khr(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    guard("vkQueueSubmit2KHR", vk::Result::ERROR_DEVICE_LOST, || {
        // SAFETY: the application's valid submit infos.
        let contains = |cb| unsafe { submits2_contain(count, p_submits, cb) };
        submit(queue, contains, |d| {
            let f = d.fns.queue_submit2_khr.or(d.fns.queue_submit2);
            // SAFETY: forwarded unchanged.
            f.map(|f| unsafe { f(queue, count, p_submits, fence) })
        })
    })
}

pub(crate) unsafe extern "system" fn queue_bind_sparse(
    queue: vk::Queue,
    count: u32,
    p_infos: *const vk::BindSparseInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    guard("vkQueueBindSparse", vk::Result::ERROR_DEVICE_LOST, || {
        submit(
            queue,
            |_| false,
            |d| {
                // SAFETY: forwarded unchanged.
                d.fns
                    .queue_bind_sparse
                    .map(|f| unsafe { f(queue, count, p_infos, fence) })
            },
        )
    })
}

/// Hooks that only need "return `VK_ERROR_DEVICE_LOST` once lost, else call down".
macro_rules! lost_gate {
    ($name:literal, fn $hook:ident($h:ident : $ht:ty $(, $a:ident : $t:ty)*) => $($field:ident)|+) => {
        pub(crate) unsafe extern "system" fn $hook($h: $ht $(, $a: $t)*) -> vk::Result {
            guard($name, vk::Result::ERROR_DEVICE_LOST, || {
                let Some(dev) = dev_of($h) else { return NO_DEVICE };
                if fault::is_lost(&dev) {
                    return vk::Result::ERROR_DEVICE_LOST;
                }
                let next = None$(.or(dev.fns.$field))+;
                match next {
                    // SAFETY: forwarded unchanged.
                    Some(f) => unsafe { f($h $(, $a)*) },
                    None => NO_DEVICE,
                }
            })
        }
    };
}

/// Waits that hung work can block: like `lost_gate!`, and under `after-hang` they end with
/// `VK_ERROR_DEVICE_LOST` at the simulated reset even while blocked (`fault::wait_sliced`).
macro_rules! hang_wait {
    ($name:literal, fn $hook:ident($h:ident : $ht:ty $(, $a:ident : $t:ty)*; $timeout:ident) => $($field:ident)|+) => {
        pub(crate) unsafe extern "system" fn $hook($h: $ht $(, $a: $t)*, $timeout: u64) -> vk::Result {
            guard($name, vk::Result::ERROR_DEVICE_LOST, || {
                let Some(dev) = dev_of($h) else { return NO_DEVICE };
                if fault::is_lost(&dev) {
                    return vk::Result::ERROR_DEVICE_LOST;
                }
                let Some(f) = None$(.or(dev.fns.$field))+ else {
                    return NO_DEVICE;
                };
                // SAFETY: forwarded unchanged but for a timeout no longer than the application's.
                fault::wait_sliced(&dev, $timeout, |t| unsafe { f($h $(, $a)*, t) })
            })
        }
    };
}

pub(crate) unsafe extern "system" fn queue_wait_idle(queue: vk::Queue) -> vk::Result {
    guard("vkQueueWaitIdle", vk::Result::ERROR_DEVICE_LOST, || {
        let Some(dev) = dev_of(queue) else {
            return NO_DEVICE;
        };
        if fault::is_lost(&dev) {
            return vk::Result::ERROR_DEVICE_LOST;
        }
        if let Some(r) = fault::idle_blocked_by_hang(&dev, Some(queue.as_raw())) {
            return r;
        }
        match dev.fns.queue_wait_idle {
            // SAFETY: forwarded unchanged.
            Some(f) => unsafe { f(queue) },
            None => NO_DEVICE,
        }
    })
}

pub(crate) unsafe extern "system" fn device_wait_idle(device: vk::Device) -> vk::Result {
    guard("vkDeviceWaitIdle", vk::Result::ERROR_DEVICE_LOST, || {
        let Some(dev) = dev_of(device) else {
            return NO_DEVICE;
        };
        if fault::is_lost(&dev) {
            return vk::Result::ERROR_DEVICE_LOST;
        }
        if let Some(r) = fault::idle_blocked_by_hang(&dev, None) {
            return r;
        }
        match dev.fns.device_wait_idle {
            // SAFETY: forwarded unchanged.
            Some(f) => unsafe { f(device) },
            None => NO_DEVICE,
        }
    })
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
    guard("vkGetDeviceFaultInfoEXT", vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = dev_of(device) else {
            return NO_DEVICE;
        };
        // SAFETY: arguments as the spec requires.
        unsafe { fault::get_fault_info_ext(&dev, p_counts, p_info) }
    })
}

pub(crate) unsafe extern "system" fn get_device_fault_reports_khr(
    device: vk::Device,
    timeout: u64,
    p_count: *mut u32,
    p_infos: *mut DeviceFaultInfoKHR,
) -> vk::Result {
    guard(
        "vkGetDeviceFaultReportsKHR",
        vk::Result::ERROR_UNKNOWN,
        || {
            let Some(dev) = dev_of(device) else {
                return NO_DEVICE;
            };
            // SAFETY: arguments as the spec requires.
            unsafe { fault::get_fault_reports_khr(&dev, timeout, p_count, p_infos) }
        },
    )
}

pub(crate) unsafe extern "system" fn get_device_fault_debug_info_khr(
    device: vk::Device,
    p_info: *mut DeviceFaultDebugInfoKHR,
) -> vk::Result {
    guard(
        "vkGetDeviceFaultDebugInfoKHR",
        vk::Result::ERROR_UNKNOWN,
        || {
            let Some(dev) = dev_of(device) else {
                return NO_DEVICE;
            };
            // SAFETY: arguments as the spec requires.
            unsafe { fault::get_fault_debug_info_khr(&dev, p_info) }
        },
    )
}
