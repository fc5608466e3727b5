//! Address bookkeeping: the layer's own GPU virtual address space and the binding events it reports
//! (delivered to the application's messengers by `messengers.rs`).
//!
//! lavapipe has no `VK_EXT_device_address_binding_report`, so the layer invents addresses: each
//! memory allocation gets a range from a deterministic bump allocator (never reused, so a freed range
//! stays unambiguous), buffers and images bound to it live at memory address + offset with the size
//! from their memory requirements. The same records tell the fault injector where objects were.

use std::collections::{HashMap, HashSet, VecDeque};

use ash::vk;

/// First address handed out; far from 0 so a null-ish address never matches an object.
pub(crate) const VA_BASE: u64 = 0x1_0000_0000;
/// Alignment of every memory allocation's address (and the guard gap between allocations).
pub(crate) const VA_ALIGN: u64 = 64 * 1024;
/// How many unbound objects are remembered for use-after-free targeting.
const FREED_HISTORY: usize = 4096;

/// A GPU virtual address range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub base: u64,
    pub size: u64,
}

/// One binding report to send to the application's messengers.
#[derive(Clone, Debug)]
pub(crate) struct BindingEvent {
    pub object_type: vk::ObjectType,
    pub handle: u64,
    pub name: Option<String>,
    pub binding_type: vk::DeviceAddressBindingTypeEXT,
    pub range: Range,
}

/// An object the fault injector may blame.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub object_type: vk::ObjectType,
    pub handle: u64,
    pub name: Option<String>,
    pub range: Range,
    /// Where a use-after-free faults: a point of the freed range that no live buffer or image covers
    /// (a GPU cannot page-fault at an address that is mapped again); for in-bounds, base + the
    /// requested offset. `None` means the range middle.
    pub fault_at: Option<u64>,
}

impl Target {
    /// "buffer \"name\" (0x…)" for descriptions and logs.
    pub(crate) fn describe(&self) -> String {
        describe(self.object_type, self.handle, self.name.as_deref())
    }
}

/// "buffer \"name\" (0x…)" / "image 0x…" for descriptions and logs.
fn describe(object_type: vk::ObjectType, handle: u64, name: Option<&str>) -> String {
    let kind = match object_type {
        vk::ObjectType::BUFFER => "buffer",
        vk::ObjectType::IMAGE => "image",
        vk::ObjectType::DEVICE_MEMORY => "memory",
        _ => "object",
    };
    match name {
        Some(n) => format!("{kind} \"{n}\" (0x{handle:x})"),
        None => format!("{kind} 0x{handle:x}"),
    }
}

#[derive(Clone, Copy, Debug)]
struct Resource {
    requirement_size: u64,
    bound: Option<Range>,
    /// `bound` came from the driver's own binding report ([`DeviceTracker::observe`]), not from the
    /// layer's addresses.
    reported: bool,
    /// `memoryOffset` of the object's successful bind, once the bind call returned.
    memory_offset: Option<u64>,
    /// Order of binding, to find the most recently bound object.
    bind_seq: u64,
}

impl Resource {
    /// Where the object lives: its bound range, except for an image the driver reported at its whole
    /// memory block (see [`placed`]).
    fn place(&self, object_type: vk::ObjectType) -> Option<Range> {
        self.bound.map(|range| placed(object_type, range, self))
    }
}

/// Where an object whose binding range is `range` really is.
///
/// NVIDIA's driver reports an image bind as the start of its memory block with the whole block's size
/// (e.g. `IMAGE [0x6400000, +128 MiB)` for every texture in a 128 MiB block), not where the image is.
/// For an image whose reported range is larger than its memory requirement, the image is at the
/// reported base + the bind's `memoryOffset`, with the requirement size, as long as that fits inside
/// the reported range (otherwise the report was not a block, and it is kept). The layer's own
/// addresses (lavapipe) already are memory address + offset with the requirement size: unchanged.
fn placed(object_type: vk::ObjectType, range: Range, res: &Resource) -> Range {
    if object_type != vk::ObjectType::IMAGE
        || !res.reported
        || res.requirement_size == 0
        || range.size <= res.requirement_size
    {
        return range;
    }
    match res.memory_offset {
        Some(offset)
            if offset
                .checked_add(res.requirement_size)
                .is_some_and(|end| end <= range.size) =>
        {
            Range {
                base: range.base.saturating_add(offset),
                size: res.requirement_size,
            }
        }
        _ => range,
    }
}

/// Per-device address bookkeeping.
#[derive(Debug)]
pub(crate) struct DeviceTracker {
    next_va: u64,
    bind_seq: u64,
    memories: HashMap<u64, (Range, u64)>,
    resources: HashMap<(vk::ObjectType, u64), Resource>,
    names: HashMap<(vk::ObjectType, u64), String>,
    seen_names: HashSet<String>,
    freed: VecDeque<Target>,
    /// An address the drill waits to see bound again (`GPU_CRASH_DRILL_LOSS=after-rebind`).
    watch: Option<u64>,
    /// The first bind that covered `watch`, described for the log.
    rebound_by: Option<String>,
}

impl Default for DeviceTracker {
    fn default() -> Self {
        Self {
            next_va: VA_BASE,
            bind_seq: 0,
            memories: HashMap::new(),
            resources: HashMap::new(),
            names: HashMap::new(),
            seen_names: HashSet::new(),
            freed: VecDeque::new(),
            watch: None,
            rebound_by: None,
        }
    }
}

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a).saturating_mul(a)
}

impl DeviceTracker {
    fn name(&self, object_type: vk::ObjectType, handle: u64) -> Option<String> {
        self.names.get(&(object_type, handle)).cloned()
    }

    fn event(
        &self,
        object_type: vk::ObjectType,
        handle: u64,
        binding_type: vk::DeviceAddressBindingTypeEXT,
        range: Range,
    ) -> BindingEvent {
        BindingEvent {
            object_type,
            handle,
            name: self.name(object_type, handle),
            binding_type,
            range,
        }
    }

    fn remember_freed(&mut self, object_type: vk::ObjectType, handle: u64, range: Range) {
        if self.freed.len() == FREED_HISTORY {
            self.freed.pop_front();
        }
        let name = self.name(object_type, handle);
        self.freed.push_back(Target {
            object_type,
            handle,
            name,
            range,
            fault_at: None,
        });
    }

    /// Starts watching `address`: the first later bind (memory, buffer or image) whose range covers
    /// it is remembered for [`DeviceTracker::take_rebind`].
    pub(crate) fn watch(&mut self, address: u64) {
        self.watch = Some(address);
        self.rebound_by = None;
    }

    /// Stops watching.
    pub(crate) fn unwatch(&mut self) {
        self.watch = None;
        self.rebound_by = None;
    }

    /// The bind that covered the watched address, if one did since `watch`.
    pub(crate) fn take_rebind(&mut self) -> Option<String> {
        self.rebound_by.take()
    }

    fn check_watch(&mut self, object_type: vk::ObjectType, handle: u64, range: Range) {
        let Some(a) = self.watch else { return };
        if self.rebound_by.is_none() && a >= range.base && a - range.base < range.size {
            let name = self.name(object_type, handle);
            self.rebound_by = Some(format!(
                "{} at [0x{:x}, 0x{:x})",
                describe(object_type, handle, name.as_deref()),
                range.base,
                range.base.saturating_add(range.size)
            ));
        }
    }

    /// `vkSetDebugUtilsObjectNameEXT`. An empty or null name removes it.
    pub(crate) fn set_name(
        &mut self,
        object_type: vk::ObjectType,
        handle: u64,
        name: Option<String>,
    ) {
        match name.filter(|n| !n.is_empty()) {
            Some(n) => {
                self.seen_names.insert(n.clone());
                self.names.insert((object_type, handle), n);
            }
            None => {
                self.names.remove(&(object_type, handle));
            }
        }
    }

    /// True once any object carried this debug name.
    pub(crate) fn has_seen_name(&self, name: &str) -> bool {
        self.seen_names.contains(name)
    }

    /// `vkAllocateMemory` succeeded: assign a fresh range.
    pub(crate) fn allocate(&mut self, memory: u64, size: u64) -> BindingEvent {
        let base = self.next_va;
        let span = align_up(size.max(1), VA_ALIGN);
        // One aligned guard gap after each allocation: an address just past the end of an object at
        // the end of its memory falls into unmapped space, as on real hardware.
        self.next_va = base.saturating_add(span).saturating_add(VA_ALIGN);
        let range = Range { base, size };
        self.bind_seq += 1;
        self.memories.insert(memory, (range, self.bind_seq));
        self.check_watch(vk::ObjectType::DEVICE_MEMORY, memory, range);
        self.event(
            vk::ObjectType::DEVICE_MEMORY,
            memory,
            vk::DeviceAddressBindingTypeEXT::BIND,
            range,
        )
    }

    /// `vkFreeMemory`.
    pub(crate) fn free(&mut self, memory: u64) -> Option<BindingEvent> {
        let (range, _) = self.memories.remove(&memory)?;
        let ev = self.event(
            vk::ObjectType::DEVICE_MEMORY,
            memory,
            vk::DeviceAddressBindingTypeEXT::UNBIND,
            range,
        );
        self.remember_freed(vk::ObjectType::DEVICE_MEMORY, memory, range);
        self.names.remove(&(vk::ObjectType::DEVICE_MEMORY, memory));
        Some(ev)
    }

    /// `vkCreateBuffer` / `vkCreateImage` succeeded; `requirement_size` from the memory requirements.
    pub(crate) fn create_resource(
        &mut self,
        object_type: vk::ObjectType,
        handle: u64,
        requirement_size: u64,
    ) {
        // Handles can be reused by the driver after destruction: start from a clean slate.
        self.names.remove(&(object_type, handle));
        self.resources.insert(
            (object_type, handle),
            Resource {
                requirement_size,
                bound: None,
                reported: false,
                memory_offset: None,
                bind_seq: 0,
            },
        );
    }

    /// A successful bind of a buffer or image to `memory` at `offset`.
    pub(crate) fn bind_resource(
        &mut self,
        object_type: vk::ObjectType,
        handle: u64,
        memory: u64,
        offset: u64,
    ) -> Option<BindingEvent> {
        let (mem, _) = *self.memories.get(&memory)?;
        self.bind_seq += 1;
        let seq = self.bind_seq;
        let res = self.resources.get_mut(&(object_type, handle))?;
        let range = Range {
            base: mem.base.saturating_add(offset),
            size: res.requirement_size,
        };
        res.bound = Some(range);
        res.reported = false;
        res.memory_offset = Some(offset);
        res.bind_seq = seq;
        self.check_watch(object_type, handle, range);
        Some(self.event(
            object_type,
            handle,
            vk::DeviceAddressBindingTypeEXT::BIND,
            range,
        ))
    }

    /// `vkDestroyBuffer` / `vkDestroyImage`: an unbind event when it was bound.
    pub(crate) fn destroy_resource(
        &mut self,
        object_type: vk::ObjectType,
        handle: u64,
    ) -> Option<BindingEvent> {
        let res = self.resources.remove(&(object_type, handle))?;
        let ev = res.bound.map(|range| {
            let ev = self.event(
                object_type,
                handle,
                vk::DeviceAddressBindingTypeEXT::UNBIND,
                range,
            );
            self.remember_freed(object_type, handle, placed(object_type, range, &res));
            ev
        });
        self.names.remove(&(object_type, handle));
        ev
    }

    /// A binding report from a driver that implements the extension itself: its addresses replace the
    /// layer's own. Duplicate and unmatched reports (normal on NVIDIA) are harmless.
    pub(crate) fn observe(
        &mut self,
        object_type: vk::ObjectType,
        handle: u64,
        binding_type: vk::DeviceAddressBindingTypeEXT,
        range: Range,
    ) {
        let bind = binding_type == vk::DeviceAddressBindingTypeEXT::BIND;
        self.bind_seq += 1;
        let seq = self.bind_seq;
        if object_type == vk::ObjectType::DEVICE_MEMORY {
            if bind {
                self.memories.insert(handle, (range, seq));
                self.check_watch(object_type, handle, range);
            } else if self.memories.remove(&handle).is_some() {
                self.remember_freed(object_type, handle, range);
            }
            return;
        }
        let Some(res) = self.resources.get_mut(&(object_type, handle)) else {
            return;
        };
        if bind {
            res.bound = Some(range);
            res.reported = true;
            res.bind_seq = seq;
            self.check_watch(object_type, handle, range);
        } else if res.bound.take().is_some() {
            let freed = placed(object_type, range, res);
            self.remember_freed(object_type, handle, freed);
        }
    }

    /// A successful bind of a buffer or image at `offset` in its memory, on a driver that reports the
    /// addresses itself (its report came during the call, before this): see [`placed`].
    pub(crate) fn note_bind_offset(
        &mut self,
        object_type: vk::ObjectType,
        handle: u64,
        offset: u64,
    ) {
        if let Some(res) = self.resources.get_mut(&(object_type, handle)) {
            res.memory_offset = Some(offset);
        }
    }

    /// The object a use-after-free blames: the most recently unbound object named `label`, or without
    /// a label the most recently destroyed buffer.
    ///
    /// Only a freed object with a point no live buffer or image has taken over qualifies (allocators
    /// reuse offsets at once; a real GPU would not fault there), so the fault lands on unmapped memory.
    pub(crate) fn freed_target(&self, label: Option<&str>) -> Option<Target> {
        self.freed
            .iter()
            .rev()
            // Counted over the whole history, before the label filter: `newer` is how many objects
            // were freed after `t`, whatever their names.
            .enumerate()
            .filter(|(_, t)| match label {
                Some(l) => t.name.as_deref() == Some(l),
                None => t.object_type == vk::ObjectType::BUFFER,
            })
            .find_map(|(newer, t)| {
                // Resources freed after `t` that overlap it took its addresses over later: `t` must
                // be the last tenant of the faulting address, so avoid their ranges too. (Memory
                // objects are containers, not tenants.)
                let later_tenants: Vec<Range> = self
                    .freed
                    .iter()
                    .rev()
                    .take(newer)
                    .filter(|n| n.object_type != vk::ObjectType::DEVICE_MEMORY)
                    .map(|n| n.range)
                    .collect();
                let at = self.uncovered_point(t.range, &later_tenants)?;
                Some(Target {
                    fault_at: Some(at),
                    ..t.clone()
                })
            })
    }

    /// The most recently unbound object named `label` (any type), whatever now covers its range:
    /// `use-after-free:<label>@<offset>` faults exactly where it was asked to.
    pub(crate) fn last_freed(&self, label: &str) -> Option<Target> {
        self.freed
            .iter()
            .rev()
            .find(|t| t.name.as_deref() == Some(label))
            .cloned()
    }

    /// Ranges of live buffers and images (memory objects are containers, not mappings of their own).
    fn live_resource_ranges(&self) -> impl Iterator<Item = Range> + '_ {
        self.resources
            .iter()
            .filter_map(|(&(ty, _), r)| r.place(ty))
    }

    fn is_covered(&self, address: u64, also: &[Range]) -> bool {
        self.live_resource_ranges()
            .chain(also.iter().copied())
            .any(|r| address >= r.base && address - r.base < r.size)
    }

    /// A 4-byte-aligned point of `range` that no live resource (nor any range in `also`, its later
    /// tenants) covers: the middle of the largest such gap, so the fault is not mistaken for an
    /// off-by-one overrun of a live neighbour.
    pub(crate) fn uncovered_point(&self, range: Range, also: &[Range]) -> Option<u64> {
        let end = range.base.saturating_add(range.size);
        let mut covered: Vec<(u64, u64)> = self
            .live_resource_ranges()
            .chain(also.iter().copied())
            .map(|r| {
                (
                    r.base.max(range.base),
                    r.base.saturating_add(r.size).min(end),
                )
            })
            .filter(|(lo, hi)| lo < hi)
            .collect();
        covered.sort_unstable();
        let mut best: Option<(u64, u64)> = None; // largest gap (start, end)
        let mut cursor = range.base;
        for (lo, hi) in covered.into_iter().chain(std::iter::once((end, end))) {
            if lo > cursor && best.is_none_or(|(s, e)| lo - cursor > e - s) {
                best = Some((cursor, lo));
            }
            cursor = cursor.max(hi);
        }
        let (gap_lo, gap_hi) = best?;
        let point = (gap_lo + (gap_hi - gap_lo) / 2) & !3;
        Some(if point >= gap_lo && point < gap_hi {
            point
        } else {
            gap_lo
        })
    }

    /// The live object an out-of-bounds or in-bounds fault blames: the most recently bound live object
    /// named `label` (buffer, image or memory), or without a label the most recently bound buffer.
    ///
    /// With `free_end`, only objects whose first byte past the end is not another live resource
    /// qualify when no label is given (an overrun into a neighbour would not fault on a real GPU).
    pub(crate) fn live_target(&self, label: Option<&str>, free_end: bool) -> Option<Target> {
        let resources = self
            .resources
            .iter()
            .filter_map(|(&(ty, h), r)| r.place(ty).map(|range| (ty, h, range, r.bind_seq)));
        let memories = self
            .memories
            .iter()
            .map(|(&h, &(range, seq))| (vk::ObjectType::DEVICE_MEMORY, h, range, seq));
        resources
            .chain(memories)
            .filter(|&(ty, h, range, _)| match label {
                Some(l) => self.names.get(&(ty, h)).map(String::as_str) == Some(l),
                None => {
                    ty == vk::ObjectType::BUFFER
                        && !(free_end
                            && self.is_covered(range.base.saturating_add(range.size), &[]))
                }
            })
            .max_by_key(|&(_, _, _, seq)| seq)
            .map(|(ty, h, range, _)| Target {
                object_type: ty,
                handle: h,
                name: self.name(ty, h),
                range,
                fault_at: None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_never_reused() {
        let mut t = DeviceTracker::default();
        let a = t.allocate(1, 100).range;
        let b = t.allocate(2, 3 * VA_ALIGN).range;
        assert_eq!(a.base, VA_BASE);
        assert!(a.base.is_multiple_of(VA_ALIGN));
        assert!(b.base.is_multiple_of(VA_ALIGN));
        assert!(
            b.base >= a.base + VA_ALIGN * 2,
            "guard gap after each allocation"
        );
        t.free(1).unwrap();
        let c = t.allocate(3, 100).range;
        assert!(c.base > b.base + b.size);
    }

    #[test]
    fn buffers_bind_at_memory_plus_offset_and_unbind_once() {
        let mut t = DeviceTracker::default();
        let mem = t.allocate(10, 1 << 20).range;
        t.create_resource(vk::ObjectType::BUFFER, 20, 4096);
        t.set_name(vk::ObjectType::BUFFER, 20, Some("vertices".into()));
        let ev = t
            .bind_resource(vk::ObjectType::BUFFER, 20, 10, 512)
            .unwrap();
        assert_eq!(
            ev.range,
            Range {
                base: mem.base + 512,
                size: 4096
            }
        );
        assert_eq!(ev.name.as_deref(), Some("vertices"));
        assert_eq!(t.live_target(None, true).unwrap().handle, 20);
        assert_eq!(t.live_target(Some("vertices"), false).unwrap().handle, 20);
        assert!(t.live_target(Some("other"), false).is_none());
        let un = t.destroy_resource(vk::ObjectType::BUFFER, 20).unwrap();
        assert_eq!(un.binding_type, vk::DeviceAddressBindingTypeEXT::UNBIND);
        assert!(t.destroy_resource(vk::ObjectType::BUFFER, 20).is_none());
        let freed = t.freed_target(None).unwrap();
        assert_eq!((freed.handle, freed.range), (20, ev.range));
        assert_eq!(t.freed_target(Some("vertices")).unwrap().handle, 20);
        assert!(t.live_target(None, true).is_none());
    }

    #[test]
    fn use_after_free_avoids_ranges_a_live_object_took_over() {
        let mut t = DeviceTracker::default();
        let mem = t.allocate(10, 1 << 20).range;
        for (handle, offset) in [(20u64, 0u64), (21, 0x1000)] {
            t.create_resource(vk::ObjectType::BUFFER, handle, 0x1000);
            t.bind_resource(vk::ObjectType::BUFFER, handle, 10, offset)
                .unwrap();
        }
        t.destroy_resource(vk::ObjectType::BUFFER, 21).unwrap();
        // The allocator hands the freed offset to a new, smaller buffer: only the tail is unmapped.
        t.create_resource(vk::ObjectType::BUFFER, 22, 0x800);
        t.bind_resource(vk::ObjectType::BUFFER, 22, 10, 0x1000)
            .unwrap();
        let target = t.freed_target(None).unwrap();
        assert_eq!(target.handle, 21);
        assert_eq!(target.fault_at, Some(mem.base + 0x1c00)); // middle of the free tail
                                                              // Fully reused: no use-after-free target until something frees up.
        t.create_resource(vk::ObjectType::BUFFER, 23, 0x800);
        t.bind_resource(vk::ObjectType::BUFFER, 23, 10, 0x1800)
            .unwrap();
        assert!(t.freed_target(None).is_none());
        // An overrun of buffer 20 would land in buffer 22's neighbour range: 23 (end unmapped) wins.
        assert_eq!(t.live_target(None, true).unwrap().handle, 23);
    }

    #[test]
    fn a_labelled_use_after_free_avoids_later_tenants_of_other_names() {
        let mut t = DeviceTracker::default();
        let mem = t.allocate(10, 1 << 20).range;
        t.create_resource(vk::ObjectType::BUFFER, 20, 0x2000);
        t.set_name(vk::ObjectType::BUFFER, 20, Some("frame_uniforms_1".into()));
        t.bind_resource(vk::ObjectType::BUFFER, 20, 10, 0).unwrap();
        t.destroy_resource(vk::ObjectType::BUFFER, 20).unwrap();
        // A differently named buffer took the first 0x1800 bytes over, then was freed too.
        t.create_resource(vk::ObjectType::BUFFER, 21, 0x1800);
        t.set_name(vk::ObjectType::BUFFER, 21, Some("frame_uniforms_2".into()));
        t.bind_resource(vk::ObjectType::BUFFER, 21, 10, 0).unwrap();
        t.destroy_resource(vk::ObjectType::BUFFER, 21).unwrap();
        let target = t.freed_target(Some("frame_uniforms_1")).unwrap();
        assert_eq!(target.handle, 20);
        let at = target.fault_at.unwrap();
        assert!(
            (mem.base + 0x1800..mem.base + 0x2000).contains(&at),
            "{at:#x} must lie where only frame_uniforms_1 ever lived"
        );
    }

    #[test]
    fn driver_addresses_replace_the_layers() {
        let mut t = DeviceTracker::default();
        let bind = vk::DeviceAddressBindingTypeEXT::BIND;
        let r = |base| Range { base, size: 0x1000 };
        t.observe(vk::ObjectType::DEVICE_MEMORY, 1, bind, r(0x64_0000));
        t.observe(vk::ObjectType::DEVICE_MEMORY, 1, bind, r(0xdefd_0000_0000));
        t.observe(vk::ObjectType::DEVICE_MEMORY, 1, bind, r(0xdefd_0000_0000));
        t.create_resource(vk::ObjectType::BUFFER, 2, 0x1000);
        t.observe(vk::ObjectType::BUFFER, 2, bind, r(0xdefd_0000_0000));
        t.observe(vk::ObjectType::BUFFER, 9, bind, r(0x5000)); // unknown object: ignored
        assert_eq!(
            t.live_target(None, true).unwrap().range,
            r(0xdefd_0000_0000)
        );
        t.destroy_resource(vk::ObjectType::BUFFER, 2);
        assert_eq!(t.freed_target(None).unwrap().range, r(0xdefd_0000_0000));
    }

    /// NVIDIA reports every image at its memory block's start with the block's size (batch 2 on the
    /// H200: `shadow_atlas` at 0x14bc00 of a 128 MiB block reported as `IMAGE [0x6400000, +128 MiB)`).
    #[test]
    fn an_image_reported_at_its_whole_block_is_placed_at_its_bind_offset() {
        const MIB: u64 = 1 << 20;
        let mut t = DeviceTracker::default();
        let bind = vk::DeviceAddressBindingTypeEXT::BIND;
        let block = Range {
            base: 0x640_0000,
            size: 128 * MIB,
        };
        t.observe(vk::ObjectType::DEVICE_MEMORY, 1, bind, block);
        t.create_resource(vk::ObjectType::IMAGE, 5, 4 * MIB);
        t.set_name(vk::ObjectType::IMAGE, 5, Some("shadow_atlas".into()));
        // The driver reports during vkBindImageMemory(image, memory, 0x14bc00); the layer learns the
        // offset when the call returns.
        t.observe(vk::ObjectType::IMAGE, 5, bind, block);
        let atlas = Range {
            base: 0x640_0000 + 0x14bc00,
            size: 4 * MIB,
        };
        assert_eq!(
            t.live_target(Some("shadow_atlas"), false).unwrap().range,
            block
        );
        t.note_bind_offset(vk::ObjectType::IMAGE, 5, 0x14bc00);
        assert_eq!(
            t.live_target(Some("shadow_atlas"), false).unwrap().range,
            atlas
        );
        // A buffer reported with its own size, at its own address, stays where it was reported.
        let vb = Range {
            base: 0xdefd_0000_0000,
            size: 0x1000,
        };
        t.create_resource(vk::ObjectType::BUFFER, 6, 0x1000);
        t.set_name(vk::ObjectType::BUFFER, 6, Some("vertices".into()));
        t.observe(vk::ObjectType::BUFFER, 6, bind, vb);
        t.note_bind_offset(vk::ObjectType::BUFFER, 6, 0x2000);
        assert_eq!(t.live_target(Some("vertices"), false).unwrap().range, vb);
        // An offset where the image would not fit inside the reported range: not a block, kept.
        t.create_resource(vk::ObjectType::IMAGE, 7, 4 * MIB);
        t.set_name(vk::ObjectType::IMAGE, 7, Some("odd".into()));
        let odd = Range {
            base: 0x1000_0000,
            size: 6 * MIB,
        };
        t.observe(vk::ObjectType::IMAGE, 7, bind, odd);
        t.note_bind_offset(vk::ObjectType::IMAGE, 7, 3 * MIB);
        assert_eq!(t.live_target(Some("odd"), false).unwrap().range, odd);
        // Freed, the image is remembered at its place too, and its fault point lies there.
        t.destroy_resource(vk::ObjectType::IMAGE, 5);
        let freed = t.freed_target(Some("shadow_atlas")).unwrap();
        assert_eq!(freed.range, atlas);
        let at = freed.fault_at.unwrap();
        assert!(at >= atlas.base && at < atlas.base + atlas.size, "{at:#x}");
    }

    #[test]
    fn an_image_at_the_layers_addresses_is_at_memory_plus_offset() {
        let mut t = DeviceTracker::default();
        let mem = t.allocate(10, 1 << 24).range;
        t.create_resource(vk::ObjectType::IMAGE, 5, 1 << 22);
        t.set_name(vk::ObjectType::IMAGE, 5, Some("shadow_atlas".into()));
        t.bind_resource(vk::ObjectType::IMAGE, 5, 10, 0x14bc00)
            .unwrap();
        assert_eq!(
            t.live_target(Some("shadow_atlas"), false).unwrap().range,
            Range {
                base: mem.base + 0x14bc00,
                size: 1 << 22
            }
        );
    }

    #[test]
    fn a_watched_address_reports_the_first_bind_that_covers_it() {
        let mut t = DeviceTracker::default();
        let mem = t.allocate(10, 1 << 20).range;
        t.watch(mem.base + 0x1800);
        for (handle, offset) in [(20u64, 0x2000u64), (21, 0x1000), (22, 0x1800)] {
            t.create_resource(vk::ObjectType::BUFFER, handle, 0x1000);
            t.bind_resource(vk::ObjectType::BUFFER, handle, 10, offset)
                .unwrap();
        }
        let by = t.take_rebind().unwrap();
        assert!(by.starts_with("buffer 0x15 at"), "{by}");
        assert!(t.take_rebind().is_none(), "taken");
        // Driver-reported binds count too.
        t.watch(0xdefd_0000_0800);
        t.observe(
            vk::ObjectType::DEVICE_MEMORY,
            11,
            vk::DeviceAddressBindingTypeEXT::BIND,
            Range {
                base: 0xdefd_0000_0000,
                size: 0x1000,
            },
        );
        assert!(t.take_rebind().unwrap().starts_with("memory 0xb"));
        t.unwatch();
        t.create_resource(vk::ObjectType::BUFFER, 23, 0x1000);
        t.bind_resource(vk::ObjectType::BUFFER, 23, 10, 0x1800);
        assert!(t.take_rebind().is_none());
    }

    #[test]
    fn unbound_buffer_is_not_reported_on_destroy() {
        let mut t = DeviceTracker::default();
        t.create_resource(vk::ObjectType::BUFFER, 1, 64);
        assert!(t.destroy_resource(vk::ObjectType::BUFFER, 1).is_none());
        assert!(t.freed_target(None).is_none());
    }
}
