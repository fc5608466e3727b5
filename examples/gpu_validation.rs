//! GPU validation on real hardware (issue 6): a headless Bevy app that churns labelled GPU buffers and
//! textures like `crash_drill`, then measures what the reporter captured, or really faults the GPU.
//!
//! Modes (first argument, or `GPU_VALIDATION_MODE`):
//!
//! - `capture` (default): run `GPU_VALIDATION_FRAMES` frames (300), then print the binding events
//!   received and dropped, the index stats, the last frames' raw events, the median frame time, and the
//!   fraction of live labelled wgpu buffers/textures (from `generate_allocator_report()`) whose label
//!   the index knows for a live BUFFER/IMAGE range, before and after `allocator_names::learn_names`
//!   (which the crash path runs). The last line is `GPU_VALIDATION_RESULT {json}`.
//! - `real-fault`: after `GPU_VALIDATION_FAULT_FRAME` frames (60) the render thread creates a raw
//!   `VkBuffer` named `gpu_validation_victim` (2 MiB, own memory), binds it to a compute shader
//!   through a storage-buffer descriptor, destroys the buffer, frees its memory and submits a dispatch
//!   that writes all 2 MiB. On the NVIDIA H200 (FACTS) that faults the MMU and the fence never
//!   signals: the plugin's watchdog (`GPU_VALIDATION_HANG_TIMEOUT_MS`, 3000) must write a `gpu_hang`
//!   report naming the victim and exit with code 3. Memory is freed only on NVIDIA unless
//!   `GPU_VALIDATION_FAULT_FREE=1` (on a CPU driver the "GPU" write lands in freed heap memory).
//!   If no hang is seen within `2 * hang_timeout + 3 s`, it prints `no hang` and exits 0.
//!
//! `--no-plugin` (or `GPU_VALIDATION_NO_PLUGIN=1`) runs the same workload without the plugin, for the
//! overhead ratio. Always run under `timeout -s KILL`: a hung GPU can block process teardown.

#[path = "support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bevy::ecs::system::SystemState;
use bevy::prelude::*;
use bevy::render::render_resource::{BufferDescriptor, BufferUsages};
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::{Render, RenderApp, RenderSystems};
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{
    GpuBreadcrumbs, GpuCrashCapabilities, GpuCrashReporter, GpuCrashReporterPlugin, OnHang,
};
use gpu_crash_core::test_support::{allocator_names, AddressIndex};

/// `examples/gpu_validation_shaders/write_storage.spvasm`, assembled with
/// `spirv-as --target-env vulkan1.0` (both committed; `scripts/gpu-validation.sh` re-assembles).
const WRITE_STORAGE_SPV: &[u8] = include_bytes!("gpu_validation_shaders/write_storage.spv");

/// Name of the buffer the real-fault mode frees while the GPU still uses it.
const VICTIM: &str = "gpu_validation_victim";
const VICTIM_SIZE: u64 = 2 * 1024 * 1024;
/// The breadcrumb around the faulting compute dispatch.
const FAULTING_PASS: &str = "gpu_validation: victim write (compute)";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Capture,
    RealFault,
}

#[derive(Resource, Clone)]
struct Config {
    mode: Mode,
    plugin: bool,
    frames: u32,
    fault_frame: u64,
    hang_timeout: Duration,
    free_memory: Option<bool>,
    /// Extra labelled buffers created and freed per frame (`GPU_VALIDATION_CHURN`, default 0).
    churn: u32,
    /// Real-fault mode ends (exit 0) this long after the injection when no report ended it first.
    deadline: Duration,
    /// Where capture mode writes the live ranges and allocator blocks (`GPU_VALIDATION_DUMP`).
    dump: Option<std::path::PathBuf>,
    /// Capture mode blocks the main thread this long at frame 60 (`GPU_VALIDATION_PAUSE_S`): a
    /// healthy pause (a loading hitch, a debugger stop), which must never be reported as a hang.
    pause: Duration,
}

fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config() -> Config {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode_name = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .or_else(|| std::env::var("GPU_VALIDATION_MODE").ok())
        .unwrap_or_else(|| "capture".into());
    let mode = match mode_name.as_str() {
        "capture" => Mode::Capture,
        "real-fault" => Mode::RealFault,
        other => {
            eprintln!("gpu_validation: unknown mode `{other}` (capture | real-fault)");
            std::process::exit(2);
        }
    };
    let no_plugin = args.iter().any(|a| a == "--no-plugin")
        || std::env::var("GPU_VALIDATION_NO_PLUGIN").is_ok_and(|v| v == "1");
    let hang_timeout = Duration::from_millis(env_num("GPU_VALIDATION_HANG_TIMEOUT_MS", 3000u64));
    Config {
        mode,
        plugin: !no_plugin,
        frames: env_num("GPU_VALIDATION_FRAMES", 300u32),
        fault_frame: env_num("GPU_VALIDATION_FAULT_FRAME", 60u64),
        hang_timeout,
        free_memory: std::env::var("GPU_VALIDATION_FAULT_FREE")
            .ok()
            .map(|v| v == "1"),
        churn: env_num("GPU_VALIDATION_CHURN", 0u32),
        deadline: std::env::var("GPU_VALIDATION_DEADLINE_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_secs)
            .unwrap_or(hang_timeout * 2 + Duration::from_secs(3)),
        dump: std::env::var_os("GPU_VALIDATION_DUMP").map(Into::into),
        pause: Duration::from_secs(env_num("GPU_VALIDATION_PAUSE_S", 0u64)),
    }
}

fn main() -> AppExit {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // SAFETY (process-global, but no other thread exists yet).
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let config = config();
    eprintln!(
        "gpu_validation: mode {:?}, plugin {}, frames {}, hang timeout {:?}",
        config.mode, config.plugin, config.frames, config.hang_timeout
    );
    let mut app = App::new();
    if config.plugin {
        app.add_plugins(GpuCrashReporterPlugin {
            settings: ReporterSettings {
                hang_timeout: config.hang_timeout,
                on_hang: OnHang::Exit(3),
                application_name: Some("gpu_validation".into()),
                application_version: env!("CARGO_PKG_VERSION").into(),
                ..default()
            },
            ..default()
        });
    }
    support::headless_vulkan(&mut app)
        .insert_resource(config.clone())
        .init_resource::<FrameTimes>()
        .add_systems(Update, churn_gpu_resources)
        .add_systems(Last, (record_frame_time, finish).chain());
    if config.mode == Mode::RealFault {
        let fault = FaultState::default();
        app.insert_resource(fault.clone());
        if let Some(render_app) = app.get_sub_app_mut(RenderApp) {
            render_app
                .insert_resource(config.clone())
                .insert_resource(fault)
                .add_systems(
                    Render,
                    inject_real_fault
                        .in_set(RenderSystems::Cleanup)
                        .after(bevy::render::renderer::render_system),
                );
        }
    }
    app.run()
}

#[derive(Resource, Default)]
struct FrameTimes {
    last: Option<Instant>,
    deltas_us: Vec<u64>,
    start: Option<Instant>,
}

/// crash_drill's workload (the same objects, so the two runs are comparable) plus `config.churn`
/// extra buffers per frame for the overhead measurement.
fn churn_gpu_resources(
    device: Res<RenderDevice>,
    config: Res<Config>,
    mut workload: Local<support::DrillWorkload>,
) {
    workload.frame(&device, |device, freed_next_frame| {
        for i in 0..config.churn {
            freed_next_frame.push(device.create_buffer(&BufferDescriptor {
                label: Some(&format!("churn_{i}")),
                size: 4096 * (u64::from(i % 8) + 1),
                usage: BufferUsages::UNIFORM | BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
        }
    });
}

fn record_frame_time(mut times: ResMut<FrameTimes>) {
    let now = Instant::now();
    times.start.get_or_insert(now);
    if let Some(last) = times.last.replace(now) {
        let us = now.duration_since(last).as_micros() as u64;
        times.deltas_us.push(us);
    }
}

/// Median and p90 of the frame deltas after a warm-up of 30 frames, in microseconds.
fn frame_stats(deltas: &[u64]) -> (u64, u64, usize) {
    let mut d: Vec<u64> = deltas.iter().skip(30).copied().collect();
    if d.is_empty() {
        return (0, 0, 0);
    }
    d.sort_unstable();
    (d[d.len() / 2], d[d.len() * 9 / 10], d.len())
}

#[allow(clippy::too_many_arguments)]
fn finish(
    config: Res<Config>,
    times: Res<FrameTimes>,
    mut frame: Local<u32>,
    reporter: Option<Res<GpuCrashReporter>>,
    capabilities: Option<Res<GpuCrashCapabilities>>,
    device: Res<RenderDevice>,
    fault: Option<Res<FaultState>>,
    mut exit: MessageWriter<AppExit>,
) {
    *frame += 1;
    if config.mode == Mode::RealFault {
        // Ends the run when no hang came (the watchdog exits the process with 3 when one does).
        let Some(fault) = fault else { return };
        let Some(at) = *fault.injected_at.lock().unwrap() else {
            return;
        };
        let secs = at.elapsed().as_secs();
        if secs > *fault.heartbeat.lock().unwrap() {
            *fault.heartbeat.lock().unwrap() = secs;
            eprintln!(
                "gpu_validation real-fault: t+{secs} s main-world frame {} (raw fence signalled {})",
                *frame,
                fault.fence_signalled.load(Ordering::Acquire)
            );
        }
        if at.elapsed() > config.deadline {
            let signalled = fault.fence_signalled.load(Ordering::Acquire);
            println!(
                "gpu_validation real-fault: no hang within {:.1} s after the use-after-free dispatch \
                 (raw fence signalled: {signalled}, memory freed: {}); frames {}",
                at.elapsed().as_secs_f64(),
                fault.freed.load(Ordering::Acquire),
                *frame
            );
            println!(
                "GPU_VALIDATION_RESULT {}",
                serde_json::json!({"mode": "real-fault", "hang": false, "raw_fence_signalled": signalled,
                    "memory_freed": fault.freed.load(Ordering::Acquire)})
            );
            // A device that saw a fault may hang in teardown: leave without it.
            std::process::exit(0);
        }
        return;
    }
    if *frame == 60 && !config.pause.is_zero() {
        eprintln!(
            "gpu_validation: pausing the main thread for {} s (no frames)",
            config.pause.as_secs()
        );
        std::thread::sleep(config.pause);
        eprintln!("gpu_validation: pause over");
    }
    if *frame < config.frames {
        return;
    }
    let (median_us, p90_us, n) = frame_stats(&times.deltas_us);
    let wall = times
        .start
        .map(|s| s.elapsed().as_secs_f64())
        .unwrap_or(0.0);
    let mut result = serde_json::json!({
        "mode": "capture",
        "plugin": config.plugin,
        "frames": *frame,
        "median_frame_us": median_us,
        "p90_frame_us": p90_us,
        "timed_frames": n,
        "wall_s": wall,
    });
    println!(
        "gpu_validation: {} frames, plugin {}, median frame {median_us} us, p90 {p90_us} us ({n} frames timed, {wall:.2} s)",
        *frame, config.plugin
    );
    if let (Some(reporter), true) = (reporter, config.plugin) {
        let caps = capabilities.map(|c| (*c).clone()).unwrap_or_default();
        println!("{}", caps.summary());
        let dropped = reporter.binding_events_dropped();
        let report = device.wgpu_device().generate_allocator_report();
        let mut index = gpu_crash_core::test_support::index_of(&reporter);
        let stats = index.stats().clone();
        println!(
            "gpu_validation: binding events {} ({} binds, {} unbinds, {} duplicate binds, {} unmatched unbinds, \
             {} partial unbinds), dropped {dropped}; live ranges {}, freed ranges {}",
            stats.events,
            stats.binds,
            stats.unbinds,
            stats.duplicate_binds,
            stats.unmatched_unbinds,
            stats.partial_unbinds,
            index.live_len(),
            index.freed_len()
        );
        let patterns = event_patterns(&index);
        println!(
            "gpu_validation: last frames' events: {}",
            serde_json::to_string(&patterns).unwrap()
        );
        let (resolved_before, learned, resolved_after) = match &report {
            Some(report) => {
                let before = resolved_fraction(report, &index);
                let blocks = allocator_names::blocks_of(report);
                let live_before = live_table(&index);
                let learned = allocator_names::learn_names(&mut index, &blocks);
                if let Some(path) = &config.dump {
                    let dump = serde_json::json!({
                        "live_before_learn_names": live_before,
                        "live_after_learn_names": live_table(&index),
                        "allocator_blocks": blocks.iter().map(|b| serde_json::json!({
                            "size": b.size,
                            "allocations": b.allocations.iter().map(|(n, o, s)| serde_json::json!([n, format!("{o:#x}"), s])).collect::<Vec<_>>(),
                        })).collect::<Vec<_>>(),
                        "recent_events": index.recent_events().map(|e| serde_json::json!([
                            e.sequence, e.frame, format!("{:?}", e.kind),
                            gpu_crash_core::test_support::object_type_name(e.object_type),
                            format!("{:#x}", e.handle), format!("{:#x}", e.base), e.size, e.name, e.internal
                        ])).collect::<Vec<_>>(),
                    });
                    if let Err(err) =
                        std::fs::write(path, serde_json::to_string_pretty(&dump).unwrap())
                    {
                        eprintln!("gpu_validation: cannot write {}: {err}", path.display());
                    }
                }
                let after = resolved_fraction(report, &index);
                (Some(before), learned, Some(after))
            }
            None => (None, 0, None),
        };
        for (when, r) in [("before", &resolved_before), ("after", &resolved_after)] {
            if let Some(r) = r {
                println!(
                    "gpu_validation: resolved {when} learn_names: {}/{} labelled live allocations ({:.1}%); unresolved: {:?}",
                    r["resolved"], r["labelled"], r["percent"].as_f64().unwrap_or(0.0), r["unresolved"]
                );
            }
        }
        result["gpu"] = serde_json::json!({
            "name": caps.gpu_name, "driver": caps.driver_info, "driver_version": caps.driver_version,
            "api": caps.api_version, "binding_report": caps.address_binding_report,
            "device_fault_ext": caps.device_fault_ext, "debug_utils": caps.debug_utils,
            "vendor_binary": caps.device_fault_vendor_binary,
        });
        result["events"] = serde_json::to_value(&stats).unwrap();
        result["dropped"] = dropped.into();
        result["live_ranges"] = index.live_len().into();
        result["freed_ranges"] = index.freed_len().into();
        result["resolved_before_learn_names"] = resolved_before.unwrap_or_default();
        result["names_learned"] = learned.into();
        result["resolved_after_learn_names"] = resolved_after.unwrap_or_default();
        result["event_patterns"] = patterns;
    }
    println!("GPU_VALIDATION_RESULT {result}");
    exit.write(AppExit::Success);
}

/// Events of the last two frames in the index's recent history, plus counts by kind/type/name.
fn event_patterns(index: &AddressIndex) -> serde_json::Value {
    let last_frame = index.recent_events().map(|e| e.frame).max().unwrap_or(0);
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    let mut named = 0u64;
    let mut internal = 0u64;
    let total = index.recent_events().len() as u64;
    for e in index.recent_events() {
        let key = format!(
            "{:?} {}",
            e.kind,
            gpu_crash_core::test_support::object_type_name(e.object_type)
        );
        *counts.entry(key).or_default() += 1;
        named += u64::from(e.name.is_some());
        internal += u64::from(e.internal);
    }
    let last: Vec<_> = index
        .recent_events()
        .filter(|e| e.frame + 1 >= last_frame)
        .take(40)
        .map(|e| {
            serde_json::json!({
                "seq": e.sequence, "frame": e.frame, "kind": format!("{:?}", e.kind),
                "type": gpu_crash_core::test_support::object_type_name(e.object_type),
                "handle": format!("{:#x}", e.handle), "base": format!("{:#x}", e.base),
                "size": e.size, "name": e.name, "internal": e.internal,
            })
        })
        .collect();
    serde_json::json!({"recent": total, "by_kind_type": counts, "named": named, "internal": internal, "last_frames": last})
}

/// Every live range: `[type, handle, base, size, name, bound_frame]`, sorted by base.
fn live_table(index: &AddressIndex) -> Vec<serde_json::Value> {
    let mut rows: Vec<_> = index.live_bindings().collect();
    rows.sort_by_key(|(base, size, b)| (*base, *size, b.key.handle));
    rows.into_iter()
        .map(|(base, size, b)| {
            serde_json::json!([
                gpu_crash_core::test_support::object_type_name(b.key.object_type),
                format!("{:#x}", b.key.handle),
                format!("{base:#x}"),
                size,
                index.name_of(b.key).map(|n| n.to_string()),
                b.bound_frame
            ])
        })
        .collect()
}

/// Fraction of labelled live wgpu allocations whose label the index has for a live BUFFER/IMAGE
/// (matched as multisets of names: the allocator report gives no handles).
fn resolved_fraction(report: &wgpu::AllocatorReport, index: &AddressIndex) -> serde_json::Value {
    use std::collections::BTreeMap;
    let buffer = ash::vk::ObjectType::BUFFER.as_raw();
    let image = ash::vk::ObjectType::IMAGE.as_raw();
    let mut wanted = BTreeMap::<String, u64>::new();
    let mut unlabelled = 0u64;
    for a in &report.allocations {
        if a.name.is_empty() || a.name.starts_with("Unlabeled") {
            unlabelled += 1;
        } else {
            *wanted.entry(a.name.clone()).or_default() += 1;
        }
    }
    let mut known = BTreeMap::<String, u64>::new();
    let mut live_resources = 0u64;
    let mut live_named = 0u64;
    for (_, _, b) in index.live_bindings() {
        if b.key.object_type == buffer || b.key.object_type == image {
            live_resources += 1;
            if let Some(name) = index.name_of(b.key) {
                live_named += 1;
                *known.entry(name.to_string()).or_default() += 1;
            }
        }
    }
    let labelled: u64 = wanted.values().sum();
    let mut resolved = 0u64;
    let mut unresolved = BTreeMap::<String, u64>::new();
    for (name, &n) in &wanted {
        let k = known.get(name).copied().unwrap_or(0).min(n);
        resolved += k;
        if k < n {
            unresolved.insert(name.clone(), n - k);
        }
    }
    serde_json::json!({
        "labelled": labelled,
        "resolved": resolved,
        "percent": if labelled == 0 { 0.0 } else { 100.0 * resolved as f64 / labelled as f64 },
        "unlabelled_allocations": unlabelled,
        "allocator_blocks": report.blocks.len(),
        "live_buffer_image_ranges": live_resources,
        "live_buffer_image_named": live_named,
        "unresolved": unresolved,
    })
}

/// Shared between the render thread (injects) and the main thread (ends the run without a hang).
#[derive(Resource, Clone, Default)]
struct FaultState {
    injected_at: Arc<std::sync::Mutex<Option<Instant>>>,
    freed: Arc<AtomicBool>,
    fence_signalled: Arc<AtomicBool>,
    fence: Arc<std::sync::Mutex<Option<ash::vk::Fence>>>,
    heartbeat: Arc<std::sync::Mutex<u64>>,
    /// Raw handles of the victim buffer and its memory.
    victim: Arc<std::sync::Mutex<(u64, u64)>>,
}

/// Render world, after the frame's submit, exclusive (nothing else touches the queue meanwhile).
fn inject_real_fault(world: &mut World, mut frame: Local<u64>, mut polls: Local<u32>) {
    *frame += 1;
    let config = world.resource::<Config>().clone();
    let fault = world.resource::<FaultState>().clone();
    let device = world.resource::<RenderDevice>().clone();
    if *frame == config.fault_frame + 2 {
        if let Some(reporter) = world.get_resource::<GpuCrashReporter>() {
            let (buffer, memory) = *fault.victim.lock().unwrap();
            let index = gpu_crash_core::test_support::index_of(reporter);
            for e in index.recent_events().filter(|e| {
                e.handle == buffer
                    || e.handle == memory
                    || e.name.is_some_and(|n| n.contains(VICTIM))
            }) {
                eprintln!(
                    "gpu_validation real-fault: victim event seq {} frame {} {:?} {} handle {:#x} [{:#x}, +{:#x}) name {:?} internal {}",
                    e.sequence, e.frame, e.kind,
                    gpu_crash_core::test_support::object_type_name(e.object_type),
                    e.handle, e.base, e.size, e.name, e.internal
                );
            }
        }
    }
    if let Some(fence) = *fault.fence.lock().unwrap() {
        if !fault.fence_signalled.load(Ordering::Acquire) {
            // SAFETY: the device outlives this call; the fence is ours.
            let hal = unsafe { device.wgpu_device().as_hal::<wgpu::hal::api::Vulkan>() };
            if let Some(hal) = hal {
                let status = unsafe { hal.raw_device().get_fence_status(fence) };
                *polls += 1;
                if status == Ok(true) {
                    fault.fence_signalled.store(true, Ordering::Release);
                    let at = fault.injected_at.lock().unwrap().unwrap();
                    eprintln!(
                        "gpu_validation real-fault: raw fence signalled {} ms after the submit (poll {})",
                        at.elapsed().as_millis(),
                        *polls
                    );
                } else if (*polls).is_power_of_two() || (*polls).is_multiple_of(512) {
                    let at = fault.injected_at.lock().unwrap().unwrap();
                    eprintln!(
                        "gpu_validation real-fault: raw fence {:?} {} ms after the submit",
                        status,
                        at.elapsed().as_millis()
                    );
                }
            }
        }
        return;
    }
    if *frame != config.fault_frame {
        return;
    }
    let vendor = world
        .get_resource::<GpuCrashCapabilities>()
        .map(|c| c.vendor_id)
        .unwrap_or(0);
    let free_memory = config.free_memory.unwrap_or(vendor == 0x10de);
    // The faulting dispatch is the game's own GPU work: label it with the public breadcrumb API, so
    // the report says the GPU was inside it. Markers go through wgpu's queue, in order with the raw
    // submit on the same VkQueue.
    let queue = world.resource::<RenderQueue>().clone();
    let mut breadcrumbs = SystemState::<GpuBreadcrumbs>::new(world);
    let breadcrumbs = breadcrumbs
        .get(world)
        .expect("GpuBreadcrumbs has no required resource");
    if let Some(begin) = breadcrumbs.begin_command_buffer(&device, FAULTING_PASS) {
        queue.submit([begin]);
    }
    // SAFETY: raw Vulkan on wgpu's device; every object below is ours, and this exclusive system
    // runs after Bevy's submit, so nothing else uses the queue concurrently.
    let submitted = unsafe { submit_use_after_free(&device, free_memory) };
    if let Some(end) = breadcrumbs.end_command_buffer(&device, FAULTING_PASS) {
        queue.submit([end]);
    }
    match submitted {
        Ok((fence, victim)) => {
            *fault.victim.lock().unwrap() = victim;
            *fault.injected_at.lock().unwrap() = Some(Instant::now());
            *fault.fence.lock().unwrap() = Some(fence);
            fault.freed.store(free_memory, Ordering::Release);
        }
        Err(err) => {
            eprintln!("gpu_validation real-fault: could not inject: {err}");
            println!(
                "GPU_VALIDATION_RESULT {}",
                serde_json::json!({"mode": "real-fault", "error": err})
            );
            std::process::exit(4);
        }
    }
}

unsafe fn submit_use_after_free(
    device: &RenderDevice,
    free_memory: bool,
) -> Result<(ash::vk::Fence, (u64, u64)), String> {
    use ash::vk;
    let hal = device
        .wgpu_device()
        .as_hal::<wgpu::hal::api::Vulkan>()
        .ok_or("not a Vulkan device")?;
    let d = hal.raw_device();
    let shared = hal.shared_instance();
    let instance = shared.raw_instance();
    let e = |what: &str, r: vk::Result| format!("{what}: {r:?}");

    let buffer = d
        .create_buffer(
            &vk::BufferCreateInfo::default()
                .size(VICTIM_SIZE)
                .usage(vk::BufferUsageFlags::STORAGE_BUFFER)
                .sharing_mode(vk::SharingMode::EXCLUSIVE),
            None,
        )
        .map_err(|r| e("vkCreateBuffer", r))?;
    // Named before binding, so the BUFFER BIND event carries the name (FACTS).
    let debug_utils = shared
        .extensions()
        .contains(&ash::ext::debug_utils::NAME)
        .then(|| ash::ext::debug_utils::Device::new(instance, d));
    let cname = std::ffi::CString::new(VICTIM).unwrap();
    if let Some(du) = &debug_utils {
        let _ = du.set_debug_utils_object_name(
            &vk::DebugUtilsObjectNameInfoEXT::default()
                .object_handle(buffer)
                .object_name(&cname),
        );
    }
    let req = d.get_buffer_memory_requirements(buffer);
    let props = instance.get_physical_device_memory_properties(hal.raw_physical_device());
    let type_index = (0..props.memory_type_count)
        .find(|&i| {
            req.memory_type_bits & (1 << i) != 0
                && props.memory_types[i as usize]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        })
        .or_else(|| (0..props.memory_type_count).find(|&i| req.memory_type_bits & (1 << i) != 0))
        .ok_or("no memory type")?;
    let memory = d
        .allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(type_index),
            None,
        )
        .map_err(|r| e("vkAllocateMemory", r))?;
    if let Some(du) = &debug_utils {
        let mem_name = std::ffi::CString::new(format!("{VICTIM}_memory")).unwrap();
        let _ = du.set_debug_utils_object_name(
            &vk::DebugUtilsObjectNameInfoEXT::default()
                .object_handle(memory)
                .object_name(&mem_name),
        );
    }
    d.bind_buffer_memory(buffer, memory, 0)
        .map_err(|r| e("vkBindBufferMemory", r))?;

    let words: Vec<u32> = WRITE_STORAGE_SPV
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let module = d
        .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
        .map_err(|r| e("vkCreateShaderModule", r))?;
    let binding = [vk::DescriptorSetLayoutBinding::default()
        .binding(0)
        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
        .descriptor_count(1)
        .stage_flags(vk::ShaderStageFlags::COMPUTE)];
    let set_layout = d
        .create_descriptor_set_layout(
            &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding),
            None,
        )
        .map_err(|r| e("vkCreateDescriptorSetLayout", r))?;
    let set_layouts = [set_layout];
    let layout = d
        .create_pipeline_layout(
            &vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts),
            None,
        )
        .map_err(|r| e("vkCreatePipelineLayout", r))?;
    let entry = c"main";
    let pipeline = d
        .create_compute_pipelines(
            vk::PipelineCache::null(),
            &[vk::ComputePipelineCreateInfo::default()
                .stage(
                    vk::PipelineShaderStageCreateInfo::default()
                        .stage(vk::ShaderStageFlags::COMPUTE)
                        .module(module)
                        .name(entry),
                )
                .layout(layout)],
            None,
        )
        .map_err(|(_, r)| e("vkCreateComputePipelines", r))?[0];
    let pool_sizes = [vk::DescriptorPoolSize {
        ty: vk::DescriptorType::STORAGE_BUFFER,
        descriptor_count: 1,
    }];
    let pool = d
        .create_descriptor_pool(
            &vk::DescriptorPoolCreateInfo::default()
                .max_sets(1)
                .pool_sizes(&pool_sizes),
            None,
        )
        .map_err(|r| e("vkCreateDescriptorPool", r))?;
    let set = d
        .allocate_descriptor_sets(
            &vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(pool)
                .set_layouts(&set_layouts),
        )
        .map_err(|r| e("vkAllocateDescriptorSets", r))?[0];
    let buffer_info = [vk::DescriptorBufferInfo {
        buffer,
        offset: 0,
        range: vk::WHOLE_SIZE,
    }];
    d.update_descriptor_sets(
        &[vk::WriteDescriptorSet::default()
            .dst_set(set)
            .dst_binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .buffer_info(&buffer_info)],
        &[],
    );
    let cmd_pool = d
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default().queue_family_index(hal.queue_family_index()),
            None,
        )
        .map_err(|r| e("vkCreateCommandPool", r))?;
    let cmd = d
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(cmd_pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1),
        )
        .map_err(|r| e("vkAllocateCommandBuffers", r))?[0];
    d.begin_command_buffer(
        cmd,
        &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
    )
    .map_err(|r| e("vkBeginCommandBuffer", r))?;
    d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
    d.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
    d.cmd_dispatch(cmd, (VICTIM_SIZE / 4 / 64) as u32, 1, 1);
    d.end_command_buffer(cmd)
        .map_err(|r| e("vkEndCommandBuffer", r))?;

    if free_memory {
        // The use-after-free: the descriptor still points at the buffer's GPU address.
        d.destroy_buffer(buffer, None);
        d.free_memory(memory, None);
    }
    let fence = d
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .map_err(|r| e("vkCreateFence", r))?;
    let cmds = [cmd];
    d.queue_submit(
        hal.raw_queue(),
        &[vk::SubmitInfo::default().command_buffers(&cmds)],
        fence,
    )
    .map_err(|r| e("vkQueueSubmit", r))?;
    eprintln!(
        "gpu_validation real-fault: submitted a {} KiB write through a descriptor of buffer \"{VICTIM}\" \
         ({:#x}, memory {:#x}, {}; debug names {})",
        VICTIM_SIZE / 1024,
        ash::vk::Handle::as_raw(buffer),
        ash::vk::Handle::as_raw(memory),
        if free_memory { "destroyed and freed before the submit" } else { "kept alive (not NVIDIA)" },
        debug_utils.is_some()
    );
    // Everything else is leaked on purpose: the process ends on the watchdog's report.
    Ok((
        fence,
        (
            ash::vk::Handle::as_raw(buffer),
            ash::vk::Handle::as_raw(memory),
        ),
    ))
}
