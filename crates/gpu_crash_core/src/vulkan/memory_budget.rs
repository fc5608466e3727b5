//! Video memory at the fault: each heap's size and kind, and with `VK_EXT_memory_budget` the
//! driver's usage and budget for it (`vkGetPhysicalDeviceMemoryProperties2` with
//! `VkPhysicalDeviceMemoryBudgetPropertiesEXT`), plus what `VK_EXT_device_memory_report` counted.
//!
//! These are physical-device queries: no device lock, valid on a lost device. On NVIDIA (H100,
//! driver 580.159.04) the budget answered while the GPU hung on a fault, with the freed memory
//! already gone from the usage (docs/driver-facts.md, the real-fault matrix).

use ash::vk;

use super::capabilities::GpuCrashCapabilities;
use super::memory_report::{AllocationFailureReading, MemoryReportCounters};

/// One memory heap as the driver described it at the fault.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapReading {
    /// `VkMemoryHeap::size`, bytes.
    pub size: u64,
    /// `VK_MEMORY_HEAP_DEVICE_LOCAL_BIT`: video memory (on an integrated or software GPU, the one
    /// system memory heap also says so).
    pub device_local: bool,
    /// `heapUsage`: bytes this process uses in the heap, by the driver's estimate. `None` without
    /// `VK_EXT_memory_budget`.
    pub usage: Option<u64>,
    /// `heapBudget`: bytes the process can use before allocations fail or hurt performance.
    /// `None` without `VK_EXT_memory_budget`.
    pub budget: Option<u64>,
}

/// Video memory at the fault, as the driver told it; turned into the report's section by the
/// report builder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VideoMemoryReading {
    /// Every heap, in the driver's order (the index is the heap index).
    pub heaps: Vec<HeapReading>,
    /// `VK_EXT_memory_budget` was enabled on the device: usage and budget are the driver's.
    pub memory_budget: bool,
    /// What `VK_EXT_device_memory_report` counted; `None` when it is not enabled on the device.
    pub allocation_failures: Option<AllocationFailureReading>,
    /// The driver did not answer the heap query in time: `heaps` is empty, the counts (our own
    /// atomics, no driver call) are still there.
    pub heaps_timed_out: bool,
}

/// Reads the heaps of `device`'s physical device, with usage and budget where
/// `capabilities.memory_budget`, and the memory report's counts from `counters`. `None` when
/// `device` is not a Vulkan device.
pub fn read_video_memory(
    device: &wgpu::Device,
    capabilities: &GpuCrashCapabilities,
    counters: Option<&MemoryReportCounters>,
) -> Option<VideoMemoryReading> {
    // SAFETY: only the raw instance and physical device are read, for physical-device queries
    // that are valid whatever the device's state.
    let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    let physical = hal.raw_physical_device();
    // Enabled by us or by wgpu (which enables it wherever offered); the capability says the
    // instance and device are Vulkan 1.1, whose `vkGetPhysicalDeviceMemoryProperties2` we call.
    let budget = capabilities.memory_budget
        && hal
            .enabled_device_extensions()
            .contains(&ash::ext::memory_budget::NAME);
    // SAFETY: `physical` belongs to `instance`; Vulkan 1.1 where `budget` (see above).
    let heaps = unsafe { read_heaps(instance, physical, budget) };
    Some(VideoMemoryReading {
        heaps,
        memory_budget: budget,
        allocation_failures: counters.map(MemoryReportCounters::read),
        heaps_timed_out: false,
    })
}

/// The heaps of `physical`, with usage and budget when `budget`.
///
/// # Safety
/// `physical` belongs to `instance`; with `budget`, the instance and device are Vulkan 1.1+ and
/// the device offers `VK_EXT_memory_budget`.
unsafe fn read_heaps(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    budget: bool,
) -> Vec<HeapReading> {
    let mut budget_props = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
    let properties = if budget {
        let mut props2 =
            vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget_props);
        // SAFETY: the caller's contract; the chain holds one structure of an offered extension.
        unsafe { instance.get_physical_device_memory_properties2(physical, &mut props2) };
        props2.memory_properties
    } else {
        // SAFETY: the caller's contract.
        unsafe { instance.get_physical_device_memory_properties(physical) }
    };
    heaps_of(&properties, budget.then_some(&budget_props))
}

/// The readings of `properties`' heaps, with `budget`'s usage and budget when given. A count past
/// `VK_MAX_MEMORY_HEAPS` (a broken driver) is cut there.
fn heaps_of(
    properties: &vk::PhysicalDeviceMemoryProperties,
    budget: Option<&vk::PhysicalDeviceMemoryBudgetPropertiesEXT<'_>>,
) -> Vec<HeapReading> {
    let count = (properties.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS);
    properties.memory_heaps[..count]
        .iter()
        .enumerate()
        .map(|(i, heap)| HeapReading {
            size: heap.size,
            device_local: heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL),
            usage: budget.map(|b| b.heap_usage[i]),
            budget: budget.map(|b| b.heap_budget[i]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heaps_keep_their_order_kind_and_budget() {
        let mut properties = vk::PhysicalDeviceMemoryProperties {
            memory_heap_count: 2,
            ..Default::default()
        };
        properties.memory_heaps[0] = vk::MemoryHeap {
            size: 8 << 30,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
        };
        properties.memory_heaps[1] = vk::MemoryHeap {
            size: 16 << 30,
            flags: vk::MemoryHeapFlags::empty(),
        };
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        budget.heap_usage[0] = 7 << 30;
        budget.heap_budget[0] = 7 << 30;
        budget.heap_usage[1] = 1 << 30;
        budget.heap_budget[1] = 12 << 30;
        let heaps = heaps_of(&properties, Some(&budget));
        assert_eq!(
            heaps,
            [
                HeapReading {
                    size: 8 << 30,
                    device_local: true,
                    usage: Some(7 << 30),
                    budget: Some(7 << 30)
                },
                HeapReading {
                    size: 16 << 30,
                    device_local: false,
                    usage: Some(1 << 30),
                    budget: Some(12 << 30)
                }
            ]
        );
        let without = heaps_of(&properties, None);
        assert!(without
            .iter()
            .all(|h| h.usage.is_none() && h.budget.is_none()));
        properties.memory_heap_count = 99;
        assert_eq!(heaps_of(&properties, None).len(), vk::MAX_MEMORY_HEAPS);
    }
}
