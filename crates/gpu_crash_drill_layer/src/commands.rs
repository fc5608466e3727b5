//! What the layer records into the application's command buffers.
//!
//! `VK_AMD_buffer_marker` where the driver lacks it: `vkCmdWriteBufferMarkerAMD` becomes a barrier
//! from the given stage, a 4-byte `vkCmdFillBuffer` of the marker value, and a barrier that makes the
//! write visible to the host, so a host-coherent mapped buffer shows the marker once the work before
//! it has executed (the emulation of a breadcrumb that a GPU writes as it goes).

use ash::vk;

use crate::device::dev_of;
use crate::guard;

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
    guard("vkCmdWriteBufferMarkerAMD", (), || {
        let Some(dev) = dev_of(command_buffer) else {
            return;
        };
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
