//! GPU breadcrumbs in Bevy's render graph: the frame's start, each stage of each camera (with Bevy's
//! core pipeline), and a game's own passes through [`GpuBreadcrumbs`]. The markers themselves are the
//! reporter's (`gpu_crash_core::BreadcrumbRecorder`); their command buffers are queued between the
//! stages' command buffers with `RenderContext::add_command_buffer`.
//!
//! Per frame: one command buffer at the frame's start (it opens the frame and the pre-camera phase),
//! one per stage boundary of each camera (at most five, see `core_pipeline`), and the frame's end
//! (submitted by `render::frames`). Shadow views get none: every command buffer costs the render
//! thread real work whatever it records.

#[cfg(feature = "core_pipeline")]
mod core_pipeline;

/// For the pipelines' draw lists (feature `pbr`): each camera's stages, named as the breadcrumbs are.
#[cfg(feature = "pbr")]
pub(crate) use core_pipeline::{BreadcrumbCamera, STAGES_3D};

use bevy::ecs::system::SystemParam;
use bevy::prelude::*;
use bevy::render::render_resource::{CachedComputePipelineId, CachedRenderPipelineId};
use bevy::render::renderer::{RenderContext, RenderDevice};
#[cfg(feature = "core_pipeline")]
use bevy::render::renderer::{RenderGraph, RenderGraphSystems};
use gpu_crash_core::{Mark, FRAME_LABEL, PRE_CAMERA_LABEL};
use wgpu::CommandBuffer;

/// The reporter's breadcrumb recorder, in the render world.
#[derive(Resource, Clone)]
pub(crate) struct BreadcrumbRecorder(pub gpu_crash_core::BreadcrumbRecorder);

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
///     // and, so a report stopped here names the pipeline and its shader file:
///     // breadcrumbs.note_compute_pipeline("particle simulation", pipeline_id);
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

    /// The work labelled `label` (between [`Self::begin`] and [`Self::end`]) runs the compute
    /// pipeline `pipeline` this frame: a report that stops inside `label` names the pipeline, its
    /// shader file and defs. For a game's own compute passes, which no draw list shows.
    pub fn note_compute_pipeline(&self, label: &'static str, pipeline: CachedComputePipelineId) {
        self.note_pipeline(label, pipeline.id());
    }

    /// As [`Self::note_compute_pipeline`], for a render pipeline the game draws with outside
    /// Bevy's render phases (a custom render node's own draws).
    pub fn note_render_pipeline(&self, label: &'static str, pipeline: CachedRenderPipelineId) {
        self.note_pipeline(label, pipeline.id());
    }

    fn note_pipeline(&self, label: &'static str, pipeline: usize) {
        if let Some(recorder) = &self.recorder {
            recorder.0.note_pipeline(label, pipeline as u64);
        }
    }

    /// For work submitted outside the render graph: a command buffer to submit right before it.
    pub fn begin_command_buffer(
        &self,
        device: &RenderDevice,
        label: &'static str,
    ) -> Option<CommandBuffer> {
        self.mark(device, label, Mark::Begin)
    }

    /// For work submitted outside the render graph: a command buffer to submit right after it.
    pub fn end_command_buffer(
        &self,
        device: &RenderDevice,
        label: &'static str,
    ) -> Option<CommandBuffer> {
        self.mark(device, label, Mark::End)
    }

    fn mark(
        &self,
        device: &RenderDevice,
        label: &'static str,
        mark: Mark,
    ) -> Option<CommandBuffer> {
        self.recorder
            .as_ref()?
            .0
            .command_buffer(device.wgpu_device(), label, None, mark, true)
    }
}

/// Adds the breadcrumb systems to the render app: the frame's start (when a render-graph submitter
/// exists) and, with Bevy's core pipeline, each stage of each camera.
pub(crate) fn install(render_app: &mut SubApp, recorder: gpu_crash_core::BreadcrumbRecorder) {
    render_app.insert_resource(BreadcrumbRecorder(recorder));
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
    let frame = Some((FRAME_LABEL, Mark::Begin));
    let fine = recorder.0.fine_marks();
    let pre_camera = fine.then_some((PRE_CAMERA_LABEL, Mark::Begin));
    if let Some(buffer) =
        recorder
            .0
            .marks_command_buffer(device.wgpu_device(), &[frame, pre_camera], None, false)
    {
        ctx.add_command_buffer(buffer);
    }
}
