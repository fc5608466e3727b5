//! One frame of a wgpu application's GPU work, in wgpu's style: the work recorded in labelled
//! encoders, each inside a GPU breadcrumb of the same label, and submitted, followed by the
//! frame's completion marker. What the raw calls ([`CrashReporter::begin_gpu_frame`],
//! the breadcrumbs' command buffers, [`CrashReporter::submit_frame`]) ask an application to place in
//! the right order, a [`GpuFrame`] places itself.

use std::collections::HashSet;
use std::sync::Mutex;

use wgpu::{CommandBuffer, CommandEncoder, CommandEncoderDescriptor};

use crate::crash::{BreadcrumbRecorder, Mark};
use crate::CrashReporter;

/// Distinct breadcrumb labels kept; later new labels share [`LABELS_OVERFLOWED`]. The ledger keeps
/// labels as `&'static str` (a frame's breadcrumbs are copied into reports lock-free), so each
/// distinct label is leaked once: an application naming its passes uses a handful.
const MAX_LABELS: usize = 1024;
/// The label of breadcrumbs beyond [`MAX_LABELS`] distinct ones.
const LABELS_OVERFLOWED: &str = "(a breadcrumb label beyond the first 1024 distinct ones)";
/// The breadcrumb of work labelled with an empty string.
const UNLABELLED: &str = "(unlabelled work)";

/// The labels given so far, each leaked once.
static LABELS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

/// `label` as the `&'static str` the ledger keeps: the one leaked copy of each distinct label.
fn static_label(label: &str) -> &'static str {
    let mut labels = LABELS.lock().unwrap_or_else(|p| p.into_inner());
    kept_label(labels.get_or_insert_with(HashSet::new), label)
}

/// `label`'s copy in `labels`, leaked and added there when new and there is room.
fn kept_label(labels: &mut HashSet<&'static str>, label: &str) -> &'static str {
    if let Some(&known) = labels.get(label) {
        return known;
    }
    if labels.len() >= MAX_LABELS {
        return LABELS_OVERFLOWED;
    }
    let leaked: &'static str = Box::leak(label.to_owned().into_boxed_str());
    labels.insert(leaked);
    leaked
}

/// A frame's GPU work, begun with [`CrashReporter::begin_frame`] and handed to the GPU with
/// [`GpuFrame::submit`].
///
/// ```no_run
/// # fn frame(reporter: &gpu_crash_core::CrashReporter, device: &wgpu::Device, queue: &wgpu::Queue,
/// #          pipeline: &wgpu::ComputePipeline, bind_group: &wgpu::BindGroup) {
/// let mut frame = reporter.begin_frame(device, queue);
/// frame.encode("particle simulation", |encoder| {
///     let mut pass = encoder.begin_compute_pass(&Default::default());
///     pass.set_pipeline(pipeline);
///     pass.set_bind_group(0, bind_group, &[]);
///     pass.dispatch_workgroups(64, 1, 1);
/// });
/// frame.submit();
/// # }
/// ```
///
/// A frame is submitted once it is begun: one dropped unsubmitted (a `continue` on a lost surface)
/// stays in the device's ledger as a frame whose work never came, and a later hang report may
/// place the stop there.
#[must_use = "the frame's work reaches the GPU only through `GpuFrame::submit`"]
pub struct GpuFrame<'a> {
    reporter: &'a CrashReporter,
    device: &'a wgpu::Device,
    queue: &'a wgpu::Queue,
    breadcrumbs: BreadcrumbRecorder,
    buffers: Vec<CommandBuffer>,
    /// Whether `device` is the one the reporter watches: breadcrumbs and the completion marker
    /// are recorded on that device's marker memory, and go into no other device's submits.
    watched: bool,
}

impl<'a> GpuFrame<'a> {
    pub(crate) fn new(
        reporter: &'a CrashReporter,
        device: &'a wgpu::Device,
        queue: &'a wgpu::Queue,
    ) -> Self {
        Self {
            reporter,
            device,
            queue,
            breadcrumbs: reporter.breadcrumbs(),
            buffers: Vec::new(),
            watched: reporter.watches(device),
        }
    }

    /// Records `label`'s work: `record` fills a fresh command encoder of that label, and a report
    /// whose GPU stopped inside this work says "during `label`" (on GPUs with fine breadcrumbs:
    /// `VK_AMD_buffer_marker` on AMD, RADV and NVIDIA, or a CPU device; elsewhere the frame is the
    /// finest place told). Returns what `record` returns.
    pub fn encode<R>(
        &mut self,
        label: impl AsRef<str>,
        record: impl FnOnce(&mut CommandEncoder) -> R,
    ) -> R {
        let label = label.as_ref();
        let crumb = self.mark(label, Mark::Begin);
        // The application's own label on its encoder (validation messages, captures), whatever
        // the breadcrumb keeps of it.
        let mut encoder = self
            .device
            .create_command_encoder(&CommandEncoderDescriptor { label: Some(label) });
        let result = record(&mut encoder);
        self.buffers.push(encoder.finish());
        self.end_mark(crumb);
        result
    }

    /// Adds command buffers the application finished itself, in order after what was added before.
    /// Inside no breadcrumb of their own: a hang there is placed by the frame's other breadcrumbs.
    pub fn add(&mut self, command_buffers: impl IntoIterator<Item = CommandBuffer>) {
        self.buffers.extend(command_buffers);
    }

    /// Adds a command buffer the application finished itself inside a breadcrumb `label`, as
    /// [`Self::encode`] does for its own encoder.
    pub fn add_labelled(&mut self, label: impl AsRef<str>, command_buffer: CommandBuffer) {
        let crumb = self.mark(label.as_ref(), Mark::Begin);
        self.buffers.push(command_buffer);
        self.end_mark(crumb);
    }

    /// Submits the frame's work, then its completion marker (a submit of its own: see
    /// [`CrashReporter::frame_submitted`]), and returns the index of the work's submit. On a lost
    /// device no marker is submitted, and [`CrashReporter::is_device_lost`] says so.
    pub fn submit(self) -> wgpu::SubmissionIndex {
        if self.watched {
            self.reporter.submit_frame(self.queue, self.buffers)
        } else {
            self.queue.submit(self.buffers)
        }
    }

    /// Records the begin mark of `label`; returns the breadcrumb's kept label for its end mark.
    fn mark(&mut self, label: &str, mark: Mark) -> Option<&'static str> {
        if !self.watched {
            return None;
        }
        let label = static_label(if label.is_empty() { UNLABELLED } else { label });
        self.buffers.extend(
            self.breadcrumbs
                .command_buffer(self.device, label, None, mark, true),
        );
        Some(label)
    }

    fn end_mark(&mut self, crumb: Option<&'static str>) {
        if let Some(label) = crumb {
            self.buffers.extend(self.breadcrumbs.command_buffer(
                self.device,
                label,
                None,
                Mark::End,
                true,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_kept_once_and_read_back_as_given() {
        let mut labels = HashSet::new();
        let first = kept_label(&mut labels, &format!("shadow pass {}", 7));
        let again = kept_label(&mut labels, "shadow pass 7");
        assert_eq!(first, "shadow pass 7");
        assert!(std::ptr::eq(first, again), "one copy per distinct label");
        assert_eq!(static_label("main pass"), "main pass");
    }

    #[test]
    fn labels_beyond_the_limit_share_one_name() {
        let mut labels = HashSet::new();
        for i in 0..MAX_LABELS + 10 {
            kept_label(&mut labels, &format!("per-chunk pass {i}"));
        }
        assert_eq!(
            kept_label(&mut labels, "one label too many"),
            LABELS_OVERFLOWED
        );
        assert_eq!(
            labels.len(),
            MAX_LABELS,
            "no more labels leaked than the limit"
        );
        assert_eq!(
            kept_label(&mut labels, "per-chunk pass 3"),
            "per-chunk pass 3"
        );
    }
}
