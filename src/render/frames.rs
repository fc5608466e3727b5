//! Render-world systems that keep the device's GPU ledger (see `CrashReporter::begin_gpu_frame`):
//! when a frame starts, when its work is submitted, and the GPU's completion marker right after.
//!
//! The marker is a submit of its own, not a command buffer appended to Bevy's submit: wgpu rejects
//! a whole `queue.submit` when one of its command buffers is invalid (a validation error anywhere
//! in the frame), which would drop the marker with it and leave the frame pending for the watchdog
//! to report as a hang (tried, and reproduced on lavapipe, 2026-12-07). Where a driver's queue is
//! full behind a hung GPU our submit blocks the render thread, as the game's own next submit would
//! (gdb, lavapipe, with and without the plugin); the watchdog judges the GPU's markers, not the
//! submit, so the hang is still reported (`tests/shader_hang.rs`).
//!
//! Both ends of the pending span are exclusive systems, which run on the render thread itself. A
//! parallel system waits for a thread of Bevy's compute task pool, which both worlds share (one
//! thread on a 2-core machine): a game's system that blocks there (a synchronous load) left the frame
//! stamped and its marker unsubmitted for the whole pause, and the watchdog reported the pause as a
//! GPU hang (issue 32, item 10).

use bevy::prelude::*;
use bevy::render::renderer::RenderQueue;

use crate::resources::GpuCrashReporter;

/// Render world, right before the frame's first submit: starts the frame in the device's ledger.
pub(crate) fn begin_gpu_frame(reporter: Res<GpuCrashReporter>) {
    reporter.begin_gpu_frame();
}

/// Render graph, right before the frame's work is submitted. Exclusive: see the module docs.
pub(crate) fn mark_frame_submitting(world: &mut World) {
    world.resource::<GpuCrashReporter>().frame_submitting();
}

/// Render graph, right after the frame's work is submitted and before Bevy presents: the frame's
/// completion marker. Exclusive: see the module docs.
pub(crate) fn submit_frame_end(world: &mut World) {
    let queue = world.resource::<RenderQueue>();
    world.resource::<GpuCrashReporter>().frame_submitted(queue);
}
