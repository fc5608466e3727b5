//! GPU breadcrumbs: marker writes the GPU performs as it begins and finishes each render stage, so a
//! hang or loss report says *where in the frame* the GPU stopped.
//!
//! Markers go into command buffers of our own, used only through wgpu's raw API (wgpu-core panics
//! when one encoder mixes both) and queued between the stages' command buffers with
//! `RenderContext::add_command_buffer`. They are written with `VK_AMD_buffer_marker` where the driver
//! has it (AMD, RADV, NVIDIA). Elsewhere they are a core barrier and fill: on a CPU device (lavapipe)
//! at every point, on other GPUs only at the frame's start and end (finer points would serialise
//! the GPU).
//!
//! Per frame: one command buffer at the frame's start (it opens the frame and the pre-camera phase),
//! one per stage boundary of each camera (at most five, see `core_pipeline`), and the frame's end
//! (submitted by `crash::frames`). Every command buffer costs the render thread real work whatever
//! it records (a wgpu encoder, a `VkCommandBuffer` begun and ended, a transit buffer wgpu adds at
//! submit), so shadow views get none.

#[cfg(feature = "core_pipeline")]
mod core_pipeline;

use std::sync::Arc;

use bevy::ecs::system::SystemParam;
use bevy::prelude::*;
use bevy::render::renderer::{RenderContext, RenderDevice, RenderGraph, RenderGraphSystems};
use wgpu::CommandBuffer;

use crate::crash::DeviceSessions;
use crate::vulkan::markers::{raw_command_buffer, MarkerStage};

/// Label of the breadcrumb around a whole frame's GPU work.
pub(crate) const FRAME_LABEL: &str = "frame";

/// Label of the phase from the frame's start to the first camera's first stage: Bevy renders the
/// point- and spot-light shadow views there (each running the camera schedule, GPU preprocessing
/// included), before any camera.
pub(crate) const PRE_CAMERA_LABEL: &str = "Before cameras (shadow views, preprocessing)";

/// Marks one command buffer can hold: a camera's first boundary ends the pre-camera phase, ends
/// nothing else and begins its first stage; later boundaries end one stage and begin the next.
const MARKS_PER_BUFFER: usize = 3;

/// Records breadcrumbs for the current render device (render world).
#[derive(Resource, Clone)]
pub struct BreadcrumbRecorder {
    sessions: DeviceSessions,
}

impl BreadcrumbRecorder {
    pub(crate) fn new(sessions: DeviceSessions) -> Self {
        Self { sessions }
    }

    /// True when the current device records markers finer than the frame's start and end (see
    /// `MarkerBuffer::fine_marks`).
    fn fine_marks(&self) -> bool {
        self.sessions.current().is_some_and(|session| {
            session
                .timeline
                .as_ref()
                .is_some_and(|timeline| timeline.markers().fine_marks())
        })
    }

    /// A command buffer that marks the start (`Begun`) or end (`Finished`) of `label`, or `None` when
    /// the device records no breadcrumbs. `fine` breadcrumbs need `MarkerBuffer::fine_marks`.
    pub(crate) fn command_buffer(
        &self,
        device: &RenderDevice,
        label: &'static str,
        camera: Option<Arc<str>>,
        stage: MarkerStage,
        fine: bool,
    ) -> Option<CommandBuffer> {
        self.marks_command_buffer(device, &[Some((label, stage))], camera, fine)
    }

    /// One command buffer with the marks of `marks` that are there (at most [`MARKS_PER_BUFFER`]), in
    /// order: a stage boundary ends one stage and begins the next in one submission item instead of
    /// two (each costs wgpu an encoder).
    pub(crate) fn marks_command_buffer(
        &self,
        device: &RenderDevice,
        marks: &[Option<(&'static str, MarkerStage)>],
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
        for &(label, stage) in marks.iter().flatten().take(words.len()) {
            let opened = match stage {
                MarkerStage::Begun => timeline.open_breadcrumb(label, camera.clone()),
                MarkerStage::Finished => timeline.close_breadcrumb(label),
            };
            if let Some((frame, word)) = opened {
                words[count] = (frame, word, stage);
                count += 1;
            }
        }
        if count == 0 {
            return None;
        }
        let buffer = raw_command_buffer(device.wgpu_device(), |command_buffer| {
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

/// A game's own GPU breadcrumbs, for compute and render work the reporter cannot see: the report then
/// says which of them the GPU was inside when it hung or faulted.
///
/// ```no_run
/// # use bevy::prelude::*;
/// # use bevy::render::renderer::RenderContext;
/// use bevy_gpu_crash_reporter::GpuBreadcrumbs;
///
/// // A render-graph system of the game (render world).
/// fn simulate_particles(mut ctx: RenderContext, breadcrumbs: GpuBreadcrumbs) {
///     breadcrumbs.begin(&mut ctx, "particle simulation");
///     // ... record the compute pass into ctx.command_encoder() ...
///     breadcrumbs.end(&mut ctx, "particle simulation");
/// }
/// ```
///
/// Needs `VK_AMD_buffer_marker` (AMD, RADV, NVIDIA) or a CPU device (lavapipe); elsewhere the calls do
/// nothing.
#[derive(SystemParam)]
pub struct GpuBreadcrumbs<'w> {
    recorder: Option<Res<'w, BreadcrumbRecorder>>,
}

impl GpuBreadcrumbs<'_> {
    /// Marks the start of `label` in `ctx`'s command stream (after what was recorded so far).
    pub fn begin(&self, ctx: &mut RenderContext, label: &'static str) {
        if let Some(buffer) = self.begin_command_buffer(ctx.render_device(), label) {
            ctx.add_command_buffer(buffer);
        }
    }

    /// Marks the end of `label` (the innermost open breadcrumb with that label).
    pub fn end(&self, ctx: &mut RenderContext, label: &'static str) {
        if let Some(buffer) = self.end_command_buffer(ctx.render_device(), label) {
            ctx.add_command_buffer(buffer);
        }
    }

    /// For work submitted outside the render graph: a command buffer to submit right before it.
    pub fn begin_command_buffer(
        &self,
        device: &RenderDevice,
        label: &'static str,
    ) -> Option<CommandBuffer> {
        self.recorder
            .as_ref()?
            .command_buffer(device, label, None, MarkerStage::Begun, true)
    }

    /// For work submitted outside the render graph: a command buffer to submit right after it.
    pub fn end_command_buffer(
        &self,
        device: &RenderDevice,
        label: &'static str,
    ) -> Option<CommandBuffer> {
        self.recorder
            .as_ref()?
            .command_buffer(device, label, None, MarkerStage::Finished, true)
    }
}

/// Adds the breadcrumb systems to the render app: the frame's start (when a render-graph submitter
/// exists) and, with Bevy's core pipeline, each stage of each camera.
pub(crate) fn install(render_app: &mut SubApp, sessions: DeviceSessions) {
    render_app.insert_resource(BreadcrumbRecorder::new(sessions));
    // Command buffers queued in the render graph are submitted by bevy_core_pipeline's camera
    // driver; without it nothing would submit ours.
    #[cfg(feature = "core_pipeline")]
    if core_pipeline::present(render_app) {
        render_app.add_systems(
            RenderGraph,
            mark_frame_start.in_set(RenderGraphSystems::Begin),
        );
        core_pipeline::install(render_app);
    }
}

/// Opens the frame's breadcrumb before any of its GPU work, and the pre-camera phase (closed by the
/// first camera's first stage boundary, or by the frame's end).
#[cfg_attr(not(feature = "core_pipeline"), allow(dead_code))]
fn mark_frame_start(mut ctx: RenderContext, recorder: Res<BreadcrumbRecorder>) {
    let device = ctx.render_device().clone();
    let frame = Some((FRAME_LABEL, MarkerStage::Begun));
    let fine = recorder.fine_marks();
    let pre_camera = fine.then_some((PRE_CAMERA_LABEL, MarkerStage::Begun));
    if let Some(buffer) = recorder.marks_command_buffer(&device, &[frame, pre_camera], None, false)
    {
        ctx.add_command_buffer(buffer);
    }
}
