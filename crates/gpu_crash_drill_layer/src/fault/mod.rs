//! Fault injection and the answers to the fault queries (`VK_EXT_device_fault`,
//! `VK_KHR_device_fault`), one concern a file.
//!
//! The drill decides at each queue submission whether the configured scenario fires (`submit`). A
//! fired memory fault records one `FaultRecord` (its address and wording: `memory_fault`) and marks
//! the device lost (or, with `after-rebind`, swallows submissions until the fault address is bound
//! again, then marks it lost); a hang swallows the submission (and every later one) so fences and
//! semaphores never signal, without losing the device. `GPU_CRASH_DRILL_AIM` holds the memory
//! scenarios back until a file names their target (`aim`). `stall`, `hang-in-pass` and
//! `hang-in-pipeline` wait on the GPU instead: `commands.rs` records the wait, and
//! `recorded_wait` acts when the command buffer holding it is submitted. With
//! `GPU_CRASH_DRILL_LOSS=after-hang:<ms>` a hang becomes a loss `<ms>` later, as when a driver's
//! watchdog resets the GPU (`after_hang`): its `lock_state` applies it to whichever call comes
//! first after that time, and the waits that hung work blocks are cut into slices that end there.
//! The queries then answer from the record with the exact two-call contracts of the specification
//! (`queries`, with the vendor binary of `vendor_binary`).
//!
//! Each file uses its siblings by their own path (`crate::fault::<file>`); this file only names
//! them and passes on what the hooks call.

mod after_hang;
mod aim;
mod memory_fault;
mod queries;
mod recorded_wait;
mod submit;
mod vendor_binary;

pub(crate) use after_hang::{idle_blocked_by_hang, is_lost, wait_sliced};
pub(crate) use queries::{get_fault_debug_info_khr, get_fault_info_ext, get_fault_reports_khr};
pub(crate) use recorded_wait::{pending_wait, wait_submitted};
pub(crate) use submit::{on_submit, submissions, SubmitAction};
