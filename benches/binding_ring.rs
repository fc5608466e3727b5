//! Cost per recorded address-binding event: this crate's messenger callback (decode + lock-free ring
//! push) against two queues a crash reporter could use instead, from 1, 2 and 4 producer threads.
//!
//! `cargo bench --bench binding_ring`; results land under `target/criterion/binding_ring/<name>/<producers>`.
//!
//! Method (see BENCHMARKS.md): every queue has the plugin's default capacity (32,768 records). Each
//! measurement pushes in rounds (a quarter of the capacity with one producer; with N producers
//! `CAPACITY / (2N)` each, so half), and the queue is drained by the consumer between rounds,
//! outside the timed region. So the queue never fills: this measures the push path of a healthy
//! reporter, not the drop path. One producer: the bench thread pushes. N producers: N long-lived
//! threads start each round on a barrier and a rendezvous, each pushes its share, and the wall time
//! from the first producer's start to the last one's finish is divided by the events pushed (every
//! push contends on the queue's tail). With more producers than cores (4 on a 2-core machine) the
//! producers take turns on the cores: the bench prints how much of the time all of them pushed.
//!
//! To compare two queues fairly on a loaded machine, run each in its own process and alternate
//! which goes first (BENCHMARKS.md gives the commands), e.g.
//! `cargo bench --bench binding_ring -- --noplot 'push_only/(2|4)$'`.
//!
//! - `this_crate`: the real `PFN_vkDebugUtilsMessengerCallbackEXT`,
//!   [`address_binding_callback`], with a `VkDebugUtilsMessengerCallbackDataEXT` carrying a
//!   `VkDeviceAddressBindingCallbackDataEXT` in pNext and one `VkDebugUtilsObjectNameInfoEXT` named
//!   with 16 characters, as a driver passes it; user data is the ring. Decode + frame stamp + push.
//! - `this_crate_push_only`: `BindingRing::push` of the already decoded record (for diagnosis).
//! - `crossbeam_array_queue`: `ArrayQueue::force_push` of the same 120-byte `BindingRecord`.
//! - `mutex_vecdeque`: `Mutex<VecDeque>` push (pop front when full), as LunarG's Crash Diagnostic
//!   Layer records under a mutex.
//!
//! The baselines push an already decoded record, so they do strictly less work than `this_crate`.

use std::collections::VecDeque;
use std::ffi::{c_void, CStr};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use ash::vk::{self, Handle};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use gpu_crash_core::test_support::{address_binding_callback, MessengerTarget};
use gpu_crash_core::test_support::{BindingKind, BindingRecord, BindingRing, RingConsumer};

/// The plugin's default `binding_ring_capacity`.
const CAPACITY: usize = 32_768;
/// Events per round for one producer: a quarter of the queue.
const ROUND: u64 = (CAPACITY / 4) as u64;

/// Producer counts measured.
const PRODUCERS: [u64; 3] = [1, 2, 4];

/// The ~16-character object name the driver passes (a wgpu/Bevy label).
const NAME: &CStr = c"frame_uniforms_0";

/// A queue under test: `push` is the timed operation, `drain` empties it between rounds.
trait Target: Sync {
    /// A producer's per-thread state (for the callback: the message the driver builds).
    type Producer;
    fn producer(&self, thread: u64) -> Self::Producer;
    fn push(&self, producer: &mut Self::Producer, n: u64);
    fn drain(&self) -> usize;
}

/// The structures the driver hands to the callback for one BUFFER BIND event. Boxed so the
/// self-references (pNext, pObjects) stay valid.
struct Message {
    binding: vk::DeviceAddressBindingCallbackDataEXT<'static>,
    objects: [vk::DebugUtilsObjectNameInfoEXT<'static>; 1],
    data: vk::DebugUtilsMessengerCallbackDataEXT<'static>,
}

impl Message {
    fn new(thread: u64) -> Box<Message> {
        let mut m = Box::new(Message {
            binding: vk::DeviceAddressBindingCallbackDataEXT::default()
                .base_address(0xdefd_0000_0000 + (thread << 32))
                .size(64 * 1024)
                .binding_type(vk::DeviceAddressBindingTypeEXT::BIND),
            objects: [vk::DebugUtilsObjectNameInfoEXT::default()
                .object_handle(vk::Buffer::from_raw(0x5a00_0000 + (thread << 24)))
                .object_name(NAME)],
            data: vk::DebugUtilsMessengerCallbackDataEXT::default(),
        });
        m.data.message_id_number = 0;
        m.data.p_next = &m.binding as *const _ as *const c_void;
        m.data.object_count = 1;
        m.data.p_objects = m.objects.as_ptr();
        m
    }
}

struct ThisCrate {
    target: MessengerTarget,
    consumer: Mutex<RingConsumer>,
}

impl ThisCrate {
    fn new() -> Self {
        let (ring, consumer) = BindingRing::with_capacity(CAPACITY);
        Self {
            target: MessengerTarget {
                ring,
                device_generation: 1,
            },
            consumer: Mutex::new(consumer),
        }
    }
}

impl Target for ThisCrate {
    type Producer = Box<Message>;
    fn producer(&self, thread: u64) -> Box<Message> {
        Message::new(thread)
    }
    #[inline]
    fn push(&self, m: &mut Box<Message>, n: u64) {
        // The driver changes the address per event; so do we (a store the callback must read).
        m.binding.base_address = 0xdefd_0000_0000 + (n << 16);
        // SAFETY: the message is a valid callback data chain; user data is a live target.
        unsafe {
            address_binding_callback(
                vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
                black_box(&m.data),
                &self.target as *const MessengerTarget as *mut c_void,
            );
        }
    }
    fn drain(&self) -> usize {
        let mut consumer = self.consumer.lock().unwrap();
        consumer.drain(usize::MAX, |r| {
            black_box(r);
        })
    }
}

/// The record a decoded BUFFER BIND becomes; what the baselines push.
fn record(thread: u64) -> BindingRecord {
    BindingRecord::new(
        BindingKind::Bind,
        vk::ObjectType::BUFFER,
        0x5a00_0000 + (thread << 24),
        0xdefd_0000_0000,
        64 * 1024,
    )
    .with_name(NAME.to_str().unwrap())
}

struct PushOnly(ThisCrate);

impl Target for PushOnly {
    type Producer = BindingRecord;
    fn producer(&self, thread: u64) -> BindingRecord {
        record(thread)
    }
    #[inline]
    fn push(&self, r: &mut BindingRecord, n: u64) {
        r.base = 0xdefd_0000_0000 + (n << 16);
        let _ = self.0.target.ring.push(black_box(*r));
    }
    fn drain(&self) -> usize {
        self.0.drain()
    }
}

struct Crossbeam(ArrayQueue<BindingRecord>);

impl Target for Crossbeam {
    type Producer = BindingRecord;
    fn producer(&self, thread: u64) -> BindingRecord {
        record(thread)
    }
    #[inline]
    fn push(&self, r: &mut BindingRecord, n: u64) {
        r.base = 0xdefd_0000_0000 + (n << 16);
        let _ = self.0.force_push(black_box(*r));
    }
    fn drain(&self) -> usize {
        let mut n = 0;
        while let Some(r) = self.0.pop() {
            black_box(r);
            n += 1;
        }
        n
    }
}

struct MutexDeque(Mutex<VecDeque<BindingRecord>>);

impl Target for MutexDeque {
    type Producer = BindingRecord;
    fn producer(&self, thread: u64) -> BindingRecord {
        record(thread)
    }
    #[inline]
    fn push(&self, r: &mut BindingRecord, n: u64) {
        r.base = 0xdefd_0000_0000 + (n << 16);
        let r = black_box(*r);
        let mut q = self.0.lock().unwrap();
        if q.len() == CAPACITY {
            q.pop_front();
        }
        q.push_back(r);
    }
    fn drain(&self) -> usize {
        let mut q = self.0.lock().unwrap();
        let n = q.len();
        for r in q.drain(..) {
            black_box(r);
        }
        n
    }
}

/// Times `iters` pushes from the bench thread, in rounds drained outside the timed region.
fn one_producer<T: Target>(target: &T, iters: u64) -> Duration {
    let mut producer = target.producer(0);
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let round = (iters - done).min(ROUND);
        let start = Instant::now();
        for n in done..done + round {
            target.push(&mut producer, n);
        }
        total += start.elapsed();
        done += round;
        black_box(target.drain());
    }
    total
}

/// Time during which all producers were pushing, and total timed wall time, over a benchmark: on a
/// loaded 2-core machine the scheduler may run the producers one after the other, and then the
/// "contended" number is not contended. Printed after each benchmark of several producers.
static OVERLAP_NS: AtomicU64 = AtomicU64::new(0);
static WALL_NS: AtomicU64 = AtomicU64::new(0);

fn report_overlap(name: &str, producers: u64) {
    let overlap = OVERLAP_NS.swap(0, Ordering::Relaxed) as f64;
    let wall = WALL_NS.swap(0, Ordering::Relaxed) as f64;
    if wall > 0.0 {
        println!(
            "binding_ring/{name}/{producers}: all producers were pushing during {:.0}% of the timed \
             wall time",
            100.0 * overlap / wall
        );
    }
}

/// Times `iters` pushes in all from `n` producer threads (each pushes `iters / n`), in rounds that
/// start on a barrier and a rendezvous; the drain between rounds is not timed. Each producer stamps
/// its own start and end (on 2 cores the bench thread may not run until a producer blocks, so it
/// cannot hold the clock); a round's wall time is the last end minus the first start.
fn several_producers<T: Target>(target: &T, n: u64, iters: u64) -> Duration {
    let round_len = CAPACITY as u64 / (2 * n);
    let per_thread = iters.div_ceil(n);
    let rounds = per_thread.div_ceil(round_len);
    let start = Barrier::new(n as usize + 1);
    let end = Barrier::new(n as usize + 1);
    let ready = AtomicU64::new(0);
    let stamps: Vec<Vec<(Instant, Instant)>> = std::thread::scope(|s| {
        let producers: Vec<_> = (0..n)
            .map(|thread| {
                let (start, end, ready) = (&start, &end, &ready);
                s.spawn(move || {
                    let mut producer = target.producer(thread);
                    let mut stamps = Vec::with_capacity(rounds as usize);
                    let mut done = 0;
                    for _ in 0..rounds {
                        let round = (per_thread - done).min(round_len);
                        start.wait();
                        // Rendezvous by spinning, so the producers are on a core when the clock
                        // starts (a futex wake-up can take as long as a whole round); yielding
                        // after a while, so that with more producers than cores the others run.
                        let arrived = ready.fetch_add(1, Ordering::AcqRel) + 1;
                        let target_count = arrived.next_multiple_of(n);
                        let mut spins = 0u32;
                        while ready.load(Ordering::Acquire) < target_count {
                            spins += 1;
                            if spins < 1_000 {
                                std::hint::spin_loop();
                            } else {
                                std::thread::yield_now();
                            }
                        }
                        let t0 = Instant::now();
                        for n in done..done + round {
                            target.push(&mut producer, n);
                        }
                        stamps.push((t0, Instant::now()));
                        end.wait();
                        done += round;
                    }
                    stamps
                })
            })
            .collect();
        for _ in 0..rounds {
            start.wait();
            end.wait();
            black_box(target.drain());
        }
        producers.into_iter().map(|p| p.join().unwrap()).collect()
    });
    let total: Duration = (0..rounds as usize)
        .map(|r| {
            let round = stamps.iter().map(|s| s[r]);
            let first_start = round.clone().map(|(t0, _)| t0).min().unwrap();
            let last_start = round.clone().map(|(t0, _)| t0).max().unwrap();
            let first_end = round.clone().map(|(_, t1)| t1).min().unwrap();
            let last_end = round.map(|(_, t1)| t1).max().unwrap();
            let wall = last_end - first_start;
            let overlap = first_end.saturating_duration_since(last_start);
            OVERLAP_NS.fetch_add(overlap.as_nanos() as u64, Ordering::Relaxed);
            WALL_NS.fetch_add(wall.as_nanos() as u64, Ordering::Relaxed);
            wall
        })
        .sum();
    // Report per event: criterion divides by `iters`, we pushed n * per_thread.
    total.mul_f64(iters as f64 / (n * per_thread) as f64)
}

fn run<T: Target>(target: &T, producers: u64, iters: u64) -> Duration {
    if producers == 1 {
        one_producer(target, iters)
    } else {
        several_producers(target, producers, iters)
    }
}

fn bench<T: Target>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    producers: u64,
    target: &T,
) {
    group.bench_with_input(BenchmarkId::new(name, producers), &producers, |b, &p| {
        b.iter_custom(|iters| run(target, p, iters))
    });
    if producers > 1 {
        report_overlap(name, producers);
    }
}

fn binding_ring(c: &mut Criterion) {
    let mut group = c.benchmark_group("binding_ring");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(1));
    for producers in PRODUCERS {
        let this = ThisCrate::new();
        bench(&mut group, "this_crate", producers, &this);
        assert_eq!(
            this.target.ring.dropped(),
            0,
            "the ring must never fill here"
        );

        let push_only = PushOnly(ThisCrate::new());
        bench(&mut group, "this_crate_push_only", producers, &push_only);
        assert_eq!(push_only.0.target.ring.dropped(), 0);

        let crossbeam = Crossbeam(ArrayQueue::new(CAPACITY));
        bench(&mut group, "crossbeam_array_queue", producers, &crossbeam);

        let mutex = MutexDeque(Mutex::new(VecDeque::with_capacity(CAPACITY)));
        bench(&mut group, "mutex_vecdeque", producers, &mutex);
    }
    group.finish();
}

criterion_group!(benches, binding_ring);
criterion_main!(benches);
