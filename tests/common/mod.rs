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

/// Where Debian's validation layer manifest lives (`VK_LAYER_PATH` replaces the default search, so a
/// path that adds the drill layer must name it too).
pub const SYSTEM_LAYER_DIR: &str = "/usr/share/vulkan/explicit_layer.d";

/// Enables the Khronos validation layer for every instance of this process and makes it write every
/// message to `log`. Returns the log path.
pub fn enable_validation_layer(dir: &Path) -> PathBuf {
    let log = validation_settings(dir, false);
    std::env::set_var("VK_LAYER_SETTINGS_PATH", dir.join("vk_layer_settings.txt"));
    std::env::set_var("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation");
    log
}

/// Writes `dir/vk_layer_settings.txt` for the validation layer: every message into the returned log
/// file, with synchronization validation when `sync` is set. For `VK_LAYER_SETTINGS_PATH`.
pub fn validation_settings(dir: &Path, sync: bool) -> PathBuf {
    assert!(
        Path::new(SYSTEM_LAYER_DIR)
            .join("VkLayer_khronos_validation.json")
            .exists(),
        "the Khronos validation layer is missing: apt-get install vulkan-validationlayers"
    );
    std::fs::create_dir_all(dir).unwrap();
    let log = dir.join("validation.log");
    let _ = std::fs::remove_file(&log);
    let sync = if sync {
        // Both spellings: older layers read `enables`, newer ones `validate_sync`.
        "khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT\n\
         khronos_validation.validate_sync = true\n"
    } else {
        ""
    };
    std::fs::write(
        dir.join("vk_layer_settings.txt"),
        format!(
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n\
             khronos_validation.report_flags = error,warn,info\n\
             khronos_validation.log_filename = {}\n{sync}",
            log.display()
        ),
    )
    .unwrap();
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

#[path = "../../crates/gpu_crash_exact_layer/src/manifest.rs"]
pub mod exact_manifest;

/// Builds exact mode's layer (`VK_LAYER_gpu_crash_exact`) once per test binary and returns its
/// library.
pub fn exact_layer_library() -> &'static Path {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--quiet", "-p", "gpu_crash_exact_layer"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build -p gpu_crash_exact_layer");
        assert!(status.success(), "building the exact layer failed");
        // CARGO_TARGET_TMPDIR is <target>/tmp; the library is in <target>/debug.
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
        let lib = target
            .join("debug")
            .join(exact_manifest::library_file_name());
        assert!(lib.is_file(), "no {}", lib.display());
        lib
    })
}

/// Lays out exact mode's layer as a game ships it, in `dir` beside the game's executable: the
/// library and its manifest, which names it by a relative path.
pub fn ship_exact_layer(dir: &Path) {
    let lib = exact_layer_library();
    let name = exact_manifest::library_file_name();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(lib, dir.join(&name)).unwrap();
    exact_manifest::write_manifest(dir, &Path::new(".").join(&name)).unwrap();
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

/// Small shadow maps for test scenes: lavapipe rasterises every cube face and cascade on the CPU.
pub fn small_shadow_maps(app: &mut App) -> &mut App {
    app.insert_resource(bevy::light::PointLightShadowMap { size: 128 })
        .insert_resource(bevy::light::DirectionalLightShadowMap { size: 256 })
}

/// The test scenes' main camera: a 3D camera named "main" with a depth prepass (so the prepass
/// stage draws), into an offscreen image, looking at [`shadowed_scene`].
pub fn main_camera(images: &mut Assets<Image>, width: u32, height: u32) -> impl Bundle {
    (
        Name::new("main"),
        Camera3d::default(),
        bevy::core_pipeline::prepass::DepthPrepass,
        offscreen_target(images, width, height),
        Transform::from_xyz(0.0, 4.0, 9.0).looking_at(Vec3::ZERO, Vec3::Y),
    )
}

/// The test scenes' second camera, a minimap: an unnamed 3D camera from above, after the main
/// camera, into its own `size` x `size` image.
pub fn minimap_camera(images: &mut Assets<Image>, size: u32) -> impl Bundle {
    (
        Camera3d::default(),
        Camera {
            order: 1,
            ..default()
        },
        // Bevy's default tonemapper needs the `tonemapping_luts` feature, which the crate's minimal
        // Bevy features leave out.
        bevy::core_pipeline::tonemapping::Tonemapping::AcesFitted,
        offscreen_target(images, size, size),
        Transform::from_xyz(0.0, 12.0, 0.1).looking_at(Vec3::ZERO, Vec3::Y),
    )
}

/// What a small game level has besides its cameras: a ground plane, nine meshes of three shapes, a
/// shadowed directional light (4 cascades) and `point_lights` shadowed point lights (6 shadow views
/// each, rendered before the cameras).
pub fn shadowed_scene(
    commands: &mut Commands,
    meshes: &mut Assets<Mesh>,
    materials: &mut Assets<StandardMaterial>,
    point_lights: usize,
) {
    let ground = materials.add(StandardMaterial {
        base_color: Color::srgb(0.3, 0.5, 0.3),
        perceptual_roughness: 0.9,
        ..default()
    });
    let painted = materials.add(StandardMaterial {
        base_color: Color::srgb(0.8, 0.2, 0.1),
        ..default()
    });
    commands.spawn((
        Mesh3d(meshes.add(Plane3d::default().mesh().size(20.0, 20.0))),
        MeshMaterial3d(ground),
    ));
    let shapes = [
        meshes.add(Cuboid::default()),
        meshes.add(Sphere::new(0.6).mesh().uv(16, 8)),
        meshes.add(Torus::new(0.3, 0.7)),
    ];
    for (i, shape) in shapes.iter().cycle().take(9).enumerate() {
        let (x, z) = ((i % 3) as f32 * 2.5 - 2.5, (i / 3) as f32 * 2.5 - 2.5);
        commands.spawn((
            Mesh3d(shape.clone()),
            MeshMaterial3d(painted.clone()),
            Transform::from_xyz(x, 0.7, z),
        ));
    }
    commands.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(3.0, 8.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    for i in 0..point_lights {
        let angle = i as f32 * std::f32::consts::TAU / point_lights as f32;
        commands.spawn((
            PointLight {
                intensity: 200_000.0,
                shadow_maps_enabled: true,
                ..default()
            },
            Transform::from_xyz(4.0 * angle.cos(), 3.0, 4.0 * angle.sin()),
        ));
    }
}

/// `GPU_CRASH_SEGV_TRACE=1`: a child that dies of SIGSEGV first prints the faulting address and its
/// stack (glibc `backtrace_symbols_fd`: library and offset per frame, enough to tell the driver's
/// code from ours in a stripped binary), then dies of the signal as before. For the exit crash on
/// the NVIDIA driver (docs/driver-facts.md); off unless asked for.
#[allow(dead_code)]
pub fn trace_segfaults_if_asked() {
    // glibc's `backtrace` and POSIX signals: Linux only (the hosts these tests run on).
    #[cfg(target_os = "linux")]
    segv_trace::install_if_asked();
}

#[cfg(target_os = "linux")]
#[allow(dead_code)]
mod segv_trace {
    pub fn install_if_asked() {
        if std::env::var_os("GPU_CRASH_SEGV_TRACE").is_none() {
            return;
        }
        extern "C" {
            fn backtrace(buffer: *mut *mut libc::c_void, size: libc::c_int) -> libc::c_int;
            fn backtrace_symbols_fd(
                buffer: *const *mut libc::c_void,
                size: libc::c_int,
                fd: libc::c_int,
            );
        }
        extern "C" fn on_segv(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
            let mut frames = [std::ptr::null_mut(); 64];
            // SAFETY: a diagnostic on a dying process: `write` is async-signal-safe; `backtrace` is
            // not strictly (it may load libgcc once), which is acceptable for a last report.
            unsafe {
                let address = (*info).si_addr() as usize;
                let mut line = *b"SIGSEGV at 0x0000000000000000, stack:\n";
                for i in 0..16 {
                    let nibble = (address >> ((15 - i) * 4)) & 0xf;
                    line[13 + i] = b"0123456789abcdef"[nibble];
                }
                libc::write(2, line.as_ptr().cast(), line.len());
                let n = backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int);
                backtrace_symbols_fd(frames.as_ptr(), n, 2);
            }
            // SA_RESETHAND put the default action back: returning re-runs the faulting instruction and
            // the process dies of SIGSEGV as it would have.
        }
        // SAFETY: installs a handler with a valid function and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_segv as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut());
        }
    }
}

/// `crates/gpu_crash_core/examples/wgpu_app.rs` (a plain wgpu application on the core): builds it
/// (the outer `cargo test` holds no lock while tests run) and returns its path.
pub fn wgpu_app() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "gpu_crash_core",
            "--example",
            "wgpu_app",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "building examples/wgpu_app failed");
    // This test binary is target/<profile>/deps/<test>-<hash>: the example is beside deps/.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    profile_dir.join("examples").join("wgpu_app")
}
