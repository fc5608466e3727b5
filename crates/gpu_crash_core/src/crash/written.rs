//! The reports this run wrote, for the application to show or attach (Bevy: the `GpuCrashReports`
//! resource).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Reports written during this run, newest last.
#[derive(Clone, Default, Debug)]
pub struct WrittenReports {
    /// Paths of the report JSON files.
    pub paths: Arc<Mutex<Vec<PathBuf>>>,
}

impl WrittenReports {
    /// A snapshot of the paths.
    pub fn written(&self) -> Vec<PathBuf> {
        self.paths.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records a written report; a report rewritten in place (a hang report replaced by the loss
    /// that followed) is listed once.
    pub(crate) fn push(&self, path: PathBuf) {
        let mut paths = self.paths.lock().unwrap_or_else(|p| p.into_inner());
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
}
