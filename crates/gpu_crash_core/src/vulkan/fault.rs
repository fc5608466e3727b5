//! Fault queries after device loss or during a hang: `VK_EXT_device_fault` (two-call idiom) and
//! `VK_KHR_device_fault` (draining reports, then debug info with the shader abort message chained).
//! Also the parser of the vendor binary's VersionOne header, which trusts no offset or size.

use std::ffi::{c_char, c_void};

use ash::vk;
use vulkan_fault_ffi::{
    DeviceFaultDebugInfoKHR, DeviceFaultFlagsKHR, DeviceFaultInfoKHR,
    DeviceFaultShaderAbortMessageInfoKHR, KhrDeviceFaultFns,
};

use serde::{Deserialize, Serialize};

use crate::serde_hex::hex;

/// Bound on `VK_INCOMPLETE` retries: a driver whose counts keep growing must not hang the crash path.
const MAX_QUERY_ATTEMPTS: usize = 8;
/// Largest vendor binary or abort message accepted (a corrupt size must not exhaust memory).
const MAX_BLOB: u64 = 64 << 20;
/// Most address infos, vendor infos or KHR fault reports kept from one query: a crash path allocates
/// only what is bounded, whatever count a broken driver returns.
const MAX_FAULT_ENTRIES: u32 = 1024;

/// How the faulting address was accessed (`VkDeviceFaultAddressTypeKHR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAccess {
    /// No access type (`NONE`).
    None,
    /// Invalid read.
    Read,
    /// Invalid write.
    Write,
    /// Execution of invalid memory.
    Execute,
    /// An instruction pointer (unknown, invalid or faulting).
    Instruction,
}

/// One faulting address as the driver reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultAddress {
    /// `reportedAddress`.
    pub address: u64,
    /// `addressPrecision` (a power of two; 0 or 1 means exact).
    pub precision: u64,
    /// How it was accessed.
    pub access: FaultAccess,
}

/// A `VkDeviceFaultVendorInfoEXT`/`KHR`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorInfo {
    /// Vendor description.
    pub description: String,
    /// `vendorFaultCode`.
    #[serde(with = "hex")]
    pub fault_code: u64,
    /// `vendorFaultData`.
    #[serde(with = "hex")]
    pub fault_data: u64,
}

/// The parsed `VkDeviceFaultVendorBinaryHeaderVersionOneEXT`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorBinaryHeader {
    /// `headerSize`.
    pub header_size: u32,
    /// `headerVersion`.
    pub header_version: u32,
    /// `vendorID`.
    pub vendor_id: u32,
    /// `deviceID`.
    pub device_id: u32,
    /// `driverVersion`.
    pub driver_version: u32,
    /// `pipelineCacheUUID` as 32 hex digits.
    pub pipeline_cache_uuid: String,
    /// Application name found at `applicationNameOffset`.
    pub application_name: Option<String>,
    /// `applicationVersion`.
    pub application_version: u32,
    /// Engine name found at `engineNameOffset`.
    pub engine_name: Option<String>,
    /// `engineVersion`.
    pub engine_version: u32,
    /// `apiVersion`.
    pub api_version: u32,
}

/// What the driver told us about a fault.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawFaultInfo {
    /// The driver's description(s).
    pub description: Option<String>,
    /// Faulting addresses.
    pub addresses: Vec<FaultAddress>,
    /// Vendor-specific fault infos.
    pub vendor_infos: Vec<VendorInfo>,
    /// Vendor binary crash dump, raw.
    pub vendor_binary: Option<Vec<u8>>,
    /// `VK_KHR_shader_abort` message.
    pub shader_abort_message: Option<String>,
    /// A KHR report had `WATCHDOG_TIMEOUT`.
    pub watchdog_timeout: bool,
    /// What went wrong while asking (each becomes a note of the report).
    pub errors: Vec<FaultQueryError>,
}

/// Why a fault query returned less than the driver had. Never fatal: what was read is still used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultQueryError {
    /// A query entry point returned an error.
    #[error("{call} returned {result:?}")]
    Driver {
        /// The Vulkan command.
        call: &'static str,
        /// What it returned.
        result: vk::Result,
    },
    /// The fault data kept growing between the two calls of the query idiom.
    #[error("{0} kept returning VK_INCOMPLETE after {MAX_QUERY_ATTEMPTS} attempts")]
    KeptIncomplete(&'static str),
    /// The device does not expose an entry point its enabled extension promises.
    #[error("{0} is not exposed by the device")]
    Missing(&'static str),
    /// More entries than a crash path allocates for; the first are kept.
    #[error("the driver reported {reported} {what}; the first {MAX_FAULT_ENTRIES} are kept")]
    TooMany {
        /// What was counted.
        what: &'static str,
        /// How many the driver reported.
        reported: u32,
    },
    /// A vendor binary over [`MAX_BLOB`] bytes was not read.
    #[error("vendor binary of {0} bytes refused (limit {MAX_BLOB})")]
    VendorBinaryTooLarge(u64),
    /// The render device is not a Vulkan device.
    #[error("render device is not Vulkan")]
    NotVulkan,
    /// The query did not return in time.
    #[error("the fault query did not return within {} s (driver or wgpu blocked)", .0.as_secs())]
    TimedOut(std::time::Duration),
}

/// Why a vendor binary's header was not parsed (the bytes are kept raw either way).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VendorBinaryError {
    /// Shorter than the VersionOne header.
    #[error(
        "vendor binary is {0} bytes, shorter than the {VENDOR_HEADER_SIZE}-byte VersionOne header"
    )]
    TooShort(usize),
    /// A header version this crate does not know.
    #[error("unknown vendor binary header version {0}")]
    UnknownVersion(u32),
    /// `headerSize` smaller than the header or larger than the binary.
    #[error("headerSize {size} is outside [{VENDOR_HEADER_SIZE}, {len}]")]
    BadHeaderSize {
        /// `headerSize`.
        size: u32,
        /// Bytes in the binary.
        len: usize,
    },
    /// A string offset past the end.
    #[error("{field} offset {offset} is past the end ({len} bytes)")]
    OffsetPastEnd {
        /// The header field.
        field: &'static str,
        /// Its offset.
        offset: u32,
        /// Bytes in the binary.
        len: usize,
    },
    /// A string without its NUL.
    #[error("{field} at offset {offset} is not NUL-terminated")]
    NotNulTerminated {
        /// The header field.
        field: &'static str,
        /// Its offset.
        offset: u32,
    },
}

fn access_of(t: vk::DeviceFaultAddressTypeEXT) -> FaultAccess {
    match t {
        vk::DeviceFaultAddressTypeEXT::READ_INVALID => FaultAccess::Read,
        vk::DeviceFaultAddressTypeEXT::WRITE_INVALID => FaultAccess::Write,
        vk::DeviceFaultAddressTypeEXT::EXECUTE_INVALID => FaultAccess::Execute,
        vk::DeviceFaultAddressTypeEXT::INSTRUCTION_POINTER_UNKNOWN
        | vk::DeviceFaultAddressTypeEXT::INSTRUCTION_POINTER_INVALID
        | vk::DeviceFaultAddressTypeEXT::INSTRUCTION_POINTER_FAULT => FaultAccess::Instruction,
        _ => FaultAccess::None,
    }
}

fn c_text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `vkGetDeviceFaultInfoEXT` with the full two-call idiom, looping on `VK_INCOMPLETE`.
///
/// # Safety
/// `device` is a live device created from `instance` with `VK_EXT_device_fault` and `deviceFault`
/// enabled.
pub unsafe fn query_ext(
    instance: &ash::Instance,
    device: &ash::Device,
    vendor_binary_enabled: bool,
) -> RawFaultInfo {
    let fns = ash::ext::device_fault::Device::new(instance, device);
    let get = fns.fp().get_device_fault_info_ext;
    let mut info = RawFaultInfo::default();
    for _ in 0..MAX_QUERY_ATTEMPTS {
        let mut counts = vk::DeviceFaultCountsEXT::default();
        // SAFETY: first call of the idiom: counts only, info null.
        let result = unsafe { get(device.handle(), &mut counts, std::ptr::null_mut()) };
        if result != vk::Result::SUCCESS {
            info.errors.push(FaultQueryError::Driver {
                call: "vkGetDeviceFaultInfoEXT (counts)",
                result,
            });
            return info;
        }
        if !vendor_binary_enabled {
            counts.vendor_binary_size = 0;
        }
        if counts.vendor_binary_size > MAX_BLOB {
            info.errors.push(FaultQueryError::VendorBinaryTooLarge(
                counts.vendor_binary_size,
            ));
            counts.vendor_binary_size = 0;
        }
        // A driver's counts are not trusted with memory: keep at most MAX_FAULT_ENTRIES of each.
        let capped = counts.address_info_count > MAX_FAULT_ENTRIES
            || counts.vendor_info_count > MAX_FAULT_ENTRIES;
        for (what, count) in [
            ("address infos", &mut counts.address_info_count),
            ("vendor infos", &mut counts.vendor_info_count),
        ] {
            if *count > MAX_FAULT_ENTRIES {
                info.errors.push(FaultQueryError::TooMany {
                    what,
                    reported: *count,
                });
                *count = MAX_FAULT_ENTRIES;
            }
        }
        let mut addresses =
            vec![vk::DeviceFaultAddressInfoEXT::default(); counts.address_info_count as usize];
        let mut vendors =
            vec![vk::DeviceFaultVendorInfoEXT::default(); counts.vendor_info_count as usize];
        let mut binary = vec![0u8; counts.vendor_binary_size as usize];
        let mut fault = vk::DeviceFaultInfoEXT {
            p_address_infos: if addresses.is_empty() {
                std::ptr::null_mut()
            } else {
                addresses.as_mut_ptr()
            },
            p_vendor_infos: if vendors.is_empty() {
                std::ptr::null_mut()
            } else {
                vendors.as_mut_ptr()
            },
            p_vendor_binary_data: if binary.is_empty() {
                std::ptr::null_mut()
            } else {
                binary.as_mut_ptr() as *mut c_void
            },
            ..Default::default()
        };
        // SAFETY: second call: the arrays have the sizes given in `counts`.
        let result = unsafe { get(device.handle(), &mut counts, &mut fault) };
        if result == vk::Result::INCOMPLETE && !capped {
            continue; // the fault data grew between the calls: ask again
        }
        if !matches!(result, vk::Result::SUCCESS | vk::Result::INCOMPLETE) {
            info.errors.push(FaultQueryError::Driver {
                call: "vkGetDeviceFaultInfoEXT",
                result,
            });
            return info;
        }
        addresses.truncate(counts.address_info_count as usize);
        vendors.truncate(counts.vendor_info_count as usize);
        binary.truncate(counts.vendor_binary_size as usize);
        let description = c_text(&fault.description);
        info.description = (!description.is_empty()).then_some(description);
        info.addresses = addresses
            .iter()
            .map(|a| FaultAddress {
                address: a.reported_address,
                precision: a.address_precision,
                access: access_of(a.address_type),
            })
            .collect();
        info.vendor_infos = vendors
            .iter()
            .map(|v| VendorInfo {
                description: c_text(&v.description),
                fault_code: v.vendor_fault_code,
                fault_data: v.vendor_fault_data,
            })
            .collect();
        info.vendor_binary = (!binary.is_empty()).then_some(binary);
        return info;
    }
    info.errors
        .push(FaultQueryError::KeptIncomplete("vkGetDeviceFaultInfoEXT"));
    info
}

/// One `VkDeviceFaultInfoKHR`, owned (no `pNext`), as `vkGetDeviceFaultReportsKHR` returned it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KhrFaultReport {
    /// `VkDeviceFaultFlagsKHR`.
    pub flags: DeviceFaultFlagsKHR,
    /// `description`.
    pub description: String,
    /// `faultAddressInfo`, when `MEMORY_ADDRESS` is set.
    pub address: Option<FaultAddress>,
    /// `instructionAddressInfo`, when `INSTRUCTION_ADDRESS` is set.
    pub instruction: Option<FaultAddress>,
    /// `vendorInfo`, when `VENDOR` is set.
    pub vendor: Option<VendorInfo>,
}

impl KhrFaultReport {
    fn from_ffi(report: &DeviceFaultInfoKHR) -> Self {
        let flags = report.flags;
        Self {
            flags,
            description: c_text(&report.description),
            address: flags
                .contains(DeviceFaultFlagsKHR::MEMORY_ADDRESS)
                .then(|| FaultAddress {
                    address: report.fault_address_info.reported_address,
                    precision: report.fault_address_info.address_precision,
                    access: access_of(report.fault_address_info.address_type),
                }),
            instruction: flags
                .contains(DeviceFaultFlagsKHR::INSTRUCTION_ADDRESS)
                .then_some(FaultAddress {
                    address: report.instruction_address_info.reported_address,
                    precision: report.instruction_address_info.address_precision,
                    access: FaultAccess::Instruction,
                }),
            vendor: flags
                .contains(DeviceFaultFlagsKHR::VENDOR)
                .then(|| VendorInfo {
                    description: c_text(&report.vendor_info.description),
                    fault_code: report.vendor_info.vendor_fault_code,
                    fault_data: report.vendor_info.vendor_fault_data,
                }),
        }
    }

    /// A masked fault the driver recovered from: neither `DEVICE_LOST` nor `WATCHDOG_TIMEOUT` (a
    /// watchdog report belongs to the hang report, whatever its `DEVICE_LOST` bit says).
    pub fn is_non_fatal(&self) -> bool {
        !self.flags.contains(DeviceFaultFlagsKHR::DEVICE_LOST)
            && !self.flags.contains(DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT)
    }

    /// The names of the set `VkDeviceFaultFlagBitsKHR`, e.g. `["MEMORY_ADDRESS", "VENDOR"]`.
    pub fn flag_names(&self) -> Vec<String> {
        [
            (DeviceFaultFlagsKHR::DEVICE_LOST, "DEVICE_LOST"),
            (DeviceFaultFlagsKHR::MEMORY_ADDRESS, "MEMORY_ADDRESS"),
            (
                DeviceFaultFlagsKHR::INSTRUCTION_ADDRESS,
                "INSTRUCTION_ADDRESS",
            ),
            (DeviceFaultFlagsKHR::VENDOR, "VENDOR"),
            (DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT, "WATCHDOG_TIMEOUT"),
            (DeviceFaultFlagsKHR::OVERFLOW, "OVERFLOW"),
        ]
        .into_iter()
        .filter(|(bit, _)| self.flags.contains(*bit))
        .map(|(_, name)| name.to_owned())
        .collect()
    }
}

impl RawFaultInfo {
    /// What `reports` say, in order, added to this info (descriptions joined with `"; "`).
    pub fn add_khr_reports(&mut self, reports: &[KhrFaultReport]) {
        let mut descriptions: Vec<String> = self.description.take().into_iter().collect();
        for report in reports {
            if report.flags.contains(DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT) {
                self.watchdog_timeout = true;
            }
            if !report.description.is_empty() {
                descriptions.push(report.description.clone());
            }
            self.addresses.extend(report.address);
            self.addresses.extend(report.instruction);
            self.vendor_infos.extend(report.vendor.clone());
        }
        if !descriptions.is_empty() {
            self.description = Some(descriptions.join("; "));
        }
    }
}

/// Drains `vkGetDeviceFaultReportsKHR`, waiting up to `timeout_ns` for the first report: at most
/// [`MAX_FAULT_ENTRIES`] reports, with what went wrong.
///
/// # Safety
/// `device` is a live device created from `instance` with `VK_KHR_device_fault` enabled.
pub unsafe fn drain_khr_reports(
    instance: &ash::Instance,
    device: vk::Device,
    timeout_ns: u64,
) -> (Vec<KhrFaultReport>, Vec<FaultQueryError>) {
    // SAFETY: forwarded contract.
    let fns = unsafe { KhrDeviceFaultFns::load(instance, device) };
    let Some(get_reports) = fns.get_device_fault_reports else {
        return (
            Vec::new(),
            vec![FaultQueryError::Missing("vkGetDeviceFaultReportsKHR")],
        );
    };
    let mut errors = Vec::new();
    let mut reports: Vec<DeviceFaultInfoKHR> = Vec::new();
    for _ in 0..MAX_QUERY_ATTEMPTS {
        let mut count = 0u32;
        // SAFETY: counting call with a null array.
        let result = unsafe { get_reports(device, timeout_ns, &mut count, std::ptr::null_mut()) };
        if !matches!(result, vk::Result::SUCCESS | vk::Result::INCOMPLETE) {
            // `VK_TIMEOUT` too: no report within the wait (a caller that polls drops it).
            errors.push(FaultQueryError::Driver {
                call: "vkGetDeviceFaultReportsKHR (count)",
                result,
            });
            break;
        }
        if count == 0 {
            break;
        }
        let room = MAX_FAULT_ENTRIES.saturating_sub(reports.len() as u32);
        if count > room {
            errors.push(FaultQueryError::TooMany {
                what: "fault reports",
                reported: reports.len() as u32 + count,
            });
            count = room;
            if count == 0 {
                break;
            }
        }
        let mut batch = vec![DeviceFaultInfoKHR::default(); count as usize];
        // SAFETY: `batch` has room for `count` reports.
        let result = unsafe { get_reports(device, 0, &mut count, batch.as_mut_ptr()) };
        batch.truncate(count as usize);
        reports.extend(batch);
        if result != vk::Result::INCOMPLETE {
            if result != vk::Result::SUCCESS {
                errors.push(FaultQueryError::Driver {
                    call: "vkGetDeviceFaultReportsKHR",
                    result,
                });
            }
            break;
        }
    }
    (
        reports.iter().map(KhrFaultReport::from_ffi).collect(),
        errors,
    )
}

/// Drains `vkGetDeviceFaultReportsKHR` (waiting up to `timeout_ns`), then, after a loss, reads
/// `vkGetDeviceFaultDebugInfoKHR` with the shader abort message chained. `earlier`: reports of this
/// device drained before (by the non-fatal fault watch) that belong to this query; they come first.
///
/// # Safety
/// `device` is a live device created from `instance` with `VK_KHR_device_fault` enabled.
pub unsafe fn query_khr(
    instance: &ash::Instance,
    device: vk::Device,
    timeout_ns: u64,
    debug_info: bool,
    shader_abort: bool,
    earlier: &[KhrFaultReport],
) -> RawFaultInfo {
    let mut info = RawFaultInfo::default();
    // Reports already drained are all there is: no need to wait for more.
    let timeout_ns = if earlier.is_empty() { timeout_ns } else { 0 };
    // SAFETY: forwarded contract.
    let (reports, errors) = unsafe { drain_khr_reports(instance, device, timeout_ns) };
    info.errors = errors;
    info.add_khr_reports(earlier);
    info.add_khr_reports(&reports);
    if debug_info {
        // SAFETY: forwarded contract.
        let fns = unsafe { KhrDeviceFaultFns::load(instance, device) };
        if let Some(get_debug) = fns.get_device_fault_debug_info {
            // SAFETY: forwarded contract; the function is the device's.
            unsafe { read_debug_info(get_debug, device, shader_abort, &mut info) };
        }
    }
    info
}

/// Two calls of `vkGetDeviceFaultDebugInfoKHR`: sizes, then data.
///
/// # Safety
/// `get_debug` is the device's `vkGetDeviceFaultDebugInfoKHR`.
unsafe fn read_debug_info(
    get_debug: vulkan_fault_ffi::PfnGetDeviceFaultDebugInfoKHR,
    device: vk::Device,
    shader_abort: bool,
    info: &mut RawFaultInfo,
) {
    let mut abort = DeviceFaultShaderAbortMessageInfoKHR::default();
    let mut debug = DeviceFaultDebugInfoKHR::default();
    if shader_abort {
        debug.p_next = &mut abort as *mut _ as *mut c_void;
    }
    // SAFETY: size query with null data pointers; `abort` outlives the call.
    let result = unsafe { get_debug(device, &mut debug) };
    if !matches!(result, vk::Result::SUCCESS | vk::Result::INCOMPLETE) {
        info.errors.push(FaultQueryError::Driver {
            call: "vkGetDeviceFaultDebugInfoKHR (sizes)",
            result,
        });
        return;
    }
    let binary_size = u64::from(debug.vendor_binary_size).min(MAX_BLOB) as usize;
    let message_size = abort.message_data_size.min(MAX_BLOB) as usize;
    let mut binary = vec![0u8; binary_size];
    let mut message = vec![0u8; message_size];
    debug.vendor_binary_size = binary_size as u32;
    debug.p_vendor_binary_data = if binary.is_empty() {
        std::ptr::null_mut()
    } else {
        binary.as_mut_ptr() as *mut c_void
    };
    abort.message_data_size = message_size as u64;
    abort.p_message_data = if message.is_empty() {
        std::ptr::null_mut()
    } else {
        message.as_mut_ptr() as *mut c_void
    };
    // SAFETY: buffers of the sizes just reported; `abort` is still chained and alive.
    let result = unsafe { get_debug(device, &mut debug) };
    if !matches!(result, vk::Result::SUCCESS | vk::Result::INCOMPLETE) {
        info.errors.push(FaultQueryError::Driver {
            call: "vkGetDeviceFaultDebugInfoKHR",
            result,
        });
        return;
    }
    binary.truncate(debug.vendor_binary_size as usize);
    message.truncate(abort.message_data_size as usize);
    if !binary.is_empty() {
        info.vendor_binary = Some(binary);
    }
    let end = message
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(message.len());
    if end > 0 {
        info.shader_abort_message = Some(String::from_utf8_lossy(&message[..end]).into_owned());
    }
}

/// Size of `VkDeviceFaultVendorBinaryHeaderVersionOneEXT`.
pub const VENDOR_HEADER_SIZE: usize = 56;

/// Parses the VersionOne header, validating every offset and size; never trusts the driver's bytes.
pub fn parse_vendor_binary(bytes: &[u8]) -> Result<VendorBinaryHeader, VendorBinaryError> {
    if bytes.len() < VENDOR_HEADER_SIZE {
        return Err(VendorBinaryError::TooShort(bytes.len()));
    }
    let u32_at =
        |offset: usize| u32::from_ne_bytes(bytes[offset..offset + 4].try_into().unwrap_or([0; 4]));
    let header_size = u32_at(0);
    let header_version = u32_at(4);
    if header_version != 1 {
        return Err(VendorBinaryError::UnknownVersion(header_version));
    }
    if (header_size as usize) < VENDOR_HEADER_SIZE || header_size as usize > bytes.len() {
        return Err(VendorBinaryError::BadHeaderSize {
            size: header_size,
            len: bytes.len(),
        });
    }
    let string_at =
        |field: &'static str, offset: u32| -> Result<Option<String>, VendorBinaryError> {
            if offset == 0 {
                return Ok(None);
            }
            let start = offset as usize;
            if start >= bytes.len() {
                return Err(VendorBinaryError::OffsetPastEnd {
                    field,
                    offset,
                    len: bytes.len(),
                });
            }
            let rest = &bytes[start..];
            let end = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or(VendorBinaryError::NotNulTerminated { field, offset })?;
            Ok(Some(String::from_utf8_lossy(&rest[..end]).into_owned()))
        };
    let uuid: String = bytes[20..36].iter().map(|b| format!("{b:02x}")).collect();
    Ok(VendorBinaryHeader {
        header_size,
        header_version,
        vendor_id: u32_at(8),
        device_id: u32_at(12),
        driver_version: u32_at(16),
        pipeline_cache_uuid: uuid,
        application_name: string_at("applicationName", u32_at(36))?,
        application_version: u32_at(40),
        engine_name: string_at("engineName", u32_at(44))?,
        engine_version: u32_at(48),
        api_version: u32_at(52),
    })
}

/// Blanks the application and engine names a VersionOne vendor binary header points at (their
/// bytes up to the NUL become zeros; the layout stays), for an upload without application names.
/// A binary without a header this parser reads is left as it is (it names nothing we can find).
pub(crate) fn blank_vendor_binary_names(bytes: &mut [u8]) {
    if parse_vendor_binary(bytes).is_err() {
        return;
    }
    for offset_at in [36usize, 44] {
        let offset =
            u32::from_ne_bytes(bytes[offset_at..offset_at + 4].try_into().unwrap_or([0; 4]))
                as usize;
        if offset == 0 || offset >= bytes.len() {
            continue;
        }
        for b in bytes[offset..].iter_mut().take_while(|b| **b != 0) {
            *b = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 51 item 13: without application names, the raw vendor binary keeps none either.
    #[test]
    fn the_vendor_binarys_names_can_be_blanked() {
        let mut bytes = header("my game");
        blank_vendor_binary_names(&mut bytes);
        let h = parse_vendor_binary(&bytes).unwrap();
        assert_eq!(h.application_name.as_deref(), Some(""));
        assert!(!bytes.windows(4).any(|w| w == b"game"));
        let mut junk = vec![1u8, 2, 3];
        blank_vendor_binary_names(&mut junk);
        assert_eq!(junk, [1, 2, 3]);
    }

    fn header(app: &str) -> Vec<u8> {
        let mut b = vec![0u8; VENDOR_HEADER_SIZE];
        let put =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put(&mut b, 0, VENDOR_HEADER_SIZE as u32);
        put(&mut b, 4, 1);
        put(&mut b, 8, 0x10de);
        put(&mut b, 12, 0x2335);
        put(&mut b, 16, 42);
        b[20..36].copy_from_slice(&[0xab; 16]);
        put(&mut b, 36, VENDOR_HEADER_SIZE as u32);
        put(&mut b, 44, 0);
        put(&mut b, 52, vk::API_VERSION_1_3);
        b.extend_from_slice(app.as_bytes());
        b.push(0);
        b
    }

    #[test]
    fn parses_a_valid_header() {
        let h = parse_vendor_binary(&header("my game")).unwrap();
        assert_eq!(
            (h.vendor_id, h.device_id, h.driver_version),
            (0x10de, 0x2335, 42)
        );
        assert_eq!(h.application_name.as_deref(), Some("my game"));
        assert_eq!(h.engine_name, None);
        assert_eq!(h.pipeline_cache_uuid, "ab".repeat(16));
    }

    #[test]
    fn rejects_malformed_binaries_with_reasons() {
        let err = |b: &[u8]| parse_vendor_binary(b).unwrap_err();
        assert_eq!(err(&[0; 10]), VendorBinaryError::TooShort(10));
        assert!(err(&[0; 10]).to_string().contains("shorter"));
        let mut b = header("x");
        b[4] = 7;
        assert_eq!(err(&b), VendorBinaryError::UnknownVersion(7));
        let mut b = header("x");
        b[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
        assert!(matches!(
            err(&b),
            VendorBinaryError::BadHeaderSize { size: 10_000, .. }
        ));
        let mut b = header("x");
        b[36..40].copy_from_slice(&9_999u32.to_ne_bytes());
        assert!(err(&b).to_string().contains("past the end"));
        let mut b = header("x");
        b.pop(); // drop the NUL
        assert!(matches!(
            err(&b),
            VendorBinaryError::NotNulTerminated { .. }
        ));
    }
}
