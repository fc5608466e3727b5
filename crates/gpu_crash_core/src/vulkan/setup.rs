//! The instance and device callbacks' shared state: what the settings asked for, and what the
//! callbacks produced (capabilities, the messenger, the feature chain kept alive for
//! `vkCreateDevice`).

use std::ffi::CStr;
use std::sync::{Arc, Mutex, MutexGuard};

use wgpu::hal::vulkan::{CreateDeviceCallbackArgs, CreateInstanceCallbackArgs};

use super::capabilities::GpuCrashCapabilities;
use super::driver_rule::DriverRule;
use super::features::{FaultFeatures, FeatureChain};
use super::identity::identity;
use super::memory_report::MemoryReportCounters;
use super::messenger::BindingMessenger;
use super::plan;
use super::request::ExtensionRequest;
use crate::capture::BindingRing;

/// What the callbacks produced, picked up by the plugin once the renderer exists.
#[derive(Default)]
pub struct SetupOutcome {
    /// `VK_EXT_debug_utils` is on the instance.
    pub instance_debug_utils: bool,
    /// Exact mode was asked for and its layer could not be enabled on the instance: why.
    pub exact_layer_missing: Option<String>,
    /// Filled by the device callback.
    pub capabilities: Option<GpuCrashCapabilities>,
    /// Registered by the device callback; the plugin moves it into the render world.
    pub messenger: Option<BindingMessenger>,
    /// How often the device callback ran (more than once after renderer recovery): the generation of
    /// the latest device.
    pub device_callback_runs: u32,
    /// Where the driver's memory report of the latest device counts failed allocations (with
    /// `VK_EXT_device_memory_report`); the reporter moves it into the device's session.
    pub memory_report: Option<Arc<MemoryReportCounters>>,
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
    /// Drivers the binding report stays off on ([`crate::ReporterSettings::binding_report_off_on`]).
    binding_report_off_on: Vec<DriverRule>,
    outcome: Mutex<SetupOutcome>,
}

impl VulkanSetup {
    /// What the plugin's settings asked for.
    pub fn request(&self) -> ExtensionRequest {
        self.request
    }

    /// Setup that feeds binding events into `ring`, with the binding report left off on the
    /// drivers `binding_report_off_on` names.
    pub fn new(
        ring: Arc<BindingRing>,
        request: ExtensionRequest,
        binding_report_off_on: Vec<DriverRule>,
    ) -> Arc<Self> {
        Arc::new(Self {
            ring,
            request,
            binding_report_off_on,
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
        let exact = self
            .request
            .exact_layer
            .then(|| super::exact::enable_on_instance(args.entry));
        let mut outcome = self.outcome();
        outcome.instance_debug_utils = offered && (wanted || already);
        match exact {
            Some(Ok(how)) => {
                tracing::info!("GPU crash reporter: exact mode: VK_LAYER_gpu_crash_exact {how}");
                outcome.exact_layer_missing = None;
            }
            Some(Err(why)) => {
                let line = format!(
                    "{}{why}; reports rank the stage's pipelines",
                    super::exact::MISSING_PREFIX
                );
                // Once per run: a renderer re-created after a loss asks again.
                if outcome.exact_layer_missing.as_deref() != Some(line.as_str()) {
                    tracing::warn!("GPU crash reporter: {line}");
                }
                outcome.exact_layer_missing = Some(line);
            }
            None => {}
        }
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
        let identity = unsafe { identity(instance, physical_device) };
        // SAFETY: valid instance and physical device handles from wgpu.
        let mut plan = unsafe {
            plan::plan_device(
                instance,
                physical_device,
                shared.instance_api_version(),
                debug_utils,
                self.request,
                &offered_by_device,
                plan::binding_report_rule(&self.binding_report_off_on, &identity),
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
        let memory_report = enabled.device_memory_report.then(|| {
            let counters = Arc::new(MemoryReportCounters::default());
            chain.report_memory_to(&counters);
            counters
        });
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
                plan.request_after_rules(self.request),
                Arc::clone(&self.ring),
                generation,
                &mut missing,
            )
        };

        let mut outcome = self.outcome();
        missing.extend(outcome.exact_layer_missing.clone());
        let capabilities = plan.capabilities(debug_utils, messenger.is_some(), missing, identity);

        outcome.device_callback_runs = generation;
        outcome.capabilities = Some(capabilities);
        if let Some(unadopted) = std::mem::replace(&mut outcome.messenger, messenger) {
            // A device callback before never got its device (creation failed): its instance may be
            // gone, so the messenger is leaked rather than destroyed (see `SetupOutcome`'s Drop).
            std::mem::forget(unadopted);
        }
        outcome.feature_chain = Some(chain);
        outcome.memory_report = memory_report;
        enabled
    }
}
