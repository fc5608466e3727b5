//! Heap bytes of the reporter's data structures, measured with a counting global allocator:
//! the binding ring per record, the address index per live binding at 1,000,000 live bindings, per
//! freed range kept, at the default bounds, and that both stay bounded by their settings when the
//! game binds more than that.
//!
//! `cargo run --release --example memory_footprint`
//!
//! The workload is the one `benches/resolve.rs` uses: 64 MiB `DEVICE_MEMORY` blocks, each holding
//! 1,023 buffers in 64 KiB slots; buffers named with 16 characters, or not (wgpu's own BIND events).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use ash::vk;
use gpu_crash_core::test_support::{AddressIndex, IndexSettings};
use gpu_crash_core::test_support::{BindingKind, BindingRecord, BindingRing};

/// Counts live heap bytes and their peak.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only adds atomic bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK_BYTES.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
            let now = LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK_BYTES.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

const SLOTS_PER_BLOCK: u64 = 1024;
const SLOT: u64 = 64 * 1024;
const BLOCK: u64 = SLOTS_PER_BLOCK * SLOT;
const FIRST_BLOCK: u64 = 0x1_0000_0000;

/// Event `i`: every 1024th a memory block, the others buffers inside it.
fn bind(i: u64, named: bool) -> BindingRecord {
    let block = i / SLOTS_PER_BLOCK;
    let slot = i % SLOTS_PER_BLOCK;
    let block_base = FIRST_BLOCK + block * BLOCK;
    let mut r = if slot == 0 {
        BindingRecord::new(
            BindingKind::Bind,
            vk::ObjectType::DEVICE_MEMORY,
            0x7000_0000_0000 + block,
            block_base,
            BLOCK,
        )
    } else {
        let r = BindingRecord::new(
            BindingKind::Bind,
            vk::ObjectType::BUFFER,
            0x5a00_0000_0000 + i,
            block_base + slot * SLOT,
            4096 * (1 + (i * 7) % 16),
        );
        if named {
            r.with_name(&format!("buf_{i:012}"))
        } else {
            r
        }
    };
    r.sequence = i;
    r.with_frame(i / 1000)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Room for 1,000,000 live ranges: the old default bound, 2^20 (the default is now 262,144).
fn settings_1m() -> IndexSettings {
    IndexSettings {
        max_live_bindings: 1 << 20,
        ..IndexSettings::default()
    }
}

fn index_at_1m(named: bool, settings: IndexSettings) {
    let before = live();
    let mut index = AddressIndex::new(settings.clone());
    let now = Instant::now();
    for i in 0..1_000_000 {
        index.apply(&bind(i, named), now);
    }
    let bytes = live() - before;
    println!(
        "index, 1,000,000 live bindings ({}), max_live_bindings {}: {:.1} MiB heap ({:.1} MiB by \
         AddressIndex::memory), {:.1} bytes per live binding (freed {}, recent events {}, name arena \
         {} B: names kept {}, dropped {})",
        if named { "16-char names" } else { "no names" },
        settings.max_live_bindings,
        mib(bytes),
        mib(index.memory()),
        bytes as f64 / index.live_len() as f64,
        index.freed_len(),
        index.recent_events().len(),
        settings.max_name_bytes,
        index.names_in_use(),
        index.stats().names_dropped,
    );
}

/// Heap of an index with `settings`, as allocated at creation (it does not grow).
fn heap_of(settings: IndexSettings) -> usize {
    let before = live();
    let index = AddressIndex::new(settings);
    let bytes = live() - before;
    assert_eq!(
        bytes,
        index.memory(),
        "the index's own accounting must match the heap"
    );
    bytes
}

/// What one more freed range kept, one more live range allowed, costs: heap differences between
/// indexes that differ in one bound.
fn per_bound() {
    let base = IndexSettings::default();
    let at_default = heap_of(base.clone());
    let freed = heap_of(IndexSettings {
        max_freed_bindings: base.max_freed_bindings * 2,
        ..base.clone()
    }) - at_default;
    let live_bound = heap_of(IndexSettings {
        max_live_bindings: base.max_live_bindings * 2,
        ..base.clone()
    }) - at_default;
    println!(
        "index at the default bounds (max_live {}, max_freed {}, max_recent {}, name arena {} B): \
         {:.1} MiB; per freed range kept: {:.1} B; per live range allowed: {:.1} B",
        base.max_live_bindings,
        base.max_freed_bindings,
        base.max_recent_events,
        base.max_name_bytes,
        mib(at_default),
        freed as f64 / base.max_freed_bindings as f64,
        live_bound as f64 / base.max_live_bindings as f64,
    );
}

/// Binds 1.5x the live bound, then unbinds and rebinds 1,000,000 more: the heap must stop growing at
/// the bounds (live, freed, recent events) the settings give.
fn index_bounded() {
    let settings = IndexSettings::default();
    let before = live();
    let mut index = AddressIndex::new(settings.clone());
    let now = Instant::now();
    let max = settings.max_live_bindings as u64;
    let mut at_max = 0;
    for i in 0..max * 3 / 2 {
        index.apply(&bind(i, true), now);
        if i + 1 == max {
            at_max = live() - before;
        }
    }
    let over = live() - before;
    // Churn: unbind one live buffer and bind a new one, 1,000,000 times.
    let mut churned = 0u64;
    let mut i = 1u64;
    let mut next = max * 3 / 2;
    while churned < 1_000_000 {
        if !i.is_multiple_of(SLOTS_PER_BLOCK) {
            let mut r = bind(i, true);
            r.kind = BindingKind::Unbind;
            index.apply(&r, now);
            churned += 1;
        }
        i += 1;
        // A new buffer takes the freed slot in the live set (beyond max it would be dropped).
        while next.is_multiple_of(SLOTS_PER_BLOCK) {
            next += 1;
        }
        index.apply(&bind(next, true), now);
        next += 1;
    }
    let after_churn = live() - before;
    let stats = index.stats();
    println!(
        "index bounded by settings (max_live {}, max_freed {}, max_recent {}): heap {:.1} MiB at \
         max live, {:.1} MiB after 1.5x max binds ({} not indexed), {:.1} MiB after 1,000,000 more \
         unbind+bind ({} live, {} freed kept, {} evicted, {} names dropped); \
         AddressIndex::memory {:.1} MiB",
        settings.max_live_bindings,
        settings.max_freed_bindings,
        settings.max_recent_events,
        mib(at_max),
        mib(over),
        stats.live_overflow,
        mib(after_churn),
        index.live_len(),
        index.freed_len(),
        stats.freed_evicted,
        stats.names_dropped,
        mib(index.memory()),
    );
}

/// A teardown of every live range at the default bounds (a device loss with a full index): past the
/// freed ring, the unbinds are held back in a list that exists only while it holds.
fn held_teardown() {
    let settings = IndexSettings::default();
    let before = live();
    let mut index = AddressIndex::new(settings.clone());
    let at_creation = live() - before;
    let now = Instant::now();
    // Every live range the bound allows (memory blocks included); then every buffer is unbound.
    let mut i = 0u64;
    while index.live_len() < settings.max_live_bindings {
        index.apply(&bind(i, true), now);
        i += 1;
    }
    let live_before = index.live_len();
    let buffers: Vec<u64> = (0..i)
        .filter(|b| !b.is_multiple_of(SLOTS_PER_BLOCK))
        .collect();
    let ours = live() - before - at_creation;
    for &b in &buffers {
        let mut r = bind(b, true);
        r.kind = BindingKind::Unbind;
        index.apply(&r, now);
    }
    // Less the example's own list of buffers.
    let while_held = live() - before - ours;
    let held = index.freed_len() - settings.max_freed_bindings;
    index.apply(&bind(i, true), now);
    let after = live() - before - ours;
    println!(
        "held teardown at the default bounds: {} live ranges, {} unbinds, {} held past the freed \
         ring: heap {:.1} MiB at creation, {:.1} MiB while held (+{:.1} B per held unbind), {:.1} \
         MiB after the next bind; held_overflow {}",
        live_before,
        buffers.len(),
        held,
        mib(at_creation),
        mib(while_held),
        (while_held - at_creation) as f64 / held as f64,
        mib(after),
        index.stats().held_overflow,
    );
}

/// The asset map per indexed mesh (vertex and index data in slabs) and per image asset, and its
/// freed history at its bound.
fn asset_map() {
    use gpu_crash_core::test_support::filled_asset_map;
    let weigh = |meshes, images, freed| {
        let before = live();
        let map = filled_asset_map(meshes, images, freed);
        let bytes = live() - before;
        drop(map);
        bytes
    };
    let empty = weigh(0, 0, 0);
    let meshes = weigh(10_000, 0, 0) - empty;
    let images = weigh(0, 10_000, 0) - empty;
    // Twice the bound: the history keeps its last 4,096 tenants (2 per mesh: vertex and index).
    let history = weigh(0, 0, 8_192) - empty;
    println!(
        "asset map: {:.0} bytes per indexed mesh (vertex + index data, 60-character path), {:.0} \
         bytes per image asset (55-character path), freed history at its bound {:.2} MiB",
        meshes as f64 / 10_000.0,
        images as f64 / 10_000.0,
        mib(history)
    );
    // How it grows: the map's heap and the time to place every mesh, at a small and a big level.
    for count in [1_000usize, 100_000] {
        let start = std::time::Instant::now();
        let before = live();
        let map = filled_asset_map(count, 0, 0);
        let (bytes, took) = (live() - before, start.elapsed());
        drop(map);
        println!(
            "asset map at {count} meshes: {:.2} MiB, {:.0} bytes a mesh, placed in {:.2} ms \
             ({:.0} ns a mesh)",
            mib(bytes),
            bytes as f64 / count as f64,
            took.as_secs_f64() * 1e3,
            took.as_nanos() as f64 / count as f64
        );
    }
}

fn main() {
    println!(
        "BindingRecord: {} bytes; ring slot: 128 bytes (sequence + record, 128-byte aligned)",
        std::mem::size_of::<BindingRecord>()
    );
    for capacity in [32_768usize, 1 << 20] {
        let before = live();
        let (ring, consumer) = BindingRing::with_capacity(capacity);
        let bytes = live() - before;
        println!(
            "ring, capacity {}: {:.2} MiB heap, {:.1} bytes per record slot",
            ring.capacity(),
            mib(bytes),
            bytes as f64 / ring.capacity() as f64
        );
        drop((ring, consumer));
    }
    index_at_1m(true, settings_1m());
    index_at_1m(false, settings_1m());
    // What keeping every one of 1,000,000 distinct names would cost: an arena of 2^20 ids.
    index_at_1m(
        true,
        IndexSettings {
            max_name_bytes: 32 << 20,
            ..settings_1m()
        },
    );
    per_bound();
    index_bounded();
    held_teardown();
    asset_map();
    println!(
        "peak heap of this process: {:.1} MiB",
        mib(PEAK_BYTES.load(Ordering::Relaxed))
    );
}
