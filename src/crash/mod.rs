//! Crash handling: per-device sessions, the hang watchdog, and the path from a device loss or a stall
//! to a report on disk and in the outbox.

pub(crate) mod bounded;
mod exit;
pub(crate) mod frames;
mod guard;
mod handler;
mod hang_then_loss;
pub(crate) mod panic_hook;
pub(crate) mod render_errors;
mod session;
mod uploads;
mod watchdog;

pub use exit::OnHang;

pub(crate) use guard::caught_panics;
pub(crate) use handler::CrashHandling;
pub use handler::CrashLoopLimit;
pub(crate) use session::DeviceSessions;
pub(crate) use watchdog::Watchdog;
