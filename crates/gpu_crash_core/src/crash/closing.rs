//! The last lines a crashed run prints: each report's verdict, where it is, and what to run next,
//! so they are not lost above whatever the application prints while it ends.

use super::CrashHandling;

impl CrashHandling {
    /// For each report this run wrote: its verdict lines, its path, and `gpu-crash show <path>`.
    pub(crate) fn closing_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for path in self.reports.written() {
            match crate::report::read_report(&path) {
                Ok(report) => {
                    if report.faults.is_empty() {
                        lines.push(report.summary.clone());
                    }
                    lines.extend(report.faults.iter().map(|f| f.summary.clone()));
                }
                Err(err) => lines.push(format!("GPU crash report unreadable: {err}")),
            }
            lines.push(format!("GPU crash report: {}", path.display()));
            lines.push(format!("  next: gpu-crash show {}", path.display()));
        }
        lines
    }

    /// Prints [`Self::closing_lines`] on stderr.
    pub(crate) fn print_closing_lines(&self) {
        for line in self.closing_lines() {
            eprintln!("{line}");
        }
    }
}
