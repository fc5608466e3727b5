//! Resolve: from a fault address (with its precision) to a verdict and ranked culprit objects.
//!
//! In the spirit of D3D12 DRED and Radeon GPU Detective: an address inside a live resource is a fault
//! inside a live object; inside a resource that was freed (and nothing live) is a use-after-free; just
//! past the end of a live resource is out-of-bounds; nothing known is an unknown address. Memory
//! objects (`DEVICE_MEMORY`) are containers: a buffer or image over the address always ranks first.

use std::time::Instant;

use ash::vk;

use crate::index::{object_type_name, AddressIndex, ObjectKey};
pub(crate) mod assets;
mod model;

pub use crate::vulkan::fault::{FaultAccess, FaultAddress};
pub use model::{
    AssetKind, AssetUser, BindingEventEntry, Culprit, FaultEntry, FaultVerdict, GpuAsset,
    ObjectState,
};

/// How far past the end of a live resource an address still counts as its overrun when it is not in
/// the same memory block (a strided loop overrunning by a few rows, not a wild pointer).
pub const OVERRUN_REACH: u64 = 64 * 1024;

/// An overrun this close to the end of a live object, bound after the freed tenant of the address
/// left, explains the fault better than that stale tenant (off-by-one rows, a missing bounds check).
pub const ADJACENT_OVERRUN: u64 = 256;

/// Why culprits carry no opaque capture address: wgpu 29 allocates through gpu-allocator, which sets
/// `VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT` at most, never `..._CAPTURE_REPLAY_BIT`; for such memory
/// `vkGetDeviceMemoryOpaqueCaptureAddress` is undefined (the H200 returned 0: docs/driver-facts.md).
pub const CAPTURE_REPLAY_UNAVAILABLE: &str = "not recorded: wgpu's allocator does not allocate memory \
     with VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_CAPTURE_REPLAY_BIT, so no opaque capture address exists for it";

/// The inclusive range the fault lies in, as the spec defines it for `addressPrecision`:
/// `[address & ~(precision - 1), address | (precision - 1)]`. A precision that is not a power of two
/// (a driver bug) is rounded up to one, so the range still contains the address.
pub fn fault_range(address: u64, precision: u64) -> [u64; 2] {
    let precision = precision
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(1 << 63);
    let mask = precision - 1;
    [address & !mask, address | mask]
}

fn is_memory(key: ObjectKey) -> bool {
    key.vk_object_type() == vk::ObjectType::DEVICE_MEMORY
}

/// Context for naming and timing candidates.
pub struct ResolveContext<'a> {
    /// The index at the crash.
    pub index: &'a AddressIndex,
    /// When the crash was noticed.
    pub now: Instant,
    /// Frame at the crash.
    pub frame: u64,
    /// Ring position of the device loss: events from here on are wgpu's teardown after the loss
    /// (it destroys every buffer and texture), so objects unbound then were live when the GPU
    /// faulted. `None` resolves against the index as it is now (hangs, tests).
    pub as_of: Option<u64>,
}

/// An object over the fault range as it stood at the cut-off.
struct Seen {
    base: u64,
    size: u64,
    key: ObjectKey,
    name: Option<String>,
    live: bool,
    freed_at: Option<Instant>,
    freed_frame: Option<u64>,
    /// Ring sequence of its unbind (freed objects only).
    freed_sequence: Option<u64>,
}

impl ResolveContext<'_> {
    /// Objects overlapping `[lo, hi]`, as they were at `as_of`.
    fn seen(&self, lo: u64, hi: u64) -> Vec<Seen> {
        let cut = self.as_of;
        let live = self
            .index
            .live_overlapping(lo, hi)
            .into_iter()
            .filter(|(_, _, b)| cut.is_none_or(|c| b.bound_sequence < c))
            .map(|(base, size, b)| Seen {
                base,
                size,
                key: b.key,
                name: self.index.name_of(b.key).map(|n| n.to_string()),
                live: true,
                freed_at: None,
                freed_frame: None,
                freed_sequence: None,
            });
        let freed = self
            .index
            .freed_overlapping(lo, hi)
            .into_iter()
            // Bound after the cut-off: it did not exist when the GPU faulted.
            .filter(|(_, _, f)| cut.is_none_or(|c| f.bound_sequence.is_none_or(|b| b < c)))
            .map(|(base, size, f)| {
                let live_then = cut.is_some_and(|c| f.freed_sequence >= c);
                Seen {
                    base,
                    size,
                    key: f.key,
                    name: f.name.map(str::to_owned),
                    live: live_then,
                    freed_at: (!live_then).then_some(f.freed_at),
                    freed_frame: (!live_then).then_some(f.freed_frame),
                    freed_sequence: (!live_then).then_some(f.freed_sequence),
                }
            });
        live.chain(freed).collect()
    }

    fn culprit(&self, address: u64, seen: &Seen, reason: String) -> Culprit {
        let end = seen.base.saturating_add(seen.size);
        Culprit {
            label: label(seen.key, seen.name.as_deref()),
            name: seen.name.clone(),
            object_type: object_type_name(seen.key.object_type),
            handle: seen.key.handle,
            base: seen.base,
            size: seen.size,
            state: if seen.live {
                ObjectState::Live
            } else {
                ObjectState::Freed
            },
            offset: address.wrapping_sub(seen.base) as i64,
            freed_ms_ago: seen
                .freed_at
                .map(|t| self.now.saturating_duration_since(t).as_millis() as u64),
            freed_frames_ago: seen.freed_frame.map(|f| self.frame.saturating_sub(f)),
            bytes_past_end: (seen.live && address >= end).then(|| address - end),
            reason,
            opaque_capture_address: None,
            capture_replay_note: Some(CAPTURE_REPLAY_UNAVAILABLE.to_owned()),
            asset: None,
        }
    }
}

/// `buffer "particles"`, or `BUFFER 0x5a` when the object has no name.
pub fn label(key: ObjectKey, name: Option<&str>) -> String {
    match name {
        Some(name) => format!(
            "{} \"{name}\"",
            object_type_name(key.object_type)
                .to_lowercase()
                .replace('_', " ")
        ),
        None => format!("{} {:#x}", object_type_name(key.object_type), key.handle),
    }
}

/// Resolves one fault address against the index.
pub fn resolve(ctx: &ResolveContext<'_>, fault: FaultAddress) -> FaultEntry {
    let address = fault.address;
    let [lo, hi] = fault_range(address, fault.precision);
    let contains = |s: &Seen| address >= s.base && address - s.base < s.size.max(1);

    let mut seen = ctx.seen(lo, hi);
    // Most specific first: live before freed, resources before memory, exact containment before
    // range overlap, smaller ranges before larger ones, most recently freed first.
    seen.sort_by_key(|s| {
        (
            !s.live,
            is_memory(s.key),
            !contains(s),
            // Live: the smallest (most specific) object; freed: the latest tenant, by ring order
            // (drain times tie within a batch).
            if s.live { s.size } else { 0 },
            std::cmp::Reverse(s.freed_sequence),
        )
    });
    let pick = |live: bool, resource_only: bool, exact_only: bool| {
        seen.iter().position(|s| {
            s.live == live && (!resource_only || !is_memory(s.key)) && (!exact_only || contains(s))
        })
    };

    let overrun = ctx
        .index
        .nearest_resource_below(address, ctx.as_of)
        .filter(|r| {
            let (base, end) = (&r.base, r.base.saturating_add(r.size));
            // Within reach, or inside a memory block that also holds the resource.
            address - end <= OVERRUN_REACH
                || seen.iter().any(|m| {
                    m.live
                        && is_memory(m.key)
                        && contains(m)
                        && m.base <= *base
                        && end <= m.base.saturating_add(m.size)
                })
        });

    // A freed range over the address is old history when the live resource just below was bound
    // after that free: the allocator reorganised the region, and the overrun explains the fault.
    // Freed after the neighbour was bound, the freed object was the address's latest tenant.
    let overrun_is_newer = |i: usize| {
        overrun.as_ref().is_some_and(|r| {
            address - r.base.saturating_add(r.size) <= ADJACENT_OVERRUN
                && seen[i]
                    .freed_sequence
                    .is_some_and(|freed| r.bound_sequence > freed)
        })
    };
    // An access at offset 0 of a live object is in bounds for it and would not fault; when another
    // live object ends exactly there, its off-by-one overrun is the bug that explains the fault.
    let boundary_overrun = overrun.as_ref().is_some_and(|r| {
        r.base.saturating_add(r.size) == address
            && pick(true, true, true).is_some_and(|i| seen[i].base == address)
    });
    let (verdict, winner) = if boundary_overrun {
        (FaultVerdict::OutOfBounds, None)
    } else if let Some(i) = pick(true, true, true) {
        (FaultVerdict::InsideLiveObject, Some(i))
    } else if let Some(i) = pick(false, true, true).filter(|&i| !overrun_is_newer(i)) {
        (FaultVerdict::UseAfterFree, Some(i))
    } else if overrun.is_some() {
        (FaultVerdict::OutOfBounds, None)
    } else if let Some(i) = pick(false, true, false) {
        (FaultVerdict::UseAfterFree, Some(i))
    } else if let Some(i) = pick(true, true, false) {
        (FaultVerdict::InsideLiveObject, Some(i))
    } else if let Some(i) = pick(false, false, true) {
        (FaultVerdict::UseAfterFree, Some(i))
    } else {
        (FaultVerdict::UnknownAddress, None)
    };

    let reason_of = |s: &Seen| match (s.live, is_memory(s.key), contains(s)) {
        (true, false, true) => "live resource containing the fault address".to_owned(),
        (true, false, false) => format!(
            "live resource overlapping the fault range [{lo:#x}, {hi:#x}] (precision {} bytes)",
            hi - lo + 1
        ),
        (true, true, _) => "live memory block around the fault address".to_owned(),
        (false, memory, exact) => format!(
            "{} freed {} ms / {} frames before the fault{}",
            if memory { "memory" } else { "resource" },
            s.freed_at
                .map(|t| ctx.now.saturating_duration_since(t).as_millis())
                .unwrap_or(0),
            s.freed_frame
                .map(|f| ctx.frame.saturating_sub(f))
                .unwrap_or(0),
            if exact {
                ", containing the fault address"
            } else {
                ", overlapping the fault range"
            }
        ),
    };
    let mut candidates: Vec<Culprit> = Vec::new();
    if let Some(r) = &overrun {
        if verdict == FaultVerdict::OutOfBounds {
            let (base, size) = (&r.base, &r.size);
            let s = Seen {
                base: r.base,
                size: r.size,
                key: r.key,
                name: r.name.map(str::to_owned),
                live: true,
                freed_at: None,
                freed_frame: None,
                freed_sequence: None,
            };
            let reason = format!(
                "nearest live resource below the fault address; the address is {} bytes past its end",
                address - base.saturating_add(*size)
            );
            candidates.push(ctx.culprit(address, &s, reason));
        }
    }
    if let Some(i) = winner {
        candidates.push(ctx.culprit(address, &seen[i], reason_of(&seen[i])));
    }
    for (i, s) in seen.iter().enumerate() {
        if Some(i) != winner {
            candidates.push(ctx.culprit(address, s, reason_of(s)));
        }
    }
    let culprit = (verdict != FaultVerdict::UnknownAddress)
        .then(|| candidates.first().cloned())
        .flatten();

    let summary = summary_line(fault, verdict, culprit.as_ref());
    let nearby_events = ctx
        .index
        .recent_events()
        .filter(|e| e.base <= hi && e.base.saturating_add(e.size.max(1)) > lo)
        .filter(|e| ctx.as_of.is_none_or(|c| e.sequence < c))
        .map(|e| BindingEventEntry::from_indexed(&e, ctx.now))
        .collect();
    FaultEntry {
        address,
        address_range: [lo, hi],
        precision: hi - lo + 1,
        access: fault.access,
        verdict,
        culprit,
        candidates,
        summary,
        nearby_events,
    }
}

/// `read`, `write`, ...: how a summary line names the access.
pub(crate) fn access_word(access: FaultAccess) -> &'static str {
    match access {
        FaultAccess::None => "access",
        FaultAccess::Read => "read",
        FaultAccess::Write => "write",
        FaultAccess::Execute => "execute",
        FaultAccess::Instruction => "instruction fetch",
    }
}

/// The one human line: `GPU fault: write at 0x1000f010 is 16 bytes past the end of buffer
/// "particles" (live) -> out_of_bounds`.
pub fn summary_line(
    fault: FaultAddress,
    verdict: FaultVerdict,
    culprit: Option<&Culprit>,
) -> String {
    let access = access_word(fault.access);
    let place = match (verdict, culprit) {
        (FaultVerdict::OutOfBounds, Some(c)) => format!(
            "is {} bytes past the end of {} (live)",
            c.bytes_past_end.unwrap_or(0),
            c.label
        ),
        (FaultVerdict::UseAfterFree, Some(c)) => format!(
            "is {} bytes into {} (freed {} ms / {} frames before)",
            c.offset,
            c.label,
            c.freed_ms_ago.unwrap_or(0),
            c.freed_frames_ago.unwrap_or(0)
        ),
        (FaultVerdict::InsideLiveObject, Some(c)) => {
            format!("is {} bytes into {} (live)", c.offset, c.label)
        }
        _ => "is in no known GPU object".to_owned(),
    };
    format!(
        "GPU fault: {access} at {:#x} {place} -> {}",
        fault.address,
        verdict.as_str()
    )
}

#[cfg(test)]
mod tests;
