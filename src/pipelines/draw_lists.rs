//! Each frame, which pipelines each camera's stages queued draws with: read from Bevy's render
//! phases after they were sorted, by their keys only (a batch set or bin names its pipeline), so the
//! cost follows the number of batches, not of entities.
//!
//! Where each phase runs (see `breadcrumbs::core_pipeline`): a camera's prepasses and its
//! directional light's shadow cascades in its `Core3d Prepass` stage, its opaque, alpha-mask,
//! transmissive and transparent phases in `Core3d MainPass`; point- and spot-light shadow views
//! before the first camera.

use std::sync::Arc;

use bevy::core_pipeline::core_3d::{AlphaMask3d, Opaque3d, Opaque3dBatchSetKey, Transparent3d};
use bevy::core_pipeline::deferred::{AlphaMask3dDeferred, Opaque3dDeferred};
use bevy::core_pipeline::prepass::{
    AlphaMask3dPrepass, Opaque3dPrepass, OpaqueNoLightmap3dBatchSetKey,
};
use bevy::pbr::{Shadow, ShadowBatchSetKey, Transmissive3d};
use bevy::prelude::*;
use bevy::render::render_phase::{
    BinnedPhaseItem, BinnedRenderPhase, CachedRenderPipelinePhaseItem, SortedPhaseItem,
    ViewBinnedRenderPhases, ViewSortedRenderPhases,
};
use bevy::render::render_resource::CachedRenderPipelineId;
use bevy::render::view::{ExtractedView, RetainedViewEntity};
use gpu_crash_core::{PassPipelines, PipelineUse, PRE_CAMERA_LABEL};

use super::DevicePipelines;
use crate::breadcrumbs::{BreadcrumbCamera, STAGES_3D};
use crate::resources::GpuCrashReporter;

const PREPASS: &str = STAGES_3D[0];
const MAIN_PASS: &str = STAGES_3D[1];

/// The pipelines the last frame's draw lists named, and how often that set changed: `users` works
/// out materials again when it does.
#[derive(Resource, Default)]
pub(crate) struct PipelinesInUse {
    /// Sorted, without duplicates.
    pub ids: Vec<u64>,
    /// Bumped whenever `ids` changes.
    pub changes: u64,
}

/// The batch-set key of a binned phase names the pipeline its draws use.
trait BatchSetPipeline {
    fn pipeline(&self) -> CachedRenderPipelineId;
}

impl BatchSetPipeline for Opaque3dBatchSetKey {
    fn pipeline(&self) -> CachedRenderPipelineId {
        self.pipeline
    }
}

impl BatchSetPipeline for OpaqueNoLightmap3dBatchSetKey {
    fn pipeline(&self) -> CachedRenderPipelineId {
        self.pipeline
    }
}

impl BatchSetPipeline for ShadowBatchSetKey {
    fn pipeline(&self) -> CachedRenderPipelineId {
        self.pipeline
    }
}

/// The frame's draw lists, grouped by (camera, stage).
#[derive(Default)]
pub(super) struct DrawLists {
    /// Camera main entity -> its breadcrumb label.
    cameras: Vec<(Entity, Arc<str>)>,
    lists: Vec<PassPipelines>,
}

impl DrawLists {
    fn camera(&self, entity: Entity) -> Option<&Arc<str>> {
        self.cameras
            .iter()
            .find(|(e, _)| *e == entity)
            .map(|(_, label)| label)
    }

    /// Where a camera phase of `view` runs: its camera's `stage`; `None` for a view with no
    /// labelled camera (breadcrumbs off, or not a camera).
    fn camera_place(
        &self,
        view: &RetainedViewEntity,
        stage: &'static str,
    ) -> Option<(Option<Arc<str>>, &'static str)> {
        Some((Some(self.camera(view.main_entity.id())?.clone()), stage))
    }

    /// Where a shadow view runs: a directional cascade in its camera's prepass stage, a point or
    /// spot light's face before the first camera.
    fn shadow_place(&self, view: &RetainedViewEntity) -> Option<(Option<Arc<str>>, &'static str)> {
        Some(match self.camera(view.auxiliary_entity.id()) {
            Some(camera) => (Some(camera.clone()), PREPASS),
            None => (None, PRE_CAMERA_LABEL),
        })
    }

    fn add(
        &mut self,
        place: (Option<Arc<str>>, &'static str),
        pipeline: CachedRenderPipelineId,
        pass: &'static str,
        batches: u32,
    ) {
        let (camera, stage) = place;
        let index = match self
            .lists
            .iter()
            .position(|l| l.stage == stage && l.camera == camera)
        {
            Some(i) => i,
            None => {
                self.lists.push(PassPipelines {
                    camera,
                    stage,
                    uses: Vec::new(),
                });
                self.lists.len() - 1
            }
        };
        let uses = &mut self.lists[index].uses;
        let pipeline = pipeline.id() as u64;
        match uses
            .iter_mut()
            .rev()
            .find(|u| u.pipeline == pipeline && u.pass == pass)
        {
            Some(used) => used.batches += batches,
            None => uses.push(PipelineUse {
                pipeline,
                pass,
                batches,
            }),
        }
    }

    fn binned<P>(
        &mut self,
        phases: Option<&ViewBinnedRenderPhases<P>>,
        pass: &'static str,
        place: impl Fn(&Self, &RetainedViewEntity) -> Option<(Option<Arc<str>>, &'static str)>,
    ) where
        P: BinnedPhaseItem,
        P::BatchSetKey: BatchSetPipeline,
    {
        for (view, phase) in phases.into_iter().flat_map(|p| p.iter()) {
            if let Some(place) = place(self, view) {
                self.binned_phase(phase, pass, place);
            }
        }
    }

    fn binned_phase<P>(
        &mut self,
        phase: &BinnedRenderPhase<P>,
        pass: &'static str,
        place: (Option<Arc<str>>, &'static str),
    ) where
        P: BinnedPhaseItem,
        P::BatchSetKey: BatchSetPipeline,
    {
        // A multi-drawn batch set is one draw call whatever its bins.
        for key in phase.multidrawable_meshes.keys() {
            self.add(place.clone(), key.pipeline(), pass, 1);
        }
        for (key, _) in phase.batchable_meshes.keys() {
            self.add(place.clone(), key.pipeline(), pass, 1);
        }
        for ((key, _), entities) in &phase.unbatchable_meshes {
            self.add(
                place.clone(),
                key.pipeline(),
                pass,
                entities.entities.len() as u32,
            );
        }
        for ((key, _), entities) in &phase.non_mesh_items {
            self.add(
                place.clone(),
                key.pipeline(),
                pass,
                entities.entities.len() as u32,
            );
        }
    }

    fn sorted<P: SortedPhaseItem + CachedRenderPipelinePhaseItem>(
        &mut self,
        phases: Option<&ViewSortedRenderPhases<P>>,
        pass: &'static str,
    ) {
        for (view, phase) in phases.into_iter().flat_map(|p| p.iter()) {
            let Some(place) = self.camera_place(view, MAIN_PASS) else {
                continue;
            };
            for item in phase.items.values() {
                self.add(place.clone(), item.cached_pipeline(), pass, 1);
            }
        }
    }
}

/// Bevy's 3D phases that the frame may have.
#[derive(bevy::ecs::system::SystemParam)]
pub(super) struct Phases<'w> {
    opaque: Option<Res<'w, ViewBinnedRenderPhases<Opaque3d>>>,
    alpha_mask: Option<Res<'w, ViewBinnedRenderPhases<AlphaMask3d>>>,
    opaque_prepass: Option<Res<'w, ViewBinnedRenderPhases<Opaque3dPrepass>>>,
    alpha_mask_prepass: Option<Res<'w, ViewBinnedRenderPhases<AlphaMask3dPrepass>>>,
    opaque_deferred: Option<Res<'w, ViewBinnedRenderPhases<Opaque3dDeferred>>>,
    alpha_mask_deferred: Option<Res<'w, ViewBinnedRenderPhases<AlphaMask3dDeferred>>>,
    shadow: Option<Res<'w, ViewBinnedRenderPhases<Shadow>>>,
    transmissive: Option<Res<'w, ViewSortedRenderPhases<Transmissive3d>>>,
    transparent: Option<Res<'w, ViewSortedRenderPhases<Transparent3d>>>,
}

pub(super) fn record_draw_lists(
    reporter: Res<GpuCrashReporter>,
    ledger: Option<Res<DevicePipelines>>,
    cameras: Query<(&ExtractedView, &BreadcrumbCamera)>,
    phases: Phases,
    mut in_use: ResMut<PipelinesInUse>,
    mut lists: Local<DrawLists>,
    mut ids: Local<Vec<u64>>,
) {
    let (Some(ledger), Some(frame)) = (ledger, reporter.gpu_frame()) else {
        return;
    };
    // Last frame's vectors are reused: a frame like the last allocates nothing.
    lists.cameras.clear();
    lists.cameras.extend(
        cameras
            .iter()
            .map(|(view, label)| (view.retained_view_entity.main_entity.id(), label.0.clone())),
    );
    for list in &mut lists.lists {
        list.uses.clear();
    }
    let camera_stage = |stage: &'static str| {
        move |lists: &DrawLists, view: &RetainedViewEntity| lists.camera_place(view, stage)
    };
    lists.binned(phases.shadow.as_deref(), "Shadow", DrawLists::shadow_place);
    lists.binned(
        phases.opaque_prepass.as_deref(),
        "Opaque3dPrepass",
        camera_stage(PREPASS),
    );
    lists.binned(
        phases.alpha_mask_prepass.as_deref(),
        "AlphaMask3dPrepass",
        camera_stage(PREPASS),
    );
    lists.binned(
        phases.opaque_deferred.as_deref(),
        "Opaque3dDeferred",
        camera_stage(PREPASS),
    );
    lists.binned(
        phases.alpha_mask_deferred.as_deref(),
        "AlphaMask3dDeferred",
        camera_stage(PREPASS),
    );
    lists.binned(
        phases.opaque.as_deref(),
        "Opaque3d",
        camera_stage(MAIN_PASS),
    );
    lists.binned(
        phases.alpha_mask.as_deref(),
        "AlphaMask3d",
        camera_stage(MAIN_PASS),
    );
    lists.sorted(phases.transmissive.as_deref(), "Transmissive3d");
    lists.sorted(phases.transparent.as_deref(), "Transparent3d");
    lists.lists.retain(|l| !l.uses.is_empty());

    ids.clear();
    ids.extend(
        lists
            .lists
            .iter()
            .flat_map(|l| l.uses.iter().map(|u| u.pipeline)),
    );
    ids.sort_unstable();
    ids.dedup();
    if *ids != in_use.ids {
        in_use.ids.clone_from(&ids);
        in_use.changes += 1;
    }
    ledger.0.record_frame(frame, &lists.lists);
}
