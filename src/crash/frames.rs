//! Render-world systems that keep the device's GPU ledger: when a frame starts, when its work is
//! submitted, and a marker the GPU writes once the frame's work is done (read by the watchdog).
//!
//! From the frame's "submitting" stamp to the submit of its completion marker the frame counts as
//! pending GPU work, so nothing in between may wait for the CPU: both ends are exclusive systems,
//! which run on the render thread itself. A parallel system waits for a thread of Bevy's compute task
//! pool, which both worlds share (one thread on a 2-core machine): a game's system that blocks there
//! (a synchronous load) left the frame stamped and its marker unsubmitted for the whole pause, and the
//! watchdog reported the pause as a GPU hang (issue 32, item 10).

use std::time::Instant;

use bevy::prelude::*;
use bevy::render::renderer::{RenderDevice, RenderQueue};

use super::CrashHandling;
use crate::vulkan::markers::{raw_command_buffer, MarkerStage, COMPLETED_WORD};

/// Render world, right before the frame's first submit: starts the frame in the device's ledger.
pub(crate) fn begin_gpu_frame(crash: Res<CrashHandling>) {
    if let Some(session) = crash.sessions.current() {
        if let Some(timeline) = &session.timeline {
            timeline.begin_frame(crash.reporter.ring_position());
        }
    }
}

/// Render graph, right before the frame's work is submitted: from here on the frame is pending on
/// the GPU. Counted before the submit call, because a driver whose queue is stuck may block inside
/// `vkQueueSubmit` (lavapipe does), and a frame stuck there is exactly a frame the GPU has not done.
/// Exclusive: see the module docs.
pub(crate) fn mark_frame_submitting(world: &mut World) {
    let crash = world.resource::<CrashHandling>();
    let Some(session) = crash.sessions.current() else {
        return;
    };
    if let Some(timeline) = &session.timeline {
        timeline.current_frame_submitting(crash.reporter.ring_position(), Instant::now());
    }
}

/// Render graph, right after the frame's work is submitted and before Bevy presents: submits a command
/// buffer of our own that writes the frame number once every earlier command on the queue has
/// finished. Our own submission, so the completion word is written whatever else the frame did or did
/// not submit. Before present, so whatever blocks the render thread later in the frame (a present
/// waiting for vsync in a hidden window, a Cleanup-time system doing file I/O, a debugger) is never
/// counted as the GPU not finishing; work submitted later in the frame (screenshots, the app's own
/// Cleanup-time submissions) is covered by the next frame's marker, which the GPU writes after it.
/// Exclusive: see the module docs.
pub(crate) fn submit_frame_end(world: &mut World, mut ended: Local<(u32, u64)>) {
    let device = world.resource::<RenderDevice>();
    let queue = world.resource::<RenderQueue>();
    let crash = world.resource::<CrashHandling>();
    let Some(session) = crash.sessions.current() else {
        return;
    };
    let Some(timeline) = &session.timeline else {
        return;
    };
    let Some(frame) = timeline.current_frame() else {
        return;
    };
    if session.is_lost() || *ended == (session.generation, frame) {
        return;
    }
    *ended = (session.generation, frame);
    // A frame without a camera never ended its pre-camera phase: it ends with the frame.
    let pre_camera_end = timeline.close_breadcrumb(crate::breadcrumbs::PRE_CAMERA_LABEL);
    let frame_end = timeline.close_breadcrumb(crate::breadcrumbs::FRAME_LABEL);
    let markers = timeline.markers();
    let buffer = raw_command_buffer(device.wgpu_device(), |command_buffer| {
        // SAFETY: a fresh recording command buffer of this device, outside any render pass; the
        // words come from the timeline's layout.
        unsafe {
            for (_, word) in [pre_camera_end, frame_end].into_iter().flatten() {
                markers.record_marker(command_buffer, MarkerStage::Finished, word, frame as u32);
            }
            markers.record_after_all_work(command_buffer, COMPLETED_WORD, frame as u32);
        }
    });
    let Some(buffer) = buffer else {
        return;
    };
    timeline.count_marker_command_buffer();
    timeline.end_frame();
    // A frame with no render-graph submit (no camera) is pending from here; counted before the call
    // for the reason given at `mark_frame_submitting`.
    timeline.current_frame_submitting(crash.reporter.ring_position(), Instant::now());
    queue.submit([buffer]);
}
