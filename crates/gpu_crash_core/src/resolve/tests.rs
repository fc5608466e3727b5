use super::*;
use crate::capture::{BindingKind, BindingRecord};
use std::time::Duration;

const BUFFER: vk::ObjectType = vk::ObjectType::BUFFER;
const MEMORY: vk::ObjectType = vk::ObjectType::DEVICE_MEMORY;

fn ev(
    kind: BindingKind,
    t: vk::ObjectType,
    h: u64,
    base: u64,
    size: u64,
    name: &str,
) -> BindingRecord {
    let r = BindingRecord::new(kind, t, h, base, size);
    if name.is_empty() {
        r
    } else {
        r.with_name(name)
    }
}

/// A 1 MiB memory block at 0x1000_0000 with "particles" [0x1000_0000, +0x1000) live,
/// "old_uniforms" at +0x4000 freed, "vertices" at +0x8000 live (named later, as wgpu does).
fn scene() -> (AddressIndex, Instant) {
    let mut index = AddressIndex::default();
    let t0 = Instant::now();
    use BindingKind::*;
    for r in [
        ev(Bind, MEMORY, 1, 0x1000_0000, 0x10_0000, ""),
        ev(Bind, BUFFER, 10, 0x1000_0000, 0x1000, "particles"),
        ev(Bind, BUFFER, 11, 0x1000_4000, 0x100, "").with_frame(2),
        ev(Unbind, BUFFER, 11, 0x1000_4000, 0x100, "old_uniforms").with_frame(5),
        ev(Bind, BUFFER, 12, 0x1000_8000, 0x2000, ""),
    ] {
        index.apply(&r, t0);
    }
    index.set_name(ObjectKey::new(BUFFER, 12), "vertices");
    (index, t0 + Duration::from_millis(40))
}

fn run(index: &AddressIndex, now: Instant, address: u64, precision: u64) -> FaultEntry {
    let ctx = ResolveContext {
        index,
        now,
        frame: 7,
        as_of: None,
    };
    resolve(
        &ctx,
        FaultAddress {
            address,
            precision,
            access: FaultAccess::Write,
        },
    )
}

#[test]
fn fault_range_follows_the_spec() {
    assert_eq!(fault_range(0x1000_f010, 4096), [0x1000_f000, 0x1000_ffff]);
    assert_eq!(fault_range(0x1234, 0), [0x1234, 0x1234]);
    assert_eq!(fault_range(0x1234, 1), [0x1234, 0x1234]);
    // Not a power of two: rounded up so the range still contains the address.
    assert_eq!(fault_range(0x1234, 3000), [0x1000, 0x1fff]);
}

#[test]
fn inside_live_object() {
    let (index, now) = scene();
    let f = run(&index, now, 0x1000_0010, 1);
    assert_eq!(f.verdict, FaultVerdict::InsideLiveObject);
    let c = f.culprit.unwrap();
    assert_eq!(
        (c.name.as_deref(), c.offset, c.state),
        (Some("particles"), 0x10, ObjectState::Live)
    );
    // The memory block is a candidate, ranked after the buffer.
    assert_eq!(f.candidates.last().unwrap().object_type, "DEVICE_MEMORY");
    assert_eq!(
        f.summary,
        "GPU fault: write at 0x10000010 is 16 bytes into buffer \"particles\" (live) -> inside_live_object"
    );
}

#[test]
fn use_after_free_names_the_freed_object_with_timing() {
    let (index, now) = scene();
    let f = run(&index, now, 0x1000_4010, 1);
    assert_eq!(f.verdict, FaultVerdict::UseAfterFree);
    let c = f.culprit.unwrap();
    assert_eq!(c.name.as_deref(), Some("old_uniforms"));
    assert_eq!(c.state, ObjectState::Freed);
    assert_eq!((c.freed_ms_ago, c.freed_frames_ago), (Some(40), Some(2)));
    assert!(f
        .nearby_events
        .iter()
        .any(|e| e.kind == BindingKind::Unbind));
}

#[test]
fn out_of_bounds_just_past_the_end() {
    let (index, now) = scene();
    let f = run(&index, now, 0x1000_1010, 1);
    assert_eq!(f.verdict, FaultVerdict::OutOfBounds);
    let c = f.culprit.unwrap();
    assert_eq!(
        (c.name.as_deref(), c.bytes_past_end),
        (Some("particles"), Some(0x10))
    );
    assert_eq!(
        f.summary,
        "GPU fault: write at 0x10001010 is 16 bytes past the end of buffer \"particles\" (live) -> out_of_bounds"
    );
    // Far past, but inside the same memory block: still the nearest resource's overrun.
    let f = run(&index, now, 0x1008_0000, 1);
    assert_eq!(f.verdict, FaultVerdict::OutOfBounds);
    assert_eq!(f.culprit.unwrap().name.as_deref(), Some("vertices"));
}

#[test]
fn unknown_address() {
    let (index, now) = scene();
    let f = run(&index, now, 0x7000_0000, 4096);
    assert_eq!(f.verdict, FaultVerdict::UnknownAddress);
    assert!(f.culprit.is_none());
    assert_eq!(
        f.summary,
        "GPU fault: write at 0x70000000 is in no known GPU object -> unknown_address"
    );
}

#[test]
fn precision_widens_the_search_but_exact_containment_ranks_first() {
    let (index, now) = scene();
    // 0x1000_4100 is just past old_uniforms; with page precision the freed buffer overlaps the range.
    let exact = run(&index, now, 0x1000_4100, 1);
    assert_eq!(exact.verdict, FaultVerdict::OutOfBounds); // nearest live below is "particles", same block
    let widened = run(&index, now, 0x1000_4100, 0x1000);
    assert_eq!(widened.address_range, [0x1000_4000, 0x1000_4fff]);
    assert!(widened
        .candidates
        .iter()
        .any(|c| c.name.as_deref() == Some("old_uniforms")));
}

#[test]
fn aliasing_ranks_the_smallest_live_resource_first_and_explains() {
    let (mut index, now) = scene();
    index.apply(
        &ev(
            BindingKind::Bind,
            BUFFER,
            20,
            0x1000_0000,
            0x100,
            "alias_small",
        ),
        now,
    );
    let f = run(&index, now, 0x1000_0010, 1);
    assert_eq!(
        f.culprit.as_ref().unwrap().name.as_deref(),
        Some("alias_small")
    );
    assert_eq!(f.candidates[1].name.as_deref(), Some("particles"));
    assert!(f.candidates.iter().all(|c| !c.reason.is_empty()));
}

#[test]
fn a_live_object_over_a_reused_range_beats_the_freed_previous_tenant() {
    // A page fault cannot happen at an address mapped to a live resource; the freed previous tenant is
    // still listed so a developer sees the history.
    let (mut index, now) = scene();
    index.apply(
        &ev(BindingKind::Bind, BUFFER, 30, 0x1000_4000, 0x100, "reused"),
        now,
    );
    let f = run(&index, now, 0x1000_4010, 1);
    assert_eq!(f.verdict, FaultVerdict::InsideLiveObject);
    assert_eq!(f.culprit.unwrap().name.as_deref(), Some("reused"));
    assert!(f
        .candidates
        .iter()
        .any(|c| c.name.as_deref() == Some("old_uniforms")));
}

#[test]
fn unnamed_objects_are_type_and_handle() {
    let mut index = AddressIndex::default();
    let now = Instant::now();
    index.apply(&ev(BindingKind::Bind, BUFFER, 0x5a, 0x2000, 0x100, ""), now);
    let f = run(&index, now, 0x2004, 1);
    assert_eq!(f.culprit.unwrap().label, "BUFFER 0x5a");
}

#[test]
fn objects_unbound_by_the_teardown_after_a_loss_count_as_live() {
    // wgpu destroys every buffer once the device is lost, before the report is built: resolving
    // as of the loss must see them live.
    let (mut index, now) = scene();
    let cut = 1_000;
    let mut teardown = ev(
        BindingKind::Unbind,
        BUFFER,
        10,
        0x1000_0000,
        0x1000,
        "particles",
    );
    teardown.sequence = cut + 5;
    index.apply(&teardown, now);
    let ctx = ResolveContext {
        index: &index,
        now,
        frame: 7,
        as_of: Some(cut),
    };
    let inside = resolve(
        &ctx,
        FaultAddress {
            address: 0x1000_0010,
            precision: 1,
            access: FaultAccess::Read,
        },
    );
    assert_eq!(inside.verdict, FaultVerdict::InsideLiveObject);
    assert_eq!(inside.culprit.as_ref().unwrap().state, ObjectState::Live);
    let past = resolve(
        &ctx,
        FaultAddress {
            address: 0x1000_1004,
            precision: 1,
            access: FaultAccess::Write,
        },
    );
    assert_eq!(past.verdict, FaultVerdict::OutOfBounds);
    assert_eq!(past.culprit.unwrap().name.as_deref(), Some("particles"));
    // Without the cut-off the same index says use-after-free: the cut-off is what changes it.
    let now_view = ResolveContext {
        index: &index,
        now,
        frame: 7,
        as_of: None,
    };
    let naive = resolve(
        &now_view,
        FaultAddress {
            address: 0x1000_0010,
            precision: 1,
            access: FaultAccess::Read,
        },
    );
    assert_eq!(naive.verdict, FaultVerdict::UseAfterFree);
}

#[test]
fn off_by_one_into_an_adjacent_live_object_is_the_overrun_of_the_first() {
    let (mut index, now) = scene();
    // "neighbour" starts exactly where "particles" ends.
    index.apply(
        &ev(
            BindingKind::Bind,
            BUFFER,
            40,
            0x1000_1000,
            0x100,
            "neighbour",
        ),
        now,
    );
    let f = run(&index, now, 0x1000_1000, 4096);
    assert_eq!(f.verdict, FaultVerdict::OutOfBounds);
    assert_eq!(
        f.culprit.as_ref().unwrap().name.as_deref(),
        Some("particles")
    );
    assert!(f
        .candidates
        .iter()
        .any(|c| c.name.as_deref() == Some("neighbour")));
    // One byte further is inside the neighbour, not at its start: inside a live object.
    let f = run(&index, now, 0x1000_1001, 1);
    assert_eq!(f.verdict, FaultVerdict::InsideLiveObject);
    assert_eq!(f.culprit.unwrap().name.as_deref(), Some("neighbour"));
}

#[test]
fn freed_history_older_than_the_live_neighbour_is_an_overrun_not_a_use_after_free() {
    let mut index = AddressIndex::default();
    let now = Instant::now();
    let mut seq = 0;
    let mut at = |index: &mut AddressIndex, mut r: BindingRecord| {
        seq += 1;
        r.sequence = seq;
        index.apply(&r, now);
    };
    // "old" lived at 0x2000..0x3000 and was freed; then "vertices" was bound right below it.
    at(
        &mut index,
        ev(BindingKind::Bind, BUFFER, 1, 0x2000, 0x1000, "old"),
    );
    at(
        &mut index,
        ev(BindingKind::Unbind, BUFFER, 1, 0x2000, 0x1000, "old"),
    );
    at(
        &mut index,
        ev(BindingKind::Bind, BUFFER, 2, 0x1f00, 0x100, "vertices"),
    );
    let f = run(&index, now, 0x2000, 1);
    assert_eq!(f.verdict, FaultVerdict::OutOfBounds, "{}", f.summary);
    assert_eq!(f.culprit.unwrap().name.as_deref(), Some("vertices"));
    // Far past the neighbour's end, inside the freed range: the stale tenant is the better story.
    let f = run(&index, now, 0x2800, 1);
    assert_eq!(f.verdict, FaultVerdict::UseAfterFree, "{}", f.summary);
    assert_eq!(f.culprit.unwrap().name.as_deref(), Some("old"));
    // Freed after the neighbour was bound: the freed object was the address's latest tenant.
    at(
        &mut index,
        ev(BindingKind::Bind, BUFFER, 3, 0x2000, 0x100, "recent"),
    );
    at(
        &mut index,
        ev(BindingKind::Unbind, BUFFER, 3, 0x2000, 0x100, "recent"),
    );
    let f = run(&index, now, 0x2004, 1);
    assert_eq!(f.verdict, FaultVerdict::UseAfterFree, "{}", f.summary);
    assert_eq!(f.culprit.unwrap().name.as_deref(), Some("recent"));
}

#[test]
fn an_object_bound_and_freed_after_the_cut_did_not_exist_at_the_fault() {
    // Found on lavapipe: wgpu's staging buffer took the freed range after the fault and was gone
    // again before the report; it must not be taken as "live at the fault".
    let (mut index, now) = scene();
    let cut = 1_000;
    let mut bind = ev(BindingKind::Bind, BUFFER, 20, 0x1000_4000, 0x10, "");
    bind.sequence = cut + 1;
    let mut unbind = ev(
        BindingKind::Unbind,
        BUFFER,
        20,
        0x1000_4000,
        0x10,
        "staging",
    );
    unbind.sequence = cut + 2;
    index.apply(&bind, now);
    index.apply(&unbind, now);
    let ctx = ResolveContext {
        index: &index,
        now,
        frame: 7,
        as_of: Some(cut),
    };
    let entry = resolve(
        &ctx,
        FaultAddress {
            address: 0x1000_4004,
            precision: 1,
            access: FaultAccess::Write,
        },
    );
    assert_eq!(
        entry.verdict,
        FaultVerdict::UseAfterFree,
        "{}",
        entry.summary
    );
    assert_eq!(entry.culprit.unwrap().name.as_deref(), Some("old_uniforms"));
}
