//! Per-device command pool and command buffer bookkeeping: each command buffer's pool (queue family),
//! level and render pass state, so the layer's own commands land only where they are valid
//! (the hooks that keep it are in `commands.rs`).

use std::collections::{HashMap, HashSet};

/// Where a command buffer's recording stands with respect to render pass instances.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum PassState {
    #[default]
    Outside,
    /// Inside a render pass instance (or a secondary command buffer that continues one).
    Inside {
        /// A dynamic rendering instance begun with `VK_RENDERING_SUSPENDING_BIT`.
        suspending: bool,
    },
    /// After a suspended dynamic rendering instance: no action or synchronization command may be
    /// recorded until it resumes (in this or a later command buffer).
    Suspended,
}

#[derive(Clone, Copy, Debug)]
struct CommandBufferState {
    pool: u64,
    primary: bool,
    pass: PassState,
    /// The `hang-in-pass` label began (or the `hang-in-pipeline` pipeline was bound) inside a render
    /// pass instance: the wait goes in right after the instance ends (the first valid point after
    /// it).
    hang_pending: bool,
    /// This recording bound the `hang-in-pipeline` pipeline after the threshold (and was counted
    /// toward its `#n` already).
    bound_hang_pipeline: bool,
}

/// Per-device command pool and command buffer bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct CommandTracker {
    /// Pool → queue family index.
    pools: HashMap<u64, u32>,
    buffers: HashMap<u64, CommandBufferState>,
    /// `hang-in-pipeline` only: the live pipelines whose debug name is its label (kept from
    /// `vkSetDebugUtilsObjectNameEXT`, dropped on a rename and on `vkDestroyPipeline`).
    hang_pipelines: HashSet<u64>,
    pub(crate) marker_in_pass_warned: bool,
}

impl CommandTracker {
    pub(crate) fn create_pool(&mut self, pool: u64, family: u32) {
        self.pools.insert(pool, family);
    }

    /// Forgets a destroyed pool and its command buffers; returns those.
    pub(crate) fn destroy_pool(&mut self, pool: u64) -> Vec<u64> {
        self.pools.remove(&pool);
        let gone = self.pool_buffers(pool);
        for cb in &gone {
            self.buffers.remove(cb);
        }
        gone
    }

    /// The command buffers of `pool` (for a pool reset).
    pub(crate) fn pool_buffers(&self, pool: u64) -> Vec<u64> {
        self.buffers
            .iter()
            .filter(|(_, s)| s.pool == pool)
            .map(|(&cb, _)| cb)
            .collect()
    }

    pub(crate) fn allocate(&mut self, pool: u64, primary: bool, buffers: &[u64]) {
        for &cb in buffers {
            self.buffers.insert(
                cb,
                CommandBufferState {
                    pool,
                    primary,
                    pass: PassState::Outside,
                    hang_pending: false,
                    bound_hang_pipeline: false,
                },
            );
        }
    }

    pub(crate) fn free(&mut self, buffers: &[u64]) {
        for cb in buffers {
            self.buffers.remove(cb);
        }
    }

    /// `vkBeginCommandBuffer` / a reset: recording starts outside any render pass, except for a
    /// secondary command buffer that continues one.
    pub(crate) fn begin(&mut self, cb: u64, continues_pass: bool) {
        if let Some(s) = self.buffers.get_mut(&cb) {
            s.hang_pending = false;
            s.bound_hang_pipeline = false;
            s.pass = if continues_pass && !s.primary {
                PassState::Inside { suspending: false }
            } else {
                PassState::Outside
            };
        }
    }

    pub(crate) fn begin_pass(&mut self, cb: u64, suspending: bool) {
        if let Some(s) = self.buffers.get_mut(&cb) {
            s.pass = PassState::Inside { suspending };
        }
    }

    /// A render pass instance ended; true when recording is now outside any instance.
    pub(crate) fn end_pass(&mut self, cb: u64) -> bool {
        let Some(s) = self.buffers.get_mut(&cb) else {
            return false;
        };
        s.pass = match s.pass {
            PassState::Inside { suspending: true } => PassState::Suspended,
            _ => PassState::Outside,
        };
        s.pass == PassState::Outside
    }

    /// The queue family of a known primary command buffer recording outside any render pass: where
    /// the layer may insert its own synchronization commands.
    pub(crate) fn insertable(&self, cb: u64) -> Option<u32> {
        let s = self.buffers.get(&cb)?;
        if !s.primary || s.pass != PassState::Outside {
            return None;
        }
        self.pools.get(&s.pool).copied()
    }

    /// The queue family of a known primary command buffer, wherever its recording stands.
    pub(crate) fn primary_family(&self, cb: u64) -> Option<u32> {
        let s = self.buffers.get(&cb).filter(|s| s.primary)?;
        self.pools.get(&s.pool).copied()
    }

    pub(crate) fn defer_hang(&mut self, cb: u64) {
        if let Some(s) = self.buffers.get_mut(&cb) {
            s.hang_pending = true;
        }
    }

    /// Takes the deferred hang of `cb` once recording is outside any render pass instance.
    pub(crate) fn take_hang_pending(&mut self, cb: u64) -> bool {
        match self.buffers.get_mut(&cb) {
            Some(s) if s.hang_pending && s.pass == PassState::Outside => {
                s.hang_pending = false;
                true
            }
            _ => false,
        }
    }

    /// `vkSetDebugUtilsObjectNameEXT` on a pipeline: `matches` when the new name is the
    /// `hang-in-pipeline` label (any other name, or none, drops it).
    pub(crate) fn name_pipeline(&mut self, pipeline: u64, matches: bool) {
        if matches {
            self.hang_pipelines.insert(pipeline);
        } else {
            self.hang_pipelines.remove(&pipeline);
        }
    }

    /// `vkDestroyPipeline`: the driver may hand the handle out again, to a pipeline of another name
    /// or none.
    pub(crate) fn forget_pipeline(&mut self, pipeline: u64) {
        self.hang_pipelines.remove(&pipeline);
    }

    /// True when `pipeline` carries the `hang-in-pipeline` label.
    pub(crate) fn is_hang_pipeline(&self, pipeline: u64) -> bool {
        self.hang_pipelines.contains(&pipeline)
    }

    /// A bind of the `hang-in-pipeline` pipeline in `cb`: true for the first one of this recording
    /// (each command buffer counts once toward `#n`).
    pub(crate) fn first_hang_pipeline_bind(&mut self, cb: u64) -> bool {
        self.buffers
            .get_mut(&cb)
            .is_some_and(|s| !std::mem::replace(&mut s.bound_hang_pipeline, true))
    }

    /// True when a known command buffer is inside (or between the parts of) a render pass instance.
    pub(crate) fn in_pass(&self, cb: u64) -> bool {
        self.buffers
            .get(&cb)
            .is_some_and(|s| s.pass != PassState::Outside)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_pass_state_follows_levels_and_instances() {
        let mut t = CommandTracker::default();
        t.create_pool(1, 3);
        t.allocate(1, true, &[10]);
        t.allocate(1, false, &[11]);
        t.begin(10, false);
        assert!(!t.in_pass(10));
        t.begin_pass(10, false);
        assert!(t.in_pass(10));
        assert!(t.end_pass(10));
        assert!(!t.in_pass(10));
        // A suspended dynamic rendering instance counts as inside until it ends for good.
        t.begin_pass(10, true);
        assert!(!t.end_pass(10));
        assert!(t.in_pass(10));
        t.begin_pass(10, false);
        assert!(t.end_pass(10));
        // A secondary that continues a render pass is inside it; a primary never "continues".
        t.begin(11, true);
        assert!(t.in_pass(11));
        t.begin(10, true);
        assert!(!t.in_pass(10));
        // Insertion points: primaries outside any render pass, with their pool's family.
        assert_eq!(t.insertable(10), Some(3));
        t.begin_pass(10, false);
        assert_eq!(t.insertable(10), None);
        assert_eq!(t.insertable(11), None);
        // Unknown command buffers are never "inside" and never insertion points.
        assert!(!t.in_pass(99));
        assert_eq!(t.insertable(99), None);
        assert_eq!(t.destroy_pool(1).len(), 2);
        assert!(t.pool_buffers(1).is_empty());
    }

    #[test]
    fn hang_pipelines_follow_names_and_destroys_and_count_once_per_recording() {
        let mut t = CommandTracker::default();
        t.name_pipeline(7, true);
        t.name_pipeline(8, false);
        assert!(t.is_hang_pipeline(7) && !t.is_hang_pipeline(8));
        // Renamed to another name: no longer the target.
        t.name_pipeline(7, false);
        assert!(!t.is_hang_pipeline(7));
        // Destroyed: a later pipeline with the same handle is not the target until named so.
        t.name_pipeline(7, true);
        t.forget_pipeline(7);
        assert!(!t.is_hang_pipeline(7));
        t.create_pool(1, 0);
        t.allocate(1, true, &[10]);
        t.begin(10, false);
        assert!(t.first_hang_pipeline_bind(10));
        assert!(!t.first_hang_pipeline_bind(10));
        // A new recording counts again; an unknown command buffer never does.
        t.begin(10, false);
        assert!(t.first_hang_pipeline_bind(10));
        assert!(!t.first_hang_pipeline_bind(99));
    }
}
