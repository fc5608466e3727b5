//! A player's lifetime, simulated: thousands of launches of one game on one machine through the
//! real delivery path (front door, release health, crash-loop limit, outbox, requeue, budgets) on
//! real files, with a scripted server, a seeded random schedule, and a kill at any file change
//! (see [`crate::fs_seam`]). Invariants are checked after every launch.
//!
//! What is scripted, and why: the server (its outcomes are all the outbox reads), the network's
//! days, the disk filling up, and the kill. Everything else is the product's own code.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sentry::protocol::{EnvelopeItem, SessionStatus};
use uuid::Uuid;

use super::transport::{SendOutcome, Transport};
use super::{CrashLoopLimit, Delivery, DeliverySettings, Dsn, Outbox};
use crate::fs_seam;
use crate::report::{hang_report_for_tests, CrashKind, CrashReport, HangFollowUp};

/// The simulation's random numbers: xorshift64*, so a seed replays the same lifetime.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// True with probability `per_mille`/1000.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the network does to every upload for a while.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Network {
    Up,
    Down,
    /// 429 with a `Retry-After` of a minute.
    RateLimited,
    /// 500.
    ServerError,
    /// The request times out.
    Slow,
}

/// The server, as the simulation scripts it, and what it accepted.
#[derive(Debug)]
struct Server {
    network: Network,
    /// Event ids accepted, how often each.
    events: HashMap<String, u32>,
    /// Session ids accepted, with each update's status.
    sessions: HashMap<Uuid, Vec<SessionStatus>>,
    /// Event ids in the order accepted.
    order: Vec<String>,
    uploads: u64,
}

#[derive(Debug)]
struct SimTransport(Arc<Mutex<Server>>);

impl Transport for SimTransport {
    fn send(&self, _dsn: &Dsn, envelope: &[u8], _timeout: Duration) -> SendOutcome {
        if fs_seam::is_dead(None) {
            return SendOutcome::Network("killed (lifetime simulation)".into());
        }
        let mut server = self.0.lock().unwrap();
        match server.network {
            Network::Up => {}
            Network::Down => return SendOutcome::Network("connection refused".into()),
            Network::Slow => return SendOutcome::Network("timed out".into()),
            Network::RateLimited => {
                return SendOutcome::RateLimited {
                    status: 429,
                    retry_after: Duration::from_secs(60),
                }
            }
            Network::ServerError => {
                return SendOutcome::ServerError {
                    status: 500,
                    retry_after: None,
                    body: "internal error".into(),
                }
            }
        }
        let envelope = sentry::Envelope::from_slice(envelope).expect("the outbox sent an envelope");
        server.uploads += 1;
        let mut keys = Vec::new();
        if let Some(id) = envelope.uuid() {
            let id = id.simple().to_string();
            *server.events.entry(id.clone()).or_default() += 1;
            server.order.push(id.clone());
            keys.push(id);
        }
        for item in envelope.items() {
            if let EnvelopeItem::SessionUpdate(update) = item {
                server
                    .sessions
                    .entry(update.session_id)
                    .or_default()
                    .push(update.status);
                keys.push(update.session_id.simple().to_string());
            }
        }
        fs_seam::note_upload(keys);
        SendOutcome::Accepted {
            status: 200,
            rate_limit: None,
        }
    }
}

/// A launch's session and the statuses it may end with.
struct LaunchSession {
    sid: Uuid,
    allowed: Vec<SessionStatus>,
    /// The crash events of its run: one of them carries the session's end, if one came.
    crashes: Vec<String>,
}

/// Counts printed at the end.
#[derive(Debug, Default)]
struct Counts {
    launches: u64,
    second_processes: u64,
    crashes: u64,
    hangs_then_losses: u64,
    warnings: u64,
    kills: u64,
    disk_full_launches: u64,
    offline_launches: u64,
    reports_on_disk: u64,
    delivered: u64,
    dropped_by_rule: u64,
    duplicates: u64,
    /// Uploads repeated because their process was killed between the server's 2xx and the marker.
    repeated_after_kill: u64,
    lost: u64,
    sessions: u64,
    sessions_dropped_by_rule: u64,
    peak_report_bytes: u64,
    peak_outbox_bytes: u64,
    newest_first_checked: u64,
}

/// One simulated game on one machine.
struct Lifetime {
    rng: Rng,
    root: PathBuf,
    settings: DeliverySettings,
    server: Arc<Mutex<Server>>,
    /// Crash events whose report reached the disk (event id -> kind).
    written: HashMap<String, CrashKind>,
    /// Event ids a `dropped/` marker ever named (a rule let them go: crash-loop discard, bounds).
    dropped: HashSet<String>,
    sessions: Vec<LaunchSession>,
    known_sids: HashSet<Uuid>,
    counts: Counts,
    next_process: u32,
    clock_ms: u64,
    disk_full_now: bool,
}

impl Lifetime {
    fn new(seed: u64, name: &str) -> Self {
        // tmpfs where there is one: the simulation fsyncs tens of thousands of files.
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_owned()
        } else {
            std::env::temp_dir()
        };
        let root = base.join(format!("gpu-crash-lifetime-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let settings = DeliverySettings {
            dsn_from_env: false,
            release: Some("game@1.0.0".into()),
            environment: Some("simulation".into()),
            upload_timeout: Duration::from_millis(200),
            max_outbox_files: 40,
            max_outbox_bytes: 8 * 1024 * 1024,
            max_report_files: 60,
            max_report_bytes: 16 * 1024 * 1024,
            ..DeliverySettings::new(
                Some("http://public@127.0.0.1:9/1".parse().unwrap()),
                root.join("reports").join("outbox"),
            )
        };
        Self {
            rng: Rng(seed.max(1)),
            root,
            settings,
            server: Arc::new(Mutex::new(Server {
                network: Network::Up,
                events: HashMap::new(),
                sessions: HashMap::new(),
                order: Vec::new(),
                uploads: 0,
            })),
            written: HashMap::new(),
            dropped: HashSet::new(),
            sessions: Vec::new(),
            known_sids: HashSet::new(),
            counts: Counts::default(),
            next_process: 1,
            disk_full_now: false,
            clock_ms: 1_800_000_000_000,
        }
    }

    fn report_dir(&self) -> PathBuf {
        self.root.join("reports")
    }

    fn delivery(&self) -> Delivery {
        let outbox = Outbox::with_transport(
            self.settings.clone(),
            Arc::new(SimTransport(self.server.clone())),
        );
        Delivery::new(
            outbox,
            self.report_dir(),
            ("game", "1.0.0"),
            CrashLoopLimit::default(),
        )
    }

    /// A crash report of `kind` at the simulated clock.
    fn report(&mut self, kind: CrashKind) -> CrashReport {
        self.clock_ms += 1 + self.rng.below(5_000);
        let mut report = hang_report_for_tests();
        report.kind = kind;
        report.timestamp_ms = self.clock_ms;
        // A few distinct bugs, so the crash-loop limit and fingerprints see several.
        report.gpu_stage = Some(format!("stage {}", self.rng.below(3)));
        report
    }

    /// Notes a report whose file reached the disk (whether or not its process lived on).
    fn note_written(&mut self, report: &CrashReport) {
        // The file of this event: a merged report whose write was killed leaves the hang's.
        let on_disk = crate::report::read_report(&self.report_dir().join(report.file_name()));
        if on_disk.is_ok_and(|r| r.event_id() == report.event_id()) {
            self.written
                .insert(report.event_id().to_owned(), report.kind);
        }
    }

    /// One process's run: start, what happens in it, its end (unless it is killed first).
    fn run_process(&mut self, process: u32, sole: bool) {
        let delivery = fs_seam::run_as(process, || self.delivery());
        let started = SystemTime::now();
        fs_seam::run_as(process, || {
            delivery.start_session();
        });
        let sid = self.new_session(process);
        fs_seam::run_as(process, || {
            delivery
                .outbox()
                .startup(&self.report_dir(), started, Duration::from_millis(300))
        });
        let mut crash_started = false;
        let mut crash_done = false;
        let mut crash_events: Vec<String> = Vec::new();
        let mut lost_at_exit = false;
        let mut events = self.rng.below(4);
        while events > 0 && !fs_seam::is_dead(Some(process)) {
            events -= 1;
            let roll = self.rng.below(1000);
            if roll < 80 {
                // A device loss; half the time the game recovers its renderer and goes on.
                self.counts.crashes += 1;
                crash_started = true;
                let mut report = self.report(CrashKind::DeviceLost);
                crash_events.push(report.event_id().to_owned());
                let network_up = self.server.lock().unwrap().network == Network::Up;
                let before = self.server.lock().unwrap().order.len();
                // Some drivers give a vendor binary: a few of those fill the byte bounds.
                let vendor_binary = self.rng.chance(200).then(|| {
                    let size = 256 * 1024 + self.rng.below(2 * 1024 * 1024) as usize;
                    report.vendor_binary = Some(crate::report::VendorBinaryInfo {
                        size: size as u64,
                        file_name: None,
                        header: None,
                        parse_error: None,
                    });
                    vec![0xa5u8; size]
                });
                fs_seam::run_as(process, || {
                    let ticket = delivery.submit_crash(&mut report, vendor_binary.as_deref(), true);
                    delivery.send(ticket, &report.id);
                });
                self.note_written(&report);
                if !fs_seam::is_dead(Some(process)) {
                    crash_done = true;
                    self.check_newest_first(&report, before, network_up && sole);
                }
                if self.rng.chance(500) {
                    lost_at_exit = true;
                    break;
                }
            } else if roll < 120 {
                // A hang, then the loss it turns into: one report, two events of one issue.
                self.counts.hangs_then_losses += 1;
                crash_started = true;
                let mut hang = self.report(CrashKind::GpuHang);
                crash_events.push(hang.event_id().to_owned());
                fs_seam::run_as(process, || {
                    let ticket = delivery.submit_crash(&mut hang, None, true);
                    delivery.send(ticket, &hang.id);
                });
                self.note_written(&hang);
                if fs_seam::is_dead(Some(process)) {
                    break;
                }
                let mut loss = hang.clone();
                loss.kind = CrashKind::DeviceLost;
                loss.follows_hang = Some(HangFollowUp {
                    hang_event_id: hang.id.clone(),
                    event_id: Uuid::new_v4().simple().to_string(),
                    fingerprint: vec!["hang".into()],
                    loss_after_ms: 3_000,
                });
                crash_events.push(loss.event_id().to_owned());
                fs_seam::run_as(process, || {
                    let ticket = delivery.submit_crash(&mut loss, None, false);
                    delivery.send(ticket, &loss.id);
                });
                self.note_written(&loss);
                crash_done = !fs_seam::is_dead(Some(process));
                lost_at_exit = true;
                break;
            } else if roll < 160 {
                // A masked-fault storm: the fault watch's limiter lets a few reports through.
                for _ in 0..1 + self.rng.below(4) {
                    self.counts.warnings += 1;
                    let mut warning = self.report(CrashKind::NonFatalFault);
                    fs_seam::run_as(process, || {
                        let ticket = delivery.submit_non_fatal(&mut warning, None);
                        delivery.send(ticket, &warning.id);
                    });
                    self.note_written(&warning);
                }
            }
        }
        let killed = fs_seam::is_dead(Some(process));
        if !killed {
            let status = if lost_at_exit {
                SessionStatus::Crashed
            } else {
                SessionStatus::Exited
            };
            fs_seam::run_as(process, || delivery.at_exit(status));
        }
        let killed = fs_seam::is_dead(Some(process));
        if killed {
            self.counts.kills += 1;
        }
        if let Some(sid) = sid {
            let allowed = match (crash_started, crash_done, killed) {
                (_, true, _) => vec![SessionStatus::Crashed],
                (true, false, _) => vec![SessionStatus::Crashed, SessionStatus::Abnormal],
                (false, _, true) => vec![SessionStatus::Abnormal, SessionStatus::Exited],
                (false, _, false) => vec![SessionStatus::Exited],
            };
            self.sessions.push(LaunchSession {
                sid,
                allowed,
                crashes: crash_events,
            });
        }
        // The process is gone: its locks (session file, held envelopes, claims) with it.
        drop(delivery);
        self.note_dropped();
    }

    /// The session this launch's process started, if its file reached the disk.
    fn new_session(&mut self, process: u32) -> Option<Uuid> {
        let _ = process;
        let outbox = self.settings.outbox_dir.clone();
        let sid = super::session_files(&outbox)
            .into_iter()
            .filter(|s| s.live)
            .filter_map(|s| {
                let stem = s.path.file_stem()?.to_string_lossy().into_owned();
                Uuid::parse_str(&stem).ok()
            })
            .find(|sid| !self.known_sids.contains(sid))?;
        self.known_sids.insert(sid);
        self.counts.sessions += 1;
        Some(sid)
    }

    /// With the network up and no other process flushing, the crash that just happened is the
    /// first event its own flush delivered.
    fn check_newest_first(&mut self, report: &CrashReport, before: usize, applies: bool) {
        if !applies {
            return;
        }
        let server = self.server.lock().unwrap();
        if let Some(first) = server.order.get(before) {
            assert_eq!(
                first,
                report.event_id(),
                "the crash that just happened was not sent first"
            );
            self.counts.newest_first_checked += 1;
        }
    }

    /// Remembers the events a `dropped/` marker was made for (the seam saw each one made, before any
    /// clean-up could remove it).
    fn note_dropped(&mut self) {
        for path in fs_seam::take_dropped() {
            if let Some(name) = super::envelope_name::EnvelopeName::of(&path) {
                self.dropped.insert(name.event_id);
            }
        }
    }

    /// A launch: its network and disk, maybe a kill, maybe a second copy of the game beside it.
    fn launch(&mut self) {
        self.counts.launches += 1;
        self.weather();
        let disk_full = self.rng.chance(5);
        if disk_full {
            self.counts.disk_full_launches += 1;
        }
        fs_seam::set_disk_full(disk_full);
        self.disk_full_now = disk_full;
        let process = self.next_process;
        self.next_process += 1;
        if self.rng.chance(150) {
            fs_seam::kill_after(process, self.rng.below(60));
        }
        let second = self.rng.chance(80);
        if second {
            // Two copies at once: the second starts, runs and ends inside the first's run.
            self.counts.second_processes += 1;
            let other = self.next_process;
            self.next_process += 1;
            if self.rng.chance(150) {
                fs_seam::kill_after(other, self.rng.below(60));
            }
            self.run_two(process, other);
        } else {
            self.run_process(process, true);
        }
        fs_seam::set_disk_full(false);
        self.check_disk();
        self.check_no_duplicates();
    }

    /// Two processes of the game interleaved: each step of one, then the other.
    fn run_two(&mut self, a: u32, b: u32) {
        // The first starts (its session and startup flush), the second runs whole meanwhile, then
        // the first goes on: the interleaving that matters is startup against startup and crash
        // flush against crash flush, which `run_process` makes at its own steps.
        let delivery = fs_seam::run_as(a, || self.delivery());
        fs_seam::run_as(a, || {
            delivery.start_session();
        });
        let sid = self.new_session(a);
        self.run_process(b, false);
        fs_seam::run_as(a, || {
            delivery.outbox().startup(
                &self.report_dir(),
                SystemTime::now(),
                Duration::from_millis(300),
            )
        });
        let killed = fs_seam::is_dead(Some(a));
        if !killed {
            fs_seam::run_as(a, || delivery.at_exit(SessionStatus::Exited));
        }
        let killed = fs_seam::is_dead(Some(a));
        if killed {
            self.counts.kills += 1;
        }
        if let Some(sid) = sid {
            let allowed = if killed {
                vec![SessionStatus::Abnormal, SessionStatus::Exited]
            } else {
                vec![SessionStatus::Exited]
            };
            self.sessions.push(LaunchSession {
                sid,
                allowed,
                crashes: Vec::new(),
            });
        }
        drop(delivery);
        self.note_dropped();
    }

    /// The network's days: long stretches down, rate limits, errors, slowness, then up again.
    fn weather(&mut self) {
        let mut server = self.server.lock().unwrap();
        let next = match (server.network, self.rng.below(1000)) {
            (Network::Up, 0..=14) => Network::Down,
            (Network::Up, 15..=19) => Network::RateLimited,
            (Network::Up, 20..=24) => Network::ServerError,
            (Network::Up, 25..=29) => Network::Slow,
            (Network::Up, _) => Network::Up,
            // Down for about 30 launches on average (a week offline for a daily player).
            (Network::Down, 0..=32) => Network::Up,
            (Network::Down, _) => Network::Down,
            (_, 0..=299) => Network::Up,
            (other, _) => other,
        };
        server.network = next;
        if next != Network::Up {
            self.counts.offline_launches += 1;
        }
    }

    /// The disk stays within the budgets (a report or envelope over, while it is being written).
    fn check_disk(&mut self) {
        let report_bytes = dir_bytes(&self.report_dir(), false);
        let outbox_bytes = dir_bytes(&self.settings.outbox_dir, true);
        self.counts.peak_report_bytes = self.counts.peak_report_bytes.max(report_bytes);
        self.counts.peak_outbox_bytes = self.counts.peak_outbox_bytes.max(outbox_bytes);
        let reports = std::fs::read_dir(self.report_dir())
            .map(|e| {
                e.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                    .count()
            })
            .unwrap_or(0);
        assert!(
            reports <= self.settings.max_report_files + 1,
            "{reports} reports on disk, over the budget of {}",
            self.settings.max_report_files
        );
        // Within the budgets, but for the report just written (never dropped) and its envelope.
        let one_report = 4 * 1024 * 1024;
        assert!(
            report_bytes <= self.settings.max_report_bytes + one_report,
            "{report_bytes} bytes of reports"
        );
        assert!(
            outbox_bytes <= 2 * self.settings.max_outbox_bytes + one_report,
            "{outbox_bytes} bytes in the outbox"
        );
        let names: Vec<String> = std::fs::read_dir(&self.settings.outbox_dir)
            .map(|e| {
                e.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".envelope"))
                    .collect()
            })
            .unwrap_or_default();
        let sessions = names.iter().filter(|n| n.contains("-session-")).count();
        let pending = names.len() - sessions;
        assert!(
            pending <= self.settings.max_outbox_files + 1,
            "{pending} envelopes pending"
        );
        assert!(
            sessions <= super::bounds::MAX_SESSION_ENVELOPES + 1,
            "{sessions} session updates pending"
        );
        let markers = ["sent", "dropped"]
            .iter()
            .map(|d| std::fs::read_dir(self.settings.outbox_dir.join(d)).map_or(0, |e| e.count()))
            .sum::<usize>();
        assert!(
            markers
                <= 2 * (self.settings.max_report_files + self.settings.max_outbox_files)
                    + super::ledger::DROPPED_SESSIONS_KEPT
                    + 10,
            "{markers} markers: they pile up"
        );
    }

    /// Nothing reached the server twice, but for an upload whose process was killed in the instant
    /// between the server's 2xx and the `sent/` marker (no client can tell then whether the server
    /// has it; Sentry keeps one event per event id). Such repeats are counted, never unexplained.
    fn check_no_duplicates(&mut self) {
        let explained: HashSet<String> = fs_seam::killed_right_after_upload().into_iter().collect();
        let server = self.server.lock().unwrap();
        let mut repeats = 0;
        for (id, n) in &server.events {
            if *n > 1 {
                assert!(
                    explained.contains(id) && *n == 2,
                    "event {id} sent {n} times, not explained by a kill right after its upload"
                );
                repeats += 1;
            }
        }
        for (sid, statuses) in &server.sessions {
            if statuses.len() > 1 {
                assert!(
                    explained.contains(&sid.simple().to_string()) && statuses.len() == 2,
                    "session {sid} ended {statuses:?}, not explained by a kill right after its upload"
                );
                repeats += 1;
            }
        }
        self.counts.repeated_after_kill = repeats;
    }

    /// The network comes back for good: launches without faults until nothing waits.
    fn settle(&mut self) {
        self.server.lock().unwrap().network = Network::Up;
        for _ in 0..20 {
            let process = self.next_process;
            self.next_process += 1;
            let delivery = fs_seam::run_as(process, || self.delivery());
            let summary = fs_seam::run_as(process, || {
                delivery.outbox().startup(
                    &self.report_dir(),
                    SystemTime::now(),
                    Duration::from_secs(5),
                )
            });
            drop(delivery);
            self.note_dropped();
            if summary.pending == 0 {
                break;
            }
        }
    }

    /// After the last launch: every crash report that reached the disk reached the server exactly
    /// once, unless a rule let it go (with its `dropped/` marker); every session ended once, as
    /// its run ended.
    fn check_delivered(&mut self) {
        let server = self.server.lock().unwrap();
        let mut lost = Vec::new();
        for (event, kind) in &self.written {
            match server.events.get(event).copied().unwrap_or(0) {
                1 => self.counts.delivered += 1,
                0 if self.dropped.contains(event) => self.counts.dropped_by_rule += 1,
                0 => lost.push((event.clone(), *kind)),
                // Explained in `check_no_duplicates`: the server keeps one.
                2 => self.counts.delivered += 1,
                _ => self.counts.duplicates += 1,
            }
        }
        self.counts.reports_on_disk = self.written.len() as u64;
        self.counts.lost = lost.len() as u64;
        for (event, _) in lost.iter().take(8) {
            let mut seen = Vec::new();
            for dir in [
                self.report_dir(),
                self.settings.outbox_dir.clone(),
                self.settings.outbox_dir.join("held"),
                self.settings.outbox_dir.join("failed"),
                self.settings.outbox_dir.join("sent"),
                self.settings.outbox_dir.join("dropped"),
            ] {
                if let Ok(entries) = std::fs::read_dir(&dir) {
                    for e in entries.filter_map(Result::ok) {
                        if e.file_name().to_string_lossy().contains(event.as_str()) {
                            seen.push(e.path().display().to_string());
                        }
                    }
                }
            }
            eprintln!("never delivered: {event}, files that name it: {seen:?}");
        }
        assert!(
            lost.is_empty(),
            "{} report(s) never delivered: {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        );
        for session in &self.sessions {
            let statuses = server
                .sessions
                .get(&session.sid)
                .cloned()
                .unwrap_or_default();
            if statuses.is_empty() {
                // Let go by a rule: its own envelope (sessions go first from a full outbox), or
                // the crash envelope it rode in.
                let sid = session.sid.simple().to_string();
                let carrier_dropped = session.crashes.iter().any(|c| self.dropped.contains(c));
                assert!(
                    self.dropped.contains(&sid) || carrier_dropped,
                    "session {} never ended",
                    session.sid
                );
                self.counts.sessions_dropped_by_rule += 1;
                continue;
            }
            assert!(
                session.allowed.contains(&statuses[0]),
                "session {} ended {:?}, expected one of {:?}",
                session.sid,
                statuses[0],
                session.allowed
            );
        }
    }
}

/// Bytes of the files in `dir` (and, with `deep`, its folders).
fn dir_bytes(dir: &Path, deep: bool) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() && deep => dir_bytes(&e.path(), true),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Runs `launches` launches from `seed` and checks every invariant; returns the counts.
fn live(seed: u64, launches: u64, name: &str) -> Counts {
    let mut life = Lifetime::new(seed, name);
    for _ in 0..launches {
        life.launch();
    }
    life.settle();
    life.check_delivered();
    let _ = std::fs::remove_dir_all(&life.root);
    life.counts
}

/// Issue 51: ten thousand launches of one game on one machine, seeded. Crashes that recover,
/// hangs that turn into losses, masked-fault storms, a second copy running, days offline, 429s,
/// 500s, a slow network, a full disk, and a kill at any file change of the crash and delivery path.
/// After every launch: nothing sent twice, the disk within its budgets; at the end: every crash
/// report on disk delivered once (or let go by a rule, with its marker), every session ended once
/// with its run's status.
#[test]
fn ten_thousand_launches_send_every_report_once() {
    let seed = std::env::var("GPU_CRASH_LIFETIME_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(51);
    let counts = live(seed, 10_000, "10k");
    println!("lifetime simulation, seed {seed}: {counts:#?}");
    assert_eq!(counts.launches, 10_000);
    assert_eq!(counts.duplicates, 0);
    assert_eq!(counts.lost, 0);
    assert!(counts.kills > 100, "the kill seam fired: {counts:?}");
    assert!(counts.delivered > 500, "{counts:?}");
    assert!(counts.newest_first_checked > 100, "{counts:?}");
}
