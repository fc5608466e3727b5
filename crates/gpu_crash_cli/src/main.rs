//! `gpu-crash`: the GPU crash reporter's command-line tool for QA and support.
//!
//! - `drill`: run any Vulkan game under the crash-drill layer (embedded in this binary) and say
//!   where the report went and what it concluded;
//! - `doctor`: what the plugin would capture on each GPU of this machine, and why not the rest;
//! - `show`: one report, for a human (`--html`: as a page with pictures);
//! - `list`: the reports and outbox envelopes on this machine;
//! - `upload`: send saved reports to Sentry as the plugin would.
//!
//! Bad input (a missing or truncated file, a report of a newer schema, a bad DSN) ends with one
//! line on stderr and exit code 2.

mod address_line;
mod doctor;
mod drill;
mod error;
mod layer;
mod list;
mod plain_text;
mod show;
mod upload;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "gpu-crash",
    version,
    about = "Drill, check, read and send GPU crash reports"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a Vulkan game under the crash-drill layer, then show where its report went.
    Drill(drill::DrillArgs),
    /// What the crash reporter would get on each GPU of this machine (creates a Vulkan device).
    Doctor {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A saved report for a human: verdict, culprit on the address line, breadcrumbs, device.
    Show {
        /// The report (`gpu-crash-*.json`).
        report: PathBuf,
        /// Write the report as one self-contained HTML page (map of the fault address, timeline
        /// of the frames in flight) instead, and print its path.
        #[arg(long)]
        html: bool,
        /// Where `--html` writes the page (default: beside the report, `<report>.html`).
        #[arg(long, value_name = "FILE", requires = "html")]
        out: Option<PathBuf>,
    },
    /// Reports and outbox envelopes on this machine, with kind, verdict, time and upload state.
    List {
        /// A report folder or a game's data folder; by default every game's data folder.
        dir: Option<PathBuf>,
    },
    /// Send saved reports to Sentry as the plugin would (same event, fingerprint and outbox).
    Upload(upload::UploadArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; usage errors print clap's message, exit 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Drill(args) => drill::run(args),
        Command::Doctor { json } => doctor::run(json),
        Command::Show {
            report,
            html: false,
            ..
        } => show::run(&report),
        Command::Show { report, out, .. } => show::write_html(&report, out.as_deref()),
        Command::List { dir } => list::run(dir.as_deref()),
        Command::Upload(args) => upload::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One line, nothing raw: the error may quote a hostile file's name or contents.
            eprintln!("gpu-crash: {}", plain_text::escape_controls(&e.to_string()));
            ExitCode::from(e.exit_code())
        }
    }
}
