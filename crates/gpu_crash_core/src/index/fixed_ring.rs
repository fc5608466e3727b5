//! `FixedRing`: a bounded FIFO of `Copy` records allocated once; a push into a full ring overwrites
//! the oldest record in place and hands it back, so the caller can release what it held.

use crate::prefetch::prefetch;

/// Pushes ahead that a full ring asks the cache for the record it will overwrite.
const PREFETCH_AHEAD: usize = 8;

/// See the module documentation.
pub(crate) struct FixedRing<T: Copy> {
    items: Vec<T>,
    capacity: usize,
    /// Physical index of the oldest record.
    head: usize,
}

impl<T: Copy> FixedRing<T> {
    /// An empty ring of `capacity` records (allocated now, touched as it fills).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            items: Vec::with_capacity(capacity),
            capacity,
            head: 0,
        }
    }

    /// Records held.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Heap bytes held.
    pub(crate) fn memory(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<T>()
    }

    /// Appends `item`; when full, it takes the oldest record's place and the oldest is returned.
    /// A ring of capacity 0 keeps nothing and returns `item`.
    #[inline]
    pub(crate) fn push(&mut self, item: T) -> Option<T> {
        if self.items.len() < self.capacity {
            // Within the capacity reserved in `new`: no reallocation.
            self.items.push(item);
            None
        } else if self.capacity == 0 {
            Some(item)
        } else {
            let old = std::mem::replace(&mut self.items[self.head], item);
            self.head = if self.head + 1 == self.capacity {
                0
            } else {
                self.head + 1
            };
            // The record overwritten a few pushes from now was written a lap ago (65,536 freed
            // ranges: megabytes), out of cache: ask for it now so that push does not wait on it.
            let ahead = (self.head + PREFETCH_AHEAD) & (self.capacity - 1);
            if self.capacity.is_power_of_two() {
                let p = self.items.as_ptr().wrapping_add(ahead);
                prefetch(p);
                prefetch(p.cast::<u8>().wrapping_add(std::mem::size_of::<T>() - 1));
            }
            Some(old)
        }
    }

    /// Physical index of the `n`th oldest record.
    fn physical(&self, n: usize) -> usize {
        let i = self.head + n;
        if i >= self.items.len() {
            i - self.items.len()
        } else {
            i
        }
    }

    /// The `n`th oldest record.
    pub(crate) fn get(&self, n: usize) -> &T {
        &self.items[self.physical(n)]
    }

    /// The record at physical index `slot` (as returned by [`Self::slots`]).
    pub(crate) fn at_slot(&self, slot: usize) -> &T {
        &self.items[slot]
    }

    /// Age rank of the record at physical index `slot`: 0 for the oldest.
    pub(crate) fn age_rank(&self, slot: usize) -> usize {
        if slot >= self.head {
            slot - self.head
        } else {
            slot + self.items.len() - self.head
        }
    }

    /// `(physical index, record)` of every record, in storage order.
    pub(crate) fn slots(&self) -> impl Iterator<Item = (usize, &T)> {
        self.items.iter().enumerate()
    }

    /// Records oldest first.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        (0..self.items.len()).map(move |n| self.get(n))
    }

    /// Empties the ring, keeping its allocation.
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.items.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overwrites_oldest_in_place() {
        let mut ring = FixedRing::new(3);
        assert_eq!(ring.push(1), None);
        assert_eq!(ring.push(2), None);
        assert_eq!(ring.push(3), None);
        assert_eq!(ring.push(4), Some(1));
        assert_eq!(ring.push(5), Some(2));
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(
            ring.iter().rev().copied().collect::<Vec<_>>(),
            vec![5, 4, 3]
        );
        let ranks: Vec<_> = ring
            .slots()
            .map(|(slot, &v)| (v, ring.age_rank(slot)))
            .collect();
        assert_eq!(ranks, vec![(4, 1), (5, 2), (3, 0)]);
        let memory = ring.memory();
        ring.clear();
        assert_eq!(ring.len(), 0);
        assert_eq!(ring.memory(), memory);
        let mut none = FixedRing::new(0);
        assert_eq!(none.push(7), Some(7));
        assert_eq!(none.len(), 0);
    }
}
