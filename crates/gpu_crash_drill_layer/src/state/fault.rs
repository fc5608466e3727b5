//! Per-device fault state: what the drill injected ([`FaultRecord`]) and where the injection stands
//! ([`FaultState`]); the decisions on it and the fault queries are in `fault/`.

use std::ffi::c_char;
use std::time::{Duration, Instant};

use ash::vk;
use vulkan_fault_ffi::{DeviceFaultFlagsKHR, DeviceFaultInfoKHR};

use super::bindings::Target;
use crate::config::Scenario;

/// The address part of a fault.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FaultAddress {
    pub address_type: vk::DeviceFaultAddressTypeEXT,
    pub reported_address: u64,
    pub precision: u64,
}

/// One `VkDeviceFaultVendorInfoEXT` (the KHR report carries the first).
#[derive(Clone, Debug)]
pub(crate) struct VendorEntry {
    pub description: String,
    pub code: u64,
    pub data: u64,
}

/// `vendorFaultCode` of the entry a loss after a simulated GPU reset adds (the scenarios use 1-6, 8
/// and 9, see `Scenario::vendor_code`).
pub(crate) const VENDOR_CODE_RESET: u64 = 7;

/// What the drill injected.
#[derive(Clone, Debug)]
pub(crate) struct FaultRecord {
    pub scenario: Scenario,
    pub description: String,
    pub address: Option<FaultAddress>,
    /// At least one entry.
    pub vendor: Vec<VendorEntry>,
    pub abort_message: String,
    /// The fault lost the device (a hang alone does not; a hang the watchdog reset did).
    pub device_lost: bool,
}

impl FaultRecord {
    pub(crate) fn khr_report(&self) -> DeviceFaultInfoKHR {
        let mut info = DeviceFaultInfoKHR {
            group_id: 1,
            ..Default::default()
        };
        info.flags = DeviceFaultFlagsKHR::VENDOR;
        if self.scenario.is_hang() {
            info.flags |= DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT;
        }
        if self.device_lost {
            info.flags |= DeviceFaultFlagsKHR::DEVICE_LOST;
        }
        copy_c_string(&mut info.description, &self.description);
        if let Some(a) = self.address {
            info.flags |= DeviceFaultFlagsKHR::MEMORY_ADDRESS;
            info.fault_address_info.address_type = a.address_type;
            info.fault_address_info.reported_address = a.reported_address;
            info.fault_address_info.address_precision = a.precision;
        }
        if let Some(v) = self.vendor.first() {
            copy_c_string(&mut info.vendor_info.description, &v.description);
            info.vendor_info.vendor_fault_code = v.code;
            info.vendor_info.vendor_fault_data = v.data;
        }
        info
    }
}

/// Where the wait of a `records_wait` scenario stands (once per device).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WaitInjection {
    /// Not recorded yet.
    #[default]
    Armed,
    /// Recorded into this command buffer, which was not submitted yet.
    Recorded(u64),
    /// The command buffer holding it was submitted: done for this device.
    Submitted,
}

/// Per-device fault state.
#[derive(Debug, Default)]
pub(crate) struct FaultState {
    pub(crate) submits: u64,
    pub(crate) lost: bool,
    pub(crate) hung: bool,
    pub(crate) record: Option<FaultRecord>,
    pub(crate) khr_pending: Vec<DeviceFaultInfoKHR>,
    pub(crate) label_warned: bool,
    /// `masked:` fired (its reports were queued, or not reported without `deviceFaultReportMasked`).
    pub(crate) masked_done: bool,
    /// `use-after-free:<label>@<offset>` with an offset outside the freed object was logged.
    pub(crate) offset_warned: bool,
    /// `GPU_CRASH_DRILL_AIM`: the scenario as the aim file aimed it, once read (fixed from then on).
    pub(crate) aim: Option<Scenario>,
    /// `GPU_CRASH_DRILL_AIM`: the last first line without a label that was logged (each is logged once).
    pub(crate) aim_no_label: Option<String>,
    pub(crate) wait: WaitInjection,
    /// `hang-in-pass`: matching labels seen after the threshold; `hang-in-pipeline`: command buffers
    /// that bound the pipeline after the threshold (the wait goes at the wanted one).
    pub(crate) hang_matches_seen: u32,
    /// `after-rebind`: the GPU is "dead" (submissions swallowed) and this many were swallowed so far.
    pub(crate) dead: Option<u64>,
    /// When a hang (`hang`, `hang-in-pass`, `hang-in-pipeline`) began: `after-hang` loses the device its delay later.
    pub(crate) hang_at: Option<Instant>,
    /// Queues holding hung work (raw handles): with `after-hang`, their idle waits end in the loss.
    pub(crate) hung_queues: Vec<u64>,
    /// `after-hang`: the hang's record, held back until the simulated reset (a real driver reports
    /// fault info only once it has reset the GPU).
    pub(crate) held: Option<FaultRecord>,
    /// `after-hang:<ms>@<label>`: the object named `<label>` live when the GPU hung, the one its
    /// loss blames (the game may destroy it while the GPU is hung, as a level unload does).
    pub(crate) target_at_hang: Option<Target>,
}

/// `after-rebind`: submissions swallowed without a re-bind before the device is lost anyway.
pub(crate) const REBIND_LIMIT: u64 = 600;

impl FaultState {
    pub(crate) fn is_lost(&self) -> bool {
        self.lost
    }

    /// Notes that the hang began now (once) and that `queue` holds hung work.
    pub(crate) fn note_hang(&mut self, queue: u64) {
        self.hang_at.get_or_insert_with(Instant::now);
        if !self.hung_queues.contains(&queue) {
            self.hung_queues.push(queue);
        }
    }

    /// When `after-hang:<ms>` loses the device: `None` before a hang (or past what an `Instant` holds).
    pub(crate) fn loss_at(&self, ms: u64) -> Option<Instant> {
        self.hang_at?.checked_add(Duration::from_millis(ms))
    }
}

/// Copies `s` into a fixed C string buffer, truncating at a character boundary and NUL-terminating.
pub(crate) fn copy_c_string(dst: &mut [c_char], s: &str) {
    let max = dst.len().saturating_sub(1);
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..end].iter()) {
        *d = *b as c_char;
    }
    if let Some(d) = dst.get_mut(end) {
        *d = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_truncate_and_terminate() {
        let mut buf = [1 as c_char; 8];
        copy_c_string(&mut buf, "abcdefghij");
        assert_eq!(buf[7], 0);
        assert_eq!(buf[6] as u8, b'g');
        let mut buf = [1 as c_char; 8];
        copy_c_string(&mut buf, "ab");
        assert_eq!(&buf[..3], &[b'a' as c_char, b'b' as c_char, 0]);
    }
}
