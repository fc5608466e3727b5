//! Which render device the index describes, and which devices' reports have a claim on it.

use crate::capture::BindingRecord;

/// Device generation tags (`generation_tag`) with a claim on the index: holds and pins are
/// multisets, one entry per holder, so two holders of one device release independently. A few
/// entries at most (a device or two in a crash); locked by an indexer thread once per drain, to copy
/// them, and by the crash path, never by the messenger callback.
#[derive(Clone, Default)]
pub(super) struct DeviceClaims {
    pub(super) holds: Claims,
    pub(super) pins: Claims,
}

/// One kind of claim: a tag per holder.
#[derive(Clone, Default)]
pub(super) struct Claims(Vec<u8>);

impl Claims {
    pub(super) fn push(&mut self, tag: u8) {
        self.0.push(tag);
    }

    pub(super) fn remove_one(&mut self, tag: u8) {
        if let Some(i) = self.0.iter().position(|t| *t == tag) {
            self.0.swap_remove(i);
        }
    }

    pub(super) fn contains(&self, tag: u8) -> bool {
        tag != 0 && self.0.contains(&tag)
    }
}

/// Keeps the index to one render device: the first event of a newer device generation (a renderer
/// recovery) empties it, and events of older generations (the old device's teardown, which its
/// messenger still reports while the new device starts) are dropped. Untagged events (0) pass.
#[derive(Default)]
pub(super) struct DeviceFilter {
    pub(super) generation: u8,
}

/// What to do with one record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum DeviceVerdict {
    Apply,
    ResetThenApply,
    Drop,
}

impl DeviceFilter {
    /// Whether `record` is of a newer device than the index describes (it would reset the index).
    pub(super) fn is_newer(&self, record: &BindingRecord) -> bool {
        let tag = record.device_generation();
        tag != 0 && tag != self.generation && (self.generation == 0 || self.forward(tag) < 128)
    }

    /// How many generations `tag` is ahead of the index's device. Tags wrap 255 -> 1 (see
    /// `generation_tag`): newer is a short forward distance.
    fn forward(&self, tag: u8) -> u8 {
        if tag > self.generation {
            tag - self.generation
        } else {
            (255 - self.generation) + tag
        }
    }

    pub(super) fn judge(&mut self, record: &BindingRecord) -> DeviceVerdict {
        let tag = record.device_generation();
        if tag == 0 || tag == self.generation {
            return DeviceVerdict::Apply;
        }
        if self.generation == 0 || self.forward(tag) < 128 {
            self.generation = tag;
            DeviceVerdict::ResetThenApply
        } else {
            DeviceVerdict::Drop
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::capture::record::generation_tag;
    use crate::capture::BindingKind;
    use ash::vk;

    /// A bind of buffer 1 at 0x1000 on render device `generation`.
    pub(in crate::index) fn tagged(generation: u32) -> BindingRecord {
        BindingRecord::new(BindingKind::Bind, vk::ObjectType::BUFFER, 1, 0x1000, 64)
            .with_device_generation(generation_tag(generation))
    }

    #[test]
    fn newer_device_resets_older_device_is_dropped() {
        let mut filter = DeviceFilter::default();
        assert_eq!(filter.judge(&tagged(1)), DeviceVerdict::ResetThenApply);
        assert_eq!(filter.judge(&tagged(1)), DeviceVerdict::Apply);
        assert_eq!(filter.judge(&tagged(2)), DeviceVerdict::ResetThenApply);
        assert_eq!(filter.judge(&tagged(1)), DeviceVerdict::Drop);
        assert_eq!(filter.judge(&tagged(2)), DeviceVerdict::Apply);
        let untagged = BindingRecord::new(BindingKind::Bind, vk::ObjectType::BUFFER, 1, 0, 1);
        assert_eq!(filter.judge(&untagged), DeviceVerdict::Apply);
    }

    #[test]
    fn generations_wrap_past_255() {
        let mut filter = DeviceFilter::default();
        filter.judge(&tagged(255));
        assert_eq!(filter.judge(&tagged(256)), DeviceVerdict::ResetThenApply);
        assert_eq!(generation_tag(256), 1);
        assert_eq!(filter.judge(&tagged(255)), DeviceVerdict::Drop);
    }
}
