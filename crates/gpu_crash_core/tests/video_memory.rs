//! Video memory at the fault, end to end on lavapipe through the real Vulkan loader and the crash
//! drill layer: a wgpu application on the core (this test binary, run again as a child) whose own
//! raw Vulkan allocator asks for 1 TiB, which lavapipe refuses, then loses its device (or hangs)
//! under the drill. The report carries each heap's size, usage and budget and the refused
//! allocation; with the drill's budget cut to 1 MiB (`GPU_CRASH_DRILL_MEMORY_BUDGET`) the report
//! notes the heap near its budget.
//!
//! lavapipe (Mesa 22.3.6) offers neither `VK_EXT_memory_budget` nor `VK_EXT_device_memory_report`:
//! the drill layer provides both (usage = what this process allocated through it; the refusal is
//! lavapipe's own, reported by the layer). The loader reads its environment once per process, so
//! each case is a child process.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use ash::vk;
use gpu_crash_core::report::{html_page, read_report, CrashKind, CrashReport, VideoMemory};
use gpu_crash_core::{CrashReporter, OnHang, ReporterSettings};

const CHILD_ENV: &str = "VIDEO_MEMORY_CHILD";
const LAVAPIPE_ICD: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";
/// What the child's own allocator asks for: lavapipe refuses it (`VK_ERROR_OUT_OF_DEVICE_MEMORY`).
const REFUSED: u64 = 1 << 40;
/// The drill's budget per heap in the near-budget cases: the child's buffers alone pass it.
const SMALL_BUDGET: &str = "1048576";
/// The child's buffer dropped at frame 3, the drill's use-after-free's target.
const VICTIM: &str = "streamed_chunk";

#[path = "../../gpu_crash_drill_layer/src/manifest.rs"]
#[allow(dead_code)]
mod manifest;

/// The drill layer's manifest folder, built once per test binary: `cargo build` of this
/// workspace's layer, its library copied into a folder of this test's own at once (other
/// checkouts may build into the same target folder: the library there is whichever build came
/// last) and checked to be a layer that knows `GPU_CRASH_DRILL_MEMORY_BUDGET`.
fn drill_layer_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "gpu_crash_drill_layer",
                "--message-format=json",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run cargo build");
        assert!(output.status.success(), "building the drill layer failed");
        let built = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact")
            .filter(|m| m["target"]["name"] == "gpu_crash_drill_layer")
            .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
            .filter_map(|f| f.as_str().map(PathBuf::from))
            .find(|f| f.file_name() == Some(manifest::library_file_name().as_ref()))
            .expect("cargo names the layer's library");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("video-memory-drill-layer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join(manifest::library_file_name());
        std::fs::copy(&built, &lib).expect("copy the layer");
        let bytes = std::fs::read(&lib).unwrap();
        assert!(
            bytes
                .windows(b"GPU_CRASH_DRILL_MEMORY_BUDGET".len())
                .any(|w| w == b"GPU_CRASH_DRILL_MEMORY_BUDGET"),
            "{} is another checkout's layer (built into the same target folder meanwhile); run again",
            built.display()
        );
        manifest::write_manifest(&dir, &lib).expect("write the manifest");
        dir
    })
}

/// Runs the child under `drill` with `env`; returns its output, log and the reports it wrote.
fn drilled(name: &str, drill: &str, env: &[(&str, &str)]) -> (Output, String, Vec<CrashReport>) {
    assert!(
        Path::new(LAVAPIPE_ICD).is_file(),
        "{LAVAPIPE_ICD} is missing (apt-get install mesa-vulkan-drivers libvulkan1)"
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("video-memory-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    let reports_dir = dir.join("reports");
    // lavapipe's window-system probe wants one (it says so on stderr otherwise).
    let runtime = dir.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child", "--ignored", "--nocapture"])
        .env(CHILD_ENV, "1")
        .env("VK_DRIVER_FILES", LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", LAVAPIPE_ICD)
        .env("VK_LAYER_PATH", drill_layer_dir())
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_gpu_crash_drill")
        .env("GPU_CRASH_DRILL", drill)
        .env("GPU_CRASH_DRILL_AFTER", "20")
        .env("GPU_CRASH_REPORT_DIR", &reports_dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("GPU_CRASH_DRILL_MEMORY_BUDGET")
        .env_remove("SENTRY_DSN");
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().expect("run the child");
    let log = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let reports = std::fs::read_dir(&reports_dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .map(|p| read_report(&p).unwrap())
                .collect()
        })
        .unwrap_or_default();
    (output, log, reports)
}

/// The one report of a run, and its video memory section.
fn only(reports: &[CrashReport], log: &str) -> (CrashReport, VideoMemory) {
    assert_eq!(reports.len(), 1, "one report: {log}");
    let report = reports[0].clone();
    let memory = report
        .video_memory
        .clone()
        .unwrap_or_else(|| panic!("no video memory in the report: {log}"));
    (report, memory)
}

/// What every report of the child says: the budget told (the layer's), the one refused allocation.
fn assert_told_and_refused(report: &CrashReport, memory: &VideoMemory, log: &str) {
    assert!(report.gpu.memory_budget, "VK_EXT_memory_budget on: {log}");
    assert!(report.gpu.device_memory_report, "memory report on: {log}");
    assert!(memory.budget_known && memory.notes.is_empty(), "{memory:?}");
    assert!(!memory.heaps.is_empty());
    let heap = &memory.heaps[0];
    assert!(heap.device_local, "lavapipe's one heap says device-local");
    assert!(
        heap.usage.unwrap() > 0,
        "the child's buffers are in use: {memory:?}"
    );
    let failures = memory.allocation_failures.as_ref().expect("counted");
    assert_eq!(failures.count, 1, "{memory:?}");
    let last = failures.last.as_ref().unwrap();
    assert_eq!(
        (last.size, last.object_type.as_str()),
        (REFUSED, "DEVICE_MEMORY")
    );
    assert!(
        memory
            .failures_line()
            .starts_with("1 allocation(s) failed since the device was made; the last: 1024.0 GiB"),
        "{}",
        memory.failures_line()
    );
}

fn near_notes(report: &CrashReport) -> Vec<&String> {
    report
        .notes
        .iter()
        .filter(|n| n.starts_with("video memory near the budget: "))
        .collect()
}

#[test]
fn a_drilled_loss_reports_each_heap_its_budget_and_the_refused_allocation() {
    let (output, log, reports) = drilled("loss", &format!("use-after-free:{VICTIM}"), &[]);
    assert_eq!(output.status.code(), Some(1), "ends on the loss: {log}");
    let (report, memory) = only(&reports, &log);
    assert_eq!(report.kind, CrashKind::DeviceLost, "{log}");
    let culprit = report.faults.first().and_then(|f| f.culprit.as_ref());
    assert_eq!(
        culprit.and_then(|c| c.name.as_deref()),
        Some(VICTIM),
        "{log}"
    );
    assert_told_and_refused(&report, &memory, &log);
    for heap in &memory.heaps {
        assert_eq!(
            heap.budget,
            Some(heap.size),
            "the budget is the heap: {memory:?}"
        );
        assert!(!heap.near_budget, "{memory:?}");
    }
    assert!(!memory.near_budget);
    assert!(near_notes(&report).is_empty(), "{:?}", report.notes);
}

#[test]
fn a_drilled_loss_past_95_percent_of_the_budget_says_so() {
    let (output, log, reports) = drilled(
        "loss-near",
        &format!("use-after-free:{VICTIM}"),
        &[("GPU_CRASH_DRILL_MEMORY_BUDGET", SMALL_BUDGET)],
    );
    assert_eq!(output.status.code(), Some(1), "ends on the loss: {log}");
    let (report, memory) = only(&reports, &log);
    assert_eq!(report.kind, CrashKind::DeviceLost, "{log}");
    assert_told_and_refused(&report, &memory, &log);
    let heap = &memory.heaps[0];
    assert_eq!(heap.budget, Some(1 << 20));
    assert!(heap.near_budget && memory.near_budget, "{memory:?}");
    let notes = near_notes(&report);
    assert_eq!(notes.len(), 1, "{:?}", report.notes);
    assert!(
        notes[0].starts_with("video memory near the budget: heap 0 (device-local, ")
            && notes[0].contains(" used of a 1.0 MiB budget (")
            && notes[0].contains("%), over it: "),
        "{}",
        notes[0]
    );
    let page = html_page(&report);
    assert!(page.contains("<h3>Video memory at the fault</h3>"));
    assert!(page.contains("<span class=\"verdict-tag\">near the budget</span>"));
}

#[test]
fn a_drilled_hang_reports_video_memory_too() {
    let (output, log, reports) = drilled(
        "hang",
        "hang",
        &[("GPU_CRASH_DRILL_MEMORY_BUDGET", SMALL_BUDGET)],
    );
    assert_eq!(
        output.status.code(),
        Some(OnHang::DEFAULT_EXIT_CODE),
        "ends after the hang report: {log}"
    );
    let (report, memory) = only(&reports, &log);
    assert_eq!(report.kind, CrashKind::GpuHang, "{log}");
    assert_told_and_refused(&report, &memory, &log);
    assert!(memory.near_budget, "{memory:?}");
    assert_eq!(near_notes(&report).len(), 1, "{:?}", report.notes);
}

/// The child: a wgpu application on the core. Its own raw Vulkan allocator asks for [`REFUSED`]
/// bytes once; then each frame it clears a 4 MiB buffer, and at frame 3 drops [`VICTIM`], until the
/// drill loses the device (exit 1) or hangs the GPU (the reporter ends it, exit 75).
#[test]
#[ignore = "child process of the tests above"]
fn child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let reporter = CrashReporter::start(&ReporterSettings {
        application_name: Some("video_memory_child".into()),
        hang_timeout: Duration::from_secs(1),
        loss_wait_after_hang: Duration::ZERO,
        ..ReporterSettings::default()
    })
    .expect("reporter");
    let instance = reporter.create_instance(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter = block_on(instance.request_adapter(&Default::default())).expect("adapter");
    let (device, queue) =
        block_on(reporter.request_device(&adapter, &Default::default())).expect("device");
    device.on_uncaptured_error(std::sync::Arc::new(|e: wgpu::Error| {
        eprintln!("child: wgpu error: {e}");
    }));

    // SAFETY: the raw device is only used for one allocation that fails (nothing to free).
    let refused = unsafe {
        let hal = device
            .as_hal::<wgpu::hal::api::Vulkan>()
            .expect("a Vulkan device");
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(REFUSED)
            .memory_type_index(0);
        hal.raw_device().allocate_memory(&info, None)
    };
    assert_eq!(refused, Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY));

    let scratch = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("scratch"),
        size: 4 << 20,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    // Never used by a submission: wgpu destroys it at once when it is dropped. 3 MiB: no later
    // buffer of this child covers all of its freed range again.
    let mut victim = Some(device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(VICTIM),
        size: 3 << 20,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    }));
    for frame in 1..=200u64 {
        reporter.frame_tick(frame);
        if frame == 3 {
            drop(victim.take());
        }
        let mut gpu_frame = reporter.begin_frame(&device, &queue);
        gpu_frame.encode("stream", |encoder| encoder.clear_buffer(&scratch, 0, None));
        gpu_frame.submit();
        if reporter.is_device_lost() {
            reporter.end_process(1);
        }
        let _ = device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: Some(Duration::from_secs(10)),
        });
    }
    println!("child: 200 frames, no GPU crash");
    reporter.at_exit();
    reporter.detach();
}

/// wgpu's native futures are ready at once or soon: poll until they are.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::yield_now();
    }
}
