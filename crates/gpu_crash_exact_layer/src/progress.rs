//! Submissions and the answer: at each submit the layer readies the markers of the submitted
//! command buffers and logs their order; `vkGetGpuCrashExactProgressGCR` reads the markers back
//! (never waiting) and names the last marked command the GPU finished and the first it did not.

use std::sync::Arc;

use ash::vk::{self, Handle};
use vulkan_fault_ffi::exact::{marker, write_c_str, ExactCommand, ExactProgress, PROGRESS_VERSION};

use crate::device::{Device, Entry, Marks, State, Writer, SLOTS};
use crate::dispatch::device_of;
use crate::log::guard;

/// Readies the markers of `cbs` (submitted now, in this order) and logs their order.
fn submitted(dev: &Device, cbs: impl Iterator<Item = vk::CommandBuffer>) {
    let Some(marks) = &dev.marks else { return };
    let lists: Vec<Arc<[u64]>> = {
        let mut state = dev.state();
        let lists: Vec<Arc<[u64]>> = cbs
            .filter_map(|cb| state.recordings.get(&cb.as_raw()))
            .filter(|r| !r.sequences.is_empty())
            .map(|r| Arc::from(r.sequences.as_slice()))
            .collect();
        for list in &lists {
            state.submitted_marks += list.len() as u64;
            state.submitted.push_back(list.clone());
        }
        // Keep at most a ring's worth: older sequence numbers have lost their slot anyway.
        while state.submitted_marks > SLOTS {
            match state.submitted.pop_front() {
                Some(old) => state.submitted_marks -= old.len() as u64,
                None => break,
            }
        }
        lists
    };
    for &sequence in lists.iter().flat_map(|l| l.iter()) {
        // SAFETY: in bounds of the mapped SLOTS words. A command buffer submitted again must not
        // read as finished from its last run: its slots are cleared before the GPU can see the
        // submit (host writes before vkQueueSubmit are visible to the work it submits).
        unsafe {
            marks
                .words
                .add((sequence % SLOTS) as usize)
                .write_volatile(0)
        };
    }
}

pub(crate) unsafe extern "system" fn queue_submit(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    guard("vkQueueSubmit", vk::Result::ERROR_UNKNOWN, || {
        let Some(dev) = device_of(queue) else {
            return vk::Result::ERROR_UNKNOWN;
        };
        if !p_submits.is_null() && count > 0 {
            // SAFETY: the application's array of `count` submits, each with its command buffers.
            let submits = unsafe { std::slice::from_raw_parts(p_submits, count as usize) };
            submitted(
                &dev,
                submits.iter().flat_map(|s| {
                    if s.p_command_buffers.is_null() {
                        &[][..]
                    } else {
                        // SAFETY: as above.
                        unsafe {
                            std::slice::from_raw_parts(
                                s.p_command_buffers,
                                s.command_buffer_count as usize,
                            )
                        }
                    }
                    .iter()
                    .copied()
                }),
            );
        }
        match dev.fns.queue_submit {
            // SAFETY: forwarded unchanged.
            Some(next) => unsafe { next(queue, count, p_submits, fence) },
            None => vk::Result::ERROR_UNKNOWN,
        }
    })
}

unsafe fn queue_submit2_with(
    which: fn(&Device) -> Option<vk::PFN_vkQueueSubmit2>,
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    let Some(dev) = device_of(queue) else {
        return vk::Result::ERROR_UNKNOWN;
    };
    if !p_submits.is_null() && count > 0 {
        // SAFETY: the application's array of `count` submits.
        let submits = unsafe { std::slice::from_raw_parts(p_submits, count as usize) };
        submitted(
            &dev,
            submits.iter().flat_map(|s| {
                if s.p_command_buffer_infos.is_null() {
                    &[][..]
                } else {
                    // SAFETY: as above.
                    unsafe {
                        std::slice::from_raw_parts(
                            s.p_command_buffer_infos,
                            s.command_buffer_info_count as usize,
                        )
                    }
                }
                .iter()
                .map(|i| i.command_buffer)
            }),
        );
    }
    match which(&dev) {
        // SAFETY: forwarded unchanged.
        Some(next) => unsafe { next(queue, count, p_submits, fence) },
        None => vk::Result::ERROR_UNKNOWN,
    }
}

pub(crate) unsafe extern "system" fn queue_submit2(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    // SAFETY: forwarded from the application.
    guard("vkQueueSubmit2", vk::Result::ERROR_UNKNOWN, || unsafe {
        queue_submit2_with(
            |d| d.fns.queue_submit2.or(d.fns.queue_submit2_khr),
            queue,
            count,
            p_submits,
            fence,
        )
    })
}

pub(crate) unsafe extern "system" fn queue_submit2_khr(
    queue: vk::Queue,
    count: u32,
    p_submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    // SAFETY: forwarded from the application.
    guard("vkQueueSubmit2KHR", vk::Result::ERROR_UNKNOWN, || unsafe {
        queue_submit2_with(
            |d| d.fns.queue_submit2_khr.or(d.fns.queue_submit2),
            queue,
            count,
            p_submits,
            fence,
        )
    })
}

/// Whether the GPU wrote the marker of `sequence` (a plain read of mapped memory).
fn finished(marks: &Marks, sequence: u64) -> bool {
    // SAFETY: in bounds of the mapped SLOTS words; the GPU writes them (coherent memory).
    unsafe { marks.words.add((sequence % SLOTS) as usize).read_volatile() == sequence as u32 }
}

fn fill(out: &mut ExactCommand, entry: &Entry) {
    out.present = 1;
    out.kind = entry.kind;
    out.sequence = entry.sequence;
    out.command_buffer = entry.command_buffer;
    out.index_in_command_buffer = entry.index;
    out.same_name_ordinal = entry.ordinal;
    out.pipeline = entry.pipeline;
    out.sharing_marker = entry.sharing;
    write_c_str(
        &mut out.pipeline_name,
        entry.pipeline_name.as_deref().unwrap_or(""),
    );
    let labels: Vec<&str> = entry.labels.iter().map(|l| &**l).collect();
    write_c_str(&mut out.labels, &labels.join(" > "));
}

fn entry(state: &State, sequence: u64) -> Option<Entry> {
    state.entries[(sequence % SLOTS) as usize]
        .as_ref()
        .filter(|e| e.sequence == sequence)
        .cloned()
}

/// `vkGetGpuCrashExactProgressGCR` (see `vulkan_fault_ffi::exact`).
pub(crate) unsafe extern "system" fn get_exact_progress(
    device: vk::Device,
    p_progress: *mut ExactProgress,
) -> vk::Result {
    guard(
        "vkGetGpuCrashExactProgressGCR",
        vk::Result::ERROR_UNKNOWN,
        || {
            // SAFETY: the caller passes a writable ExactProgress (or null).
            let Some(out) = (unsafe { p_progress.as_mut() }) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            let Some(dev) = device_of(device) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            if out.version != PROGRESS_VERSION {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            }
            let mut answer = ExactProgress::new();
            let Some(marks) = &dev.marks else {
                *out = answer; // marker 0: nothing marked on this device
                return vk::Result::SUCCESS;
            };
            answer.marker = match marks.writer {
                Writer::Amd => marker::AMD_BUFFER_MARKER,
                Writer::UpdateBuffer => marker::UPDATE_BUFFER,
            };
            // The lists are copied out under the lock, the markers read without it.
            let (lists, oldest_kept, marked) = {
                let state = dev.state();
                let marked = state.next_sequence.saturating_sub(1);
                let lists: Vec<Arc<[u64]>> = state.submitted.iter().cloned().collect();
                (lists, state.next_sequence.saturating_sub(SLOTS), marked)
            };
            answer.marked_commands = marked;
            let mut last = None;
            let mut first = None;
            let mut unfinished = 0u64;
            for &sequence in lists.iter().flat_map(|l| l.iter()) {
                if sequence <= oldest_kept {
                    continue; // its slot was reused
                }
                if finished(marks, sequence) {
                    if first.is_none() {
                        last = Some(sequence);
                    }
                } else {
                    unfinished += 1;
                    first.get_or_insert(sequence);
                }
            }
            answer.unfinished_commands = unfinished;
            {
                let state = dev.state();
                if let Some(e) = last.and_then(|s| entry(&state, s)) {
                    fill(&mut answer.last_finished, &e);
                }
                if let Some(e) = first.and_then(|s| entry(&state, s)) {
                    fill(&mut answer.first_unfinished, &e);
                }
            }
            *out = answer;
            vk::Result::SUCCESS
        },
    )
}
