//! What happens to the process after a hang report: keep waiting, or end it at once.

/// What the watchdog does once a hang report is safely on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnHang {
    /// Keep the game running (it may recover, or the player may wait).
    KeepWaiting,
    /// After the report, give the driver `loss_wait_after_hang` to reset the device (a loss in that
    /// time joins the report, with whatever fault addresses it brings), then exit the process with
    /// this code: a hung GPU rarely recovers, and a game frozen forever is worse than a crash the
    /// player can restart from.
    Exit(i32),
}

impl OnHang {
    /// The exit code of [`OnHang::default`]: 75, `EX_TEMPFAIL` of BSD's `sysexits.h` ("a temporary
    /// failure; the user is invited to retry"). Not a panic's 101, an abort's 134 (3 on Windows) or
    /// a signal's, so a launcher or a player's log tells a GPU hang from the game's own crash.
    pub const DEFAULT_EXIT_CODE: i32 = 75;
}

/// What a shipped game wants: the report first, then, after `loss_wait_after_hang` (10 s) for the
/// driver's reset, the process ends with [`OnHang::DEFAULT_EXIT_CODE`]. Drivers document resetting
/// a hung GPU after 2 s (Windows' TDR) or 10 s (amdgpu's lockup timeout); NVIDIA on Linux lost the
/// device 13.5 s after the report of a hang in a pass, and never, in 8 minutes, for a runaway
/// shader (docs/driver-facts.md): waiting on the driver can freeze the game for good.
impl Default for OnHang {
    fn default() -> Self {
        OnHang::Exit(Self::DEFAULT_EXIT_CODE)
    }
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

#[cfg(test)]
mod tests {
    /// Set in the child's environment: how the child ends itself (`exit_now`, or C's `exit`).
    const CHILD_VAR: &str = "GPU_CRASH_EXIT_NOW_CHILD";
    const HANDLER_LINE: &str = "exit handler ran";

    /// Runs this test again as a child that registers an `atexit` handler and ends with code 7
    /// the way `how` says; returns its exit code and stderr.
    fn child_ending(how: &str) -> (Option<i32>, String) {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash::exit::tests::exit_now_ends_the_process_with_the_code_and_no_exit_handlers",
                "--nocapture",
            ])
            .env(CHILD_VAR, how)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.code(), stderr)
    }

    /// `exit_now` ends the process with the code asked for and runs no exit handler (`_exit` on
    /// Unix, `TerminateProcess` on Windows). The control, C's own `exit`, runs the handler: the
    /// child can tell the two apart.
    #[test]
    fn exit_now_ends_the_process_with_the_code_and_no_exit_handlers() {
        extern "C" {
            fn atexit(handler: extern "C" fn()) -> std::ffi::c_int;
            fn exit(code: std::ffi::c_int) -> !;
        }
        extern "C" fn said_at_exit() {
            eprintln!("{HANDLER_LINE}");
        }
        if let Some(how) = std::env::var_os(CHILD_VAR) {
            // SAFETY: registers a plain function with the C runtime; it only prints.
            unsafe { atexit(said_at_exit) };
            if how == "c-exit" {
                // SAFETY: C's `exit` ends the process after the handlers; nothing is borrowed.
                unsafe { exit(7) };
            }
            super::exit_now(7);
        }
        let (code, stderr) = child_ending("c-exit");
        assert_eq!(code, Some(7), "{stderr}");
        assert!(stderr.contains(HANDLER_LINE), "the control: {stderr}");
        let (code, stderr) = child_ending("exit-now");
        assert_eq!(code, Some(7), "{stderr}");
        assert!(!stderr.contains(HANDLER_LINE), "{stderr}");
    }
}
