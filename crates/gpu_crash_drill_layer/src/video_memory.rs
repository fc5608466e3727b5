//! The layer's stand-in for `VK_EXT_memory_budget` and `VK_EXT_device_memory_report` where the
//! driver has neither (lavapipe: Mesa 22.3.6 offers neither, 2026-12-07), so a crash reporter's
//! "video memory at the fault" can be tested on any machine:
//!
//! - **budget**: `vkGetPhysicalDeviceMemoryProperties2` fills a chained
//!   `VkPhysicalDeviceMemoryBudgetPropertiesEXT` itself: each heap's usage is what the process
//!   allocated through this layer in it (`vkAllocateMemory` minus `vkFreeMemory`, every device of
//!   that physical device), its budget the heap's size or `GPU_CRASH_DRILL_MEMORY_BUDGET` bytes,
//!   whichever is smaller (so real usage can pass 95% of a budget without filling the machine);
//! - **memory report**: the application's `VkDeviceDeviceMemoryReportCreateInfoEXT` callbacks get
//!   `ALLOCATE` and `FREE` for its memory objects and `ALLOCATION_FAILED` when the driver refuses a
//!   `vkAllocateMemory` (lavapipe refuses 1 TiB with `VK_ERROR_OUT_OF_DEVICE_MEMORY`).
//!
//! The books are one process-wide table behind one leaf lock, held only to read or change them:
//! never while calling down the chain or into an application callback.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::{LazyLock, Mutex, MutexGuard};

use ash::vk::{self, Handle};

use crate::chain;
use crate::dispatch::{DeviceData, InstanceData};
use crate::hook_steps::on_instance;
use crate::state::extensions::Provided;

/// An application callback from a `VkDeviceDeviceMemoryReportCreateInfoEXT`.
#[derive(Clone, Copy)]
struct ReportCallback {
    callback:
        unsafe extern "system" fn(*const vk::DeviceMemoryReportCallbackDataEXT<'_>, *mut c_void),
    user_data: usize,
}

/// What the layer keeps of one device.
struct DeviceBook {
    physical: u64,
    /// Heap index of each memory type.
    type_heaps: Vec<u32>,
    /// The memory report's callbacks (empty where the layer does not provide it, or the
    /// application did not ask).
    reports: Vec<ReportCallback>,
}

/// One live memory object.
struct Allocation {
    physical: u64,
    heap: u32,
    size: u64,
}

#[derive(Default)]
struct Books {
    /// By raw `VkDevice`.
    devices: HashMap<u64, DeviceBook>,
    /// By (raw `VkDevice`, raw `VkDeviceMemory`).
    allocations: HashMap<(u64, u64), Allocation>,
    /// Bytes allocated per heap, by raw `VkPhysicalDevice`.
    usage: HashMap<u64, [u64; vk::MAX_MEMORY_HEAPS]>,
}

static BOOKS: LazyLock<Mutex<Books>> = LazyLock::new(Mutex::default);

fn books() -> MutexGuard<'static, Books> {
    BOOKS.lock().unwrap_or_else(|p| p.into_inner())
}

/// `device` was created on `physical` with `create_info`: learns its memory types' heaps and, where
/// the layer provides the memory report and the application enabled it, its callbacks.
///
/// # Safety
/// `physical` belongs to `inst`; `create_info` is the application's valid create info.
pub(crate) unsafe fn device_created(
    inst: &InstanceData,
    physical: vk::PhysicalDevice,
    device: vk::Device,
    create_info: &vk::DeviceCreateInfo<'_>,
    provided: Provided,
) {
    let mut properties = vk::PhysicalDeviceMemoryProperties::default();
    if let Some(get) = inst.fns.get_physical_device_memory_properties {
        // SAFETY: valid physical device, valid output.
        unsafe { get(physical, &mut properties) };
    }
    let types = (properties.memory_type_count as usize).min(vk::MAX_MEMORY_TYPES);
    let type_heaps = properties.memory_types[..types]
        .iter()
        .map(|t| t.heap_index)
        .collect();
    let mut reports = Vec::new();
    // SAFETY: the application's valid create info.
    if provided.memory_report && unsafe { enables(create_info, vk::EXT_DEVICE_MEMORY_REPORT_NAME) }
    {
        // SAFETY: valid chain; each node is read as the type its sType names.
        unsafe {
            chain::for_each(create_info.p_next, |node| {
                if (*node).s_type == vk::StructureType::DEVICE_DEVICE_MEMORY_REPORT_CREATE_INFO_EXT
                {
                    let info = &*node.cast::<vk::DeviceDeviceMemoryReportCreateInfoEXT<'_>>();
                    if let Some(callback) = info.pfn_user_callback {
                        reports.push(ReportCallback {
                            callback,
                            user_data: info.p_user_data as usize,
                        });
                    }
                }
            });
        }
    }
    books().devices.insert(
        device.as_raw(),
        DeviceBook {
            physical: physical.as_raw(),
            type_heaps,
            reports,
        },
    );
}

/// Whether `create_info` enables the extension `name`.
///
/// # Safety
/// `create_info` is valid.
unsafe fn enables(create_info: &vk::DeviceCreateInfo<'_>, name: &CStr) -> bool {
    (0..create_info.enabled_extension_count as usize).any(|i| {
        // SAFETY: the array holds `enabled_extension_count` C strings.
        unsafe { CStr::from_ptr(*create_info.pp_enabled_extension_names.add(i)) == name }
    })
}

/// `device` is being destroyed: its memory leaves the usage, its callbacks are forgotten.
pub(crate) fn device_destroyed(device: vk::Device) {
    let mut books = books();
    let raw = device.as_raw();
    books.devices.remove(&raw);
    let gone: Vec<(u64, u64)> = books
        .allocations
        .keys()
        .filter(|(d, _)| *d == raw)
        .copied()
        .collect();
    for key in gone {
        if let Some(a) = books.allocations.remove(&key) {
            take_usage(&mut books, &a);
        }
    }
}

fn take_usage(books: &mut Books, a: &Allocation) {
    if let Some(heap) = books
        .usage
        .get_mut(&a.physical)
        .and_then(|u| u.get_mut(a.heap as usize))
    {
        *heap = heap.saturating_sub(a.size);
    }
}

/// `vkAllocateMemory` on `dev` returned `result`: a success joins the usage and is reported as
/// `ALLOCATE`, an error as `ALLOCATION_FAILED`, to the memory report's callbacks.
///
/// # Safety
/// `info` is the application's valid allocate info; on success `memory` holds the new handle.
pub(crate) unsafe fn allocated(
    dev: &DeviceData,
    info: *const vk::MemoryAllocateInfo<'_>,
    memory: *const vk::DeviceMemory,
    result: vk::Result,
) {
    // SAFETY: the caller's contract.
    let Some(info) = (unsafe { info.as_ref() }) else {
        return;
    };
    let ok = result == vk::Result::SUCCESS;
    // SAFETY: on success the driver wrote the handle.
    let handle = if ok && !memory.is_null() {
        unsafe { *memory }.as_raw()
    } else {
        0
    };
    let device = dev.handle.as_raw();
    let (heap, reports) = {
        let mut books = books();
        let Some(book) = books.devices.get(&device) else {
            return;
        };
        let physical = book.physical;
        let heap = book
            .type_heaps
            .get(info.memory_type_index as usize)
            .copied()
            .unwrap_or(0);
        let reports = book.reports.clone();
        if ok {
            let usage = books.usage.entry(physical).or_default();
            if let Some(used) = usage.get_mut(heap as usize) {
                *used = used.saturating_add(info.allocation_size);
            }
            books.allocations.insert(
                (device, handle),
                Allocation {
                    physical,
                    heap,
                    size: info.allocation_size,
                },
            );
        }
        (heap, reports)
    };
    let ty = if ok {
        vk::DeviceMemoryReportEventTypeEXT::ALLOCATE
    } else if result.as_raw() < 0 {
        vk::DeviceMemoryReportEventTypeEXT::ALLOCATION_FAILED
    } else {
        return;
    };
    report(&reports, ty, handle, info.allocation_size, heap);
}

/// `vkFreeMemory(memory)` on `dev`: it leaves the usage and is reported as `FREE`.
pub(crate) fn freed(dev: &DeviceData, memory: vk::DeviceMemory) {
    if memory == vk::DeviceMemory::null() {
        return;
    }
    let device = dev.handle.as_raw();
    let (allocation, reports) = {
        let mut books = books();
        let Some(a) = books.allocations.remove(&(device, memory.as_raw())) else {
            return;
        };
        take_usage(&mut books, &a);
        let reports = books
            .devices
            .get(&device)
            .map(|b| b.reports.clone())
            .unwrap_or_default();
        (a, reports)
    };
    report(
        &reports,
        vk::DeviceMemoryReportEventTypeEXT::FREE,
        memory.as_raw(),
        allocation.size,
        allocation.heap,
    );
}

/// Calls each memory report callback with one event of the application's device memory (no
/// layer lock held: the callbacks are application code).
fn report(
    reports: &[ReportCallback],
    ty: vk::DeviceMemoryReportEventTypeEXT,
    handle: u64,
    size: u64,
    heap: u32,
) {
    let data = vk::DeviceMemoryReportCallbackDataEXT {
        ty,
        memory_object_id: handle,
        size,
        object_type: vk::ObjectType::DEVICE_MEMORY,
        object_handle: handle,
        heap_index: heap,
        ..Default::default()
    };
    for r in reports {
        // SAFETY: the application's callback with its own user data, as its create info gave
        // them; `data` outlives the call.
        unsafe { (r.callback)(&data, r.user_data as *mut c_void) };
    }
}

/// Whether the driver under the layer offers `name` on `physical` (then the layer provides
/// nothing for it).
///
/// # Safety
/// `physical` belongs to `inst`.
unsafe fn driver_offers(inst: &InstanceData, physical: vk::PhysicalDevice, name: &CStr) -> bool {
    let Some(enumerate) = inst.fns.enumerate_device_extension_properties else {
        return false;
    };
    let mut count = 0u32;
    // SAFETY: valid physical device; count query.
    if unsafe { enumerate(physical, std::ptr::null(), &mut count, std::ptr::null_mut()) }
        != vk::Result::SUCCESS
    {
        return false;
    }
    let mut list = vec![vk::ExtensionProperties::default(); count as usize];
    // SAFETY: `list` holds `count` elements.
    let _ = unsafe { enumerate(physical, std::ptr::null(), &mut count, list.as_mut_ptr()) };
    list.iter()
        .take(count as usize)
        .any(|p| p.extension_name_as_c_str().is_ok_and(|n| n == name))
}

/// # Safety
/// `physical` belongs to `inst`; `p_properties` is null or a valid output chain.
unsafe fn memory_properties2(
    inst: &InstanceData,
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
    khr: bool,
) {
    let next = if khr {
        inst.fns
            .get_physical_device_memory_properties2_khr
            .or(inst.fns.get_physical_device_memory_properties2)
    } else {
        inst.fns
            .get_physical_device_memory_properties2
            .or(inst.fns.get_physical_device_memory_properties2_khr)
    };
    let Some(next) = next else { return };
    if p_properties.is_null() {
        // SAFETY: forwarded unchanged.
        unsafe { next(physical, p_properties) };
        return;
    }
    // SAFETY: valid physical device of `inst`.
    let provide = !unsafe { driver_offers(inst, physical, vk::EXT_MEMORY_BUDGET_NAME) };
    if !provide {
        // SAFETY: forwarded unchanged.
        unsafe { next(physical, p_properties) };
        return;
    }
    // The driver does not know the budget structure: it sees the chain without it.
    // SAFETY: a valid, writable output chain; restored when `unlinked` drops, right after.
    let unlinked = unsafe {
        chain::unlink(p_properties.cast(), |t| {
            t == vk::StructureType::PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT
        })
    };
    // SAFETY: forwarded with our own budget structure unlinked.
    unsafe { next(physical, p_properties) };
    drop(unlinked);
    // SAFETY: valid output structure (its chain restored above).
    let properties = unsafe { (*p_properties).memory_properties };
    let usage = books()
        .usage
        .get(&physical.as_raw())
        .copied()
        .unwrap_or_default();
    let cap = inst.config.memory_budget;
    // SAFETY: valid output chain; each node is cast to the type its sType names.
    unsafe {
        chain::for_each((*p_properties).p_next.cast_const(), |node| {
            if (*node).s_type != vk::StructureType::PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT {
                return;
            }
            let budget = &mut *node
                .cast_mut()
                .cast::<vk::PhysicalDeviceMemoryBudgetPropertiesEXT<'_>>();
            fill_budget(&properties, &usage, cap, budget);
        });
    }
}

/// The budget structure for `properties`' heaps: `usage` as tracked, budget the heap's size or
/// `cap`, whichever is smaller; zero past the heap count, as the spec asks.
fn fill_budget(
    properties: &vk::PhysicalDeviceMemoryProperties,
    usage: &[u64; vk::MAX_MEMORY_HEAPS],
    cap: Option<u64>,
    budget: &mut vk::PhysicalDeviceMemoryBudgetPropertiesEXT<'_>,
) {
    let heaps = (properties.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS);
    for (i, (heap, &used)) in properties.memory_heaps.iter().zip(usage).enumerate() {
        let (used, limit) = if i < heaps {
            (used, cap.map_or(heap.size, |c| c.min(heap.size)))
        } else {
            (0, 0)
        };
        budget.heap_usage[i] = used;
        budget.heap_budget[i] = limit;
    }
}

pub(crate) unsafe extern "system" fn get_physical_device_memory_properties2(
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
) {
    on_instance(
        "vkGetPhysicalDeviceMemoryProperties2",
        (),
        physical,
        |inst| {
            // SAFETY: the application's valid physical device of `inst` and output chain.
            unsafe { memory_properties2(inst, physical, p_properties, false) }
        },
    )
}

pub(crate) unsafe extern "system" fn get_physical_device_memory_properties2_khr(
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
) {
    on_instance(
        "vkGetPhysicalDeviceMemoryProperties2KHR",
        (),
        physical,
        |inst| {
            // SAFETY: the application's valid physical device of `inst` and output chain.
            unsafe { memory_properties2(inst, physical, p_properties, true) }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_heap_or_the_cap_and_usage_is_what_was_allocated() {
        let mut properties = vk::PhysicalDeviceMemoryProperties {
            memory_heap_count: 2,
            ..Default::default()
        };
        properties.memory_heaps[0].size = 2 << 30;
        properties.memory_heaps[1].size = 512 << 20;
        let mut usage = [0u64; vk::MAX_MEMORY_HEAPS];
        usage[0] = 300 << 20;
        usage[1] = 1 << 20;
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        budget.heap_budget[5] = 7; // stale: zeroed past the heap count
        fill_budget(&properties, &usage, None, &mut budget);
        assert_eq!(&budget.heap_budget[..3], &[2 << 30, 512 << 20, 0]);
        assert_eq!(&budget.heap_usage[..3], &[300 << 20, 1 << 20, 0]);
        assert_eq!(budget.heap_budget[5], 0);
        fill_budget(&properties, &usage, Some(1 << 30), &mut budget);
        assert_eq!(&budget.heap_budget[..2], &[1 << 30, 512 << 20]);
    }
}
