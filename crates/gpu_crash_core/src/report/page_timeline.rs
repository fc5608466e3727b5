//! The frames in flight as a timeline: per frame, one lane per camera with its stages in recording
//! order (completed / started / not started), the stage the GPU stopped in highlighted; then when
//! each recent frame was submitted and whether it completed. Bounded: [`MAX_FRAMES`] frames,
//! [`MAX_STAGES`] stages a frame, [`MAX_TIMINGS`] frame timings.

use std::fmt::Write as _;

use super::html_text::esc;
use super::model::{CrashKind, CrashReport, FrameTiming};
use crate::progress::{BreadcrumbState, FrameBreadcrumbs};

/// Frames with breadcrumbs drawn (the oldest first: the one the GPU stopped in).
pub(super) const MAX_FRAMES: usize = 4;
/// Stages drawn per frame.
pub(super) const MAX_STAGES: usize = 32;
/// Frame timings drawn (the latest).
pub(super) const MAX_TIMINGS: usize = 24;

/// The breadcrumb timeline and the frame timings, or lines saying there are none.
pub(super) fn timeline(report: &CrashReport) -> String {
    let mut out = String::new();
    if report.breadcrumbs.is_empty() {
        out.push_str(
            "<p class=\"quiet\">No GPU breadcrumbs: no frame was in flight, or the driver has no \
             buffer markers.</p>",
        );
    }
    for frame in report.breadcrumbs.iter().take(MAX_FRAMES) {
        frame_lanes(report, frame, &mut out);
    }
    if !report.breadcrumbs.is_empty() {
        out.push_str(
            "<p class=\"legend\"><span class=\"key completed\"></span>completed \
             <span class=\"key started\"></span>started, not finished \
             <span class=\"key not-started\"></span>not started \
             <span class=\"key here\"></span>where the GPU stopped</p>",
        );
    }
    if report.breadcrumbs.len() > MAX_FRAMES {
        let _ = write!(
            out,
            "<p class=\"quiet\">{} later frame(s) in flight not drawn.</p>",
            report.breadcrumbs.len() - MAX_FRAMES
        );
    }
    timings(&report.frames, &mut out);
    out
}

/// One frame: a grid with a lane per camera (the frame-wide stages first), a column per stage.
fn frame_lanes(report: &CrashReport, frame: &FrameBreadcrumbs, out: &mut String) {
    let here = frame.in_flight();
    let shown = &frame.breadcrumbs[..frame.breadcrumbs.len().min(MAX_STAGES)];
    let mut lanes: Vec<Option<&str>> = Vec::new();
    for b in shown {
        if !lanes.contains(&b.camera.as_deref()) {
            lanes.push(b.camera.as_deref());
        }
    }
    lanes.sort_by_key(Option::is_some);
    let timing = report
        .frames
        .iter()
        .find(|t| t.frame == frame.frame)
        .map(|t| {
            format!(
                " · submitted {} ms before the report, {}",
                t.submitted_ms_before_report,
                completion(t)
            )
        })
        .unwrap_or_default();
    let _ = write!(
        out,
        "<div class=\"frame\"><h3>Frame {}{}</h3><div class=\"lanes\" style=\"grid-template-columns: 10em repeat({}, minmax(6.5em, 1fr))\">",
        frame.frame,
        esc(&timing),
        shown.len().max(1)
    );
    for (row, lane) in lanes.iter().enumerate() {
        let name = match lane {
            Some(camera) => format!("camera {camera:?}"),
            None => "whole frame".to_owned(),
        };
        let _ = write!(
            out,
            "<div class=\"lane-name\" style=\"grid-row: {}\">{}</div>",
            row + 1,
            esc(&name)
        );
        for (col, b) in shown.iter().enumerate() {
            if b.camera.as_deref() != *lane {
                continue;
            }
            let (class, word) = match b.state {
                BreadcrumbState::Completed => ("completed", "completed"),
                BreadcrumbState::Started => ("started", "started"),
                BreadcrumbState::NotStarted => ("not-started", "not started"),
            };
            let stopped = here.is_some_and(|h| std::ptr::eq(h, b));
            let (here_class, here_word) = match (stopped, report.kind) {
                (false, _) => ("", String::new()),
                (true, CrashKind::GpuHang) => (" here", "<b>▲ GPU hung here</b>".to_owned()),
                (true, CrashKind::DeviceLost | CrashKind::NonFatalFault) => {
                    (" here", "<b>▲ GPU was here</b>".to_owned())
                }
            };
            let _ = write!(
                out,
                "<div class=\"stage {class}{here_class}\" style=\"grid-row: {}; grid-column: {}\" \
                 title=\"{}\">{}<small>{word}</small>{here_word}</div>",
                row + 1,
                col + 2,
                esc(&b.describe()),
                esc(&b.label)
            );
        }
    }
    out.push_str("</div>");
    let not_drawn = frame.breadcrumbs.len() - shown.len();
    if not_drawn > 0 || frame.dropped > 0 {
        let _ = write!(
            out,
            "<p class=\"quiet\">{not_drawn} more stage(s) not drawn; {} not recorded (the frame's \
             marker budget ran out).</p>",
            frame.dropped
        );
    }
    out.push_str("</div>");
}

/// `completed after 12 ms` or `never completed`.
fn completion(t: &FrameTiming) -> String {
    t.completed_after_ms
        .map(|ms| format!("completed after {ms} ms"))
        .unwrap_or_else(|| "never completed".to_owned())
}

/// When each of the last frames was submitted (a bar from its submit to its completion, or to the
/// report when it never completed), on a shared time axis that ends at the report.
fn timings(frames: &[FrameTiming], out: &mut String) {
    if frames.is_empty() {
        return;
    }
    let shown = &frames[frames.len().saturating_sub(MAX_TIMINGS)..];
    let oldest = shown
        .iter()
        .map(|f| f.submitted_ms_before_report)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (x0, w, row_h) = (110.0, 860.0, 12.0);
    let x = |ms_before: u64| x0 + (1.0 - (ms_before as f64 / oldest).min(1.0)) * w;
    let height = shown.len() as f64 * row_h + 36.0;
    let _ = write!(
        out,
        "<h3>Frame submits and completions</h3><svg class=\"timings\" \
         width=\"1000\" height=\"{height}\" viewBox=\"0 0 1000 {height}\" role=\"img\" \
         aria-label=\"frame submits and completions\">"
    );
    for (i, f) in shown.iter().enumerate() {
        let y = i as f64 * row_h + 4.0;
        let start = x(f.submitted_ms_before_report);
        let (end, class) = match f.completed_after_ms {
            Some(ms) => (x(f.submitted_ms_before_report.saturating_sub(ms)), "done"),
            None => (x(0), "pending"),
        };
        let _ = write!(
            out,
            "<text class=\"tick\" x=\"8\" y=\"{:.1}\">frame {}</text>\
             <rect class=\"{class}\" x=\"{start:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\">\
             <title>frame {}: {}</title></rect>",
            y + 9.0,
            f.frame,
            (end - start).max(2.0),
            row_h - 3.0,
            f.frame,
            completion(f)
        );
    }
    let axis = shown.len() as f64 * row_h + 12.0;
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{x0}\" y1=\"{axis:.1}\" x2=\"{:.1}\" y2=\"{axis:.1}\"/>\
         <text class=\"tick\" x=\"{x0}\" y=\"{:.1}\">{} ms before the report</text>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">report</text></svg>",
        x0 + w,
        axis + 16.0,
        oldest as u64,
        x0 + w,
        axis + 16.0
    );
    let mut legend = String::from(
        "<p class=\"legend\"><span class=\"key done\"></span>submitted to completed \
         <span class=\"key pending\"></span>never completed",
    );
    if frames.len() > shown.len() {
        let _ = write!(
            legend,
            " · {} older frame(s) not drawn",
            frames.len() - shown.len()
        );
    }
    legend.push_str("</p>");
    out.push_str(&legend);
}
