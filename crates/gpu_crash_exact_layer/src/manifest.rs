//! The loader manifest (`VK_LAYER_gpu_crash_exact.json`) for this layer.
//!
//! Only `std`, so that tools and tests can include it with `#[path]` instead of linking the layer
//! library (whose exported `vkGetInstanceProcAddr` must not end up inside a program that also talks
//! to the real loader).

use std::path::Path;

/// The layer's name as applications enable it.
pub const LAYER_NAME: &str = "VK_LAYER_gpu_crash_exact";

/// File name of the manifest the loader looks for in `VK_LAYER_PATH` / `VK_ADD_LAYER_PATH`.
pub const MANIFEST_FILE_NAME: &str = "VK_LAYER_gpu_crash_exact.json";

/// File name of the built layer library on this platform.
pub fn library_file_name() -> String {
    library_file_name_for(std::env::consts::OS)
}

/// File name of the layer library on the platform `target_os` (Rust's `target_os` names).
pub fn library_file_name_for(target_os: &str) -> String {
    let (prefix, suffix) = match target_os {
        "windows" => ("", ".dll"),
        "macos" | "ios" => ("lib", ".dylib"),
        _ => ("lib", ".so"),
    };
    format!("{prefix}gpu_crash_exact_layer{suffix}")
}

/// The manifest text, pointing at `library_path` (absolute, or relative to the manifest's folder:
/// a game ships `./VK_LAYER_gpu_crash_exact.json` with `./libgpu_crash_exact_layer.so` beside it).
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
        "description": "GPU crash reporter, exact mode: marks every draw and dispatch so a crash report names the one the GPU was in",
        "functions": {{
            "vkNegotiateLoaderLayerInterfaceVersion": "vkNegotiateLoaderLayerInterfaceVersion",
            "vkGetInstanceProcAddr": "vkGetInstanceProcAddr",
            "vkGetDeviceProcAddr": "vkGetDeviceProcAddr"
        }}
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
