//! Project tasks (`cargo xtask <task>`).
//!
//! - `cargo xtask drill [--release] [-- <example args>]`: builds the crash-drill layer and the
//!   `crash_drill` example, points the Vulkan loader at the layer and runs the example with the
//!   `GPU_CRASH_DRILL*` environment (and everything else) passed through; exits with its exit code.
//! - `cargo xtask layer-manifest [--release] <dir>`: builds the layer and writes its loader manifest
//!   into `<dir>` (for scripts: then set `VK_LAYER_PATH=<dir>` and
//!   `VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill`).
//!
//! Only `std`: xtask must build fast and must not link the layer itself.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[path = "../../crates/gpu_crash_drill_layer/src/manifest.rs"]
mod manifest;

const USAGE: &str = "usage:
  cargo xtask drill [--release] [-- <example args>]
      build the layer and the crash_drill example, run it under VK_LAYER_gpu_crash_drill
      (GPU_CRASH_DRILL=<scenario>[:<label>], GPU_CRASH_DRILL_API=ext|khr, GPU_CRASH_DRILL_AFTER=<n>,
       GPU_CRASH_DRILL_PRECISION=<bytes>,
       GPU_CRASH_DRILL_LOSS=at-fault|after-rebind|after-hang:<ms>[@<label>] are passed through)
  cargo xtask layer-manifest [--release] <dir>
      build the layer and write VK_LAYER_gpu_crash_drill.json into <dir>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let Some((task, rest)) = args.split_first() else {
        return Err(USAGE.to_string());
    };
    let (release, rest) = split_release(rest);
    match task.as_str() {
        "drill" => drill(release, rest),
        "layer-manifest" => {
            let [dir] = rest.as_slice() else {
                return Err(format!("layer-manifest takes one folder\n{USAGE}"));
            };
            let path = layer_manifest(release, Path::new(dir))?;
            println!("{}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => Err(format!("unknown task `{other}`\n{USAGE}")),
    }
}

/// Removes a `--release` flag (before any `--`) and returns the remaining arguments.
fn split_release(args: &[String]) -> (bool, Vec<String>) {
    let mut release = false;
    let mut out = Vec::new();
    let mut passthrough = false;
    for a in args {
        if !passthrough && a == "--release" {
            release = true;
        } else {
            passthrough |= a == "--";
            out.push(a.clone());
        }
    }
    (release, out)
}

/// The workspace root (xtask lives in `<root>/xtask`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// The cargo target folder: `CARGO_TARGET_DIR` (relative to the workspace root) or `<root>/target`.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => workspace_root().join(d),
        None => workspace_root().join("target"),
    }
}

fn profile_dir(release: bool) -> PathBuf {
    target_dir().join(if release { "release" } else { "debug" })
}

fn cargo(release: bool, args: &[&str]) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).arg("build").args(args);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo build {}` failed ({status})",
            args.join(" ")
        ))
    }
}

/// Builds the layer and writes its manifest (absolute library path) into `dir`.
fn layer_manifest(release: bool, dir: &Path) -> Result<PathBuf, String> {
    cargo(release, &["-p", "gpu_crash_drill_layer"])?;
    let lib = profile_dir(release).join(manifest::library_file_name());
    if !lib.is_file() {
        return Err(format!("built layer not found at {}", lib.display()));
    }
    let dir = std::env::current_dir()
        .map_err(|e| e.to_string())?
        .join(dir);
    manifest::write_manifest(&dir, &lib)
        .map_err(|e| format!("cannot write the manifest into {}: {e}", dir.display()))
}

fn drill(release: bool, rest: Vec<String>) -> Result<ExitCode, String> {
    if let Err(missing) = vulkan_driver_present() {
        // One line, before anything is built: Bevy's own answer is a panic ("Unable to find a GPU!").
        eprintln!(
            "xtask drill: {missing}; install the software Vulkan driver and loader \
             (Debian/Ubuntu: `apt-get install mesa-vulkan-drivers libvulkan1`, or `bash .ci/run`, \
             which installs them and runs the tests) and run it again"
        );
        return Ok(ExitCode::from(2));
    }
    let example_args: Vec<String> = match rest.split_first() {
        None => Vec::new(),
        Some((first, tail)) if first == "--" => tail.to_vec(),
        Some(_) => rest.clone(),
    };
    let manifest_dir = target_dir().join("drill");
    layer_manifest(release, &manifest_dir)?;
    cargo(release, &["--example", "crash_drill"])?;
    let exe = profile_dir(release)
        .join("examples")
        .join(format!("crash_drill{}", std::env::consts::EXE_SUFFIX));
    let layer_path = manifest::append_list(
        std::env::var_os("VK_LAYER_PATH"),
        &manifest_dir.to_string_lossy(),
        if cfg!(windows) { ';' } else { ':' },
    );
    let layers = manifest::append_list(
        std::env::var_os("VK_INSTANCE_LAYERS"),
        manifest::LAYER_NAME,
        ':',
    );
    for (k, v) in std::env::vars().filter(|(k, _)| k.starts_with("GPU_CRASH_DRILL")) {
        eprintln!("xtask: {k}={v}");
    }
    let status = Command::new(&exe)
        .args(&example_args)
        .env("VK_LAYER_PATH", &layer_path)
        .env("VK_INSTANCE_LAYERS", &layers)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    Ok(match status.code() {
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        // Killed by a signal: report failure.
        None => ExitCode::FAILURE,
    })
}

/// Whether the Vulkan loader and at least one driver (ICD manifest) can be found, as the loader
/// looks for them on Linux: `VK_DRIVER_FILES` / `VK_ICD_FILENAMES` when set (files or folders),
/// else the standard `vulkan/icd.d` folders. Elsewhere the check is skipped (`Ok`).
fn vulkan_driver_present() -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    let loader = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
        "/lib/x86_64-linux-gnu",
    ]
    .iter()
    .any(|dir| Path::new(dir).join("libvulkan.so.1").exists());
    if !loader {
        return Err("no Vulkan loader (libvulkan.so.1) found".into());
    }
    let explicit = std::env::var("VK_DRIVER_FILES")
        .or_else(|_| std::env::var("VK_ICD_FILENAMES"))
        .ok()
        .filter(|v| !v.is_empty());
    let candidates: Vec<PathBuf> = match &explicit {
        Some(list) => list.split(':').map(PathBuf::from).collect(),
        None => {
            let data_dirs = std::env::var("XDG_DATA_DIRS")
                .unwrap_or_else(|_| "/usr/local/share:/usr/share".into());
            ["/etc".to_owned()]
                .into_iter()
                .chain(data_dirs.split(':').map(str::to_owned))
                .map(|dir| Path::new(&dir).join("vulkan/icd.d"))
                .collect()
        }
    };
    let is_manifest = |p: &Path| p.is_file() && p.extension().is_some_and(|e| e == "json");
    let found = candidates.iter().any(|p| {
        is_manifest(p)
            || std::fs::read_dir(p)
                .map(|d| d.filter_map(Result::ok).any(|e| is_manifest(&e.path())))
                .unwrap_or(false)
    });
    if found {
        Ok(())
    } else if let Some(list) = explicit {
        Err(format!(
            "no Vulkan driver manifest at VK_DRIVER_FILES/VK_ICD_FILENAMES={list}"
        ))
    } else {
        Err("no Vulkan driver found (no ICD manifest in /etc or /usr/share vulkan/icd.d)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_without_duplicates() {
        assert_eq!(manifest::append_list(None, "A", ':'), "A");
        assert_eq!(manifest::append_list(Some("".into()), "A", ':'), "A");
        assert_eq!(manifest::append_list(Some("X".into()), "A", ':'), "X:A");
        assert_eq!(manifest::append_list(Some("X:A".into()), "A", ':'), "X:A");
    }

    #[test]
    fn release_flag_only_before_passthrough() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(split_release(&a(&["--release", "x"])), (true, a(&["x"])));
        assert_eq!(
            split_release(&a(&["--", "--release"])),
            (false, a(&["--", "--release"]))
        );
    }

    #[test]
    fn manifest_points_at_the_library() {
        let json = manifest::manifest_json(Path::new("/tmp/a \"b\"/libx.so"));
        assert!(
            json.contains(r#""library_path": "/tmp/a \"b\"/libx.so""#),
            "{json}"
        );
        assert!(json.contains(r#""file_format_version": "1.2.0""#));
        assert!(json.contains(manifest::LAYER_NAME));
    }
}
