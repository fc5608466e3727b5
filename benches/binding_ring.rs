//! Cost per recorded address-binding event: this crate's messenger callback (decode + lock-free ring
//! push) against two queues a crash reporter could use instead, from 1 and 2 producer threads.
//!
//! `cargo bench --bench binding_ring`; results land under `target/criterion/binding_ring/<name>/<producers>`.
//!
//! Method (see BENCHMARKS.md): every queue has the plugin's default capacity (32,768 records). Each
//! measurement pushes in rounds of `ROUND` events per producer (2 x ROUND is half the capacity), and
//! the queue is drained by the consumer between rounds, outside the timed region. So the queue never
//! fills: this measures the push path of a healthy reporter, not the drop path. One producer: the
//! bench thread pushes. Two producers: two long-lived threads start each round on a barrier, each
//! pushes ROUND events, and the wall time from barrier release to the second producer's finish is
//! divided by 2 x ROUND (every push contends on the queue's tail).
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
/// Events per producer per round: two producers fill the queue to half, never more.
const ROUND: u64 = (CAPACITY / 4) as u64;

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

/// Time during which both producers were pushing, and total timed wall time, over a benchmark: on a
/// loaded 2-core machine the scheduler may run the producers one after the other, and then the
/// "contended" number is not contended. Printed after each 2-producer benchmark.
static OVERLAP_NS: AtomicU64 = AtomicU64::new(0);
static WALL_NS: AtomicU64 = AtomicU64::new(0);

fn report_overlap(name: &str) {
    let overlap = OVERLAP_NS.swap(0, Ordering::Relaxed) as f64;
    let wall = WALL_NS.swap(0, Ordering::Relaxed) as f64;
    if wall > 0.0 {
        println!(
            "binding_ring/{name}/2: both producers were pushing during {:.0}% of the timed wall time",
            100.0 * overlap / wall
        );
    }
}

/// Times `iters` pushes in all from two producer threads (each pushes `iters / 2`), in rounds that
/// start on a barrier and a spinning rendezvous; the drain between rounds is not timed. Each producer stamps its own start and
/// end (on 2 cores the bench thread may not run until a producer blocks, so it cannot hold the
/// clock); a round's wall time is the last end minus the first start.
fn two_producers<T: Target>(target: &T, iters: u64) -> Duration {
    let per_thread = iters.div_ceil(2);
    let rounds = per_thread.div_ceil(ROUND);
    let start = Barrier::new(3);
    let end = Barrier::new(3);
    let ready = AtomicU64::new(0);
    let stamps: Vec<Vec<(Instant, Instant)>> = std::thread::scope(|s| {
        let producers: Vec<_> = (0..2u64)
            .map(|thread| {
                let (start, end, ready) = (&start, &end, &ready);
                s.spawn(move || {
                    let mut producer = target.producer(thread);
                    let mut stamps = Vec::with_capacity(rounds as usize);
                    let mut done = 0;
                    for _ in 0..rounds {
                        let round = (per_thread - done).min(ROUND);
                        start.wait();
                        // Rendezvous by spinning, so both producers are on a core when the clock
                        // starts (a futex wake-up can take as long as a whole round).
                        let arrived = ready.fetch_add(1, Ordering::AcqRel) + 1;
                        let target_count = arrived.next_multiple_of(2);
                        while ready.load(Ordering::Acquire) < target_count {
                            std::hint::spin_loop();
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
            let (a, b) = (stamps[0][r], stamps[1][r]);
            let wall = a.1.max(b.1) - a.0.min(b.0);
            let overlap = a.1.min(b.1).saturating_duration_since(a.0.max(b.0));
            OVERLAP_NS.fetch_add(overlap.as_nanos() as u64, Ordering::Relaxed);
            WALL_NS.fetch_add(wall.as_nanos() as u64, Ordering::Relaxed);
            wall
        })
        .sum();
    // Report per event: criterion divides by `iters`, we pushed 2 * per_thread.
    total.mul_f64(iters as f64 / (2 * per_thread) as f64)
}

fn run<T: Target>(target: &T, producers: u64, iters: u64) -> Duration {
    if producers == 1 {
        one_producer(target, iters)
    } else {
        two_producers(target, iters)
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
    report_overlap(name);
}

fn binding_ring(c: &mut Criterion) {
    let mut group = c.benchmark_group("binding_ring");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(1));
    for producers in [1u64, 2] {
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
