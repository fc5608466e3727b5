//! What code the GPU runs, told to the reporter's pipeline ledger (`gpu_crash_core::PipelineLedger`)
//! so a hang or fault report names the pipelines of the stage the GPU stopped in, as a Bevy
//! developer knows them:
//! - `registry`: each pipeline of Bevy's `PipelineCache` once, when it appears (label, shader asset
//!   paths, shader defs);
//! - `draw_lists`: each frame, which pipelines each camera's stages queued draws with, read from
//!   Bevy's render phases (keys only: no entity is visited per frame);
//! - `users`: when the pipelines in use change (and every few seconds), the material type and
//!   entities drawing with each, from Bevy's material instances.

mod draw_lists;
mod registry;
mod users;

use std::any::TypeId;
use std::collections::HashMap;

use bevy::prelude::*;
use bevy::render::renderer::render_system;
use bevy::render::{ExtractSchedule, Render, RenderSystems};
use gpu_crash_core::PipelineLedger;

/// The current render device's pipeline ledger (render world), replaced with each new device.
#[derive(Resource, Clone)]
pub(crate) struct DevicePipelines(pub PipelineLedger);

/// Material type names by the material's `TypeId` (the type behind `MeshMaterial3d<M>`), read once
/// from the app's type registry.
#[derive(Resource, Clone, Default)]
pub(crate) struct MaterialTypeNames(pub HashMap<TypeId, String>);

impl MaterialTypeNames {
    /// Every `M` of a registered `MeshMaterial3d<M>` (Bevy's `MaterialPlugin::<M>` registers it).
    pub(crate) fn from_registry(app: &App) -> Self {
        let Some(registry) = app.world().get_resource::<AppTypeRegistry>() else {
            return Self::default();
        };
        let registry = registry.read();
        let names = registry
            .iter()
            .filter(|r| {
                r.type_info()
                    .type_path_table()
                    .path()
                    .starts_with("bevy_pbr::mesh_material::MeshMaterial3d<")
            })
            .filter_map(|r| r.type_info().generics().first())
            .map(|material| (material.type_id(), material.type_path().to_owned()))
            .collect();
        Self(names)
    }
}

/// A cost measurement's switch (feature `cost-switches`, BENCHMARKS.md): while set, the pipeline
/// systems do not run, so one process can alternate blocks of frames with and without them.
#[cfg(feature = "cost-switches")]
static PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Pauses (or resumes) the pipeline naming from the next frame on: for a cost measurement only
/// (feature `cost-switches`); a report built while paused names no pipelines.
#[cfg(feature = "cost-switches")]
pub fn set_pipeline_naming_paused(paused: bool) {
    // Relaxed: a flag read once per frame by the render world's systems; a frame late is fine.
    PAUSED.store(paused, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(feature = "cost-switches")]
fn naming_on() -> bool {
    !PAUSED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The systems that register pipelines and record the frame's draw lists: the plugin orders them
/// after the frame began in the reporter's GPU ledger (the frame number breadcrumbs use).
#[derive(SystemSet, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RecordDrawLists;

/// Adds the systems to the render app. The draw lists are read after Bevy sorted its phases, before
/// the graph records them.
pub(crate) fn install(render_app: &mut SubApp, material_names: MaterialTypeNames) {
    let record = (registry::register_pipelines, draw_lists::record_draw_lists)
        .chain()
        .in_set(RenderSystems::Render)
        .in_set(RecordDrawLists)
        .before(render_system);
    let users = users::refresh_pipeline_users.after(bevy::pbr::MaterialExtractionSystems);
    // Only a cost measurement's build checks the switch each frame.
    #[cfg(feature = "cost-switches")]
    let (record, users) = (record.run_if(naming_on), users.run_if(naming_on));
    render_app
        .insert_resource(material_names)
        .init_resource::<registry::PipelineShaders>()
        .init_resource::<draw_lists::PipelinesInUse>()
        .add_systems(Render, record)
        .add_systems(ExtractSchedule, users);
}
