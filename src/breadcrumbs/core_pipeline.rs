//! Breadcrumbs around the stages of each camera's Core3d / Core2d schedule.
//!
//! Bevy runs a camera schedule once per camera **and** once per point- or spot-light shadow view
//! (bevy_core_pipeline `camera_driver`: every `RootNonCameraView` first, then the cameras in order).
//! Only camera views get stage breadcrumbs: a shadow view would spend five command buffers and five
//! marker slots on stages that only draw a depth map. What runs before the first camera is one phase,
//! [`PRE_CAMERA_LABEL`](super::PRE_CAMERA_LABEL), opened when the frame begins.
//!
//! Five boundary systems split a camera's schedule into its four stage sets (`Prepass`, `MainPass`,
//! `EarlyPostProcess`, `PostProcess`). Many of Bevy's systems are in no set and only ordered against
//! one (GPU preprocessing and directional shadow cascades are only "before MainPass", `upscaling`
//! only "after PostProcess"), so a build pass ([`StageBoundaryPass`]) places every other system of
//! the schedule between two boundaries:
//! - the first boundary before every system, the last after every system: the camera's first and
//!   last command buffers;
//! - a system ordered before a stage's set (and not inside it) ends before that stage begins;
//! - a system ordered only after a stage's set ends before the next stage begins.
//!
//! So, for a 3D camera:
//! - **Prepass**: everything before the `MainPass` set: GPU mesh preprocessing, the directional
//!   light's shadow cascades, depth/normal/motion-vector and deferred prepasses, depth downsampling;
//! - **MainPass**: the opaque, transmissive and transparent passes, and what is ordered after them
//!   but before post-processing (e.g. volumetric fog);
//! - **EarlyPostProcess**: only where some system is in that set (stock Bevy has none);
//! - **PostProcess**: tonemapping, other post effects, and `upscaling` to the camera's target.
//!
//! A stage with no system gets no breadcrumb and its boundary records nothing.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use bevy::core_pipeline::{Core2d, Core2dSystems, Core3d, Core3dSystems};
use bevy::ecs::schedule::graph::{DiGraph, Direction};
use bevy::ecs::schedule::{
    FlattenedDependencies, InternedScheduleLabel, InternedSystemSet, NodeId, ScheduleBuildError,
    ScheduleBuildPass, ScheduleGraph, ScheduleLabel, SystemKey, SystemSetKey,
};
use bevy::platform::hash::FixedHasher;
use bevy::prelude::*;
use bevy::render::renderer::{CurrentView, RenderContext};
use bevy::render::sync_world::RenderEntity;
use bevy::render::{Extract, ExtractSchedule};

use gpu_crash_core::{Mark, PRE_CAMERA_LABEL};

use super::BreadcrumbRecorder;

/// Stage sets per camera schedule.
const STAGES: usize = 4;

/// The camera a breadcrumb belongs to, as its stable label (render world): present on camera views
/// only, so a view without it (a shadow view) gets no stage breadcrumbs.
#[derive(Component, Clone)]
pub(crate) struct BreadcrumbCamera(pub Arc<str>);

/// True when the render app has the core pipeline's camera schedules (and so its submitter).
pub(super) fn present(render_app: &SubApp) -> bool {
    let schedules = render_app.world().resource::<Schedules>();
    schedules.contains(Core3d) || schedules.contains(Core2d)
}

pub(super) fn install(render_app: &mut SubApp) {
    render_app.add_systems(ExtractSchedule, extract_camera_labels);
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

/// Core3d's stage labels, as breadcrumbs (and the pipeline ledger's draw lists) name them.
pub(crate) const STAGES_3D: [&str; STAGES] = [
    "Core3d Prepass",
    "Core3d MainPass",
    "Core3d EarlyPostProcess",
    "Core3d PostProcess",
];
const STAGES_2D: [&str; STAGES] = [
    "Core2d Prepass",
    "Core2d MainPass",
    "Core2d EarlyPostProcess",
    "Core2d PostProcess",
];

/// The set of boundary `n` of one camera schedule (`n` in `0..=STAGES`): boundary `n` begins stage
/// `n` and ends the stage before it; the last one ends the last stage.
#[derive(SystemSet, Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StageBoundary {
    schedule: InternedScheduleLabel,
    index: usize,
}

/// Which stages of one camera schedule have systems (bit `n`: stage `n`), as the last schedule build
/// found them.
#[derive(Debug, Default)]
struct StageLayout(AtomicU8);

impl StageLayout {
    fn present(&self) -> u8 {
        // Relaxed: written by the schedule build, which runs on the render thread before the systems
        // that read it, in the same schedule run.
        self.0.load(Ordering::Relaxed)
    }
}

/// What boundary `index` marks, given the stages that have systems: the stage it ends (the last
/// present one before it) and the stage it begins (its own, if present). `None` when it marks
/// nothing (its stage is absent: the next present boundary ends the open stage).
fn boundary_marks(index: usize, present: u8) -> Option<(Option<usize>, Option<usize>)> {
    let has = |stage: usize| present & (1 << stage) != 0;
    let begins = (index < STAGES && has(index)).then_some(index);
    if index < STAGES && begins.is_none() {
        return None;
    }
    let ends = (0..index).rev().find(|&stage| has(stage));
    (ends.is_some() || begins.is_some()).then_some((ends, begins))
}

fn add_stage_markers(
    render_app: &mut SubApp,
    schedule: impl ScheduleLabel + Clone,
    sets: [InternedSystemSet; STAGES],
    labels: &'static [&'static str; STAGES],
) {
    let layout = Arc::new(StageLayout::default());
    let boundary = |index| StageBoundary {
        schedule: schedule.intern(),
        index,
    };
    for index in 0..=STAGES {
        let layout = layout.clone();
        let system = move |ctx: RenderContext,
                           recorder: Res<BreadcrumbRecorder>,
                           view: Option<Res<CurrentView>>,
                           cameras: Query<&BreadcrumbCamera>| {
            let Some(marks) = boundary_marks(index, layout.present()) else {
                return;
            };
            mark_stage_boundary(ctx, &recorder, view, &cameras, marks, labels)
        };
        let mut config = system.in_set(boundary(index));
        if let Some(i) = index.checked_sub(1) {
            config = config.after(sets[i]);
        }
        if let Some(&next) = sets.get(index) {
            config = config.before(next);
        }
        render_app.add_systems(schedule.clone(), config);
    }
    let boundaries = std::array::from_fn(|index| boundary(index).intern());
    let mut schedules = render_app.world_mut().resource_mut::<Schedules>();
    if let Some(schedule) = schedules.get_mut(schedule) {
        schedule.add_build_pass(StageBoundaryPass {
            stages: sets,
            boundaries,
            layout,
        });
    }
}

fn mark_stage_boundary(
    mut ctx: RenderContext,
    recorder: &BreadcrumbRecorder,
    view: Option<Res<CurrentView>>,
    cameras: &Query<&BreadcrumbCamera>,
    (ends, begins): (Option<usize>, Option<usize>),
    labels: &'static [&'static str; STAGES],
) {
    // Shadow views and other non-camera views run the same schedule: no breadcrumbs for them.
    let Some(camera) = view.and_then(|v| cameras.get(v.0).ok()) else {
        return;
    };
    // The camera's first boundary also ends the pre-camera phase (a no-op after the first camera).
    let pre_camera_ends = ends.is_none().then_some((PRE_CAMERA_LABEL, Mark::End));
    let marks = [
        pre_camera_ends,
        ends.map(|stage| (labels[stage], Mark::End)),
        begins.map(|stage| (labels[stage], Mark::Begin)),
    ];
    let device = ctx.render_device().clone();
    if let Some(buffer) =
        recorder
            .0
            .marks_command_buffer(device.wgpu_device(), &marks, Some(camera.0.clone()), true)
    {
        ctx.add_command_buffer(buffer);
    }
}

/// Orders every system of a camera schedule between the stage boundaries (see the module docs), and
/// records which stages have systems.
#[derive(Debug)]
struct StageBoundaryPass {
    stages: [InternedSystemSet; STAGES],
    boundaries: [InternedSystemSet; STAGES + 1],
    layout: Arc<StageLayout>,
}

impl ScheduleBuildPass for StageBoundaryPass {
    type EdgeOptions = ();

    fn add_dependency(&mut self, _from: NodeId, _to: NodeId, _options: Option<&Self::EdgeOptions>) {
    }

    fn collapse_set(
        &mut self,
        _set: SystemSetKey,
        _systems: &indexmap::IndexSet<SystemKey, FixedHasher>,
        _dependency_flattening: &DiGraph<NodeId>,
    ) -> impl Iterator<Item = (NodeId, NodeId)> {
        std::iter::empty()
    }

    fn build(
        &mut self,
        _world: &mut World,
        graph: &mut ScheduleGraph,
        mut dependencies: FlattenedDependencies<'_>,
    ) -> Result<(), ScheduleBuildError> {
        let members = |set: InternedSystemSet| set_members(graph, set);
        let stage_members: [HashSet<SystemKey>; STAGES] =
            std::array::from_fn(|i| members(self.stages[i]));
        let boundaries: Option<Vec<SystemKey>> = self
            .boundaries
            .iter()
            .map(|&set| members(set).into_iter().next())
            .collect();
        let Some(boundaries) = boundaries else {
            return Ok(()); // not all boundaries in this schedule: nothing to place
        };
        let (order, flat) = dependencies
            .toposort_and_graph()
            .map_err(ScheduleBuildError::FlatDependencySort)?;
        let placement = place_systems(order, flat, &stage_members, &boundaries);
        self.layout.0.store(placement.present, Ordering::Relaxed);
        for (before, after) in placement.edges {
            dependencies.add_edge(before, after);
        }
        Ok(())
    }
}

/// Every system in `set`, directly or through nested sets.
fn set_members(graph: &ScheduleGraph, set: InternedSystemSet) -> HashSet<SystemKey> {
    let mut found = HashSet::new();
    let Some(key) = graph.system_sets.get_key(set) else {
        return found;
    };
    let hierarchy = graph.hierarchy().graph();
    let mut stack = vec![NodeId::Set(key)];
    let mut seen = HashSet::new();
    while let Some(node) = stack.pop() {
        if !seen.insert(node) || !hierarchy.contains_node(node) {
            continue;
        }
        for child in hierarchy.neighbors_directed(node, Direction::Outgoing) {
            match child {
                NodeId::System(system) => {
                    found.insert(system);
                }
                NodeId::Set(_) => stack.push(child),
            }
        }
    }
    found
}

/// The edges that put each system between two boundaries, and which stages have systems.
#[derive(Debug, Default, PartialEq)]
struct Placement {
    edges: Vec<(SystemKey, SystemKey)>,
    present: u8,
}

/// Places every non-boundary system of `order` (see the module docs). `boundaries` has one system per
/// boundary, `STAGES + 1` of them.
fn place_systems(
    order: &[SystemKey],
    flat: &DiGraph<SystemKey>,
    stage_members: &[HashSet<SystemKey>; STAGES],
    boundaries: &[SystemKey],
) -> Placement {
    let has_members = |stage: usize| !stage_members[stage].is_empty();
    let reach = |direction: Direction| -> [HashSet<SystemKey>; STAGES] {
        std::array::from_fn(|stage| reachable(flat, &stage_members[stage], direction))
    };
    // after[s]: systems some member of stage s reaches; before[s]: systems that reach a member.
    let (after, before) = (reach(Direction::Outgoing), reach(Direction::Incoming));
    let first = boundaries[0];
    let last = boundaries[STAGES];
    let mut placement = Placement::default();
    for stage in (0..STAGES).filter(|&s| has_members(s)) {
        placement.present |= 1 << stage;
    }
    let stage_of: HashMap<SystemKey, usize> = stage_members
        .iter()
        .enumerate()
        .flat_map(|(stage, members)| members.iter().map(move |&system| (system, stage)))
        .collect();
    for &system in order {
        if boundaries.contains(&system) {
            continue;
        }
        placement.edges.push((first, system));
        placement.edges.push((system, last));
        if stage_of.contains_key(&system) {
            continue; // inside a stage set: the set order already places it
        }
        let follows = (0..STAGES).rev().find(|&s| after[s].contains(&system));
        let precedes = (0..STAGES).find(|&s| before[s].contains(&system));
        let (stage, ends_before) = match (follows, precedes) {
            (Some(a), Some(b)) if a == b => (a, None), // between members of one stage
            (_, Some(0)) => (0, None),                 // before the first stage's set
            (_, Some(b)) => {
                // Before stage `b`'s set: part of the last stage with systems before it.
                let stage = (0..b).rev().find(|&s| has_members(s)).unwrap_or(0);
                (stage, Some(boundaries[b]))
            }
            (Some(a), None) => {
                // Only after stage `a`'s set: ends before the next stage with systems begins.
                let next = (a + 1..STAGES).find(|&s| has_members(s)).unwrap_or(STAGES);
                (a, (next < STAGES).then(|| boundaries[next]))
            }
            (None, None) => continue, // unordered: somewhere in the camera's span
        };
        placement.present |= 1 << stage;
        if let Some(boundary) = ends_before {
            placement.edges.push((system, boundary));
        }
    }
    placement
}

/// Every node reachable from `from` in `direction` (`from` itself excluded unless on a path).
fn reachable(
    graph: &DiGraph<SystemKey>,
    from: &HashSet<SystemKey>,
    direction: Direction,
) -> HashSet<SystemKey> {
    let mut seen = HashSet::new();
    let mut stack: Vec<SystemKey> = from.iter().copied().collect();
    while let Some(node) = stack.pop() {
        for next in graph.neighbors_directed(node, direction) {
            if seen.insert(next) {
                stack.push(next);
            }
        }
    }
    seen
}

/// Main-world cameras with what their label is made of.
type CamerasToLabel<'w, 's> = Extract<
    'w,
    's,
    Query<
        'static,
        'static,
        (
            Entity,
            &'static RenderEntity,
            &'static Camera,
            Option<&'static Name>,
            Has<Camera3d>,
            Has<Camera2d>,
        ),
    >,
>;
/// Per camera: what the label was made from and the label.
type KnownCameraLabels = HashMap<Entity, (CameraLabelSource, Arc<str>)>;

/// What a camera's label is made from: its `Name`, else its kind and order.
#[derive(Clone, PartialEq)]
enum CameraLabelSource {
    Named(Name),
    Unnamed { kind: &'static str, order: isize },
}

impl CameraLabelSource {
    /// Stable across runs (never an entity id: the label goes into the report's stage, the Sentry
    /// fingerprint and the crash-loop key, which must not change with spawn order).
    fn label(&self) -> Arc<str> {
        match self {
            Self::Named(name) => name.as_str().into(),
            Self::Unnamed { kind, order } => format!("{kind} #{order}").into(),
        }
    }
}

/// Copies each camera's label to its render entity, allocating only when it changes.
fn extract_camera_labels(
    mut commands: Commands,
    cameras: CamerasToLabel,
    mut known: Local<KnownCameraLabels>,
) {
    for (entity, render_entity, camera, name, is_3d, is_2d) in &cameras {
        let source = match name {
            Some(name) => CameraLabelSource::Named(name.clone()),
            None => CameraLabelSource::Unnamed {
                kind: match (is_3d, is_2d) {
                    (true, _) => "Camera3d",
                    (false, true) => "Camera2d",
                    (false, false) => "Camera",
                },
                order: camera.order,
            },
        };
        let label = match known.get(&entity) {
            Some((old, label)) if *old == source => label.clone(),
            _ => {
                let label = source.label();
                known.insert(entity, (source, label.clone()));
                label
            }
        };
        commands
            .entity(render_entity.id())
            .insert(BreadcrumbCamera(label));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_skip_absent_stages_and_end_the_open_one() {
        let stock = 0b1011; // no EarlyPostProcess
        assert_eq!(boundary_marks(0, stock), Some((None, Some(0))));
        assert_eq!(boundary_marks(1, stock), Some((Some(0), Some(1))));
        assert_eq!(boundary_marks(2, stock), None);
        assert_eq!(boundary_marks(3, stock), Some((Some(1), Some(3))));
        assert_eq!(boundary_marks(4, stock), Some((Some(3), None)));
        assert_eq!(
            boundary_marks(0, 0b0010),
            None,
            "no prepass: nothing to begin"
        );
        assert_eq!(boundary_marks(1, 0b0010), Some((None, Some(1))));
        assert_eq!(
            boundary_marks(4, 0),
            None,
            "no stage at all: nothing to end"
        );
    }
}
