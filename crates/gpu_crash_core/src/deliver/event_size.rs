//! Keeping a Sentry event under its size limit: how much of each list goes in (shrunk step by step
//! until the event fits) and cutting long strings.

use sentry::protocol::{Context, Event};
use serde_json::Value;

use crate::report::CrashReport;

/// How much of each list goes into the event; reduced until the event fits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    pub breadcrumbs: usize,
    pub faults: usize,
    pub per_fault_list: usize,
    pub notes: usize,
    pub max_string: usize,
}

impl Budget {
    /// The next smaller budget, or `None` when nothing is left to cut.
    pub(crate) fn shrink(self, report: &CrashReport) -> Option<Self> {
        let mut b = self;
        let longest_fault_list = report
            .faults
            .iter()
            .map(|f| f.nearby_events.len().max(f.candidates.len()))
            .max()
            .unwrap_or(0);
        let halve = |n: usize, floor: usize| (n / 2).max(floor);
        if b.per_fault_list.min(longest_fault_list) > 4 {
            b.per_fault_list = halve(b.per_fault_list.min(longest_fault_list), 4);
        } else if b.faults.min(report.faults.len()) > 4 {
            b.faults = halve(b.faults.min(report.faults.len()), 4);
        } else if b.breadcrumbs > 25 {
            b.breadcrumbs = halve(b.breadcrumbs, 25);
        } else if b.notes.min(report.notes.len()) > 5 {
            b.notes = halve(b.notes.min(report.notes.len()), 5);
        } else if b.max_string > 256 {
            b.max_string = if b.max_string == usize::MAX {
                16 * 1024
            } else {
                halve(b.max_string, 256)
            };
        } else if b.per_fault_list > 0 || b.faults > 1 || b.breadcrumbs > 0 || b.notes > 0 {
            b.per_fault_list = 0;
            b.faults = 1;
            b.breadcrumbs = 0;
            b.notes = 0;
        } else {
            return None;
        }
        Some(b)
    }
}

pub(crate) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

/// `s` cut to `max` characters, the cut marked with `…`.
pub(crate) fn truncated(s: &str, max: usize) -> String {
    if s.chars().count() > max {
        format!("{}…", truncate_chars(s, max))
    } else {
        s.to_owned()
    }
}

/// Cuts the free-form strings of `event` (extra, the `gpu_fault` and app contexts, breadcrumbs) to
/// `max` characters.
pub(crate) fn cut_strings(event: &mut Event<'static>, max: usize) {
    event
        .extra
        .values_mut()
        .for_each(|v| truncate_strings(v, max));
    for context in event.contexts.values_mut() {
        match context {
            Context::Other(map) => map.values_mut().for_each(|v| truncate_strings(v, max)),
            Context::App(app) => app
                .other
                .values_mut()
                .for_each(|v| truncate_strings(v, max)),
            _ => {}
        }
    }
    for crumb in &mut event.breadcrumbs.values {
        if let Some(m) = crumb.message.as_mut() {
            *m = truncated(m, max);
        }
        crumb
            .data
            .values_mut()
            .for_each(|v| truncate_strings(v, max));
    }
}

/// Cuts every string in `v` to `max` characters (marking the cut with `…`).
fn truncate_strings(v: &mut Value, max: usize) {
    match v {
        Value::String(s) if s.chars().count() > max => *s = truncated(s, max),
        Value::Array(a) => a.iter_mut().for_each(|x| truncate_strings(x, max)),
        Value::Object(o) => o.values_mut().for_each(|x| truncate_strings(x, max)),
        _ => {}
    }
}
