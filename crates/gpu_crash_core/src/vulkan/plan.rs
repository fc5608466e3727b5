//! What the plugin enables on one physical device, decided in one place: by the `raw_vulkan_init`
//! device callback for Bevy's device, and by [`GpuCrashCapabilities::probe`] for a device created
//! without Bevy (`gpu-crash doctor`). Both then say the same thing in the same words.
//!
//! [`GpuCrashCapabilities::probe`]: super::GpuCrashCapabilities::probe

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;

use super::capabilities::GpuCrashCapabilities;
use super::driver_rule::{first_match, DriverRule};
use super::features::FeatureChain;
use super::features::{FaultFeatures, OfferedExtensions};
use super::markers::MarkerError;
use super::messenger::BindingMessenger;
use super::request::ExtensionRequest;
use crate::capture::BindingRing;

/// The extensions and features to enable, and why the others stay off.
#[derive(Clone, Debug, Default)]
pub(crate) struct DevicePlan {
    /// Device extensions to enable, in a stable order.
    pub extensions: Vec<&'static CStr>,
    /// Feature bits to enable through [`FeatureChain::enabling`].
    pub enabled: FaultFeatures,
    /// `VK_AMD_buffer_marker` is enabled (stage breadcrumbs).
    pub buffer_marker: bool,
    /// `VK_EXT_memory_budget` is enabled (usage and budget per heap at the fault).
    pub memory_budget: bool,
    /// One line per capability left off, as [`super::GpuCrashCapabilities::missing`] shows it.
    pub missing: Vec<String>,
    /// The binding report is offered and asked for, but a rule of `binding_report_off_on` holds
    /// for this driver: no messenger either.
    pub binding_report_ruled_off: bool,
}

impl DevicePlan {
    /// `request` with the binding report off where a driver rule turned it off, for what is done
    /// after the plan (the messenger).
    pub(crate) fn request_after_rules(&self, request: ExtensionRequest) -> ExtensionRequest {
        ExtensionRequest {
            address_binding_report: request.address_binding_report
                && !self.binding_report_ruled_off,
            ..request
        }
    }

    /// What the plugin reports for a device created with this plan: its extensions and features,
    /// whether the binding messenger is registered, `missing` (the plan's lines and those added
    /// since) and the GPU's `identity`; GPU progress is left to the caller, who made (or checked) the
    /// marker memory.
    pub(crate) fn capabilities(
        &self,
        debug_utils: bool,
        binding_messenger: bool,
        missing: Vec<String>,
        identity: GpuCrashCapabilities,
    ) -> GpuCrashCapabilities {
        let enabled = self.enabled;
        GpuCrashCapabilities {
            debug_utils,
            binding_messenger,
            address_binding_report: enabled.report_address_binding,
            device_fault_ext: enabled.device_fault_ext,
            device_fault_khr: enabled.device_fault_khr,
            device_fault_vendor_binary: enabled.device_fault_ext_vendor_binary
                || enabled.device_fault_khr_vendor_binary,
            shader_abort_khr: enabled.shader_abort,
            device_fault_report_masked: enabled.device_fault_khr_report_masked,
            buffer_marker: self.buffer_marker,
            memory_budget: self.memory_budget,
            device_memory_report: enabled.device_memory_report,
            missing,
            ..identity
        }
    }
}

/// Decides what to enable on `physical_device`.
///
/// `instance_api_version` is the version the instance was created with, `debug_utils` whether the
/// instance has `VK_EXT_debug_utils`, `offered_by_device` whether the device offers an extension,
/// `binding_report_rule` the rule of `binding_report_off_on` that holds for the device's driver
/// (see [`binding_report_rule`]), with the device's identity.
///
/// # Safety
/// `physical_device` belongs to `instance`.
pub(crate) unsafe fn plan_device(
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
    instance_api_version: u32,
    debug_utils: bool,
    request: ExtensionRequest,
    offered_by_device: &dyn Fn(&CStr) -> bool,
    binding_report_rule: Option<(&DriverRule, &GpuCrashCapabilities)>,
) -> DevicePlan {
    // SAFETY: valid instance and physical device (the caller's contract).
    let properties = unsafe { instance.get_physical_device_properties(physical_device) };
    let mut missing = Vec::new();
    let ruled_off = request.address_binding_report
        && offered_by_device(vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME)
        && binding_report_rule
            .inspect(|(rule, gpu)| {
                missing.push(format!(
                    "{}: off on this driver ({} {}) by the binding_report_off_on setting: {}",
                    vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME.to_string_lossy(),
                    gpu.driver_name,
                    gpu.driver_info,
                    rule.why
                ))
            })
            .is_some();
    let mut offer = |wanted: bool, name: &CStr, needs: Option<(bool, &str)>| -> bool {
        if !wanted {
            missing.push(format!("{}: disabled in settings", name.to_string_lossy()));
            return false;
        }
        if !offered_by_device(name) {
            missing.push(format!(
                "{}: not offered by the driver",
                name.to_string_lossy()
            ));
            return false;
        }
        if let Some((false, why)) = needs {
            missing.push(format!("{}: {why}", name.to_string_lossy()));
            return false;
        }
        true
    };
    let properties2 = instance_api_version >= vk::API_VERSION_1_1
        && properties.api_version >= vk::API_VERSION_1_1;
    let needs_properties2 = Some((properties2, "needs Vulkan 1.1 for the feature query"));
    let offered = OfferedExtensions {
        address_binding_report: !ruled_off
            && offer(
                request.address_binding_report,
                vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME,
                Some((
                    debug_utils && properties2,
                    "needs VK_EXT_debug_utils on the instance and Vulkan 1.1",
                )),
            ),
        device_fault_ext: offer(
            request.device_fault,
            vk::EXT_DEVICE_FAULT_NAME,
            needs_properties2,
        ),
        device_fault_khr: offer(
            request.device_fault,
            vulkan_fault_ffi::KHR_DEVICE_FAULT_NAME,
            needs_properties2,
        ),
        shader_abort_khr: offer(
            request.device_fault,
            vulkan_fault_ffi::KHR_SHADER_ABORT_NAME,
            needs_properties2,
        ),
        // Failed allocations for the report: no setting. The driver calls us once per device
        // memory event (allocations are rare next to draws), and our callback returns at once on
        // every event but a failure.
        device_memory_report: offer(true, vk::EXT_DEVICE_MEMORY_REPORT_NAME, needs_properties2),
    };
    // No feature bit: offered (with Vulkan 1.1 for the query) means usable. wgpu enables it too
    // wherever offered; asking for it here makes the report's reading independent of that.
    let memory_budget = offer(true, vk::EXT_MEMORY_BUDGET_NAME, needs_properties2);
    // No feature bit: offered means usable.
    let buffer_marker = offer(request.buffer_marker, vk::AMD_BUFFER_MARKER_NAME, None);
    let mut extensions = Vec::new();
    if buffer_marker {
        extensions.push(vk::AMD_BUFFER_MARKER_NAME);
    }
    if memory_budget {
        extensions.push(vk::EXT_MEMORY_BUDGET_NAME);
    }
    // SAFETY: Vulkan 1.1 checked above for every offered extension (none are offered otherwise).
    let supported = unsafe { FeatureChain::query(instance, physical_device, offered) };
    // `asked`: wanted, offered and usable as far as `offer` could tell; an extension left off by a
    // setting or a driver rule already has its line.
    let mut enable = |asked: bool, on: bool, name: &'static CStr, feature: &str| {
        if on {
            extensions.push(name);
        } else if asked {
            missing.push(format!(
                "{}: offered, but {feature} is not supported",
                name.to_string_lossy()
            ));
        }
    };
    enable(
        offered.address_binding_report,
        supported.report_address_binding,
        vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME,
        "reportAddressBinding",
    );
    enable(
        offered.device_fault_ext,
        supported.device_fault_ext,
        vk::EXT_DEVICE_FAULT_NAME,
        "deviceFault",
    );
    enable(
        offered.device_fault_khr,
        supported.device_fault_khr,
        vulkan_fault_ffi::KHR_DEVICE_FAULT_NAME,
        "deviceFault",
    );
    enable(
        offered.shader_abort_khr,
        supported.shader_abort,
        vulkan_fault_ffi::KHR_SHADER_ABORT_NAME,
        "shaderAbort",
    );
    enable(
        offered.device_memory_report,
        supported.device_memory_report,
        vk::EXT_DEVICE_MEMORY_REPORT_NAME,
        "deviceMemoryReport",
    );
    let enabled = FaultFeatures {
        device_fault_ext_vendor_binary: supported.device_fault_ext
            && supported.device_fault_ext_vendor_binary,
        device_fault_khr_vendor_binary: supported.device_fault_khr
            && supported.device_fault_khr_vendor_binary,
        device_fault_khr_report_masked: supported.device_fault_khr
            && supported.device_fault_khr_report_masked,
        ..supported
    };
    DevicePlan {
        extensions,
        enabled,
        buffer_marker,
        memory_budget,
        missing,
        binding_report_ruled_off: ruled_off,
    }
}

/// The first rule of `binding_report_off_on` that holds for `gpu`'s driver, with `gpu`, for
/// [`plan_device`].
pub(crate) fn binding_report_rule<'a>(
    binding_report_off_on: &'a [DriverRule],
    gpu: &'a GpuCrashCapabilities,
) -> Option<(&'a DriverRule, &'a GpuCrashCapabilities)> {
    first_match(binding_report_off_on, gpu).map(|rule| (rule, gpu))
}

/// Registers the binding messenger when the request wants the binding report and the instance has
/// `VK_EXT_debug_utils`; otherwise, or when registering fails, says why in `missing`.
///
/// # Safety
/// `instance` was created from `entry`, has `VK_EXT_debug_utils` when `debug_utils` is true, and
/// outlives the returned messenger.
pub(crate) unsafe fn register_messenger(
    entry: &ash::Entry,
    instance: &ash::Instance,
    debug_utils: bool,
    request: ExtensionRequest,
    ring: Arc<BindingRing>,
    generation: u32,
    missing: &mut Vec<String>,
) -> Option<BindingMessenger> {
    if !debug_utils {
        missing.push("VK_EXT_debug_utils: not offered by the loader".into());
        return None;
    }
    if !request.address_binding_report {
        return None;
    }
    // SAFETY: forwarded contract.
    match unsafe {
        BindingMessenger::register(
            entry,
            instance,
            ring,
            crate::capture::record::generation_tag(generation),
        )
    } {
        Ok(m) => Some(m),
        Err(err) => {
            missing.push(format!(
                "binding messenger: vkCreateDebugUtilsMessengerEXT failed: {err}"
            ));
            None
        }
    }
}

/// The `missing` line when the GPU progress markers could not be created.
pub(crate) fn progress_markers_off(err: &MarkerError) -> String {
    format!("GPU progress markers: {err}; the hang watchdog stays off")
}
