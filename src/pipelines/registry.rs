//! Registers each pipeline of Bevy's `PipelineCache` with the ledger once, when it appears.
//! `PipelineCache::pipelines` lists them in id order and only grows while the device lives, so a
//! frame looks only at those past the last one it saw: nothing per frame once every pipeline exists.

use std::borrow::Cow;

use bevy::prelude::*;
use bevy::render::render_resource::{PipelineCache, PipelineDescriptor};
use bevy::shader::{Shader, ShaderDefVal};
use gpu_crash_core::{PipelineInfo, PipelineKind, ShaderStage};

use super::DevicePipelines;
use crate::assets::AssetPaths;

/// The shaders of each registered pipeline, by pipeline id: what `users` matches materials by.
#[derive(Resource, Default)]
pub(crate) struct PipelineShaders(pub Vec<Vec<AssetId<Shader>>>);

/// Shader defs a report lists per pipeline (Bevy's PBR pipelines have some 40).
const MAX_DEFS: usize = 64;

pub(super) fn register_pipelines(
    cache: Res<PipelineCache>,
    ledger: Option<Res<DevicePipelines>>,
    paths: Option<Res<AssetPaths>>,
    mut shaders: ResMut<PipelineShaders>,
) {
    let Some(ledger) = ledger else {
        return;
    };
    // A new device (or cache) starts a fresh ledger and fresh ids.
    if ledger.is_changed() || cache.is_added() {
        shaders.0.clear();
    }
    let known = shaders.0.len();
    for (id, cached) in cache.pipelines().enumerate().skip(known) {
        let path = |shader: &Handle<Shader>| {
            paths
                .as_ref()
                .and_then(|p| p.0.get_path(shader.id()))
                .map(|p| p.to_string())
        };
        let stage =
            |name: &str, shader: &Handle<Shader>, entry: &Option<Cow<'static, str>>| ShaderStage {
                stage: name.to_owned(),
                path: path(shader),
                entry_point: entry.as_ref().map(|e| e.to_string()),
            };
        let (info, ids) = match &cached.descriptor {
            PipelineDescriptor::RenderPipelineDescriptor(d) => {
                let mut stages = vec![stage("vertex", &d.vertex.shader, &d.vertex.entry_point)];
                let mut ids = vec![d.vertex.shader.id()];
                let mut defs = defs_of(&d.vertex.shader_defs);
                if let Some(f) = &d.fragment {
                    stages.push(stage("fragment", &f.shader, &f.entry_point));
                    ids.push(f.shader.id());
                    for def in defs_of(&f.shader_defs) {
                        if !defs.contains(&def) {
                            defs.push(def);
                        }
                    }
                }
                defs.truncate(MAX_DEFS);
                let info = PipelineInfo {
                    label: d.label.as_ref().map(|l| l.to_string()),
                    kind: PipelineKind::Render,
                    shaders: stages,
                    shader_defs: defs,
                };
                (info, ids)
            }
            PipelineDescriptor::ComputePipelineDescriptor(d) => {
                let mut defs = defs_of(&d.shader_defs);
                defs.truncate(MAX_DEFS);
                let info = PipelineInfo {
                    label: d.label.as_ref().map(|l| l.to_string()),
                    kind: PipelineKind::Compute,
                    shaders: vec![stage("compute", &d.shader, &d.entry_point)],
                    shader_defs: defs,
                };
                (info, vec![d.shader.id()])
            }
        };
        ledger.0.register(id as u64, info);
        shaders.0.push(ids);
    }
}

/// `NAME` for a true bool, `NAME=value` otherwise.
fn defs_of(defs: &[ShaderDefVal]) -> Vec<String> {
    defs.iter()
        .map(|def| match def {
            ShaderDefVal::Bool(name, true) => name.clone(),
            ShaderDefVal::Bool(name, false) => format!("{name}=false"),
            ShaderDefVal::Int(name, v) => format!("{name}={v}"),
            ShaderDefVal::UInt(name, v) => format!("{name}={v}"),
        })
        .collect()
}
