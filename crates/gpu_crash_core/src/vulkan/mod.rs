//! Everything that touches raw Vulkan: enabling the fault extensions on the device through wgpu's
//! instance and device creation callbacks (`Instance::init_with_callback`,
//! `Adapter::open_with_callback`; Bevy's `raw_vulkan_init` calls them), registering the binding
//! messenger, reading the GPU's identity, asking the device what faulted.
//!
//! The callbacks run while wgpu creates the instance and the device.
//! Whatever the driver lacks is marked off in [`GpuCrashCapabilities::missing`]; the game runs as before.

mod capabilities;
pub mod fault;
mod features;
pub(crate) mod markers;
pub(crate) mod messenger;
mod plan;
mod probe;
pub mod texture;

use std::ffi::CStr;
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;
use wgpu::hal::vulkan::{CreateDeviceCallbackArgs, CreateInstanceCallbackArgs};

pub use capabilities::{
    decode_api_version, decode_driver_version, vendor_name, GpuCrashCapabilities,
};
pub use features::{FaultFeatures, OfferedExtensions};
pub use messenger::BindingMessenger;
pub(crate) use plan::progress_markers_off;
pub use probe::ProbeError;

use crate::capture::BindingRing;
use features::FeatureChain;

/// Which capabilities to ask for (all by default; a game can switch pieces off).
#[derive(Clone, Copy, Debug)]
pub struct ExtensionRequest {
    /// Ask for `VK_EXT_device_address_binding_report` and register the messenger.
    pub address_binding_report: bool,
    /// Ask for `VK_EXT_device_fault` / `VK_KHR_device_fault` (+ `VK_KHR_shader_abort`).
    pub device_fault: bool,
    /// Ask for `VK_AMD_buffer_marker` (GPU breadcrumbs per render stage).
    pub buffer_marker: bool,
}

impl Default for ExtensionRequest {
    fn default() -> Self {
        Self {
            address_binding_report: true,
            device_fault: true,
            buffer_marker: true,
        }
    }
}

/// What the callbacks produced, picked up by the plugin once the renderer exists.
#[derive(Default)]
pub struct SetupOutcome {
    /// `VK_EXT_debug_utils` is on the instance.
    pub instance_debug_utils: bool,
    /// Filled by the device callback.
    pub capabilities: Option<GpuCrashCapabilities>,
    /// Registered by the device callback; the plugin moves it into the render world.
    pub messenger: Option<BindingMessenger>,
    /// How often the device callback ran (more than once after renderer recovery): the generation of
    /// the latest device.
    pub device_callback_runs: u32,
    feature_chain: Option<Box<FeatureChain>>,
}

impl Drop for SetupOutcome {
    /// A messenger still here was never adopted by a render device (the app exited while Bevy was
    /// re-creating its renderer). Its instance may already be destroyed, and destroying a messenger
    /// after its instance is undefined behaviour (a crash in the loader, seen on lavapipe), so it is
    /// leaked: a few bytes, once, at exit.
    fn drop(&mut self) {
        if let Some(messenger) = self.messenger.take() {
            std::mem::forget(messenger);
        }
    }
}

/// State shared by the `raw_vulkan_init` callbacks and the plugin.
pub struct VulkanSetup {
    ring: Arc<BindingRing>,
    request: ExtensionRequest,
    outcome: Mutex<SetupOutcome>,
}

impl VulkanSetup {
    /// What the plugin's settings asked for.
    pub fn request(&self) -> ExtensionRequest {
        self.request
    }

    /// Setup that feeds binding events into `ring`.
    pub fn new(ring: Arc<BindingRing>, request: ExtensionRequest) -> Arc<Self> {
        Arc::new(Self {
            ring,
            request,
            outcome: Mutex::new(SetupOutcome::default()),
        })
    }

    /// The outcome so far.
    pub fn outcome(&self) -> MutexGuard<'_, SetupOutcome> {
        self.outcome.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// wgpu's instance callback: adds `VK_EXT_debug_utils` where the loader offers it and the
    /// binding report is asked for.
    pub fn on_create_instance(&self, args: &mut CreateInstanceCallbackArgs<'_, '_, '_>) {
        let name = ash::ext::debug_utils::NAME;
        let already = args.extensions.contains(&name);
        // SAFETY: plain loader query with a valid entry.
        let offered = already
            || unsafe { args.entry.enumerate_instance_extension_properties(None) }
                .map(|list| list.iter().any(|e| e.extension_name_as_c_str() == Ok(name)))
                .unwrap_or(false);
        // Only the binding report needs it (object names arrive through it). Once it is on, wgpu
        // names every labelled object and labels every pass through the driver: on the H200 with
        // 1,000 buffers churned per frame that was the plugin's cost with capture off (frame ratio
        // 1.134 with it, 1.028 without; BENCHMARKS.md, batches 10 and 11).
        let wanted = self.request.address_binding_report;
        if offered && wanted && !already {
            // wgpu adds it only with InstanceFlags::DEBUG; release builds need it too.
            args.extensions.push(name);
        }
        self.outcome().instance_debug_utils = offered && (wanted || already);
    }

    /// wgpu's device callback: adds the extensions the device offers of those asked for, chains
    /// their features onto the create info, and registers the binding messenger before the device
    /// exists (so no bind of it is missed). Returns what it enabled.
    pub fn on_create_device(
        &self,
        args: &mut CreateDeviceCallbackArgs<'_, '_, '_>,
        adapter: &wgpu::hal::vulkan::Adapter,
    ) -> FaultFeatures {
        let shared = adapter.shared_instance();
        let instance = shared.raw_instance();
        let physical_device = adapter.raw_physical_device();
        let offered_by_device = |name: &CStr| {
            adapter
                .physical_device_capabilities()
                .supports_extension(name)
        };
        let debug_utils = shared.extensions().contains(&ash::ext::debug_utils::NAME);
        // SAFETY: valid instance and physical device handles from wgpu.
        let mut plan = unsafe {
            plan::plan_device(
                instance,
                physical_device,
                shared.instance_api_version(),
                debug_utils,
                self.request,
                &offered_by_device,
            )
        };
        for &name in &plan.extensions {
            if !args.extensions.contains(&name) {
                args.extensions.push(name);
            }
        }
        let enabled = plan.enabled;
        let mut missing = std::mem::take(&mut plan.missing);
        let mut chain = FeatureChain::enabling(enabled);
        // SAFETY: the chain is boxed and stored in `outcome` below, so it outlives vkCreateDevice.
        unsafe { chain.prepend_to(enabled, args.create_info) };

        // This device's generation: 1 for the app's first, one more per renderer recovery.
        let generation = self.outcome().device_callback_runs + 1;
        // Register the messenger now, before the device exists, so no bind of the device is missed.
        // SAFETY: the instance (with VK_EXT_debug_utils when `debug_utils`) outlives the messenger
        // (see BindingMessenger's docs: its owner holds the render device).
        let messenger = unsafe {
            plan::register_messenger(
                shared.entry(),
                instance,
                debug_utils,
                self.request,
                Arc::clone(&self.ring),
                generation,
                &mut missing,
            )
        };

        // SAFETY: valid instance and physical device handles from wgpu.
        let identity = unsafe { identity(instance, physical_device) };
        let capabilities = plan.capabilities(debug_utils, messenger.is_some(), missing, identity);

        let mut outcome = self.outcome();
        outcome.device_callback_runs = generation;
        outcome.capabilities = Some(capabilities);
        if let Some(unadopted) = std::mem::replace(&mut outcome.messenger, messenger) {
            // A device callback before never got its device (creation failed): its instance may be
            // gone, so the messenger is leaked rather than destroyed (see `SetupOutcome`'s Drop).
            std::mem::forget(unadopted);
        }
        outcome.feature_chain = Some(chain);
        enabled
    }
}

/// Allocates the device's GPU progress markers (see [`markers`]).
pub(crate) fn create_marker_buffer(
    device: &wgpu::Device,
    amd_buffer_marker: bool,
    debug_utils: bool,
    stage_breadcrumbs: bool,
) -> Result<markers::MarkerBuffer, markers::MarkerError> {
    // SAFETY: only raw handles are read; the guard is dropped at the end of this function.
    let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }
        .ok_or(markers::MarkerError::NotVulkan)?;
    let instance = hal.shared_instance().raw_instance();
    // SAFETY: the device is wgpu's live device of that instance and physical device; the extension
    // flags say what the instance and device callbacks enabled; the device clone keeps the device
    // alive.
    unsafe {
        markers::MarkerBuffer::create(
            instance,
            hal.raw_physical_device(),
            hal.raw_device(),
            amd_buffer_marker,
            debug_utils,
            Box::new(device.clone()),
        )
    }
    .map(|markers| {
        if stage_breadcrumbs {
            markers
        } else {
            markers.without_cpu_stage_marks()
        }
    })
}

/// The GPU's identity (name, vendor, driver, versions, memory); every capability off.
///
/// # Safety
/// `physical_device` belongs to `instance`.
unsafe fn identity(
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
) -> GpuCrashCapabilities {
    // SAFETY: the caller's contract.
    let properties = unsafe { instance.get_physical_device_properties(physical_device) };
    GpuCrashCapabilities {
        gpu_name: properties
            .device_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        vendor_id: properties.vendor_id,
        device_id: properties.device_id,
        vendor_name: vendor_name(properties.vendor_id).to_owned(),
        device_type: format!("{:?}", properties.device_type),
        driver_version_raw: properties.driver_version,
        driver_version: decode_driver_version(properties.vendor_id, properties.driver_version),
        api_version: decode_api_version(properties.api_version),
        memory_size_mb: device_local_mib(instance, physical_device),
        ..driver_identity(instance, physical_device, properties.api_version)
    }
}

/// Sum of the device-local heaps in MiB.
fn device_local_mib(instance: &ash::Instance, physical_device: vk::PhysicalDevice) -> u64 {
    // SAFETY: valid instance and physical device handles from wgpu.
    let memory = unsafe { instance.get_physical_device_memory_properties(physical_device) };
    memory
        .memory_heaps_as_slice()
        .iter()
        .filter(|heap| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|heap| heap.size)
        .sum::<u64>()
        / (1024 * 1024)
}

/// Driver name and info from `VkPhysicalDeviceDriverProperties` (Vulkan 1.2), empty before that.
fn driver_identity(
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
    api_version: u32,
) -> GpuCrashCapabilities {
    if api_version < vk::API_VERSION_1_2 {
        return GpuCrashCapabilities::default();
    }
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut properties2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver);
    // SAFETY: Vulkan 1.2 device: the driver-properties structure is core and may be chained.
    unsafe { instance.get_physical_device_properties2(physical_device, &mut properties2) };
    let text = |r: Result<&CStr, _>| {
        r.map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    GpuCrashCapabilities {
        driver_name: text(driver.driver_name_as_c_str()),
        driver_info: text(driver.driver_info_as_c_str()),
        ..Default::default()
    }
}

/// Asks the device what faulted: KHR reports (waiting up to `khr_timeout`) and, after a loss, the
/// KHR debug info and the EXT fault info. Safe to call on a lost device; what failed is in
/// `errors`; never panics on driver errors.
pub fn query_device_fault(
    device: &wgpu::Device,
    capabilities: &GpuCrashCapabilities,
    khr_timeout: std::time::Duration,
    device_lost: bool,
) -> fault::RawFaultInfo {
    let info = fault::RawFaultInfo::default();
    if !capabilities.has_device_fault() {
        return info;
    }
    query_vulkan_device_fault(device, capabilities, khr_timeout, device_lost, info)
}

/// [`query_device_fault`] on a device built with the Vulkan backend.
fn query_vulkan_device_fault(
    device: &wgpu::Device,
    capabilities: &GpuCrashCapabilities,
    khr_timeout: std::time::Duration,
    device_lost: bool,
    mut info: fault::RawFaultInfo,
) -> fault::RawFaultInfo {
    // SAFETY: we only read raw handles and call fault queries, which the spec allows on a lost device.
    let Some(hal) = (unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        info.errors.push(fault::FaultQueryError::NotVulkan);
        return info;
    };
    let instance = hal.shared_instance().raw_instance();
    let raw = hal.raw_device();
    if capabilities.device_fault_khr {
        // SAFETY: VK_KHR_device_fault is enabled on this live device (capabilities say so).
        info = unsafe {
            fault::query_khr(
                instance,
                raw.handle(),
                khr_timeout.as_nanos().min(u128::from(u64::MAX)) as u64,
                device_lost,
                capabilities.shader_abort_khr,
            )
        };
    }
    // EXT fault info is defined after a loss only (NVIDIA answers VK_ERROR_UNKNOWN before).
    if capabilities.device_fault_ext && device_lost && info.addresses.is_empty() {
        // SAFETY: VK_EXT_device_fault and deviceFault are enabled on this device.
        let ext =
            unsafe { fault::query_ext(instance, raw, capabilities.device_fault_vendor_binary) };
        let errors = std::mem::take(&mut info.errors);
        let watchdog = info.watchdog_timeout;
        info = fault::RawFaultInfo {
            errors: errors.into_iter().chain(ext.errors.clone()).collect(),
            watchdog_timeout: watchdog,
            ..ext
        };
    }
    info
}
