//! Query and enable the fault-related device features through a pNext chain we own.
//!
//! Only structures of extensions the device offers are chained: chaining an unknown structure into
//! `vkGetPhysicalDeviceFeatures2` or `vkCreateDevice` is invalid usage.

use std::ffi::c_void;

use ash::vk;
use vulkan_fault_ffi::{PhysicalDeviceFaultFeaturesKHR, PhysicalDeviceShaderAbortFeaturesKHR};

use super::memory_report::MemoryReportCounters;

/// Which of our extensions the device offers (by `vkEnumerateDeviceExtensionProperties`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OfferedExtensions {
    pub address_binding_report: bool,
    pub device_fault_ext: bool,
    pub device_fault_khr: bool,
    pub shader_abort_khr: bool,
    pub device_memory_report: bool,
}

/// The feature bits we enable, as the device reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultFeatures {
    /// `reportAddressBinding` (`VK_EXT_device_address_binding_report`).
    pub report_address_binding: bool,
    /// `deviceFault` (`VK_EXT_device_fault`).
    pub device_fault_ext: bool,
    /// `deviceFaultVendorBinary` (`VK_EXT_device_fault`).
    pub device_fault_ext_vendor_binary: bool,
    /// `deviceFault` (`VK_KHR_device_fault`).
    pub device_fault_khr: bool,
    /// `deviceFaultVendorBinary` (`VK_KHR_device_fault`).
    pub device_fault_khr_vendor_binary: bool,
    /// `shaderAbort` (`VK_KHR_shader_abort`).
    pub shader_abort: bool,
    /// `deviceFaultReportMasked` (`VK_KHR_device_fault`): faults the driver recovered from are
    /// reported too (`DEVICE_LOST` clear), while the device lives on.
    pub device_fault_khr_report_masked: bool,
    /// `deviceMemoryReport` (`VK_EXT_device_memory_report`): the driver tells us of failed
    /// allocations (see [`super::memory_report`]).
    pub device_memory_report: bool,
}

/// Feature structures kept at a stable heap address until `vkCreateDevice` has read them.
#[derive(Default)]
pub struct FeatureChain {
    address_binding: vk::PhysicalDeviceAddressBindingReportFeaturesEXT<'static>,
    fault_ext: vk::PhysicalDeviceFaultFeaturesEXT<'static>,
    fault_khr: PhysicalDeviceFaultFeaturesKHR,
    shader_abort: PhysicalDeviceShaderAbortFeaturesKHR,
    memory_report: vk::PhysicalDeviceDeviceMemoryReportFeaturesEXT<'static>,
    /// Chained into `vkCreateDevice` only (not a feature structure): where the driver calls us with
    /// memory events. Its callback is set by [`FeatureChain::report_memory_to`].
    memory_report_info: vk::DeviceDeviceMemoryReportCreateInfoEXT<'static>,
}

// SAFETY: the chain is plain data; its raw pNext pointers only point into the same boxed chain (or at
// the create-info's previous chain during vkCreateDevice) and are never dereferenced by us.
unsafe impl Send for FeatureChain {}

impl FeatureChain {
    /// Links the structures of `offered` extensions in front of `tail` and returns the new head.
    ///
    /// # Safety
    /// `self` must not move while the returned pointer is in use (keep it boxed).
    unsafe fn link(&mut self, offered: OfferedExtensions, tail: *mut c_void) -> *mut c_void {
        let mut head = tail;
        if offered.device_memory_report {
            self.memory_report.p_next = head;
            head = &mut self.memory_report as *mut _ as *mut c_void;
        }
        if offered.shader_abort_khr {
            self.shader_abort.p_next = head;
            head = &mut self.shader_abort as *mut _ as *mut c_void;
        }
        if offered.device_fault_khr {
            self.fault_khr.p_next = head;
            head = &mut self.fault_khr as *mut _ as *mut c_void;
        }
        if offered.device_fault_ext {
            self.fault_ext.p_next = head;
            head = &mut self.fault_ext as *mut _ as *mut c_void;
        }
        if offered.address_binding_report {
            self.address_binding.p_next = head;
            head = &mut self.address_binding as *mut _ as *mut c_void;
        }
        head
    }

    /// Asks the device which of the feature bits it supports.
    ///
    /// # Safety
    /// `physical_device` belongs to `instance`, which is Vulkan 1.1+ (or has
    /// `VK_KHR_get_physical_device_properties2`, whose entry point 1.1 promoted).
    pub unsafe fn query(
        instance: &ash::Instance,
        physical_device: vk::PhysicalDevice,
        offered: OfferedExtensions,
    ) -> FaultFeatures {
        let mut chain = Box::<FeatureChain>::default();
        let mut features2 = vk::PhysicalDeviceFeatures2 {
            // SAFETY: the chain is boxed and outlives the call below.
            p_next: unsafe { chain.link(offered, std::ptr::null_mut()) },
            ..Default::default()
        };
        // SAFETY: valid instance/physical device, pNext chain of structures the device offers.
        unsafe { instance.get_physical_device_features2(physical_device, &mut features2) };
        FaultFeatures {
            report_address_binding: offered.address_binding_report
                && chain.address_binding.report_address_binding == vk::TRUE,
            device_fault_ext: offered.device_fault_ext && chain.fault_ext.device_fault == vk::TRUE,
            device_fault_ext_vendor_binary: offered.device_fault_ext
                && chain.fault_ext.device_fault_vendor_binary == vk::TRUE,
            device_fault_khr: offered.device_fault_khr && chain.fault_khr.device_fault == vk::TRUE,
            device_fault_khr_vendor_binary: offered.device_fault_khr
                && chain.fault_khr.device_fault_vendor_binary == vk::TRUE,
            device_fault_khr_report_masked: offered.device_fault_khr
                && chain.fault_khr.device_fault_report_masked == vk::TRUE,
            shader_abort: offered.shader_abort_khr && chain.shader_abort.shader_abort == vk::TRUE,
            device_memory_report: offered.device_memory_report
                && chain.memory_report.device_memory_report == vk::TRUE,
        }
    }

    /// A chain that enables exactly `features`. `deviceFaultReportMasked` only changes what the
    /// driver reports (faults it recovered from come as reports with `DEVICE_LOST` clear, each once),
    /// so it is enabled where supported: the non-fatal fault watch reads them.
    /// `deviceFaultDeviceLostOnMasked` stays off: it changes how the device behaves (a recovered
    /// fault would lose the device, ending the game where the driver could have gone on).
    pub fn enabling(features: FaultFeatures) -> Box<FeatureChain> {
        let b = |on: bool| if on { vk::TRUE } else { vk::FALSE };
        let mut chain = Box::<FeatureChain>::default();
        chain.address_binding.report_address_binding = b(features.report_address_binding);
        chain.fault_ext.device_fault = b(features.device_fault_ext);
        chain.fault_ext.device_fault_vendor_binary = b(features.device_fault_ext_vendor_binary);
        chain.fault_khr.device_fault = b(features.device_fault_khr);
        chain.fault_khr.device_fault_vendor_binary = b(features.device_fault_khr_vendor_binary);
        chain.fault_khr.device_fault_report_masked = b(features.device_fault_khr_report_masked);
        chain.shader_abort.shader_abort = b(features.shader_abort);
        chain.memory_report.device_memory_report = b(features.device_memory_report);
        chain
    }

    /// Has the driver report device memory events to `counters` (with `deviceMemoryReport`
    /// enabled, [`Self::prepend_to`] chains the create info that says so).
    pub fn report_memory_to(&mut self, counters: &std::sync::Arc<MemoryReportCounters>) {
        let (callback, user_data) = MemoryReportCounters::callback_for(counters);
        self.memory_report_info.pfn_user_callback = callback;
        self.memory_report_info.p_user_data = user_data;
    }

    /// Prepends the enabled structures to `create_info`'s pNext chain.
    ///
    /// # Safety
    /// `self` stays boxed and alive until `vkCreateDevice` returns.
    pub unsafe fn prepend_to(
        &mut self,
        features: FaultFeatures,
        create_info: &mut vk::DeviceCreateInfo<'_>,
    ) {
        let enabled = OfferedExtensions {
            address_binding_report: features.report_address_binding,
            device_fault_ext: features.device_fault_ext,
            device_fault_khr: features.device_fault_khr,
            shader_abort_khr: features.shader_abort,
            device_memory_report: features.device_memory_report,
        };
        let mut tail = create_info.p_next as *mut c_void;
        // The callback may only be given with the feature enabled, and is given only once set.
        if features.device_memory_report && self.memory_report_info.pfn_user_callback.is_some() {
            self.memory_report_info.p_next = tail.cast_const();
            tail = &mut self.memory_report_info as *mut _ as *mut c_void;
        }
        // SAFETY: forwarded contract; the old chain becomes our tail, nothing is removed.
        create_info.p_next = unsafe { self.link(enabled, tail) };
    }
}
