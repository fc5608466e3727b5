//! Render-world systems that keep the device's GPU ledger (see `CrashReporter::begin_gpu_frame`):
//! when a frame starts, and its end: the GPU's completion marker, appended to the command buffers
//! Bevy submits, so that the reporter makes no submit of its own. A submit of ours after Bevy's
//! waited, on lavapipe, behind a hung frame's work inside the driver, with the render thread in it
//! (issue 49); any driver whose queue fills behind a hung GPU would do the same.
//!
//! The frame's end is an exclusive system, which runs on the render thread itself. A parallel
//! system waits for a thread of Bevy's compute task pool, which both worlds share (one thread on a
//! 2-core machine): a game's system that blocks there (a synchronous load) left the frame stamped
//! and its marker unsubmitted for the whole pause, and the watchdog reported the pause as a GPU hang
//! (issue 32, item 10).

use bevy::prelude::*;
use bevy::render::renderer::{PendingCommandBuffers, RenderQueue};

use crate::resources::GpuCrashReporter;

/// Render world, right before the frame's first submit: starts the frame in the device's ledger.
pub(crate) fn begin_gpu_frame(reporter: Res<GpuCrashReporter>) {
    reporter.begin_gpu_frame();
}

/// Render graph, after every system that records the frame's work and before Bevy submits it: the
/// frame is pending from here, and its completion marker goes last into the command buffers Bevy
/// submits next. Exclusive: see the module docs.
pub(crate) fn end_gpu_frame(world: &mut World) {
    let marker = {
        let reporter = world.resource::<GpuCrashReporter>();
        reporter.frame_submitting();
        reporter.frame_end_commands()
    };
    if let Some(marker) = marker {
        world.resource_mut::<PendingCommandBuffers>().push([marker]);
    }
}

/// Render graph, after Bevy's submit: what is still pending (an app without Bevy's core pipeline,
/// whose system submits them, or a submit that ran before ours) is submitted here, so the marker
/// never stays unsubmitted and the frame is never taken for a hang. Nothing is left in a game with
/// Bevy's core pipeline, so this makes no submit there.
pub(crate) fn submit_left_behind(world: &mut World) {
    let left = {
        let Some(mut pending) = world.get_resource_mut::<PendingCommandBuffers>() else {
            return;
        };
        if pending.is_empty() {
            return;
        }
        pending.take()
    };
    world.resource::<RenderQueue>().submit(left);
}
