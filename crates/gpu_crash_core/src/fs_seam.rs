//! The seam under every change the reporter makes to the file system (create, rename, remove,
//! folder creation): in a normal build it does nothing; in this crate's tests it lets the lifetime
//! simulation stop a simulated process after its N-th change (a kill at any step of the crash and
//! delivery path) and fill the disk.
//!
//! Each simulated process is an id the test runs code "as" ([`run_as`]) on the test's own thread:
//! the state is thread-local, so tests running beside each other never see each other's kills.

use std::io;

/// Called before each change to the file system. `Err` once the simulated process is dead.
#[inline]
pub(crate) fn before_change() -> io::Result<()> {
    #[cfg(test)]
    {
        scripted::step(false)
    }
    #[cfg(not(test))]
    {
        Ok(())
    }
}

/// Called before creating a file (whose bytes then take disk space). `Err` once the simulated
/// process is dead, or while the simulated disk is full.
#[inline]
pub(crate) fn before_write() -> io::Result<()> {
    #[cfg(test)]
    {
        scripted::step(true)
    }
    #[cfg(not(test))]
    {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) use scripted::{
    is_dead, kill_after, killed_right_after_upload, note_made, note_upload, run_as, set_disk_full,
    take_dropped,
};

#[cfg(test)]
mod scripted {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::io;

    #[derive(Default)]
    struct State {
        /// The process code runs as now (0: none, no seam).
        current: u32,
        /// Changes each process may still make before it dies; absent: no limit.
        budgets: HashMap<u32, u64>,
        dead: Vec<u32>,
        disk_full: bool,
        /// Per process: the upload a server accepted, while no change has followed it yet.
        just_uploaded: HashMap<u32, Vec<String>>,
        /// Uploads whose process died at the first change after the server accepted them (the
        /// move that records them as sent).
        killed_after: Vec<String>,
        /// Files made (created or renamed into place) in a `dropped/` folder, not taken yet.
        dropped: Vec<std::path::PathBuf>,
    }

    thread_local! {
        static STATE: RefCell<State> = RefCell::default();
    }

    pub(super) fn step(creates: bool) -> io::Result<()> {
        STATE.with_borrow_mut(|s| {
            let me = s.current;
            if me == 0 {
                return Ok(());
            }
            if s.dead.contains(&me) {
                return Err(io::Error::other("killed (lifetime simulation)"));
            }
            if let Some(left) = s.budgets.get_mut(&me) {
                if *left == 0 {
                    s.dead.push(me);
                    let upload = s.just_uploaded.remove(&me);
                    s.killed_after.extend(upload.into_iter().flatten());
                    return Err(io::Error::other("killed (lifetime simulation)"));
                }
                *left -= 1;
            }
            if creates && s.disk_full {
                return Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    "no space left on device (lifetime simulation)",
                ));
            }
            // The first change after an upload is its `sent/` marker (the envelope moved into
            // `sent/`): from here on the upload is on record.
            s.just_uploaded.remove(&me);
            Ok(())
        })
    }

    /// Runs `f` as simulated process `process` on this thread.
    pub(crate) fn run_as<R>(process: u32, f: impl FnOnce() -> R) -> R {
        let before = STATE.with_borrow_mut(|s| std::mem::replace(&mut s.current, process));
        let result = f();
        STATE.with_borrow_mut(|s| s.current = before);
        result
    }

    /// `process` dies at its `changes`-th change from now (it makes `changes` of them first).
    pub(crate) fn kill_after(process: u32, changes: u64) {
        STATE.with_borrow_mut(|s| {
            s.budgets.insert(process, changes);
        });
    }

    /// Whether the process code runs as now (or `process`, when given) is dead.
    pub(crate) fn is_dead(process: Option<u32>) -> bool {
        STATE.with_borrow(|s| s.dead.contains(&process.unwrap_or(s.current)))
    }

    /// The server accepted upload `id` from the process code runs as now.
    pub(crate) fn note_upload(ids: Vec<String>) {
        STATE.with_borrow_mut(|s| {
            let me = s.current;
            s.just_uploaded.insert(me, ids);
        });
    }

    /// Uploads whose process was killed right after the server accepted them.
    pub(crate) fn killed_right_after_upload() -> Vec<String> {
        STATE.with_borrow(|s| s.killed_after.clone())
    }

    /// A file was made at `path` (created, or renamed there).
    pub(crate) fn note_made(path: &std::path::Path) {
        let in_dropped = path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "dropped");
        if in_dropped {
            STATE.with_borrow_mut(|s| s.dropped.push(path.to_owned()));
        }
    }

    /// The `dropped/` markers made since the last call (the lifetime simulation's evidence of
    /// what a rule let go, before any clean-up removes a marker).
    pub(crate) fn take_dropped() -> Vec<std::path::PathBuf> {
        STATE.with_borrow_mut(|s| std::mem::take(&mut s.dropped))
    }

    pub(crate) fn set_disk_full(full: bool) {
        STATE.with_borrow_mut(|s| s.disk_full = full);
    }
}
