//! Shared set-up for tests that run a real headless Bevy app on the software Vulkan driver.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use bevy::prelude::*;

/// lavapipe's ICD manifest on Debian.
pub const LAVAPIPE_ICD: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";

/// Points the Vulkan loader at lavapipe only and gives Bevy a runtime dir. Call before any Vulkan use.
pub fn use_lavapipe() {
    assert!(
        Path::new(LAVAPIPE_ICD).exists(),
        "lavapipe is missing: apt-get install mesa-vulkan-drivers libvulkan1"
    );
    // SAFETY (not unsafe in edition 2021, but still process-global): called before any thread of
    // this test binary reads the environment.
    std::env::set_var("VK_DRIVER_FILES", LAVAPIPE_ICD);
    std::env::set_var("VK_ICD_FILENAMES", LAVAPIPE_ICD);
    use_runtime_dir();
}

/// Gives Bevy an `XDG_RUNTIME_DIR` (a shared folder in the temp dir). Call before any thread starts.
pub fn use_runtime_dir() {
    let runtime = std::env::temp_dir().join("bevy_gpu_crash_reporter-xdg");
    std::fs::create_dir_all(&runtime).unwrap();
    std::env::set_var("XDG_RUNTIME_DIR", runtime);
}

/// Ends a child app's process with the app's exit code (0 on success), as its parent test reads it.
pub fn exit_process(exit: AppExit) -> ! {
    std::process::exit(match exit {
        AppExit::Success => 0,
        AppExit::Error(code) => i32::from(code.get()),
    })
}

/// Enables the Khronos validation layer for every instance of this process and makes it write every
/// message to `log`. Returns the log path.
pub fn enable_validation_layer(dir: &Path) -> PathBuf {
    assert!(
        Path::new("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json").exists(),
        "the Khronos validation layer is missing: apt-get install vulkan-validationlayers"
    );
    std::fs::create_dir_all(dir).unwrap();
    let log = dir.join("validation.log");
    let _ = std::fs::remove_file(&log);
    let settings = dir.join("vk_layer_settings.txt");
    std::fs::write(
        &settings,
        format!(
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n\
             khronos_validation.report_flags = error,warn,info\n\
             khronos_validation.log_filename = {}\n",
            log.display()
        ),
    )
    .unwrap();
    std::env::set_var("VK_LAYER_SETTINGS_PATH", &settings);
    std::env::set_var("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation");
    log
}

#[path = "../../examples/support/mod.rs"]
mod support;

/// Default plugins for a headless app on Vulkan: no window, no exit when there is none (the
/// examples' set-up, without their loop runner: tests drive `update` themselves).
pub fn headless_default_plugins() -> impl PluginGroup {
    support::headless_vulkan_plugins()
}

/// A render target for a headless camera (see `examples/support`).
pub fn offscreen_target(
    images: &mut Assets<Image>,
    width: u32,
    height: u32,
) -> bevy::camera::RenderTarget {
    support::offscreen_target(images, width, height)
}

/// Finishes plugin set-up the way `App::run` does, for tests that drive `update` themselves.
pub fn finish(app: &mut App) {
    while app.plugins_state() == bevy::app::PluginsState::Adding {
        bevy::tasks::tick_global_task_pools_on_main_thread();
    }
    app.finish();
    app.cleanup();
}

/// A scratch directory under the target dir, fresh per call.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds the crash drill layer once per test binary (`cargo xtask layer-manifest`) and returns the
/// folder holding its manifest, for `VK_LAYER_PATH`.
pub fn drill_layer_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("drill-layer");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["run", "--quiet", "-p", "xtask", "--", "layer-manifest"])
            .arg(&dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo xtask layer-manifest");
        assert!(status.success(), "building the drill layer failed");
        dir
    })
}

/// Every report (`*.json`) a run wrote into `dir`, read back; none when the folder does not exist.
pub fn read_reports(dir: &Path) -> Vec<bevy_gpu_crash_reporter::report::CrashReport> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .map(|p| bevy_gpu_crash_reporter::report::read_report(&p).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// This test binary again, running its ignored `child` test: on lavapipe, reports into
/// `reports_dir`, no Sentry upload, and under the crash drill layer with `drill` as the scenario when
/// one is given. The caller adds its own environment and runs it.
pub fn child_command(reports_dir: &Path, drill: Option<&str>) -> std::process::Command {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .env("GPU_CRASH_REPORT_DIR", reports_dir)
        .env_remove("SENTRY_DSN")
        .env_remove("GPU_CRASH_DRILL");
    if let Some(scenario) = drill {
        command
            .env("VK_LAYER_PATH", drill_layer_dir())
            .env("VK_INSTANCE_LAYERS", "VK_LAYER_gpu_crash_drill")
            .env("GPU_CRASH_DRILL", scenario);
    }
    command
}
