//! `VK_EXT_device_memory_report`: the driver calls us on every device memory event of the device,
//! its own internal allocations included. We keep only what a crash report needs: how many
//! allocations failed since the device was made, and the last failure's size, heap, object type and
//! time. Many real device losses come with the GPU's memory nearly full; a failed allocation before
//! the loss says so where usage alone cannot (the game may have freed memory since).
//!
//! The callback runs on whatever thread the driver allocates on, inside the driver, possibly while
//! it holds its own locks: it never allocates, locks or panics, and touches only atomics.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ash::vk;

/// What the device's memory report told us so far. Shared between the driver's callback (writer,
/// any thread) and the crash path (reader, at the fault).
#[derive(Debug, Default)]
pub struct MemoryReportCounters {
    /// `ALLOCATION_FAILED` events since the device was made.
    failures: AtomicU64,
    /// The last failure's size in bytes.
    last_size: AtomicU64,
    /// The last failure's heap index.
    last_heap: AtomicU32,
    /// The last failure's `VkObjectType` (raw).
    last_object_type: AtomicU32,
    /// The last failure's time, milliseconds since the Unix epoch (0: the clock was before it).
    last_at_ms: AtomicU64,
}

/// The failures a memory report counted, as the crash path reads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocationFailureReading {
    /// `ALLOCATION_FAILED` events since the device was made.
    pub count: u64,
    /// The last one, when there was one.
    pub last: Option<LastAllocationFailure>,
}

/// The last `ALLOCATION_FAILED` event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LastAllocationFailure {
    /// Bytes the driver could not allocate.
    pub size: u64,
    /// The heap it tried.
    pub heap: u32,
    /// `VkObjectType` of the object the memory was for (raw; the driver's own objects included).
    pub object_type: i32,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

impl MemoryReportCounters {
    /// Counts one `ALLOCATION_FAILED` event. Atomics only: see the module docs.
    fn allocation_failed(&self, size: u64, heap: u32, object_type: vk::ObjectType) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        // Relaxed: the fields are published by the Release increment of `failures` below.
        self.last_size.store(size, Ordering::Relaxed);
        self.last_heap.store(heap, Ordering::Relaxed);
        self.last_object_type
            .store(object_type.as_raw() as u32, Ordering::Relaxed);
        self.last_at_ms.store(at_ms, Ordering::Relaxed);
        // Release: a reader that sees this count (Acquire in `read`) sees the fields stored above.
        self.failures.fetch_add(1, Ordering::Release);
    }

    /// What the counters hold now. Two failures at the same moment on two threads may leave the
    /// last failure's fields mixed from both; each field is one of theirs, and the count is exact.
    pub fn read(&self) -> AllocationFailureReading {
        // Acquire: pairs with the Release increment in `allocation_failed`, so the fields read
        // below are at least those of the failure that made this count.
        let count = self.failures.load(Ordering::Acquire);
        let last = (count > 0).then(|| LastAllocationFailure {
            // Relaxed: ordered after the Acquire load above, which is what makes them visible.
            size: self.last_size.load(Ordering::Relaxed),
            heap: self.last_heap.load(Ordering::Relaxed),
            object_type: self.last_object_type.load(Ordering::Relaxed) as i32,
            at_ms: self.last_at_ms.load(Ordering::Relaxed),
        });
        AllocationFailureReading { count, last }
    }

    /// The `VkDeviceDeviceMemoryReportCreateInfoEXT` fields that point the driver at `this`:
    /// the callback and its user data. The user data is one strong count of `this`, never given
    /// back: the driver may call the callback for as long as the device lives, and the device may
    /// outlive the reporter (the application owns it). That is one small allocation per device
    /// created, for the life of the process.
    pub(crate) fn callback_for(
        this: &Arc<Self>,
    ) -> (vk::PFN_vkDeviceMemoryReportCallbackEXT, *mut c_void) {
        let user_data = Arc::into_raw(Arc::clone(this)) as *mut c_void;
        (Some(memory_report_callback), user_data)
    }
}

/// The driver's callback: counts `ALLOCATION_FAILED` events, ignores the rest.
///
/// # Safety
/// `user_data` is the pointer [`MemoryReportCounters::callback_for`] gave (alive for ever);
/// `data` is null or a valid callback data structure for the duration of the call.
unsafe extern "system" fn memory_report_callback(
    data: *const vk::DeviceMemoryReportCallbackDataEXT<'_>,
    user_data: *mut c_void,
) {
    if data.is_null() || user_data.is_null() {
        return;
    }
    // SAFETY: non-null, valid for the call (the driver's contract).
    let data = unsafe { &*data };
    if data.ty != vk::DeviceMemoryReportEventTypeEXT::ALLOCATION_FAILED {
        return;
    }
    // SAFETY: `user_data` is a leaked `Arc<MemoryReportCounters>` (see `callback_for`), never freed.
    let counters = unsafe { &*(user_data as *const MemoryReportCounters) };
    counters.allocation_failed(data.size, data.heap_index, data.object_type);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(
        ty: vk::DeviceMemoryReportEventTypeEXT,
        size: u64,
        heap: u32,
    ) -> vk::DeviceMemoryReportCallbackDataEXT<'static> {
        vk::DeviceMemoryReportCallbackDataEXT {
            ty,
            size,
            heap_index: heap,
            object_type: vk::ObjectType::DEVICE_MEMORY,
            ..Default::default()
        }
    }

    #[test]
    fn the_callback_counts_failures_and_keeps_the_last() {
        let counters = Arc::new(MemoryReportCounters::default());
        let (callback, user_data) = MemoryReportCounters::callback_for(&counters);
        let callback = callback.unwrap();
        assert_eq!(counters.read(), AllocationFailureReading::default());
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        for e in [
            event(vk::DeviceMemoryReportEventTypeEXT::ALLOCATE, 1 << 20, 0),
            event(
                vk::DeviceMemoryReportEventTypeEXT::ALLOCATION_FAILED,
                1 << 40,
                0,
            ),
            event(vk::DeviceMemoryReportEventTypeEXT::FREE, 0, 0),
            event(
                vk::DeviceMemoryReportEventTypeEXT::ALLOCATION_FAILED,
                3 << 30,
                1,
            ),
        ] {
            // SAFETY: a valid event and the user data `callback_for` gave.
            unsafe { callback(&e, user_data) };
        }
        // SAFETY: null data is ignored.
        unsafe { callback(std::ptr::null(), user_data) };
        let read = counters.read();
        assert_eq!(read.count, 2);
        let last = read.last.unwrap();
        assert_eq!((last.size, last.heap), (3 << 30, 1));
        assert_eq!(last.object_type, vk::ObjectType::DEVICE_MEMORY.as_raw());
        assert!(last.at_ms >= before);
        // The driver's strong count is never given back.
        assert_eq!(Arc::strong_count(&counters), 2);
    }

    #[test]
    fn failures_on_many_threads_are_all_counted() {
        let counters = Arc::new(MemoryReportCounters::default());
        let (callback, user_data) = MemoryReportCounters::callback_for(&counters);
        let callback = callback.unwrap();
        let user_data = user_data as usize;
        std::thread::scope(|s| {
            for t in 0..4u32 {
                s.spawn(move || {
                    let e = event(
                        vk::DeviceMemoryReportEventTypeEXT::ALLOCATION_FAILED,
                        u64::from(t),
                        t,
                    );
                    for _ in 0..1000 {
                        // SAFETY: as above.
                        unsafe { callback(&e, user_data as *mut c_void) };
                    }
                });
            }
        });
        let read = counters.read();
        assert_eq!(read.count, 4000);
        assert!(read.last.unwrap().heap < 4);
    }
}
