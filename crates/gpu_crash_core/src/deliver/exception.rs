//! The Sentry exception type of each kind of GPU crash.

use crate::report::CrashKind;

/// Exception type of a device loss.
pub const DEVICE_LOST_TYPE: &str = "VK_ERROR_DEVICE_LOST";
/// Exception type of a GPU hang.
pub const GPU_HANG_TYPE: &str = "GPU_HANG";
/// Exception type of a fault the driver recovered from (a masked `VK_KHR_device_fault` report).
pub const NON_FATAL_FAULT_TYPE: &str = "GPU_FAULT_RECOVERED";
/// Exception type of an event titled with a shader's own abort message (`VK_KHR_shader_abort`).
pub const SHADER_ABORT_TYPE: &str = "SHADER_ABORT";

/// The exception type for a crash kind.
pub fn exception_type(kind: CrashKind) -> &'static str {
    match kind {
        CrashKind::DeviceLost => DEVICE_LOST_TYPE,
        CrashKind::GpuHang => GPU_HANG_TYPE,
        CrashKind::NonFatalFault => NON_FATAL_FAULT_TYPE,
    }
}
