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

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tracing::{error, info, warn};

use sentry::protocol::SessionUpdate;

use super::dsn::Dsn;
use super::envelope::{build_envelope, session_envelope, ENVELOPE_EXT};
use super::envelope_name::{envelope_file_name, session_envelope_name};
use super::held::{HeldEnvelope, HELD_DIR};
use super::ledger::{self, SENT_DIR};
use super::settings::DeliverySettings;
use super::transport::{HttpTransport, Transport};
use crate::report::{write_atomically, write_atomically_locked, CrashReport};
use crate::safe_fs;

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
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) dir: PathBuf,
    pub(super) failed_dir: PathBuf,
    pub(super) settings: DeliverySettings,
    pub(super) dsn: Option<Dsn>,
    pub(super) dsn_error: Option<String>,
    pub(super) transport: Arc<dyn Transport>,
    pub(super) state: Mutex<State>,
    /// Requests on the wire, which an exit lets finish (see [`super::in_flight`]).
    pub(super) in_flight: super::in_flight::InFlight,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// No sends before this instant (429, 5xx, network errors, rate-limit headers).
    pub(super) blocked_until: Option<Instant>,
    /// Next delay after a 5xx or network error.
    pub(super) backoff: Option<Duration>,
    /// How long this server took to answer the last request that got an answer (network failures
    /// do not count): after its first request, a flush does not start another with less than
    /// twice this left, which it would likely cut short after the server took the envelope (and
    /// the next launch would send it again).
    pub(super) last_answer: Duration,
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
                in_flight: Default::default(),
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

    pub(super) fn envelope_bytes(
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

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves consistent data (plain fields).
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
pub(super) fn file_name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `*.envelope` files of `dir` (not temp files), sorted by name = oldest first.
pub(super) fn list_envelopes(dir: &Path) -> Vec<PathBuf> {
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
