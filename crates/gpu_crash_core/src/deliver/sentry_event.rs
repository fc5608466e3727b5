//! The Sentry event built from a [`CrashReport`]: what a developer sees on the dashboard.
//!
//! - exception `VK_ERROR_DEVICE_LOST` or `GPU_HANG` with the report's one-line summary as value;
//!   a fault the driver recovered from is `GPU_FAULT_RECOVERED` at level `warning`, with the count
//!   of masked faults it stands for;
//! - a fingerprint from kind, verdict and culprit label only (never addresses or handles), so one bug
//!   seen by many players is one issue;
//! - a report with a `VK_KHR_shader_abort` message is its own issue: exception `SHADER_ABORT` whose
//!   value (the title) is the shader's message, fingerprint from the message and the GPU stage;
//! - a real `gpu` context (with video memory at the fault: each heap's usage of its budget, failed
//!   allocations), a `gpu_fault` context with the first fault, tags, breadcrumbs from the binding
//!   events, and the full fault list in `extra`;
//! - always under [`DeliverySettings::max_event_bytes`]: lists are trimmed, with a note in
//!   `extra.trimmed`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentry::protocol::{
    AppContext, ClientSdkInfo, Context, Event, Exception, GpuContext, Level, Map, Mechanism,
    OsContext, Values,
};
use sentry::types::Uuid;
use serde_json::{json, Value};

use super::event_breadcrumbs::{breadcrumbs, PASS_CATEGORY};
use super::event_size::{cut_strings, truncate_chars, truncated, Budget};
use super::privacy::redacted_report;
use super::settings::DeliverySettings;
use crate::report::{
    CrashKind, CrashReport, Culprit, FaultEntry, GpuAsset, KindWords, MemoryHeap, VideoMemory,
    NO_BUDGET,
};

/// Longest tag value Sentry accepts.
const MAX_TAG_LEN: usize = 200;

/// Exception type of an event titled with a shader's own abort message (`VK_KHR_shader_abort`);
/// every other event's is its crash kind's ([`KindWords::exception`]).
pub const SHADER_ABORT_TYPE: &str = "SHADER_ABORT";

/// Longest part of a shader abort message kept in the fingerprint (the whole one is in the event).
const MAX_ABORT_FINGERPRINT: usize = 200;

/// The shader's own abort message (`VK_KHR_shader_abort`) that titles the event and names its
/// issue: trimmed, `None` when empty. Not for `non_fatal_fault` (the shader did not abort the device).
pub fn shader_abort(report: &CrashReport) -> Option<&str> {
    if report.kind == CrashKind::NonFatalFault {
        return None;
    }
    report
        .shader_abort_message
        .as_deref()
        .map(|m| m.trim_matches(|c: char| c.is_whitespace() || c == '\0'))
        .filter(|m| !m.is_empty())
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
///
/// A shader abort (`VK_KHR_shader_abort`) is its own issue, whatever the fault it lost the device
/// with: `["gpu-crash", "shader_abort", <message>]` plus the GPU stage when known (the shader's
/// assert text names the bug better than the address does).
pub fn fingerprint(report: &CrashReport) -> Vec<String> {
    if let Some(message) = shader_abort(report) {
        let mut parts = vec![
            "gpu-crash".to_owned(),
            "shader_abort".to_owned(),
            truncate_chars(message, MAX_ABORT_FINGERPRINT),
        ];
        parts.extend(report.gpu_stage.clone());
        return parts;
    }
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
        KindWords::of(report.kind).name.to_owned(),
        verdict.to_owned(),
        culprit,
    ];
    if let Some(stage) = &report.gpu_stage {
        parts.push(stage.clone());
    }
    parts
}

/// The fingerprint `report`'s event is sent with: a loss that follows its hang report joins the
/// hang's issue, and a hang at a run's start that continues an earlier run's hang joins that one's
/// issue; any other report its own [`fingerprint`].
pub fn issue_fingerprint(report: &CrashReport) -> Vec<String> {
    if let Some(follow_up) = &report.follows_hang {
        return follow_up.fingerprint.clone();
    }
    if let Some(earlier) = &report.after_earlier_hang {
        return earlier.fingerprint.clone();
    }
    fingerprint(report)
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
    // A report's time is hostile input: one past what the platform's clock holds (Windows' is
    // narrower than u64 milliseconds) is read as now, never a panic.
    let crash_time = UNIX_EPOCH
        .checked_add(Duration::from_millis(report.timestamp_ms))
        .unwrap_or_else(SystemTime::now);

    let mut event = Event::new();
    event.event_id = Uuid::parse_str(report.event_id()).unwrap_or_else(|_| {
        trimmed.push(format!(
            "report id {:?} is not a UUID; the event got a new id",
            report.event_id()
        ));
        Uuid::new_v4()
    });
    event.level = match report.kind {
        // The game went on: an early warning, not a crash.
        CrashKind::NonFatalFault => Level::Warning,
        CrashKind::DeviceLost | CrashKind::GpuHang => Level::Fatal,
    };
    event.platform = Cow::Borrowed("native");
    event.logger = Some(env!("CARGO_PKG_NAME").to_owned());
    event.timestamp = crash_time;
    let fingerprint = issue_fingerprint(report);
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
    // A shader's abort message is the title of its own issue; the loss stays in `extra`.
    let abort = shader_abort(report).filter(|_| report.follows_hang.is_none());
    let (ty, value) = match abort {
        Some(message) => (SHADER_ABORT_TYPE, message.to_owned()),
        None => (KindWords::of(report.kind).exception, report.summary.clone()),
    };
    event.exception = Values {
        values: vec![Exception {
            ty: ty.to_owned(),
            value: Some(value),
            mechanism: Some(Mechanism {
                ty: "gpu_crash_reporter".to_owned(),
                description: report.description.clone(),
                handled: Some(report.kind == CrashKind::NonFatalFault),
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
            other: report
                .video_memory
                .as_ref()
                .map(video_memory_fields)
                .unwrap_or_default(),
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
    tag("gpu.fault_kind", KindWords::of(report.kind).name.to_owned());
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
    // The ranked list's first: a search for every hang queued in one shader file, across stages.
    if let Some(first) = report.running.as_ref().and_then(|r| r.candidates.first()) {
        if let Some(label) = &first.label {
            tag("gpu.pipeline", label.clone());
        }
        if let Some(shader) = first.main_shader() {
            tag("gpu.shader", shader.to_owned());
        }
        if let Some(material) = &first.material {
            tag("gpu.material", material.clone());
        }
    }
    // Exact mode (its layer marked every draw): a search for the runs that had it.
    if report.gpu.exact_layer {
        tag("gpu.exact_mode", "on".to_owned());
    }
    if let Some(earlier) = &report.after_earlier_hang {
        tag("gpu.after_earlier_hang", earlier.report_id.clone());
    }
    tag(
        "gpu.device_generation",
        report.device_generation.to_string(),
    );
    tag("gpu.crashes_this_run", report.crashes_this_run.to_string());
    if let Some(drill) = &report.drill {
        tag("drill", drill.clone());
    }
    if let Some(message) = shader_abort(report) {
        tag("gpu.shader_abort", message.to_owned());
    }
    if let Some(non_fatal) = &report.non_fatal {
        tag("gpu.non_fatal_count", non_fatal.count.to_string());
    }
    // Only where the driver tells usage and budget: "false" would be a guess otherwise.
    if let Some(memory) = report.video_memory.as_ref().filter(|m| m.budget_known) {
        tag("gpu.memory_near_budget", memory.near_budget.to_string());
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
    if abort.is_some() {
        extra.insert("crash_summary".to_owned(), json!(report.summary));
    }
    if let Some(non_fatal) = &report.non_fatal {
        extra.insert("non_fatal".to_owned(), to_value(non_fatal));
        extra.insert("non_fatal_count".to_owned(), json!(non_fatal.count));
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

/// The `gpu` context's video memory fields: one line per heap (size, kind, usage of budget), whether
/// one was near its budget (only where the driver tells budgets), and the failed allocations or that
/// the driver does not tell of them.
fn video_memory_fields(memory: &VideoMemory) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert(
        "memory_heaps".to_owned(),
        json!(memory
            .heaps
            .iter()
            .map(MemoryHeap::describe)
            .collect::<Vec<_>>()),
    );
    if memory.budget_known {
        fields.insert("memory_near_budget".to_owned(), json!(memory.near_budget));
    } else {
        fields.insert("memory_budget".to_owned(), json!(NO_BUDGET));
    }
    fields.insert(
        "memory_allocation_failures".to_owned(),
        json!(memory.failures_line()),
    );
    fields
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
    ctx.insert("kind".into(), json!(KindWords::of(report.kind).name));
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
    if let Some(non_fatal) = &report.non_fatal {
        ctx.insert("non_fatal_count".into(), json!(non_fatal.count));
    }
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{hang_report_for_tests, AllocationFailures, NO_MEMORY_REPORT};

    fn gpu_other(event: &Event<'static>) -> Map<String, Value> {
        match event.contexts.get("gpu") {
            Some(Context::Gpu(gpu)) => gpu.other.clone(),
            other => panic!("no gpu context: {other:?}"),
        }
    }

    fn heap(usage: u64, budget: u64) -> MemoryHeap {
        MemoryHeap {
            index: 0,
            size: 8 << 30,
            device_local: true,
            usage: Some(usage),
            budget: Some(budget),
            near_budget: crate::report::near_budget(usage, budget),
        }
    }

    #[test]
    fn the_gpu_context_carries_video_memory_and_the_tag_says_near_the_budget() {
        let mut report = hang_report_for_tests();
        report.video_memory = Some(VideoMemory {
            heaps: vec![heap(7_900 << 20, 8 << 30)],
            budget_known: true,
            allocation_failures: Some(AllocationFailures {
                count: 2,
                last: None,
            }),
            near_budget: true,
            notes: Vec::new(),
        });
        let event = sentry_event(&report, &DeliverySettings::default());
        let other = gpu_other(&event);
        assert_eq!(
            other["memory_heaps"],
            json!(["heap 0 (device-local, 8.0 GiB): 7.7 GiB used of a 8.0 GiB budget (96%)"])
        );
        assert_eq!(other["memory_near_budget"], json!(true));
        assert_eq!(
            other["memory_allocation_failures"],
            json!("2 allocation(s) failed since the device was made")
        );
        assert_eq!(event.tags["gpu.memory_near_budget"], "true");
        // Tags and context only: the fingerprint does not move with memory.
        let mut calm = report.clone();
        calm.video_memory = None;
        assert_eq!(issue_fingerprint(&calm), issue_fingerprint(&report));
    }

    #[test]
    fn where_the_driver_does_not_tell_the_event_says_so_and_has_no_tag() {
        let mut report = hang_report_for_tests();
        report.video_memory = Some(VideoMemory {
            heaps: vec![MemoryHeap {
                usage: None,
                budget: None,
                ..heap(0, 0)
            }],
            budget_known: false,
            allocation_failures: None,
            near_budget: false,
            notes: vec![NO_BUDGET.to_owned(), NO_MEMORY_REPORT.to_owned()],
        });
        let event = sentry_event(&report, &DeliverySettings::default());
        let other = gpu_other(&event);
        assert_eq!(other["memory_budget"], json!(NO_BUDGET));
        assert_eq!(other["memory_allocation_failures"], json!(NO_MEMORY_REPORT));
        assert!(!other.contains_key("memory_near_budget"));
        assert!(!event.tags.contains_key("gpu.memory_near_budget"));
        // A report without the section (schema 6) has none of it.
        report.video_memory = None;
        let event = sentry_event(&report, &DeliverySettings::default());
        assert!(gpu_other(&event).is_empty());
    }
}
