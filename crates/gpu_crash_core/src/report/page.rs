//! The report as one self-contained HTML page, for the people who would rather look than read: the
//! verdict as its title, the device, the fault address on a map of its neighbourhood, the frames in
//! flight with each camera's stages as a timeline, and the verdict's reasons.
//!
//! Inline CSS and inline SVG only: no script, no external URL (a Content-Security-Policy that
//! allows nothing else says so to the browser too), so the page opens offline, from an email or a
//! Sentry attachment, and fetches nothing. Every report string is escaped (reports are hostile
//! input), and every list is bounded, with a line saying what was left out.

use std::fmt::Write as _;

use super::html_text::{bytes, esc};
use super::model::{CrashKind, CrashReport};
use super::page_map::map;
use super::page_timeline::timeline;
use super::video_memory::{VideoMemory, NO_MEMORY_REPORT};
use super::view::ReportView;
use crate::resolve::{Culprit, FaultEntry, ObjectState};

/// Faults drawn (each with its map).
const MAX_FAULTS: usize = 4;
/// Hang suspects listed.
const MAX_SUSPECTS: usize = 8;
/// Notes listed.
const MAX_NOTES: usize = 20;
/// Memory heaps listed (Vulkan has at most 16).
const MAX_HEAPS: usize = 16;

/// The page's style: print colours kept (a PDF of the page is the page), one column, no web fonts.
const STYLE: &str = r#"
*{box-sizing:border-box}
html{-webkit-print-color-adjust:exact;print-color-adjust:exact}
body{margin:0;padding:24px 32px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2937;background:#f8fafc;max-width:1080px}
header{padding:18px 22px;border-radius:10px;background:#1e293b;color:#f8fafc}
header.hang{background:#7c2d12}
.kicker{font-size:12px;letter-spacing:.04em;text-transform:uppercase;opacity:.8}
h1{margin:6px 0 8px;font-size:26px;line-height:1.2}
.summary{margin:0;font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12.5px;opacity:.9;word-break:break-word}
section{margin-top:22px;padding:14px 18px;background:#fff;border:1px solid #e2e8f0;border-radius:10px}
h2{margin:0 0 10px;font-size:17px}
h3{margin:14px 0 6px;font-size:14px}
table{border-collapse:collapse}
td,th{padding:3px 14px 3px 0;text-align:left;vertical-align:top}
th{font-weight:600;color:#475569;white-space:nowrap}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12.5px;word-break:break-word}
.quiet{color:#64748b;font-size:12.5px}
svg text{font-family:system-ui,"DejaVu Sans",sans-serif;fill:#1f2937}
svg .name{font-size:13px;font-weight:600}
svg .detail,svg .asset{font-size:11px;fill:#475569}
svg .asset{fill:#92400e}
svg .tick{font-size:10.5px;fill:#64748b}
svg .axis{stroke:#94a3b8;stroke-width:1}
svg .band{fill:#e11d48;opacity:.16}
svg .fault{stroke:#e11d48;stroke-width:2.5}
svg .fault-label{font-size:12px;font-weight:700;fill:#e11d48}
svg .live .bar{fill:#2563eb}
svg .freed .bar{fill:#cbd5e1;stroke:#64748b;stroke-width:1;stroke-dasharray:4 3}
svg .culprit .bar{stroke:#0f172a;stroke-width:3;stroke-dasharray:none}
svg .asset-bytes{fill:#f59e0b}
svg .done{fill:#16a34a}
svg .pending{fill:#dc2626}
.frame{margin-bottom:10px}
.lanes{display:grid;gap:4px;align-items:stretch}
.lane-name{grid-column:1;font-size:12px;font-weight:600;color:#475569;align-self:center}
.stage{padding:4px 6px;border-radius:5px;font-size:12px;line-height:1.25;border:1px solid transparent;word-break:break-word}
.stage small{display:block;font-size:10.5px;opacity:.85}
.stage b{display:block;font-size:11px}
.stage.completed{background:#16a34a;color:#fff}
.stage.started{background:#fbbf24;color:#1f2937}
.stage.not-started{background:#fff;color:#64748b;border:1px dashed #94a3b8}
.stage.here{background:#ff4d00;color:#fff;border:3px solid #7f1d1d;box-shadow:0 0 0 3px #fed7aa}
.legend{font-size:12px;color:#475569}
.key{display:inline-block;width:12px;height:12px;border-radius:3px;vertical-align:-2px;margin:0 4px 0 10px}
.key.completed,.key.done{background:#16a34a}.key.started{background:#fbbf24}
.key.not-started{background:#fff;border:1px dashed #94a3b8}.key.here{background:#ff4d00}
.key.pending{background:#dc2626}.key.live{background:#2563eb}
.key.freed{background:#cbd5e1;border:1px dashed #64748b}.key.fault{background:#e11d48}
.key.asset{background:#f59e0b}
.verdict-tag{display:inline-block;padding:1px 8px;border-radius:999px;background:#9f1239;color:#fff;font-size:12px;font-weight:700}
li{margin:3px 0}
"#;

/// The report as one self-contained HTML page (see the module docs): what `gpu-crash show --html`
/// writes and the Sentry event carries as `gpu-crash-report.html`. Deterministic for a given
/// report, and bounded in size whatever the report holds.
pub fn html_page(report: &CrashReport) -> String {
    let title = ReportView::new(report).title();
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>GPU crash: {}</title><style>{STYLE}</style></head><body>",
        esc(&title)
    );
    header(report, &title, &mut out);
    device(report, &mut out);
    // A hang has no fault address: its timeline is its picture.
    if report.kind == CrashKind::GpuHang && report.faults.is_empty() {
        frames(report, &mut out);
    } else {
        faults(report, &mut out);
        frames(report, &mut out);
    }
    verdict(report, &mut out);
    out.push_str("</body></html>\n");
    out
}

fn header(r: &CrashReport, title: &str, out: &mut String) {
    let kind = ReportView::new(r).kind().short;
    let app = &r.application;
    let game = if app.name.is_empty() {
        String::new()
    } else {
        format!(" · {} {}", app.name, app.version)
    };
    let drill = r
        .drill
        .as_ref()
        .map(|d| format!(" · drill {d}"))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<header class=\"{}\"><div class=\"kicker\">GPU crash report · {} · {} · frame {}{}{}</div>\
         <h1>{}</h1><p class=\"summary\">{}</p></header>",
        if r.kind == CrashKind::GpuHang { "hang" } else { "lost" },
        kind,
        esc(&r.time),
        r.frame,
        esc(&game),
        esc(&drill),
        esc(title),
        esc(&r.summary)
    );
}

fn device(r: &CrashReport, out: &mut String) {
    let g = &r.gpu;
    let on = |b: bool| if b { "yes" } else { "no" };
    let _ = write!(
        out,
        "<section class=\"device\"><h2>Device</h2><table>\
         <tr><th>GPU</th><td>{} ({}, {} <span class=\"mono\">{:#06x}:{:#06x}</span>, {} MiB)</td></tr>\
         <tr><th>Driver</th><td>{} {} (version {})</td></tr>\
         <tr><th>API</th><td>Vulkan {}</td></tr>\
         <tr><th>Fault capture</th><td>address binding report {}, device fault EXT {} / KHR {}, \
         buffer markers {}, shader abort {}</td></tr>\
         <tr><th>Device</th><td>generation {}, crash {} of this run</td></tr></table>",
        esc(&g.gpu_name),
        esc(&g.device_type),
        esc(&g.vendor_name),
        g.vendor_id,
        g.device_id,
        g.memory_size_mb,
        esc(&g.driver_name),
        esc(&g.driver_info),
        esc(&g.driver_version),
        esc(&g.api_version),
        on(g.address_binding_report),
        on(g.device_fault_ext),
        on(g.device_fault_khr),
        on(g.buffer_marker),
        on(g.shader_abort_khr),
        r.device_generation,
        r.crashes_this_run
    );
    if let Some(memory) = &r.video_memory {
        video_memory(memory, out);
    }
    out.push_str("</section>");
}

/// Each heap's usage of its budget at the fault (a heap past 95% is tagged), the failed
/// allocations, and what the driver does not tell.
fn video_memory(memory: &VideoMemory, out: &mut String) {
    out.push_str("<h3>Video memory at the fault</h3><table>");
    for heap in memory.heaps.iter().take(MAX_HEAPS) {
        let _ = write!(
            out,
            "<tr><th>Heap {}</th><td>{}{}</td></tr>",
            heap.index,
            esc(&heap.describe()),
            if heap.near_budget {
                " <span class=\"verdict-tag\">near the budget</span>"
            } else {
                ""
            }
        );
    }
    let _ = write!(
        out,
        "<tr><th>Failed allocations</th><td>{}</td></tr></table>",
        esc(&memory.failures_line())
    );
    for note in memory
        .notes
        .iter()
        .filter(|n| n.as_str() != NO_MEMORY_REPORT)
    {
        let _ = write!(out, "<p class=\"quiet\">{}</p>", esc(note));
    }
}

fn faults(r: &CrashReport, out: &mut String) {
    out.push_str("<section class=\"faults\"><h2>The fault address and its neighbourhood</h2>");
    if r.faults.is_empty() {
        out.push_str("<p class=\"quiet\">The driver reported no fault address.</p>");
    }
    for (i, f) in r.faults.iter().take(MAX_FAULTS).enumerate() {
        let _ = write!(
            out,
            "<h3>Fault {} of {}: <span class=\"verdict-tag\">{}</span> {} at <span class=\"mono\">{:#x}</span> \
             (precision {})</h3>",
            i + 1,
            r.faults.len(),
            f.verdict.as_str(),
            format!("{:?}", f.access).to_ascii_lowercase(),
            f.address,
            bytes(f.precision)
        );
        out.push_str(&map(r, f));
    }
    if r.faults.len() > MAX_FAULTS {
        let _ = write!(
            out,
            "<p class=\"quiet\">{} more fault(s) not drawn (the report lists them).</p>",
            r.faults.len() - MAX_FAULTS
        );
    }
    if !r.faults.is_empty() {
        out.push_str(
            "<p class=\"legend\"><span class=\"key live\"></span>live object \
             <span class=\"key freed\"></span>freed object <span class=\"key fault\"></span>fault \
             address and its precision <span class=\"key asset\"></span>the asset's bytes; the \
             culprit is outlined</p>",
        );
    }
    out.push_str("</section>");
}

fn frames(r: &CrashReport, out: &mut String) {
    out.push_str("<section class=\"frames\"><h2>Frames in flight</h2>");
    out.push_str(&timeline(r));
    out.push_str("</section>");
}

/// `buffer "particles" (freed 35 ms, 2 frames before)`.
fn culprit_line(c: &Culprit) -> String {
    let state = match c.state {
        ObjectState::Live => "live".to_owned(),
        ObjectState::Freed => match (c.freed_ms_ago, c.freed_frames_ago) {
            (Some(ms), Some(f)) => format!("freed {ms} ms, {f} frame(s) before"),
            (Some(ms), None) => format!("freed {ms} ms before"),
            (None, Some(f)) => format!("freed {f} frame(s) before"),
            (None, None) => "freed".to_owned(),
        },
    };
    format!(
        "{} ({state}), {} at {:#x}, {}",
        c.label,
        c.object_type,
        c.base,
        bytes(c.size)
    )
}

fn fault_verdict(f: &FaultEntry, out: &mut String) {
    let _ = write!(
        out,
        "<li><span class=\"verdict-tag\">{}</span> {}<ul>",
        f.verdict.as_str(),
        esc(&f.summary)
    );
    match &f.culprit {
        Some(c) => {
            let _ = write!(
                out,
                "<li>Culprit: {}<br><span class=\"quiet\">{}</span></li>",
                esc(&culprit_line(c)),
                esc(&c.reason)
            );
            if let Some(a) = &c.asset {
                let users: Vec<String> = a
                    .entities
                    .iter()
                    .take(8)
                    .map(|e| e.name.clone().unwrap_or_else(|| e.entity.clone()))
                    .collect();
                let users = if users.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", used by {} of {} entities",
                        users.join(", "),
                        a.entity_count
                    )
                };
                let _ = write!(
                    out,
                    "<li>Asset: {} {}, {} in {}{}</li>",
                    a.kind.noun(),
                    esc(&a.display_name()),
                    esc(&a.place()),
                    esc(&a.container),
                    esc(&users)
                );
            }
        }
        None => out.push_str("<li>No object the reporter knows of holds this address.</li>"),
    }
    out.push_str("</ul></li>");
}

fn verdict(r: &CrashReport, out: &mut String) {
    out.push_str("<section class=\"verdict\"><h2>Verdict</h2><ul>");
    for f in r.faults.iter().take(MAX_FAULTS) {
        fault_verdict(f, out);
    }
    if let Some(h) = &r.hang {
        let _ = write!(
            out,
            "<li><span class=\"verdict-tag\">gpu_hang</span> frame {} and {} frame(s) in all had not \
             completed after {} ms (timeout {} ms){}<ul>",
            h.oldest_pending_frame,
            h.pending_frames,
            h.stalled_ms,
            h.hang_timeout_ms,
            if h.driver_watchdog_timeout {
                "; the driver's watchdog timed out too"
            } else {
                ""
            }
        );
        if h.suspects.is_empty() {
            out.push_str("<li>No object was freed while the work was pending.</li>");
        } else {
            out.push_str(
                "<li class=\"quiet\">A hang has no fault address; the suspects are the objects \
                 freed while its work was pending.</li>",
            );
        }
        for s in h.suspects.iter().take(MAX_SUSPECTS) {
            let _ = write!(out, "<li>Suspect: {}</li>", esc(&culprit_line(s)));
        }
        if h.suspects.len() > MAX_SUSPECTS {
            let _ = write!(
                out,
                "<li class=\"quiet\">{} more suspect(s) in the report</li>",
                h.suspects.len() - MAX_SUSPECTS
            );
        }
        out.push_str("</ul></li>");
    }
    if let Some(e) = &r.after_earlier_hang {
        let _ = write!(
            out,
            "<li><span class=\"verdict-tag\">after_earlier_hang</span> {:.0} s after the GPU hang \
             report <span class=\"mono\">{}</span> of process {} on this GPU: most likely the GPU \
             was still busy with that run's work. Sent under that report's issue.</li>",
            e.ms_before as f64 / 1000.0,
            esc(&e.report_id),
            e.process_id
        );
    }
    if let Some(stage) = &r.gpu_stage {
        let _ = write!(out, "<li>The GPU was in {}.</li>", esc(stage));
    }
    if let Some(running) = &r.running {
        running_pipelines(running, out);
    }
    if let Some(d) = &r.description {
        let _ = write!(out, "<li>Driver's description: {}</li>", esc(d));
    }
    if let Some(m) = &r.shader_abort_message {
        let _ = write!(out, "<li>Shader abort: {}</li>", esc(m));
    }
    out.push_str("</ul>");
    if !r.notes.is_empty() {
        out.push_str("<h3>Notes</h3><ul class=\"quiet\">");
        for n in r.notes.iter().take(MAX_NOTES) {
            let _ = write!(out, "<li>{}</li>", esc(n));
        }
        if r.notes.len() > MAX_NOTES {
            let _ = write!(
                out,
                "<li>{} more note(s) in the report</li>",
                r.notes.len() - MAX_NOTES
            );
        }
        out.push_str("</ul>");
    }
    let _ = write!(
        out,
        "<p class=\"quiet\">Report <span class=\"mono\">{}</span> (schema {}) · {} binding events \
         recorded, {} dropped</p></section>",
        esc(&r.id),
        r.schema_version,
        r.index_stats.events,
        r.binding_events_dropped
    );
}

/// The ranked pipelines of the stage the GPU stopped in, each with its shader files and entities.
fn running_pipelines(running: &crate::pipelines::RunningPipelines, out: &mut String) {
    match &running.exact {
        Some(exact) => {
            let _ = write!(
                out,
                "<li>Exact mode (every draw and dispatch marked, by {}): the GPU did not finish the \
                 {}; the last it finished was the {}. Its pipeline:<ol>",
                esc(&exact.marker),
                esc(&exact
                    .first_unfinished
                    .as_ref()
                    .map_or_else(|| "(none)".into(), |c| c.describe())),
                esc(&exact
                    .last_finished
                    .as_ref()
                    .map_or_else(|| "(none recorded)".into(), |c| c.describe())),
            );
        }
        None => out.push_str(
            "<li>Pipelines queued there, ranked (one of them was likely running; full-screen and \
             compute work is listed only where the game noted it):<ol>",
        ),
    }
    for c in &running.candidates {
        let _ = write!(out, "<li><b>{}</b>", esc(&c.describe()));
        let shaders: Vec<String> = c
            .shaders
            .iter()
            .map(|s| {
                format!(
                    "{} <span class=\"mono\">{}</span>",
                    esc(&s.stage),
                    esc(s.path.as_deref().unwrap_or("(made in code)"))
                )
            })
            .collect();
        let _ = write!(out, "<br>{}", shaders.join(", "));
        let _ = write!(
            out,
            "<br><span class=\"quiet\">{} batch(es) in {}</span>",
            c.batches,
            esc(&c.passes.join(", "))
        );
        if let Some(drawing) = c.drawing() {
            let _ = write!(out, "<br>drawing {}", esc(&drawing));
        }
        out.push_str("</li>");
    }
    out.push_str("</ol></li>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::BindingKind;
    use crate::progress::{BreadcrumbState, FrameBreadcrumbs, GpuBreadcrumb};
    use crate::report::hang_report_for_tests;
    use crate::resolve::{BindingEventEntry, FaultVerdict};
    use crate::vulkan::fault::FaultAccess;

    const HOSTILE: &str =
        "<script src=\"http://evil/x.js\"></script><img src=x onerror=alert(1)>\u{1b}[2J";

    fn culprit(label: &str, base: u64, size: u64) -> Culprit {
        Culprit {
            name: Some(label.to_owned()),
            label: label.to_owned(),
            object_type: "BUFFER".to_owned(),
            handle: 0x5a,
            base,
            size,
            state: ObjectState::Freed,
            offset: 16,
            freed_ms_ago: Some(3),
            freed_frames_ago: Some(1),
            bytes_past_end: None,
            reason: HOSTILE.to_owned(),
            opaque_capture_address: None,
            capture_replay_note: None,
            asset: None,
        }
    }

    fn event(i: u64) -> BindingEventEntry {
        BindingEventEntry {
            sequence: i,
            frame: i,
            kind: BindingKind::Bind,
            object_type: "BUFFER".to_owned(),
            handle: 0x1000 + i,
            base: 0x1_0000_0000 + i * 0x100,
            size: 0x100,
            name: Some(format!("{HOSTILE} {i}")),
            internal: false,
            ms_before_crash: Some(i),
        }
    }

    /// A device loss whose every list is huge and every string hostile.
    fn hostile_report() -> CrashReport {
        let mut r = hang_report_for_tests();
        r.kind = CrashKind::DeviceLost;
        r.summary = HOSTILE.to_owned();
        r.gpu.gpu_name = HOSTILE.to_owned();
        r.notes = (0..10_000).map(|i| format!("{HOSTILE} {i}")).collect();
        r.recent_events = (0..20_000).map(event).collect();
        let fault = FaultEntry {
            address: 0x1_0000_0010,
            address_range: [0x1_0000_0010, 0x1_0000_0013],
            precision: 4,
            access: FaultAccess::Write,
            verdict: FaultVerdict::UseAfterFree,
            culprit: Some(culprit(HOSTILE, 0x1_0000_0000, 0x100)),
            candidates: (0..5_000)
                .map(|i| culprit(&format!("{HOSTILE} {i}"), 0x1_0000_0000, 0x100 + i))
                .collect(),
            summary: HOSTILE.to_owned(),
            nearby_events: (0..5_000).map(event).collect(),
        };
        r.faults = vec![fault; 100];
        r.breadcrumbs = (0..1000)
            .map(|f| FrameBreadcrumbs {
                frame: f,
                breadcrumbs: (0..1000)
                    .map(|i| GpuBreadcrumb {
                        label: format!("{HOSTILE} {i}"),
                        camera: Some(format!("{HOSTILE} {}", i % 3)),
                        state: BreadcrumbState::Started,
                    })
                    .collect(),
                dropped: 7,
            })
            .collect();
        r
    }

    #[test]
    fn hostile_strings_never_become_markup_or_urls() {
        let page = html_page(&hostile_report());
        assert!(!page.contains('\u{1b}'));
        assert!(page.contains("&lt;script src=&quot;http://evil/x.js&quot;&gt;"));
        // Every tag is the page's own: report text cannot open one (`<` is always escaped).
        const TAGS: [&str; 26] = [
            "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "header", "div", "h1",
            "h2", "h3", "p", "section", "table", "tr", "th", "td", "span", "svg", "g", "rect",
            "line", "text", "ul", "li",
        ];
        let mut tags = 0;
        for tag in page.split('<').skip(1) {
            let tag = &tag[..tag.find('>').expect("a tag closes")];
            let name = tag
                .trim_start_matches('/')
                .split([' ', '>'])
                .next()
                .unwrap();
            assert!(
                TAGS.contains(&name) || ["small", "b", "br"].contains(&name),
                "tag {name:?}"
            );
            if tag.starts_with("meta http-equiv=\"Content-Security-Policy\"") {
                assert!(tag.contains("content=\"default-src 'none'; style-src 'unsafe-inline'\""));
                continue;
            }
            // Values are quoted and hold no raw quote, so what is outside quotes is the markup.
            let markup: String = tag.split('"').step_by(2).collect();
            for bad in ["src=", "href=", "url(", "http", " on"] {
                assert!(!markup.contains(bad), "tag {tag:?} holds {bad:?}");
            }
            let values: Vec<&str> = tag.split('"').skip(1).step_by(2).collect();
            assert!(
                values.iter().all(|v| !v.contains(['<', '>', '\''])),
                "{tag:?}"
            );
            tags += 1;
        }
        assert!(tags > 100);
    }

    #[test]
    fn huge_reports_give_a_bounded_page_that_says_what_it_left_out() {
        let page = html_page(&hostile_report());
        assert!(page.len() < 400 * 1024, "the page is {} bytes", page.len());
        for left_out in [
            "96 more fault(s) not drawn",
            "more object(s) near this address not drawn",
            "996 later frame(s) in flight not drawn",
            "968 more stage(s) not drawn; 7 not recorded",
            "9980 more note(s) in the report",
        ] {
            assert!(page.contains(left_out), "no {left_out:?}");
        }
    }

    #[test]
    fn a_hang_after_an_earlier_runs_hang_names_that_report() {
        let mut r = hang_report_for_tests();
        r.after_earlier_hang = Some(crate::report::EarlierHang {
            report_id: HOSTILE.to_owned(),
            event_id: "e".into(),
            fingerprint: vec![],
            process_id: 4242,
            ms_before: 61_000,
        });
        let page = html_page(&r);
        assert!(
            page.contains("61 s after the GPU hang report <span class=\"mono\">&lt;script"),
            "{page}"
        );
        assert!(page.contains("of process 4242 on this GPU"));
    }

    #[test]
    fn video_memory_is_shown_with_the_heap_near_its_budget_tagged() {
        let mut r = hang_report_for_tests();
        assert!(
            !html_page(&r).contains("Video memory"),
            "schema 6: no section"
        );
        let heap = |index: u32, usage: u64| crate::report::MemoryHeap {
            index,
            size: 2 << 30,
            device_local: index == 0,
            usage: Some(usage),
            budget: Some(1 << 30),
            near_budget: crate::report::near_budget(usage, 1 << 30),
        };
        r.video_memory = Some(VideoMemory {
            heaps: vec![heap(0, 1_000 << 20), heap(1, 10 << 20)],
            budget_known: true,
            allocation_failures: None,
            near_budget: true,
            notes: vec![NO_MEMORY_REPORT.to_owned()],
        });
        let page = html_page(&r);
        assert!(page.contains(
            "<tr><th>Heap 0</th><td>heap 0 (device-local, 2.0 GiB): 1000.0 MiB used of a 1.0 GiB \
             budget (97%) <span class=\"verdict-tag\">near the budget</span></td></tr>"
        ));
        assert!(page.contains(
            "<tr><th>Heap 1</th><td>heap 1 (host, 2.0 GiB): 10.0 MiB used of a 1.0 GiB budget \
             (0%)</td></tr>"
        ));
        assert!(page.contains(&format!(
            "<tr><th>Failed allocations</th><td>{NO_MEMORY_REPORT}</td></tr>"
        )));
    }

    #[test]
    fn an_empty_report_says_what_it_lacks() {
        let mut r = hang_report_for_tests();
        r.hang = None;
        let page = html_page(&r);
        assert!(page.contains("<h1>GPU hang</h1>"));
        assert!(page.contains("No GPU breadcrumbs"));
        assert!(!page.contains("fault address and its neighbourhood"));
        r.kind = CrashKind::DeviceLost;
        let page = html_page(&r);
        assert!(page.contains("<h1>Device lost</h1>"));
        assert!(page.contains("The driver reported no fault address."));
    }

    #[test]
    fn the_pipelines_queued_where_the_gpu_stopped_are_listed_escaped() {
        use crate::pipelines::{
            DrawnEntity, PipelineCandidate, PipelineKind, RunningBasis, RunningPipelines,
            ShaderStage,
        };
        let mut r = hang_report_for_tests();
        r.running = Some(RunningPipelines {
            basis: RunningBasis::QueuedInStage,
            frame: 9,
            camera: Some("main".into()),
            stage: "Core3d MainPass".into(),
            candidates: vec![PipelineCandidate {
                rank: 1,
                label: Some("opaque_mesh_pipeline".into()),
                kind: PipelineKind::Render,
                shaders: vec![ShaderStage {
                    stage: "fragment".into(),
                    path: Some(format!("shaders/{HOSTILE}.wgsl")),
                    entry_point: None,
                }],
                shader_defs: vec![],
                passes: vec!["Opaque3d".into()],
                batches: 1,
                material: Some("game::WaterMaterial".into()),
                entities: vec![DrawnEntity {
                    shown_as: "12v1".into(),
                    name: Some(HOSTILE.into()),
                }],
                entity_count: 3,
            }],
            exact: None,
        });
        let page = html_page(&r);
        assert!(page.contains("<b>WaterMaterial (shaders/"), "{page}");
        assert!(page.contains("1 batch(es) in Opaque3d"));
        assert!(page.contains("(12v1) and 2 more"));
        assert!(!page.contains(HOSTILE), "escaped");
    }

    #[test]
    fn the_stage_the_gpu_stopped_in_is_the_one_highlighted() {
        let mut r = hang_report_for_tests();
        let crumb = |label: &str, state| GpuBreadcrumb {
            label: label.to_owned(),
            camera: Some("main".to_owned()),
            state,
        };
        r.breadcrumbs = vec![FrameBreadcrumbs {
            frame: 9,
            breadcrumbs: vec![
                crumb("Prepass", BreadcrumbState::Completed),
                crumb("MainPass", BreadcrumbState::Started),
                crumb("PostProcess", BreadcrumbState::NotStarted),
            ],
            dropped: 0,
        }];
        let page = html_page(&r);
        assert_eq!(page.matches("class=\"stage started here\"").count(), 1);
        let here = page.find(" here\"").unwrap();
        assert!(page[here..].starts_with(" here\" style=\"grid-row: 1; grid-column: 3\""));
        assert!(page[here..].contains(">MainPass<small>started</small><b>▲ GPU hung here</b>"));
    }
}
