//! `gpu-crash show`: one report for a human, its strings with control characters escaped (see
//! [`crate::plain_text`]).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use gpu_crash_core::report::{
    html_page, read_report, BreadcrumbState, CrashKind, CrashReport, Culprit, ObjectState,
    ReportView, VideoMemory, NO_MEMORY_REPORT,
};

use crate::address_line::{self, bytes};
use crate::error::CliError;
use crate::error::CliResult;
use crate::plain_text::{escape_controls_but_newlines, escaped_report};

/// Candidates listed under the culprit.
const MAX_ALSO: usize = 4;

pub fn run(path: &Path) -> CliResult {
    if !path.exists() {
        return Err(CliError::NotFound(path.display().to_string()));
    }
    // Strings escaped before rendering (a note's line break cannot fake a line), the rendering
    // again after (nothing the report holds reaches the terminal raw).
    let report = escaped_report(read_report(path)?);
    print!("{}", escape_controls_but_newlines(&render(&report)));
    Ok(ExitCode::SUCCESS)
}

/// `gpu-crash show --html`: the report as one self-contained page (see
/// [`gpu_crash_core::report::html_page`]) written to `out`, else beside the report as
/// `<report>.html`; prints the page's path.
pub fn write_html(path: &Path, out: Option<&Path>) -> CliResult {
    if !path.exists() {
        return Err(CliError::NotFound(path.display().to_string()));
    }
    let report = read_report(path)?;
    let out = out.map_or_else(|| path.with_extension("html"), Path::to_path_buf);
    write_private(&out, html_page(&report).as_bytes())
        .map_err(|e| CliError::Io(format!("{}: {e}", out.display())))?;
    println!(
        "{}",
        crate::plain_text::escape_controls(&out.display().to_string())
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to `out` owner-only (`0600` on Unix: the page names the player's GPU and files),
/// through a new temp file renamed over `out`: a symlink planted at `out` is replaced, never
/// followed (issue 51 item 12).
fn write_private(out: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        out.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(&tmp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, out)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The whole text: verdict and summary, culprit and address line per fault, hang, breadcrumbs,
/// device and driver, notes. Deterministic for a given report (snapshot-tested).
pub fn render(r: &CrashReport) -> String {
    let mut out = String::new();
    let kind = ReportView::new(r).kind().what;
    let _ = writeln!(out, "{}", r.summary);
    let _ = writeln!(out);
    let _ = writeln!(out, "  what      {kind}");
    if let Some(non_fatal) = &r.non_fatal {
        let _ = writeln!(
            out,
            "  counted   {} masked fault(s) over {} ms{}",
            non_fatal.count,
            non_fatal.span_ms,
            if non_fatal.flags.is_empty() {
                String::new()
            } else {
                format!(" (flags {})", non_fatal.flags.join(" | "))
            }
        );
    }
    if let Some(fault) = r.faults.first() {
        let _ = writeln!(out, "  verdict   {}", fault.verdict.as_str());
    }
    if let Some(stage) = &r.gpu_stage {
        let _ = writeln!(out, "  GPU stage {stage}");
    }
    let _ = writeln!(out, "  when      {} (frame {})", r.time, r.frame);
    let app = &r.application;
    let _ = writeln!(
        out,
        "  game      {}{}{}",
        if app.name.is_empty() {
            "(unnamed)"
        } else {
            &app.name
        },
        if app.version.is_empty() {
            String::new()
        } else {
            format!(" {}", app.version)
        },
        if app.engine_name.is_empty() {
            String::new()
        } else {
            format!(" ({} {})", app.engine_name, app.engine_version)
        }
    );
    if let Some(drill) = &r.drill {
        let _ = writeln!(
            out,
            "  drill     {drill} (injected by VK_LAYER_gpu_crash_drill)"
        );
    }
    if r.kind == CrashKind::NonFatalFault {
        let _ = writeln!(
            out,
            "  device    generation {} (not a crash: the device lived on)",
            r.device_generation
        );
    } else {
        let _ = writeln!(
            out,
            "  device    generation {}, crash {} of this run{}",
            r.device_generation,
            r.crashes_this_run,
            r.ms_since_previous_crash
                .map(|ms| format!(", {ms} ms after the previous one"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(out, "  report    {} (schema {})", r.id, r.schema_version);

    for (i, fault) in r.faults.iter().enumerate() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Fault {} of {}: {} at {:#x} (precision {}, range [{:#x}, {:#x}])",
            i + 1,
            r.faults.len(),
            format!("{:?}", fault.access).to_ascii_lowercase(),
            fault.address,
            bytes(fault.precision),
            fault.address_range[0],
            fault.address_range[1]
        );
        let _ = writeln!(out, "  {}", fault.summary);
        match &fault.culprit {
            Some(c) => {
                let _ = writeln!(out, "  culprit   {}", describe(c));
                let _ = writeln!(out, "            {}", c.reason);
                if let Some(a) = &c.asset {
                    let _ = writeln!(out, "  asset     {}", describe_asset(a));
                }
            }
            None => {
                let _ = writeln!(out, "  culprit   none known at this address");
            }
        }
        // The next best few; the address line below shows the rest to scale.
        let also: Vec<&Culprit> = fault
            .candidates
            .iter()
            .skip(1)
            .filter(|c| Some(*c) != fault.culprit.as_ref() && c.object_type != "DEVICE_MEMORY")
            .collect();
        for c in also.iter().take(MAX_ALSO) {
            let _ = writeln!(out, "  also      {}", describe(c));
        }
        if also.len() > MAX_ALSO {
            let _ = writeln!(
                out,
                "  ...       {} more candidate(s) in the report",
                also.len() - MAX_ALSO
            );
        }
        if let Some(line) = address_line::draw(r, fault) {
            let _ = writeln!(out);
            out.push_str(&line);
        }
    }

    if let Some(hang) = &r.hang {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Hang: frame {} and {} frame(s) in all had not completed after {} ms (timeout {} ms){}",
            hang.oldest_pending_frame,
            hang.pending_frames,
            hang.stalled_ms,
            hang.hang_timeout_ms,
            if hang.driver_watchdog_timeout {
                "; the driver's watchdog timed out too"
            } else {
                ""
            }
        );
        if hang.suspects.is_empty() {
            let _ = writeln!(out, "  no resource was freed while the work was pending");
        }
        for s in &hang.suspects {
            let _ = writeln!(out, "  suspect   {}", describe(s));
        }
    }
    if let Some(e) = &r.after_earlier_hang {
        let _ = writeln!(
            out,
            "  after     the GPU hang report {} of process {}, {:.0} s before on this GPU: most \
             likely the GPU was still busy with it (sent under its issue)",
            e.report_id,
            e.process_id,
            e.ms_before as f64 / 1000.0
        );
    }

    let _ = writeln!(out);
    if r.breadcrumbs.is_empty() {
        let _ = writeln!(
            out,
            "Breadcrumbs: none (no frame in flight, or none recorded)"
        );
    } else {
        let _ = writeln!(out, "Breadcrumbs of the frames in flight (oldest first):");
        for frame in &r.breadcrumbs {
            let in_flight = frame.in_flight();
            let _ = writeln!(out, "  frame {}", frame.frame);
            for b in &frame.breadcrumbs {
                let mark = match b.state {
                    BreadcrumbState::Completed => "[x]",
                    BreadcrumbState::Started => "[>]",
                    BreadcrumbState::NotStarted => "[ ]",
                };
                let here = if in_flight == Some(b) {
                    "   <- the GPU was here"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "    {mark} {:<21} {}{here}",
                    b.state.describe(),
                    b.describe()
                );
            }
        }
    }
    if let Some(running) = &r.running {
        running_section(&mut out, running);
    }
    if !r.frames.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Frames (submitted before the report / completed after):"
        );
        // Runs of frames that never completed are one line: a hang leaves hundreds of them.
        let mut i = 0;
        while i < r.frames.len() {
            let f = &r.frames[i];
            let run = r.frames[i..]
                .iter()
                .take_while(|g| g.completed_after_ms.is_none())
                .count();
            if run > 2 {
                let last = &r.frames[i + run - 1];
                let _ = writeln!(
                    out,
                    "  frames {}-{} ({run}), {}-{} ms ago: never completed",
                    f.frame,
                    last.frame,
                    f.submitted_ms_before_report,
                    last.submitted_ms_before_report
                );
                i += run;
                continue;
            }
            let _ = writeln!(
                out,
                "  frame {:>6}  {:>6} ms ago  {}",
                f.frame,
                f.submitted_ms_before_report,
                f.completed_after_ms
                    .map(|ms| format!("completed after {ms} ms"))
                    .unwrap_or_else(|| "never completed".into())
            );
            i += 1;
        }
    }

    let g = &r.gpu;
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Device: {} ({}, {} {:#06x}:{:#06x}, {} MiB)",
        g.gpu_name, g.device_type, g.vendor_name, g.vendor_id, g.device_id, g.memory_size_mb
    );
    let _ = writeln!(
        out,
        "Driver: {} {} (version {}), Vulkan {}",
        g.driver_name, g.driver_info, g.driver_version, g.api_version
    );
    let _ = writeln!(out, "  {}", g.summary());
    for line in &g.missing {
        let _ = writeln!(out, "  missing: {line}");
    }
    if let Some(memory) = &r.video_memory {
        video_memory_section(&mut out, memory);
    }
    if let Some(description) = &r.description {
        let _ = writeln!(out, "Driver's description: {description}");
    }
    if let Some(message) = &r.shader_abort_message {
        let _ = writeln!(out, "Shader abort: {message}");
    }
    if let Some(v) = &r.vendor_binary {
        let _ = writeln!(
            out,
            "Vendor binary: {}{}",
            bytes(v.size),
            v.file_name
                .as_ref()
                .map(|f| format!(", beside the report as {f}"))
                .unwrap_or_default()
        );
    }
    let stats = &r.index_stats;
    let _ = writeln!(
        out,
        "Binding events: {} recorded, {} dropped; {} kept before the fault, {} after",
        stats.events,
        r.binding_events_dropped,
        r.recent_events.len(),
        r.events_after_fault.len()
    );
    if r.suppressed_duplicates > 0 {
        let _ = writeln!(
            out,
            "Stands for {} more crash(es) with the same fingerprint (crash-loop limit)",
            r.suppressed_duplicates
        );
    }
    for note in &r.notes {
        let _ = writeln!(out, "Note: {note}");
    }
    out
}

/// `buffer "particles" (freed 2 frames, 35 ms before), BUFFER 0x5a at [0x…, +64 KiB), offset 16`.
/// What was running: the ranked pipelines of the stage the GPU stopped in.
fn running_section(out: &mut String, running: &gpu_crash_core::report::RunningPipelines) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Pipelines queued in {}{} in frame {} (ranked: one of them was likely running; \
         full-screen and compute work is not listed):",
        running.stage,
        running
            .camera
            .as_deref()
            .map(|c| format!(" of camera {c:?}"))
            .unwrap_or_default(),
        running.frame
    );
    for c in &running.candidates {
        let _ = writeln!(out, "  {}. {}", c.rank, c.describe());
        for shader in &c.shaders {
            let _ = writeln!(
                out,
                "       {:<8} {}{}",
                shader.stage,
                shader.path.as_deref().unwrap_or("(shader made in code)"),
                shader
                    .entry_point
                    .as_deref()
                    .map(|e| format!(" :: {e}"))
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(
            out,
            "       queued   {} batch(es) in {}",
            c.batches,
            c.passes.join(", ")
        );
        if let Some(drawing) = c.drawing() {
            let _ = writeln!(out, "       drawing  {drawing}");
        }
        if !c.shader_defs.is_empty() {
            let _ = writeln!(out, "       defs     {}", c.shader_defs.join(" "));
        }
    }
}

/// Video memory at the fault: one line per heap (marked when near its budget), the failed
/// allocations, and what the driver does not tell.
fn video_memory_section(out: &mut String, memory: &VideoMemory) {
    let _ = writeln!(out, "Video memory at the fault:");
    for heap in &memory.heaps {
        let near = if heap.near_budget {
            "   <- near the budget"
        } else {
            ""
        };
        let _ = writeln!(out, "  {}{near}", heap.describe());
    }
    let _ = writeln!(out, "  {}", memory.failures_line());
    for note in memory
        .notes
        .iter()
        .filter(|n| n.as_str() != NO_MEMORY_REPORT)
    {
        let _ = writeln!(out, "  {note}");
    }
}

fn describe(c: &Culprit) -> String {
    let state = match c.state {
        ObjectState::Live => "live".to_owned(),
        ObjectState::Freed => {
            let mut ago = Vec::new();
            if let Some(f) = c.freed_frames_ago {
                ago.push(format!("{f} frame(s)"));
            }
            if let Some(ms) = c.freed_ms_ago {
                ago.push(format!("{ms} ms"));
            }
            if ago.is_empty() {
                "freed".to_owned()
            } else {
                format!("freed {} before", ago.join(", "))
            }
        }
    };
    let past_end = c
        .bytes_past_end
        .map(|b| format!(", {b} bytes past its end"))
        .unwrap_or_default();
    format!(
        "{} ({state}), {} {:#x} at [{:#x}, +{}), offset {}{past_end}",
        c.label,
        c.object_type,
        c.handle,
        c.base,
        bytes(c.size),
        c.offset
    )
}

/// `mesh "models/tree.mesh", vertex 5 (32-byte vertices at [2816, 6016) of general mesh slab 0),
/// live, used by oak, birch`.
fn describe_asset(a: &gpu_crash_core::report::GpuAsset) -> String {
    let element = a
        .element_size
        .map(|size| {
            let what = match a.kind {
                gpu_crash_core::report::AssetKind::MeshIndexData => "indices",
                _ => "vertices",
            };
            format!("{size}-byte {what} at ")
        })
        .unwrap_or_default();
    let state = match a.state {
        gpu_crash_core::report::ObjectState::Live => "live".to_owned(),
        gpu_crash_core::report::ObjectState::Freed => {
            format!("freed {} frame(s) before", a.freed_frames_ago.unwrap_or(0))
        }
    };
    let users: Vec<String> = a
        .entities
        .iter()
        .map(|e| e.name.clone().unwrap_or_else(|| e.entity.clone()))
        .collect();
    let users = match (users.is_empty(), a.entity_count as usize > users.len()) {
        (true, _) => String::new(),
        (false, false) => format!(", used by {}", users.join(", ")),
        (false, true) => format!(
            ", used by {} and {} more",
            users.join(", "),
            a.entity_count as usize - users.len()
        ),
    };
    format!(
        "{} {}, {} ({element}[{}, {}) of {}), {state}{users}",
        a.kind.noun(),
        a.display_name(),
        a.place(),
        a.byte_range[0],
        a.byte_range[1],
        a.container
    )
}
