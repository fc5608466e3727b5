//! The outbox's flush: what is sent, in which order, and what each answer of the server does (see
//! [`super::outbox`] for the rules).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use sentry::Envelope;
use tracing::{error, info, warn};

use super::claim::Claim;
use super::dsn::Dsn;
use super::envelope_name::{EnvelopeClass, EnvelopeName};
use super::held::{self, HELD_DIR};
use super::ledger::{self, DROPPED_DIR, SENT_DIR};
use super::outbox::{
    deadline_in, envelope_read_cap, file_name_of, FlushSummary, Outbox, OutboxError, FAILED_DIR,
};
use super::transport::SendOutcome;
use crate::report::CrashReport;
use crate::safe_fs;

/// First delay after a 5xx or network error; doubled per failure.
const BACKOFF_START: Duration = Duration::from_secs(1);
/// Longest delay after repeated 5xx or network errors.
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Below this much time left, a flush does not start another request.
const MIN_REQUEST_TIME: Duration = Duration::from_millis(50);

impl Outbox {
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
            SendOutcome::Accepted { .. } => {
                // Its report file may be on disk (the envelope, larger, was what did not fit): the
                // marker, an empty file, keeps the next launch's requeue from sending it again.
                let name = super::envelope_name::envelope_file_name(report);
                if let Err(e) = super::ledger::record(&inner.dir, super::ledger::SENT_DIR, &name) {
                    warn!(
                        "GPU crash reporter: sent {name} but cannot record it ({e}); a later \
                         launch may send it again (Sentry keeps one event per id)"
                    );
                }
                Ok(event_id)
            }
            other => Err(format!("{other:?}")),
        }
    }

    /// Sends pending envelopes, oldest first, until none is left or `deadline` passes. Never
    /// blocks past `deadline` (each request's timeout is cut to the time left) and never panics.
    /// Once the process winds down ([`Self::wind_down`]) it starts no request.
    pub fn flush(&self, deadline: Instant) -> FlushSummary {
        self.flush_with(deadline, false)
    }

    /// The exit's own flush: [`Self::flush`], after [`Self::wind_down`].
    pub(crate) fn flush_for_exit(&self, deadline: Instant) -> FlushSummary {
        self.flush_with(deadline, true)
    }

    /// The process is exiting: other flushes start no request from now on, and this waits up to
    /// `bound` for the requests on the wire to be answered and recorded (see
    /// [`super::in_flight`]). Returns whether none is left.
    pub(crate) fn wind_down(&self, bound: Duration) -> bool {
        self.inner.in_flight.wind_down(deadline_in(bound))
    }

    fn flush_with(&self, deadline: Instant, for_exit: bool) -> FlushSummary {
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
        let mut unreadable = Unreadable::default();
        loop {
            let now = Instant::now();
            if !for_exit && inner.in_flight.winding_down() {
                summary.stopped = Some("the application is exiting".to_owned());
                break;
            }
            // The flush's first request always goes (its deadline was set for it); a later one
            // only with time for this server's answer.
            let needed = if summary.attempts == 0 {
                MIN_REQUEST_TIME
            } else {
                MIN_REQUEST_TIME
                    .max((self.state().last_answer * 2).min(inner.settings.upload_timeout))
            };
            if deadline.saturating_duration_since(now) < needed {
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
                    unreadable.leave(reason, path, &mut summary, &mut skipped);
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
            if session_too_old(&path, SystemTime::now()) {
                // Sentry drops a session update whose session started over 5 days ago: not sent.
                info!(
                    "GPU crash reporter: {} is a session update older than Sentry accepts (5 \
                     days); not sent",
                    path.display()
                );
                if ledger::retire(&inner.dir, DROPPED_DIR, &path).is_err() {
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
                    unreadable.leave(reason, path, &mut summary, &mut skipped);
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
            // Held until the outcome below is recorded: an exit waits for it.
            let Some(_request) = inner.in_flight.begin(for_exit) else {
                summary.stopped = Some("the application is exiting".to_owned());
                break;
            };
            summary.attempts += 1;
            let sent_at = Instant::now();
            let outcome = inner.transport.send(&dsn, &body, timeout);
            let now = Instant::now();
            if !matches!(outcome, SendOutcome::Network(_)) {
                self.state().last_answer = now - sent_at;
            }
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
        let Unreadable {
            count: unreadable,
            last: unreadable_reason,
        } = unreadable;
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
        // A crash's own upload goes even while the process winds down (a GPU that hangs in the
        // application's teardown): the process waits for it, bounded, and ends after.
        self.flush_with(deadline_in(self.inner.settings.upload_timeout), true)
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
            .spawn(move || {
                crate::guard::guarded("background upload", || outbox.flush(deadline_in(budget)))
                    .unwrap_or_default()
            })
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
}

/// Envelopes a flush cannot open or read now: left for the next flush, counted for its summary.
#[derive(Default)]
struct Unreadable {
    count: usize,
    last: String,
}

impl Unreadable {
    /// Leaves `path` for the next flush, for `reason`.
    fn leave(
        &mut self,
        reason: String,
        path: PathBuf,
        summary: &mut FlushSummary,
        skipped: &mut HashSet<PathBuf>,
    ) {
        warn!("GPU crash reporter: {reason}; it stays for the next flush");
        summary.last_error = Some(reason.clone());
        self.last = reason;
        skipped.insert(path);
        self.count += 1;
    }
}

/// How far in the past Sentry accepts a session update (Relay's `max_session_secs_in_past`).
const SESSION_MAX_AGE: Duration = Duration::from_secs(5 * 24 * 3600);

/// Whether `path` is a session update's own envelope whose session started longer ago than Sentry
/// accepts (a player offline for a week).
fn session_too_old(path: &Path, now: SystemTime) -> bool {
    let Some(name) = EnvelopeName::of(path) else {
        return false;
    };
    let started = u64::try_from(name.time_ms)
        .ok()
        .and_then(|ms| std::time::UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
    name.class == EnvelopeClass::Session
        && started.is_some_and(|t| now.duration_since(t).is_ok_and(|age| age > SESSION_MAX_AGE))
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
