//! The render world's side: the device attached, the frame's GPU ledger, and device losses from
//! Bevy's `RenderErrorHandler`.

pub(crate) mod device;
pub(crate) mod frames;
pub(crate) mod render_errors;
