//! GPU breadcrumbs as a report shows them: how far the GPU got with each labelled region of the
//! frames in flight. Part of the report model (re-exported by `report`).

use serde::{Deserialize, Serialize};

/// How far the GPU got with one breadcrumb.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreadcrumbState {
    /// Its end marker was written: all its work finished.
    Completed,
    /// Its begin marker was written, its end marker not: the GPU was inside it.
    Started,
    /// Neither marker was written.
    NotStarted,
}

impl BreadcrumbState {
    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Started => "started",
            Self::NotStarted => "not_started",
        }
    }

    /// In words, for people: `completed`, `started, not finished`, `not started`.
    pub fn describe(self) -> &'static str {
        match self {
            BreadcrumbState::Completed => "completed",
            BreadcrumbState::Started => "started, not finished",
            BreadcrumbState::NotStarted => "not started",
        }
    }
}

/// One labelled region of a frame's GPU work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuBreadcrumb {
    /// What ran, e.g. `Core3d MainPass`, or a game's own label.
    pub label: String,
    /// The camera it ran for (its `Name`, else its kind and order, e.g. `Camera3d #0`), if any.
    pub camera: Option<String>,
    /// How far the GPU got.
    pub state: BreadcrumbState,
}

impl GpuBreadcrumb {
    /// `Core3d MainPass of camera "main"`.
    pub fn describe(&self) -> String {
        match &self.camera {
            Some(camera) => format!("{} of camera {camera:?}", self.label),
            None => self.label.clone(),
        }
    }
}

/// The breadcrumbs of one frame still in flight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameBreadcrumbs {
    /// Frame number (the reporter's count of rendered frames).
    pub frame: u64,
    /// In recording order.
    pub breadcrumbs: Vec<GpuBreadcrumb>,
    /// Breadcrumbs the frame's marker budget had no room for: the list ran out after
    /// `breadcrumbs.len()` and these came later (0: nothing was dropped).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl FrameBreadcrumbs {
    /// `breadcrumbs ran out after N (M more not recorded)`, when the budget ran out.
    pub fn ran_out(&self) -> Option<String> {
        (self.dropped > 0).then(|| {
            format!(
                "breadcrumbs ran out after {} ({} more not recorded)",
                self.breadcrumbs.len(),
                self.dropped
            )
        })
    }

    /// The innermost breadcrumb the GPU was inside: the last one started and not finished.
    pub fn in_flight(&self) -> Option<&GpuBreadcrumb> {
        self.breadcrumbs
            .iter()
            .rev()
            .find(|b| b.state == BreadcrumbState::Started)
    }
}
