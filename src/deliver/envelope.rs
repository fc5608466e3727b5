//! Sentry envelopes: `header \n item-header \n payload \n ...`
//! (<https://develop.sentry.dev/sdk/data-model/envelopes/>).
//!
//! The envelope holds the event, the report JSON and the vendor binary (as attachments). Bugsink
//! drops attachments, so the event alone must be enough to act on; Sentry keeps them.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{redacted_report, sentry_event, DeliverySettings};
use crate::report::CrashReport;

/// The envelope bytes for `report`: header (`event_id`, `dsn` when known, `sent_at`, `sdk`), the
/// event, the report JSON as an attachment and, if given, the vendor binary as an attachment.
///
/// The report JSON is attached without what the privacy settings leave out; if it is larger than
/// [`DeliverySettings::max_attachment_bytes`], its `recent_events` are cut (oldest first) with a
/// note. A vendor binary over that limit is left out with a note (it stays on disk next to the
/// report).
pub fn build_envelope(
    report: &CrashReport,
    vendor_binary: Option<&[u8]>,
    settings: &DeliverySettings,
) -> Vec<u8> {
    let event = sentry_event(report, settings);
    let event_id = event
        .get("event_id")
        .and_then(Value::as_str)
        .unwrap_or(&report.id)
        .to_owned();
    let mut header = json!({
        "event_id": event_id,
        "sent_at": rfc3339(SystemTime::now()),
        "sdk": {"name": env!("CARGO_PKG_NAME"), "version": env!("CARGO_PKG_VERSION")},
    });
    if let Ok(Some(dsn)) = settings.resolve_dsn() {
        header["dsn"] = json!(dsn.to_string());
    }

    let mut attached = redacted_report(report, settings);
    let vendor_binary = match vendor_binary {
        Some(bytes) if bytes.len() > settings.max_attachment_bytes => {
            attached.notes.push(format!(
                "attachment: the vendor binary ({} bytes) is over {} bytes and was not uploaded; \
                 it stays on disk next to the report",
                bytes.len(),
                settings.max_attachment_bytes
            ));
            None
        }
        other => other,
    };
    let report_json = report_attachment(&attached, settings.max_attachment_bytes);

    let mut out = Vec::new();
    push_line(&mut out, &serde_json::to_vec(&header).unwrap_or_default());
    let event_bytes = serde_json::to_vec(&event).unwrap_or_default();
    push_item(
        &mut out,
        json!({"type": "event", "content_type": "application/json", "length": event_bytes.len()}),
        &event_bytes,
    );
    push_item(
        &mut out,
        json!({
            "type": "attachment",
            "length": report_json.len(),
            "filename": report.file_name(),
            "content_type": "application/json",
            "attachment_type": "event.attachment",
        }),
        &report_json,
    );
    if let Some(bytes) = vendor_binary {
        let filename = report
            .vendor_binary
            .as_ref()
            .and_then(|v| v.file_name.clone())
            .unwrap_or_else(|| format!("gpu-crash-{}.vendor.bin", report.id));
        push_item(
            &mut out,
            json!({
                "type": "attachment",
                "length": bytes.len(),
                "filename": filename,
                "content_type": "application/octet-stream",
                "attachment_type": "event.attachment",
            }),
            bytes,
        );
    }
    out
}

/// The report JSON for the attachment, cut to `max` bytes by shortening every list by the same
/// ratio (oldest binding events and frames go first), with a note saying so.
fn report_attachment(report: &CrashReport, max: usize) -> Vec<u8> {
    let full = serde_json::to_vec(report).unwrap_or_default();
    if full.len() <= max {
        return full;
    }
    let mut ratio = max as f64 / full.len() as f64 * 0.9;
    loop {
        let cut = shortened(report, ratio, max);
        let bytes = serde_json::to_vec(&cut).unwrap_or_default();
        if bytes.len() <= max || ratio < 1e-9 {
            return bytes;
        }
        ratio /= 2.0;
    }
}

/// `report` with each list cut to `ratio` of its length.
fn shortened(report: &CrashReport, ratio: f64, max: usize) -> CrashReport {
    let keep = |len: usize| ((len as f64 * ratio) as usize).min(len);
    let mut r = report.clone();
    let before = r.recent_events.len();
    r.recent_events.drain(..before - keep(before));
    for f in &mut r.faults {
        let n = f.nearby_events.len();
        f.nearby_events.drain(..n - keep(n));
        let n = f.candidates.len();
        f.candidates.truncate(keep(n).max(1));
    }
    let n = r.frames.len();
    r.frames.drain(..n - keep(n));
    if let Some(h) = r.hang.as_mut() {
        let n = h.suspects.len();
        h.suspects.truncate(keep(n).max(1));
    }
    let n = r.notes.len();
    r.notes.truncate(keep(n));
    r.notes.push(format!(
        "attachment: every list cut to {:.4}% of its length to stay under {max} bytes \
         (recent_events: the last {} of {before}); the report on disk is complete",
        ratio * 100.0,
        r.recent_events.len()
    ));
    r
}

fn push_line(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes);
    out.push(b'\n');
}

fn push_item(out: &mut Vec<u8>, header: Value, payload: &[u8]) {
    push_line(out, &serde_json::to_vec(&header).unwrap_or_default());
    push_line(out, payload);
}

/// The envelope header (first line) as JSON, if it parses.
pub fn envelope_header(envelope: &[u8]) -> Option<Value> {
    let end = envelope
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(envelope.len());
    serde_json::from_slice(&envelope[..end]).ok()
}

/// The envelope with its header's `sent_at` set to `now` (done right before each send, so Sentry
/// can correct clock drift) and `dsn` set to the one it is sent to.
pub fn restamp(envelope: &[u8], now: SystemTime, dsn: Option<&str>) -> Vec<u8> {
    let end = envelope
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(envelope.len());
    let Some(mut header) = envelope_header(envelope) else {
        return envelope.to_vec();
    };
    header["sent_at"] = json!(rfc3339(now));
    if let Some(dsn) = dsn {
        header["dsn"] = json!(dsn);
    }
    let mut out = serde_json::to_vec(&header).unwrap_or_default();
    out.extend_from_slice(&envelope[end..]);
    out
}

/// The items of an envelope as (item header, payload) pairs; `None` if it is malformed.
pub fn parse_items(envelope: &[u8]) -> Option<Vec<(Value, &[u8])>> {
    let mut rest = &envelope[envelope.iter().position(|&b| b == b'\n')? + 1..];
    let mut items = Vec::new();
    while !rest.is_empty() {
        let nl = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        if nl == 0 {
            rest = &rest[1..];
            continue;
        }
        let header: Value = serde_json::from_slice(&rest[..nl]).ok()?;
        rest = rest.get(nl + 1..).unwrap_or_default();
        let len = match header.get("length").and_then(Value::as_u64) {
            Some(len) => usize::try_from(len).ok()?,
            None => rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len()),
        };
        let payload = rest.get(..len)?;
        items.push((header, payload));
        rest = rest.get(len..).unwrap_or_default();
        if rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
    }
    Some(items)
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-12-02T11:58:27.123Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, sod) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_matches_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_212_707_123);
        assert_eq!(rfc3339(t), "2026-12-02T11:58:27.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }
}
