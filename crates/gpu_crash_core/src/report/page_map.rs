//! The fault address on a map of its neighbourhood: the objects around it as bars on an address
//! axis (live solid, freed dashed), the culprit outlined, its asset's bytes marked, the fault's
//! address and precision as a line and band. Inline SVG, bounded to [`MAX_ROWS`] objects.

use std::fmt::Write as _;

use super::html_text::{bytes, esc};
use super::model::CrashReport;
use super::view::{NearObject, ReportView};
use crate::resolve::{FaultEntry, GpuAsset, ObjectState};

/// Objects drawn on one map: the candidates first, then the neighbours nearest the fault.
pub(super) const MAX_ROWS: usize = 12;
/// Characters of a name on the map (the whole name is in the bar's tooltip and the verdict).
const MAX_LABEL_CHARS: usize = 60;

const WIDTH: f64 = 1000.0;
const BARS_X: f64 = 400.0;
const BARS_W: f64 = 570.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 40.0;

/// Height of an object's row: a third line names its asset.
fn row_height(row: &NearObject<'_>) -> f64 {
    if row.asset().is_some() {
        50.0
    } else {
        36.0
    }
}

/// The objects that hold or neighbour `fault` (see [`ReportView::near_fault`]), at most
/// [`MAX_ROWS`], and how many were left out.
fn rows<'a>(report: &'a CrashReport, fault: &'a FaultEntry) -> (Vec<NearObject<'a>>, usize) {
    let mut rows = ReportView::new(report).near_fault(fault);
    let total = rows.len();
    rows.truncate(MAX_ROWS);
    let left_out = total - rows.len();
    (rows, left_out)
}

/// `text` cut to `max` characters with an ellipsis.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(max - 1).collect();
        s.push('…');
        s
    }
}

/// `130 MiB · freed 3 ms, 0 frames before · x3`: the row's second line.
fn detail(row: &NearObject<'_>) -> String {
    let state = match (row.state, row.candidate) {
        (ObjectState::Live, _) => "live".to_owned(),
        (ObjectState::Freed, Some(c))
            if c.freed_ms_ago.is_some() || c.freed_frames_ago.is_some() =>
        {
            let mut ago = Vec::new();
            if let Some(ms) = c.freed_ms_ago {
                ago.push(format!("{ms} ms"));
            }
            if let Some(f) = c.freed_frames_ago {
                ago.push(format!("{f} frames"));
            }
            format!("freed {} before", ago.join(", "))
        }
        (ObjectState::Freed, _) => "freed".to_owned(),
    };
    let mut out = format!("{} · {state} · at {:#x}", bytes(row.size), row.base);
    if let Some(past) = row.candidate.and_then(|c| c.bytes_past_end) {
        let _ = write!(out, " · fault {} past its end", bytes(past));
    }
    if row.count > 1 {
        let _ = write!(out, " · x{}", row.count);
    }
    out
}

/// `mesh "models/tree.mesh", vertex 5 (of 200 B at [2816, 3016))`: the asset line of a row.
fn asset_line(a: &GpuAsset) -> String {
    let state = match a.state {
        ObjectState::Live => String::new(),
        ObjectState::Freed => " · asset freed".to_owned(),
    };
    format!(
        "{} {}, {} ({} at +{}){state}",
        a.kind.noun(),
        a.display_name(),
        a.place(),
        bytes(a.byte_range[1].saturating_sub(a.byte_range[0])),
        a.byte_range[0]
    )
}

/// The map of `fault`: an SVG, or a line saying the report knows no object near it; then what was
/// left out.
pub(super) fn map(report: &CrashReport, fault: &FaultEntry) -> String {
    let (mut rows, left_out) = rows(report, fault);
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str(
            "<p class=\"quiet\">No object the report knows of lies at or near this address.</p>",
        );
        return out;
    }
    rows.sort_by(|a, b| (a.base, a.size, &a.label).cmp(&(b.base, b.size, &b.label)));
    let lo = rows
        .iter()
        .map(|r| r.base)
        .chain([fault.address, fault.address_range[0]])
        .min()
        .unwrap_or(fault.address);
    let hi = rows
        .iter()
        .map(NearObject::end)
        .chain([
            fault.address.saturating_add(1),
            fault.address_range[1].saturating_add(1),
        ])
        .max()
        .unwrap_or(fault.address);
    // A margin of 4% each side, so a fault at an object's end is not on the frame.
    let pad = (hi - lo) / 25 + 1;
    let (lo, hi) = (lo.saturating_sub(pad), hi.saturating_add(pad));
    let span = (hi - lo).max(1) as f64;
    let x = |a: u64| BARS_X + (a.saturating_sub(lo) as f64 / span).min(1.0) * BARS_W;
    let height = TOP + rows.iter().map(row_height).sum::<f64>() + BOTTOM;

    let _ = write!(
        out,
        "<svg class=\"map\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"objects around the fault address\">"
    );
    // The fault's precision band and line, under the bars.
    let (band_lo, band_hi) = (
        x(fault.address_range[0]),
        x(fault.address_range[1].saturating_add(1)),
    );
    let _ = write!(
        out,
        "<rect class=\"band\" x=\"{band_lo:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\"/>",
        (band_hi - band_lo).max(2.0),
        height - TOP - BOTTOM
    );
    let mut y = TOP;
    for row in &rows {
        let h = row_height(row);
        let (x0, x1) = (x(row.base), x(row.end()));
        let state = match row.state {
            ObjectState::Live => "live",
            ObjectState::Freed => "freed",
        };
        let culprit = if row.culprit { " culprit" } else { "" };
        let _ = write!(
            out,
            "<g class=\"row {state}{culprit}\"><title>{}</title>",
            esc(&row.label)
        );
        let name = if row.culprit {
            format!("{} (culprit)", cut(&row.label, MAX_LABEL_CHARS))
        } else {
            cut(&row.label, MAX_LABEL_CHARS)
        };
        let _ = write!(
            out,
            "<text class=\"name\" x=\"8\" y=\"{:.1}\">{}</text>\
             <text class=\"detail\" x=\"8\" y=\"{:.1}\">{}</text>",
            y + 15.0,
            esc(&name),
            y + 29.0,
            esc(&detail(row))
        );
        if let Some(a) = row.asset() {
            let _ = write!(
                out,
                "<text class=\"asset\" x=\"8\" y=\"{:.1}\">{}</text>",
                y + 43.0,
                esc(&cut(&asset_line(a), 80))
            );
        }
        let _ = write!(
            out,
            "<rect class=\"bar\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"18\"/>",
            y + 8.0,
            (x1 - x0).max(3.0)
        );
        if let Some(a) = row.asset() {
            let (a0, a1) = (
                x(row.base.saturating_add(a.byte_range[0])),
                x(row.base.saturating_add(a.byte_range[1])),
            );
            let _ = write!(
                out,
                "<rect class=\"asset-bytes\" x=\"{a0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"12\"/>",
                y + 11.0,
                (a1 - a0).max(2.0)
            );
        }
        out.push_str("</g>");
        y += h;
    }
    // The fault address over the bars, labelled above them.
    let fx = x(fault.address);
    let anchor = if fx > WIDTH - 160.0 { "end" } else { "middle" };
    let _ = write!(
        out,
        "<line class=\"fault\" x1=\"{fx:.1}\" y1=\"{:.1}\" x2=\"{fx:.1}\" y2=\"{:.1}\"/>\
         <text class=\"fault-label\" x=\"{fx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">fault {:#x} ({})</text>",
        TOP - 14.0,
        height - BOTTOM + 4.0,
        TOP - 18.0,
        fault.address,
        format!("{:?}", fault.access).to_ascii_lowercase()
    );
    // The address axis.
    let axis_y = height - BOTTOM + 12.0;
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{BARS_X}\" y1=\"{axis_y:.1}\" x2=\"{:.1}\" y2=\"{axis_y:.1}\"/>\
         <text class=\"tick\" x=\"{BARS_X}\" y=\"{:.1}\">{lo:#x}</text>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{hi:#x}</text>\
         <text class=\"tick\" x=\"8\" y=\"{:.1}\">GPU address ({} across)</text></svg>",
        BARS_X + BARS_W,
        axis_y + 16.0,
        BARS_X + BARS_W,
        axis_y + 16.0,
        axis_y + 16.0,
        bytes(hi - lo)
    );
    if left_out > 0 {
        let _ = write!(
            out,
            "<p class=\"quiet\">{left_out} more object(s) near this address not drawn (the report \
             lists them).</p>"
        );
    }
    out
}
