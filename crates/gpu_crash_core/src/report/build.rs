//! Building a report: from the driver's fault data, the address index and the GPU timeline to a
//! resolved [`CrashReport`].

use std::time::{Duration, Instant};

use super::model::{
    ApplicationInfo, CrashKind, CrashReport, FrameTiming, HangInfo, VendorBinaryInfo,
    SCHEMA_VERSION,
};
use crate::index::{allocator_names, object_type_name, AddressIndex};
use crate::progress::{FrameEntry, GpuTimeline, Stall};
use crate::resolve::assets::{name_assets, AssetLookup};
use crate::resolve::{label, resolve, ResolveContext};
use crate::resolve::{BindingEventEntry, Culprit, ObjectState};
use crate::vulkan::fault::{parse_vendor_binary, RawFaultInfo};
use crate::vulkan::{GpuCrashCapabilities, VideoMemoryReading};

use super::video_memory::VideoMemory;

/// The note of a report with fault addresses but no binding report on its device: its verdicts
/// cannot name an object, whatever the address.
pub(crate) const NO_BINDINGS_NOTE: &str = "fault addresses not matched to GPU objects: the binding report \
     (VK_EXT_device_address_binding_report) was off on this device, so no ranges were recorded (the \
     capabilities' missing lines say why)";

/// Everything a report needs besides the fault data.
pub(crate) struct CrashContext<'a> {
    /// GPU identity and capabilities.
    pub capabilities: &'a GpuCrashCapabilities,
    /// Application identity.
    pub application: &'a ApplicationInfo,
    /// Frame at the crash.
    pub frame: u64,
    /// Ring drops before the crash.
    pub binding_events_dropped: u64,
    /// wgpu's allocator report, for names of live resources.
    pub allocator_blocks: Option<Vec<allocator_names::AllocatorBlock>>,
    /// GPU progress of the device (frames, breadcrumbs); `None` where markers are unavailable.
    pub(crate) timeline: Option<&'a GpuTimeline>,
    /// Ring position of the fault (see [`fault_cut`]): later binding events are not used to resolve.
    pub cut: Option<u64>,
    /// Which device of this run (1 = the first).
    pub device_generation: u32,
    /// The device's asset map (meshes in slabs, image assets), to name the asset of each culprit.
    pub assets: Option<&'a crate::assets::SharedAssetMap>,
    /// Entities using each mesh.
    pub asset_users: Option<&'a crate::assets::AssetUsers>,
    /// The device's pipelines and the draw lists as they changed, to name what was running.
    pub pipelines: Option<&'a crate::pipelines::PipelineLedger>,
    /// Video memory as the driver told it at the fault; `None` where it could not be read.
    pub video_memory: Option<VideoMemoryReading>,
}

/// Ring position of a device loss: binding events from there on came after the fault and are not
/// used to resolve it (binds and unbinds alike).
///
/// `faulting_frame` is the first frame the GPU did not finish (from its markers), if known. Every
/// event after that frame's work was submitted came after the fault; so did wgpu's teardown after the
/// loss (the trailing run of unbinds), whichever comes first. Without markers the frame being
/// rendered when the loss was seen is used, as far as the teardown.
pub(crate) fn fault_cut(
    index: &AddressIndex,
    faulting_frame: Option<&FrameEntry>,
    claimed_now: u64,
) -> u64 {
    // A teardown destroys every buffer and texture of the device (dozens in any Bevy app); a run of
    // a few unbinds is the game's own frees right before the faulting submission (a mesh slab's
    // old buffer freed as it grows, then the fault in it), which happened before the fault.
    let teardown = index
        .trailing_unbind_run_start()
        .filter(|_| index.trailing_unbind_run_len() >= MIN_TEARDOWN_UNBINDS);
    let Some(frame) = faulting_frame else {
        return teardown.unwrap_or(claimed_now);
    };
    // The teardown cannot start before the faulting frame began.
    let teardown = teardown.map(|t| t.max(frame.ring_before));
    [frame.ring_after, teardown]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(claimed_now)
}

/// Builds the report: learns names, resolves every fault address, parses the vendor binary.
/// Returns the report and the raw vendor binary (written beside it).
pub(crate) fn build_report(
    kind: CrashKind,
    raw: RawFaultInfo,
    index: &mut AddressIndex,
    ctx: &CrashContext<'_>,
) -> (CrashReport, Option<Vec<u8>>) {
    let now = Instant::now();
    let mut notes: Vec<String> = raw.errors.iter().map(ToString::to_string).collect();
    if let Some(blocks) = &ctx.allocator_blocks {
        allocator_names::learn_names(index, blocks);
    } else {
        notes.push(
            "wgpu allocator report unavailable: live objects named only by binding events".into(),
        );
    }
    notes.extend(index.names_not_kept_note());
    let as_of = ctx.cut;
    let resolve_ctx = ResolveContext {
        index,
        now,
        frame: ctx.frame,
        as_of,
    };
    let after: Vec<_> = as_of
        .map(|cut| {
            index
                .recent_events()
                .filter(|e| e.sequence >= cut)
                .collect()
        })
        .unwrap_or_default();
    if !after.is_empty() {
        notes.push(format!(
            "{} binding events came after the fault (after the faulting frame's work was submitted, \
             or wgpu's teardown after the loss); they are listed, not used to resolve",
            after.len()
        ));
    }
    let events_after_fault = after[..after.len().min(MAX_EVENTS_LISTED)]
        .iter()
        .map(|e| BindingEventEntry::from_indexed(e, now))
        .collect();
    let mut faults: Vec<_> = raw
        .addresses
        .iter()
        .map(|&a| resolve(&resolve_ctx, a))
        .collect();
    if let (Some(assets), false) = (ctx.assets, faults.is_empty()) {
        match assets.lock_for_crash() {
            Some(map) => {
                let lookup = AssetLookup {
                    map: &map,
                    users: ctx.asset_users,
                    cut: as_of,
                    now,
                    frame: ctx.frame,
                };
                for fault in &mut faults {
                    name_assets(fault, &lookup);
                }
            }
            None => notes.push(
                "asset names left out: the render thread held the asset map (it may be stuck)"
                    .into(),
            ),
        }
    }
    if !faults.is_empty() && !ctx.capabilities.address_binding_report {
        // Every address would read as unknown: say that nothing was recorded to match it against.
        notes.push(NO_BINDINGS_NOTE.into());
    }
    if kind == CrashKind::DeviceLost && faults.is_empty() {
        notes.push(if ctx.capabilities.has_device_fault() {
            "the driver reported no fault address".into()
        } else {
            "no fault extension on this device: no fault address to resolve".into()
        });
    }
    let vendor_binary = raw.vendor_binary.as_ref().map(|bytes| {
        let parsed = parse_vendor_binary(bytes);
        if let Err(err) = &parsed {
            notes.push(format!("vendor binary kept raw: {err}"));
        }
        VendorBinaryInfo {
            size: bytes.len() as u64,
            file_name: None,
            header: parsed.as_ref().ok().cloned(),
            parse_error: parsed.err().map(|e| e.to_string()),
        }
    });
    let breadcrumbs = ctx
        .timeline
        .map(GpuTimeline::breadcrumbs_in_flight)
        .unwrap_or_default();
    notes.extend(
        breadcrumbs
            .iter()
            .filter_map(|f| f.ran_out().map(|line| format!("frame {}: {line}", f.frame))),
    );
    let in_flight = breadcrumbs
        .first()
        .and_then(|f| f.in_flight().map(|b| (f.frame, b)));
    // Exact mode's layer names the draw itself; the ranked guess stays the answer without it.
    let exact = ctx.timeline.and_then(GpuTimeline::exact_progress);
    let running = match (exact, ctx.pipelines) {
        (Some(exact), Some(ledger)) if exact.first_unfinished.is_some() => {
            let (frame, camera, stage) = in_flight
                .map(|(frame, b)| (frame, b.camera.as_deref(), b.label.as_str()))
                .unwrap_or((ctx.frame, None, ""));
            ledger.exact_at(frame, camera, stage, exact)
        }
        _ => in_flight
            .zip(ctx.pipelines)
            .and_then(|((frame, b), ledger)| {
                ledger.running_at(frame, b.camera.as_deref(), &b.label)
            }),
    };
    let gpu_stage = in_flight.map(|(frame, b)| (frame, b.describe()));
    let summary = match faults.first() {
        Some(f) => f.summary.clone(),
        None if kind == CrashKind::DeviceLost => format!(
            "GPU device lost on {}{}{}",
            ctx.capabilities.gpu_name,
            gpu_stage
                .as_ref()
                .map(|(frame, stage)| format!(" in frame {frame} during {stage}"))
                .unwrap_or_default(),
            raw.description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
        None => String::new(), // filled by the hang path
    };
    let wall = time::OffsetDateTime::now_utc();
    let timestamp_ms = (wall.unix_timestamp_nanos() / 1_000_000) as u64;
    let video_memory = ctx
        .video_memory
        .as_ref()
        .map(|reading| VideoMemory::from_reading(reading, timestamp_ms));
    if let Some(memory) = &video_memory {
        notes.extend(memory.near_budget_notes());
    }
    let report = CrashReport {
        schema_version: SCHEMA_VERSION,
        id: new_report_id(),
        kind,
        timestamp_ms,
        time: rfc3339(wall),
        summary,
        faults,
        gpu: ctx.capabilities.clone(),
        description: raw.description.clone(),
        vendor_infos: raw.vendor_infos.clone(),
        vendor_binary,
        shader_abort_message: raw.shader_abort_message.clone(),
        binding_events_dropped: ctx.binding_events_dropped,
        index_stats: index.stats().clone(),
        recent_events: {
            let before: Vec<_> = index
                .recent_events()
                .filter(|e| as_of.is_none_or(|cut| e.sequence < cut))
                .collect();
            before[before.len().saturating_sub(MAX_EVENTS_LISTED)..]
                .iter()
                .map(|e| BindingEventEntry::from_indexed(e, now))
                .collect()
        },
        frame: ctx.frame,
        application: ctx.application.clone(),
        drill: std::env::var("GPU_CRASH_DRILL")
            .ok()
            .filter(|d| !d.is_empty()),
        notes,
        hang: None,
        frames: ctx
            .timeline
            .map(|t| frame_timings(t, now))
            .unwrap_or_default(),
        gpu_stage: gpu_stage.map(|(_, stage)| stage),
        breadcrumbs,
        running,
        events_after_fault,
        device_generation: ctx.device_generation,
        crashes_this_run: 1,
        ms_since_previous_crash: None,
        suppressed_duplicates: 0,
        follows_hang: None,
        non_fatal: None,
        after_earlier_hang: None,
        video_memory,
    };
    (report, raw.vendor_binary)
}

/// Unbinds a trailing run needs to be taken for wgpu's teardown after a loss.
const MIN_TEARDOWN_UNBINDS: u32 = 8;

/// Binding events a report lists before and after the fault.
const MAX_EVENTS_LISTED: usize = 64;
/// Frames in a report's timeline.
const TIMELINE_FRAMES: usize = 32;

fn frame_timings(timeline: &GpuTimeline, now: Instant) -> Vec<FrameTiming> {
    timeline
        .recent_frames(TIMELINE_FRAMES)
        .into_iter()
        .filter_map(|f| {
            let at = f.submitted_at?;
            Some(FrameTiming {
                frame: f.frame,
                submitted_ms_before_report: now.saturating_duration_since(at).as_millis() as u64,
                completed_after_ms: f
                    .completed_seen_at
                    .map(|d| d.saturating_duration_since(at).as_millis() as u64),
            })
        })
        .collect()
}

/// Adds the hang section.
///
/// Suspects are only frees that wgpu's lifetime tracking cannot vouch for: wgpu destroys a resource
/// only after every submission that used it completed, so a buffer suballocated from a block that is
/// still bound and freed during the stall was not used by the stalled work, and cannot fault. What
/// remains is memory that was unmapped while the frame was pending (freed outside wgpu, like a raw
/// Vulkan allocation): a GPU access there faults.
pub(crate) fn add_hang_info(
    report: &mut CrashReport,
    index: &AddressIndex,
    stall: Stall,
    submitted_at: Option<Instant>,
    hang_timeout: Duration,
    driver_watchdog_timeout: bool,
) {
    let now = Instant::now();
    let Stall {
        frame,
        since,
        pending,
    } = stall;
    let submitted_at = submitted_at.unwrap_or(since);
    let grace = submitted_at
        .checked_sub(Duration::from_millis(100))
        .unwrap_or(submitted_at);
    let memory = ash::vk::ObjectType::DEVICE_MEMORY.as_raw();
    let unmapped = |base: u64| {
        !index
            .live_overlapping(base, base)
            .iter()
            .any(|(_, _, b)| b.key.object_type == memory)
    };
    let mut freed: Vec<_> = index
        .freed_bindings()
        .filter(|(base, _, f)| {
            f.freed_at >= grace && f.key.object_type != memory && unmapped(*base)
        })
        .collect();
    freed.sort_by_key(|(_, _, f)| f.freed_sequence);
    let mut seen_names = std::collections::HashSet::new();
    let mut suspects: Vec<Culprit> = freed
        .into_iter()
        .filter(|(_, _, f)| match &f.name {
            Some(name) => seen_names.insert(*name),
            None => true,
        })
        .take(16)
        .map(|(base, size, f)| {
            let name = f.name.map(str::to_owned);
            Culprit {
                label: label(f.key, name.as_deref()),
                name,
                object_type: object_type_name(f.key.object_type),
                handle: f.key.handle,
                base,
                size,
                state: ObjectState::Freed,
                offset: 0,
                freed_ms_ago: Some(now.saturating_duration_since(f.freed_at).as_millis() as u64),
                freed_frames_ago: Some(report.frame.saturating_sub(f.freed_frame)),
                bytes_past_end: None,
                reason: format!(
                    "unbound {} ms after frame {frame}'s GPU work was submitted, while it never \
                     completed; its memory is unmapped, so a GPU access there faults",
                    f.freed_at
                        .saturating_duration_since(submitted_at)
                        .as_millis(),
                ),
                opaque_capture_address: None,
                capture_replay_note: Some(crate::resolve::CAPTURE_REPLAY_UNAVAILABLE.to_owned()),
                asset: None,
            }
        })
        .collect();
    suspects.dedup_by_key(|c| (c.handle, c.base));
    let stalled = now.saturating_duration_since(since);
    let stage = report
        .gpu_stage
        .as_deref()
        .map(|s| format!(" during {s}"))
        .unwrap_or_default();
    let stage = format!("{stage}{}", running_clause(report.running.as_ref()));
    report.summary = match suspects.first() {
        Some(s) => format!(
            "GPU hang in frame {frame}{stage}: no progress for {:.1} s; likely culprit {} \
             (its memory was freed {} ms ago, while that work was pending) -> use_after_free suspected",
            stalled.as_secs_f64(),
            s.label,
            s.freed_ms_ago.unwrap_or(0)
        ),
        None => format!(
            "GPU hang in frame {frame}{stage}: no progress for {:.1} s; no suspect (no memory was \
             unmapped while it was pending)",
            stalled.as_secs_f64()
        ),
    };
    report.hang = Some(HangInfo {
        oldest_pending_frame: frame,
        pending_frames: pending,
        stalled_ms: stalled.as_millis() as u64,
        hang_timeout_ms: hang_timeout.as_millis() as u64,
        suspects,
        driver_watchdog_timeout,
    });
}

/// `, likely EndlessMaterial (shaders/endless_loop.wgsl, pipeline "opaque_mesh_pipeline"), first
/// of 4 pipelines queued there`: the ranked list's first, for the one-line summary.
fn running_clause(running: Option<&crate::pipelines::RunningPipelines>) -> String {
    let Some(running) = running else {
        return String::new();
    };
    let Some(first) = running.candidates.first() else {
        return String::new();
    };
    let exact = running.exact.as_ref();
    if let (Some(command), crate::pipelines::RunningBasis::Exact) = (
        exact.and_then(|e| e.first_unfinished.as_ref()),
        running.basis,
    ) {
        return format!(
            ", in {} (exact: {} was the first the GPU did not finish)",
            first.describe(),
            command.describe()
        );
    }
    // Exact mode whose marker the draws of a render pass share: where, not which.
    let shared = exact
        .and_then(|e| e.first_unfinished.as_ref())
        .filter(|c| c.sharing_marker > 1)
        .map(|c| {
            format!(
                " (exact mode: the GPU did not finish render pass {}, whose {} draws share a marker)",
                c.labels.last().map_or("(unlabelled)", String::as_str),
                c.sharing_marker
            )
        })
        .unwrap_or_default();
    let ranked = match running.candidates.len() {
        1 => format!(
            ", likely {} (the one pipeline queued there)",
            first.describe()
        ),
        n => format!(
            ", likely {}, first of {n} pipelines queued there",
            first.describe()
        ),
    };
    format!("{ranked}{shared}")
}

/// A random (v4) UUID as 32 hex digits: the report id and Sentry event id.
fn new_report_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// RFC 3339 UTC, e.g. `2026-12-02T12:00:00.123Z`.
fn rfc3339(at: time::OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// A report of `kind` from `raw` and `index` alone: no device behind it (default capabilities and
/// application, no allocator report, GPU timeline, assets or pipelines). For this crate's tests and
/// `test_support`.
#[cfg(any(test, feature = "test-support"))]
pub(crate) fn report_without_device(
    kind: CrashKind,
    raw: RawFaultInfo,
    index: &mut AddressIndex,
    frame: u64,
) -> (CrashReport, Option<Vec<u8>>) {
    let capabilities = GpuCrashCapabilities::default();
    let application = ApplicationInfo::default();
    let ctx = CrashContext {
        capabilities: &capabilities,
        application: &application,
        frame,
        binding_events_dropped: 0,
        allocator_blocks: None,
        timeline: None,
        cut: None,
        device_generation: 1,
        assets: None,
        asset_users: None,
        pipelines: None,
        video_memory: None,
    };
    build_report(kind, raw, index, &ctx)
}

/// A plain hang report with a fresh id, for tests elsewhere in the crate.
#[cfg(test)]
pub(crate) fn hang_report_for_tests() -> CrashReport {
    report_without_device(
        CrashKind::GpuHang,
        RawFaultInfo::default(),
        &mut AddressIndex::default(),
        9,
    )
    .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::write_report;

    #[test]
    fn a_few_trailing_unbinds_are_the_games_frees_a_long_run_is_the_teardown() {
        use crate::capture::{BindingKind, BindingRecord};
        use ash::vk;
        let now = Instant::now();
        let mut index = AddressIndex::default();
        let record = |kind, handle: u64| {
            BindingRecord::new(kind, vk::ObjectType::BUFFER, handle, handle << 16, 0x100)
        };
        for h in 1..=20 {
            index.apply(&record(BindingKind::Bind, h), now);
        }
        // One unbind right before the faulting submission (a slab's old buffer as it grows): no
        // teardown, the cut is where the loss was seen.
        index.apply(&record(BindingKind::Unbind, 1), now);
        assert_eq!(fault_cut(&index, None, 999), 999);
        // Then wgpu destroys everything: the run's start is the cut.
        for h in 2..=12 {
            index.apply(&record(BindingKind::Unbind, h), now);
        }
        let start = index.trailing_unbind_run_start().unwrap();
        assert_eq!(fault_cut(&index, None, 999), start);
    }

    #[test]
    fn rfc3339_is_utc_with_a_z() {
        let at = time::OffsetDateTime::from_unix_timestamp(1_796_212_800).unwrap();
        assert_eq!(rfc3339(at), "2026-12-02T12:00:00Z");
    }

    #[test]
    fn a_thousand_reports_written_as_fast_as_possible_give_a_thousand_files() {
        let dir = std::env::temp_dir().join(format!("gcr-ids-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let capabilities = GpuCrashCapabilities::default();
        let application = ApplicationInfo::default();
        let mut index = AddressIndex::default();
        let ctx = context(&capabilities, &application);
        let mut ids = std::collections::HashSet::new();
        for _ in 0..1000 {
            let (mut report, _) = build_report(
                CrashKind::GpuHang,
                RawFaultInfo::default(),
                &mut index,
                &ctx,
            );
            assert_eq!(report.id.len(), 32);
            assert!(report.id.chars().all(|c| c.is_ascii_hexdigit()));
            assert!(ids.insert(report.id.clone()));
            write_report(&dir, &mut report, None).unwrap();
        }
        let files = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "json")
            })
            .count();
        assert_eq!(files, 1000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn context(
        capabilities: &GpuCrashCapabilities,
        application: &ApplicationInfo,
    ) -> CrashContext<'static> {
        CrashContext {
            capabilities: Box::leak(Box::new(capabilities.clone())),
            application: Box::leak(Box::new(application.clone())),
            frame: 9,
            binding_events_dropped: 0,
            allocator_blocks: None,
            timeline: None,
            cut: None,
            device_generation: 1,
            assets: None,
            asset_users: None,
            pipelines: None,
            video_memory: None,
        }
    }

    #[test]
    fn zero_address_infos_still_give_a_report_that_says_so() {
        let capabilities = GpuCrashCapabilities {
            gpu_name: "Test GPU".into(),
            device_fault_ext: true,
            ..Default::default()
        };
        let mut index = AddressIndex::default();
        let raw = RawFaultInfo {
            description: Some("page fault".into()),
            ..Default::default()
        };
        let (report, binary) = build_report(
            CrashKind::DeviceLost,
            raw,
            &mut index,
            &context(&capabilities, &ApplicationInfo::default()),
        );
        assert!(report.faults.is_empty());
        assert!(binary.is_none());
        assert_eq!(report.summary, "GPU device lost on Test GPU: page fault");
        assert!(report
            .notes
            .iter()
            .any(|n| n == "the driver reported no fault address"));
    }

    #[test]
    fn malformed_vendor_binary_is_kept_raw_with_the_reason() {
        let capabilities = GpuCrashCapabilities::default();
        let mut index = AddressIndex::default();
        let raw = RawFaultInfo {
            vendor_binary: Some(vec![0xff; 20]),
            ..Default::default()
        };
        let (report, binary) = build_report(
            CrashKind::DeviceLost,
            raw,
            &mut index,
            &context(&capabilities, &ApplicationInfo::default()),
        );
        assert_eq!(
            binary.as_deref(),
            Some(&[0xff; 20][..]),
            "the bytes are kept"
        );
        let info = report.vendor_binary.unwrap();
        assert_eq!(info.size, 20);
        assert!(info.header.is_none());
        assert!(info.parse_error.unwrap().contains("shorter than"));
        assert!(report
            .notes
            .iter()
            .any(|n| n.starts_with("vendor binary kept raw")));
    }

    #[test]
    fn hang_suspects_are_only_frees_whose_memory_is_unmapped() {
        // H200 real fault: the victim had its own memory, freed with it; churn buffers freed at the same
        // time live in blocks that stay bound and cannot fault.
        use crate::capture::{BindingKind, BindingRecord};
        use ash::vk;
        let mut index = AddressIndex::default();
        let submitted = Instant::now();
        let mut seq = 0;
        let mut apply = |index: &mut AddressIndex, kind, t, h, base, size, name: &str| {
            seq += 1;
            let mut r = BindingRecord::new(kind, t, h, base, size).with_name(name);
            r.sequence = seq;
            index.apply(&r, Instant::now());
        };
        let (bind, unbind) = (BindingKind::Bind, BindingKind::Unbind);
        let (memory, buffer) = (vk::ObjectType::DEVICE_MEMORY, vk::ObjectType::BUFFER);
        apply(
            &mut index,
            bind,
            memory,
            1,
            0xdeee_0000_0000,
            0x100_0000,
            "",
        );
        apply(&mut index, bind, memory, 2, 0xdeed_be00_0000, 0x20_0000, "");
        apply(
            &mut index,
            bind,
            buffer,
            20,
            0xdeed_be00_0000,
            0x20_0000,
            "",
        );
        apply(&mut index, bind, buffer, 10, 0xdeee_0000_0140, 0x8000, "");
        apply(
            &mut index,
            unbind,
            buffer,
            20,
            0xdeed_be00_0000,
            0x20_0000,
            "victim",
        );
        apply(
            &mut index,
            unbind,
            memory,
            2,
            0xdeed_be00_0000,
            0x20_0000,
            "victim_memory",
        );
        apply(
            &mut index,
            unbind,
            buffer,
            10,
            0xdeee_0000_0140,
            0x8000,
            "frame_uniforms_1",
        );
        let mut report = build_report(
            CrashKind::GpuHang,
            RawFaultInfo::default(),
            &mut index,
            &context(
                &GpuCrashCapabilities::default(),
                &ApplicationInfo::default(),
            ),
        )
        .0;
        add_hang_info(
            &mut report,
            &index,
            Stall {
                frame: 61,
                since: submitted,
                pending: 3,
            },
            Some(submitted),
            Duration::from_secs(3),
            false,
        );
        let hang = report.hang.unwrap();
        let names: Vec<_> = hang.suspects.iter().map(|s| s.name.as_deref()).collect();
        // The buffer freed from a block that stays bound is vouched for by wgpu's lifetime
        // tracking (and cannot fault): not a suspect.
        assert_eq!(names, [Some("victim")]);
        assert!(hang.suspects[0].reason.contains("memory is unmapped"));
        assert!(
            report.summary.contains("likely culprit buffer \"victim\""),
            "{}",
            report.summary
        );
    }
}
