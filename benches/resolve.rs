//! Index and resolver at game scale: folding 1,000,000 binding events into the [`AddressIndex`],
//! and resolving 16 fault addresses against 1,000,000 live plus 65,536 freed ranges, beside a linear
//! scan of the same ranges.
//!
//! `cargo bench --bench resolve`; results land under `target/criterion/resolve/<name>`.
//!
//! Folds feed the index as the indexer thread does, a batch at a time through `apply_all` (which
//! prefetches each record's object bucket a few records ahead); the `_one_by_one` variants call
//! `apply` per record, with no prefetch, for comparison.
//!
//! The workload is shaped like a big game on NVIDIA (FACTS.md): 64 MiB `DEVICE_MEMORY` blocks, each
//! bound once, holding 1,023 buffers in 64 KiB slots (4-64 KiB each, so most slots leave a gap that
//! an overrun lands in), every buffer named with 16 characters (the heavier case: wgpu's own BIND
//! events carry no name).

use std::hint::black_box;
use std::time::{Duration, Instant};

use ash::vk;
use bevy_gpu_crash_reporter::report::FaultAccess;
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use gpu_crash_core::test_support::{
    fault_range, loss_report_to_disk, resolve, FaultAddress, ResolveContext,
};
use gpu_crash_core::test_support::{AddressIndex, IndexSettings};
use gpu_crash_core::test_support::{BindingKind, BindingRecord};

const LIVE: u64 = 1_000_000;
const FREED: u64 = 65_536;
const SLOTS_PER_BLOCK: u64 = 1024;
const SLOT: u64 = 64 * 1024;
const BLOCK: u64 = SLOTS_PER_BLOCK * SLOT;
const FIRST_BLOCK: u64 = 0x1_0000_0000;

/// Event `i` of the workload: every 1024th is a memory block, the others buffers inside it.
fn bind(i: u64) -> BindingRecord {
    let block = i / SLOTS_PER_BLOCK;
    let slot = i % SLOTS_PER_BLOCK;
    let block_base = FIRST_BLOCK + block * BLOCK;
    if slot == 0 {
        BindingRecord::new(
            BindingKind::Bind,
            vk::ObjectType::DEVICE_MEMORY,
            0x7000_0000_0000 + block,
            block_base,
            BLOCK,
        )
    } else {
        BindingRecord::new(
            BindingKind::Bind,
            vk::ObjectType::BUFFER,
            0x5a00_0000_0000 + i,
            block_base + slot * SLOT,
            buffer_size(i),
        )
        .with_name(&format!("buf_{i:012}"))
    }
    .with_frame(i / 1000)
}

fn buffer_size(i: u64) -> u64 {
    4096 * (1 + (i * 7) % 16)
}

fn is_buffer(i: u64) -> bool {
    !i.is_multiple_of(SLOTS_PER_BLOCK)
}

/// The unbind of buffer event `i`.
fn unbind(i: u64) -> BindingRecord {
    let mut r = bind(i);
    r.kind = BindingKind::Unbind;
    r
}

fn bind_records(n: u64, named: bool) -> Vec<BindingRecord> {
    (0..n)
        .map(|i| {
            let mut r = bind(i);
            if !named {
                r = BindingRecord::new(r.kind, r.vk_object_type(), r.handle, r.base, r.size)
                    .with_frame(r.frame);
            }
            r.sequence = i;
            r
        })
        .collect()
}

/// Room for the 1,000,000-range workload (the default bound is 262,144).
fn settings_1m() -> IndexSettings {
    IndexSettings {
        max_live_bindings: 1 << 20,
        ..IndexSettings::default()
    }
}

/// How a bench feeds the index: in batches as the indexer thread does (`apply_all`, which
/// prefetches a few records ahead), or one `apply` call per record (no prefetch).
#[derive(Clone, Copy)]
enum Feed {
    Batch,
    OneByOne,
}

fn feed(index: &mut AddressIndex, records: &[BindingRecord], how: Feed, now: Instant) {
    match how {
        Feed::Batch => index.apply_all(records, now),
        Feed::OneByOne => {
            for r in records {
                index.apply(r, now);
            }
        }
    }
}

/// Folds `records` into a fresh index per iteration; only the folding is timed.
fn fold(records: &[BindingRecord], how: Feed, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let mut index = AddressIndex::new(settings_1m());
        let start = Instant::now();
        feed(&mut index, records, how, Instant::now());
        total += start.elapsed();
        assert_eq!(index.live_len(), records.len());
        drop(black_box(index)); // freeing 1M entries is not part of the fold
    }
    total
}

fn fold_1m_events(c: &mut Criterion) {
    let mut group = c.benchmark_group("resolve");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(12))
        .throughput(Throughput::Elements(LIVE));
    // Every buffer BIND named (as the drill layer and NVIDIA send names set before binding).
    let records = bind_records(LIVE, true);
    group.bench_function("fold_1m_events", |b| {
        b.iter_custom(|iters| fold(&records, Feed::Batch, iters))
    });
    group.bench_function("fold_1m_events_one_by_one", |b| {
        b.iter_custom(|iters| fold(&records, Feed::OneByOne, iters))
    });
    drop(records);
    // No names on BIND (what wgpu-hal's own resources send: it names objects after binding).
    let records = bind_records(LIVE, false);
    group.bench_function("fold_1m_events_unnamed", |b| {
        b.iter_custom(|iters| fold(&records, Feed::Batch, iters))
    });
    group.finish();
}

/// Steady-state churn, what a frame does: create and destroy buffers in one memory block, each
/// unbind carrying the wgpu label (as on NVIDIA and under the drill layer), with the freed history
/// already full so every unbind evicts. Cost per event (bind or unbind).
fn fold_churn(c: &mut Criterion) {
    const LIVE_SET: u64 = 256;
    const EVENTS: u64 = 200_000;
    let labels: Vec<String> = (0..8).map(|i| format!("frame_uniforms_{i}")).collect();
    let record = |i: u64, kind: BindingKind| {
        let slot = i % LIVE_SET;
        let r = BindingRecord::new(
            kind,
            ash::vk::ObjectType::BUFFER,
            0x7f00_0000_0000 + i,
            0x1_0000_0000 + slot * 0x1_0000,
            0x8000,
        );
        let mut r = if kind == BindingKind::Unbind {
            r.with_name(&labels[(i % 8) as usize])
        } else {
            r
        };
        r.sequence = i;
        r
    };
    // Warm-up history: fill the freed ring (65,536) so the measured part evicts on every unbind.
    let mut warm = Vec::new();
    for i in 0..70_000 {
        warm.push(record(i, BindingKind::Bind));
        warm.push(record(i, BindingKind::Unbind));
    }
    let mut measured = Vec::new();
    for i in 70_000..70_000 + EVENTS / 2 {
        measured.push(record(i, BindingKind::Bind));
        measured.push(record(i, BindingKind::Unbind));
    }
    let mut group = c.benchmark_group("resolve");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Elements(EVENTS));
    for (name, how) in [
        ("fold_churn_named_unbinds", Feed::Batch),
        ("fold_churn_named_unbinds_one_by_one", Feed::OneByOne),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut index = AddressIndex::new(IndexSettings::default());
                    let now = Instant::now();
                    feed(&mut index, &warm, how, now);
                    let start = Instant::now();
                    feed(&mut index, &measured, how, now);
                    total += start.elapsed();
                    assert_eq!(index.freed_len(), 65_536);
                    drop(black_box(index));
                }
                total
            })
        });
    }
    group.finish();
}

/// 1,000,000 live + 65,536 freed ranges, plus the indices (event numbers) of the freed buffers.
fn big_index() -> (AddressIndex, Vec<u64>) {
    index_of_size(LIVE, FREED)
}

/// `live` live + `freed` freed ranges (`freed` at most `live / 15`: every 16th buffer is freed),
/// plus the indices of the freed buffers.
fn index_of_size(live: u64, freed_count: u64) -> (AddressIndex, Vec<u64>) {
    // Room for every bind before the unbinds (the default bound is 262,144 live).
    let mut index = AddressIndex::new(IndexSettings {
        max_live_bindings: ((live + freed_count) as usize)
            .next_power_of_two()
            .max(1 << 14),
        ..IndexSettings::default()
    });
    let now = Instant::now();
    let total = live + freed_count;
    let mut sequence = 0;
    for i in 0..total {
        let mut r = bind(i);
        r.sequence = sequence;
        sequence += 1;
        index.apply(&r, now);
    }
    // Free every 16th buffer, evenly spread over the address space.
    let freed: Vec<u64> = (0..total)
        .filter(|&i| is_buffer(i) && i % 16 == 1)
        .take(freed_count as usize)
        .collect();
    for &i in &freed {
        let mut r = unbind(i);
        r.sequence = sequence;
        sequence += 1;
        index.apply(&r, now);
    }
    assert_eq!(index.live_len() as u64, live);
    assert_eq!(index.freed_len() as u64, freed_count);
    (index, freed)
}

/// 4 inside live buffers, 4 inside freed ones, 4 just past the end of a live buffer (in its slot's
/// gap), 4 in no known range; precision alternates between exact and 4 KiB (the drill layer's).
fn fault_addresses(freed: &[u64]) -> Vec<FaultAddress> {
    let slot_base =
        |i: u64| FIRST_BLOCK + (i / SLOTS_PER_BLOCK) * BLOCK + (i % SLOTS_PER_BLOCK) * SLOT;
    let mut addresses = Vec::new();
    for k in 0..4u64 {
        let live = 1 + k * 250_000 + 2; // i % 16 != 1: never freed
        addresses.push(slot_base(live) + 128);
        let f = freed[(k as usize + 1) * freed.len() / 5];
        addresses.push(slot_base(f) + 256);
        // Event numbers with size < 64 KiB ((i * 7) % 16 != 15) leave a gap after the buffer.
        let mut short = 3 + k * 200_000;
        while !is_buffer(short) || buffer_size(short) == SLOT || short % 16 == 1 {
            short += 1;
        }
        addresses.push(slot_base(short) + buffer_size(short) + 16);
        addresses.push(0x10 + k * 0x1_0000_0000_0000);
    }
    addresses
        .into_iter()
        .enumerate()
        .map(|(n, address)| FaultAddress {
            address,
            precision: if n.is_multiple_of(2) { 1 } else { 4096 },
            access: FaultAccess::Write,
        })
        .collect()
}

/// What a reporter without an index would do: every range in one flat array, scanned in full for
/// each fault. The scan only finds overlapping ranges (no ranking, naming or report), and reads a
/// contiguous array: the most favourable linear scan there is.
struct Flat {
    /// `(base, size, object_type, handle, live)`.
    ranges: Vec<(u64, u64, i32, u64, bool)>,
}

impl Flat {
    fn of(index: &AddressIndex) -> Self {
        let mut ranges: Vec<_> = index
            .live_bindings()
            .map(|(b, s, v)| (b, s, v.key.object_type, v.key.handle, true))
            .collect();
        ranges.extend(
            index
                .freed_bindings()
                .map(|(b, s, f)| (b, s, f.key.object_type, f.key.handle, false)),
        );
        Flat { ranges }
    }

    fn overlapping(&self, fault: FaultAddress) -> Vec<(u64, u64, i32, u64, bool)> {
        let [lo, hi] = fault_range(fault.address, fault.precision);
        self.ranges
            .iter()
            .filter(|(b, s, ..)| *b <= hi && b.saturating_add((*s).max(1)) > lo)
            .copied()
            .collect()
    }
}

fn resolve_16_addresses(c: &mut Criterion) {
    let (index, freed) = big_index();
    let faults = fault_addresses(&freed);
    assert_eq!(faults.len(), 16);
    let flat = Flat::of(&index);
    assert_eq!(flat.ranges.len() as u64, LIVE + FREED);
    let ctx = ResolveContext {
        index: &index,
        now: Instant::now(),
        frame: 2_000,
        as_of: None,
    };
    // Both find the same ranges: the comparison is like for like.
    for &fault in &faults {
        let entry = resolve(&ctx, fault);
        assert!(entry.candidates.len() >= flat.overlapping(fault).len());
    }

    let mut group = c.benchmark_group("resolve");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(faults.len() as u64));
    group.bench_with_input(
        BenchmarkId::new("resolve_16_addresses", "this_crate"),
        &faults,
        |b, faults| {
            b.iter(|| {
                faults
                    .iter()
                    .map(|&f| resolve(&ctx, black_box(f)))
                    .collect::<Vec<_>>()
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new("resolve_16_addresses", "linear_scan"),
        &faults,
        |b, faults| {
            b.iter(|| {
                faults
                    .iter()
                    .map(|&f| flat.overlapping(black_box(f)))
                    .collect::<Vec<_>>()
            })
        },
    );
    group.finish();
    first_query_after_fold(c, index);
}

/// What a crash pays once: the first query after events were folded sorts the index into address
/// order (1,000,000 live + 65,536 freed ranges); later queries reuse it. Each iteration folds one
/// bind and one unbind (untimed; the live set and freed history keep their sizes) so the next query
/// sorts again, then times one resolve.
fn first_query_after_fold(c: &mut Criterion, mut index: AddressIndex) {
    let fault = fault_addresses(&[1])[0];
    let mut group = c.benchmark_group("resolve");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(5));
    let mut n = 0u64;
    group.bench_function("first_resolve_after_fold_1m", |b| {
        b.iter_custom(|iters| time_first_resolves(&mut index, fault, &mut n, iters))
    });
    group.finish();
}

/// `iters` times: folds one bind and one unbind (untimed), so the address order is stale, then
/// times one resolve of `fault` (which sorts it afresh). `n` numbers the folded objects across calls.
/// Folds one bind and unbind of a fresh buffer (handle numbered by `n`), as a frame's binding events
/// come before a loss: the next query is a first query again (the address-order sort redone).
fn bind_and_unbind_one(index: &mut AddressIndex, n: &mut u64) {
    *n += 1;
    let mut r = BindingRecord::new(
        BindingKind::Bind,
        vk::ObjectType::BUFFER,
        0x3000_0000_0000 + *n,
        0x10,
        16,
    );
    index.apply(&r, Instant::now());
    r.kind = BindingKind::Unbind;
    index.apply(&r, Instant::now());
}

fn time_first_resolves(
    index: &mut AddressIndex,
    fault: FaultAddress,
    n: &mut u64,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        bind_and_unbind_one(index, n);
        let start = Instant::now();
        let ctx = ResolveContext {
            index,
            now: Instant::now(),
            frame: 2_000,
            as_of: None,
        };
        black_box(resolve(&ctx, black_box(fault)));
        total += start.elapsed();
    }
    total
}

/// How what a crash pays once grows with the index: the first resolve after a fold (the address
/// order sorted afresh) at 10,000, 100,000 and 1,000,000 live ranges (a sixteenth as many freed, at
/// most 65,536), and the index's heap at each size, printed once per size.
fn first_query_scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("report_scaling");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(3));
    for live in [10_000u64, 100_000, 1_000_000] {
        let freed = (live / 16).min(FREED);
        let (mut index, _) = index_of_size(live, freed);
        println!(
            "report_scaling live={live} freed={freed} index_heap_bytes={}",
            index.memory()
        );
        let fault = fault_addresses(&[1])[0];
        let mut n = 0u64;
        group.bench_with_input(
            BenchmarkId::new("first_resolve_after_fold", live),
            &live,
            |b, _| b.iter_custom(|iters| time_first_resolves(&mut index, fault, &mut n, iters)),
        );
    }
    group.finish();
}

/// From the loss to the report on disk at 10k / 100k / 1M live ranges, as the crash path does it
/// once the driver answered: names, the first resolve (the address-order sort), the report built,
/// serialised and written atomically (fsync included). Each sample follows a bind and unbind, as
/// a loss follows a frame's binding events, so each is a first resolve.
fn loss_to_disk_scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("loss_to_disk");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(5));
    let dir = std::env::temp_dir().join(format!("loss-to-disk-{}", std::process::id()));
    for live in [10_000u64, 100_000, 1_000_000] {
        let freed = (live / 16).min(FREED);
        let (mut index, _) = index_of_size(live, freed);
        let fault = fault_addresses(&[1])[0];
        let bytes = loss_report_to_disk(&mut index, fault, &dir).expect("report written");
        println!("loss_to_disk live={live} freed={freed} report_bytes={bytes}");
        let mut n = 0u64;
        group.bench_with_input(BenchmarkId::new("report_on_disk", live), &live, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    bind_and_unbind_one(&mut index, &mut n);
                    let start = Instant::now();
                    black_box(loss_report_to_disk(&mut index, fault, &dir).expect("written"));
                    total += start.elapsed();
                    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
                total
            })
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(
    benches,
    fold_churn,
    fold_1m_events,
    resolve_16_addresses,
    first_query_scaling,
    loss_to_disk_scaling
);
criterion_main!(benches);
