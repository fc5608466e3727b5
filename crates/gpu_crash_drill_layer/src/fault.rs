//! Fault injection and the fault queries (`VK_EXT_device_fault`, `VK_KHR_device_fault`).
//!
//! The drill decides at each queue submission whether the configured scenario fires. A fired memory
//! fault records one [`FaultRecord`] and marks the device lost (or, with `after-rebind`, swallows
//! submissions until the fault address is bound again, then marks it lost); a hang swallows the
//! submission (and every later one) so fences and semaphores never signal, without losing the
//! device. `stall`, `hang-in-pass` and `hang-in-pipeline` wait on the GPU instead: `commands.rs` records the wait, and
//! [`wait_submitted`] acts when the command buffer holding it is submitted. With
//! `GPU_CRASH_DRILL_LOSS=after-hang:<ms>` a hang becomes a loss `<ms>` later, as when a driver's
//! watchdog resets the GPU: [`lock_state`] applies it to whichever call comes first after that time,
//! and the waits that hung work blocks are cut into slices that end there ([`wait_sliced`],
//! [`idle_blocked_by_hang`]). The queries then answer from the record with the exact two-call
//! contracts of the specification.

use std::ffi::c_void;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use ash::vk;
use vulkan_fault_ffi::{
    structure_type, DeviceFaultDebugInfoKHR, DeviceFaultInfoKHR,
    DeviceFaultShaderAbortMessageInfoKHR, DeviceFaultVendorBinaryHeaderVersionOneKHR,
};

use crate::config::{aim_line, AimLine, LossMode, Scenario};
use crate::dispatch::{DeviceData, DeviceState};
use crate::log::log_line;
use crate::state::bindings::{DeviceTracker, Target};
use crate::state::fault::{
    copy_c_string, FaultAddress, FaultRecord, FaultState, VendorEntry, WaitInjection, REBIND_LIMIT,
    VENDOR_CODE_RESET,
};

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

/// Locks the device state with a due `after-hang` loss applied, so that from its time on every
/// decision and query sees the device lost, whichever call comes first. (A timer checked here rather
/// than a thread that sets a flag: nothing outlives the device, and no call can see the deadline
/// passed but the device not lost yet.)
pub(crate) fn lock_state(dev: &DeviceData) -> MutexGuard<'_, DeviceState> {
    let mut st = dev.lock();
    if let LossMode::AfterHang { ms, label } = &dev.instance.config.loss {
        let due = st.fault.loss_at(*ms).is_some_and(|at| Instant::now() >= at);
        if due && !st.fault.lost {
            reset_after_hang(
                &mut st,
                *ms,
                label.as_deref(),
                dev.instance.config.precision,
            );
        }
    }
    st
}

/// The simulated watchdog reset: the hung device is lost now, and the fault info a driver would
/// give after the reset (watchdog timeout, device lost, and with a label a read fault inside that
/// live object) becomes what the queries report.
fn reset_after_hang(st: &mut DeviceState, ms: u64, label: Option<&str>, precision: u64) {
    st.fault.lost = true;
    let Some(hang) = st.fault.held.take() else {
        return;
    };
    // The object live when the GPU hung; one named so only later is found now.
    let target = st
        .fault
        .target_at_hang
        .take()
        .or_else(|| label.and_then(|l| st.tracker.live_target(Some(l), false)));
    let record = lost_after_hang(&hang, ms, target.as_ref(), precision);
    let blamed = match (&target, label) {
        (Some(t), _) => format!(
            "; fault address 0x{:x} inside {}",
            record.address.map_or(0, |a| a.reported_address),
            t.describe()
        ),
        (None, Some(l)) => format!("; no live object named \"{l}\": no fault address reported"),
        (None, None) => String::new(),
    };
    log_line(&format!(
        "simulated watchdog reset {ms} ms after the hang: device lost{blamed}"
    ));
    st.fault.khr_pending.push(record.khr_report());
    st.fault.record = Some(record);
}

/// The record of a hang turned into a loss by a reset `ms` later: the hang's watchdog entry, an
/// entry for the reset, and with `target` a read fault inside it (its middle, 4-byte aligned).
fn lost_after_hang(
    hang: &FaultRecord,
    ms: u64,
    target: Option<&Target>,
    precision: u64,
) -> FaultRecord {
    let mut description = format!(
        "{}; device lost when the GPU was reset {ms} ms later",
        hang.description
    );
    let address = target.map(|t| {
        let r = t.range;
        let at = r.base + ((r.size / 2) & !3);
        description.push_str(&format!(
            "; read inside {} [0x{:x}, 0x{:x}) at 0x{at:x}",
            t.describe(),
            r.base,
            r.base.saturating_add(r.size)
        ));
        FaultAddress {
            address_type: vk::DeviceFaultAddressTypeEXT::READ_INVALID,
            reported_address: at,
            precision,
        }
    });
    let mut vendor = hang.vendor.clone();
    vendor.push(VendorEntry {
        description: "gpu_crash_drill: device lost after GPU reset (watchdog timeout)".into(),
        code: VENDOR_CODE_RESET,
        data: ms,
    });
    FaultRecord {
        scenario: hang.scenario.clone(),
        description,
        address,
        vendor,
        abort_message: hang.abort_message.clone(),
        device_lost: true,
    }
}

/// Where a hang's record goes: reported at once, or with `after-hang` held back until the reset.
fn record_hang(dev: &DeviceData, st: &mut DeviceState, record: FaultRecord) {
    if let LossMode::AfterHang { label, .. } = &dev.instance.config.loss {
        st.fault.target_at_hang = label
            .as_deref()
            .and_then(|l| st.tracker.live_target(Some(l), false));
        st.fault.held = Some(record);
    } else {
        st.fault.khr_pending.push(record.khr_report());
        st.fault.record = Some(record);
    }
}

/// `"; the device is lost <ms> ms later (...)"` for the hang's log line under `after-hang`, else
/// nothing.
fn loss_note(dev: &DeviceData) -> String {
    match &dev.instance.config.loss {
        LossMode::AfterHang { ms, label } => format!(
            "; the device is lost {ms} ms later (simulated watchdog reset{})",
            label
                .as_deref()
                .map(|l| format!(", fault inside \"{l}\""))
                .unwrap_or_default()
        ),
        _ => String::new(),
    }
}

/// Before the hang is known, the longest one slice of [`wait_sliced`] blocks in the driver: a wait
/// that began before the hang (on work submitted later, or a timeline value signalled later) learns
/// the loss time within this.
const SLICE_BEFORE_HANG: Duration = Duration::from_millis(5);

/// A fence or semaphore wait (`wait(timeout_ns)` calls the driver) that, under `after-hang`, ends
/// with `VK_ERROR_DEVICE_LOST` at the loss time even though the driver's own wait cannot be
/// interrupted: it waits in slices that end at the loss time (or every [`SLICE_BEFORE_HANG`] until a
/// hang began). Otherwise one call with the application's timeout.
pub(crate) fn wait_sliced(
    dev: &DeviceData,
    timeout_ns: u64,
    mut wait: impl FnMut(u64) -> vk::Result,
) -> vk::Result {
    let config = &dev.instance.config;
    let (LossMode::AfterHang { ms, .. }, Some(_)) = (&config.loss, &config.scenario) else {
        return wait(timeout_ns);
    };
    let ms = *ms;
    // `None`: no end (UINT64_MAX ns, about 585 years, does not fit an `Instant`).
    let until = Instant::now().checked_add(Duration::from_nanos(timeout_ns));
    let mut asked = false;
    loop {
        let loss_at = {
            let st = lock_state(dev);
            if st.fault.lost {
                return vk::Result::ERROR_DEVICE_LOST;
            }
            st.fault.loss_at(ms)
        };
        let now = Instant::now();
        if asked && until.is_some_and(|u| now >= u) {
            return vk::Result::TIMEOUT;
        }
        asked = true;
        let slice_end = loss_at.unwrap_or(now + SLICE_BEFORE_HANG);
        let end = until.map_or(slice_end, |u| u.min(slice_end));
        let ns = u64::try_from(end.saturating_duration_since(now).as_nanos()).unwrap_or(u64::MAX);
        let r = wait(ns);
        if r != vk::Result::TIMEOUT {
            return r;
        }
        // A driver that answers TIMEOUT before the time asked (a fence never submitted to it) must
        // not turn this into a busy loop.
        let left = end.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left.min(Duration::from_millis(1)));
        }
    }
}

/// `after-hang`: `vkQueueWaitIdle` on a queue holding hung work (`queue`), or `vkDeviceWaitIdle`
/// (`None`) once any queue does, blocks until the loss and returns `VK_ERROR_DEVICE_LOST`, as on a
/// driver whose watchdog resets the GPU. The driver is not called: `hang`'s work never reached it,
/// and its wait on the never-set event of `hang-in-pass` / `hang-in-pipeline` could not be interrupted. `None`: not blocked
/// by a hang (call the driver).
pub(crate) fn idle_blocked_by_hang(dev: &DeviceData, queue: Option<u64>) -> Option<vk::Result> {
    let LossMode::AfterHang { ms, .. } = dev.instance.config.loss else {
        return None;
    };
    loop {
        let loss_at = {
            let st = lock_state(dev);
            if st.fault.lost {
                return Some(vk::Result::ERROR_DEVICE_LOST);
            }
            let hung = match queue {
                Some(q) => st.fault.hung_queues.contains(&q),
                None => !st.fault.hung_queues.is_empty(),
            };
            if !hung {
                return None;
            }
            st.fault.loss_at(ms)
        };
        // Past what an `Instant` holds the loss never comes: block as a plain hang would.
        let left = loss_at.map_or(Duration::from_secs(1), |at| {
            at.saturating_duration_since(Instant::now())
        });
        std::thread::sleep(left);
    }
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

/// The record of a masked (non-fatal) read fault inside the live `target`: its middle, 4-byte
/// aligned; `DEVICE_LOST` clear.
fn masked_fault(scenario: &Scenario, target: &Target, precision: u64) -> FaultRecord {
    let r = target.range;
    let address = r.base + ((r.size / 2) & !3);
    FaultRecord {
        scenario: scenario.clone(),
        description: format!(
            "crash drill: masked read fault inside {} [0x{:x}, 0x{:x}) at 0x{address:x}, \
             recovered by the driver",
            target.describe(),
            r.base,
            r.base.saturating_add(r.size)
        ),
        address: Some(FaultAddress {
            address_type: vk::DeviceFaultAddressTypeEXT::READ_INVALID,
            reported_address: address,
            precision,
        }),
        vendor: vec![VendorEntry {
            description: "gpu_crash_drill injected masked fault (recovered)".into(),
            code: scenario.vendor_code(),
            data: address,
        }],
        abort_message: String::new(),
        device_lost: false,
    }
}

/// Longest first line of an aim file that is read (a label and an offset are far shorter).
const AIM_LINE_LIMIT: u64 = 64 * 1024;

/// The first line of the aim file at `path`, as far as it is there; `None` when it cannot be read
/// (missing, or not readable yet): the drill keeps waiting.
fn read_aim_file(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    BufReader::new(file.take(AIM_LINE_LIMIT))
        .read_until(b'\n', &mut line)
        .ok()?;
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// `GPU_CRASH_DRILL_AIM`: the memory scenario `scenario` aimed by the file at `path`, read now (at
/// submission `n`) unless it was before; `None` while the file has no usable first line. The first
/// aim read stays for the device's life; a line without a label is logged once and waited past.
fn aimed(fault: &mut FaultState, scenario: &Scenario, path: &Path, n: u64) -> Option<Scenario> {
    if let Some(aim) = &fault.aim {
        return Some(aim.clone());
    }
    match aim_line(scenario, &read_aim_file(path)?) {
        AimLine::NotYet => None,
        AimLine::NoLabel(line) => {
            if fault.aim_no_label.as_deref() != Some(line.as_str()) {
                log_line(&format!(
                    "GPU_CRASH_DRILL_AIM={}: first line \"{}\" has no label (expected \
                     <label>[@<offset>]); waiting for one",
                    path.display(),
                    line.escape_debug()
                ));
                fault.aim_no_label = Some(line);
            }
            None
        }
        AimLine::Aim(aim) => {
            log_line(&format!(
                "GPU_CRASH_DRILL_AIM={}: aim taken at submission {n}: {}",
                path.display(),
                aim.display()
            ));
            fault.aim = Some(aim.clone());
            Some(aim)
        }
    }
}

/// Number of queue submissions made so far on this device (counting those that reached the driver
/// and those the drill swallowed).
pub(crate) fn submissions(st: &crate::dispatch::DeviceState) -> u64 {
    st.fault.submits
}

/// The command buffer holding the drill's recorded, not yet submitted wait.
pub(crate) fn pending_wait(dev: &DeviceData) -> Option<u64> {
    let config = &dev.instance.config;
    if !config.scenario.as_ref().is_some_and(|s| s.records_wait()) {
        return None;
    }
    match dev.lock().fault.wait {
        WaitInjection::Recorded(cb) => Some(cb),
        _ => None,
    }
}

/// The driver accepted a submission on `queue` containing `cb`, which holds the drill's wait.
pub(crate) fn wait_submitted(dev: &Arc<DeviceData>, cb: u64, queue: u64) {
    let mut st = lock_state(dev);
    if st.fault.wait != WaitInjection::Recorded(cb) {
        return;
    }
    st.fault.wait = WaitInjection::Submitted;
    let n = st.fault.submits;
    match &dev.instance.config.scenario {
        Some(Scenario::Stall(ms)) => {
            let ms = *ms;
            drop(st);
            log_line(&format!(
                "injected stall: submission {n} (command buffer 0x{cb:x}) holds the GPU for {ms} ms \
                 (vkCmdWaitEvents on a layer event), then everything completes"
            ));
            release_stall_after(dev.clone(), ms);
        }
        Some(scenario @ (Scenario::HangInPass(arg) | Scenario::HangInPipeline(arg))) => {
            // The pass or pipeline's name, without the `#<n>` that picked the occurrence.
            let label = crate::config::hang_target(arg).0;
            let place = match scenario {
                Scenario::HangInPipeline(_) => format!("at pipeline \"{label}\""),
                _ => format!("in pass \"{label}\""),
            };
            // What a watchdog would report; the device is not lost (only the KHR report shows it).
            let record = FaultRecord {
                scenario: scenario.clone(),
                description: format!(
                    "crash drill: GPU hang (watchdog timeout) {place} at submission {n}"
                ),
                address: None,
                vendor: vec![VendorEntry {
                    description: format!(
                        "gpu_crash_drill injected {} (watchdog timeout)",
                        scenario.name()
                    ),
                    code: scenario.vendor_code(),
                    data: n,
                }],
                abort_message: format!("crash drill: watchdog timeout {place}"),
                device_lost: false,
            };
            let note = loss_note(dev);
            record_hang(dev, &mut st, record);
            st.fault.note_hang(queue);
            log_line(&format!(
                "hang {place} reached the GPU with submission {n}; it never completes{note}"
            ));
        }
        _ => {}
    }
}

/// Sets the drill event from a host thread after `ms` milliseconds.
fn release_stall_after(dev: Arc<DeviceData>, ms: u64) {
    let thread_dev = dev.clone();
    let spawned = std::thread::Builder::new()
        .name("gpu_crash_drill stall".into())
        .spawn(move || {
            crate::log::guard("the stall thread", (), || {
                std::thread::sleep(Duration::from_millis(ms));
                set_drill_event(&thread_dev, &format!("stall released after {ms} ms"));
            })
        });
    if spawned.is_err() {
        set_drill_event(
            &dev,
            "could not start the stall thread; stall released at once",
        );
    }
}

/// Sets the drill event (unless the device is gone) and logs `line`.
pub(crate) fn set_drill_event(dev: &DeviceData, line: &str) {
    let slot = dev.event_slot();
    if let (Some(event), Some(set)) = (*slot, dev.fns.set_event) {
        // SAFETY: the layer's live event of this device (the slot is emptied, under this lock,
        // before the event and the device are destroyed); vkSetEvent never calls back into the layer.
        let r = unsafe { set(dev.handle, event) };
        if r == vk::Result::SUCCESS {
            log_line(line);
        } else {
            log_line(&format!("vkSetEvent on the drill event failed: {r:?}"));
        }
    }
}

/// `target` with its in-bounds fault point at `offset` bytes from its base. An offset the object does
/// not cover logs one line and leaves the middle: an in-bounds fault must stay inside the object.
fn at_offset(mut target: Target, offset: Option<u64>) -> Target {
    let Some(offset) = offset else {
        return target;
    };
    let r = target.range;
    if offset < r.size {
        target.fault_at = Some(r.base + offset);
    } else {
        log_line(&format!(
            "in-bounds offset {offset} (0x{offset:x}) is not inside {} ({} bytes); faulting at \
             its middle instead",
            target.describe(),
            r.size
        ));
    }
    target
}

/// The object a use-after-free blames. With a label and an offset: the most recently unbound object of
/// that name, faulting at exactly its base + `offset` (whatever covers that address now). An offset the
/// object does not cover logs one line (once per device) and falls back to what happens without one:
/// a point of a freed range of that name that no live object covers.
fn freed_target(
    tracker: &DeviceTracker,
    fault: &mut FaultState,
    label: Option<&str>,
    offset: Option<u64>,
) -> Option<Target> {
    if let (Some(label), Some(offset)) = (label, offset) {
        if let Some(t) = tracker.last_freed(label) {
            let r = t.range;
            if offset < r.size {
                return Some(Target {
                    fault_at: Some(r.base + offset),
                    ..t
                });
            }
            if !fault.offset_warned {
                fault.offset_warned = true;
                log_line(&format!(
                    "use-after-free offset {offset} (0x{offset:x}) is not inside {} ({} bytes); \
                     faulting at a point of its freed range that no live object covers instead",
                    t.describe(),
                    r.size
                ));
            }
        }
    }
    tracker.freed_target(label)
}

/// Builds the record of a memory fault on `target`.
fn memory_fault(scenario: &Scenario, target: &Target, precision: u64) -> FaultRecord {
    let r = target.range;
    let (address, address_type, what) = match scenario {
        Scenario::OutOfBounds(_) => (
            r.base.saturating_add(r.size),
            vk::DeviceFaultAddressTypeEXT::WRITE_INVALID,
            "write past the end of",
        ),
        Scenario::InBounds { .. } => (
            target.fault_at.unwrap_or(r.base + ((r.size / 2) & !3)),
            vk::DeviceFaultAddressTypeEXT::READ_INVALID,
            "read inside",
        ),
        _ => (
            target.fault_at.unwrap_or(r.base + ((r.size / 2) & !3)),
            vk::DeviceFaultAddressTypeEXT::WRITE_INVALID,
            "write into freed",
        ),
    };
    let label = target.name.clone().unwrap_or_else(|| target.describe());
    FaultRecord {
        scenario: scenario.clone(),
        description: format!(
            "crash drill: {} {what} {} [0x{:x}, 0x{:x}) at 0x{address:x}",
            scenario.name(),
            target.describe(),
            r.base,
            r.base.saturating_add(r.size)
        ),
        address: Some(FaultAddress {
            address_type,
            reported_address: address,
            precision,
        }),
        vendor: vec![VendorEntry {
            description: format!("gpu_crash_drill injected {}", scenario.name()),
            code: scenario.vendor_code(),
            data: address,
        }],
        abort_message: format!("crash drill: shader abort in {label}"),
        device_lost: true,
    }
}

/// True when the drill lost this device: every call that can return `VK_ERROR_DEVICE_LOST` does.
pub(crate) fn is_lost(dev: &DeviceData) -> bool {
    lock_state(dev).fault.is_lost()
}

/// Size of the VersionOne header.
pub(crate) const HEADER_SIZE: usize =
    std::mem::size_of::<DeviceFaultVendorBinaryHeaderVersionOneKHR>();

/// The vendor binary: a VersionOne header followed by the NUL-terminated application and engine names
/// at the offsets the header gives (0 = absent).
pub(crate) fn vendor_binary(dev: &DeviceData) -> Vec<u8> {
    let app = &dev.instance.app;
    let mut tail = Vec::new();
    let mut string_at = |s: &Option<String>| -> u32 {
        match s {
            Some(s) => {
                let off = HEADER_SIZE + tail.len();
                tail.extend_from_slice(s.as_bytes());
                tail.push(0);
                off as u32
            }
            None => 0,
        }
    };
    let application_name_offset = string_at(&app.application_name);
    let engine_name_offset = string_at(&app.engine_name);
    let header = DeviceFaultVendorBinaryHeaderVersionOneKHR {
        header_size: HEADER_SIZE as u32,
        header_version: vk::DeviceFaultVendorBinaryHeaderVersionEXT::ONE,
        vendor_id: dev.physical.vendor_id,
        device_id: dev.physical.device_id,
        driver_version: dev.physical.driver_version,
        pipeline_cache_uuid: dev.physical.pipeline_cache_uuid,
        application_name_offset,
        application_version: app.application_version,
        engine_name_offset,
        engine_version: app.engine_version,
        api_version: app.api_version,
    };
    let mut out = Vec::with_capacity(HEADER_SIZE + tail.len());
    // Field by field in declaration order: the struct is repr(C) with only 4-byte fields and a
    // 16-byte array at a 4-byte offset, so there is no padding and this equals its memory image.
    for v in [
        header.header_size,
        header.header_version.as_raw() as u32,
        header.vendor_id,
        header.device_id,
        header.driver_version,
    ] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    out.extend_from_slice(&header.pipeline_cache_uuid);
    for v in [
        header.application_name_offset,
        header.application_version,
        header.engine_name_offset,
        header.engine_version,
        header.api_version,
    ] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    debug_assert_eq!(out.len(), HEADER_SIZE);
    out.extend_from_slice(&tail);
    out
}

/// Copies a vendor binary into an application buffer of `capacity` bytes following the spec: a
/// buffer smaller than the header receives nothing (size 0); otherwise as much as fits. Returns the
/// number of bytes written and whether everything fit.
///
/// # Safety
/// `dst` must be valid for `capacity` bytes of writes.
unsafe fn write_vendor_binary(binary: &[u8], dst: *mut c_void, capacity: usize) -> (usize, bool) {
    if binary.is_empty() {
        return (0, true);
    }
    if capacity < HEADER_SIZE {
        return (0, false);
    }
    let n = capacity.min(binary.len());
    // SAFETY: `dst` is valid for `capacity >= n` bytes per the caller; the source is a live slice.
    unsafe { std::ptr::copy_nonoverlapping(binary.as_ptr(), dst.cast::<u8>(), n) };
    (n, n == binary.len())
}

/// `GPU_CRASH_DRILL_FAULT_QUERY_DELAY_MS`: a driver that takes its time to answer a fault query
/// (called on the query's first call, the one that asks for the counts).
fn stuck_in_fault_query(dev: &DeviceData) {
    let Some(slow) = dev.instance.config.fault_query_delay else {
        return;
    };
    let lost = lock_state(dev).fault.lost;
    if slow.when_lost.is_none_or(|when| when == lost) {
        std::thread::sleep(slow.delay);
    }
}

/// `vkGetDeviceFaultInfoEXT` for a device whose fault the layer serves.
///
/// # Safety
/// Arguments as the Vulkan spec requires for `vkGetDeviceFaultInfoEXT`.
pub(crate) unsafe fn get_fault_info_ext(
    dev: &DeviceData,
    counts: *mut vk::DeviceFaultCountsEXT<'_>,
    info: *mut vk::DeviceFaultInfoEXT<'_>,
) -> vk::Result {
    if info.is_null() {
        stuck_in_fault_query(dev); // once per query: its first call asks for the counts
    }
    let record = {
        let st = lock_state(dev);
        st.fault.record.clone().filter(|_| st.fault.lost)
    };
    let Some(record) = record else {
        if let Some(next) = dev
            .fns
            .get_device_fault_info_ext
            .filter(|_| dev.extensions.ext_fault_native)
        {
            // SAFETY: the driver has the extension natively; arguments are forwarded unchanged.
            return unsafe { next(dev.handle, counts, info) };
        }
        if counts.is_null() {
            return vk::Result::SUCCESS;
        }
        // No fault happened: nothing to report.
        // SAFETY: `counts` is a valid pointer per the spec.
        unsafe {
            (*counts).address_info_count = 0;
            (*counts).vendor_info_count = 0;
            (*counts).vendor_binary_size = 0;
            if !info.is_null() {
                copy_c_string(&mut (*info).description, "no device fault recorded");
            }
        }
        return vk::Result::SUCCESS;
    };
    if counts.is_null() {
        return vk::Result::ERROR_UNKNOWN;
    }
    let binary = if dev.extensions.vendor_binary_enabled {
        vendor_binary(dev)
    } else {
        Vec::new()
    };
    let address_count = u32::from(record.address.is_some());
    let vendor_count = record.vendor.len() as u32;
    // SAFETY: `counts` is valid per the spec; `info`, when non-null, is valid with arrays of at least
    // the counts the application wrote into `counts`.
    unsafe {
        if info.is_null() {
            (*counts).address_info_count = address_count;
            (*counts).vendor_info_count = vendor_count;
            (*counts).vendor_binary_size = binary.len() as u64;
            return vk::Result::SUCCESS;
        }
        let mut complete = true;
        copy_c_string(&mut (*info).description, &record.description);

        let n_addr = (*counts).address_info_count.min(address_count);
        if n_addr > 0 && !(*info).p_address_infos.is_null() {
            if let Some(a) = record.address {
                *(*info).p_address_infos = vk::DeviceFaultAddressInfoEXT {
                    address_type: a.address_type,
                    reported_address: a.reported_address,
                    address_precision: a.precision,
                };
            }
        }
        complete &= n_addr == address_count;
        (*counts).address_info_count = n_addr;

        let n_vendor = (*counts).vendor_info_count.min(vendor_count);
        if !(*info).p_vendor_infos.is_null() {
            for (i, entry) in record.vendor.iter().take(n_vendor as usize).enumerate() {
                let v = &mut *(*info).p_vendor_infos.add(i);
                copy_c_string(&mut v.description, &entry.description);
                v.vendor_fault_code = entry.code;
                v.vendor_fault_data = entry.data;
            }
        }
        complete &= n_vendor == vendor_count;
        (*counts).vendor_info_count = n_vendor;

        let capacity = if (*info).p_vendor_binary_data.is_null() {
            0
        } else {
            usize::try_from((*counts).vendor_binary_size).unwrap_or(usize::MAX)
        };
        let (written, fit) = write_vendor_binary(&binary, (*info).p_vendor_binary_data, capacity);
        complete &= fit;
        (*counts).vendor_binary_size = written as u64;

        if complete {
            vk::Result::SUCCESS
        } else {
            vk::Result::INCOMPLETE
        }
    }
}

/// `vkGetDeviceFaultReportsKHR`: reports are drained as they are returned.
///
/// # Safety
/// Arguments as the spec requires: `count` valid; `infos` null or valid for `*count` elements.
pub(crate) unsafe fn get_fault_reports_khr(
    dev: &DeviceData,
    timeout: u64,
    count: *mut u32,
    infos: *mut DeviceFaultInfoKHR,
) -> vk::Result {
    if infos.is_null() {
        stuck_in_fault_query(dev); // once per query: its first call asks for the count
    }
    if count.is_null() {
        return vk::Result::ERROR_UNKNOWN;
    }
    // Blocks until a report exists or the timeout passes (a hang or loss on another thread counts).
    let deadline = Instant::now().checked_add(Duration::from_nanos(timeout));
    loop {
        let mut st = lock_state(dev);
        if !st.fault.khr_pending.is_empty() {
            // SAFETY: validity of `count` / `infos` per the caller.
            unsafe {
                if infos.is_null() {
                    *count = st.fault.khr_pending.len() as u32;
                    return vk::Result::SUCCESS;
                }
                let n = (*count as usize).min(st.fault.khr_pending.len());
                for (i, report) in st.fault.khr_pending.drain(..n).enumerate() {
                    let dst = infos.add(i);
                    // Keep the application's sType/pNext; fill the rest.
                    let (s_type, p_next) = ((*dst).s_type, (*dst).p_next);
                    *dst = report;
                    (*dst).s_type = s_type;
                    (*dst).p_next = p_next;
                }
                *count = n as u32;
                return if st.fault.khr_pending.is_empty() {
                    vk::Result::SUCCESS
                } else {
                    vk::Result::INCOMPLETE
                };
            }
        }
        drop(st);
        if deadline.is_some_and(|d| Instant::now() >= d) {
            // SAFETY: `count` is valid.
            unsafe { *count = 0 };
            return vk::Result::TIMEOUT;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `vkGetDeviceFaultDebugInfoKHR`: the vendor binary, with the shader abort message in a chained
/// `VkDeviceFaultShaderAbortMessageInfoKHR`.
///
/// # Safety
/// `debug_info` must be valid, with a valid `pNext` chain and buffers of the sizes it states.
pub(crate) unsafe fn get_fault_debug_info_khr(
    dev: &DeviceData,
    debug_info: *mut DeviceFaultDebugInfoKHR,
) -> vk::Result {
    if debug_info.is_null() {
        return vk::Result::ERROR_UNKNOWN;
    }
    let record = lock_state(dev).fault.record.clone();
    let (binary, message) = match &record {
        Some(r) => (
            if dev.extensions.vendor_binary_enabled {
                vendor_binary(dev)
            } else {
                Vec::new()
            },
            {
                let mut m = r.abort_message.clone().into_bytes();
                m.push(0);
                m
            },
        ),
        None => (Vec::new(), Vec::new()),
    };
    let mut complete = true;
    // SAFETY: `debug_info` and its chain are valid per the caller; buffers hold the stated sizes.
    unsafe {
        let d = &mut *debug_info;
        if d.p_vendor_binary_data.is_null() {
            d.vendor_binary_size = binary.len() as u32;
        } else {
            let (written, fit) = write_vendor_binary(
                &binary,
                d.p_vendor_binary_data,
                d.vendor_binary_size as usize,
            );
            d.vendor_binary_size = written as u32;
            complete &= fit;
        }
        let mut p = d.p_next.cast::<vk::BaseOutStructure<'_>>();
        while !p.is_null() {
            if (*p).s_type == structure_type::DEVICE_FAULT_SHADER_ABORT_MESSAGE_INFO_KHR {
                let m = &mut *p.cast::<DeviceFaultShaderAbortMessageInfoKHR>();
                if m.p_message_data.is_null() {
                    m.message_data_size = message.len() as u64;
                } else {
                    let cap = usize::try_from(m.message_data_size).unwrap_or(usize::MAX);
                    let n = cap.min(message.len());
                    std::ptr::copy_nonoverlapping(
                        message.as_ptr(),
                        m.p_message_data.cast::<u8>(),
                        n,
                    );
                    m.message_data_size = n as u64;
                    complete &= n == message.len();
                }
            }
            p = (*p).p_next;
        }
    }
    if complete {
        vk::Result::SUCCESS
    } else {
        vk::Result::INCOMPLETE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::bindings::Range;

    fn target(base: u64, size: u64) -> Target {
        Target {
            object_type: vk::ObjectType::BUFFER,
            handle: 7,
            name: Some("particles".into()),
            range: Range { base, size },
            fault_at: None,
        }
    }

    #[test]
    fn addresses_per_scenario() {
        let t = target(0x1_0001_0000, 0x1000);
        let oob = memory_fault(&Scenario::OutOfBounds(None), &t, 4096)
            .address
            .unwrap();
        assert_eq!(oob.reported_address, 0x1_0001_1000);
        assert_eq!(
            oob.address_type,
            vk::DeviceFaultAddressTypeEXT::WRITE_INVALID
        );
        let in_bounds = Scenario::InBounds {
            label: None,
            offset: None,
        };
        let inb = memory_fault(&in_bounds, &t, 4096).address.unwrap();
        assert!(inb.reported_address >= t.range.base && inb.reported_address < 0x1_0001_1000);
        assert_eq!(
            inb.address_type,
            vk::DeviceFaultAddressTypeEXT::READ_INVALID
        );
        // At an offset: exactly base + offset, and the precision is reported, not applied.
        let inb = memory_fault(&in_bounds, &at_offset(t.clone(), Some(0x15)), 4)
            .address
            .unwrap();
        assert_eq!((inb.reported_address, inb.precision), (0x1_0001_0015, 4));
        let last = at_offset(t.clone(), Some(0xfff)).fault_at;
        assert_eq!(last, Some(0x1_0001_0fff));
        // Not inside the object: the middle, as without an offset.
        for outside in [0x1000, u64::MAX] {
            let inb = memory_fault(&in_bounds, &at_offset(t.clone(), Some(outside)), 4)
                .address
                .unwrap();
            assert_eq!(inb.reported_address, 0x1_0001_0800);
        }
        let uaf = memory_fault(
            &Scenario::UseAfterFree {
                label: None,
                offset: None,
            },
            &t,
            256,
        );
        assert!(uaf.abort_message.ends_with("particles"));
        assert_eq!(uaf.address.unwrap().precision, 256);
    }

    #[test]
    fn use_after_free_at_an_offset_is_exactly_base_plus_offset_of_the_last_freed() {
        let mut tracker = DeviceTracker::default();
        let mut fault = FaultState::default();
        let mem = tracker.allocate(10, 1 << 20).range;
        for (handle, offset, size) in [(20u64, 0u64, 0x2000u64), (21, 0x4000, 0x1000)] {
            tracker.create_resource(vk::ObjectType::BUFFER, handle, size);
            tracker.set_name(vk::ObjectType::BUFFER, handle, Some("slab".into()));
            tracker.bind_resource(vk::ObjectType::BUFFER, handle, 10, offset);
        }
        tracker.destroy_resource(vk::ObjectType::BUFFER, 20);
        tracker.destroy_resource(vk::ObjectType::BUFFER, 21);
        // A live buffer took over the place base + 0x10 of the last freed "slab": still exactly there.
        tracker.create_resource(vk::ObjectType::BUFFER, 22, 0x100);
        tracker.bind_resource(vk::ObjectType::BUFFER, 22, 10, 0x4000);
        let t = freed_target(&tracker, &mut fault, Some("slab"), Some(0x10)).unwrap();
        assert_eq!((t.handle, t.fault_at), (21, Some(mem.base + 0x4010)));
        let uaf = Scenario::UseAfterFree {
            label: Some("slab".into()),
            offset: Some(0x10),
        };
        let a = memory_fault(&uaf, &t, 4).address.unwrap();
        assert_eq!(a.reported_address, mem.base + 0x4010);
        assert_eq!(a.address_type, vk::DeviceFaultAddressTypeEXT::WRITE_INVALID);
        let last = freed_target(&tracker, &mut fault, Some("slab"), Some(0xfff)).unwrap();
        assert_eq!(last.fault_at, Some(mem.base + 0x4fff));
        assert!(!fault.offset_warned);
        // Not inside the last freed one (0x1000 bytes): what happens without an offset, logged once.
        let without = freed_target(&tracker, &mut fault, Some("slab"), None).unwrap();
        let fallback = freed_target(&tracker, &mut fault, Some("slab"), Some(0x1000)).unwrap();
        assert_eq!(
            (fallback.handle, fallback.fault_at),
            (without.handle, without.fault_at)
        );
        assert_ne!(fallback.fault_at, Some(mem.base + 0x5000));
        assert!(fault.offset_warned);
        // No object of that name freed yet: no target.
        assert!(freed_target(&tracker, &mut fault, Some("other"), Some(0)).is_none());
    }

    #[test]
    fn an_aim_file_is_waited_for_then_taken_once() {
        let dir = std::env::temp_dir().join(format!(
            "gpu_crash_drill-aim-unit-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("aim");
        let _ = std::fs::remove_file(&path);
        let mut fault = FaultState::default();
        let scenario = Scenario::InBounds {
            label: Some("keep".into()),
            offset: Some(4),
        };
        // Missing, empty, a first line without a label: not yet.
        assert_eq!(aimed(&mut fault, &scenario, &path, 1), None);
        std::fs::write(&path, "").unwrap();
        assert_eq!(aimed(&mut fault, &scenario, &path, 2), None);
        std::fs::write(&path, "@0x1e0\n").unwrap();
        assert_eq!(aimed(&mut fault, &scenario, &path, 3), None);
        assert_eq!(fault.aim_no_label.as_deref(), Some("@0x1e0"));
        assert_eq!(fault.aim, None);
        std::fs::write(&path, "slab@0x1e0\nsecond line\n").unwrap();
        let slab = Scenario::InBounds {
            label: Some("slab".into()),
            offset: Some(0x1e0),
        };
        assert_eq!(aimed(&mut fault, &scenario, &path, 4), Some(slab.clone()));
        // Fixed once taken: a new line, or no file at all, changes nothing.
        std::fs::write(&path, "other@8\n").unwrap();
        assert_eq!(aimed(&mut fault, &scenario, &path, 5), Some(slab.clone()));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(aimed(&mut fault, &scenario, &path, 6), Some(slab));
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn a_reset_after_a_hang_reports_watchdog_loss_and_the_labelled_object() {
        let hang = FaultRecord {
            scenario: Scenario::Hang,
            description: "crash drill: GPU hang (watchdog timeout) at submission 4".into(),
            address: None,
            vendor: vec![VendorEntry {
                description: "hang".into(),
                code: 4,
                data: 4,
            }],
            abort_message: "watchdog".into(),
            device_lost: false,
        };
        use vulkan_fault_ffi::DeviceFaultFlagsKHR as F;
        let held = hang.khr_report().flags;
        assert!(held.contains(F::VENDOR | F::WATCHDOG_TIMEOUT));
        assert!(!held.contains(F::DEVICE_LOST));

        let plain = lost_after_hang(&hang, 300, None, 4096);
        assert_eq!(
            plain.khr_report().flags,
            F::VENDOR | F::WATCHDOG_TIMEOUT | F::DEVICE_LOST
        );
        let codes: Vec<_> = plain.vendor.iter().map(|v| (v.code, v.data)).collect();
        assert_eq!(codes, [(4, 4), (VENDOR_CODE_RESET, 300)]);
        assert!(
            plain.description.contains("reset 300 ms later"),
            "{}",
            plain.description
        );

        let t = target(0x1_0002_0000, 0x1000);
        let blamed = lost_after_hang(&hang, 300, Some(&t), 256);
        let report = blamed.khr_report();
        assert_eq!(
            report.flags,
            F::VENDOR | F::WATCHDOG_TIMEOUT | F::DEVICE_LOST | F::MEMORY_ADDRESS
        );
        let a = report.fault_address_info;
        assert_eq!(a.address_type, vk::DeviceFaultAddressTypeEXT::READ_INVALID);
        assert!(a.reported_address >= t.range.base && a.reported_address < 0x1_0002_1000);
        assert_eq!(a.address_precision, 256);
        assert!(
            blamed.description.contains("particles"),
            "{}",
            blamed.description
        );
    }

    #[test]
    fn a_masked_fault_is_a_read_inside_the_object_without_device_lost() {
        use vulkan_fault_ffi::DeviceFaultFlagsKHR as F;
        let t = target(0x1_0003_0000, 0x1000);
        let scenario = Scenario::Masked {
            label: "particles".into(),
            count: 3,
        };
        let report = masked_fault(&scenario, &t, 4).khr_report();
        assert_eq!(report.flags, F::VENDOR | F::MEMORY_ADDRESS);
        let a = report.fault_address_info;
        assert_eq!(a.address_type, vk::DeviceFaultAddressTypeEXT::READ_INVALID);
        assert_eq!(
            (a.reported_address, a.address_precision),
            (0x1_0003_0800, 4)
        );
        assert_eq!(report.vendor_info.vendor_fault_code, 8);
    }

    #[test]
    fn small_vendor_buffer_gets_nothing() {
        let bin = vec![7u8; HEADER_SIZE + 10];
        let mut dst = vec![0u8; HEADER_SIZE - 1];
        // SAFETY: `dst` holds `dst.len()` bytes.
        let (n, fit) = unsafe { write_vendor_binary(&bin, dst.as_mut_ptr().cast(), dst.len()) };
        assert_eq!((n, fit), (0, false));
        assert!(dst.iter().all(|&b| b == 0));
        let mut dst = vec![0u8; HEADER_SIZE + 2];
        // SAFETY: as above.
        let (n, fit) = unsafe { write_vendor_binary(&bin, dst.as_mut_ptr().cast(), dst.len()) };
        assert_eq!((n, fit), (HEADER_SIZE + 2, false));
    }
}
