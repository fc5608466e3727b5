//! `gpu-crash list`: a game's reports with kind, verdict, time and upload state, from the folder
//! layout the plugin uses (`<data dir>/<game>/gpu-crash-reports`), found by default in the user's
//! data folder.

mod common;

use common::*;

#[test]
fn lists_every_games_reports_with_kind_verdict_time_and_state() {
    let data_home = temp_dir("list-data");
    let reports = data_home.join("my_game/gpu-crash-reports");
    std::fs::create_dir_all(&reports).unwrap();
    for name in ["use-after-free", "hang-in-pass"] {
        std::fs::copy(
            fixture(name),
            reports.join(format!("gpu-crash-0-{name}.json")),
        )
        .unwrap();
    }
    std::fs::write(
        reports.join("gpu-crash-1-broken.json"),
        b"{\"schema_version\": 2",
    )
    .unwrap();

    // No folder given: every game in the user's data folder.
    let output = gpu_crash()
        .arg("list")
        .env("XDG_DATA_HOME", &data_home)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains(&reports.display().to_string()), "{stdout}");
    let row = |needle: &str| {
        stdout
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no row with {needle}:\n{stdout}"))
            .to_owned()
    };
    let uaf = row("use_after_free");
    assert!(
        uaf.contains("device_lost") && uaf.contains("not queued"),
        "{uaf}"
    );
    let fixture_time = serde_json::from_slice::<serde_json::Value>(
        &std::fs::read(fixture("use-after-free")).unwrap(),
    )
    .unwrap()["time"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(uaf.contains(&fixture_time), "{uaf}");
    let hang = row("gpu_hang");
    assert!(
        hang.contains("hang in a stage") && hang.contains("not queued"),
        "{hang}"
    );
    assert!(row("unreadable").contains("is not a crash report"));

    // A missing folder is bad input.
    let output = gpu_crash()
        .arg("list")
        .arg(data_home.join("nope"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}
