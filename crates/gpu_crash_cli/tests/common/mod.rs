//! Shared by the tool's tests: running `gpu-crash`, lavapipe, the tiny game, the report fixtures, a
//! counting Sentry endpoint.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// `scripts/counting-sentry.py` on a port of its own.
pub struct CountingSentry {
    process: std::process::Child,
    pub dir: PathBuf,
    pub dsn: String,
}

impl CountingSentry {
    pub fn start(name: &str) -> Self {
        let port = free_port();
        let dir = temp_dir(name);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/counting-sentry.py");
        let process = Command::new("python3")
            .arg(script)
            .args(["serve", &port.to_string()])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 scripts/counting-sentry.py");
        let until = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < until,
                "the counting endpoint did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            process,
            dir,
            dsn: format!("http://public@127.0.0.1:{port}/1"),
        }
    }

    /// Every envelope received so far, as received (un-gzipped), oldest first.
    pub fn envelopes(&self) -> Vec<String> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(self.dir.join("envelopes"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "envelope"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned())
            .collect()
    }

    /// How many times an event with this id arrived.
    pub fn arrivals(&self, event_id: &str) -> usize {
        let wanted = event_id.replace('-', "");
        std::fs::read_to_string(self.dir.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter(|line| {
                let event: serde_json::Value = serde_json::from_str(line).unwrap();
                event["event_id"]
                    .as_str()
                    .is_some_and(|id| id.replace('-', "") == wanted)
            })
            .count()
    }
}

impl Drop for CountingSentry {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A port nothing listens on (the player's network is down).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
