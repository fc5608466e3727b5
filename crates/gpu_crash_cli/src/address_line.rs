//! The address line: GPU address ranges around a fault, drawn to scale in a terminal.
//!
//! ```text
//!   0x100070000 ........................................................ 0x1000d0000
//!   [######################]                                             buffer "a" live
//!                           [......................]                     buffer "b" freed
//!                                        ^ 0x1000a0240 write
//! ```

use std::collections::BTreeMap;

use gpu_crash_core::report::{
    BindingEventEntry, BindingKind, CrashReport, FaultEntry, ObjectState,
};

/// Columns of the line.
const WIDTH: usize = 64;
/// Ranges drawn at most: the culprit candidates first, then the neighbours nearest the fault.
const MAX_RANGES: usize = 8;

/// One range on the line (identical ones, e.g. a buffer re-created at the same address every
/// frame, are one row with a count).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Range {
    base: u64,
    size: u64,
    label: String,
    state: ObjectState,
    count: usize,
}

/// Memory blocks hold every object in them: drawn, they would set the scale and hide the objects.
fn is_memory_block(object_type: &str) -> bool {
    object_type == "DEVICE_MEMORY"
}

/// The ranges of `report` that hold or neighbour `fault`: the resolver's candidates (best first),
/// then objects of the binding events the report kept, nearest first, in their last known state.
fn ranges(report: &CrashReport, fault: &FaultEntry) -> Vec<Range> {
    let mut ranges: Vec<Range> = Vec::new();
    let add = |ranges: &mut Vec<Range>, r: Range| match ranges
        .iter_mut()
        .find(|o| (o.base, o.size, &o.label, o.state) == (r.base, r.size, &r.label, r.state))
    {
        Some(same) => same.count += 1,
        None => ranges.push(r),
    };
    for c in fault
        .candidates
        .iter()
        .filter(|c| !is_memory_block(&c.object_type))
    {
        let r = Range {
            base: c.base,
            size: c.size,
            label: c.label.clone(),
            state: c.state,
            count: 1,
        };
        add(&mut ranges, r);
    }
    // The last event of each object says whether it is live (bind) or freed (unbind).
    let mut last: BTreeMap<(u64, u64, u64), &BindingEventEntry> = BTreeMap::new();
    let events = report
        .recent_events
        .iter()
        .chain(&fault.nearby_events)
        .filter(|e| e.size > 0 && !e.internal && !is_memory_block(&e.object_type));
    for e in events {
        let key = (e.base, e.size, e.handle);
        if last.get(&key).is_none_or(|old| old.sequence <= e.sequence) {
            last.insert(key, e);
        }
    }
    let distance = |base: u64, size: u64| {
        let end = base.saturating_add(size);
        if fault.address < base {
            base - fault.address
        } else if fault.address >= end {
            fault.address - end + 1
        } else {
            0
        }
    };
    let mut neighbours: Vec<&BindingEventEntry> = last
        .into_values()
        .filter(|e| {
            // Objects the candidates already name are not drawn twice.
            !fault
                .candidates
                .iter()
                .any(|c| c.handle == e.handle && c.base == e.base)
        })
        .collect();
    // Neighbours within twice the largest candidate (or the fault's precision) of the fault: the
    // scale stays that of the objects around it.
    let reach = 2 * ranges
        .iter()
        .map(|r| r.size)
        .chain([fault.precision])
        .max()
        .unwrap_or(0);
    neighbours.retain(|e| distance(e.base, e.size) <= reach);
    neighbours.sort_by_key(|e| (distance(e.base, e.size), e.base, e.size));
    let mut more = Vec::new();
    for e in neighbours {
        let r = Range {
            base: e.base,
            size: e.size,
            label: match &e.name {
                Some(name) => format!("{} {name:?}", e.object_type.to_ascii_lowercase()),
                None => format!("{} {:#x}", e.object_type, e.handle),
            },
            state: match e.kind {
                BindingKind::Bind => ObjectState::Live,
                BindingKind::Unbind => ObjectState::Freed,
            },
            count: 1,
        };
        add(&mut more, r);
    }
    let room = MAX_RANGES.saturating_sub(ranges.len().min(MAX_RANGES));
    ranges.truncate(MAX_RANGES);
    ranges.extend(more.into_iter().take(room));
    ranges
}

/// The address line for `fault`, or `None` when the report knows no object near it.
pub fn draw(report: &CrashReport, fault: &FaultEntry) -> Option<String> {
    let mut ranges = ranges(report, fault);
    if ranges.is_empty() {
        return None;
    }
    ranges.sort_by(|a, b| (a.base, a.size, &a.label).cmp(&(b.base, b.size, &b.label)));
    let lo = ranges
        .iter()
        .map(|r| r.base)
        .chain([fault.address])
        .min()
        .unwrap_or(fault.address);
    let hi = ranges
        .iter()
        .map(|r| r.base.saturating_add(r.size))
        .chain([fault.address.saturating_add(1)])
        .max()
        .unwrap_or(fault.address);
    let span = (hi - lo).max(1);
    // Column of an address, 0..WIDTH.
    let col = |a: u64| {
        (((a - lo) as u128 * WIDTH as u128) / span as u128).min(WIDTH as u128 - 1) as usize
    };
    let mut out = format!(
        "  {:<w$} {:#x}  (1 column = {})\n",
        format!("{lo:#x}"),
        hi,
        bytes(span.div_ceil(WIDTH as u64)),
        w = WIDTH - 1
    );
    for r in &ranges {
        let (start, end) = (
            col(r.base),
            col(r.base.saturating_add(r.size).saturating_sub(1)),
        );
        let fill = match r.state {
            ObjectState::Live => '#',
            ObjectState::Freed => '.',
        };
        let mut line = vec![' '; WIDTH];
        for c in line.iter_mut().take(end + 1).skip(start) {
            *c = fill;
        }
        line[start] = '[';
        line[end] = if end == start { '|' } else { ']' };
        let state = match r.state {
            ObjectState::Live => "live",
            ObjectState::Freed => "freed",
        };
        let times = if r.count > 1 {
            format!(" x{}", r.count)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {} {} {state}{times} [{:#x}, +{})\n",
            line.iter().collect::<String>(),
            r.label,
            r.base,
            bytes(r.size)
        ));
    }
    let mut marker = " ".repeat(col(fault.address));
    marker.push('^');
    out.push_str(&format!(
        "  {marker} {:#x} {}\n",
        fault.address,
        format!("{:?}", fault.access).to_ascii_lowercase()
    ));
    out.push_str("  # live   . freed   ^ fault address   xN: N objects at the same range\n");
    Some(out)
}

/// `256 B`, `64 KiB`, `1.5 MiB`.
pub fn bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    match n {
        n if n >= KIB * KIB * KIB && n % (KIB * KIB * KIB) == 0 => format!("{} GiB", n >> 30),
        n if n >= KIB * KIB => {
            format!("{:.1} MiB", n as f64 / (KIB * KIB) as f64).replace(".0 ", " ")
        }
        n if n >= KIB => format!("{:.1} KiB", n as f64 / KIB as f64).replace(".0 ", " "),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(bytes(256), "256 B");
        assert_eq!(bytes(64 * 1024), "64 KiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
    }
}
