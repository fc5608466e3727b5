//! Delivery over a player's lifetime, through the real outbox on disk with a scripted transport
//! (a server adds nothing to these: the outbox's policy reads only the outcome).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::transport::{SendOutcome, Transport};
use super::{DeliverySettings, Dsn, Outbox};
use crate::report::{hang_report_for_tests, write_report, CrashKind, CrashReport, HangFollowUp};

/// A server by script: each send takes the next outcome (then accepts), and what it accepted is
/// kept in order, by event id (`session` for a session's own envelope).
#[derive(Debug, Default)]
pub(crate) struct ScriptedTransport {
    script: Mutex<VecDeque<SendOutcome>>,
    accepted: Mutex<Vec<String>>,
    calls: AtomicUsize,
}

impl ScriptedTransport {
    pub(crate) fn accepting() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Event ids accepted, in order.
    pub(crate) fn accepted(&self) -> Vec<String> {
        self.accepted.lock().unwrap().clone()
    }

    pub(crate) fn calls(&self) -> usize {
        // Counted with the sends it follows on this thread or joined ones: no ordering needed.
        self.calls.load(Ordering::Relaxed)
    }
}

impl Transport for ScriptedTransport {
    fn send(&self, _dsn: &Dsn, envelope: &[u8], _timeout: Duration) -> SendOutcome {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let outcome = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(SendOutcome::Accepted {
                status: 200,
                rate_limit: None,
            });
        if matches!(outcome, SendOutcome::Accepted { .. }) {
            let id = sentry::Envelope::from_slice(envelope)
                .ok()
                .and_then(|e| e.uuid().map(|u| u.simple().to_string()))
                .unwrap_or_else(|| "session".to_owned());
            self.accepted.lock().unwrap().push(id);
        }
        outcome
    }
}

/// A fresh folder for one test: `reports/` and the outbox `outbox/` beside it.
pub(crate) fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpu-crash-life-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn settings(dir: &Path) -> DeliverySettings {
    DeliverySettings {
        dsn_from_env: false,
        release: Some("game@1.0.0".into()),
        environment: Some("test".into()),
        upload_timeout: Duration::from_millis(500),
        // The game's own layout: the outbox inside its report folder.
        ..DeliverySettings::new(
            Some("http://public@127.0.0.1:9/1".parse().unwrap()),
            dir.join("reports").join("outbox"),
        )
    }
}

/// A report of `kind` at `timestamp_ms`, written into `dir`.
fn written(dir: &Path, kind: CrashKind, timestamp_ms: u64) -> CrashReport {
    let mut report = hang_report_for_tests();
    report.kind = kind;
    report.timestamp_ms = timestamp_ms;
    write_report(dir, &mut report, None).unwrap();
    report
}

/// A session's last update (`exited`), for a session started at `started`.
fn session_update(started: SystemTime) -> sentry::protocol::SessionUpdate<'static> {
    sentry::protocol::SessionUpdate {
        session_id: uuid::Uuid::new_v4(),
        distinct_id: None,
        sequence: None,
        timestamp: None,
        started,
        init: true,
        duration: None,
        status: sentry::protocol::SessionStatus::Exited,
        errors: 0,
        attributes: sentry::protocol::SessionAttributes {
            release: "game@1.0.0".into(),
            environment: None,
            ip_address: None,
            user_agent: None,
        },
    }
}

fn flush(outbox: &Outbox) -> super::FlushSummary {
    outbox.flush(Instant::now() + Duration::from_secs(10))
}

fn later() -> SystemTime {
    SystemTime::now() + Duration::from_secs(3600)
}

/// Issue 51 item 1: a report sent long ago is not sent again after a thousand launches, each of
/// which sent its session's update (at af2f5bf the `sent/` markers were trimmed to the newest 1,000
/// by name, the sessions' among them, and the startup requeue then queued the report again at
/// every launch). Markers stay bounded: each session's goes once its envelope is gone.
#[test]
fn a_sent_report_is_not_sent_again_a_thousand_launches_later() {
    let dir = fresh_dir("thousand");
    let reports = dir.join("reports");
    let transport = ScriptedTransport::accepting();
    let outbox = Outbox::with_transport(settings(&dir), transport.clone());
    let report = written(&reports, CrashKind::DeviceLost, 1_000);
    outbox.enqueue(&report, None).unwrap();
    assert_eq!(flush(&outbox).sent, 1);

    for launch in 0..1_100u64 {
        // Each launch's session update, sent; a marker each, as the flush leaves them.
        // Within the 5 days Sentry accepts; later than the report, as each launch is.
        let update = session_update(
            SystemTime::now() - Duration::from_secs(3_600) + Duration::from_millis(launch),
        );
        // A launch: the startup requeue, then this run's session update sent.
        assert_eq!(
            outbox.requeue_unqueued(&reports, later()),
            0,
            "sent long ago"
        );
        outbox.enqueue_session(&update).unwrap();
        assert_eq!(flush(&outbox).sent, 1);
    }
    assert_eq!(
        transport
            .accepted()
            .iter()
            .filter(|id| **id == report.id)
            .count(),
        1
    );
    let markers = std::fs::read_dir(outbox.dir().join("sent"))
        .unwrap()
        .count();
    // The report's, and the last launch's session's (the next startup removes that one): every
    // earlier session's went with its envelope.
    assert_eq!(
        markers, 2,
        "the sessions' markers went with their envelopes"
    );
}

/// Issue 51 item 1, with the markers themselves over a thousand: 1,100 crash reports sent and
/// still on disk (a generous report budget) keep 1,100 markers, and none is queued again (at
/// af2f5bf the oldest were trimmed and their reports uploaded again).
#[test]
fn eleven_hundred_sent_reports_stay_sent() {
    let dir = fresh_dir("eleven-hundred");
    let reports = dir.join("reports");
    let transport = ScriptedTransport::accepting();
    let outbox = Outbox::with_transport(
        DeliverySettings {
            max_report_files: 2_000,
            max_report_bytes: u64::MAX,
            ..settings(&dir)
        },
        transport.clone(),
    );
    for i in 0..1_100 {
        let report = written(&reports, CrashKind::DeviceLost, 1_000 + i);
        outbox.enqueue(&report, None).unwrap();
        assert_eq!(flush(&outbox).sent, 1);
    }
    assert_eq!(outbox.requeue_unqueued(&reports, later()), 0);
    assert_eq!(transport.calls(), 1_100, "nothing sent twice");
    let markers = std::fs::read_dir(outbox.dir().join("sent"))
        .unwrap()
        .count();
    assert_eq!(markers, 1_100);
}

/// Issue 51 item 3: faults the driver survived (warnings), queued a minute apart while offline,
/// never push the crash reports out of a full outbox: they go first.
#[test]
fn warnings_go_before_crash_reports_when_the_outbox_is_full() {
    let dir = fresh_dir("warnings-first");
    let reports = dir.join("reports");
    let outbox = Outbox::with_transport(
        DeliverySettings {
            max_outbox_files: 5,
            ..settings(&dir)
        },
        ScriptedTransport::accepting(),
    );
    let crashes: Vec<CrashReport> = (0..2)
        .map(|i| written(&reports, CrashKind::DeviceLost, 1_000 + i))
        .collect();
    for c in &crashes {
        outbox.enqueue(c, None).unwrap();
    }
    for minute in 0..10 {
        let warning = written(&reports, CrashKind::NonFatalFault, 10_000 + minute * 60_000);
        outbox.enqueue(&warning, None).unwrap();
    }
    let pending = outbox.pending();
    assert_eq!(pending.len(), 5);
    for c in &crashes {
        assert!(
            pending.iter().any(|p| p.to_string_lossy().contains(&c.id)),
            "crash report {} was dropped for warnings: {pending:?}",
            c.id
        );
    }
}

/// Issue 51 item 7: with a backlog, the crash that just happened is sent first (a crash's flush
/// has only `upload_timeout`).
#[test]
fn the_crash_that_just_happened_is_sent_first() {
    let dir = fresh_dir("newest-first");
    let reports = dir.join("reports");
    let transport = ScriptedTransport::accepting();
    let outbox = Outbox::with_transport(settings(&dir), transport.clone());
    for i in 0..3 {
        let old = written(&reports, CrashKind::GpuHang, 1_000 + i);
        outbox.enqueue(&old, None).unwrap();
    }
    let warning = written(&reports, CrashKind::NonFatalFault, 50_000);
    outbox.enqueue(&warning, None).unwrap();
    let newest = written(&reports, CrashKind::DeviceLost, 9_000);
    outbox.enqueue(&newest, None).unwrap();
    assert_eq!(flush(&outbox).sent, 5);
    let accepted = transport.accepted();
    assert_eq!(accepted[0], newest.id, "{accepted:?}");
    assert_eq!(accepted[4], warning.id, "crash reports before warnings");
}

/// Issue 51 item 6: a hang report merged into its loss report is a second event; if the process
/// dies after writing the merged report and before queuing it, the next launch queues it (at
/// af2f5bf the requeue keyed on the report id, whose hang event was already sent), once.
#[test]
fn a_merged_report_never_queued_is_queued_once_at_the_next_launch() {
    let dir = fresh_dir("merged");
    let reports = dir.join("reports");
    let transport = ScriptedTransport::accepting();
    let outbox = Outbox::with_transport(settings(&dir), transport.clone());
    let mut report = written(&reports, CrashKind::GpuHang, 5_000);
    outbox.enqueue(&report, None).unwrap();
    assert_eq!(flush(&outbox).sent, 1);
    // The marker is older than the merged report's file, as in a run.
    std::thread::sleep(Duration::from_millis(20));
    report.kind = CrashKind::DeviceLost;
    report.follows_hang = Some(HangFollowUp {
        hang_event_id: report.id.clone(),
        event_id: uuid::Uuid::new_v4().simple().to_string(),
        fingerprint: vec!["gpu_hang".into()],
        loss_after_ms: 3_000,
    });
    write_report(&reports, &mut report, None).unwrap();
    // (killed here)
    assert_eq!(outbox.requeue_unqueued(&reports, later()), 1);
    assert_eq!(flush(&outbox).sent, 1);
    assert_eq!(outbox.requeue_unqueued(&reports, later()), 0);
    let follow_up = report.follows_hang.as_ref().unwrap().event_id.clone();
    assert_eq!(transport.accepted(), [report.id.clone(), follow_up]);
}

/// Issue 51 item 1, the other half: markers of reports no longer on disk are removed at startup;
/// those of reports still there stay, however many launches pass.
#[test]
fn markers_live_as_long_as_their_reports() {
    let dir = fresh_dir("markers");
    let reports = dir.join("reports");
    let outbox = Outbox::with_transport(settings(&dir), ScriptedTransport::accepting());
    let kept = written(&reports, CrashKind::DeviceLost, 1_000);
    let gone = written(&reports, CrashKind::DeviceLost, 2_000);
    outbox.enqueue(&kept, None).unwrap();
    outbox.enqueue(&gone, None).unwrap();
    assert_eq!(flush(&outbox).sent, 2);
    std::fs::remove_file(reports.join(gone.file_name())).unwrap();
    for _ in 0..3 {
        assert_eq!(outbox.requeue_unqueued(&reports, later()), 0);
    }
    let markers: Vec<String> = std::fs::read_dir(outbox.dir().join("sent"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(markers.len(), 1, "{markers:?}");
    assert!(markers[0].contains(&kept.id));
}

/// Issue 51 item 9: an envelope the server accepted but that cannot be deleted (an antivirus holds
/// it) is left for the next flush, not claimed again and again until the deadline.
#[cfg(target_os = "linux")]
#[test]
fn an_accepted_envelope_that_cannot_be_deleted_does_not_spin_until_the_deadline() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("undeletable");
    let reports = dir.join("reports");
    let transport = ScriptedTransport::accepting();
    let outbox = Outbox::with_transport(settings(&dir), transport.clone());
    let report = written(&reports, CrashKind::DeviceLost, 1_000);
    outbox.enqueue(&report, None).unwrap();
    crate::safe_fs::private_subdir(outbox.dir(), "sent").unwrap();
    std::fs::set_permissions(outbox.dir(), std::fs::Permissions::from_mode(0o500)).unwrap();
    let summary = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                crate::test_permissions::drop_file_permission_override();
                outbox.flush(Instant::now() + Duration::from_secs(3))
            })
            .join()
            .unwrap()
    });
    std::fs::set_permissions(outbox.dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(transport.calls(), 1);
    assert_eq!(summary.sent, 1);
    assert_ne!(
        summary.stopped.as_deref(),
        Some("deadline reached"),
        "the flush spun on the undeletable file until its deadline: {summary:?}"
    );
    // Deletable again: the next flush deletes it unsent.
    assert_eq!(flush(&outbox).sent, 0);
    assert!(outbox.pending().is_empty());
    assert_eq!(transport.calls(), 1);
}

/// Issue 51 item 13: a session update of a session that started over 5 days ago (a player offline
/// for a week) is not sent: Sentry would drop it. Its marker says it went unsent.
#[test]
fn a_session_older_than_sentry_accepts_is_not_sent() {
    let dir = fresh_dir("old-session");
    let transport = ScriptedTransport::accepting();
    let outbox = Outbox::with_transport(settings(&dir), transport.clone());
    let update =
        |days_ago: u64| session_update(SystemTime::now() - Duration::from_secs(days_ago * 86_400));
    outbox.enqueue_session(&update(6)).unwrap();
    outbox.enqueue_session(&update(1)).unwrap();
    let summary = flush(&outbox);
    assert_eq!(summary.sent, 1, "{summary:?}");
    assert_eq!(transport.calls(), 1);
    assert!(outbox.pending().is_empty());
    assert_eq!(
        std::fs::read_dir(outbox.dir().join("dropped"))
            .unwrap()
            .count(),
        1
    );
}

/// Issue 51 item 11: settings no game should pass do not panic the crash path: an upload timeout
/// too large for the clock (`Outbox::new` is public), and a report whose time is past what the
/// platform's clock holds (hostile input).
#[test]
fn extreme_settings_and_times_do_not_panic() {
    let dir = fresh_dir("extremes");
    let reports = dir.join("reports");
    let outbox = Outbox::with_transport(
        DeliverySettings {
            upload_timeout: Duration::MAX,
            max_attachment_bytes: usize::MAX,
            max_event_bytes: usize::MAX,
            ..settings(&dir)
        },
        ScriptedTransport::accepting(),
    );
    let mut report = written(&reports, CrashKind::DeviceLost, u64::MAX);
    report.timestamp_ms = u64::MAX;
    outbox.enqueue(&report, None).unwrap();
    let summary = outbox.flush_at_crash();
    assert_eq!(summary.sent, 1, "{summary:?}");
}

/// An outbox the game put outside its report folder may serve two report folders (a launcher and
/// the game): a startup of one never removes the other's `sent/` markers, which would have the
/// other's reports sent again (review of issue 51).
#[test]
fn an_outbox_shared_by_two_report_folders_sends_each_report_once() {
    let dir = fresh_dir("shared-outbox");
    let (game, launcher) = (dir.join("game"), dir.join("launcher"));
    let transport = ScriptedTransport::accepting();
    let outbox = Outbox::with_transport(
        DeliverySettings {
            outbox_dir: dir.join("shared"),
            ..settings(&dir)
        },
        transport.clone(),
    );
    let report = written(&game, CrashKind::DeviceLost, 1_000);
    outbox.enqueue(&report, None).unwrap();
    assert_eq!(flush(&outbox).sent, 1);
    for _ in 0..3 {
        assert_eq!(outbox.requeue_unqueued(&launcher, later()), 0);
        assert_eq!(outbox.requeue_unqueued(&game, later()), 0, "sent already");
    }
    assert_eq!(transport.calls(), 1);
}
