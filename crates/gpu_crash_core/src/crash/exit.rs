//! What happens to the process after a hang report: keep waiting, or end it at once.

/// What the watchdog does once a hang report is safely on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnHang {
    /// Keep the game running (it may recover, or the player may wait).
    KeepWaiting,
    /// Exit the process with this code: a hung GPU rarely recovers, and a game frozen forever is
    /// worse than a crash the player can restart from.
    Exit(i32),
}

/// Ends the process at once with `code`, without running exit handlers: after a GPU hang other
/// threads are inside the driver, and tearing it down under them crashed (exit 139 on the H200).
pub(crate) fn exit_now(code: i32) -> ! {
    #[cfg(unix)]
    // SAFETY: `_exit` only ends the process; the report is already fsynced to disk.
    unsafe {
        libc::_exit(code)
    }
    #[cfg(windows)]
    // SAFETY: `TerminateProcess` on our own process pseudo-handle ends it at once without running
    // DLL detach or exit handlers (which would unload the driver under hung threads).
    unsafe {
        windows_sys::Win32::System::Threading::TerminateProcess(
            windows_sys::Win32::System::Threading::GetCurrentProcess(),
            code as u32,
        );
    }
    #[allow(unreachable_code)]
    std::process::exit(code)
}
