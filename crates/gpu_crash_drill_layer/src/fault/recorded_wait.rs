//! Waits the drill records into command buffers (`stall`, `hang-in-pass`, `hang-in-pipeline`;
//! `commands.rs` records them): what happens once the command buffer holding one is submitted, and
//! the host side that releases a stall.

use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use crate::config::Scenario;
use crate::dispatch::DeviceData;
use crate::fault::after_hang::{lock_state, loss_note, record_hang};
use crate::log::log_line;
use crate::state::fault::{FaultRecord, VendorEntry, WaitInjection};

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
