//! Postmortem: from device loss or a GPU hang to a resolved crash report on disk.
//!
//! Device loss arrives through Bevy's `RenderErrorHandler` (our handler runs first, then the app's).
//! A hang never arrives at all on some drivers (FACTS: the H200 hangs instead of losing the device),
//! so a watchdog thread watches submitted frames complete and declares a hang after `hang_timeout`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::index::{allocator_names, object_type_name, AddressIndex};
use crate::report::{
    write_report, ApplicationInfo, BindingEventEntry, CrashKind, CrashReport, Culprit, FrameTiming,
    HangInfo, ObjectState, VendorBinaryInfo, SCHEMA_VERSION,
};
use crate::resolve::{label, resolve, ResolveContext};
use crate::vulkan::fault::{parse_vendor_binary, RawFaultInfo};
use crate::vulkan::GpuCrashCapabilities;

/// What the watchdog does once a hang report is safely on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnHang {
    /// Keep the game running (it may recover, or the player may wait).
    KeepWaiting,
    /// Exit the process with this code: a hung GPU rarely recovers, and a game frozen forever is
    /// worse than a crash the player can restart from.
    Exit(i32),
}

/// Environment variable that overrides the report directory.
pub const REPORT_DIR_ENV: &str = "GPU_CRASH_REPORT_DIR";

/// Where reports go: `GPU_CRASH_REPORT_DIR`, else the setting, else a per-application data directory
/// (`$XDG_DATA_HOME/<app>/gpu-crash-reports`, `%LOCALAPPDATA%\<app>\gpu-crash-reports`,
/// `~/Library/Application Support/<app>/gpu-crash-reports`).
pub fn report_dir(setting: Option<&Path>, application: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os(REPORT_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = setting {
        return dir.to_owned();
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let base = if cfg!(windows) {
        std::env::var_os("LOCALAPPDATA").map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library/Application Support"))
    } else {
        std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".local/share")))
    };
    base.unwrap_or_else(std::env::temp_dir)
        .join(application)
        .join("gpu-crash-reports")
}

/// GPU progress as the render world reports it: which frame was submitted when, which completed.
#[derive(Default)]
pub struct GpuProgress {
    /// Frames submitted and not yet completed, oldest first (bounded by [`MAX_PENDING`]; the oldest
    /// are kept, since the oldest stalled submit is what a hang is measured from).
    pending: Mutex<std::collections::VecDeque<(u64, Instant)>>,
    /// The last frames for the report's timeline.
    timeline: Mutex<std::collections::VecDeque<(u64, Instant, Option<Instant>)>>,
    /// Set once a hang report was written.
    pub hang_reported: AtomicBool,
    /// Set once a device-loss report was written.
    pub loss_reported: AtomicBool,
}

/// Frames of history kept for the report's timeline.
const TIMELINE_FRAMES: usize = 32;
/// Pending frames tracked (wgpu itself blocks after 4,096 frames in flight on the H200).
const MAX_PENDING: usize = 8_192;

impl GpuProgress {
    /// Records that `frame`'s GPU work was submitted now.
    pub fn submitted(&self, frame: u64) {
        let now = Instant::now();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            if pending.len() < MAX_PENDING {
                pending.push_back((frame, now));
            }
        }
        let mut timeline = self.timeline.lock().unwrap_or_else(|p| p.into_inner());
        if timeline.len() >= TIMELINE_FRAMES {
            timeline.pop_front();
        }
        timeline.push_back((frame, now, None));
    }

    /// Records that `frame`'s GPU work completed (wgpu's `on_submitted_work_done`).
    pub fn completed(&self, frame: u64) {
        let now = Instant::now();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            while pending.front().is_some_and(|&(f, _)| f <= frame) {
                pending.pop_front();
            }
        }
        let mut timeline = self.timeline.lock().unwrap_or_else(|p| p.into_inner());
        for entry in timeline
            .iter_mut()
            .filter(|e| e.0 <= frame && e.2.is_none())
        {
            entry.2 = Some(now);
        }
    }

    /// `(oldest pending frame, its submit time, pending count)` when work is outstanding.
    pub fn stall(&self) -> Option<(u64, Instant, u64)> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let &(frame, at) = pending.front()?;
        Some((frame, at, pending.len() as u64))
    }

    /// True when the oldest pending work counts as hung: older than `timeout`, and either a later
    /// submit has come (whose maintenance would have completed it, were the GPU done) or it is far
    /// older than `timeout` (the app stopped submitting altogether).
    pub fn is_hung(&self, timeout: Duration) -> Option<(u64, Instant, u64)> {
        let stall = self.stall()?;
        let age = stall.1.elapsed();
        (age >= timeout && (stall.2 >= 2 || age >= timeout * 3)).then_some(stall)
    }

    /// The timeline for a report.
    pub fn frames(&self, now: Instant) -> Vec<FrameTiming> {
        let timeline = self.timeline.lock().unwrap_or_else(|p| p.into_inner());
        timeline
            .iter()
            .map(|&(frame, at, done)| FrameTiming {
                frame,
                submitted_ms_before_report: now.saturating_duration_since(at).as_millis() as u64,
                completed_after_ms: done
                    .map(|d| d.saturating_duration_since(at).as_millis() as u64),
            })
            .collect()
    }
}

/// Runs `work` on its own thread and waits at most `timeout`: at crash time wgpu's locks may be
/// held by a render thread stuck on the GPU, and the report must not wait with it.
pub fn with_timeout<T: Send + 'static>(
    timeout: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("gpu-crash-query".into())
        .spawn(move || {
            let _ = send.send(work());
        })
        .ok()?;
    receive.recv_timeout(timeout).ok()
}

/// Ends the process at once with `code`, without running exit handlers: after a GPU hang other
/// threads are inside the driver, and tearing it down under them crashed (exit 139 on the H200).
pub fn exit_now(code: i32) -> ! {
    #[cfg(unix)]
    // SAFETY: `_exit` only ends the process; the report is already fsynced to disk.
    unsafe {
        libc::_exit(code)
    }
    #[cfg(not(unix))]
    std::process::exit(code)
}

/// Everything a report needs besides the fault data.
pub struct CrashContext<'a> {
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
    /// GPU progress timeline.
    pub progress: Option<&'a GpuProgress>,
    /// Ring position of the device loss (see [`ResolveContext::as_of`]).
    pub as_of: Option<u64>,
}

/// Builds the report: learns names, resolves every fault address, parses the vendor binary.
/// Returns the report and the raw vendor binary (written beside it).
pub fn build_report(
    kind: CrashKind,
    raw: RawFaultInfo,
    index: &mut AddressIndex,
    ctx: &CrashContext<'_>,
) -> (CrashReport, Option<Vec<u8>>) {
    let now = Instant::now();
    let mut notes = raw.notes.clone();
    if let Some(blocks) = &ctx.allocator_blocks {
        allocator_names::learn_names(index, blocks);
    } else {
        notes.push(
            "wgpu allocator report unavailable: live objects named only by binding events".into(),
        );
    }
    // The loss is at or after the last pre-submit mark, and wgpu's teardown is the trailing run of
    // unbinds: the later of the two is the closest cut we can observe.
    let as_of = ctx
        .as_of
        .map(|mark| mark.max(index.trailing_unbind_run_start().unwrap_or(mark)));
    let resolve_ctx = ResolveContext {
        index,
        now,
        frame: ctx.frame,
        as_of,
    };
    let teardown = as_of
        .map(|cut| index.recent_events().filter(|e| e.sequence >= cut).count())
        .unwrap_or(0);
    if teardown > 0 {
        notes.push(format!(
            "{teardown} binding events after the device loss (wgpu's teardown) were not taken as frees"
        ));
    }
    let faults: Vec<_> = raw
        .addresses
        .iter()
        .map(|&a| resolve(&resolve_ctx, a))
        .collect();
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
            parse_error: parsed.err(),
        }
    });
    let summary = match faults.first() {
        Some(f) => f.summary.clone(),
        None if kind == CrashKind::DeviceLost => format!(
            "GPU device lost on {}{}",
            ctx.capabilities.gpu_name,
            raw.description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
        None => String::new(), // filled by the hang path
    };
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let report = CrashReport {
        schema_version: SCHEMA_VERSION,
        id: new_report_id(timestamp),
        kind,
        timestamp_ms: timestamp.as_millis() as u64,
        time: rfc3339(timestamp),
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
            let before_loss: Vec<_> = index
                .recent_events()
                .filter(|e| as_of.is_none_or(|cut| e.sequence < cut))
                .collect();
            before_loss[before_loss.len().saturating_sub(64)..]
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
        frames: ctx.progress.map(|p| p.frames(now)).unwrap_or_default(),
    };
    (report, raw.vendor_binary)
}

/// Adds the hang section: resources unbound since the oldest pending work was submitted (a frame's
/// grace before it), most recent first.
pub fn add_hang_info(
    report: &mut CrashReport,
    index: &AddressIndex,
    oldest_pending: (u64, Instant, u64),
    hang_timeout: Duration,
    driver_watchdog_timeout: bool,
) {
    let now = Instant::now();
    let (frame, submitted_at, pending) = oldest_pending;
    let since = submitted_at
        .checked_sub(Duration::from_millis(100))
        .unwrap_or(submitted_at);
    let memory = ash::vk::ObjectType::DEVICE_MEMORY.as_raw();
    // Earliest after the submit first: a resource freed while the GPU still used it is freed right
    // after the work that uses it was submitted (FACTS: descriptor use-after-free hangs the H200).
    // A freed resource whose memory is unmapped too can really fault; one suballocated from a
    // block that is still bound reads or writes mapped memory and cannot (H200 validation).
    let unmapped = |base: u64| {
        !index
            .live_overlapping(base, base)
            .iter()
            .any(|(_, _, b)| b.key.object_type == memory)
    };
    let mut freed: Vec<_> = index
        .freed_bindings()
        .filter(|(_, _, f)| f.freed_at >= since && f.key.object_type != memory)
        .collect();
    freed.sort_by_key(|(base, _, f)| (!unmapped(*base), f.freed_sequence));
    let mut seen_names = std::collections::HashSet::new();
    let mut suspects: Vec<Culprit> = freed
        .into_iter()
        .filter(|(_, _, f)| match &f.name {
            Some(name) => seen_names.insert(name.clone()),
            None => true,
        })
        .take(16)
        .map(|(base, size, f)| {
            let name = f.name.as_deref().map(str::to_owned);
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
                     completed{}",
                    f.freed_at
                        .saturating_duration_since(submitted_at)
                        .as_millis(),
                    if unmapped(base) {
                        "; its memory is unmapped, so a GPU access faults"
                    } else {
                        "; its memory block is still bound"
                    }
                ),
                opaque_capture_address: None,
                capture_replay_note: Some(crate::resolve::CAPTURE_REPLAY_UNAVAILABLE.to_owned()),
            }
        })
        .collect();
    suspects.dedup_by_key(|c| (c.handle, c.base));
    let stalled = now.saturating_duration_since(submitted_at);
    report.summary = match suspects.first() {
        Some(s) => format!(
            "GPU hang: frame {frame}'s work has not completed for {:.1} s; likely culprit {} \
             (freed {} ms ago, while that work was pending) -> use_after_free suspected",
            stalled.as_secs_f64(),
            s.label,
            s.freed_ms_ago.unwrap_or(0)
        ),
        None => format!(
            "GPU hang: frame {frame}'s work has not completed for {:.1} s; no object was freed \
             while it was pending",
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

/// Writes the report and prints the human lines; on failure logs why and returns `None` (the game
/// keeps its own crash policy either way).
pub fn persist_and_announce(
    dir: &Path,
    report: &mut CrashReport,
    vendor_binary: Option<&[u8]>,
) -> Option<PathBuf> {
    for fault in &report.faults {
        eprintln!("{}", fault.summary);
        bevy::log::error!("{}", fault.summary);
    }
    if report.faults.is_empty() {
        eprintln!("{}", report.summary);
        bevy::log::error!("{}", report.summary);
    }
    match write_report(dir, report, vendor_binary) {
        Ok(path) => {
            eprintln!("GPU crash report written to {}", path.display());
            bevy::log::error!("GPU crash report written to {}", path.display());
            Some(path)
        }
        Err(err) => {
            bevy::log::error!(
                "GPU crash report could NOT be written to {}: {err} (set {REPORT_DIR_ENV} to a writable directory)",
                dir.display()
            );
            eprintln!(
                "GPU crash report could NOT be written to {}: {err}",
                dir.display()
            );
            None
        }
    }
}

/// 32 hex digits, unique per process and time (no RNG dependency needed).
fn new_report_id(timestamp: Duration) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut x = timestamp.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32) ^ n;
    // splitmix64 for the second half so ids spread even when created in the same nanosecond.
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    format!("{:016x}{:016x}", timestamp.as_nanos() as u64, z)
}

/// RFC 3339 UTC from a Unix duration (civil-from-days, no time-zone database needed).
fn rfc3339(t: Duration) -> String {
    let secs = t.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        t.subsec_millis()
    )
}

/// The watchdog: a thread that declares a hang when submitted work stops completing.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts the thread; `check` runs every tick and returns `true` once it has handled a hang.
    pub fn spawn(
        tick: Duration,
        mut check: impl FnMut() -> bool + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("gpu-crash-watchdog".into())
                .spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        std::thread::park_timeout(tick);
                        if !stop.load(Ordering::Acquire) && check() {
                            break;
                        }
                    }
                })?
        };
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_known_dates() {
        assert_eq!(rfc3339(Duration::from_secs(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(Duration::from_millis(1_796_212_800_123)),
            "2026-12-02T12:00:00.123Z"
        );
    }

    #[test]
    fn report_ids_are_32_hex_and_distinct() {
        let t = Duration::from_secs(5);
        let (a, b) = (new_report_id(t), new_report_id(t));
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn report_dir_prefers_env_then_setting() {
        let setting = Path::new("/tmp/from-setting");
        // The env var is process-global; this test only reads it when unset by others.
        if std::env::var_os(REPORT_DIR_ENV).is_none() {
            assert_eq!(report_dir(Some(setting), "game"), setting);
            assert!(report_dir(None, "game").ends_with("game/gpu-crash-reports"));
        }
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
            progress: None,
            as_of: None,
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
    fn hang_suspects_with_unmapped_memory_rank_first() {
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
            (61, submitted, 3),
            Duration::from_secs(3),
            false,
        );
        let hang = report.hang.unwrap();
        let names: Vec<_> = hang.suspects.iter().map(|s| s.name.as_deref()).collect();
        assert_eq!(names, [Some("victim"), Some("frame_uniforms_1")]);
        assert!(hang.suspects[0].reason.contains("memory is unmapped"));
        assert!(hang.suspects[1].reason.contains("still bound"));
        assert!(
            report.summary.contains("likely culprit buffer \"victim\""),
            "{}",
            report.summary
        );
    }

    #[test]
    fn progress_reports_the_oldest_pending_frame() {
        let p = GpuProgress::default();
        p.submitted(1);
        p.submitted(2);
        p.completed(1);
        p.submitted(3);
        let (frame, _, pending) = p.stall().unwrap();
        assert_eq!((frame, pending), (2, 2));
        // Long after the timeline forgot frame 2, the stall is still measured from it.
        for f in 4..100 {
            p.submitted(f);
        }
        assert_eq!(p.stall().unwrap().0, 2);
        assert!(p.is_hung(Duration::ZERO).is_some());
        p.completed(99);
        assert!(p.stall().is_none());
        assert!(p
            .frames(Instant::now())
            .iter()
            .all(|f| f.completed_after_ms.is_some()));
        p.submitted(100);
        assert!(
            p.is_hung(Duration::from_secs(60)).is_none(),
            "a single pending frame younger than 3x the timeout is not a hang"
        );
    }
}
