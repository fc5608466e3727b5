//! The application's debug messengers: the layer's own binding reports (`VK_EXT_device_address_binding_report`
//! where the driver has none) delivered to them.

use std::ffi::{c_void, CString};

use ash::vk;

use crate::dispatch::InstanceData;
use crate::state::bindings::BindingEvent;

/// Sends binding reports to every messenger of `instance` that asked for them (INFO severity and the
/// DEVICE_ADDRESS_BINDING type), with the structures the spec prescribes:
/// `VkDebugUtilsMessengerCallbackDataEXT` → pNext `VkDeviceAddressBindingCallbackDataEXT`, and one
/// `VkDebugUtilsObjectNameInfoEXT` naming the object.
///
/// Must be called without any layer lock held: the callback is application code.
///
/// The read side of `instance.messengers` is held for the whole delivery (the list is read and every
/// callback called under it): `vkDestroyDebugUtilsMessengerEXT` removes a messenger under the write
/// side, so it waits for a delivery in flight, and once it returns no callback of that messenger is
/// called again. No other layer lock is taken while it is held (locking order: `dispatch.rs`).
pub(crate) fn emit(instance: &InstanceData, events: &[BindingEvent]) {
    if events.is_empty() {
        return;
    }
    let list = instance
        .messengers
        .read()
        .unwrap_or_else(|e| e.into_inner());
    let messengers: Vec<_> = list
        .iter()
        .filter(|m| {
            m.severity
                .contains(vk::DebugUtilsMessageSeverityFlagsEXT::INFO)
                && m.types
                    .contains(vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING)
        })
        .collect();
    if messengers.is_empty() {
        return;
    }
    for ev in events {
        let name = ev.name.as_deref().and_then(|n| CString::new(n).ok());
        let verb = if ev.binding_type == vk::DeviceAddressBindingTypeEXT::BIND {
            "bind"
        } else {
            "unbind"
        };
        let message = CString::new(format!(
            "gpu_crash_drill: {verb} {:?} 0x{:x} at [0x{:x}, 0x{:x})",
            ev.object_type,
            ev.handle,
            ev.range.base,
            ev.range.base.saturating_add(ev.range.size)
        ))
        .unwrap_or_default();
        let binding = vk::DeviceAddressBindingCallbackDataEXT {
            flags: vk::DeviceAddressBindingFlagsEXT::empty(),
            base_address: ev.range.base,
            size: ev.range.size,
            binding_type: ev.binding_type,
            ..Default::default()
        };
        let object = vk::DebugUtilsObjectNameInfoEXT {
            object_type: ev.object_type,
            object_handle: ev.handle,
            p_object_name: name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            ..Default::default()
        };
        let data = vk::DebugUtilsMessengerCallbackDataEXT {
            p_next: (&binding as *const vk::DeviceAddressBindingCallbackDataEXT).cast::<c_void>(),
            p_message_id_name: c"gpu_crash_drill-address-binding".as_ptr(),
            message_id_number: 0,
            p_message: message.as_ptr(),
            object_count: 1,
            p_objects: &object,
            ..Default::default()
        };
        for m in &messengers {
            if let Some(cb) = m.callback {
                // SAFETY: `cb` is the application's callback registered with this messenger, which is
                // not destroyed yet (the read side of `messengers` is held, see above); every pointer
                // in `data` refers to locals that outlive the call, as the spec requires.
                unsafe {
                    cb(
                        vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                        vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
                        &data,
                        m.user_data as *mut c_void,
                    );
                }
            }
        }
    }
}
