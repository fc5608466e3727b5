//! Instances and devices: what the layer adds to `vkCreateDevice` (the marker extension or feature),
//! the marker memory it makes on the new device, and what it keeps per device.

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;

use crate::dispatch::{self, DeviceFns, Instance, InstanceFns};
use crate::loader;
use crate::log::{guard, log_line};
use crate::record::Recording;

/// Marked commands the layer remembers per device: the ring of records and of marker slots. A hung
/// GPU is at most this many marked commands behind the CPU for the answer to name its command;
/// 65,536 is many frames of a game (Bevy batches a scene's draws into a few indirect draws).
pub(crate) const SLOTS: u64 = 1 << 16;

/// How the GPU writes markers on this device.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// `vkCmdWriteBufferMarkerAMD` (bottom of pipe) right after every draw and dispatch, inside
    /// render pass instances too.
    Amd,
    /// Core Vulkan: a full barrier, `vkCmdUpdateBuffer` of the sequence numbers and a barrier to the
    /// host, valid only outside render pass instances: right after each dispatch, and after each
    /// render pass instance for all of its draws. Used where the driver lacks
    /// `VK_AMD_buffer_marker` (lavapipe). A timestamp is valid inside a render pass, but lavapipe
    /// (Mesa 22.3) waits for the device to be idle in every `vkGetQueryPoolResults`
    /// (`lvp_GetQueryPoolResults` calls `DeviceWaitIdle` first), so one cannot be read while the
    /// GPU hangs.
    UpdateBuffer,
}

/// The marker memory of a device: slot `sequence % SLOTS` holds the low 32 bits of a marked
/// command's sequence number once the GPU got past it, in a host-visible, host-coherent buffer the
/// layer keeps mapped (read without a Vulkan call, also while the GPU hangs or after a loss).
pub(crate) struct Marks {
    pub writer: Writer,
    pub buffer: vk::Buffer,
    pub memory: vk::DeviceMemory,
    pub words: *mut u32,
}

/// One marked command.
#[derive(Clone)]
pub(crate) struct Entry {
    pub sequence: u64,
    pub command_buffer: u64,
    pub index: u32,
    pub kind: u32,
    pub pipeline: u64,
    pub pipeline_name: Option<Arc<str>>,
    pub ordinal: u32,
    pub labels: Arc<[Arc<str>]>,
    /// Marked commands sharing its marker (1: its own); set when the marker is recorded.
    pub sharing: u32,
}

/// The mutable part of a device.
#[derive(Default)]
pub(crate) struct State {
    /// The next sequence number (from 1).
    pub next_sequence: u64,
    /// Command buffers being recorded or recorded.
    pub recordings: HashMap<u64, Recording>,
    /// `entries[sequence % SLOTS]`.
    pub entries: Vec<Option<Entry>>,
    /// Debug names of live pipelines.
    pub pipeline_names: HashMap<u64, Arc<str>>,
    /// The sequence numbers of each submitted command buffer, in submission order.
    pub submitted: VecDeque<Arc<[u64]>>,
    /// Sequence numbers held in `submitted`.
    pub submitted_marks: u64,
}

/// What the layer keeps per device.
pub(crate) struct Device {
    pub next_gdpa: vk::PFN_vkGetDeviceProcAddr,
    pub fns: DeviceFns,
    /// `None`: nothing to mark with on this device (logged once at creation); the hooks then only
    /// call down.
    pub marks: Option<Marks>,
    state: Mutex<State>,
}

// SAFETY: `words` points into memory mapped for the device's life; it is only read and written
// with volatile word accesses, which the GPU's own writes may race with by design (coherent memory).
unsafe impl Send for Device {}
// SAFETY: as above; everything else is behind `state`'s lock or immutable.
unsafe impl Sync for Device {}

impl Device {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) unsafe extern "system" fn create_instance(
    p_create_info: *const vk::InstanceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    guard(
        "vkCreateInstance",
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            // SAFETY: the loader's create info.
            let Some(next_gipa) = (unsafe { loader::take_instance_link(p_create_info) }) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the next layer's GIPA answers vkCreateInstance with a null instance.
            let create = unsafe { next_gipa(vk::Instance::null(), c"vkCreateInstance".as_ptr()) };
            let Some(create) = create else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the entry point is vkCreateInstance's.
            let create: vk::PFN_vkCreateInstance = unsafe { std::mem::transmute(create) };
            // SAFETY: forwarded unchanged (our link was taken from the chain above).
            let result = unsafe { create(p_create_info, p_allocator, p_instance) };
            if result != vk::Result::SUCCESS {
                return result;
            }
            // SAFETY: the instance was just created.
            let instance = unsafe { *p_instance };
            // SAFETY: the next GIPA with the instance it created returns entry points of these names.
            let fns = unsafe { InstanceFns::load(|name| next_gipa(instance, name.as_ptr())) };
            dispatch::set_instance(
                dispatch::key(instance),
                Some(Arc::new(Instance {
                    handle: instance,
                    next_gipa,
                    fns,
                })),
            );
            vk::Result::SUCCESS
        },
    )
}

pub(crate) unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard("vkDestroyInstance", (), || {
        let Some(inst) = dispatch::instance_of(instance) else {
            return;
        };
        dispatch::set_instance(dispatch::key(instance), None);
        if let Some(destroy) = inst.fns.destroy_instance {
            // SAFETY: forwarded unchanged.
            unsafe { destroy(instance, p_allocator) };
        }
    })
}

/// Whether the driver offers `VK_AMD_buffer_marker` on `physical_device`.
///
/// # Safety
/// `physical_device` belongs to `inst`.
unsafe fn offers_amd_marker(inst: &Instance, physical_device: vk::PhysicalDevice) -> bool {
    let Some(enumerate) = inst.fns.enumerate_device_extension_properties else {
        return false;
    };
    let mut count = 0u32;
    // SAFETY: the two-call idiom on a valid physical device.
    let _ = unsafe {
        enumerate(
            physical_device,
            std::ptr::null(),
            &mut count,
            std::ptr::null_mut(),
        )
    };
    let mut extensions = vec![vk::ExtensionProperties::default(); count as usize];
    // SAFETY: as above, with room for `count` entries.
    let _ = unsafe {
        enumerate(
            physical_device,
            std::ptr::null(),
            &mut count,
            extensions.as_mut_ptr(),
        )
    };
    extensions.truncate(count as usize);
    extensions
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(vk::AMD_BUFFER_MARKER_NAME))
}

pub(crate) unsafe extern "system" fn create_device(
    physical_device: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    guard(
        "vkCreateDevice",
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            let Some(inst) = dispatch::instance_of(physical_device) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the loader's create info.
            let Some((next_gipa, next_gdpa)) = (unsafe { loader::take_device_link(p_create_info) })
            else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the next GIPA with our instance.
            let create = unsafe { next_gipa(inst.handle, c"vkCreateDevice".as_ptr()) };
            let Some(create) = create else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the entry point is vkCreateDevice's.
            let create: vk::PFN_vkCreateDevice = unsafe { std::mem::transmute(create) };
            // SAFETY: the application's create info is valid for the call.
            let original = unsafe { &*p_create_info };
            // SAFETY: as above.
            let writer = if unsafe { offers_amd_marker(&inst, physical_device) } {
                Writer::Amd
            } else {
                Writer::UpdateBuffer
            };
            // What we may add: the marker extension, in a copy of the list.
            let mut extensions: Vec<*const c_char> =
                if original.pp_enabled_extension_names.is_null() {
                    Vec::new()
                } else {
                    // SAFETY: the create info's array of `enabled_extension_count` names.
                    unsafe {
                        std::slice::from_raw_parts(
                            original.pp_enabled_extension_names,
                            original.enabled_extension_count as usize,
                        )
                    }
                    .to_vec()
                };
            let mut info = *original;
            // SAFETY: each name is a valid C string of the application's list.
            let has = extensions
                .iter()
                .any(|&n| unsafe { CStr::from_ptr(n) } == vk::AMD_BUFFER_MARKER_NAME);
            if writer == Writer::Amd && !has {
                extensions.push(vk::AMD_BUFFER_MARKER_NAME.as_ptr());
            }
            info.enabled_extension_count = extensions.len() as u32;
            info.pp_enabled_extension_names = extensions.as_ptr();
            // SAFETY: the application's create info with, at most, one extension name more, which the
            // device offers; the list lives across the call.
            let result = unsafe { create(physical_device, &info, p_allocator, p_device) };
            if result != vk::Result::SUCCESS {
                return result;
            }
            // SAFETY: the device was just created.
            let device = unsafe { *p_device };
            // SAFETY: the next GDPA with the device it created.
            let fns = unsafe {
                DeviceFns::load(|name| {
                    next_gdpa(device, name.as_ptr()).or_else(|| {
                        // Instance-extension commands dispatched on the device: some loaders answer
                        // them only through GIPA (and no other name may be asked there: the loader's
                        // terminator crashes on a device command).
                        let debug_utils = [
                            c"vkSetDebugUtilsObjectNameEXT",
                            c"vkCmdBeginDebugUtilsLabelEXT",
                            c"vkCmdEndDebugUtilsLabelEXT",
                        ];
                        if debug_utils.contains(&name) {
                            next_gipa(inst.handle, name.as_ptr())
                        } else {
                            None
                        }
                    })
                })
            };
            // SAFETY: `device` is live and came from `physical_device`, with VK_AMD_buffer_marker for
            // `Writer::Amd`.
            let marks = unsafe { make_marks(&inst.fns, physical_device, device, &fns, writer) };
            let marks = match marks {
                Ok(marks) => {
                    log_line(match marks.writer {
                    Writer::Amd => {
                        "exact mode: every draw and dispatch marked with vkCmdWriteBufferMarkerAMD"
                    }
                    Writer::UpdateBuffer => {
                        "exact mode: no VK_AMD_buffer_marker; each dispatch marked, and each render \
                         pass instance for its draws (vkCmdUpdateBuffer after a barrier)"
                    }
                });
                    Some(marks)
                }
                Err(why) => {
                    log_line(&format!("exact mode off on this device: {why}"));
                    None
                }
            };
            let state = State {
                next_sequence: 1,
                entries: vec![None; SLOTS as usize],
                ..State::default()
            };
            dispatch::set_device(
                dispatch::key(device),
                Some(Arc::new(Device {
                    next_gdpa,
                    fns,
                    marks,
                    state: Mutex::new(state),
                })),
            );
            vk::Result::SUCCESS
        },
    )
}

/// Makes the marker memory of a new device.
///
/// # Safety
/// `device` is live, created from `physical_device`, with `VK_AMD_buffer_marker` for
/// [`Writer::Amd`].
unsafe fn make_marks(
    inst_fns: &InstanceFns,
    physical_device: vk::PhysicalDevice,
    device: vk::Device,
    fns: &DeviceFns,
    writer: Writer,
) -> Result<Marks, String> {
    let failed = |call: &str, r: vk::Result| format!("{call} failed: {r}");
    let writes = match writer {
        Writer::Amd => fns.cmd_write_buffer_marker_amd.is_some(),
        Writer::UpdateBuffer => {
            fns.cmd_update_buffer.is_some() && fns.cmd_pipeline_barrier.is_some()
        }
    };
    let (
        Some(create_buffer),
        Some(requirements),
        Some(allocate),
        Some(bind),
        Some(map),
        true,
        Some(memory_properties),
    ) = (
        fns.create_buffer,
        fns.get_buffer_memory_requirements,
        fns.allocate_memory,
        fns.bind_buffer_memory,
        fns.map_memory,
        writes,
        inst_fns.get_physical_device_memory_properties,
    )
    else {
        return Err("the next layer lacks a memory or marker command".into());
    };
    let size = SLOTS * 4;
    let info = vk::BufferCreateInfo::default()
        .size(size)
        .usage(vk::BufferUsageFlags::TRANSFER_DST)
        .sharing_mode(vk::SharingMode::EXCLUSIVE);
    let mut buffer = vk::Buffer::null();
    // SAFETY: valid create info on a live device.
    let r = unsafe { create_buffer(device, &info, std::ptr::null(), &mut buffer) };
    if r != vk::Result::SUCCESS {
        return Err(failed("vkCreateBuffer", r));
    }
    let mut req = vk::MemoryRequirements::default();
    // SAFETY: our new buffer.
    unsafe { requirements(device, buffer, &mut req) };
    let mut props = vk::PhysicalDeviceMemoryProperties::default();
    // SAFETY: valid physical device.
    unsafe { memory_properties(physical_device, &mut props) };
    let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let Some(memory_type) = props
        .memory_types_as_slice()
        .iter()
        .enumerate()
        .position(|(i, t)| {
            req.memory_type_bits & (1 << i) != 0 && t.property_flags.contains(wanted)
        })
    else {
        if let Some(destroy) = fns.destroy_buffer {
            // SAFETY: our unused buffer.
            unsafe { destroy(device, buffer, std::ptr::null()) };
        }
        return Err("no host-visible, host-coherent memory".into());
    };
    let allocate_info = vk::MemoryAllocateInfo::default()
        .allocation_size(req.size)
        .memory_type_index(memory_type as u32);
    let mut memory = vk::DeviceMemory::null();
    // SAFETY: valid allocate info.
    let r = unsafe { allocate(device, &allocate_info, std::ptr::null(), &mut memory) };
    let mut words: *mut c_void = std::ptr::null_mut();
    let r = if r == vk::Result::SUCCESS {
        // SAFETY: fresh buffer and memory of a type it accepts.
        let r = unsafe { bind(device, buffer, memory, 0) };
        if r == vk::Result::SUCCESS {
            // SAFETY: host-visible memory, mapped once for the device's life.
            unsafe {
                map(
                    device,
                    memory,
                    0,
                    vk::WHOLE_SIZE,
                    vk::MemoryMapFlags::empty(),
                    &mut words,
                )
            }
        } else {
            r
        }
    } else {
        r
    };
    let marks = Marks {
        writer,
        buffer,
        memory,
        words: words.cast(),
    };
    if r != vk::Result::SUCCESS || words.is_null() {
        // SAFETY: nothing of ours was recorded yet.
        unsafe { destroy_marks(device, fns, &marks) };
        return Err(failed("allocating the marker memory", r));
    }
    // SAFETY: the mapping covers SLOTS words; nothing uses it yet.
    unsafe { std::ptr::write_bytes(words.cast::<u8>(), 0, size as usize) };
    Ok(marks)
}

/// Frees the marker memory.
///
/// # Safety
/// No pending GPU work uses it (the device is idle or being destroyed).
unsafe fn destroy_marks(device: vk::Device, fns: &DeviceFns, marks: &Marks) {
    // SAFETY: the caller's contract; each handle is ours and destroyed once (freeing the memory
    // unmaps it).
    unsafe {
        if let Some(destroy) = fns.destroy_buffer {
            destroy(device, marks.buffer, std::ptr::null());
        }
        if let (Some(free), false) = (fns.free_memory, marks.memory == vk::DeviceMemory::null()) {
            free(device, marks.memory, std::ptr::null());
        }
    }
}

pub(crate) unsafe extern "system" fn destroy_device(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard("vkDestroyDevice", (), || {
        let Some(dev) = dispatch::device_of(device) else {
            return;
        };
        dispatch::set_device(dispatch::key(device), None);
        if let Some(marks) = &dev.marks {
            // SAFETY: the application destroys the device only once its work is done (spec).
            unsafe { destroy_marks(device, &dev.fns, marks) };
        }
        if let Some(destroy) = dev.fns.destroy_device {
            // SAFETY: forwarded unchanged.
            unsafe { destroy(device, p_allocator) };
        }
    })
}
