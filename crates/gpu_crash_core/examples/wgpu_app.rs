//! A plain wgpu application (no Bevy, no window): a particle simulation in a compute shader, its
//! device created through `gpu_crash_core`, so a GPU crash becomes a report naming its own labelled
//! buffers.
//!
//! Each frame it dispatches the simulation over `particle_positions_v<N>` inside a GPU breadcrumb,
//! and every 20 frames grows the particle buffer: a new, larger `particle_positions_v<N+1>` is made
//! and the old one destroyed (as an engine's resize does). Under the crash drill
//! (`GPU_CRASH_DRILL=use-after-free:particle_positions_v1`) the GPU faults on the freed buffer and
//! the report says so:
//!
//! ```sh
//! cargo xtask layer-manifest target/drill-layer
//! VK_LAYER_PATH=$PWD/target/drill-layer VK_INSTANCE_LAYERS=VK_LAYER_gpu_crash_drill \
//! GPU_CRASH_DRILL=use-after-free:particle_positions_v1 GPU_CRASH_DRILL_AFTER=60 \
//! cargo run -p gpu_crash_core --example wgpu_app
//! ```
//!
//! Exit code: 0 after its frames (200, or `WGPU_APP_FRAMES`), 1 after a device loss (the report written and, with `SENTRY_DSN`
//! set, uploaded). The report folder is `GPU_CRASH_REPORT_DIR`, else the user's data folder.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use gpu_crash_core::{CrashReporter, Mark, ReporterSettings};

/// Frames the application runs when nothing crashes, unless `WGPU_APP_FRAMES` says otherwise.
const FRAMES: u32 = 200;
/// Particles per buffer generation, times the generation.
const PARTICLES: u64 = 4096;

const SIMULATION: &str = r#"
@group(0) @binding(0) var<storage, read_write> positions: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&positions)) {
        let p = positions[id.x];
        positions[id.x] = vec4<f32>(p.xyz + vec3<f32>(0.0, -0.01, 0.0), p.w + 1.0);
    }
}
"#;

fn main() {
    let frames = std::env::var("WGPU_APP_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(FRAMES);
    let reporter = match CrashReporter::start(&ReporterSettings {
        application_name: Some("wgpu_app".into()),
        application_version: env!("CARGO_PKG_VERSION").into(),
        ..ReporterSettings::default()
    }) {
        Ok(reporter) => reporter,
        Err(err) => {
            eprintln!("wgpu_app: no crash reporter: {err}");
            std::process::exit(2);
        }
    };
    let instance = reporter.create_instance(wgpu::InstanceDescriptor::new_without_display_handle());
    let Ok(adapter) = block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
    else {
        eprintln!(
            "wgpu_app: no GPU adapter (install a Vulkan driver; without a GPU: apt-get install \
             mesa-vulkan-drivers libvulkan1)"
        );
        std::process::exit(2);
    };
    let (device, queue) = match block_on(reporter.request_device(
        &adapter,
        &wgpu::DeviceDescriptor {
            label: Some("wgpu_app device"),
            ..Default::default()
        },
    )) {
        Ok(pair) => pair,
        Err(err) => {
            eprintln!("wgpu_app: no device: {err}");
            std::process::exit(2);
        }
    };
    match reporter.capabilities() {
        Some(capabilities) => println!("wgpu_app: {}", capabilities.summary()),
        None => println!("wgpu_app: not on Vulkan; GPU crashes are not reported"),
    }
    // wgpu's device-lost callback goes to the reporter; the application still wants to stop.
    let lost = Arc::new(AtomicBool::new(false));
    let lost_seen = lost.clone();
    let callback_reporter = reporter.clone();
    device.set_device_lost_callback(move |reason, message| {
        if reason == wgpu::DeviceLostReason::Unknown {
            callback_reporter.device_lost(&message);
            // Release: the frame loop (Acquire) stops after the report was handed off.
            lost_seen.store(true, Ordering::Release);
        }
    });

    // wgpu's default handler panics on any error, a submit to the lost device included: log them.
    device.on_uncaptured_error(Arc::new(|error: wgpu::Error| {
        eprintln!("wgpu_app: wgpu error: {error}");
    }));

    let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("particle simulation"),
        source: wgpu::ShaderSource::Wgsl(SIMULATION.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("particle simulation"),
        layout: None,
        module: &shader,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let _terrain = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("terrain_heightmap"),
        size: 1 << 20,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let mut generation = 1;
    let mut particles = particle_buffer(&device, generation);
    let breadcrumbs = reporter.breadcrumbs();

    for frame in 1..=frames {
        reporter.frame_tick(u64::from(frame));
        if frame % 20 == 0 {
            // Grow: the new buffer first, then the old one goes (an engine's resize).
            generation += 1;
            let old = std::mem::replace(&mut particles, particle_buffer(&device, generation));
            old.destroy();
        }
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("particle bind group"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: particles.as_entire_binding(),
            }],
        });
        reporter.begin_gpu_frame();
        let mut buffers = Vec::with_capacity(3);
        buffers.extend(breadcrumbs.command_buffer(
            &device,
            "particle simulation",
            None,
            Mark::Begin,
            true,
        ));
        let mut encoder = device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("particle simulation"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(((PARTICLES * generation) / 64) as u32, 1, 1);
        }
        buffers.push(encoder.finish());
        buffers.extend(breadcrumbs.command_buffer(
            &device,
            "particle simulation",
            None,
            Mark::End,
            true,
        ));
        reporter.frame_submitting();
        queue.submit(buffers);
        reporter.frame_submitted(&queue);
        // Acquire: pairs with the callback's Release. wgpu learns of a loss at the submit; polling
        // a lost device panics (wgpu treats it as fatal), so the loss is checked first.
        if !lost.load(Ordering::Acquire) {
            let _ = device.poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(Duration::from_secs(10)),
            });
        }
        if lost.load(Ordering::Acquire) {
            // The report and its upload finish (bounded), its verdict and path are the last lines
            // on stderr, and the process ends without exit handlers (they would tear the driver
            // down under threads still inside it).
            reporter.wait_for_reports();
            reporter.end_process(1);
        }
    }
    println!("wgpu_app: {frames} frames, no GPU crash");
    reporter.at_exit();
    reporter.detach();
}

/// Particle buffer generation `generation`, labelled with it.
fn particle_buffer(device: &wgpu::Device, generation: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(&format!("particle_positions_v{generation}")),
        size: PARTICLES * generation * 16,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    })
}

/// wgpu's native futures are ready at once or soon: poll until they are.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::yield_now();
    }
}
