//! What code the GPU runs, as the application's developer knows it: each pipeline's label, shader
//! files, shader defs and material (registered once, when the application creates it), and for each
//! frame which pipelines every pass of every camera queued draws with. A hang or fault report then
//! names the pipelines that may have been running in the stage the GPU stopped in (the stage comes
//! from the GPU's breadcrumbs), ranked.
//!
//! This is the CPU's view: it lists what was queued, not what the GPU executed last. Work recorded
//! outside the application's draw lists (full-screen passes, compute dispatches) is not in it.

mod ledger;
mod model;

pub use ledger::PipelineLedger;
pub use model::{
    DrawnEntity, ExactCommand, ExactDraws, PassPipelines, PipelineCandidate, PipelineInfo,
    PipelineKind, PipelineUse, PipelineUsers, RunningBasis, RunningPipelines, ShaderStage,
};
