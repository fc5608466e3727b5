//! What the layer records into the application's command buffers.
//!
//! `VK_AMD_buffer_marker` where the driver lacks it: `vkCmdWriteBufferMarkerAMD` becomes a barrier
//! from the given stage, a 4-byte `vkCmdFillBuffer` of the marker value, and a barrier that makes the
//! write visible to the host, so a host-coherent mapped buffer shows the marker once the work before
//! it has executed (the emulation of a breadcrumb that a GPU writes as it goes).
//!
//! Commands the layer adds must land where they are valid, so `state::commands::CommandTracker` follows each command
//! buffer's pool (queue family), level and render pass state from the pool, allocate, begin/end and
//! render pass hooks below. The hooks are only installed on devices where the layer records anything
//! (`DeviceData::tracks_commands`); `vkCmdBindPipeline` and `vkDestroyPipeline` only under
//! `hang-in-pipeline` ([`tracks_pipelines`]).

use ash::vk::{self, Handle};

use crate::config::{hang_target, Scenario};
use crate::dispatch::{DeviceData, DeviceFns};
use crate::fault;
use crate::hook_steps::{call_next, forward, on_device, OUT_OF_MEMORY};
use crate::log::log_line;
use crate::state::fault::WaitInjection;

/// The layer's `vkCmdWriteBufferMarkerAMD`.
///
/// The emulation is only valid outside render pass instances (`vkCmdFillBuffer` is a transfer
/// command), and `dstBuffer` needs `VK_BUFFER_USAGE_TRANSFER_DST_BIT`.
pub(crate) unsafe extern "system" fn cmd_write_buffer_marker_amd(
    command_buffer: vk::CommandBuffer,
    pipeline_stage: vk::PipelineStageFlags,
    dst_buffer: vk::Buffer,
    dst_offset: vk::DeviceSize,
    marker: u32,
) {
    on_device("vkCmdWriteBufferMarkerAMD", (), command_buffer, |dev| {
        if !dev.extensions.provided.buffer_marker {
            // The driver has the extension itself (reached through vkGetInstanceProcAddr).
            if let Some(native) = dev.fns.cmd_write_buffer_marker_amd {
                // SAFETY: forwarded unchanged to the driver's own implementation.
                unsafe {
                    native(
                        command_buffer,
                        pipeline_stage,
                        dst_buffer,
                        dst_offset,
                        marker,
                    )
                };
            }
            return;
        }
        let (Some(barrier), Some(fill)) = (dev.fns.cmd_pipeline_barrier, dev.fns.cmd_fill_buffer)
        else {
            return;
        };
        {
            let mut st = dev.lock();
            if st.commands.in_pass(command_buffer.as_raw()) {
                // vkCmdFillBuffer is invalid there; recording it could crash the driver.
                if !std::mem::replace(&mut st.commands.marker_in_pass_warned, true) {
                    log_line(
                        "vkCmdWriteBufferMarkerAMD inside a render pass instance: the emulation \
                         (vkCmdFillBuffer) cannot write there; such markers are skipped",
                    );
                }
                return;
            }
        }
        // BOTTOM_OF_PIPE as a first scope waits for nothing's writes; "everything before" is what a
        // marker at the bottom of the pipe means.
        let src_stage = if pipeline_stage.is_empty()
            || pipeline_stage == vk::PipelineStageFlags::BOTTOM_OF_PIPE
        {
            vk::PipelineStageFlags::ALL_COMMANDS
        } else {
            pipeline_stage
        };
        let before = vk::MemoryBarrier {
            src_access_mask: vk::AccessFlags::MEMORY_WRITE,
            dst_access_mask: vk::AccessFlags::TRANSFER_WRITE,
            ..Default::default()
        };
        let after = vk::MemoryBarrier {
            src_access_mask: vk::AccessFlags::TRANSFER_WRITE,
            dst_access_mask: vk::AccessFlags::HOST_READ,
            ..Default::default()
        };
        // SAFETY: `command_buffer` is in the recording state outside a render pass (the extension's
        // contract as the layer documents it); the barriers are locals that outlive the calls;
        // `dst_buffer`/`dst_offset` are the application's, valid for a 4-byte write per the
        // extension's rules (offset a multiple of 4, inside the buffer).
        unsafe {
            barrier(
                command_buffer,
                src_stage,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                1,
                &before,
                0,
                std::ptr::null(),
                0,
                std::ptr::null(),
            );
            fill(command_buffer, dst_buffer, dst_offset, 4, marker);
            barrier(
                command_buffer,
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
    })
}

// ---------------------------------------------------------------------------------------------
// Tracking hooks. Each calls down unchanged and updates the tracker; without `tracks_commands` (a
// device whose entry points came through vkGetInstanceProcAddr) it only calls down.

pub(crate) unsafe extern "system" fn create_command_pool(
    device: vk::Device,
    p_info: *const vk::CommandPoolCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_pool: *mut vk::CommandPool,
) -> vk::Result {
    let next = |f: &DeviceFns| f.create_command_pool;
    forward(
        "vkCreateCommandPool",
        OUT_OF_MEMORY,
        device,
        next,
        |dev, next| {
            // SAFETY: forwarded unchanged.
            let r = unsafe { next(device, p_info, p_allocator, p_pool) };
            if r == vk::Result::SUCCESS && dev.tracks_commands {
                // SAFETY: success: valid info and output handle.
                let (pool, family) = unsafe { ((*p_pool).as_raw(), (*p_info).queue_family_index) };
                dev.lock().commands.create_pool(pool, family);
            }
            r
        },
    )
}

pub(crate) unsafe extern "system" fn destroy_command_pool(
    device: vk::Device,
    pool: vk::CommandPool,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    on_device("vkDestroyCommandPool", (), device, |dev| {
        if dev.tracks_commands {
            let gone = dev.lock().commands.destroy_pool(pool.as_raw());
            forget_buffers(dev, &gone);
        }
        // SAFETY: forwarded unchanged.
        call_next(dev.fns.destroy_command_pool, |next| unsafe {
            next(device, pool, p_allocator)
        });
    })
}

pub(crate) unsafe extern "system" fn reset_command_pool(
    device: vk::Device,
    pool: vk::CommandPool,
    flags: vk::CommandPoolResetFlags,
) -> vk::Result {
    let next = |f: &DeviceFns| f.reset_command_pool;
    forward(
        "vkResetCommandPool",
        OUT_OF_MEMORY,
        device,
        next,
        |dev, next| {
            // SAFETY: forwarded unchanged.
            let r = unsafe { next(device, pool, flags) };
            if r == vk::Result::SUCCESS && dev.tracks_commands {
                let reset = {
                    let mut st = dev.lock();
                    let reset = st.commands.pool_buffers(pool.as_raw());
                    for &cb in &reset {
                        st.commands.begin(cb, false);
                    }
                    reset
                };
                forget_buffers(dev, &reset);
            }
            r
        },
    )
}

pub(crate) unsafe extern "system" fn allocate_command_buffers(
    device: vk::Device,
    p_info: *const vk::CommandBufferAllocateInfo<'_>,
    p_buffers: *mut vk::CommandBuffer,
) -> vk::Result {
    let next = |f: &DeviceFns| f.allocate_command_buffers;
    forward(
        "vkAllocateCommandBuffers",
        OUT_OF_MEMORY,
        device,
        next,
        |dev, next| {
            // SAFETY: forwarded unchanged.
            let r = unsafe { next(device, p_info, p_buffers) };
            if r == vk::Result::SUCCESS && dev.tracks_commands {
                // SAFETY: success: valid info; `p_buffers` holds `commandBufferCount` handles.
                let (pool, primary, buffers) = unsafe {
                    let info = &*p_info;
                    let buffers: Vec<u64> =
                        std::slice::from_raw_parts(p_buffers, info.command_buffer_count as usize)
                            .iter()
                            .map(|b| b.as_raw())
                            .collect();
                    (
                        info.command_pool.as_raw(),
                        info.level == vk::CommandBufferLevel::PRIMARY,
                        buffers,
                    )
                };
                dev.lock().commands.allocate(pool, primary, &buffers);
            }
            r
        },
    )
}

pub(crate) unsafe extern "system" fn free_command_buffers(
    device: vk::Device,
    pool: vk::CommandPool,
    count: u32,
    p_buffers: *const vk::CommandBuffer,
) {
    on_device("vkFreeCommandBuffers", (), device, |dev| {
        if dev.tracks_commands && !p_buffers.is_null() {
            // SAFETY: `p_buffers` holds `count` handles (null ones are ignored by the tracker).
            let buffers: Vec<u64> =
                unsafe { std::slice::from_raw_parts(p_buffers, count as usize) }
                    .iter()
                    .map(|b| b.as_raw())
                    .collect();
            dev.lock().commands.free(&buffers);
            forget_buffers(dev, &buffers);
        }
        // SAFETY: forwarded unchanged.
        call_next(dev.fns.free_command_buffers, |next| unsafe {
            next(device, pool, count, p_buffers)
        });
    })
}

pub(crate) unsafe extern "system" fn begin_command_buffer(
    cb: vk::CommandBuffer,
    p_info: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    let next = |f: &DeviceFns| f.begin_command_buffer;
    forward(
        "vkBeginCommandBuffer",
        OUT_OF_MEMORY,
        cb,
        next,
        |dev, next| {
            // SAFETY: forwarded unchanged.
            let r = unsafe { next(cb, p_info) };
            if r == vk::Result::SUCCESS && dev.tracks_commands {
                // SAFETY: a valid begin info per the spec.
                let flags = unsafe { p_info.as_ref() }
                    .map(|i| i.flags)
                    .unwrap_or_default();
                let continues = flags.contains(vk::CommandBufferUsageFlags::RENDER_PASS_CONTINUE);
                dev.lock().commands.begin(cb.as_raw(), continues);
                forget_buffers(dev, &[cb.as_raw()]);
            }
            r
        },
    )
}

pub(crate) unsafe extern "system" fn end_command_buffer(cb: vk::CommandBuffer) -> vk::Result {
    let next = |f: &DeviceFns| f.end_command_buffer;
    forward(
        "vkEndCommandBuffer",
        OUT_OF_MEMORY,
        cb,
        next,
        |dev, next| {
            if dev.tracks_commands {
                if let Some(event) = claim_stall(dev, cb.as_raw()) {
                    record_wait(dev, cb, event);
                }
            }
            // SAFETY: forwarded unchanged.
            unsafe { next(cb) }
        },
    )
}

pub(crate) unsafe extern "system" fn reset_command_buffer(
    cb: vk::CommandBuffer,
    flags: vk::CommandBufferResetFlags,
) -> vk::Result {
    let next = |f: &DeviceFns| f.reset_command_buffer;
    forward(
        "vkResetCommandBuffer",
        OUT_OF_MEMORY,
        cb,
        next,
        |dev, next| {
            // SAFETY: forwarded unchanged.
            let r = unsafe { next(cb, flags) };
            if r == vk::Result::SUCCESS && dev.tracks_commands {
                dev.lock().commands.begin(cb.as_raw(), false);
                forget_buffers(dev, &[cb.as_raw()]);
            }
            r
        },
    )
}

/// Command buffers whose recorded content is gone (freed, reset, re-begun): a drill wait recorded
/// into one of them and never submitted will not run, so the next insertion point gets it.
fn forget_buffers(dev: &DeviceData, buffers: &[u64]) {
    let mut st = dev.lock();
    if let WaitInjection::Recorded(cb) = st.fault.wait {
        if buffers.contains(&cb) {
            st.fault.wait = WaitInjection::Armed;
            log_line(&format!(
                "command buffer 0x{cb:x} holding the injected wait was reset or freed before it was \
                 submitted; the wait goes into the next one"
            ));
        }
    }
}

/// Whether a family can run `vkCmdWaitEvents` (graphics or compute; not transfer-only).
fn family_can_wait(dev: &DeviceData, family: u32) -> bool {
    dev.queue_families
        .get(family as usize)
        .is_some_and(|f| f.intersects(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE))
}

/// `stall`: the first primary command buffer ended after the threshold gets the wait. Returns the
/// event to wait on and marks the wait recorded in `cb`.
fn claim_stall(dev: &DeviceData, cb: u64) -> Option<vk::Event> {
    let config = &dev.instance.config;
    if !matches!(config.scenario, Some(Scenario::Stall(_))) || dev.fns.cmd_wait_events.is_none() {
        return None;
    }
    let mut st = dev.lock();
    if st.fault.wait != WaitInjection::Armed || fault::submissions(&st) < config.after {
        return None;
    }
    // A primary ends outside any render pass; the check also skips secondaries and unknown buffers.
    let family = st.commands.insertable(cb)?;
    if !family_can_wait(dev, family) {
        return None;
    }
    let event = (*dev.event_slot())?;
    st.fault.wait = WaitInjection::Recorded(cb);
    Some(event)
}

/// Records `vkCmdWaitEvents` on the drill event (set from the host: srcStageMask HOST) that holds
/// every later command of the submission (dstStageMask ALL_COMMANDS).
fn record_wait(dev: &DeviceData, cb: vk::CommandBuffer, event: vk::Event) {
    let Some(wait) = dev.fns.cmd_wait_events else {
        return;
    };
    // SAFETY: `cb` is recording, outside any render pass, in a family that supports the command
    // (checked by the caller); `event` is the layer's live event of this device.
    unsafe {
        wait(
            cb,
            1,
            &event,
            vk::PipelineStageFlags::HOST,
            vk::PipelineStageFlags::ALL_COMMANDS,
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
        )
    };
}

fn pass_begun(dev: &DeviceData, cb: vk::CommandBuffer, suspending: bool) {
    if dev.tracks_commands {
        dev.lock().commands.begin_pass(cb.as_raw(), suspending);
    }
}

fn pass_ended(dev: &DeviceData, cb: vk::CommandBuffer) {
    if !dev.tracks_commands {
        return;
    }
    let event = {
        let mut st = dev.lock();
        st.commands.end_pass(cb.as_raw());
        if !st.commands.take_hang_pending(cb.as_raw()) || st.fault.wait != WaitInjection::Armed {
            return;
        }
        let Some(event) = *dev.event_slot() else {
            return;
        };
        st.fault.wait = WaitInjection::Recorded(cb.as_raw());
        event
    };
    record_wait(dev, cb, event);
    log_hang(dev, cb, true);
}

/// The `injected hang ...` line of `hang-in-pass` / `hang-in-pipeline`; `deferred`: the wait went in
/// at the end of the render pass instance that the label began (or the pipeline was bound) in.
fn log_hang(dev: &DeviceData, cb: vk::CommandBuffer, deferred: bool) {
    let (place, began, point) = match &dev.instance.config.scenario {
        Some(Scenario::HangInPass(arg)) => (
            format!("in pass \"{}\"", hang_target(arg).0),
            "the label began",
            "the label",
        ),
        Some(Scenario::HangInPipeline(arg)) => (
            format!("at pipeline \"{}\"", hang_target(arg).0),
            "the pipeline was bound",
            "the bind",
        ),
        _ => return,
    };
    let deferred = if deferred {
        format!(
            " ({began} inside a render pass instance: the wait follows the end of that instance, \
             the first valid point after {point})"
        )
    } else {
        String::new()
    };
    log_line(&format!(
        "injected hang {place}: command buffer 0x{:x} waits on an event that is never set{deferred}",
        cb.as_raw()
    ));
}

/// What `hang-in-pass` / `hang-in-pipeline` does at a match.
enum HangClaim {
    /// Record the wait now, on this event.
    Now(vk::Event),
    /// Inside a render pass instance: recorded when the instance ends.
    Deferred,
}

/// Where a hang scenario may match.
#[derive(Clone, Copy)]
enum HangSite<'a> {
    /// `vkCmdBeginDebugUtilsLabelEXT` with this label name (`hang-in-pass`).
    Label(&'a [u8]),
    /// `vkCmdBindPipeline` of this pipeline (`hang-in-pipeline`).
    Pipeline(u64),
}

/// `hang-in-pass`: the first (or `#n`-th) matching label begun after the threshold in a primary
/// command buffer of a graphics/compute family gets the wait; `hang-in-pipeline`: the first bind of
/// the named pipeline in the first (or `#n`-th) such command buffer that binds it after the
/// threshold. Marked recorded here when it goes in at once.
fn claim_hang(dev: &DeviceData, cb: u64, site: HangSite<'_>) -> Option<HangClaim> {
    let config = &dev.instance.config;
    let occurrence = match (&config.scenario, site) {
        (Some(Scenario::HangInPass(arg)), HangSite::Label(name)) => {
            let (want, occurrence) = hang_target(arg);
            if name != want.as_bytes() {
                return None;
            }
            occurrence
        }
        (Some(Scenario::HangInPipeline(arg)), HangSite::Pipeline(_)) => hang_target(arg).1,
        _ => return None,
    };
    // Nothing to record the wait with.
    dev.fns.cmd_wait_events?;
    let mut st = dev.lock();
    if let HangSite::Pipeline(pipeline) = site {
        if !st.commands.is_hang_pipeline(pipeline) {
            return None;
        }
    }
    if st.fault.wait != WaitInjection::Armed || fault::submissions(&st) < config.after {
        return None;
    }
    let family = st.commands.primary_family(cb)?;
    if !family_can_wait(dev, family) {
        return None;
    }
    // Each label counts; a command buffer binding the pipeline counts once, however many batches of
    // draws (or dispatches) bind it again.
    let counts = match site {
        HangSite::Label(_) => true,
        HangSite::Pipeline(_) => st.commands.first_hang_pipeline_bind(cb),
    };
    if counts {
        st.fault.hang_matches_seen += 1;
    }
    if st.fault.hang_matches_seen < occurrence {
        return None;
    }
    if st.commands.insertable(cb).is_none() {
        st.commands.defer_hang(cb);
        return Some(HangClaim::Deferred);
    }
    let event = (*dev.event_slot())?;
    st.fault.wait = WaitInjection::Recorded(cb);
    Some(HangClaim::Now(event))
}

pub(crate) unsafe extern "system" fn cmd_begin_debug_utils_label(
    cb: vk::CommandBuffer,
    p_label: *const vk::DebugUtilsLabelEXT<'_>,
) {
    on_device("vkCmdBeginDebugUtilsLabelEXT", (), cb, |dev| {
        // SAFETY: forwarded unchanged.
        call_next(dev.fns.cmd_begin_debug_utils_label, |next| unsafe {
            next(cb, p_label)
        });
        if !dev.tracks_commands {
            return;
        }
        // SAFETY: a valid label info whose name is a C string (null tolerated).
        let Some(name) = (unsafe { p_label.as_ref() })
            .and_then(|l| unsafe { crate::dispatch::c_str(l.p_label_name) })
        else {
            return;
        };
        let site = HangSite::Label(name.to_bytes());
        if let Some(HangClaim::Now(event)) = claim_hang(dev, cb.as_raw(), site) {
            // Right after the label began: the GPU stops inside the labelled region.
            record_wait(dev, cb, event);
            log_hang(dev, cb, false);
        }
    })
}

/// `hang-in-pipeline:<label>[#n]`: the pipeline label, when the layer follows pipelines on this
/// device (`None` otherwise: its pipeline hooks then only call down, and are not even returned from
/// `vkGetDeviceProcAddr`).
pub(crate) fn hang_pipeline_label(dev: &DeviceData) -> Option<&str> {
    match &dev.instance.config.scenario {
        Some(Scenario::HangInPipeline(arg)) if dev.tracks_commands => Some(hang_target(arg).0),
        _ => None,
    }
}

/// Whether `vkCmdBindPipeline` and `vkDestroyPipeline` do anything on this device (see
/// [`hang_pipeline_label`]).
pub(crate) fn tracks_pipelines(dev: &DeviceData) -> bool {
    hang_pipeline_label(dev).is_some()
}

pub(crate) unsafe extern "system" fn cmd_bind_pipeline(
    cb: vk::CommandBuffer,
    bind_point: vk::PipelineBindPoint,
    pipeline: vk::Pipeline,
) {
    on_device("vkCmdBindPipeline", (), cb, |dev| {
        // SAFETY: forwarded unchanged.
        call_next(dev.fns.cmd_bind_pipeline, |next| unsafe {
            next(cb, bind_point, pipeline)
        });
        if !tracks_pipelines(dev) {
            return;
        }
        match claim_hang(dev, cb.as_raw(), HangSite::Pipeline(pipeline.as_raw())) {
            Some(HangClaim::Now(event)) => {
                // Right after the bind, outside any render pass instance: the GPU stops before the
                // first dispatch (or draw) with this pipeline.
                record_wait(dev, cb, event);
                log_hang(dev, cb, false);
            }
            // Inside a render pass instance: `pass_ended` records (and logs) it.
            Some(HangClaim::Deferred) | None => {}
        }
    })
}

/// Forgets the pipeline's name before the driver frees the handle, which it may then hand to a new
/// pipeline of another name or none (wgpu leaves unlabelled pipelines unnamed): a stale handle would
/// hang the GPU at the wrong pipeline.
pub(crate) unsafe extern "system" fn destroy_pipeline(
    device: vk::Device,
    pipeline: vk::Pipeline,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    on_device("vkDestroyPipeline", (), device, |dev| {
        if tracks_pipelines(dev) {
            dev.lock().commands.forget_pipeline(pipeline.as_raw());
        }
        // SAFETY: forwarded unchanged.
        call_next(dev.fns.destroy_pipeline, |next| unsafe {
            next(device, pipeline, p_allocator)
        });
    })
}

// Render pass instances: each hook calls down (the `2` and `Rendering` ones through their `KHR`
// alias where the driver lacks the core name, and the other way round) and marks where the
// command buffer stands.

pub(crate) unsafe extern "system" fn cmd_begin_render_pass(
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    contents: vk::SubpassContents,
) {
    on_device("vkCmdBeginRenderPass", (), cb, |dev| {
        // SAFETY: forwarded unchanged.
        call_next(dev.fns.cmd_begin_render_pass, |next| unsafe {
            next(cb, p_begin, contents)
        });
        pass_begun(dev, cb, false);
    })
}

pub(crate) unsafe extern "system" fn cmd_begin_render_pass2(
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    p_subpass: *const vk::SubpassBeginInfo<'_>,
) {
    on_device("vkCmdBeginRenderPass2", (), cb, |dev| {
        let f = &dev.fns;
        let next = f.cmd_begin_render_pass2.or(f.cmd_begin_render_pass2_khr);
        // SAFETY: forwarded unchanged.
        call_next(next, |next| unsafe { next(cb, p_begin, p_subpass) });
        pass_begun(dev, cb, false);
    })
}

pub(crate) unsafe extern "system" fn cmd_begin_render_pass2_khr(
    cb: vk::CommandBuffer,
    p_begin: *const vk::RenderPassBeginInfo<'_>,
    p_subpass: *const vk::SubpassBeginInfo<'_>,
) {
    on_device("vkCmdBeginRenderPass2KHR", (), cb, |dev| {
        let f = &dev.fns;
        let next = f.cmd_begin_render_pass2_khr.or(f.cmd_begin_render_pass2);
        // SAFETY: forwarded unchanged.
        call_next(next, |next| unsafe { next(cb, p_begin, p_subpass) });
        pass_begun(dev, cb, false);
    })
}

pub(crate) unsafe extern "system" fn cmd_end_render_pass(cb: vk::CommandBuffer) {
    on_device("vkCmdEndRenderPass", (), cb, |dev| {
        // SAFETY: forwarded unchanged.
        call_next(dev.fns.cmd_end_render_pass, |next| unsafe { next(cb) });
        pass_ended(dev, cb);
    })
}

pub(crate) unsafe extern "system" fn cmd_end_render_pass2(
    cb: vk::CommandBuffer,
    p_end: *const vk::SubpassEndInfo<'_>,
) {
    on_device("vkCmdEndRenderPass2", (), cb, |dev| {
        let f = &dev.fns;
        let next = f.cmd_end_render_pass2.or(f.cmd_end_render_pass2_khr);
        // SAFETY: forwarded unchanged.
        call_next(next, |next| unsafe { next(cb, p_end) });
        pass_ended(dev, cb);
    })
}

pub(crate) unsafe extern "system" fn cmd_end_render_pass2_khr(
    cb: vk::CommandBuffer,
    p_end: *const vk::SubpassEndInfo<'_>,
) {
    on_device("vkCmdEndRenderPass2KHR", (), cb, |dev| {
        let f = &dev.fns;
        let next = f.cmd_end_render_pass2_khr.or(f.cmd_end_render_pass2);
        // SAFETY: forwarded unchanged.
        call_next(next, |next| unsafe { next(cb, p_end) });
        pass_ended(dev, cb);
    })
}

/// `vkCmdBeginRendering[KHR]` with the entry point `next`: a suspending instance is marked so.
fn begin_rendering(
    dev: &DeviceData,
    next: Option<vk::PFN_vkCmdBeginRendering>,
    cb: vk::CommandBuffer,
    p_info: *const vk::RenderingInfo<'_>,
) {
    // SAFETY: forwarded unchanged.
    call_next(next, |next| unsafe { next(cb, p_info) });
    // SAFETY: a valid rendering info per the spec.
    let flags = unsafe { p_info.as_ref() }
        .map(|i| i.flags)
        .unwrap_or_default();
    pass_begun(dev, cb, flags.contains(vk::RenderingFlags::SUSPENDING));
}

pub(crate) unsafe extern "system" fn cmd_begin_rendering(
    cb: vk::CommandBuffer,
    p_info: *const vk::RenderingInfo<'_>,
) {
    on_device("vkCmdBeginRendering", (), cb, |dev| {
        let f = &dev.fns;
        let next = f.cmd_begin_rendering.or(f.cmd_begin_rendering_khr);
        begin_rendering(dev, next, cb, p_info);
    })
}

pub(crate) unsafe extern "system" fn cmd_begin_rendering_khr(
    cb: vk::CommandBuffer,
    p_info: *const vk::RenderingInfo<'_>,
) {
    on_device("vkCmdBeginRenderingKHR", (), cb, |dev| {
        let f = &dev.fns;
        let next = f.cmd_begin_rendering_khr.or(f.cmd_begin_rendering);
        begin_rendering(dev, next, cb, p_info);
    })
}

pub(crate) unsafe extern "system" fn cmd_end_rendering(cb: vk::CommandBuffer) {
    on_device("vkCmdEndRendering", (), cb, |dev| {
        let f = &dev.fns;
        let next = f.cmd_end_rendering.or(f.cmd_end_rendering_khr);
        // SAFETY: forwarded unchanged.
        call_next(next, |next| unsafe { next(cb) });
        pass_ended(dev, cb);
    })
}

pub(crate) unsafe extern "system" fn cmd_end_rendering_khr(cb: vk::CommandBuffer) {
    on_device("vkCmdEndRenderingKHR", (), cb, |dev| {
        let f = &dev.fns;
        let next = f.cmd_end_rendering_khr.or(f.cmd_end_rendering);
        // SAFETY: forwarded unchanged.
        call_next(next, |next| unsafe { next(cb) });
        pass_ended(dev, cb);
    })
}
