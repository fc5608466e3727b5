//! Holding a teardown's unbinds back: what a report sees during and after one, and what the held
//! list costs.

use super::*;

/// wgpu destroys every resource after a device loss, before the report is built: a teardown longer
/// than the freed ring pushes out neither what was freed before it nor what it tore down.
#[test]
fn a_teardown_longer_than_the_freed_ring_keeps_every_range_until_the_next_bind() {
    let settings = IndexSettings {
        max_live_bindings: 4096,
        max_freed_bindings: 256,
        max_recent_events: 16,
        max_name_bytes: 64 * 1024,
    };
    let mut index = AddressIndex::new(settings);
    let now = Instant::now();
    let mut sequence = 0;
    let mut fold = |index: &mut AddressIndex, mut record: BindingRecord| {
        sequence += 1;
        record.sequence = sequence;
        index.apply(&record, now);
        sequence
    };
    // Churn fills the freed ring; the last one freed is a use-after-free's culprit.
    for h in 1..=300u64 {
        fold(
            &mut index,
            bind(BUFFER, h, h << 20, 0x1000).with_name("churn"),
        );
        fold(&mut index, unbind(BUFFER, h, h << 20, 0x1000));
    }
    let uaf_freed = fold(&mut index, bind(BUFFER, 999, 999 << 20, 0x1000)) - 1;
    // The level: 1,000 objects, then the fault, then the teardown of everything.
    for h in 1000..2000u64 {
        fold(
            &mut index,
            bind(BUFFER, h, h << 20, 0x1000).with_name("level"),
        );
    }
    let cut = fold(&mut index, bind(BUFFER, 2000, 2000 << 20, 0x1000)) + 1;
    for h in (1000..=2000u64).chain([999]) {
        fold(&mut index, unbind(BUFFER, h, h << 20, 0x1000));
    }
    assert_eq!(index.trailing_unbind_run_start(), Some(cut));
    assert_eq!(index.live_len(), 0, "nothing is live now");
    // The churn's own evictions, then the run's first 16 unbinds (a sixteenth of the ring) take
    // the oldest places.
    assert_eq!(
        index.stats().freed_evicted,
        (300 - 256) + 16,
        "only the ring's oldest"
    );
    // Torn down by the run: freed now, live as of the fault.
    let first_torn = index.freed_overlapping(1000 << 20, 1000 << 20);
    assert_eq!(first_torn.len(), 1);
    assert!(first_torn[0].2.freed_sequence >= cut);
    assert_eq!(first_torn[0].2.name, Some("level"));
    let nearest = index
        .nearest_resource_below((1500 << 20) + 0x2000, Some(cut))
        .unwrap();
    assert_eq!(nearest.base, 1500 << 20, "live at the cut");
    // Freed before the fault: still there.
    let uaf = index.freed_overlapping(300 << 20, 300 << 20);
    assert_eq!(uaf[0].2.freed_sequence, uaf_freed);
    // The next bind ends the run; the ring keeps its bound.
    fold(&mut index, bind(BUFFER, 5000, 5000 << 20, 0x1000));
    assert_eq!(index.freed_len(), 256);
    assert_eq!(index.live_len(), 1);
    assert_eq!(index.freed_overlapping(999 << 20, 999 << 20).len(), 1);
    assert!(index.freed_overlapping(300 << 20, 300 << 20).is_empty());
}

#[test]
fn the_unbind_run_start_is_exact_for_a_teardown_longer_than_the_recent_events() {
    let mut index = AddressIndex::default();
    let now = Instant::now();
    let objects = 10_000u64;
    let mut sequence = 0;
    let mut fold = |index: &mut AddressIndex, mut record: BindingRecord| {
        sequence += 1;
        record.sequence = sequence;
        index.apply(&record, now);
        sequence
    };
    assert_eq!(index.trailing_unbind_run_start(), None, "no bind yet");
    let mut last_bind = 0;
    for h in 1..=objects {
        last_bind = fold(&mut index, bind(BUFFER, h, h << 16, 4096));
    }
    assert_eq!(index.trailing_unbind_run_start(), Some(last_bind + 1));
    let mut first_unbind = None;
    for h in 1..=objects {
        let s = fold(&mut index, unbind(BUFFER, h, h << 16, 4096));
        first_unbind.get_or_insert(s);
    }
    assert!(objects as usize > index.settings().max_recent_events);
    assert_eq!(index.trailing_unbind_run_start(), first_unbind);
    fold(&mut index, bind(BUFFER, 1, 1 << 16, 4096));
    assert_eq!(index.trailing_unbind_run_start(), Some(sequence + 1));
}

/// While a fault may have happened (the GPU stalled, the device is lost), a teardown interleaved
/// with binds (a game's other threads) is held too; turning holding off moves it into the ring.
#[test]
fn holding_keeps_unbinds_across_binds_until_turned_off() {
    let mut index = AddressIndex::new(IndexSettings {
        max_live_bindings: 4096,
        max_freed_bindings: 16,
        max_recent_events: 16,
        max_name_bytes: 64 * 1024,
    });
    let now = Instant::now();
    for h in 1..=32u64 {
        index.apply(&bind(BUFFER, h, h << 20, 0x1000), now);
        index.apply(&unbind(BUFFER, h, h << 20, 0x1000), now);
    }
    for h in 100..200u64 {
        index.apply(&bind(BUFFER, h, h << 20, 0x1000), now);
    }
    let evicted = index.stats().freed_evicted;
    index.set_holding(true);
    for h in 100..200u64 {
        index.apply(&unbind(BUFFER, h, h << 20, 0x1000), now);
        index.apply(&bind(BUFFER, h + 1000, (h + 1000) << 20, 0x1000), now);
    }
    assert_eq!(index.stats().freed_evicted, evicted, "nothing pushed out");
    assert_eq!(index.freed_len(), 16 + 100);
    assert_eq!(
        index.live_len(),
        100,
        "the new binds; the torn-down are freed"
    );
    assert_eq!(index.freed_overlapping(32 << 20, 32 << 20).len(), 1);
    assert_eq!(index.freed_overlapping(100 << 20, 100 << 20).len(), 1);
    assert!(index.live_overlapping(100 << 20, 100 << 20).is_empty());
    index.set_holding(false);
    assert_eq!(index.freed_len(), 16);
    assert_eq!(index.stats().freed_evicted, evicted + 100);
    assert_eq!(index.freed_overlapping(199 << 20, 199 << 20).len(), 1);
    assert!(index.freed_overlapping(32 << 20, 32 << 20).is_empty());
}

/// The held run's list costs nothing until a run holds an unbind, grows with what it holds, and is
/// returned when the run ends: at creation and after the run, the index is the same size, and no
/// per-live-range reserve is paid up front for it.
#[test]
fn the_held_list_exists_only_while_a_run_holds() {
    let settings = IndexSettings {
        max_live_bindings: 8192,
        max_freed_bindings: 256,
        max_recent_events: 16,
        max_name_bytes: 64 * 1024,
    };
    let mut index = AddressIndex::new(settings.clone());
    let at_creation = index.memory();
    let without_live = AddressIndex::new(IndexSettings {
        max_live_bindings: 4096,
        ..settings
    })
    .memory();
    assert!(
        at_creation - without_live <= 80 * 4096,
        "per live range allowed: {} B",
        (at_creation - without_live) / 4096
    );
    let now = Instant::now();
    for h in 1..=6000u64 {
        index.apply(&bind(BUFFER, h, h << 20, 0x1000), now);
    }
    // A teardown of everything: past the ring and a sixteenth of it, the rest is held.
    for h in 1..=6000u64 {
        index.apply(&unbind(BUFFER, h, h << 20, 0x1000), now);
    }
    // The ring fills in the run itself (256), then every later unbind is held.
    let held = 6000 - 256;
    assert_eq!(index.freed_len(), 256 + held);
    assert_eq!(index.stats().held_overflow, 0);
    assert!(index.memory() >= at_creation + 16 * held, "the list grew");
    assert!(index.memory() <= at_creation + 2 * 16 * held, "by doubling");
    index.apply(&bind(BUFFER, 9999, 9999 << 20, 0x1000), now);
    assert_eq!(index.freed_len(), 256);
    assert_eq!(index.memory(), at_creation, "returned when the run ends");
}
