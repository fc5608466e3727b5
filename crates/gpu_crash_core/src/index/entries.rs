//! What the index stores besides live ranges (those are `slab.rs`): a freed range, a recent event,
//! an unbind held back in a teardown, and the address order its queries build. Fixed-size `Copy`
//! records, so the rings that keep them never allocate.

use std::time::Instant;

use super::names::NameId;
use super::order::AddressOrder;
use crate::capture::{BindingKind, BindingRecord};

/// A freed range in the freed ring.
#[derive(Clone, Copy)]
pub(super) struct FreedEntry {
    pub(super) base: u64,
    pub(super) size: u64,
    pub(super) handle: u64,
    pub(super) bound_frame: u64,
    pub(super) bound_sequence: u64,
    pub(super) freed_frame: u64,
    pub(super) freed_sequence: u64,
    pub(super) freed_at: Instant,
    pub(super) object_type: i32,
    pub(super) name: NameId,
    /// The unbind matched a bind we saw (`bound_*` are valid).
    pub(super) matched: bool,
}

/// An event in the recent-events ring.
#[derive(Clone, Copy)]
pub(super) struct RecentEntry {
    pub(super) sequence: u64,
    pub(super) frame: u64,
    pub(super) handle: u64,
    pub(super) base: u64,
    pub(super) size: u64,
    pub(super) seen_at: Instant,
    pub(super) object_type: i32,
    pub(super) name: NameId,
    pub(super) kind: BindingKind,
    pub(super) internal: bool,
}

/// An unbind held back during an unbind run (see the module documentation): 16 bytes, in a list
/// that exists only while a run holds unbinds.
#[derive(Clone, Copy)]
pub(super) struct HeldUnbind {
    /// The live entry it unbinds (marked [`HELD`](super::slab::HELD)).
    pub(super) id: u32,
    /// The name the freed range gets.
    pub(super) name: NameId,
    /// Ring sequence and frame of the unbind, after those of the run's first held unbind.
    pub(super) sequence_offset: u32,
    pub(super) frame_offset: u32,
}

/// Where the held unbinds of the current run start.
#[derive(Clone, Copy)]
pub(super) struct HeldFrom {
    pub(super) sequence: u64,
    pub(super) frame: u64,
    pub(super) seen_at: Instant,
}

/// Live and freed ranges in address order, built by the first query after a change.
pub(super) struct Orders {
    /// Ids are slab ids (held entries left out).
    pub(super) live: AddressOrder,
    /// Ids are physical slots of the freed ring, then `freed capacity + i` for held unbind `i`.
    pub(super) freed: AddressOrder,
}

/// What an unbind's freed range records of the unbind.
#[derive(Clone, Copy)]
pub(super) struct FreedBy {
    pub(super) object_type: i32,
    pub(super) handle: u64,
    pub(super) sequence: u64,
    pub(super) frame: u64,
}

impl FreedBy {
    pub(super) fn record(record: &BindingRecord) -> Self {
        Self {
            object_type: record.object_type,
            handle: record.handle,
            sequence: record.sequence,
            frame: record.frame,
        }
    }
}
