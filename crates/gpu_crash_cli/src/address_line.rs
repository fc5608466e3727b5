//! The address line: GPU address ranges around a fault, drawn to scale in a terminal.
//!
//! ```text
//!   0x100070000 ........................................................ 0x1000d0000
//!   [######################]                                             buffer "a" live
//!                           [......................]                     buffer "b" freed
//!                                        ^ 0x1000a0240 write
//! ```

use gpu_crash_core::report::{CrashReport, FaultEntry, ObjectState, ReportView};

/// Columns of the line.
const WIDTH: usize = 64;
/// Ranges drawn at most: the culprit candidates first, then the neighbours nearest the fault.
const MAX_RANGES: usize = 8;

/// The address line for `fault`, or `None` when the report knows no object near it.
pub fn draw(report: &CrashReport, fault: &FaultEntry) -> Option<String> {
    // The candidates and the neighbours nearest the fault, as the page's map has them.
    let mut ranges = ReportView::new(report).near_fault(fault);
    ranges.truncate(MAX_RANGES);
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
