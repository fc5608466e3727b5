//! Bad input ends with one line on stderr and exit code 2, never a panic.

mod common;

use common::*;

/// Runs `gpu-crash <args>` and checks: exit 2, one stderr line starting `gpu-crash: ` that
/// contains `expect`, nothing on stdout.
fn fails_with_one_line(args: &[&str], expect: &str) {
    let output = gpu_crash()
        .args(args)
        .env_remove("SENTRY_DSN")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?}: not one line:\n{stderr}"
    );
    assert!(stderr.starts_with("gpu-crash: "), "{stderr}");
    assert!(
        stderr.contains(expect),
        "{args:?}: {stderr:?} lacks {expect:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
}

#[test]
fn a_missing_file() {
    let missing = temp_dir("missing").join("gpu-crash-0-none.json");
    let path = missing.to_str().unwrap();
    fails_with_one_line(&["show", path], "no such file or directory");
    fails_with_one_line(
        &["upload", "--dsn", "http://k@127.0.0.1:9/1", path],
        "no such file or directory",
    );
}

#[test]
fn a_truncated_report() {
    let full = std::fs::read(fixture("use-after-free")).unwrap();
    let path = temp_dir("truncated").join("gpu-crash-1-truncated.json");
    std::fs::write(&path, &full[..full.len() / 2]).unwrap();
    let path = path.to_str().unwrap();
    fails_with_one_line(&["show", path], "is not a crash report: EOF while parsing");
    fails_with_one_line(
        &["upload", "--dsn", "http://k@127.0.0.1:9/1", path],
        "is not a crash report",
    );
}

#[test]
fn a_report_of_a_newer_schema() {
    let mut report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("use-after-free")).unwrap()).unwrap();
    report["schema_version"] = 99.into();
    let path = temp_dir("schema").join("gpu-crash-2-future.json");
    std::fs::write(&path, serde_json::to_vec(&report).unwrap()).unwrap();
    let path = path.to_str().unwrap();
    fails_with_one_line(&["show", path], "schema version 99");
    fails_with_one_line(
        &["upload", "--dsn", "http://k@127.0.0.1:9/1", path],
        "schema version 99",
    );
}

#[test]
fn a_bad_dsn() {
    let report = fixture("use-after-free");
    let report = report.to_str().unwrap();
    fails_with_one_line(&["upload", "--dsn", "not a dsn", report], "bad DSN");
    fails_with_one_line(
        &["upload", "--dsn", "https://sentry.io/42", report],
        "bad DSN",
    );
    fails_with_one_line(&["upload", report], "no DSN");
}

#[test]
fn a_drill_without_a_game_or_with_an_unknown_scenario() {
    fails_with_one_line(
        &["drill", "--scenario", "explode", "--", "true"],
        "unknown scenario",
    );
    let output = gpu_crash().args(["drill"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(!text(&output).1.contains("panicked"));
}
