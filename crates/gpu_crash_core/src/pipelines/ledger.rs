//! The ledger: pipelines registered once, the draw lists as they changed, and the ranked list a report
//! reads from them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::model::{
    ExactDraws, PassPipelines, PipelineCandidate, PipelineInfo, PipelineKind, PipelineUse,
    PipelineUsers, RunningBasis, RunningPipelines,
};

/// The draw list a pipeline noted by the application is shown in.
const NOTED: &str = "noted by the application";

/// Changes of the draw lists kept: a frame's lists are the last change at or before it. A hung GPU
/// can be far behind the CPU (90 frames within a 3 s hang timeout on an H100 without a swapchain
/// to hold the CPU back), so what is kept is counted in changes, not frames: a scene whose lists
/// stay the same is covered however long ago the GPU stopped.
const CHANGES_KEPT: usize = 64;

/// Pipelines noted by the application kept (each a run of consecutive frames).
const NOTED_KEPT: usize = 64;

/// Candidates a report lists.
const CANDIDATES_LISTED: usize = 8;

/// How long the crash path waits for the ledger's lock (held by the application for microseconds).
const LOCK_WAIT: Duration = Duration::from_millis(50);

struct Registered {
    info: PipelineInfo,
    users: PipelineUsers,
}

/// A pipeline the application noted in its own labelled work, over a run of consecutive frames.
struct Noted {
    label: &'static str,
    pipeline: u64,
    first: u64,
    last: u64,
    /// Times noted in frame `last`.
    times: u32,
}

#[derive(Default)]
struct Ledger {
    pipelines: HashMap<u64, Registered>,
    /// `(first frame, draw lists)` at each change of the lists, oldest first.
    changes: VecDeque<(u64, Arc<Vec<PassPipelines>>)>,
    /// Oldest first.
    noted: VecDeque<Noted>,
}

/// The same pipelines in the same draw lists, batch counts aside.
fn same_pipelines(a: &[PassPipelines], b: &[PassPipelines]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.camera == b.camera
                && a.stage == b.stage
                && a.uses.len() == b.uses.len()
                && a.uses
                    .iter()
                    .zip(&b.uses)
                    .all(|(a, b)| a.pipeline == b.pipeline && a.pass == b.pass)
        })
}

/// See the module documentation. One per device (pipelines belong to it); cheap to clone.
#[derive(Clone, Default)]
pub struct PipelineLedger(Arc<Mutex<Ledger>>);

impl PipelineLedger {
    fn lock(&self) -> MutexGuard<'_, Ledger> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The application created pipeline `id` (its own id, stable while the device lives).
    pub fn register(&self, id: u64, info: PipelineInfo) {
        self.lock().pipelines.insert(
            id,
            Registered {
                info,
                users: PipelineUsers::default(),
            },
        );
    }

    /// Pipelines registered so far.
    pub fn registered(&self) -> usize {
        self.lock().pipelines.len()
    }

    /// Who draws with pipeline `id` now (replaces what was said before); ignored for an id never
    /// registered.
    pub fn set_users(&self, id: u64, users: PipelineUsers) {
        if let Some(registered) = self.lock().pipelines.get_mut(&id) {
            registered.users = users;
        }
    }

    /// The draw lists of GPU frame `frame` (the frame the application's GPU ledger began last).
    /// Kept as a change only when its pipelines differ from the last change's; batch counts alone
    /// update the last change in place. A frame like the last allocates nothing.
    pub fn record_frame(&self, frame: u64, passes: &[PassPipelines]) {
        let mut ledger = self.lock();
        if let Some((_, last)) = ledger.changes.back_mut() {
            if same_pipelines(last, passes) {
                if **last != *passes {
                    // Same shape: only the counts are written (no list is reallocated).
                    let uses = Arc::make_mut(last)
                        .iter_mut()
                        .flat_map(|l| l.uses.iter_mut());
                    for (kept, now) in uses.zip(passes.iter().flat_map(|l| l.uses.iter())) {
                        kept.batches = now.batches;
                    }
                }
                return;
            }
        }
        if ledger.changes.back().is_some_and(|(f, _)| *f == frame) {
            ledger.changes.pop_back();
        }
        if ledger.changes.len() == CHANGES_KEPT {
            ledger.changes.pop_front();
        }
        ledger.changes.push_back((frame, Arc::new(passes.to_vec())));
    }

    /// The application's own labelled GPU work (a breadcrumb `label`, no camera) runs `pipeline` in
    /// `frame`: e.g. a compute pass, which no draw list shows.
    pub fn note_running(&self, frame: u64, label: &'static str, pipeline: u64) {
        let mut ledger = self.lock();
        let run = ledger.noted.iter_mut().rev().find(|n| {
            n.label == label && n.pipeline == pipeline && (n.last == frame || n.last + 1 == frame)
        });
        match run {
            Some(run) if run.last == frame => run.times += 1,
            Some(run) => {
                run.last = frame;
                run.times = 1;
            }
            None => {
                if ledger.noted.len() == NOTED_KEPT {
                    ledger.noted.pop_front();
                }
                ledger.noted.push_back(Noted {
                    label,
                    pipeline,
                    first: frame,
                    last: frame,
                    times: 1,
                });
            }
        }
    }

    /// The pipelines queued in `stage` of `camera` in `frame` (or the latest recorded frame before
    /// it), ranked. `None` when nothing was recorded for it, or when the application held the
    /// lock longer than the crash path waits.
    pub(crate) fn running_at(
        &self,
        frame: u64,
        camera: Option<&str>,
        stage: &str,
    ) -> Option<RunningPipelines> {
        let ledger = crate::time_box::try_lock_for(&self.0, LOCK_WAIT)?;
        let mut candidates = queued_in(&ledger, frame, camera, stage);
        if candidates.is_empty() {
            return None;
        }
        // Stable: equal candidates keep the application's order.
        candidates.sort_by_key(|c| (!c.shaders.iter().any(|s| s.is_own()), u32::MAX - c.batches));
        candidates.truncate(CANDIDATES_LISTED);
        for (rank, candidate) in candidates.iter_mut().enumerate() {
            candidate.rank = rank as u32 + 1;
        }
        Some(RunningPipelines {
            basis: RunningBasis::QueuedInStage,
            frame,
            camera: camera.map(str::to_owned),
            stage: stage.to_owned(),
            candidates,
            exact: None,
        })
    }

    /// Exact mode: the pipeline of the first draw or dispatch the GPU did not finish, as the
    /// application registered it. Looked for by its label among the pipelines queued in the stage
    /// the GPU stopped in (`frame`, `camera`, `stage`, from the breadcrumbs), in the order the
    /// application listed them, taking the one at the draw's place among pipelines of that label
    /// (engines label many pipelines alike: Bevy names every custom material's main pipeline
    /// `opaque_mesh_pipeline`); else among every registered pipeline of that label when there is
    /// exactly one; else named by the label alone. `None` when the GPU had finished every marked
    /// command, or when the first unfinished one shares its marker with others (then the ranked
    /// list stands, with `exact` beside it: see [`ExactCommand::sharing_marker`]).
    ///
    /// [`ExactCommand::sharing_marker`]: super::ExactCommand::sharing_marker
    pub(crate) fn exact_at(
        &self,
        frame: u64,
        camera: Option<&str>,
        stage: &str,
        exact: ExactDraws,
    ) -> Option<RunningPipelines> {
        let command = exact.first_unfinished.as_ref()?;
        if command.sharing_marker > 1 {
            let mut ranked = self.running_at(frame, camera, stage)?;
            ranked.exact = Some(exact);
            return Some(ranked);
        }
        let label = command.pipeline_label.clone();
        let candidate = crate::time_box::try_lock_for(&self.0, LOCK_WAIT).and_then(|ledger| {
            let label = label.as_deref()?;
            let mut alike: Vec<PipelineCandidate> = queued_in(&ledger, frame, camera, stage)
                .into_iter()
                .filter(|c| c.label.as_deref() == Some(label))
                .collect();
            if alike.is_empty() {
                let mut registered = ledger
                    .pipelines
                    .iter()
                    .filter(|(_, r)| r.info.label.as_deref() == Some(label));
                if let (Some((_, only)), None) = (registered.next(), registered.next()) {
                    alike.push(candidate_of(only, Vec::new(), 0));
                }
            }
            let at = (command.same_label_ordinal as usize).min(alike.len().checked_sub(1)?);
            Some(alike.swap_remove(at))
        });
        let mut candidate = candidate.unwrap_or_else(|| PipelineCandidate {
            rank: 0,
            label,
            kind: if command.kind == "dispatch" {
                PipelineKind::Compute
            } else {
                PipelineKind::Render
            },
            shaders: Vec::new(),
            shader_defs: Vec::new(),
            passes: command.labels.last().cloned().into_iter().collect(),
            batches: 0,
            material: None,
            entities: Vec::new(),
            entity_count: 0,
        });
        candidate.rank = 1;
        Some(RunningPipelines {
            basis: RunningBasis::Exact,
            frame,
            camera: camera.map(str::to_owned),
            stage: stage.to_owned(),
            candidates: vec![candidate],
            exact: Some(exact),
        })
    }
}

/// The pipelines queued in `stage` of `camera` in `frame` (the last change at or before it) and
/// those the application noted there, in the order the application listed them (unranked).
fn queued_in(
    ledger: &Ledger,
    frame: u64,
    camera: Option<&str>,
    stage: &str,
) -> Vec<PipelineCandidate> {
    let lists = ledger
        .changes
        .iter()
        .rev()
        .find(|(f, _)| *f <= frame)
        .map(|(_, lists)| lists.as_slice())
        .unwrap_or_default();
    let noted = ledger
        .noted
        .iter()
        .filter(|n| camera.is_none() && n.label == stage && (n.first..=n.last).contains(&frame))
        .map(|n| PipelineUse {
            pipeline: n.pipeline,
            pass: NOTED,
            batches: if n.last == frame { n.times } else { 1 },
        });
    let queued = lists
        .iter()
        .filter(|l| l.stage == stage && l.camera.as_deref() == camera)
        .flat_map(|l| l.uses.iter().copied());
    // Pipeline -> (batches, draw lists), in the order first listed.
    let mut found: Vec<(u64, u32, Vec<String>)> = Vec::new();
    for used in queued.chain(noted) {
        match found.iter_mut().find(|(id, ..)| *id == used.pipeline) {
            Some((_, batches, passes)) => {
                *batches += used.batches;
                if !passes.iter().any(|p| p == used.pass) {
                    passes.push(used.pass.to_owned());
                }
            }
            None => found.push((used.pipeline, used.batches, vec![used.pass.to_owned()])),
        }
    }
    found
        .into_iter()
        .filter_map(|(id, batches, passes)| {
            Some(candidate_of(ledger.pipelines.get(&id)?, passes, batches))
        })
        .collect()
}

fn candidate_of(registered: &Registered, passes: Vec<String>, batches: u32) -> PipelineCandidate {
    PipelineCandidate {
        rank: 0,
        label: registered.info.label.clone(),
        kind: registered.info.kind,
        shaders: registered.info.shaders.clone(),
        shader_defs: registered.info.shader_defs.clone(),
        passes,
        batches,
        material: registered.users.material.clone(),
        entities: registered.users.entities.clone(),
        entity_count: registered.users.entity_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipelines::{DrawnEntity, PipelineKind, ShaderStage};

    fn info(label: &str, fragment: &str) -> PipelineInfo {
        PipelineInfo {
            label: Some(label.into()),
            kind: PipelineKind::Render,
            shaders: vec![
                ShaderStage {
                    stage: "vertex".into(),
                    path: Some("embedded://bevy_pbr/render/mesh.wgsl".into()),
                    entry_point: Some("vertex".into()),
                },
                ShaderStage {
                    stage: "fragment".into(),
                    path: Some(fragment.into()),
                    entry_point: Some("fragment".into()),
                },
            ],
            shader_defs: vec!["VERTEX_UVS".into()],
        }
    }

    fn uses(list: &[(u64, &'static str, u32)]) -> Vec<PipelineUse> {
        list.iter()
            .map(|&(pipeline, pass, batches)| PipelineUse {
                pipeline,
                pass,
                batches,
            })
            .collect()
    }

    fn ledger() -> PipelineLedger {
        let ledger = PipelineLedger::default();
        ledger.register(
            1,
            info(
                "opaque_mesh_pipeline",
                "embedded://bevy_pbr/render/pbr.wgsl",
            ),
        );
        ledger.register(2, info("opaque_mesh_pipeline", "shaders/water.wgsl"));
        ledger.register(
            3,
            info(
                "prepass_pipeline",
                "embedded://bevy_pbr/prepass/prepass.wgsl",
            ),
        );
        ledger.set_users(
            2,
            PipelineUsers {
                material: Some("game::WaterMaterial".into()),
                entities: vec![DrawnEntity {
                    shown_as: "12v1".into(),
                    name: Some("lake".into()),
                }],
                entity_count: 1,
            },
        );
        ledger
    }

    #[test]
    fn the_stopped_stage_lists_its_pipelines_own_shaders_first() {
        let ledger = ledger();
        let main: Arc<str> = Arc::from("main");
        ledger.record_frame(
            10,
            &[
                PassPipelines {
                    camera: Some(main.clone()),
                    stage: "Core3d Prepass",
                    uses: uses(&[(3, "Opaque3dPrepass", 9)]),
                },
                PassPipelines {
                    camera: Some(main.clone()),
                    stage: "Core3d MainPass",
                    uses: uses(&[
                        (1, "Opaque3d", 9),
                        (2, "Opaque3d", 1),
                        (1, "Transparent3d", 2),
                    ]),
                },
            ],
        );
        let running = ledger
            .running_at(10, Some("main"), "Core3d MainPass")
            .unwrap();
        assert_eq!(running.basis, RunningBasis::QueuedInStage);
        let ranked: Vec<_> = running
            .candidates
            .iter()
            .map(|c| (c.rank, c.material.clone(), c.batches, c.passes.clone()))
            .collect();
        assert_eq!(
            ranked,
            vec![
                (
                    1,
                    Some("game::WaterMaterial".into()),
                    1,
                    vec!["Opaque3d".into()]
                ),
                (
                    2,
                    None,
                    11,
                    vec!["Opaque3d".to_owned(), "Transparent3d".to_owned()]
                ),
            ]
        );
        assert_eq!(
            running.candidates[0].describe(),
            "WaterMaterial (shaders/water.wgsl, pipeline \"opaque_mesh_pipeline\")"
        );
        assert_eq!(
            running.candidates[0].entities[0].name.as_deref(),
            Some("lake")
        );
        // Another camera, or a stage with nothing queued: nothing to say.
        assert!(ledger
            .running_at(10, Some("minimap"), "Core3d MainPass")
            .is_none());
        assert!(ledger
            .running_at(10, Some("main"), "Core3d PostProcess")
            .is_none());
    }

    #[test]
    fn a_frame_reads_the_last_change_before_it_however_far_the_cpu_ran_ahead() {
        let ledger = ledger();
        let at = |frame| {
            ledger
                .running_at(frame, None, "Before cameras")
                .map(|r| r.candidates.len())
        };
        let lists = |n: usize| {
            let list = [(1, "Shadow", 1), (3, "Shadow", 1)];
            [PassPipelines {
                camera: None,
                stage: "Before cameras",
                uses: uses(&list[..n]),
            }]
        };
        ledger.record_frame(70, &lists(2));
        ledger.record_frame(77, &lists(1));
        // The GPU hung in frame 77; the CPU went on recording (an H100 without a swapchain: 90
        // frames within the 3 s timeout) the same lists.
        for frame in 78..=300 {
            ledger.record_frame(frame, &lists(1));
        }
        assert_eq!(at(77), Some(1));
        assert_eq!(at(76), Some(2), "the change before");
        assert_eq!(at(69), None, "before anything was recorded");
        assert_eq!(ledger.lock().changes.len(), 2, "one change per new set");
        // Batch counts alone change the last change in place; no allocation for a frame like it.
        let mut more = lists(1);
        more[0].uses[0].batches = 5;
        ledger.record_frame(301, &more);
        assert_eq!(ledger.lock().changes.len(), 2);
        ledger.record_frame(302, &more);
        assert_eq!(
            ledger
                .running_at(302, None, "Before cameras")
                .unwrap()
                .candidates[0]
                .batches,
            5
        );
        // Many changes: only the last CHANGES_KEPT are kept.
        for frame in 400..400 + CHANGES_KEPT as u64 + 1 {
            ledger.record_frame(frame, &lists(1 + (frame % 2) as usize));
        }
        assert_eq!(ledger.lock().changes.len(), CHANGES_KEPT);
        assert_eq!(at(302), None, "older than every change kept");
    }

    #[test]
    fn a_pipeline_noted_in_a_breadcrumb_is_listed_under_it() {
        let ledger = ledger();
        ledger.register(
            7,
            PipelineInfo {
                label: Some("particle_simulation_pipeline".into()),
                kind: PipelineKind::Compute,
                shaders: vec![ShaderStage {
                    stage: "compute".into(),
                    path: Some("shaders/particles.wgsl".into()),
                    entry_point: Some("main".into()),
                }],
                shader_defs: vec![],
            },
        );
        let lists = [PassPipelines {
            camera: None,
            stage: "Before cameras",
            uses: uses(&[(1, "Shadow", 1)]),
        }];
        ledger.record_frame(4, &lists);
        ledger.record_frame(5, &lists);
        // Twice in frame 5 (one dispatch per view), none in frame 4.
        ledger.note_running(5, "particles", 7);
        ledger.note_running(5, "particles", 7);
        let running = ledger.running_at(5, None, "particles").unwrap();
        assert_eq!(running.candidates.len(), 1);
        let c = &running.candidates[0];
        assert_eq!(c.kind, PipelineKind::Compute);
        assert_eq!(
            (c.batches, c.passes.as_slice()),
            (2, [NOTED.to_owned()].as_slice())
        );
        assert_eq!(c.main_shader(), Some("shaders/particles.wgsl"));
        // The frame before kept its own lists (they were shared until the note).
        assert!(ledger.running_at(4, None, "particles").is_none());
        assert!(ledger.running_at(5, None, "Before cameras").is_some());
        // A frame no draw list was recorded for (a wgpu application without them).
        ledger.note_running(6, "particles", 7);
        assert_eq!(
            ledger
                .running_at(6, None, "particles")
                .unwrap()
                .candidates
                .len(),
            1
        );
    }

    #[test]
    fn an_unregistered_pipeline_is_left_out() {
        let ledger = ledger();
        ledger.record_frame(
            1,
            &[PassPipelines {
                camera: None,
                stage: "s",
                uses: uses(&[(99, "Opaque3d", 1), (1, "Opaque3d", 1)]),
            }],
        );
        let running = ledger.running_at(1, None, "s").unwrap();
        assert_eq!(running.candidates.len(), 1);
        assert_eq!(running.candidates[0].rank, 1);
    }

    fn exact(label: Option<&str>, ordinal: u32, sharing: u32) -> ExactDraws {
        ExactDraws {
            marker: "amd_buffer_marker".into(),
            marked: 10,
            unfinished: 2,
            last_finished: None,
            first_unfinished: Some(crate::pipelines::ExactCommand {
                kind: "draw".into(),
                pipeline_label: label.map(str::to_owned),
                labels: vec!["main_opaque_pass_3d".into()],
                index_in_command_buffer: 3,
                same_label_ordinal: ordinal,
                sharing_marker: sharing,
            }),
        }
    }

    #[test]
    fn exact_mode_names_the_pipeline_of_the_draw_by_label_and_place_among_alike() {
        let ledger = ledger();
        // Three pipelines labelled alike (the engine's, two custom materials), queued 1, 2, 4.
        ledger.register(4, info("opaque_mesh_pipeline", "shaders/glow.wgsl"));
        ledger.record_frame(
            10,
            &[PassPipelines {
                camera: Some(Arc::from("main")),
                stage: "Core3d MainPass",
                uses: uses(&[(1, "Opaque3d", 9), (2, "Opaque3d", 1), (4, "Opaque3d", 1)]),
            }],
        );
        let at = |e| {
            ledger
                .exact_at(10, Some("main"), "Core3d MainPass", e)
                .unwrap()
        };
        let first = at(exact(Some("opaque_mesh_pipeline"), 0, 1));
        assert_eq!(first.basis, RunningBasis::Exact);
        assert_eq!(first.candidates.len(), 1);
        assert_eq!(
            first.candidates[0].main_shader(),
            Some("embedded://bevy_pbr/render/pbr.wgsl")
        );
        let second = at(exact(Some("opaque_mesh_pipeline"), 1, 1));
        assert_eq!(
            second.candidates[0].main_shader(),
            Some("shaders/water.wgsl")
        );
        assert_eq!(
            second.candidates[0].material.as_deref(),
            Some("game::WaterMaterial")
        );
        let third = at(exact(Some("opaque_mesh_pipeline"), 2, 1));
        assert_eq!(third.candidates[0].main_shader(), Some("shaders/glow.wgsl"));
        // A label queued nowhere in the stage but registered once: that pipeline.
        let prepass = at(exact(Some("prepass_pipeline"), 0, 1));
        assert_eq!(
            prepass.candidates[0].label.as_deref(),
            Some("prepass_pipeline")
        );
        assert!(!prepass.candidates[0].shaders.is_empty());
        // A label the application never registered: named by the label alone.
        let unknown = at(exact(Some("quads pipeline"), 0, 1));
        assert_eq!(
            unknown.candidates[0].label.as_deref(),
            Some("quads pipeline")
        );
        assert!(unknown.candidates[0].shaders.is_empty());
        assert_eq!(unknown.candidates[0].passes, ["main_opaque_pass_3d"]);
        // A marker shared by the draws of a render pass: the ranked list stands, the record beside.
        let shared = at(exact(Some("opaque_mesh_pipeline"), 0, 3));
        assert_eq!(shared.basis, RunningBasis::QueuedInStage);
        assert_eq!(shared.candidates.len(), 3);
        assert_eq!(
            shared
                .exact
                .unwrap()
                .first_unfinished
                .unwrap()
                .sharing_marker,
            3
        );
        // Nothing unfinished: nothing exact to say.
        let mut done = exact(None, 0, 1);
        done.first_unfinished = None;
        assert!(ledger
            .exact_at(10, Some("main"), "Core3d MainPass", done)
            .is_none());
    }
}
