//! Instance-level hooks: instance and device creation, physical device queries, debug messengers.

use std::ffi::{c_char, CStr};
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::config::{Config, LossMode, Scenario};
use crate::dispatch::{
    self, c_str, dispatch_key, AppInfo, DeviceData, DeviceFns, DeviceState, InstanceData,
    InstanceFns, Messenger, PhysicalInfo,
};
use crate::extensions::{self, Provided};
use crate::log::log_line;
use crate::manifest::LAYER_NAME;
use crate::{chain, guard, loader, native};

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
                    _ => format!("after {} submissions", config.after),
                };
                let loss = if config.loss == LossMode::AfterRebind {
                    ", device lost after re-bind"
                } else {
                    ""
                };
                log_line(&format!(
                    "armed: {} via {:?} fault API, {after}, precision {} bytes{loss}",
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
                messengers: Mutex::new(Vec::new()),
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
    let driver = unsafe { extensions::driver_extensions(inst, physical) }.unwrap_or_default();
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
    guard(
        "vkEnumerateDeviceExtensionProperties",
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            // SAFETY: valid physical device handle.
            let Some(inst) = (unsafe { dispatch::instance_of(physical) }) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: null or a C string.
            match unsafe { c_str(p_layer_name) } {
                Some(name) if name.to_bytes() == LAYER_NAME.as_bytes() => {
                    // SAFETY: valid physical device.
                    let (p, _) = unsafe { provided(&inst, physical) };
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
                    let mut all = match unsafe { extensions::driver_extensions(&inst, physical) } {
                        Ok(list) => list,
                        Err(e) => return e,
                    };
                    let ours = extensions::provided_for(inst.config.api, &all).properties();
                    all.extend(ours);
                    // SAFETY: count/array per the spec.
                    unsafe { extensions::write_properties(&all, p_count, p_properties) }
                }
            }
        },
    )
}

unsafe fn features2(
    physical: vk::PhysicalDevice,
    p_features: *mut vk::PhysicalDeviceFeatures2<'_>,
    khr: bool,
) {
    // SAFETY: valid physical device handle.
    let Some(inst) = (unsafe { dispatch::instance_of(physical) }) else {
        return;
    };
    let next = if khr {
        inst.fns
            .get_physical_device_features2_khr
            .or(inst.fns.get_physical_device_features2)
    } else {
        inst.fns
            .get_physical_device_features2
            .or(inst.fns.get_physical_device_features2_khr)
    };
    if let Some(next) = next {
        // SAFETY: forwarded unchanged; drivers skip structures they do not know.
        unsafe { next(physical, p_features) };
    }
    if p_features.is_null() {
        return;
    }
    // SAFETY: valid physical device; valid output chain.
    unsafe {
        let (p, _) = provided(&inst, physical);
        extensions::fill_features(p, p_features);
    }
}

pub(crate) unsafe extern "system" fn get_physical_device_features2(
    physical: vk::PhysicalDevice,
    p_features: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    // SAFETY: forwarded from the application.
    guard("vkGetPhysicalDeviceFeatures2", (), || unsafe {
        features2(physical, p_features, false)
    })
}

pub(crate) unsafe extern "system" fn get_physical_device_features2_khr(
    physical: vk::PhysicalDevice,
    p_features: *mut vk::PhysicalDeviceFeatures2<'_>,
) {
    // SAFETY: forwarded from the application.
    guard("vkGetPhysicalDeviceFeatures2KHR", (), || unsafe {
        features2(physical, p_features, true)
    })
}

unsafe fn properties2(
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
    khr: bool,
) {
    // SAFETY: valid physical device handle.
    let Some(inst) = (unsafe { dispatch::instance_of(physical) }) else {
        return;
    };
    let next = if khr {
        inst.fns
            .get_physical_device_properties2_khr
            .or(inst.fns.get_physical_device_properties2)
    } else {
        inst.fns
            .get_physical_device_properties2
            .or(inst.fns.get_physical_device_properties2_khr)
    };
    if let Some(next) = next {
        // SAFETY: forwarded unchanged.
        unsafe { next(physical, p_properties) };
    }
    if p_properties.is_null() {
        return;
    }
    // SAFETY: valid physical device; valid output chain.
    unsafe {
        let (p, _) = provided(&inst, physical);
        extensions::fill_properties(p, p_properties);
    }
}

pub(crate) unsafe extern "system" fn get_physical_device_properties2(
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    // SAFETY: forwarded from the application.
    guard("vkGetPhysicalDeviceProperties2", (), || unsafe {
        properties2(physical, p_properties, false)
    })
}

pub(crate) unsafe extern "system" fn get_physical_device_properties2_khr(
    physical: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    // SAFETY: forwarded from the application.
    guard("vkGetPhysicalDeviceProperties2KHR", (), || unsafe {
        properties2(physical, p_properties, true)
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
    // SAFETY: valid physical device handle.
    let Some(inst) = (unsafe { dispatch::instance_of(physical) }) else {
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
    guard(
        "vkCreateDebugUtilsMessengerEXT",
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            // SAFETY: valid instance handle.
            let Some(inst) = (unsafe { dispatch::instance_of(instance) }) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
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
                .lock()
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
    guard("vkDestroyDebugUtilsMessengerEXT", (), || {
        // SAFETY: valid instance handle.
        let Some(inst) = (unsafe { dispatch::instance_of(instance) }) else {
            return;
        };
        let removed: Vec<Messenger> = {
            let mut list = inst.messengers.lock().unwrap_or_else(|e| e.into_inner());
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
