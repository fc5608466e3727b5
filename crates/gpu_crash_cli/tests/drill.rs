//! `gpu-crash drill` on a small Bevy game of a "studio" (examples/tiny_game.rs, nothing of this
//! repository's own examples), on lavapipe: the tool finds the report where the plugin put it by
//! default (the game's data folder) and prints the verdict. The scenario names the game's buffer
//! (`use-after-free:terrain_chunk`): the default target, the most recently destroyed buffer, is
//! often one of wgpu's small staging buffers, whose freed range wgpu re-binds before the fault.

mod common;

use bevy_gpu_crash_reporter::report::{read_report, FaultVerdict, ObjectState};
use common::*;

#[test]
fn drilled_use_after_free_of_a_game_gives_a_report_with_that_verdict() {
    if let Some(why) = lavapipe_missing() {
        println!("skipped: {why}");
        return;
    }
    let Some(game) = tiny_game() else {
        println!("skipped: examples/tiny_game was not built (cargo test -p gpu-crash builds it)");
        return;
    };
    // The game's data folder: <XDG_DATA_HOME>/tiny_game/gpu-crash-reports, as the plugin computes it.
    let data_home = temp_dir("drill-data");
    let cache = temp_dir("drill-cache");
    let output = on_lavapipe(&mut gpu_crash())
        .env("XDG_DATA_HOME", &data_home)
        .env("XDG_CACHE_HOME", &cache)
        .args([
            "drill",
            "--scenario",
            "use-after-free:terrain_chunk",
            "--after",
            "20",
            "--",
        ])
        .arg(&game)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "the game exits 1 on the device loss:\n{stdout}\n{stderr}"
    );
    let reports_dir = data_home.join("tiny_game/gpu-crash-reports");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("gpu-crash: report written to "))
        .unwrap_or_else(|| panic!("no report line:\n{stdout}\n{stderr}"));
    let path = std::path::Path::new(line);
    assert_eq!(path.parent(), Some(reports_dir.as_path()), "{stdout}");
    assert!(
        stdout.contains("-> use_after_free"),
        "the verdict line is printed:\n{stdout}"
    );
    let report = read_report(path).unwrap();
    assert_eq!(
        report.drill.as_deref(),
        Some("use-after-free:terrain_chunk")
    );
    let fault = &report.faults[0];
    assert_eq!(fault.verdict, FaultVerdict::UseAfterFree);
    let culprit = fault.culprit.as_ref().expect("a culprit");
    assert_eq!(
        culprit.name.as_deref(),
        Some("terrain_chunk"),
        "{report:#?}"
    );
    assert_eq!(culprit.state, ObjectState::Freed);
    // The layer and its manifest went into the cache folder.
    let layer_dirs: Vec<_> = std::fs::read_dir(cache.join("gpu-crash"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(layer_dirs.len(), 1);
    assert!(layer_dirs[0]
        .join("VK_LAYER_gpu_crash_drill.json")
        .is_file());
}
