//! `RangeTable`: GPU address ranges keyed by id, answering "which ranges overlap [lo, hi]" and
//! "which range ends closest below an address" in O(log n) per size class.
//!
//! Ranges nest (a 256 MiB memory block holds thousands of buffers), so a plain map ordered by base
//! cannot stop scanning early. Bucketing by size class (power of two) bounds how far below `lo` an
//! overlapping range of that class can start: a range of size < 2^k that overlaps `lo` starts after
//! `lo - 2^k`. Each class is an ordered map, so a query is 65 short range scans.

use std::collections::BTreeMap;

use bevy::platform::collections::HashMap;

/// Number of size classes: class k holds sizes in [2^(k-1), 2^k), class 0 holds size 0 (treated as 1).
const CLASSES: usize = 65;

/// An id-addressed set of `[base, base + size)` ranges carrying a value each.
pub struct RangeTable<T> {
    entries: HashMap<u64, (u64, u64, T)>,
    classes: Vec<BTreeMap<(u64, u64), u64>>, // (base, id) -> size
}

impl<T> Default for RangeTable<T> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            classes: (0..CLASSES).map(|_| BTreeMap::new()).collect(),
        }
    }
}

fn class_of(size: u64) -> usize {
    (64 - size.max(1).leading_zeros()) as usize
}

/// Largest size that class `k` can hold, minus one: how far below `lo` its ranges can start.
fn class_reach(k: usize) -> u64 {
    if k >= 64 {
        u64::MAX
    } else {
        (1u64 << k) - 1
    }
}

/// Exclusive end, saturating at the top of the address space.
pub fn range_end(base: u64, size: u64) -> u64 {
    base.saturating_add(size.max(1))
}

/// True when `[base, base + size)` reaches `lo` or starts after it (no overflow at the top).
fn contains_or_starts_after(base: u64, size: u64, lo: u64) -> bool {
    base >= lo || lo - base < size.max(1)
}

impl<T> RangeTable<T> {
    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds a range under a fresh `id` (ids are never reused by the caller).
    pub fn insert(&mut self, id: u64, base: u64, size: u64, value: T) {
        self.classes[class_of(size)].insert((base, id), size);
        self.entries.insert(id, (base, size, value));
    }

    /// Removes a range by id, returning `(base, size, value)`.
    pub fn remove(&mut self, id: u64) -> Option<(u64, u64, T)> {
        let (base, size, value) = self.entries.remove(&id)?;
        self.classes[class_of(size)].remove(&(base, id));
        Some((base, size, value))
    }

    /// The range with this id.
    pub fn get(&self, id: u64) -> Option<(u64, u64, &T)> {
        self.entries.get(&id).map(|(b, s, v)| (*b, *s, v))
    }

    /// Mutable access to a range's value.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        self.entries.get_mut(&id).map(|(_, _, v)| v)
    }

    /// Ids of all ranges overlapping the inclusive interval `[lo, hi]`.
    pub fn overlapping(&self, lo: u64, hi: u64) -> Vec<u64> {
        let mut found = Vec::new();
        for (k, class) in self.classes.iter().enumerate() {
            if class.is_empty() {
                continue;
            }
            let from = lo.saturating_sub(class_reach(k));
            for (&(base, id), &size) in class.range((from, 0)..=(hi, u64::MAX)) {
                if contains_or_starts_after(base, size, lo) {
                    found.push(id);
                }
            }
        }
        found
    }

    /// The id of the range that ends at or below `address` (exclusive end <= address) closest to it,
    /// i.e. the object an out-of-bounds access just past its end most likely came from.
    pub fn nearest_ending_at_or_below(&self, address: u64) -> Option<u64> {
        self.nearest_ending_at_or_below_where(address, |_| true)
    }

    /// As [`Self::nearest_ending_at_or_below`], among ranges whose value passes `accept`.
    pub fn nearest_ending_at_or_below_where(
        &self,
        address: u64,
        accept: impl Fn(&T) -> bool,
    ) -> Option<u64> {
        let mut best: Option<(u64, u64)> = None; // (end, id)
        for (k, class) in self.classes.iter().enumerate() {
            // Walk down from `address`; in this class no range starting at `base` can end after
            // `base + 2^k`, so once that is below the best end found, older ranges cannot win.
            for (scanned, (&(base, id), &size)) in
                class.range(..=(address, u64::MAX)).rev().enumerate()
            {
                if let Some((best_end, _)) = best {
                    if base.saturating_add(class_reach(k)) < best_end || scanned > 256 {
                        break;
                    }
                }
                let end = range_end(base, size);
                if end <= address
                    && best.is_none_or(|(best_end, _)| end > best_end)
                    && self.entries.get(&id).is_some_and(|(_, _, v)| accept(v))
                {
                    best = Some((end, id));
                }
                if scanned > 256 {
                    break; // pathological aliasing: bound the work, the answer is a hint anyway
                }
            }
        }
        best.map(|(_, id)| id)
    }

    /// All `(id, base, size, value)`, unordered.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, u64, &T)> {
        self.entries.iter().map(|(id, (b, s, v))| (*id, *b, *s, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_finds_nested_and_straddling_ranges() {
        let mut t = RangeTable::default();
        t.insert(1, 0x1000_0000, 256 << 20, "block"); // 256 MiB memory block
        t.insert(2, 0x1000_1000, 0x100, "buf-a");
        t.insert(3, 0x1000_2000, 0x100, "buf-b");
        t.insert(4, 0x0fff_ff00, 0x200, "straddles block start");
        let mut hits = t.overlapping(0x1000_1080, 0x1000_1080);
        hits.sort();
        assert_eq!(hits, vec![1, 2]);
        let mut hits = t.overlapping(0x1000_0000, 0x1000_0000);
        hits.sort();
        assert_eq!(hits, vec![1, 4]);
        assert!(t.overlapping(0x2000_0000, 0x2000_0fff).is_empty());
        // A range is [base, base+size): its end is not inside.
        assert_eq!(t.overlapping(0x1000_2100, 0x1000_2100), vec![1]);
    }

    #[test]
    fn overlap_matches_brute_force() {
        let mut t = RangeTable::default();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut ranges = Vec::new();
        for id in 0..2000u64 {
            let base = next() % (1 << 24);
            let size = 1 + next() % (1 << (next() % 20));
            t.insert(id, base, size, ());
            ranges.push((id, base, size));
        }
        for _ in 0..500 {
            let lo = next() % (1 << 24);
            let hi = lo + next() % 4096;
            let mut got = t.overlapping(lo, hi);
            got.sort();
            let want: Vec<u64> = ranges
                .iter()
                .filter(|(_, b, s)| *b <= hi && b + s > lo)
                .map(|(id, _, _)| *id)
                .collect();
            assert_eq!(got, want);
            let nearest = t.nearest_ending_at_or_below(lo);
            let want_end = ranges
                .iter()
                .map(|(_, b, s)| b + s)
                .filter(|e| *e <= lo)
                .max();
            assert_eq!(
                nearest.map(|id| {
                    let (b, s, _) = t.get(id).unwrap();
                    b + s
                }),
                want_end
            );
        }
    }

    #[test]
    fn remove_and_extremes() {
        let mut t = RangeTable::default();
        t.insert(1, u64::MAX - 10, u64::MAX, "top");
        t.insert(2, 0, 0, "zero-sized");
        assert_eq!(t.overlapping(u64::MAX, u64::MAX), vec![1]);
        assert_eq!(t.overlapping(0, 0), vec![2]);
        assert_eq!(t.remove(1).map(|(_, _, v)| v), Some("top"));
        assert!(t.overlapping(u64::MAX, u64::MAX).is_empty());
        assert_eq!(t.len(), 1);
    }
}
