//! Ending the process at once after a hang or a loss report ([`crate::settings::OnHang`] says when).

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
