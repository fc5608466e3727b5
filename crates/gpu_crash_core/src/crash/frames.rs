//! The device's GPU ledger, kept by the application at three points of each frame: when the frame
//! starts, when its work is about to be submitted, and right after the submit, where a command
//! buffer of ours has the GPU write the frame's number once all earlier work is done (read by the
//! watchdog).
//!
//! From the "submitting" stamp to the submit of the completion marker the frame counts as pending GPU
//! work, so nothing in between may wait for the CPU (in Bevy both ends are exclusive systems: a game
//! system blocking a pool thread there was once reported as a GPU hang).

use std::time::Instant;

use super::CrashHandling;
use crate::progress::{FRAME_LABEL, PRE_CAMERA_LABEL};
use crate::vulkan::markers::{raw_command_buffer, MarkerStage, COMPLETED_WORD};

impl CrashHandling {
    /// Right before the frame's first submit: starts the frame in the device's ledger.
    pub(crate) fn begin_gpu_frame(&self) {
        if let Some(session) = self.sessions.current() {
            if let Some(timeline) = &session.timeline {
                timeline.begin_frame(self.indexer.ring().claimed());
            }
        }
    }

    /// Right before the frame's work is submitted: from here on the frame is pending on the GPU.
    /// Counted before the submit call, because a driver whose queue is stuck may block inside
    /// `vkQueueSubmit` (lavapipe does), and a frame stuck there is exactly a frame the GPU has not
    /// done.
    pub(crate) fn mark_frame_submitting(&self) {
        let Some(session) = self.sessions.current() else {
            return;
        };
        if let Some(timeline) = &session.timeline {
            timeline.current_frame_submitting(self.indexer.ring().claimed(), Instant::now());
        }
    }

    /// Right after the frame's work is submitted (in Bevy before it presents): a command buffer of
    /// ours that writes the frame number once every earlier command on the queue has finished, for
    /// the caller to submit on its own (a submit of its own, so that an invalid command buffer in
    /// the frame's submit, which makes wgpu reject that whole submit, cannot take the marker with
    /// it). The frame counts as pending from here. Before present, so whatever blocks the render
    /// thread later in the frame (a present waiting for vsync in a hidden window, file I/O, a
    /// debugger) is never counted as the GPU not finishing; work submitted later in the frame is
    /// covered by the next frame's marker. `ended` is the last (device, frame) ended: each frame is
    /// ended once. `None` when there is nothing to mark (no device, no markers, the device lost,
    /// the frame already ended).
    pub(crate) fn frame_end_commands(&self, ended: &mut (u32, u64)) -> Option<wgpu::CommandBuffer> {
        let session = self.sessions.current()?;
        let timeline = session.timeline.as_ref()?;
        let frame = timeline.current_frame()?;
        if session.is_lost() || *ended == (session.generation, frame) {
            return None;
        }
        *ended = (session.generation, frame);
        // A frame without a camera never ended its pre-camera phase: it ends with the frame.
        let pre_camera_end = timeline.close_breadcrumb(PRE_CAMERA_LABEL);
        let frame_end = timeline.close_breadcrumb(FRAME_LABEL);
        let markers = timeline.markers();
        let buffer = raw_command_buffer(&session.device, |command_buffer| {
            // SAFETY: a fresh recording command buffer of this device, outside any render pass; the
            // words come from the timeline's layout.
            unsafe {
                for (_, word) in [pre_camera_end, frame_end].into_iter().flatten() {
                    markers.record_marker(
                        command_buffer,
                        MarkerStage::Finished,
                        word,
                        frame as u32,
                    );
                }
                markers.record_after_all_work(command_buffer, COMPLETED_WORD, frame as u32);
            }
        })?;
        timeline.count_marker_command_buffer();
        timeline.end_frame();
        // A frame with no submit of its own (no camera) is pending from here; counted before the
        // submit for the reason given at `mark_frame_submitting`.
        timeline.current_frame_submitting(self.indexer.ring().claimed(), Instant::now());
        Some(buffer)
    }
}
