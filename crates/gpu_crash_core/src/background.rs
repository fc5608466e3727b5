//! Work that runs only in CPU time the game leaves idle.
//!
//! The index's fold is bookkeeping a report needs later, not something a frame waits for. At normal
//! priority the scheduler gives its thread a core the moment a frame wakes it, taking that core from
//! the game's own threads on a machine with few of them (2 cores: BENCHMARKS.md, issue 35). At the
//! lowest priority it runs only when a core would otherwise idle; work that cannot wait (the ring
//! filling up, a crash) is done by threads of normal priority.

/// The niceness [`lower_this_thread`] sets on Linux: the lowest priority that still gets a share of
/// a busy core (weight 15 against a game thread's 1,024), so a thread preempted while it holds the
/// fold is back before a crash's flush waits long for it. `SCHED_IDLE` (weight 3) gave the same
/// frame time but, once in 14 processes, left the urgent fold waiting on it long enough to drop
/// events (when the lowered thread still held the ring; it no longer does: `index/drain.rs`).
#[cfg(target_os = "linux")]
pub(crate) const LOWERED_NICE: libc::c_int = 19;

/// Lowers the calling thread to the lowest priority that still runs on a busy machine: nice 19 on
/// Linux, `THREAD_PRIORITY_LOWEST` on Windows. Returns whether it did; one way on Linux (an
/// unprivileged thread may not raise itself again).
pub(crate) fn lower_this_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions; setpriority with PRIO_PROCESS and a thread id
        // changes only that thread's niceness (Linux keeps niceness per thread).
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, LOWERED_NICE) == 0
        }
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::System::Threading::{
            GetCurrentThread, SetThreadPriority, THREAD_PRIORITY_LOWEST,
        };
        // SAFETY: the pseudo-handle of the calling thread is always valid; the call changes only
        // that thread's priority.
        unsafe { SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_LOWEST) != 0 }
    }
    #[cfg(not(any(target_os = "linux", windows)))]
    {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
pub(crate) mod tests {
    use super::*;

    /// The niceness of thread `tid` of this process (0: the calling thread).
    pub(crate) fn nice_of(tid: libc::id_t) -> libc::c_int {
        // SAFETY: the call only reads the thread's niceness.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) }
    }

    #[test]
    fn a_lowered_thread_runs_at_the_lowest_priority_and_others_do_not() {
        // Relative to this thread's niceness: the test process itself may run under `nice`.
        let before = nice_of(0);
        let lowered = std::thread::spawn(|| (lower_this_thread(), nice_of(0)))
            .join()
            .unwrap();
        assert_eq!(lowered, (true, LOWERED_NICE));
        assert_eq!(nice_of(0), before, "only the thread that asked");
    }
}
