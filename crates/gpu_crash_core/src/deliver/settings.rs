//! How and where crash reports are delivered.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::dsn::{Dsn, DsnError};

/// Whether the player agreed to send crash reports.
///
/// Checked before every upload. When it says no, reports stay in the outbox (they are sent at a later
/// flush once consent is given) and the log says where they are.
#[derive(Clone, Default)]
pub enum UploadConsent {
    /// Upload without asking (the developer configured a DSN on purpose).
    #[default]
    Granted,
    /// Never upload; reports stay on disk.
    Denied,
    /// Ask the game (e.g. a setting the player toggled); called on the uploading thread.
    Callback(Arc<dyn Fn() -> bool + Send + Sync>),
}

impl UploadConsent {
    /// Asks: may reports be uploaded now?
    pub fn allows(&self) -> bool {
        match self {
            Self::Granted => true,
            Self::Denied => false,
            Self::Callback(f) => f(),
        }
    }
}

impl fmt::Debug for UploadConsent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Granted => f.write_str("Granted"),
            Self::Denied => f.write_str("Denied"),
            Self::Callback(_) => f.write_str("Callback(..)"),
        }
    }
}

/// Release health: which Sentry sessions the reporter keeps (see the README's "Release health").
///
/// A session is sent only where a DSN and a release are known (Sentry drops a session without a
/// release, silently), and waits for consent in the outbox like a crash report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SessionTracking {
    /// One session per run: started with the reporter, ended `exited` at a clean exit, `crashed`
    /// with a GPU crash report, `abnormal` at the next launch when the run ended with neither. The
    /// application may still end it and start its own (`CrashReporter::start_session`).
    #[default]
    PerRun,
    /// Only the sessions the application starts (`CrashReporter::start_session`), e.g. one per
    /// match; each ends as a per-run one does.
    Manual,
    /// No sessions: the game sends its own (e.g. sentry's `auto_session_tracking`), or none.
    Off,
}

/// Delivery settings: DSN, release, privacy switches, outbox location and bounds.
#[derive(Clone, Debug)]
pub struct DeliverySettings {
    /// Where to send. `None`: the `SENTRY_DSN` environment variable (see [`Self::dsn_from_env`]);
    /// if that is unset too, reports stay on disk and the log says where.
    pub dsn: Option<Dsn>,
    /// Read `SENTRY_DSN` when [`Self::dsn`] is `None` (default `true`).
    pub dsn_from_env: bool,
    /// Sentry `release`. `None`: `SENTRY_RELEASE`, else `"{application.name}@{application.version}"`
    /// from the report (only the version when application names are left out).
    pub release: Option<String>,
    /// Sentry `environment`. `None`: `SENTRY_ENVIRONMENT`, else `"production"`.
    pub environment: Option<String>,
    /// Player consent for uploads (default [`UploadConsent::Granted`]).
    pub upload_consent: UploadConsent,
    /// Send the application's name (report, app context, vendor binary header). Default `true`.
    pub include_application_names: bool,
    /// Send the executable path (it often contains the player's user name). Default `false`.
    pub include_paths: bool,
    /// How long an upload may take at crash time, and the limit of one HTTP request (default 5 s).
    pub upload_timeout: Duration,
    /// The outbox directory; rejected envelopes go to its `failed/` subdirectory.
    pub outbox_dir: PathBuf,
    /// At most this many pending report envelopes (and as many failed ones); what is worth least
    /// is dropped first (warnings, then the oldest crash reports). Session updates, a few hundred
    /// bytes each, have a count of their own (500).
    pub max_outbox_files: usize,
    /// At most this many bytes of pending envelopes (and as many of failed ones).
    pub max_outbox_bytes: u64,
    /// At most this many crash reports in the report folder (default 100): a crash loop or a
    /// masked fault a minute must not fill the player's disk. Reports a server already has go
    /// first, then warnings, then the oldest crashes; the newest report always stays.
    pub max_report_files: usize,
    /// At most this many bytes of reports and their vendor binaries in the report folder (default
    /// 128 MiB: two full-size reports at the 64 MiB read limit, or hundreds of typical ones).
    pub max_report_bytes: u64,
    /// At most this many breadcrumbs per event (default 200).
    pub max_breadcrumbs: usize,
    /// Upper bound of the event JSON (default 900 KiB: Sentry and Bugsink refuse events over 1 MiB).
    pub max_event_bytes: usize,
    /// Upper bound of each attachment; a larger report JSON is attached with its lists trimmed,
    /// a larger vendor binary is left out (it stays next to the report on disk). Default 8 MiB.
    pub max_attachment_bytes: usize,
    /// Release health (Sentry sessions). Default [`SessionTracking::PerRun`]; off without a DSN or
    /// a release. Turn it off when the game also sends sessions of its own (sentry's
    /// `auto_session_tracking`): each run would count twice.
    pub session_tracking: SessionTracking,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            dsn: None,
            dsn_from_env: true,
            release: None,
            environment: None,
            upload_consent: UploadConsent::Granted,
            include_application_names: true,
            include_paths: false,
            upload_timeout: Duration::from_secs(5),
            outbox_dir: default_outbox_dir(),
            max_outbox_files: 50,
            max_outbox_bytes: 64 * 1024 * 1024,
            max_report_files: 100,
            max_report_bytes: 128 * 1024 * 1024,
            max_breadcrumbs: 200,
            max_event_bytes: 900 * 1024,
            max_attachment_bytes: 8 * 1024 * 1024,
            session_tracking: SessionTracking::PerRun,
        }
    }
}

impl DeliverySettings {
    /// Settings that send to `dsn` and keep the outbox in `outbox_dir`.
    pub fn new(dsn: Option<Dsn>, outbox_dir: impl Into<PathBuf>) -> Self {
        Self {
            dsn,
            outbox_dir: outbox_dir.into(),
            ..Self::default()
        }
    }

    /// The DSN to use: [`Self::dsn`], else `SENTRY_DSN` (if [`Self::dsn_from_env`]), else none.
    pub fn resolve_dsn(&self) -> Result<Option<Dsn>, DsnError> {
        if let Some(dsn) = &self.dsn {
            return Ok(Some(dsn.clone()));
        }
        if !self.dsn_from_env {
            return Ok(None);
        }
        match std::env::var("SENTRY_DSN") {
            Ok(s) if !s.trim().is_empty() => s.parse().map(Some),
            _ => Ok(None),
        }
    }

    /// The release the event names (see [`Self::release`]).
    pub fn resolve_release(&self, app_name: &str, app_version: &str) -> Option<String> {
        if let Some(r) = &self.release {
            return Some(r.clone());
        }
        if let Ok(r) = std::env::var("SENTRY_RELEASE") {
            if !r.trim().is_empty() {
                return Some(r);
            }
        }
        match (
            self.include_application_names && !app_name.is_empty(),
            app_version.is_empty(),
        ) {
            (true, false) => Some(format!("{app_name}@{app_version}")),
            (true, true) => Some(app_name.to_owned()),
            (false, false) => Some(app_version.to_owned()),
            (false, true) => None,
        }
    }

    /// The environment the event names (see [`Self::environment`]).
    pub fn resolve_environment(&self) -> String {
        if let Some(e) = &self.environment {
            return e.clone();
        }
        match std::env::var("SENTRY_ENVIRONMENT") {
            Ok(e) if !e.trim().is_empty() => e,
            _ => "production".to_owned(),
        }
    }
}

/// The per-user data directory of this game plus `gpu-crash-outbox`:
/// `%LOCALAPPDATA%\<exe>\gpu-crash-outbox` on Windows,
/// `~/Library/Application Support/<exe>/gpu-crash-outbox` on macOS,
/// `$XDG_DATA_HOME` (or `~/.local/share`)`/<exe>/gpu-crash-outbox` elsewhere; the temp dir as last resort.
pub fn default_outbox_dir() -> PathBuf {
    let game = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "bevy-game".to_owned());
    crate::data_dir::game_data_dir(&game).join(crate::data_dir::OUTBOX_DIR_NAME)
}
