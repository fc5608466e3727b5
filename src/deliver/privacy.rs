//! What leaves the player's machine: application names and paths only when allowed.

use super::DeliverySettings;
use crate::report::CrashReport;

/// A copy of `report` without what `settings` says to leave out: the application name (also in the
/// vendor binary header) unless [`DeliverySettings::include_application_names`], and the executable
/// path unless [`DeliverySettings::include_paths`].
pub fn redacted_report(report: &CrashReport, settings: &DeliverySettings) -> CrashReport {
    let mut r = report.clone();
    if !settings.include_application_names {
        r.application.name.clear();
        if let Some(header) = r
            .vendor_binary
            .as_mut()
            .and_then(|vendor| vendor.header.as_mut())
        {
            header.application_name = None;
        }
    }
    if !settings.include_paths {
        r.application.executable = None;
    }
    r
}
