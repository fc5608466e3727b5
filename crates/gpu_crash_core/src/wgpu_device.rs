//! For a wgpu application: the instance and the device created through the reporter's callbacks
//! (what Bevy's `raw_vulkan_init` does for a Bevy game), the device attached, and wgpu's device-lost
//! callback pointed at the reporter.

use wgpu::hal::api::Vulkan;

use crate::reporter::CrashReporter;

/// The device could not be created.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// wgpu refused the device.
    #[error(transparent)]
    Request(#[from] wgpu::RequestDeviceError),
    /// The Vulkan driver refused the device.
    #[error("the Vulkan driver could not open the device: {0}")]
    Open(#[from] wgpu::hal::DeviceError),
}

impl CrashReporter {
    /// A wgpu instance on Vulkan with the reporter's instance extension (`VK_EXT_debug_utils`),
    /// or, where Vulkan cannot start, `wgpu::Instance::new(desc)` as the application would have.
    pub fn create_instance(&self, desc: wgpu::InstanceDescriptor) -> wgpu::Instance {
        // SAFETY: the callback only adds an extension the loader reports as available.
        let raw = unsafe {
            wgpu::hal::vulkan::Instance::init_with_callback(
                &wgpu::hal::InstanceDescriptor {
                    name: "wgpu",
                    flags: desc.flags,
                    memory_budget_thresholds: desc.memory_budget_thresholds,
                    backend_options: desc.backend_options.clone(),
                    telemetry: None,
                    display: None,
                },
                Some(Box::new(|mut args| self.on_create_instance(&mut args))),
            )
        };
        match raw {
            // SAFETY: a Vulkan hal instance wgpu-hal just created, handed to wgpu whole.
            Ok(raw) => unsafe { wgpu::Instance::from_hal::<Vulkan>(raw) },
            Err(err) => {
                tracing::warn!(
                    "GPU crash reporter: no Vulkan instance ({err}); GPU crash capture is off"
                );
                wgpu::Instance::new(desc)
            }
        }
    }

    /// Creates the device on `adapter` with what the driver offers of the fault extensions, attaches
    /// it ([`Self::attach`]) and has wgpu's device-lost callback report a loss. A non-Vulkan adapter
    /// gets a plain `request_device` and no reporting.
    ///
    /// wgpu keeps one device-lost callback: an application that sets its own afterwards calls
    /// [`Self::device_lost`] from it. The reporter holds the device until [`Self::detach`].
    pub async fn request_device(
        &self,
        adapter: &wgpu::Adapter,
        desc: &wgpu::DeviceDescriptor<'_>,
    ) -> Result<(wgpu::Device, wgpu::Queue), DeviceError> {
        // SAFETY: the hal adapter is only used to open the device; the callback only adds
        // extensions the device offers and enables features it supports, and removes nothing.
        let opened = unsafe {
            let Some(raw_adapter) = adapter.as_hal::<Vulkan>() else {
                return Ok(adapter.request_device(desc).await?);
            };
            let open = raw_adapter.open_with_callback(
                desc.required_features,
                &adapter.limits(),
                &desc.memory_hints,
                Some(Box::new(|mut args| {
                    self.on_create_device(&mut args, &raw_adapter);
                })),
            )?;
            adapter.create_device_from_hal::<Vulkan>(open, desc)?
        };
        let (device, queue) = opened;
        self.attach(&device);
        let reporter = self.clone();
        device.set_device_lost_callback(move |reason, message| {
            // `Destroyed`: the application dropped or destroyed its device, no fault.
            if reason == wgpu::DeviceLostReason::Unknown {
                reporter.device_lost(&message);
            }
        });
        Ok((device, queue))
    }
}
