//! The extensions the layer provides: advertising them, their features and properties, and removing
//! them from `vkCreateDevice` before the driver sees them.

use std::ffi::{c_char, c_void, CStr};

use ash::vk;
use vulkan_fault_ffi::{
    structure_type, PhysicalDeviceFaultFeaturesKHR, PhysicalDeviceFaultPropertiesKHR,
    PhysicalDeviceShaderAbortFeaturesKHR, PhysicalDeviceShaderAbortPropertiesKHR,
    KHR_DEVICE_FAULT_NAME, KHR_DEVICE_FAULT_SPEC_VERSION, KHR_SHADER_ABORT_NAME,
    KHR_SHADER_ABORT_SPEC_VERSION,
};

use crate::chain;
use crate::config::FaultApi;

/// Reported in `VkPhysicalDeviceFaultPropertiesKHR::maxDeviceFaultCount`.
pub(crate) const MAX_DEVICE_FAULT_COUNT: u32 = 16;
/// Reported in `VkPhysicalDeviceShaderAbortPropertiesKHR::maxShaderAbortMessageSize`.
pub(crate) const MAX_SHADER_ABORT_MESSAGE_SIZE: u64 = 1024;

/// Which of the drill's extensions the layer itself implements on one physical device (those of the
/// configured API that the driver lacks; what the driver has natively passes through).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Provided {
    pub binding_report: bool,
    pub ext_fault: bool,
    pub khr_fault: bool,
    pub shader_abort: bool,
    /// `VK_AMD_buffer_marker`, emulated with a barrier and `vkCmdFillBuffer` (see `commands.rs`).
    pub buffer_marker: bool,
    /// `VK_EXT_memory_budget`: each heap's usage is what the application allocated through the
    /// layer, its budget the heap's size or `GPU_CRASH_DRILL_MEMORY_BUDGET` (see `video_memory.rs`).
    pub memory_budget: bool,
    /// `VK_EXT_device_memory_report`: the application's allocations, frees and the driver's failed
    /// allocations, reported to its callbacks (see `video_memory.rs`).
    pub memory_report: bool,
}

impl Provided {
    /// The extension properties to append to the driver's list.
    pub(crate) fn properties(&self) -> Vec<vk::ExtensionProperties> {
        let mut out = Vec::new();
        let mut push = |on: bool, name: &CStr, spec: u32| {
            if on {
                let mut p = vk::ExtensionProperties {
                    spec_version: spec,
                    ..Default::default()
                };
                for (d, s) in p.extension_name.iter_mut().zip(name.to_bytes()) {
                    *d = *s as c_char;
                }
                out.push(p);
            }
        };
        push(
            self.binding_report,
            vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME,
            vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_SPEC_VERSION,
        );
        push(
            self.ext_fault,
            vk::EXT_DEVICE_FAULT_NAME,
            vk::EXT_DEVICE_FAULT_SPEC_VERSION,
        );
        push(
            self.khr_fault,
            KHR_DEVICE_FAULT_NAME,
            KHR_DEVICE_FAULT_SPEC_VERSION,
        );
        push(
            self.shader_abort,
            KHR_SHADER_ABORT_NAME,
            KHR_SHADER_ABORT_SPEC_VERSION,
        );
        // Spec version 1: `vkCmdWriteBufferMarkerAMD` only (version 2 adds
        // `vkCmdWriteBufferMarker2AMD`, which the layer does not emulate).
        push(self.buffer_marker, vk::AMD_BUFFER_MARKER_NAME, 1);
        push(
            self.memory_budget,
            vk::EXT_MEMORY_BUDGET_NAME,
            vk::EXT_MEMORY_BUDGET_SPEC_VERSION,
        );
        push(
            self.memory_report,
            vk::EXT_DEVICE_MEMORY_REPORT_NAME,
            vk::EXT_DEVICE_MEMORY_REPORT_SPEC_VERSION,
        );
        out
    }

    /// True when `name` is an extension the layer implements here.
    pub(crate) fn provides(&self, name: &CStr) -> bool {
        (self.binding_report && name == vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME)
            || (self.ext_fault && name == vk::EXT_DEVICE_FAULT_NAME)
            || (self.khr_fault && name == KHR_DEVICE_FAULT_NAME)
            || (self.shader_abort && name == KHR_SHADER_ABORT_NAME)
            || (self.buffer_marker && name == vk::AMD_BUFFER_MARKER_NAME)
            || (self.memory_budget && name == vk::EXT_MEMORY_BUDGET_NAME)
            || (self.memory_report && name == vk::EXT_DEVICE_MEMORY_REPORT_NAME)
    }

    /// True when a feature or property structure of `s_type` belongs to an extension the layer
    /// implements here (the driver would not know it): unlinked from `vkCreateDevice`,
    /// `vkGetPhysicalDeviceFeatures2` and `vkGetPhysicalDeviceProperties2` chains before the driver
    /// sees them; also `vkGetPhysicalDeviceMemoryProperties2` chains (the budget) and the memory
    /// report's create info. (`VK_AMD_buffer_marker` version 1 has no such structures.)
    pub(crate) fn owns_structure(&self, s_type: vk::StructureType) -> bool {
        (self.binding_report
            && s_type == vk::StructureType::PHYSICAL_DEVICE_ADDRESS_BINDING_REPORT_FEATURES_EXT)
            || (self.ext_fault && s_type == vk::StructureType::PHYSICAL_DEVICE_FAULT_FEATURES_EXT)
            || (self.khr_fault
                && (s_type == structure_type::PHYSICAL_DEVICE_FAULT_FEATURES_KHR
                    || s_type == structure_type::PHYSICAL_DEVICE_FAULT_PROPERTIES_KHR))
            || (self.shader_abort
                && (s_type == structure_type::PHYSICAL_DEVICE_SHADER_ABORT_FEATURES_KHR
                    || s_type == structure_type::PHYSICAL_DEVICE_SHADER_ABORT_PROPERTIES_KHR))
            || (self.memory_budget
                && s_type == vk::StructureType::PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT)
            || (self.memory_report
                && (s_type == vk::StructureType::PHYSICAL_DEVICE_DEVICE_MEMORY_REPORT_FEATURES_EXT
                    || s_type == vk::StructureType::DEVICE_DEVICE_MEMORY_REPORT_CREATE_INFO_EXT))
    }
}

/// What one device enabled, decided at `vkCreateDevice`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeviceExtensions {
    pub provided: Provided,
    /// The layer sends binding reports (extension provided by the layer, enabled, feature on).
    pub binding_report_enabled: bool,
    /// The driver implements the binding report and the application enabled it: the layer learns the
    /// driver's addresses (`native.rs`) instead of inventing its own.
    pub binding_report_native: bool,
    pub ext_fault_enabled: bool,
    /// The driver implements `VK_EXT_device_fault` itself (real reports pass through).
    pub ext_fault_native: bool,
    pub khr_fault_enabled: bool,
    /// `deviceFaultVendorBinary` was enabled (EXT or KHR feature struct).
    pub vendor_binary_enabled: bool,
    /// `deviceFaultReportMasked` (`VK_KHR_device_fault`) enabled: `masked:` reports are delivered.
    pub report_masked_enabled: bool,
    /// The application enabled `VK_AMD_buffer_marker` and the layer emulates it.
    pub buffer_marker_enabled: bool,
}

fn has_extension(list: &[vk::ExtensionProperties], name: &CStr) -> bool {
    list.iter()
        .any(|p| p.extension_name_as_c_str().is_ok_and(|n| n == name))
}

/// What the layer provides on this physical device under the configured API.
pub(crate) fn provided_for(api: FaultApi, driver: &[vk::ExtensionProperties]) -> Provided {
    let lacks = |n: &CStr| !has_extension(driver, n);
    Provided {
        // The binding report is the other half of every fault report, so it is provided under both APIs.
        binding_report: lacks(vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME),
        ext_fault: api == FaultApi::Ext && lacks(vk::EXT_DEVICE_FAULT_NAME),
        khr_fault: api == FaultApi::Khr && lacks(KHR_DEVICE_FAULT_NAME),
        shader_abort: api == FaultApi::Khr && lacks(KHR_SHADER_ABORT_NAME),
        // Breadcrumbs are independent of the fault API and of the scenario (also offered with no
        // scenario, so applications can test their breadcrumbs under the layer).
        buffer_marker: lacks(vk::AMD_BUFFER_MARKER_NAME),
        // Video memory at the fault, likewise: lavapipe offers neither (Mesa 22.3.6, 2026-12-07).
        memory_budget: lacks(vk::EXT_MEMORY_BUDGET_NAME),
        memory_report: lacks(vk::EXT_DEVICE_MEMORY_REPORT_NAME),
    }
}

/// Whether the driver has `VK_EXT_device_fault` itself.
pub(crate) fn driver_has_ext_fault(driver: &[vk::ExtensionProperties]) -> bool {
    has_extension(driver, vk::EXT_DEVICE_FAULT_NAME)
}

/// Writes `all` with the two-call idiom into the application's `count`/`props`.
///
/// # Safety
/// `count` valid; `props` null or valid for `*count` elements.
pub(crate) unsafe fn write_properties(
    all: &[vk::ExtensionProperties],
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    if count.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    // SAFETY: per the caller.
    unsafe {
        if props.is_null() {
            *count = all.len() as u32;
            return vk::Result::SUCCESS;
        }
        let n = (*count as usize).min(all.len());
        std::ptr::copy_nonoverlapping(all.as_ptr(), props, n);
        *count = n as u32;
        if n < all.len() {
            vk::Result::INCOMPLETE
        } else {
            vk::Result::SUCCESS
        }
    }
}

/// Fills the feature structures of the provided extensions found in a `vkGetPhysicalDeviceFeatures2`
/// output chain (after the driver filled its own).
///
/// # Safety
/// `features` must be a valid `VkPhysicalDeviceFeatures2` with a valid chain.
pub(crate) unsafe fn fill_features(
    provided: Provided,
    features: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    // SAFETY: valid output chain per the caller; each node is cast to the type its sType names.
    unsafe {
        chain::for_each((*features).p_next.cast_const(), |node| {
            let s_type = (*node).s_type;
            if !provided.owns_structure(s_type) {
                return;
            }
            let node = node.cast_mut().cast::<c_void>();
            if s_type == vk::StructureType::PHYSICAL_DEVICE_ADDRESS_BINDING_REPORT_FEATURES_EXT {
                (*node.cast::<vk::PhysicalDeviceAddressBindingReportFeaturesEXT<'_>>())
                    .report_address_binding = vk::TRUE;
            } else if s_type == vk::StructureType::PHYSICAL_DEVICE_FAULT_FEATURES_EXT {
                let f = &mut *node.cast::<vk::PhysicalDeviceFaultFeaturesEXT<'_>>();
                f.device_fault = vk::TRUE;
                f.device_fault_vendor_binary = vk::TRUE;
            } else if s_type == structure_type::PHYSICAL_DEVICE_FAULT_FEATURES_KHR {
                let f = &mut *node.cast::<PhysicalDeviceFaultFeaturesKHR>();
                f.device_fault = vk::TRUE;
                f.device_fault_vendor_binary = vk::TRUE;
                // Masked faults are reported (the `masked:` scenario); promoting them to a loss is
                // not offered.
                f.device_fault_report_masked = vk::TRUE;
                f.device_fault_device_lost_on_masked = vk::FALSE;
            } else if s_type == structure_type::PHYSICAL_DEVICE_SHADER_ABORT_FEATURES_KHR {
                (*node.cast::<PhysicalDeviceShaderAbortFeaturesKHR>()).shader_abort = vk::TRUE;
            } else if s_type == vk::StructureType::PHYSICAL_DEVICE_DEVICE_MEMORY_REPORT_FEATURES_EXT
            {
                (*node.cast::<vk::PhysicalDeviceDeviceMemoryReportFeaturesEXT<'_>>())
                    .device_memory_report = vk::TRUE;
            }
        });
    }
}

/// Fills the property structures of the provided KHR extensions in a `vkGetPhysicalDeviceProperties2`
/// output chain.
///
/// # Safety
/// `properties` must be a valid `VkPhysicalDeviceProperties2` with a valid chain.
pub(crate) unsafe fn fill_properties(
    provided: Provided,
    properties: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    // SAFETY: valid output chain per the caller; each node is cast to the type its sType names.
    unsafe {
        chain::for_each((*properties).p_next.cast_const(), |node| {
            let s_type = (*node).s_type;
            let node = node.cast_mut().cast::<c_void>();
            if provided.khr_fault && s_type == structure_type::PHYSICAL_DEVICE_FAULT_PROPERTIES_KHR
            {
                (*node.cast::<PhysicalDeviceFaultPropertiesKHR>()).max_device_fault_count =
                    MAX_DEVICE_FAULT_COUNT;
            } else if provided.shader_abort
                && s_type == structure_type::PHYSICAL_DEVICE_SHADER_ABORT_PROPERTIES_KHR
            {
                (*node.cast::<PhysicalDeviceShaderAbortPropertiesKHR>())
                    .max_shader_abort_message_size = MAX_SHADER_ABORT_MESSAGE_SIZE;
            }
        });
    }
}

/// Reads which of the drill's extensions and features the application enabled in `create_info`.
///
/// # Safety
/// `create_info` must be a valid `VkDeviceCreateInfo`.
pub(crate) unsafe fn enabled_in(
    create_info: &vk::DeviceCreateInfo<'_>,
    provided: Provided,
    ext_fault_native: bool,
) -> DeviceExtensions {
    let mut names = Vec::new();
    for i in 0..create_info.enabled_extension_count as usize {
        // SAFETY: the array holds `enabled_extension_count` valid C strings.
        unsafe {
            names.push(CStr::from_ptr(
                *create_info.pp_enabled_extension_names.add(i),
            ))
        };
    }
    let enabled = |n: &CStr| names.contains(&n);
    let mut out = DeviceExtensions {
        provided,
        ext_fault_enabled: enabled(vk::EXT_DEVICE_FAULT_NAME),
        ext_fault_native,
        khr_fault_enabled: enabled(KHR_DEVICE_FAULT_NAME),
        buffer_marker_enabled: provided.buffer_marker && enabled(vk::AMD_BUFFER_MARKER_NAME),
        ..Default::default()
    };
    let binding_ext =
        provided.binding_report && enabled(vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME);
    out.binding_report_native =
        !provided.binding_report && enabled(vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME);
    // SAFETY: valid chain; each node is read as the type its sType names.
    unsafe {
        chain::for_each(create_info.p_next, |node| {
            let s_type = (*node).s_type;
            if s_type == vk::StructureType::PHYSICAL_DEVICE_ADDRESS_BINDING_REPORT_FEATURES_EXT {
                let f = &*node.cast::<vk::PhysicalDeviceAddressBindingReportFeaturesEXT<'_>>();
                out.binding_report_enabled |= binding_ext && f.report_address_binding == vk::TRUE;
            } else if s_type == vk::StructureType::PHYSICAL_DEVICE_FAULT_FEATURES_EXT {
                let f = &*node.cast::<vk::PhysicalDeviceFaultFeaturesEXT<'_>>();
                out.vendor_binary_enabled |= f.device_fault_vendor_binary == vk::TRUE;
            } else if s_type == structure_type::PHYSICAL_DEVICE_FAULT_FEATURES_KHR {
                let f = &*node.cast::<PhysicalDeviceFaultFeaturesKHR>();
                out.vendor_binary_enabled |= f.device_fault_vendor_binary == vk::TRUE;
                out.report_masked_enabled |= f.device_fault_report_masked == vk::TRUE;
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(names: &[&CStr]) -> Vec<vk::ExtensionProperties> {
        Provided {
            binding_report: names.contains(&vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME),
            ext_fault: names.contains(&vk::EXT_DEVICE_FAULT_NAME),
            khr_fault: names.contains(&KHR_DEVICE_FAULT_NAME),
            shader_abort: names.contains(&KHR_SHADER_ABORT_NAME),
            buffer_marker: names.contains(&vk::AMD_BUFFER_MARKER_NAME),
            memory_budget: names.contains(&vk::EXT_MEMORY_BUDGET_NAME),
            memory_report: names.contains(&vk::EXT_DEVICE_MEMORY_REPORT_NAME),
        }
        .properties()
    }

    #[test]
    fn provides_what_the_driver_lacks() {
        let p = provided_for(FaultApi::Ext, &[]);
        assert_eq!(
            p,
            Provided {
                binding_report: true,
                ext_fault: true,
                buffer_marker: true,
                memory_budget: true,
                memory_report: true,
                ..Default::default()
            }
        );
        let p = provided_for(FaultApi::Khr, &[]);
        assert_eq!(
            p,
            Provided {
                binding_report: true,
                khr_fault: true,
                shader_abort: true,
                buffer_marker: true,
                memory_budget: true,
                memory_report: true,
                ..Default::default()
            }
        );
        // An NVIDIA-like driver: both EXT extensions and the AMD marker native, nothing provided in
        // ext mode.
        let nv = props(&[
            vk::EXT_DEVICE_FAULT_NAME,
            vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME,
            vk::AMD_BUFFER_MARKER_NAME,
            vk::EXT_MEMORY_BUDGET_NAME,
        ]);
        // NVIDIA 580.159.04 has the budget but no memory report (docs/driver-facts.md).
        assert_eq!(
            provided_for(FaultApi::Ext, &nv),
            Provided {
                memory_report: true,
                ..Default::default()
            }
        );
        assert!(driver_has_ext_fault(&nv));
    }

    #[test]
    fn two_call_idiom() {
        let all = props(&[
            vk::EXT_DEVICE_FAULT_NAME,
            vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME,
        ]);
        let mut count = 0;
        // SAFETY: valid count, null array.
        let result = unsafe { write_properties(&all, &mut count, std::ptr::null_mut()) };
        assert_eq!(result, vk::Result::SUCCESS);
        assert_eq!(count, 2);
        let mut out = vec![vk::ExtensionProperties::default(); 1];
        count = 1;
        // SAFETY: `out` holds one element.
        let result = unsafe { write_properties(&all, &mut count, out.as_mut_ptr()) };
        assert_eq!(result, vk::Result::INCOMPLETE);
        assert_eq!(count, 1);
        assert_eq!(
            out[0].extension_name_as_c_str().unwrap(),
            vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME
        );
    }
}
