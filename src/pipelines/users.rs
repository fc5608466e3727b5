//! Who draws with each pipeline in use: the material type whose shaders the pipeline runs, and some
//! of its entities with their `Name`s. Worked out from Bevy's material instances when the set of
//! pipelines in the draw lists changes, and every [`REFRESH_FRAMES`] frames for new entities: never
//! per frame. Runs in the extract schedule, where the main world's names can be read.

use std::any::TypeId;

use bevy::pbr::{PreparedMaterial, RenderMaterialInstances};
use bevy::prelude::*;
use bevy::render::erased_render_asset::ErasedRenderAssets;
use bevy::render::Extract;
use bevy::shader::Shader;
use gpu_crash_core::{DrawnEntity, PipelineUsers};

use super::draw_lists::PipelinesInUse;
use super::registry::PipelineShaders;
use super::{DevicePipelines, MaterialTypeNames};

/// Frames between two refreshes while the pipelines in use stay the same (2 s at 60 fps).
const REFRESH_FRAMES: u32 = 120;

/// One material type's shaders and entities.
struct MaterialGroup {
    type_id: TypeId,
    shaders: Vec<AssetId<Shader>>,
    entities: Vec<Entity>,
    count: u32,
}

#[derive(Default)]
pub(super) struct Refreshed {
    changes: Option<u64>,
    frames: u32,
}

#[allow(clippy::too_many_arguments)] // a system: each parameter is a resource it reads
pub(super) fn refresh_pipeline_users(
    ledger: Option<Res<DevicePipelines>>,
    in_use: Res<PipelinesInUse>,
    pipeline_shaders: Res<PipelineShaders>,
    instances: Option<Res<RenderMaterialInstances>>,
    materials: Option<Res<ErasedRenderAssets<PreparedMaterial>>>,
    type_names: Res<MaterialTypeNames>,
    names: Extract<Query<&Name>>,
    mut refreshed: Local<Refreshed>,
) {
    let (Some(ledger), Some(instances), Some(materials)) = (ledger, instances, materials) else {
        return;
    };
    refreshed.frames += 1;
    if refreshed.changes == Some(in_use.changes) && refreshed.frames < REFRESH_FRAMES {
        return;
    }
    refreshed.changes = Some(in_use.changes);
    refreshed.frames = 0;

    let mut groups: Vec<MaterialGroup> = Vec::new();
    for (entity, instance) in &instances.instances {
        let type_id = instance.asset_id.type_id();
        let index = match groups.iter().position(|g| g.type_id == type_id) {
            Some(i) => i,
            None => {
                groups.push(MaterialGroup {
                    type_id,
                    shaders: Vec::new(),
                    entities: Vec::new(),
                    count: 0,
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[index];
        // The material's own shaders (none for one that keeps Bevy's, like StandardMaterial), read
        // from its first prepared instance.
        if group.shaders.is_empty() {
            if let Some(prepared) = materials.get(instance.asset_id) {
                group.shaders = prepared
                    .properties
                    .shaders
                    .iter()
                    .map(|(_, handle)| handle.id())
                    .collect();
            }
        }
        group.count += 1;
        if group.entities.len() < PipelineUsers::LISTED {
            group.entities.push(entity.id());
        }
    }
    for &id in &in_use.ids {
        let Some(shaders) = pipeline_shaders.0.get(id as usize) else {
            continue;
        };
        // The fragment (or compute) shader decides: materials share Bevy's vertex shader.
        let users = shaders
            .iter()
            .rev()
            .find_map(|shader| groups.iter().find(|g| g.shaders.contains(shader)))
            .map(|g| PipelineUsers {
                material: type_names.0.get(&g.type_id).cloned(),
                entities: g
                    .entities
                    .iter()
                    .map(|&e| DrawnEntity {
                        shown_as: e.to_string(),
                        name: names.get(e).ok().map(|n| n.as_str().to_owned()),
                    })
                    .collect(),
                entity_count: g.count,
            })
            .unwrap_or_default();
        ledger.0.set_users(id, users);
    }
}
