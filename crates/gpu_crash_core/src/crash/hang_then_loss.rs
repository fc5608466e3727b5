//! One fault, one report: a GPU hang that the driver later turns into a device loss.
//!
//! Drivers reset a hung GPU after a lockup timeout of their own, and the device is then lost, often
//! with fault addresses and a vendor binary the hang report could not have. How long that takes is
//! the driver's choice: Windows' TDR 2 s, amdgpu 10 s, NVIDIA on Linux 13.5 s after our 5 s hang
//! report (docs/driver-facts.md), and some drivers never do. No fixed window fits them all, so
//! nothing waits for the loss:
//! - the hang report is written and sent at once (a player who kills the frozen game loses
//!   nothing, and a hang whose device never dies is reported promptly);
//! - a loss of the same device, whenever it comes, rewrites **the same report file** (same id) with
//!   the loss's fault info and verdict, the hang's stall kept, and is sent as a second event of the
//!   **same Sentry issue**: the hang's fingerprint, an event id of its own (Sentry drops a second
//!   event with an id it has seen). See [`crate::report::HangFollowUp`].
//!
//! Which of the two comes first is decided under one lock per device (see
//! [`super::session::DeviceSession::begin_loss`]).

use std::time::Instant;

use crate::deliver::sentry_event::issue_fingerprint;
use crate::report::{CrashReport, FaultEntry, HangFollowUp, VendorInfo};

/// A hang report written and sent; a later loss of its device joins it.
pub(crate) struct ReportedHang {
    /// The report as written.
    pub report: CrashReport,
    /// Its raw vendor binary, written beside it.
    pub vendor_binary: Option<Vec<u8>>,
    /// When it was written.
    pub reported_at: Instant,
}

impl ReportedHang {
    /// Makes `loss` (the report of the device loss that followed) the one report of this fault: the
    /// hang report's id and time, so its file on disk is replaced rather than joined by a second;
    /// the hang's stall section and crash counts; a note and a summary that say both happened; and
    /// the hang's fingerprint with an event id of its own, so Sentry files it under the hang's issue.
    pub(crate) fn merge_into(self, loss: &mut CrashReport) {
        let hang = self.report;
        let waited = self.reported_at.elapsed().as_millis() as u64;
        loss.follows_hang = Some(HangFollowUp {
            hang_event_id: hang.event_id().to_owned(),
            event_id: uuid::Uuid::new_v4().simple().to_string(),
            fingerprint: issue_fingerprint(&hang),
            loss_after_ms: waited,
        });
        loss.id = hang.id;
        loss.timestamp_ms = hang.timestamp_ms;
        loss.time = hang.time;
        loss.crashes_this_run = hang.crashes_this_run;
        loss.ms_since_previous_crash = hang.ms_since_previous_crash;
        loss.suppressed_duplicates = hang.suppressed_duplicates;
        loss.after_earlier_hang = hang.after_earlier_hang;
        if loss.gpu_stage.is_none() {
            loss.gpu_stage = hang.gpu_stage;
            loss.running = hang.running;
        }
        if let Some(info) = &hang.hang {
            if loss.hang.is_none() {
                loss.summary = format!(
                    "{} (after a GPU hang of {} ms in frame {})",
                    loss.summary, info.stalled_ms, info.oldest_pending_frame
                );
            }
        }
        loss.notes.insert(
            0,
            format!(
                "this report replaces the GPU hang report of the same id, written and sent {waited} ms \
                 before the device was lost; the loss is sent as a second event of the hang's \
                 issue: {}",
                hang.summary
            ),
        );
        if loss.hang.is_none() {
            loss.hang = hang.hang;
        }
        keep_hang_faults(loss, hang.faults, hang.description, hang.vendor_infos);
    }
}

/// What the driver said at the hang stays in the one report: with `VK_KHR_device_fault` the hang's
/// query already took the driver's reports, so the loss's query may find none of them left. The
/// hang's faults come after the loss's own (the loss's are the later, fuller word), each address and
/// access once; the loss's description wins, the hang's fills in.
fn keep_hang_faults(
    loss: &mut CrashReport,
    faults: Vec<FaultEntry>,
    description: Option<String>,
    vendor_infos: Vec<VendorInfo>,
) {
    let had_faults = !loss.faults.is_empty();
    for fault in faults {
        let seen = loss
            .faults
            .iter()
            .any(|f| f.address == fault.address && f.access == fault.access);
        if !seen {
            loss.faults.push(fault);
        }
    }
    if !had_faults {
        if let Some(first) = loss.faults.first() {
            loss.summary = format!("{} (reported at the hang)", first.summary);
        }
    }
    if loss.description.is_none() {
        loss.description = description;
    }
    for info in vendor_infos {
        if !loss.vendor_infos.contains(&info) {
            loss.vendor_infos.push(info);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::ReportedHang;
    use crate::report::{
        hang_report_for_tests, CrashKind, FaultAccess, FaultEntry, FaultVerdict, VendorInfo,
    };

    fn fault(address: u64) -> FaultEntry {
        FaultEntry {
            address,
            address_range: [address, address],
            precision: 1,
            access: FaultAccess::Write,
            verdict: FaultVerdict::UseAfterFree,
            culprit: None,
            candidates: Vec::new(),
            summary: format!("GPU fault: write at {address:#x}"),
            nearby_events: Vec::new(),
        }
    }

    /// Issue 51 item 5: the hang's query drained the driver's fault reports (KHR); the loss that
    /// follows finds none. The merged report keeps the hang's faults, description and vendor infos.
    #[test]
    fn the_merged_report_keeps_what_the_driver_said_at_the_hang() {
        let mut hang = hang_report_for_tests();
        hang.faults = vec![fault(0x1000), fault(0x2000)];
        hang.description = Some("page fault at the hang".into());
        hang.vendor_infos = vec![VendorInfo {
            description: "mmu".into(),
            fault_code: 7,
            fault_data: 1,
        }];
        let mut loss = hang_report_for_tests();
        loss.kind = CrashKind::DeviceLost;
        loss.hang = None;
        loss.faults = vec![fault(0x2000), fault(0x3000)];
        ReportedHang {
            report: hang,
            vendor_binary: None,
            reported_at: Instant::now(),
        }
        .merge_into(&mut loss);
        let addresses: Vec<u64> = loss.faults.iter().map(|f| f.address).collect();
        assert_eq!(
            addresses,
            [0x2000, 0x3000, 0x1000],
            "the loss's first, each once"
        );
        assert_eq!(loss.description.as_deref(), Some("page fault at the hang"));
        assert_eq!(loss.vendor_infos.len(), 1);

        // A loss whose query found nothing: the hang's faults are the report's.
        let mut hang = hang_report_for_tests();
        hang.faults = vec![fault(0x1000)];
        let mut loss = hang_report_for_tests();
        loss.kind = CrashKind::DeviceLost;
        loss.faults.clear();
        ReportedHang {
            report: hang,
            vendor_binary: None,
            reported_at: Instant::now(),
        }
        .merge_into(&mut loss);
        assert_eq!(loss.faults.len(), 1);
        assert!(loss.summary.contains("0x1000"), "{}", loss.summary);
    }
}
