//! Embeds the crash-drill layer (`libgpu_crash_drill_layer.so`, `gpu_crash_drill_layer.dll` on
//! Windows) into the tool, so that `cargo install --path crates/gpu_crash_cli` gives one
//! self-contained binary: `cargo install` installs binaries only, so a layer library "beside the
//! executable" would not survive it.
//!
//! Native builds: the layer is a build-dependency, so Cargo builds every crate type of it (its
//! `cdylib` too) into the `deps` folder of this profile before running this script (not with an
//! explicit `--target`, even the host's: then it is built as below). The root
//! Cargo.toml gives the layer the same profile settings as a build-dependency and as a workspace
//! member, so both are one build and one file.
//!
//! Cross builds (`--target` another platform, e.g. `x86_64-pc-windows-gnu` from Linux): a
//! build-dependency is built for the host, the wrong library for the tool. The script then builds
//! the layer's library for the target itself, with the same cargo and profile, into a target folder
//! of its own under `OUT_DIR` (the outer build holds the lock of the main one).
//!
//! Either way the library is copied into `OUT_DIR`, where `src/layer.rs` includes it with
//! `include_bytes!`.

use std::path::{Path, PathBuf};
use std::process::Command;

// The layer's own naming rule (std only), as the tool and xtask use it.
#[path = "../gpu_crash_drill_layer/src/manifest.rs"]
#[allow(dead_code)]
mod manifest;

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = env("TARGET");
    // `--target <the host's triple>` (or `build.target`) puts build-dependencies elsewhere than
    // this package's profile folder: the layer is then built as for a cross build.
    let built = (target == env("HOST"))
        .then(|| native_layer(&out_dir))
        .flatten()
        .unwrap_or_else(|| cross_layer(&out_dir, &target));
    copy(&built, &out_dir.join("drill_layer.bin"));
    println!("cargo:rerun-if-changed={}", built.display());
}

/// The layer Cargo built as this package's build-dependency, if it lies in this profile's `deps`.
fn native_layer(out_dir: &Path) -> Option<PathBuf> {
    // OUT_DIR is <target>/<profile>/build/<this package>-<hash>/out.
    let deps = out_dir
        .ancestors()
        .nth(3)
        .map(|profile| profile.join("deps"))
        .expect("OUT_DIR is <profile>/build/<pkg>/out");
    Some(deps.join(layer_file_name())).filter(|built| built.is_file())
}

/// Builds the layer's library for `target` (a nested cargo, its own target folder) and returns it.
fn cross_layer(out_dir: &Path, target: &str) -> PathBuf {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let layer_crate = manifest_dir.join("../gpu_crash_drill_layer");
    // The layer's sources, and the workspace's lock file and profiles it is built with.
    for source in [
        "../gpu_crash_drill_layer",
        "../vulkan_fault_ffi",
        "../../Cargo.lock",
        "../../Cargo.toml",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest_dir.join(source).display()
        );
    }
    let target_dir = out_dir.join("drill-layer-target");
    let profile = env("PROFILE"); // "debug" or "release": the profile this build script runs for
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--manifest-path")
        .arg(layer_crate.join("Cargo.toml"))
        // The outer build resolved and fetched every dependency: the nested one changes no lock
        // file and goes to no network.
        .args([
            "--lib",
            "--locked",
            "--offline",
            "--target",
            target,
            "--target-dir",
        ])
        .arg(&target_dir)
        // Its own build folder too: the outer build holds the lock of a configured one.
        .env("CARGO_BUILD_BUILD_DIR", &target_dir)
        // A plain build of the layer, whatever wraps the outer one (clippy's driver, a coverage
        // wrapper): only its library is wanted here.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET");
    if profile == "release" {
        command.arg("--release");
    }
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the crash-drill layer: {e}"));
    if !status.success() {
        panic!(
            "building the crash-drill layer for {target} failed ({status}); a cross build needs the \
             target's linker (for x86_64-pc-windows-gnu: the mingw-w64 toolchain, \
             `apt-get install gcc-mingw-w64-x86-64`)"
        );
    }
    let built = target_dir
        .join(target)
        .join(&profile)
        .join(layer_file_name());
    if !built.is_file() {
        panic!(
            "the crash-drill layer for {target} is not at {}",
            built.display()
        );
    }
    built
}

/// The layer library's file name on the platform the tool is built for (not the build machine's).
fn layer_file_name() -> String {
    manifest::library_file_name_for(&env("CARGO_CFG_TARGET_OS"))
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("cannot copy {} to {}: {e}", from.display(), to.display()));
}
