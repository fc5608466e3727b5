//! Shared helpers of the `deliver_*` tests: realistic crash reports, a throw-away Bugsink (one per
//! test binary), its REST API, and a tiny scripted HTTP server on 127.0.0.1.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bevy_gpu_crash_reporter::report::BindingKind;
use bevy_gpu_crash_reporter::report::IndexStats;
use bevy_gpu_crash_reporter::report::{
    ApplicationInfo, BindingEventEntry, CrashKind, CrashReport, Culprit, FaultAccess, FaultEntry,
    FaultVerdict, FrameTiming, HangInfo, ObjectState, VendorInfo, SCHEMA_VERSION,
};
use gpu_crash_core::GpuCrashCapabilities;
use serde_json::Value;

/// A fresh 32-hex event id.
pub fn new_id() -> String {
    sentry::types::Uuid::new_v4().simple().to_string()
}

/// A suffix that makes names unique across runs against a reused server.
pub fn run_tag() -> String {
    new_id()[..8].to_owned()
}

/// An NVIDIA H200 as the capabilities report it.
pub fn h200() -> GpuCrashCapabilities {
    GpuCrashCapabilities {
        gpu_name: "NVIDIA H200".into(),
        vendor_id: 0x10de,
        device_id: 0x2335,
        vendor_name: "NVIDIA".into(),
        device_type: "DISCRETE_GPU".into(),
        driver_name: "NVIDIA".into(),
        driver_info: "580.159.04".into(),
        driver_id: 4,
        driver_version_raw: 0x9127_c100,
        driver_version: "580.159.4.0".into(),
        api_version: "1.4.312".into(),
        memory_size_mb: 143_771,
        debug_utils: true,
        binding_messenger: true,
        address_binding_report: true,
        device_fault_ext: true,
        device_fault_khr: false,
        device_fault_vendor_binary: false,
        shader_abort_khr: false,
        device_fault_report_masked: false,
        buffer_marker: true,
        memory_budget: true,
        device_memory_report: false,
        exact_layer: false,
        gpu_progress: true,
        breadcrumbs: Some(bevy_gpu_crash_reporter::BreadcrumbWriter::AmdBufferMarker),
        missing: vec!["VK_KHR_device_fault: not offered by the driver".into()],
    }
}

/// A binding event.
pub fn event(
    sequence: u64,
    frame: u64,
    kind: BindingKind,
    handle: u64,
    base: u64,
    size: u64,
    name: Option<&str>,
) -> BindingEventEntry {
    BindingEventEntry {
        sequence,
        frame,
        kind,
        object_type: "BUFFER".into(),
        handle,
        base,
        size,
        name: name.map(str::to_owned),
        internal: false,
        ms_before_crash: Some(1000u64.saturating_sub(sequence)),
    }
}

/// A device loss whose write hit buffer `culprit` (freed 3 frames earlier) at `base + 0x10`.
pub fn use_after_free(culprit: &str, base: u64) -> CrashReport {
    let address = base + 0x10;
    let handle = 0x5a00 + (base >> 12);
    let size = 0x1000;
    let label = format!("buffer {culprit:?}");
    let nearby = vec![
        event(10, 9, BindingKind::Bind, handle, base, size, Some(culprit)),
        event(
            14,
            12,
            BindingKind::Unbind,
            handle,
            base,
            size,
            Some(culprit),
        ),
    ];
    let summary = format!(
        "GPU fault: write at {address:#x} is 16 bytes into {label} (freed 3 frames ago) -> use_after_free"
    );
    let c = Culprit {
        name: Some(culprit.to_owned()),
        label: label.clone(),
        object_type: "BUFFER".into(),
        handle,
        base,
        size,
        state: ObjectState::Freed,
        offset: 0x10,
        freed_ms_ago: Some(48),
        freed_frames_ago: Some(3),
        bytes_past_end: None,
        reason: "the only object that ever held this address; unbound 3 frames before the fault"
            .into(),
        opaque_capture_address: None,
        capture_replay_note: Some("memory allocated without capture-replay".into()),
        asset: None,
    };
    let fault = FaultEntry {
        address,
        address_range: [address & !0xff, address | 0xff],
        precision: 256,
        access: FaultAccess::Write,
        verdict: FaultVerdict::UseAfterFree,
        culprit: Some(c.clone()),
        candidates: vec![c],
        summary: summary.clone(),
        nearby_events: nearby.clone(),
    };
    let mut recent = vec![
        event(
            11,
            10,
            BindingKind::Bind,
            0x77,
            0x9000_0000,
            0x10000,
            Some("terrain"),
        ),
        event(12, 11, BindingKind::Bind, 0x78, 0x9001_0000, 0x400, None),
    ];
    recent.extend(nearby);
    recent.sort_by_key(|e| e.sequence);
    CrashReport {
        schema_version: SCHEMA_VERSION,
        id: new_id(),
        kind: CrashKind::DeviceLost,
        timestamp_ms: 1_796_212_707_123,
        time: "2026-12-02T11:58:27.123Z".into(),
        summary,
        faults: vec![fault],
        gpu: h200(),
        description: Some("Drill: page fault on write".into()),
        vendor_infos: vec![VendorInfo {
            description: "drill use-after-free".into(),
            fault_code: 0xd001,
            fault_data: address,
        }],
        vendor_binary: None,
        shader_abort_message: None,
        binding_events_dropped: 0,
        index_stats: IndexStats {
            events: 14,
            binds: 12,
            unbinds: 2,
            ..Default::default()
        },
        recent_events: recent,
        frame: 15,
        application: ApplicationInfo {
            name: "particle_storm".into(),
            version: "1.2.3".into(),
            engine_name: "Bevy".into(),
            engine_version: "0.19.1".into(),
            executable: Some("/home/player/games/particle_storm/particle_storm".into()),
            process_id: 4242,
        },
        drill: Some("use-after-free".into()),
        notes: Vec::new(),
        hang: None,
        frames: (12..=15)
            .map(|frame| FrameTiming {
                frame,
                submitted_ms_before_report: (16 - frame) * 16,
                completed_after_ms: (frame < 15).then_some(3),
            })
            .collect(),
        gpu_stage: None,
        breadcrumbs: Vec::new(),
        running: None,
        events_after_fault: Vec::new(),
        device_generation: 1,
        crashes_this_run: 1,
        ms_since_previous_crash: None,
        suppressed_duplicates: 0,
        follows_hang: None,
        non_fatal: None,
        after_earlier_hang: None,
        video_memory: None,
    }
}

/// A GPU hang: no fault address, only the timeline.
pub fn gpu_hang() -> CrashReport {
    let mut r = use_after_free("unused", 0x4000_0000);
    r.kind = CrashKind::GpuHang;
    r.faults.clear();
    r.vendor_infos.clear();
    r.description = None;
    r.summary = "GPU hang: submitted work made no progress for 2000 ms (frame 15)".into();
    r.drill = Some("hang".into());
    r.notes = vec!["fault query returned VK_ERROR_UNKNOWN (device not lost)".into()];
    r.hang = Some(HangInfo {
        oldest_pending_frame: 14,
        pending_frames: 2,
        stalled_ms: 2000,
        hang_timeout_ms: 2000,
        suspects: Vec::new(),
        driver_watchdog_timeout: false,
    });
    r.frames = (10..=15)
        .map(|frame| FrameTiming {
            frame,
            submitted_ms_before_report: 2000 + (15 - frame) * 16,
            completed_after_ms: (frame < 14).then_some(4),
        })
        .collect();
    r
}

/// A GPU hang with a suspect: `culprit` was freed while frame 14 was still on the GPU.
pub fn gpu_hang_with_suspect(culprit: &str) -> CrashReport {
    let mut r = gpu_hang();
    let uaf = use_after_free(culprit, 0x3000_0000);
    let mut suspect = uaf.faults[0].culprit.clone().unwrap();
    suspect.reason = "freed while frame 14 was pending on the GPU".into();
    r.hang.as_mut().unwrap().suspects = vec![suspect];
    r.summary = format!(
        "GPU hang: frame 14 made no progress for 2000 ms; buffer {culprit:?} was freed while it was pending"
    );
    r
}

/// The first 127.0.0.1 port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// A DSN with `port` in place of the original one.
pub fn with_port(dsn: &str, port: u16) -> String {
    let (head, rest) = dsn.split_once('@').unwrap();
    let (hostport, path) = rest.split_once('/').unwrap();
    let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
    format!("{head}@{host}:{port}/{path}")
}

// ----------------------------------------------------------------------------------------- Bugsink

/// A running Bugsink (see `scripts/README.md`).
pub struct Bugsink {
    pub url: String,
    pub token: String,
    pub project_id: String,
    pub dsn: String,
    pub state_dir: PathBuf,
    agent: ureq::Agent,
}

/// The Bugsink of this test binary, started on first use (venv from the cache dir the script
/// picks; state under `CARGO_TARGET_TMPDIR`) and stopped when the test binary exits (its data stays,
/// so the next run starts faster); tests use unique names so old data does not matter.
pub fn bugsink(binary: &str) -> &'static Bugsink {
    static SERVER: OnceLock<Bugsink> = OnceLock::new();
    SERVER.get_or_init(|| {
        let server = start_bugsink(binary);
        stop_at_exit(&server.state_dir);
        server
    })
}

/// The state folder of this binary's Bugsink, for the exit handler.
static STARTED: OnceLock<PathBuf> = OnceLock::new();

/// Runs `scripts/bugsink-down.sh` for this binary's Bugsink when the process exits (libtest returns
/// from `main` after the last test, so `atexit` handlers run), so no gunicorn outlives the test run.
fn stop_at_exit(state_dir: &Path) {
    extern "C" fn stop() {
        if let Some(dir) = STARTED.get() {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bugsink-down.sh");
            let _ = std::process::Command::new(script)
                .arg(dir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
    if STARTED.set(state_dir.to_owned()).is_ok() {
        // SAFETY: registers a plain `extern "C" fn()` that only runs a child process.
        unsafe { libc::atexit(stop) };
    }
}

fn start_bugsink(binary: &str) -> Bugsink {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let state_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bugsink-{binary}"));
    std::fs::create_dir_all(&state_dir).unwrap();
    let mut cmd = std::process::Command::new(root.join("scripts/bugsink-up.sh"));
    cmd.arg(&state_dir);
    if !state_dir.join("port").exists() {
        cmd.arg(free_port().to_string());
    }
    let out = cmd.output().expect("cannot run scripts/bugsink-up.sh");
    assert!(
        out.status.success(),
        "scripts/bugsink-up.sh failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let env = std::fs::read_to_string(state_dir.join("env")).expect("bugsink env file");
    let get = |key: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} missing in {}/env", state_dir.display()))
            .to_owned()
    };
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    Bugsink {
        url: get("BUGSINK_URL"),
        token: get("BUGSINK_TOKEN"),
        project_id: get("BUGSINK_PROJECT_ID"),
        dsn: get("SENTRY_DSN"),
        state_dir,
        agent,
    }
}

impl Bugsink {
    /// GET under `/api/canonical/0/`; `None` on 404.
    pub fn get(&self, path_and_query: &str) -> Option<Value> {
        let url = if path_and_query.starts_with("http") {
            path_and_query.to_owned()
        } else {
            format!("{}/api/canonical/0/{path_and_query}", self.url)
        };
        let mut resp = self
            .agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("Accept", "application/json")
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = resp.status().as_u16();
        let body = resp.body_mut().read_to_string().unwrap_or_default();
        if status == 404 {
            return None;
        }
        assert_eq!(status, 200, "GET {url}: {body}");
        Some(serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}: {e}: {body}")))
    }

    /// The stored event (`data` is the event JSON as sent), or `None`.
    pub fn event(&self, event_id: &str) -> Option<Value> {
        self.get(&format!(
            "events/lookup/?project={}&event_id={event_id}",
            self.project_id
        ))
    }

    /// Every event of an issue.
    pub fn issue_events(&self, issue: &str) -> Vec<Value> {
        self.list(&format!("events/?issue={issue}"))
    }

    /// Every issue of the project.
    pub fn issues(&self) -> Vec<Value> {
        self.list(&format!("issues/?project={}", self.project_id))
    }

    fn list(&self, first: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut next = Some(first.to_owned());
        while let Some(page) = next.take() {
            let v = self.get(&page).expect("list endpoint answered 404");
            out.extend(v["results"].as_array().cloned().unwrap_or_default());
            next = v["next"].as_str().map(str::to_owned);
        }
        out
    }
}

// -------------------------------------------------------------------------------- file permissions

#[cfg(target_os = "linux")]
#[allow(unused_imports)] // not every test binary that includes this module uses it
pub use gpu_crash_core::test_support::drop_file_permission_override;

// ------------------------------------------------------------------------------ scripted HTTP server

/// What the scripted server does with one request.
#[derive(Clone, Debug)]
pub enum Action {
    /// Answer with this status, extra header lines and body.
    Respond(u16, Vec<(String, String)>, String),
    /// Answer 429 with `Retry-After` as an HTTP date this far after the moment of answering, so that
    /// the date is still ahead when the client reads it however slowly the request arrived.
    RateLimitedUntil(Duration),
    /// Forward the request to `127.0.0.1:port` and relay the answer.
    Proxy(u16),
    /// Wait this long after reading the request, then act (a slow server or network).
    Delayed(Duration, Box<Action>),
}

/// A request the server saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub path: String,
    pub body_len: usize,
    /// The status the server answered with.
    pub status: u16,
}

/// A tiny HTTP/1.1 server on 127.0.0.1: one request per connection, handled in order; the first
/// requests get the scripted actions, the rest `then`. It stops when dropped or after 5 minutes.
pub struct ScriptedServer {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    pub fn start(port: u16, script: Vec<Action>, then: Action) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind scripted server");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(300);
            let mut script = script.into_iter();
            while !stop2.load(Ordering::Relaxed) && Instant::now() < end {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let action = script.next().unwrap_or_else(|| then.clone());
                        serve(stream, &action, &seen2);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request; returns (head, body).
fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    stream.set_nonblocking(false).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf[head_end..head_end + len].to_vec()))
}

/// A plain-text answer.
fn plain_answer(status: u16, headers: &[(String, String)], text: &str) -> Vec<u8> {
    let mut resp = format!(
        "HTTP/1.1 {status} Scripted\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nConnection: close\r\n",
        text.len()
    );
    for (k, v) in headers {
        resp.push_str(&format!("{k}: {v}\r\n"));
    }
    resp.push_str("\r\n");
    resp.push_str(text);
    resp.into_bytes()
}

/// The upstream's answer to the same request, which must close after answering.
fn proxied_answer(port: u16, head: &str, body: &[u8]) -> Option<Vec<u8>> {
    let mut up = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let mut new_head = String::new();
    for line in head.trim_end().split("\r\n") {
        if !line.to_ascii_lowercase().starts_with("connection:") {
            new_head.push_str(line);
            new_head.push_str("\r\n");
        }
    }
    new_head.push_str("Connection: close\r\n\r\n");
    up.write_all(new_head.as_bytes()).ok()?;
    up.write_all(body).ok()?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer).ok()?;
    Some(answer)
}

/// Answers one request as `action` says. The request is added to `seen` *before* the answer goes
/// out: a client that got its answer then finds it there.
fn serve(mut stream: TcpStream, action: &Action, seen: &Mutex<Vec<Seen>>) -> Option<()> {
    let (head, body) = read_request(&mut stream)?;
    let at = Instant::now();
    let mut action = action;
    while let Action::Delayed(delay, then) = action {
        std::thread::sleep(*delay);
        action = then;
    }
    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
    let answer = match action {
        Action::Respond(status, headers, text) => plain_answer(*status, headers, text),
        Action::RateLimitedUntil(ahead) => {
            let retry_at = httpdate::fmt_http_date(std::time::SystemTime::now() + *ahead);
            plain_answer(429, &[("Retry-After".to_owned(), retry_at)], "slow down")
        }
        Action::Proxy(port) => proxied_answer(*port, &head, &body)?,
        Action::Delayed(..) => unreachable!("unwrapped above"),
    };
    let status = String::from_utf8_lossy(&answer)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    seen.lock().unwrap().push(Seen {
        at,
        path,
        body_len: body.len(),
        status,
    });
    stream.write_all(&answer).ok()?;
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Some(())
}
