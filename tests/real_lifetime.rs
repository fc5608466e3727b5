//! A player's lifetime in real processes: a few hundred launches of a small game on the core
//! (`crates/gpu_crash_core/examples/wgpu_app.rs`) on one machine (one report folder), on lavapipe
//! under the crash drill layer, through the real Vulkan loader. Launches crash (device loss, hang),
//! fault without crashing (masked-fault storms), run two copies at once, and are killed (`SIGKILL`)
//! at random moments; the Sentry endpoint beside them goes down for stretches of launches, answers
//! 429 with `Retry-After`, 500, or slowly. Everything is counted **at the server**:
//! - every report a launch left on disk reaches the server (lost = 0) once the network is back;
//! - no event arrives twice unless the launch that sent it was killed before it could record the
//!   answer (at-least-once per event id, which Sentry deduplicates);
//! - the reports folder stays within its budget;
//! - a launch's backlog goes out newest crash first;
//! - every launch's session ends once, with the status the launch earned: `exited` for a clean run
//!   or a survived fault, `crashed` for a crash, `abnormal` (or what it had already sent) for a
//!   kill.
//!
//! `GPU_CRASH_REAL_LAUNCHES` (default 200) and `GPU_CRASH_REAL_SEED` (default 51) pick the run;
//! the counts are printed (`--nocapture`).

mod common;
#[path = "deliver_support/mod.rs"]
mod deliver_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use gpu_crash_core::report::{read_report, CrashKind};
use sentry::protocol::{EnvelopeItem, SessionStatus};
use sentry::Envelope;

/// The buffer the drill frees under the game (generation 1, freed at frame 20).
const VICTIM: &str = "particle_positions_v1";
/// A buffer that lives the whole run: masked faults land in it.
const LIVE: &str = "terrain_heightmap";
/// The default budget of the reports folder (`DeliverySettings`): files and bytes.
const MAX_REPORT_FILES: usize = 100;
const MAX_REPORT_BYTES: u64 = 128 * 1024 * 1024;

// ------------------------------------------------------------------------------------ randomness

/// xorshift64*: the same launches for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

// ------------------------------------------------------------------------------ counting endpoint

/// What the endpoint does for a stretch of launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Network {
    /// 200 to every envelope.
    Up,
    /// Nothing listens on the port (connection refused): the player is offline.
    Down,
    /// 429 with `Retry-After: 30`.
    RateLimited,
    /// 500 to every envelope.
    ServerError,
    /// 200 after 700 ms (under the 5 s upload timeout).
    Slow,
}

/// One envelope the endpoint accepted (answered 200).
struct Accepted {
    /// The launches running when its body arrived.
    live: Vec<usize>,
    /// The endpoint's state then.
    network: Network,
    /// When it was recorded (before the answer went out; a slow answer comes later than the body).
    at: SystemTime,
    /// When its body had been read (a slow answer comes later).
    read_at: SystemTime,
    events: Vec<(String, SystemTime, String)>,
    sessions: Vec<(String, SessionStatus, SystemTime)>,
}

#[derive(Default)]
struct EndpointState {
    network: Option<Network>,
    live: BTreeSet<usize>,
    accepted: Vec<Accepted>,
    refused_requests: u64,
}

/// A Sentry endpoint on 127.0.0.1 that counts what it accepts; its network state is switched by
/// the test between launches.
struct Endpoint {
    port: u16,
    state: Arc<Mutex<EndpointState>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    fn start() -> Self {
        let port = deliver_support::free_port();
        let state = Arc::new(Mutex::new(EndpointState {
            network: Some(Network::Up),
            ..EndpointState::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (state2, stop2) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut listener: Option<TcpListener> = None;
            while !stop2.load(Ordering::Relaxed) {
                let network = state2.lock().unwrap().network;
                if network == Some(Network::Down) {
                    // Closing the socket: a connection is refused, as when the player is offline.
                    listener = None;
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let l = match &listener {
                    Some(l) => l,
                    None => match TcpListener::bind(("127.0.0.1", port)) {
                        Ok(l) => {
                            l.set_nonblocking(true).unwrap();
                            listener.insert(l)
                        }
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                    },
                };
                match l.accept() {
                    // A thread per connection: each body is read as it arrives (a slow answer to
                    // one never keeps another waiting in the backlog, where a body sent by a
                    // process that has since died would be read long after).
                    Ok((stream, _)) => {
                        let state = state2.clone();
                        std::thread::spawn(move || serve(stream, &state));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Self {
            port,
            state,
            stop,
            thread: Some(thread),
        }
    }

    fn dsn(&self) -> String {
        format!("http://public@127.0.0.1:{}/1", self.port)
    }

    fn set(&self, network: Network) {
        self.state.lock().unwrap().network = Some(network);
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request, records it when it is accepted, answers as the network state says.
fn serve(mut stream: TcpStream, state: &Mutex<EndpointState>) {
    let Some(body) = read_body(&mut stream) else {
        return;
    };
    let read_at = SystemTime::now();
    let (network, live): (Option<Network>, Vec<usize>) = {
        let s = state.lock().unwrap();
        (s.network, s.live.iter().copied().collect())
    };
    let (status, extra) = match network {
        Some(Network::RateLimited) => (429, "Retry-After: 30\r\n"),
        Some(Network::ServerError) => (500, ""),
        _ => (200, ""),
    };
    if network == Some(Network::Slow) {
        std::thread::sleep(Duration::from_millis(700));
    }
    {
        let mut s = state.lock().unwrap();
        if status == 200 {
            // The launches running when the body arrived: its sender is one of them.
            let mut accepted = parse(&body, live);
            accepted.network = network.unwrap_or(Network::Up);
            accepted.read_at = read_at;
            s.accepted.push(accepted);
        } else {
            s.refused_requests += 1;
        }
    }
    // Recorded before the answer goes out: a client that read the answer finds it counted.
    let text = if status == 200 {
        "{\"id\":\"ok\"}"
    } else {
        "no"
    };
    let answer = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(answer.as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn read_body(stream: &mut TcpStream) -> Option<Vec<u8>> {
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
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end..head_end + len].to_vec();
    if head.contains("content-encoding: gzip") {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut plain)
            .ok()?;
        Some(plain)
    } else {
        Some(body)
    }
}

fn parse(body: &[u8], live: Vec<usize>) -> Accepted {
    let envelope = Envelope::from_slice(body).expect("the game sent a readable envelope");
    let mut accepted = Accepted {
        live,
        network: Network::Up,
        at: SystemTime::now(),
        read_at: SystemTime::now(),
        events: Vec::new(),
        sessions: Vec::new(),
    };
    for item in envelope.items() {
        match item {
            EnvelopeItem::Event(event) => accepted.events.push((
                event.event_id.simple().to_string(),
                event.timestamp,
                event.level.to_string(),
            )),
            EnvelopeItem::SessionUpdate(update) => accepted.sessions.push((
                update.session_id.simple().to_string(),
                update.status,
                update.started,
            )),
            _ => {}
        }
    }
    accepted
}

// ------------------------------------------------------------------------------------- launches

/// What a launch does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Plays its frames and quits.
    Clean,
    /// The drill frees a buffer the GPU still uses: a device loss, exit 1.
    Loss,
    /// A masked-fault storm in a live buffer: non-fatal reports, and the game plays on.
    Storm,
    /// The drill hangs the GPU, and the player kills the frozen game (1-10 s in).
    Hang,
}

/// One process of one launch.
struct Launch {
    index: usize,
    plan: Plan,
    started: SystemTime,
    ended: SystemTime,
    killed: bool,
    exit: Option<i32>,
    /// The kinds of the reports it left on disk (seen after it ended).
    wrote: Vec<CrashKind>,
}

fn spawn(app: &Path, reports: &Path, dsn: &str, plan: Plan, rng: &mut Rng) -> Child {
    let mut command = Command::new(app);
    command
        .env("VK_DRIVER_FILES", common::LAVAPIPE_ICD)
        .env("VK_ICD_FILENAMES", common::LAVAPIPE_ICD)
        .env("GPU_CRASH_REPORT_DIR", reports)
        .env("SENTRY_DSN", dsn)
        .env("SENTRY_RELEASE", "wgpu_app@lifetime")
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("GPU_CRASH_DRILL")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let drill = |command: &mut Command, scenario: String, after: u64| {
        command
            .env("VK_LAYER_PATH", common::drill_layer_dir())
            .env("VK_INSTANCE_LAYERS", "VK_LAYER_gpu_crash_drill")
            .env("GPU_CRASH_DRILL", scenario)
            .env("GPU_CRASH_DRILL_AFTER", after.to_string());
    };
    match plan {
        Plan::Clean => {}
        // Two submissions a frame; the victim is freed at frame 20 (submission 40), and its range
        // is taken again around frame 100.
        Plan::Loss => drill(
            &mut command,
            format!("use-after-free:{VICTIM}"),
            42 + rng.below(110),
        ),
        Plan::Storm => {
            drill(
                &mut command,
                format!("masked:{LIVE}x{}", 1 + rng.below(400)),
                2 + rng.below(100),
            );
            // The non-fatal reports come a gather time (1 s) after the faults: play long enough.
            command
                .env("GPU_CRASH_DRILL_API", "khr")
                .env("WGPU_APP_FRAMES", "1500");
        }
        Plan::Hang => drill(&mut command, "hang".into(), 2 + rng.below(200)),
    }
    command.spawn().expect("start wgpu_app")
}

/// Waits for `child`, killing it at `kill_at` if it is still running then.
fn finish(child: &mut Child, kill_at: Option<Instant>) -> (bool, Option<i32>) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (false, status.code());
        }
        let now = Instant::now();
        if kill_at.is_some_and(|at| now >= at) || now >= deadline {
            // SIGKILL: no handler of the game runs.
            child.kill().unwrap();
            child.wait().unwrap();
            return (true, None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

// --------------------------------------------------------------------------------- the folder

/// A report the game left on disk: its event id, time and kind.
struct SeenReport {
    event_id: String,
    timestamp: SystemTime,
    kind: CrashKind,
}

fn folder_usage(dir: &Path) -> (usize, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                files += 1;
                bytes += meta.len();
            }
        }
    }
    (files, bytes)
}

/// Report files (`gpu-crash-*.json`) directly in `dir`.
fn report_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect()
}

/// Envelopes still waiting in the outbox.
fn waiting(outbox: &Path) -> usize {
    std::fs::read_dir(outbox)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "envelope"))
        .count()
}

// ------------------------------------------------------------------------------------- the test

#[test]
fn a_player_lifetime_of_real_launches_loses_and_repeats_nothing_at_the_server() {
    let launches: usize = std::env::var("GPU_CRASH_REAL_LAUNCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("GPU_CRASH_REAL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(51);
    let app = common::wgpu_app();
    common::use_runtime_dir();
    let dir = common::scratch_dir("real-lifetime");
    let reports = dir.join("reports");
    let outbox = reports.join("outbox");
    let endpoint = Endpoint::start();
    let dsn = endpoint.dsn();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);

    let mut runs: Vec<Launch> = Vec::new();
    let mut seen: BTreeMap<String, SeenReport> = BTreeMap::new();
    let mut network = Network::Up;
    let mut stretch = 0;
    let (mut peak_files, mut peak_bytes) = (0usize, 0u64);
    let mut network_launches: BTreeMap<String, usize> = BTreeMap::new();
    let began = Instant::now();

    let mut index = 0;
    // The lifetime, then launches online until nothing waits (a player who comes back).
    let mut settling = 0;
    loop {
        let last_phase = index >= launches;
        if last_phase {
            if waiting(&outbox) == 0 && settling > 0 {
                break;
            }
            assert!(
                settling < 3,
                "3 clean launches online and {} envelope(s) still wait in {}",
                waiting(&outbox),
                outbox.display()
            );
            settling += 1;
            network = Network::Up;
        } else if stretch == 0 {
            stretch = 1 + rng.below(20);
            network = match rng.below(100) {
                0..=44 => Network::Up,
                45..=74 => Network::Down,
                75..=84 => Network::RateLimited,
                85..=92 => Network::ServerError,
                _ => Network::Slow,
            };
        }
        stretch = stretch.saturating_sub(1);
        endpoint.set(network);
        *network_launches.entry(format!("{network:?}")).or_default() += 1;

        let plan = if last_phase {
            Plan::Clean
        } else {
            match rng.below(100) {
                0..=44 => Plan::Clean,
                45..=76 => Plan::Loss,
                77..=89 => Plan::Storm,
                _ => Plan::Hang,
            }
        };
        // A second copy of the game beside a clean launch, now and then.
        let copies = if !last_phase && plan == Plan::Clean && rng.chance(15) {
            2
        } else {
            1
        };
        let kill_after = match plan {
            _ if last_phase => None,
            // A player who kills the frozen game before or after its report (5 s hang timeout, then
            // gathering and upload), before the default `on_hang` ends it 10 s after the report.
            Plan::Hang => Some(Duration::from_millis(1000 + rng.below(9000))),
            _ if rng.chance(30) => Some(Duration::from_millis(rng.below(3500))),
            _ => None,
        };
        let started = SystemTime::now();
        let mut children = Vec::new();
        for copy in 0..copies {
            let i = index + copy;
            endpoint.state.lock().unwrap().live.insert(i);
            children.push((i, spawn(&app, &reports, &dsn, plan, &mut rng)));
        }
        let kill_at = kill_after.map(|d| Instant::now() + d);
        for (i, mut child) in children {
            let (killed, exit) = finish(&mut child, kill_at);
            endpoint.state.lock().unwrap().live.remove(&i);
            runs.push(Launch {
                index: i,
                plan,
                started,
                ended: SystemTime::now(),
                killed,
                exit,
                wrote: Vec::new(),
            });
        }
        index += copies;

        for path in report_files(&reports) {
            let Ok(report) = read_report(&path) else {
                continue;
            };
            if !seen.contains_key(&report.id) {
                if let Some(run) = runs.last_mut().filter(|_| copies == 1) {
                    run.wrote.push(report.kind);
                }
            }
            seen.entry(report.id.clone()).or_insert_with(|| SeenReport {
                event_id: report.event_id().replace('-', ""),
                timestamp: SystemTime::UNIX_EPOCH + Duration::from_millis(report.timestamp_ms),
                kind: report.kind,
            });
        }
        let (files, bytes) = folder_usage(&reports);
        peak_files = peak_files.max(files);
        peak_bytes = peak_bytes.max(bytes);
        let report_count = report_files(&reports).len();
        assert!(
            report_count <= MAX_REPORT_FILES && bytes <= MAX_REPORT_BYTES,
            "launch {index}: {report_count} reports, {bytes} bytes in {}",
            reports.display()
        );
    }
    let elapsed = began.elapsed();

    // ------------------------------------------------------------------ counted at the server
    let state = endpoint.state.lock().unwrap();
    let killed: BTreeSet<usize> = runs.iter().filter(|r| r.killed).map(|r| r.index).collect();
    let mut arrivals: BTreeMap<&str, Vec<&Accepted>> = BTreeMap::new();
    for accepted in &state.accepted {
        for (event_id, _, _) in &accepted.events {
            arrivals.entry(event_id).or_default().push(accepted);
        }
    }
    // In the order the bodies arrived (a slow answer is recorded after a later, faster one).
    for times in arrivals.values_mut() {
        times.sort_by_key(|a| a.read_at);
    }
    // Lost: a report left on disk whose event never arrived.
    let lost: Vec<&String> = seen
        .iter()
        .filter(|(_, r)| !arrivals.contains_key(r.event_id.as_str()))
        .map(|(id, _)| id)
        .collect();
    // Repeats: an event that arrived again. Explained only when a launch running at its first
    // arrival was killed within moments of it (between the server's answer and its own record).
    let killed_soon_after = |accepted: &Accepted| {
        accepted.live.iter().any(|i| {
            runs.iter().any(|r| {
                r.index == *i
                    && r.killed
                    && r.ended.duration_since(accepted.read_at).unwrap_or_default()
                        <= Duration::from_secs(3)
            })
        })
    };
    let mut explained = 0;
    let mut unexplained = Vec::new();
    for (event_id, times) in &arrivals {
        if times.len() > 1 {
            if killed_soon_after(times[0]) {
                explained += times.len() - 1;
            } else {
                let plans: Vec<String> = times
                    .iter()
                    .map(|a| {
                        let who: Vec<String> = a
                            .live
                            .iter()
                            .filter_map(|i| runs.iter().find(|r| r.index == *i))
                            .map(|r| format!("{} {:?} killed {}", r.index, r.plan, r.killed))
                            .collect();
                        let ms = |t: SystemTime| {
                            t.duration_since(SystemTime::UNIX_EPOCH)
                                .unwrap_or_default()
                                .as_millis()
                        };
                        let run_at = a
                            .live
                            .first()
                            .and_then(|i| runs.iter().find(|r| r.index == *i))
                            .map(|r| (ms(r.started), ms(r.ended)));
                        format!(
                            "[{} | {:?} read {} recorded {} launch {run_at:?}]",
                            who.join(", "),
                            a.network,
                            ms(a.read_at),
                            ms(a.at)
                        )
                    })
                    .collect();
                unexplained.push(format!("{event_id} x{}: {}", times.len(), plans.join(" ")));
            }
        }
    }
    // The backlog of each launch goes out newest crash first.
    let crash_time: BTreeMap<&str, SystemTime> = seen
        .values()
        .filter(|r| r.kind != CrashKind::NonFatalFault)
        .map(|r| (r.event_id.as_str(), r.timestamp))
        .collect();
    let mut out_of_order = Vec::new();
    let mut per_launch: BTreeMap<usize, Vec<SystemTime>> = BTreeMap::new();
    for accepted in &state.accepted {
        if let [only] = accepted.live[..] {
            let run = runs.iter().find(|r| r.index == only).unwrap();
            for (event_id, _, _) in &accepted.events {
                if let Some(&t) = crash_time.get(event_id.as_str()) {
                    // The launch's own crash goes first when it happens; the backlog is the rest.
                    if t < run.started {
                        per_launch.entry(only).or_default().push(t);
                    }
                }
            }
        }
    }
    for (launch, times) in &per_launch {
        if times.windows(2).any(|w| w[1] > w[0]) {
            out_of_order.push(*launch);
        }
    }
    // Sessions: each one ends once, with the status its launch earned.
    let mut terminal: BTreeMap<&str, Vec<(SessionStatus, &Accepted)>> = BTreeMap::new();
    let mut started_at: BTreeMap<&str, SystemTime> = BTreeMap::new();
    for accepted in &state.accepted {
        for (sid, status, started) in &accepted.sessions {
            started_at.insert(sid, *started);
            if *status != SessionStatus::Ok {
                terminal.entry(sid).or_default().push((*status, accepted));
            }
        }
    }
    for ends in terminal.values_mut() {
        ends.sort_by_key(|(_, a)| a.read_at);
    }
    let mut session_faults = Vec::new();
    let mut abnormal = 0;
    for (sid, started) in &started_at {
        let ends = terminal.get(sid).cloned().unwrap_or_default();
        let owners: Vec<&Launch> = runs
            .iter()
            .filter(|r| r.started <= *started && *started <= r.ended)
            .collect();
        let Some(run) = owners.first() else {
            session_faults.push(format!("{sid}: started outside every launch"));
            continue;
        };
        let Some(&(status, first)) = ends.first() else {
            session_faults.push(format!(
                "{sid} (launch {} {:?}, killed {}): never ended",
                run.index, run.plan, run.killed
            ));
            continue;
        };
        // Ended once: a second end only as a repeat of the same update after a kill.
        if ends.len() > 1 && (ends.iter().any(|(s, _)| *s != status) || !killed_soon_after(first)) {
            let ms = |t: SystemTime| {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis()
            };
            session_faults.push(format!(
                "{sid} (launch {} {:?}, killed {}, ran {}..{}): ended {:?}",
                run.index,
                run.plan,
                run.killed,
                ms(run.started),
                ms(run.ended),
                ends.iter()
                    .map(|(s, a)| format!(
                        "{s:?} read {} recorded {} live {:?} {:?}",
                        ms(a.read_at),
                        ms(a.at),
                        a.live,
                        a.network
                    ))
                    .collect::<Vec<_>>()
            ));
            continue;
        }
        abnormal += usize::from(status == SessionStatus::Abnormal);
        let crashed = run.wrote.iter().any(|k| *k != CrashKind::NonFatalFault);
        let earned: &[SessionStatus] = match (run.plan, run.killed, crashed) {
            (Plan::Clean | Plan::Storm, false, _) => &[SessionStatus::Exited],
            (Plan::Loss, false, _) => &[SessionStatus::Crashed],
            // Killed before any crash report: a kill.
            (_, true, false) => &[SessionStatus::Abnormal, SessionStatus::Exited],
            // Killed after its crash report: crashed, or a kill if it came before the session
            // file said so.
            (_, true, true) => &[SessionStatus::Crashed, SessionStatus::Abnormal],
            (Plan::Hang, false, _) => &[SessionStatus::Crashed],
        };
        // A survived fault never ends a session `crashed`.
        let earned: Vec<SessionStatus> = earned
            .iter()
            .copied()
            .filter(|s| !(run.plan == Plan::Storm && *s == SessionStatus::Crashed))
            .collect();
        if !earned.contains(&status) {
            session_faults.push(format!(
                "{sid} (launch {} {:?}, killed {}, exit {:?}, wrote {:?}): {status:?}, expected \
                 {earned:?}",
                run.index, run.plan, run.killed, run.exit, run.wrote
            ));
        }
    }
    let killed_clean = runs
        .iter()
        .filter(|r| r.killed && r.plan != Plan::Hang && r.wrote.is_empty())
        .count();
    // Every launch that was not killed had a session, and ended as it should have.
    let unsessioned: Vec<usize> = runs
        .iter()
        .filter(|r| !r.killed)
        .filter(|r| {
            !started_at
                .values()
                .any(|s| r.started <= *s && *s <= r.ended)
        })
        .map(|r| r.index)
        .collect();

    // The drill did what each launch planned: a loss ends the game with exit code 1.
    let misfired: Vec<usize> = runs
        .iter()
        .filter(|r| !r.killed && (r.plan == Plan::Loss) != (r.exit == Some(1)))
        .map(|r| r.index)
        .collect();
    assert!(
        misfired.is_empty(),
        "launches that did not end as planned: {misfired:?}"
    );

    let count = |plan: Plan| runs.iter().filter(|r| r.plan == plan).count();
    let events: usize = state.accepted.iter().map(|a| a.events.len()).sum();
    let warnings = state
        .accepted
        .iter()
        .flat_map(|a| &a.events)
        .filter(|(_, _, level)| level == "warning")
        .count();
    println!(
        "real lifetime (seed {seed}): {} launches in {:.0} s ({} clean, {} device losses, {} fault \
         storms, {} hangs; {} killed; {} beside a second copy); network per launch {:?}; \
         {} reports left on disk ({} crashes); {} envelopes accepted ({} events, {} of them \
         warnings; {} sessions updates, {} sessions ended abnormal), {} requests refused (429/500); \
         lost {}, repeats explained by a kill {}, repeats unexplained {}; peak {} files, {} bytes \
         in the report folder",
        runs.len(),
        elapsed.as_secs_f64(),
        count(Plan::Clean),
        count(Plan::Loss),
        count(Plan::Storm),
        count(Plan::Hang),
        killed.len(),
        runs.iter().filter(|r| runs.iter().any(|o| o.index != r.index && o.started == r.started)).count(),
        network_launches,
        seen.len(),
        seen.values().filter(|r| r.kind != CrashKind::NonFatalFault).count(),
        state.accepted.len(),
        events,
        warnings,
        state.accepted.iter().map(|a| a.sessions.len()).sum::<usize>(),
        abnormal,
        state.refused_requests,
        lost.len(),
        explained,
        unexplained.len(),
        peak_files,
        peak_bytes,
    );
    assert!(
        seen.values()
            .filter(|r| r.kind == CrashKind::DeviceLost)
            .count()
            > launches / 10,
        "the lifetime had crashes to deliver"
    );
    assert!(
        lost.is_empty(),
        "reports that never reached the server: {lost:?}"
    );
    assert!(unexplained.is_empty(), "events sent twice: {unexplained:?}");
    assert!(
        out_of_order.is_empty(),
        "launches whose backlog did not go newest crash first: {out_of_order:?}"
    );
    assert!(
        killed_clean < 5 || abnormal > 0,
        "{killed_clean} launches killed before any crash, and no session ended abnormal"
    );
    assert!(
        session_faults.is_empty(),
        "sessions that did not end once as earned: {session_faults:#?}"
    );
    assert!(
        unsessioned.is_empty(),
        "launches that ran to their end without a session at the server: {unsessioned:?}"
    );
}
