//! Exact mode's raw Vulkan: enabling `VK_LAYER_gpu_crash_exact` (the layer a game ships beside its
//! executable, `crates/gpu_crash_exact_layer`) at instance creation, and asking it, at a hang or a
//! loss, which draw or dispatch the GPU was in.
//!
//! How the layer gets into the instance, on the Linux loader (1.3.239, checked on lavapipe): wgpu
//! 29's instance callback cannot add a layer (wgpu sets the create info's layer list after the
//! callback, from its own list), so the callback asks the loader through its environment, which
//! the loader reads when wgpu then calls `vkCreateInstance`: the layer's name is appended to
//! `VK_INSTANCE_LAYERS` (layers the loader enables as if the application had), and, when the loader
//! does not know the layer yet and its manifest lies beside the executable, that folder to
//! `VK_ADD_LAYER_PATH` (extra manifest folders; the loader reads it at each
//! `vkEnumerateInstanceLayerProperties` and `vkCreateInstance`), or to `VK_LAYER_PATH` where that
//! is set (the loader then ignores `VK_ADD_LAYER_PATH`; seen with loader 1.3.239). Both stay set for the process (a
//! renderer re-created after a loss gets the layer again); a child process the game starts
//! inherits them. The Windows loader reads the same two variables (`VK_ADD_LAYER_PATH` from loader
//! 1.3.234); the other way there is a registry value under
//! `HKEY_CURRENT_USER\SOFTWARE\Khronos\Vulkan\ExplicitLayers` naming the manifest, which an
//! installer (not the game) would write. Not run on Windows.

use std::path::{Path, PathBuf};

use ash::vk;
use vulkan_fault_ffi::exact as ffi;

use crate::pipelines::{ExactCommand, ExactDraws};

/// How every `missing` line about exact mode begins.
pub(crate) const MISSING_PREFIX: &str = "exact mode: ";
/// The `missing` line when the layer was enabled on the instance but does not mark the device.
pub(crate) const NOT_ON_DEVICE: &str =
    "exact mode: VK_LAYER_gpu_crash_exact does not mark this device (its stderr line says why)";

/// Where the loader looks for extra layer manifests (appended to, never replaced).
const ADD_LAYER_PATH: &str = "VK_ADD_LAYER_PATH";
/// The loader's own layer search path: when set, the only one it searches.
const LAYER_PATH: &str = "VK_LAYER_PATH";
/// Layers the loader enables on every instance (appended to, never replaced).
const INSTANCE_LAYERS: &str = "VK_INSTANCE_LAYERS";

/// `var` with `item` appended to its `sep`-separated list, unless already there. Process-wide: set
/// on the thread about to create the instance, before wgpu calls `vkCreateInstance`; other threads
/// that read the environment through Rust's std take the same lock.
fn append_to(var: &str, item: &std::ffi::OsStr, sep: char) {
    let joined = match std::env::var_os(var) {
        Some(old) if !old.is_empty() => {
            if old
                .to_string_lossy()
                .split(sep)
                .any(|x| std::ffi::OsStr::new(x) == item)
            {
                return;
            }
            let mut joined = old;
            joined.push(sep.to_string());
            joined.push(item);
            joined
        }
        _ => item.to_os_string(),
    };
    std::env::set_var(var, joined);
}

/// The loader's list separator on this platform.
const SEP: char = if cfg!(windows) { ';' } else { ':' };

/// Has the loader enable the layer on the instance wgpu is about to create.
fn enable_through_loader() {
    append_to(
        INSTANCE_LAYERS,
        std::ffi::OsStr::new(&*ffi::LAYER_NAME.to_string_lossy()),
        SEP,
    );
}

/// Whether the loader offers the exact layer now.
fn offered(entry: &ash::Entry) -> bool {
    // SAFETY: a plain loader query.
    unsafe { entry.enumerate_instance_layer_properties() }
        .map(|layers| {
            layers
                .iter()
                .any(|l| l.layer_name_as_c_str() == Ok(ffi::LAYER_NAME))
        })
        .unwrap_or(false)
}

/// The folder a game ships the layer in: its executable's.
fn beside_executable() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()?
        .parent()
        .map(Path::to_path_buf)
}

/// Has the loader enable the exact layer on the instance wgpu is about to create (inside wgpu's
/// instance callback). Returns how it was found, or why it is not there.
pub(crate) fn enable_on_instance(entry: &ash::Entry) -> Result<String, String> {
    if offered(entry) {
        enable_through_loader();
        return Ok("found by the Vulkan loader".into());
    }
    let Some(dir) = beside_executable() else {
        return Err("the executable's folder is unknown".into());
    };
    if !dir.join(ffi::MANIFEST_FILE_NAME).is_file() {
        return Err(format!(
            "{} is neither known to the Vulkan loader nor beside the executable ({})",
            ffi::MANIFEST_FILE_NAME,
            dir.display()
        ));
    }
    // Where `VK_LAYER_PATH` is set (a QA tool's own layers, the drill), the loader searches only
    // there and ignores `VK_ADD_LAYER_PATH` (loader 1.3.239): the folder joins that list instead.
    let var = match std::env::var_os(LAYER_PATH) {
        Some(path) if !path.is_empty() => LAYER_PATH,
        _ => ADD_LAYER_PATH,
    };
    append_to(var, dir.as_os_str(), SEP);
    if offered(entry) {
        enable_through_loader();
        Ok(format!(
            "beside the executable ({}), through {var}",
            dir.display()
        ))
    } else {
        Err(format!(
            "{} is beside the executable ({}) but the Vulkan loader did not take it through \
             {var} (a loader before 1.3.234 ignores VK_ADD_LAYER_PATH)",
            ffi::MANIFEST_FILE_NAME,
            dir.display()
        ))
    }
}

/// The exact layer's command on one device.
pub(crate) struct ExactLayer {
    device: vk::Device,
    get: ffi::PfnGetExactProgress,
    /// Keeps the device alive while the layer may be asked.
    _owner: wgpu::Device,
}

impl ExactLayer {
    /// The layer's command on `device`, where the layer sits on it.
    pub(crate) fn of(device: &wgpu::Device) -> Option<Self> {
        // SAFETY: only raw handles are read; the guard is dropped at the end of this function.
        let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let raw = hal.raw_device().handle();
        let instance = hal.shared_instance().raw_instance();
        // SAFETY: a live device of `instance`; a C string name. Null without the layer.
        let pfn =
            unsafe { instance.get_device_proc_addr(raw, ffi::GET_EXACT_PROGRESS_NAME.as_ptr()) }?;
        // SAFETY: the layer answers this name with a function of this signature
        // (`vulkan_fault_ffi::exact`), and nothing else answers it.
        let get: ffi::PfnGetExactProgress = unsafe { std::mem::transmute(pfn) };
        Some(Self {
            device: raw,
            get,
            _owner: device.clone(),
        })
    }

    /// What the layer's markers say now (never waits for the GPU); `None` when the layer marks
    /// nothing on this device or did not answer.
    pub(crate) fn progress(&self) -> Option<ExactDraws> {
        let mut raw = ffi::ExactProgress::new();
        // SAFETY: the layer's command with its live device and a writable answer of its layout.
        let result = unsafe { (self.get)(self.device, &mut raw) };
        if result != vk::Result::SUCCESS || raw.marker == 0 {
            return None;
        }
        Some(ExactDraws {
            marker: match raw.marker {
                ffi::marker::AMD_BUFFER_MARKER => "amd_buffer_marker",
                _ => "update_buffer",
            }
            .into(),
            marked: raw.marked_commands,
            unfinished: raw.unfinished_commands,
            last_finished: command(&raw.last_finished),
            first_unfinished: command(&raw.first_unfinished),
        })
    }
}

fn command(raw: &ffi::ExactCommand) -> Option<ExactCommand> {
    if raw.present == 0 {
        return None;
    }
    let label = ffi::read_c_str(&raw.pipeline_name);
    let labels = ffi::read_c_str(&raw.labels);
    Some(ExactCommand {
        kind: match raw.kind {
            ffi::kind::DISPATCH => "dispatch",
            _ => "draw",
        }
        .into(),
        pipeline_label: (!label.is_empty()).then_some(label),
        labels: if labels.is_empty() {
            Vec::new()
        } else {
            labels.split(" > ").map(str::to_owned).collect()
        },
        index_in_command_buffer: raw.index_in_command_buffer,
        same_label_ordinal: raw.same_name_ordinal,
        sharing_marker: raw.sharing_marker.max(1),
    })
}
