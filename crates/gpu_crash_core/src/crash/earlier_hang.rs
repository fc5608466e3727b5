//! A hang at a run's start that continues an earlier run's hang: one fault, one Sentry issue.
//!
//! A GPU that an endless shader hung may stay busy after the process that submitted it has ended:
//! on the H100 host (driver 580.159.04, no display) it did for 8+ minutes, and each process started
//! meanwhile hung in its frame 1, in whatever pass came first (docs/driver-facts.md). Such a hang,
//! reported on its own, would be a second issue blaming a pipeline that only waited its turn. So a
//! hang before any frame of this run finished looks, in the report folder, for a GPU hang reported
//! by another process on the same GPU within [`EARLIER_HANG_WINDOW`], and joins it. A hang that
//! became a device loss does not count: the driver reset the GPU then.

use std::path::Path;
use std::time::Duration;

use crate::deliver::sentry_event::issue_fingerprint;
use crate::report::{read_report, CrashKind, CrashReport, EarlierHang};
use crate::vulkan::GpuCrashCapabilities;

/// How long after an earlier run's hang report a hang at a run's start is taken for its
/// continuation: the H100 host's GPU stayed busy 8 min 15 s after the endless shader's report
/// (docs/driver-facts.md), with margin.
pub(crate) const EARLIER_HANG_WINDOW: Duration = Duration::from_secs(15 * 60);

/// Report files read at most, newest first (by the time in their names): the lookup runs on the
/// crash path and must stay bounded whatever the folder holds.
const MAX_READ: usize = 8;

/// The newest GPU hang report in `dir` that another process than `process_id` wrote on `gpu` within
/// [`EARLIER_HANG_WINDOW`] before `now_ms` (Unix milliseconds), as what a hang now joins. Files
/// that are not reports or cannot be read are skipped.
pub(crate) fn find(
    dir: &Path,
    now_ms: u64,
    gpu: &GpuCrashCapabilities,
    process_id: u32,
) -> Option<EarlierHang> {
    let window = EARLIER_HANG_WINDOW.as_millis() as u64;
    let mut candidates: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let time = report_time(name.to_str()?)?;
            (time <= now_ms && now_ms - time <= window).then(|| (time, entry.path()))
        })
        .collect();
    candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
    candidates
        .into_iter()
        .take(MAX_READ)
        .filter_map(|(_, path)| read_report(&path).ok())
        .find(|earlier| is_hang_of(earlier, gpu, process_id))
        .map(|earlier| EarlierHang {
            report_id: earlier.id.clone(),
            event_id: earlier.event_id().to_owned(),
            fingerprint: issue_fingerprint(&earlier),
            process_id: earlier.application.process_id,
            ms_before: now_ms.saturating_sub(earlier.timestamp_ms),
        })
}

/// The time in a report file's name, `gpu-crash-<time>-<id>.json`.
fn report_time(file_name: &str) -> Option<u64> {
    let rest = file_name
        .strip_prefix("gpu-crash-")?
        .strip_suffix(".json")?;
    rest.split('-').next()?.parse().ok()
}

/// Whether `earlier` is a hang of a process other than `process_id` on `gpu`. A hang that became a
/// device loss is not: the driver reset the GPU then, so it is not still busy with that work.
fn is_hang_of(earlier: &CrashReport, gpu: &GpuCrashCapabilities, process_id: u32) -> bool {
    let hang = earlier.kind == CrashKind::GpuHang;
    let a = &earlier.gpu;
    let same_gpu = a.vendor_id == gpu.vendor_id
        && a.device_id == gpu.device_id
        && a.gpu_name == gpu.gpu_name
        && a.driver_version_raw == gpu.driver_version_raw;
    hang && same_gpu && earlier.application.process_id != process_id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{hang_report_for_tests, write_atomically};

    /// A fresh folder of its own for test `name`.
    fn folder(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("gcr-earlier-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// What a hang like `report` would find: its time, GPU and process.
    fn find_for(dir: &Path, report: &CrashReport) -> Option<EarlierHang> {
        find(
            dir,
            report.timestamp_ms,
            &report.gpu,
            report.application.process_id,
        )
    }

    /// A hang report of process `process_id` at `timestamp_ms`.
    fn hang_of(process_id: u32, timestamp_ms: u64) -> CrashReport {
        let mut report = hang_report_for_tests();
        report.application.process_id = process_id;
        report.timestamp_ms = timestamp_ms;
        report
    }

    fn written(dir: &Path, report: &CrashReport) {
        let bytes = serde_json::to_vec(report).unwrap();
        write_atomically(&dir.join(report.file_name()), &bytes).unwrap();
    }

    #[test]
    fn finds_another_runs_hang_on_the_same_gpu_within_the_window_only() {
        let dir = folder("window");
        let earlier = hang_of(100, 1_000_000_000);
        written(&dir, &earlier);
        let now = hang_of(200, earlier.timestamp_ms + 5 * 60_000);
        let found = find_for(&dir, &now).expect("the earlier hang");
        assert_eq!(found.report_id, earlier.id);
        assert_eq!(found.process_id, 100);
        assert_eq!(found.ms_before, 5 * 60_000);
        assert_eq!(found.fingerprint, issue_fingerprint(&earlier));

        // Too long before, the same process, another GPU: none.
        let mut late = now.clone();
        late.timestamp_ms = earlier.timestamp_ms + EARLIER_HANG_WINDOW.as_millis() as u64 + 1;
        assert_eq!(find_for(&dir, &late), None);
        let mut same_process = now.clone();
        same_process.application.process_id = 100;
        assert_eq!(find_for(&dir, &same_process), None);
        let mut other_gpu = now.clone();
        other_gpu.gpu.device_id ^= 1;
        assert_eq!(find_for(&dir, &other_gpu), None);

        // A hang the driver then turned into a device loss reset the GPU: nothing to continue.
        let reset = folder("reset");
        let mut lost = earlier.clone();
        lost.kind = CrashKind::DeviceLost;
        written(&reset, &lost);
        assert_eq!(find_for(&reset, &now), None);
    }

    /// A third run joins the issue the second one joined, so a relaunch loop stays one issue.
    #[test]
    fn a_chain_of_relaunches_stays_one_issue() {
        let dir = folder("chain");
        let first = hang_of(1, 2_000_000_000);
        written(&dir, &first);
        let mut second = hang_of(2, first.timestamp_ms + 60_000);
        second.gpu_stage = Some("another pass".to_owned());
        second.after_earlier_hang = find_for(&dir, &second);
        written(&dir, &second);
        let third = hang_of(3, second.timestamp_ms + 60_000);
        let found = find_for(&dir, &third).expect("the second");
        assert_eq!(found.report_id, second.id);
        assert_eq!(found.fingerprint, issue_fingerprint(&first));
    }

    #[test]
    fn report_times_come_from_file_names() {
        assert_eq!(report_time("gpu-crash-1733-abc.json"), Some(1733));
        assert_eq!(report_time("gpu-crash-1733-abc.bin"), None);
        assert_eq!(report_time("notes.json"), None);
    }
}
