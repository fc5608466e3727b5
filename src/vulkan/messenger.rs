//! Our `VkDebugUtilsMessengerEXT` for address-binding messages, destroyed on drop.

use std::ffi::c_void;
use std::sync::Arc;

use ash::vk;

use crate::capture::messenger::{address_binding_callback, MessengerTarget};
use crate::capture::BindingRing;

/// Environment variable for cost measurements only: with it set, the messenger is registered (so the
/// driver produces every binding report) but its callback returns at once, without decoding or
/// pushing: the floor under our own capture cost (BENCHMARKS.md, "the driver's share").
pub(crate) const COST_FLOOR_VAR: &str = "GPU_CRASH_REPORTER_COST_FLOOR";

/// The floor's callback: the driver's report is delivered, and nothing of ours runs.
unsafe extern "system" fn returns_at_once(
    _severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _message_types: vk::DebugUtilsMessageTypeFlagsEXT,
    _callback_data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user_data: *mut c_void,
) -> vk::Bool32 {
    vk::FALSE
}

/// The registered messenger. Dropping it unregisters it; the ring it writes to is kept alive until
/// then. Each render device gets its own, tagged with the device's generation. It must be dropped before its instance is destroyed: its owner also holds the render device,
/// which keeps the instance alive.
pub struct BindingMessenger {
    loader: ash::ext::debug_utils::Instance,
    handle: vk::DebugUtilsMessengerEXT,
    _target: Box<MessengerTarget>,
    device_generation: u8,
}

impl BindingMessenger {
    /// Registers a messenger that receives `DEVICE_ADDRESS_BINDING` messages of every severity and
    /// stamps them with `device_generation`.
    ///
    /// # Safety
    /// `instance` was created with `VK_EXT_debug_utils` enabled and outlives the returned value.
    pub unsafe fn register(
        entry: &ash::Entry,
        instance: &ash::Instance,
        ring: Arc<BindingRing>,
        device_generation: u8,
    ) -> Result<Self, vk::Result> {
        let target = Box::new(MessengerTarget {
            ring,
            device_generation,
        });
        let floor = std::env::var_os(COST_FLOOR_VAR).is_some_and(|v| !v.is_empty());
        let callback: vk::PFN_vkDebugUtilsMessengerCallbackEXT = if floor {
            bevy::log::warn!(
                "GPU crash reporter: {COST_FLOOR_VAR} is set: the binding report stays on but its \
                 events are dropped unread (a cost measurement, BENCHMARKS.md); reports will not \
                 name GPU objects"
            );
            Some(returns_at_once)
        } else {
            Some(address_binding_callback)
        };
        let loader = ash::ext::debug_utils::Instance::new(entry, instance);
        let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::VERBOSE
                    | vk::DebugUtilsMessageSeverityFlagsEXT::INFO
                    | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING)
            .pfn_user_callback(callback)
            .user_data(&*target as *const MessengerTarget as *mut c_void);
        // SAFETY: valid create info; the user data (the boxed target, which does not move) is kept
        // alive by `_target` for as long as the messenger exists.
        let handle = unsafe { loader.create_debug_utils_messenger(&info, None) }?;
        Ok(Self {
            loader,
            handle,
            _target: target,
            device_generation,
        })
    }

    /// The generation of the device this messenger reports for.
    pub fn device_generation(&self) -> u8 {
        self.device_generation
    }

    /// The raw handle (for diagnostics and tests).
    pub fn handle(&self) -> vk::DebugUtilsMessengerEXT {
        self.handle
    }
}

impl Drop for BindingMessenger {
    fn drop(&mut self) {
        // SAFETY: created by `register` on this loader's instance, destroyed exactly once, while the
        // instance is alive (see the type's docs).
        unsafe { self.loader.destroy_debug_utils_messenger(self.handle, None) };
    }
}

impl std::fmt::Debug for BindingMessenger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("BindingMessenger")
            .field(&self.handle)
            .finish()
    }
}
