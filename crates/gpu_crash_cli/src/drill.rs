//! `gpu-crash drill`: a game under the crash-drill layer, and what its reporter wrote.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use gpu_crash_core::report::read_report;
use gpu_crash_core::{game_data_dir, REPORTS_DIR_NAME};

use crate::error::CliError;
use crate::error::CliResult;
use crate::layer;

/// The line the plugin prints on stderr for every report it writes.
const REPORT_WRITTEN: &str = "GPU crash report written to ";
/// Scenario names the layer knows (`GPU_CRASH_DRILL=<name>[:<argument>]`).
const SCENARIOS: [&str; 7] = [
    "use-after-free",
    "out-of-bounds",
    "in-bounds",
    "hang",
    "hang-in-pass",
    "hang-in-pipeline",
    "stall",
];

/// Arguments of `gpu-crash drill`.
#[derive(clap::Args)]
pub struct DrillArgs {
    /// The fault: use-after-free[:label[@offset]], out-of-bounds[:label], in-bounds[:label[@offset]],
    /// hang, hang-in-pass:<pass label>[#n], hang-in-pipeline:<pipeline label>[#n], stall:<ms>.
    /// GPU_CRASH_DRILL_LOSS in the environment
    /// reaches the game, e.g. after-hang:<ms>[@<label>] to lose the device <ms> after a hang; so does
    /// GPU_CRASH_DRILL_AIM=<file>: the memory scenarios wait until the file's first line gives their
    /// <label>[@<offset>].
    #[arg(long, default_value = "use-after-free")]
    scenario: String,
    /// Queue submissions that pass before the fault (the layer's default: 30).
    #[arg(long)]
    after: Option<u64>,
    /// Which fault extension the layer provides where the driver has none.
    #[arg(long, value_enum)]
    api: Option<Api>,
    /// Where the game should write its report (sets GPU_CRASH_REPORT_DIR for it); by default the
    /// game's own choice, looked for in its data folder.
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// The game and its arguments.
    #[arg(last = true, required = true, value_name = "GAME")]
    game: Vec<OsString>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Api {
    /// VK_EXT_device_fault.
    Ext,
    /// VK_KHR_device_fault and VK_KHR_shader_abort.
    Khr,
}

pub fn run(args: DrillArgs) -> CliResult {
    let name = args.scenario.split(':').next().unwrap_or_default();
    if !SCENARIOS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(CliError::Usage(format!(
            "unknown scenario `{}` (expected one of {})",
            args.scenario,
            SCENARIOS.join(", ")
        )));
    }
    let (program, game_args) = args
        .game
        .split_first()
        .ok_or_else(|| CliError::Usage("drill needs a game: gpu-crash drill -- <game>".into()))?;
    let layer_dir = layer::install()
        .map_err(|e| CliError::Io(format!("cannot install the drill layer: {e}")))?;
    let report_dir = args
        .report_dir
        .clone()
        .or_else(|| std::env::var_os("GPU_CRASH_REPORT_DIR").map(PathBuf::from))
        .unwrap_or_else(|| default_report_dir(Path::new(program)));
    let before = json_files(&report_dir);

    let mut command = Command::new(program);
    command
        .args(game_args)
        .envs(layer::loader_env(&layer_dir))
        .env("GPU_CRASH_DRILL", &args.scenario)
        .stderr(Stdio::piped());
    if let Some(after) = args.after {
        command.env("GPU_CRASH_DRILL_AFTER", after.to_string());
    }
    if let Some(api) = args.api {
        command.env(
            "GPU_CRASH_DRILL_API",
            match api {
                Api::Ext => "ext",
                Api::Khr => "khr",
            },
        );
    }
    if let Some(dir) = &args.report_dir {
        command.env("GPU_CRASH_REPORT_DIR", dir);
    }
    eprintln!(
        "gpu-crash: drilling {} under {} ({}), scenario {}",
        Path::new(program).display(),
        layer::LAYER_NAME,
        layer_dir.display(),
        args.scenario
    );
    let mut child = command.spawn().map_err(|e| {
        CliError::Io(format!(
            "cannot start {}: {e}",
            Path::new(program).display()
        ))
    })?;
    // Relay the game's stderr line by line, noting the reports it says it wrote.
    let mut announced = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        let mut out = std::io::stderr().lock();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(out, "{line}");
            if let Some(path) = line.split_once(REPORT_WRITTEN).map(|(_, p)| p.trim()) {
                announced.push(PathBuf::from(path));
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| CliError::Io(format!("cannot wait for the game: {e}")))?;

    let mut reports: BTreeSet<PathBuf> = json_files(&report_dir)
        .difference(&before)
        .cloned()
        .collect();
    reports.extend(announced.into_iter().filter(|p| p.is_file()));
    let code = match status.code() {
        Some(c) => u8::try_from(c).unwrap_or(1),
        None => 1, // killed by a signal
    };
    if reports.is_empty() {
        // On stderr: stdout stays the game's (`gpu-crash drill -- gpu-crash doctor --json` is JSON).
        eprintln!(
            "gpu-crash: the game exited ({status}) and wrote no GPU crash report (looked in {}); \
             if the drilled fault fired (the layer logs `[gpu_crash_drill] injected ...`), check that \
             GpuCrashReporterPlugin is added before DefaultPlugins",
            report_dir.display()
        );
        return Ok(ExitCode::from(code));
    }
    for path in &reports {
        println!("gpu-crash: report written to {}", path.display());
        match read_report(path) {
            Ok(report) => println!("{}", report.summary),
            Err(e) => println!("gpu-crash: {e}"),
        }
    }
    Ok(ExitCode::from(code))
}

/// Where the plugin writes a game's reports by default: its data folder, named after its executable.
fn default_report_dir(program: &Path) -> PathBuf {
    let name = program
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    game_data_dir(&name).join(REPORTS_DIR_NAME)
}

/// `*.json` files in `dir` (none if it does not exist).
fn json_files(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default()
}
