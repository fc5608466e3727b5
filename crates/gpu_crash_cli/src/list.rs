//! `gpu-crash list`: reports and outbox envelopes on this machine, with their upload state.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use gpu_crash_core::report::{read_report, ReportView, MAX_REPORT_BYTES};
use gpu_crash_core::{
    envelope_report_id, outbox_dir_of, session_files, user_data_dir, Outbox, DEFAULT_OUTBOX_NAME,
    REPORTS_DIR_NAME,
};

use crate::error::CliError;
use crate::error::CliResult;
use crate::plain_text::escape_controls;

/// One game's (or one folder's) reports and outbox.
struct Place {
    reports: PathBuf,
    outbox: PathBuf,
}

pub fn run(dir: Option<&Path>) -> CliResult {
    let places = match dir {
        Some(dir) if !dir.is_dir() => return Err(CliError::NotFound(dir.display().to_string())),
        Some(dir) => vec![place_of(dir)],
        None => every_game(),
    };
    let mut rows = 0;
    for place in &places {
        rows += list_place(place);
    }
    if rows == 0 {
        let searched: Vec<String> = places
            .iter()
            .map(|p| p.reports.display().to_string())
            .collect();
        println!(
            "no GPU crash reports or outbox envelopes (looked in {})",
            if searched.is_empty() {
                user_data_dir().display().to_string()
            } else {
                searched.join(", ")
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The reports and outbox of `dir`: a game's data folder (holding `gpu-crash-reports`), a report
/// folder, or an outbox itself; the outbox where the game keeps it ([`outbox_dir_of`]).
fn place_of(dir: &Path) -> Place {
    if dir.join(REPORTS_DIR_NAME).is_dir() {
        let reports = dir.join(REPORTS_DIR_NAME);
        return Place {
            outbox: outbox_dir_of(&reports),
            reports,
        };
    }
    let is_outbox = dir.file_name().is_some_and(|n| n == DEFAULT_OUTBOX_NAME)
        && dir
            .parent()
            .is_some_and(|reports| outbox_dir_of(reports) == dir);
    if is_outbox {
        return Place {
            reports: dir.parent().unwrap_or(Path::new(".")).to_owned(),
            outbox: dir.to_owned(),
        };
    }
    Place {
        reports: dir.to_owned(),
        outbox: outbox_dir_of(dir),
    }
}

/// Every game folder in the user's data folder that holds reports or an outbox.
fn every_game() -> Vec<Place> {
    let Ok(entries) = std::fs::read_dir(user_data_dir()) else {
        return Vec::new();
    };
    let mut games: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(REPORTS_DIR_NAME).is_dir())
        .collect();
    games.sort();
    games.iter().map(|g| place_of(g)).collect()
}

/// `gpu-crash-*.json` files of `dir`, oldest first (names start with the time).
pub fn report_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().unwrap_or_default().to_string_lossy();
                    name.starts_with("gpu-crash-") && name.ends_with(".json")
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Prints one row per report and per envelope without a report; returns the rows printed.
fn list_place(place: &Place) -> usize {
    let mut rows = 0;
    let mut seen_envelopes = BTreeSet::new();
    let files = report_files(&place.reports);
    if !files.is_empty() {
        println!(
            "{} (outbox {})",
            place.reports.display(),
            place.outbox.display()
        );
    }
    for file in files {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        match read_report(&file) {
            Ok(report) => {
                let state = Outbox::state_of(&place.outbox, &report);
                seen_envelopes.insert(report.id.clone());
                let view = ReportView::new(&report);
                println!(
                    "  {}  {:<15} {:<18} {:<10} {}",
                    escape_controls(&report.time),
                    view.kind().name,
                    view.verdict(),
                    state.as_str(),
                    escape_controls(&name)
                );
            }
            Err(e) => println!("  unreadable: {}", escape_controls(&e.to_string())),
        }
        rows += 1;
    }
    // Envelopes whose report is not in the report folder (written elsewhere, or deleted).
    let orphans: Vec<(PathBuf, &str)> = [("", "pending"), ("failed", "failed")]
        .into_iter()
        .flat_map(|(sub, state)| {
            envelopes(&place.outbox.join(sub))
                .into_iter()
                .map(move |p| (p, state))
        })
        .filter(|(p, _)| {
            let id = envelope_id(p);
            !seen_envelopes.contains(&id)
        })
        .collect();
    if !orphans.is_empty() {
        println!(
            "{} (envelopes without a report beside them)",
            place.outbox.display()
        );
    }
    for (path, state) in orphans {
        if let Some(status) = envelope_session_status(&path) {
            // A release-health session's own update (see the README's "Release health").
            println!(
                "  {}  {:<15} {:<18} {:<10} {}",
                envelope_time(&path),
                "session",
                escape_controls(&status),
                state,
                escape_controls(&path.file_name().unwrap_or_default().to_string_lossy())
            );
            rows += 1;
            continue;
        }
        let event = envelope_event(&path);
        let tag = |name: &str| {
            event
                .as_ref()
                .and_then(|e| {
                    e["tags"][name]
                        .as_str()
                        .map(|t| escape_controls(t).into_owned())
                })
                .unwrap_or_else(|| "?".into())
        };
        println!(
            "  {}  {:<15} {:<18} {:<10} {}",
            envelope_time(&path),
            tag("gpu.fault_kind"),
            tag("gpu.verdict"),
            state,
            escape_controls(&path.file_name().unwrap_or_default().to_string_lossy())
        );
        rows += 1;
    }
    let sessions = session_files(&place.outbox);
    if !sessions.is_empty() {
        println!(
            "{} (release-health sessions not ended yet)",
            place.outbox.display()
        );
    }
    for session in sessions {
        let started = session
            .started
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let state = if session.live {
            "running"
        } else {
            "sent at the next launch"
        };
        println!(
            "  {}  {:<15} {:<18} {:<10} {}",
            rfc3339(started),
            "session",
            escape_controls(&format!("{} {}", session.status, session.release)),
            state,
            escape_controls(
                &session
                    .path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
            )
        );
        rows += 1;
    }
    rows
}

/// `*.envelope` files of `dir`.
fn envelopes(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "envelope"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The report id of an outbox envelope (its name says it, see the core's outbox naming).
fn envelope_id(path: &Path) -> String {
    envelope_report_id(path).unwrap_or_default()
}

/// The time of an envelope named `<timestamp ms>-<id>.envelope`, as RFC 3339 UTC.
fn envelope_time(path: &Path) -> String {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    match stem
        .split_once('-')
        .and_then(|(ms, _)| ms.parse::<u64>().ok())
    {
        Some(ms) => rfc3339(ms),
        None => "?".into(),
    }
}

/// The event item of an envelope: the line after the item header of type `event`.
fn envelope_event(path: &Path) -> Option<serde_json::Value> {
    // Hostile input: a regular file (no symlink), read up to the report cap.
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_REPORT_BYTES {
        return None;
    }
    let mut text = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_REPORT_BYTES)
        .read_to_end(&mut text)
        .ok()?;
    let mut lines = text.split(|&b| b == b'\n');
    while let Some(line) = lines.next() {
        let header: serde_json::Value = serde_json::from_slice(line).unwrap_or_default();
        if header["type"] == "event" {
            return serde_json::from_slice(lines.next()?).ok();
        }
    }
    None
}

/// The status of the session update in an envelope of one (`exited`, `crashed`, `abnormal`);
/// `None` for any other envelope.
fn envelope_session_status(path: &Path) -> Option<String> {
    if !path.file_name()?.to_string_lossy().contains("-session-") {
        return None;
    }
    // Hostile input: a regular file (no symlink), read up to the report cap.
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_REPORT_BYTES {
        return None;
    }
    let text = std::fs::read(path).ok()?;
    let mut lines = text.split(|&b| b == b'\n');
    while let Some(line) = lines.next() {
        let header: serde_json::Value = serde_json::from_slice(line).unwrap_or_default();
        if header["type"] == "session" {
            let update: serde_json::Value = serde_json::from_slice(lines.next()?).ok()?;
            return update["status"].as_str().map(str::to_owned);
        }
    }
    None
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian, UTC).
fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
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
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_names_give_time_and_id() {
        let p = Path::new("/x/00000001796214185821-18ed6f49.envelope");
        assert_eq!(envelope_id(p), "18ed6f49");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_214_185_821), "2026-12-02T12:23:05.821Z");
    }

    #[test]
    fn the_outbox_is_where_the_game_keeps_it() {
        assert_eq!(
            outbox_dir_of(Path::new("/d/game/gpu-crash-reports")),
            Path::new("/d/game/gpu-crash-reports/outbox")
        );
        let p = Path::new("/x/00000001796214185821-warning-18ed6f49.envelope");
        assert_eq!(envelope_id(p), "18ed6f49");
        let p = Path::new("/x/00000001796214185821-18ed6f49+77aa.envelope");
        assert_eq!(envelope_id(p), "18ed6f49");
    }
}
