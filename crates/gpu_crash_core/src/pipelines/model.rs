//! The pipeline facts an application hands over, and what a report says of them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Render or compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PipelineKind {
    /// A render (graphics) pipeline.
    Render,
    /// A compute pipeline.
    Compute,
}

/// One shader stage of a pipeline: where its code comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShaderStage {
    /// `vertex`, `fragment` or `compute`.
    pub stage: String,
    /// The shader's asset path as the application loads it (e.g. `shaders/water.wgsl`, or Bevy's
    /// `embedded://bevy_pbr/render/pbr.wgsl`); null for a shader made in code.
    pub path: Option<String>,
    /// The entry point, when the pipeline names one.
    pub entry_point: Option<String>,
}

impl ShaderStage {
    /// True for the application's own shader file: a path that is not embedded in an engine crate.
    pub fn is_own(&self) -> bool {
        self.path
            .as_deref()
            .is_some_and(|p| !p.is_empty() && !p.starts_with("embedded://"))
    }
}

/// A pipeline as the application created it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineInfo {
    /// Its label (wgpu's, also the Vulkan object's debug name).
    pub label: Option<String>,
    /// Render or compute.
    pub kind: PipelineKind,
    /// Its shader stages.
    pub shaders: Vec<ShaderStage>,
    /// The shader defs it was specialised with (`NAME` or `NAME=value`), in order, deduplicated.
    pub shader_defs: Vec<String>,
}

/// An entity (or other object) that drew with a pipeline, as a report shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawnEntity {
    /// How the application shows it, e.g. Bevy's `42v1`.
    pub shown_as: String,
    /// Its name, if it has one.
    pub name: Option<String>,
}

/// Who draws with a pipeline: the material type and some of its entities. Worked out by the
/// application now and then (it changes when materials and entities do), not per frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineUsers {
    /// The material type (e.g. `my_game::WaterMaterial`), where one owns the pipeline's shaders.
    pub material: Option<String>,
    /// Some of the entities drawing with it (at most [`PipelineUsers::LISTED`]).
    pub entities: Vec<DrawnEntity>,
    /// How many entities draw with it.
    pub entity_count: u32,
}

impl PipelineUsers {
    /// Entities kept by name per pipeline.
    pub const LISTED: usize = 4;
}

/// One pipeline in one pass's draw list this frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineUse {
    /// The application's id for the pipeline (as given to [`PipelineLedger::register`]).
    ///
    /// [`PipelineLedger::register`]: super::PipelineLedger::register
    pub pipeline: u64,
    /// The draw list it is in, e.g. `Opaque3d`.
    pub pass: &'static str,
    /// Draw batches queued with it in that list (a multi-draw counts once).
    pub batches: u32,
}

/// The pipelines one stage of one camera queued in a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassPipelines {
    /// The camera, as its breadcrumbs name it; `None` for work before the first camera.
    pub camera: Option<Arc<str>>,
    /// The stage, as its breadcrumbs name it (e.g. `Core3d MainPass`).
    pub stage: &'static str,
    /// Each pipeline and draw list, in the order the application listed them.
    pub uses: Vec<PipelineUse>,
}

/// How the report knows which pipelines were running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunningBasis {
    /// The pipelines the application queued draws with in the stage the GPU stopped in (from its
    /// breadcrumbs), ranked: one of them was likely running, none is certain, and work outside the
    /// draw lists (full-screen passes, compute) is not listed.
    QueuedInStage,
    /// Exact mode: the GPU marked its progress after every draw and dispatch
    /// (`VK_LAYER_gpu_crash_exact`), and the pipeline listed is the one of the first draw or
    /// dispatch it did not finish ([`RunningPipelines::exact`] has both that command and the last
    /// one it finished).
    Exact,
}

/// One draw or dispatch as exact mode's layer recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExactCommand {
    /// `draw` or `dispatch`.
    pub kind: String,
    /// The label of the pipeline bound for it (its Vulkan debug name: wgpu's label).
    pub pipeline_label: Option<String>,
    /// The debug labels open around it, outermost first (wgpu's pass labels, e.g.
    /// `main_opaque_pass_3d`).
    pub labels: Vec<String>,
    /// Its place among the draws and dispatches of its command buffer (0: the first).
    pub index_in_command_buffer: u32,
    /// Among the pipelines of the same label bound in the same labelled region, the place of its own
    /// (0: the first bound); tells apart pipelines an engine labels alike.
    pub same_label_ordinal: u32,
    /// Draws and dispatches that share its marker, itself included: 1 where the GPU marked it on its
    /// own; more where the driver lacks `VK_AMD_buffer_marker` and the marker could only follow its
    /// render pass (lavapipe): then one of those, or the work before them, did not finish.
    #[serde(default = "one")]
    pub sharing_marker: u32,
}

fn one() -> u32 {
    1
}

impl ExactCommand {
    /// `draw with pipeline "opaque_mesh_pipeline" in main_opaque_pass_3d`.
    pub fn describe(&self) -> String {
        let pipeline = self
            .pipeline_label
            .as_deref()
            .map(|l| format!(" with pipeline {l:?}"))
            .unwrap_or_else(|| " with an unlabelled pipeline".into());
        let place = self
            .labels
            .last()
            .map(|l| format!(" in {l}"))
            .unwrap_or_default();
        format!("{}{pipeline}{place}", self.kind)
    }
}

/// What exact mode's markers said at the report: the last draw or dispatch the GPU finished and the
/// first it did not, in submission order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExactDraws {
    /// How the GPU marked its progress: `amd_buffer_marker` (after every draw and dispatch) or
    /// `update_buffer` (after every dispatch and every render pass: the draws of a pass share it).
    pub marker: String,
    /// Draws and dispatches marked since the device was created.
    pub marked: u64,
    /// Submitted draws and dispatches the GPU had not finished.
    pub unfinished: u64,
    /// The last one the GPU finished before the first it did not.
    pub last_finished: Option<ExactCommand>,
    /// The first one the GPU did not finish: the one it was in, or had not reached.
    pub first_unfinished: Option<ExactCommand>,
}

/// What the report says was running where the GPU stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningPipelines {
    /// How this list was made.
    pub basis: RunningBasis,
    /// The frame whose work the GPU stopped in.
    pub frame: u64,
    /// The camera of the stage, if any.
    pub camera: Option<String>,
    /// The stage.
    pub stage: String,
    /// Most likely first (see [`PipelineCandidate::rank`]). With [`RunningBasis::Exact`], the
    /// pipeline of the first draw the GPU did not finish (more than one only where the application's
    /// pipelines share its label and its place among them could not tell them apart).
    pub candidates: Vec<PipelineCandidate>,
    /// Exact mode's record of the draws around where the GPU stopped; `None` without exact mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<ExactDraws>,
}

/// One pipeline that may have been running.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineCandidate {
    /// 1 for the most likely. The application's own shaders rank before the engine's (a shader
    /// every game of the engine runs is less likely to hang only this one), then more batches
    /// before fewer (more GPU time in the stage).
    pub rank: u32,
    /// Its label.
    pub label: Option<String>,
    /// Render or compute.
    pub kind: PipelineKind,
    /// Its shader stages.
    pub shaders: Vec<ShaderStage>,
    /// Its shader defs.
    pub shader_defs: Vec<String>,
    /// The draw lists it was queued in, e.g. `Opaque3d`.
    pub passes: Vec<String>,
    /// Draw batches queued with it in the stage.
    pub batches: u32,
    /// The material type owning its shaders, if known.
    pub material: Option<String>,
    /// Some entities drawing with it.
    pub entities: Vec<DrawnEntity>,
    /// How many entities draw with it (0 when unknown).
    pub entity_count: u32,
}

impl PipelineCandidate {
    /// The shader file a person looks for first: the application's own one, else the fragment or
    /// compute stage's, else any.
    pub fn main_shader(&self) -> Option<&str> {
        let pick = |own: bool| {
            self.shaders
                .iter()
                .filter(|s| !own || s.is_own())
                .find(|s| s.stage != "vertex")
                .or_else(|| self.shaders.iter().find(|s| !own || s.is_own()))
                .and_then(|s| s.path.as_deref())
        };
        pick(true).or_else(|| pick(false))
    }

    /// The entities drawing with it, for people: `"glowing crystal" (161v0), 158v0 and 6 more`;
    /// `None` when none is listed.
    pub fn drawing(&self) -> Option<String> {
        if self.entities.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .entities
            .iter()
            .map(|e| match &e.name {
                Some(name) => format!("{name:?} ({})", e.shown_as),
                None => e.shown_as.clone(),
            })
            .collect();
        let more = self.entity_count.saturating_sub(self.entities.len() as u32);
        Some(if more > 0 {
            format!("{} and {more} more", names.join(", "))
        } else {
            names.join(", ")
        })
    }

    /// One line: `EndlessMaterial (shaders/endless_loop.wgsl, pipeline "opaque_mesh_pipeline")`.
    pub fn describe(&self) -> String {
        let what = self
            .material
            .as_deref()
            .map(|m| m.rsplit("::").next().unwrap_or(m).to_owned())
            .or_else(|| self.label.clone())
            .unwrap_or_else(|| "unlabelled pipeline".into());
        let mut parts = Vec::new();
        if let Some(shader) = self.main_shader() {
            parts.push(shader.to_owned());
        }
        if self.material.is_some() {
            if let Some(label) = &self.label {
                parts.push(format!("pipeline {label:?}"));
            }
        }
        if parts.is_empty() {
            what
        } else {
            format!("{what} ({})", parts.join(", "))
        }
    }
}
