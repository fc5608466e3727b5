//! Names of live wgpu resources from `wgpu::Device::generate_allocator_report()`.
//!
//! wgpu-hal names a buffer or texture only after binding its memory, so the BIND event carries no
//! name (the UNBIND does, too late for a live culprit). But every wgpu label is also the name of its
//! gpu-allocator allocation, listed per memory block with its offset and size. A block is matched to
//! a bound `VkDeviceMemory` range by size and by how many of the resources we saw bound inside that
//! range fall inside the allocator's allocations; then each resource takes its allocation's name.
//! Containment, not offset equality: the allocator reports each allocation with its alignment padding
//! (measured on lavapipe: a buffer bound at +0x80240 sits in an allocation at +0x80210, 48 bytes larger).

use std::collections::BTreeMap;

use ash::vk;

use super::{AddressIndex, ObjectKey};

/// One allocator block: its size and its allocations `(name, offset, size)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocatorBlock {
    /// Block size in bytes.
    pub size: u64,
    /// Allocations inside the block.
    pub allocations: Vec<(String, u64, u64)>,
}

/// Converts wgpu's report into blocks.
pub fn blocks_of(report: &wgpu::AllocatorReport) -> Vec<AllocatorBlock> {
    report
        .blocks
        .iter()
        .map(|block| AllocatorBlock {
            size: block.size,
            allocations: report
                .allocations
                .get(block.allocations.clone())
                .unwrap_or_default()
                .iter()
                .map(|a| (a.name.clone(), a.offset, a.size))
                .collect(),
        })
        .collect()
}

/// Gives names to live resources that have none; returns how many were named.
pub fn learn_names(index: &mut AddressIndex, blocks: &[AllocatorBlock]) -> usize {
    let memory_type = vk::ObjectType::DEVICE_MEMORY.as_raw();
    let memories: Vec<(u64, u64)> = index
        .live_bindings()
        .filter(|(_, _, b)| b.key.object_type == memory_type)
        .map(|(base, size, _)| (base, size))
        .collect();
    let mut names: Vec<(ObjectKey, String)> = Vec::new();
    for (mem_base, mem_size) in memories {
        // Resources inside this memory range, by their offset in it.
        let mut inside: BTreeMap<u64, Vec<(ObjectKey, u64)>> = BTreeMap::new();
        for (base, size, b) in index.live_overlapping(mem_base, mem_base + mem_size.max(1) - 1) {
            if b.key.object_type != memory_type
                && base >= mem_base
                && base + size <= mem_base + mem_size
            {
                inside
                    .entry(base - mem_base)
                    .or_default()
                    .push((b.key, size));
            }
        }
        if inside.is_empty() {
            continue;
        }
        // Resources lying wholly inside an allocation `[offset, offset + size)`.
        let contained = |offset: u64, size: u64| {
            let end = offset.saturating_add(size);
            inside
                .range(offset..end)
                .flat_map(|(roffset, rs)| rs.iter().map(move |r| (*roffset, *r)))
                .filter(move |(roffset, (_, rsize))| roffset.saturating_add(*rsize) <= end)
        };
        // Score each block of the same size by how many resources its allocations contain.
        // Score each block of the same size: resources its allocations contain (more is better),
        // then the bytes of slack around them (less is better: two 64 MiB host blocks both "contain"
        // a small buffer, but only one holds an allocation of its size at that offset).
        let score = |block: &AllocatorBlock| {
            let mut matched = 0usize;
            let mut slack = 0u64;
            for (_, offset, size) in &block.allocations {
                if let Some(tightest) = contained(*offset, *size)
                    .map(|(_, (_, rsize))| size - rsize)
                    .min()
                {
                    matched += 1;
                    slack += tightest;
                }
            }
            (matched, slack)
        };
        let mut scored: Vec<((usize, u64), &AllocatorBlock)> = blocks
            .iter()
            .filter(|b| b.size == mem_size)
            .map(|b| (score(b), b))
            .filter(|((matched, _), _)| *matched > 0)
            .collect();
        scored.sort_by_key(|((matched, slack), _)| (std::cmp::Reverse(*matched), *slack));
        let Some(&(best, block)) = scored.first() else {
            continue;
        };
        // Two blocks that explain the range exactly as well (e.g. same-sized dedicated allocations of
        // the same size) are ambiguous unless they agree on the names.
        if scored.len() > 1 && scored[1].0 == best && scored[1].1.allocations != block.allocations {
            continue;
        }
        for (name, offset, size) in &block.allocations {
            if name.is_empty() {
                continue;
            }
            for (_, (key, _)) in contained(*offset, *size) {
                if index.name_of(key).is_none() {
                    names.push((key, name.clone()));
                }
            }
        }
    }
    let count = names.len();
    for (key, name) in names {
        index.set_name(key, &name);
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{BindingKind, BindingRecord};
    use std::time::Instant;

    #[test]
    fn names_live_buffers_by_block_and_offset() {
        let mut index = AddressIndex::default();
        let now = Instant::now();
        for r in [
            BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::DEVICE_MEMORY,
                1,
                0x1_0000_0000,
                0x100_0000,
            ),
            BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::DEVICE_MEMORY,
                2,
                0x2_0000_0000,
                0x100_0000,
            ),
            BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::BUFFER,
                10,
                0x1_0000_0000,
                0x1000,
            ),
            BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::BUFFER,
                11,
                0x1_0000_2000,
                0x100,
            ),
            BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::IMAGE,
                20,
                0x2_0001_0000,
                0x4_0000,
            ),
        ] {
            index.apply(&r, now);
        }
        let blocks = vec![
            AllocatorBlock {
                size: 0x100_0000,
                // Reported with its 0x30 bytes of alignment padding in front, as gpu-allocator does.
                allocations: vec![("shadow_atlas".into(), 0x1_0000, 0x4_0030)],
            },
            AllocatorBlock {
                size: 0x100_0000,
                allocations: vec![
                    ("particles".into(), 0, 0x1000),
                    ("padded".into(), 0x1000, 0x1000), // holds nothing: no resource inside it
                    ("uniforms".into(), 0x2000, 0x200), // allocation rounded up past the buffer
                ],
            },
        ];
        assert_eq!(learn_names(&mut index, &blocks), 3);
        let name = |t, h| index.name_of(ObjectKey::new(t, h)).map(|n| n.to_string());
        assert_eq!(
            name(vk::ObjectType::BUFFER, 10).as_deref(),
            Some("particles")
        );
        assert_eq!(
            name(vk::ObjectType::BUFFER, 11).as_deref(),
            Some("uniforms")
        );
        assert_eq!(
            name(vk::ObjectType::IMAGE, 20).as_deref(),
            Some("shadow_atlas")
        );
    }

    #[test]
    fn same_sized_blocks_are_told_apart_by_fit() {
        // H200 batch 2: two 64 MiB host-visible blocks; a 12-byte buffer at +0x100 fits a 16-byte
        // allocation in one block and lies inside a 1 MiB one in the other.
        let mut index = AddressIndex::default();
        let now = Instant::now();
        index.apply(
            &BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::DEVICE_MEMORY,
                1,
                0xe88_0000,
                0x400_0000,
            ),
            now,
        );
        index.apply(
            &BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::BUFFER,
                10,
                0xe88_0100,
                12,
            ),
            now,
        );
        let blocks = vec![
            AllocatorBlock {
                size: 0x400_0000,
                allocations: vec![("particles".into(), 0, 0x10_0000)],
            },
            AllocatorBlock {
                size: 0x400_0000,
                allocations: vec![("(wgpu internal) Staging".into(), 0x100, 16)],
            },
        ];
        assert_eq!(learn_names(&mut index, &blocks), 1);
        assert_eq!(
            index
                .name_of(ObjectKey::new(vk::ObjectType::BUFFER, 10))
                .map(|n| n.to_string())
                .as_deref(),
            Some("(wgpu internal) Staging")
        );
    }

    #[test]
    fn ambiguous_blocks_name_nothing() {
        let mut index = AddressIndex::default();
        let now = Instant::now();
        index.apply(
            &BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::DEVICE_MEMORY,
                1,
                0x1000_0000,
                0x10000,
            ),
            now,
        );
        index.apply(
            &BindingRecord::new(
                BindingKind::Bind,
                vk::ObjectType::BUFFER,
                10,
                0x1000_0000,
                0x10000,
            ),
            now,
        );
        let blocks = vec![
            AllocatorBlock {
                size: 0x10000,
                allocations: vec![("a".into(), 0, 0x10000)],
            },
            AllocatorBlock {
                size: 0x10000,
                allocations: vec![("b".into(), 0, 0x10000)],
            },
        ];
        assert_eq!(learn_names(&mut index, &blocks), 0);
    }
}
