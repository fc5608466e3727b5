//! Where wgpu put a texture: its `VkImage` and the `VkDeviceMemory` range of its allocation. Read when
//! the application prepares an image (Bevy: when it prepares an image asset) (after a loss wgpu may already have torn the texture down), so a fault in
//! that memory can name the image asset even where the driver's binding report only gives the whole
//! memory block for an image (NVIDIA, docs/driver-facts.md).

use wgpu::hal::vulkan::TextureMemory;

/// Where an image's bytes are: its `VkImage` and the offset and size of its allocation in its
/// `VkDeviceMemory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImagePlacement {
    /// The `VkImage` handle.
    pub image: u64,
    /// The `VkDeviceMemory` handle.
    pub memory: u64,
    /// First byte of the image's allocation in the memory.
    pub offset: u64,
    /// Bytes of the allocation (`u64::MAX`: a dedicated allocation, all of the memory).
    pub size: u64,
}

/// The texture's image and memory placement; `None` off Vulkan or for memory wgpu does not own.
pub fn image_placement(texture: &wgpu::Texture) -> Option<ImagePlacement> {
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
