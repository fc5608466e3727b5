//! The Sentry envelope of a report: sentry-types' [`Envelope`] with the event, the report JSON, the
//! vendor binary and the report page (HTML) as attachments.
//!
//! Bugsink drops attachments, so the event alone must be enough to act on; Sentry keeps them.

use std::time::SystemTime;

use sentry::protocol::{Attachment, AttachmentType, ClientSdkInfo, EnvelopeHeaders, SessionUpdate};
use sentry::Envelope;

use super::privacy::redacted_report;
use super::sentry_event::sentry_event;
use super::settings::DeliverySettings;
use crate::report::{html_page, CrashReport};

/// Extension of envelope files.
pub const ENVELOPE_EXT: &str = "envelope";

/// File name of the report page attachment ([`html_page`]): one name for every event, so Sentry's
/// attachment list reads the same across issues.
pub const REPORT_PAGE_NAME: &str = "gpu-crash-report.html";

/// The envelope for `report`: headers (`event_id`, `dsn` when known but never its secret key,
/// `sent_at`, `sdk`), the event, the report JSON as an attachment, if given the vendor binary as an
/// attachment, and the report as a page (`gpu-crash-report.html`, `text/html`).
///
/// The report JSON is attached without what the privacy settings leave out; if it is larger than
/// [`DeliverySettings::max_attachment_bytes`], its lists are cut (oldest first) with a note. A vendor
/// binary or a page over that limit is left out with a note (the binary stays on disk next to the
/// report). The page is drawn from the redacted report, so it holds nothing the JSON leaves out.
pub fn build_envelope(
    report: &CrashReport,
    vendor_binary: Option<&[u8]>,
    settings: &DeliverySettings,
) -> Envelope {
    let event = sentry_event(report, settings);
    let headers = base_headers(settings).with_event_id(event.event_id);

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

    // The page is drawn from the same redacted report; bounded by design, but held to the same
    // limit as the JSON (left out with a note rather than cut: half a page draws nothing useful).
    let page = html_page(&attached);
    let page = if page.len() > settings.max_attachment_bytes {
        attached.notes.push(format!(
            "attachment: the report page ({} bytes) is over {} bytes and was not uploaded; \
             `gpu-crash show --html` draws it from the report",
            page.len(),
            settings.max_attachment_bytes
        ));
        None
    } else {
        Some(page)
    };

    let mut envelope = Envelope::new().with_headers(headers);
    envelope.add_item(event);
    envelope.add_item(Attachment {
        buffer: report_attachment(&attached, settings.max_attachment_bytes),
        filename: report.file_name(),
        content_type: Some("application/json".to_owned()),
        ty: Some(AttachmentType::Attachment),
    });
    if let Some(bytes) = vendor_binary {
        let mut buffer = bytes.to_vec();
        if !settings.include_application_names {
            // Its header names the application and engine too (issue 51 item 13).
            crate::vulkan::fault::blank_vendor_binary_names(&mut buffer);
        }
        envelope.add_item(Attachment {
            buffer,
            filename: report
                .vendor_binary
                .as_ref()
                .and_then(|v| v.file_name.clone())
                .unwrap_or_else(|| format!("gpu-crash-{}.vendor.bin", report.id)),
            content_type: Some("application/octet-stream".to_owned()),
            ty: Some(AttachmentType::Attachment),
        });
    }
    if let Some(page) = page {
        envelope.add_item(Attachment {
            buffer: page.into_bytes(),
            filename: REPORT_PAGE_NAME.to_owned(),
            content_type: Some("text/html".to_owned()),
            ty: Some(AttachmentType::Attachment),
        });
    }
    envelope
}

/// The envelope of a session update sent on its own (a run that exited, or that an earlier launch
/// left unended): headers without an event id, and the update.
pub fn session_envelope(update: &SessionUpdate<'static>, settings: &DeliverySettings) -> Envelope {
    let mut envelope = Envelope::new().with_headers(base_headers(settings));
    envelope.add_item(update.clone());
    envelope
}

/// Headers every envelope of ours has: `sent_at`, `sdk`, and the `dsn` when known but never its
/// secret key (envelopes are written to disk).
fn base_headers(settings: &DeliverySettings) -> EnvelopeHeaders {
    let headers = EnvelopeHeaders::new()
        .with_sent_at(SystemTime::now())
        .with_sdk(ClientSdkInfo {
            name: env!("CARGO_PKG_NAME").to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            integrations: Vec::new(),
            packages: Vec::new(),
        });
    match settings
        .resolve_dsn()
        .ok()
        .flatten()
        .and_then(|d| d.without_secret())
    {
        Some(dsn) => headers.with_dsn(dsn),
        None => headers,
    }
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
