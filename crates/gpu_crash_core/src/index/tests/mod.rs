//! The index against every pattern the spec and the NVIDIA driver produce.

use std::time::Instant;

use ash::vk;

use super::*;
use crate::capture::{BindingKind, BindingRecord};

mod hold;

const BUFFER: vk::ObjectType = vk::ObjectType::BUFFER;
const MEMORY: vk::ObjectType = vk::ObjectType::DEVICE_MEMORY;

fn bind(t: vk::ObjectType, handle: u64, base: u64, size: u64) -> BindingRecord {
    BindingRecord::new(BindingKind::Bind, t, handle, base, size)
}

fn unbind(t: vk::ObjectType, handle: u64, base: u64, size: u64) -> BindingRecord {
    BindingRecord::new(BindingKind::Unbind, t, handle, base, size)
}

fn index_of(records: &[BindingRecord]) -> AddressIndex {
    let mut index = AddressIndex::default();
    let now = Instant::now();
    for r in records {
        index.apply(r, now);
    }
    index
}

fn live_handles(index: &AddressIndex, address: u64) -> Vec<u64> {
    let mut v: Vec<u64> = index
        .live_overlapping(address, address)
        .iter()
        .map(|(_, _, b)| b.key.handle)
        .collect();
    v.sort();
    v
}

#[test]
fn bind_then_unbind_moves_range_to_freed_with_name() {
    let index = index_of(&[
        bind(BUFFER, 1, 0x1000, 0x100).with_frame(3),
        unbind(BUFFER, 1, 0x1000, 0x100)
            .with_name("particles")
            .with_frame(7),
    ]);
    assert_eq!(index.live_len(), 0);
    let freed = index.freed_overlapping(0x1080, 0x1080);
    assert_eq!(freed.len(), 1);
    let (base, size, f) = &freed[0];
    assert_eq!((*base, *size), (0x1000, 0x100));
    assert_eq!(f.name, Some("particles"));
    assert_eq!((f.bound_frame, f.freed_frame), (Some(3), 7));
    // The handle may be reused: its name must not stick to the next object.
    assert!(index.name_of(ObjectKey::new(BUFFER, 1)).is_none());
}

#[test]
fn nvidia_pattern_duplicate_binds_are_counted_once() {
    // NVIDIA 580 (docs/driver-facts.md): memory BIND at a low address, memory BIND at the GPU VA, the same GPU VA again, then the
    // buffer BIND; destroy + free gives 3 UNBINDs.
    let index = index_of(&[
        bind(MEMORY, 0xa, 0x640_0000, 0x10000),
        bind(MEMORY, 0xa, 0xdefd_0000_0000, 0x10000),
        bind(MEMORY, 0xa, 0xdefd_0000_0000, 0x10000),
        bind(BUFFER, 0xb, 0xdefd_0000_0000, 0x10000).with_name("vertices"),
    ]);
    assert_eq!(index.stats().duplicate_binds, 1);
    assert_eq!(index.live_len(), 3);
    assert_eq!(live_handles(&index, 0xdefd_0000_0010), vec![0xa, 0xb]);
    assert_eq!(index.name_of(ObjectKey::new(BUFFER, 0xb)), Some("vertices"));
    let index = {
        let mut index = index;
        let now = Instant::now();
        for r in [
            unbind(BUFFER, 0xb, 0xdefd_0000_0000, 0x10000),
            unbind(MEMORY, 0xa, 0xdefd_0000_0000, 0x10000),
            unbind(MEMORY, 0xa, 0x640_0000, 0x10000),
        ] {
            index.apply(&r, now);
        }
        index
    };
    assert_eq!(index.live_len(), 0);
    assert_eq!(index.stats().unmatched_unbinds, 0);
    let freed = index.freed_overlapping(0xdefd_0000_0010, 0xdefd_0000_0010);
    assert_eq!(freed.len(), 2);
    assert!(freed.iter().any(|(_, _, f)| f.name == Some("vertices")));
}

#[test]
fn unmatched_unbind_still_records_a_freed_range() {
    let index = index_of(&[unbind(BUFFER, 9, 0x5000, 0x40)]);
    assert_eq!(index.stats().unmatched_unbinds, 1);
    let freed = index.freed_overlapping(0x5000, 0x503f);
    assert_eq!(freed.len(), 1);
    assert_eq!(freed[0].2.bound_frame, None);
    assert!(index.freed_overlapping(0x5040, 0x5040).is_empty());
}

#[test]
fn aliasing_keeps_every_object_over_a_range() {
    let index = index_of(&[
        bind(MEMORY, 1, 0x10000, 0x10000),
        bind(BUFFER, 2, 0x10000, 0x8000),
        bind(vk::ObjectType::IMAGE, 3, 0x10000, 0x8000),
        bind(BUFFER, 4, 0x14000, 0x1000),
    ]);
    assert_eq!(live_handles(&index, 0x14800), vec![1, 2, 3, 4]);
    let mut index = index;
    index.apply(&unbind(BUFFER, 2, 0x10000, 0x8000), Instant::now());
    assert_eq!(live_handles(&index, 0x14800), vec![1, 3, 4]);
    assert_eq!(index.freed_overlapping(0x14800, 0x14800)[0].2.key.handle, 2);
}

#[test]
fn partial_unbind_of_sparse_range_splits_it() {
    let mut index = index_of(&[bind(BUFFER, 1, 0x100000, 0x30000).with_name("sparse")]);
    index.apply(&unbind(BUFFER, 1, 0x110000, 0x10000), Instant::now());
    assert_eq!(index.stats().partial_unbinds, 1);
    assert_eq!(live_handles(&index, 0x100000), vec![1]);
    assert_eq!(live_handles(&index, 0x11ffff), Vec::<u64>::new());
    assert_eq!(live_handles(&index, 0x120000), vec![1]);
    let freed = index.freed_overlapping(0x110000, 0x11ffff);
    assert_eq!((freed[0].0, freed[0].1), (0x110000, 0x10000));
    assert_eq!(freed[0].2.name, Some("sparse"));
    // The object is still live (two pieces), so it keeps its name.
    assert_eq!(index.name_of(ObjectKey::new(BUFFER, 1)), Some("sparse"));
    // Unbinding the rest across both pieces frees them all.
    index.apply(&unbind(BUFFER, 1, 0x100000, 0x30000), Instant::now());
    assert_eq!(index.live_len(), 0);
    assert_eq!(index.freed_len(), 3);
}

#[test]
fn reallocation_as_unbind_then_bind_at_new_address() {
    let index = index_of(&[
        bind(BUFFER, 1, 0x1000, 0x100),
        unbind(BUFFER, 1, 0x1000, 0x100),
        bind(BUFFER, 1, 0x8000, 0x200).with_name("moved"),
    ]);
    assert_eq!(live_handles(&index, 0x8100), vec![1]);
    assert!(live_handles(&index, 0x1000).is_empty());
    assert_eq!(index.freed_overlapping(0x1000, 0x1000).len(), 1);
    assert_eq!(index.name_of(ObjectKey::new(BUFFER, 1)), Some("moved"));
}

#[test]
fn internal_object_becomes_real_when_reported_without_flag() {
    let mut index = index_of(&[bind(BUFFER, 5, 0x2000, 0x100).with_internal_object(true)]);
    assert!(index.live_overlapping(0x2000, 0x2000)[0].2.internal);
    index.apply(
        &bind(BUFFER, 5, 0x2000, 0x100).with_name("now-public"),
        Instant::now(),
    );
    let live = index.live_overlapping(0x2000, 0x2000);
    assert_eq!(
        live.len(),
        1,
        "the second bind is a duplicate of the same range"
    );
    assert!(!live[0].2.internal);
}

#[test]
fn unbind_with_unknown_handle_matches_exact_range_of_same_type() {
    // An internal object bound under a null handle, unbound under its real one.
    let index = index_of(&[
        bind(BUFFER, 0, 0x3000, 0x80).with_internal_object(true),
        unbind(BUFFER, 0x77, 0x3000, 0x80),
    ]);
    assert_eq!(index.live_len(), 0);
    assert_eq!(index.stats().unmatched_unbinds, 0);
}

#[test]
fn names_learned_from_any_event_and_set_name() {
    let mut index = index_of(&[bind(BUFFER, 1, 0x1000, 0x10)]);
    assert!(index.name_of(ObjectKey::new(BUFFER, 1)).is_none());
    index.set_name(ObjectKey::new(BUFFER, 1), "from allocator report");
    assert_eq!(
        index.name_of(ObjectKey::new(BUFFER, 1)),
        Some("from allocator report")
    );
    // Names for objects with no live range are not kept (bounded by the live set).
    index.set_name(ObjectKey::new(BUFFER, 99), "ghost");
    assert!(index.name_of(ObjectKey::new(BUFFER, 99)).is_none());
}

#[test]
fn memory_is_bounded_by_settings() {
    let mut index = AddressIndex::new(IndexSettings {
        max_live_bindings: 10,
        max_freed_bindings: 5,
        max_recent_events: 3,
        ..IndexSettings::default()
    });
    let now = Instant::now();
    for h in 0..20u64 {
        index.apply(&bind(BUFFER, h, h * 0x100, 0x100), now);
    }
    assert_eq!(index.live_len(), 10);
    assert_eq!(index.stats().live_overflow, 10);
    for h in 0..20u64 {
        index.apply(&unbind(BUFFER, h, h * 0x100, 0x100), now);
    }
    assert_eq!(index.live_len(), 0);
    // The ring filled (0-4); in the same unbind run the live objects' unbinds (5-9) are held (a
    // sixteenth of a 5-range ring is 0 unbinds), and only those that matched nothing (10-19) went
    // through it.
    assert_eq!(index.freed_len(), 10);
    assert_eq!(index.stats().freed_evicted, 10);
    assert_eq!(index.recent_events().len(), 3);
    assert_eq!(index.recent_events().last().unwrap().handle, 19);
    // A bind ends the run: the held unbinds take the oldest places; the bounds hold again.
    index.apply(&bind(BUFFER, 99, 0x10_0000, 0x100), now);
    assert_eq!(index.freed_len(), 5);
    assert_eq!(index.stats().freed_evicted, 15);
    assert_eq!(index.freed_overlapping(9 * 0x100, 9 * 0x100).len(), 1);
    assert!(index.freed_overlapping(0, 0).is_empty());
}

#[test]
fn nearest_live_below_names_the_object_an_overrun_came_from() {
    let index = index_of(&[
        bind(BUFFER, 1, 0x1000, 0x100),
        bind(BUFFER, 2, 0x1200, 0x100),
    ]);
    let (base, size, b) = index.nearest_live_below(0x1310).unwrap();
    assert_eq!((base, size, b.key.handle), (0x1200, 0x100, 2));
    assert!(index.nearest_live_below(0x1000).is_none());
}

#[test]
fn recent_events_serialise_object_type_names() {
    let index = index_of(&[bind(BUFFER, 1, 0x1000, 0x10).with_name("n")]);
    let json = serde_json::to_value(index.recent_events().next().unwrap()).unwrap();
    assert_eq!(json["object_type"], "BUFFER");
    assert_eq!(json["kind"], "bind");
    assert_eq!(json["name"], "n");
}

#[test]
fn reset_empties_everything_and_keeps_capacity_and_settings() {
    let settings = IndexSettings {
        max_live_bindings: 64,
        max_freed_bindings: 8,
        max_recent_events: 8,
        max_name_bytes: 4096,
    };
    let mut index = AddressIndex::new(settings.clone());
    let memory = index.memory();
    let now = Instant::now();
    for h in 1..40u64 {
        index.apply(&bind(BUFFER, h, h * 0x100, 0x100).with_name("a"), now);
    }
    for h in 1..20u64 {
        index.apply(&unbind(BUFFER, h, h * 0x100, 0x100), now);
    }
    assert!(!index.live_overlapping(0, u64::MAX).is_empty());
    index.reset();
    assert_eq!(index.live_len(), 0);
    assert_eq!(index.freed_len(), 0);
    assert_eq!(index.recent_events().len(), 0);
    assert_eq!(index.stats(), &IndexStats::default());
    assert!(index.live_overlapping(0, u64::MAX).is_empty());
    assert!(index.name_of(ObjectKey::new(BUFFER, 30)).is_none());
    assert_eq!(index.memory(), memory);
    assert_eq!(index.settings().max_live_bindings, 64);
    // Usable again, names included.
    index.apply(&bind(BUFFER, 7, 0x7000, 0x10).with_name("after"), now);
    assert_eq!(index.name_of(ObjectKey::new(BUFFER, 7)), Some("after"));
    assert_eq!(live_handles(&index, 0x7000), vec![7]);
}

/// The index's own accounting against the settings: everything is allocated at creation, within
/// 80 bytes per live range allowed (the 56-byte slab entry plus two half-empty tables; nothing for
/// the unbind hold, whose list exists only while it holds), 96 per freed range, 80 per recent event
/// and twice the name bytes, and nothing grows however much is folded.
#[test]
fn memory_stays_within_the_settings_bounds() {
    for settings in [
        IndexSettings::default(),
        IndexSettings {
            max_live_bindings: 1000,
            max_freed_bindings: 100,
            max_recent_events: 10,
            max_name_bytes: 8192,
        },
    ] {
        let bound = 80 * settings.max_live_bindings
            + 96 * settings.max_freed_bindings
            + 80 * settings.max_recent_events
            + 2 * settings.max_name_bytes;
        let mut index = AddressIndex::new(settings.clone());
        let at_creation = index.memory();
        assert!(
            at_creation <= bound,
            "{at_creation} > {bound} for {settings:?}"
        );
        let now = Instant::now();
        let max = settings.max_live_bindings as u64;
        // Past every bound: live overflow, freed eviction, unique names.
        for h in 1..=max + max / 2 {
            index.apply(
                &bind(BUFFER, h, h << 16, 0x1000).with_name(&format!("unique_{h}")),
                now,
            );
        }
        for h in 1..=max {
            index.apply(&unbind(BUFFER, h, h << 16, 0x1000), now);
            index.apply(
                &bind(BUFFER, h + (1 << 32), h << 16, 0x800).with_name(&format!("again_{h}")),
                now,
            );
        }
        assert_eq!(index.live_len() as u64, max);
        assert_eq!(index.freed_len(), settings.max_freed_bindings);
        assert!(index.stats().live_overflow > 0);
        assert!(index.stats().freed_evicted > 0);
        assert_eq!(index.memory(), at_creation, "the fold must not grow");
    }
}

#[test]
fn names_dropped_when_the_arena_is_full_of_names_in_use() {
    let mut index = AddressIndex::new(IndexSettings {
        max_name_bytes: 256, // the smallest arena: 8 names
        ..IndexSettings::default()
    });
    let now = Instant::now();
    assert_eq!(index.names_not_kept_note(), None);
    for h in 1..=10u64 {
        let mut r = bind(BUFFER, h, h * 0x100, 0x100).with_name(&format!("name_{h}"));
        r.sequence = 100 + h;
        index.apply(&r, now);
    }
    assert_eq!(index.stats().names_dropped, 2);
    assert_eq!(index.names_in_use(), 8, "the arena's 8 names are kept");
    assert_eq!(index.name_of(ObjectKey::new(BUFFER, 8)), Some("name_8"));
    assert_eq!(index.name_of(ObjectKey::new(BUFFER, 9)), None);
    // The report says how many, from where, and why.
    assert_eq!(index.stats().first_name_dropped_at, Some(109));
    let note = index.names_not_kept_note().expect("names were dropped");
    assert!(note.starts_with("2 object names were not kept from ring sequence 109 on"));
    assert!(
        note.contains("max_name_bytes 256 B, 8 distinct names"),
        "{note}"
    );
    // Names released by the freed history and recent events become room again.
    let mut index = AddressIndex::new(IndexSettings {
        max_name_bytes: 256,
        max_freed_bindings: 2,
        max_recent_events: 2,
        ..IndexSettings::default()
    });
    for h in 1..=1000u64 {
        index.apply(
            &bind(BUFFER, h, 0x1000, 0x100).with_name(&format!("transient_{h}")),
            now,
        );
        index.apply(&unbind(BUFFER, h, 0x1000, 0x100), now);
    }
    assert_eq!(index.stats().names_dropped, 0);
    assert_eq!(
        index.freed_overlapping(0x1000, 0x1000)[0].2.name,
        Some("transient_1000")
    );
}

#[test]
fn invalid_utf8_names_are_replaced_not_trusted() {
    let mut r = bind(BUFFER, 1, 0x1000, 0x10);
    r.set_name_bytes(b"ok\xffname", false);
    let index = index_of(&[r]);
    assert_eq!(
        index.name_of(ObjectKey::new(BUFFER, 1)),
        Some("ok\u{FFFD}name")
    );
}

#[test]
fn null_handles_are_ranges_not_one_object() {
    let index = index_of(&[
        bind(BUFFER, 0, 0x1000, 0x100).with_name("a"),
        bind(BUFFER, 0, 0x2000, 0x100).with_name("b"),
        bind(BUFFER, 0, 0x2000, 0x100), // duplicate of the second
        unbind(BUFFER, 0, 0x1000, 0x100),
    ]);
    assert_eq!(index.stats().duplicate_binds, 1);
    assert_eq!(index.stats().unmatched_unbinds, 0);
    assert_eq!(live_handles(&index, 0x2000), vec![0]);
    assert!(live_handles(&index, 0x1000).is_empty());
    assert_eq!(index.freed_overlapping(0x1000, 0x1000)[0].2.name, Some("a"));
}

#[test]
fn split_piece_beyond_the_live_bound_is_counted() {
    let mut index = AddressIndex::new(IndexSettings {
        max_live_bindings: 1,
        ..IndexSettings::default()
    });
    let now = Instant::now();
    index.apply(&bind(BUFFER, 1, 0x10000, 0x3000), now);
    index.apply(&unbind(BUFFER, 1, 0x11000, 0x1000), now);
    assert_eq!(index.stats().partial_unbinds, 1);
    assert_eq!(index.stats().live_overflow, 1);
    assert_eq!(live_handles(&index, 0x10000), vec![1]);
    assert!(live_handles(&index, 0x12000).is_empty());
}

#[test]
fn queries_see_events_folded_after_an_earlier_query() {
    let mut index = index_of(&[bind(BUFFER, 1, 0x1000, 0x100)]);
    assert_eq!(live_handles(&index, 0x1000), vec![1]);
    index.apply(&bind(BUFFER, 2, 0x1000, 0x80), Instant::now());
    assert_eq!(live_handles(&index, 0x1000), vec![1, 2]);
    index.apply(&unbind(BUFFER, 1, 0x1000, 0x100), Instant::now());
    assert_eq!(live_handles(&index, 0x1000), vec![2]);
    assert_eq!(index.freed_overlapping(0x1000, 0x1000).len(), 1);
}

/// Random binds, unbinds (whole, partial, unmatched) and renames over a few objects, against a
/// plain model of the rules: the live set, the freed history and the names must agree.
#[test]
fn matches_a_plain_model_under_random_churn() {
    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Range {
        handle: u64,
        base: u64,
        size: u64,
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    // Freed history large enough to keep everything: the order of the pieces one unbind frees is
    // the index's own (eviction by age is tested above).
    let settings = IndexSettings {
        max_live_bindings: 48,
        max_freed_bindings: 32_768,
        max_recent_events: 8,
        max_name_bytes: 1024,
    };
    let mut index = AddressIndex::new(settings.clone());
    let mut live: Vec<Range> = Vec::new();
    let mut names: std::collections::HashMap<u64, String> = Default::default();
    let mut freed: std::collections::VecDeque<(Range, Option<String>)> = Default::default();
    let now = Instant::now();
    for step in 0..20_000u64 {
        let handle = 1 + next(12);
        let page = 0x1000 * (handle * 16);
        let base = page + 0x100 * next(8);
        let size = 0x100 * (1 + next(4));
        let name = (next(3) == 0).then(|| format!("n{}", next(5)));
        let kind = if next(2) == 0 {
            BindingKind::Bind
        } else {
            BindingKind::Unbind
        };
        let mut r = BindingRecord::new(kind, BUFFER, handle, base, size);
        r.sequence = step;
        if let Some(n) = &name {
            r = r.with_name(n);
        }
        let overflow_before = index.stats().live_overflow;
        index.apply(&r, now);
        // The model.
        let has_live = live.iter().any(|l| l.handle == handle);
        let mut event_name = name.clone().or_else(|| names.get(&handle).cloned());
        if has_live {
            if let Some(n) = &name {
                names.insert(handle, n.clone());
            }
        } else {
            names.remove(&handle);
        }
        match kind {
            BindingKind::Bind => {
                let duplicate = live
                    .iter()
                    .any(|l| l.handle == handle && l.base == base && l.size == size);
                if !duplicate && live.len() < settings.max_live_bindings {
                    live.push(Range { handle, base, size });
                    if let Some(n) = &event_name {
                        names.insert(handle, n.clone());
                    }
                }
            }
            BindingKind::Unbind => {
                let end = base + size;
                let mut kept = Vec::new();
                let mut any = false;
                for l in live.drain(..) {
                    let l_end = l.base + l.size;
                    if l.handle != handle || l.base >= end || l_end <= base {
                        kept.push(l);
                        continue;
                    }
                    any = true;
                    let lo = l.base.max(base);
                    freed.push_back((
                        Range {
                            handle,
                            base: lo,
                            size: l_end.min(end) - lo,
                        },
                        event_name.clone(),
                    ));
                    if l.base < base {
                        kept.push(Range {
                            handle,
                            base: l.base,
                            size: base - l.base,
                        });
                    }
                    if l_end > end {
                        kept.push(Range {
                            handle,
                            base: end,
                            size: l_end - end,
                        });
                    }
                }
                live = kept;
                if !any {
                    freed.push_back((Range { handle, base, size }, event_name.take()));
                }
                while freed.len() > settings.max_freed_bindings {
                    freed.pop_front();
                }
                if !live.iter().any(|l| l.handle == handle) {
                    names.remove(&handle);
                }
            }
        }
        // A split piece that finds the slab full is not kept by the index (counted as overflow):
        // keep the model's live set in step.
        if kind == BindingKind::Unbind && index.stats().live_overflow > overflow_before {
            let mut got: Vec<Range> = index
                .live_bindings()
                .map(|(base, size, b)| Range {
                    handle: b.key.handle,
                    base,
                    size,
                })
                .collect();
            got.sort();
            live = got;
        }
        if step % 97 == 0 || step > 19_900 {
            let mut want = live.clone();
            want.sort();
            let mut got: Vec<Range> = index
                .live_bindings()
                .map(|(base, size, b)| Range {
                    handle: b.key.handle,
                    base,
                    size,
                })
                .collect();
            got.sort();
            assert_eq!(got, want, "live set at step {step}");
            let mut want_freed: Vec<_> = freed.iter().cloned().collect();
            let mut got_freed: Vec<_> = index
                .freed_bindings()
                .map(|(base, size, f)| {
                    (
                        Range {
                            handle: f.key.handle,
                            base,
                            size,
                        },
                        f.name.map(str::to_owned),
                    )
                })
                .collect();
            want_freed.sort();
            got_freed.sort();
            assert_eq!(got_freed, want_freed, "freed history at step {step}");
            for h in 1..=12 {
                assert_eq!(
                    index.name_of(ObjectKey::new(BUFFER, h)),
                    names.get(&h).map(String::as_str),
                    "name of {h} at step {step}"
                );
            }
        }
    }
    assert!(index.stats().partial_unbinds > 0);
    assert!(index.stats().unmatched_unbinds > 0);
    assert!(index.stats().duplicate_binds > 0);
}
