//! Learning the driver's own GPU addresses where it implements `VK_EXT_device_address_binding_report`
//! itself (NVIDIA).
//!
//! There the layer sends no reports of its own, and its invented addresses would mean nothing to the
//! application, so a fault must be placed at addresses the driver reported. The layer therefore wraps
//! every application debug messenger: the driver calls [`trampoline`], which feeds binding reports to
//! the device's tracker and forwards each message to the application's callback if the application
//! asked for it. The driver sends binding reports on the thread that made the Vulkan call, during that
//! call, so the device is known from [`with_current`], which the hooks wrap around their calls down.

use std::cell::RefCell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use ash::vk;

use crate::dispatch::DeviceData;
use crate::state::bindings::Range;

thread_local! {
    static CURRENT: RefCell<Option<Arc<DeviceData>>> = const { RefCell::new(None) };
}

/// Runs `f` (a call down the chain) with `dev` as this thread's current device.
pub(crate) fn with_current<R>(dev: &Arc<DeviceData>, f: impl FnOnce() -> R) -> R {
    let previous = CURRENT.with(|c| c.replace(Some(dev.clone())));
    let r = f();
    CURRENT.with(|c| *c.borrow_mut() = previous);
    r
}

/// What the application asked for when it created a messenger; passed to the driver as user data.
pub(crate) struct WrappedMessenger {
    pub callback: vk::PFN_vkDebugUtilsMessengerCallbackEXT,
    pub user_data: *mut c_void,
    pub severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    pub types: vk::DebugUtilsMessageTypeFlagsEXT,
}

/// Feeds one driver binding report to the current device's tracker.
///
/// # Safety
/// `data` must be valid callback data.
unsafe fn observe(data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>) {
    let Some(dev) = CURRENT.with(|c| c.borrow().clone()) else {
        return;
    };
    if !dev.extensions.binding_report_native {
        return;
    }
    // SAFETY: valid callback data per the caller; the chain and objects are valid during the call.
    unsafe {
        let data = &*data;
        if data.object_count == 0 || data.p_objects.is_null() {
            return;
        }
        let object = &*data.p_objects;
        let mut p = data.p_next.cast::<vk::BaseInStructure<'_>>();
        while !p.is_null() {
            if (*p).s_type == vk::StructureType::DEVICE_ADDRESS_BINDING_CALLBACK_DATA_EXT {
                let b = &*p.cast::<vk::DeviceAddressBindingCallbackDataEXT<'_>>();
                let range = Range {
                    base: b.base_address,
                    size: b.size,
                };
                dev.lock().tracker.observe(
                    object.object_type,
                    object.object_handle,
                    b.binding_type,
                    range,
                );
            }
            p = (*p).p_next;
        }
    }
}

/// The callback the layer registers with the driver in place of the application's.
pub(crate) unsafe extern "system" fn trampoline(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user_data: *mut c_void,
) -> vk::Bool32 {
    if data.is_null() || user_data.is_null() {
        return vk::FALSE;
    }
    if types.contains(vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING) {
        // SAFETY: valid callback data from the driver. A panic is contained here.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { observe(data) }));
    }
    // SAFETY: `user_data` is the `WrappedMessenger` the layer registered; it lives until the messenger
    // is destroyed, after which the driver no longer calls.
    let app = unsafe { &*user_data.cast::<WrappedMessenger>() };
    match app.callback {
        Some(cb) if app.severity.intersects(severity) && app.types.intersects(types) => {
            // SAFETY: the application's own callback with its own user data and the driver's data.
            unsafe { cb(severity, types, data, app.user_data) }
        }
        _ => vk::FALSE,
    }
}
