//! `AddressOrder`: ranges sorted by address, built when a query first needs them (at crash time),
//! answering "which ranges overlap [lo, hi]" and "which range ends closest below an address".
//!
//! The fold does not keep ranges in address order: per event that is a B-tree update (or two), paid
//! every frame, while only the resolver asks address questions, once per crash. Sorting a million
//! ranges then costs tens of milliseconds (BENCHMARKS.md), after a device loss nobody notices.
//!
//! Ranges nest (a 256 MiB memory block holds thousands of buffers), so one array ordered by base
//! cannot stop scanning early. Bucketing by size class (power of two) bounds how far below `lo` an
//! overlapping range of that class can start: a range of size < 2^k that overlaps `lo` starts after
//! `lo - 2^k`. Each class is a sorted run, so a query is at most 65 binary searches and short scans.

/// Number of size classes: class k holds sizes in [2^(k-1), 2^k), class 0 holds size 0 (treated as 1).
const CLASSES: usize = 65;

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

/// One range in address order: base, size and the id the owner gave it.
#[derive(Clone, Copy, Debug)]
struct Item {
    base: u64,
    size: u64,
    id: u32,
}

/// Ranges `(base, size, id)` grouped by size class, each class sorted by base.
pub(crate) struct AddressOrder {
    items: Vec<Item>,
    /// `items[starts[k]..starts[k + 1]]` is class `k`.
    starts: [usize; CLASSES + 1],
}

impl Default for AddressOrder {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            starts: [0; CLASSES + 1],
        }
    }
}

impl AddressOrder {
    /// Sorts `ranges` (`(base, size, id)`).
    pub(crate) fn build(ranges: impl Iterator<Item = (u64, u64, u32)>) -> Self {
        let mut items: Vec<Item> = ranges
            .map(|(base, size, id)| Item { base, size, id })
            .collect();
        items.sort_unstable_by_key(|i| (class_of(i.size), i.base, i.id));
        let mut starts = [0; CLASSES + 1];
        for item in &items {
            starts[class_of(item.size) + 1] += 1;
        }
        for k in 0..CLASSES {
            starts[k + 1] += starts[k];
        }
        Self { items, starts }
    }

    fn class(&self, k: usize) -> &[Item] {
        &self.items[self.starts[k]..self.starts[k + 1]]
    }

    /// Ids of all ranges overlapping the inclusive interval `[lo, hi]`, by size class then base.
    pub(crate) fn overlapping(&self, lo: u64, hi: u64) -> impl Iterator<Item = u32> + '_ {
        (0..CLASSES).flat_map(move |k| {
            let class = self.class(k);
            let from = lo.saturating_sub(class_reach(k));
            let first = class.partition_point(|i| i.base < from);
            class[first..]
                .iter()
                .take_while(move |i| i.base <= hi)
                .filter(move |i| contains_or_starts_after(i.base, i.size, lo))
                .map(|i| i.id)
        })
    }

    /// The id of the range whose value passes `accept` and that ends at or below `address`
    /// (exclusive end <= address) closest to it: the object an access just past its end most likely
    /// came from.
    pub(crate) fn nearest_ending_at_or_below_where(
        &self,
        address: u64,
        accept: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        let mut best: Option<(u64, u32)> = None; // (end, id)
        for k in 0..CLASSES {
            let class = self.class(k);
            let below = class.partition_point(|i| i.base <= address);
            // Walk down from `address`; in this class no range starting at `base` can end after
            // `base + 2^k`, so once that is below the best end found, lower ranges cannot win.
            for (scanned, item) in class[..below].iter().rev().enumerate() {
                if let Some((best_end, _)) = best {
                    if item.base.saturating_add(class_reach(k)) < best_end || scanned > 256 {
                        break;
                    }
                }
                let end = range_end(item.base, item.size);
                if end <= address
                    && best.is_none_or(|(best_end, _)| end > best_end)
                    && accept(item.id)
                {
                    best = Some((end, item.id));
                }
                if scanned > 256 {
                    break; // pathological aliasing: bound the work, the answer is a hint anyway
                }
            }
        }
        best.map(|(_, id)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(ranges: &[(u32, u64, u64)]) -> AddressOrder {
        AddressOrder::build(ranges.iter().map(|&(id, base, size)| (base, size, id)))
    }

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort();
        v
    }

    #[test]
    fn overlap_finds_nested_and_straddling_ranges() {
        let t = order(&[
            (1, 0x1000_0000, 256 << 20), // 256 MiB memory block
            (2, 0x1000_1000, 0x100),
            (3, 0x1000_2000, 0x100),
            (4, 0x0fff_ff00, 0x200), // straddles the block's start
        ]);
        let hits = |lo, hi| sorted(t.overlapping(lo, hi).collect());
        assert_eq!(hits(0x1000_1080, 0x1000_1080), vec![1, 2]);
        assert_eq!(hits(0x1000_0000, 0x1000_0000), vec![1, 4]);
        assert!(hits(0x2000_0000, 0x2000_0fff).is_empty());
        // A range is [base, base+size): its end is not inside.
        assert_eq!(hits(0x1000_2100, 0x1000_2100), vec![1]);
    }

    #[test]
    fn overlap_and_nearest_match_brute_force() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut ranges = Vec::new();
        for id in 0..2000u32 {
            let base = next() % (1 << 24);
            let size = 1 + next() % (1 << (next() % 20));
            ranges.push((id, base, size));
        }
        let t = order(&ranges);
        for _ in 0..500 {
            let lo = next() % (1 << 24);
            let hi = lo + next() % 4096;
            let got = sorted(t.overlapping(lo, hi).collect());
            let want: Vec<u32> = ranges
                .iter()
                .filter(|(_, b, s)| *b <= hi && b + s > lo)
                .map(|(id, _, _)| *id)
                .collect();
            assert_eq!(got, want);
            let nearest = t.nearest_ending_at_or_below_where(lo, |_| true);
            let want_end = ranges
                .iter()
                .map(|(_, b, s)| b + s)
                .filter(|e| *e <= lo)
                .max();
            assert_eq!(
                nearest.map(|id| {
                    let (_, b, s) = ranges[id as usize];
                    b + s
                }),
                want_end
            );
        }
    }

    #[test]
    fn extremes() {
        let t = order(&[(1, u64::MAX - 10, u64::MAX), (2, 0, 0)]);
        assert_eq!(
            t.overlapping(u64::MAX, u64::MAX).collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(t.overlapping(0, 0).collect::<Vec<_>>(), vec![2]);
        assert!(AddressOrder::default()
            .overlapping(0, u64::MAX)
            .next()
            .is_none());
    }
}
