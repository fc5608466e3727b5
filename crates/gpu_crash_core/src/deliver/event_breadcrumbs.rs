//! The Sentry event's breadcrumbs: binding events around the fault and the most recent ones, the
//! frames in flight, and each frame's GPU breadcrumbs (which stage of which camera).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use sentry::protocol::{Breadcrumb, Level, Map};
use serde_json::json;

use crate::capture::BindingKind;
use crate::report::{
    BindingEventEntry, BreadcrumbState, CrashKind, CrashReport, FrameTiming, KindWords,
};

/// Category of the binding-event breadcrumbs.
pub const BINDING_CATEGORY: &str = "gpu.binding";
/// Category of the GPU-pass breadcrumbs.
pub const PASS_CATEGORY: &str = "gpu.pass";

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

/// Binding events around the fault ranges first, then the most recent ones, oldest first in the
/// result, plus a final `gpu.crash` crumb.
pub(crate) fn breadcrumbs(
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
            level: if report.kind == CrashKind::NonFatalFault {
                Level::Warning
            } else {
                Level::Fatal
            },
            message: Some(format!(
                "{} at frame {}: {}",
                KindWords::of(report.kind).exception,
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
