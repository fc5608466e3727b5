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
    /// Each thread's CPU time when measuring began (for the per-thread breakdown).
    threads_start: Vec<ThreadCpu>,
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
    /// CPU time per timed frame by thread name (digits folded to `#`, so a pool's threads add up),
    /// largest first: which thread pays a cost, the indexer's own included.
    pub threads_us_per_frame: Vec<(String, f64)>,
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
            threads_start: Vec::new(),
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
                self.threads_start = thread_cpu_times();
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
            threads_us_per_frame: cpu_by_thread_name(&self.threads_start, &thread_cpu_times(), n),
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
             cpu_us_per_frame={:.1} events={events} dropped={dropped} marker_cbs_per_frame={:.2} \
             threads_us_per_frame={}",
            self.plugin,
            self.frames,
            self.median_us,
            self.mean_us,
            self.p90_us,
            self.cpu_us_per_frame,
            self.marker_buffers_per_frame,
            self.threads_us_per_frame
                .iter()
                .map(|(name, us)| format!("{name}:{us:.1}"))
                .collect::<Vec<_>>()
                .join(","),
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

/// One thread's CPU time: its id, its name (`comm`), and nanoseconds on a CPU so far.
#[derive(Clone)]
pub struct ThreadCpu {
    tid: u32,
    name: String,
    ns: u64,
}

impl ThreadCpu {
    /// Nanoseconds on a CPU so far.
    pub fn ns(&self) -> u64 {
        self.ns
    }
}

/// Every live thread's CPU time, from `/proc/self/task/<tid>/schedstat` (first field: nanoseconds on
/// a CPU, exact, unlike the 10 ms ticks of `stat`); empty where that does not exist.
pub fn thread_cpu_times() -> Vec<ThreadCpu> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let tid = task.file_name().to_str()?.parse().ok()?;
            let ns = std::fs::read_to_string(task.path().join("schedstat"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
            Some(ThreadCpu {
                tid,
                name: name.trim().to_owned(),
                ns,
            })
        })
        .collect()
}

/// CPU microseconds per frame between two snapshots, summed by thread name with digits folded to
/// `#` (threads born in between count from zero; threads that ended in between are missing).
pub fn cpu_by_thread_name(
    start: &[ThreadCpu],
    end: &[ThreadCpu],
    frames: usize,
) -> Vec<(String, f64)> {
    let mut by_name: Vec<(String, f64)> = Vec::new();
    for thread in end {
        let before = start
            .iter()
            .find(|t| t.tid == thread.tid)
            .map_or(0, |t| t.ns);
        let us = thread.ns.saturating_sub(before) as f64 / 1e3 / frames.max(1) as f64;
        let name: String = thread
            .name
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .filter(|c| !c.is_whitespace() && *c != ',' && *c != ':')
            .collect();
        match by_name.iter_mut().find(|(n, _)| *n == name) {
            Some((_, total)) => *total += us,
            None => by_name.push((name, us)),
        }
    }
    by_name.sort_by(|a, b| b.1.total_cmp(&a.1));
    by_name
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
    /// CPU microseconds per frame by thread name (see [`FrameSummary::threads_us_per_frame`]).
    pub threads_us: Vec<(String, f64)>,
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
    let field = |name: &str| line_field(&line, name).unwrap_or(f64::NAN);
    RunResult {
        median_us: field("median_us"),
        mean_us: field("mean_us"),
        marker_cbs_per_frame: field("marker_cbs_per_frame"),
        p90_us: field("p90_us"),
        cpu_us: field("cpu_us_per_frame"),
        events: field("events") as u64,
        dropped: field("dropped") as u64,
        threads_us: line
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("threads_us_per_frame="))
            .map(|list| {
                list.split(',')
                    .filter_map(|entry| {
                        let (name, us) = entry.rsplit_once(':')?;
                        Some((name.to_owned(), us.parse().ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        line,
        stdout,
    }
}

/// The number after `name=` in a result line (`key=value` fields separated by spaces).
pub fn line_field(line: &str, name: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// The median over runs of each thread group's CPU microseconds per frame (0 in a run without that
/// thread), for the groups that reach `min_us` in some run; largest first.
pub fn thread_medians(runs: &[RunResult], min_us: f64) -> Vec<(String, f64)> {
    let mut names: Vec<&str> = Vec::new();
    for run in runs {
        for (name, us) in &run.threads_us {
            if *us >= min_us && !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let mut medians: Vec<(String, f64)> = names
        .into_iter()
        .map(|name| {
            let per_run: Vec<f64> = runs
                .iter()
                .map(|r| {
                    r.threads_us
                        .iter()
                        .find(|(n, _)| n == name)
                        .map_or(0.0, |(_, us)| *us)
                })
                .collect();
            (name.to_owned(), median(&per_run))
        })
        .collect();
    medians.sort_by(|a, b| b.1.total_cmp(&a.1));
    medians
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
