//! `gpu-crash show` and `list` on a non-fatal report (a fault the driver recovered from, counted a
//! thousand times under the rate limit): named as such, with the count.

mod common;

use common::*;

#[test]
fn show_and_list_name_a_non_fatal_report_and_its_count() {
    let output = gpu_crash()
        .arg("show")
        .arg(fixture("non-fatal-storm"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    let what = stdout
        .lines()
        .find(|l| l.starts_with("  what "))
        .unwrap_or_else(|| panic!("no what line:\n{stdout}"));
    assert!(
        what.contains("non-fatal") && what.contains("recovered"),
        "{what}"
    );
    let counted = stdout
        .lines()
        .find(|l| l.starts_with("  counted "))
        .unwrap_or_else(|| panic!("no counted line:\n{stdout}"));
    assert!(counted.contains("1000 masked fault(s)"), "{counted}");
    assert!(stdout.contains("test_vertex_pool"), "{stdout}");

    let reports = temp_dir("list-non-fatal").join("my_game/gpu-crash-reports");
    std::fs::create_dir_all(&reports).unwrap();
    std::fs::copy(
        fixture("non-fatal-storm"),
        reports.join("gpu-crash-0-non-fatal.json"),
    )
    .unwrap();
    let output = gpu_crash().arg("list").arg(&reports).output().unwrap();
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    let row = stdout
        .lines()
        .find(|l| l.contains("gpu-crash-0-non-fatal.json"))
        .unwrap_or_else(|| panic!("no row:\n{stdout}"));
    assert!(
        row.contains("non_fatal") && row.contains("inside_live_object x1000"),
        "{row}"
    );
}
