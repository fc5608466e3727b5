//! Which of the reporter's Vulkan capabilities to ask for.

/// Which capabilities to ask for (all by default; a game can switch pieces off).
#[derive(Clone, Copy, Debug)]
pub struct ExtensionRequest {
    /// Ask for `VK_EXT_device_address_binding_report` and register the messenger.
    pub address_binding_report: bool,
    /// Ask for `VK_EXT_device_fault` / `VK_KHR_device_fault` (+ `VK_KHR_shader_abort`).
    pub device_fault: bool,
    /// Ask for `VK_AMD_buffer_marker` (GPU breadcrumbs per render stage).
    pub buffer_marker: bool,
    /// Enable `VK_LAYER_gpu_crash_exact` on the instance (exact mode: every draw and dispatch
    /// marked), where the game ships it.
    pub exact_layer: bool,
}

impl Default for ExtensionRequest {
    fn default() -> Self {
        Self {
            address_binding_report: true,
            device_fault: true,
            buffer_marker: true,
            exact_layer: false,
        }
    }
}
