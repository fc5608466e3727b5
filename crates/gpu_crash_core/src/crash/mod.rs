//! Crash handling: per-device sessions, the device's GPU ledger and breadcrumbs, the hang watchdog,
//! and the path from a device loss or a stall to a report on disk and in the outbox.

mod breadcrumbs;
mod closing;
mod earlier_hang;
mod exit;
mod fault_watch;
mod frames;
mod handler;
mod hang_then_loss;
mod loss_turns;
pub(crate) mod panic_hook;
mod session;
mod uploads;
mod watch_thread;
mod watchdog;
mod written;

pub use breadcrumbs::{BreadcrumbRecorder, Mark};
pub(crate) use exit::exit_now;
pub(crate) use fault_watch::start as start_fault_watch;
pub(crate) use handler::{CrashHandling, CrashSettings};
pub(crate) use session::{DeviceCallbacks, DeviceSessions};
pub(crate) use watchdog::Watchdog;
pub use written::WrittenReports;
