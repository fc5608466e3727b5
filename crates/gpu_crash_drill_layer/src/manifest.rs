//! The loader manifest (`VK_LAYER_gpu_crash_drill.json`) for this layer.
//!
//! This file uses only `std` so that the `xtask` crate and the integration tests can include it with
//! `#[path]` instead of linking the layer library (whose exported `vkGetInstanceProcAddr` must not end
//! up inside a program that also talks to the real loader).

use std::path::Path;

/// The layer's name as applications enable it.
pub const LAYER_NAME: &str = "VK_LAYER_gpu_crash_drill";

/// File name of the manifest the loader looks for in `VK_LAYER_PATH`.
pub const MANIFEST_FILE_NAME: &str = "VK_LAYER_gpu_crash_drill.json";

/// File name of the built layer library on this platform.
pub fn library_file_name() -> String {
    library_file_name_for(std::env::consts::OS)
}

/// File name of the layer library on the platform `target_os` (Rust's `target_os` names): for a
/// build script, whose own platform may not be the one it builds for.
pub fn library_file_name_for(target_os: &str) -> String {
    let (prefix, suffix) = match target_os {
        "windows" => ("", ".dll"),
        "macos" | "ios" => ("lib", ".dylib"),
        _ => ("lib", ".so"),
    };
    format!("{prefix}gpu_crash_drill_layer{suffix}")
}

/// The manifest text, pointing at `library_path` (absolute, or relative to the manifest's folder).
///
/// The loader validates the extensions an application enables against the ICD's list and against the
/// `device_extensions` of enabled layers (it asks the ICD directly, bypassing layers), so every
/// extension the layer may provide is listed here, with its entry points. Which of them the layer
/// actually advertises is decided at run time (`GPU_CRASH_DRILL_API`, what the driver has natively).
pub fn manifest_json(library_path: &Path) -> String {
    let path = json_escape(&library_path.to_string_lossy());
    format!(
        r#"{{
    "file_format_version": "1.2.0",
    "layer": {{
        "name": "{LAYER_NAME}",
        "type": "GLOBAL",
        "library_path": "{path}",
        "api_version": "1.3.239",
        "implementation_version": "1",
        "description": "GPU crash drill: provides the device fault and address binding extensions and injects GPU faults",
        "functions": {{
            "vkNegotiateLoaderLayerInterfaceVersion": "vkNegotiateLoaderLayerInterfaceVersion",
            "vkGetInstanceProcAddr": "vkGetInstanceProcAddr",
            "vkGetDeviceProcAddr": "vkGetDeviceProcAddr"
        }},
        "device_extensions": [
            {{ "name": "VK_EXT_device_address_binding_report", "spec_version": "1" }},
            {{ "name": "VK_EXT_device_fault", "spec_version": "2", "entrypoints": ["vkGetDeviceFaultInfoEXT"] }},
            {{ "name": "VK_KHR_device_fault", "spec_version": "1", "entrypoints": ["vkGetDeviceFaultReportsKHR", "vkGetDeviceFaultDebugInfoKHR"] }},
            {{ "name": "VK_KHR_shader_abort", "spec_version": "1" }}
        ]
    }}
}}
"#
    )
}

/// Writes the manifest into `dir` (created if needed) and returns its path.
pub fn write_manifest(dir: &Path, library_path: &Path) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(MANIFEST_FILE_NAME);
    std::fs::write(&path, manifest_json(library_path))?;
    Ok(path)
}

fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `existing` (a loader search list such as `VK_LAYER_PATH` or `VK_INSTANCE_LAYERS`) with `item`
/// added to its `sep`-separated list, unless already present; for the tools that point the loader at
/// the layer (xtask, gpu-crash).
pub fn append_list(
    existing: Option<std::ffi::OsString>,
    item: &str,
    sep: char,
) -> std::ffi::OsString {
    match existing {
        Some(e) if !e.is_empty() => {
            let s = e.to_string_lossy();
            if s.split(sep).any(|x| x == item) {
                e
            } else {
                std::ffi::OsString::from(format!("{s}{sep}{item}"))
            }
        }
        _ => std::ffi::OsString::from(item),
    }
}
