//! Resolve: from a fault address (with its precision) to a verdict and ranked culprit objects.
//!
//! In the spirit of D3D12 DRED and Radeon GPU Detective: an address inside a live resource is a fault
//! inside a live object; inside a resource that was freed (and nothing live) is a use-after-free; just
//! past the end of a live resource is out-of-bounds; nothing known is an unknown address. Memory
//! objects (`DEVICE_MEMORY`) are containers: a buffer or image over the address always ranks first.

use std::time::Instant;

use ash::vk;

use crate::index::{object_type_name, AddressIndex, FreedBinding, LiveBinding, ObjectKey};
use crate::report::{
    BindingEventEntry, Culprit, FaultAccess, FaultEntry, FaultVerdict, ObjectState,
};

/// How far past the end of a live resource an address still counts as its overrun when it is not in
/// the same memory block (a strided loop overrunning by a few rows, not a wild pointer).
pub const OVERRUN_REACH: u64 = 64 * 1024;

/// One faulting address as the driver reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultAddress {
    /// `reportedAddress`.
    pub address: u64,
    /// `addressPrecision` (a power of two; 0 or 1 means exact).
    pub precision: u64,
    /// How it was accessed.
    pub access: FaultAccess,
}

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
}

impl ResolveContext<'_> {
    fn name_of(&self, key: ObjectKey) -> Option<String> {
        self.index.name_of(key).map(|n| n.to_string())
    }

    fn live(&self, address: u64, base: u64, size: u64, b: &LiveBinding, reason: String) -> Culprit {
        let name = self.name_of(b.key);
        let end = base.saturating_add(size);
        Culprit {
            label: label(b.key, name.as_deref()),
            name,
            object_type: object_type_name(b.key.object_type),
            handle: b.key.handle,
            base,
            size,
            state: ObjectState::Live,
            offset: address.wrapping_sub(base) as i64,
            freed_ms_ago: None,
            freed_frames_ago: None,
            bytes_past_end: (address >= end).then(|| address - end),
            reason,
            opaque_capture_address: None,
            capture_replay_note: None,
        }
    }

    fn freed(
        &self,
        address: u64,
        base: u64,
        size: u64,
        f: &FreedBinding,
        reason: String,
    ) -> Culprit {
        let name = f.name.as_deref().map(str::to_owned);
        Culprit {
            label: label(f.key, name.as_deref()),
            name,
            object_type: object_type_name(f.key.object_type),
            handle: f.key.handle,
            base,
            size,
            state: ObjectState::Freed,
            offset: address.wrapping_sub(base) as i64,
            freed_ms_ago: Some(self.now.saturating_duration_since(f.freed_at).as_millis() as u64),
            freed_frames_ago: Some(self.frame.saturating_sub(f.freed_frame)),
            bytes_past_end: None,
            reason,
            opaque_capture_address: None,
            capture_replay_note: None,
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
    let index = ctx.index;

    let mut live = index.live_overlapping(lo, hi);
    let mut freed = index.freed_overlapping(lo, hi); // most recently freed first
    let contains = |base: u64, size: u64| address >= base && address - base < size.max(1);
    // Most specific first: resources before memory, exact containment before range overlap,
    // smaller ranges before larger ones.
    live.sort_by_key(|(base, size, b)| (is_memory(b.key), !contains(*base, *size), *size));
    freed.sort_by_key(|(base, size, f)| {
        (
            is_memory(f.key),
            !contains(*base, *size),
            std::cmp::Reverse(f.freed_at),
        )
    });

    let mut candidates: Vec<Culprit> = Vec::new();
    let mut verdict = None;

    for (base, size, b) in &live {
        let exact = contains(*base, *size);
        let reason = match (is_memory(b.key), exact) {
            (false, true) => "live resource containing the fault address".to_owned(),
            (false, false) => format!(
                "live resource overlapping the fault range [{lo:#x}, {hi:#x}] (precision {} bytes)",
                hi - lo + 1
            ),
            (true, _) => "live memory block around the fault address".to_owned(),
        };
        if verdict.is_none() && !is_memory(b.key) && exact {
            verdict = Some(FaultVerdict::InsideLiveObject);
        }
        candidates.push(ctx.live(address, *base, *size, b, reason));
    }
    for (base, size, f) in &freed {
        let exact = contains(*base, *size);
        let ago = ctx.now.saturating_duration_since(f.freed_at).as_millis();
        let reason = format!(
            "{} freed {ago} ms / {} frames before the fault{}",
            if is_memory(f.key) {
                "memory"
            } else {
                "resource"
            },
            ctx.frame.saturating_sub(f.freed_frame),
            if exact {
                ", containing the fault address"
            } else {
                ", overlapping the fault range"
            }
        );
        candidates.push(ctx.freed(address, *base, *size, f, reason));
    }

    // Rank: the verdict's culprit first, then the rest in the order gathered.
    let contains_fault = |c: &Culprit| c.offset >= 0 && (c.offset as u64) < c.size.max(1);
    let first_live_resource = |candidates: &[Culprit], exact_only: bool| {
        candidates.iter().position(|c| {
            c.state == ObjectState::Live
                && c.object_type != "DEVICE_MEMORY"
                && (!exact_only || contains_fault(c))
        })
    };
    let first_freed = |candidates: &[Culprit], resource_only: bool, exact_only: bool| {
        candidates.iter().position(|c| {
            c.state == ObjectState::Freed
                && (!resource_only || c.object_type != "DEVICE_MEMORY")
                && (!exact_only || contains_fault(c))
        })
    };

    let mut winner = None;
    if verdict == Some(FaultVerdict::InsideLiveObject) {
        winner = first_live_resource(&candidates, true);
    }
    if winner.is_none() {
        if let Some(i) = first_freed(&candidates, true, true) {
            verdict = Some(FaultVerdict::UseAfterFree);
            winner = Some(i);
        }
    }
    if winner.is_none() {
        if let Some((base, size, b)) = nearest_overrun(index, address) {
            let end = base.saturating_add(size);
            let reason = format!(
                "nearest live resource below the fault address; the address is {} bytes past its end",
                address - end
            );
            candidates.insert(0, ctx.live(address, base, size, b, reason));
            verdict = Some(FaultVerdict::OutOfBounds);
            winner = Some(0);
        }
    }
    if winner.is_none() {
        if let Some(i) = first_freed(&candidates, true, false) {
            verdict = Some(FaultVerdict::UseAfterFree);
            winner = Some(i);
        } else if let Some(i) = first_live_resource(&candidates, false) {
            verdict = Some(FaultVerdict::InsideLiveObject);
            winner = Some(i);
        } else if let Some(i) = first_freed(&candidates, false, true) {
            verdict = Some(FaultVerdict::UseAfterFree);
            winner = Some(i);
        }
    }
    let verdict = verdict.unwrap_or(FaultVerdict::UnknownAddress);
    if let Some(i) = winner {
        let culprit = candidates.remove(i);
        candidates.insert(0, culprit);
    }
    let culprit = winner.map(|_| candidates[0].clone());

    let summary = summary_line(fault, verdict, culprit.as_ref());
    let nearby_events = index
        .recent_events()
        .filter(|e| e.base <= hi && e.base.saturating_add(e.size.max(1)) > lo)
        .map(|e| BindingEventEntry::from_indexed(e, ctx.now))
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

/// The live resource whose end is closest at or below `address`, if the address plausibly belongs to
/// an overrun of it: within [`OVERRUN_REACH`], or inside the same live memory block.
fn nearest_overrun(index: &AddressIndex, address: u64) -> Option<(u64, u64, &LiveBinding)> {
    // Walk down past memory blocks: they are containers, not the object that overran.
    let mut probe = address;
    for _ in 0..64 {
        let (base, size, b) = index.nearest_live_below(probe)?;
        if is_memory(b.key) {
            probe = base;
            continue;
        }
        let end = base.saturating_add(size);
        let same_block = index
            .live_overlapping(address, address)
            .iter()
            .any(|(mb, ms, m)| is_memory(m.key) && *mb <= base && end <= mb.saturating_add(*ms));
        return (address - end <= OVERRUN_REACH || same_block).then_some((base, size, b));
    }
    None
}

/// The one human line: `GPU fault: write at 0x1000f010 is 16 bytes past the end of buffer
/// "particles" (live) -> out_of_bounds`.
pub fn summary_line(
    fault: FaultAddress,
    verdict: FaultVerdict,
    culprit: Option<&Culprit>,
) -> String {
    let access = match fault.access {
        FaultAccess::None => "access",
        FaultAccess::Read => "read",
        FaultAccess::Write => "write",
        FaultAccess::Execute => "execute",
        FaultAccess::Instruction => "instruction fetch",
    };
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
