//! The `VK_EXT_debug_utils` messenger callback that turns address-binding messages into ring records.
//!
//! It runs inside the driver, on whichever thread made the Vulkan call. House rules: no allocation,
//! no lock, no panic, always `VK_FALSE`. Everything it reads is bounded (pNext walk, name length).

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use ash::vk;

use super::record::{BindingKind, DecodedEvent, NAME_CAPACITY};
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
        if let Some(event) = unsafe { decode_binding_message(callback_data) } {
            let ring = &target.ring;
            let frame = ring.current_frame();
            // Written into the slot in place: the name's bytes are the only copy.
            let _ = ring.push_with(|slot| slot.overwrite(&event, frame, target.device_generation));
        }
    }));
    vk::FALSE
}

/// Decodes one debug-utils message; `None` when it carries no
/// `VkDeviceAddressBindingCallbackDataEXT`. The event borrows the message's object name.
///
/// # Safety
/// `callback_data` is null or points at a valid `VkDebugUtilsMessengerCallbackDataEXT` whose pNext
/// chain, `pObjects` array and object names are valid for `'a`.
pub unsafe fn decode_binding_message<'a>(
    callback_data: *const vk::DebugUtilsMessengerCallbackDataEXT<'a>,
) -> Option<DecodedEvent<'a>> {
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
    let (name, name_truncated) = if name_ptr.is_null() {
        (&[][..], false)
    } else {
        // SAFETY: pObjectName is a NUL-terminated string when non-null; we read at most
        // NAME_CAPACITY + 1 bytes of it and stop at the terminator.
        unsafe { bounded_c_str(name_ptr) }
    };
    Some(DecodedEvent {
        kind,
        object_type,
        handle,
        base: binding.base_address,
        size: binding.size,
        internal,
        name,
        name_truncated,
    })
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
    // SAFETY: the string is NUL-terminated, so reading up to its NUL or NAME_CAPACITY + 1 bytes,
    // whichever comes first, stays inside it.
    let len = unsafe { bounded_len(ptr, NAME_CAPACITY + 1) };
    let kept = len.min(NAME_CAPACITY);
    // SAFETY: the first `len` bytes (`kept` at most) were just read and are part of the string.
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, kept) };
    (bytes, len > NAME_CAPACITY)
}

/// The length of the C string at `ptr`, or `max` if it has no NUL in its first `max` bytes.
/// `strnlen` where the C library has one: it reads the string a vector at a time (never past the
/// page of its NUL) instead of a byte at a time. With the in-place slot write it took the callback
/// from 171 to 143 instructions an event (`examples/callback_instructions.rs`, BENCHMARKS.md).
///
/// # Safety
/// `ptr` points at a NUL-terminated string or at `max` readable bytes.
#[inline(always)]
unsafe fn bounded_len(ptr: *const c_char, max: usize) -> usize {
    #[cfg(unix)]
    {
        // SAFETY: the caller's contract is strnlen's.
        unsafe { libc::strnlen(ptr, max) }
    }
    #[cfg(not(unix))]
    {
        let mut len = 0;
        // SAFETY: we stop at the first NUL, which the string has, or at `max` bytes.
        while len < max && unsafe { *ptr.add(len) } != 0 {
            len += 1;
        }
        len
    }
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

    /// Calls the callback for one BUFFER event named `name` (internal when `internal`).
    fn call(target: &MessengerTarget, name: &std::ffi::CStr, internal: bool, handle: u64) {
        let flags = if internal {
            vk::DeviceAddressBindingFlagsEXT::INTERNAL_OBJECT
        } else {
            vk::DeviceAddressBindingFlagsEXT::empty()
        };
        let binding = vk::DeviceAddressBindingCallbackDataEXT::default()
            .flags(flags)
            .base_address(0x2000 * handle)
            .size(256);
        let mut object = vk::DebugUtilsObjectNameInfoEXT::default().object_name(name);
        object.object_type = vk::ObjectType::BUFFER;
        object.object_handle = handle;
        message(&binding, &[object], |data| {
            // SAFETY: test data is valid; user data is a live target.
            unsafe {
                address_binding_callback(
                    vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                    vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
                    data,
                    target as *const MessengerTarget as *mut c_void,
                )
            };
        });
    }

    #[test]
    fn a_reused_slot_shows_only_its_new_event() {
        // Capacity 2: the third event is written over the first one's slot, in place.
        let (ring, mut consumer) = BindingRing::with_capacity(2);
        let target = MessengerTarget {
            ring: ring.clone(),
            device_generation: 1,
        };
        let long = std::ffi::CString::new("z".repeat(NAME_CAPACITY + 9)).unwrap();
        call(&target, &long, true, 1);
        call(&target, c"second", false, 2);
        let first = consumer.pop().unwrap();
        assert!(first.is_internal_object() && first.is_name_truncated());
        assert_eq!(consumer.pop().unwrap().handle, 2);
        call(&target, c"ab", false, 3);
        let reused = consumer.pop().unwrap();
        assert_eq!(reused.handle, 3);
        assert_eq!(reused.base, 0x6000);
        assert_eq!(reused.sequence, 2);
        assert_eq!(
            reused.name().as_deref(),
            Some("ab"),
            "not the old name's tail"
        );
        assert!(!reused.is_internal_object(), "the old event's flag is gone");
        assert!(!reused.is_name_truncated(), "the old event's flag is gone");
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
