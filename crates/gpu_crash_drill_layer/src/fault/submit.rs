//! The fault trigger at each queue submission: whether the configured scenario fires now, and what
//! the submission hook then does (call down, return `VK_ERROR_DEVICE_LOST`, or swallow the work).

use crate::config::{LossMode, Scenario};
use crate::dispatch::{DeviceData, DeviceState};
use crate::fault::after_hang::{lock_state, loss_note, record_hang};
use crate::fault::aim::aimed;
use crate::fault::memory_fault::{at_offset, freed_target, masked_fault, memory_fault};
use crate::log::log_line;
use crate::state::bindings::Target;
use crate::state::fault::{FaultRecord, VendorEntry, REBIND_LIMIT};

/// What a queue submission hook must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubmitAction {
    /// Call the next layer.
    CallDown,
    /// Return `VK_ERROR_DEVICE_LOST` without calling down.
    Lost,
    /// Return `VK_SUCCESS` without calling down (hang: the work never runs, nothing signals).
    Swallow,
}

/// Called at the start of every `vkQueueSubmit*` / `vkQueueBindSparse` on `queue` (raw handle).
pub(crate) fn on_submit(dev: &DeviceData, queue: u64) -> SubmitAction {
    let config = &dev.instance.config;
    let mut st = lock_state(dev);
    if st.fault.lost {
        return SubmitAction::Lost;
    }
    if st.fault.hung {
        st.fault.note_hang(queue);
        return SubmitAction::Swallow;
    }
    if let Some(swallowed) = st.fault.dead {
        let st = &mut *st;
        st.fault.submits += 1;
        let n = st.fault.submits;
        if let Some(by) = st.tracker.take_rebind() {
            log_line(&format!(
                "range re-bound by {by}; losing the device now (submission {n})"
            ));
        } else if swallowed >= REBIND_LIMIT {
            let at = st
                .fault
                .record
                .as_ref()
                .and_then(|r| r.address)
                .map_or(0, |a| a.reported_address);
            log_line(&format!(
                "no re-bind of 0x{at:x} within {REBIND_LIMIT} submissions; losing the device anyway \
                 (submission {n})"
            ));
        } else {
            st.fault.dead = Some(swallowed + 1);
            return SubmitAction::Swallow;
        }
        st.fault.dead = None;
        st.tracker.unwatch();
        if let Some(record) = &st.fault.record {
            st.fault.khr_pending.push(record.khr_report());
        }
        st.fault.lost = true;
        return SubmitAction::Lost;
    }
    let before = st.fault.submits;
    st.fault.submits += 1;
    let Some(scenario) = config.scenario.clone() else {
        return SubmitAction::CallDown;
    };
    if before < config.after {
        return SubmitAction::CallDown;
    }
    let scenario = match &config.aim_file {
        Some(path) if scenario.is_memory() => {
            match aimed(&mut st.fault, &scenario, path, before + 1) {
                Some(aimed) => aimed,
                None => return SubmitAction::CallDown,
            }
        }
        _ => scenario,
    };
    let precision = config.precision;
    let target = match &scenario {
        // Recorded into a command buffer (`commands.rs`); submissions themselves pass.
        Scenario::Stall(_) | Scenario::HangInPass(_) | Scenario::HangInPipeline(_) => {
            return SubmitAction::CallDown
        }
        Scenario::Hang => {
            let record = FaultRecord {
                scenario: Scenario::Hang,
                description: format!(
                    "crash drill: GPU hang (watchdog timeout) at submission {}",
                    before + 1
                ),
                address: None,
                vendor: vec![VendorEntry {
                    description: "gpu_crash_drill injected hang (watchdog timeout)".into(),
                    code: Scenario::Hang.vendor_code(),
                    data: before + 1,
                }],
                abort_message: format!(
                    "crash drill: watchdog timeout, submission {} never completed",
                    before + 1
                ),
                device_lost: false,
            };
            log_line(&format!(
                "injected hang: submission {} and all later ones never complete{}",
                before + 1,
                loss_note(dev)
            ));
            record_hang(dev, &mut st, record);
            st.fault.hung = true;
            st.fault.note_hang(queue);
            return SubmitAction::Swallow;
        }
        Scenario::Masked { label, count } => {
            if st.fault.masked_done {
                return SubmitAction::CallDown;
            }
            let target = st.tracker.live_target(Some(label), false);
            if let Some(target) = &target {
                inject_masked(dev, &mut st, &scenario, target, *count, before + 1);
                // The driver recovered: the submission runs as usual.
                return SubmitAction::CallDown;
            }
            target
        }
        Scenario::UseAfterFree { label, offset } => {
            let st = &mut *st;
            freed_target(&st.tracker, &mut st.fault, label.as_deref(), *offset)
        }
        Scenario::OutOfBounds(label) => st.tracker.live_target(label.as_deref(), true),
        Scenario::InBounds { label, offset } => st
            .tracker
            .live_target(label.as_deref(), false)
            .map(|t| at_offset(t, *offset)),
    };
    let Some(target) = target else {
        if let Some(label) = scenario.label() {
            if !st.fault.label_warned && !st.tracker.has_seen_name(label) {
                st.fault.label_warned = true;
                let setting = match &config.aim_file {
                    Some(path) => format!(
                        "GPU_CRASH_DRILL_AIM={} ({})",
                        path.display(),
                        scenario.display()
                    ),
                    None => format!("GPU_CRASH_DRILL={}:{label}", scenario.name()),
                };
                log_line(&format!(
                    "{setting}: no object named \"{label}\" seen in the first {} \
                     submissions; passing everything through (a fault fires only if one appears)",
                    before + 1
                ));
            }
        }
        return SubmitAction::CallDown;
    };
    let record = memory_fault(&scenario, &target, precision);
    if config.loss == LossMode::AfterRebind && matches!(scenario, Scenario::UseAfterFree { .. }) {
        // The GPU "dies" here but the loss surfaces only once the freed address is mapped again,
        // as when a driver notices the fault late (the race the plugin must handle).
        let at = record.address.map_or(0, |a| a.reported_address);
        log_line(&format!(
            "injected {}: {}; submission {} and all later ones never run; the device is lost at \
             the first submission after a bind covers 0x{at:x} again",
            scenario.name(),
            record.description,
            before + 1
        ));
        st.tracker.watch(at);
        st.fault.record = Some(record);
        st.fault.dead = Some(1);
        return SubmitAction::Swallow;
    }
    log_line(&format!(
        "injected {}: {}; device lost at submission {}",
        scenario.name(),
        record.description,
        before + 1
    ));
    st.fault.khr_pending.push(record.khr_report());
    st.fault.record = Some(record);
    st.fault.lost = true;
    SubmitAction::Lost
}

/// `masked:<label>x<N>`: queues `count` masked, non-fatal reports of a read inside `target` for
/// `vkGetDeviceFaultReportsKHR` (when the application enabled `deviceFaultReportMasked`; without it
/// a driver reports no masked fault, and neither does the drill). Once per device; the device lives on.
fn inject_masked(
    dev: &DeviceData,
    st: &mut DeviceState,
    scenario: &Scenario,
    target: &Target,
    count: u32,
    submission: u64,
) {
    st.fault.masked_done = true;
    let precision = dev.instance.config.precision;
    let record = masked_fault(scenario, target, precision);
    if !dev.extensions.report_masked_enabled {
        log_line(&format!(
            "masked: the application did not enable deviceFaultReportMasked: {count} masked \
             fault(s) at submission {submission} ({}) are not reported",
            record.description
        ));
        return;
    }
    let report = record.khr_report();
    st.fault
        .khr_pending
        .extend(std::iter::repeat_n(report, count as usize));
    log_line(&format!(
        "injected masked: {count} masked, non-fatal fault report(s) at submission {submission}: \
         {}; the device keeps working",
        record.description
    ));
}

/// Number of queue submissions made so far on this device (counting those that reached the driver
/// and those the drill swallowed).
pub(crate) fn submissions(st: &DeviceState) -> u64 {
    st.fault.submits
}
