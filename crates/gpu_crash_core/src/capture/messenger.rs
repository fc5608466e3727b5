//! The `VK_EXT_debug_utils` messenger callback that turns address-binding messages into ring records.
//!
//! It runs inside the driver, on whichever thread made the Vulkan call. House rules: no allocation,
//! no lock, no panic, always `VK_FALSE`. Everything it reads is bounded (pNext walk, name length).

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use ash::vk;

use super::record::{BindingKind, BindingRecord, NAME_CAPACITY};
use super::ring::BindingRing;

/// Longest pNext chain we follow; a driver bug that loops the chain must not hang the game.
const MAX_PNEXT_HOPS: usize = 32;

/// What one messenger writes into: the shared ring, and the generation of the render device it was
/// registered for, stamped into every record so events of an old device (its teardown after a
/// renderer recovery) are told apart from the new device's.
pub struct MessengerTarget {
    /// Where the records go.
    pub ring: Arc<BindingRing>,
    /// The device's generation (wrapping), stamped into each record.
    pub device_generation: u8,
}

/// `PFN_vkDebugUtilsMessengerCallbackEXT` for our messenger. `user_data` must point at the
/// [`MessengerTarget`] that outlives the messenger.
///
/// # Safety
/// Called by the Vulkan implementation with a valid (or null) callback data pointer and the user data
/// given at messenger creation, which must be a live `*const MessengerTarget`.
pub unsafe extern "system" fn address_binding_callback(
    _severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    message_types: vk::DebugUtilsMessageTypeFlagsEXT,
    callback_data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user_data: *mut c_void,
) -> vk::Bool32 {
    if !message_types.contains(vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING)
        || user_data.is_null()
    {
        return vk::FALSE;
    }
    // catch_unwind costs nothing unless something panics; decoding is written not to, this is the
    // belt to those braces because unwinding into the driver is undefined behaviour.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the messenger was created with a pointer to a MessengerTarget kept alive (boxed by
        // the messenger's owner) until after the messenger is destroyed.
        let target = unsafe { &*(user_data as *const MessengerTarget) };
        // SAFETY: the implementation passes a valid callback data pointer (or null, handled inside).
        if let Some(record) = unsafe { decode_binding_message(callback_data) } {
            let ring = &target.ring;
            let _ = ring.push(
                record
                    .with_frame(ring.current_frame())
                    .with_device_generation(target.device_generation),
            );
        }
    }));
    vk::FALSE
}

/// Decodes one debug-utils message into a [`BindingRecord`]; `None` when it carries no
/// `VkDeviceAddressBindingCallbackDataEXT`.
///
/// # Safety
/// `callback_data` is null or points at a valid `VkDebugUtilsMessengerCallbackDataEXT` whose pNext
/// chain, `pObjects` array and object names are valid for the duration of the call.
pub unsafe fn decode_binding_message(
    callback_data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
) -> Option<BindingRecord> {
    // SAFETY: null-checked; validity is the caller's contract.
    let data = unsafe { callback_data.as_ref() }?;
    // SAFETY: each pNext element starts with sType/pNext (VkBaseInStructure), per the Vulkan spec.
    let binding = unsafe { find_address_binding(data.p_next) }?;
    let kind = if binding.binding_type == vk::DeviceAddressBindingTypeEXT::UNBIND {
        BindingKind::Unbind
    } else {
        BindingKind::Bind
    };
    let internal = binding
        .flags
        .contains(vk::DeviceAddressBindingFlagsEXT::INTERNAL_OBJECT);

    let object = if data.object_count > 0 {
        // SAFETY: objectCount > 0 means pObjects points at that many elements; we read the first.
        unsafe { data.p_objects.as_ref() }
    } else {
        None
    };
    let (object_type, handle, name_ptr) = match object {
        Some(o) => (o.object_type, o.object_handle, o.p_object_name),
        None => (vk::ObjectType::UNKNOWN, 0, std::ptr::null()),
    };
    let mut record = BindingRecord::new(
        kind,
        object_type,
        handle,
        binding.base_address,
        binding.size,
    )
    .with_internal_object(internal);
    if !name_ptr.is_null() {
        // SAFETY: pObjectName is a NUL-terminated string when non-null; we read at most
        // NAME_CAPACITY + 1 bytes of it and stop at the terminator.
        let (bytes, truncated) = unsafe { bounded_c_str(name_ptr) };
        record.set_name_bytes(bytes, truncated);
    }
    Some(record)
}

/// Walks a pNext chain (bounded) for `VkDeviceAddressBindingCallbackDataEXT`.
///
/// # Safety
/// `next` is null or the head of a valid Vulkan structure chain.
unsafe fn find_address_binding<'a>(
    mut next: *const c_void,
) -> Option<&'a vk::DeviceAddressBindingCallbackDataEXT<'a>> {
    for _ in 0..MAX_PNEXT_HOPS {
        // SAFETY: every chain element begins with VkBaseInStructure.
        let base = unsafe { (next as *const vk::BaseInStructure<'_>).as_ref() }?;
        if base.s_type == vk::StructureType::DEVICE_ADDRESS_BINDING_CALLBACK_DATA_EXT {
            // SAFETY: the sType identifies the structure's real type.
            return unsafe {
                (next as *const vk::DeviceAddressBindingCallbackDataEXT<'_>).as_ref()
            };
        }
        next = base.p_next as *const c_void;
    }
    None
}

/// Reads a C string of at most [`NAME_CAPACITY`] bytes without allocating; the flag says whether it
/// went on beyond that.
///
/// # Safety
/// `ptr` points at a NUL-terminated string.
unsafe fn bounded_c_str<'a>(ptr: *const c_char) -> (&'a [u8], bool) {
    let mut len = 0;
    // SAFETY: we stop at the first NUL, which the string has, or at NAME_CAPACITY bytes.
    while len < NAME_CAPACITY && unsafe { *ptr.add(len) } != 0 {
        len += 1;
    }
    // SAFETY: when len == NAME_CAPACITY the string has at least one more byte (its NUL at least).
    let truncated = len == NAME_CAPACITY && unsafe { *ptr.add(len) } != 0;
    // SAFETY: the first `len` bytes were just read and are part of the string.
    (
        unsafe { std::slice::from_raw_parts(ptr as *const u8, len) },
        truncated,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(
        binding: &vk::DeviceAddressBindingCallbackDataEXT<'_>,
        objects: &[vk::DebugUtilsObjectNameInfoEXT<'_>],
        f: impl FnOnce(&vk::DebugUtilsMessengerCallbackDataEXT<'_>),
    ) {
        let data = vk::DebugUtilsMessengerCallbackDataEXT {
            p_next: binding as *const _ as *const c_void,
            object_count: objects.len() as u32,
            p_objects: objects.as_ptr(),
            ..Default::default()
        };
        f(&data)
    }

    #[test]
    fn callback_decodes_into_ring() {
        let (ring, mut consumer) = BindingRing::with_capacity(4);
        ring.set_frame(42);
        let target = MessengerTarget {
            ring: ring.clone(),
            device_generation: 3,
        };
        let binding = vk::DeviceAddressBindingCallbackDataEXT::default()
            .flags(vk::DeviceAddressBindingFlagsEXT::INTERNAL_OBJECT)
            .base_address(0x1000_0000)
            .size(4096)
            .binding_type(vk::DeviceAddressBindingTypeEXT::UNBIND);
        let name = c"particles";
        let mut object = vk::DebugUtilsObjectNameInfoEXT::default().object_name(name);
        object.object_type = vk::ObjectType::BUFFER;
        object.object_handle = 0xabc;
        let objects = [object];
        message(&binding, &objects, |data| {
            // SAFETY: test data is valid; user data is a live target.
            let r = unsafe {
                address_binding_callback(
                    vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                    vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
                    data,
                    &target as *const MessengerTarget as *mut c_void,
                )
            };
            assert_eq!(r, vk::FALSE);
        });
        let record = consumer.pop().expect("one record");
        assert_eq!(record.kind, BindingKind::Unbind);
        assert_eq!(record.base, 0x1000_0000);
        assert_eq!(record.size, 4096);
        assert_eq!(record.handle, 0xabc);
        assert_eq!(record.frame, 42);
        assert_eq!(record.device_generation(), 3);
        assert!(record.is_internal_object());
        assert_eq!(record.vk_object_type(), vk::ObjectType::BUFFER);
        assert_eq!(record.name().as_deref(), Some("particles"));
    }

    #[test]
    fn other_messages_and_missing_chain_are_ignored() {
        let (ring, mut consumer) = BindingRing::with_capacity(4);
        let target = MessengerTarget {
            ring: ring.clone(),
            device_generation: 1,
        };
        let data = vk::DebugUtilsMessengerCallbackDataEXT::default();
        for types in [
            vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION,
            vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
        ] {
            // SAFETY: valid data without a binding struct; live target.
            unsafe {
                address_binding_callback(
                    vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                    types,
                    &data,
                    &target as *const MessengerTarget as *mut c_void,
                )
            };
        }
        // SAFETY: null data and null user data must be tolerated.
        unsafe {
            address_binding_callback(
                vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
                std::ptr::null(),
                &target as *const MessengerTarget as *mut c_void,
            );
            address_binding_callback(
                vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
                &data,
                std::ptr::null_mut(),
            );
        }
        assert!(consumer.pop().is_none());
        assert_eq!(ring.dropped(), 0);
    }

    #[test]
    fn long_c_names_are_cut_and_flagged() {
        let long = std::ffi::CString::new("x".repeat(NAME_CAPACITY + 5)).unwrap();
        let exact = std::ffi::CString::new("y".repeat(NAME_CAPACITY)).unwrap();
        // SAFETY: CStrings are NUL-terminated.
        let (bytes, truncated) = unsafe { bounded_c_str(long.as_ptr()) };
        assert_eq!((bytes.len(), truncated), (NAME_CAPACITY, true));
        // SAFETY: as above.
        let (bytes, truncated) = unsafe { bounded_c_str(exact.as_ptr()) };
        assert_eq!((bytes.len(), truncated), (NAME_CAPACITY, false));
    }
}
