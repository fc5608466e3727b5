//! End-to-end tests: the layer loaded by the real Vulkan loader (on lavapipe here) under a plain `ash`
//! program. Each case runs in its own child process because the drill reads process-global
//! environment variables; the parent test sets them and checks the child's verdict and stderr.

mod common;

use std::ffi::{c_void, CStr};

use ash::vk::{self, Handle};
use common::*;
use vulkan_fault_ffi::{
    structure_type, DeviceFaultDebugInfoKHR, DeviceFaultFlagsKHR, DeviceFaultInfoKHR,
    DeviceFaultShaderAbortMessageInfoKHR, KhrDeviceFaultFns, PhysicalDeviceFaultFeaturesKHR,
    PhysicalDeviceFaultPropertiesKHR, PhysicalDeviceShaderAbortFeaturesKHR,
    PhysicalDeviceShaderAbortPropertiesKHR,
};

/// Lines the layer printed.
fn drill_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("[gpu_crash_drill]"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Parent tests (each spawns one child case).

#[test]
fn advertises_ext_extensions_and_features() {
    run_child("extensions|ext", &[]);
}

#[test]
fn advertises_khr_extensions_features_and_properties() {
    run_child("extensions|khr", &[("GPU_CRASH_DRILL_API", "khr")]);
}

#[test]
fn amd_buffer_marker_without_scenario() {
    let out = run_child("marker", &[]);
    // No scenario: the only line is the one about the marker the emulation had to skip.
    let lines = drill_lines(&out.stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("inside a render pass instance"),
        "{lines:?}"
    );
}

#[test]
fn binding_reports_match_creates_and_destroys() {
    run_child("bindings", &[]);
}

#[test]
fn bind_memory2_and_its_khr_alias_report_every_bind_of_a_call() {
    run_child("bindings2", &[]);
}

fn fault_case(api: &str, scenario: &str, precision: &str) -> String {
    fault_case_with(api, scenario, precision, "binary")
}

/// `binary`: "binary" enables `deviceFaultVendorBinary`, "nobinary" does not (NVIDIA lacks it, so this
/// is also the case that runs on a driver with native `VK_EXT_device_fault`).
/// Returns the child's stderr.
fn fault_case_with(api: &str, scenario: &str, precision: &str, binary: &str) -> String {
    let case = format!("fault|{api}|{scenario}|{precision}|{binary}");
    let out = run_child(
        &case,
        &[
            ("GPU_CRASH_DRILL", scenario),
            ("GPU_CRASH_DRILL_API", api),
            ("GPU_CRASH_DRILL_AFTER", "4"),
            ("GPU_CRASH_DRILL_PRECISION", precision),
        ],
    );
    let name = scenario.split(':').next().unwrap();
    if out.stdout.contains("not applicable") {
        return out.stderr; // run_child said "skipped"
    }
    assert!(
        drill_lines(&out.stderr)
            .iter()
            .any(|l| l.contains(&format!("injected {name}"))),
        "no injection line in stderr:\n{}",
        out.stderr
    );
    out.stderr
}

#[test]
fn use_after_free_ext() {
    fault_case("ext", "use-after-free", "4096");
}

#[test]
fn use_after_free_label_ext() {
    fault_case("ext", "use-after-free:keep", "4096");
}

#[test]
fn out_of_bounds_ext() {
    fault_case("ext", "out-of-bounds", "4096");
}

#[test]
fn in_bounds_label_ext() {
    fault_case("ext", "in-bounds:keep", "64");
}

/// `in-bounds:<label>@<offset>` with precision 4 and 1: the child checks that the reported address is
/// exactly the object's base (from its binding report) plus the offset.
#[test]
fn in_bounds_at_an_offset_ext() {
    let stderr = fault_case("ext", "in-bounds:keep@0x10c", "4");
    assert!(!stderr.contains("not inside"), "{stderr}");
}

#[test]
fn in_bounds_at_an_offset_khr() {
    let stderr = fault_case("khr", "in-bounds:victim@5", "1");
    assert!(!stderr.contains("not inside"), "{stderr}");
}

/// An offset past the object's end: one log line, and the fault is at its middle (checked by the
/// child), never outside it.
#[test]
fn in_bounds_offset_past_the_end_falls_back_to_the_middle() {
    let stderr = fault_case("ext", "in-bounds:keep@100000", "4");
    let lines: Vec<_> = drill_lines(&stderr)
        .into_iter()
        .filter(|l| l.contains("not inside"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("in-bounds offset 100000") && lines[0].contains("middle"),
        "{lines:?}"
    );
}

/// `use-after-free:<label>@<offset>`: the child checks that the reported address is exactly the freed
/// object's base (from its binding report) plus the offset.
#[test]
fn use_after_free_at_an_offset_ext() {
    let stderr = fault_case("ext", "use-after-free:keep@0x10c", "4");
    assert!(!stderr.contains("not inside"), "{stderr}");
}

#[test]
fn use_after_free_at_an_offset_khr() {
    let stderr = fault_case("khr", "use-after-free:victim@5", "1");
    assert!(!stderr.contains("not inside"), "{stderr}");
}

/// An offset past the freed object's end: one log line, and the fault is where it would be without
/// an offset (the middle of the freed range here, which nothing took over; checked by the child).
#[test]
fn use_after_free_offset_past_the_end_falls_back() {
    let stderr = fault_case("ext", "use-after-free:keep@100000", "4");
    let lines: Vec<_> = drill_lines(&stderr)
        .into_iter()
        .filter(|l| l.contains("not inside"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("use-after-free offset 100000") && lines[0].contains("no live object"),
        "{lines:?}"
    );
}

/// A fresh path for an aim file (the child writes it; nothing is there before).
fn aim_path(test: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("gpu_crash_drill-aim-{}-{test}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// `GPU_CRASH_DRILL_AIM`: no fault while the file is absent (past the threshold), then, once it holds
/// `slab@0x1e0`, a fault at exactly the slab's base + 0x1e0 (the child checks the reported address),
/// although `GPU_CRASH_DRILL` named another object and offset.
fn aim_case(test: &str, scenario: &str) {
    let path = aim_path(test);
    let out = run_child(
        &format!("aim|{scenario}"),
        &[
            ("GPU_CRASH_DRILL", scenario),
            ("GPU_CRASH_DRILL_AFTER", "2"),
            ("GPU_CRASH_DRILL_PRECISION", "1"),
            ("GPU_CRASH_DRILL_AIM", path.to_str().unwrap()),
        ],
    );
    let _ = std::fs::remove_file(&path);
    let lines = drill_lines(&out.stderr);
    let name = scenario.split(':').next().unwrap();
    let taken = format!(
        "GPU_CRASH_DRILL_AIM={}: aim taken at submission 6: {name}:slab@480",
        path.display()
    );
    assert_eq!(
        lines.iter().filter(|l| l.ends_with(&taken)).count(),
        1,
        "{lines:?}"
    );
    assert!(
        lines[0].starts_with("[gpu_crash_drill] armed:")
            && lines[0].contains(&format!("aimed by the first line of {}", path.display())),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("injected {name}"))),
        "{lines:?}"
    );
}

#[test]
fn aim_file_aims_in_bounds_once_written() {
    aim_case("in-bounds", "in-bounds:keep@4");
}

#[test]
fn aim_file_aims_use_after_free_once_written() {
    aim_case("use-after-free", "use-after-free");
}

/// The first aim read stays: a later line does not move it. An empty file and a line without a label
/// are waited past (the latter logged once).
#[test]
fn aim_file_is_taken_once_and_waited_for_while_it_has_no_label() {
    let path = aim_path("fixed");
    let out = run_child(
        "aim-fixed",
        &[
            ("GPU_CRASH_DRILL", "in-bounds"),
            ("GPU_CRASH_DRILL_AFTER", "2"),
            ("GPU_CRASH_DRILL_PRECISION", "1"),
            ("GPU_CRASH_DRILL_AIM", path.to_str().unwrap()),
        ],
    );
    let _ = std::fs::remove_file(&path);
    let lines = drill_lines(&out.stderr);
    let count = |s: &str| lines.iter().filter(|l| l.contains(s)).count();
    assert_eq!(
        count("first line \"@0x10\" has no label (expected <label>[@<offset>]); waiting"),
        1,
        "{lines:?}"
    );
    assert_eq!(count("aim taken"), 1, "{lines:?}");
    assert_eq!(
        count("aim taken at submission 7: in-bounds:ghost@16"),
        1,
        "{lines:?}"
    );
    assert_eq!(
        count("(in-bounds:ghost@16): no object named \"ghost\""),
        1,
        "{lines:?}"
    );
}

#[test]
fn use_after_free_khr() {
    fault_case("khr", "use-after-free", "256");
}

#[test]
fn out_of_bounds_label_khr() {
    fault_case("khr", "out-of-bounds:keep", "4096");
}

#[test]
fn in_bounds_khr() {
    fault_case("khr", "in-bounds", "4096");
}

#[test]
fn use_after_free_without_vendor_binary_ext() {
    fault_case_with("ext", "use-after-free:victim", "4096", "nobinary");
}

#[test]
fn out_of_bounds_without_vendor_binary_khr() {
    fault_case_with("khr", "out-of-bounds", "1024", "nobinary");
}

#[test]
fn hang_ext() {
    let out = run_child(
        "hang|ext",
        &[("GPU_CRASH_DRILL", "hang"), ("GPU_CRASH_DRILL_AFTER", "3")],
    );
    assert!(drill_lines(&out.stderr)
        .iter()
        .any(|l| l.contains("injected hang")));
}

#[test]
fn hang_khr() {
    run_child(
        "hang|khr",
        &[
            ("GPU_CRASH_DRILL", "hang"),
            ("GPU_CRASH_DRILL_API", "khr"),
            ("GPU_CRASH_DRILL_AFTER", "3"),
        ],
    );
}

/// Runs a `GPU_CRASH_DRILL_LOSS=after-hang:...` case and returns the drill's lines; echoes the loss
/// times the child measured (run with `--nocapture` to see them).
fn hang_then_loss_case(case: &str, env: &[(&str, &str)]) -> Vec<String> {
    let out = run_child(case, env);
    // libtest's "test child_entry ... " may precede the first line printed.
    for line in out
        .stdout
        .lines()
        .filter_map(|l| l.find("MEASURED").map(|i| &l[i..]))
    {
        eprintln!("{case}: {line}");
    }
    let lines: Vec<String> = drill_lines(&out.stderr)
        .into_iter()
        .map(String::from)
        .collect();
    let count = |s: &str| lines.iter().filter(|l| l.contains(s)).count();
    assert_eq!(
        count("simulated watchdog reset 300 ms after the hang: device lost"),
        1,
        "{lines:?}"
    );
    lines
}

/// `hang` then, 300 ms later, the loss: waits blocked on the hung work (begun before or after the
/// hang) end with `VK_ERROR_DEVICE_LOST` then; before it the fault query says what a plain hang
/// says (nothing), after it the watchdog loss.
#[test]
fn hang_then_loss_after_300_ms_ext() {
    let lines = hang_then_loss_case(
        "hang-loss|ext|-",
        &[
            ("GPU_CRASH_DRILL", "hang"),
            ("GPU_CRASH_DRILL_AFTER", "3"),
            ("GPU_CRASH_DRILL_LOSS", "after-hang:300"),
        ],
    );
    assert!(
        lines.iter().any(|l| {
            l.contains(
            "armed: hang via Ext fault API, submission 4, precision 4096 bytes, device lost 300 ms \
             after the hang"
        )
        }),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("injected hang: submission 4")
                && l.contains("the device is lost 300 ms later")),
        "{lines:?}"
    );
}

/// The same with `khr`: the hang's `WATCHDOG_TIMEOUT` report is held back until the loss, which
/// reports `VENDOR | WATCHDOG_TIMEOUT | DEVICE_LOST` (a blocked `vkGetDeviceFaultReportsKHR` gets it).
#[test]
fn hang_then_loss_after_300_ms_khr() {
    hang_then_loss_case(
        "hang-loss|khr|-",
        &[
            ("GPU_CRASH_DRILL", "hang"),
            ("GPU_CRASH_DRILL_API", "khr"),
            ("GPU_CRASH_DRILL_AFTER", "3"),
            ("GPU_CRASH_DRILL_LOSS", "after-hang:300"),
        ],
    );
}

/// `@watched`: the loss reports a read fault inside the live buffer named `watched`.
#[test]
fn hang_then_loss_with_label_ext() {
    let lines = hang_then_loss_case(
        "hang-loss|ext|watched",
        &[
            ("GPU_CRASH_DRILL", "hang"),
            ("GPU_CRASH_DRILL_AFTER", "3"),
            ("GPU_CRASH_DRILL_LOSS", "after-hang:300@watched"),
        ],
    );
    assert!(
        lines.iter().any(
            |l| l.contains("device lost; fault address 0x") && l.contains("buffer \"watched\"")
        ),
        "{lines:?}"
    );
}

#[test]
fn hang_then_loss_with_label_khr() {
    hang_then_loss_case(
        "hang-loss|khr|watched",
        &[
            ("GPU_CRASH_DRILL", "hang"),
            ("GPU_CRASH_DRILL_API", "khr"),
            ("GPU_CRASH_DRILL_AFTER", "3"),
            ("GPU_CRASH_DRILL_LOSS", "after-hang:300@watched"),
        ],
    );
}

/// `hang-in-pass` then the loss: the work did reach the driver, whose queue wait would never end;
/// `vkQueueWaitIdle` ends with `VK_ERROR_DEVICE_LOST` at the reset instead.
#[test]
fn hang_in_pass_then_loss_with_label_khr() {
    let lines = hang_then_loss_case(
        "hang-in-pass-loss",
        &[
            ("GPU_CRASH_DRILL", "hang-in-pass:drill pass"),
            ("GPU_CRASH_DRILL_API", "khr"),
            ("GPU_CRASH_DRILL_AFTER", "2"),
            ("GPU_CRASH_DRILL_LOSS", "after-hang:300@watched"),
        ],
    );
    assert!(
        lines.iter().any(|l| l
            .contains("hang in pass \"drill pass\" reached the GPU with submission 3")
            && l.contains("the device is lost 300 ms later")),
        "{lines:?}"
    );
}

/// `after-hang` with another scenario: one line, and the scenario behaves as without it.
#[test]
fn after_hang_with_a_memory_fault_logs_one_line_and_is_ignored() {
    let out = run_child(
        "fault|ext|out-of-bounds|4096|nobinary",
        &[
            ("GPU_CRASH_DRILL", "out-of-bounds"),
            ("GPU_CRASH_DRILL_AFTER", "4"),
            ("GPU_CRASH_DRILL_LOSS", "after-hang:300"),
        ],
    );
    let lines = drill_lines(&out.stderr);
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains(
                "GPU_CRASH_DRILL_LOSS=after-hang:300 only applies to hang, hang-in-pass and \
                 hang-in-pipeline, not out-of-bounds; ignored"
            ))
            .count(),
        1,
        "{lines:?}"
    );
}

#[test]
fn stall_delays_the_gpu_then_completes() {
    let out = run_child(
        "stall",
        &[
            ("GPU_CRASH_DRILL", "stall:300"),
            ("GPU_CRASH_DRILL_AFTER", "2"),
        ],
    );
    let lines = drill_lines(&out.stderr);
    let count = |s: &str| lines.iter().filter(|l| l.contains(s)).count();
    assert_eq!(count("armed: stall:300"), 1, "{lines:?}");
    assert_eq!(
        count("reset or freed before it was submitted"),
        1,
        "{lines:?}"
    );
    assert_eq!(count("injected stall: submission 4"), 1, "{lines:?}");
    assert_eq!(count("stall released after 300 ms"), 1, "{lines:?}");
    assert_eq!(lines.len(), 4, "{lines:?}");
}

fn hang_in_pass_case(case: &str) -> Vec<String> {
    let out = run_child(
        case,
        &[
            ("GPU_CRASH_DRILL", "hang-in-pass:drill pass"),
            ("GPU_CRASH_DRILL_AFTER", "2"),
            ("GPU_CRASH_DRILL_API", "khr"),
        ],
    );
    let lines: Vec<String> = drill_lines(&out.stderr)
        .into_iter()
        .map(String::from)
        .collect();
    let count = |s: &str| lines.iter().filter(|l| l.contains(s)).count();
    assert_eq!(
        count("injected hang in pass \"drill pass\""),
        1,
        "{lines:?}"
    );
    assert_eq!(
        count("hang in pass \"drill pass\" reached the GPU with submission 4"),
        1,
        "{lines:?}"
    );
    lines
}

/// wgpu-hal 29 begins a render pass's label (`begin_debug_marker`) before `vkCmdBeginRenderPass`:
/// the wait goes in right after the label, outside the render pass.
#[test]
fn hang_in_pass_with_wgpu_label_order() {
    let lines = hang_in_pass_case("hang-in-pass|wgpu");
    assert!(
        !lines.iter().any(|l| l.contains("inside a render pass")),
        "{lines:?}"
    );
}

/// A label begun inside a render pass instance (wgpu's `push_debug_group` in a pass): the wait
/// follows the end of the instance.
#[test]
fn hang_in_pass_label_inside_render_pass() {
    let lines = hang_in_pass_case("hang-in-pass|inside");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the wait follows the end of that instance")),
        "{lines:?}"
    );
}

/// Runs a `hang-in-pipeline` child case (AFTER=2, KHR) whose GPU must hang once, at submission
/// `hung_at`, in the pipeline named "drill pipeline"; returns the layer's lines.
fn hang_in_pipeline_case(case: &str, scenario: &str, hung_at: u32) -> Vec<String> {
    let out = run_child(
        case,
        &[
            ("GPU_CRASH_DRILL", scenario),
            ("GPU_CRASH_DRILL_AFTER", "2"),
            ("GPU_CRASH_DRILL_API", "khr"),
        ],
    );
    let lines: Vec<String> = drill_lines(&out.stderr)
        .into_iter()
        .map(String::from)
        .collect();
    let count = |s: &str| lines.iter().filter(|l| l.contains(s)).count();
    assert_eq!(
        count("injected hang at pipeline \"drill pipeline\": command buffer 0x",),
        1,
        "{lines:?}"
    );
    assert_eq!(count("injected hang"), 1, "{lines:?}");
    assert_eq!(
        count(&format!(
            "hang at pipeline \"drill pipeline\" reached the GPU with submission {hung_at}; it \
             never completes"
        )),
        1,
        "{lines:?}"
    );
    lines
}

/// A compute pipeline named through `vkSetDebugUtilsObjectNameEXT`, bound outside any render pass:
/// the GPU hangs right after the bind, before the dispatch (not before the threshold, and not for
/// another pipeline).
#[test]
fn hang_in_pipeline_stops_at_the_bind_of_a_compute_pipeline() {
    let lines = hang_in_pipeline_case(
        "hang-in-pipeline|compute",
        "hang-in-pipeline:drill pipeline",
        4,
    );
    assert!(
        !lines.iter().any(|l| l.contains("inside a render pass")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains(
            "armed: hang-in-pipeline:drill pipeline via Khr fault API, first command buffer that \
             binds the pipeline after 2 submissions"
        )),
        "{lines:?}"
    );
}

/// Pipelines of another name, renamed away from the label, or unnamed never hang; the pipeline of that name,
/// bound last, does (so the case also fails if binds are not watched at all).
#[test]
fn hang_in_pipeline_ignores_other_pipelines() {
    hang_in_pipeline_case(
        "hang-in-pipeline|others",
        "hang-in-pipeline:drill pipeline",
        6,
    );
}

/// `#2`: the second command buffer that binds the pipeline hangs, however often the first binds it.
#[test]
fn hang_in_pipeline_counts_command_buffers_not_binds() {
    hang_in_pipeline_case(
        "hang-in-pipeline|second",
        "hang-in-pipeline:drill pipeline#2",
        4,
    );
}

/// A graphics pipeline bound inside a render pass instance (where a host-stage wait is invalid): the
/// wait follows the end of the instance.
#[test]
fn hang_in_pipeline_bound_inside_render_pass_waits_after_it() {
    let lines = hang_in_pipeline_case(
        "hang-in-pipeline|graphics",
        "hang-in-pipeline:drill pipeline",
        4,
    );
    assert!(
        lines.iter().any(|l| l.contains(
            "(the pipeline was bound inside a render pass instance: the wait follows the end of \
             that instance, the first valid point after the bind)"
        )),
        "{lines:?}"
    );
}

#[test]
fn use_after_free_loses_the_device_only_after_rebind() {
    let out = run_child(
        "after-rebind",
        &[
            ("GPU_CRASH_DRILL", "use-after-free:victim"),
            ("GPU_CRASH_DRILL_LOSS", "after-rebind"),
            ("GPU_CRASH_DRILL_AFTER", "2"),
        ],
    );
    let lines = drill_lines(&out.stderr);
    let count = |s: &str| lines.iter().filter(|l| l.contains(s)).count();
    assert_eq!(count("injected use-after-free"), 1, "{lines:?}");
    assert_eq!(count("range re-bound by buffer \"tenant\""), 1, "{lines:?}");
    assert_eq!(
        count("losing the device now (submission 9)"),
        1,
        "{lines:?}"
    );
}

#[test]
fn use_after_free_after_rebind_gives_up_after_600_submissions() {
    let out = run_child(
        "after-rebind-timeout",
        &[
            ("GPU_CRASH_DRILL", "use-after-free"),
            ("GPU_CRASH_DRILL_LOSS", "after-rebind"),
            ("GPU_CRASH_DRILL_AFTER", "2"),
        ],
    );
    assert!(
        drill_lines(&out.stderr)
            .iter()
            .any(|l| l.contains("no re-bind of 0x") && l.contains("within 600 submissions")),
        "{}",
        out.stderr
    );
}

#[test]
fn unknown_scenario_logs_one_line_and_passes_through() {
    let out = run_child(
        "passthrough",
        &[
            ("GPU_CRASH_DRILL", "explode"),
            ("GPU_CRASH_DRILL_AFTER", "0"),
        ],
    );
    let lines = drill_lines(&out.stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("unknown scenario"), "{lines:?}");
}

#[test]
fn unseen_label_logs_one_line_and_passes_through() {
    let out = run_child(
        "passthrough",
        &[
            ("GPU_CRASH_DRILL", "use-after-free:ghost"),
            ("GPU_CRASH_DRILL_AFTER", "2"),
        ],
    );
    let lines: Vec<_> = drill_lines(&out.stderr)
        .into_iter()
        .filter(|l| !l.contains("armed:"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("no object named \"ghost\""), "{lines:?}");
}

#[test]
fn device_without_drill_extensions_works() {
    run_child(
        "no-extensions",
        &[
            ("GPU_CRASH_DRILL", "out-of-bounds"),
            ("GPU_CRASH_DRILL_AFTER", "2"),
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Child side.

/// Entry point of child processes (the tests above start it with the case in `CHILD_ENV`).
#[test]
#[ignore = "child process entry point: the tests above start it with GPU_CRASH_DRILL_TEST_CASE set"]
fn child_entry() {
    let case = std::env::var(CHILD_ENV).expect(
        "child_entry runs only as the child of the tests above (GPU_CRASH_DRILL_TEST_CASE)",
    );
    let parts: Vec<&str> = case.split('|').collect();
    // Cases about what the layer provides, or that enable deviceFaultVendorBinary through EXT, do not
    // apply where the driver has the EXT extensions itself (NVIDIA lacks vendor binaries).
    let layer_specific = matches!(
        parts.as_slice(),
        ["extensions", _]
            | ["bindings"]
            | ["bindings2"]
            | ["fault", "ext", _, _, "binary"]
            | ["hang-loss", "ext", _]
    );
    if layer_specific && driver_has_native_ext() {
        println!("case not applicable on this driver");
        println!("DRILL-CASE-OK {case}");
        return;
    }
    match parts.as_slice() {
        ["extensions", "ext"] => case_extensions(Api::Ext),
        ["extensions", "khr"] => case_extensions(Api::Khr),
        ["bindings"] => case_bindings(),
        ["bindings2"] => case_bindings2(),
        ["fault", api, scenario, precision, binary] => {
            let api = if *api == "khr" { Api::Khr } else { Api::Ext };
            case_fault(
                api,
                scenario,
                precision.parse().unwrap(),
                *binary == "binary",
            );
        }
        ["hang", api] => case_hang(if *api == "khr" { Api::Khr } else { Api::Ext }),
        ["hang-loss", api, label] => case_hang_then_loss(
            if *api == "khr" { Api::Khr } else { Api::Ext },
            Some(*label).filter(|l| *l != "-"),
        ),
        ["hang-in-pass-loss"] => {
            case_hang_in_pass_then_loss();
            // The GPU stays hung (lavapipe's queue thread spins forever): leave at once.
            println!("DRILL-CASE-OK {case}");
            exit_now(0);
        }
        ["passthrough"] => case_passthrough(),
        ["marker"] => case_marker(),
        ["stall"] => case_stall(),
        ["after-rebind"] => case_after_rebind(),
        ["after-rebind-timeout"] => case_after_rebind_timeout(),
        ["hang-in-pass", order] => {
            case_hang_in_pass(*order == "inside");
            // The GPU stays hung (lavapipe's queue thread spins forever): leave at once.
            println!("DRILL-CASE-OK {case}");
            exit_now(0);
        }
        ["hang-in-pipeline", which] => {
            match *which {
                "compute" => case_hang_in_pipeline_compute(),
                "others" => case_hang_in_pipeline_others(),
                "second" => case_hang_in_pipeline_second(),
                "graphics" => case_hang_in_pipeline_graphics(),
                _ => panic!("unknown case {case}"),
            }
            // The GPU stays hung (lavapipe's queue thread spins forever): leave at once.
            println!("DRILL-CASE-OK {case}");
            exit_now(0);
        }
        ["no-extensions"] => case_no_extensions(),
        ["aim", scenario] => case_aim(scenario),
        ["aim-fixed"] => case_aim_fixed(),
        _ => panic!("unknown case {case}"),
    }
    println!("DRILL-CASE-OK {case}");
}

fn ext_names(gpu: &Gpu, layer: Option<&CStr>) -> Vec<String> {
    let f = gpu.instance.fp_v1_0().enumerate_device_extension_properties;
    let layer = layer.map_or(std::ptr::null(), CStr::as_ptr);
    let mut n = 0;
    // SAFETY: valid physical device; count query.
    let result = unsafe { f(gpu.physical, layer, &mut n, std::ptr::null_mut()) };
    assert_eq!(result, vk::Result::SUCCESS);
    let mut props = vec![vk::ExtensionProperties::default(); n as usize];
    // SAFETY: `props` holds `n` elements.
    let result = unsafe { f(gpu.physical, layer, &mut n, props.as_mut_ptr()) };
    assert_eq!(result, vk::Result::SUCCESS);
    assert_eq!(n as usize, props.len());
    if n > 1 {
        let mut short = n - 1;
        // SAFETY: `props` holds more than `short` elements.
        let result = unsafe { f(gpu.physical, layer, &mut short, props.as_mut_ptr()) };
        assert_eq!(result, vk::Result::INCOMPLETE);
        assert_eq!(short, n - 1);
    }
    props
        .iter()
        .map(|p| {
            p.extension_name_as_c_str()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

fn case_extensions(api: Api) {
    let gpu = Gpu::new(api, true);
    let all = ext_names(&gpu, None);
    let has = |n: &str| all.iter().filter(|e| *e == n).count();
    assert_eq!(has("VK_EXT_device_address_binding_report"), 1, "{all:?}");
    let (ours, not_ours) = if api == Api::Ext {
        (
            vec!["VK_EXT_device_fault"],
            vec!["VK_KHR_device_fault", "VK_KHR_shader_abort"],
        )
    } else {
        (
            vec!["VK_KHR_device_fault", "VK_KHR_shader_abort"],
            vec!["VK_EXT_device_fault"],
        )
    };
    for n in &ours {
        assert_eq!(has(n), 1, "{n} in {all:?}");
    }
    for n in &not_ours {
        assert_eq!(has(n), 0, "{n} in {all:?}");
    }
    // The layer-name query lists the layer's own extensions.
    let layer_list = ext_names(&gpu, Some(c"VK_LAYER_gpu_crash_drill"));
    let mut expected: Vec<&str> = vec!["VK_EXT_device_address_binding_report"];
    expected.extend(&ours);
    expected.extend([
        "VK_AMD_buffer_marker",
        "VK_EXT_memory_budget",
        "VK_EXT_device_memory_report",
    ]);
    assert_eq!(layer_list, expected);
    assert_eq!(has("VK_AMD_buffer_marker"), 1, "{all:?}");

    // Features: ours filled, the other API's left alone.
    let mut abort = PhysicalDeviceShaderAbortFeaturesKHR::default();
    let mut khr = PhysicalDeviceFaultFeaturesKHR {
        p_next: (&mut abort as *mut PhysicalDeviceShaderAbortFeaturesKHR).cast(),
        ..Default::default()
    };
    let mut ext = vk::PhysicalDeviceFaultFeaturesEXT {
        p_next: (&mut khr as *mut PhysicalDeviceFaultFeaturesKHR).cast(),
        ..Default::default()
    };
    let mut binding = vk::PhysicalDeviceAddressBindingReportFeaturesEXT {
        p_next: (&mut ext as *mut vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast(),
        ..Default::default()
    };
    let mut v11 = vk::PhysicalDeviceVulkan11Features {
        p_next: (&mut binding as *mut vk::PhysicalDeviceAddressBindingReportFeaturesEXT<'_>).cast(),
        ..Default::default()
    };
    let mut f2 = vk::PhysicalDeviceFeatures2 {
        p_next: (&mut v11 as *mut vk::PhysicalDeviceVulkan11Features<'_>).cast(),
        ..Default::default()
    };
    // SAFETY: valid chain of locals.
    unsafe {
        gpu.instance
            .get_physical_device_features2(gpu.physical, &mut f2)
    };
    assert_eq!(binding.report_address_binding, vk::TRUE);
    let is_ext = api == Api::Ext;
    let b = |on: bool| if on { vk::TRUE } else { vk::FALSE };
    assert_eq!(
        (ext.device_fault, ext.device_fault_vendor_binary),
        (b(is_ext), b(is_ext))
    );
    assert_eq!(
        (khr.device_fault, khr.device_fault_vendor_binary),
        (b(!is_ext), b(!is_ext))
    );
    assert_eq!(abort.shader_abort, b(!is_ext));
    assert_eq!(
        f2.features.robust_buffer_access,
        vk::TRUE,
        "driver features still filled"
    );

    // Properties of the KHR extensions.
    let mut abort_props = PhysicalDeviceShaderAbortPropertiesKHR::default();
    let mut fault_props = PhysicalDeviceFaultPropertiesKHR {
        p_next: (&mut abort_props as *mut PhysicalDeviceShaderAbortPropertiesKHR).cast(),
        ..Default::default()
    };
    let mut p2 = vk::PhysicalDeviceProperties2 {
        p_next: (&mut fault_props as *mut PhysicalDeviceFaultPropertiesKHR).cast(),
        ..Default::default()
    };
    // SAFETY: valid chain of locals.
    unsafe {
        gpu.instance
            .get_physical_device_properties2(gpu.physical, &mut p2)
    };
    assert_eq!(fault_props.max_device_fault_count > 0, !is_ext);
    assert_eq!(abort_props.max_shader_abort_message_size > 0, !is_ext);
    assert_eq!(p2.properties.vendor_id, gpu.props.vendor_id);

    // Entry points exist only for the enabled API; before any fault there is nothing to report.
    let gdpa = |n: &CStr| {
        // SAFETY: valid device and name.
        unsafe {
            gpu.instance
                .get_device_proc_addr(gpu.device.handle(), n.as_ptr())
        }
    };
    assert_eq!(gdpa(c"vkGetDeviceFaultInfoEXT").is_some(), is_ext);
    assert_eq!(gdpa(c"vkGetDeviceFaultReportsKHR").is_some(), !is_ext);
    assert!(
        gdpa(c"vkCmdWriteBufferMarkerAMD").is_none(),
        "marker entry point without the extension enabled"
    );
    if is_ext {
        let counts = ext_counts(&gpu);
        assert_eq!(
            (
                counts.address_info_count,
                counts.vendor_info_count,
                counts.vendor_binary_size
            ),
            (0, 0, 0)
        );
    } else {
        // SAFETY: valid device.
        let fns = unsafe { KhrDeviceFaultFns::load(&gpu.instance, gpu.device.handle()) };
        let mut n = 5;
        // SAFETY: valid count, no array.
        let r = unsafe {
            fns.get_device_fault_reports.unwrap()(
                gpu.device.handle(),
                0,
                &mut n,
                std::ptr::null_mut(),
            )
        };
        assert_eq!((r, n), (vk::Result::TIMEOUT, 0));
    }
    gpu.submit_ok(3);
}

fn case_marker() {
    let all = {
        let gpu = Gpu::new(Api::None, false);
        ext_names(&gpu, None)
    };
    assert_eq!(
        all.iter().filter(|e| *e == "VK_AMD_buffer_marker").count(),
        1,
        "{all:?}"
    );
    let gpu = Gpu::with_extensions(Api::None, false, &[vk::AMD_BUFFER_MARKER_NAME]);
    let out = gpu.mapped_buffer(16);
    let scratch = gpu.mapped_buffer(1024);
    let cb = gpu.begin();
    gpu.marker(cb, vk::PipelineStageFlags::TOP_OF_PIPE, out.buffer, 0, 0xA1);
    // SAFETY: recording, outside a render pass; the buffer has TRANSFER_DST.
    unsafe {
        gpu.device
            .cmd_fill_buffer(cb, scratch.buffer, 0, 4096, 0x5555_5555)
    };
    gpu.marker(cb, vk::PipelineStageFlags::TRANSFER, out.buffer, 8, 0xB2);
    gpu.marker(
        cb,
        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
        out.buffer,
        60,
        0xC3,
    );
    gpu.end(cb);
    let fence = gpu.fence();
    assert_eq!(gpu.submit_cb(cb, fence), vk::Result::SUCCESS);
    assert_eq!(gpu.wait(fence, 5_000_000_000), vk::Result::SUCCESS);
    let words: Vec<u32> = (0..16).map(|i| out.read(i)).collect();
    let mut want = [0u32; 16];
    want[0] = 0xA1;
    want[2] = 0xB2;
    want[15] = 0xC3;
    assert_eq!(words, want);
    assert_eq!(scratch.read(1023), 0x5555_5555, "the work in between ran");

    // Inside a render pass instance the emulation cannot write (vkCmdFillBuffer is a transfer
    // command): that marker is skipped, the ones around the pass are written.
    let pass = gpu.empty_render_pass();
    let cb = gpu.begin();
    gpu.marker(cb, vk::PipelineStageFlags::TRANSFER, out.buffer, 16, 0xD4);
    gpu.begin_pass(cb, pass);
    gpu.marker(
        cb,
        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
        out.buffer,
        20,
        0xE5,
    );
    gpu.end_pass(cb);
    gpu.marker(
        cb,
        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
        out.buffer,
        24,
        0xF6,
    );
    gpu.end(cb);
    let fence = gpu.fence();
    assert_eq!(gpu.submit_cb(cb, fence), vk::Result::SUCCESS);
    assert_eq!(gpu.wait(fence, 5_000_000_000), vk::Result::SUCCESS);
    assert_eq!((out.read(4), out.read(5), out.read(6)), (0xD4, 0, 0xF6));
}

/// Submits `cb` and returns how long its fence took to signal (which must happen within 5 s).
fn timed_submit(gpu: &Gpu, cb: vk::CommandBuffer) -> std::time::Duration {
    let fence = gpu.fence();
    let start = std::time::Instant::now();
    assert_eq!(gpu.submit_cb(cb, fence), vk::Result::SUCCESS);
    assert_eq!(gpu.wait(fence, 5_000_000_000), vk::Result::SUCCESS);
    start.elapsed()
}

fn case_stall() {
    let gpu = Gpu::new(Api::None, false);
    // Ended before the threshold (2 submissions): no stall, even when submitted after it.
    let early = gpu.begin();
    gpu.end(early);
    gpu.submit_ok(2);
    let fast = timed_submit(&gpu, early);
    assert!(fast < std::time::Duration::from_millis(250), "{fast:?}");
    // The first command buffer ended after the threshold gets the wait; resetting it before it is
    // submitted hands the wait to the next one.
    let discarded = gpu.begin();
    gpu.end(discarded);
    // SAFETY: recorded, never submitted.
    unsafe {
        gpu.device
            .reset_command_buffer(discarded, vk::CommandBufferResetFlags::empty())
    }
    .unwrap();
    let stalled = gpu.begin();
    gpu.end(stalled);
    let took = timed_submit(&gpu, stalled);
    assert!(
        took >= std::time::Duration::from_millis(250),
        "the fence signalled after {took:?}"
    );
    // Once per device: later work runs normally, and the device was never lost.
    let after = gpu.begin();
    gpu.end(after);
    timed_submit(&gpu, after);
    // SAFETY: valid device.
    unsafe { gpu.device.device_wait_idle() }.unwrap();
    gpu.submit_ok(2);
}

fn case_hang_in_pass(label_inside_pass: bool) {
    watchdog(60);
    let gpu = Gpu::with_extensions(Api::Khr, false, &[vk::AMD_BUFFER_MARKER_NAME]);
    let out = gpu.mapped_buffer(16);
    let pass = gpu.empty_render_pass();
    // Before the threshold (2 submissions) the label does nothing.
    let early = gpu.begin();
    gpu.label_begin(early, "drill pass");
    gpu.marker(early, vk::PipelineStageFlags::TRANSFER, out.buffer, 0, 1);
    gpu.label_end(early);
    gpu.end(early);
    timed_submit(&gpu, early);
    gpu.submit_ok(1);
    // A command buffer without the label completes.
    let plain = gpu.begin();
    gpu.label_begin(plain, "other pass");
    gpu.marker(plain, vk::PipelineStageFlags::TRANSFER, out.buffer, 4, 2);
    gpu.label_end(plain);
    gpu.end(plain);
    timed_submit(&gpu, plain);
    // The labelled one never does.
    let hung = gpu.begin();
    gpu.marker(hung, vk::PipelineStageFlags::TRANSFER, out.buffer, 8, 3);
    if label_inside_pass {
        gpu.begin_pass(hung, pass);
        gpu.label_begin(hung, "drill pass");
        gpu.label_end(hung);
        gpu.end_pass(hung);
    } else {
        // wgpu's order: label, then the render pass instance.
        gpu.label_begin(hung, "drill pass");
        gpu.begin_pass(hung, pass);
        gpu.end_pass(hung);
        gpu.label_end(hung);
    }
    gpu.marker(
        hung,
        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
        out.buffer,
        12,
        4,
    );
    gpu.end(hung);
    let fence = gpu.fence();
    assert_eq!(gpu.submit_cb(hung, fence), vk::Result::SUCCESS);
    assert_eq!(gpu.wait(fence, 1_500_000_000), vk::Result::TIMEOUT);
    assert_eq!(
        (out.read(0), out.read(1), out.read(2), out.read(3)),
        (1, 2, 3, 0),
        "markers before the label are written, the one after it is not"
    );
    // Hung, not lost: later submissions are accepted (and queue up behind the hang).
    assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::SUCCESS);
    // SAFETY: valid device.
    let fns = unsafe { KhrDeviceFaultFns::load(&gpu.instance, gpu.device.handle()) };
    let reports = fns.get_device_fault_reports.unwrap();
    let mut infos = [DeviceFaultInfoKHR::default(); 1];
    let mut n = 1;
    // SAFETY: `infos` holds one element.
    let result = unsafe { reports(gpu.device.handle(), 0, &mut n, infos.as_mut_ptr()) };
    assert_eq!((result, n), (vk::Result::SUCCESS, 1));
    assert!(infos[0]
        .flags
        .contains(DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT));
    assert!(!infos[0].flags.contains(DeviceFaultFlagsKHR::DEVICE_LOST));
    // SAFETY: NUL-terminated by the layer.
    let desc = unsafe { CStr::from_ptr(infos[0].description.as_ptr()) }.to_string_lossy();
    assert!(desc.contains("drill pass"), "{desc}");
    if label_inside_pass {
        // Teardown after a hang: the layer releases its wait in vkDestroyDevice and lets the work
        // drain first, so destroying the device returns (the watchdog fails the case otherwise).
        // SAFETY: nothing else uses the device any more.
        unsafe { gpu.device.destroy_device(None) };
    }
}

/// Submits `hung` (which wrote marker 1 at word 0 of `out` before the pipeline's bind and marker 2
/// at word 1 after its work) and checks that the GPU hangs between the two, the device is not lost
/// and the KHR report names the pipeline.
fn expect_hung_in_pipeline(gpu: &Gpu, hung: vk::CommandBuffer, out: &MappedBuffer) {
    let fence = gpu.fence();
    assert_eq!(gpu.submit_cb(hung, fence), vk::Result::SUCCESS);
    assert_eq!(gpu.wait(fence, 1_500_000_000), vk::Result::TIMEOUT);
    assert_eq!(
        (out.read(0), out.read(1)),
        (1, 0),
        "the marker before the bind is written, the one after the pipeline's work is not"
    );
    // Hung, not lost: later submissions are accepted (and queue up behind the hang).
    assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::SUCCESS);
    let (result, reports) = khr_reports(gpu, 0);
    assert_eq!((result, reports.len()), (vk::Result::SUCCESS, 1));
    assert!(reports[0]
        .flags
        .contains(DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT));
    assert!(!reports[0].flags.contains(DeviceFaultFlagsKHR::DEVICE_LOST));
    // SAFETY: NUL-terminated by the layer.
    let desc = unsafe { CStr::from_ptr(reports[0].description.as_ptr()) }.to_string_lossy();
    assert!(desc.contains("at pipeline \"drill pipeline\""), "{desc}");
    assert_eq!(reports[0].vendor_info.vendor_fault_code, 9);
}

/// A command buffer that binds `pipeline` and dispatches once, submitted; it must complete.
fn dispatch_completes(gpu: &Gpu, pipeline: vk::Pipeline) {
    let cb = gpu.begin();
    gpu.bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
    gpu.dispatch(cb);
    gpu.end(cb);
    timed_submit(gpu, cb);
}

/// A command buffer that writes marker 1, binds `pipeline`, dispatches, writes marker 2.
fn record_dispatch_between_markers(
    gpu: &Gpu,
    out: &MappedBuffer,
    pipeline: vk::Pipeline,
) -> vk::CommandBuffer {
    let cb = gpu.begin();
    gpu.marker(cb, vk::PipelineStageFlags::TRANSFER, out.buffer, 0, 1);
    gpu.bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
    gpu.dispatch(cb);
    gpu.marker(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, out.buffer, 4, 2);
    gpu.end(cb);
    cb
}

/// `hang-in-pipeline:drill pipeline` (AFTER=2): before the threshold the bind does nothing; after
/// it, another pipeline completes and the named one hangs (submission 4).
fn case_hang_in_pipeline_compute() {
    watchdog(60);
    let gpu = Gpu::with_extensions(Api::Khr, false, &[vk::AMD_BUFFER_MARKER_NAME]);
    let out = gpu.mapped_buffer(4);
    let drill = gpu.compute_pipeline(Some("drill pipeline"));
    let other = gpu.compute_pipeline(Some("other pipeline"));
    dispatch_completes(&gpu, drill);
    gpu.submit_ok(1);
    dispatch_completes(&gpu, other);
    let hung = record_dispatch_between_markers(&gpu, &out, drill);
    expect_hung_in_pipeline(&gpu, hung, &out);
}

/// `hang-in-pipeline:drill pipeline` (AFTER=2): past the threshold, pipelines that are not (or no
/// longer) named "drill pipeline" complete (submissions 3-5); the one that is hangs (submission 6).
/// (A destroyed pipeline's handle is not checked here: lavapipe does not hand it out again soon, so
/// only the tracker's unit test covers forgetting it.)
fn case_hang_in_pipeline_others() {
    watchdog(60);
    let gpu = Gpu::with_extensions(Api::Khr, false, &[vk::AMD_BUFFER_MARKER_NAME]);
    let out = gpu.mapped_buffer(4);
    gpu.submit_ok(2);
    let other = gpu.compute_pipeline(Some("other pipeline"));
    dispatch_completes(&gpu, other);
    // Renamed away from the label.
    let renamed = gpu.compute_pipeline(Some("drill pipeline"));
    gpu.name(renamed, "renamed pipeline");
    dispatch_completes(&gpu, renamed);
    let unnamed = gpu.compute_pipeline(None);
    dispatch_completes(&gpu, unnamed);
    let drill = gpu.compute_pipeline(Some("drill pipeline"));
    let hung = record_dispatch_between_markers(&gpu, &out, drill);
    expect_hung_in_pipeline(&gpu, hung, &out);
}

/// `hang-in-pipeline:drill pipeline#2` (AFTER=2): the first command buffer that binds it (twice,
/// submission 3) completes; the second (submission 4) hangs.
fn case_hang_in_pipeline_second() {
    watchdog(60);
    let gpu = Gpu::with_extensions(Api::Khr, false, &[vk::AMD_BUFFER_MARKER_NAME]);
    let out = gpu.mapped_buffer(4);
    let drill = gpu.compute_pipeline(Some("drill pipeline"));
    gpu.submit_ok(2);
    let first = gpu.begin();
    for _ in 0..2 {
        gpu.bind_pipeline(first, vk::PipelineBindPoint::COMPUTE, drill);
        gpu.dispatch(first);
    }
    gpu.end(first);
    timed_submit(&gpu, first);
    let hung = record_dispatch_between_markers(&gpu, &out, drill);
    expect_hung_in_pipeline(&gpu, hung, &out);
}

/// `hang-in-pipeline:drill pipeline` (AFTER=2) on a graphics pipeline bound inside a render pass
/// instance: another pipeline's pass completes (submission 3); the named one's command buffer
/// (submission 4) hangs after its pass ends.
fn case_hang_in_pipeline_graphics() {
    watchdog(60);
    let gpu = Gpu::with_extensions(Api::Khr, false, &[vk::AMD_BUFFER_MARKER_NAME]);
    let out = gpu.mapped_buffer(4);
    let pass = gpu.empty_render_pass();
    let drill = gpu.graphics_pipeline(pass.0, Some("drill pipeline"));
    let other = gpu.graphics_pipeline(pass.0, Some("other pipeline"));
    gpu.submit_ok(2);
    let draw_with = |cb, pipeline| {
        gpu.begin_pass(cb, pass);
        gpu.bind_pipeline(cb, vk::PipelineBindPoint::GRAPHICS, pipeline);
        gpu.draw(cb);
        gpu.end_pass(cb);
    };
    let plain = gpu.begin();
    draw_with(plain, other);
    gpu.end(plain);
    timed_submit(&gpu, plain);
    let hung = gpu.begin();
    gpu.marker(hung, vk::PipelineStageFlags::TRANSFER, out.buffer, 0, 1);
    draw_with(hung, drill);
    gpu.marker(
        hung,
        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
        out.buffer,
        4,
        2,
    );
    gpu.end(hung);
    expect_hung_in_pipeline(&gpu, hung, &out);
    // Teardown after a hang: the layer releases its wait in vkDestroyDevice and lets the work drain
    // first, so destroying the device returns (the watchdog fails the case otherwise).
    // SAFETY: nothing else uses the device any more.
    unsafe { gpu.device.destroy_device(None) };
}

fn case_after_rebind() {
    let gpu = Gpu::new(Api::Ext, false);
    let probes = probes(&gpu);
    let mem = gpu.allocate(64 * 1024);
    let (victim, _) = gpu.buffer_in(10_000, Some("victim"), mem, 0);
    let (_keep, _) = gpu.buffer_in(4096, Some("keep"), mem, 32 * 1024);
    gpu.submit_ok(3);
    // SAFETY: idle; the memory stays allocated, so its offsets can be bound again.
    unsafe { gpu.device.destroy_buffer(victim, None) };
    let range = gpu.reported_range(victim.as_raw());
    // Submission 4 fires the fault but the GPU just stops: SUCCESS, nothing ever signals.
    let fence = gpu.fence();
    assert_eq!(
        gpu.submit(fence),
        vk::Result::SUCCESS,
        "the faulting submission"
    );
    assert_eq!(gpu.wait(fence, 200_000_000), vk::Result::TIMEOUT);
    for _ in 0..3 {
        assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::SUCCESS);
    }
    // SAFETY: valid device.
    assert_eq!(unsafe { gpu.device.device_wait_idle() }, Ok(()));
    let c = no_fault_counts(&gpu);
    assert_eq!(
        (c.address_info_count, c.vendor_info_count),
        (0, 0),
        "not lost yet"
    );
    // A bind elsewhere changes nothing.
    let (_elsewhere, _) = gpu.buffer_in(4096, Some("elsewhere"), mem, 40 * 1024);
    assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::SUCCESS);
    // A bind over the freed range: the next submission (9) loses the device.
    let (_tenant, _) = gpu.buffer_in(10_000, Some("tenant"), mem, 0);
    assert_eq!(
        gpu.submit(vk::Fence::null()),
        vk::Result::ERROR_DEVICE_LOST,
        "the first submission after the re-bind"
    );
    check_everything_lost(&gpu, &probes);
    let f = ash::ext::device_fault::Device::new(&gpu.instance, &gpu.device)
        .fp()
        .get_device_fault_info_ext;
    let mut addrs = [vk::DeviceFaultAddressInfoEXT::default(); 1];
    let mut vendors = [vk::DeviceFaultVendorInfoEXT::default(); 1];
    let mut counts = vk::DeviceFaultCountsEXT {
        address_info_count: 1,
        vendor_info_count: 1,
        ..Default::default()
    };
    let mut info = vk::DeviceFaultInfoEXT {
        p_address_infos: addrs.as_mut_ptr(),
        p_vendor_infos: vendors.as_mut_ptr(),
        ..Default::default()
    };
    // SAFETY: arrays hold the counts passed.
    let r = unsafe { f(gpu.device.handle(), &mut counts, &mut info) };
    assert_eq!(r, vk::Result::SUCCESS);
    assert_eq!(counts.address_info_count, 1);
    let desc = info.description_as_c_str().unwrap().to_string_lossy();
    assert!(desc.contains("victim"), "{desc}");
    check_address(
        "use-after-free",
        addrs[0].address_type,
        addrs[0].reported_address,
        addrs[0].address_precision,
        4096,
        range,
    );
}

fn case_after_rebind_timeout() {
    let gpu = Gpu::new(Api::Ext, false);
    let (b, m) = gpu.buffer(10_000, None);
    gpu.submit_ok(2);
    gpu.destroy(b, m);
    for i in 0..600 {
        assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::SUCCESS, "#{i}");
    }
    assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::ERROR_DEVICE_LOST);
    let c = ext_counts(&gpu);
    assert_eq!(c.address_info_count, 1);
}

/// A 64x64 RGBA8 sampled image.
fn sampled_image_info() -> vk::ImageCreateInfo<'static> {
    vk::ImageCreateInfo::default()
        .image_type(vk::ImageType::TYPE_2D)
        .format(vk::Format::R8G8B8A8_UNORM)
        .extent(vk::Extent3D {
            width: 64,
            height: 64,
            depth: 1,
        })
        .mip_levels(1)
        .array_layers(1)
        .samples(vk::SampleCountFlags::TYPE_1)
        .usage(vk::ImageUsageFlags::SAMPLED)
}

fn case_bindings() {
    let gpu = Gpu::new(Api::Ext, true);
    MESSAGES.lock().unwrap().clear();
    let mem = gpu.allocate(256 * 1024);
    let (b1, s1) = gpu.buffer_in(1000, Some("first"), mem, 0);
    let (b2, s2) = gpu.buffer_in(5000, None, mem, 65536);
    gpu.name(b2, "second-late");
    let image_info = sampled_image_info();
    // SAFETY: valid device and create info.
    let image = unsafe { gpu.device.create_image(&image_info, None) }.unwrap();
    // SAFETY: valid image.
    let ireq = unsafe { gpu.device.get_image_memory_requirements(image) };
    let imem = gpu.allocate(ireq.size);
    // SAFETY: memory large enough.
    unsafe { gpu.device.bind_image_memory(image, imem, 0) }.unwrap();
    // SAFETY: all objects idle and unused.
    unsafe {
        gpu.device.destroy_buffer(b1, None);
        gpu.device.destroy_buffer(b2, None);
        gpu.device.destroy_image(image, None);
        gpu.device.free_memory(mem, None);
        gpu.device.free_memory(imem, None);
    }
    let msgs = gpu.binding_messages();
    assert!(
        msgs.iter().all(|m| m.messenger == 1),
        "a messenger without the binding type got reports"
    );
    for m in &msgs {
        assert_eq!(m.severity, vk::DebugUtilsMessageSeverityFlagsEXT::INFO);
        assert_eq!(
            m.types,
            vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING
        );
        assert_eq!(m.object_count, 1);
    }
    let summary: Vec<_> = msgs
        .iter()
        .map(|m| (m.object_type, m.handle, m.binding_type))
        .collect();
    use vk::DeviceAddressBindingTypeEXT as T;
    use vk::ObjectType as O;
    assert_eq!(
        summary,
        vec![
            (O::DEVICE_MEMORY, mem.as_raw(), T::BIND),
            (O::BUFFER, b1.as_raw(), T::BIND),
            (O::BUFFER, b2.as_raw(), T::BIND),
            (O::DEVICE_MEMORY, imem.as_raw(), T::BIND),
            (O::IMAGE, image.as_raw(), T::BIND),
            (O::BUFFER, b1.as_raw(), T::UNBIND),
            (O::BUFFER, b2.as_raw(), T::UNBIND),
            (O::IMAGE, image.as_raw(), T::UNBIND),
            (O::DEVICE_MEMORY, mem.as_raw(), T::UNBIND),
            (O::DEVICE_MEMORY, imem.as_raw(), T::UNBIND),
        ]
    );
    let base = msgs[0].base;
    assert!(
        base >= 0x1_0000_0000 && base.is_multiple_of(65536),
        "0x{base:x}"
    );
    assert_eq!(msgs[0].size, 256 * 1024);
    assert_eq!(
        (msgs[1].base, msgs[1].size, msgs[1].name.as_deref()),
        (base, s1, Some("first"))
    );
    assert_eq!(
        (msgs[2].base, msgs[2].size, msgs[2].name.as_deref()),
        (base + 65536, s2, None)
    );
    assert!(
        msgs[3].base >= base + 256 * 1024 && msgs[3].base.is_multiple_of(65536),
        "disjoint, aligned"
    );
    assert_eq!((msgs[4].base, msgs[4].size), (msgs[3].base, ireq.size));
    // Unbinds repeat the bound ranges and carry names set after binding.
    assert_eq!((msgs[5].base, msgs[5].size), (msgs[1].base, msgs[1].size));
    assert_eq!(
        (msgs[6].base, msgs[6].name.as_deref()),
        (msgs[2].base, Some("second-late"))
    );
    assert_eq!((msgs[8].base, msgs[8].size), (msgs[0].base, msgs[0].size));
    // Addresses are never reused.
    let m2 = gpu.allocate(4096);
    let last = gpu.binding_messages().last().unwrap().clone();
    assert_eq!(last.handle, m2.as_raw());
    assert!(last.base > msgs[3].base);
    // A destroyed messenger receives nothing more.
    // SAFETY: valid messenger.
    unsafe {
        gpu.debug_utils
            .destroy_debug_utils_messenger(gpu.messengers[0], None)
    };
    let before = gpu.binding_messages().len();
    // SAFETY: idle memory.
    unsafe { gpu.device.free_memory(m2, None) };
    assert_eq!(gpu.binding_messages().len(), before);
}

/// `vkBindBufferMemory2` / `vkBindImageMemory2` and their `KHR` aliases (wgpu uses the first
/// versions, so only this case reaches these four hooks): each info of a call is reported, at its
/// memory's address plus its offset, with its memory-requirement size.
fn case_bindings2() {
    let gpu = Gpu::with_extensions(Api::Ext, true, &[c"VK_KHR_bind_memory2"]);
    MESSAGES.lock().unwrap().clear();
    let mem = gpu.allocate(1 << 20);
    let buffer_info = vk::BufferCreateInfo::default()
        .size(1000)
        .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
    let image_info = sampled_image_info();
    // SAFETY: valid device and create infos.
    let (buffers, images) = unsafe {
        (
            [0; 3].map(|_| gpu.device.create_buffer(&buffer_info, None).unwrap()),
            [0; 2].map(|_| gpu.device.create_image(&image_info, None).unwrap()),
        )
    };
    // SAFETY: valid buffer and image.
    let (breq, ireq) = unsafe {
        (
            gpu.device.get_buffer_memory_requirements(buffers[0]),
            gpu.device.get_image_memory_requirements(images[0]),
        )
    };
    let buffer_bind = |b: vk::Buffer, offset: u64| {
        vk::BindBufferMemoryInfo::default()
            .buffer(b)
            .memory(mem)
            .memory_offset(offset)
    };
    let image_bind = |i: vk::Image, offset: u64| {
        vk::BindImageMemoryInfo::default()
            .image(i)
            .memory(mem)
            .memory_offset(offset)
    };
    // SAFETY: the device's entry points of these names (the extension is enabled).
    let (buffer_khr, image_khr) = unsafe {
        let get = |name: &CStr| {
            gpu.instance
                .get_device_proc_addr(gpu.device.handle(), name.as_ptr())
                .unwrap_or_else(|| panic!("{name:?}"))
        };
        (
            std::mem::transmute::<unsafe extern "system" fn(), vk::PFN_vkBindBufferMemory2>(get(
                c"vkBindBufferMemory2KHR",
            )),
            std::mem::transmute::<unsafe extern "system" fn(), vk::PFN_vkBindImageMemory2>(get(
                c"vkBindImageMemory2KHR",
            )),
        )
    };
    // SAFETY: unbound objects, offsets aligned (64 KiB) and inside the 1 MiB memory.
    unsafe {
        gpu.device
            .bind_buffer_memory2(&[buffer_bind(buffers[0], 0), buffer_bind(buffers[1], 0x10000)])
            .unwrap();
        let b = buffer_bind(buffers[2], 0x20000);
        assert_eq!(buffer_khr(gpu.device.handle(), 1, &b), vk::Result::SUCCESS);
        gpu.device
            .bind_image_memory2(&[image_bind(images[0], 0x40000)])
            .unwrap();
        let i = image_bind(images[1], 0x80000);
        assert_eq!(image_khr(gpu.device.handle(), 1, &i), vk::Result::SUCCESS);
    }
    let msgs = gpu.binding_messages();
    use vk::DeviceAddressBindingTypeEXT as T;
    use vk::ObjectType as O;
    assert_eq!(
        (msgs[0].object_type, msgs[0].handle, msgs[0].binding_type),
        (O::DEVICE_MEMORY, mem.as_raw(), T::BIND)
    );
    let base = msgs[0].base;
    let summary: Vec<_> = msgs[1..]
        .iter()
        .map(|m| (m.object_type, m.handle, m.binding_type, m.base, m.size))
        .collect();
    assert_eq!(
        summary,
        vec![
            (O::BUFFER, buffers[0].as_raw(), T::BIND, base, breq.size),
            (
                O::BUFFER,
                buffers[1].as_raw(),
                T::BIND,
                base + 0x10000,
                breq.size
            ),
            (
                O::BUFFER,
                buffers[2].as_raw(),
                T::BIND,
                base + 0x20000,
                breq.size
            ),
            (
                O::IMAGE,
                images[0].as_raw(),
                T::BIND,
                base + 0x40000,
                ireq.size
            ),
            (
                O::IMAGE,
                images[1].as_raw(),
                T::BIND,
                base + 0x80000,
                ireq.size
            ),
        ]
    );
    // SAFETY: all objects idle and unused.
    unsafe {
        for b in buffers {
            gpu.device.destroy_buffer(b, None);
        }
        for i in images {
            gpu.device.destroy_image(i, None);
        }
        gpu.device.free_memory(mem, None);
    }
}

fn ext_counts(gpu: &Gpu) -> vk::DeviceFaultCountsEXT<'static> {
    let f = ash::ext::device_fault::Device::new(&gpu.instance, &gpu.device)
        .fp()
        .get_device_fault_info_ext;
    let mut counts = vk::DeviceFaultCountsEXT::default();
    // SAFETY: valid device; count query.
    let result = unsafe { f(gpu.device.handle(), &mut counts, std::ptr::null_mut()) };
    assert_eq!(result, vk::Result::SUCCESS);
    counts
}

/// Whether the layer itself provides `name` (false where the driver has it natively, e.g. NVIDIA).
fn layer_provides(gpu: &Gpu, name: &str) -> bool {
    ext_names(gpu, Some(c"VK_LAYER_gpu_crash_drill"))
        .iter()
        .any(|e| e == name)
}

/// `vkGetDeviceFaultInfoEXT` counts on a device that was not lost: the layer answers zero counts; a
/// driver with native `VK_EXT_device_fault` answers itself (NVIDIA: `VK_ERROR_UNKNOWN`, zero counts).
fn no_fault_counts(gpu: &Gpu) -> vk::DeviceFaultCountsEXT<'static> {
    if layer_provides(gpu, "VK_EXT_device_fault") {
        return ext_counts(gpu);
    }
    let f = ash::ext::device_fault::Device::new(&gpu.instance, &gpu.device)
        .fp()
        .get_device_fault_info_ext;
    let mut counts = vk::DeviceFaultCountsEXT::default();
    // SAFETY: valid device; count query.
    let r = unsafe { f(gpu.device.handle(), &mut counts, std::ptr::null_mut()) };
    assert!(
        r == vk::Result::SUCCESS || r == vk::Result::ERROR_UNKNOWN,
        "{r:?}"
    );
    counts
}

/// True (after printing why) when the driver implements the binding report itself (NVIDIA), so a
/// case that checks what the layer provides does not apply. Never true on lavapipe.
fn driver_has_native_ext() -> bool {
    // SAFETY: loading the system Vulkan loader.
    let entry = unsafe { ash::Entry::load() }.expect("libvulkan");
    // SAFETY: a minimal valid create info.
    let instance =
        unsafe { entry.create_instance(&vk::InstanceCreateInfo::default(), None) }.unwrap();
    // SAFETY: valid instance.
    let physical = unsafe { instance.enumerate_physical_devices() }.unwrap()[0];
    let f = instance.fp_v1_0().enumerate_device_extension_properties;
    let layer = c"VK_LAYER_gpu_crash_drill".as_ptr();
    let mut n = 0;
    // SAFETY: count query for the layer's own extensions.
    let r = unsafe { f(physical, layer, &mut n, std::ptr::null_mut()) };
    assert_eq!(r, vk::Result::SUCCESS);
    let mut props = vec![vk::ExtensionProperties::default(); n as usize];
    // SAFETY: `props` holds `n` elements.
    let r = unsafe { f(physical, layer, &mut n, props.as_mut_ptr()) };
    assert_eq!(r, vk::Result::SUCCESS);
    // SAFETY: no child objects remain.
    unsafe { instance.destroy_instance(None) };
    let native = !props
        .iter()
        .any(|p| p.extension_name_as_c_str() == Ok(vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME));
    if native {
        println!("driver has the address binding report natively: case not applicable");
    }
    native
}

/// Objects that exist when the device is lost, to probe every DEVICE_LOST path.
struct Probes {
    fence: vk::Fence,
    memory: vk::DeviceMemory,
    query_pool: vk::QueryPool,
    timeline: vk::Semaphore,
}

fn probes(gpu: &Gpu) -> Probes {
    let mut type_info = vk::SemaphoreTypeCreateInfo::default()
        .semaphore_type(vk::SemaphoreType::TIMELINE)
        .initial_value(0);
    let info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
    // SAFETY: valid device and create infos (timelineSemaphore enabled).
    unsafe {
        Probes {
            fence: gpu.fence(),
            memory: gpu.allocate(4096),
            query_pool: gpu
                .device
                .create_query_pool(
                    &vk::QueryPoolCreateInfo::default()
                        .query_type(vk::QueryType::OCCLUSION)
                        .query_count(1),
                    None,
                )
                .unwrap(),
            timeline: gpu.device.create_semaphore(&info, None).unwrap(),
        }
    }
}

fn check_everything_lost(gpu: &Gpu, p: &Probes) {
    let lost = Some(vk::Result::ERROR_DEVICE_LOST);
    let d = &gpu.device;
    assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::ERROR_DEVICE_LOST);
    // SAFETY: valid objects of this device.
    unsafe {
        let s2 = vk::SubmitInfo2::default();
        assert_eq!(
            d.queue_submit2(gpu.queue, &[s2], vk::Fence::null()).err(),
            lost
        );
        assert_eq!(d.queue_wait_idle(gpu.queue).err(), lost);
        assert_eq!(d.device_wait_idle().err(), lost);
        assert_eq!(d.wait_for_fences(&[p.fence], true, 0).err(), lost);
        assert_eq!(d.get_fence_status(p.fence).err(), lost);
        assert_eq!(
            d.map_memory(p.memory, 0, 64, vk::MemoryMapFlags::empty())
                .err(),
            Some(vk::Result::ERROR_DEVICE_LOST)
        );
        let mut data = [0u64; 1];
        assert_eq!(
            d.get_query_pool_results(p.query_pool, 0, &mut data, vk::QueryResultFlags::TYPE_64)
                .err(),
            lost
        );
        let values = [1u64];
        let sems = [p.timeline];
        let wait = vk::SemaphoreWaitInfo::default()
            .semaphores(&sems)
            .values(&values);
        assert_eq!(d.wait_semaphores(&wait, 0).err(), lost);
        assert_eq!(d.get_semaphore_counter_value(p.timeline).err(), lost);
    }
}

/// `<label>[@<offset>]` of a scenario's argument, as the tests write it (their labels have no '@').
fn label_and_offset(scenario: &str) -> (Option<&str>, Option<u64>) {
    let Some((_, arg)) = scenario.split_once(':') else {
        return (None, None);
    };
    match arg.split_once('@') {
        Some((label, n)) => {
            let offset = match n.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => n.parse(),
            };
            (Some(label), Some(offset.unwrap()))
        }
        None => (Some(arg), None),
    }
}

/// Checks a reported fault address against the blamed object's range.
fn check_address(
    scenario: &str,
    ty: vk::DeviceFaultAddressTypeEXT,
    addr: u64,
    precision: u64,
    expected_precision: u64,
    range: (u64, u64),
) {
    let (base, size) = range;
    assert_eq!(precision, expected_precision);
    assert!(precision.is_power_of_two());
    let lo = addr & !(precision - 1);
    let hi = lo + precision - 1;
    assert!(lo <= addr && addr <= hi);
    match scenario.split(':').next().unwrap() {
        "out-of-bounds" => {
            assert_eq!(addr, base + size, "first byte past the end");
            assert_eq!(ty, vk::DeviceFaultAddressTypeEXT::WRITE_INVALID);
        }
        name => {
            assert!(
                base <= addr && addr < base + size,
                "0x{addr:x} not in [0x{base:x}, +0x{size:x})"
            );
            assert!(
                lo < base + size && hi >= base,
                "precision range misses the object"
            );
            if let (_, Some(offset)) = label_and_offset(scenario) {
                // Exactly there, or the middle when the offset is not inside the object (for a
                // use-after-free: its uncovered middle, as nothing took the freed range over).
                let want = if offset < size {
                    base + offset
                } else {
                    base + ((size / 2) & !3)
                };
                assert_eq!(addr, want, "{name} at offset {offset} of 0x{base:x}");
            }
            let want = if name == "in-bounds" {
                vk::DeviceFaultAddressTypeEXT::READ_INVALID
            } else {
                vk::DeviceFaultAddressTypeEXT::WRITE_INVALID
            };
            assert_eq!(ty, want);
        }
    }
}

fn case_fault(api: Api, scenario: &str, precision: u64, vendor_binary: bool) {
    let gpu = Gpu::new(api, vendor_binary);
    let (keep, keep_mem) = gpu.buffer(3000, Some("keep"));
    let (victim, victim_mem) = gpu.buffer(10_000, Some("victim"));
    let probes = probes(&gpu);
    // Without a label the default target is `victim` (bound last, destroyed last).
    let target_name = label_and_offset(scenario).0.unwrap_or("victim");
    let target = if target_name == "keep" { keep } else { victim };
    if scenario.starts_with("use-after-free") {
        // Past the threshold but nothing freed yet: no fault.
        gpu.submit_ok(6);
        gpu.destroy(keep, keep_mem);
        gpu.destroy(victim, victim_mem);
    } else {
        gpu.submit_ok(4);
    }
    let range = gpu.reported_range(target.as_raw());
    assert_eq!(
        gpu.submit(vk::Fence::null()),
        vk::Result::ERROR_DEVICE_LOST,
        "the triggering submission"
    );
    check_everything_lost(&gpu, &probes);

    match api {
        Api::Ext => {
            let f = ash::ext::device_fault::Device::new(&gpu.instance, &gpu.device)
                .fp()
                .get_device_fault_info_ext;
            let counts = ext_counts(&gpu);
            let again = ext_counts(&gpu);
            assert_eq!(
                (
                    counts.address_info_count,
                    counts.vendor_info_count,
                    counts.vendor_binary_size
                ),
                (
                    again.address_info_count,
                    again.vendor_info_count,
                    again.vendor_binary_size
                ),
                "identical answers on repeat"
            );
            assert_eq!(
                (counts.address_info_count, counts.vendor_info_count),
                (1, 1)
            );
            let bin_size = counts.vendor_binary_size as usize;
            let query = |a: u32, v: u32, b: usize| {
                let mut addrs = [vk::DeviceFaultAddressInfoEXT::default(); 1];
                let mut vendors = [vk::DeviceFaultVendorInfoEXT::default(); 1];
                let mut bin = vec![0xABu8; bin_size.max(64)];
                let mut c = vk::DeviceFaultCountsEXT {
                    address_info_count: a,
                    vendor_info_count: v,
                    vendor_binary_size: b as u64,
                    ..Default::default()
                };
                let mut info = vk::DeviceFaultInfoEXT {
                    p_address_infos: addrs.as_mut_ptr(),
                    p_vendor_infos: vendors.as_mut_ptr(),
                    p_vendor_binary_data: bin.as_mut_ptr().cast::<c_void>(),
                    ..Default::default()
                };
                // SAFETY: arrays hold at least the counts passed.
                let r = unsafe { f(gpu.device.handle(), &mut c, &mut info) };
                let desc = info
                    .description_as_c_str()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let counts = (
                    c.address_info_count,
                    c.vendor_info_count,
                    c.vendor_binary_size as usize,
                );
                (r, counts, desc, bin, addrs[0], vendors[0])
            };
            let (r, c, desc, mut full, addr, vendor) = query(1, 1, bin_size);
            full.truncate(bin_size);
            assert_eq!((r, c), (vk::Result::SUCCESS, (1, 1, bin_size)));
            assert!(
                desc.contains(scenario.split(':').next().unwrap()) && desc.contains(target_name),
                "{desc}"
            );
            check_address(
                scenario,
                addr.address_type,
                addr.reported_address,
                addr.address_precision,
                precision,
                range,
            );
            assert!(vendor.vendor_fault_code > 0);
            if !vendor_binary {
                assert_eq!(
                    bin_size, 0,
                    "no vendor binary unless the feature was enabled"
                );
                return;
            }
            check_vendor_binary(&gpu, &full);
            // Partial counts: VK_INCOMPLETE, and what fits is written.
            let (r, c, ..) = query(0, 1, bin_size);
            assert_eq!((r, c), (vk::Result::INCOMPLETE, (0, 1, bin_size)));
            let (r, c, ..) = query(1, 0, bin_size);
            assert_eq!((r, c), (vk::Result::INCOMPLETE, (1, 0, bin_size)));
            // A vendor buffer smaller than the header gets nothing.
            let (r, c, _, b, ..) = query(1, 1, 10);
            assert_eq!((r, c), (vk::Result::INCOMPLETE, (1, 1, 0)));
            assert!(b.iter().all(|&x| x == 0xAB));
            // Header plus a little: that much is written.
            let (r, c, _, b, ..) = query(1, 1, 59);
            assert_eq!((r, c), (vk::Result::INCOMPLETE, (1, 1, 59)));
            assert_eq!(&b[..59], &full[..59]);
            assert_eq!(b[59], 0xAB);
        }
        Api::Khr => {
            // SAFETY: valid device.
            let fns = unsafe { KhrDeviceFaultFns::load(&gpu.instance, gpu.device.handle()) };
            let reports = fns
                .get_device_fault_reports
                .expect("vkGetDeviceFaultReportsKHR");
            let dev = gpu.device.handle();
            let mut n = 0;
            // SAFETY: count queries.
            unsafe {
                assert_eq!(
                    reports(dev, 0, &mut n, std::ptr::null_mut()),
                    vk::Result::SUCCESS
                );
                assert_eq!(n, 1);
                assert_eq!(
                    reports(dev, 0, &mut n, std::ptr::null_mut()),
                    vk::Result::SUCCESS
                );
                assert_eq!(n, 1, "a count query does not drain");
            }
            let mut infos = [DeviceFaultInfoKHR::default(); 2];
            n = 2;
            // SAFETY: `infos` holds 2 elements.
            let result = unsafe { reports(dev, 0, &mut n, infos.as_mut_ptr()) };
            assert_eq!(result, vk::Result::SUCCESS);
            assert_eq!(n, 1);
            let r = &infos[0];
            assert_eq!(r.s_type, structure_type::DEVICE_FAULT_INFO_KHR);
            assert!(r.flags.contains(
                DeviceFaultFlagsKHR::DEVICE_LOST
                    | DeviceFaultFlagsKHR::MEMORY_ADDRESS
                    | DeviceFaultFlagsKHR::VENDOR
            ));
            assert!(!r.flags.contains(DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT));
            let a = r.fault_address_info;
            check_address(
                scenario,
                a.address_type,
                a.reported_address,
                a.address_precision,
                precision,
                range,
            );
            // SAFETY: NUL-terminated by the layer.
            let desc = unsafe { CStr::from_ptr(r.description.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            assert!(desc.contains(target_name), "{desc}");
            // Drained: the next call finds nothing.
            n = 2;
            // SAFETY: as above.
            let result = unsafe { reports(dev, 0, &mut n, infos.as_mut_ptr()) };
            assert_eq!(result, vk::Result::TIMEOUT);
            assert_eq!(n, 0);

            let debug = fns
                .get_device_fault_debug_info
                .expect("vkGetDeviceFaultDebugInfoKHR");
            let mut msg = DeviceFaultShaderAbortMessageInfoKHR::default();
            let mut info = DeviceFaultDebugInfoKHR {
                p_next: (&mut msg as *mut DeviceFaultShaderAbortMessageInfoKHR).cast(),
                ..Default::default()
            };
            // SAFETY: size queries (null buffers).
            assert_eq!(unsafe { debug(dev, &mut info) }, vk::Result::SUCCESS);
            let (bin_size, msg_size) = (
                info.vendor_binary_size as usize,
                msg.message_data_size as usize,
            );
            assert!(msg_size > 1);
            assert_eq!(
                bin_size > 56,
                vendor_binary,
                "binary only with the feature enabled"
            );
            let mut bin = vec![0u8; bin_size];
            let mut text = vec![0u8; msg_size];
            let mut msg = DeviceFaultShaderAbortMessageInfoKHR {
                message_data_size: msg_size as u64,
                p_message_data: text.as_mut_ptr().cast(),
                ..Default::default()
            };
            let mut info = DeviceFaultDebugInfoKHR {
                p_next: (&mut msg as *mut DeviceFaultShaderAbortMessageInfoKHR).cast(),
                vendor_binary_size: bin_size as u32,
                p_vendor_binary_data: bin.as_mut_ptr().cast(),
                ..Default::default()
            };
            // SAFETY: buffers hold the sizes stated.
            assert_eq!(unsafe { debug(dev, &mut info) }, vk::Result::SUCCESS);
            assert_eq!(
                (
                    info.vendor_binary_size as usize,
                    msg.message_data_size as usize
                ),
                (bin_size, msg_size)
            );
            let text = CStr::from_bytes_until_nul(&text).unwrap().to_str().unwrap();
            assert_eq!(text, format!("crash drill: shader abort in {target_name}"));
            if !vendor_binary {
                return;
            }
            check_vendor_binary(&gpu, &bin);
            // A buffer smaller than the header gets nothing.
            let mut small = [0xABu8; 8];
            let mut info = DeviceFaultDebugInfoKHR {
                vendor_binary_size: 8,
                p_vendor_binary_data: small.as_mut_ptr().cast(),
                ..Default::default()
            };
            // SAFETY: `small` holds 8 bytes.
            assert_eq!(unsafe { debug(dev, &mut info) }, vk::Result::INCOMPLETE);
            assert_eq!(info.vendor_binary_size, 0);
            assert_eq!(small, [0xAB; 8]);
        }
        Api::None => unreachable!(),
    }
}

fn case_hang(api: Api) {
    // No vendor binary: NVIDIA's native VK_EXT_device_fault lacks it, so this case runs there too.
    let gpu = Gpu::new(api, false);
    let probes = probes(&gpu);
    gpu.submit_ok(3);
    let values = [1u64];
    let sems = [probes.timeline];
    let mut timeline = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
    let submit = vk::SubmitInfo::default()
        .signal_semaphores(&sems)
        .push_next(&mut timeline);
    let d = &gpu.device;
    // SAFETY: valid objects of this device.
    unsafe {
        assert_eq!(
            d.queue_submit(gpu.queue, &[submit], probes.fence),
            Ok(()),
            "the hung submission is accepted"
        );
        assert_eq!(
            d.wait_for_fences(&[probes.fence], true, 200_000_000),
            Err(vk::Result::TIMEOUT)
        );
        assert_eq!(d.get_fence_status(probes.fence), Ok(false), "NOT_READY");
        let wait = vk::SemaphoreWaitInfo::default()
            .semaphores(&sems)
            .values(&values);
        assert_eq!(
            d.wait_semaphores(&wait, 100_000_000),
            Err(vk::Result::TIMEOUT)
        );
        assert_eq!(d.get_semaphore_counter_value(probes.timeline), Ok(0));
        // Later work never completes either, and the device is not lost.
        let f2 = gpu.fence();
        assert_eq!(gpu.submit(f2), vk::Result::SUCCESS);
        assert_eq!(
            d.wait_for_fences(&[f2], true, 50_000_000),
            Err(vk::Result::TIMEOUT)
        );
        assert_eq!(d.device_wait_idle(), Ok(()));
        assert!(d
            .map_memory(probes.memory, 0, 64, vk::MemoryMapFlags::empty())
            .is_ok());
    }
    match api {
        Api::Khr => {
            // SAFETY: valid device.
            let fns = unsafe { KhrDeviceFaultFns::load(&gpu.instance, d.handle()) };
            let reports = fns.get_device_fault_reports.unwrap();
            let mut infos = [DeviceFaultInfoKHR::default(); 1];
            let mut n = 1;
            // SAFETY: `infos` holds one element.
            let result = unsafe { reports(d.handle(), 1_000_000, &mut n, infos.as_mut_ptr()) };
            assert_eq!(result, vk::Result::SUCCESS);
            assert_eq!(n, 1);
            assert!(infos[0]
                .flags
                .contains(DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT));
            assert!(!infos[0].flags.contains(DeviceFaultFlagsKHR::DEVICE_LOST));
            assert!(!infos[0].flags.contains(DeviceFaultFlagsKHR::MEMORY_ADDRESS));
            // SAFETY: as above.
            let result = unsafe { reports(d.handle(), 0, &mut n, infos.as_mut_ptr()) };
            assert_eq!(result, vk::Result::TIMEOUT);
            assert_eq!(n, 0);
        }
        _ => {
            let c = no_fault_counts(&gpu);
            assert_eq!(
                (c.address_info_count, c.vendor_info_count),
                (0, 0),
                "not lost: no fault info"
            );
        }
    }
}

/// `ms` milliseconds as the `after-hang` cases give them.
const LOSS_AFTER: std::time::Duration = std::time::Duration::from_millis(300);
/// Generous bound on when a wait blocked on hung work must have ended (the loss is due at 300 ms).
const LOSS_BY: std::time::Duration = std::time::Duration::from_secs(3);

/// Asserts that a wait blocked on hung work ended with the loss, between 300 ms and 3 s after the
/// hang (`took`: from just before the hanging submission), and prints the time for the parent.
fn check_loss_time(what: &str, r: Result<(), vk::Result>, took: std::time::Duration) {
    assert_eq!(r, Err(vk::Result::ERROR_DEVICE_LOST), "{what}");
    assert!(
        took >= LOSS_AFTER && took < LOSS_BY,
        "{what} ended {took:?} after the hang"
    );
    println!(
        "MEASURED {what}: VK_ERROR_DEVICE_LOST {:.1} ms after the hang (loss due at 300 ms)",
        took.as_secs_f64() * 1000.0
    );
}

/// `vkGetDeviceFaultReportsKHR` with `timeout_ns`: the result and the reports returned (at most 2).
fn khr_reports(gpu: &Gpu, timeout_ns: u64) -> (vk::Result, Vec<DeviceFaultInfoKHR>) {
    // SAFETY: valid device.
    let fns = unsafe { KhrDeviceFaultFns::load(&gpu.instance, gpu.device.handle()) };
    let reports = fns.get_device_fault_reports.unwrap();
    let mut infos = [DeviceFaultInfoKHR::default(); 2];
    let mut n = 2;
    // SAFETY: `infos` holds 2 elements.
    let r = unsafe { reports(gpu.device.handle(), timeout_ns, &mut n, infos.as_mut_ptr()) };
    (r, infos[..n as usize].to_vec())
}

/// `vkGetDeviceFaultDebugInfoKHR`: the vendor binary and the shader abort message.
fn khr_debug_info(gpu: &Gpu) -> (Vec<u8>, String) {
    // SAFETY: valid device.
    let fns = unsafe { KhrDeviceFaultFns::load(&gpu.instance, gpu.device.handle()) };
    let debug = fns.get_device_fault_debug_info.unwrap();
    let dev = gpu.device.handle();
    let mut msg = DeviceFaultShaderAbortMessageInfoKHR::default();
    let mut info = DeviceFaultDebugInfoKHR {
        p_next: (&mut msg as *mut DeviceFaultShaderAbortMessageInfoKHR).cast(),
        ..Default::default()
    };
    // SAFETY: size queries (null buffers).
    assert_eq!(unsafe { debug(dev, &mut info) }, vk::Result::SUCCESS);
    let mut bin = vec![0u8; info.vendor_binary_size as usize];
    let mut text = vec![0u8; msg.message_data_size as usize];
    let mut msg = DeviceFaultShaderAbortMessageInfoKHR {
        message_data_size: text.len() as u64,
        p_message_data: text.as_mut_ptr().cast(),
        ..Default::default()
    };
    let mut info = DeviceFaultDebugInfoKHR {
        p_next: (&mut msg as *mut DeviceFaultShaderAbortMessageInfoKHR).cast(),
        vendor_binary_size: bin.len() as u32,
        p_vendor_binary_data: bin.as_mut_ptr().cast(),
        ..Default::default()
    };
    // SAFETY: buffers hold the sizes stated.
    assert_eq!(unsafe { debug(dev, &mut info) }, vk::Result::SUCCESS);
    let text = CStr::from_bytes_until_nul(&text)
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default();
    (bin, text)
}

/// Checks the KHR report of a hang the watchdog turned into a loss (`vendor_code`: the scenario's);
/// with `watched`, the read fault inside it.
fn check_khr_loss_report(r: &DeviceFaultInfoKHR, vendor_code: u64, watched: Option<(u64, u64)>) {
    let lost = DeviceFaultFlagsKHR::VENDOR
        | DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT
        | DeviceFaultFlagsKHR::DEVICE_LOST;
    assert!(r.flags.contains(lost), "{:?}", r.flags);
    assert_eq!(
        r.flags.contains(DeviceFaultFlagsKHR::MEMORY_ADDRESS),
        watched.is_some(),
        "{:?}",
        r.flags
    );
    assert_eq!(r.vendor_info.vendor_fault_code, vendor_code);
    // SAFETY: NUL-terminated by the layer.
    let desc = unsafe { CStr::from_ptr(r.description.as_ptr()) }.to_string_lossy();
    assert!(
        desc.contains("watchdog timeout") && desc.contains("reset 300 ms later"),
        "{desc}"
    );
    if let Some(range) = watched {
        assert!(desc.contains("watched"), "{desc}");
        let a = r.fault_address_info;
        check_address(
            "in-bounds",
            a.address_type,
            a.reported_address,
            a.address_precision,
            4096,
            range,
        );
    }
}

/// `hang` with `GPU_CRASH_DRILL_LOSS=after-hang:300[@watched]` (AFTER=3): submission 4 hangs, the
/// device is lost 300 ms later.
fn case_hang_then_loss(api: Api, label: Option<&str>) {
    use std::time::{Duration, Instant};
    watchdog(30);
    let gpu = Gpu::new(api, true);
    let probes = probes(&gpu);
    let (watched, _watched_mem) = gpu.buffer(10_000, Some("watched"));
    // Bound after `watched`: without the label match, the most recent buffer would be picked.
    let (_other, _other_mem) = gpu.buffer(3000, Some("other"));
    let watched_range = gpu.reported_range(watched.as_raw());
    gpu.submit_ok(3);
    let d = &gpu.device;
    let values = [1u64];
    let sems = [probes.timeline];
    let wait = vk::SemaphoreWaitInfo::default()
        .semaphores(&sems)
        .values(&values);
    let mut timeline = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
    let hung = vk::SubmitInfo::default()
        .signal_semaphores(&sems)
        .push_next(&mut timeline);
    let later = gpu.fence();
    std::thread::scope(|scope| {
        // Blocked before the hang, on a value only the hung submission would signal.
        let early = scope.spawn(|| {
            // SAFETY: valid semaphore of this device; waiting before the signal is submitted is
            // allowed for timeline semaphores.
            let r = unsafe { d.wait_semaphores(&wait, u64::MAX) };
            (r, Instant::now())
        });
        std::thread::sleep(Duration::from_millis(50));
        let start = Instant::now();
        // SAFETY: valid objects of this device.
        unsafe {
            assert_eq!(
                d.queue_submit(gpu.queue, &[hung], probes.fence),
                Ok(()),
                "the hung submission is accepted"
            );
        }
        assert_eq!(
            gpu.submit(later),
            vk::Result::SUCCESS,
            "a submission after the hang"
        );
        // Before the reset: a plain hang, the device is not lost.
        // SAFETY: valid objects of this device.
        unsafe {
            assert_eq!(d.get_fence_status(probes.fence), Ok(false), "NOT_READY");
            assert_eq!(d.get_semaphore_counter_value(probes.timeline), Ok(0));
            assert!(d
                .map_memory(probes.memory, 0, 64, vk::MemoryMapFlags::empty())
                .is_ok());
            d.unmap_memory(probes.memory);
        }
        match api {
            Api::Khr => {
                let (r, got) = khr_reports(&gpu, 0);
                assert_eq!((r, got.len()), (vk::Result::TIMEOUT, 0), "held back");
                let (bin, text) = khr_debug_info(&gpu);
                assert!(bin.is_empty() && text.is_empty(), "{text}");
            }
            _ => {
                let c = ext_counts(&gpu);
                assert_eq!(
                    (
                        c.address_info_count,
                        c.vendor_info_count,
                        c.vendor_binary_size
                    ),
                    (0, 0, 0),
                    "not lost yet: no fault info"
                );
            }
        }
        assert!(
            start.elapsed() < Duration::from_millis(250),
            "the checks before the reset ran late: {:?}",
            start.elapsed()
        );
        // Blocked after the hang: the queue (the hung work is on it) and, with KHR, the report.
        let idle = scope.spawn(|| {
            // SAFETY: the main thread does not use the queue until this thread is joined.
            let r = unsafe { d.queue_wait_idle(gpu.queue) };
            (r, Instant::now())
        });
        let report = (api == Api::Khr).then(|| {
            scope.spawn(|| {
                let got = khr_reports(&gpu, 5_000_000_000);
                (got, Instant::now())
            })
        });
        // SAFETY: a fence of this device.
        let r = unsafe { d.wait_for_fences(&[later], true, 5_000_000_000) };
        check_loss_time(
            "vkWaitForFences on a submission after the hang",
            r,
            start.elapsed(),
        );
        let (r, at) = early.join().unwrap();
        check_loss_time("vkWaitSemaphores begun before the hang", r, at - start);
        let (r, at) = idle.join().unwrap();
        check_loss_time("vkQueueWaitIdle", r, at - start);
        if let Some(report) = report {
            let ((r, got), at) = report.join().unwrap();
            assert_eq!((r, got.len()), (vk::Result::SUCCESS, 1));
            let took = at - start;
            assert!(took >= LOSS_AFTER && took < LOSS_BY, "{took:?}");
            println!(
                "MEASURED vkGetDeviceFaultReportsKHR: the loss report {:.1} ms after the hang",
                took.as_secs_f64() * 1000.0
            );
            check_khr_loss_report(&got[0], 4, label.map(|_| watched_range));
        }
    });
    check_everything_lost(&gpu, &probes);
    match api {
        Api::Khr => {
            let (r, got) = khr_reports(&gpu, 0);
            assert_eq!((r, got.len()), (vk::Result::TIMEOUT, 0), "drained");
            let (bin, text) = khr_debug_info(&gpu);
            check_vendor_binary(&gpu, &bin);
            assert_eq!(
                text,
                "crash drill: watchdog timeout, submission 4 never completed"
            );
        }
        _ => {
            let c = ext_counts(&gpu);
            let n_addr = u32::from(label.is_some());
            assert_eq!((c.address_info_count, c.vendor_info_count), (n_addr, 2));
            let f = ash::ext::device_fault::Device::new(&gpu.instance, &gpu.device)
                .fp()
                .get_device_fault_info_ext;
            let mut addrs = [vk::DeviceFaultAddressInfoEXT::default(); 1];
            let mut vendors = [vk::DeviceFaultVendorInfoEXT::default(); 2];
            let mut bin = vec![0u8; c.vendor_binary_size as usize];
            let mut counts = vk::DeviceFaultCountsEXT {
                address_info_count: 1,
                vendor_info_count: 2,
                vendor_binary_size: bin.len() as u64,
                ..Default::default()
            };
            let mut info = vk::DeviceFaultInfoEXT {
                p_address_infos: addrs.as_mut_ptr(),
                p_vendor_infos: vendors.as_mut_ptr(),
                p_vendor_binary_data: bin.as_mut_ptr().cast(),
                ..Default::default()
            };
            // SAFETY: arrays hold the counts passed.
            let r = unsafe { f(d.handle(), &mut counts, &mut info) };
            assert_eq!(r, vk::Result::SUCCESS);
            assert_eq!(
                (counts.address_info_count, counts.vendor_info_count),
                (n_addr, 2)
            );
            let desc = info.description_as_c_str().unwrap().to_string_lossy();
            assert!(
                desc.contains("watchdog timeout") && desc.contains("reset 300 ms later"),
                "{desc}"
            );
            let codes: Vec<_> = vendors.iter().map(|v| v.vendor_fault_code).collect();
            assert_eq!(
                codes,
                [4, 7],
                "watchdog timeout, then device lost after reset"
            );
            for (v, words) in vendors
                .iter()
                .zip(["watchdog timeout", "device lost after GPU reset"])
            {
                let text = v.description_as_c_str().unwrap().to_string_lossy();
                assert!(text.contains(words), "{text}");
            }
            assert_eq!(vendors[1].vendor_fault_data, 300, "the reset delay");
            check_vendor_binary(&gpu, &bin);
            if label.is_some() {
                assert!(desc.contains("watched"), "{desc}");
                let a = addrs[0];
                check_address(
                    "in-bounds",
                    a.address_type,
                    a.reported_address,
                    a.address_precision,
                    4096,
                    watched_range,
                );
            }
        }
    }
}

/// `hang-in-pass:drill pass` with `after-hang:300@watched` (AFTER=2, KHR): the hung work is in the
/// driver, and the queue's idle wait ends with the loss.
fn case_hang_in_pass_then_loss() {
    use std::time::{Duration, Instant};
    watchdog(30);
    let gpu = Gpu::new(Api::Khr, true);
    let (watched, _mem) = gpu.buffer(10_000, Some("watched"));
    let (_other, _other_mem) = gpu.buffer(3000, Some("other"));
    let watched_range = gpu.reported_range(watched.as_raw());
    gpu.submit_ok(2);
    let hung = gpu.begin();
    gpu.label_begin(hung, "drill pass");
    gpu.label_end(hung);
    gpu.end(hung);
    let fence = gpu.fence();
    let start = Instant::now();
    assert_eq!(gpu.submit_cb(hung, fence), vk::Result::SUCCESS);
    let d = &gpu.device;
    // Before the reset: hung, not lost, and the watchdog report is held back.
    assert_eq!(gpu.wait(fence, 100_000_000), vk::Result::TIMEOUT);
    let (r, got) = khr_reports(&gpu, 0);
    assert_eq!((r, got.len()), (vk::Result::TIMEOUT, 0), "held back");
    assert!(
        start.elapsed() < Duration::from_millis(250),
        "the checks before the reset ran late: {:?}",
        start.elapsed()
    );
    // SAFETY: valid queue; nothing else uses it.
    let r = unsafe { d.queue_wait_idle(gpu.queue) };
    check_loss_time("vkQueueWaitIdle on the hung queue", r, start.elapsed());
    // SAFETY: valid device.
    assert_eq!(
        unsafe { d.device_wait_idle() },
        Err(vk::Result::ERROR_DEVICE_LOST)
    );
    assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::ERROR_DEVICE_LOST);
    let (r, got) = khr_reports(&gpu, 0);
    assert_eq!((r, got.len()), (vk::Result::SUCCESS, 1));
    check_khr_loss_report(&got[0], 5, Some(watched_range));
    let (bin, text) = khr_debug_info(&gpu);
    check_vendor_binary(&gpu, &bin);
    assert_eq!(text, "crash drill: watchdog timeout in pass \"drill pass\"");
}

/// Writes an aim file the way a tool should: to a temporary file, then renamed into place, so the
/// layer never reads half a line.
fn write_aim(content: &str) {
    let path = std::path::PathBuf::from(std::env::var("GPU_CRASH_DRILL_AIM").unwrap());
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

/// The fault the layer reports through `vkGetDeviceFaultInfoEXT`: its address and description.
fn ext_fault(gpu: &Gpu) -> (vk::DeviceFaultAddressInfoEXT, String) {
    let f = ash::ext::device_fault::Device::new(&gpu.instance, &gpu.device)
        .fp()
        .get_device_fault_info_ext;
    let mut addrs = [vk::DeviceFaultAddressInfoEXT::default(); 1];
    let mut vendors = [vk::DeviceFaultVendorInfoEXT::default(); 1];
    let mut counts = vk::DeviceFaultCountsEXT {
        address_info_count: 1,
        vendor_info_count: 1,
        ..Default::default()
    };
    let mut info = vk::DeviceFaultInfoEXT {
        p_address_infos: addrs.as_mut_ptr(),
        p_vendor_infos: vendors.as_mut_ptr(),
        ..Default::default()
    };
    // SAFETY: the arrays hold the counts passed.
    let r = unsafe { f(gpu.device.handle(), &mut counts, &mut info) };
    assert_eq!(r, vk::Result::SUCCESS);
    assert_eq!(counts.address_info_count, 1);
    let desc = info.description_as_c_str().unwrap().to_string_lossy();
    (addrs[0], desc.into_owned())
}

fn case_aim(scenario: &str) {
    let gpu = Gpu::new(Api::Ext, false);
    let (keep, keep_mem) = gpu.buffer(3000, Some("keep"));
    let (slab, slab_mem) = gpu.buffer(10_000, Some("slab"));
    if scenario.starts_with("use-after-free") {
        gpu.destroy(keep, keep_mem);
        gpu.destroy(slab, slab_mem);
    }
    // Past the threshold (2) with every target there, but no aim file: nothing fires.
    gpu.submit_ok(5);
    write_aim("slab@0x1e0\n");
    let (base, _) = gpu.reported_range(slab.as_raw());
    assert_eq!(
        gpu.submit(vk::Fence::null()),
        vk::Result::ERROR_DEVICE_LOST,
        "the first submission after the aim file was written"
    );
    let (addr, desc) = ext_fault(&gpu);
    assert_eq!(
        (addr.reported_address, addr.address_precision),
        (base + 0x1e0, 1),
        "{desc}"
    );
    assert!(desc.contains("\"slab\""), "{desc}");
}

fn case_aim_fixed() {
    let gpu = Gpu::new(Api::Ext, false);
    let (_slab, _slab_mem) = gpu.buffer(10_000, Some("slab"));
    gpu.submit_ok(3);
    write_aim("");
    gpu.submit_ok(1);
    write_aim("@0x10\n");
    gpu.submit_ok(2);
    // Taken at submission 7, though no object has that name yet.
    write_aim("ghost@0x10\n");
    gpu.submit_ok(1);
    // The aim is fixed: an existing target named later changes nothing.
    write_aim("slab@0x1e0\n");
    gpu.submit_ok(2);
    let (ghost, _ghost_mem) = gpu.buffer(4096, Some("ghost"));
    let (base, _) = gpu.reported_range(ghost.as_raw());
    assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::ERROR_DEVICE_LOST);
    let (addr, desc) = ext_fault(&gpu);
    assert_eq!(addr.reported_address, base + 0x10, "{desc}");
    assert!(desc.contains("\"ghost\""), "{desc}");
}

fn case_passthrough() {
    let gpu = Gpu::new(Api::Ext, false);
    for _ in 0..3 {
        let (b, m) = gpu.buffer(1000, None);
        gpu.destroy(b, m);
    }
    let (_live, _mem) = gpu.buffer(1000, None);
    gpu.submit_ok(40);
    // SAFETY: valid device.
    unsafe { gpu.device.device_wait_idle() }.unwrap();
    let c = no_fault_counts(&gpu);
    assert_eq!((c.address_info_count, c.vendor_info_count), (0, 0));
}

fn case_no_extensions() {
    let gpu = Gpu::new(Api::None, false);
    let (b, m) = gpu.buffer(1000, Some("x"));
    assert!(
        gpu.binding_messages().is_empty(),
        "no reports without the extension"
    );
    // SAFETY: valid device and name.
    let f = unsafe {
        gpu.instance
            .get_device_proc_addr(gpu.device.handle(), c"vkGetDeviceFaultInfoEXT".as_ptr())
    };
    assert!(f.is_none(), "fault entry point of a disabled extension");
    // The fault still fires (it needs no extension): the application sees the loss.
    gpu.submit_ok(2);
    assert_eq!(gpu.submit(vk::Fence::null()), vk::Result::ERROR_DEVICE_LOST);
    gpu.destroy(b, m);
}
