//! The Sentry event built from a [`CrashReport`]: what a developer sees on the dashboard.
//!
//! - exception `VK_ERROR_DEVICE_LOST` or `GPU_HANG` with the report's one-line summary as value;
//! - a fingerprint from kind, verdict and culprit label only (never addresses or handles), so one bug
//!   seen by many players is one issue;
//! - a real `gpu` context, a `gpu_fault` context with the first fault, tags, breadcrumbs from the
//!   binding events, and the full fault list in `extra`;
//! - always under [`DeliverySettings::max_event_bytes`]: lists are trimmed, with a note in
//!   `extra.trimmed`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentry::protocol::{
    AppContext, Breadcrumb, ClientSdkInfo, Context, Event, Exception, GpuContext, Level, Map,
    Mechanism, OsContext, Values,
};
use sentry::types::Uuid;
use serde_json::{json, Value};

use super::privacy::redacted_report;
use super::settings::DeliverySettings;
use crate::capture::BindingKind;
use crate::report::{
    BindingEventEntry, BreadcrumbState, CrashKind, CrashReport, Culprit, FaultEntry, FrameTiming,
    GpuAsset,
};

/// Exception type of a device loss.
pub const DEVICE_LOST_TYPE: &str = "VK_ERROR_DEVICE_LOST";
/// Exception type of a GPU hang.
pub const GPU_HANG_TYPE: &str = "GPU_HANG";
/// Breadcrumb category of binding events.
pub const BINDING_CATEGORY: &str = "gpu.binding";
/// Breadcrumb category of GPU breadcrumbs (frame and render-pass markers); also the tag naming the
/// pass the GPU was executing.
pub const PASS_CATEGORY: &str = "gpu.pass";

/// Longest tag value Sentry accepts.
const MAX_TAG_LEN: usize = 200;

/// The exception type for a crash kind.
pub fn exception_type(kind: CrashKind) -> &'static str {
    match kind {
        CrashKind::DeviceLost => DEVICE_LOST_TYPE,
        CrashKind::GpuHang => GPU_HANG_TYPE,
    }
}

/// The snake_case name of a crash kind (`device_lost`, `gpu_hang`), as in tags and fingerprints.
pub fn kind_name(kind: CrashKind) -> &'static str {
    match kind {
        CrashKind::DeviceLost => "device_lost",
        CrashKind::GpuHang => "gpu_hang",
    }
}

/// The object the report blames: the first fault's culprit, or for a hang without fault address the
/// most recent resource freed while GPU work was pending.
pub fn blamed(report: &CrashReport) -> Option<&Culprit> {
    match report.faults.first() {
        Some(f) => f.culprit.as_ref(),
        None => report.hang.as_ref().and_then(|h| h.suspects.first()),
    }
}

/// `["gpu-crash", kind, verdict, culprit]`, plus the GPU stage in flight when breadcrumbs named one:
/// the same bug on many machines groups into one issue, and hangs in different passes are different
/// issues.
///
/// The culprit is the [`blamed`] object's Bevy asset when known (`mesh_vertex_data
/// "models/tree.glb#Mesh3/Primitive0"`, replacing the slab buffer's label), else its label when it
/// has a name (`buffer "particles"`); an
/// unnamed one is `"<TYPE> (unnamed)"`, because its label contains a handle that differs per run.
/// Without a fault address the verdict is `"no_fault_address"`; without a culprit it is `"unknown"`.
pub fn fingerprint(report: &CrashReport) -> Vec<String> {
    let verdict = report
        .faults
        .first()
        .map_or("no_fault_address", |f| f.verdict.as_str());
    let culprit = match blamed(report) {
        // The asset, not the slab buffer: slab numbers differ between runs and players.
        Some(c) if c.asset.is_some() => c.asset.as_ref().map(GpuAsset::fingerprint_part).unwrap(),
        Some(c) if c.name.is_some() => c.label.clone(),
        Some(c) => format!("{} (unnamed)", c.object_type),
        None => "unknown".to_owned(),
    };
    let mut parts = vec![
        "gpu-crash".to_owned(),
        kind_name(report.kind).to_owned(),
        verdict.to_owned(),
        culprit,
    ];
    if let Some(stage) = &report.gpu_stage {
        parts.push(stage.clone());
    }
    parts
}

/// `bind BUFFER "particles" 0x1000..0x2000 (frame 12)`; unnamed objects show their handle.
pub fn breadcrumb_message(e: &BindingEventEntry) -> String {
    let kind = match e.kind {
        BindingKind::Bind => "bind",
        BindingKind::Unbind => "unbind",
    };
    let who = match &e.name {
        Some(n) => format!("{n:?}"),
        None => format!("{:#x}", e.handle),
    };
    let internal = if e.internal { " [driver-internal]" } else { "" };
    format!(
        "{kind} {} {who} {:#x}..{:#x} (frame {}){internal}",
        e.object_type,
        e.base,
        e.base.saturating_add(e.size),
        e.frame
    )
}

/// How much of each list goes into the event; reduced until the event fits.
#[derive(Clone, Copy, Debug)]
struct Budget {
    breadcrumbs: usize,
    faults: usize,
    per_fault_list: usize,
    notes: usize,
    max_string: usize,
}

impl Budget {
    /// The next smaller budget, or `None` when nothing is left to cut.
    fn shrink(self, report: &CrashReport) -> Option<Self> {
        let mut b = self;
        let longest_fault_list = report
            .faults
            .iter()
            .map(|f| f.nearby_events.len().max(f.candidates.len()))
            .max()
            .unwrap_or(0);
        let halve = |n: usize, floor: usize| (n / 2).max(floor);
        if b.per_fault_list.min(longest_fault_list) > 4 {
            b.per_fault_list = halve(b.per_fault_list.min(longest_fault_list), 4);
        } else if b.faults.min(report.faults.len()) > 4 {
            b.faults = halve(b.faults.min(report.faults.len()), 4);
        } else if b.breadcrumbs > 25 {
            b.breadcrumbs = halve(b.breadcrumbs, 25);
        } else if b.notes.min(report.notes.len()) > 5 {
            b.notes = halve(b.notes.min(report.notes.len()), 5);
        } else if b.max_string > 256 {
            b.max_string = if b.max_string == usize::MAX {
                16 * 1024
            } else {
                halve(b.max_string, 256)
            };
        } else if b.per_fault_list > 0 || b.faults > 1 || b.breadcrumbs > 0 || b.notes > 0 {
            b.per_fault_list = 0;
            b.faults = 1;
            b.breadcrumbs = 0;
            b.notes = 0;
        } else {
            return None;
        }
        Some(b)
    }
}

/// The Sentry event for `report`, under `settings.max_event_bytes` serialised.
pub fn sentry_event(report: &CrashReport, settings: &DeliverySettings) -> Event<'static> {
    let report = redacted_report(report, settings);
    let limit = settings.max_event_bytes;
    let mut budget = Budget {
        breadcrumbs: settings.max_breadcrumbs,
        faults: usize::MAX,
        per_fault_list: usize::MAX,
        notes: usize::MAX,
        max_string: usize::MAX,
    };
    loop {
        let event = build(&report, settings, budget);
        if serialized_len(&event) <= limit {
            return event;
        }
        match budget.shrink(&report) {
            Some(b) => budget = b,
            None => return last_resort(event, limit),
        }
    }
}

fn serialized_len(event: &Event<'static>) -> usize {
    serde_json::to_vec(event).map_or(usize::MAX, |v| v.len())
}

/// Keeps the identity, exception, contexts and tags; drops breadcrumbs and `extra` but a note.
fn last_resort(mut event: Event<'static>, limit: usize) -> Event<'static> {
    event.breadcrumbs.values.clear();
    event.extra = Map::new();
    event.extra.insert(
        "trimmed".into(),
        json!([format!(
            "the event exceeded {limit} bytes even with every list trimmed; see the report attachment"
        )]),
    );
    for exception in &mut event.exception.values {
        if let Some(v) = exception.value.as_mut() {
            *v = truncated(v, 1024);
        }
    }
    cut_strings(&mut event, 1024);
    event
}

fn build(report: &CrashReport, settings: &DeliverySettings, budget: Budget) -> Event<'static> {
    let mut trimmed: Vec<String> = Vec::new();
    let crash_time = UNIX_EPOCH + Duration::from_millis(report.timestamp_ms);

    let mut event = Event::new();
    event.event_id = Uuid::parse_str(report.event_id()).unwrap_or_else(|_| {
        trimmed.push(format!(
            "report id {:?} is not a UUID; the event got a new id",
            report.event_id()
        ));
        Uuid::new_v4()
    });
    event.level = Level::Fatal;
    event.platform = Cow::Borrowed("native");
    event.logger = Some(env!("CARGO_PKG_NAME").to_owned());
    event.timestamp = crash_time;
    // A loss that follows its hang report joins the hang's issue.
    let fingerprint = match &report.follows_hang {
        Some(follow_up) => follow_up.fingerprint.clone(),
        None => fingerprint(report),
    };
    event.fingerprint = Cow::Owned(fingerprint.into_iter().map(Cow::Owned).collect());
    event.release = settings
        .resolve_release(&report.application.name, &report.application.version)
        .map(Cow::Owned);
    event.environment = Some(Cow::Owned(settings.resolve_environment()));
    event.sdk = Some(Cow::Owned(ClientSdkInfo {
        name: env!("CARGO_PKG_NAME").to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        integrations: vec!["vulkan-device-fault".to_owned()],
        packages: Vec::new(),
    }));
    event.exception = Values {
        values: vec![Exception {
            ty: exception_type(report.kind).to_owned(),
            value: Some(report.summary.clone()),
            mechanism: Some(Mechanism {
                ty: "gpu_crash_reporter".to_owned(),
                description: report.description.clone(),
                handled: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        }],
    };

    // contexts
    let gpu = &report.gpu;
    let driver = if gpu.driver_info.is_empty() {
        gpu.driver_version.clone()
    } else {
        gpu.driver_info.clone()
    };
    event.contexts.insert(
        "gpu".to_owned(),
        Context::Gpu(Box::new(GpuContext {
            name: if gpu.gpu_name.is_empty() {
                "unknown GPU".to_owned()
            } else {
                gpu.gpu_name.clone()
            },
            version: (!gpu.api_version.is_empty()).then(|| gpu.api_version.clone()),
            driver_version: (!driver.is_empty()).then(|| driver.clone()),
            id: (gpu.device_id != 0).then(|| format!("{:#06x}", gpu.device_id)),
            vendor_id: (gpu.vendor_id != 0).then(|| gpu.vendor_id.to_string()),
            vendor_name: (!gpu.vendor_name.is_empty()).then(|| gpu.vendor_name.clone()),
            // `GpuCrashCapabilities` has no memory size yet: left out rather than guessed.
            memory_size: (gpu.memory_size_mb > 0).then_some(gpu.memory_size_mb as u32),
            api_type: Some("Vulkan".to_owned()),
            ..Default::default()
        })),
    );
    event.contexts.insert(
        "os".to_owned(),
        Context::Os(Box::new(OsContext {
            name: Some(std::env::consts::OS.to_owned()),
            ..Default::default()
        })),
    );
    let app = &report.application;
    let mut app_other = Map::new();
    if !app.engine_name.is_empty() {
        app_other.insert(
            "engine".to_owned(),
            json!(format!("{} {}", app.engine_name, app.engine_version).trim()),
        );
    }
    if let Some(exe) = &app.executable {
        app_other.insert("executable".to_owned(), json!(exe));
    }
    event.contexts.insert(
        "app".to_owned(),
        Context::App(Box::new(AppContext {
            app_name: (!app.name.is_empty()).then(|| app.name.clone()),
            app_version: (!app.version.is_empty()).then(|| app.version.clone()),
            other: app_other,
            ..Default::default()
        })),
    );

    // tags
    let first = report.faults.first();
    let culprit = blamed(report);
    let mut tags = BTreeMap::new();
    let mut tag = |k: &str, v: String| {
        let v = v.replace(['\n', '\r'], " ");
        let v = v.trim();
        if !v.is_empty() {
            tags.insert(k.to_owned(), truncate_chars(v, MAX_TAG_LEN));
        }
    };
    tag(
        "gpu.vendor",
        if gpu.vendor_name.is_empty() {
            format!("{:#06x}", gpu.vendor_id)
        } else {
            gpu.vendor_name.clone()
        },
    );
    tag("gpu.name", gpu.gpu_name.clone());
    tag("gpu.driver", format!("{} {}", gpu.driver_name, driver));
    tag("gpu.api", "Vulkan".to_owned());
    tag("gpu.fault_kind", kind_name(report.kind).to_owned());
    tag(
        "gpu.verdict",
        first
            .map_or("no_fault_address", |f| f.verdict.as_str())
            .to_owned(),
    );
    if let Some(name) = culprit.and_then(|c| c.name.clone()) {
        tag("gpu.culprit", name);
    }
    if let Some(asset) = culprit.and_then(|c| c.asset.as_ref()) {
        tag(
            "gpu.asset",
            asset.path.clone().unwrap_or_else(|| asset.asset_id.clone()),
        );
        tag("gpu.asset_kind", asset.kind.as_str().to_owned());
    }
    if let Some(stage) = &report.gpu_stage {
        tag(PASS_CATEGORY, stage.clone());
    }
    tag(
        "gpu.device_generation",
        report.device_generation.to_string(),
    );
    tag("gpu.crashes_this_run", report.crashes_this_run.to_string());
    if let Some(drill) = &report.drill {
        tag("drill", drill.clone());
    }
    event.tags = tags;

    // breadcrumbs
    event.breadcrumbs = Values {
        values: breadcrumbs(report, crash_time, budget.breadcrumbs, &mut trimmed),
    };

    // extra
    let mut extra = Map::new();
    let faults: Vec<Value> = report
        .faults
        .iter()
        .take(budget.faults)
        .map(|f| fault_json(f, budget.per_fault_list))
        .collect();
    if report.faults.len() > budget.faults {
        trimmed.push(format!(
            "faults: kept the first {} of {}",
            budget.faults,
            report.faults.len()
        ));
    }
    if report.faults.iter().take(budget.faults).any(|f| {
        f.nearby_events.len() > budget.per_fault_list || f.candidates.len() > budget.per_fault_list
    }) {
        trimmed.push(format!(
            "faults[*].candidates and nearby_events: kept the first {} of each",
            budget.per_fault_list
        ));
    }
    extra.insert("faults".to_owned(), Value::Array(faults));
    extra.insert("fault_count".to_owned(), json!(report.faults.len()));
    extra.insert("index_stats".to_owned(), to_value(&report.index_stats));
    extra.insert(
        "binding_events_dropped".to_owned(),
        json!(report.binding_events_dropped),
    );
    extra.insert(
        "recent_events_count".to_owned(),
        json!(report.recent_events.len()),
    );
    let notes: Vec<&String> = report.notes.iter().take(budget.notes).collect();
    if report.notes.len() > budget.notes {
        trimmed.push(format!(
            "notes: kept the first {} of {}",
            budget.notes,
            report.notes.len()
        ));
    }
    extra.insert("notes".to_owned(), json!(notes));
    extra.insert("frame".to_owned(), json!(report.frame));
    extra.insert(
        "crashes_this_run".to_owned(),
        json!(report.crashes_this_run),
    );
    extra.insert(
        "ms_since_previous_crash".to_owned(),
        json!(report.ms_since_previous_crash),
    );
    extra.insert(
        "suppressed_duplicates".to_owned(),
        json!(report.suppressed_duplicates),
    );
    if !report.breadcrumbs.is_empty() {
        extra.insert("gpu_breadcrumbs".to_owned(), to_value(&report.breadcrumbs));
    }
    extra.insert("gpu_capabilities".to_owned(), to_value(&report.gpu));
    extra.insert("application".to_owned(), to_value(&report.application));
    extra.insert(
        "report_schema_version".to_owned(),
        json!(report.schema_version),
    );
    extra.insert("report_time".to_owned(), json!(report.time));
    if let Some(d) = &report.description {
        extra.insert("fault_description".to_owned(), json!(d));
    }
    if !report.vendor_infos.is_empty() {
        extra.insert("vendor_infos".to_owned(), to_value(&report.vendor_infos));
    }
    if let Some(v) = &report.vendor_binary {
        extra.insert("vendor_binary".to_owned(), to_value(v));
    }
    if let Some(m) = &report.shader_abort_message {
        extra.insert("shader_abort_message".to_owned(), json!(m));
    }
    if let Some(h) = &report.hang {
        let mut h = h.clone();
        if h.suspects.len() > budget.per_fault_list {
            trimmed.push(format!(
                "hang.suspects: kept the first {} of {}",
                budget.per_fault_list,
                h.suspects.len()
            ));
            h.suspects.truncate(budget.per_fault_list);
        }
        extra.insert("hang".to_owned(), to_value(&h));
    }
    if !report.frames.is_empty() {
        let skip = report.frames.len().saturating_sub(budget.per_fault_list);
        if skip > 0 {
            trimmed.push(format!(
                "frames: kept the last {} of {}",
                report.frames.len() - skip,
                report.frames.len()
            ));
        }
        extra.insert("frames".to_owned(), to_value(&&report.frames[skip..]));
    }
    if budget.max_string != usize::MAX {
        trimmed.push(format!(
            "strings in extra and contexts: cut to {} characters",
            budget.max_string
        ));
    }
    if !trimmed.is_empty() {
        trimmed.push(
            "the report JSON attachment (Sentry) and the report on disk have the full lists"
                .to_owned(),
        );
        extra.insert("trimmed".to_owned(), json!(trimmed));
    }
    event.extra = extra;
    event.contexts.insert(
        "gpu_fault".to_owned(),
        Context::Other(gpu_fault_context(report)),
    );
    if budget.max_string != usize::MAX {
        cut_strings(&mut event, budget.max_string);
    }
    event
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_else(|e| json!(format!("not serialisable: {e}")))
}

/// A fault with its candidate and nearby-event lists cut to `per_list`.
fn fault_json(f: &FaultEntry, per_list: usize) -> Value {
    let mut f = f.clone();
    f.candidates.truncate(per_list);
    // Nearby events: the ones closest to the crash matter most.
    if f.nearby_events.len() > per_list {
        let skip = f.nearby_events.len() - per_list;
        f.nearby_events.drain(..skip);
    }
    to_value(&f)
}

/// The `gpu_fault` context: the first fault, flat, for the dashboard's key/value view.
fn gpu_fault_context(report: &CrashReport) -> Map<String, Value> {
    let mut ctx = Map::new();
    ctx.insert("kind".into(), json!(kind_name(report.kind)));
    ctx.insert("fault_count".into(), json!(report.faults.len()));
    ctx.insert("frame".into(), json!(report.frame));
    if let Some(d) = &report.description {
        ctx.insert("description".into(), json!(d));
    }
    if let Some(drill) = &report.drill {
        ctx.insert("drill".into(), json!(drill));
    }
    match report.faults.first() {
        Some(f) => {
            let v = to_value(f);
            for key in [
                "address",
                "address_range",
                "precision",
                "access",
                "verdict",
                "summary",
            ] {
                if let Some(x) = v.get(key) {
                    ctx.insert(key.into(), x.clone());
                }
            }
            ctx.insert("candidate_count".into(), json!(f.candidates.len()));
            ctx.insert("nearby_event_count".into(), json!(f.nearby_events.len()));
            if let Some(c) = v.get("culprit").and_then(Value::as_object) {
                for (k, x) in c {
                    if !x.is_null() {
                        ctx.insert(format!("culprit_{k}"), x.clone());
                    }
                }
            }
        }
        None => {
            ctx.insert("summary".into(), json!(report.summary));
            ctx.insert(
                "note".into(),
                json!("no fault address was reported (hang, or no device-fault extension)"),
            );
        }
    }
    if let Some(h) = &report.hang {
        ctx.insert(
            "hang_oldest_pending_frame".into(),
            json!(h.oldest_pending_frame),
        );
        ctx.insert("hang_pending_frames".into(), json!(h.pending_frames));
        ctx.insert("hang_stalled_ms".into(), json!(h.stalled_ms));
        ctx.insert("hang_timeout_ms".into(), json!(h.hang_timeout_ms));
        ctx.insert(
            "hang_driver_watchdog_timeout".into(),
            json!(h.driver_watchdog_timeout),
        );
        ctx.insert("hang_suspect_count".into(), json!(h.suspects.len()));
        if let Some(s) = h.suspects.first() {
            ctx.insert("hang_suspect".into(), json!(s.label));
            ctx.insert("hang_suspect_reason".into(), json!(s.reason));
        }
    }
    if let Some(info) = report.vendor_infos.first() {
        ctx.insert("vendor_description".into(), json!(info.description));
        ctx.insert(
            "vendor_fault_code".into(),
            json!(format!("{:#x}", info.fault_code)),
        );
    }
    if let Some(m) = &report.shader_abort_message {
        ctx.insert("shader_abort_message".into(), json!(m));
    }
    ctx
}

/// Binding events around the fault ranges first, then the most recent ones, oldest first in the
/// result, plus a final `gpu.crash` crumb.
fn breadcrumbs(
    report: &CrashReport,
    crash_time: SystemTime,
    max: usize,
    trimmed: &mut Vec<String>,
) -> Vec<Breadcrumb> {
    let mut nearby: BTreeMap<u64, &BindingEventEntry> = BTreeMap::new();
    for f in &report.faults {
        for e in &f.nearby_events {
            nearby.insert(e.sequence, e);
        }
    }
    // One crumb for the crash, up to a quarter for the frame timeline, the rest for bindings.
    let frames_kept = report.frames.len().min(max / 4);
    let budget = max.saturating_sub(1 + frames_kept);
    let mut chosen: BTreeMap<u64, (&BindingEventEntry, bool)> = BTreeMap::new();
    for (seq, e) in nearby.iter().rev().take(budget) {
        chosen.insert(*seq, (e, true));
    }
    let near_total = nearby.len();
    let near_kept = chosen.len();
    for e in report.recent_events.iter().rev() {
        if chosen.len() >= budget {
            break;
        }
        chosen.entry(e.sequence).or_insert((e, false));
    }
    let recent_kept = chosen.len() - near_kept;
    let recent_total = report
        .recent_events
        .iter()
        .filter(|e| !nearby.contains_key(&e.sequence))
        .count();
    if near_kept < near_total || recent_kept < recent_total {
        trimmed.push(format!(
            "breadcrumbs: kept {near_kept} of {near_total} events near the fault and the last \
             {recent_kept} of {recent_total} other recent binding events"
        ));
    }
    let mut crumbs: Vec<Breadcrumb> = chosen
        .values()
        .map(|(e, near)| {
            let mut data = Map::new();
            data.insert("sequence".into(), json!(e.sequence));
            data.insert("frame".into(), json!(e.frame));
            data.insert("handle".into(), json!(format!("{:#x}", e.handle)));
            data.insert("size".into(), json!(e.size));
            if *near {
                data.insert("near_fault".into(), json!(true));
            }
            if let Some(ms) = e.ms_before_crash {
                data.insert("ms_before_crash".into(), json!(ms));
            }
            Breadcrumb {
                timestamp: e
                    .ms_before_crash
                    .and_then(|ms| crash_time.checked_sub(Duration::from_millis(ms)))
                    .unwrap_or(crash_time),
                ty: "default".into(),
                category: Some(BINDING_CATEGORY.into()),
                level: if *near { Level::Warning } else { Level::Info },
                message: Some(breadcrumb_message(e)),
                data,
            }
        })
        .collect();
    if frames_kept < report.frames.len() {
        trimmed.push(format!(
            "breadcrumbs: kept the last {frames_kept} of {} frames",
            report.frames.len()
        ));
    }
    let frames = &report.frames[report.frames.len() - frames_kept..];
    crumbs.extend(frames.iter().map(|f| frame_crumb(f, crash_time)));
    // Sorting is stable: pass crumbs share the crash time and stay in recording order, last.
    crumbs.extend(pass_crumbs(report, crash_time, max / 4, trimmed));
    // Stable: binding events with one timestamp stay in sequence order.
    crumbs.sort_by_key(|c| c.timestamp);
    if max > 0 {
        crumbs.push(Breadcrumb {
            timestamp: crash_time,
            ty: "error".into(),
            category: Some("gpu.crash".into()),
            level: Level::Fatal,
            message: Some(format!(
                "{} at frame {}: {}",
                exception_type(report.kind),
                report.frame,
                report.summary
            )),
            data: Map::new(),
        });
    }
    crumbs
}

/// The GPU breadcrumbs of the frames in flight, in order (`frame 61: Core3d MainPass of camera
/// "main": started, not finished`), at most `max`, keeping those nearest the in-flight stage.
fn pass_crumbs(
    report: &CrashReport,
    crash_time: SystemTime,
    max: usize,
    trimmed: &mut Vec<String>,
) -> Vec<Breadcrumb> {
    let all: Vec<(u64, &crate::report::GpuBreadcrumb)> = report
        .breadcrumbs
        .iter()
        .flat_map(|f| f.breadcrumbs.iter().map(move |b| (f.frame, b)))
        .collect();
    let skip = all.len().saturating_sub(max);
    if skip > 0 {
        trimmed.push(format!(
            "breadcrumbs: kept the last {} of {} GPU pass markers",
            all.len() - skip,
            all.len()
        ));
    }
    all[skip..]
        .iter()
        .map(|(frame, b)| {
            let mut data = Map::new();
            data.insert("frame".into(), json!(frame));
            data.insert("label".into(), json!(b.label));
            data.insert("state".into(), json!(b.state.as_str()));
            if let Some(camera) = &b.camera {
                data.insert("camera".into(), json!(camera));
            }
            Breadcrumb {
                timestamp: crash_time,
                ty: "default".into(),
                category: Some(PASS_CATEGORY.into()),
                level: match b.state {
                    BreadcrumbState::Started => Level::Error,
                    BreadcrumbState::Completed => Level::Info,
                    BreadcrumbState::NotStarted => Level::Debug,
                },
                message: Some(format!(
                    "frame {frame}: {}: {}",
                    b.describe(),
                    b.state.describe()
                )),
                data,
            }
        })
        .collect()
}

/// `frame 12 submitted 48 ms before the crash, completed after 3 ms` (or `never completed`).
fn frame_crumb(f: &FrameTiming, crash_time: SystemTime) -> Breadcrumb {
    let done = match f.completed_after_ms {
        Some(ms) => format!("completed after {ms} ms"),
        None => "never completed".to_owned(),
    };
    let mut data = Map::new();
    data.insert("frame".into(), json!(f.frame));
    data.insert(
        "submitted_ms_before_report".into(),
        json!(f.submitted_ms_before_report),
    );
    data.insert("completed_after_ms".into(), json!(f.completed_after_ms));
    Breadcrumb {
        timestamp: crash_time
            .checked_sub(Duration::from_millis(f.submitted_ms_before_report))
            .unwrap_or(crash_time),
        ty: "default".into(),
        category: Some("gpu.frame".into()),
        level: if f.completed_after_ms.is_some() {
            Level::Info
        } else {
            Level::Warning
        },
        message: Some(format!(
            "frame {} submitted {} ms before the crash, {done}",
            f.frame, f.submitted_ms_before_report
        )),
        data,
    }
}

fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

/// `s` cut to `max` characters, the cut marked with `…`.
fn truncated(s: &str, max: usize) -> String {
    if s.chars().count() > max {
        format!("{}…", truncate_chars(s, max))
    } else {
        s.to_owned()
    }
}

/// Cuts the free-form strings of `event` (extra, the `gpu_fault` and app contexts, breadcrumbs) to
/// `max` characters.
fn cut_strings(event: &mut Event<'static>, max: usize) {
    event
        .extra
        .values_mut()
        .for_each(|v| truncate_strings(v, max));
    for context in event.contexts.values_mut() {
        match context {
            Context::Other(map) => map.values_mut().for_each(|v| truncate_strings(v, max)),
            Context::App(app) => app
                .other
                .values_mut()
                .for_each(|v| truncate_strings(v, max)),
            _ => {}
        }
    }
    for crumb in &mut event.breadcrumbs.values {
        if let Some(m) = crumb.message.as_mut() {
            *m = truncated(m, max);
        }
        crumb
            .data
            .values_mut()
            .for_each(|v| truncate_strings(v, max));
    }
}

/// Cuts every string in `v` to `max` characters (marking the cut with `…`).
fn truncate_strings(v: &mut Value, max: usize) {
    match v {
        Value::String(s) if s.chars().count() > max => *s = truncated(s, max),
        Value::Array(a) => a.iter_mut().for_each(|x| truncate_strings(x, max)),
        Value::Object(o) => o.values_mut().for_each(|x| truncate_strings(x, max)),
        _ => {}
    }
}
