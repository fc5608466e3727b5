//! Shared by the tool's tests: running `gpu-crash`, lavapipe, the tiny game, the report fixtures.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// lavapipe's ICD manifest on Debian.
pub const LAVAPIPE_ICD: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";

/// The drill scenarios with a stored report (tests/fixtures/<name>.json) and snapshot.
pub const SCENARIOS: [&str; 6] = [
    "use-after-free",
    "use-after-free-khr",
    "out-of-bounds",
    "in-bounds",
    "hang",
    "hang-in-pass",
];

/// `gpu-crash` as Cargo built it for these tests.
pub fn gpu_crash() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpu-crash"))
}

/// Why a test that needs lavapipe cannot run here, if it cannot.
pub fn lavapipe_missing() -> Option<String> {
    (!Path::new(LAVAPIPE_ICD).exists()).then(|| {
        format!("{LAVAPIPE_ICD} is missing (apt-get install mesa-vulkan-drivers libvulkan1)")
    })
}

/// `command` on lavapipe only, with a runtime dir for Bevy.
pub fn on_lavapipe(command: &mut Command) -> &mut Command {
    let runtime = std::env::temp_dir().join("gpu-crash-tests-xdg");
    std::fs::create_dir_all(&runtime).unwrap();
    command
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("GPU_CRASH_REPORT_DIR")
        .env_remove("SENTRY_DSN")
}

/// The `tiny_game` example, built by `cargo test` beside this test binary (`<profile>/examples`).
pub fn tiny_game() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile = exe.parent()?.parent()?;
    let game = profile
        .join("examples")
        .join(format!("tiny_game{}", std::env::consts::EXE_SUFFIX));
    game.is_file().then_some(game)
}

/// A fresh folder under Cargo's temp dir for tests.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "gpu-crash-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// tests/fixtures/<name>.json: a report the drill wrote on lavapipe.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.json"))
}

/// stdout and stderr as text.
pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
