//! Breadcrumbs around each stage of Bevy's core 3D and 2D pipelines, per camera.
//!
//! The stages are the chained sets of the camera schedules (`Core3dSystems` / `Core2dSystems`:
//! `Prepass`, `MainPass`, `EarlyPostProcess`, `PostProcess`); a system of ours between two sets
//! lands its command buffer between theirs.

use std::collections::HashMap;
use std::sync::Arc;

use bevy::core_pipeline::{Core2d, Core2dSystems, Core3d, Core3dSystems};
use bevy::ecs::schedule::{InternedSystemSet, ScheduleLabel};
use bevy::prelude::*;
use bevy::render::renderer::{CurrentView, RenderContext};
use bevy::render::sync_world::RenderEntity;
use bevy::render::{Extract, ExtractSchedule};

use super::BreadcrumbRecorder;
use crate::vulkan::markers::MarkerStage;

/// The camera a breadcrumb belongs to: its `Name`, else its entity (render world).
#[derive(Component, Clone)]
pub(crate) struct BreadcrumbCamera(pub Arc<str>);

/// True when the render app has the core pipeline's camera schedules (and so its submitter).
pub(super) fn present(render_app: &SubApp) -> bool {
    let schedules = render_app.world().resource::<Schedules>();
    schedules.contains(Core3d) || schedules.contains(Core2d)
}

pub(super) fn install(render_app: &mut SubApp) {
    render_app.add_systems(ExtractSchedule, extract_camera_names);
    let core3d = [
        Core3dSystems::Prepass,
        Core3dSystems::MainPass,
        Core3dSystems::EarlyPostProcess,
        Core3dSystems::PostProcess,
    ]
    .map(|s| s.intern());
    let core2d = [
        Core2dSystems::Prepass,
        Core2dSystems::MainPass,
        Core2dSystems::EarlyPostProcess,
        Core2dSystems::PostProcess,
    ]
    .map(|s| s.intern());
    let schedules = render_app.world().resource::<Schedules>();
    let (has3d, has2d) = (schedules.contains(Core3d), schedules.contains(Core2d));
    if has3d {
        add_stage_markers(render_app, Core3d, core3d, &STAGES_3D);
    }
    if has2d {
        add_stage_markers(render_app, Core2d, core2d, &STAGES_2D);
    }
}

const STAGES_3D: [&str; 4] = [
    "Core3d Prepass",
    "Core3d MainPass",
    "Core3d EarlyPostProcess",
    "Core3d PostProcess",
];
const STAGES_2D: [&str; 4] = [
    "Core2d Prepass",
    "Core2d MainPass",
    "Core2d EarlyPostProcess",
    "Core2d PostProcess",
];

/// One system before the first set, one between each two, one after the last: each ends the stage
/// before it and begins the one after it.
fn add_stage_markers(
    render_app: &mut SubApp,
    schedule: impl ScheduleLabel + Clone,
    sets: [InternedSystemSet; 4],
    labels: &'static [&'static str; 4],
) {
    for boundary in 0..=sets.len() {
        let ends = boundary.checked_sub(1).map(|i| labels[i]);
        let begins = labels.get(boundary).copied();
        let system = move |ctx: RenderContext,
                           recorder: Res<BreadcrumbRecorder>,
                           view: Option<Res<CurrentView>>,
                           cameras: Query<&BreadcrumbCamera>| {
            mark_stage_boundary(ctx, &recorder, view, &cameras, ends, begins)
        };
        let mut config = system.into_configs();
        if let Some(i) = boundary.checked_sub(1) {
            config = config.after(sets[i]);
        }
        if let Some(&next) = sets.get(boundary) {
            config = config.before(next);
        }
        render_app.add_systems(schedule.clone(), config);
    }
}

fn mark_stage_boundary(
    mut ctx: RenderContext,
    recorder: &BreadcrumbRecorder,
    view: Option<Res<CurrentView>>,
    cameras: &Query<&BreadcrumbCamera>,
    ends: Option<&'static str>,
    begins: Option<&'static str>,
) {
    let camera = view.and_then(|v| cameras.get(v.0).ok().map(|c| c.0.clone()));
    let device = ctx.render_device().clone();
    let marks = [
        ends.map(|label| (label, MarkerStage::Finished)),
        begins.map(|label| (label, MarkerStage::Begun)),
    ];
    if let Some(buffer) = recorder.marks_command_buffer(&device, &marks, camera, true) {
        ctx.add_command_buffer(buffer);
    }
}

/// Main-world cameras with their render entity and name.
type CamerasToName<'w, 's> = Extract<
    'w,
    's,
    Query<'static, 'static, (Entity, &'static RenderEntity, Option<&'static Name>), With<Camera>>,
>;
/// Per camera: the name last seen and the label made from it.
type KnownCameraLabels = HashMap<Entity, (Option<Name>, Arc<str>)>;

/// Copies each camera's name (or entity) to its render entity, allocating only when it changes.
fn extract_camera_names(
    mut commands: Commands,
    cameras: CamerasToName,
    mut known: Local<KnownCameraLabels>,
) {
    for (entity, render_entity, name) in &cameras {
        let label = match known.get(&entity) {
            Some((old, label)) if old.as_ref() == name => label.clone(),
            _ => {
                let label: Arc<str> = match name {
                    Some(name) => name.as_str().into(),
                    None => format!("{entity}").into(),
                };
                known.insert(entity, (name.cloned(), label.clone()));
                label
            }
        };
        commands
            .entity(render_entity.id())
            .insert(BreadcrumbCamera(label));
    }
}
