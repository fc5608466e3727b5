//! Per-device fault state: what the drill injected ([`FaultRecord`]) and where the injection stands
//! ([`FaultState`]); the decisions on it and the fault queries are in `fault.rs`.

use std::ffi::c_char;

use ash::vk;
use vulkan_fault_ffi::{DeviceFaultFlagsKHR, DeviceFaultInfoKHR};

use crate::config::Scenario;

/// The address part of a fault.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FaultAddress {
    pub address_type: vk::DeviceFaultAddressTypeEXT,
    pub reported_address: u64,
    pub precision: u64,
}

/// What the drill injected.
#[derive(Clone, Debug)]
pub(crate) struct FaultRecord {
    pub scenario: Scenario,
    pub description: String,
    pub address: Option<FaultAddress>,
    pub vendor_description: String,
    pub vendor_data: u64,
    pub abort_message: String,
}

impl FaultRecord {
    pub(crate) fn khr_report(&self) -> DeviceFaultInfoKHR {
        let mut info = DeviceFaultInfoKHR {
            group_id: 1,
            ..Default::default()
        };
        info.flags = DeviceFaultFlagsKHR::VENDOR;
        if matches!(self.scenario, Scenario::Hang | Scenario::HangInPass(_)) {
            info.flags |= DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT;
        } else {
            info.flags |= DeviceFaultFlagsKHR::DEVICE_LOST;
        }
        copy_c_string(&mut info.description, &self.description);
        if let Some(a) = self.address {
            info.flags |= DeviceFaultFlagsKHR::MEMORY_ADDRESS;
            info.fault_address_info.address_type = a.address_type;
            info.fault_address_info.reported_address = a.reported_address;
            info.fault_address_info.address_precision = a.precision;
        }
        copy_c_string(&mut info.vendor_info.description, &self.vendor_description);
        info.vendor_info.vendor_fault_code = self.scenario.vendor_code();
        info.vendor_info.vendor_fault_data = self.vendor_data;
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
    pub(crate) wait: WaitInjection,
    /// `hang-in-pass`: matching labels seen after the threshold (the wait goes at the wanted one).
    pub(crate) hang_labels_seen: u32,
    /// `after-rebind`: the GPU is "dead" (submissions swallowed) and this many were swallowed so far.
    pub(crate) dead: Option<u64>,
}

/// `after-rebind`: submissions swallowed without a re-bind before the device is lost anyway.
pub(crate) const REBIND_LIMIT: u64 = 600;

impl FaultState {
    pub(crate) fn is_lost(&self) -> bool {
        self.lost
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
