//! GPU progress read from the GPU itself: marker values the GPU writes into mapped memory, next to a
//! ledger of what the render thread submitted. One mechanism serves the hang watchdog (which frame
//! did the GPU stop in) and the breadcrumbs (which stage of that frame).

mod breadcrumb;
mod hang_rule;
mod timeline;

pub use breadcrumb::{BreadcrumbState, FrameBreadcrumbs, GpuBreadcrumb};

pub(crate) use hang_rule::{HangRule, Stall};

/// Label of the breadcrumb around a whole frame's GPU work.
pub const FRAME_LABEL: &str = "frame";

/// Label of the phase from the frame's start to the first camera's first stage: Bevy renders the
/// point- and spot-light shadow views there (each running the camera schedule, GPU preprocessing
/// included), before any camera.
pub const PRE_CAMERA_LABEL: &str = "Before cameras (shadow views, preprocessing)";
pub(crate) use timeline::{FrameEntry, GpuTimeline};
