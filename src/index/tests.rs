//! The index against every pattern the spec and the NVIDIA driver produce.

use super::*;

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
    assert_eq!(f.name.as_deref(), Some("particles"));
    assert_eq!((f.bound_frame, f.freed_frame), (Some(3), 7));
    // The handle may be reused: its name must not stick to the next object.
    assert!(index.name_of(ObjectKey::new(BUFFER, 1)).is_none());
}

#[test]
fn nvidia_pattern_duplicate_binds_are_counted_once() {
    // FACTS: memory BIND at a low address, memory BIND at the GPU VA, the same GPU VA again, then the
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
    assert_eq!(
        index.name_of(ObjectKey::new(BUFFER, 0xb)).map(|n| &**n),
        Some("vertices")
    );
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
    assert!(freed
        .iter()
        .any(|(_, _, f)| f.name.as_deref() == Some("vertices")));
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
    assert_eq!(freed[0].2.name.as_deref(), Some("sparse"));
    // The object is still live (two pieces), so it keeps its name.
    assert_eq!(
        index.name_of(ObjectKey::new(BUFFER, 1)).map(|n| &**n),
        Some("sparse")
    );
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
    assert_eq!(
        index.name_of(ObjectKey::new(BUFFER, 1)).map(|n| &**n),
        Some("moved")
    );
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
        index.name_of(ObjectKey::new(BUFFER, 1)).map(|n| &**n),
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
    assert_eq!(index.freed_len(), 5);
    assert_eq!(index.stats().freed_evicted, 15);
    // The newest freed ranges are the ones kept.
    assert_eq!(index.freed_overlapping(19 * 0x100, 19 * 0x100).len(), 1);
    assert!(index.freed_overlapping(0, 0).is_empty());
    assert_eq!(index.recent_events().len(), 3);
    assert_eq!(index.recent_events().last().unwrap().handle, 19);
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
