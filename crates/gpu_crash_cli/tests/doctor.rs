//! `gpu-crash doctor` says what the plugin says: on lavapipe, without and with the drill layer, its
//! line per GPU is the plugin's own startup line in the tiny game, and its `missing` lines are the
//! plugin's.

mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

/// The plugin's capability line and `missing` lines, from the tiny game's log (5 frames).
fn plugin_says(command: &mut Command) -> (String, Vec<String>) {
    let output = on_lavapipe(command)
        .env("TINY_GAME_FRAMES", "5")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let (_, stderr) = text(&output);
    let prefix = "GPU crash reporter: ";
    let line = stderr
        .lines()
        .filter_map(|l| l.find(prefix).map(|at| &l[at..]))
        .find(|l| l.contains("; binding report "))
        .unwrap_or_else(|| panic!("no capability line:\n{stderr}"))
        .to_owned();
    let missing = stderr
        .lines()
        .filter(|l| l.contains("bevy_gpu_crash_reporter::plugin"))
        .filter_map(|l| l.find(prefix).map(|at| l[at + prefix.len()..].to_owned()))
        .filter(|l| !l.contains("; binding report "))
        .collect();
    (line, missing)
}

/// `gpu-crash doctor --json`'s first GPU.
fn doctor_says(command: &mut Command) -> Value {
    let output = on_lavapipe(command).output().unwrap();
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    json["gpus"][0].clone()
}

#[test]
fn doctor_says_what_the_plugin_says_with_and_without_the_drill_layer() {
    if let Some(why) = lavapipe_missing() {
        println!("skipped: {why}");
        return;
    }
    let Some(game) = tiny_game() else {
        println!("skipped: examples/tiny_game was not built (cargo test -p gpu-crash builds it)");
        return;
    };
    let cache = temp_dir("doctor-cache");
    let gpu_crash_exe = env!("CARGO_BIN_EXE_gpu-crash");
    let drilled = |args: &[&str]| {
        let mut c = gpu_crash();
        c.env("XDG_CACHE_HOME", &cache)
            .args(["drill", "--after", "1000000", "--"])
            .args(args);
        c
    };

    let plain = doctor_says(gpu_crash().args(["doctor", "--json"]));
    let (line, missing) = plugin_says(&mut Command::new(&game));
    assert_eq!(plain["summary"].as_str(), Some(line.as_str()));
    assert_eq!(
        plain["capabilities"]["missing"],
        Value::from(missing.clone())
    );
    assert!(
        line.contains("binding report off, device fault EXT off"),
        "{line}"
    );
    assert_eq!(plain["capabilities"]["breadcrumbs"], "fill_buffer");

    let layered = doctor_says(&mut drilled(&[gpu_crash_exe, "doctor", "--json"]));
    let game_path = game.to_str().unwrap();
    let (line, missing) = plugin_says(&mut drilled(&[game_path]));
    assert_eq!(layered["summary"].as_str(), Some(line.as_str()));
    assert_eq!(layered["capabilities"]["missing"], Value::from(missing));
    assert!(
        line.contains("binding report on, device fault EXT on"),
        "{line}"
    );
    assert_eq!(layered["capabilities"]["breadcrumbs"], "amd_buffer_marker");
    assert_eq!(layered["capabilities"]["gpu_progress"], true);
}
