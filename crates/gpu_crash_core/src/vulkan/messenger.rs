//! Our `VkDebugUtilsMessengerEXT` for address-binding messages, destroyed on drop.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ash::vk;

use crate::capture::messenger::{address_binding_callback, MessengerTarget};
use crate::capture::BindingRing;

/// Environment variable for cost measurements only: with it set, the messenger is registered (so the
/// driver produces every binding report) but its callback returns at once, without decoding or
/// pushing: the floor under our own capture cost (BENCHMARKS.md, "the driver's share").
pub(crate) const COST_FLOOR_VAR: &str = "GPU_CRASH_REPORTER_COST_FLOOR";

/// Environment variable for cost measurements only: with it set, the messenger's callback switches
/// between ours and the floor's at run time ([`set_cost_floor_now`]), so one process can alternate
/// blocks of frames with and without our capture. Frame times of a big scene on the NVIDIA hosts are
/// bimodal from one process to the next (BENCHMARKS.md), wider than a 3% share; blocks inside one
/// process share its mode.
pub(crate) const COST_INTERLEAVE_VAR: &str = "GPU_CRASH_REPORTER_COST_INTERLEAVE";

/// Whether the interleaved callback is at the floor now. Relaxed: a switch for a measurement, read
/// per event; an event on either side of a flip may go either way.
static COST_FLOOR_NOW: AtomicBool = AtomicBool::new(false);

/// Switches the interleaved callback ([`COST_INTERLEAVE_VAR`]) between the floor (`true`: events
/// dropped unread) and ours; without that variable at messenger registration, it changes nothing.
pub fn set_cost_floor_now(floor: bool) {
    COST_FLOOR_NOW.store(floor, Ordering::Relaxed);
}

/// The interleaved measurement's callback: the floor's or ours, as [`set_cost_floor_now`] last said.
///
/// # Safety
/// As [`address_binding_callback`].
unsafe extern "system" fn interleaved(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    message_types: vk::DebugUtilsMessageTypeFlagsEXT,
    callback_data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user_data: *mut c_void,
) -> vk::Bool32 {
    if COST_FLOOR_NOW.load(Ordering::Relaxed) {
        return vk::FALSE;
    }
    // SAFETY: the caller's contract is the callback's own.
    unsafe { address_binding_callback(severity, message_types, callback_data, user_data) }
}

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
/// then. Each device gets its own, tagged with the device's generation. It must be dropped before
/// its instance is destroyed: its owner (the device's session) also holds the device, which keeps
/// the instance alive.
pub struct BindingMessenger {
    loader: ash::ext::debug_utils::Instance,
    handle: vk::DebugUtilsMessengerEXT,
    _target: Box<MessengerTarget>,
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
        let set = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
        let callback: vk::PFN_vkDebugUtilsMessengerCallbackEXT = if set(COST_INTERLEAVE_VAR) {
            tracing::warn!(
                "GPU crash reporter: {COST_INTERLEAVE_VAR} is set: binding events are dropped \
                 unread while the measurement says so (a cost measurement, BENCHMARKS.md)"
            );
            Some(interleaved)
        } else if set(COST_FLOOR_VAR) {
            tracing::warn!(
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
        })
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
