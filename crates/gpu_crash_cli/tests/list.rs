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

    // Release health: a session update waiting in the outbox, and a session file a killed run
    // left (no process holds it).
    let outbox = data_home.join("my_game/gpu-crash-reports/outbox");
    std::fs::create_dir_all(&outbox).unwrap();
    let session = r#"{"sid":"3f0c4f2a-8c1e-4b47-9d5e-2b1f6f2d9a10","started":"2026-12-05T10:00:00Z","init":true,"status":"exited","errors":0,"attrs":{"release":"my_game@1.0.0"}}"#;
    std::fs::write(
        outbox.join("00000001796464000000-session-3f0c4f2a8c1e4b479d5e2b1f6f2d9a10.envelope"),
        format!(
            "{{}}\n{{\"type\":\"session\",\"length\":{}}}\n{session}\n",
            session.len()
        ),
    )
    .unwrap();
    std::fs::write(
        outbox.join("9b2e0c1d4a5f4e6b8c7d1e2f3a4b5c6d.session"),
        r#"{"sid":"9b2e0c1d-4a5f-4e6b-8c7d-1e2f3a4b5c6d","started_ms":1796464000000,"release":"my_game@1.0.0","environment":"production","errors":0,"status":"ok","pid":1}"#,
    )
    .unwrap();
    let output = gpu_crash().arg("list").arg(&reports).output().unwrap();
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    let row = |needle: &str| {
        stdout
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no row with {needle}:\n{stdout}"))
            .to_owned()
    };
    let queued = row("-session-3f0c");
    assert!(
        queued.contains("session") && queued.contains("exited") && queued.contains("pending"),
        "{queued}"
    );
    let left = row("9b2e0c1d4a5f4e6b8c7d1e2f3a4b5c6d.session");
    assert!(
        left.contains("ok my_game@1.0.0") && left.contains("sent at the next launch"),
        "{left}"
    );

    // A missing folder is bad input.
    let output = gpu_crash()
        .arg("list")
        .arg(data_home.join("nope"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}
