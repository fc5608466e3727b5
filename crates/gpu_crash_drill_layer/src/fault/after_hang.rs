//! `GPU_CRASH_DRILL_LOSS=after-hang:<ms>`: a hang that becomes a loss `<ms>` later, as when a
//! driver's watchdog resets the GPU. [`lock_state`] applies it to whichever call comes first after
//! that time, so every decision and query reads the device state through it; the waits that hung
//! work blocks are cut into slices that end there ([`wait_sliced`], [`idle_blocked_by_hang`]).

use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use ash::vk;

use crate::config::LossMode;
use crate::dispatch::{DeviceData, DeviceState};
use crate::log::log_line;
use crate::state::bindings::Target;
use crate::state::fault::{FaultAddress, FaultRecord, VendorEntry, VENDOR_CODE_RESET};

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
pub(super) fn record_hang(dev: &DeviceData, st: &mut DeviceState, record: FaultRecord) {
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
pub(super) fn loss_note(dev: &DeviceData) -> String {
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

/// True when the drill lost this device: every call that can return `VK_ERROR_DEVICE_LOST` does.
pub(crate) fn is_lost(dev: &DeviceData) -> bool {
    lock_state(dev).fault.is_lost()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Scenario;
    use crate::fault::memory_fault::test_target as target;
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
}
