//! The report's video memory section (schema 7): each heap's size, kind, usage and budget at the
//! fault, whether one was near its budget, and the allocations that failed since the device was
//! made, from the values the `vulkan` module read ([`VideoMemoryReading`]). Where the driver does
//! not tell (no `VK_EXT_memory_budget`, no `VK_EXT_device_memory_report`) the section says so in
//! plain words rather than leaving a reader to guess from an empty field.

use serde::{Deserialize, Serialize};

use crate::index::object_type_name;
use crate::vulkan::{AllocationFailureReading, VideoMemoryReading};

/// A heap whose usage passes this share of its budget (in percent) is near the budget: the next
/// allocations may fail or be moved out of video memory by the driver.
pub const NEAR_BUDGET_PERCENT: u64 = 95;

/// Said when the device has no `VK_EXT_memory_budget`.
pub const NO_BUDGET: &str =
    "the driver does not tell each heap's usage and budget (no VK_EXT_memory_budget)";
/// Said when the driver did not answer the heap query within the report's bound.
pub const HEAPS_TIMED_OUT: &str =
    "the driver did not tell its memory heaps within 500 ms of the report: no heaps";
/// Said when the device has no `VK_EXT_device_memory_report`.
pub const NO_MEMORY_REPORT: &str =
    "the driver does not tell of failed allocations (no VK_EXT_device_memory_report)";

/// Video memory at the fault.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VideoMemory {
    /// Every memory heap, in the driver's order.
    pub heaps: Vec<MemoryHeap>,
    /// Usage and budget are the driver's (`VK_EXT_memory_budget`); false: it does not tell them.
    pub budget_known: bool,
    /// Allocations that failed since the device was made (`VK_EXT_device_memory_report`); null
    /// when the driver does not tell.
    #[serde(default)]
    pub allocation_failures: Option<AllocationFailures>,
    /// A heap's usage passed [`NEAR_BUDGET_PERCENT`] of its budget.
    pub near_budget: bool,
    /// What the driver does not tell, in plain words ([`NO_BUDGET`], [`NO_MEMORY_REPORT`]).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One memory heap at the fault.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryHeap {
    /// The heap's index.
    pub index: u32,
    /// Bytes.
    pub size: u64,
    /// `DEVICE_LOCAL`: video memory (an integrated or software GPU's one heap says so too).
    pub device_local: bool,
    /// Bytes this process used, by the driver's estimate; null when it does not tell.
    pub usage: Option<u64>,
    /// Bytes the driver would let this process use; null when it does not tell.
    pub budget: Option<u64>,
    /// Usage passed [`NEAR_BUDGET_PERCENT`] of the budget.
    pub near_budget: bool,
}

/// Allocations the driver reported as failed since the device was made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationFailures {
    /// How many.
    pub count: u64,
    /// The last one.
    #[serde(default)]
    pub last: Option<FailedAllocation>,
}

/// The last allocation that failed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedAllocation {
    /// Bytes asked for.
    pub size: u64,
    /// The heap it was asked of.
    pub heap: u32,
    /// What the memory was for, e.g. `DEVICE_MEMORY` (the game's) or `PIPELINE` (the driver's).
    pub object_type: String,
    /// Milliseconds from the failure to the report.
    pub ms_before_report: u64,
}

impl MemoryHeap {
    /// Usage as a whole percentage of the budget, when both are known and the budget is not 0.
    pub fn percent_of_budget(&self) -> Option<u64> {
        let (usage, budget) = (self.usage?, self.budget?);
        (budget > 0).then(|| {
            u64::try_from(u128::from(usage) * 100 / u128::from(budget)).unwrap_or(u64::MAX)
        })
    }

    /// `heap 0 (device-local, 80.0 GiB): 77.0 GiB used of a 79.1 GiB budget (97%)`.
    pub fn describe(&self) -> String {
        let kind = if self.device_local {
            "device-local"
        } else {
            "host"
        };
        let use_line = match (self.usage, self.budget) {
            (Some(usage), Some(budget)) => format!(
                ": {} used of a {} budget{}",
                gib(usage),
                gib(budget),
                self.percent_of_budget()
                    .map(|p| format!(" ({p}%)"))
                    .unwrap_or_default()
            ),
            _ => String::new(),
        };
        format!("heap {} ({kind}, {}){use_line}", self.index, gib(self.size))
    }
}

/// Whether `usage` passes [`NEAR_BUDGET_PERCENT`] of `budget`. A budget of 0 says nothing (a
/// driver that fills no budget in).
pub fn near_budget(usage: u64, budget: u64) -> bool {
    budget > 0 && u128::from(usage) * 100 > u128::from(budget) * u128::from(NEAR_BUDGET_PERCENT)
}

impl VideoMemory {
    /// The section for `reading`, for a report made at `report_ms` (milliseconds since the Unix
    /// epoch).
    pub(crate) fn from_reading(reading: &VideoMemoryReading, report_ms: u64) -> Self {
        let heaps: Vec<MemoryHeap> = reading
            .heaps
            .iter()
            .enumerate()
            .map(|(index, h)| MemoryHeap {
                index: index as u32,
                size: h.size,
                device_local: h.device_local,
                usage: h.usage,
                budget: h.budget,
                near_budget: h
                    .usage
                    .zip(h.budget)
                    .is_some_and(|(u, b)| near_budget(u, b)),
            })
            .collect();
        let mut notes = Vec::new();
        if reading.heaps_timed_out {
            notes.push(HEAPS_TIMED_OUT.to_owned());
        } else if !reading.memory_budget {
            notes.push(NO_BUDGET.to_owned());
        }
        if reading.allocation_failures.is_none() {
            notes.push(NO_MEMORY_REPORT.to_owned());
        }
        Self {
            near_budget: heaps.iter().any(|h| h.near_budget),
            budget_known: reading.memory_budget,
            allocation_failures: reading.allocation_failures.map(|f| failures(f, report_ms)),
            heaps,
            notes,
        }
    }

    /// The report's note for each heap near its budget: `video memory near the budget: heap 0
    /// (...) used of a ... budget (97%), past 95%: ...`, or `over it` past 100%.
    pub fn near_budget_notes(&self) -> impl Iterator<Item = String> + '_ {
        self.heaps.iter().filter(|h| h.near_budget).map(|h| {
            let how = if h.usage > h.budget {
                "over it".to_owned()
            } else {
                format!("past {NEAR_BUDGET_PERCENT}%")
            };
            format!(
                "video memory near the budget: {}, {how}: allocations may fail or be moved out of \
                 video memory",
                h.describe()
            )
        })
    }

    /// One line on failed allocations: how many and the last, or that the driver does not tell.
    pub fn failures_line(&self) -> String {
        match &self.allocation_failures {
            None => NO_MEMORY_REPORT.to_owned(),
            Some(AllocationFailures { count: 0, .. }) => {
                "no allocation failed since the device was made".to_owned()
            }
            Some(AllocationFailures { count, last }) => format!(
                "{count} allocation(s) failed since the device was made{}",
                last.as_ref()
                    .map(|l| format!(
                        "; the last: {} of heap {} for {}, {} ms before the report",
                        gib(l.size),
                        l.heap,
                        l.object_type,
                        l.ms_before_report
                    ))
                    .unwrap_or_default()
            ),
        }
    }
}

fn failures(reading: AllocationFailureReading, report_ms: u64) -> AllocationFailures {
    AllocationFailures {
        count: reading.count,
        last: reading.last.map(|l| FailedAllocation {
            size: l.size,
            heap: l.heap,
            object_type: object_type_name(l.object_type),
            ms_before_report: report_ms.saturating_sub(l.at_ms),
        }),
    }
}

/// Bytes as GiB with one decimal, or MiB below one GiB: heaps and budgets are read at that scale.
fn gib(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    const GIB: f64 = (1u64 << 30) as f64;
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / GIB)
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vulkan::{HeapReading, LastAllocationFailure};

    fn reading(usage: u64, budget: u64) -> VideoMemoryReading {
        VideoMemoryReading {
            heaps: vec![
                HeapReading {
                    size: 80 << 30,
                    device_local: true,
                    usage: Some(usage),
                    budget: Some(budget),
                },
                HeapReading {
                    size: 64 << 30,
                    device_local: false,
                    usage: Some(1 << 30),
                    budget: Some(60 << 30),
                },
            ],
            memory_budget: true,
            allocation_failures: None,
            heaps_timed_out: false,
        }
    }

    #[test]
    fn a_heap_query_that_timed_out_keeps_the_counts_and_says_why_there_are_no_heaps() {
        let r = VideoMemoryReading {
            heaps: Vec::new(),
            memory_budget: false,
            allocation_failures: Some(AllocationFailureReading::default()),
            heaps_timed_out: true,
        };
        let memory = VideoMemory::from_reading(&r, 0);
        assert!(memory.heaps.is_empty() && !memory.near_budget);
        assert_eq!(memory.notes, [HEAPS_TIMED_OUT]);
        assert!(
            memory.allocation_failures.is_some(),
            "the counts are ours, not the driver's"
        );
    }

    #[test]
    fn a_percentage_past_u64_does_not_wrap() {
        let heap = MemoryHeap {
            usage: Some(u64::MAX),
            budget: Some(1),
            ..MemoryHeap::default()
        };
        assert_eq!(heap.percent_of_budget(), Some(u64::MAX));
    }

    #[test]
    fn near_means_past_95_percent_of_the_budget() {
        assert!(!near_budget(95, 100));
        assert!(near_budget(96, 100));
        assert!(near_budget(200, 100), "over the budget is near it too");
        assert!(!near_budget(0, 100));
        assert!(!near_budget(5, 0), "a budget of 0 says nothing");
        assert!(near_budget(u64::MAX, u64::MAX - 1), "no overflow");
        let budget = 1000u64 << 20;
        assert!(!near_budget(budget * 95 / 100, budget));
        assert!(near_budget(budget * 95 / 100 + 1, budget));
    }

    #[test]
    fn a_heap_past_95_percent_gets_the_note_and_the_others_do_not() {
        let memory = VideoMemory::from_reading(&reading(77 << 30, 80 << 30), 0);
        assert!(memory.near_budget && memory.budget_known);
        assert!(memory.heaps[0].near_budget && !memory.heaps[1].near_budget);
        assert_eq!(memory.heaps[0].percent_of_budget(), Some(96));
        let notes: Vec<String> = memory.near_budget_notes().collect();
        assert_eq!(
            notes,
            ["video memory near the budget: heap 0 (device-local, 80.0 GiB): 77.0 GiB used of a \
              80.0 GiB budget (96%), past 95%: allocations may fail or be moved out of video \
              memory"]
        );
        assert_eq!(memory.notes, [NO_MEMORY_REPORT]);
        assert_eq!(memory.failures_line(), NO_MEMORY_REPORT);

        let over = VideoMemory::from_reading(&reading(81 << 30, 80 << 30), 0);
        assert!(over.near_budget_notes().next().unwrap().ends_with(
            "budget (101%), over it: allocations may fail or be moved out of video memory"
        ));

        let calm = VideoMemory::from_reading(&reading(40 << 30, 80 << 30), 0);
        assert!(!calm.near_budget);
        assert_eq!(calm.near_budget_notes().count(), 0);
    }

    #[test]
    fn without_the_budget_extension_it_says_the_driver_does_not_tell() {
        let mut r = reading(0, 0);
        r.memory_budget = false;
        for h in &mut r.heaps {
            h.usage = None;
            h.budget = None;
        }
        let memory = VideoMemory::from_reading(&r, 0);
        assert!(!memory.near_budget && !memory.budget_known);
        assert_eq!(memory.notes, [NO_BUDGET, NO_MEMORY_REPORT]);
        assert_eq!(memory.heaps[1].describe(), "heap 1 (host, 64.0 GiB)");
    }

    #[test]
    fn a_report_of_schema_6_reads_without_the_section_and_a_new_one_round_trips() {
        let mut report = crate::report::hang_report_for_tests();
        report.video_memory = Some(VideoMemory::from_reading(&reading(77 << 30, 80 << 30), 0));
        let mut json = serde_json::to_value(&report).unwrap();
        let back: crate::report::CrashReport = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, report);

        // What a version 6 writer wrote: no section, no capability bits.
        let object = json.as_object_mut().unwrap();
        object.remove("video_memory");
        object.insert("schema_version".into(), 6.into());
        let gpu = object["gpu"].as_object_mut().unwrap();
        gpu.remove("memory_budget");
        gpu.remove("device_memory_report");
        let old: crate::report::CrashReport = serde_json::from_value(json).unwrap();
        assert_eq!(old.video_memory, None);
        assert!(!old.gpu.memory_budget && !old.gpu.device_memory_report);
        assert_eq!(old.schema_version, 6);
    }

    #[test]
    fn failures_are_counted_with_the_last_one_dated_from_the_report() {
        let mut r = reading(1 << 30, 80 << 30);
        r.allocation_failures = Some(AllocationFailureReading {
            count: 3,
            last: Some(LastAllocationFailure {
                size: 512 << 20,
                heap: 0,
                object_type: ash::vk::ObjectType::DEVICE_MEMORY.as_raw(),
                at_ms: 10_000,
            }),
        });
        let memory = VideoMemory::from_reading(&r, 12_500);
        assert!(memory.notes.is_empty());
        assert_eq!(
            memory.failures_line(),
            "3 allocation(s) failed since the device was made; the last: 512.0 MiB of heap 0 for \
             DEVICE_MEMORY, 2500 ms before the report"
        );
        r.allocation_failures = Some(AllocationFailureReading::default());
        assert_eq!(
            VideoMemory::from_reading(&r, 0).failures_line(),
            "no allocation failed since the device was made"
        );
    }
}
