//! Outbox file names: what an envelope is, read from its name alone.
//!
//! The outbox decides what to send first and what to drop first without opening a file (a file may
//! be 64 MiB, and another process may be sending it), and the startup requeue and the marker
//! clean-up tie every envelope and marker to the report file it came from. So the name says all of
//! it:
//!
//! | envelope | name |
//! |---|---|
//! | a crash report (loss, hang) | `<time>-<report id>.envelope` |
//! | the loss that follows its hang report (a second event of one report) | `<time>-<report id>+<event id>.envelope` |
//! | a fault the driver survived (warning level) | `<time>-warning-<report id>.envelope` |
//! | a release-health session's own update | `<session start>-session-<sid>.envelope` |
//!
//! `<time>` is the report's timestamp in milliseconds, 20 digits, so name order is age order. Ids
//! keep only ASCII letters and digits ([`sanitize`]), so neither `+` nor a class word can be part
//! of one.

use std::path::Path;
use std::time::UNIX_EPOCH;

use sentry::protocol::SessionUpdate;

use super::envelope::ENVELOPE_EXT;
use crate::report::{CrashKind, CrashReport};

/// Between a follow-up envelope's report id and its own event id.
const FOLLOW_UP_MARK: char = '+';
/// What a warning's name has between its time and its report id.
const WARNING_MARK: &str = "warning-";
/// What a session's name has between its start and its session id.
const SESSION_MARK: &str = "session-";

/// What an outbox file holds, by worth: what goes first when the outbox is over its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum EnvelopeClass {
    /// A session's update alone: a count on a chart.
    Session,
    /// A fault the driver survived: a warning the game went on after.
    Warning,
    /// A device loss or a GPU hang.
    Crash,
}

/// An outbox file's name, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EnvelopeName {
    /// Report time (a session's start) in milliseconds since the Unix epoch.
    pub time_ms: u128,
    /// What it holds.
    pub class: EnvelopeClass,
    /// The report file it came from (`gpu-crash-<time>-<report id>.json`); the sid of a session.
    pub report_id: String,
    /// The Sentry event it is sent as (the report id but for a follow-up); the sid of a session.
    pub event_id: String,
}

impl EnvelopeName {
    /// Reads `name` (a file name, with or without a folder); `None` for anything else.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        let name = Path::new(name).file_name()?.to_str()?;
        let stem = name.strip_suffix(ENVELOPE_EXT)?.strip_suffix('.')?;
        let (time, rest) = stem.split_once('-')?;
        let time_ms = time.parse().ok()?;
        let (class, rest) = if let Some(sid) = rest.strip_prefix(SESSION_MARK) {
            (EnvelopeClass::Session, sid)
        } else if let Some(id) = rest.strip_prefix(WARNING_MARK) {
            (EnvelopeClass::Warning, id)
        } else {
            (EnvelopeClass::Crash, rest)
        };
        let (report_id, event_id) = match rest.split_once(FOLLOW_UP_MARK) {
            Some((report, event)) => (report, event),
            None => (rest, rest),
        };
        if report_id.is_empty() || event_id.is_empty() {
            return None;
        }
        Some(Self {
            time_ms,
            class,
            report_id: report_id.to_owned(),
            event_id: event_id.to_owned(),
        })
    }

    /// Reads the file name of `path`.
    pub(crate) fn of(path: &Path) -> Option<Self> {
        Self::parse(path.file_name()?.to_str()?)
    }
}

/// The report id an outbox envelope (or marker) at `path` stands for, as its name says; `None`
/// for a name that is not an outbox name. For tools that list an outbox beside its reports.
pub fn envelope_report_id(path: &Path) -> Option<String> {
    EnvelopeName::of(path).map(|n| n.report_id)
}

/// The outbox file name of `report`'s envelope (see the module docs).
pub(crate) fn envelope_file_name(report: &CrashReport) -> String {
    let time = report.timestamp_ms;
    let id = sanitize(&report.id);
    let name = match (&report.kind, &report.follows_hang) {
        (_, Some(follow_up)) => format!(
            "{time:020}-{id}{FOLLOW_UP_MARK}{}",
            sanitize(&follow_up.event_id)
        ),
        (CrashKind::NonFatalFault, None) => format!("{time:020}-{WARNING_MARK}{id}"),
        _ => format!("{time:020}-{id}"),
    };
    format!("{name}.{ENVELOPE_EXT}")
}

/// `<session start ms, 20 digits>-session-<sid>.envelope`: one file per session.
pub(crate) fn session_envelope_name(update: &SessionUpdate<'_>) -> String {
    let started_ms = update
        .started
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(
        "{started_ms:020}-{SESSION_MARK}{}.{ENVELOPE_EXT}",
        update.session_id.simple()
    )
}

/// Keeps an id usable as part of a file name: ASCII letters and digits, at most 64. No `-`: a
/// hostile id such as `warning-…` or `session-…` would read back as another class.
pub(crate) fn sanitize(id: &str) -> String {
    id.chars()
        .filter(char::is_ascii_alphanumeric)
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{hang_report_for_tests, HangFollowUp};

    #[test]
    fn every_name_reads_back_as_what_it_holds() {
        let mut report = hang_report_for_tests();
        let name = EnvelopeName::parse(&envelope_file_name(&report)).unwrap();
        assert_eq!(name.class, EnvelopeClass::Crash);
        assert_eq!(
            (name.report_id.as_str(), name.event_id.as_str()),
            (report.id.as_str(), report.id.as_str())
        );
        assert_eq!(name.time_ms, u128::from(report.timestamp_ms));

        report.follows_hang = Some(HangFollowUp {
            hang_event_id: report.id.clone(),
            event_id: "feed".into(),
            fingerprint: Vec::new(),
            loss_after_ms: 1,
        });
        let name = EnvelopeName::parse(&envelope_file_name(&report)).unwrap();
        assert_eq!(name.class, EnvelopeClass::Crash);
        assert_eq!(
            (name.report_id.as_str(), name.event_id.as_str()),
            (report.id.as_str(), "feed")
        );

        let mut warning = hang_report_for_tests();
        warning.kind = CrashKind::NonFatalFault;
        let name = EnvelopeName::parse(&envelope_file_name(&warning)).unwrap();
        assert_eq!(name.class, EnvelopeClass::Warning);
        assert_eq!(name.report_id, warning.id);

        let name = EnvelopeName::parse("00000000000000000012-session-abc.envelope").unwrap();
        assert_eq!(name.class, EnvelopeClass::Session);
        // Names of earlier versions (a follow-up named by its event id alone) still read as crashes.
        let name = EnvelopeName::parse("00000000000000000012-abc.envelope").unwrap();
        assert_eq!(name.class, EnvelopeClass::Crash);
        for hostile in [
            "",
            ".envelope",
            "x-abc.envelope",
            "12-.envelope",
            "12-abc+.envelope",
            "12-abc.json",
        ] {
            assert_eq!(EnvelopeName::parse(hostile), None, "{hostile:?}");
        }
    }
}
