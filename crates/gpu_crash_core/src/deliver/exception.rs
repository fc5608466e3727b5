//! The Sentry exception type of each kind of GPU crash.

use crate::report::CrashKind;

/// Exception type of a device loss.
pub const DEVICE_LOST_TYPE: &str = "VK_ERROR_DEVICE_LOST";
/// Exception type of a GPU hang.
pub const GPU_HANG_TYPE: &str = "GPU_HANG";

/// The exception type for a crash kind.
pub fn exception_type(kind: CrashKind) -> &'static str {
    match kind {
        CrashKind::DeviceLost => DEVICE_LOST_TYPE,
        CrashKind::GpuHang => GPU_HANG_TYPE,
    }
}
