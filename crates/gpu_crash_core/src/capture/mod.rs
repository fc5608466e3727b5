//! Capture: from the driver's threads into a lock-free ring, without allocating or locking.
//!
//! [`messenger::address_binding_callback`] decodes `VkDeviceAddressBindingCallbackDataEXT` messages
//! into fixed-size [`BindingRecord`]s and pushes them into a [`BindingRing`]. The reporter side
//! drains the ring with the ring's single [`RingConsumer`].

pub mod messenger;
pub mod record;
pub mod ring;

pub use record::{BindingKind, BindingRecord};
pub use ring::{BindingRing, RingConsumer};
