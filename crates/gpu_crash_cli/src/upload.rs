//! `gpu-crash upload`: saved reports to Sentry through the plugin's own outbox: the same envelope
//! (event, fingerprint, attachments), once only (`sent/` markers), 429/`Retry-After` honoured.
//!
//! A report is hostile input: it is read through no symlink and up to a size cap, and the vendor
//! binary it names is attached only if that is a plain file name in the report's own folder (see
//! `read_vendor_binary`); otherwise the report goes without it, with a note and a line on stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpu_crash_core::report::{read_report, read_vendor_binary, CrashReport};
use gpu_crash_core::{DeliverySettings, Dsn, Outbox, UploadState};

use crate::error::CliError;
use crate::error::CliResult;
use crate::list::report_files;
use crate::plain_text::escape_controls;
use gpu_crash_core::outbox_dir_of;

/// How long one run may keep sending (waits asked for by the server included).
const FLUSH_BUDGET: Duration = Duration::from_secs(120);

/// Arguments of `gpu-crash upload`.
#[derive(clap::Args)]
pub struct UploadArgs {
    /// Sentry DSN; by default `SENTRY_DSN`.
    #[arg(long)]
    dsn: Option<String>,
    /// The outbox to queue into; by default the game's own (`outbox` inside the report's folder,
    /// or where the folder's `gpu-crash-outbox.path` says the game keeps it).
    #[arg(long)]
    outbox: Option<PathBuf>,
    /// Reports (`gpu-crash-*.json`) or folders of reports.
    #[arg(required = true, value_name = "REPORT|DIR")]
    paths: Vec<PathBuf>,
}

pub fn run(args: UploadArgs) -> CliResult {
    let dsn_text = match args.dsn {
        Some(d) => d,
        None => std::env::var("SENTRY_DSN")
            .ok()
            .filter(|d| !d.trim().is_empty())
            .ok_or(CliError::NoDsn)?,
    };
    let dsn: Dsn = dsn_text.parse()?;
    let reports = collect(&args.paths)?;
    if reports.is_empty() {
        println!("gpu-crash: no reports to upload");
        return Ok(ExitCode::SUCCESS);
    }
    // One outbox per folder (the plugin keeps one per game); reports queued, then each flushed.
    let mut outboxes: Vec<Outbox> = Vec::new();
    let mut skipped = 0;
    for (path, read) in reports {
        let mut report = match read.map_or_else(|| read_report(&path), Ok) {
            Ok(report) => report,
            Err(e) => {
                eprintln!("gpu-crash: skipped: {}", escape_controls(&e.to_string()));
                continue;
            }
        };
        let dir = args
            .outbox
            .clone()
            .unwrap_or_else(|| outbox_dir_of(path.parent().unwrap_or(Path::new("."))));
        let state = Outbox::state_of(&dir, &report);
        if state == UploadState::Sent {
            println!(
                "already sent: {}",
                escape_controls(&path.display().to_string())
            );
            skipped += 1;
            continue;
        }
        let outbox = match outboxes.iter().find(|o| o.dir() == dir) {
            Some(o) => o.clone(),
            None => {
                let o = Outbox::new(DeliverySettings {
                    dsn_from_env: false,
                    upload_timeout: Duration::from_secs(30),
                    ..DeliverySettings::new(Some(dsn.clone()), dir.clone())
                });
                outboxes.push(o.clone());
                o
            }
        };
        if state == UploadState::Pending {
            // The game's own envelope waits (with its session update, its settings, its release):
            // it is sent as the game built it, never rebuilt over by the tool's defaults.
            println!(
                "waiting in the game's outbox: {}",
                escape_controls(&path.display().to_string())
            );
            continue;
        }
        let vendor_binary = read_vendor_binary(&path, &report).unwrap_or_else(|e| {
            eprintln!(
                "gpu-crash: vendor binary not attached: {}",
                escape_controls(&e.to_string())
            );
            report.notes.push(format!(
                "attachment: the vendor binary was not attached: {e}"
            ));
            None
        });
        outbox.enqueue(&report, vendor_binary.as_deref())?;
        println!(
            "queued: {} ({})",
            escape_controls(&path.display().to_string()),
            escape_controls(&report.summary)
        );
    }
    let (mut sent, mut failed, mut pending) = (0, 0, 0);
    for outbox in &outboxes {
        let summary = outbox.flush(Instant::now() + FLUSH_BUDGET);
        sent += summary.sent;
        failed += summary.failed;
        pending += summary.pending;
        if let Some(e) = &summary.last_error {
            eprintln!("gpu-crash: {}", escape_controls(e));
        }
        if summary.pending > 0 {
            eprintln!(
                "gpu-crash: {} report(s) wait in {}: {}",
                summary.pending,
                outbox.dir().display(),
                summary
                    .stopped
                    .as_deref()
                    .unwrap_or("in use by another upload")
            );
        }
    }
    println!(
        "gpu-crash: sent {sent}, already sent {skipped}, rejected {failed}, still pending {pending} \
         (to {})",
        dsn.host()
    );
    Ok(if failed == 0 && pending == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The reports named on the command line: a file must be a readable report (else the error, exit
/// 2), read now; a folder's reports are read one at a time when queued, and files that are not
/// reports are skipped with one line each.
fn collect(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Option<CrashReport>)>, CliError> {
    let mut reports = Vec::new();
    for path in paths {
        if path.is_dir() {
            // Read one at a time as they are queued: a folder of reports (up to 64 MiB each) is
            // never held in memory at once (issue 51 item 12).
            reports.extend(report_files(path).into_iter().map(|file| (file, None)));
        } else if path.exists() {
            reports.push((path.clone(), Some(read_report(path)?)));
        } else {
            return Err(CliError::NotFound(path.display().to_string()));
        }
    }
    Ok(reports)
}
