//! GPU-written progress markers: a small buffer in host-visible, host-coherent memory that the plugin
//! allocates with raw Vulkan and keeps mapped for the device's whole life.
//!
//! Commands the plugin records write frame numbers into it as the GPU gets there. The CPU reads it with
//! plain memory loads: no Vulkan call, no wgpu lock, so it works while the render thread is stuck inside
//! wgpu and after the device is lost. wgpu's own completion callbacks cannot do this: they fire only when
//! the app next submits or polls, so a paused game would look hung.
//!
//! Layout (32-bit words, each holding the low 32 bits of a frame number):
//! - word [`COMPLETED_WORD`]: the last frame whose work the GPU finished;
//! - then [`FRAME_SLOTS`] slots of [`MARKERS_PER_FRAME`] words: the breadcrumbs of frame `f` live in
//!   slot `f % FRAME_SLOTS`; a marker was reached when its word holds `f`.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use ash::vk;

/// Word that holds the last completed frame.
pub(crate) const COMPLETED_WORD: usize = 0;
/// Frames whose breadcrumbs are kept at once (frames in flight beyond this get none).
pub(crate) const FRAME_SLOTS: usize = 64;
/// Breadcrumb words per frame (two per stage: begun and finished).
pub(crate) const MARKERS_PER_FRAME: usize = 126;
/// Words in the buffer.
pub(crate) const WORDS: usize = 2 + FRAME_SLOTS * MARKERS_PER_FRAME;

/// Word index of breadcrumb `marker` of `frame`.
pub(crate) fn marker_word(frame: u64, marker: usize) -> usize {
    debug_assert!(marker < MARKERS_PER_FRAME);
    2 + (frame % FRAME_SLOTS as u64) as usize * MARKERS_PER_FRAME + marker
}

/// Debug name of the marker buffer (with `VK_EXT_debug_utils`).
pub(crate) const BUFFER_NAME: &CStr = c"gpu_crash_reporter progress markers";
/// Debug name of the marker buffer's memory.
pub(crate) const MEMORY_NAME: &CStr = c"gpu_crash_reporter progress marker memory";

/// Names one of our objects; a failure only costs the name.
///
/// # Safety
/// `namer` belongs to the device that owns `object`, on an instance with `VK_EXT_debug_utils`.
unsafe fn name_object<T: vk::Handle>(
    namer: &ash::ext::debug_utils::Device,
    object: T,
    name: &CStr,
) {
    let info = vk::DebugUtilsObjectNameInfoEXT::default()
        .object_handle(object)
        .object_name(name);
    // SAFETY: the caller's contract; `info` and `name` live across the call.
    let _ = unsafe { namer.set_debug_utils_object_name(&info) };
}

/// Where in the pipeline a breadcrumb is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkerStage {
    /// Once every earlier command has *finished* (`BOTTOM_OF_PIPE`): the GPU got to the work
    /// after it. Not `TOP_OF_PIPE`: on the H200 a top-of-pipe marker of a later stage was written
    /// while an earlier stage was still stuck (every later stage read "started"), because commands
    /// of later command buffers may start before earlier ones finish.
    Begun,
    /// Once every earlier command has *finished* (`BOTTOM_OF_PIPE`): the work before it is done.
    Finished,
}

/// How breadcrumbs get written on this device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreadcrumbWriter {
    /// `vkCmdWriteBufferMarkerAMD` (`VK_AMD_buffer_marker`: AMD, RADV, NVIDIA, turnip): a marker per
    /// render stage, pipelined with the work.
    AmdBufferMarker,
    /// Core Vulkan only: a full pipeline barrier and `vkCmdFillBuffer`, at the start and end of each
    /// frame (finer points would serialise the GPU).
    FillBuffer,
}

/// The mapped marker buffer of one device.
pub(crate) struct MarkerBuffer {
    device: ash::Device,
    amd: Option<ash::amd::buffer_marker::Device>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    words: NonNull<AtomicU32>,
    /// The device's "GPU" is CPU threads (lavapipe, SwiftShader): see [`Self::fine_marks`].
    cpu_device: bool,
    /// Keeps the device (e.g. a `RenderDevice` clone) alive for as long as the buffer exists.
    _device_owner: Box<dyn std::any::Any + Send + Sync>,
}

// SAFETY: the mapping stays valid until `destroy`, which takes `&mut self`; every access to the mapped
// words goes through `AtomicU32`, so concurrent reads by the watchdog and writes by the GPU are fine.
unsafe impl Send for MarkerBuffer {}
// SAFETY: as above; the command-recording methods only read the immutable handles.
unsafe impl Sync for MarkerBuffer {}

/// Why the marker buffer could not be made (the watchdog then stays off and says why).
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    /// The render device is not a Vulkan device.
    #[error("the render device is not Vulkan")]
    NotVulkan,
    /// The device has no memory type that is both host-visible and host-coherent.
    #[error("no host-visible, host-coherent memory type")]
    NoHostCoherentMemory,
    /// A Vulkan call failed.
    #[error("{call} failed: {result}")]
    Vulkan {
        /// The call.
        call: &'static str,
        /// Its result.
        result: vk::Result,
    },
}

impl MarkerBuffer {
    /// Allocates, binds and maps the buffer, zeroed. With `debug_utils` the buffer and its memory are
    /// named [`BUFFER_NAME`] / [`MEMORY_NAME`], so validation messages and binding reports about them
    /// say they are ours.
    ///
    /// # Safety
    /// `device` was created from `physical_device` of `instance`, with `VK_AMD_buffer_marker` enabled
    /// when `amd_buffer_marker` is true, `instance` has `VK_EXT_debug_utils` when `debug_utils` is
    /// true, and `device_owner` keeps the device alive.
    pub(crate) unsafe fn create(
        instance: &ash::Instance,
        physical_device: vk::PhysicalDevice,
        device: &ash::Device,
        amd_buffer_marker: bool,
        debug_utils: bool,
        device_owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<Self, MarkerError> {
        let size = (WORDS * 4) as vk::DeviceSize;
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let vulkan = |call| move |result| MarkerError::Vulkan { call, result };
        // SAFETY: valid create info on a live device.
        let buffer =
            unsafe { device.create_buffer(&info, None) }.map_err(vulkan("vkCreateBuffer"))?;
        let namer = debug_utils.then(|| ash::ext::debug_utils::Device::new(instance, device));
        if let Some(namer) = &namer {
            // SAFETY: the caller says the instance has VK_EXT_debug_utils; `buffer` is ours, live.
            unsafe { name_object(namer, buffer, BUFFER_NAME) };
        }
        // SAFETY: `buffer` was just created on `device`.
        let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
        // SAFETY: valid physical device of `instance`.
        let properties = unsafe { instance.get_physical_device_memory_properties(physical_device) };
        // SAFETY: valid physical device of `instance`.
        let cpu_device = unsafe { instance.get_physical_device_properties(physical_device) }
            .device_type
            == vk::PhysicalDeviceType::CPU;
        let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        // Prefer cached system memory: the watchdog reads it every tick, the GPU writes a few words.
        let pick = |extra: vk::MemoryPropertyFlags, avoid: vk::MemoryPropertyFlags| {
            properties
                .memory_types_as_slice()
                .iter()
                .enumerate()
                .position(|(i, t)| {
                    requirements.memory_type_bits & (1 << i) != 0
                        && t.property_flags.contains(wanted | extra)
                        && !t.property_flags.intersects(avoid)
                })
        };
        let Some(memory_type) = pick(
            vk::MemoryPropertyFlags::HOST_CACHED,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
        )
        .or_else(|| {
            pick(
                vk::MemoryPropertyFlags::empty(),
                vk::MemoryPropertyFlags::empty(),
            )
        }) else {
            // SAFETY: unused buffer of this device.
            unsafe { device.destroy_buffer(buffer, None) };
            return Err(MarkerError::NoHostCoherentMemory);
        };
        let allocate = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type as u32);
        let cleanup_buffer = |err| {
            // SAFETY: unused buffer of this device.
            unsafe { device.destroy_buffer(buffer, None) };
            err
        };
        // SAFETY: valid allocate info with a memory type the buffer accepts.
        let memory = unsafe { device.allocate_memory(&allocate, None) }
            .map_err(vulkan("vkAllocateMemory"))
            .map_err(cleanup_buffer)?;
        if let Some(namer) = &namer {
            // SAFETY: as for the buffer's name; `memory` is ours, live.
            unsafe { name_object(namer, memory, MEMORY_NAME) };
        }
        let cleanup = |err| {
            // SAFETY: neither is in use by the GPU: nothing has been recorded with them yet.
            unsafe {
                device.destroy_buffer(buffer, None);
                device.free_memory(memory, None);
            }
            err
        };
        // SAFETY: fresh buffer and memory of the right type and size.
        unsafe { device.bind_buffer_memory(buffer, memory, 0) }
            .map_err(vulkan("vkBindBufferMemory"))
            .map_err(cleanup)?;
        // SAFETY: host-visible memory, mapped once for the buffer's whole life.
        let mapped =
            unsafe { device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .map_err(vulkan("vkMapMemory"))
                .map_err(cleanup)?;
        let words = NonNull::new(mapped as *mut AtomicU32).ok_or_else(|| {
            cleanup(MarkerError::Vulkan {
                call: "vkMapMemory",
                result: vk::Result::ERROR_MEMORY_MAP_FAILED,
            })
        })?;
        // SAFETY: the mapping covers `WORDS` words (the allocation is at least the buffer's size) and
        // nothing else uses it yet; coherent memory needs no flush.
        unsafe { std::ptr::write_bytes(words.as_ptr() as *mut c_void as *mut u8, 0, WORDS * 4) };
        Ok(Self {
            device: device.clone(),
            amd: amd_buffer_marker.then(|| ash::amd::buffer_marker::Device::new(instance, device)),
            buffer,
            memory,
            words,
            cpu_device,
            _device_owner: device_owner,
        })
    }

    /// How breadcrumbs are written on this device.
    pub(crate) fn writer(&self) -> BreadcrumbWriter {
        if self.amd.is_some() {
            BreadcrumbWriter::AmdBufferMarker
        } else {
            BreadcrumbWriter::FillBuffer
        }
    }

    /// Whether breadcrumbs finer than the frame's start and end are recorded: with
    /// `VK_AMD_buffer_marker` (pipelined), or on a device whose "GPU" is CPU threads. There the
    /// fill-buffer marker's full barrier costs no GPU parallelism (a software rasteriser already
    /// finishes its work at every barrier that wgpu records between passes), and without stage
    /// markers a hang in a game's own shader would be reported only as "during frame" (issue 32).
    pub(crate) fn fine_marks(&self) -> bool {
        self.amd.is_some() || self.cpu_device
    }

    /// Stage breadcrumbs were switched off (`gpu_breadcrumbs: false`): a CPU device then marks only
    /// the frame's start and end, as other GPUs without `VK_AMD_buffer_marker` do.
    pub(crate) fn without_cpu_stage_marks(mut self) -> Self {
        self.cpu_device = false;
        self
    }

    /// The value of one word, as the GPU last wrote it.
    pub(crate) fn read(&self, word: usize) -> u32 {
        assert!(word < WORDS, "marker word {word} out of range");
        // SAFETY: in bounds of the live mapping (checked above). Acquire: a word's value is read no
        // earlier than the GPU made it visible (coherent memory; the barrier before HOST_READ on the
        // fill path).
        unsafe { (*self.words.as_ptr().add(word)).load(Ordering::Acquire) }
    }

    /// Records, into `command_buffer`, a write of `value` to `word` once every earlier command on the
    /// queue has finished: a full barrier, the fill, and a barrier that makes it visible to the host.
    /// Core Vulkan; valid outside render pass instances only.
    ///
    /// # Safety
    /// `command_buffer` belongs to this device, is recording, and is outside a render pass instance.
    pub(crate) unsafe fn record_after_all_work(
        &self,
        command_buffer: vk::CommandBuffer,
        word: usize,
        value: u32,
    ) {
        let before = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE);
        let after = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ);
        // SAFETY: the caller guarantees a recording command buffer of this device outside a render
        // pass; the buffer is ours, TRANSFER_DST, and `word` is in bounds (asserted).
        assert!(word < WORDS);
        unsafe {
            self.device.cmd_pipeline_barrier(
                command_buffer,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                &[before],
                &[],
                &[],
            );
            self.device.cmd_fill_buffer(
                command_buffer,
                self.buffer,
                (word * 4) as vk::DeviceSize,
                4,
                value,
            );
            self.device.cmd_pipeline_barrier(
                command_buffer,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[after],
                &[],
                &[],
            );
        }
    }

    /// Records a breadcrumb: with `VK_AMD_buffer_marker` a pipelined marker write at `stage`;
    /// without it the same write as [`Self::record_after_all_work`] (which serialises the GPU, so the
    /// caller uses it at frame boundaries only).
    ///
    /// # Safety
    /// As for [`Self::record_after_all_work`].
    pub(crate) unsafe fn record_marker(
        &self,
        command_buffer: vk::CommandBuffer,
        stage: MarkerStage,
        word: usize,
        value: u32,
    ) {
        assert!(word < WORDS);
        match &self.amd {
            Some(amd) => {
                let stage = match stage {
                    MarkerStage::Begun | MarkerStage::Finished => {
                        vk::PipelineStageFlags::BOTTOM_OF_PIPE
                    }
                };
                // SAFETY: VK_AMD_buffer_marker is enabled (checked at creation); valid recording
                // command buffer (caller); our TRANSFER_DST buffer, 4-byte aligned in-bounds offset.
                unsafe {
                    amd.cmd_write_buffer_marker(
                        command_buffer,
                        stage,
                        self.buffer,
                        (word * 4) as vk::DeviceSize,
                        value,
                    )
                }
            }
            // SAFETY: forwarded caller guarantees.
            None => unsafe { self.record_after_all_work(command_buffer, word, value) },
        }
    }
}

impl Drop for MarkerBuffer {
    /// Frees the buffer and its memory before the device can be destroyed (they must not outlive it,
    /// VUID-vkDestroyDevice-device-05137): the owner waited, bounded, for the GPU (see
    /// `DeviceSession`'s drop), or the device is lost and runs nothing.
    fn drop(&mut self) {
        // SAFETY: `_device_owner` (dropped after this body) keeps the device alive; each handle is
        // destroyed once; freeing the memory unmaps it; no work of ours is pending (above).
        unsafe {
            self.device.destroy_buffer(self.buffer, None);
            self.device.free_memory(self.memory, None);
        }
    }
}

/// Runs `record` on the raw `VkCommandBuffer` of a fresh wgpu encoder used only through the raw API
/// (wgpu-core panics when one encoder mixes both), and returns the finished command buffer; `None`
/// when the device is not Vulkan.
pub(crate) fn raw_command_buffer(
    device: &wgpu::Device,
    record: impl FnOnce(vk::CommandBuffer),
) -> Option<wgpu::CommandBuffer> {
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        // No label: with `VK_EXT_debug_utils` on, wgpu names every labelled command buffer, a driver
        // call per marker buffer per frame for a name no report uses.
        label: None,
    });
    // SAFETY: the encoder is ours and used only through the raw API; `raw_handle` is the command
    // buffer wgpu opened for it, recording, outside any render pass; we record only commands that
    // touch our own marker buffer, which outlives the submission (see MarkerBuffer's drop).
    let recorded = unsafe {
        encoder.as_hal_mut::<wgpu::hal::api::Vulkan, _, _>(|hal| {
            hal.map(|hal| record(hal.raw_handle())).is_some()
        })
    };
    recorded.then(|| encoder.finish())
}

/// Allocates the device's GPU progress markers (see [`markers`]).
pub(crate) fn create_marker_buffer(
    device: &wgpu::Device,
    amd_buffer_marker: bool,
    debug_utils: bool,
    stage_breadcrumbs: bool,
) -> Result<MarkerBuffer, MarkerError> {
    // SAFETY: only raw handles are read; the guard is dropped at the end of this function.
    let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }.ok_or(MarkerError::NotVulkan)?;
    let instance = hal.shared_instance().raw_instance();
    // SAFETY: the device is wgpu's live device of that instance and physical device; the extension
    // flags say what the instance and device callbacks enabled; the device clone keeps the device
    // alive.
    unsafe {
        MarkerBuffer::create(
            instance,
            hal.raw_physical_device(),
            hal.raw_device(),
            amd_buffer_marker,
            debug_utils,
            Box::new(device.clone()),
        )
    }
    .map(|markers| {
        if stage_breadcrumbs {
            markers
        } else {
            markers.without_cpu_stage_marks()
        }
    })
}
