//! [`CrashReporter`]: the one handle an application holds. It starts the reporter's threads, hooks
//! the device's creation, is told of each frame and of a device loss, and answers what the reporter
//! has seen. Cheap to clone; every clone is the same reporter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::assets::{AssetUsers, SharedAssetMap, Stamp};
use crate::crash::{
    panic_hook, start_fault_watch, BreadcrumbRecorder, CrashHandling, CrashSettings,
    DeviceCallbacks, DeviceSessions, Watchdog, WrittenReports,
};
use crate::data_dir::{in_temp_fallback, report_dir};
use crate::deliver::Delivery;
use crate::frame::GpuFrame;
use crate::guard::guarded;
use crate::index::indexer::IndexerHandle;
use crate::index::{AddressIndex, IndexStats};
use crate::progress::GpuTimeline;
use crate::report::ApplicationInfo;
use crate::settings::{ReporterSettings, SettingsError};
use crate::vulkan::{ExtensionRequest, FaultFeatures, GpuCrashCapabilities, VulkanSetup};

/// The reporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The index's thread could not be started.
    #[error("could not start the reporter's indexer threads: {0}")]
    IndexerThread(#[source] std::io::Error),
}

/// What [`CrashReporter::indexed_assets`] returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexedAssets {
    /// Meshes whose vertex or index data lies in a mesh slab.
    pub meshes: usize,
    /// Image assets with a Vulkan image.
    pub images: usize,
    /// Heap bytes of the asset map, approximately.
    pub bytes: usize,
}

/// A device the reporter watches from [`CrashReporter::attach`] on.
#[derive(Clone)]
pub struct AttachedDevice {
    /// 1 for the application's first device, one more per device created after a loss.
    pub generation: u32,
    /// What the driver gave the reporter on this device.
    pub capabilities: GpuCrashCapabilities,
    /// The device's asset map, for the application to keep (Bevy: meshes and images).
    pub assets: SharedAssetMap,
    /// The device's pipeline ledger, for the application to keep: its pipelines and each frame's
    /// draw lists, so a report names what was running (see [`CrashReporter::gpu_frame`]).
    pub pipelines: crate::pipelines::PipelineLedger,
}

/// See the module documentation.
#[derive(Clone)]
pub struct CrashReporter {
    crash: CrashHandling,
    setup: Arc<VulkanSetup>,
    settings_errors: Arc<[SettingsError]>,
    watchdog: Arc<Mutex<Option<Watchdog>>>,
    /// The last (device, frame) whose completion marker was submitted.
    frame_ended: Arc<Mutex<(u32, u64)>>,
    /// Frames begun with [`Self::begin_frame`], the application's frame numbers.
    frames_begun: Arc<AtomicU64>,
}

impl CrashReporter {
    /// Starts the reporter: its indexer threads, the upload of what earlier runs left in the outbox
    /// (off this thread), and the panic hook that reports a loss a panic reveals. Settings it
    /// cannot use are brought into range ([`Self::settings_errors`]).
    pub fn start(settings: &ReporterSettings) -> Result<Self, StartError> {
        let (settings, settings_errors) = settings.validated();
        let indexer = IndexerHandle::spawn(settings.binding_ring_capacity, settings.index())
            .map(Arc::new)
            .map_err(StartError::IndexerThread)?;
        let application_name = settings.application_name.clone().unwrap_or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "gpu_app".into())
        });
        let application = ApplicationInfo {
            name: application_name.clone(),
            version: settings.application_version.clone(),
            engine_name: settings.engine_name.clone(),
            engine_version: settings.engine_version.clone(),
            executable: std::env::current_exe()
                .ok()
                .map(|p| p.display().to_string()),
            process_id: std::process::id(),
        };
        let report_dir = report_dir(settings.report_dir.as_deref(), &application_name);
        let mut delivery = settings.delivery.clone();
        if delivery.outbox_dir == crate::deliver::default_outbox_dir() {
            delivery.outbox_dir = report_dir.join(crate::deliver::DEFAULT_OUTBOX_NAME);
        }
        let report_dir = crate::data_dir::own_temp_fallback(report_dir);
        if in_temp_fallback(&report_dir) {
            tracing::warn!(
                "GPU crash reporter: no data folder is known for this user (no HOME, none in the \
                 password database): crash reports go to {}, under the temp folder (owner-only, but \
                 the system may clear it); set GPU_CRASH_REPORT_DIR or the report_dir setting",
                report_dir.display()
            );
        }
        let delivery = Delivery::start(
            delivery,
            report_dir.clone(),
            (&application.name, &application.version),
            settings.crash_loop_limit,
        );
        let setup = VulkanSetup::new(
            indexer.ring().clone(),
            ExtensionRequest {
                address_binding_report: settings.capture_address_bindings,
                device_fault: settings.device_fault,
                buffer_marker: settings.gpu_breadcrumbs,
                exact_layer: exact_mode_wanted(settings.exact_mode),
            },
            settings.binding_report_off_on.clone(),
        );
        let crash = CrashHandling::new(
            indexer,
            DeviceSessions::default(),
            CrashSettings {
                report_dir,
                application,
                chosen: settings,
            },
            delivery,
        );
        panic_hook::install(crash.clone());
        Ok(Self {
            crash,
            setup,
            settings_errors: settings_errors.into(),
            watchdog: Arc::default(),
            frame_ended: Arc::default(),
            frames_begun: Arc::default(),
        })
    }

    /// Settings the reporter could not use as given, and what it used instead.
    pub fn settings_errors(&self) -> &[SettingsError] {
        &self.settings_errors
    }

    /// For wgpu's instance creation callback (`wgpu::hal::vulkan::Instance::init_with_callback`;
    /// [`Self::create_instance`] calls it for you).
    pub fn on_create_instance(
        &self,
        args: &mut wgpu::hal::vulkan::CreateInstanceCallbackArgs<'_, '_, '_>,
    ) {
        self.setup.on_create_instance(args);
    }

    /// For wgpu's device creation callback (`wgpu::hal::vulkan::Adapter::open_with_callback`;
    /// [`Self::request_device`] calls it for you): enables what the driver offers and registers
    /// the binding messenger. Returns what it enabled.
    pub fn on_create_device(
        &self,
        args: &mut wgpu::hal::vulkan::CreateDeviceCallbackArgs<'_, '_, '_>,
        adapter: &wgpu::hal::vulkan::Adapter,
    ) -> FaultFeatures {
        self.setup.on_create_device(args, adapter)
    }

    /// Starts watching `device`, the one the device callback last ran for: its progress markers,
    /// its session (a device after a loss gets a fresh one), and the hang watchdog (once). `None`
    /// when the device was not created through the callbacks (another backend, or no Vulkan).
    pub fn attach(&self, device: &wgpu::Device) -> Option<AttachedDevice> {
        let mut outcome = self.setup.outcome();
        let messenger = outcome.messenger.take();
        let memory_report = outcome.memory_report.take();
        let mut capabilities = outcome.capabilities.clone()?;
        let generation = outcome.device_callback_runs;
        drop(outcome);
        let timeline = match crate::vulkan::create_marker_buffer(
            device,
            capabilities.buffer_marker,
            capabilities.debug_utils,
            self.setup.request().buffer_marker,
        ) {
            Ok(markers) => {
                capabilities.gpu_progress = true;
                capabilities.breadcrumbs = Some(markers.writer());
                let exact = crate::vulkan::exact::ExactLayer::of(device);
                if self.setup.request().exact_layer {
                    match &exact {
                        Some(_) => capabilities.exact_layer = true,
                        None if capabilities.exact_mode_missing().is_none() => capabilities
                            .missing
                            .push(crate::vulkan::exact::NOT_ON_DEVICE.into()),
                        None => {}
                    }
                }
                Some(GpuTimeline::new(Arc::new(markers)).with_exact(exact))
            }
            Err(err) => {
                let line = crate::vulkan::progress_markers_off(&err);
                tracing::warn!("GPU crash reporter: {line}");
                capabilities.missing.push(line);
                None
            }
        };
        let assets = SharedAssetMap::default();
        let session = self.crash.sessions.start(
            generation,
            DeviceCallbacks {
                messenger,
                memory_report,
            },
            device.clone(),
            capabilities.clone(),
            timeline,
            assets.clone(),
        );
        if session.generation > 1 {
            tracing::info!(
                "GPU crash reporter: watching device {} (after a device loss)",
                session.generation
            );
        }
        self.start_watchdog();
        // Where the driver reports faults it recovered from: a thread of this device reads them.
        start_fault_watch(&self.crash, &session);
        Some(AttachedDevice {
            generation,
            capabilities,
            assets,
            pipelines: session.pipelines.clone(),
        })
    }

    /// Starts the hang watchdog once (it follows whichever device is current).
    fn start_watchdog(&self) {
        let mut watchdog = self.watchdog.lock().unwrap_or_else(|p| p.into_inner());
        if watchdog.is_some() {
            return;
        }
        let hang_timeout = self.crash.settings.chosen.hang_timeout;
        let tick = (hang_timeout / 20).clamp(Duration::from_millis(10), Duration::from_millis(250));
        let handling = self.crash.clone();
        let indexer = self.crash.indexer.clone();
        match Watchdog::spawn(
            tick,
            hang_timeout,
            self.crash.sessions.clone(),
            move |session, stall| handling.hang(session, stall),
            move |generation, suspect| {
                if suspect {
                    indexer.hold_unbinds(generation);
                } else {
                    indexer.release_hold(generation);
                }
            },
        ) {
            Ok(started) => *watchdog = Some(started),
            Err(err) => {
                tracing::error!("GPU crash reporter: could not start the hang watchdog: {err}")
            }
        }
    }

    /// What the device callback enabled on the device it last ran for, before that device is
    /// attached (no progress markers yet); `None` when it never ran (another backend, or no GPU).
    pub fn created_device_capabilities(&self) -> Option<GpuCrashCapabilities> {
        self.setup.outcome().capabilities.clone()
    }

    /// What the driver gave the reporter on the current device, if one is attached.
    pub fn capabilities(&self) -> Option<GpuCrashCapabilities> {
        self.crash
            .sessions
            .current()
            .map(|s| s.capabilities.clone())
    }

    /// The current device's generation (see [`AttachedDevice::generation`]).
    pub fn device_generation(&self) -> Option<u32> {
        self.crash.sessions.current().map(|s| s.generation)
    }

    /// The application's frame `frame` begins (main loop): binding events are stamped with it.
    pub fn frame_tick(&self, frame: u64) {
        self.crash.indexer.frame_tick(frame);
    }

    /// Begins a frame of a wgpu application: its work recorded inside breadcrumbs of its labels
    /// and submitted with its completion marker by the returned [`GpuFrame`]. Does what
    /// [`Self::frame_tick`] (with the count of frames begun) and [`Self::begin_gpu_frame`] do.
    pub fn begin_frame<'a>(
        &'a self,
        device: &'a wgpu::Device,
        queue: &'a wgpu::Queue,
    ) -> GpuFrame<'a> {
        // Relaxed: a counter read by this call alone; the index orders its own events.
        let frame = self.frames_begun.fetch_add(1, Ordering::Relaxed) + 1;
        self.frame_tick(frame);
        self.begin_gpu_frame();
        GpuFrame::new(self, device, queue)
    }

    /// Whether `device` is the device the reporter watches (the current session's).
    pub(crate) fn watches(&self, device: &wgpu::Device) -> bool {
        self.crash
            .sessions
            .current()
            .is_some_and(|session| session.device == *device)
    }

    /// Whether the current device was lost (seen by wgpu's device-lost callback that
    /// [`Self::request_device`] sets, or told by [`Self::device_lost`]): its report is then on its
    /// way. A frame loop checks it after each submit and ends with [`Self::end_process`] (wgpu
    /// panics on most calls to a lost device, "Parent device is lost"; such a panic after a loss
    /// ends the process the same way, see [`ReporterSettings::end_process_after_loss`]).
    pub fn is_device_lost(&self) -> bool {
        self.crash
            .sessions
            .current()
            .is_some_and(|s| s.loss_known())
    }

    /// Right before the frame's first submit: the frame starts in the device's GPU ledger.
    pub fn begin_gpu_frame(&self) {
        self.crash.begin_gpu_frame();
    }

    /// The GPU frame the current device's ledger began last ([`CrashReporter::begin_gpu_frame`]):
    /// the frame number breadcrumbs and [`crate::PipelineLedger::record_frame`] use. `None` before
    /// the first, or without progress markers.
    pub fn gpu_frame(&self) -> Option<u64> {
        let session = self.crash.sessions.current()?;
        session.timeline.as_ref()?.current_frame()
    }

    /// Right before the frame's work is submitted: from here on it is pending on the GPU.
    pub fn frame_submitting(&self) {
        self.crash.mark_frame_submitting();
    }

    /// Right after the frame's work is submitted (before present): submits the frame's completion
    /// marker on `queue`, which the watchdog reads. Once per frame. A submit of its own: wgpu
    /// rejects a whole submit when one of its command buffers is invalid, and a marker dropped with
    /// the frame's work would leave the frame pending, a false hang.
    pub fn frame_submitted(&self, queue: &wgpu::Queue) {
        let mut ended = self.frame_ended.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(marker) = self.crash.frame_end_commands(&mut ended) {
            queue.submit([marker]);
        }
    }

    /// Submits the frame's work on `queue`, then its completion marker: what
    /// [`Self::frame_submitting`], `queue.submit(command_buffers)` and [`Self::frame_submitted`]
    /// do, in one call. The frame's last submit (work submitted later in the frame is covered by
    /// the next frame's marker). Returns the index of the frame's work's submit.
    pub fn submit_frame(
        &self,
        queue: &wgpu::Queue,
        command_buffers: impl IntoIterator<Item = wgpu::CommandBuffer>,
    ) -> wgpu::SubmissionIndex {
        self.frame_submitting();
        let index = queue.submit(command_buffers);
        self.frame_submitted(queue);
        index
    }

    /// Records GPU breadcrumbs on the current device (see [`BreadcrumbRecorder`]).
    pub fn breadcrumbs(&self) -> BreadcrumbRecorder {
        BreadcrumbRecorder::new(self.crash.sessions.clone())
    }

    /// The current device was lost (wgpu's device-lost callback, or the application's own error
    /// handling): keeps the index on it and builds the report on a thread of its own, then returns
    /// at once. One report per device; a loss after the device's hang report joins that report.
    pub fn device_lost(&self, wgpu_description: &str) {
        if let Some(session) = self.crash.sessions.current() {
            session.tell_loss();
        }
        crate::guard::guarded("device loss", || {
            self.crash.device_lost(wgpu_description, None)
        });
    }

    /// Waits (bounded) for this run's loss reports and their uploads.
    pub fn wait_for_reports(&self) {
        guarded("wait for reports", || self.crash.wait_for_reports());
    }

    /// The application is exiting: lets the crash path's threads finish (bounded) and sends the
    /// held-back crash-loop reports. The panic hook no longer reports for this reporter. The
    /// watchdog goes on until the reporter is dropped: a GPU hung while the application tears down
    /// (its device's drop waits for the GPU) is still reported.
    pub fn at_exit(&self) {
        // Often called from a `Drop` (the plugin's, an app's): a panic there while unwinding would
        // abort the process, so none leaves.
        guarded("exit", || {
            panic_hook::forget();
            self.crash.at_exit();
        });
    }

    /// The application has decided to quit and everything still runs (Bevy: its `AppExit` is
    /// seen): the session ends and its update, with any held-back crash-loop report, goes out
    /// now (bounded by the upload timeout), before the application tears anything down. The later
    /// [`Self::at_exit`] then has nothing to send: an exit handler that waits on an upload keeps
    /// the process in its teardown while the engine's own threads (pipeline compilation) are
    /// still inside the driver, the race that crashed clean exits. The panic hook stays.
    pub fn app_exiting(&self) {
        guarded("exit", || self.crash.at_exit());
    }

    /// Starts a release-health session (Sentry's crash-free sessions), ending the running one
    /// `exited` first: for a game whose session is not its run (one per match, per level). It ends
    /// as the run's own does: [`Self::end_session`] or a clean exit (`exited`), a GPU crash report
    /// (`crashed`), or a kill (`abnormal`, sent at the next launch). Returns false when sessions
    /// are off ([`crate::DeliverySettings::session_tracking`], no DSN, no release).
    pub fn start_session(&self) -> bool {
        self.crash.delivery.start_session()
    }

    /// Ends the running release-health session `exited` and queues its update, sent off this
    /// thread (or, offline, at the next upload). Returns false when none runs.
    pub fn end_session(&self) -> bool {
        self.crash.delivery.end_session()
    }

    /// The application is done with its device: the reporter lets go of its clone (and of the
    /// device's markers and messenger), so the device can be destroyed. wgpu's device-lost
    /// callback set by [`Self::request_device`] holds the reporter, so a device made that way
    /// lives until this is called.
    pub fn detach(&self) {
        self.crash.sessions.end();
    }

    /// Whether to end the process once the loss report is done when the application quits on a
    /// loss (see [`ReporterSettings::end_process_after_loss`]).
    pub fn end_process_after_loss(&self) -> bool {
        self.crash.settings.chosen.end_process_after_loss
    }

    /// Ends the process now with `code`, without exit handlers (see
    /// [`ReporterSettings::end_process_after_loss`]), after [`Self::at_exit`]. Its last lines on
    /// stderr are the reporter's: each report of this run, its verdict, and what to run next.
    pub fn end_process(&self, code: i32) -> ! {
        self.at_exit();
        guarded("closing lines", || self.crash.print_closing_lines());
        crate::crash::exit_now(code)
    }

    /// What a player's log (or a QA run) should end with: for each report this run wrote, its
    /// verdict lines, where it is, and the command that shows it.
    pub fn closing_lines(&self) -> Vec<String> {
        self.crash.closing_lines()
    }

    /// The reports this run wrote.
    pub fn written_reports(&self) -> &WrittenReports {
        &self.crash.reports
    }

    /// Who uses each mesh, kept by the application (Bevy: observers on `Mesh3d`).
    pub fn asset_users(&self) -> &AssetUsers {
        &self.crash.asset_users
    }

    /// When an asset change happens now, in the clocks the asset map keeps.
    pub fn asset_stamp(&self) -> Stamp {
        Stamp {
            sequence: self.crash.indexer.ring().claimed(),
            frame: self.crash.indexer.ring().current_frame(),
            at: std::time::Instant::now(),
        }
    }

    /// Command buffers of the reporter's own (breadcrumb markers and each frame's completion
    /// marker) recorded on the current device so far: what breadcrumbs cost is counted in these.
    pub fn marker_command_buffers(&self) -> u64 {
        self.crash
            .sessions
            .current()
            .and_then(|session| Some(session.timeline.as_ref()?.marker_command_buffers()))
            .unwrap_or(0)
    }

    /// Folds every binding event published so far and returns the locked index.
    pub(crate) fn index(&self) -> MutexGuard<'_, AddressIndex> {
        self.crash.indexer.flush()
    }

    /// What the address index has seen so far (binding events, binds, unbinds, overflows).
    ///
    /// Folds every event published first, as a crash's report does: it waits while the
    /// lowest-priority fold thread holds the index, which on a machine kept busy by other programs
    /// measured up to 284 ms (BENCHMARKS.md, 2026-12-06 night). Keep it off a frame's critical path.
    pub fn index_stats(&self) -> IndexStats {
        self.index().stats().clone()
    }

    /// GPU address ranges live now and freed ranges remembered: `(live, freed)`. Waits as
    /// [`Self::index_stats`] does.
    pub fn indexed_ranges(&self) -> (usize, usize) {
        let index = self.index();
        (index.live_len(), index.freed_len())
    }

    /// Assets the reporter can name on the current device.
    pub fn indexed_assets(&self) -> IndexedAssets {
        let Some(session) = self.crash.sessions.current() else {
            return IndexedAssets::default();
        };
        let map = session.assets.lock();
        IndexedAssets {
            meshes: map.mesh_count(),
            images: map.image_count(),
            bytes: map.memory(),
        }
    }

    /// Binding events the ring had to drop because it was full (never silently lost).
    pub fn binding_events_dropped(&self) -> u64 {
        self.crash.indexer.ring().dropped()
    }

    /// Panics in the reporter's own crash path caught in this process (each logged, none reached
    /// the application).
    pub fn crash_path_panics(&self) -> u64 {
        crate::guard::caught_panics()
    }

    /// The current device's binding messenger handle, if one is registered.
    pub fn binding_messenger(&self) -> Option<u64> {
        use ash::vk::Handle;
        let session = self.crash.sessions.current()?;
        Some(session.messenger.as_ref()?.handle().as_raw())
    }
}

/// Whether exact mode is asked for: `GPU_CRASH_EXACT` (`1`/`on`/`true` or `0`/`off`/`false`, for
/// QA) over the setting.
fn exact_mode_wanted(setting: bool) -> bool {
    match std::env::var("GPU_CRASH_EXACT")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        Some("1" | "on" | "true") => true,
        Some("0" | "off" | "false") => false,
        _ => setting,
    }
}
