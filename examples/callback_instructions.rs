//! Counts the messenger callback's work an event on the game's thread, for `valgrind
//! --tool=callgrind`: the real `address_binding_callback` (decode, frame stamp, ring push) called
//! with the messages a driver passes for `indexer_fold`'s churn (1,000 buffers bound and unbound a
//! frame, named by kind, one in ten by a label of its own), in one function (`push_frames`) that
//! callgrind can count alone; the ring is drained outside it, as the indexer does on its own thread:
//!
//! ```sh
//! cargo build --release --example callback_instructions
//! valgrind --tool=callgrind --toggle-collect='*push_frames*' target/release/examples/callback_instructions 100
//! ```
//!
//! Instructions an event = callgrind's "Collected" / the events printed (BENCHMARKS.md, issue 35).

use std::ffi::{c_void, CString};

use ash::vk::{self, Handle};
use gpu_crash_core::test_support::{
    address_binding_callback, BindingRing, MessengerTarget, RingConsumer,
};

// Only its buffer names are used here; the records are `fold_instructions`' and the bench's.
#[allow(dead_code)]
#[path = "../benches/support/churn.rs"]
mod churn;

/// Frames pushed between drains: a quarter of the default ring, as the background thread wakes.
const FRAMES_A_DRAIN: u64 = 4;

/// The structures a driver hands the callback for one event, boxed so pNext and pObjects stay put.
struct Message {
    binding: vk::DeviceAddressBindingCallbackDataEXT<'static>,
    objects: [vk::DebugUtilsObjectNameInfoEXT<'static>; 1],
    data: vk::DebugUtilsMessengerCallbackDataEXT<'static>,
    /// Owns the name `objects[0]` points at.
    _name: CString,
}

impl Message {
    fn new(buffer: u64, kind: vk::DeviceAddressBindingTypeEXT) -> Box<Message> {
        let name = CString::new(churn::name(buffer)).expect("no NUL in a label");
        let mut object = vk::DebugUtilsObjectNameInfoEXT::default()
            .object_handle(vk::Buffer::from_raw(0x5a00_0000_0000 + buffer));
        object.p_object_name = name.as_ptr();
        let mut m = Box::new(Message {
            binding: vk::DeviceAddressBindingCallbackDataEXT::default()
                .base_address(0x1_0000_0000 + buffer * 0x1_0000)
                .size(4096)
                .binding_type(kind),
            objects: [object],
            data: vk::DebugUtilsMessengerCallbackDataEXT::default(),
            _name: name,
        });
        m.data.p_next = &m.binding as *const _ as *const c_void;
        m.data.object_count = 1;
        m.data.p_objects = m.objects.as_ptr();
        m
    }
}

/// Calls the callback for every message of `frames` frames (a frame's binds, then its unbinds).
#[inline(never)]
fn push_frames(target: &MessengerTarget, binds: &[Box<Message>], unbinds: &[Box<Message>]) {
    for _ in 0..FRAMES_A_DRAIN {
        for message in binds.iter().chain(unbinds) {
            // SAFETY: each message is a valid callback data chain; user data is a live target.
            unsafe {
                address_binding_callback(
                    vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                    vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
                    &message.data,
                    target as *const MessengerTarget as *mut c_void,
                )
            };
        }
    }
}

fn drain(consumer: &mut RingConsumer) -> usize {
    let mut n = 0;
    while consumer.pop().is_some() {
        n += 1;
    }
    n
}

fn main() {
    let rounds: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let (ring, mut consumer) = BindingRing::with_capacity(32_768);
    let target = MessengerTarget {
        ring: ring.clone(),
        device_generation: 1,
    };
    let binds: Vec<_> = (0..churn::PER_FRAME)
        .map(|b| Message::new(b, vk::DeviceAddressBindingTypeEXT::BIND))
        .collect();
    let unbinds: Vec<_> = (0..churn::PER_FRAME)
        .map(|b| Message::new(b, vk::DeviceAddressBindingTypeEXT::UNBIND))
        .collect();
    let mut events = 0;
    for frame in 0..rounds {
        ring.set_frame(frame);
        push_frames(&target, &binds, &unbinds);
        events += drain(&mut consumer);
    }
    println!(
        "callback_instructions: {events} events in {rounds} rounds of {FRAMES_A_DRAIN} frames, {} dropped",
        ring.dropped()
    );
}
