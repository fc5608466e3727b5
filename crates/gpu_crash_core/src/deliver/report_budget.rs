//! The report folder's budget: a game that crashes in a loop, or whose driver reports a masked
//! fault a minute for months, must not fill the player's disk with reports.
//!
//! A report is its JSON file `gpu-crash-<time>-<id>.json` and its siblings of the same stem (the
//! vendor binary `gpu-crash-<time>-<id>.vendor.bin`). When the folder holds more than
//! [`DeliverySettings::max_report_files`] reports or [`DeliverySettings::max_report_bytes`] bytes,
//! reports go, least worth first, until it is within both:
//! 1. reports a server already has (their envelope's `sent/` marker is in the outbox);
//! 2. reports whose envelope waits in the outbox (pending, held or failed: an envelope carries the
//!    whole report, so nothing is lost for the upload), warnings before crashes;
//! 3. last, reports that are the only copy (never queued: no DSN, or a process killed between the
//!    write and the queue, to be queued by the next startup).
//!
//! Each group goes oldest first.
//! The report just written is never dropped. An envelope pending in the outbox is self-contained,
//! so dropping a report never loses an upload; the markers of dropped reports go at the next
//! startup (see [`super::ledger::forget_gone`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tracing::warn;

use super::envelope_name::{EnvelopeClass, EnvelopeName};
use super::ledger::SENT_DIR;
use super::outbox::Outbox;
use super::settings::DeliverySettings;

impl Outbox {
    /// Keeps `report_dir` within the report budget ([`DeliverySettings::max_report_files`] and
    /// bytes), never dropping `keep` (the report just written); see [`super::report_budget`].
    pub(crate) fn keep_reports_in_budget(&self, report_dir: &Path, keep: Option<&Path>) {
        enforce(report_dir, &self.inner.dir, &self.inner.settings, keep);
    }
}

/// One report on disk: its files and their bytes.
#[derive(Debug)]
struct OnDisk {
    id: String,
    time_ms: u128,
    files: Vec<PathBuf>,
    bytes: u64,
    /// When its JSON was last written (a hang report merged into its loss report is rewritten).
    written: Option<SystemTime>,
    /// Its JSON file, if it has one (a kill between the two writes leaves a vendor binary alone).
    json: Option<PathBuf>,
}

/// Drops reports of `report_dir` (see the module docs) until it is within `settings`' budget, never
/// `keep` (a report's JSON path). Returns the report files dropped.
pub(crate) fn enforce(
    report_dir: &Path,
    outbox_dir: &Path,
    settings: &DeliverySettings,
    keep: Option<&Path>,
) -> Vec<PathBuf> {
    let reports = reports_in(report_dir);
    let mut total: u64 = reports.iter().map(|r| r.bytes).sum();
    if reports.len() <= settings.max_report_files && total <= settings.max_report_bytes {
        return Vec::new();
    }
    let outbox = outbox_classes(outbox_dir);
    let keep_id = keep.and_then(report_id_of);
    let rank = |r: &OnDisk| worth(r, outbox.get(&r.id));
    let mut reports: Vec<(u8, OnDisk)> = reports.into_iter().map(|r| (rank(&r), r)).collect();
    reports.sort_by_key(|(rank, r)| (*rank, r.time_ms));
    let mut count = reports.len();
    let mut dropped = Vec::new();
    for (report_rank, report) in reports {
        if count <= settings.max_report_files && total <= settings.max_report_bytes {
            break;
        }
        if Some(&report.id) == keep_id.as_ref() {
            continue;
        }
        // The JSON last: a report whose sibling could not go still counts, and is tried again.
        let (json, siblings): (Vec<&PathBuf>, Vec<&PathBuf>) = report
            .files
            .iter()
            .partition(|f| f.extension().is_some_and(|e| e == "json"));
        let mut json_gone = true;
        for file in siblings.into_iter().chain(json) {
            if let Err(e) = crate::safe_fs::remove_file(file) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    warn!("GPU crash reporter: cannot remove {}: {e}", file.display());
                    json_gone &= file.extension().is_none_or(|e| e != "json");
                }
            }
        }
        if !json_gone {
            // Still on disk (an antivirus holds it): its markers stay true, so nothing is
            // forgotten or recorded, and nothing worth more goes in its place; the folder is
            // brought within its budget at the next check.
            break;
        }
        let only_copy = report_rank == 3;
        // Its `sent/` markers go with it: nothing can bring it back now, and a process that runs
        // for months never reaches the startup clean-up.
        super::ledger::forget_report(outbox_dir, &report.id);
        if only_copy {
            // Never queued: the marker says a rule let it go (`gpu-crash list`, the requeue).
            let name = format!(
                "{:020}-{}.{}",
                report.time_ms,
                report.id,
                super::envelope::ENVELOPE_EXT
            );
            let _ = super::ledger::record(outbox_dir, super::ledger::DROPPED_DIR, &name);
        }
        warn!(
            "GPU crash reporter: {} holds {count} report(s), {total} bytes (limits {} reports, {} \
             bytes): removed report {} ({})",
            report_dir.display(),
            settings.max_report_files,
            settings.max_report_bytes,
            report.id,
            match report_rank {
                0 => "already sent",
                1 | 2 => "its envelope waits in the outbox",
                _ => "never queued: dropped unsent",
            }
        );
        count -= 1;
        total = total.saturating_sub(report.bytes);
        dropped.extend(report.json.clone());
    }
    dropped
}

/// The id in `gpu-crash-<time>-<id>.<anything>`.
fn report_id_of(path: &Path) -> Option<String> {
    parse_report_name(path.file_name()?.to_str()?).map(|(_, id)| id)
}

/// `(time, id)` of a report file name `gpu-crash-<time>-<id>.<ext...>`.
fn parse_report_name(name: &str) -> Option<(u128, String)> {
    let rest = name.strip_prefix("gpu-crash-")?;
    let (time, rest) = rest.split_once('-')?;
    // As outbox names spell it (see `envelope_name::sanitize`).
    let id = super::envelope_name::sanitize(rest.split_once('.')?.0);
    if id.is_empty() {
        return None;
    }
    Some((time.parse().ok()?, id))
}

/// The reports of `dir` (regular files only), each with its siblings.
fn reports_in(dir: &Path) -> Vec<OnDisk> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut by_id: HashMap<String, OnDisk> = HashMap::new();
    for entry in entries.filter_map(Result::ok) {
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((time_ms, id)) = parse_report_name(&name) else {
            continue;
        };
        let bytes = entry.metadata().map_or(0, |m| m.len());
        let report = by_id.entry(id.clone()).or_insert_with(|| OnDisk {
            id,
            time_ms,
            files: Vec::new(),
            bytes: 0,
            written: None,
            json: None,
        });
        if name.ends_with(".json") {
            report.written = entry.metadata().and_then(|m| m.modified()).ok();
            report.json = Some(entry.path());
        }
        report.files.push(entry.path());
        report.bytes = report.bytes.saturating_add(bytes);
    }
    // Siblings without their JSON (a kill between the two writes) are left for no one: they go too.
    by_id.into_values().collect()
}

/// What goes first (lowest): 0 sent, 1 a warning waiting in the outbox, 2 a crash waiting there,
/// 3 the only copy. An envelope or marker written after the report's file carries its last word
/// (their times are when each envelope was written, see [`super::ledger::retire`]); a report
/// written again after all of them (a hang report merged into its loss report) or within the same
/// clock tick is read, and only its own envelope's name counts.
fn worth(report: &OnDisk, traces: Option<&Vec<Trace>>) -> u8 {
    let Some(traces) = traces else {
        return 3;
    };
    let rank_of = |t: &Trace| match (t.sent, t.class) {
        (true, _) => 0,
        (false, EnvelopeClass::Warning | EnvelopeClass::Session) => 1,
        (false, EnvelopeClass::Crash) => 2,
    };
    if let Some(newest) = traces
        .iter()
        .filter(|t| report.written.is_some_and(|w| t.time > w))
        .max_by_key(|t| t.time)
    {
        return rank_of(newest);
    }
    let Some(Ok(on_disk)) = report.json.as_deref().map(crate::report::read_report) else {
        return 3;
    };
    let name = super::envelope_name::envelope_file_name(&on_disk);
    traces
        .iter()
        .filter(|t| t.name == name)
        .map(rank_of)
        .min()
        .unwrap_or(3)
}

/// An envelope or marker of a report in the outbox.
#[derive(Clone, Debug)]
struct Trace {
    name: String,
    /// When the envelope was written.
    time: SystemTime,
    /// A `sent/` marker; else waiting (pending, held or failed).
    sent: bool,
    class: EnvelopeClass,
}

/// For each report id, what the outbox holds of it: markers of sent envelopes and envelopes
/// waiting (pending, held or failed).
fn outbox_classes(outbox: &Path) -> HashMap<String, Vec<Trace>> {
    let mut known: HashMap<String, Vec<Trace>> = HashMap::new();
    for (dir, sent) in [
        (outbox.join(SENT_DIR), true),
        (outbox.to_owned(), false),
        (outbox.join(super::held::HELD_DIR), false),
        (outbox.join(super::outbox::FAILED_DIR), false),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let Some(name) = EnvelopeName::parse(&file_name) else {
                continue;
            };
            let Ok(time) = entry.metadata().and_then(|m| m.modified()) else {
                continue;
            };
            known.entry(name.report_id).or_default().push(Trace {
                name: file_name,
                time,
                sent,
                class: name.class,
            });
        }
    }
    known
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliver::tests::{fresh_dir, settings, ScriptedTransport};
    use crate::deliver::Outbox;
    use crate::report::{hang_report_for_tests, write_report, CrashKind};

    /// Issue 51 item 4: a masked fault a minute and a crash loop do not grow the report folder
    /// without bound; what goes first is what a server already has, then warnings; the newest
    /// report always stays.
    #[test]
    fn the_report_folder_stays_within_its_budget_keeping_what_matters() {
        let dir = fresh_dir("report-budget");
        let reports = dir.join("reports");
        let outbox = Outbox::with_transport(
            DeliverySettings {
                max_report_files: 10,
                ..settings(&dir)
            },
            ScriptedTransport::accepting(),
        );
        // Two crashes, sent; then offline: crashes kept pending, warnings a minute apart.
        let mut sent_crashes = Vec::new();
        for i in 0..2u64 {
            let mut r = hang_report_for_tests();
            r.kind = CrashKind::DeviceLost;
            r.timestamp_ms = 1_000 + i;
            write_report(&reports, &mut r, Some(&[1, 2, 3])).unwrap();
            outbox.enqueue(&r, None).unwrap();
            sent_crashes.push(r.id);
        }
        outbox.flush(std::time::Instant::now() + std::time::Duration::from_secs(5));
        let mut unsent_crashes = Vec::new();
        let mut last = None;
        for i in 0..40u64 {
            let mut r = hang_report_for_tests();
            r.kind = if i % 10 == 0 {
                CrashKind::DeviceLost
            } else {
                CrashKind::NonFatalFault
            };
            r.timestamp_ms = 10_000 + i * 60_000;
            let path = write_report(&reports, &mut r, None).unwrap();
            // Offline: queued, not sent (a bound of the outbox of its own keeps crashes too).
            std::fs::write(
                outbox
                    .dir()
                    .join(crate::deliver::envelope_name::envelope_file_name(&r)),
                b"x",
            )
            .unwrap();
            enforce(&reports, outbox.dir(), outbox.settings(), Some(&path));
            if r.kind == CrashKind::DeviceLost {
                unsent_crashes.push(r.id.clone());
            }
            last = Some(r.id);
        }
        let left: Vec<String> = reports_in(&reports).into_iter().map(|r| r.id).collect();
        assert_eq!(left.len(), 10, "{left:?}");
        for id in &unsent_crashes {
            assert!(
                left.contains(id),
                "unsent crash {id} dropped before warnings"
            );
        }
        for id in &sent_crashes {
            assert!(
                !left.contains(id),
                "a sent crash stays before unsent reports"
            );
        }
        assert!(left.contains(&last.unwrap()), "the newest report stays");
        let files = std::fs::read_dir(&reports)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
            .count();
        assert_eq!(files, 10, "no vendor binary left behind");
    }
}
