//! The steps every hook opens with, written once, so that a hook says only what it does
//! differently (its name, its answer after a panic, which entry point of the next layer, its body).
//!
//! 1. run inside [`guard`]: a panic of ours becomes the hook's fallback answer and one log line,
//!    never an unwind into the application's C frames;
//! 2. find the layer's data for the dispatchable handle ([`on_device`], [`on_instance`]);
//! 3. take the next layer's entry point, and 4. call it ([`call_next`]).
//!
//! [`forward`] is all four; hooks whose entry point is optional (a destroy that forgets its object
//! either way), or that decide something before taking it (`VK_ERROR_DEVICE_LOST` once lost), use
//! the steps one by one.

use std::sync::Arc;

use ash::vk::{self, Handle};

use crate::dispatch::{self, DeviceData, DeviceFns, InstanceData, NO_DEVICE};
use crate::log::{guard, log_line};

/// What a hook answers when it cannot reach the next layer: its handle belongs to no device or
/// instance the layer knows (which the loader never produces), or the next layer lacks the entry
/// point.
pub(crate) trait Unreached: Copy {
    /// `VK_ERROR_INITIALIZATION_FAILED` for a command that returns a `VkResult`; nothing otherwise.
    const ANSWER: Self;
    /// What became of the call, for the one line about an unknown instance.
    const OUTCOME: &'static str;
}

impl Unreached for vk::Result {
    const ANSWER: Self = NO_DEVICE;
    const OUTCOME: &'static str = "failed";
}

impl Unreached for () {
    const ANSWER: Self = ();
    const OUTCOME: &'static str = "not forwarded";
}

/// What a hook that creates, binds or tracks something answers after a panic of ours
/// (`VK_ERROR_OUT_OF_HOST_MEMORY`, an error every such command may return).
pub(crate) const OUT_OF_MEMORY: vk::Result = vk::Result::ERROR_OUT_OF_HOST_MEMORY;

/// Steps 1 and 2 for a device-level hook: `body` runs with the device of `handle` (a device,
/// queue or command buffer).
pub(crate) fn on_device<H: Handle + Copy, R: Unreached>(
    what: &str,
    on_panic: R,
    handle: H,
    body: impl FnOnce(&Arc<DeviceData>) -> R,
) -> R {
    guard(what, on_panic, || match dispatch::dev_of(handle) {
        Some(dev) => body(&dev),
        None => R::ANSWER,
    })
}

/// Steps 3 and 4: `call` with the next layer's entry point, or [`Unreached::ANSWER`] without one.
pub(crate) fn call_next<F, R: Unreached>(next: Option<F>, call: impl FnOnce(F) -> R) -> R {
    next.map_or(R::ANSWER, call)
}

/// All four steps: `body` runs with the device of `handle` and the entry point `next` picks from
/// its table (a command and, for a promoted one, its alias as a fallback).
pub(crate) fn forward<H: Handle + Copy, F, R: Unreached>(
    what: &str,
    on_panic: R,
    handle: H,
    next: impl FnOnce(&DeviceFns) -> Option<F>,
    body: impl FnOnce(&Arc<DeviceData>, F) -> R,
) -> R {
    on_device(what, on_panic, handle, |dev| {
        call_next(next(&dev.fns), |f| body(dev, f))
    })
}

/// Steps 1 and 2 for an instance-level hook: `body` runs with the instance of `handle` (an
/// instance or physical device); an unknown one logs one line ([`known_instance`]).
pub(crate) fn on_instance<H: Handle + Copy, R: Unreached>(
    what: &str,
    on_panic: R,
    handle: H,
    body: impl FnOnce(&Arc<InstanceData>) -> R,
) -> R {
    guard(what, on_panic, || {
        match known_instance(what, handle, R::OUTCOME) {
            Some(inst) => body(&inst),
            None => R::ANSWER,
        }
    })
}

/// The instance of an instance or physical device handle. One the layer does not know gets one
/// line saying the call `outcome`: the layer never guesses the instance
/// (`dispatch::instance_by_key`).
pub(crate) fn known_instance<H: Handle + Copy>(
    what: &str,
    handle: H,
    outcome: &str,
) -> Option<Arc<InstanceData>> {
    // SAFETY: hooks are only called by the loader with valid dispatchable handles.
    let inst = unsafe { dispatch::instance_of(handle) };
    if inst.is_none() {
        log_line(&format!(
            "{what}: instance or physical device unknown to the layer; call {outcome}"
        ));
    }
    inst
}
