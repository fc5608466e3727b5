//! Delivery against a real Bugsink (Sentry-compatible) on 127.0.0.1, checked through its REST API.
//!
//! One server per test binary (started by `scripts/bugsink-up.sh` on first use). Every test uses
//! its own culprit names and event ids, so tests can run in parallel and against a server reused
//! from an earlier run.

#[path = "deliver_support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bevy_gpu_crash_reporter::report::BindingKind;
use bevy_gpu_crash_reporter::report::{CrashReport, FaultVerdict};
use bevy_gpu_crash_reporter::{DeliverySettings, Outbox};
use serde_json::Value;
use support::*;

fn server() -> &'static Bugsink {
    bugsink("deliver_bugsink")
}

fn tmp_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("deliver_bugsink")
        .join(format!("{name}-{}", run_tag()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn outbox(dsn: &str, dir: PathBuf) -> Outbox {
    Outbox::new(DeliverySettings {
        dsn_from_env: false,
        release: Some("particle_storm@1.2.3".into()),
        environment: Some("ci".into()),
        upload_timeout: Duration::from_secs(20),
        ..DeliverySettings::new(Some(dsn.parse().expect("DSN")), dir)
    })
}

/// Enqueues and flushes `report` into Bugsink; returns the stored event.
fn deliver(report: &CrashReport) -> Value {
    let outbox = outbox(&server().dsn, tmp_dir("deliver"));
    let path = outbox.enqueue(report, None).unwrap();
    let summary = outbox.flush(Instant::now() + Duration::from_secs(60));
    assert_eq!(summary.sent, 1, "{summary:?}");
    assert!(!path.exists(), "sent envelope not deleted");
    server()
        .event(&report.id)
        .unwrap_or_else(|| panic!("event {} not in Bugsink", report.id))
}

#[test]
fn use_after_free_lands_with_exception_gpu_context_tags_breadcrumbs_and_extra() {
    let culprit = format!("particles-{}", run_tag());
    let report = use_after_free(&culprit, 0x1000_0000);
    let stored = deliver(&report);
    let e = &stored["data"];

    assert_eq!(e["level"], "fatal");
    assert_eq!(e["exception"]["values"][0]["type"], "VK_ERROR_DEVICE_LOST");
    assert_eq!(
        e["exception"]["values"][0]["value"],
        Value::from(report.summary.clone())
    );
    assert_eq!(e["release"], "particle_storm@1.2.3");
    assert_eq!(e["environment"], "ci");
    assert_eq!(
        e["fingerprint"],
        serde_json::json!([
            "gpu-crash",
            "device_lost",
            "use_after_free",
            format!("buffer {culprit:?}")
        ])
    );
    let gpu = &e["contexts"]["gpu"];
    assert_eq!(gpu["name"], "NVIDIA H200");
    assert_eq!(gpu["vendor_id"], "4318");
    assert_eq!(gpu["vendor_name"], "NVIDIA");
    assert_eq!(gpu["driver_version"], "580.159.04");
    assert_eq!(gpu["api_type"], "Vulkan");
    assert_eq!(e["contexts"]["gpu_fault"]["verdict"], "use_after_free");
    assert_eq!(
        e["contexts"]["gpu_fault"]["culprit_name"],
        Value::from(culprit.clone())
    );

    assert_eq!(e["tags"]["gpu.vendor"], "NVIDIA");
    assert_eq!(e["tags"]["gpu.verdict"], "use_after_free");
    assert_eq!(e["tags"]["gpu.fault_kind"], "device_lost");
    assert_eq!(e["tags"]["gpu.driver"], "NVIDIA 580.159.04");
    assert_eq!(e["tags"]["drill"], "use-after-free");

    let crumbs: Vec<&str> = e["breadcrumbs"]["values"]
        .as_array()
        .expect("breadcrumbs kept")
        .iter()
        .filter_map(|c| c["message"].as_str())
        .collect();
    let freed = format!("unbind BUFFER {culprit:?} 0x10000000..0x10001000 (frame 12)");
    assert!(crumbs.contains(&freed.as_str()), "{crumbs:#?}");

    assert_eq!(
        e["extra"]["faults"][0]["culprit"]["name"],
        Value::from(culprit)
    );
    assert_eq!(e["extra"]["faults"][0]["address"], "0x10000010");
    assert_eq!(e["extra"]["index_stats"]["events"], 14);

    // The issue shows the exception type and the summary line.
    let issue_id = stored["issue"].as_str().unwrap();
    let issue = server()
        .issues()
        .into_iter()
        .find(|i| i["id"] == issue_id)
        .expect("issue listed");
    assert_eq!(issue["calculated_type"], "VK_ERROR_DEVICE_LOST");
}

#[test]
fn gpu_hang_lands_as_its_own_kind() {
    let culprit = format!("particles-hang-{}", run_tag());
    let report = gpu_hang_with_suspect(&culprit);
    let e = &deliver(&report)["data"];
    assert_eq!(
        e["contexts"]["gpu_fault"]["hang_suspect"],
        Value::from(format!("buffer {culprit:?}"))
    );
    assert_eq!(
        e["fingerprint"][3],
        Value::from(format!("buffer {culprit:?}"))
    );
    let crumbs = e["breadcrumbs"]["values"].to_string();
    assert!(
        crumbs.contains("frame 15 submitted 2000 ms before the crash, never completed"),
        "{crumbs}"
    );
    assert_eq!(e["exception"]["values"][0]["type"], "GPU_HANG");
    assert_eq!(e["tags"]["gpu.fault_kind"], "gpu_hang");
    assert_eq!(e["tags"]["drill"], "hang");
    assert_eq!(e["contexts"]["gpu_fault"]["fault_count"], 0);
    assert_eq!(
        e["extra"]["notes"][0],
        "fault query returned VK_ERROR_UNKNOWN (device not lost)"
    );
}

#[test]
fn same_culprit_at_other_addresses_is_one_issue_other_verdict_is_another() {
    let culprit = format!("particles-{}", run_tag());
    let a = use_after_free(&culprit, 0x1000_0000);
    let b = use_after_free(&culprit, 0x7f00_0000_0000);
    let mut c = use_after_free(&culprit, 0x1000_0000);
    c.faults[0].verdict = FaultVerdict::OutOfBounds;
    let (ea, eb, ec) = (deliver(&a), deliver(&b), deliver(&c));
    assert_eq!(
        ea["issue"], eb["issue"],
        "same bug, different addresses: one issue"
    );
    assert_ne!(ea["issue"], ec["issue"], "different verdict: another issue");
    let events = server().issue_events(ea["issue"].as_str().unwrap());
    assert_eq!(events.len(), 2);
}

#[test]
fn server_down_keeps_the_report_and_relaunch_delivers_it_exactly_once() {
    let culprit = format!("particles-offline-{}", run_tag());
    let report = use_after_free(&culprit, 0x1000_0000);
    let port = free_port(); // nothing listens here
    let dsn = with_port(&server().dsn, port);
    let dir = tmp_dir("offline");

    let first = outbox(&dsn, dir.clone());
    first.enqueue(&report, None).unwrap();
    let summary = first.flush(Instant::now() + Duration::from_secs(2));
    assert_eq!(summary.sent, 0);
    assert_eq!(summary.pending, 1, "{summary:?}");
    assert!(summary.attempts >= 1);
    assert!(
        summary
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("cannot reach"),
        "{summary:?}"
    );
    assert!(server().event(&report.id).is_none());
    drop(first);

    // The server comes up at the DSN's address (a proxy to Bugsink), the game relaunches.
    let upstream: u16 = server().url.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = ScriptedServer::start(port, vec![], Action::Proxy(upstream));
    let relaunched = outbox(&dsn, dir.clone());
    assert_eq!(relaunched.pending().len(), 1);
    let summary = relaunched
        .spawn_background_flush(Duration::from_secs(60))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(summary.sent, 1, "{summary:?}");
    assert_eq!(summary.pending, 0);
    // And once more: nothing left to send.
    let again = outbox(&dsn, dir).flush(Instant::now() + Duration::from_secs(5));
    assert_eq!((again.sent, again.attempts), (0, 0));

    assert_eq!(proxy.seen().len(), 1, "exactly one upload");
    assert_eq!(proxy.seen()[0].status, 200);
    let stored = server().event(&report.id).expect("delivered");
    let events = server().issue_events(stored["issue"].as_str().unwrap());
    assert_eq!(events.len(), 1, "exactly one event in the issue");
}

/// One upload answered with `rate_limited` (a 429), then proxied to Bugsink: it is retried once, at
/// least a second later, within a 30 s flush (far below the 60 s a client that misread the header
/// would wait), and lands.
fn retried_after_429(name: &str, rate_limited: Action) {
    let upstream: u16 = server().url.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = ScriptedServer::start(0, vec![rate_limited], Action::Proxy(upstream));
    let report = use_after_free(&format!("particles-{name}-{}", run_tag()), 0x1000_0000);
    let outbox = outbox(&with_port(&server().dsn, proxy.port), tmp_dir(name));
    outbox.enqueue(&report, None).unwrap();
    let summary = outbox.flush(Instant::now() + Duration::from_secs(30));
    assert_eq!(summary.sent, 1, "{summary:?}");
    assert_eq!(summary.attempts, 2);
    let seen = proxy.seen();
    assert_eq!(
        seen.iter().map(|s| s.status).collect::<Vec<_>>(),
        [429, 200]
    );
    let waited = seen[1].at.duration_since(seen[0].at);
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
    assert!(server().event(&report.id).is_some());
}

#[test]
fn rate_limited_upload_is_retried_after_retry_after() {
    let rate_limited = Action::Respond(
        429,
        vec![("Retry-After".into(), "1".into())],
        "slow down".into(),
    );
    retried_after_429("429", rate_limited);
}

#[test]
fn rate_limited_upload_is_retried_after_an_http_date_retry_after() {
    // The HTTP-date form (RFC 9110), one-second resolution, so 3 s ahead is 2-3 s of wait. The date
    // is written when the 429 is answered: one written before the upload (3 s, then 8 s ahead) had
    // expired by the time the 429 was read in CI runs on 2 loaded cores, and a date already past
    // counts as no date (the 60 s default).
    retried_after_429("429-date", Action::RateLimitedUntil(Duration::from_secs(3)));
}

#[test]
fn wrong_key_is_a_clear_error_and_the_report_is_kept_in_failed() {
    let good = &server().dsn;
    let (scheme, rest) = good.split_once("://").unwrap();
    let (_, host) = rest.split_once('@').unwrap();
    let wrong = format!("{scheme}://{}@{host}", "0".repeat(32));
    let report = use_after_free(&format!("particles-403-{}", run_tag()), 0x1000_0000);
    let outbox = outbox(&wrong, tmp_dir("403"));
    let path = outbox.enqueue(&report, None).unwrap();
    let summary = outbox.flush(Instant::now() + Duration::from_secs(20));
    assert_eq!((summary.sent, summary.failed, summary.pending), (0, 1, 0));
    assert_eq!(summary.attempts, 1, "a 403 is not retried");
    let err = summary.last_error.unwrap();
    assert!(err.contains("HTTP 403"), "{err}");
    assert!(err.contains("public key"), "{err}");
    assert!(!path.exists());
    let failed = outbox.failed();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].file_name(), path.file_name());
    assert!(server().event(&report.id).is_none());
}

#[test]
fn report_with_100k_recent_events_is_trimmed_and_accepted() {
    let mut report = use_after_free(&format!("particles-huge-{}", run_tag()), 0x1000_0000);
    report.recent_events = (0..100_000u64)
        .map(|i| {
            event(
                100 + i,
                i / 100,
                BindingKind::Bind,
                0x10_0000 + i,
                0x2_0000_0000 + i * 0x1000,
                0x1000,
                Some("streaming chunk"),
            )
        })
        .collect();
    let e = &deliver(&report)["data"];
    assert!(serde_json::to_vec(e).unwrap().len() < 1024 * 1024);
    assert_eq!(e["extra"]["recent_events_count"], 100_000);
    assert!(e["extra"]["trimmed"].to_string().contains("breadcrumbs"));
    assert_eq!(e["breadcrumbs"]["values"].as_array().unwrap().len(), 200);
}

/// An envelope that cannot be read for a moment (its permissions taken away, as a backup tool or an
/// anti-virus scanner may do) is not malformed: it stays in the outbox, that flush skips it (and
/// sends the rest, see tests/deliver_event.rs), and the next flush sends it.
#[test]
#[cfg(target_os = "linux")] // Unix permissions, and the test-only permission override
fn an_envelope_unreadable_for_a_moment_stays_and_is_sent_on_the_next_flush() {
    use std::os::unix::fs::PermissionsExt;
    let report = use_after_free(&format!("particles-eacces-{}", run_tag()), 0x1000_0000);
    let outbox = outbox(&server().dsn, tmp_dir("eacces"));
    let path = outbox.enqueue(&report, None).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    let summary = std::thread::scope(|s| {
        s.spawn(|| {
            drop_file_permission_override();
            outbox.flush(Instant::now() + Duration::from_secs(20))
        })
        .join()
        .unwrap()
    });
    assert_eq!((summary.sent, summary.failed), (0, 0), "{summary:?}");
    let stopped = summary.stopped.clone().unwrap_or_default();
    assert!(stopped.contains("Permission denied"), "{summary:?}");
    assert!(path.exists(), "still in the outbox");
    assert!(outbox.failed().is_empty(), "not moved to failed/");
    assert!(server().event(&report.id).is_none());

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let summary = outbox.flush(Instant::now() + Duration::from_secs(60));
    assert_eq!(summary.sent, 1, "{summary:?}");
    assert!(server().event(&report.id).is_some());
}

/// A game started twice (or a launcher and the game) flush one outbox of 20 envelopes at the same
/// time: every envelope is uploaded exactly once, counted at a proxy in front of Bugsink.
#[test]
fn two_processes_flushing_one_outbox_send_each_envelope_once() {
    let upstream: u16 = server().url.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = ScriptedServer::start(0, vec![], Action::Proxy(upstream));
    let dsn = with_port(&server().dsn, proxy.port);
    let dir = tmp_dir("two-processes");
    let reports: Vec<CrashReport> = (0..20)
        .map(|i| use_after_free(&format!("particles-twice-{i}-{}", run_tag()), 0x1000_0000))
        .collect();
    let queued = outbox(&dsn, dir.clone());
    for report in &reports {
        queued.enqueue(report, None).unwrap();
    }
    drop(queued);
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--ignored", "--exact", "flush_child", "--nocapture"])
                .env("FLUSH_CHILD_DIR", &dir)
                .env("FLUSH_CHILD_DSN", &dsn)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn flush child")
        })
        .collect();
    let outputs: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        })
        .collect();
    let sent: Vec<u32> = outputs
        .iter()
        .map(|o| {
            let marker = "flush child: sent ";
            let at = o.find(marker).unwrap_or_else(|| panic!("{o}")) + marker.len();
            o[at..].split_whitespace().next().unwrap().parse().unwrap()
        })
        .collect();
    eprintln!("envelopes sent per process: {sent:?}");
    assert_eq!(sent.iter().sum::<u32>(), 20, "{outputs:#?}");
    assert_eq!(proxy.seen().len(), 20, "one upload per envelope");
    for report in &reports {
        let stored = server().event(&report.id).expect("delivered");
        let events = server().issue_events(stored["issue"].as_str().unwrap());
        assert_eq!(events.len(), 1, "exactly one event for {}", report.id);
    }
}

#[test]
#[ignore = "child process entry point: two_processes_flushing_one_outbox_send_each_envelope_once"]
fn flush_child() {
    let dir = std::env::var("FLUSH_CHILD_DIR").expect("FLUSH_CHILD_DIR");
    let dsn = std::env::var("FLUSH_CHILD_DSN").expect("FLUSH_CHILD_DSN");
    let summary = outbox(&dsn, dir.into()).flush(Instant::now() + Duration::from_secs(60));
    println!("flush child: sent {} ({summary:?})", summary.sent);
}
