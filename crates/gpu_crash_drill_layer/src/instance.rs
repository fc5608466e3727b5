//! Instance-level hooks: instance and device creation, physical device queries, debug messengers.

use std::ffi::{c_char, c_void, CStr};
use std::sync::{Arc, Mutex, RwLock};

use ash::vk;

use crate::config::{Config, LossMode, Scenario};
use crate::dispatch::{
    self, c_str, dispatch_key, AppInfo, DeviceData, DeviceFns, DeviceState, InstanceData,
    InstanceFns, Messenger, PhysicalInfo,
};
use crate::hook_steps::{known_instance, on_instance};
use crate::log::guard;
use crate::log::log_line;
use crate::manifest::LAYER_NAME;
use crate::state::extensions::{self, Provided};
use crate::{chain, loader, native, video_memory};

/// What the instance-level hooks that return a `VkResult` answer after a panic of ours, as for an
/// instance they do not know.
const NO_INSTANCE: vk::Result = vk::Result::ERROR_INITIALIZATION_FAILED;

fn opt_string(p: *const c_char) -> Option<String> {
    // SAFETY: Vulkan strings are null or NUL-terminated.
    unsafe { c_str(p) }.map(|s| s.to_string_lossy().into_owned())
}

pub(crate) unsafe extern "system" fn create_instance(
    p_create_info: *const vk::InstanceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    guard(
        "vkCreateInstance",
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            if p_create_info.is_null() || p_instance.is_null() {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            }
            // SAFETY: the loader passes its create info with our link node.
            let Some(next_gipa) = (unsafe { loader::take_instance_link(p_create_info) }) else {
                log_line("vkCreateInstance: no loader link info; is the layer loaded by the Vulkan loader?");
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the next layer's GIPA with a null instance answers global commands.
            let create = unsafe { next_gipa(vk::Instance::null(), c"vkCreateInstance".as_ptr()) };
            let Some(create) = create else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: `vkCreateInstance` has this signature.
            let create: vk::PFN_vkCreateInstance = unsafe { std::mem::transmute(create) };
            // SAFETY: arguments forwarded unchanged.
            let r = unsafe { create(p_create_info, p_allocator, p_instance) };
            if r != vk::Result::SUCCESS {
                return r;
            }
            // SAFETY: creation succeeded, so `*p_instance` is a valid instance.
            let instance = unsafe { *p_instance };
            // SAFETY: the next GIPA returns entry points matching their names.
            let fns = unsafe { InstanceFns::load(|n| next_gipa(instance, n.as_ptr())) };
            let mut app = AppInfo::default();
            // SAFETY: a valid create info; `pApplicationInfo` is null or valid.
            if let Some(info) = unsafe { (*p_create_info).p_application_info.as_ref() } {
                app = AppInfo {
                    application_name: opt_string(info.p_application_name),
                    application_version: info.application_version,
                    engine_name: opt_string(info.p_engine_name),
                    engine_version: info.engine_version,
                    api_version: info.api_version,
                };
            }
            let config = Config::from_env();
            if let Some(s) = &config.scenario {
                let after = match s {
                    Scenario::Hang => format!("submission {}", config.after + 1),
                    Scenario::Stall(_) => format!(
                        "first command buffer ended after {} submissions",
                        config.after
                    ),
                    Scenario::HangInPass(_) => {
                        format!(
                            "first time the label begins after {} submissions",
                            config.after
                        )
                    }
                    Scenario::HangInPipeline(_) => format!(
                        "first command buffer that binds the pipeline after {} submissions",
                        config.after
                    ),
                    _ => format!("after {} submissions", config.after),
                };
                let loss = match &config.loss {
                    LossMode::AtFault => String::new(),
                    LossMode::AfterRebind => ", device lost after re-bind".into(),
                    LossMode::AfterHang { ms, label } => format!(
                        ", device lost {ms} ms after the hang{}",
                        label
                            .as_deref()
                            .map(|l| format!(" with a fault inside \"{l}\""))
                            .unwrap_or_default()
                    ),
                };
                let aim = match &config.aim_file {
                    Some(path) => format!(
                        ", aimed by the first line of {} (<label>[@<offset>]; no fault before it \
                         holds one)",
                        path.display()
                    ),
                    None => String::new(),
                };
                log_line(&format!(
                    "armed: {} via {:?} fault API, {after}{aim}, precision {} bytes{loss}",
                    s.display(),
                    config.api,
                    config.precision
                ));
            }
            let data = InstanceData {
                handle: instance,
                next_gipa,
                fns,
                config,
                app,
                messengers: RwLock::new(Vec::new()),
            };
            // SAFETY: valid instance handle.
            dispatch::insert_instance(unsafe { dispatch_key(instance) }, Arc::new(data));
            vk::Result::SUCCESS
        },
    )
}

pub(crate) unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    guard("vkDestroyInstance", (), || {
        if instance == vk::Instance::null() {
            return;
        }
        // SAFETY: valid instance handle.
        let Some(data) = dispatch::remove_instance(unsafe { dispatch_key(instance) }) else {
            return;
        };
        if let Some(destroy) = data.fns.destroy_instance {
            // SAFETY: forwarded unchanged.
            unsafe { destroy(instance, p_allocator) };
        }
    })
}

/// The provided set for a physical device, asking the driver what it has.
///
/// # Safety
/// `physical` must be a valid physical device of `inst`.
unsafe fn provided(inst: &InstanceData, physical: vk::PhysicalDevice) -> (Provided, bool) {
    // SAFETY: forwarded from the caller.
    let driver = unsafe { driver_extensions(inst, physical) }.unwrap_or_default();
    (
        extensions::provided_for(inst.config.api, &driver),
        extensions::driver_has_ext_fault(&driver),
    )
}

pub(crate) unsafe extern "system" fn enumerate_device_extension_properties(
    physical: vk::PhysicalDevice,
    p_layer_name: *const c_char,
    p_count: *mut u32,
    p_properties: *mut vk::ExtensionProperties,
) -> vk::Result {
    let what = "vkEnumerateDeviceExtensionProperties";
    on_instance(what, NO_INSTANCE, physical, |inst| {
        // SAFETY: null or a C string.
        match unsafe { c_str(p_layer_name) } {
            Some(name) if name.to_bytes() == LAYER_NAME.as_bytes() => {
                // SAFETY: valid physical device.
                let (p, _) = unsafe { provided(inst, physical) };
                // SAFETY: count/array per the spec.
                unsafe { extensions::write_properties(&p.properties(), p_count, p_properties) }
            }
            Some(_) => match inst.fns.enumerate_device_extension_properties {
                // SAFETY: forwarded unchanged.
                Some(next) => unsafe { next(physical, p_layer_name, p_count, p_properties) },
                None => vk::Result::ERROR_LAYER_NOT_PRESENT,
            },
            None => {
                // SAFETY: valid physical device.
                let mut all = match unsafe { driver_extensions(inst, physical) } {
                    Ok(list) => list,
                    Err(e) => return e,
                };
                let ours = extensions::provided_for(inst.config.api, &all).properties();
                all.extend(ours);
                // SAFETY: count/array per the spec.
                unsafe { extensions::write_properties(&all, p_count, p_properties) }
            }
        }
    })
}

/// Calls `down` with the structures of the extensions the layer provides (`provided`) unlinked from
/// the output chain of `head` (a `VkPhysicalDeviceFeatures2` / `VkPhysicalDeviceProperties2`), so the
/// driver, which lacks those extensions, never sees them; the chain is restored before returning.
///
/// # Safety
/// `head` must be null or a valid output structure with a valid chain.
unsafe fn call_down_without_provided(head: *mut c_void, provided: Provided, down: impl FnOnce()) {
    if head.is_null() {
        down();
        return;
    }
    // SAFETY: a valid, writable output chain per the caller; it is restored when `unlinked` drops,
    // right after the call down.
    let unlinked = unsafe { chain::unlink(head.cast(), |t| provided.owns_structure(t)) };
    down();
    drop(unlinked);
}

/// `vkGetPhysicalDeviceFeatures2[KHR]` with the entry point `next`: the driver's features, then the
/// provided extensions' own.
///
/// # Safety
/// `physical` a valid physical device of `inst`; `p_features` null or a valid output chain.
unsafe fn features2(
    inst: &InstanceData,
    next: Option<vk::PFN_vkGetPhysicalDeviceFeatures2>,
    physical: vk::PhysicalDevice,
    p_features: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    // SAFETY: valid physical device.
    let (p, _) = unsafe { provided(inst, physical) };
    if let Some(next) = next {
        // SAFETY: a valid (or null) output chain; the driver sees it without the provided
        // extensions' structures, which it does not know.
        unsafe { call_down_without_provided(p_features.cast(), p, || next(physical, p_features)) };
    }
    if p_features.is_null() {
        return;
    }
    // SAFETY: valid output chain (restored above).
    unsafe { extensions::fill_features(p, p_features) };
}

pub(crate) unsafe extern "system" fn get_physical_device_features2(
    physical: vk::PhysicalDevice,
    p_features: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    on_instance("vkGetPhysicalDeviceFeatures2", (), physical, |inst| {
        let f = &inst.fns;
        let next = f
            .get_physical_device_features2
            .or(f.get_physical_device_features2_khr);
        // SAFETY: forwarded from the application.
        unsafe { features2(inst, next, physical, p_features) }
    })
}

pub(crate) unsafe extern "system" fn get_physical_device_features2_khr(
    physical: vk::PhysicalDevice,
    p_features: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    on_instance("vkGetPhysicalDeviceFeatures2KHR", (), physical, |inst| {
        let f = &inst.fns;
        let next = f
            .get_physical_device_features2_khr
            .or(f.get_physical_device_features2);
        // SAFETY: forwarded from the application.
        unsafe { features2(inst, next, physical, p_features) }
    })
}

/// `vkGetPhysicalDeviceProperties2[KHR]` with the entry point `next`: the driver's properties, then
/// the provided extensions' own.
///
/// # Safety
/// `physical` a valid physical device of `inst`; `p_properties` null or a valid output chain.
unsafe fn properties2(
    inst: &InstanceData,
    next: Option<vk::PFN_vkGetPhysicalDeviceProperties2>,
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    // SAFETY: valid physical device.
    let (p, _) = unsafe { provided(inst, physical) };
    if let Some(next) = next {
        // SAFETY: a valid (or null) output chain; the driver sees it without the provided
        // extensions' structures, which it does not know.
        unsafe {
            call_down_without_provided(p_properties.cast(), p, || next(physical, p_properties))
        };
    }
    if p_properties.is_null() {
        return;
    }
    // SAFETY: valid output chain (restored above).
    unsafe { extensions::fill_properties(p, p_properties) };
}

pub(crate) unsafe extern "system" fn get_physical_device_properties2(
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    on_instance("vkGetPhysicalDeviceProperties2", (), physical, |inst| {
        let f = &inst.fns;
        let next = f
            .get_physical_device_properties2
            .or(f.get_physical_device_properties2_khr);
        // SAFETY: forwarded from the application.
        unsafe { properties2(inst, next, physical, p_properties) }
    })
}

pub(crate) unsafe extern "system" fn get_physical_device_properties2_khr(
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    on_instance("vkGetPhysicalDeviceProperties2KHR", (), physical, |inst| {
        let f = &inst.fns;
        let next = f
            .get_physical_device_properties2_khr
            .or(f.get_physical_device_properties2);
        // SAFETY: forwarded from the application.
        unsafe { properties2(inst, next, physical, p_properties) }
    })
}

pub(crate) unsafe extern "system" fn create_device(
    physical: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    guard(
        "vkCreateDevice",
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            // SAFETY: every raw access below is to arguments that the spec requires to be valid, to the
            // loader's link structures, or to our own copies.
            unsafe { create_device_inner(physical, p_create_info, p_allocator, p_device) }
        },
    )
}

unsafe fn create_device_inner(
    physical: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    if p_create_info.is_null() || p_device.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    let Some(inst) = known_instance("vkCreateDevice", physical, "failed") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the loader's create info with our link node.
    let Some((next_gipa, next_gdpa)) = (unsafe { loader::take_device_link(p_create_info) }) else {
        log_line("vkCreateDevice: no loader link info");
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the next GIPA answers instance commands for our instance.
    let Some(create) = (unsafe { next_gipa(inst.handle, c"vkCreateDevice".as_ptr()) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: `vkCreateDevice` has this signature.
    let create: vk::PFN_vkCreateDevice = unsafe { std::mem::transmute(create) };

    // SAFETY: valid physical device.
    let (provided, ext_fault_native) = unsafe { provided(&inst, physical) };
    // SAFETY: valid create info.
    let app_info = unsafe { &*p_create_info };
    // SAFETY: valid create info.
    let enabled = unsafe { extensions::enabled_in(app_info, provided, ext_fault_native) };

    // The driver must not see what it does not implement: copy the create info and the name array,
    // dropping our extensions, and unlink our feature structures from a copied chain.
    let mut names: Vec<*const c_char> = Vec::new();
    for i in 0..app_info.enabled_extension_count as usize {
        // SAFETY: the array holds `enabled_extension_count` C strings.
        let p = unsafe { *app_info.pp_enabled_extension_names.add(i) };
        // SAFETY: a NUL-terminated extension name.
        if !provided.provides(unsafe { CStr::from_ptr(p) }) {
            names.push(p);
        }
    }
    // SAFETY: valid chain that outlives the call below.
    let stripped = match unsafe { chain::strip(app_info.p_next, |t| provided.owns_structure(t)) } {
        Ok(s) => Some(s),
        Err(unknown) => {
            log_line(&format!(
                "vkCreateDevice: cannot copy pNext structure {unknown:?} to unlink the drill's feature \
                 structures; passing the chain through unchanged"
            ));
            None
        }
    };
    let mut info = *app_info;
    info.enabled_extension_count = names.len() as u32;
    info.pp_enabled_extension_names = if names.is_empty() {
        std::ptr::null()
    } else {
        names.as_ptr()
    };
    if let Some(s) = &stripped {
        info.p_next = s.head;
    }
    // SAFETY: `info` and everything it points to live until the call returns.
    let r = unsafe { create(physical, &info, p_allocator, p_device) };
    if r != vk::Result::SUCCESS {
        return r;
    }
    // SAFETY: creation succeeded.
    let device = unsafe { *p_device };
    // SAFETY: `physical` belongs to `inst`; the application's valid create info.
    unsafe { video_memory::device_created(&inst, physical, device, app_info, provided) };
    // SAFETY: the next GDPA returns entry points matching their names.
    let mut fns = unsafe { DeviceFns::load(|n| next_gdpa(device, n.as_ptr())) };
    if fns.set_debug_utils_object_name.is_none() {
        // An instance-extension command dispatched on the device: some loaders answer it through GIPA.
        // SAFETY: the next GIPA returns the entry point of this name (or null).
        fns.set_debug_utils_object_name = unsafe {
            std::mem::transmute::<
                vk::PFN_vkVoidFunction,
                Option<vk::PFN_vkSetDebugUtilsObjectNameEXT>,
            >(next_gipa(
                inst.handle,
                c"vkSetDebugUtilsObjectNameEXT".as_ptr(),
            ))
        };
    }
    if fns.cmd_begin_debug_utils_label.is_none() {
        // Same as above: an instance-extension command dispatched on command buffers.
        // SAFETY: the next GIPA returns the entry point of this name (or null).
        fns.cmd_begin_debug_utils_label = unsafe {
            std::mem::transmute::<
                vk::PFN_vkVoidFunction,
                Option<vk::PFN_vkCmdBeginDebugUtilsLabelEXT>,
            >(next_gipa(
                inst.handle,
                c"vkCmdBeginDebugUtilsLabelEXT".as_ptr(),
            ))
        };
    }
    let mut physical_info = PhysicalInfo::default();
    if let Some(get) = inst.fns.get_physical_device_properties {
        let mut props = vk::PhysicalDeviceProperties::default();
        // SAFETY: valid physical device, valid output.
        unsafe { get(physical, &mut props) };
        physical_info = PhysicalInfo {
            vendor_id: props.vendor_id,
            device_id: props.device_id,
            driver_version: props.driver_version,
            pipeline_cache_uuid: props.pipeline_cache_uuid,
        };
    }
    let mut queue_families = Vec::new();
    if let Some(get) = inst.fns.get_physical_device_queue_family_properties {
        let mut n = 0u32;
        // SAFETY: valid physical device; count query.
        unsafe { get(physical, &mut n, std::ptr::null_mut()) };
        let mut props = vec![vk::QueueFamilyProperties::default(); n as usize];
        // SAFETY: `props` holds `n` elements.
        unsafe { get(physical, &mut n, props.as_mut_ptr()) };
        queue_families = props
            .iter()
            .take(n as usize)
            .map(|p| p.queue_flags)
            .collect();
    }
    let records_wait = inst
        .config
        .scenario
        .as_ref()
        .is_some_and(|s| s.records_wait());
    let mut drill_event = None;
    if records_wait {
        if let Some(create) = fns.create_event {
            let mut event = vk::Event::null();
            // SAFETY: a fresh device; a default (host-settable) event with the driver's allocator (the
            // layer destroys it the same way); valid output.
            let info = vk::EventCreateInfo::default();
            let r = unsafe { create(device, &info, std::ptr::null(), &mut event) };
            if r == vk::Result::SUCCESS {
                drill_event = Some(event);
            } else {
                log_line(&format!(
                    "vkCreateEvent for the drill's wait failed ({r:?}); no wait will be injected"
                ));
            }
        }
    }
    let data = DeviceData {
        handle: device,
        instance: inst.clone(),
        next_gdpa,
        fns,
        extensions: enabled,
        physical: physical_info,
        tracks_commands: enabled.buffer_marker_enabled || records_wait,
        queue_families,
        drill_event: Mutex::new(drill_event),
        state: Mutex::new(DeviceState {
            tracker: Default::default(),
            fault: Default::default(),
            commands: Default::default(),
        }),
    };
    // SAFETY: valid device handle.
    dispatch::insert_device(unsafe { dispatch_key(device) }, Arc::new(data));
    vk::Result::SUCCESS
}

pub(crate) unsafe extern "system" fn create_debug_utils_messenger(
    instance: vk::Instance,
    p_create_info: *const vk::DebugUtilsMessengerCreateInfoEXT<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_messenger: *mut vk::DebugUtilsMessengerEXT,
) -> vk::Result {
    on_instance(
        "vkCreateDebugUtilsMessengerEXT",
        NO_INSTANCE,
        instance,
        |inst| {
            let Some(next) = inst.fns.create_debug_utils_messenger else {
                return vk::Result::ERROR_EXTENSION_NOT_PRESENT;
            };
            if p_create_info.is_null() || p_messenger.is_null() {
                // SAFETY: forwarded unchanged (invalid usage is the next layer's to report).
                return unsafe { next(instance, p_create_info, p_allocator, p_messenger) };
            }
            // SAFETY: a valid create info per the spec.
            let app = unsafe { &*p_create_info };
            // Register a copy that points at our trampoline and also asks for binding reports, so that a
            // driver with its own binding report tells the layer its addresses (`native.rs`). The
            // trampoline forwards to the application only what it asked for.
            let wrapper = Box::into_raw(Box::new(native::WrappedMessenger {
                callback: app.pfn_user_callback,
                user_data: app.p_user_data,
                severity: app.message_severity,
                types: app.message_type,
            }));
            let mut info = *app;
            info.pfn_user_callback = Some(native::trampoline);
            info.p_user_data = wrapper.cast();
            info.message_severity |= vk::DebugUtilsMessageSeverityFlagsEXT::INFO;
            info.message_type |= vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING;
            // SAFETY: `info` is a valid copy of the application's create info.
            let r = unsafe { next(instance, &info, p_allocator, p_messenger) };
            if r != vk::Result::SUCCESS {
                // SAFETY: created above and never handed to anyone.
                drop(unsafe { Box::from_raw(wrapper) });
                return r;
            }
            // SAFETY: creation succeeded, so the handle was written.
            let handle = unsafe { *p_messenger };
            inst.messengers
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .push(Messenger {
                    handle,
                    severity: app.message_severity,
                    types: app.message_type,
                    callback: app.pfn_user_callback,
                    user_data: app.p_user_data as usize,
                    wrapper: wrapper as usize,
                });
            r
        },
    )
}

pub(crate) unsafe extern "system" fn destroy_debug_utils_messenger(
    instance: vk::Instance,
    messenger: vk::DebugUtilsMessengerEXT,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    on_instance("vkDestroyDebugUtilsMessengerEXT", (), instance, |inst| {
        // Taking the write side waits for every binding-report delivery in flight (`messengers::emit`
        // holds the read side while it calls the application's callbacks); once the messenger is off
        // the list, no later delivery sees it. Released before calling down (locking order:
        // `dispatch.rs`).
        let removed: Vec<Messenger> = {
            let mut list = inst.messengers.write().unwrap_or_else(|e| e.into_inner());
            let (gone, kept) = list.drain(..).partition(|m| m.handle == messenger);
            *list = kept;
            gone
        };
        if let Some(next) = inst.fns.destroy_debug_utils_messenger {
            // SAFETY: forwarded unchanged.
            unsafe { next(instance, messenger, p_allocator) };
        }
        for m in removed {
            // SAFETY: the driver no longer calls the destroyed messenger; the box was leaked by
            // `create_debug_utils_messenger` for exactly this messenger.
            drop(unsafe { Box::from_raw(m.wrapper as *mut native::WrappedMessenger) });
        }
    })
}

/// The driver's (next layer's) device extensions.
///
/// # Safety
/// `physical` must be a valid physical device of `instance`.
pub(crate) unsafe fn driver_extensions(
    instance: &InstanceData,
    physical: vk::PhysicalDevice,
) -> Result<Vec<vk::ExtensionProperties>, vk::Result> {
    let Some(enumerate) = instance.fns.enumerate_device_extension_properties else {
        return Ok(Vec::new());
    };
    loop {
        let mut count = 0u32;
        // SAFETY: valid physical device; count query with a null array.
        let r = unsafe { enumerate(physical, std::ptr::null(), &mut count, std::ptr::null_mut()) };
        if r != vk::Result::SUCCESS {
            return Err(r);
        }
        let mut props = vec![vk::ExtensionProperties::default(); count as usize];
        // SAFETY: `props` holds `count` elements.
        let r = unsafe { enumerate(physical, std::ptr::null(), &mut count, props.as_mut_ptr()) };
        match r {
            vk::Result::SUCCESS => {
                props.truncate(count as usize);
                return Ok(props);
            }
            // The list grew between the calls: ask again.
            vk::Result::INCOMPLETE => continue,
            e => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    use ash::vk::Handle;
    use vulkan_fault_ffi::{
        structure_type, PhysicalDeviceFaultPropertiesKHR, PhysicalDeviceShaderAbortFeaturesKHR,
        PhysicalDeviceShaderAbortPropertiesKHR,
    };

    use super::*;
    use crate::dispatch::test_support::{no_instance_fns, serial, FakeInstance};
    use crate::messengers::emit;
    use crate::state::bindings::{BindingEvent, Range};
    use crate::state::extensions::{MAX_DEVICE_FAULT_COUNT, MAX_SHADER_ABORT_MESSAGE_SIZE};

    /// The structure types the mock driver was handed (`serial()` keeps tests apart).
    static SEEN: Mutex<Vec<vk::StructureType>> = Mutex::new(Vec::new());
    /// Calls of the mock query functions.
    static QUERIES: AtomicU32 = AtomicU32::new(0);

    fn take_seen() -> Vec<vk::StructureType> {
        std::mem::take(&mut *SEEN.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A driver with no device extensions at all (lavapipe-like): the layer provides everything.
    unsafe extern "system" fn mock_enumerate(
        _physical: vk::PhysicalDevice,
        _layer: *const c_char,
        count: *mut u32,
        _props: *mut vk::ExtensionProperties,
    ) -> vk::Result {
        // SAFETY: the layer passes a valid count.
        unsafe { *count = 0 };
        vk::Result::SUCCESS
    }

    /// Records the chain it sees and writes one core field, as a driver would.
    unsafe extern "system" fn mock_features2(
        _physical: vk::PhysicalDevice,
        features: *mut vk::PhysicalDeviceFeatures2<'_>,
    ) {
        QUERIES.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the layer passes the application's valid output chain.
        unsafe {
            (*features).features.robust_buffer_access = vk::TRUE;
            chain::for_each((*features).p_next.cast_const(), |n| {
                SEEN.lock().unwrap().push((*n).s_type)
            });
        }
    }

    unsafe extern "system" fn mock_properties2(
        _physical: vk::PhysicalDevice,
        properties: *mut vk::PhysicalDeviceProperties2<'_>,
    ) {
        QUERIES.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the layer passes the application's valid output chain.
        unsafe {
            (*properties).properties.vendor_id = 0x10005;
            chain::for_each((*properties).p_next.cast_const(), |n| {
                SEEN.lock().unwrap().push((*n).s_type)
            });
        }
    }

    fn types_of(head: *const c_void) -> Vec<vk::StructureType> {
        let mut types = Vec::new();
        // SAFETY: a valid chain of the test's locals.
        unsafe { chain::for_each(head, |n| types.push((*n).s_type)) };
        types
    }

    #[test]
    fn features2_hides_provided_structures_from_the_driver_and_fills_them() {
        let _serial = serial();
        for khr in [false, true] {
            let mut fns = no_instance_fns();
            fns.enumerate_device_extension_properties = Some(mock_enumerate);
            if khr {
                fns.get_physical_device_features2_khr = Some(mock_features2);
            } else {
                fns.get_physical_device_features2 = Some(mock_features2);
            }
            let inst = FakeInstance::new(fns, None);
            let mut last = vk::PhysicalDeviceVulkan12Features::default();
            let mut binding = vk::PhysicalDeviceAddressBindingReportFeaturesEXT {
                p_next: (&mut last as *mut vk::PhysicalDeviceVulkan12Features<'_>).cast(),
                ..Default::default()
            };
            let mut fault = vk::PhysicalDeviceFaultFeaturesEXT {
                p_next: (&mut binding
                    as *mut vk::PhysicalDeviceAddressBindingReportFeaturesEXT<'_>)
                    .cast(),
                ..Default::default()
            };
            let mut features = vk::PhysicalDeviceFeatures2 {
                p_next: (&mut fault as *mut vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast(),
                ..Default::default()
            };
            let head = (&features as *const vk::PhysicalDeviceFeatures2<'_>).cast::<c_void>();
            let before = types_of(head);
            take_seen();
            let physical = inst.handle.as_handle::<vk::PhysicalDevice>();
            // SAFETY: a fake physical device of the fake instance; a valid chain of locals.
            unsafe {
                if khr {
                    get_physical_device_features2_khr(physical, &mut features);
                } else {
                    get_physical_device_features2(physical, &mut features);
                }
            }
            assert_eq!(
                take_seen(),
                [vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_FEATURES],
                "the driver must not see the layer's structures (khr alias: {khr})"
            );
            assert_eq!(types_of(head), before, "chain restored");
            assert_eq!(features.features.robust_buffer_access, vk::TRUE);
            assert_eq!(fault.device_fault, vk::TRUE);
            assert_eq!(fault.device_fault_vendor_binary, vk::TRUE);
            assert_eq!(binding.report_address_binding, vk::TRUE);
        }
    }

    #[test]
    fn properties2_hides_provided_structures_from_the_driver_and_fills_them() {
        let _serial = serial();
        for khr in [false, true] {
            let mut fns = no_instance_fns();
            fns.enumerate_device_extension_properties = Some(mock_enumerate);
            if khr {
                fns.get_physical_device_properties2_khr = Some(mock_properties2);
            } else {
                fns.get_physical_device_properties2 = Some(mock_properties2);
            }
            let inst = FakeInstance::new(fns, Some("khr"));
            let mut last = vk::PhysicalDeviceVulkan12Properties::default();
            let mut abort = PhysicalDeviceShaderAbortPropertiesKHR {
                p_next: (&mut last as *mut vk::PhysicalDeviceVulkan12Properties<'_>).cast(),
                ..Default::default()
            };
            let mut first = vk::PhysicalDeviceVulkan11Properties {
                p_next: (&mut abort as *mut PhysicalDeviceShaderAbortPropertiesKHR).cast(),
                ..Default::default()
            };
            let mut fault = PhysicalDeviceFaultPropertiesKHR {
                p_next: (&mut first as *mut vk::PhysicalDeviceVulkan11Properties<'_>).cast(),
                ..Default::default()
            };
            let mut properties = vk::PhysicalDeviceProperties2 {
                p_next: (&mut fault as *mut PhysicalDeviceFaultPropertiesKHR).cast(),
                ..Default::default()
            };
            let head = (&properties as *const vk::PhysicalDeviceProperties2<'_>).cast::<c_void>();
            let before = types_of(head);
            take_seen();
            let physical = inst.handle.as_handle::<vk::PhysicalDevice>();
            // SAFETY: a fake physical device of the fake instance; a valid chain of locals.
            unsafe {
                if khr {
                    get_physical_device_properties2_khr(physical, &mut properties);
                } else {
                    get_physical_device_properties2(physical, &mut properties);
                }
            }
            assert_eq!(
                take_seen(),
                [
                    vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES,
                    vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES
                ],
                "the driver must not see the layer's structures (khr alias: {khr})"
            );
            assert_eq!(types_of(head), before, "chain restored");
            assert_eq!(properties.properties.vendor_id, 0x10005);
            assert_eq!(fault.max_device_fault_count, MAX_DEVICE_FAULT_COUNT);
            assert_eq!(
                abort.max_shader_abort_message_size,
                MAX_SHADER_ABORT_MESSAGE_SIZE
            );
        }
        // The shader-abort feature structure is the layer's too under `khr`.
        let mut fns = no_instance_fns();
        fns.enumerate_device_extension_properties = Some(mock_enumerate);
        fns.get_physical_device_features2 = Some(mock_features2);
        let inst = FakeInstance::new(fns, Some("khr"));
        let mut abort = PhysicalDeviceShaderAbortFeaturesKHR::default();
        let mut features = vk::PhysicalDeviceFeatures2 {
            p_next: (&mut abort as *mut PhysicalDeviceShaderAbortFeaturesKHR).cast(),
            ..Default::default()
        };
        take_seen();
        // SAFETY: as above.
        unsafe {
            get_physical_device_features2(inst.handle.as_handle(), &mut features);
        }
        assert_eq!(take_seen(), []);
        assert_eq!(
            abort.s_type,
            structure_type::PHYSICAL_DEVICE_SHADER_ABORT_FEATURES_KHR
        );
        assert_eq!(abort.shader_abort, vk::TRUE);
    }

    #[test]
    fn a_physical_device_of_no_known_instance_is_not_forwarded_to_another_instance() {
        let _serial = serial();
        let mut fns = no_instance_fns();
        fns.enumerate_device_extension_properties = Some(mock_enumerate);
        fns.get_physical_device_features2 = Some(mock_features2);
        let _only = FakeInstance::new(fns, None);
        let stranger = crate::dispatch::test_support::FakeHandle::new();
        let mut features = vk::PhysicalDeviceFeatures2::default();
        QUERIES.store(0, Ordering::SeqCst);
        // SAFETY: a fake dispatchable handle whose key no instance has; a valid output.
        unsafe { get_physical_device_features2(stranger.as_handle(), &mut features) };
        assert_eq!(
            QUERIES.load(Ordering::SeqCst),
            0,
            "not sent to the only instance"
        );
        assert_eq!(features.features.robust_buffer_access, vk::FALSE);
    }

    // Messenger destruction racing a binding-report delivery.

    static CALLS: AtomicU32 = AtomicU32::new(0);
    static ENTERED: AtomicBool = AtomicBool::new(false);
    static DESTROY_RETURNED: AtomicBool = AtomicBool::new(false);
    /// Callback entries, or callback runs still going, after the destroy returned.
    static LATE: AtomicU32 = AtomicU32::new(0);

    unsafe extern "system" fn slow_callback(
        _severity: vk::DebugUtilsMessageSeverityFlagsEXT,
        _types: vk::DebugUtilsMessageTypeFlagsEXT,
        _data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
        _user_data: *mut c_void,
    ) -> vk::Bool32 {
        if DESTROY_RETURNED.load(Ordering::SeqCst) {
            LATE.fetch_add(1, Ordering::SeqCst);
        }
        if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
            ENTERED.store(true, Ordering::SeqCst);
            // Long enough for a destroy that does not wait to return meanwhile.
            std::thread::sleep(Duration::from_millis(300));
        }
        if DESTROY_RETURNED.load(Ordering::SeqCst) {
            LATE.fetch_add(1, Ordering::SeqCst);
        }
        vk::FALSE
    }

    unsafe extern "system" fn mock_create_messenger(
        _instance: vk::Instance,
        _info: *const vk::DebugUtilsMessengerCreateInfoEXT<'_>,
        _allocator: *const vk::AllocationCallbacks<'_>,
        messenger: *mut vk::DebugUtilsMessengerEXT,
    ) -> vk::Result {
        // SAFETY: the layer passes a valid output.
        unsafe { *messenger = vk::DebugUtilsMessengerEXT::from_raw(0x5eed) };
        vk::Result::SUCCESS
    }

    unsafe extern "system" fn mock_destroy_messenger(
        _instance: vk::Instance,
        _messenger: vk::DebugUtilsMessengerEXT,
        _allocator: *const vk::AllocationCallbacks<'_>,
    ) {
    }

    #[test]
    fn no_callback_runs_after_its_messenger_is_destroyed() {
        let _serial = serial();
        let mut fns = no_instance_fns();
        fns.create_debug_utils_messenger = Some(mock_create_messenger);
        fns.destroy_debug_utils_messenger = Some(mock_destroy_messenger);
        let inst = FakeInstance::new(fns, None);
        let instance = inst.handle.as_handle::<vk::Instance>();
        let info = vk::DebugUtilsMessengerCreateInfoEXT {
            message_severity: vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
            message_type: vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
            pfn_user_callback: Some(slow_callback),
            ..Default::default()
        };
        let mut messenger = vk::DebugUtilsMessengerEXT::null();
        // SAFETY: the fake instance; valid create info and output.
        let r = unsafe {
            create_debug_utils_messenger(instance, &info, std::ptr::null(), &mut messenger)
        };
        assert_eq!(r, vk::Result::SUCCESS);
        CALLS.store(0, Ordering::SeqCst);
        ENTERED.store(false, Ordering::SeqCst);
        DESTROY_RETURNED.store(false, Ordering::SeqCst);
        LATE.store(0, Ordering::SeqCst);
        let event = BindingEvent {
            object_type: vk::ObjectType::BUFFER,
            handle: 7,
            name: None,
            binding_type: vk::DeviceAddressBindingTypeEXT::BIND,
            range: Range {
                base: 0x1_0000_0000,
                size: 64,
            },
        };
        let data = inst.data.clone();
        let delivery = std::thread::spawn(move || emit(&data, &[event.clone(), event]));
        let start = Instant::now();
        while !ENTERED.load(Ordering::SeqCst) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "callback never ran"
            );
            std::thread::yield_now();
        }
        // SAFETY: the fake instance and the messenger created above.
        unsafe { destroy_debug_utils_messenger(instance, messenger, std::ptr::null()) };
        DESTROY_RETURNED.store(true, Ordering::SeqCst);
        delivery.join().unwrap();
        assert_eq!(
            LATE.load(Ordering::SeqCst),
            0,
            "the callback ran after vkDestroyDebugUtilsMessengerEXT returned"
        );
        assert_eq!(
            CALLS.load(Ordering::SeqCst),
            2,
            "the delivery in flight completed"
        );
        assert!(inst.data.messengers.read().unwrap().is_empty());
    }
}
