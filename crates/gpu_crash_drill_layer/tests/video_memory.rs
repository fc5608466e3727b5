//! The layer's `VK_EXT_memory_budget` and `VK_EXT_device_memory_report` where the driver has
//! neither (lavapipe), through the real loader: usage follows what the application allocates and
//! frees, the budget is the heap or `GPU_CRASH_DRILL_MEMORY_BUDGET`, and the memory report's
//! callback hears of each allocation, free and refused allocation (lavapipe refuses 1 TiB).
//!
//! On a driver with both extensions natively the cases say they do not apply.

mod common;

use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use ash::vk;
use common::*;

/// One memory report event the child's callback heard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Event {
    ty: vk::DeviceMemoryReportEventTypeEXT,
    size: u64,
    heap: u32,
    object_type: vk::ObjectType,
    user_data: usize,
}

static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());

unsafe extern "system" fn on_memory_event(
    data: *const vk::DeviceMemoryReportCallbackDataEXT<'_>,
    user_data: *mut c_void,
) {
    // SAFETY: valid for the call, per the spec.
    let data = unsafe { &*data };
    EVENTS.lock().unwrap().push(Event {
        ty: data.ty,
        size: data.size,
        heap: data.heap_index,
        object_type: data.object_type,
        user_data: user_data as usize,
    });
}

#[test]
fn usage_follows_allocations_and_the_budget_is_the_heap() {
    run_child("budget|heap", &[]);
}

#[test]
fn the_budget_knob_caps_every_heap() {
    run_child(
        "budget|capped",
        &[("GPU_CRASH_DRILL_MEMORY_BUDGET", "1048576")],
    );
}

#[test]
fn the_memory_report_hears_allocations_frees_and_a_refused_allocation() {
    run_child("report", &[]);
}

// ---------------------------------------------------------------------------------------------
// Child side.

struct Device {
    /// Keeps the loader loaded: the other fields' entry points live in it.
    _entry: ash::Entry,
    instance: ash::Instance,
    physical: vk::PhysicalDevice,
    device: ash::Device,
    /// A host-visible memory type and its heap.
    memory_type: u32,
    heap: u32,
}

fn offers(instance: &ash::Instance, physical: vk::PhysicalDevice, name: &CStr) -> bool {
    // SAFETY: valid physical device.
    unsafe { instance.enumerate_device_extension_properties(physical) }
        .unwrap()
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(name))
}

/// A device with both extensions and, with `report`, a memory report callback whose user data is
/// 7; `None` where the driver has them natively (nothing of the layer's to test).
fn device(report: bool) -> Option<Device> {
    // SAFETY: loading the system Vulkan loader.
    let entry = unsafe { ash::Entry::load() }.expect("libvulkan");
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
    // SAFETY: valid create info.
    let instance = unsafe {
        entry.create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
    }
    .expect("create instance");
    // SAFETY: valid instance.
    let physical = unsafe { instance.enumerate_physical_devices() }.unwrap()[0];
    // The layer lists what it provides itself; what it does not provide the driver has.
    let native = |name: &CStr| {
        let f = instance.fp_v1_0().enumerate_device_extension_properties;
        let layer = c"VK_LAYER_gpu_crash_drill".as_ptr();
        let mut n = 0;
        // SAFETY: count query for the layer's own extensions.
        let _ = unsafe { f(physical, layer, &mut n, std::ptr::null_mut()) };
        let mut props = vec![vk::ExtensionProperties::default(); n as usize];
        // SAFETY: `props` holds `n` elements.
        let _ = unsafe { f(physical, layer, &mut n, props.as_mut_ptr()) };
        !props
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(name))
    };
    if native(vk::EXT_MEMORY_BUDGET_NAME) || native(vk::EXT_DEVICE_MEMORY_REPORT_NAME) {
        return None;
    }
    assert!(offers(&instance, physical, vk::EXT_MEMORY_BUDGET_NAME));
    assert!(offers(
        &instance,
        physical,
        vk::EXT_DEVICE_MEMORY_REPORT_NAME
    ));
    let mut feature = vk::PhysicalDeviceDeviceMemoryReportFeaturesEXT::default();
    let mut features2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut feature);
    // SAFETY: valid physical device; the feature structure of an offered extension.
    unsafe { instance.get_physical_device_features2(physical, &mut features2) };
    assert_eq!(feature.device_memory_report, vk::TRUE);

    let names = [
        vk::EXT_MEMORY_BUDGET_NAME.as_ptr(),
        vk::EXT_DEVICE_MEMORY_REPORT_NAME.as_ptr(),
    ];
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let mut enable =
        vk::PhysicalDeviceDeviceMemoryReportFeaturesEXT::default().device_memory_report(true);
    let mut callback = vk::DeviceDeviceMemoryReportCreateInfoEXT::default()
        .pfn_user_callback(Some(on_memory_event))
        .user_data(7 as *mut c_void);
    let mut info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&names)
        .push_next(&mut enable);
    if report {
        info = info.push_next(&mut callback);
    }
    // SAFETY: valid create info (the layer strips what the driver does not know).
    let device = unsafe { instance.create_device(physical, &info, None) }.expect("create device");
    // SAFETY: valid physical device.
    let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
    let memory_type = (0..memory.memory_type_count)
        .find(|&i| {
            memory.memory_types[i as usize]
                .property_flags
                .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
        })
        .expect("a host-visible memory type");
    let heap = memory.memory_types[memory_type as usize].heap_index;
    Some(Device {
        _entry: entry,
        instance,
        physical,
        device,
        memory_type,
        heap,
    })
}

impl Device {
    /// (usage, budget) of every heap, and the heap sizes.
    fn budget(&self) -> (Vec<(u64, u64)>, Vec<u64>) {
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut properties = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        // SAFETY: valid physical device; the budget structure of an enabled extension.
        unsafe {
            self.instance
                .get_physical_device_memory_properties2(self.physical, &mut properties)
        };
        let heaps = properties.memory_properties.memory_heap_count as usize;
        let sizes = properties.memory_properties.memory_heaps[..heaps]
            .iter()
            .map(|h| h.size)
            .collect();
        let pairs = (0..heaps)
            .map(|i| (budget.heap_usage[i], budget.heap_budget[i]))
            .collect();
        (pairs, sizes)
    }

    fn allocate(&self, size: u64) -> Result<vk::DeviceMemory, vk::Result> {
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(self.memory_type);
        // SAFETY: valid device and allocate info.
        unsafe { self.device.allocate_memory(&info, None) }
    }
}

const MIB64: u64 = 64 << 20;
const TIB: u64 = 1 << 40;

fn case_budget(capped: bool) {
    let Some(gpu) = device(false) else {
        println!("case not applicable on this driver");
        return;
    };
    let heap = gpu.heap as usize;
    let (before, sizes) = gpu.budget();
    let memory = gpu.allocate(MIB64).expect("64 MiB");
    let (during, _) = gpu.budget();
    assert_eq!(
        during[heap].0,
        before[heap].0 + MIB64,
        "usage grows by the allocation"
    );
    for (i, &(_, budget)) in during.iter().enumerate() {
        let expected = if capped {
            sizes[i].min(1 << 20)
        } else {
            sizes[i]
        };
        assert_eq!(budget, expected, "heap {i}'s budget");
    }
    if capped {
        assert!(
            during[heap].0 > during[heap].1,
            "usage past the capped budget"
        );
    }
    // SAFETY: allocated above, unused.
    unsafe { gpu.device.free_memory(memory, None) };
    let (after, _) = gpu.budget();
    assert_eq!(after[heap].0, before[heap].0, "usage back after the free");
    // SAFETY: nothing of the device is in use.
    unsafe { gpu.device.destroy_device(None) };
}

fn case_report() {
    let Some(gpu) = device(true) else {
        println!("case not applicable on this driver");
        return;
    };
    let memory = gpu.allocate(MIB64).expect("64 MiB");
    // SAFETY: allocated above, unused.
    unsafe { gpu.device.free_memory(memory, None) };
    let refused = gpu.allocate(TIB);
    assert_eq!(
        refused,
        Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY),
        "lavapipe refuses 1 TiB"
    );
    let events = EVENTS.lock().unwrap().clone();
    let event = |ty, size| Event {
        ty,
        size,
        heap: gpu.heap,
        object_type: vk::ObjectType::DEVICE_MEMORY,
        user_data: 7,
    };
    assert_eq!(
        events,
        [
            event(vk::DeviceMemoryReportEventTypeEXT::ALLOCATE, MIB64),
            event(vk::DeviceMemoryReportEventTypeEXT::FREE, MIB64),
            event(vk::DeviceMemoryReportEventTypeEXT::ALLOCATION_FAILED, TIB),
        ]
    );
    // SAFETY: nothing of the device is in use.
    unsafe { gpu.device.destroy_device(None) };
}

/// Entry point of child processes (the tests above start it with the case in `CHILD_ENV`).
#[test]
#[ignore = "child process entry point: the tests above start it with GPU_CRASH_DRILL_TEST_CASE set"]
fn child_entry() {
    let case = std::env::var(CHILD_ENV).expect("run by the tests above");
    match case.as_str() {
        "budget|heap" => case_budget(false),
        "budget|capped" => case_budget(true),
        "report" => case_report(),
        other => panic!("unknown case {other}"),
    }
    println!("DRILL-CASE-OK {case}");
}
