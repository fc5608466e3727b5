//! GPU breadcrumbs: command buffers of ours, submitted between the application's own, in which the
//! GPU writes a marker as it begins and finishes a labelled piece of work, so a hang or loss report
//! says *where in the frame* the GPU stopped.
//!
//! Markers are recorded through wgpu's raw API only (wgpu-core panics when one encoder mixes both),
//! with `VK_AMD_buffer_marker` where the driver has it (AMD, RADV, NVIDIA). Elsewhere they are a core
//! barrier and fill: on a CPU device (lavapipe) at every point, on other GPUs only at the frame's
//! start and end (finer points would serialise the GPU). Every command buffer costs the submitting
//! thread real work whatever it records (an encoder, a `VkCommandBuffer` begun and ended), so a
//! boundary puts all its marks (at most [`MARKS_PER_BUFFER`]) in one.

use std::sync::Arc;

use wgpu::CommandBuffer;

use super::session::DeviceSessions;
use crate::vulkan::markers::{raw_command_buffer, MarkerStage};

/// Marks one command buffer can hold: a camera's first boundary ends the pre-camera phase, ends
/// nothing else and begins its first stage; later boundaries end one stage and begin the next.
const MARKS_PER_BUFFER: usize = 3;

/// Begin or end of a breadcrumb.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// The GPU began the labelled work.
    Begin,
    /// The GPU finished it.
    End,
}

impl From<Mark> for MarkerStage {
    fn from(mark: Mark) -> Self {
        match mark {
            Mark::Begin => MarkerStage::Begun,
            Mark::End => MarkerStage::Finished,
        }
    }
}

/// Records breadcrumbs for the current device: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct BreadcrumbRecorder {
    sessions: DeviceSessions,
}

impl BreadcrumbRecorder {
    pub(crate) fn new(sessions: DeviceSessions) -> Self {
        Self { sessions }
    }

    /// True when the current device records markers finer than the frame's start and end (a GPU
    /// with `VK_AMD_buffer_marker`, or a CPU device).
    pub fn fine_marks(&self) -> bool {
        self.sessions.current().is_some_and(|session| {
            session
                .timeline
                .as_ref()
                .is_some_and(|timeline| timeline.markers().fine_marks())
        })
    }

    /// The labelled work `label` (begun with [`Self::command_buffer`]) runs pipeline `pipeline` (the
    /// id the application registered it under with the device's `PipelineLedger`) in the current
    /// frame: a report that stops inside `label` names the pipeline. For work no draw list shows,
    /// such as a compute pass.
    pub fn note_pipeline(&self, label: &'static str, pipeline: u64) {
        let Some(session) = self.sessions.current() else {
            return;
        };
        if let Some(frame) = session.timeline.as_ref().and_then(|t| t.current_frame()) {
            session.pipelines.note_running(frame, label, pipeline);
        }
    }

    /// A command buffer that marks the begin or end of `label`, to submit right before (begin) or
    /// after (end) the labelled work; `None` when the device records no breadcrumbs (or only the
    /// frame's, when `fine`).
    pub fn command_buffer(
        &self,
        device: &wgpu::Device,
        label: &'static str,
        camera: Option<Arc<str>>,
        mark: Mark,
        fine: bool,
    ) -> Option<CommandBuffer> {
        self.marks_command_buffer(device, &[Some((label, mark))], camera, fine)
    }

    /// One command buffer with the marks of `marks` that are there (at most 3), in order: a stage
    /// boundary ends one stage and begins the next in one submission item instead of two.
    pub fn marks_command_buffer(
        &self,
        device: &wgpu::Device,
        marks: &[Option<(&'static str, Mark)>],
        camera: Option<Arc<str>>,
        fine: bool,
    ) -> Option<CommandBuffer> {
        let session = self.sessions.current()?;
        if session.is_lost() {
            return None;
        }
        let timeline = session.timeline.as_ref()?;
        let markers = timeline.markers();
        if fine && !markers.fine_marks() {
            return None;
        }
        let mut words = [(0u64, 0usize, MarkerStage::Begun); MARKS_PER_BUFFER];
        let mut count = 0;
        for &(label, mark) in marks.iter().flatten().take(words.len()) {
            let opened = match mark {
                Mark::Begin => timeline.open_breadcrumb(label, camera.clone()),
                Mark::End => timeline.close_breadcrumb(label),
            };
            if let Some((frame, word)) = opened {
                words[count] = (frame, word, mark.into());
                count += 1;
            }
        }
        if count == 0 {
            return None;
        }
        let buffer = raw_command_buffer(device, |command_buffer| {
            for &(frame, word, stage) in &words[..count] {
                // SAFETY: a fresh recording command buffer of this device, outside any render
                // pass; `word` comes from the timeline, in bounds of its marker buffer.
                unsafe { markers.record_marker(command_buffer, stage, word, frame as u32) }
            }
        })?;
        timeline.count_marker_command_buffer();
        Some(buffer)
    }
}
