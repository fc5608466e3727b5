//! Frame-time measurement shared by `examples/frame_overhead.rs` and `bench/realistic_scene`: a run
//! times frames after a warm-up and prints one result line; `--compare` runs each configuration as a
//! child process of the same executable and reads that line back.

use std::process::Command;
use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::GpuCrashReporter;

/// Frame starts of one run: `warmup` frames, then `frames` timed ones.
#[derive(Resource)]
pub struct FrameTimes {
    /// The configuration (0: no plugin, 1: plugin, 2: no binding capture, 3: no breadcrumbs, 4: the
    /// binding report's floor: reported, dropped unread).
    plugin: u8,
    warmup: usize,
    frames: usize,
    last: Option<Instant>,
    seen: usize,
    times: Vec<Duration>,
    /// Process CPU time (all threads) when measuring began.
    cpu_start: Option<Duration>,
    /// The plugin's own command buffers recorded when measuring began.
    marker_buffers_start: u64,
}

/// What one run measured.
pub struct FrameSummary {
    pub plugin: u8,
    pub frames: usize,
    pub median_us: f64,
    pub mean_us: f64,
    pub p90_us: f64,
    pub cpu_us_per_frame: f64,
    /// The plugin's own command buffers (breadcrumb and frame markers) per timed frame.
    pub marker_buffers_per_frame: f64,
}

impl FrameTimes {
    pub fn new(plugin: u8, warmup: usize, frames: usize) -> Self {
        Self {
            plugin,
            warmup,
            frames,
            last: None,
            seen: 0,
            times: Vec::with_capacity(frames),
            cpu_start: None,
            marker_buffers_start: 0,
        }
    }

    /// Counts a main-world frame starting at `now` (frame time = time between two starts; with
    /// pipelined rendering that includes waiting for the render world), with the plugin's own
    /// command buffers recorded so far. Returns the summary once, when the timed frames are complete.
    pub fn frame_started(&mut self, now: Instant, marker_buffers: u64) -> Option<FrameSummary> {
        if let Some(last) = self.last.replace(now) {
            self.seen += 1;
            if self.seen == self.warmup {
                self.cpu_start = process_cpu_time();
                self.marker_buffers_start = marker_buffers;
            }
            if self.seen > self.warmup {
                self.times.push(now - last);
            }
        }
        if self.times.len() < self.frames || self.frames == 0 {
            return None;
        }
        self.frames = 0;
        let mut sorted = self.times.clone();
        sorted.sort();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let n = sorted.len();
        Some(FrameSummary {
            plugin: self.plugin,
            frames: n,
            median_us: us(sorted[n / 2]),
            mean_us: sorted.iter().map(|d| us(*d)).sum::<f64>() / n as f64,
            p90_us: us(sorted[n * 9 / 10]),
            cpu_us_per_frame: match (self.cpu_start, process_cpu_time()) {
                (Some(a), Some(b)) => us(b.saturating_sub(a)) / n as f64,
                _ => f64::NAN,
            },
            marker_buffers_per_frame: marker_buffers.saturating_sub(self.marker_buffers_start)
                as f64
                / n as f64,
        })
    }
}

impl FrameSummary {
    /// `<program> plugin=.. frames=.. median_us=.. mean_us=.. p90_us=.. cpu_us_per_frame=.. events=..
    /// dropped=.. marker_cbs_per_frame=..` (events: binding events the reporter indexed; 0 without the
    /// plugin or where the driver gives no binding report; marker_cbs: the plugin's own command
    /// buffers).
    pub fn line(&self, program: &str, reporter: Option<&GpuCrashReporter>) -> String {
        let (events, dropped) = reporter
            .map(|r| (r.index_stats().events, r.binding_events_dropped()))
            .unwrap_or((0, 0));
        format!(
            "{program} plugin={} frames={} median_us={:.1} mean_us={:.1} p90_us={:.1} \
             cpu_us_per_frame={:.1} events={events} dropped={dropped} marker_cbs_per_frame={:.2}",
            self.plugin,
            self.frames,
            self.median_us,
            self.mean_us,
            self.p90_us,
            self.cpu_us_per_frame,
            self.marker_buffers_per_frame,
        )
    }
}

/// CPU time of the whole process so far (user + system, all threads, 10 ms ticks), from
/// `/proc/self/stat`; `None` where that does not exist.
pub fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // CLK_TCK is 100 on Linux x86-64.
    Some(Duration::from_millis(ticks * 10))
}

/// Waits until the GPU has finished everything submitted so far (render world). Offscreen, nothing
/// throttles the CPU to the GPU (a window's present would): without a wait the queue grows until the
/// driver gives up (seen on the H200: device lost after 17 s). One frame in flight, as with vsync off
/// and a blocking present.
pub fn wait_for_gpu(device: Res<RenderDevice>) {
    let _ = device
        .wgpu_device()
        .poll(bevy::render::render_resource::PollType::wait_indefinitely());
}

/// One child run's result line, parsed.
pub struct RunResult {
    /// The `<program> plugin=..` line.
    pub line: String,
    /// Everything the child printed.
    pub stdout: String,
    pub median_us: f64,
    pub mean_us: f64,
    pub p90_us: f64,
    pub cpu_us: f64,
    pub events: u64,
    pub dropped: u64,
    pub marker_cbs_per_frame: f64,
}

/// Runs this executable again with `args` and the flag of configuration `plugin`, and reads back the
/// line that starts with `program`.
pub fn run_child(program: &str, args: &[String], plugin: u8) -> RunResult {
    let exe = std::env::current_exe().expect("own executable");
    let mut cmd = Command::new(exe);
    cmd.args(args);
    match plugin {
        0 => {
            cmd.arg("--no-plugin");
        }
        2 => {
            cmd.arg("--no-bindings");
        }
        3 => {
            cmd.arg("--no-breadcrumbs");
        }
        4 => {
            cmd.arg("--floor");
        }
        5 => {
            cmd.arg("--no-fold");
        }
        6 => {
            cmd.arg("--no-asset-map");
        }
        _ => {}
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{program} ")))
        .unwrap_or_else(|| {
            panic!(
                "child run (plugin={plugin}) printed no result ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_owned();
    let field = |name: &str| -> f64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    RunResult {
        median_us: field("median_us"),
        mean_us: field("mean_us"),
        marker_cbs_per_frame: field("marker_cbs_per_frame"),
        p90_us: field("p90_us"),
        cpu_us: field("cpu_us_per_frame"),
        events: field("events") as u64,
        dropped: field("dropped") as u64,
        line,
        stdout,
    }
}

/// The median; NaN for none.
pub fn median(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if !n.is_multiple_of(2) {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}
