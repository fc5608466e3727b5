//! The outbox: envelopes on disk until a server has accepted them.
//!
//! - [`Outbox::enqueue`] writes the envelope atomically (temp file, fsync, rename) *before* any
//!   send, so a crash during the upload loses nothing.
//! - Files are named after what they hold (see [`super::envelope_name`]): report time, class and
//!   ids; the same report enqueued twice is one file (and one Sentry event).
//! - [`Outbox::flush`] sends crash reports newest first (the crash that just happened goes before a
//!   backlog), then warnings, then session updates, until a deadline. A file is deleted only after
//!   a 2xx. 429 and 5xx (and network errors) are retried after `X-Sentry-Rate-Limits`/`Retry-After`
//!   or an exponential backoff, as long as the deadline allows; other statuses move the file to
//!   `failed/` and log the reason once. Only a file that is not an envelope (or is larger than any
//!   envelope this outbox writes, see [`envelope_read_cap`]), or one the server rejected, goes to
//!   `failed/`: a file that cannot be opened, read or deleted now (permissions, no file descriptors
//!   left, an antivirus holding it) stays for the next flush, and this flush goes on with the rest.
//! - Every file is claimed before it is read (see [`super::claim`]): any number of processes may
//!   flush one outbox, each envelope is sent once, and nothing another process is sending is deleted.
//! - Envelopes held back by a rule of their own (crash loop, a hang waiting for its loss) wait in
//!   `held/` (see [`super::held`]).
//! - The outbox (and `failed/`) is bounded in files and bytes; what is worth least goes first
//!   (session updates, then warnings, then crash reports, the oldest of each), with a log line and a
//!   marker in `dropped/` (see [`super::ledger`]).
//! - A sent envelope leaves an empty marker of the same name in `sent/`, kept as long as its report
//!   is on disk, so a report is uploaded once however often it is queued again
//!   ([`Outbox::state_of`], as `gpu-crash upload` checks before queueing).
//! - Files are hostile input: only regular files are read, never through a symlink, at most
//!   [`envelope_read_cap`] bytes; folders and envelopes are created owner-only (see
//!   [`crate::safe_fs`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use tracing::{error, info, warn};

use sentry::protocol::SessionUpdate;
use sentry::Envelope;

use super::claim::Claim;
use super::dsn::Dsn;
use super::envelope::{build_envelope, session_envelope, ENVELOPE_EXT};
use super::envelope_name::{
    envelope_file_name, session_envelope_name, EnvelopeClass, EnvelopeName,
};
use super::held::{self, HeldEnvelope, HELD_DIR};
use super::ledger::{self, DROPPED_DIR, SENT_DIR};
use super::settings::DeliverySettings;
use super::transport::{HttpTransport, SendOutcome, Transport};
use crate::report::{write_atomically, write_atomically_locked, CrashReport};
use crate::safe_fs;

/// First delay after a 5xx or network error; doubled per failure.
const BACKOFF_START: Duration = Duration::from_secs(1);
/// Longest delay after repeated 5xx or network errors.
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Below this much time left, a flush does not start another request.
const MIN_REQUEST_TIME: Duration = Duration::from_millis(50);

/// Why an envelope could not be written to, or read back from, the outbox.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// The envelope could not be serialised or written (full disk, permissions).
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The envelope's path.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The envelope file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The envelope's path.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is larger than any envelope this outbox writes: its event and attachment limits
    /// plus 1 MiB, at least 64 MiB.
    #[error("{} is larger than the {limit}-byte limit of an envelope", .path.display())]
    TooLarge {
        /// The file's path.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// The file is not a Sentry envelope (truncated, or not written by this crate).
    #[error("{} is not a Sentry envelope: {source}", .path.display())]
    Malformed {
        /// The envelope's path.
        path: PathBuf,
        /// sentry-types' reason.
        source: sentry::protocol::EnvelopeError,
    },
}

/// What one [`Outbox::flush`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushSummary {
    /// Envelopes accepted (2xx) and deleted.
    pub sent: usize,
    /// Envelopes rejected (4xx other than 429) and moved to `failed/`.
    pub failed: usize,
    /// HTTP requests made (including retries).
    pub attempts: usize,
    /// Envelopes still waiting when the flush returned.
    pub pending: usize,
    /// Why the flush stopped with envelopes left (no DSN, no consent, deadline, rate limit, errors).
    pub stopped: Option<String>,
    /// The last error seen, in words.
    pub last_error: Option<String>,
}

/// Where a report stands in an outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadState {
    /// Its envelope waits in the outbox.
    Pending,
    /// The server rejected it; its envelope is in `failed/`.
    Failed,
    /// A server accepted it (`sent/` holds its marker).
    Sent,
    /// This outbox has never seen it.
    NotQueued,
}

impl UploadState {
    /// In one word, for listings: `pending`, `failed`, `sent`, `not queued`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Failed => "failed",
            Self::Sent => "sent",
            Self::NotQueued => "not queued",
        }
    }
}

/// Envelopes on disk and their upload. Cheap to clone; share one per directory in a process.
#[derive(Clone, Debug)]
pub struct Outbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    failed_dir: PathBuf,
    settings: DeliverySettings,
    dsn: Option<Dsn>,
    dsn_error: Option<String>,
    transport: Arc<dyn Transport>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// No sends before this instant (429, 5xx, network errors, rate-limit headers).
    blocked_until: Option<Instant>,
    /// Next delay after a 5xx or network error.
    backoff: Option<Duration>,
}

impl Outbox {
    /// An outbox in `settings.outbox_dir`, sending to [`DeliverySettings::resolve_dsn`].
    ///
    /// Never fails: a bad `SENTRY_DSN` is logged (reports then stay on disk) and a directory that
    /// cannot be created is reported by [`Self::enqueue`].
    pub fn new(settings: DeliverySettings) -> Self {
        Self::with_transport(settings, Arc::new(HttpTransport::new()))
    }

    /// [`Self::new`], sending through `transport` (a scripted one in tests and the lifetime
    /// simulation).
    pub(crate) fn with_transport(
        settings: DeliverySettings,
        transport: Arc<dyn Transport>,
    ) -> Self {
        let (dsn, dsn_error) = match settings.resolve_dsn() {
            Ok(dsn) => (dsn, None),
            Err(e) => {
                error!("GPU crash reporter: {e}; crash reports will stay on disk");
                (None, Some(e.to_string()))
            }
        };
        let dir = settings.outbox_dir.clone();
        if let Err(e) = safe_fs::create_private_dir_all(&dir) {
            warn!(
                "GPU crash reporter: cannot create the outbox {}: {e}",
                dir.display()
            );
        }
        Self {
            inner: Arc::new(Inner {
                failed_dir: dir.join(FAILED_DIR),
                dir,
                settings,
                dsn,
                dsn_error,
                transport,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The outbox directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Where rejected envelopes are kept.
    pub fn failed_dir(&self) -> &Path {
        &self.inner.failed_dir
    }

    /// The DSN uploads go to, if any.
    pub fn dsn(&self) -> Option<&Dsn> {
        self.inner.dsn.as_ref()
    }

    /// Why `SENTRY_DSN` was not usable, if it was set but malformed.
    pub fn dsn_error(&self) -> Option<&str> {
        self.inner.dsn_error.as_deref()
    }

    /// The settings this outbox was made with.
    pub fn settings(&self) -> &DeliverySettings {
        &self.inner.settings
    }

    /// Builds the envelope for `report` (see `build_envelope`) and writes it into the outbox
    /// atomically. Nothing is sent; call [`Self::flush`]. Drops the oldest envelopes if the outbox
    /// is over its bounds (never the one just written).
    pub fn enqueue(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
    ) -> Result<PathBuf, OutboxError> {
        self.enqueue_with_session(report, vendor_binary, None)
    }

    /// [`Self::enqueue`], with the run's session update in the crash's envelope: Sentry counts the
    /// session crashed as it takes the crash event (see [`super::release_health`]).
    pub(crate) fn enqueue_with_session(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
        session: Option<&SessionUpdate<'static>>,
    ) -> Result<PathBuf, OutboxError> {
        self.enqueue_inner(report, vendor_binary, session, true)
    }

    /// Queues a report of an earlier run (see [`super::requeue`]): the bounds then drop what is
    /// worth least, this one included (an old report does not push out a newer crash).
    pub(crate) fn enqueue_requeued(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
    ) -> Result<PathBuf, OutboxError> {
        self.enqueue_inner(report, vendor_binary, None, false)
    }

    /// Whether an envelope named `name` would be the first to go from a full outbox.
    pub(crate) fn would_be_dropped(&self, name: &str) -> bool {
        let pending = self.pending();
        if pending.len() < self.inner.settings.max_outbox_files {
            return false;
        }
        let rank = drop_rank(Path::new(name));
        pending.iter().all(|p| rank <= drop_rank(p))
    }

    fn enqueue_inner(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
        session: Option<&SessionUpdate<'static>>,
        protect: bool,
    ) -> Result<PathBuf, OutboxError> {
        let inner = &self.inner;
        let path = inner.dir.join(envelope_file_name(report));
        self.envelope_bytes(report, vendor_binary, session)
            .and_then(|envelope| {
                safe_fs::create_private_dir_all(&inner.dir)?;
                write_atomically(&path, &envelope)
            })
            .map_err(|source| OutboxError::Write {
                path: path.clone(),
                source,
            })?;
        if inner.dsn.is_none() {
            info!(
                "GPU crash report saved to {}; no Sentry DSN is configured (DeliverySettings::dsn or \
                 SENTRY_DSN), so it stays there",
                path.display()
            );
        } else {
            info!("GPU crash report queued for upload: {}", path.display());
        }
        self.enforce_bounds(&inner.dir, protect.then_some(path.as_path()));
        Ok(path)
    }

    /// Writes a session update's own envelope into the outbox (a session that ended without a
    /// crash event to ride with), for the next flush. One file per session: queued twice, it is
    /// sent once.
    pub(crate) fn enqueue_session(
        &self,
        update: &SessionUpdate<'static>,
    ) -> Result<PathBuf, OutboxError> {
        let inner = &self.inner;
        let path = inner.dir.join(session_envelope_name(update));
        let mut bytes = Vec::new();
        session_envelope(update, &inner.settings)
            .to_writer(&mut bytes)
            .and_then(|()| {
                safe_fs::create_private_dir_all(&inner.dir)?;
                write_atomically(&path, &bytes)
            })
            .map_err(|source| OutboxError::Write {
                path: path.clone(),
                source,
            })?;
        self.enforce_bounds(&inner.dir, Some(&path));
        Ok(path)
    }

    fn envelope_bytes(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
        session: Option<&SessionUpdate<'static>>,
    ) -> std::io::Result<Vec<u8>> {
        let mut envelope = build_envelope(report, vendor_binary, &self.inner.settings);
        if let Some(update) = session {
            envelope.add_item(update.clone());
        }
        let mut bytes = Vec::new();
        envelope.to_writer(&mut bytes)?;
        Ok(bytes)
    }

    /// Writes `report`'s envelope into `held/`, locked by this process: on disk, but no flush sends
    /// it until [`Self::release`] (or until this process is gone: then the next flush of any process
    /// does).
    pub(crate) fn hold(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
    ) -> Result<HeldEnvelope, OutboxError> {
        let path = self
            .inner
            .dir
            .join(HELD_DIR)
            .join(envelope_file_name(report));
        let file = self
            .envelope_bytes(report, vendor_binary, None)
            .and_then(|envelope| {
                safe_fs::create_private_dir_all(&self.inner.dir)?;
                let dir = safe_fs::private_subdir(&self.inner.dir, HELD_DIR)?;
                write_atomically_locked(&dir.join(envelope_file_name(report)), &envelope)
            })
            .map_err(|source| OutboxError::Write {
                path: path.clone(),
                source,
            })?;
        Ok(HeldEnvelope::new(path, file))
    }

    /// Moves a held envelope into the outbox, for the next flush.
    pub(crate) fn release(&self, held: HeldEnvelope) -> Result<PathBuf, OutboxError> {
        let from = held.path().to_owned();
        let released = held
            .release_into(&self.inner.dir)
            .map_err(|source| OutboxError::Write { path: from, source })?;
        self.enforce_bounds(&self.inner.dir, Some(&released));
        Ok(released)
    }

    /// Sends `report` now, from memory, without the outbox (for a report that could not be written
    /// to disk: a full disk, a read-only folder). Bounded by [`DeliverySettings::upload_timeout`];
    /// honours consent and the DSN like a flush; one attempt, no retry (nothing is left to retry
    /// from). Returns the event id, or why it was not sent.
    pub(crate) fn send_from_memory(
        &self,
        report: &CrashReport,
        vendor_binary: Option<&[u8]>,
    ) -> Result<String, String> {
        let inner = &self.inner;
        let dsn = inner.dsn.as_ref().ok_or_else(|| match &inner.dsn_error {
            Some(e) => format!("no usable DSN: {e}"),
            None => "no DSN configured".to_owned(),
        })?;
        if !inner.settings.upload_consent.allows() {
            return Err("no upload consent".to_owned());
        }
        let bytes = self
            .envelope_bytes(report, vendor_binary, None)
            .map_err(|e| format!("cannot build the envelope: {e}"))?;
        let (event_id, body) =
            stamped_for_sending(&bytes, Path::new("(memory)"), dsn).map_err(|e| e.to_string())?;
        match inner
            .transport
            .send(dsn, &body, inner.settings.upload_timeout)
        {
            SendOutcome::Accepted { .. } => Ok(event_id),
            other => Err(format!("{other:?}")),
        }
    }

    /// Drops what is worth least until the outbox is within its bounds (a process killed after
    /// writing an envelope and before its bounds check leaves it over them).
    pub(crate) fn keep_within_bounds(&self) {
        self.enforce_bounds(&self.inner.dir, None);
    }

    /// Keeps `report_dir` within the report budget ([`DeliverySettings::max_report_files`] and
    /// bytes), never dropping `keep` (the report just written); see [`super::report_budget`].
    pub(crate) fn keep_reports_in_budget(&self, report_dir: &Path, keep: Option<&Path>) {
        super::report_budget::enforce(report_dir, &self.inner.dir, &self.inner.settings, keep);
    }

    /// Where `report` stands in the outbox at `dir` (read only: nothing is created or sent).
    pub fn state_of(dir: &Path, report: &CrashReport) -> UploadState {
        let name = envelope_file_name(report);
        let plain = |path: PathBuf| safe_fs::is_plain_file(&path);
        if ledger::has(dir, SENT_DIR, &name) {
            UploadState::Sent
        } else if plain(dir.join(&name)) || plain(dir.join(HELD_DIR).join(&name)) {
            UploadState::Pending
        } else if plain(dir.join(FAILED_DIR).join(&name)) {
            UploadState::Failed
        } else {
            UploadState::NotQueued
        }
    }

    /// Pending envelopes, oldest first.
    pub fn pending(&self) -> Vec<PathBuf> {
        list_envelopes(&self.inner.dir)
    }

    /// Rejected envelopes in `failed/`, oldest first.
    pub fn failed(&self) -> Vec<PathBuf> {
        list_envelopes(&self.inner.failed_dir)
    }

    /// Sends pending envelopes, oldest first, until none is left or `deadline` passes. Never
    /// blocks past `deadline` (each request's timeout is cut to the time left) and never panics.
    pub fn flush(&self, deadline: Instant) -> FlushSummary {
        let inner = &self.inner;
        let mut summary = FlushSummary::default();
        let Some(dsn) = inner.dsn.clone() else {
            summary.pending = self.pending().len();
            if summary.pending > 0 {
                info!(
                    "GPU crash reporter: no Sentry DSN configured; {} crash report(s) stay in {}",
                    summary.pending,
                    inner.dir.display()
                );
            }
            summary.stopped = Some(match &inner.dsn_error {
                Some(e) => format!("no usable DSN: {e}"),
                None => "no DSN configured".to_owned(),
            });
            return summary;
        };
        if held::release_orphans(&inner.dir.join(HELD_DIR), &inner.dir) > 0 {
            self.enforce_bounds(&inner.dir, None);
        }
        let mut warned_transient = false;
        // Files this flush cannot open or read now, or could not move to `failed/`: left alone
        // until the next flush, which tries them again.
        let mut skipped: HashSet<PathBuf> = HashSet::new();
        let mut unreadable = 0usize;
        let mut unreadable_reason = String::new();
        loop {
            let now = Instant::now();
            if deadline.saturating_duration_since(now) < MIN_REQUEST_TIME {
                summary.stopped = Some("deadline reached".to_owned());
                break;
            }
            let blocked = self.state().blocked_until.filter(|&t| t > now);
            if let Some(until) = blocked {
                if until > deadline {
                    summary.stopped = Some(format!(
                        "server asked to wait {:.1} s, past the deadline",
                        (until - now).as_secs_f64()
                    ));
                    break;
                }
                std::thread::sleep(until - now);
                continue;
            }
            let mut claim = match self.claim_next(&skipped) {
                Ok(Some(claim)) => claim,
                Ok(None) => break,
                Err((path, e)) => {
                    let reason = format!("cannot open {} now: {e}", path.display());
                    warn!("GPU crash reporter: {reason}; it stays for the next flush");
                    summary.last_error = Some(reason.clone());
                    unreadable_reason = reason;
                    skipped.insert(path);
                    unreadable += 1;
                    continue;
                }
            };
            if !inner.settings.upload_consent.allows() {
                summary.stopped = Some("no upload consent".to_owned());
                info!(
                    "GPU crash reporter: upload consent not given; crash reports stay in {}",
                    inner.dir.display()
                );
                break;
            }
            let path = claim.path().to_owned();
            if ledger::has(&inner.dir, SENT_DIR, &file_name_of(&path)) {
                // Sent by a flush that died before deleting it: the marker is written first. One
                // that cannot be deleted now (an antivirus holds it) is left for the next flush,
                // not claimed again and again until the deadline.
                if crate::safe_fs::remove_file(&path).is_err() {
                    skipped.insert(path);
                }
                continue;
            }
            let cap = envelope_read_cap(&inner.settings);
            let stamped = match claim.read(cap) {
                Ok(bytes) => stamped_for_sending(&bytes, &path, &dsn),
                // Larger than any envelope this outbox writes: not one of ours.
                Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
                    Err(OutboxError::TooLarge {
                        path: path.clone(),
                        limit: cap,
                    })
                }
                Err(source) => {
                    let reason = OutboxError::Read {
                        path: path.clone(),
                        source,
                    }
                    .to_string();
                    warn!("GPU crash reporter: {reason}; it stays for the next flush");
                    summary.last_error = Some(reason.clone());
                    unreadable_reason = reason;
                    skipped.insert(path);
                    unreadable += 1;
                    continue;
                }
            };
            let (event_id, body) = match stamped {
                Ok(stamped) => stamped,
                Err(e) => {
                    let reason = e.to_string();
                    error!("GPU crash reporter: {reason}; moving it to failed/");
                    if self.move_to_failed(&mut claim).is_none() {
                        skipped.insert(path);
                    }
                    summary.failed += 1;
                    summary.last_error = Some(reason);
                    continue;
                }
            };
            let timeout = inner
                .settings
                .upload_timeout
                .min(deadline.saturating_duration_since(Instant::now()));
            summary.attempts += 1;
            let outcome = inner.transport.send(&dsn, &body, timeout);
            let now = Instant::now();
            match outcome {
                SendOutcome::Accepted { status, rate_limit } => {
                    if !self.mark_sent(&mut claim) {
                        skipped.insert(path.clone());
                    }
                    summary.sent += 1;
                    let what = if event_id.is_empty() {
                        "GPU crash reporter: a session update".to_owned()
                    } else {
                        format!("GPU crash report {event_id}")
                    };
                    info!("{what} delivered to {} (HTTP {status})", dsn.host());
                    let mut state = self.state();
                    state.backoff = None;
                    state.blocked_until = rate_limit.map(|d| now + d);
                }
                SendOutcome::RateLimited {
                    status,
                    retry_after,
                } => {
                    let reason = format!(
                        "HTTP {status} from {}: rate limited, retrying after {:.1} s",
                        dsn.host(),
                        retry_after.as_secs_f64()
                    );
                    if !warned_transient {
                        warn!("GPU crash reporter: {reason}");
                        warned_transient = true;
                    }
                    summary.last_error = Some(reason);
                    self.state().blocked_until = Some(now + retry_after);
                }
                SendOutcome::ServerError {
                    status,
                    retry_after,
                    body,
                } => {
                    let reason = format!("HTTP {status} from {}: {body}", dsn.host());
                    self.back_off(now, retry_after, &reason, &mut warned_transient);
                    summary.last_error = Some(reason);
                }
                SendOutcome::Network(e) => {
                    let reason = format!("cannot reach {}: {e}", dsn.envelope_url());
                    self.back_off(now, None, &reason, &mut warned_transient);
                    summary.last_error = Some(reason);
                }
                SendOutcome::Rejected { status, body } => {
                    let hint = match status {
                        401 | 403 => " (check the DSN's public key and project id)",
                        400 => " (malformed DSN key or envelope)",
                        413 => " (envelope too large)",
                        _ => "",
                    };
                    let kept = match self.move_to_failed(&mut claim) {
                        Some(target) => format!("kept as {}", target.display()),
                        None => {
                            skipped.insert(path.clone());
                            format!(
                                "left in {} (failed/ cannot be written)",
                                inner.dir.display()
                            )
                        }
                    };
                    let reason = format!(
                        "{} rejected crash report {event_id} with HTTP {status}{hint}: {body:?}; {kept}",
                        dsn.host()
                    );
                    error!("GPU crash reporter: {reason}");
                    summary.failed += 1;
                    summary.last_error = Some(reason);
                }
            }
            drop(claim);
        }
        if unreadable > 0 && summary.stopped.is_none() {
            summary.stopped = Some(format!(
                "{unreadable} envelope(s) cannot be opened or read now (last: {unreadable_reason}); \
                 the next flush tries again"
            ));
        }
        summary.pending = self.pending().len();
        if summary.pending > 0 {
            info!(
                "GPU crash reporter: {} crash report(s) wait in {} ({})",
                summary.pending,
                inner.dir.display(),
                summary
                    .stopped
                    .as_deref()
                    .unwrap_or("in use by another flush")
            );
        }
        summary
    }

    /// [`Self::flush`] for at most [`DeliverySettings::upload_timeout`]: what a dying game calls
    /// right after [`Self::enqueue`].
    pub fn flush_at_crash(&self) -> FlushSummary {
        self.flush(deadline_in(self.inner.settings.upload_timeout))
    }

    /// Flushes on a new thread (`gpu-crash-upload`) for at most `budget`: at startup, to send what
    /// an earlier run left, or right after a crash when the game goes on.
    pub fn spawn_background_flush(
        &self,
        budget: Duration,
    ) -> std::io::Result<JoinHandle<FlushSummary>> {
        let outbox = self.clone();
        std::thread::Builder::new()
            .name("gpu-crash-upload".to_owned())
            .spawn(move || outbox.flush(deadline_in(budget)))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves consistent data (plain fields).
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn back_off(
        &self,
        now: Instant,
        retry_after: Option<Duration>,
        reason: &str,
        warned: &mut bool,
    ) {
        let mut state = self.state();
        let delay = retry_after.unwrap_or_else(|| state.backoff.unwrap_or(BACKOFF_START));
        state.backoff = Some(
            (state.backoff.unwrap_or(BACKOFF_START) * 2)
                .min(BACKOFF_MAX)
                .max(BACKOFF_START),
        );
        state.blocked_until = Some(now + delay);
        drop(state);
        if !*warned {
            warn!(
                "GPU crash reporter: {reason}; retrying in {:.1} s",
                delay.as_secs_f64()
            );
            *warned = true;
        }
    }

    /// Claims the next pending envelope in [`send_order`] that no other flush (of any process)
    /// holds. `Err` names a file that cannot be opened now: the flush ends and leaves it.
    fn claim_next(
        &self,
        skipped: &HashSet<PathBuf>,
    ) -> Result<Option<Claim>, (PathBuf, std::io::Error)> {
        for path in send_order(self.pending()) {
            if skipped.contains(&path) {
                continue;
            }
            match Claim::try_new(&path) {
                Ok(Some(claim)) => return Ok(Some(claim)),
                Ok(None) => continue,
                Err(e) => return Err((path, e)),
            }
        }
        Ok(None)
    }

    /// Records the claimed envelope as sent, as the first change after the server's 2xx: the
    /// envelope itself moves into `sent/` and is emptied there, its own marker (see [`ledger`]). A
    /// rename needs no free space, so a full disk still records it (a new marker file could not be
    /// created there, and the report would be queued and sent again by the next launch). Where the
    /// rename fails (a file open elsewhere on Windows), an empty marker is written and the envelope
    /// deleted: the marker first, so a flush that dies between the two leaves a file the next flush
    /// deletes unsent. False when the envelope is still in the outbox (the next flush deals with
    /// it: this one does not claim it again).
    fn mark_sent(&self, claim: &mut Claim) -> bool {
        let path = claim.path().to_owned();
        match ledger::retire(&self.inner.dir, SENT_DIR, &path) {
            Ok(marker) => {
                claim.renamed(marker);
                true
            }
            Err(e) => {
                warn!(
                    "GPU crash reporter: sent {} but cannot record it as sent: {e}; the next \
                     flush tries again",
                    path.display()
                );
                false
            }
        }
    }

    /// Moves the claimed file into `failed/` (kept for a developer to look at), bounded like the
    /// outbox. `None` when it cannot: the file then stays where it is (never deleted: it may be a
    /// good envelope the server rejects only today) and this flush skips it.
    fn move_to_failed(&self, claim: &mut Claim) -> Option<PathBuf> {
        let failed = &self.inner.failed_dir;
        let path = claim.path().to_owned();
        let target = failed.join(path.file_name().unwrap_or_default());
        let moved = safe_fs::private_subdir(&self.inner.dir, FAILED_DIR)
            .and_then(|_| crate::safe_fs::rename(&path, &target));
        match moved {
            Ok(()) => {
                claim.renamed(target.clone());
                if let Ok(d) = std::fs::File::open(&self.inner.dir) {
                    let _ = d.sync_all();
                }
                self.enforce_bounds(failed, Some(&target));
                Some(target)
            }
            Err(e) => {
                error!(
                    "GPU crash reporter: cannot move {} to {}: {e}; it stays in the outbox",
                    path.display(),
                    failed.display()
                );
                None
            }
        }
    }

    /// Drops the oldest envelopes of `dir` until it is within the count and byte bounds.
    fn enforce_bounds(&self, dir: &Path, keep: Option<&Path>) {
        let settings = &self.inner.settings;
        let mut files: Vec<(PathBuf, u64)> = list_envelopes(dir)
            .into_iter()
            .map(|p| {
                let len = std::fs::metadata(&p).map_or(0, |m| m.len());
                (p, len)
            })
            .collect();
        // By worth: session updates first (a count on a chart), then warnings (faults the driver
        // survived), then crash reports; the oldest of each first.
        files.sort_by_key(|(p, _)| drop_rank(p));
        let mut total: u64 = files.iter().map(|(_, l)| l).sum();
        let mut i = 0;
        while (files.len() > settings.max_outbox_files || total > settings.max_outbox_bytes)
            && i < files.len()
        {
            let (path, len) = &files[i];
            // Only what this check can claim: never what a flush (of any process) is sending.
            let claim = match Claim::try_new(path) {
                Ok(Some(claim)) if Some(path.as_path()) != keep => claim,
                _ => {
                    i += 1;
                    continue;
                }
            };
            // Its marker in `dropped/`, so that the startup requeue does not queue its report
            // again (the envelope itself, emptied: it needs no free space).
            let removed = ledger::retire(&self.inner.dir, DROPPED_DIR, path).map(|_| ());
            drop(claim);
            match removed {
                Ok(()) => warn!(
                    "GPU crash reporter: {} holds {} file(s), {} bytes (limits {} files, {} bytes): \
                     dropped {}",
                    dir.display(),
                    files.len(),
                    total,
                    settings.max_outbox_files,
                    settings.max_outbox_bytes,
                    path.display()
                ),
                Err(e) => warn!(
                    "GPU crash reporter: cannot drop {}: {e}",
                    path.display()
                ),
            }
            total -= len;
            files.remove(i);
        }
    }
}

/// `budget` from now; a budget too large for the clock (a setting of `Duration::MAX`) is a day.
pub(crate) fn deadline_in(budget: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(budget)
        .unwrap_or_else(|| now + Duration::from_secs(24 * 3600))
}

/// The largest outbox file read: an event, the report JSON, the vendor binary and the report page
/// at their limits, plus 1 MiB for headers; never under 64 MiB, so that envelopes written under
/// larger limits by an earlier run still go out.
pub(crate) fn envelope_read_cap(settings: &DeliverySettings) -> u64 {
    const FLOOR: u64 = 64 * 1024 * 1024;
    let limits = (settings.max_event_bytes as u64)
        .saturating_add((settings.max_attachment_bytes as u64).saturating_mul(3))
        .saturating_add(1024 * 1024);
    limits.max(FLOOR)
}

/// The file name of an outbox path, as text.
fn file_name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The event id and bytes of an envelope, its headers' `sent_at` set to now (so Sentry can correct
/// clock drift) and `dsn` to the one it is sent to (without its secret key, which goes only into the
/// `X-Sentry-Auth` header).
fn stamped_for_sending(
    bytes: &[u8],
    path: &Path,
    dsn: &Dsn,
) -> Result<(String, Vec<u8>), OutboxError> {
    let envelope = Envelope::from_slice(bytes).map_err(|source| OutboxError::Malformed {
        path: path.to_owned(),
        source,
    })?;
    let event_id = envelope.uuid().map(|id| id.simple().to_string());
    let mut headers = envelope.headers().clone().with_sent_at(SystemTime::now());
    if let Some(public) = dsn.without_secret() {
        headers = headers.with_dsn(public);
    }
    let mut body = Vec::with_capacity(bytes.len());
    // Writing into a Vec cannot fail but for serialisation, which read the same types a moment ago.
    envelope
        .with_headers(headers)
        .to_writer(&mut body)
        .map_err(|source| OutboxError::Write {
            path: path.to_owned(),
            source,
        })?;
    Ok((event_id.unwrap_or_default(), body))
}

/// The order a flush sends `pending` in: crash reports newest first (the crash that just happened
/// goes out before a backlog of older ones, within a crash's short upload time), then warnings
/// newest first, then session updates oldest first. A name that does not read as an outbox name
/// goes last (it is not one of ours; the flush moves it to `failed/`).
fn send_order(mut pending: Vec<PathBuf>) -> Vec<PathBuf> {
    pending.sort_by_cached_key(|p| match EnvelopeName::of(p) {
        Some(n) => match n.class {
            EnvelopeClass::Crash => (0u8, u128::MAX - n.time_ms),
            EnvelopeClass::Warning => (1, u128::MAX - n.time_ms),
            EnvelopeClass::Session => (2, n.time_ms),
        },
        None => (3, 0),
    });
    pending
}

/// Where `path` stands when the outbox is over its bounds: lowest goes first. Sessions, then
/// warnings, then crash reports ([`EnvelopeClass`]'s order), each oldest first; a name that does not
/// read as ours first of all.
fn drop_rank(path: &Path) -> (u8, EnvelopeClass, u128) {
    match EnvelopeName::of(path) {
        Some(n) => (1, n.class, n.time_ms),
        None => (0, EnvelopeClass::Session, 0),
    }
}

/// `*.envelope` files of `dir` (not temp files), sorted by name = oldest first.
fn list_envelopes(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            !name.starts_with('.') && name.ends_with(&format!(".{ENVELOPE_EXT}"))
        })
        .collect();
    files.sort();
    files
}

/// Subdirectory of rejected envelopes.
pub(crate) const FAILED_DIR: &str = "failed";
