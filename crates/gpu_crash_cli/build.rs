//! Embeds the crash-drill layer (`libgpu_crash_drill_layer.so`) into the tool, so that
//! `cargo install --path crates/gpu_crash_cli` gives one self-contained binary: `cargo install`
//! installs binaries only, so a layer library "beside the executable" would not survive it.
//!
//! The layer is a build-dependency: Cargo builds every crate type of it (its `cdylib` too) into the
//! `deps` folder of this profile before running this script. The script copies the library into
//! `OUT_DIR`, where `src/layer.rs` includes it with `include_bytes!`. The root Cargo.toml gives the
//! layer the same profile settings as a build-dependency and as a workspace member, so both are one
//! build and one file.

use std::path::{Path, PathBuf};

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let name = format!(
        "{}gpu_crash_drill_layer{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    // OUT_DIR is <target>/<profile>/build/<this package>-<hash>/out.
    let deps = out_dir
        .ancestors()
        .nth(3)
        .map(|profile| profile.join("deps"))
        .expect("OUT_DIR is <profile>/build/<pkg>/out");
    let built = deps.join(&name);
    if !built.is_file() {
        panic!(
            "the crash-drill layer was not built at {} (it is a build-dependency of gpu-crash)",
            built.display()
        );
    }
    copy(&built, &out_dir.join("drill_layer.bin"));
    println!("cargo:rerun-if-changed={}", built.display());
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("cannot copy {} to {}: {e}", from.display(), to.display()));
}
