//! The Sentry event, the envelope, DSN parsing and the outbox's disk behaviour, without a server
//! (except a scripted one on 127.0.0.1 for the 5xx retry).

#[path = "deliver_support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bevy_gpu_crash_reporter::report::BindingKind;
use bevy_gpu_crash_reporter::report::{CrashReport, FaultVerdict};
use bevy_gpu_crash_reporter::Outbox;
use bevy_gpu_crash_reporter::{DeliverySettings, Dsn, DsnError, UploadConsent};
use gpu_crash_core::test_support::build_envelope;
use sentry::protocol::{Attachment, EnvelopeItem};
use sentry::Envelope;
use serde_json::Value;
use support::*;

/// The Sentry event for `report` as the JSON that is uploaded.
fn sentry_event(report: &CrashReport, settings: &DeliverySettings) -> Value {
    let event = gpu_crash_core::test_support::sentry_event(report, settings);
    serde_json::to_value(event).unwrap()
}

/// The envelope for `report` as the bytes written to the outbox.
fn envelope_bytes(
    report: &CrashReport,
    vendor_binary: Option<&[u8]>,
    s: &DeliverySettings,
) -> Vec<u8> {
    let mut bytes = Vec::new();
    build_envelope(report, vendor_binary, s)
        .to_writer(&mut bytes)
        .unwrap();
    bytes
}

/// The attachments of an envelope read back from its bytes.
fn attachments(bytes: &[u8]) -> Vec<Attachment> {
    Envelope::from_slice(bytes)
        .expect("well-formed envelope")
        .into_items()
        .filter_map(|item| match item {
            EnvelopeItem::Attachment(a) => Some(a),
            _ => None,
        })
        .collect()
}

fn tmp_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("deliver_event")
        .join(format!("{name}-{}", run_tag()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn settings(dir: PathBuf) -> DeliverySettings {
    DeliverySettings {
        dsn_from_env: false,
        release: Some("particle_storm@1.2.3".into()),
        environment: Some("test".into()),
        ..DeliverySettings::new(None, dir)
    }
}

#[test]
fn event_has_exception_gpu_context_tags_breadcrumbs_and_extra() {
    let report = use_after_free("particles", 0x1000_0000);
    let e = sentry_event(&report, &settings(tmp_dir("shape")));

    assert_eq!(e["event_id"], Value::from(report.id.clone()));
    assert_eq!(e["level"], "fatal");
    assert_eq!(e["platform"], "native");
    assert_eq!(e["release"], "particle_storm@1.2.3");
    assert_eq!(e["environment"], "test");
    let exc = &e["exception"]["values"][0];
    assert_eq!(exc["type"], "VK_ERROR_DEVICE_LOST");
    assert_eq!(exc["value"], Value::from(report.summary.clone()));
    assert_eq!(
        e["fingerprint"],
        serde_json::json!([
            "gpu-crash",
            "device_lost",
            "use_after_free",
            "buffer \"particles\""
        ])
    );

    let gpu = &e["contexts"]["gpu"];
    assert_eq!(gpu["type"], "gpu");
    assert_eq!(gpu["name"], "NVIDIA H200");
    assert_eq!(gpu["vendor_id"], "4318");
    assert_eq!(gpu["vendor_name"], "NVIDIA");
    assert_eq!(gpu["driver_version"], "580.159.04");
    assert_eq!(gpu["api_type"], "Vulkan");
    assert_eq!(gpu["memory_size"], 143_771, "device-local MiB");

    let fault = &e["contexts"]["gpu_fault"];
    // sentry-types' `Context::Other`, as sentry-rust sends every custom context.
    assert_eq!(fault["type"], "unknown");
    assert_eq!(fault["verdict"], "use_after_free");
    assert_eq!(fault["address"], "0x10000010");
    assert_eq!(fault["culprit_label"], "buffer \"particles\"");
    assert_eq!(fault["culprit_state"], "freed");

    let tags = &e["tags"];
    assert_eq!(tags["gpu.vendor"], "NVIDIA");
    assert_eq!(tags["gpu.driver"], "NVIDIA 580.159.04");
    assert_eq!(tags["gpu.fault_kind"], "device_lost");
    assert_eq!(tags["gpu.verdict"], "use_after_free");
    assert_eq!(tags["gpu.culprit"], "particles");
    assert_eq!(tags["drill"], "use-after-free");

    let crumbs = e["breadcrumbs"]["values"].as_array().unwrap();
    let messages: Vec<&str> = crumbs
        .iter()
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(
        messages.contains(&"bind BUFFER \"particles\" 0x10000000..0x10001000 (frame 9)"),
        "{messages:#?}"
    );
    assert!(messages.contains(&"unbind BUFFER \"particles\" 0x10000000..0x10001000 (frame 12)"));
    assert!(messages.contains(&"bind BUFFER 0x78 0x90010000..0x90010400 (frame 11)"));
    assert!(messages.contains(&"frame 15 submitted 16 ms before the crash, never completed"));
    assert!(messages.contains(&"frame 12 submitted 64 ms before the crash, completed after 3 ms"));
    assert_eq!(
        crumbs.len(),
        9,
        "4 distinct binding events + 4 frames + the crash crumb"
    );
    assert_eq!(crumbs[0]["category"], "gpu.binding");
    assert_eq!(crumbs.last().unwrap()["category"], "gpu.crash");

    let extra = &e["extra"];
    assert_eq!(extra["faults"][0]["culprit"]["name"], "particles");
    assert_eq!(extra["index_stats"]["binds"], 12);
    assert_eq!(extra["binding_events_dropped"], 0);
    assert!(extra["notes"].is_array());
    assert!(extra.get("trimmed").is_none());
    // Default privacy: the name stays, the path (with the player's user name) goes.
    assert_eq!(e["contexts"]["app"]["app_name"], "particle_storm");
    assert!(extra["application"]["executable"].is_null());
    assert!(!e.to_string().contains("/home/player"));
}

#[test]
fn privacy_switches_remove_names_and_paths_from_event_and_attachment() {
    let report = use_after_free("particles", 0x1000_0000);
    let mut s = settings(tmp_dir("privacy"));
    s.include_application_names = false;
    s.release = None;
    let bytes = envelope_bytes(&report, None, &s);
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains("particle_storm"), "application name leaked");
    assert!(!text.contains("/home/player"), "path leaked");

    s.include_application_names = true;
    s.include_paths = true;
    let text = String::from_utf8(envelope_bytes(&report, None, &s)).unwrap();
    assert!(text.contains("/home/player/games/particle_storm"));
}

#[test]
fn fingerprint_ignores_addresses_but_not_verdict_or_culprit() {
    let s = settings(tmp_dir("fingerprint"));
    let fp = |r: &CrashReport| sentry_event(r, &s)["fingerprint"].clone();
    let a = use_after_free("particles", 0x1000_0000);
    let b = use_after_free("particles", 0x7fff_0000_0000);
    assert_eq!(fp(&a), fp(&b));
    assert!(!fp(&a).to_string().contains("0x"));

    let mut oob = use_after_free("particles", 0x1000_0000);
    oob.faults[0].verdict = FaultVerdict::OutOfBounds;
    assert_ne!(fp(&a), fp(&oob));
    assert_ne!(fp(&a), fp(&use_after_free("terrain", 0x1000_0000)));

    // An unnamed culprit's label holds its handle: it must not reach the fingerprint.
    let mut unnamed = use_after_free("particles", 0x1000_0000);
    let c = unnamed.faults[0].culprit.as_mut().unwrap();
    c.name = None;
    c.label = format!("BUFFER {:#x}", c.handle);
    assert_eq!(
        fp(&unnamed),
        serde_json::json!([
            "gpu-crash",
            "device_lost",
            "use_after_free",
            "BUFFER (unnamed)"
        ])
    );

    let hang = sentry_event(&gpu_hang(), &s);
    assert_eq!(hang["exception"]["values"][0]["type"], "GPU_HANG");
    assert_eq!(
        hang["fingerprint"],
        serde_json::json!(["gpu-crash", "gpu_hang", "no_fault_address", "unknown"])
    );
    assert_eq!(hang["tags"]["drill"], "hang");
    let suspect = sentry_event(&gpu_hang_with_suspect("particles"), &s);
    assert_eq!(
        suspect["fingerprint"],
        serde_json::json!([
            "gpu-crash",
            "gpu_hang",
            "no_fault_address",
            "buffer \"particles\""
        ])
    );
    assert_eq!(
        suspect["contexts"]["gpu_fault"]["hang_suspect"],
        "buffer \"particles\""
    );
    assert_eq!(suspect["extra"]["hang"]["stalled_ms"], 2000);
}

/// A hang with the pipelines queued in its stage: the first one's label, shader file and material are
/// tags (searchable across players), and the fingerprint does not change with them (a ranked guess
/// must not split one bug into several issues).
#[test]
fn a_hang_tags_its_first_pipeline_and_keeps_its_fingerprint() {
    use bevy_gpu_crash_reporter::report::{
        PipelineCandidate, PipelineKind, RunningBasis, RunningPipelines, ShaderStage,
    };
    let s = settings(tmp_dir("running-tags"));
    let mut hang = gpu_hang();
    hang.gpu_stage = Some("Core3d MainPass of camera \"main\"".into());
    let before = sentry_event(&hang, &s)["fingerprint"].clone();
    let candidate = |rank, label: &str, fragment: &str, material: Option<&str>| PipelineCandidate {
        rank,
        label: Some(label.into()),
        kind: PipelineKind::Render,
        shaders: vec![
            ShaderStage {
                stage: "vertex".into(),
                path: Some("embedded://bevy_pbr/render/mesh.wgsl".into()),
                entry_point: None,
            },
            ShaderStage {
                stage: "fragment".into(),
                path: Some(fragment.into()),
                entry_point: None,
            },
        ],
        shader_defs: vec![],
        passes: vec!["Opaque3d".into()],
        batches: 1,
        material: material.map(str::to_owned),
        entities: vec![],
        entity_count: 0,
    };
    hang.running = Some(RunningPipelines {
        exact: None,
        basis: RunningBasis::QueuedInStage,
        frame: 14,
        camera: Some("main".into()),
        stage: "Core3d MainPass".into(),
        candidates: vec![
            candidate(
                1,
                "opaque_mesh_pipeline",
                "shaders/water.wgsl",
                Some("game::WaterMaterial"),
            ),
            candidate(
                2,
                "pbr_opaque_mesh_pipeline",
                "embedded://bevy_pbr/render/pbr.wgsl",
                None,
            ),
        ],
    });
    let e = sentry_event(&hang, &s);
    assert_eq!(e["tags"]["gpu.pipeline"], "opaque_mesh_pipeline");
    assert_eq!(e["tags"]["gpu.shader"], "shaders/water.wgsl");
    assert_eq!(e["tags"]["gpu.material"], "game::WaterMaterial");
    assert_eq!(e["fingerprint"], before);
    // Without the list there are no such tags.
    hang.running = None;
    let e = sentry_event(&hang, &s);
    assert!(e["tags"].get("gpu.shader").is_none(), "{}", e["tags"]);
}

/// A hang at a relaunch that continues an earlier run's hang is sent with the earlier report's
/// issue fingerprint, not its own (which names the pass that came first in its frame 1), and says
/// which report it joins in a tag.
#[test]
fn a_hang_after_an_earlier_runs_hang_joins_that_issue() {
    use bevy_gpu_crash_reporter::report::EarlierHang;
    let s = settings(tmp_dir("after-earlier-hang"));
    let mut earlier = gpu_hang();
    earlier.gpu_stage = Some("Core3d MainPass of camera \"main\"".into());
    let earlier_fingerprint = sentry_event(&earlier, &s)["fingerprint"].clone();
    let mut relaunch = gpu_hang();
    relaunch.gpu_stage = Some("Core3d Prepass of camera \"minimap\"".into());
    let own = sentry_event(&relaunch, &s)["fingerprint"].clone();
    assert_ne!(own, earlier_fingerprint, "the two differ on their own");
    relaunch.after_earlier_hang = Some(EarlierHang {
        report_id: earlier.id.clone(),
        event_id: earlier.event_id().to_owned(),
        fingerprint: serde_json::from_value(earlier_fingerprint.clone()).unwrap(),
        process_id: 4242,
        ms_before: 60_000,
    });
    let e = sentry_event(&relaunch, &s);
    assert_eq!(e["fingerprint"], earlier_fingerprint);
    assert_eq!(e["tags"]["gpu.after_earlier_hang"], earlier.id.as_str());
}

/// A report with 100k recent events and a fault with 50k nearby events: the event stays under
/// 1 MiB, says what was trimmed, and the attachment stays under its bound.
#[test]
fn huge_reports_are_trimmed_under_one_mebibyte() {
    let mut report = use_after_free("particles", 0x1000_0000);
    report.recent_events = (0..100_000u64)
        .map(|i| {
            event(
                100 + i,
                i / 100,
                BindingKind::Bind,
                0x10_0000 + i,
                0x2_0000_0000 + i * 0x1000,
                0x1000,
                Some("streaming chunk with a fairly long label"),
            )
        })
        .collect();
    report.faults[0].nearby_events = report.recent_events[..50_000].to_vec();
    report.notes = (0..5000)
        .map(|i| format!("note {i}: {}", "x".repeat(100)))
        .collect();
    let s = settings(tmp_dir("huge"));
    let e = sentry_event(&report, &s);
    let size = serde_json::to_vec(&e).unwrap().len();
    assert!(size < 1024 * 1024, "event is {size} bytes");
    let trimmed = e["extra"]["trimmed"].to_string();
    assert!(trimmed.contains("breadcrumbs"), "{trimmed}");
    assert!(trimmed.contains("nearby_events"), "{trimmed}");
    assert_eq!(e["breadcrumbs"]["values"].as_array().unwrap().len(), 200);
    assert_eq!(e["exception"]["values"][0]["type"], "VK_ERROR_DEVICE_LOST");

    let env = envelope_bytes(&report, Some(&[7u8; 1000]), &s);
    let items: Vec<EnvelopeItem> = Envelope::from_slice(&env).unwrap().into_items().collect();
    assert_eq!(
        items.len(),
        4,
        "event, report JSON, vendor binary, report page"
    );
    let EnvelopeItem::Event(event) = &items[0] else {
        panic!("the first item is not the event");
    };
    let event_len = serde_json::to_vec(event).unwrap().len();
    assert!(event_len < 1024 * 1024, "event item is {event_len} bytes");
    let attached = attachments(&env);
    let json = &attached[0].buffer;
    let report_back: CrashReport = serde_json::from_slice(json).unwrap();
    assert!(json.len() <= s.max_attachment_bytes);
    assert!(report_back.recent_events.len() < 100_000);
    assert_eq!(
        report_back.recent_events.last(),
        report.recent_events.last()
    );
    assert!(report_back
        .notes
        .iter()
        .any(|n| n.contains("recent_events: the last")));
    assert_eq!(attached[1].buffer, [7u8; 1000]);
    assert_eq!(
        attached[1].content_type.as_deref(),
        Some("application/octet-stream")
    );
    // The page of a huge report is bounded by what it draws, and says what it left out.
    let page = &attached[2];
    assert_eq!(page.filename, "gpu-crash-report.html");
    assert_eq!(page.content_type.as_deref(), Some("text/html"));
    assert!(page.buffer.len() <= s.max_attachment_bytes);
    let page = String::from_utf8(page.buffer.clone()).unwrap();
    assert!(page.contains("more note(s) in the report"), "{page}");
}

#[test]
fn the_report_page_is_attached_and_counted_against_the_attachment_limit() {
    let report = use_after_free("particles", 0x1000_0000);
    let mut s = settings(tmp_dir("page"));
    let attached = attachments(&envelope_bytes(&report, None, &s));
    let page = attached
        .iter()
        .find(|a| a.filename == "gpu-crash-report.html")
        .expect("the report page is attached");
    assert_eq!(page.content_type.as_deref(), Some("text/html"));
    let html = String::from_utf8(page.buffer.clone()).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        html.contains("buffer &quot;particles&quot; (culprit)"),
        "{html}"
    );

    // Over the limit, the page is left out and the JSON says so.
    s.max_attachment_bytes = html.len() - 1;
    let attached = attachments(&envelope_bytes(&report, None, &s));
    assert!(attached
        .iter()
        .all(|a| a.filename != "gpu-crash-report.html"));
    let back: CrashReport = serde_json::from_slice(&attached[0].buffer).unwrap();
    assert!(
        back.notes
            .iter()
            .any(|n| n.contains("the report page") && n.contains("was not uploaded")),
        "{:?}",
        back.notes
    );
}

#[test]
fn envelope_header_names_event_dsn_and_sent_at() {
    let report = use_after_free("particles", 0x1000_0000);
    let mut s = settings(tmp_dir("header"));
    s.dsn = Some("http://abc@127.0.0.1:9/5".parse().unwrap());
    let env = envelope_bytes(&report, None, &s);
    let header: Value = serde_json::from_slice(env.split(|&b| b == b'\n').next().unwrap()).unwrap();
    let event_id = |s: &str| sentry::types::Uuid::parse_str(s).unwrap();
    assert_eq!(
        event_id(header["event_id"].as_str().unwrap()),
        event_id(&report.id)
    );
    let dsn: Dsn = header["dsn"].as_str().unwrap().parse().unwrap();
    assert_eq!(Some(dsn), s.dsn);
    assert!(header["sent_at"].as_str().unwrap().ends_with('Z'));
    let attached = attachments(&env);
    assert_eq!(
        attached.len(),
        2,
        "event + report JSON + report page (no vendor binary)"
    );
    assert_eq!(attached[0].filename, report.file_name());
    assert_eq!(attached[1].filename, "gpu-crash-report.html");
}

#[test]
fn dsn_errors_say_what_is_wrong() {
    assert!(matches!(
        "ftp://k@h/1".parse::<Dsn>(),
        Err(DsnError::BadScheme(_))
    ));
    assert_eq!(
        "https://sentry.io/1".parse::<Dsn>(),
        Err(DsnError::MissingPublicKey)
    );
    assert_eq!(
        "https://k@sentry.io".parse::<Dsn>(),
        Err(DsnError::MissingProjectId)
    );
    let msg = DsnError::MissingPublicKey.to_string();
    assert!(msg.contains("public key"), "{msg}");
    let d: Dsn = "https://k@o1.ingest.sentry.io/42".parse().unwrap();
    assert_eq!(
        d.envelope_url(),
        "https://o1.ingest.sentry.io/api/42/envelope/"
    );
}

#[test]
fn without_dsn_reports_stay_on_disk() {
    let dir = tmp_dir("no-dsn");
    let outbox = Outbox::new(settings(dir.clone()));
    let path = outbox
        .enqueue(&use_after_free("particles", 0x1000_0000), None)
        .unwrap();
    assert!(path.starts_with(&dir));
    let summary = outbox.flush(Instant::now() + Duration::from_secs(1));
    assert_eq!(summary.sent, 0);
    assert_eq!(summary.attempts, 0);
    assert_eq!(summary.pending, 1);
    assert_eq!(summary.stopped.as_deref(), Some("no DSN configured"));
    assert!(path.exists());
}

#[test]
fn without_consent_nothing_is_sent() {
    let server = ScriptedServer::start(0, vec![], Action::Respond(200, vec![], "{}".into()));
    let mut s = settings(tmp_dir("consent"));
    s.dsn = Some(
        format!("http://k@127.0.0.1:{}/1", server.port)
            .parse()
            .unwrap(),
    );
    s.upload_consent = UploadConsent::Callback(std::sync::Arc::new(|| false));
    let outbox = Outbox::new(s);
    outbox
        .enqueue(&use_after_free("particles", 0x1000_0000), None)
        .unwrap();
    let summary = outbox.flush(Instant::now() + Duration::from_secs(2));
    assert_eq!(summary.attempts, 0);
    assert_eq!(summary.pending, 1);
    assert!(server.seen().is_empty());
}

#[test]
fn outbox_is_oldest_first_and_bounded_dropping_the_oldest() {
    let dir = tmp_dir("bounded");
    let mut s = settings(dir);
    s.max_outbox_files = 3;
    let outbox = Outbox::new(s);
    let mut ids = Vec::new();
    for i in 0..5u64 {
        let mut r = use_after_free("particles", 0x1000_0000);
        // Enqueue out of time order: names sort by report time, not by enqueue order.
        r.timestamp_ms = 1_796_212_707_000 + (i * 7) % 5;
        ids.push((r.timestamp_ms, r.id.clone()));
        outbox.enqueue(&r, None).unwrap();
    }
    let pending = outbox.pending();
    assert_eq!(pending.len(), 3, "{pending:?}");
    // The last one enqueued (timestamp ...003) is never dropped; the oldest others are.
    let names: Vec<String> = pending
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(names.iter().any(|n| n.contains(&ids[4].1)), "{names:?}");
    assert!(
        names.iter().all(|n| !n.contains(&ids[0].1)),
        "oldest kept: {names:?}"
    );

    let mut s = settings(tmp_dir("bounded-bytes"));
    s.max_outbox_bytes = 1;
    let outbox = Outbox::new(s);
    outbox.enqueue(&use_after_free("a", 0x1000), None).unwrap();
    let newest = outbox.enqueue(&use_after_free("b", 0x2000), None).unwrap();
    assert_eq!(outbox.pending(), vec![newest]);
}

#[test]
fn server_errors_are_retried_with_backoff_and_the_file_deleted_after_2xx() {
    let server = ScriptedServer::start(
        0,
        vec![Action::Respond(503, vec![], "overloaded".into())],
        Action::Respond(200, vec![], "{\"id\":\"x\"}".into()),
    );
    let mut s = settings(tmp_dir("5xx"));
    s.dsn = Some(
        format!("http://k@127.0.0.1:{}/1", server.port)
            .parse()
            .unwrap(),
    );
    let outbox = Outbox::new(s);
    let path = outbox
        .enqueue(&use_after_free("particles", 0x1000_0000), None)
        .unwrap();
    let summary = outbox.flush(Instant::now() + Duration::from_secs(10));
    assert_eq!(summary.sent, 1, "{summary:?}");
    assert_eq!(summary.attempts, 2);
    assert!(!path.exists());
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].path, "/api/1/envelope/");
}

// ------------------------------------------------------------------- hostile files, privacy, skips

/// A server on 127.0.0.1 that accepts every envelope.
#[cfg(unix)]
fn accepting_server() -> ScriptedServer {
    ScriptedServer::start(
        0,
        vec![],
        Action::Respond(200, vec![], "{\"id\":\"x\"}".into()),
    )
}

#[cfg(unix)]
fn sending_to(server: &ScriptedServer, dir: PathBuf) -> DeliverySettings {
    let mut s = settings(dir);
    s.dsn = Some(
        format!("http://k@127.0.0.1:{}/1", server.port)
            .parse()
            .unwrap(),
    );
    s
}

/// Runs `f` on a thread of its own that file permission bits bind even when the tests run as root
/// (see [`drop_file_permission_override`]).
#[cfg(target_os = "linux")]
fn as_owner_without_override<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                drop_file_permission_override();
                f()
            })
            .join()
            .unwrap()
    })
}

/// Issue 32 item 8: one envelope that cannot be opened now does not hold back the newer ones; the
/// flush sends those and leaves it for the next flush.
#[cfg(target_os = "linux")]
#[test]
fn an_envelope_that_cannot_be_opened_does_not_block_newer_ones() {
    use std::os::unix::fs::PermissionsExt;
    let server = accepting_server();
    let outbox = Outbox::new(sending_to(&server, tmp_dir("unopenable")));
    let mut older = use_after_free("older", 0x1000_0000);
    older.timestamp_ms -= 60_000;
    let older = outbox.enqueue(&older, None).unwrap();
    let newer = outbox
        .enqueue(&use_after_free("newer", 0x2000_0000), None)
        .unwrap();
    std::fs::set_permissions(&older, std::fs::Permissions::from_mode(0o000)).unwrap();

    let summary =
        as_owner_without_override(|| outbox.flush(Instant::now() + Duration::from_secs(20)));
    assert_eq!(
        summary.sent, 1,
        "the newer envelope was not sent: {summary:?}"
    );
    assert!(!newer.exists(), "the newer envelope is still queued");
    assert!(older.exists(), "the unopenable envelope must stay");
    assert!(
        summary
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("cannot"),
        "{summary:?}"
    );

    // Readable again: the next flush sends it.
    std::fs::set_permissions(&older, std::fs::Permissions::from_mode(0o600)).unwrap();
    let summary = outbox.flush(Instant::now() + Duration::from_secs(20));
    assert_eq!(summary.sent, 1, "{summary:?}");
    assert!(!older.exists());
}

/// Issue 32 item 6: a symlink planted where the outbox writes its `sent/` marker is not followed
/// (it would create or truncate any file the process may write).
#[cfg(unix)]
#[test]
fn a_symlink_planted_in_sent_is_not_followed() {
    let server = accepting_server();
    let dir = tmp_dir("sent-symlink");
    let outbox = Outbox::new(sending_to(&server, dir.join("outbox")));
    let path = outbox
        .enqueue(&use_after_free("particles", 0x1000_0000), None)
        .unwrap();
    let victim = dir.join("victim.txt");
    let sent = dir.join("outbox/sent");
    std::fs::create_dir_all(&sent).unwrap();
    let marker = sent.join(path.file_name().unwrap());
    std::os::unix::fs::symlink(&victim, &marker).unwrap();

    let summary = outbox.flush(Instant::now() + Duration::from_secs(20));
    assert_eq!(summary.sent, 1, "{summary:?}");
    assert!(
        !victim.exists(),
        "the sent marker followed a symlink and created {}",
        victim.display()
    );
    let meta = std::fs::symlink_metadata(&marker).unwrap();
    assert!(meta.is_file(), "the marker is a plain file: {meta:?}");
}

/// Issue 32 item 7: the DSN's secret key never lands on disk (the envelope's header names the DSN
/// without it; the full DSN is stamped only on the way out).
#[test]
fn the_dsn_secret_is_not_written_into_an_envelope_on_disk() {
    let mut s = settings(tmp_dir("dsn-secret"));
    s.dsn = Some("http://public:hunter2secret@127.0.0.1:9/5".parse().unwrap());
    let outbox = Outbox::new(s);
    let path = outbox
        .enqueue(&use_after_free("particles", 0x1000_0000), None)
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains("hunter2secret"),
        "the DSN secret is in {}",
        path.display()
    );
    let header: Value =
        serde_json::from_slice(bytes.split(|&b| b == b'\n').next().unwrap()).unwrap();
    let named: Dsn = header["dsn"].as_str().unwrap().parse().unwrap();
    assert_eq!(named.envelope_url(), "http://127.0.0.1:9/api/5/envelope/");
    assert_eq!(named.as_sentry().public_key(), "public");
}

/// Issue 32 item 7: `Debug` (of the DSN, and of everything holding one) does not print its secret.
#[test]
fn debug_output_does_not_print_the_dsn_secret() {
    let mut s = settings(tmp_dir("dsn-debug"));
    s.dsn = Some("http://public:hunter2secret@127.0.0.1:9/5".parse().unwrap());
    let outbox = Outbox::new(s.clone());
    let printed = format!("{:?}\n{s:?}\n{outbox:?}", s.dsn.as_ref().unwrap());
    assert!(!printed.contains("hunter2secret"), "{printed}");
    assert!(printed.contains("public"), "{printed}");
}

/// Issue 32 item 7: envelopes and the outbox folders are the player's alone (0600 and 0700), not
/// whatever the umask gives (usually world-readable).
#[cfg(unix)]
#[test]
fn envelopes_and_outbox_folders_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let server = ScriptedServer::start(0, vec![], Action::Respond(400, vec![], "rejected".into()));
    let dir = tmp_dir("modes").join("outbox");
    let outbox = Outbox::new(sending_to(&server, dir.clone()));
    let path = outbox
        .enqueue(&use_after_free("particles", 0x1000_0000), None)
        .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "outbox folder");
    assert_eq!(mode(&path), 0o600, "envelope");
    // Rejected: moved to failed/, a folder of its own.
    let summary = outbox.flush(Instant::now() + Duration::from_secs(20));
    assert_eq!(summary.failed, 1, "{summary:?}");
    assert_eq!(mode(&dir.join("failed")), 0o700, "failed/ folder");
}

/// Issue 32 item 7: without `include_paths`, no absolute path (home directory, user name) leaves in
/// notes, panic texts, breadcrumbs or the driver's description; file names stay (they help).
#[test]
fn without_include_paths_no_absolute_path_leaves() {
    use bevy_gpu_crash_reporter::report::{BreadcrumbState, FrameBreadcrumbs, GpuBreadcrumb};
    let mut report = use_after_free("particles", 0x1000_0000);
    report.notes.push(
        "panicked at /home/qa/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/wgpu-29.0.0/\
         src/backend/wgpu_core.rs:1234:26: Buffer with '' label is invalid"
            .into(),
    );
    report
        .notes
        .push("asset not found: /home/qa/games/particle_storm/assets/tree.glb".into());
    report.notes.push(
        r"not saved: C:\Users\qa\AppData\Local\particle_storm\gpu-crash-reports is read-only"
            .into(),
    );
    report.description = Some("page fault in /opt/studio/builds/particle_storm/game".into());
    report.breadcrumbs = vec![FrameBreadcrumbs {
        frame: 14,
        breadcrumbs: vec![GpuBreadcrumb {
            label: "shader /home/qa/mods/water.wgsl".into(),
            camera: Some("main".into()),
            state: BreadcrumbState::Started,
        }],
        dropped: 0,
    }];
    let s = settings(tmp_dir("scrub"));
    assert!(!s.include_paths);
    let bytes = envelope_bytes(&report, None, &s);
    let text = String::from_utf8_lossy(&bytes);
    for leak in [
        "/home/qa",
        "Users\\\\qa",
        "/opt/studio",
        ".cargo/registry",
        "/mods/",
    ] {
        assert!(!text.contains(leak), "{leak:?} leaked");
    }
    for kept in [
        "wgpu_core.rs:1234:26",
        "tree.glb",
        "water.wgsl",
        "label is invalid",
    ] {
        assert!(text.contains(kept), "{kept:?} was scrubbed too");
    }
    // The page is drawn from the scrubbed report (its text is HTML-escaped, not JSON-escaped).
    let page = attachments(&bytes)
        .into_iter()
        .find(|a| a.filename == "gpu-crash-report.html")
        .expect("the report page is attached");
    let page = String::from_utf8(page.buffer).unwrap();
    assert!(page.contains("water.wgsl") && page.contains("tree.glb"));
    for leak in ["/home/qa", "Users\\qa", "/opt/studio", "/mods/"] {
        assert!(!page.contains(leak), "{leak:?} leaked into the page");
    }
}
