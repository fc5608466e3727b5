//! The ledger: pipelines registered once, the last frames' draw lists, and the ranked list a report
//! reads from them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::model::{
    PassPipelines, PipelineCandidate, PipelineInfo, PipelineUse, PipelineUsers, RunningBasis,
    RunningPipelines,
};

/// The draw list a pipeline noted by the application is shown in.
const NOTED: &str = "noted by the application";

/// Frames whose draw lists are kept: at least the frames a GPU can have in flight (Bevy: two, plus
/// the one being recorded), with room.
const FRAMES_KEPT: usize = 8;

/// Candidates a report lists.
const CANDIDATES_LISTED: usize = 8;

/// How long the crash path waits for the ledger's lock (held by the application for microseconds).
const LOCK_WAIT: Duration = Duration::from_millis(50);

struct Registered {
    info: PipelineInfo,
    users: PipelineUsers,
}

#[derive(Default)]
struct Ledger {
    pipelines: HashMap<u64, Registered>,
    /// `(frame, draw lists)`, oldest first.
    frames: VecDeque<(u64, Arc<Vec<PassPipelines>>)>,
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
    /// The same lists as the previous frame's are kept once, and copied only when they differ: a
    /// frame like the last allocates nothing.
    pub fn record_frame(&self, frame: u64, passes: &[PassPipelines]) {
        let mut ledger = self.lock();
        let lists = match ledger.frames.back() {
            Some((_, last)) if **last == *passes => last.clone(),
            _ => Arc::new(passes.to_vec()),
        };
        if ledger.frames.back().is_some_and(|(f, _)| *f == frame) {
            ledger.frames.pop_back();
        }
        if ledger.frames.len() == FRAMES_KEPT {
            ledger.frames.pop_front();
        }
        ledger.frames.push_back((frame, lists));
    }

    /// The application's own labelled GPU work (a breadcrumb `label`, no camera) runs `pipeline` in
    /// `frame`: e.g. a compute pass, which no draw list shows. Added to that frame's lists (after
    /// [`PipelineLedger::record_frame`] for it, when the application records draw lists too).
    pub fn note_running(&self, frame: u64, label: &'static str, pipeline: u64) {
        let mut ledger = self.lock();
        if ledger.frames.back().is_none_or(|(f, _)| *f != frame) {
            if ledger.frames.len() == FRAMES_KEPT {
                ledger.frames.pop_front();
            }
            ledger.frames.push_back((frame, Arc::default()));
        }
        let Some((_, lists)) = ledger.frames.back_mut() else {
            return;
        };
        // Copied when shared with the frame before (the draw lists of a frame like the last).
        let lists = Arc::make_mut(lists);
        let index = match lists
            .iter()
            .position(|l| l.stage == label && l.camera.is_none())
        {
            Some(i) => i,
            None => {
                lists.push(PassPipelines {
                    camera: None,
                    stage: label,
                    uses: Vec::new(),
                });
                lists.len() - 1
            }
        };
        let uses = &mut lists[index].uses;
        match uses.iter_mut().find(|u| u.pipeline == pipeline) {
            Some(used) => used.batches += 1,
            None => uses.push(PipelineUse {
                pipeline,
                pass: NOTED,
                batches: 1,
            }),
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
        let (_, lists) = ledger.frames.iter().rev().find(|(f, _)| *f <= frame)?;
        // Pipeline -> (batches, draw lists, first seen), in the order first listed.
        let mut found: Vec<(u64, u32, Vec<String>)> = Vec::new();
        for list in lists
            .iter()
            .filter(|l| l.stage == stage && l.camera.as_deref() == camera)
        {
            for used in &list.uses {
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
        }
        if found.is_empty() {
            return None;
        }
        let mut candidates: Vec<PipelineCandidate> = found
            .into_iter()
            .filter_map(|(id, batches, passes)| {
                let registered = ledger.pipelines.get(&id)?;
                Some(PipelineCandidate {
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
                })
            })
            .collect();
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
        })
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
    fn a_frame_not_recorded_reads_the_latest_one_before_it_and_old_frames_go() {
        let ledger = ledger();
        let at = |frame| {
            ledger
                .running_at(frame, None, "Before cameras")
                .map(|r| r.candidates.len())
        };
        for frame in 1..=20 {
            let n = if frame % 2 == 0 { 1 } else { 2 };
            let list = [(1, "Shadow", 1), (3, "Shadow", 1)];
            ledger.record_frame(
                frame,
                &[PassPipelines {
                    camera: None,
                    stage: "Before cameras",
                    uses: uses(&list[..n]),
                }],
            );
        }
        assert_eq!(at(20), Some(1));
        assert_eq!(at(19), Some(2));
        assert_eq!(at(25), Some(1), "a later frame reads the latest");
        assert_eq!(at(20 - FRAMES_KEPT as u64), None, "older than kept");
        // The same lists again: kept once (one allocation shared by both frames).
        let before = ledger.lock().frames.back().unwrap().1.clone();
        ledger.record_frame(
            21,
            &[PassPipelines {
                camera: None,
                stage: "Before cameras",
                uses: uses(&[(1, "Shadow", 1)]),
            }],
        );
        assert!(Arc::ptr_eq(
            &before,
            &ledger.lock().frames.back().unwrap().1
        ));
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
}
