//! The crash-drill layer inside the tool: written, with its loader manifest, into a cache folder on
//! first use, and the environment that puts it under a game.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[path = "../../gpu_crash_drill_layer/src/manifest.rs"]
mod manifest;

pub use manifest::LAYER_NAME;

/// `libgpu_crash_drill_layer.so` as built with this tool (see build.rs).
static LAYER_LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/drill_layer.bin"));

/// The folder that holds the layer and its manifest: `$XDG_CACHE_HOME` (or `~/.cache`, or the temp
/// folder)`/gpu-crash/layer-<version>-<content hash>`, so tools of different builds never share one.
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("gpu-crash").join(format!(
        "layer-{}-{:016x}",
        env!("CARGO_PKG_VERSION"),
        fnv1a(LAYER_LIBRARY)
    ))
}

/// Writes the layer library and its manifest into [`cache_dir`] (unless already there, as written
/// by this very build) and returns the folder, for `VK_LAYER_PATH`.
pub fn install() -> std::io::Result<PathBuf> {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir)?;
    let library = dir.join(manifest::library_file_name());
    // The same bytes, not only the same length: a library planted (or half-written by a crash)
    // under the name is replaced, never loaded into a game (issue 51 item 12).
    let current = std::fs::symlink_metadata(&library)
        .is_ok_and(|m| m.is_file() && m.len() == LAYER_LIBRARY.len() as u64)
        && std::fs::read(&library).is_ok_and(|bytes| bytes == LAYER_LIBRARY);
    if !current {
        // Temp file and rename: two drills starting at once never load a half-written library.
        let tmp = dir.join(format!(
            ".{}.tmp-{}",
            manifest::library_file_name(),
            std::process::id()
        ));
        std::fs::write(&tmp, LAYER_LIBRARY)?;
        std::fs::rename(&tmp, &library)?;
    }
    manifest::write_manifest(&dir, &library)?;
    Ok(dir)
}

/// The environment that makes the Vulkan loader put the layer (in `dir`) under a program: the
/// folder prepended to `VK_LAYER_PATH`, the layer added to `VK_INSTANCE_LAYERS`. The loader splits
/// both lists at the platform's path separator (`;` on Windows, `:` elsewhere).
pub fn loader_env(dir: &Path) -> [(&'static str, OsString); 2] {
    let sep = if cfg!(windows) { ';' } else { ':' };
    [
        (
            "VK_LAYER_PATH",
            manifest::append_list(
                std::env::var_os("VK_LAYER_PATH"),
                &dir.to_string_lossy(),
                sep,
            ),
        ),
        (
            "VK_INSTANCE_LAYERS",
            manifest::append_list(std::env::var_os("VK_INSTANCE_LAYERS"), LAYER_NAME, sep),
        ),
    ]
}

/// 64-bit FNV-1a: names the cache folder after the library's content.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_without_duplicates() {
        assert_eq!(manifest::append_list(None, "A", ':'), "A");
        assert_eq!(manifest::append_list(Some("X".into()), "A", ':'), "X:A");
        assert_eq!(manifest::append_list(Some("X:A".into()), "A", ':'), "X:A");
    }

    #[test]
    fn the_embedded_library_is_a_shared_object() {
        assert!(LAYER_LIBRARY.len() > 1024);
        if cfg!(target_os = "linux") {
            assert_eq!(&LAYER_LIBRARY[..4], b"\x7fELF");
        }
        // A DLL (PE) on Windows: built for the target, not the build machine (build.rs).
        if cfg!(windows) {
            assert_eq!(&LAYER_LIBRARY[..2], b"MZ");
        }
    }

    /// The Windows loader reads the manifest as JSON: a library under a user's folder with a space
    /// and backslashes keeps its path exactly.
    #[test]
    fn a_manifest_with_a_windows_path_reads_back_as_that_path() {
        let path =
            r"C:\Users\Jane Doe\AppData\Local\gpu-crash\layer-0.1.0\gpu_crash_drill_layer.dll";
        let json: serde_json::Value =
            serde_json::from_str(&manifest::manifest_json(Path::new(path))).unwrap();
        assert_eq!(json["layer"]["library_path"], path);
        assert_eq!(json["layer"]["name"], LAYER_NAME);
    }
}
