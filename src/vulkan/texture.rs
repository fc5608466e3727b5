//! Where wgpu put a texture: its `VkImage` and the `VkDeviceMemory` range of its allocation. Read when
//! Bevy prepares an image (after a loss wgpu may already have torn the texture down), so a fault in
//! that memory can name the image asset even where the driver's binding report only gives the whole
//! memory block for an image (NVIDIA, docs/driver-facts.md).

use wgpu::hal::vulkan::TextureMemory;

use crate::assets::ImagePlacement;

/// The texture's image and memory placement; `None` off Vulkan or for memory wgpu does not own.
pub(crate) fn image_placement(texture: &wgpu::Texture) -> Option<ImagePlacement> {
    use ash::vk::Handle;
    // SAFETY: the guard borrows wgpu's hal texture while `texture` lives; only handles and numbers are
    // read, nothing is destroyed or freed.
    let hal = unsafe { texture.as_hal::<wgpu::hal::api::Vulkan>() }?;
    // SAFETY: the handle is only recorded, never destroyed.
    let image = unsafe { hal.raw_handle() }.as_raw();
    // SAFETY: the memory is only looked at, never freed.
    let (memory, offset, size) = match unsafe { hal.memory() } {
        // SAFETY: the memory handle is only recorded, never freed.
        TextureMemory::Allocation(a) => (unsafe { a.memory() }.as_raw(), a.offset(), a.size()),
        // A dedicated allocation: the image is all of it.
        TextureMemory::Dedicated(memory) => (memory.as_raw(), 0, u64::MAX),
        TextureMemory::External => return None,
    };
    Some(ImagePlacement {
        image,
        memory,
        offset,
        size,
    })
}
