//! The non-fatal fault watch: on a device with `VK_KHR_device_fault` and `deviceFaultReportMasked`,
//! a thread ("gpu-crash-fault-watch") waits on `vkGetDeviceFaultReportsKHR` ([`POLL`] at a time)
//! for faults the driver recovered from. Each becomes a report resolved like a crash's fault
//! (verdict, object, asset) of kind `non_fatal_fault`, written to disk and sent as a `warning`
//! event with its own fingerprint: the early warning of a bug that loses the device on other
//! players' GPUs.
//!
//! - Rate limit, per fingerprint ([`RateLimiter`]): the first fault of a fingerprint opens a
//!   [`GATHER`] window; everything of that fingerprint within it is one report with the count
//!   (`non_fatal.count`). After a report is sent, faults of its fingerprint within [`WINDOW`] are
//!   counted into the next report, sent when the window has passed (or when the watch stops). A
//!   storm of a thousand masked faults in a second is one event.
//! - Reports that are not masked faults (`DEVICE_LOST` or `WATCHDOG_TIMEOUT` set) are the crash
//!   path's: they are kept in the session for the loss or hang report's fault query
//!   ([`DrainSlot`]), never dropped, and a `DEVICE_LOST` one ends the watch.
//! - The watch never runs on a lost device (checked under the drain lock before each wait) and
//!   stops before the device goes: the session's drop stops and joins it (bounded, see
//!   [`WatchThread`]); it holds its own clone of the device meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tracing::warn;

use super::handler::CrashHandling;
use super::session::{DeviceSession, DrainSlot, LostFlag};
use super::watch_thread::{StopFlag, WatchThread};
use crate::deliver::sentry_event::fingerprint;
use crate::guard::guarded;
use crate::report::{CrashReport, NonFatalInfo};
use crate::vulkan::fault::{FaultQueryError, KhrFaultReport, RawFaultInfo};
use crate::vulkan::GpuCrashCapabilities;

/// Longest one wait on `vkGetDeviceFaultReportsKHR`: how soon the watch sees a stop or a loss.
pub(crate) const POLL: Duration = Duration::from_millis(200);
/// Faults of one fingerprint within this long after its first are one report.
pub(crate) const GATHER: Duration = Duration::from_secs(1);
/// At most one report per fingerprint this often; faults in between are counted into the next.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// Distinct fault addresses resolved per drain; the others are counted into the last one resolved
/// (a storm over many addresses must not resolve each: the index is shared with the game).
const MAX_RESOLVED_PER_DRAIN: usize = 16;

/// Starts the watch of `session`'s device when its driver reports masked faults.
pub(crate) fn start(handling: &CrashHandling, session: &Arc<DeviceSession>) {
    if !session.capabilities.device_fault_report_masked {
        return;
    }
    let weak = Arc::downgrade(session);
    let (slot, lost) = session.watch_handles();
    let device = session.device.clone();
    let capabilities = session.capabilities.clone();
    let handling = handling.clone();
    let spawned = WatchThread::spawn("gpu-crash-fault-watch", move |stop| {
        guarded("non-fatal fault watch", || {
            let watched = Watched {
                session: &weak,
                slot: &slot,
                lost: &lost,
                device: &device,
                capabilities: &capabilities,
            };
            watch(&handling, &watched, &stop)
        });
    });
    match spawned {
        Ok(thread) => session.keep_fault_watch(thread),
        Err(err) => warn!(
            "GPU crash reporter: could not start the non-fatal fault watch ({err}); faults the \
             driver recovers from are not reported"
        ),
    }
}

/// What the watch holds of its device: no handle of the session while it waits on the driver (the
/// session is taken only to resolve a fault), so the session ends where the application ends it.
struct Watched<'a> {
    session: &'a Weak<DeviceSession>,
    slot: &'a DrainSlot,
    lost: &'a LostFlag,
    device: &'a wgpu::Device,
    capabilities: &'a GpuCrashCapabilities,
}

/// The thread's body (see the module documentation).
fn watch(handling: &CrashHandling, watched: &Watched<'_>, stop: &StopFlag) {
    let mut limiter = RateLimiter::default();
    let mut warned = false;
    while !stop.is_set() {
        let asked = Instant::now();
        let (non_fatal, lost, errors, ring_at) = {
            let mut for_crash = watched.slot.lock_for_watch();
            if watched.lost.is_set() {
                break; // never on a lost device: its loss report reads the driver's reports
            }
            let (reports, errors) =
                crate::vulkan::wait_for_fault_reports(watched.device, watched.capabilities, POLL);
            let ring_at = handling.indexer.ring().claimed();
            let (non_fatal, crash): (Vec<_>, Vec<_>) =
                reports.into_iter().partition(KhrFaultReport::is_non_fatal);
            let lost = crash.iter().any(|r| {
                r.flags
                    .contains(vulkan_fault_ffi::DeviceFaultFlagsKHR::DEVICE_LOST)
            });
            // The crash path's: its fault query reads them first.
            for_crash.extend(crash);
            (non_fatal, lost, errors, ring_at)
        };
        if errors
            .iter()
            .any(|e| matches!(e, FaultQueryError::Missing(_) | FaultQueryError::NotVulkan))
        {
            warn!(
                "GPU crash reporter: the non-fatal fault watch stops: {}",
                errors[0]
            );
            break;
        }
        if !errors.is_empty() && !warned {
            warned = true;
            warn!(
                "GPU crash reporter: the non-fatal fault watch's query failed: {}",
                errors[0]
            );
        }
        if !non_fatal.is_empty() {
            let Some(live) = watched.session.upgrade() else {
                break; // the session ended: the device is going
            };
            resolve_into(&non_fatal, &mut limiter, |raw| {
                handling.build_non_fatal(&live, raw, ring_at)
            });
        }
        for pending in limiter.due(Instant::now()) {
            send(handling, pending);
        }
        if lost {
            break; // the device is lost: the crash path takes over
        }
        // A driver that answers at once with nothing must not make this a busy loop.
        let left = POLL.saturating_sub(asked.elapsed());
        if non_fatal.is_empty() && !left.is_zero() {
            std::thread::park_timeout(left);
        }
    }
    // Stopping (the device is lost or going): what is counted but not sent yet goes now.
    for pending in limiter.take_all() {
        send(handling, pending);
    }
}

/// One report waiting under the rate limit.
type PendingReport = Pending<(CrashReport, Option<Vec<u8>>)>;

/// Groups `reports` by what the driver said (address, access, vendor code), resolves the first of
/// each group (at most [`MAX_RESOLVED_PER_DRAIN`]) and counts each into the limiter by fingerprint.
/// A group whose fingerprint already has a report waiting is counted into it without building
/// another: a storm at one address builds one report per window, not one per drain.
fn resolve_into(
    reports: &[KhrFaultReport],
    limiter: &mut RateLimiter<(CrashReport, Option<Vec<u8>>)>,
    mut build: impl FnMut(RawFaultInfo) -> (CrashReport, Option<Vec<u8>>),
) {
    let mut groups: Vec<(String, &KhrFaultReport, u64)> = Vec::new();
    for report in reports {
        let key = format!(
            "{:?}|{:?}|{:?}",
            report.address,
            report.instruction,
            report.vendor.as_ref().map(|v| v.fault_code)
        );
        match groups.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, _, n)) => *n += 1,
            None => groups.push((key, report, 1)),
        }
    }
    let unresolved: u64 = groups
        .iter()
        .skip(MAX_RESOLVED_PER_DRAIN)
        .map(|(_, _, n)| n)
        .sum();
    groups.truncate(MAX_RESOLVED_PER_DRAIN);
    let last = groups.len().saturating_sub(1);
    let now = Instant::now();
    for (i, (driver_key, first, mut count)) in groups.into_iter().enumerate() {
        let unresolved_here = if i == last { unresolved } else { 0 };
        if limiter.count_if_waiting(&driver_key, count + unresolved_here, now) {
            continue;
        }
        let mut raw = RawFaultInfo::default();
        raw.add_khr_reports(std::slice::from_ref(first));
        let (mut report, vendor_binary) = build(raw);
        if unresolved_here > 0 {
            count += unresolved_here;
            report.notes.push(format!(
                "{unresolved_here} more masked fault(s) at other addresses in the same drain were \
                 counted here without being resolved (at most {MAX_RESOLVED_PER_DRAIN} addresses \
                 are resolved per drain)"
            ));
        }
        let key = fingerprint(&report);
        limiter.learn(driver_key, key.clone());
        limiter.add(key, (report, vendor_binary), count, first.flag_names(), now);
    }
}

/// Stamps the count on the report and delivers it (disk, outbox, upload).
fn send(handling: &CrashHandling, pending: PendingReport) {
    let (mut report, vendor_binary) = pending.item;
    report.summary = format!(
        "GPU fault recovered by the driver{}: {}",
        if pending.count > 1 {
            format!(" ({} times)", pending.count)
        } else {
            String::new()
        },
        report
            .faults
            .first()
            .map_or(report.summary.as_str(), |f| f.summary.as_str())
    );
    report.non_fatal = Some(NonFatalInfo {
        count: pending.count,
        span_ms: pending
            .last
            .saturating_duration_since(pending.first)
            .as_millis() as u64,
        flags: pending.flags,
    });
    guarded("non-fatal fault report", || {
        handling.deliver_non_fatal(&mut report, vendor_binary.as_deref())
    });
}

/// Faults of one fingerprint counted but not reported yet.
pub(crate) struct Pending<T> {
    /// The first fault's report.
    pub item: T,
    /// Faults counted.
    pub count: u64,
    /// When the first and the last were seen.
    pub first: Instant,
    pub last: Instant,
    /// The first fault's flag names.
    pub flags: Vec<String>,
}

/// The per-fingerprint rate limit (see the module documentation). Plain data: the watch thread
/// owns it.
pub(crate) struct RateLimiter<T> {
    gather: Duration,
    window: Duration,
    last_sent: HashMap<Vec<String>, Instant>,
    pending: Vec<(Vec<String>, Pending<T>)>,
    /// The fingerprint each driver key (what the driver said of a fault) resolved to; at most
    /// [`MAX_KNOWN_KEYS`], forgotten all at once past that (a fault then builds its report again).
    known: HashMap<String, Vec<String>>,
}

/// Driver keys the limiter remembers: far more addresses than a storm at one bug touches.
const MAX_KNOWN_KEYS: usize = 4096;

impl<T> Default for RateLimiter<T> {
    fn default() -> Self {
        Self::new(GATHER, WINDOW)
    }
}

impl<T> RateLimiter<T> {
    pub(crate) fn new(gather: Duration, window: Duration) -> Self {
        Self {
            gather,
            window,
            last_sent: HashMap::new(),
            pending: Vec::new(),
            known: HashMap::new(),
        }
    }

    /// Remembers that faults the driver described as `driver_key` have fingerprint `key`.
    pub(crate) fn learn(&mut self, driver_key: String, key: Vec<String>) {
        if self.known.len() >= MAX_KNOWN_KEYS {
            self.known.clear();
        }
        self.known.insert(driver_key, key);
    }

    /// Counts `count` faults described as `driver_key` into the report of their fingerprint when one
    /// is waiting; false when none is (the caller builds one).
    pub(crate) fn count_if_waiting(&mut self, driver_key: &str, count: u64, now: Instant) -> bool {
        let Some(key) = self.known.get(driver_key) else {
            return false;
        };
        match self.pending.iter_mut().find(|(k, _)| k == key) {
            Some((_, p)) => {
                p.count = p.count.saturating_add(count);
                p.last = now;
                true
            }
            None => false,
        }
    }

    /// Counts `count` faults of fingerprint `key` seen at `now`; `item` stands for them unless one
    /// is already waiting.
    pub(crate) fn add(
        &mut self,
        key: Vec<String>,
        item: T,
        count: u64,
        flags: Vec<String>,
        now: Instant,
    ) {
        match self.pending.iter_mut().find(|(k, _)| *k == key) {
            Some((_, p)) => {
                p.count = p.count.saturating_add(count);
                p.last = now;
            }
            None => self.pending.push((
                key,
                Pending {
                    item,
                    count,
                    first: now,
                    last: now,
                    flags,
                },
            )),
        }
    }

    /// What is to be reported now: fingerprints whose gather time is over and whose last report
    /// is a window old (or that never had one). Each is marked sent at `now`.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<Pending<T>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            let (key, p) = &self.pending[i];
            let gathered = now.saturating_duration_since(p.first) >= self.gather;
            let window_over = self
                .last_sent
                .get(key)
                .is_none_or(|at| now.saturating_duration_since(*at) >= self.window);
            if gathered && window_over {
                let (key, p) = self.pending.remove(i);
                self.last_sent.insert(key, now);
                out.push(p);
            } else {
                i += 1;
            }
        }
        out
    }

    /// Everything still counted (the watch stops).
    pub(crate) fn take_all(&mut self) -> Vec<Pending<T>> {
        self.pending.drain(..).map(|(_, p)| p).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 51 item 10: a storm at one address over many drains builds one report while that
    /// report waits under the limit (at af2f5bf each drain built a whole report, up to 5 a second,
    /// and the limiter threw it away); once it is sent, the next fault builds the next one.
    #[test]
    fn a_storm_builds_one_report_while_it_waits() {
        use crate::report::{hang_report_for_tests, CrashKind};
        use crate::vulkan::fault::{FaultAccess, FaultAddress};
        use vulkan_fault_ffi::DeviceFaultFlagsKHR;
        let fault = KhrFaultReport {
            flags: DeviceFaultFlagsKHR::MEMORY_ADDRESS,
            description: "masked".into(),
            address: Some(FaultAddress {
                address: 0x1000,
                precision: 1,
                access: FaultAccess::Write,
            }),
            instruction: None,
            vendor: None,
        };
        let drain = vec![fault; 100];
        let mut limiter = RateLimiter::default();
        let mut builds = 0;
        let mut build = |_raw: RawFaultInfo| {
            builds += 1;
            let mut report = hang_report_for_tests();
            report.kind = CrashKind::NonFatalFault;
            (report, None)
        };
        for _ in 0..50 {
            resolve_into(&drain, &mut limiter, &mut build);
        }
        let sent = limiter.take_all();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].count, 5_000);
        resolve_into(&drain, &mut limiter, &mut build);
        assert_eq!(builds, 2, "one build per report, not per drain");
    }

    fn key(s: &str) -> Vec<String> {
        vec!["gpu-crash".into(), s.into()]
    }

    #[test]
    fn a_storm_is_one_report_and_later_faults_count_into_the_next() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut limiter = RateLimiter::new(Duration::from_secs(1), Duration::from_secs(60));
        // A thousand faults of one fingerprint over 900 ms, in drains of 100.
        for i in 0..10 {
            limiter.add(key("a"), i, 100, vec![], at(i * 100));
            assert!(limiter.due(at(i * 100)).is_empty(), "still gathering");
        }
        let sent = limiter.due(at(1_000));
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].item, sent[0].count), (0, 1_000));
        assert_eq!(sent[0].last.duration_since(sent[0].first).as_millis(), 900);
        // Another fingerprint has its own limit.
        limiter.add(key("b"), 50, 1, vec![], at(1_500));
        // Within the window: counted, not sent, even once gathered.
        limiter.add(key("a"), 7, 3, vec![], at(2_000));
        limiter.add(key("a"), 8, 2, vec![], at(30_000));
        let sent = limiter.due(at(31_000));
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].item, sent[0].count), (50, 1));
        // The window over: one report with the five counted since.
        let sent = limiter.due(at(61_000));
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].item, sent[0].count), (7, 5));
        assert!(limiter.due(at(200_000)).is_empty());
        // Stopping sends what is counted, gathered or not.
        limiter.add(key("a"), 9, 4, vec![], at(200_001));
        let left = limiter.take_all();
        assert_eq!(left.len(), 1);
        assert_eq!((left[0].item, left[0].count), (9, 4));
    }
}
