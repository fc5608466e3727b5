//! Removing structures from an application's `pNext` chain without touching the application's memory.
//!
//! To unlink node N, its predecessor's `pNext` must change; the predecessor belongs to the application,
//! so every kept node before the last removed one is copied (the copies are linked to each other and
//! then to the untouched tail). A node can only be copied when its size is known: the sizes of all
//! `VkDeviceCreateInfo` extension structures of ash's Vulkan version are in `chain_sizes.rs`, plus the
//! loader's own link structure. An unknown node before a removed one makes the strip fail, and the
//! caller passes the chain through unchanged (drivers ignore structures they do not know).
//!
//! Output chains (`vkGetPhysicalDeviceFeatures2` / `vkGetPhysicalDeviceProperties2`) are the
//! application's memory for the driver to write during the call anyway, so [`unlink`] removes nodes in
//! place (no size needed) and restores every changed `pNext` when its result drops.

use std::ffi::c_void;

use ash::vk;

use crate::chain_sizes::DEVICE_CREATE_INFO_EXTENSIONS;
use crate::loader::LayerDeviceCreateInfo;

/// A chain with some nodes removed; the copies live as long as this value.
pub(crate) struct StrippedChain {
    _storage: Vec<Vec<u64>>,
    /// Head of the new chain (may be the original head when nothing was removed).
    pub head: *const c_void,
}

/// Size of a structure that can appear in a `VkDeviceCreateInfo` chain.
fn node_size(s_type: vk::StructureType) -> Option<usize> {
    if s_type == vk::StructureType::LOADER_DEVICE_CREATE_INFO {
        return Some(std::mem::size_of::<LayerDeviceCreateInfo>());
    }
    DEVICE_CREATE_INFO_EXTENSIONS
        .iter()
        .find(|(t, _)| *t == s_type)
        .map(|&(_, size)| size)
}

/// Visits every node of a chain.
///
/// # Safety
/// `head` must be a valid `pNext` chain.
pub(crate) unsafe fn for_each(
    head: *const c_void,
    mut f: impl FnMut(*const vk::BaseInStructure<'static>),
) {
    let mut p = head.cast::<vk::BaseInStructure<'static>>();
    while !p.is_null() {
        f(p);
        // SAFETY: valid chain per the caller.
        p = unsafe { (*p).p_next };
    }
}

/// Nodes unlinked in place from an output chain by [`unlink`]; dropping it restores the chain.
pub(crate) struct Unlinked {
    /// Each kept node whose `pNext` was changed, with its original `pNext`.
    changed: Vec<(
        *mut vk::BaseOutStructure<'static>,
        *mut vk::BaseOutStructure<'static>,
    )>,
}

impl Drop for Unlinked {
    fn drop(&mut self) {
        for &(node, next) in self.changed.iter().rev() {
            // SAFETY: `node` is a node of the chain `unlink` was given, which the caller keeps valid
            // and writable while this value lives; this writes back the `pNext` it had.
            unsafe { (*node).p_next = next };
        }
    }
}

/// Unlinks, in place, every node after `head` for which `remove` is true (`head` itself stays), by
/// pointing each kept node at the next kept one; the returned value restores the original links when
/// it drops. The removed nodes themselves are not touched.
///
/// # Safety
/// `head` must be a valid, writable structure with a valid, writable `pNext` chain that outlives the
/// returned value, and nobody else may read or change the chain meanwhile except through `head`.
pub(crate) unsafe fn unlink(
    head: *mut vk::BaseOutStructure<'static>,
    remove: impl Fn(vk::StructureType) -> bool,
) -> Unlinked {
    let mut changed = Vec::new();
    let mut kept = head;
    // SAFETY: valid chain per the caller; every node is read before it is possibly skipped, and only
    // the `pNext` of kept nodes (the head included) is written.
    unsafe {
        let mut p = (*head).p_next;
        while !p.is_null() {
            let next = (*p).p_next;
            if remove((*p).s_type) {
                if changed.last().map(|&(n, _)| n) != Some(kept) {
                    changed.push((kept, (*kept).p_next));
                }
                (*kept).p_next = next;
            } else {
                kept = p;
            }
            p = next;
        }
    }
    Unlinked { changed }
}

/// Returns a chain equal to `head` minus the nodes for which `remove` is true.
///
/// # Safety
/// `head` must be a valid `pNext` chain that outlives the returned value.
pub(crate) unsafe fn strip(
    head: *const c_void,
    remove: impl Fn(vk::StructureType) -> bool,
) -> Result<StrippedChain, vk::StructureType> {
    let mut nodes = Vec::new();
    // SAFETY: forwarded from the caller.
    unsafe { for_each(head, |n| nodes.push(n)) };
    // SAFETY: every collected node is a valid structure header.
    let Some(last) = nodes.iter().rposition(|&n| remove(unsafe { (*n).s_type })) else {
        return Ok(StrippedChain {
            _storage: Vec::new(),
            head,
        });
    };
    // SAFETY: as above.
    let tail = unsafe { (*nodes[last]).p_next }.cast::<c_void>();
    let mut storage: Vec<Vec<u64>> = Vec::new();
    for &n in &nodes[..last] {
        // SAFETY: valid node header.
        let s_type = unsafe { (*n).s_type };
        if remove(s_type) {
            continue;
        }
        let size = node_size(s_type).ok_or(s_type)?;
        let mut buf = vec![0u64; size.div_ceil(8)];
        // SAFETY: the node is a structure of type `s_type`, which is `size` bytes long; the buffer is
        // at least that long and 8-byte aligned (enough for any Vulkan structure).
        unsafe {
            std::ptr::copy_nonoverlapping(n.cast::<u8>(), buf.as_mut_ptr().cast::<u8>(), size)
        };
        storage.push(buf);
    }
    // Link the copies in order, the last one to the untouched tail.
    let mut next = tail;
    for buf in storage.iter_mut().rev() {
        let node = buf.as_mut_ptr().cast::<vk::BaseOutStructure<'_>>();
        // SAFETY: `node` is our copy of a structure header; we own it.
        unsafe { (*node).p_next = next.cast_mut().cast() };
        next = node.cast::<c_void>().cast_const();
    }
    Ok(StrippedChain {
        _storage: storage,
        head: next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_without_touching_the_original() {
        let mut tail = vk::PhysicalDeviceVulkan12Features::default();
        let mut ours = vk::PhysicalDeviceFaultFeaturesEXT {
            p_next: (&mut tail as *mut vk::PhysicalDeviceVulkan12Features<'_>).cast(),
            device_fault: vk::TRUE,
            ..Default::default()
        };
        let first = vk::PhysicalDeviceVulkan11Features {
            p_next: (&mut ours as *mut vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast(),
            storage_buffer16_bit_access: vk::TRUE,
            ..Default::default()
        };
        let head = (&first as *const vk::PhysicalDeviceVulkan11Features<'_>).cast::<c_void>();
        // SAFETY: a valid chain of locals.
        let stripped = unsafe {
            strip(head, |t| {
                t == vk::StructureType::PHYSICAL_DEVICE_FAULT_FEATURES_EXT
            })
        }
        .unwrap();
        let mut types = Vec::new();
        // SAFETY: the stripped chain is valid while `stripped` and the locals live.
        unsafe { for_each(stripped.head, |n| types.push((*n).s_type)) };
        assert_eq!(
            types,
            [
                vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_FEATURES
            ]
        );
        assert_ne!(stripped.head, head, "the first node was copied");
        // SAFETY: reading our copy of the first node.
        let copy = unsafe {
            &*stripped
                .head
                .cast::<vk::PhysicalDeviceVulkan11Features<'_>>()
        };
        assert_eq!(copy.storage_buffer16_bit_access, vk::TRUE);
        // The application's chain is unchanged.
        assert_eq!(
            first.p_next,
            (&mut ours as *mut vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast()
        );
    }

    #[test]
    fn unlinks_in_place_and_restores_on_drop() {
        let mut last = vk::PhysicalDeviceVulkan12Features::default();
        let mut ours2 = vk::PhysicalDeviceAddressBindingReportFeaturesEXT {
            p_next: (&mut last as *mut vk::PhysicalDeviceVulkan12Features<'_>).cast(),
            ..Default::default()
        };
        let mut ours1 = vk::PhysicalDeviceFaultFeaturesEXT {
            p_next: (&mut ours2 as *mut vk::PhysicalDeviceAddressBindingReportFeaturesEXT<'_>)
                .cast(),
            ..Default::default()
        };
        let mut mid = vk::PhysicalDeviceVulkan11Features {
            p_next: (&mut ours1 as *mut vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast(),
            ..Default::default()
        };
        let mut ours0 = vk::PhysicalDeviceFaultFeaturesEXT {
            p_next: (&mut mid as *mut vk::PhysicalDeviceVulkan11Features<'_>).cast(),
            ..Default::default()
        };
        let mut head = vk::PhysicalDeviceFeatures2 {
            p_next: (&mut ours0 as *mut vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast(),
            ..Default::default()
        };
        let head_ptr = (&mut head as *mut vk::PhysicalDeviceFeatures2<'_>).cast::<c_void>();
        let types_from = |h: *const c_void| {
            let mut types = Vec::new();
            // SAFETY: a valid chain of locals.
            unsafe { for_each(h, |n| types.push((*n).s_type)) };
            types
        };
        let before = types_from(head_ptr);
        let is_ours = |t| {
            t == vk::StructureType::PHYSICAL_DEVICE_FAULT_FEATURES_EXT
                || t == vk::StructureType::PHYSICAL_DEVICE_ADDRESS_BINDING_REPORT_FEATURES_EXT
        };
        {
            // SAFETY: a valid chain of locals, alive and otherwise untouched until `unlinked` drops.
            let unlinked = unsafe { unlink(head_ptr.cast(), is_ours) };
            assert_eq!(
                types_from(head_ptr),
                [
                    vk::StructureType::PHYSICAL_DEVICE_FEATURES_2,
                    vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                    vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_FEATURES
                ]
            );
            drop(unlinked);
        }
        assert_eq!(types_from(head_ptr), before);
        assert_eq!(before.len(), 6);
    }

    #[test]
    fn unknown_predecessor_fails_and_head_removal_needs_no_copy() {
        let ours = vk::PhysicalDeviceFaultFeaturesEXT::default();
        let unknown = vk::BaseInStructure {
            s_type: vk::StructureType::from_raw(1_999_999_000),
            p_next: (&ours as *const vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast(),
            ..Default::default()
        };
        let is_ours = |t| t == vk::StructureType::PHYSICAL_DEVICE_FAULT_FEATURES_EXT;
        // SAFETY: valid chains of locals.
        unsafe {
            let head = (&unknown as *const vk::BaseInStructure<'_>).cast();
            assert_eq!(
                strip(head, is_ours).err(),
                Some(vk::StructureType::from_raw(1_999_999_000))
            );
            let head = (&ours as *const vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast();
            assert!(strip(head, is_ours).unwrap().head.is_null());
        }
    }
}
