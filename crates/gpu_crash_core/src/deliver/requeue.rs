//! The startup requeue: a report on disk whose envelope never reached the outbox (its process died
//! between writing the report and queuing it, or no DSN was configured then) is queued again by the
//! outbox's startup flush.
//!
//! A report is left alone when the outbox dealt with it after its file was last written: an
//! envelope of its id waits in the outbox, in `held/` (a crash-loop report, or a provisional hang
//! report) or in `failed/`, or `sent/` or `dropped/` holds its marker (see
//! [`super::envelope_name`] for how names tie them to the report). A report written again after all
//! of these (a hang report merged into its loss report, a second event of its own) is read, and
//! queued unless its own envelope name is among them.
//!
//! Markers of reports no longer on disk are then removed (see [`super::ledger`]): they can never
//! bring a report back, and nothing else bounds them.
//!
//! Every report of the folder (bounded by its budget, see [`super::report_budget`]) is looked at,
//! newest first. In a full outbox a report goes in only if it is worth more than what waits there
//! (a crash over a warning, a newer crash over an older one): the bounds then drop the least
//! worth, with a `dropped/` marker; one worth less is left on disk for a later launch. Reports
//! written after the startup are the running game's to queue. Nothing is sent twice: the envelope
//! has the name (report time and id) the crash path gives it, so a race with another process queuing
//! the same report writes one file, a flush skips an envelope whose `sent/` marker exists, and Sentry
//! keeps one event per event id.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use super::envelope::ENVELOPE_EXT;
use super::envelope_name::{envelope_file_name, sanitize, EnvelopeName};
use super::held::HELD_DIR;
use super::ledger::{self, DROPPED_DIR, SENT_DIR};
use super::outbox::FAILED_DIR;
use super::outbox::{FlushSummary, Outbox};
use super::release_health::ReleaseHealth;
use crate::guard::guarded;
use crate::report::{read_vendor_binary, report_from_read, MAX_REPORT_BYTES};

impl Outbox {
    /// At startup, on a thread of its own (`gpu-crash-upload`): ends the release-health sessions
    /// earlier runs left, queues the reports of `report_dir` that never reached the outbox (see the
    /// module docs), then flushes for at most `budget`.
    pub(crate) fn spawn_startup_flush(
        &self,
        report_dir: PathBuf,
        budget: Duration,
    ) -> std::io::Result<JoinHandle<FlushSummary>> {
        let outbox = self.clone();
        let started = SystemTime::now();
        std::thread::Builder::new()
            .name("gpu-crash-upload".to_owned())
            .spawn(move || {
                guarded("startup upload", || {
                    outbox.startup(&report_dir, started, budget)
                })
                .unwrap_or_default()
            })
    }

    /// What a launch does first, on the calling thread (see [`Self::spawn_startup_flush`]): removes
    /// what killed writers left half-written, ends the sessions earlier runs left, queues the
    /// reports that never reached the outbox, then flushes for at most `budget`. `started`: the
    /// launch's start (reports written after it are the running game's).
    pub(crate) fn startup(
        &self,
        report_dir: &Path,
        started: SystemTime,
        budget: Duration,
    ) -> FlushSummary {
        let deadline = super::outbox::deadline_in(budget);
        self.remove_abandoned_temp_files(report_dir);
        // Sessions first: one that says `crashed` checks whether its crash envelope reached the
        // outbox, which the requeue would then fill in without the session's update.
        ReleaseHealth::close_abandoned(self);
        self.keep_within_bounds();
        self.requeue_unqueued(report_dir, started);
        self.flush(deadline)
    }

    /// Queues the reports of `report_dir` written before `written_before` that the outbox never
    /// dealt with (see the module docs), then removes the markers of reports no longer on disk.
    /// Returns how many were queued.
    pub(crate) fn requeue_unqueued(&self, report_dir: &Path, written_before: SystemTime) -> usize {
        self.keep_reports_in_budget(report_dir, None);
        let traces = Traces::of(self.dir());
        // A folder that cannot be listed whole queues nothing and forgets no marker: a report
        // missed by the listing would otherwise lose its `sent/` marker and go out again.
        let Some(reports) = report_files(report_dir) else {
            warn!(
                "GPU crash reporter: cannot list {}; its reports are queued at a later launch",
                report_dir.display()
            );
            return 0;
        };
        let on_disk: HashSet<String> = reports
            .iter()
            .filter_map(|(path, _)| id_in_name(path))
            .collect();
        // Newest first; a full outbox keeps what is worth most (see `Outbox::enforce_bounds`).
        let mut queued = 0;
        for (path, modified) in reports.into_iter().rev() {
            // Written by this run (after its start, not in the future: a clock set back leaves
            // earlier runs' reports with times ahead of now, and those are queued).
            if modified >= written_before && modified <= SystemTime::now() {
                continue;
            }
            let Some(id) = id_in_name(&path) else {
                continue;
            };
            if traces.dealt_with_since(&id, modified) {
                continue;
            }
            // A live process holds a report it wrote until it is queued: its own to queue.
            let Ok(Some(mut claim)) = super::claim::Claim::try_new(&path) else {
                continue;
            };
            // Read through the claim's handle: on Windows the lock is mandatory, and a second
            // handle (ours included) could not read the file.
            let read = claim.read(MAX_REPORT_BYTES);
            let mut report = match report_from_read(&path, read) {
                Ok(report) => report,
                Err(e) => {
                    warn!("GPU crash reporter: not queued again: {e}");
                    continue;
                }
            };
            // Written again after the outbox last dealt with it (a hang report merged into its
            // loss report is a second event of its own): queued unless that event's envelope is
            // known. The name is only a hint: the envelope's name is the report's own.
            let name = envelope_file_name(&report);
            if traces.knows(&name) {
                continue;
            }
            // Looked at again now that the report is claimed: the listing above is older than the
            // claim, and a second process may have queued it (and be sending it) in between.
            if Traces::holds_now(self.dir(), &name) {
                continue;
            }
            let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
            if self.would_be_dropped(&envelope_file_name(&report), bytes) {
                // Worth less than all that waits (an old warning): left on disk for a later launch.
                continue;
            }
            let vendor_binary = read_vendor_binary(&path, &report).unwrap_or_else(|e| {
                report.notes.push(format!(
                    "attachment: the vendor binary was not attached: {e}"
                ));
                None
            });
            match self.enqueue_requeued(&report, vendor_binary.as_deref()) {
                Ok(_) => queued += 1,
                Err(e) => warn!(
                    "GPU crash reporter: cannot queue {} again: {e}",
                    path.display()
                ),
            }
        }
        if queued > 0 {
            info!(
                "GPU crash reporter: {queued} crash report(s) of an earlier run that never reached \
                 the outbox are queued for upload"
            );
        }
        self.forget_gone_reports(report_dir, &on_disk, written_before);
        queued
    }
}

impl Outbox {
    /// Removes the temp files killed writers left in `report_dir` and the outbox's folders.
    fn remove_abandoned_temp_files(&self, report_dir: &Path) {
        for dir in [
            report_dir.to_owned(),
            self.dir().to_owned(),
            self.dir().join(HELD_DIR),
            self.dir().join(FAILED_DIR),
        ] {
            crate::report::remove_abandoned_temp_files(&dir);
        }
    }

    /// Removes the markers of reports no longer in `report_dir` (see [`ledger::forget_gone`]), when
    /// this outbox is that folder's own (`<report dir>/outbox`). An outbox the game put elsewhere
    /// may serve other report folders too (a launcher beside the game): their reports are not in
    /// this one, and removing their markers would have them sent again. There, report markers go
    /// with their reports through the report budget ([`ledger::forget_report`]) and beyond a count
    /// far above it; sessions' markers go as in the default outbox.
    fn forget_gone_reports(
        &self,
        report_dir: &Path,
        on_disk: &HashSet<String>,
        before: SystemTime,
    ) {
        let own = self.dir() == report_dir.join(super::DEFAULT_OUTBOX_NAME);
        ledger::forget_gone(self.dir(), own.then_some(on_disk), before);
    }

    /// A launch without a DSN: nothing is queued or sent, but the folders are kept tidy (temp files
    /// of killed writers, the report budget, markers of reports gone), on a thread of its own.
    pub(crate) fn spawn_tidy(&self, report_dir: PathBuf) -> std::io::Result<JoinHandle<()>> {
        let outbox = self.clone();
        let started = SystemTime::now();
        std::thread::Builder::new()
            .name("gpu-crash-tidy".to_owned())
            .spawn(move || {
                guarded("report folder upkeep", || {
                    outbox.remove_abandoned_temp_files(&report_dir);
                    outbox.keep_reports_in_budget(&report_dir, None);
                    if let Some(reports) = report_files(&report_dir) {
                        let on_disk: HashSet<String> = reports
                            .iter()
                            .filter_map(|(path, _)| id_in_name(path))
                            .collect();
                        outbox.forget_gone_reports(&report_dir, &on_disk, started);
                    }
                });
            })
    }
}

/// What the outbox holds of each report: envelopes pending, held or failed, and `sent/` and
/// `dropped/` markers, by report id, with their file names and times.
struct Traces {
    by_report: HashMap<String, Vec<(String, SystemTime)>>,
}

impl Traces {
    fn of(outbox: &Path) -> Self {
        let mut by_report: HashMap<String, Vec<(String, SystemTime)>> = HashMap::new();
        for dir in [
            outbox.to_owned(),
            outbox.join(HELD_DIR),
            outbox.join(FAILED_DIR),
            outbox.join(SENT_DIR),
            outbox.join(DROPPED_DIR),
        ] {
            for (name, time) in envelope_names(&dir) {
                if let Some(parsed) = EnvelopeName::parse(&name) {
                    by_report
                        .entry(parsed.report_id)
                        .or_default()
                        .push((name, time));
                }
            }
        }
        Self { by_report }
    }

    /// Whether an envelope of report `id` was written after its file was last written
    /// (`modified`): then it carries the file's last word. Strictly after: a file written within
    /// the same clock tick as an envelope is read to be sure (see [`Self::knows`]).
    fn dealt_with_since(&self, id: &str, modified: SystemTime) -> bool {
        self.by_report
            .get(id)
            .is_some_and(|traces| traces.iter().any(|(_, t)| *t > modified))
    }

    /// Whether `outbox` holds, at this moment, the envelope or a marker named `envelope_name`: five
    /// look-ups, for a decision taken under a claim. An envelope moves from one folder to another
    /// by a rename, so one of them always has it.
    fn holds_now(outbox: &Path, envelope_name: &str) -> bool {
        [
            outbox.to_owned(),
            outbox.join(HELD_DIR),
            outbox.join(FAILED_DIR),
            outbox.join(SENT_DIR),
            outbox.join(DROPPED_DIR),
        ]
        .iter()
        .any(|dir| std::fs::symlink_metadata(dir.join(envelope_name)).is_ok())
    }

    /// Whether the outbox holds the envelope or a marker named `envelope_name`.
    fn knows(&self, envelope_name: &str) -> bool {
        EnvelopeName::parse(envelope_name)
            .and_then(|n| self.by_report.get(&n.report_id))
            .is_some_and(|traces| traces.iter().any(|(name, _)| name == envelope_name))
    }
}

/// The `*.envelope` names (and file times) of the envelopes and markers in `dir`.
fn envelope_names(dir: &Path) -> Vec<(String, SystemTime)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let suffix = format!(".{ENVELOPE_EXT}");
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(&suffix) {
                return None;
            }
            let time = e.metadata().and_then(|m| m.modified()).ok()?;
            Some((name, time))
        })
        .collect()
}

/// `gpu-crash-<time>-<id>.json` regular files of `dir` (no symlinks) with their modification
/// times, oldest first (names start with the time). `None` when the folder could not be listed
/// whole (it is missing, or an entry could not be read: out of file handles, a failing disk).
fn report_files(dir: &Path) -> Option<Vec<(PathBuf, SystemTime)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        // No folder yet: no reports, and nothing of theirs to keep.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Vec::new()),
        Err(_) => return None,
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.ok()?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("gpu-crash-") && name.ends_with(".json")) {
            continue;
        }
        if !entry.file_type().ok()?.is_file() {
            continue;
        }
        let modified = match entry.metadata().and_then(|m| m.modified()) {
            Ok(modified) => modified,
            // Removed since the listing (a second copy's budget): not a report any more.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        files.push((entry.path(), modified));
    }
    files.sort();
    Some(files)
}

/// The id in a report's file name `gpu-crash-<time>-<id>.json`, as envelope names spell it.
fn id_in_name(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy();
    let rest = name.strip_prefix("gpu-crash-")?.strip_suffix(".json")?;
    Some(sanitize(rest.split_once('-')?.1))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use crate::deliver::{DeliverySettings, Outbox, UploadState};
    use crate::report::{hang_report_for_tests, write_report, CrashReport, VendorBinaryInfo};

    /// A report folder and an outbox beside it that sends nowhere (a DSN, so it queues).
    fn setup(name: &str) -> (std::path::PathBuf, Outbox) {
        let dir =
            std::env::temp_dir().join(format!("gpu-crash-requeue-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let outbox = Outbox::new(DeliverySettings {
            dsn_from_env: false,
            upload_timeout: Duration::from_millis(200),
            ..DeliverySettings::new(
                Some("http://public@127.0.0.1:9/1".parse().unwrap()),
                dir.join("outbox"),
            )
        });
        (dir.join("reports"), outbox)
    }

    fn written(dir: &std::path::Path) -> CrashReport {
        let mut report = hang_report_for_tests();
        report.vendor_binary = Some(VendorBinaryInfo {
            size: 3,
            file_name: None,
            header: None,
            parse_error: None,
        });
        write_report(dir, &mut report, Some(&[7, 7, 7])).unwrap();
        report
    }

    fn later() -> SystemTime {
        SystemTime::now() + Duration::from_secs(3600)
    }

    /// A report whose process died before queuing it is queued at the next launch, with its vendor
    /// binary; a second startup queues nothing more.
    #[test]
    fn a_report_never_queued_is_queued_once() {
        let (reports, outbox) = setup("never");
        let report = written(&reports);
        assert_eq!(
            Outbox::state_of(outbox.dir(), &report),
            UploadState::NotQueued
        );
        assert_eq!(outbox.requeue_unqueued(&reports, later()), 1);
        assert_eq!(
            Outbox::state_of(outbox.dir(), &report),
            UploadState::Pending
        );
        let envelope = std::fs::read(&outbox.pending()[0]).unwrap();
        assert!(
            envelope.windows(5).any(|w| w == b"\n\x07\x07\x07\n"),
            "vendor binary attached"
        );
        assert_eq!(outbox.requeue_unqueued(&reports, later()), 0);
        assert_eq!(outbox.pending().len(), 1);
    }

    /// Reports the outbox dealt with stay as they are: sent, held back, or queued already; and
    /// reports written after the startup are the running game's.
    #[test]
    fn a_report_sent_held_queued_or_new_is_not_queued_again() {
        let (reports, outbox) = setup("dealt");
        let sent = written(&reports);
        let marker = crate::deliver::ledger::marker(
            outbox.dir(),
            crate::deliver::ledger::SENT_DIR,
            &crate::deliver::envelope_name::envelope_file_name(&sent),
        );
        std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
        std::fs::write(&marker, b"").unwrap();
        let held_report = written(&reports);
        let held = outbox.hold(&held_report, None).unwrap();
        let queued = written(&reports);
        outbox.enqueue(&queued, None).unwrap();
        assert_eq!(outbox.requeue_unqueued(&reports, later()), 0);
        assert_eq!(outbox.pending().len(), 1);

        let _new = written(&reports);
        assert_eq!(
            outbox.requeue_unqueued(&reports, SystemTime::UNIX_EPOCH),
            0,
            "written after the startup"
        );
        drop(held);
    }

    /// A crash-loop report discarded for a later one is not queued again; a hang report rewritten
    /// (merged into its loss report) after its provisional envelope was discarded is.
    #[test]
    fn a_discarded_report_is_not_queued_again_unless_rewritten_after() {
        let (reports, outbox) = setup("discarded");
        let mut report = written(&reports);
        outbox.hold(&report, None).unwrap().discard();
        assert_eq!(outbox.requeue_unqueued(&reports, later()), 0);

        let marker_time = std::fs::metadata(
            outbox
                .dir()
                .join("dropped")
                .join(crate::deliver::envelope_name::envelope_file_name(&report)),
        )
        .unwrap()
        .modified()
        .unwrap();
        // Rewritten under the same id and time after the discard: the merged report, a second
        // event of its own.
        report.follows_hang = Some(crate::report::HangFollowUp {
            hang_event_id: report.id.clone(),
            event_id: "5eed".into(),
            fingerprint: Vec::new(),
            loss_after_ms: 1,
        });
        let file = reports.join(report.file_name());
        write_report(&reports, &mut report, None).unwrap();
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(marker_time + Duration::from_secs(1))
            .unwrap();
        assert_eq!(outbox.requeue_unqueued(&reports, later()), 1);
    }
}
