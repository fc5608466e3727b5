//! `gpu-crash doctor`: what the crash reporter would get on each GPU of this machine.
//!
//! A Vulkan instance is created the way the plugin has Bevy create it (`VK_EXT_debug_utils` where
//! the loader offers it), then [`GpuCrashCapabilities::probe`] creates a device on each GPU with the
//! plugin's own decisions; so the lines printed are the plugin's startup line and `missing` lines.

use std::ffi::{c_char, CStr};
use std::process::ExitCode;

use ash::vk;
use gpu_crash_core::{BreadcrumbWriter, GpuCrashCapabilities};
use serde::Serialize;

use crate::error::CliError;
use crate::error::CliResult;

/// Highest instance version asked for, as wgpu 29 asks (it uses Vulkan 1.3 at most).
const MAX_INSTANCE_VERSION: u32 = vk::API_VERSION_1_3;

/// What `--json` prints.
#[derive(Serialize)]
struct Doctor {
    /// The loader's instance version.
    loader_version: String,
    /// `VK_INSTANCE_LAYERS` as set for this run (e.g. the drill layer under `gpu-crash drill`).
    instance_layers: Option<String>,
    /// One entry per GPU, in the loader's order.
    gpus: Vec<GpuDoctor>,
}

#[derive(Serialize)]
struct GpuDoctor {
    /// The plugin's startup line for this GPU.
    summary: String,
    /// The plugin's `GpuCrashCapabilities` for this GPU.
    capabilities: GpuCrashCapabilities,
}

pub fn run(json: bool) -> CliResult {
    let doctor = probe_all()?;
    if json {
        let text = serde_json::to_string_pretty(&doctor)
            .map_err(|e| CliError::Io(format!("cannot write JSON: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", render(&doctor));
    }
    Ok(if doctor.gpus.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn probe_all() -> Result<Doctor, CliError> {
    // SAFETY: loads the system's Vulkan loader; nothing else in this process uses Vulkan.
    let entry = unsafe { ash::Entry::load() }
        .map_err(|e| CliError::Vulkan(format!("no Vulkan loader: {e}")))?;
    // SAFETY: plain loader queries.
    let loader_version = unsafe { entry.try_enumerate_instance_version() }
        .ok()
        .flatten()
        .unwrap_or(vk::API_VERSION_1_0);
    // SAFETY: as above.
    let debug_utils = unsafe { entry.enumerate_instance_extension_properties(None) }
        .map(|list| {
            list.iter()
                .any(|e| e.extension_name_as_c_str() == Ok(ash::ext::debug_utils::NAME))
        })
        .unwrap_or(false);
    let api_version = loader_version.min(MAX_INSTANCE_VERSION);
    let app_name = c"gpu-crash doctor";
    let app = vk::ApplicationInfo::default()
        .application_name(app_name)
        .api_version(api_version);
    let extensions: Vec<*const c_char> = if debug_utils {
        vec![ash::ext::debug_utils::NAME.as_ptr()]
    } else {
        Vec::new()
    };
    let create_info = vk::InstanceCreateInfo::default()
        .application_info(&app)
        .enabled_extension_names(&extensions);
    // SAFETY: valid create info; the extension is one the loader offers.
    let instance = unsafe { entry.create_instance(&create_info, None) }
        .map_err(|e| CliError::Vulkan(format!("vkCreateInstance failed: {e}")))?;
    let result = probe_gpus(&entry, &instance, api_version, debug_utils);
    // SAFETY: every device and messenger of the probe is destroyed; nothing else uses the instance.
    unsafe { instance.destroy_instance(None) };
    Ok(Doctor {
        loader_version: version_string(loader_version),
        instance_layers: std::env::var("VK_INSTANCE_LAYERS")
            .ok()
            .filter(|v| !v.is_empty()),
        gpus: result?,
    })
}

fn probe_gpus(
    entry: &ash::Entry,
    instance: &ash::Instance,
    api_version: u32,
    debug_utils: bool,
) -> Result<Vec<GpuDoctor>, CliError> {
    // SAFETY: valid instance.
    let devices = unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| CliError::Vulkan(format!("vkEnumeratePhysicalDevices failed: {e}")))?;
    let mut gpus = Vec::new();
    for physical_device in devices {
        // SAFETY: `instance` came from `entry` and outlives the call; the device is one of its own.
        let probed = unsafe {
            GpuCrashCapabilities::probe(entry, instance, physical_device, api_version, debug_utils)
        };
        let capabilities = probed.map_err(|source| CliError::Probe {
            // SAFETY: valid physical device of `instance`.
            gpu: unsafe { instance.get_physical_device_properties(physical_device) }
                .device_name_as_c_str()
                .map(CStr::to_string_lossy)
                .unwrap_or_default()
                .into_owned(),
            source,
        })?;
        gpus.push(GpuDoctor {
            summary: capabilities.summary(),
            capabilities,
        });
    }
    Ok(gpus)
}

/// The text report: per GPU the plugin's startup line, each capability with what it gives, and
/// the plugin's `missing` lines.
fn render(doctor: &Doctor) -> String {
    let mut out = format!("Vulkan loader {}", doctor.loader_version);
    if let Some(layers) = &doctor.instance_layers {
        out.push_str(&format!(", instance layers {layers}"));
    }
    out.push('\n');
    if doctor.gpus.is_empty() {
        out.push_str("no Vulkan GPU found: the crash reporter would have nothing to watch\n");
    }
    for (i, gpu) in doctor.gpus.iter().enumerate() {
        let c = &gpu.capabilities;
        out.push_str(&format!("\nGPU {i}: {} ({})\n", c.gpu_name, c.device_type));
        out.push_str(&format!("  {}\n", gpu.summary));
        let on_off = |b: bool| if b { "on " } else { "off" };
        let rows = [
            (
                "binding report",
                c.address_binding_report,
                "fault addresses resolve to the buffer or texture and its label",
            ),
            (
                "device fault EXT",
                c.device_fault_ext,
                "a device loss comes with fault addresses (VK_EXT_device_fault)",
            ),
            (
                "KHR",
                c.device_fault_khr,
                "fault reports also before a loss (VK_KHR_device_fault)",
            ),
            (
                "vendor binary",
                c.device_fault_vendor_binary,
                "the driver's own crash dump is attached",
            ),
            (
                "shader abort",
                c.shader_abort_khr,
                "a shader's abort message is reported (VK_KHR_shader_abort)",
            ),
            (
                "messenger",
                c.binding_messenger,
                "binding events are recorded as the driver reports them",
            ),
            (
                "buffer marker",
                c.buffer_marker,
                "breadcrumbs around each render stage (VK_AMD_buffer_marker)",
            ),
            (
                "hang watchdog",
                c.gpu_progress,
                "GPU progress markers: a hang is reported without a device loss",
            ),
            (
                "memory budget",
                c.memory_budget,
                "each heap's usage and budget at the fault (VK_EXT_memory_budget)",
            ),
            (
                "memory report",
                c.device_memory_report,
                "allocations that failed before the fault (VK_EXT_device_memory_report)",
            ),
        ];
        for (name, on, what) in rows {
            out.push_str(&format!("    {name:<17} {} {what}\n", on_off(on)));
        }
        let breadcrumbs = match c.breadcrumbs {
            Some(BreadcrumbWriter::AmdBufferMarker) => {
                "AMD buffer marker: each render stage of each camera"
            }
            Some(BreadcrumbWriter::FillBuffer) => {
                "fill buffer: frame start and end only (no VK_AMD_buffer_marker)"
            }
            None => "none",
        };
        out.push_str(&format!("    {:<17} {breadcrumbs}\n", "breadcrumbs"));
        if c.missing.is_empty() {
            out.push_str("  missing: nothing\n");
        } else {
            out.push_str("  missing:\n");
            for line in &c.missing {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out
}

fn version_string(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}
