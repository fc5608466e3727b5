//! One reading of a [`CrashReport`] that every renderer formats: the terminal (`gpu-crash show`,
//! `gpu-crash list`), the HTML page and the Sentry event.
//!
//! Each renderer used to work out the same things on its own: how a crash kind is worded, what the
//! report's title and verdict line are, and which objects hold or neighbour a fault. Worked out
//! here once, a new crash kind or a change to the neighbourhood rule is one edit, and the three
//! renderers cannot drift apart (they had: `gpu-crash list` called a recovered fault `non_fatal`
//! where the Sentry tag says `non_fatal_fault`, and the terminal's address line and the page's map
//! chose neighbours by different reaches).
//!
//! ```
//! use std::path::Path;
//!
//! use gpu_crash_core::report::{read_report, ReportView};
//!
//! // A real report: the drill layer's use after free of a freed terrain buffer.
//! let path = concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../gpu_crash_cli/tests/fixtures/use-after-free.json"
//! );
//! let report = read_report(Path::new(path))?;
//! let view = ReportView::new(&report);
//! assert_eq!(view.kind().name, "device_lost");
//! assert_eq!(view.title(), r#"Use after free: buffer "terrain_chunk""#);
//! assert_eq!(view.verdict(), "use_after_free");
//! // The freed buffer the fault lies in, then its neighbours, nearest first.
//! let near = view.near_fault(&report.faults[0]);
//! assert!(near[0].culprit && near[0].base <= 0x1_5967_0000 && 0x1_5967_0000 < near[0].end());
//! assert_eq!(near.len(), 3);
//! # Ok::<(), gpu_crash_core::report::ReportError>(())
//! ```

use std::collections::BTreeMap;

use super::model::{CrashKind, CrashReport};
use crate::capture::BindingKind;
use crate::resolve::{BindingEventEntry, Culprit, FaultEntry, FaultVerdict, GpuAsset, ObjectState};

/// How one crash kind is worded, in each place a renderer names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindWords {
    /// snake_case name: the Sentry tag `gpu.fault_kind`, the fingerprint and `gpu-crash list`'s
    /// kind column (`device_lost`).
    pub name: &'static str,
    /// The Sentry exception type (`VK_ERROR_DEVICE_LOST`).
    pub exception: &'static str,
    /// A few words, as in the page's header (`device lost`).
    pub short: &'static str,
    /// The terminal's `what` line: the short words with what they mean for the player.
    pub what: &'static str,
}

impl KindWords {
    /// A device loss.
    pub const DEVICE_LOST: Self = Self {
        name: "device_lost",
        exception: "VK_ERROR_DEVICE_LOST",
        short: "device lost",
        what: "device lost (VK_ERROR_DEVICE_LOST)",
    };

    /// A GPU hang.
    pub const GPU_HANG: Self = Self {
        name: "gpu_hang",
        exception: "GPU_HANG",
        short: "GPU hang",
        what: "GPU hang",
    };

    /// A fault the driver recovered from (a masked `VK_KHR_device_fault` report).
    pub const NON_FATAL_FAULT: Self = Self {
        name: "non_fatal_fault",
        exception: "GPU_FAULT_RECOVERED",
        short: "fault the driver recovered from",
        what:
            "non-fatal: a GPU fault the driver recovered from (the game went on; the same bug may \
               lose the device elsewhere)",
    };

    /// The words of `kind`.
    pub fn of(kind: CrashKind) -> Self {
        match kind {
            CrashKind::DeviceLost => Self::DEVICE_LOST,
            CrashKind::GpuHang => Self::GPU_HANG,
            CrashKind::NonFatalFault => Self::NON_FATAL_FAULT,
        }
    }
}

/// A fault verdict in a title's words (`Use after free`).
fn verdict_words(v: FaultVerdict) -> &'static str {
    match v {
        FaultVerdict::UseAfterFree => "Use after free",
        FaultVerdict::OutOfBounds => "Out of bounds",
        FaultVerdict::InsideLiveObject => "Fault inside a live object",
        FaultVerdict::UnknownAddress => "Fault at an unknown address",
    }
}

/// One object that holds or neighbours a fault, in its last known state. Identical ones (a buffer
/// re-created at one address every frame) are one entry with a [`count`](Self::count).
#[derive(Clone, Debug, PartialEq)]
pub struct NearObject<'a> {
    /// Its first GPU address.
    pub base: u64,
    /// Its size in bytes.
    pub size: u64,
    /// `buffer "particles"`; an unnamed object's type and handle.
    pub label: String,
    /// Live or freed when the device was lost.
    pub state: ObjectState,
    /// How many identical objects this entry stands for.
    pub count: usize,
    /// Whether it is the fault's culprit.
    pub culprit: bool,
    /// The resolver's candidate it came from (`None` for an object known only from the binding
    /// events): its reason, how long ago it was freed, its asset.
    pub candidate: Option<&'a Culprit>,
}

impl<'a> NearObject<'a> {
    /// One past its last address (saturating: report sizes are hostile input).
    pub fn end(&self) -> u64 {
        self.base.saturating_add(self.size)
    }

    /// The Bevy asset whose bytes it holds, when the resolver knew.
    pub fn asset(&self) -> Option<&'a GpuAsset> {
        self.candidate.and_then(|c| c.asset.as_ref())
    }
}

/// Least reach of the neighbourhood: with no candidate and an exact fault address, the objects
/// within two pages of it are still its neighbours.
const MIN_REACH: u64 = 4096;

/// A report as its renderers read it (see the module docs). Cheap: it borrows the report and works
/// each thing out when asked.
#[derive(Clone, Copy, Debug)]
pub struct ReportView<'a> {
    report: &'a CrashReport,
}

impl<'a> ReportView<'a> {
    /// The view of `report`.
    pub fn new(report: &'a CrashReport) -> Self {
        Self { report }
    }

    /// How the report's crash kind is worded.
    pub fn kind(&self) -> KindWords {
        KindWords::of(self.report.kind)
    }

    /// The report in one line, for a page title: `Use after free: buffer "particles"`,
    /// `Out of bounds at 0x1000`, `GPU hang in Core3d MainPass of camera "main"`.
    pub fn title(&self) -> String {
        let r = self.report;
        if r.kind == CrashKind::GpuHang {
            return match &r.gpu_stage {
                Some(stage) => format!("GPU hang in {stage}"),
                None => match &r.hang {
                    Some(h) => format!("GPU hang in frame {}", h.oldest_pending_frame),
                    None => "GPU hang".to_owned(),
                },
            };
        }
        match r.faults.first() {
            Some(f) => match &f.culprit {
                Some(c) => format!("{}: {}", verdict_words(f.verdict), c.label),
                None => format!("{} at {:#x}", verdict_words(f.verdict), f.address),
            },
            None => "Device lost".to_owned(),
        }
    }

    /// The verdict in a table cell's words: the first fault's verdict (`use_after_free`), else
    /// `hang in a stage`, `hang` or `no fault address`; a recovered fault that stands for several
    /// adds their count (`inside_live_object x1000`).
    pub fn verdict(&self) -> String {
        let r = self.report;
        let verdict = match r.faults.first() {
            Some(f) => f.verdict.as_str().to_owned(),
            None if r.kind == CrashKind::GpuHang => match &r.gpu_stage {
                Some(_) => "hang in a stage".into(),
                None => "hang".into(),
            },
            None => "no fault address".into(),
        };
        match &r.non_fatal {
            Some(n) if n.count > 1 => format!("{verdict} x{}", n.count),
            _ => verdict,
        }
    }

    /// The objects that hold or neighbour `fault`, in the order a renderer should keep them when
    /// it has room for only some: the culprit and the resolver's candidates (best first), then the
    /// objects of the binding events the report kept, nearest the fault first, in their last known
    /// state. Neighbours count within twice the largest candidate, the fault's precision or
    /// [`MIN_REACH`], so the scale stays that of the objects around the fault. Memory blocks are
    /// left out: they hold every object in them and would set the scale.
    pub fn near_fault(&self, fault: &'a FaultEntry) -> Vec<NearObject<'a>> {
        let mut near: Vec<NearObject<'a>> = Vec::new();
        // The culprit is normally the first candidate; listed once either way.
        let culprit_alone = fault
            .culprit
            .as_ref()
            .filter(|c| !fault.candidates.contains(c));
        for c in culprit_alone
            .into_iter()
            .chain(&fault.candidates)
            .filter(|c| !is_memory_block(&c.object_type))
        {
            add(
                &mut near,
                NearObject {
                    base: c.base,
                    size: c.size,
                    label: c.label.clone(),
                    state: c.state,
                    count: 1,
                    culprit: fault.culprit.as_ref() == Some(c),
                    candidate: Some(c),
                },
            );
        }
        let reach = near
            .iter()
            .map(|o| o.size)
            .chain([fault.precision, MIN_REACH])
            .max()
            .unwrap_or(MIN_REACH)
            .saturating_mul(2);
        let mut neighbours: Vec<&BindingEventEntry> = last_events(self.report, fault)
            .into_values()
            .filter(|e| {
                distance(fault.address, e.base, e.size) <= reach
                    // Objects the candidates already name are not listed twice.
                    && !fault
                        .candidates
                        .iter()
                        .any(|c| c.handle == e.handle && c.base == e.base)
            })
            .collect();
        neighbours.sort_by_key(|e| (distance(fault.address, e.base, e.size), e.base, e.size));
        let mut more: Vec<NearObject<'a>> = Vec::new();
        for e in neighbours {
            add(
                &mut more,
                NearObject {
                    base: e.base,
                    size: e.size,
                    label: match &e.name {
                        Some(name) => format!("{} {name:?}", e.object_type.to_ascii_lowercase()),
                        None => format!("{} {:#x}", e.object_type, e.handle),
                    },
                    state: match e.kind {
                        BindingKind::Bind => ObjectState::Live,
                        BindingKind::Unbind => ObjectState::Freed,
                    },
                    count: 1,
                    culprit: false,
                    candidate: None,
                },
            );
        }
        near.extend(more);
        near
    }
}

/// Memory blocks hold every object in them: listed, they would set the scale and hide the objects.
fn is_memory_block(object_type: &str) -> bool {
    object_type == "DEVICE_MEMORY"
}

/// Adds `o` to `list`, or counts it on the identical entry already there.
fn add<'a>(list: &mut Vec<NearObject<'a>>, o: NearObject<'a>) {
    match list
        .iter_mut()
        .find(|s| (s.base, s.size, &s.label, s.state) == (o.base, o.size, &o.label, o.state))
    {
        Some(same) => {
            same.count += 1;
            same.culprit |= o.culprit;
        }
        None => list.push(o),
    }
}

/// Bytes between `address` and the range `[base, base + size)`; 0 inside it.
fn distance(address: u64, base: u64, size: u64) -> u64 {
    let end = base.saturating_add(size);
    if address < base {
        base - address
    } else if address >= end {
        address - end + 1
    } else {
        0
    }
}

/// The last binding event of each object the report kept near `fault`: it says whether the object
/// is live (bind) or freed (unbind).
fn last_events<'a>(
    report: &'a CrashReport,
    fault: &'a FaultEntry,
) -> BTreeMap<(u64, u64, u64), &'a BindingEventEntry> {
    let mut last: BTreeMap<(u64, u64, u64), &BindingEventEntry> = BTreeMap::new();
    for e in report
        .recent_events
        .iter()
        .chain(&fault.nearby_events)
        .filter(|e| e.size > 0 && !e.internal && !is_memory_block(&e.object_type))
    {
        let key = (e.base, e.size, e.handle);
        if last.get(&key).is_none_or(|old| old.sequence <= e.sequence) {
            last.insert(key, e);
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{hang_report_for_tests, HangInfo, NonFatalInfo};
    use crate::vulkan::fault::FaultAccess;

    const FAULT: u64 = 0x1_0000_0010;

    fn culprit(label: &str, object_type: &str, base: u64, size: u64) -> Culprit {
        Culprit {
            name: Some(label.to_owned()),
            label: label.to_owned(),
            object_type: object_type.to_owned(),
            handle: base >> 4,
            base,
            size,
            state: ObjectState::Freed,
            offset: FAULT.wrapping_sub(base) as i64,
            freed_ms_ago: Some(3),
            freed_frames_ago: Some(1),
            bytes_past_end: None,
            reason: "freed before the fault".to_owned(),
            opaque_capture_address: None,
            capture_replay_note: None,
            asset: None,
        }
    }

    fn event(
        sequence: u64,
        kind: BindingKind,
        handle: u64,
        base: u64,
        size: u64,
    ) -> BindingEventEntry {
        BindingEventEntry {
            sequence,
            frame: sequence,
            kind,
            object_type: "BUFFER".to_owned(),
            handle,
            base,
            size,
            name: None,
            internal: false,
            ms_before_crash: Some(sequence),
        }
    }

    fn fault(culprit: Option<Culprit>, candidates: Vec<Culprit>) -> FaultEntry {
        FaultEntry {
            address: FAULT,
            address_range: [FAULT, FAULT],
            precision: 0,
            access: FaultAccess::Write,
            verdict: FaultVerdict::UseAfterFree,
            culprit,
            candidates,
            summary: String::new(),
            nearby_events: Vec::new(),
        }
    }

    fn loss(faults: Vec<FaultEntry>) -> CrashReport {
        let mut r = hang_report_for_tests();
        r.kind = CrashKind::DeviceLost;
        r.gpu_stage = None;
        r.hang = None;
        r.non_fatal = None;
        r.recent_events = Vec::new();
        r.faults = faults;
        r
    }

    #[test]
    fn every_kind_keeps_the_names_sentry_groups_issues_by() {
        // Changing one would split every existing Sentry issue of that kind in two.
        let words = |k| KindWords::of(k);
        assert_eq!(
            (
                words(CrashKind::DeviceLost).name,
                words(CrashKind::DeviceLost).exception
            ),
            ("device_lost", "VK_ERROR_DEVICE_LOST")
        );
        assert_eq!(
            (
                words(CrashKind::GpuHang).name,
                words(CrashKind::GpuHang).exception
            ),
            ("gpu_hang", "GPU_HANG")
        );
        assert_eq!(
            (
                words(CrashKind::NonFatalFault).name,
                words(CrashKind::NonFatalFault).exception
            ),
            ("non_fatal_fault", "GPU_FAULT_RECOVERED")
        );
        assert!(words(CrashKind::NonFatalFault)
            .what
            .starts_with("non-fatal: "));
    }

    #[test]
    fn title_and_verdict_name_the_culprit_the_stage_or_what_is_missing() {
        let named = loss(vec![fault(
            Some(culprit(
                "buffer \"particles\"",
                "BUFFER",
                0x1_0000_0000,
                0x100,
            )),
            Vec::new(),
        )]);
        let view = ReportView::new(&named);
        assert_eq!(view.title(), "Use after free: buffer \"particles\"");
        assert_eq!(view.verdict(), "use_after_free");

        let mut unnamed = loss(vec![fault(None, Vec::new())]);
        unnamed.faults[0].verdict = FaultVerdict::OutOfBounds;
        assert_eq!(
            ReportView::new(&unnamed).title(),
            "Out of bounds at 0x100000010"
        );
        assert_eq!(ReportView::new(&loss(Vec::new())).title(), "Device lost");
        assert_eq!(
            ReportView::new(&loss(Vec::new())).verdict(),
            "no fault address"
        );

        let mut hang = loss(Vec::new());
        hang.kind = CrashKind::GpuHang;
        assert_eq!(ReportView::new(&hang).title(), "GPU hang");
        assert_eq!(ReportView::new(&hang).verdict(), "hang");
        hang.hang = Some(HangInfo {
            oldest_pending_frame: 61,
            pending_frames: 2,
            stalled_ms: 6000,
            hang_timeout_ms: 5000,
            suspects: Vec::new(),
            driver_watchdog_timeout: false,
        });
        assert_eq!(ReportView::new(&hang).title(), "GPU hang in frame 61");
        hang.gpu_stage = Some("Core3d MainPass of camera \"main\"".to_owned());
        assert_eq!(
            ReportView::new(&hang).title(),
            "GPU hang in Core3d MainPass of camera \"main\""
        );
        assert_eq!(ReportView::new(&hang).verdict(), "hang in a stage");

        let mut storm = named.clone();
        storm.kind = CrashKind::NonFatalFault;
        storm.non_fatal = Some(NonFatalInfo {
            count: 1000,
            span_ms: 5,
            flags: Vec::new(),
        });
        assert_eq!(ReportView::new(&storm).verdict(), "use_after_free x1000");
    }

    #[test]
    fn near_fault_lists_the_culprit_then_candidates_then_the_nearest_neighbours() {
        let lone = culprit("buffer \"lone\"", "BUFFER", 0x1_0000_0000, 0x100);
        let candidates = vec![
            culprit("memory", "DEVICE_MEMORY", 0x1_0000_0000, 1 << 30),
            culprit("buffer \"b\"", "BUFFER", 0x1_0000_0000, 0x80),
        ];
        let mut f = fault(Some(lone), candidates);
        f.nearby_events = vec![
            // Bound then freed: listed once, freed.
            event(1, BindingKind::Bind, 7, 0x1_0000_0200, 0x40),
            event(2, BindingKind::Unbind, 7, 0x1_0000_0200, 0x40),
            // Nearer, live.
            event(3, BindingKind::Bind, 8, 0x1_0000_0100, 0x40),
            // Beyond twice the largest of 0x100 and 4096 bytes: not a neighbour.
            event(4, BindingKind::Bind, 9, FAULT + 0x3000, 0x40),
        ];
        let report = loss(vec![f]);
        let near = ReportView::new(&report).near_fault(&report.faults[0]);
        let seen: Vec<(&str, ObjectState, bool)> = near
            .iter()
            .map(|o| (o.label.as_str(), o.state, o.culprit))
            .collect();
        assert_eq!(
            seen,
            [
                ("buffer \"lone\"", ObjectState::Freed, true),
                ("buffer \"b\"", ObjectState::Freed, false),
                ("BUFFER 0x8", ObjectState::Live, false),
                ("BUFFER 0x7", ObjectState::Freed, false),
            ]
        );
        assert!(near[0].candidate.is_some() && near[2].candidate.is_none());
    }

    #[test]
    fn identical_neighbours_are_one_entry_with_a_count() {
        let mut f = fault(None, Vec::new());
        // A buffer re-created at one address each frame, under new handles.
        f.nearby_events = (0..5)
            .map(|i| event(i, BindingKind::Bind, 100 + i, FAULT - 0x10, 0x100))
            .collect();
        let report = loss(vec![f]);
        let near = ReportView::new(&report).near_fault(&report.faults[0]);
        assert_eq!(near.len(), 5, "different handles are different objects");
        let mut named = report.clone();
        for e in &mut named.faults[0].nearby_events {
            e.handle = 100;
        }
        let near = ReportView::new(&named).near_fault(&named.faults[0]);
        assert_eq!((near.len(), near[0].count), (1, 1));
        let mut same_label = report.clone();
        for e in &mut same_label.faults[0].nearby_events {
            e.name = Some("particles".to_owned());
        }
        let near = ReportView::new(&same_label).near_fault(&same_label.faults[0]);
        assert_eq!((near.len(), near[0].count), (1, 5));
        assert_eq!(near[0].label, "buffer \"particles\"");
    }

    #[test]
    fn hostile_sizes_do_not_overflow_the_reach() {
        // The terminal's address line once doubled the largest size unchecked: a report is hostile
        // input, and a size near u64::MAX overflowed it.
        let huge = culprit("buffer \"huge\"", "BUFFER", 0, u64::MAX);
        let mut f = fault(Some(huge.clone()), vec![huge]);
        f.nearby_events = vec![event(1, BindingKind::Bind, 3, u64::MAX - 0x10, 0x10)];
        let report = loss(vec![f]);
        let near = ReportView::new(&report).near_fault(&report.faults[0]);
        assert_eq!(near.len(), 2);
        assert_eq!(near[0].end(), u64::MAX);
    }
}
