//! The fixed-size record that one address-binding event becomes inside the messenger callback.
//!
//! Fixed size so that the callback can write it into a preallocated ring slot without allocating;
//! the object name is copied inline and truncated (with a flag) when it does not fit.

use ash::vk;

/// Bytes of the object name kept inline in a [`BindingRecord`]; longer names are truncated.
pub const NAME_CAPACITY: usize = 72;

/// Whether an event maps or unmaps a GPU virtual address range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum BindingKind {
    /// `VK_DEVICE_ADDRESS_BINDING_TYPE_BIND_EXT`: the range became backed by this object.
    Bind = 0,
    /// `VK_DEVICE_ADDRESS_BINDING_TYPE_UNBIND_EXT`: the range stopped being backed by this object.
    Unbind = 1,
}

/// One `VkDeviceAddressBindingCallbackDataEXT` event, decoded.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct BindingRecord {
    /// First GPU virtual address of the range.
    pub base: u64,
    /// Length of the range in bytes.
    pub size: u64,
    /// The Vulkan handle of `pObjects[0]` (0 when the driver gave none).
    pub handle: u64,
    /// The reporter's frame counter when the event arrived.
    pub frame: u64,
    /// Position in the ring's total order (the position its producer claimed, stamped by the
    /// ring's consumer when it pops the record): lets the reporter tell events before a device loss
    /// from wgpu's teardown after it.
    pub sequence: u64,
    /// Raw `VkObjectType` of `pObjects[0]`.
    pub object_type: i32,
    /// Bind or unbind.
    pub kind: BindingKind,
    flags: u8,
    name_len: u8,
    /// Which render device the event came from (its messenger's generation, wrapping at 256; 0 when
    /// untagged): after a renderer recovery the old device's teardown must not touch the new index.
    device_generation: u8,
    name: [u8; NAME_CAPACITY],
}

/// A binding event as the messenger callback decodes it: a record's fields, with the name borrowed
/// from the driver's message. The callback writes it into a ring slot in place
/// ([`BindingRecord::overwrite`]), so the game's thread copies the name's own bytes once and no
/// record at all.
#[derive(Clone, Copy, Debug)]
pub struct DecodedEvent<'a> {
    /// Bind or unbind.
    pub kind: BindingKind,
    /// `pObjects[0]`'s type (`UNKNOWN` when the driver gave no object).
    pub object_type: vk::ObjectType,
    /// `pObjects[0]`'s handle (0 when none).
    pub handle: u64,
    /// First GPU virtual address of the range.
    pub base: u64,
    /// Length of the range in bytes.
    pub size: u64,
    /// `VK_DEVICE_ADDRESS_BINDING_INTERNAL_OBJECT_BIT_EXT`.
    pub internal: bool,
    /// The object's name, at most [`NAME_CAPACITY`] bytes (empty when none).
    pub name: &'a [u8],
    /// The driver's name went on beyond [`NAME_CAPACITY`] bytes.
    pub name_truncated: bool,
}

/// The tag a record carries for device generation `generation` (1, 2, ...): never 0 (untagged), so
/// it wraps 255 -> 1. Generations compare by wrapping distance (see the indexer).
pub fn generation_tag(generation: u32) -> u8 {
    (generation.saturating_sub(1) % 255) as u8 + 1
}

const FLAG_INTERNAL_OBJECT: u8 = 1;
const FLAG_NAME_TRUNCATED: u8 = 2;

impl BindingRecord {
    /// A record of nothing: what a ring slot holds before its first event.
    pub const EMPTY: Self = Self::new(BindingKind::Bind, vk::ObjectType::UNKNOWN, 0, 0, 0);

    /// Makes this record `event`'s, in place: every field, and the name's first `event.name.len()`
    /// bytes; the name bytes after those keep what they held (nothing reads past the name's
    /// length), so a ring slot is written with the name's own bytes, not its whole capacity.
    #[inline(always)]
    pub(crate) fn overwrite(
        &mut self,
        event: &DecodedEvent<'_>,
        frame: u64,
        device_generation: u8,
    ) {
        let len = event.name.len().min(NAME_CAPACITY);
        self.base = event.base;
        self.size = event.size;
        self.handle = event.handle;
        self.frame = frame;
        self.sequence = 0;
        self.object_type = event.object_type.as_raw();
        self.kind = event.kind;
        self.flags = if event.internal {
            FLAG_INTERNAL_OBJECT
        } else {
            0
        } | if event.name_truncated || event.name.len() > NAME_CAPACITY {
            FLAG_NAME_TRUNCATED
        } else {
            0
        };
        self.name_len = len as u8;
        self.device_generation = device_generation;
        self.name[..len].copy_from_slice(&event.name[..len]);
    }

    /// A record with no name.
    pub const fn new(
        kind: BindingKind,
        object_type: vk::ObjectType,
        handle: u64,
        base: u64,
        size: u64,
    ) -> Self {
        Self {
            base,
            size,
            handle,
            frame: 0,
            sequence: 0,
            object_type: object_type.as_raw(),
            kind,
            flags: 0,
            name_len: 0,
            device_generation: 0,
            name: [0; NAME_CAPACITY],
        }
    }

    /// Marks the object as `VK_DEVICE_ADDRESS_BINDING_INTERNAL_OBJECT_BIT_EXT`: the driver bound it
    /// before the application saw its handle.
    pub const fn with_internal_object(mut self, internal: bool) -> Self {
        if internal {
            self.flags |= FLAG_INTERNAL_OBJECT;
        } else {
            self.flags &= !FLAG_INTERNAL_OBJECT;
        }
        self
    }

    /// Sets the frame counter the event belongs to.
    pub const fn with_frame(mut self, frame: u64) -> Self {
        self.frame = frame;
        self
    }

    /// Tags the event with the generation of the device whose messenger received it.
    pub const fn with_device_generation(mut self, generation: u8) -> Self {
        self.device_generation = generation;
        self
    }

    /// The generation of the device the event came from (0: untagged).
    pub fn device_generation(&self) -> u8 {
        self.device_generation
    }

    /// Copies `name` inline, truncated to [`NAME_CAPACITY`] bytes at a UTF-8 boundary.
    pub fn with_name(mut self, name: &str) -> Self {
        let mut len = name.len().min(NAME_CAPACITY);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        self.set_name_bytes(&name.as_bytes()[..len], len < name.len());
        self
    }

    /// Copies raw name bytes (already cut to at most [`NAME_CAPACITY`]); no allocation, no panic.
    pub(crate) fn set_name_bytes(&mut self, bytes: &[u8], truncated: bool) {
        let len = bytes.len().min(NAME_CAPACITY);
        self.name[..len].copy_from_slice(&bytes[..len]);
        self.name_len = len as u8;
        if truncated || bytes.len() > NAME_CAPACITY {
            self.flags |= FLAG_NAME_TRUNCATED;
        }
    }

    /// The object type as Vulkan spells it.
    pub fn vk_object_type(&self) -> vk::ObjectType {
        vk::ObjectType::from_raw(self.object_type)
    }

    /// True when the driver flagged the object as internal (not yet visible to the application).
    pub fn is_internal_object(&self) -> bool {
        self.flags & FLAG_INTERNAL_OBJECT != 0
    }

    /// True when the object's name was longer than [`NAME_CAPACITY`] and was cut.
    pub fn is_name_truncated(&self) -> bool {
        self.flags & FLAG_NAME_TRUNCATED != 0
    }

    /// The name bytes as the driver passed them (not necessarily UTF-8); empty when none.
    #[inline]
    pub(crate) fn name_bytes(&self) -> &[u8] {
        &self.name[..self.name_len as usize]
    }

    /// The object name carried by the event, if any. Bytes that are not UTF-8 (drivers pass the
    /// application's string through) are replaced rather than trusted.
    pub fn name(&self) -> Option<std::borrow::Cow<'_, str>> {
        let bytes = &self.name[..self.name_len as usize];
        (!bytes.is_empty()).then(|| String::from_utf8_lossy(bytes))
    }
}

impl std::fmt::Debug for BindingRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BindingRecord")
            .field("kind", &self.kind)
            .field("object_type", &self.vk_object_type())
            .field("handle", &format_args!("{:#x}", self.handle))
            .field("base", &format_args!("{:#x}", self.base))
            .field("size", &self.size)
            .field("frame", &self.frame)
            .field("internal", &self.is_internal_object())
            .field("name", &self.name())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_is_small_and_fixed() {
        assert_eq!(std::mem::size_of::<BindingRecord>(), 120);
    }

    #[test]
    fn long_names_are_truncated_at_char_boundary() {
        let long = "é".repeat(NAME_CAPACITY); // 2 bytes each
        let record =
            BindingRecord::new(BindingKind::Bind, vk::ObjectType::BUFFER, 1, 0, 1).with_name(&long);
        let name = record.name().unwrap();
        assert_eq!(name.len(), NAME_CAPACITY);
        assert!(name.chars().all(|c| c == 'é'));
        assert!(record.is_name_truncated());

        let short = BindingRecord::new(BindingKind::Bind, vk::ObjectType::BUFFER, 1, 0, 1)
            .with_name("particles");
        assert_eq!(short.name().as_deref(), Some("particles"));
        assert!(!short.is_name_truncated());
    }

    #[test]
    fn internal_flag_round_trips() {
        let r = BindingRecord::new(BindingKind::Unbind, vk::ObjectType::IMAGE, 7, 16, 32)
            .with_internal_object(true);
        assert!(r.is_internal_object());
        assert!(!r.with_internal_object(false).is_internal_object());
        assert_eq!(r.vk_object_type(), vk::ObjectType::IMAGE);
    }
}
