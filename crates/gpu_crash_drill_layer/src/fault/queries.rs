//! The answers to the fault queries (`vkGetDeviceFaultInfoEXT`, `vkGetDeviceFaultReportsKHR`,
//! `vkGetDeviceFaultDebugInfoKHR`) for a device whose faults the layer serves: from the record of
//! what the drill injected, with the exact two-call contracts of the specification.

use std::time::{Duration, Instant};

use ash::vk;
use vulkan_fault_ffi::{
    structure_type, DeviceFaultDebugInfoKHR, DeviceFaultInfoKHR,
    DeviceFaultShaderAbortMessageInfoKHR,
};

use crate::dispatch::DeviceData;
use crate::fault::after_hang::lock_state;
use crate::fault::vendor_binary::{vendor_binary, write_vendor_binary};
use crate::state::fault::copy_c_string;

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
