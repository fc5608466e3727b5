//! A plain wgpu renderer written from README's "Without Bevy" section alone: instanced quads drawn
//! into an offscreen target, its own labels, its pass inside a GPU breadcrumb, and README's frame
//! loop, loss and exit included. `tests/wgpu_from_readme.rs` runs it under the crash drill.
//!
//! Every 30 frames the instance buffer grows: `quad_instances_gen<N+1>` is made and the old one
//! destroyed. Under `GPU_CRASH_DRILL=use-after-free:quad_instances_gen1` the GPU faults on the
//! freed buffer; under `GPU_CRASH_DRILL=hang-in-pass:quads main pass` it hangs in the pass.
//!
//! `QUADS_IGNORE_LOSS=1` leaves out the loop's loss check, as many loops do: the next
//! `device.poll` on the lost device panics in wgpu ("Parent device is lost"), and the reporter's
//! panic hook ends the process after the report.
//!
//! Exit code: 0 after its frames (300, or `QUADS_FRAMES`), 1 after a device loss seen by the loop,
//! 101 after a panic on the lost device, 75 after a hang (`OnHang`'s default), 2 without a GPU.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use gpu_crash_core::{CrashReporter, ReporterSettings};

/// Frames rendered when nothing crashes, unless `QUADS_FRAMES` says otherwise.
const FRAMES: u32 = 300;
/// Quads per instance-buffer generation, times the generation.
const QUADS: u64 = 256;
/// Bytes of one instance: offset (2 floats), scale, hue.
const INSTANCE_BYTES: u64 = 16;
const TARGET_SIZE: u32 = 256;

const SHADER: &str = r#"
struct Out {
    @builtin(position) position: vec4<f32>,
    @location(0) color: vec3<f32>,
};

@vertex
fn vs(@builtin(vertex_index) corner: u32, @location(0) offset: vec2<f32>,
      @location(1) scale: f32, @location(2) hue: f32) -> Out {
    let xy = vec2<f32>(f32(corner & 1u), f32(corner >> 1u)) * 2.0 - 1.0;
    var out: Out;
    out.position = vec4<f32>(offset + xy * scale, 0.0, 1.0);
    out.color = vec3<f32>(hue, 1.0 - hue, 0.5);
    return out;
}

@fragment
fn fs(in: Out) -> @location(0) vec4<f32> {
    return vec4<f32>(in.color, 1.0);
}
"#;

fn main() {
    let frames = std::env::var("QUADS_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(FRAMES);
    let check_loss = std::env::var_os("QUADS_IGNORE_LOSS").is_none();
    let reporter = match CrashReporter::start(&ReporterSettings {
        application_name: Some("instanced_quads".into()),
        application_version: env!("CARGO_PKG_VERSION").into(),
        ..ReporterSettings::default()
    }) {
        Ok(reporter) => reporter,
        Err(err) => {
            eprintln!("instanced_quads: no crash reporter: {err}");
            std::process::exit(2);
        }
    };
    let instance = reporter.create_instance(wgpu::InstanceDescriptor::new_without_display_handle());
    let Ok(adapter) = block_on(instance.request_adapter(&Default::default())) else {
        eprintln!("instanced_quads: no GPU adapter");
        std::process::exit(2);
    };
    let (device, queue) = match block_on(reporter.request_device(&adapter, &Default::default())) {
        Ok(pair) => pair,
        Err(err) => {
            eprintln!("instanced_quads: no device: {err}");
            std::process::exit(2);
        }
    };

    let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("quads shader"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let format = wgpu::TextureFormat::Rgba8Unorm;
    let pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("quads pipeline"),
        layout: None,
        vertex: wgpu::VertexState {
            module: &shader,
            entry_point: Some("vs"),
            compilation_options: Default::default(),
            buffers: &[wgpu::VertexBufferLayout {
                array_stride: INSTANCE_BYTES,
                step_mode: wgpu::VertexStepMode::Instance,
                attributes: &wgpu::vertex_attr_array![0 => Float32x2, 1 => Float32, 2 => Float32],
            }],
        },
        fragment: Some(wgpu::FragmentState {
            module: &shader,
            entry_point: Some("fs"),
            compilation_options: Default::default(),
            targets: &[Some(format.into())],
        }),
        primitive: wgpu::PrimitiveState {
            topology: wgpu::PrimitiveTopology::TriangleStrip,
            ..Default::default()
        },
        depth_stencil: None,
        multisample: Default::default(),
        multiview_mask: None,
        cache: None,
    });
    let target = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("quads_target"),
        size: wgpu::Extent3d {
            width: TARGET_SIZE,
            height: TARGET_SIZE,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
        view_formats: &[],
    });
    let target_view = target.create_view(&Default::default());
    let mut generation = 1;
    let mut instances = instance_buffer(&device, &queue, generation);

    for frame in 1..=frames {
        if frame % 30 == 0 {
            // Grow: the new buffer first, then the old one goes (an engine's resize).
            generation += 1;
            let old =
                std::mem::replace(&mut instances, instance_buffer(&device, &queue, generation));
            old.destroy();
        }
        let count = (QUADS * generation) as u32;
        let mut gpu_frame = reporter.begin_frame(&device, &queue);
        gpu_frame.encode("draw quads", |encoder| {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("quads main pass"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &target_view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: None,
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_vertex_buffer(0, instances.slice(..));
            pass.draw(0..4, 0..count);
        });
        gpu_frame.submit();
        if check_loss && reporter.is_device_lost() {
            reporter.end_process(1);
        }
        let _ = device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: Some(Duration::from_secs(10)),
        });
    }
    println!("instanced_quads: {frames} frames, no GPU crash");
    reporter.at_exit();
    reporter.detach();
}

/// Instance buffer generation `generation`, labelled with it, filled with a grid of quads.
fn instance_buffer(device: &wgpu::Device, queue: &wgpu::Queue, generation: u64) -> wgpu::Buffer {
    let quads = QUADS * generation;
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(&format!("quad_instances_gen{generation}")),
        size: quads * INSTANCE_BYTES,
        usage: wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let side = (quads as f32).sqrt().ceil();
    let data: Vec<u8> = (0..quads)
        .flat_map(|i| {
            let (x, y) = ((i as f32 % side) / side, (i as f32 / side).floor() / side);
            [
                x * 2.0 - 1.0,
                y * 2.0 - 1.0,
                0.5 / side,
                i as f32 / quads as f32,
            ]
        })
        .flat_map(f32::to_le_bytes)
        .collect();
    queue.write_buffer(&buffer, 0, &data);
    buffer
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
