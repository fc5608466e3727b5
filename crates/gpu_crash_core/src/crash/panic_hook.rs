//! A game that panics after the GPU was lost, before Bevy's render error handler ran, still gets its
//! loss report.
//!
//! Bevy learns of a device loss from wgpu's device-lost callback but acts on it only at the next
//! extract; the rest of the frame runs on a lost device, and Bevy code that maps a buffer created
//! then panics (`Buffer::get_mapped_range`: "Buffer with '' label is invalid", measured on lavapipe
//! with a loss at the mesh slab resize submit). Without this hook that panic ends the process and
//! the loss is never reported.
//!
//! On a panic the hook asks wgpu whether the device is lost: `Device::poll(Poll)` panics with
//! "Parent device is lost" on a lost device (wgpu 29 treats it as fatal), so the probe runs on its
//! own thread, bounded in time, its panic caught and kept quiet. Lost: the loss report is written
//! and its upload waited for (bounded) before the previous hook prints the panic.
//!
//! A panic raised inside wgpu on a lost device, on a thread of the application (reported by the
//! panic or before it, such as wgpu's "Error in Device::poll" in a loop that polls on after the
//! loss: `Device::poll` often learns of the loss first), then ends the process, when
//! `end_process_after_loss` is on (the default), as the application's own end after a loss does:
//! the panic in one line, the reporter's closing lines last on stderr, exit code 101 (a panic's),
//! no backtrace, no unwinding into code that goes on calling the lost device, and no exit handlers
//! tearing the driver down under its threads. A panic of the application's own code, which it may
//! catch, and one on a thread of ours go on as before.
//!
//! All of the hook's own work runs on a thread of its own, under [`guarded`]: a second panic on the
//! panicking thread, inside its hook, would abort the process, whatever catches it.

use std::panic::PanicHookInfo;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::CrashHandling;
use crate::guard::guarded;
use crate::time_box::with_timeout;

/// The app whose crash path the hook serves (the last one built in this process).
static CURRENT: Mutex<Option<CrashHandling>> = Mutex::new(None);
/// Installed once per process.
static INSTALLED: OnceLock<()> = OnceLock::new();
/// Name of the probe's thread: its own (expected) panic is not reported nor printed.
const PROBE_THREAD: &str = "gpu-crash-loss-probe";
/// Name of the thread that does the hook's work: a panic there is ours, caught by [`guarded`];
/// the hook only lets the previous hook print it (no probe for it, no recursion).
const HOOK_THREAD: &str = "gpu-crash-panic-hook";
/// The exit code after a panic on a lost device, when the settings end the process after a loss:
/// the code the panic would have ended the process with (Rust's 101).
const PANIC_EXIT_CODE: i32 = 101;
/// How long the probe may take: a lost device answers at once; a hung wgpu lock does not.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Serves `crash` from now on, installing the hook the first time.
pub(crate) fn install(crash: CrashHandling) {
    *CURRENT.lock().unwrap_or_else(|p| p.into_inner()) = Some(crash);
    INSTALLED.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            match std::thread::current().name() {
                Some(PROBE_THREAD) => return, // the probe's answer, not a crash
                Some(HOOK_THREAD) => return previous(info),
                _ => {}
            }
            // Only a panic raised inside wgpu, on a thread of the application, may end the
            // process (below): a panic of the game's own code (perhaps caught by it) or of one of
            // our threads (contained by `guarded`) goes on as before.
            let may_end = from_wgpu(info)
                && !std::thread::current()
                    .name()
                    .is_some_and(|name| name.starts_with(OUR_THREADS));
            let message = panic_message(info);
            let panic_line = format!(
                "{} panicked at {}: {}",
                std::thread::current().name().unwrap_or("a thread"),
                info.location().map_or_else(String::new, |l| l.to_string()),
                message.lines().next().unwrap_or_default()
            );
            // Bounded by the probe, the report and its upload: the same bound the app's exit
            // allows the crash path.
            let hook_work = std::thread::Builder::new()
                .name(HOOK_THREAD.into())
                .spawn(move || guarded("panic hook", || report_if_lost(&message)).flatten());
            let end_with = hook_work
                .ok()
                .and_then(|thread| thread.join().ok().flatten())
                .filter(|_| may_end);
            let Some(crash) = end_with else {
                return previous(info);
            };
            // The device is lost and reported: the process ends as the application's own end
            // after a loss does (`end_process`), with the panic told in one line and the
            // reporter's closing lines last; no backtrace of wgpu's "Parent device is lost", no
            // unwinding into code that would call the lost device again, no exit handlers.
            let _ = std::thread::Builder::new()
                .name(HOOK_THREAD.into())
                .spawn(move || {
                    guarded("panic hook", || {
                        eprintln!(
                            "GPU crash reporter: after the GPU device was lost, {panic_line}"
                        );
                        crash.at_exit();
                        crash.print_closing_lines();
                    })
                })
                .map(|thread| thread.join());
            super::exit_now(PANIC_EXIT_CODE);
        }));
    });
}

/// The app is gone: the hook no longer holds its crash path (which keeps its render device alive).
pub(crate) fn forget() {
    *CURRENT.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// Whether the panic was raised in wgpu's own code (a directory of its path names a wgpu crate:
/// `wgpu-29.0.4/`, `wgpu-core-29.0.4/`, a git checkout's `wgpu/`), as wgpu's fatal errors on a
/// lost device are ("Error in Device::poll", "Parent device is lost", a buffer "is invalid").
fn from_wgpu(info: &PanicHookInfo<'_>) -> bool {
    info.location().is_some_and(|location| {
        let path = std::path::Path::new(location.file());
        path.parent().is_some_and(|dirs| {
            dirs.components().any(|dir| {
                dir.as_os_str().to_str().is_some_and(|dir| {
                    dir == "wgpu" || dir.starts_with("wgpu-") || dir.starts_with("wgpu_")
                })
            })
        })
    })
}

/// The prefix of every thread the reporter starts.
const OUR_THREADS: &str = "gpu-crash-";

/// The panic's message, as text.
fn panic_message(info: &PanicHookInfo<'_>) -> String {
    info.payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Reports the loss the panic reveals, if the device is lost. Returns the crash path to end the
/// process with when the device is lost (reported now or before) and the settings end the process
/// after a loss.
fn report_if_lost(message: &str) -> Option<CrashHandling> {
    // A panic inside this hook's own bookkeeping finds the lock held: nothing to do.
    let crash = CURRENT
        .try_lock()
        .ok()
        .and_then(|current| current.clone())?;
    let session = crash.sessions.current()?;
    let end_with = crash
        .settings
        .chosen
        .end_process_after_loss
        .then(|| crash.clone());
    if session.is_lost() {
        // Already reported (or being reported): wgpu's "Parent device is lost" on a call the
        // application made after the loss.
        return end_with;
    }
    let device = session.device.clone();
    let lost = with_timeout(PROBE_TIMEOUT, move || {
        let probe = std::thread::Builder::new()
            .name(PROBE_THREAD.into())
            .spawn(move || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let _ = device.poll(wgpu::PollType::Poll);
                }))
                .is_err()
            });
        probe.ok().and_then(|t| t.join().ok()).unwrap_or(false)
    })
    .unwrap_or(false);
    if !lost {
        return None;
    }
    let first_line = message.lines().next().unwrap_or_default();
    crash.device_lost(
        "",
        Some(format!(
            "reported from a panic on the lost device, before Bevy's render error handler ran: \
             {first_line}"
        )),
    );
    crash.wait_for_reports();
    end_with
}
