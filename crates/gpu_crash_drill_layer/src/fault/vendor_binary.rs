//! The vendor binary the fault queries return: a `VkDeviceFaultVendorBinaryHeaderVersionOneKHR`
//! followed by the application's and engine's names, and how it is copied into an application's
//! buffer.

use std::ffi::c_void;

use ash::vk;
use vulkan_fault_ffi::DeviceFaultVendorBinaryHeaderVersionOneKHR;

use crate::dispatch::DeviceData;

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
pub(super) unsafe fn write_vendor_binary(
    binary: &[u8],
    dst: *mut c_void,
    capacity: usize,
) -> (usize, bool) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
