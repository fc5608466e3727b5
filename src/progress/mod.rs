//! GPU progress read from the GPU itself: marker values the GPU writes into mapped memory, next to a
//! ledger of what the render thread submitted. One mechanism serves the hang watchdog (which frame
//! did the GPU stop in) and the breadcrumbs (which stage of that frame).

mod breadcrumb;
mod hang_rule;
mod timeline;

pub use breadcrumb::{BreadcrumbState, FrameBreadcrumbs, GpuBreadcrumb};

pub(crate) use hang_rule::{HangRule, Stall};
pub(crate) use timeline::{FrameEntry, GpuTimeline};
