//! Deliver: the on-disk outbox and the Sentry upload.
//!
//! ```text
//! CrashReport ─▶ event::sentry_event ─▶ envelope::build_envelope ─▶ Outbox::enqueue (disk, atomic)
//!                                                                        │
//!                          Outbox::flush(deadline) / spawn_background_flush ─▶ HTTP POST ─▶ Sentry / Bugsink
//! ```
//!
//! - [`event`]: the Sentry event a developer reads (exception, `gpu` context, tags, breadcrumbs,
//!   fingerprint, extra), always under 1 MiB.
//! - [`envelope`]: sentry-types' `Envelope` (event + report JSON + vendor binary + report page
//!   attachments).
//! - [`Dsn`]: sentry-types' DSN, parsed with errors that say what is wrong.
//! - [`Outbox`]: envelopes are written to disk *before* any send and deleted only after a 2xx; retries
//!   honour `Retry-After` and `X-Sentry-Rate-Limits` (read by sentry's `RateLimiter`); rejected
//!   envelopes move to `failed/`; at startup, reports that never reached the outbox are queued again
//!   ([`requeue`]).
//! - [`release_health`]: Sentry sessions (one per run, or per the game's own), on disk until they
//!   end, their updates queued like crash reports (and inside a crash's envelope).
//! - The HTTP transport is `ureq` 3 with rustls (see [`transport`] for why).

mod bounds;
mod claim;
mod crash_loop;
mod dsn;
pub(crate) mod envelope;
pub(crate) mod envelope_name;
mod event_breadcrumbs;
mod event_size;
mod flush;
mod front_door;
mod held;
mod in_flight;
mod layout;
mod ledger;
#[cfg(test)]
mod lifetime;
mod outbox;
mod privacy;
mod release_health;
mod report_budget;
mod requeue;
pub(crate) mod sentry_event;
mod settings;
#[cfg(test)]
mod tests;
mod transport;

pub use crash_loop::CrashLoopLimit;
pub use dsn::{Dsn, DsnError};
pub use envelope_name::envelope_report_id;
pub(crate) use front_door::{Delivery, Ticket};
pub(crate) use held::HeldEnvelope;
pub(crate) use layout::record_outbox_dir;
pub use layout::{outbox_dir_of, DEFAULT_OUTBOX_NAME, OUTBOX_POINTER_NAME};
pub(crate) use outbox::deadline_in;
pub use outbox::{FlushSummary, Outbox, OutboxError, UploadState};
pub(crate) use release_health::ReleaseHealth;
pub use release_health::{session_files, SessionFileState};
pub use settings::{default_outbox_dir, DeliverySettings, SessionTracking, UploadConsent};
