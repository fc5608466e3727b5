//! What the layer records into command buffers: after every draw and dispatch, a marker write of
//! the command's sequence number; beside it, what the command was (its pipeline, the debug-label
//! stack open around it).
//!
//! One lock per device (`Device::state`), taken once per hooked command for a few map operations,
//! never across a call down the chain.

use std::sync::Arc;

use ash::vk::{self, Handle};
use vulkan_fault_ffi::exact::kind;

use crate::device::{Device, Entry, Writer, SLOTS};
use crate::dispatch::{c_str, device_of};
use crate::log::guard;

/// The pipeline bound at one bind point, as a marked command names it.
#[derive(Clone, Default)]
pub(crate) struct Bound {
    pipeline: u64,
    name: Option<Arc<str>>,
    ordinal: u32,
}

/// One command buffer's recording.
#[derive(Default)]
pub(crate) struct Recording {
    graphics: Bound,
    compute: Bound,
    /// The debug-label stack, outermost first.
    labels: Arc<[Arc<str>]>,
    /// Distinct pipelines bound since the innermost label began (or ended), in bind order.
    region: Vec<(u64, Option<Arc<str>>)>,
    /// Sequence numbers of its marked commands, in recording order.
    pub sequences: Vec<u64>,
    /// Inside a render pass instance.
    in_pass: bool,
    /// The instance was begun suspending (dynamic rendering): nothing may be recorded at its end.
    suspending: bool,
    /// [`Writer::UpdateBuffer`]: draws of the current render pass instance, marked at its end.
    pending: Vec<u64>,
}

/// Starts a fresh recording (a command buffer begun again is reset, implicitly or not).
pub(crate) unsafe extern "system" fn begin_command_buffer(
    cb: vk::CommandBuffer,
    p_begin: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    guard("vkBeginCommandBuffer", vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(cb) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        let Some(next) = dev.fns.begin_command_buffer else {
            return vk::Result::ERROR_UNKNOWN;
        };
        // SAFETY: forwarded unchanged.
        let result = unsafe { next(cb, p_begin) };
        if result == vk::Result::SUCCESS && dev.marks.is_some() {
            dev.state()
                .recordings
                .insert(cb.as_raw(), Recording::default());
        }
        result
    })
}

pub(crate) unsafe extern "system" fn free_command_buffers(
    device: vk::Device,
    pool: vk::CommandPool,
    count: u32,
    p_cbs: *const vk::CommandBuffer,
) {
    guard("vkFreeCommandBuffers", (), || {
        let Some(dev) = device_of(device) else { return };
        if !p_cbs.is_null() && dev.marks.is_some() {
            // SAFETY: the application's array of `count` handles.
            let cbs = unsafe { std::slice::from_raw_parts(p_cbs, count as usize) };
            let mut state = dev.state();
            for cb in cbs {
                state.recordings.remove(&cb.as_raw());
            }
        }
        if let Some(next) = dev.fns.free_command_buffers {
            // SAFETY: forwarded unchanged.
            unsafe { next(device, pool, count, p_cbs) };
        }
    })
}

pub(crate) unsafe extern "system" fn set_debug_utils_object_name(
    device: vk::Device,
    p_info: *const vk::DebugUtilsObjectNameInfoEXT<'_>,
) -> vk::Result {
    guard("vkSetDebugUtilsObjectNameEXT", vk::Result::SUCCESS, || {
        let Some(dev) = device_of(device) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        // SAFETY: a valid name info per the spec.
        if let (Some(info), true) = (unsafe { p_info.as_ref() }, dev.marks.is_some()) {
            if info.object_type == vk::ObjectType::PIPELINE {
                // SAFETY: a C string or null.
                let name = unsafe { c_str(info.p_object_name) };
                let mut state = dev.state();
                match name.map(|n| n.to_string_lossy()) {
                    Some(n) if !n.is_empty() => {
                        state
                            .pipeline_names
                            .insert(info.object_handle, Arc::from(&*n));
                    }
                    _ => {
                        state.pipeline_names.remove(&info.object_handle);
                    }
                }
            }
        }
        match dev.fns.set_debug_utils_object_name {
            // SAFETY: forwarded unchanged.
            Some(next) => unsafe { next(device, p_info) },
            None => vk::Result::SUCCESS,
        }
    })
}

pub(crate) unsafe extern "system" fn destroy_pipeline(
    device: vk::Device,
    pipeline: vk::Pipeline,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard("vkDestroyPipeline", (), || {
        let Some(dev) = device_of(device) else { return };
        if dev.marks.is_some() {
            // The driver may hand the handle to a new pipeline of another name.
            dev.state().pipeline_names.remove(&pipeline.as_raw());
        }
        if let Some(next) = dev.fns.destroy_pipeline {
            // SAFETY: forwarded unchanged.
            unsafe { next(device, pipeline, p_allocator) };
        }
    })
}

pub(crate) unsafe extern "system" fn cmd_bind_pipeline(
    cb: vk::CommandBuffer,
    bind_point: vk::PipelineBindPoint,
    pipeline: vk::Pipeline,
) {
    guard("vkCmdBindPipeline", (), || {
        let Some(dev) = device_of(cb) else { return };
        if let Some(next) = dev.fns.cmd_bind_pipeline {
            // SAFETY: forwarded unchanged.
            unsafe { next(cb, bind_point, pipeline) };
        }
        if dev.marks.is_none() {
            return;
        }
        let mut state = dev.state();
        let raw = pipeline.as_raw();
        let name = state.pipeline_names.get(&raw).cloned();
        let Some(rec) = state.recordings.get_mut(&cb.as_raw()) else {
            return;
        };
        if !rec.region.iter().any(|(p, _)| *p == raw) {
            rec.region.push((raw, name.clone()));
        }
        let ordinal = rec
            .region
            .iter()
            .take_while(|(p, _)| *p != raw)
            .filter(|(_, n)| *n == name)
            .count() as u32;
        let bound = Bound {
            pipeline: raw,
            name,
            ordinal,
        };
        if bind_point == vk::PipelineBindPoint::COMPUTE {
            rec.compute = bound;
        } else {
            rec.graphics = bound;
        }
    })
}

pub(crate) unsafe extern "system" fn cmd_begin_debug_utils_label(
    cb: vk::CommandBuffer,
    p_label: *const vk::DebugUtilsLabelEXT<'_>,
) {
    guard("vkCmdBeginDebugUtilsLabelEXT", (), || {
        let Some(dev) = device_of(cb) else { return };
        if let Some(next) = dev.fns.cmd_begin_debug_utils_label {
            // SAFETY: forwarded unchanged.
            unsafe { next(cb, p_label) };
        }
        if dev.marks.is_none() {
            return;
        }
        // SAFETY: a valid label whose name is a C string (null tolerated).
        let name = unsafe { p_label.as_ref() }
            .and_then(|l| unsafe { c_str(l.p_label_name) })
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut state = dev.state();
        if let Some(rec) = state.recordings.get_mut(&cb.as_raw()) {
            let mut labels = rec.labels.to_vec();
            labels.push(Arc::from(name));
            rec.labels = labels.into();
            rec.region.clear();
        }
    })
}

pub(crate) unsafe extern "system" fn cmd_end_debug_utils_label(cb: vk::CommandBuffer) {
    guard("vkCmdEndDebugUtilsLabelEXT", (), || {
        let Some(dev) = device_of(cb) else { return };
        if let Some(next) = dev.fns.cmd_end_debug_utils_label {
            // SAFETY: forwarded unchanged.
            unsafe { next(cb) };
        }
        if dev.marks.is_none() {
            return;
        }
        let mut state = dev.state();
        if let Some(rec) = state.recordings.get_mut(&cb.as_raw()) {
            let mut labels = rec.labels.to_vec();
            labels.pop();
            rec.labels = labels.into();
            rec.region.clear();
        }
    })
}

/// Notes a marked command of `cb` and returns its sequence number when its marker is to be
/// recorded right after it (`None`: not marked, or marked at the end of its render pass instance).
fn note(dev: &Device, cb: vk::CommandBuffer, command_kind: u32) -> Option<u64> {
    let writer = dev.marks.as_ref()?.writer;
    let mut state = dev.state();
    let sequence = state.next_sequence;
    let rec = state.recordings.get_mut(&cb.as_raw())?;
    let bound = if command_kind == kind::DISPATCH {
        rec.compute.clone()
    } else {
        rec.graphics.clone()
    };
    let entry = Entry {
        sequence,
        command_buffer: cb.as_raw(),
        index: rec.sequences.len() as u32,
        kind: command_kind,
        pipeline: bound.pipeline,
        pipeline_name: bound.name,
        ordinal: bound.ordinal,
        labels: rec.labels.clone(),
        sharing: 1,
    };
    rec.sequences.push(sequence);
    let deferred = writer == Writer::UpdateBuffer && rec.in_pass;
    if deferred {
        rec.pending.push(sequence);
    }
    state.next_sequence += 1;
    state.entries[(sequence % SLOTS) as usize] = Some(entry);
    (!deferred).then_some(sequence)
}

/// Records, into `cb` outside any render pass instance, the markers of `sequences` once every
/// earlier command has finished: a full barrier, `vkCmdUpdateBuffer` of the sequence numbers into
/// their slots (a call per run of consecutive slots), and a barrier that makes them visible to the
/// host.
fn record_update(dev: &Device, cb: vk::CommandBuffer, sequences: &[u64]) {
    let (Some(marks), Some(barrier), Some(update)) = (
        dev.marks.as_ref(),
        dev.fns.cmd_pipeline_barrier,
        dev.fns.cmd_update_buffer,
    ) else {
        return;
    };
    if sequences.is_empty() {
        return;
    }
    let before = vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
        .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE);
    let after = vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::HOST_READ);
    // SAFETY: `cb` is recording, outside a render pass instance (the callers: after a dispatch or
    // after the end of an instance); the buffer is ours, TRANSFER_DST, and every write lies in its
    // SLOTS words with 4-byte offsets and sizes of at most 65,536 bytes.
    unsafe {
        barrier(
            cb,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::PipelineStageFlags::TRANSFER,
            vk::DependencyFlags::empty(),
            1,
            &before,
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
        );
        let mut i = 0;
        while i < sequences.len() {
            let start = sequences[i] % SLOTS;
            let mut words = vec![sequences[i] as u32];
            while i + 1 < sequences.len()
                && sequences[i + 1] % SLOTS == start + words.len() as u64
                && words.len() < 16_384
            {
                i += 1;
                words.push(sequences[i] as u32);
            }
            update(
                cb,
                marks.buffer,
                start * 4,
                (words.len() * 4) as vk::DeviceSize,
                words.as_ptr().cast(),
            );
            i += 1;
        }
        barrier(
            cb,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            1,
            &after,
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
        );
    }
}

/// A render pass instance begins in `cb` (`suspending`: a dynamic rendering instance that will
/// be resumed).
fn pass_begun(cb: vk::CommandBuffer, suspending: bool) {
    let Some(dev) = device_of(cb) else { return };
    if dev.marks.is_none() {
        return;
    }
    let mut state = dev.state();
    if let Some(rec) = state.recordings.get_mut(&cb.as_raw()) {
        rec.in_pass = true;
        rec.suspending = suspending;
    }
}

/// A render pass instance ended in `cb`: with [`Writer::UpdateBuffer`], its draws get their
/// shared marker now.
fn pass_ended(cb: vk::CommandBuffer) {
    let Some(dev) = device_of(cb) else { return };
    if dev
        .marks
        .as_ref()
        .is_none_or(|m| m.writer != Writer::UpdateBuffer)
    {
        let mut state = dev.state();
        if let Some(rec) = state.recordings.get_mut(&cb.as_raw()) {
            rec.in_pass = false;
        }
        return;
    }
    let pending = {
        let mut state = dev.state();
        let Some(rec) = state.recordings.get_mut(&cb.as_raw()) else {
            return;
        };
        rec.in_pass = false;
        if rec.suspending {
            return; // marked at the end of the instance that resumes it
        }
        let pending = std::mem::take(&mut rec.pending);
        let sharing = pending.len() as u32;
        for &sequence in &pending {
            if let Some(entry) = state.entries[(sequence % SLOTS) as usize]
                .as_mut()
                .filter(|e| e.sequence == sequence)
            {
                entry.sharing = sharing;
            }
        }
        pending
    };
    record_update(&dev, cb, &pending);
}

macro_rules! pass_hook {
    (begin $name:ident, $what:literal, $first:ident, $second:ident, ($($arg:ident : $ty:ty),*), $suspending:expr) => {
        pub(crate) unsafe extern "system" fn $name(cb: vk::CommandBuffer, $($arg: $ty),*) {
            guard($what, (), || {
                let Some(dev) = device_of(cb) else { return };
                if let Some(next) = dev.fns.$first.or(dev.fns.$second) {
                    // SAFETY: forwarded unchanged.
                    unsafe { next(cb, $($arg),*) };
                }
                #[allow(clippy::redundant_closure_call)]
                pass_begun(cb, ($suspending)($($arg),*));
            })
        }
    };
    (end $name:ident, $what:literal, $first:ident, $second:ident, ($($arg:ident : $ty:ty),*)) => {
        pub(crate) unsafe extern "system" fn $name(cb: vk::CommandBuffer, $($arg: $ty),*) {
            guard($what, (), || {
                let Some(dev) = device_of(cb) else { return };
                if let Some(next) = dev.fns.$first.or(dev.fns.$second) {
                    // SAFETY: forwarded unchanged.
                    unsafe { next(cb, $($arg),*) };
                }
                pass_ended(cb);
            })
        }
    };
}

pass_hook!(begin cmd_begin_render_pass, "vkCmdBeginRenderPass", cmd_begin_render_pass, cmd_begin_render_pass,
    (p_begin: *const vk::RenderPassBeginInfo<'_>, contents: vk::SubpassContents), |_, _| false);
pass_hook!(begin cmd_begin_render_pass2, "vkCmdBeginRenderPass2", cmd_begin_render_pass2, cmd_begin_render_pass2_khr,
    (p_begin: *const vk::RenderPassBeginInfo<'_>, p_subpass: *const vk::SubpassBeginInfo<'_>), |_, _| false);
pass_hook!(begin cmd_begin_render_pass2_khr, "vkCmdBeginRenderPass2KHR", cmd_begin_render_pass2_khr, cmd_begin_render_pass2,
    (p_begin: *const vk::RenderPassBeginInfo<'_>, p_subpass: *const vk::SubpassBeginInfo<'_>), |_, _| false);
pass_hook!(end cmd_end_render_pass, "vkCmdEndRenderPass", cmd_end_render_pass, cmd_end_render_pass, ());
pass_hook!(end cmd_end_render_pass2, "vkCmdEndRenderPass2", cmd_end_render_pass2, cmd_end_render_pass2_khr,
    (p_end: *const vk::SubpassEndInfo<'_>));
pass_hook!(end cmd_end_render_pass2_khr, "vkCmdEndRenderPass2KHR", cmd_end_render_pass2_khr, cmd_end_render_pass2,
    (p_end: *const vk::SubpassEndInfo<'_>));

/// Whether a dynamic rendering instance is begun suspending.
fn suspending(p_info: *const vk::RenderingInfo<'_>) -> bool {
    // SAFETY: a valid rendering info per the spec (null tolerated).
    unsafe { p_info.as_ref() }.is_some_and(|i| i.flags.contains(vk::RenderingFlags::SUSPENDING))
}

pass_hook!(begin cmd_begin_rendering, "vkCmdBeginRendering", cmd_begin_rendering, cmd_begin_rendering_khr,
    (p_info: *const vk::RenderingInfo<'_>), suspending);
pass_hook!(begin cmd_begin_rendering_khr, "vkCmdBeginRenderingKHR", cmd_begin_rendering_khr, cmd_begin_rendering,
    (p_info: *const vk::RenderingInfo<'_>), suspending);
pass_hook!(end cmd_end_rendering, "vkCmdEndRendering", cmd_end_rendering, cmd_end_rendering_khr, ());
pass_hook!(end cmd_end_rendering_khr, "vkCmdEndRenderingKHR", cmd_end_rendering_khr, cmd_end_rendering, ());

/// Records the marker of command `sequence` into `cb`, right after the command.
fn mark(dev: &Device, cb: vk::CommandBuffer, sequence: u64) {
    let Some(marks) = &dev.marks else { return };
    match marks.writer {
        Writer::Amd => {
            if let Some(write) = dev.fns.cmd_write_buffer_marker_amd {
                // SAFETY: VK_AMD_buffer_marker is enabled (the layer made sure); our TRANSFER_DST
                // buffer of SLOTS words; `cb` is recording (the application just recorded into it).
                unsafe {
                    write(
                        cb,
                        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                        marks.buffer,
                        (sequence % SLOTS) * 4,
                        sequence as u32,
                    )
                };
            }
        }
        // Outside a render pass instance (`note` defers the draws inside one).
        Writer::UpdateBuffer => record_update(dev, cb, &[sequence]),
    }
}

/// Declares a hooked draw or dispatch: forwards it, then marks it.
macro_rules! marked {
    ($name:ident, $field:ident, $what:literal, $kind:expr, ($($arg:ident : $ty:ty),*)) => {
        pub(crate) unsafe extern "system" fn $name(cb: vk::CommandBuffer, $($arg: $ty),*) {
            guard($what, (), || {
                let Some(dev) = device_of(cb) else { return };
                let sequence = note(&dev, cb, $kind);
                if let Some(next) = dev.fns.$field {
                    // SAFETY: forwarded unchanged.
                    unsafe { next(cb, $($arg),*) };
                }
                if let Some(sequence) = sequence {
                    mark(&dev, cb, sequence);
                }
            })
        }
    };
}

marked!(cmd_draw, cmd_draw, "vkCmdDraw", kind::DRAW,
    (vertex_count: u32, instance_count: u32, first_vertex: u32, first_instance: u32));
marked!(cmd_draw_indexed, cmd_draw_indexed, "vkCmdDrawIndexed", kind::DRAW,
    (index_count: u32, instance_count: u32, first_index: u32, vertex_offset: i32, first_instance: u32));
marked!(cmd_draw_indirect, cmd_draw_indirect, "vkCmdDrawIndirect", kind::DRAW,
    (buffer: vk::Buffer, offset: vk::DeviceSize, draw_count: u32, stride: u32));
marked!(cmd_draw_indexed_indirect, cmd_draw_indexed_indirect, "vkCmdDrawIndexedIndirect", kind::DRAW,
    (buffer: vk::Buffer, offset: vk::DeviceSize, draw_count: u32, stride: u32));
marked!(cmd_draw_indirect_count, cmd_draw_indirect_count, "vkCmdDrawIndirectCount", kind::DRAW,
    (buffer: vk::Buffer, offset: vk::DeviceSize, count_buffer: vk::Buffer, count_offset: vk::DeviceSize, max_draw_count: u32, stride: u32));
marked!(cmd_draw_indirect_count_khr, cmd_draw_indirect_count_khr, "vkCmdDrawIndirectCountKHR", kind::DRAW,
    (buffer: vk::Buffer, offset: vk::DeviceSize, count_buffer: vk::Buffer, count_offset: vk::DeviceSize, max_draw_count: u32, stride: u32));
marked!(cmd_draw_indexed_indirect_count, cmd_draw_indexed_indirect_count, "vkCmdDrawIndexedIndirectCount", kind::DRAW,
    (buffer: vk::Buffer, offset: vk::DeviceSize, count_buffer: vk::Buffer, count_offset: vk::DeviceSize, max_draw_count: u32, stride: u32));
marked!(cmd_draw_indexed_indirect_count_khr, cmd_draw_indexed_indirect_count_khr, "vkCmdDrawIndexedIndirectCountKHR", kind::DRAW,
    (buffer: vk::Buffer, offset: vk::DeviceSize, count_buffer: vk::Buffer, count_offset: vk::DeviceSize, max_draw_count: u32, stride: u32));
marked!(cmd_dispatch, cmd_dispatch, "vkCmdDispatch", kind::DISPATCH,
    (x: u32, y: u32, z: u32));
marked!(cmd_dispatch_indirect, cmd_dispatch_indirect, "vkCmdDispatchIndirect", kind::DISPATCH,
    (buffer: vk::Buffer, offset: vk::DeviceSize));
marked!(cmd_dispatch_base, cmd_dispatch_base, "vkCmdDispatchBase", kind::DISPATCH,
    (base_x: u32, base_y: u32, base_z: u32, x: u32, y: u32, z: u32));
