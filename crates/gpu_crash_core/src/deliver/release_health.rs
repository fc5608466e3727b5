//! Release health: Sentry sessions, so a studio reads how often players are hit (the share of
//! sessions a GPU crash ended, per release), not only what broke.
//!
//! A session (one per run, or per what the game calls a session, see [`SessionTracking`]):
//! - starts as a small file `<sid>.session` in the outbox folder (sid, start, release, environment,
//!   errors, status), written atomically and locked while its process lives;
//! - ends `exited` at a clean exit: its update is queued in the outbox and flushed (bounded);
//! - ends `crashed` with a GPU crash report: its update rides in the crash's envelope (Sentry counts
//!   the session crashed as it takes the event), or goes on its own when that envelope cannot be
//!   queued or is held back (crash loop);
//! - ends `abnormal` at the next launch when its file is still there and no process holds it
//!   (SIGKILL, a power cut, a TDR kill): the process that died could not say so. A file that says
//!   `crashed` whose crash envelope never reached the outbox ends `crashed` then.
//!
//! One update per session, sent when it ends, with `init: true`: Sentry counts the session and its
//! end at once (a running session is not on the dashboard until it ends). A session is a count, not
//! a report: it is kept only where it can be sent (a DSN, a release, consent not denied outright),
//! waits in the outbox for the server and for consent as a crash report does, and is the first
//! thing the outbox drops when over its bounds. Without a release Sentry drops sessions silently:
//! none is kept, and the log says so once.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentry::protocol::{SessionAttributes, SessionStatus, SessionUpdate};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};
use uuid::Uuid;

use super::claim::Claim;
use super::envelope_name::{sanitize, EnvelopeName};
use super::ledger::SENT_DIR;
use super::outbox::{Outbox, FAILED_DIR};
use super::settings::{SessionTracking, UploadConsent};
use crate::report::{
    write_atomically_locked, write_atomically_locked_releasing, CrashKind, CrashReport,
};
use crate::safe_fs;

/// Extension of session files in the outbox folder.
pub(crate) const SESSION_EXT: &str = "session";
/// Largest session file read: a few hundred bytes are written.
const SESSION_READ_CAP: u64 = 64 * 1024;

/// What a session file holds: enough to send the session's last update from another process.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SessionFile {
    sid: Uuid,
    /// Milliseconds since the Unix epoch.
    started_ms: u64,
    /// Immutable per session in Sentry: kept, not read again from the settings of a later run.
    release: String,
    environment: String,
    errors: u64,
    status: SessionStatus,
    /// The crash event whose envelope carries the `crashed` update, once that is being queued.
    #[serde(default)]
    crash_event: Option<String>,
    /// A GPU hang reported in this session (its event): the session goes on, since a GPU may
    /// recover; a run that ends without saying how (a kill of the frozen game, `OnHang::Exit`)
    /// ends it `crashed` at the next launch.
    #[serde(default)]
    hung_event: Option<String>,
    pid: u32,
}

impl SessionFile {
    fn started(&self) -> SystemTime {
        // Hostile input (a session file): past the clock's range reads as now, never a panic.
        UNIX_EPOCH
            .checked_add(Duration::from_millis(self.started_ms))
            .unwrap_or_else(SystemTime::now)
    }

    /// The session's last update, ending it with `status`.
    fn update(&self, status: SessionStatus) -> SessionUpdate<'static> {
        let now = SystemTime::now();
        let started = self.started();
        SessionUpdate {
            session_id: self.sid,
            distinct_id: None,
            sequence: None,
            timestamp: Some(now),
            started,
            // The first and only update: Sentry counts the session from it.
            init: true,
            // Sentry keeps a duration for exited sessions only.
            duration: (status == SessionStatus::Exited).then(|| {
                now.duration_since(started)
                    .unwrap_or_default()
                    .as_secs_f64()
            }),
            status,
            errors: self.errors,
            attributes: SessionAttributes {
                release: self.release.clone().into(),
                environment: Some(self.environment.clone().into()),
                ip_address: None,
                user_agent: None,
            },
        }
    }
}

/// Set once a session file's rewrite was refused because this process held the old file (see
/// [`Running::save`]); from then on the old file is let go just before each rename.
static REPLACE_NEEDS_RELEASE: AtomicBool = AtomicBool::new(false);

/// A running session of this process.
struct Running {
    file: SessionFile,
    path: PathBuf,
    /// Held while this process lives, so a launch beside it does not take the session for
    /// abandoned. `None` when the file could not be written (the session still ends at exit).
    _lock: Option<File>,
}

impl Running {
    /// Rewrites the file (atomically, the new one locked before it gets its name).
    fn save(&mut self) {
        let bytes = match serde_json::to_vec(&self.file) {
            Ok(bytes) => bytes,
            Err(e) => {
                warn!("GPU crash reporter: cannot encode the session file: {e}");
                return;
            }
        };
        let (path, held) = (&self.path, &mut self._lock);
        // Windows without POSIX rename semantics (FAT drives, Windows before 10 1607, Wine and
        // Proton, measured under Wine 8): no file is replaced while a handle holds it, ours
        // included. Once a rewrite was refused so, the old file is let go just before the new one
        // takes its name: for the moment of a rename, not a write, a launch beside this one could
        // take the session for abandoned.
        let release_first = cfg!(windows) && REPLACE_NEEDS_RELEASE.load(Ordering::Relaxed);
        let mut written = if release_first {
            write_atomically_locked_releasing(path, &bytes, || *held = None)
        } else {
            write_atomically_locked(path, &bytes)
        };
        if cfg!(windows)
            && !release_first
            && held.is_some()
            && written
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
        {
            // Relaxed: a hint for later saves; a stale read costs one refused rename.
            REPLACE_NEEDS_RELEASE.store(true, Ordering::Relaxed);
            written = write_atomically_locked_releasing(path, &bytes, || *held = None);
        }
        if written.is_err() && held.is_none() {
            // The old file still has the name (the rename failed): held again, so the session
            // stays this run's for a launch beside it.
            *held = safe_fs::open_regular(path)
                .ok()
                .filter(|file| file.try_lock().is_ok());
        }
        match written {
            Ok(lock) => self._lock = Some(lock),
            Err(e) => warn!(
                "GPU crash reporter: cannot write the session file {}: {e}; it keeps what it said \
                 before (a kill of this run is counted from that)",
                self.path.display()
            ),
        }
    }

    /// The session's update is in the outbox: its file goes.
    fn done(self) {
        if let Err(e) = crate::safe_fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                warn!(
                    "GPU crash reporter: cannot remove the ended session's file {}: {e}",
                    self.path.display()
                );
            }
        }
    }
}

/// This process's release-health sessions. Cheap to clone; every clone is the same.
#[derive(Clone)]
pub(crate) struct ReleaseHealth(Arc<Shared>);

struct Shared {
    outbox: Outbox,
    /// Release and environment of new sessions; `None`: no sessions (see [`ReleaseHealth::new`]).
    attributes: Option<(String, String)>,
    running: Mutex<Option<Running>>,
}

impl ReleaseHealth {
    /// Sessions for `outbox`'s settings, named with the release the crash events name (the same
    /// `application` name and version). None are kept without a DSN, without a release (logged
    /// here, once), with consent denied outright, or with [`SessionTracking::Off`].
    pub(crate) fn new(outbox: Outbox, app_name: &str, app_version: &str) -> Self {
        let settings = outbox.settings();
        let attributes = if settings.session_tracking == SessionTracking::Off
            || outbox.dsn().is_none()
            || matches!(settings.upload_consent, UploadConsent::Denied)
        {
            None
        } else if let Some(release) = settings.resolve_release(app_name, app_version) {
            Some((release, settings.resolve_environment()))
        } else {
            warn!(
                "GPU crash reporter: no release is known (DeliverySettings::release, SENTRY_RELEASE \
                 or the application version), so no release-health session is sent: Sentry drops \
                 sessions without a release"
            );
            None
        };
        Self(Arc::new(Shared {
            outbox,
            attributes,
            running: Mutex::new(None),
        }))
    }

    fn running(&self) -> MutexGuard<'_, Option<Running>> {
        // A panic while holding the lock leaves a whole value or none: plain data.
        self.0.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a session (ending a running one `exited` first). False when sessions are off.
    pub(crate) fn start(&self) -> bool {
        let Some((release, environment)) = &self.0.attributes else {
            return false;
        };
        let mut running = self.running();
        if let Some(previous) = running.take() {
            self.queue_end(previous, SessionStatus::Exited);
        }
        let file = SessionFile {
            sid: Uuid::new_v4(),
            started_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            release: release.clone(),
            environment: environment.clone(),
            errors: 0,
            status: SessionStatus::Ok,
            crash_event: None,
            hung_event: None,
            pid: std::process::id(),
        };
        let dir = self.0.outbox.dir();
        let path = dir.join(format!("{}.{SESSION_EXT}", file.sid.simple()));
        let mut session = Running {
            file,
            path,
            _lock: None,
        };
        if let Err(e) = safe_fs::create_private_dir_all(dir) {
            warn!("GPU crash reporter: cannot create {}: {e}", dir.display());
        }
        session.save();
        info!(
            "GPU crash reporter: release-health session {} started (release {})",
            session.file.sid, session.file.release
        );
        *running = Some(session);
        true
    }

    /// Ends the running session with `status`, its update queued on its own. False when none runs.
    pub(crate) fn end(&self, status: SessionStatus) -> bool {
        let Some(session) = self.running().take() else {
            return false;
        };
        self.queue_end(session, status)
    }

    /// Queues `session`'s last update; its file goes once the update is in the outbox (else the
    /// next launch ends it from the file). Returns whether it was queued.
    fn queue_end(&self, mut session: Running, status: SessionStatus) -> bool {
        // The file says how the run ended before the update is queued: a kill between the queueing
        // and the file's removal (a launcher that kills a game slow to quit) leaves a file the next
        // launch ends with this status, not one it would take for a kill and end `abnormal`, over
        // the update queued here.
        if status != session.file.status {
            session.file.status = status;
            session.save();
        }
        match self.0.outbox.enqueue_session(&session.file.update(status)) {
            Ok(_) => {
                info!(
                    "GPU crash reporter: release-health session {} ended {status:?}",
                    session.file.sid
                );
                session.done();
                true
            }
            Err(e) => {
                warn!(
                    "GPU crash reporter: session {} not queued ({e}); the next launch ends it",
                    session.file.sid
                );
                false
            }
        }
    }

    /// `report` is about to be queued: a crash (a loss, a hang) ends the running session `crashed`
    /// (see [`Self::crash`]); a fault the driver survived is an error of the session, which goes on
    /// (Sentry counts it `errored` when it ends, not crashed).
    pub(crate) fn report(&self, report: &CrashReport) -> Option<CrashedSession> {
        match report.kind {
            CrashKind::NonFatalFault => {
                self.error();
                None
            }
            // A hang alone: the GPU may still recover (issue 51 item 13); the run's end says how
            // it went (the loss that follows, the exit, or the next launch for a killed run).
            CrashKind::GpuHang if report.follows_hang.is_none() => {
                self.hung(report.event_id());
                None
            }
            _ => self.crash(report.event_id()),
        }
    }

    /// Notes a GPU hang in the running session (its file says so at once, so a kill keeps it).
    fn hung(&self, event_id: &str) {
        if let Some(session) = self.running().as_mut() {
            session.file.errors = session.file.errors.saturating_add(1);
            session.file.hung_event = Some(event_id.to_owned());
            session.save();
        }
    }

    /// Counts an error in the running session (its file says so at once, so a kill keeps it).
    pub(crate) fn error(&self) {
        if let Some(session) = self.running().as_mut() {
            session.file.errors = session.file.errors.saturating_add(1);
            session.save();
        }
    }

    /// A GPU crash report of event `event_id` is about to be queued: the running session ends
    /// `crashed` (its file says so first). `None` when no session runs (off, or ended by an
    /// earlier crash of this run: a hang whose loss follows is one crash).
    pub(crate) fn crash(&self, event_id: &str) -> Option<CrashedSession> {
        let mut session = self.running().take()?;
        session.file.status = SessionStatus::Crashed;
        session.file.errors = session.file.errors.max(1);
        session.file.crash_event = Some(event_id.to_owned());
        session.save();
        let update = session.file.update(SessionStatus::Crashed);
        Some(CrashedSession {
            session,
            health: self.clone(),
            update,
        })
    }

    /// At startup (the upload thread, before reports are queued again): ends every session an
    /// earlier run left (a file no live process holds), `abnormal`, or `crashed` when its file says
    /// so and its crash envelope never reached the outbox. Returns how many were queued.
    pub(crate) fn close_abandoned(outbox: &Outbox) -> usize {
        let dir = outbox.dir();
        let mut queued = 0;
        for path in session_paths(dir) {
            let mut claim = match Claim::try_new(&path) {
                Ok(Some(claim)) => claim,
                // A live run's session (or one another launch is closing), or not readable now.
                Ok(None) | Err(_) => continue,
            };
            let file: SessionFile = match claim
                .read(SESSION_READ_CAP)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            {
                Ok(file) => file,
                Err(e) => {
                    warn!(
                        "GPU crash reporter: {} is not a session file ({e}); removed",
                        path.display()
                    );
                    let _ = crate::safe_fs::remove_file(&path);
                    continue;
                }
            };
            let status = match (&file.status, &file.crash_event) {
                (SessionStatus::Crashed, Some(event)) if crash_envelope_exists(dir, event) => {
                    // Killed after its crash envelope (which carries the update) was written.
                    let _ = crate::safe_fs::remove_file(&path);
                    continue;
                }
                (SessionStatus::Crashed, _) => SessionStatus::Crashed,
                (SessionStatus::Exited, _) => SessionStatus::Exited,
                // Hung, then nothing more was said: the frozen game was killed or ended itself.
                _ if file.hung_event.is_some() => SessionStatus::Crashed,
                _ => SessionStatus::Abnormal,
            };
            match outbox.enqueue_session(&file.update(status)) {
                Ok(_) => {
                    info!(
                        "GPU crash reporter: session {} of an earlier run (pid {}) ended {status:?}",
                        file.sid, file.pid
                    );
                    let _ = crate::safe_fs::remove_file(&path);
                    queued += 1;
                }
                Err(e) => warn!(
                    "GPU crash reporter: session {} of an earlier run not queued: {e}",
                    file.sid
                ),
            }
            drop(claim);
        }
        queued
    }
}

/// The session a crash ended, its update waiting to be queued with the crash's envelope.
pub(crate) struct CrashedSession {
    session: Running,
    health: ReleaseHealth,
    update: SessionUpdate<'static>,
}

impl CrashedSession {
    /// The `crashed` update, for the crash's envelope.
    pub(crate) fn update(&self) -> &SessionUpdate<'static> {
        &self.update
    }

    /// The crash's envelope, with the update, is in the outbox: the session is done.
    pub(crate) fn queued_with_crash(self) {
        info!(
            "GPU crash reporter: release-health session {} ended Crashed, in the crash's envelope",
            self.session.file.sid
        );
        self.session.done();
    }

    /// The crash's envelope cannot carry the update (not queued, or held back): it goes on its
    /// own; failing that, its file (which says `crashed`) is ended by the next launch.
    pub(crate) fn queue_alone(self) {
        self.health.queue_end(self.session, SessionStatus::Crashed);
    }
}

/// The `*.session` files of `dir` (regular files only).
fn session_paths(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == SESSION_EXT))
        .collect();
    paths.sort();
    paths
}

/// Whether the envelope of crash event `event_id` is in the outbox, in `failed/` or marked sent.
fn crash_envelope_exists(dir: &Path, event_id: &str) -> bool {
    let event_id = sanitize(event_id);
    [dir.to_owned(), dir.join(FAILED_DIR), dir.join(SENT_DIR)]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| EnvelopeName::parse(&e.file_name().to_string_lossy()))
        .any(|name| name.event_id == event_id)
}

/// A session file in an outbox folder, as `gpu-crash list` shows it.
#[derive(Clone, Debug)]
pub struct SessionFileState {
    /// The file.
    pub path: PathBuf,
    /// The session's release.
    pub release: String,
    /// When it started.
    pub started: SystemTime,
    /// `ok` (running, or to be ended `abnormal` at the next launch) or `crashed`.
    pub status: String,
    /// A running process holds it; else the next launch of the game ends and sends it.
    pub live: bool,
}

/// The session files of the outbox folder `dir` (unreadable ones left out). Read only, but each is
/// locked for a moment to tell whether a process holds it.
pub fn session_files(dir: &Path) -> Vec<SessionFileState> {
    session_paths(dir)
        .into_iter()
        .filter_map(|path| {
            let bytes = safe_fs::read_regular_capped(&path, SESSION_READ_CAP).ok()?;
            let file: SessionFile = serde_json::from_slice(&bytes).ok()?;
            let live = !matches!(Claim::try_new(&path), Ok(Some(_)));
            let status = serde_json::to_value(file.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            Some(SessionFileState {
                release: file.release.clone(),
                started: file.started(),
                status,
                live,
                path,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliver::envelope::ENVELOPE_EXT;
    use crate::deliver::DeliverySettings;
    use crate::report::hang_report_for_tests;

    /// An outbox that sends nowhere (nothing listens on port 9) with a release, so sessions are on.
    fn outbox(name: &str, max_files: usize) -> Outbox {
        let dir =
            std::env::temp_dir().join(format!("gpu-crash-sessions-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Outbox::new(DeliverySettings {
            dsn_from_env: false,
            release: Some("game@1.0.0".into()),
            environment: Some("test".into()),
            max_outbox_files: max_files,
            ..DeliverySettings::new(Some("http://public@127.0.0.1:9/1".parse().unwrap()), dir)
        })
    }

    /// The statuses of the session envelopes waiting in `outbox`.
    fn queued(outbox: &Outbox) -> Vec<SessionStatus> {
        outbox
            .pending()
            .iter()
            .filter_map(|p| sentry::Envelope::from_slice(&std::fs::read(p).unwrap()).ok())
            .flat_map(|e| {
                e.items()
                    .filter_map(|i| match i {
                        sentry::protocol::EnvelopeItem::SessionUpdate(u) => Some(u.status),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Issue 51 item 2: a fault the driver survived is an error of the session, not its end: the
    /// session goes on, and a real crash later in the run still ends it `crashed`.
    #[test]
    fn a_fault_the_driver_survived_does_not_end_the_session() {
        let outbox = outbox("survived", 50);
        let health = ReleaseHealth::new(outbox.clone(), "game", "1.0.0");
        assert!(health.start());
        let mut warning = hang_report_for_tests();
        warning.kind = CrashKind::NonFatalFault;
        assert!(health.report(&warning).is_none(), "no crashed session");
        assert!(health.report(&warning).is_none());
        let mut crash = hang_report_for_tests();
        crash.kind = CrashKind::DeviceLost;
        let crashed = health
            .report(&crash)
            .expect("the session ends with the crash");
        assert_eq!(crashed.update().status, SessionStatus::Crashed);
        assert_eq!(
            crashed.update().errors,
            2,
            "both survived faults were counted"
        );
        crashed.queue_alone();
        assert_eq!(queued(&outbox), [SessionStatus::Crashed]);
    }

    /// Issue 51 item 13: a GPU hang does not end the session: a GPU that recovers and a game that
    /// exits normally end it `exited` (with the hang as an error); a run killed while hung ends it
    /// `crashed` at the next launch.
    #[test]
    fn a_hang_ends_the_session_only_as_the_run_ends() {
        let outbox = outbox("hang-recovers", 50);
        let health = ReleaseHealth::new(outbox.clone(), "game", "1.0.0");
        assert!(health.start());
        let hang = hang_report_for_tests();
        assert!(health.report(&hang).is_none(), "the session goes on");
        assert!(health.end(SessionStatus::Exited));
        assert_eq!(queued(&outbox), [SessionStatus::Exited]);

        let outbox = self::outbox("hang-killed", 50);
        let health = ReleaseHealth::new(outbox.clone(), "game", "1.0.0");
        assert!(health.start());
        assert!(health.report(&hang_report_for_tests()).is_none());
        drop(health); // killed while hung
        assert_eq!(ReleaseHealth::close_abandoned(&outbox), 1);
        assert_eq!(queued(&outbox), [SessionStatus::Crashed]);
    }

    /// A live run's session (its file locked) is left alone; once its process is gone (the lock
    /// with it), the next launch ends it `abnormal`.
    #[test]
    fn a_left_session_is_abnormal_once_its_process_is_gone() {
        let outbox = outbox("left", 50);
        let health = ReleaseHealth::new(outbox.clone(), "game", "1.0.0");
        assert!(health.start());
        assert_eq!(session_files(outbox.dir()).len(), 1);
        assert!(session_files(outbox.dir())[0].live);
        assert_eq!(ReleaseHealth::close_abandoned(&outbox), 0, "a live session");
        drop(health); // as a SIGKILL would: the file stays, its lock goes
        assert!(!session_files(outbox.dir())[0].live);
        assert_eq!(ReleaseHealth::close_abandoned(&outbox), 1);
        assert_eq!(queued(&outbox), [SessionStatus::Abnormal]);
        assert!(session_files(outbox.dir()).is_empty());
    }

    /// A run killed after its session was marked `crashed` but before the crash's envelope was
    /// queued: the next launch sends `crashed`. Killed after the envelope (which carries the update)
    /// was queued: nothing more is sent.
    #[test]
    fn a_crashed_session_is_sent_once() {
        let outbox = outbox("crashed", 50);
        let health = ReleaseHealth::new(outbox.clone(), "game", "1.0.0");
        health.start();
        drop(health.crash("0123abcd"));
        drop(health);
        assert_eq!(ReleaseHealth::close_abandoned(&outbox), 1);
        assert_eq!(queued(&outbox), [SessionStatus::Crashed]);

        let outbox = self::outbox("crashed-carried", 50);
        let health = ReleaseHealth::new(outbox.clone(), "game", "1.0.0");
        health.start();
        drop(health.crash("0123abcd"));
        drop(health);
        let crash_envelope = outbox
            .dir()
            .join(format!("{:020}-0123abcd.{ENVELOPE_EXT}", 1));
        std::fs::write(crash_envelope, b"").unwrap();
        assert_eq!(ReleaseHealth::close_abandoned(&outbox), 0);
        assert!(session_files(outbox.dir()).is_empty());
    }

    /// Issue 51 review: a run killed while it ends its session `exited` (a launcher killing a game
    /// slow to quit), at every step of the ending: once the `exited` update was queued, the next
    /// launch never ends the session `abnormal` over it; killed before, it is `abnormal` once.
    #[test]
    fn a_kill_while_the_session_ends_never_turns_an_exit_into_a_kill() {
        let mut saw_exit_kept = false;
        for changes in 0..8 {
            let outbox = outbox(&format!("kill-at-end-{changes}"), 50);
            let health = ReleaseHealth::new(outbox.clone(), "game", "1.0.0");
            assert!(health.start());
            // A process of its own per try: a killed one stays dead.
            let process = 100 + changes as u32;
            crate::fs_seam::run_as(process, || {
                crate::fs_seam::kill_after(process, changes);
                health.end(SessionStatus::Exited);
            });
            let queued_before = queued(&outbox);
            drop(health); // the kill: the file (if still there) stays, its lock goes
            let file_left = !session_files(outbox.dir()).is_empty();
            ReleaseHealth::close_abandoned(&outbox);
            let after = queued(&outbox);
            assert_eq!(after.len(), 1, "one update, killed at change {changes}");
            if queued_before.contains(&SessionStatus::Exited) {
                assert_eq!(after, [SessionStatus::Exited], "killed at change {changes}");
                saw_exit_kept |= file_left;
            } else {
                // Killed before its update was queued: `exited` if the file already said so.
                assert!(
                    after == [SessionStatus::Abnormal] || after == [SessionStatus::Exited],
                    "killed at change {changes}: {after:?}"
                );
            }
            assert!(session_files(outbox.dir()).is_empty());
        }
        assert!(
            saw_exit_kept,
            "some kill fell between the queueing and the file's removal"
        );
    }

    /// A session update does not take a report's place in a full outbox, nor the reverse: session
    /// updates have a count of their own beside `max_outbox_files`.
    #[test]
    fn a_full_outbox_keeps_sessions_beside_its_reports() {
        let outbox = outbox("bounds", 2);
        let health = ReleaseHealth::new(outbox.clone(), "game", "1.0.0");
        health.start();
        assert!(health.end(SessionStatus::Exited));
        let mut older = hang_report_for_tests();
        older.timestamp_ms = 1;
        outbox.enqueue(&older, None).unwrap();
        outbox.enqueue(&hang_report_for_tests(), None).unwrap();
        assert_eq!(
            queued(&outbox),
            [SessionStatus::Exited],
            "the session stays"
        );
        assert_eq!(outbox.pending().len(), 3, "both reports stay");
        outbox.enqueue(&hang_report_for_tests(), None).unwrap();
        assert_eq!(
            queued(&outbox),
            [SessionStatus::Exited],
            "the session stays"
        );
        assert_eq!(outbox.pending().len(), 3, "the oldest report went");
    }

    /// Without a release, or with consent denied outright, no session is kept.
    #[test]
    fn no_session_without_a_release_or_consent() {
        let outbox = Outbox::new(DeliverySettings {
            dsn_from_env: false,
            include_application_names: false,
            ..DeliverySettings::new(
                Some("http://public@127.0.0.1:9/1".parse().unwrap()),
                std::env::temp_dir()
                    .join(format!("gpu-crash-sessions-none-{}", std::process::id())),
            )
        });
        if std::env::var_os("SENTRY_RELEASE").is_none() {
            assert!(!ReleaseHealth::new(outbox.clone(), "game", "").start());
        }
        let denied = Outbox::new(DeliverySettings {
            upload_consent: UploadConsent::Denied,
            ..outbox.settings().clone()
        });
        assert!(!ReleaseHealth::new(denied, "game", "1.0.0").start());
    }
}
