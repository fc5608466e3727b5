//! What the resolver concludes about a fault address: verdict, culprits, the binding events around
//! it. Part of the report model (re-exported by `report`).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::capture::BindingKind;
use crate::index::{object_type_name, IndexedEvent};
use crate::serde_hex::{hex, hex_opt, hex_pair};
use crate::vulkan::fault::FaultAccess;

/// The reporter's judgement of one fault address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultVerdict {
    /// The address lies in a range whose object was freed, and in no live range.
    UseAfterFree,
    /// The address lies in no live or freed range but just past the end of a live object.
    OutOfBounds,
    /// The address lies inside a live object (bad index within bounds, wrong format, hardware issue).
    InsideLiveObject,
    /// Nothing known lives or lived there.
    UnknownAddress,
}

impl FaultVerdict {
    /// The snake_case name, as in JSON, tags and fingerprints.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UseAfterFree => "use_after_free",
            Self::OutOfBounds => "out_of_bounds",
            Self::InsideLiveObject => "inside_live_object",
            Self::UnknownAddress => "unknown_address",
        }
    }
}

/// Whether a culprit object still existed at the time of the fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectState {
    /// Still bound.
    Live,
    /// Unbound before the fault.
    Freed,
}

/// A GPU object that may explain a fault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Culprit {
    /// The wgpu/Bevy label or Vulkan debug name, if known.
    pub name: Option<String>,
    /// What to call it in one line: `buffer "particles"`, or `BUFFER 0x5a` when unnamed.
    pub label: String,
    /// `VkObjectType` name, e.g. `BUFFER`.
    pub object_type: String,
    /// Vulkan handle.
    #[serde(with = "hex")]
    pub handle: u64,
    /// First GPU address of its range.
    #[serde(with = "hex")]
    pub base: u64,
    /// Size of its range in bytes.
    pub size: u64,
    /// Live or freed.
    pub state: ObjectState,
    /// Fault address minus `base` (may exceed `size` for overruns).
    pub offset: i64,
    /// For freed objects: milliseconds between the unbind and the fault.
    pub freed_ms_ago: Option<u64>,
    /// For freed objects: frames between the unbind and the fault.
    pub freed_frames_ago: Option<u64>,
    /// For overruns: bytes between the end of the object and the fault address.
    pub bytes_past_end: Option<u64>,
    /// Why this candidate ranks where it does.
    pub reason: String,
    /// `vkGetDeviceMemoryOpaqueCaptureAddress` of the backing memory, for capture/replay tools.
    #[serde(with = "hex_opt", default)]
    pub opaque_capture_address: Option<u64>,
    /// Why `opaque_capture_address` is missing, when it is.
    pub capture_replay_note: Option<String>,
}

/// One address the driver reported, resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultEntry {
    /// `reportedAddress`.
    #[serde(with = "hex")]
    pub address: u64,
    /// The inclusive range `[lo, hi]` the fault lies in, from `addressPrecision`.
    #[serde(with = "hex_pair")]
    pub address_range: [u64; 2],
    /// `addressPrecision` in bytes.
    pub precision: u64,
    /// Read, write, execute, instruction, none.
    pub access: FaultAccess,
    /// The verdict.
    pub verdict: FaultVerdict,
    /// The most likely object, or null.
    pub culprit: Option<Culprit>,
    /// Every candidate, best first (aliasing puts several objects over one address).
    pub candidates: Vec<Culprit>,
    /// One human line, e.g.
    /// `GPU fault: write at 0x1000f010 is 16 bytes past the end of buffer "particles" (live) -> out_of_bounds`.
    pub summary: String,
    /// Binding events that touched the fault range, oldest first.
    pub nearby_events: Vec<BindingEventEntry>,
}

/// A binding event as the report shows it (breadcrumbs, "what happened around the fault").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingEventEntry {
    /// Position in the index's event order.
    pub sequence: u64,
    /// Frame of the event.
    pub frame: u64,
    /// Bind or unbind.
    pub kind: BindingKind,
    /// `VkObjectType` name.
    pub object_type: String,
    /// Object handle.
    #[serde(with = "hex")]
    pub handle: u64,
    /// First address.
    #[serde(with = "hex")]
    pub base: u64,
    /// Length in bytes.
    pub size: u64,
    /// Name known for the object at the time.
    pub name: Option<String>,
    /// `INTERNAL_OBJECT` flag.
    pub internal: bool,
    /// Milliseconds between the event and the crash.
    pub ms_before_crash: Option<u64>,
}

impl BindingEventEntry {
    /// Converts an index event, timing it against the crash.
    pub fn from_indexed(event: &IndexedEvent<'_>, crash_at: Instant) -> Self {
        Self {
            sequence: event.sequence,
            frame: event.frame,
            kind: event.kind,
            object_type: object_type_name(event.object_type),
            handle: event.handle,
            base: event.base,
            size: event.size,
            name: event.name.map(str::to_owned),
            internal: event.internal,
            ms_before_crash: event
                .seen_at
                .map(|t| crash_at.saturating_duration_since(t).as_millis() as u64),
        }
    }
}
