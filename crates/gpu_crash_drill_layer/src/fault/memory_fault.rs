//! The records of the memory faults the drill injects: where the fault address lands in or around
//! the blamed object (at an offset, past its end, in a freed range no live object covers) and what
//! the record says about it.

use ash::vk;

use crate::config::Scenario;
use crate::log::log_line;
use crate::state::bindings::{DeviceTracker, Target};
use crate::state::fault::{FaultAddress, FaultRecord, FaultState, VendorEntry};

/// `target` with its in-bounds fault point at `offset` bytes from its base. An offset the object does
/// not cover logs one line and leaves the middle: an in-bounds fault must stay inside the object.
pub(super) fn at_offset(mut target: Target, offset: Option<u64>) -> Target {
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
pub(super) fn freed_target(
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
pub(super) fn memory_fault(scenario: &Scenario, target: &Target, precision: u64) -> FaultRecord {
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

/// The record of a masked (non-fatal) read fault inside the live `target`: its middle, 4-byte
/// aligned; `DEVICE_LOST` clear.
pub(super) fn masked_fault(scenario: &Scenario, target: &Target, precision: u64) -> FaultRecord {
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

/// A buffer named "particles" at `[base, base + size)`, for the tests of this module and its
/// siblings.
#[cfg(test)]
pub(super) fn test_target(base: u64, size: u64) -> Target {
    Target {
        object_type: vk::ObjectType::BUFFER,
        handle: 7,
        name: Some("particles".into()),
        range: crate::state::bindings::Range { base, size },
        fault_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::test_target as target;
    use super::*;
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
}
