//! Bevy wiring only: settings in, callbacks registered, resources out, one system per frame.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bevy::prelude::*;
use bevy::render::error_handler::{ErrorType, RenderError, RenderErrorHandler, RenderErrorPolicy};
use bevy::render::renderer::raw_vulkan_init::RawVulkanInitSettings;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::{Render, RenderApp, RenderPlugin, RenderStartup, RenderSystems};

use crate::deliver::{DeliverySettings, Outbox};
use crate::index::{allocator_names, IndexSettings, IndexerHandle};
use crate::postmortem::{self, CrashContext, GpuProgress, OnHang, Watchdog};
use crate::report::{ApplicationInfo, CrashKind};
use crate::vulkan::{BindingMessenger, ExtensionRequest, GpuCrashCapabilities, VulkanSetup};
use crate::GpuCrashReporter;

/// Turns GPU crashes into reports that name the guilty GPU object.
///
/// Add it **before** `DefaultPlugins` (it must register its Vulkan callbacks before `RenderPlugin`
/// creates the device):
///
/// ```no_run
/// use bevy::prelude::*;
/// use bevy_gpu_crash_reporter::GpuCrashReporterPlugin;
///
/// App::new()
///     .add_plugins(GpuCrashReporterPlugin::default())
///     .add_plugins(DefaultPlugins)
///     .run();
/// ```
#[derive(Clone, Debug)]
pub struct GpuCrashReporterPlugin {
    /// Enable `VK_EXT_device_address_binding_report` where offered and record every GPU address
    /// range that is bound and unbound, so a faulting address can be named. Default: `true`.
    pub capture_address_bindings: bool,
    /// Enable `VK_EXT_device_fault` / `VK_KHR_device_fault` (+ `VK_KHR_shader_abort`) where offered,
    /// so a device loss comes with fault addresses and vendor data. Default: `true`.
    pub device_fault: bool,
    /// Binding events the lock-free ring holds between two drains (rounded up to a power of two;
    /// 128 bytes each). Events beyond it are counted as dropped. Default: 32,768 (4 MiB).
    pub binding_ring_capacity: usize,
    /// Live GPU address ranges indexed; binds beyond it are counted, not stored. Default: 1,048,576.
    pub max_live_bindings: usize,
    /// Recently freed ranges kept for use-after-free verdicts (D3D12 DRED keeps 65,536). Default: 65,536.
    pub max_freed_bindings: usize,
    /// Most recent binding events kept for breadcrumbs. Default: 4,096.
    pub max_recent_events: usize,
    /// Where crash reports are written. The environment variable `GPU_CRASH_REPORT_DIR` overrides it;
    /// `None` means a per-application data directory (e.g. `~/.local/share/<app>/gpu-crash-reports`).
    pub report_dir: Option<PathBuf>,
    /// How long submitted GPU work may stay incomplete, with the device not reported lost, before the
    /// watchdog writes a `gpu_hang` report. Default: 5 s.
    pub hang_timeout: Duration,
    /// What to do once a hang report is on disk. Default: [`OnHang::KeepWaiting`].
    pub on_hang: OnHang,
    /// Application name for reports and the default report directory; `None`: the executable's name.
    pub application_name: Option<String>,
    /// Application version for reports and the Sentry release (`name@version`). Default: empty.
    pub application_version: String,
    /// Sentry delivery: DSN (or the `SENTRY_DSN` environment variable), release, environment,
    /// player consent, privacy switches, upload timeout, outbox bounds. Without a DSN, reports stay
    /// on disk and the log says where. The outbox defaults to `<report dir>/outbox`.
    pub delivery: DeliverySettings,
}

impl Default for GpuCrashReporterPlugin {
    fn default() -> Self {
        let index = IndexSettings::default();
        Self {
            capture_address_bindings: true,
            device_fault: true,
            binding_ring_capacity: 32_768,
            max_live_bindings: index.max_live_bindings,
            max_freed_bindings: index.max_freed_bindings,
            max_recent_events: index.max_recent_events,
            report_dir: None,
            hang_timeout: Duration::from_secs(5),
            on_hang: OnHang::KeepWaiting,
            application_name: None,
            application_version: String::new(),
            delivery: DeliverySettings::default(),
        }
    }
}

/// Reports written during this run, newest last (main world).
#[derive(Resource, Clone, Default, Debug)]
pub struct GpuCrashReports {
    /// Paths of the report JSON files.
    pub paths: Arc<Mutex<Vec<PathBuf>>>,
}

impl GpuCrashReports {
    /// A snapshot of the paths.
    pub fn written(&self) -> Vec<PathBuf> {
        self.paths.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Postmortem state shared by the error handler, the render world and the watchdog.
#[derive(Resource, Clone)]
struct Postmortem {
    progress: Arc<GpuProgress>,
    report_dir: PathBuf,
    application: ApplicationInfo,
    hang_timeout: Duration,
    on_hang: OnHang,
    reports: GpuCrashReports,
    /// Where reports go after they are on disk.
    outbox: Outbox,
    /// Ring position just before the latest frame's submit: a device loss found by that submit is
    /// followed by wgpu's teardown, which the report must not mistake for frees.
    pre_submit_position: Arc<std::sync::atomic::AtomicU64>,
}

/// Owns the hang watchdog in the main world: dropping the app stops the thread and releases its
/// render-device clone, so the device and instance are destroyed in order.
#[derive(Resource)]
struct WatchdogGuard(#[allow(dead_code)] Watchdog);

/// The handler that was installed before ours; it decides the app's policy after we report.
#[derive(Resource)]
struct PreviousRenderErrorHandler(
    for<'a> fn(&'a RenderError, &'a mut World, &'a mut World) -> RenderErrorPolicy,
);

/// The shared Vulkan setup, kept in the main world so `finish` and the render world can reach it.
#[derive(Resource, Clone)]
struct VulkanSetupHandle(Arc<VulkanSetup>);

/// Owns the binding messenger in the render world, next to a clone of the render device: the device
/// keeps the Vulkan instance alive, so the messenger is always destroyed before its instance.
#[derive(Resource)]
pub struct BindingMessengerGuard {
    messenger: BindingMessenger,
    _device: RenderDevice,
}

impl BindingMessengerGuard {
    /// The registered messenger.
    pub fn messenger(&self) -> &BindingMessenger {
        &self.messenger
    }
}

impl Plugin for GpuCrashReporterPlugin {
    fn build(&self, app: &mut App) {
        let indexer = match IndexerHandle::spawn(
            self.binding_ring_capacity,
            IndexSettings {
                max_live_bindings: self.max_live_bindings,
                max_freed_bindings: self.max_freed_bindings,
                max_recent_events: self.max_recent_events,
            },
        ) {
            Ok(indexer) => Arc::new(indexer),
            Err(err) => {
                error!("GPU crash reporter disabled: could not start its indexer thread: {err}");
                return;
            }
        };
        let mut reporter = GpuCrashReporter::new(indexer.clone());
        if app.is_plugin_added::<RenderPlugin>() {
            let message = "GpuCrashReporterPlugin was added after RenderPlugin, so it cannot enable \
                 the fault extensions on the render device. Add it before DefaultPlugins: \
                 `App::new().add_plugins(GpuCrashReporterPlugin::default()).add_plugins(DefaultPlugins)`";
            error!("{message}");
            reporter.setup_error = Some(message.to_owned());
        } else {
            let setup = VulkanSetup::new(
                indexer.ring().clone(),
                ExtensionRequest {
                    address_binding_report: self.capture_address_bindings,
                    device_fault: self.device_fault,
                },
            );
            setup.install(
                &mut app
                    .world_mut()
                    .get_resource_or_init::<RawVulkanInitSettings>(),
            );
            app.insert_resource(VulkanSetupHandle(setup));
        }
        let application_name = self.application_name.clone().unwrap_or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "bevy_app".into())
        });
        let application = ApplicationInfo {
            name: application_name.clone(),
            version: self.application_version.clone(),
            engine_name: "Bevy".into(),
            engine_version: "0.19.1".into(),
            executable: std::env::current_exe()
                .ok()
                .map(|p| p.display().to_string()),
            process_id: std::process::id(),
        };
        let reports = GpuCrashReports::default();
        let report_dir = postmortem::report_dir(self.report_dir.as_deref(), &application_name);
        let mut delivery = self.delivery.clone();
        if delivery.outbox_dir == crate::deliver::default_outbox_dir() {
            delivery.outbox_dir = report_dir.join("outbox");
        }
        let outbox = Outbox::new(delivery);
        if outbox.dsn().is_some() && !outbox.pending().is_empty() {
            // Reports an earlier run could not upload (offline, killed mid-upload): send them now,
            // off the main thread.
            if let Err(err) = outbox.spawn_background_flush(Duration::from_secs(60)) {
                warn!("GPU crash reporter: could not start the upload thread: {err}");
            }
        }
        app.insert_resource(reporter)
            .insert_resource(reports.clone())
            .insert_resource(Postmortem {
                progress: Arc::default(),
                report_dir,
                outbox,
                application,
                hang_timeout: self.hang_timeout,
                on_hang: self.on_hang,
                reports,
                pre_submit_position: Arc::default(),
            })
            .add_systems(
                First,
                (
                    advance_capture_frame,
                    // Exclusive, so only when the app swaps the handler after we installed ours.
                    keep_error_hook.run_if(resource_exists_and_changed::<RenderErrorHandler>),
                    start_watchdog,
                ),
            );
    }

    fn finish(&self, app: &mut App) {
        let Some(setup) = app.world().get_resource::<VulkanSetupHandle>().cloned() else {
            return;
        };
        let capabilities = {
            let outcome = setup.0.outcome();
            outcome.capabilities.clone()
        };
        let capabilities = match capabilities {
            Some(capabilities) => {
                info!("{}", capabilities.summary());
                for line in &capabilities.missing {
                    info!("GPU crash reporter: {line}");
                }
                capabilities
            }
            None => {
                warn!(
                    "GPU crash reporter: the render device was not created through Vulkan \
                     (other backend, or no GPU); GPU crash capture is off"
                );
                GpuCrashCapabilities::default()
            }
        };
        app.insert_resource(capabilities.clone());
        let reporter = app.world().resource::<GpuCrashReporter>().clone();
        let postmortem = app.world().resource::<Postmortem>().clone();
        hook_render_errors(app.world_mut());
        if let Some(render_app) = app.get_sub_app_mut(RenderApp) {
            render_app
                .insert_resource(capabilities)
                .insert_resource(reporter)
                .insert_resource(setup)
                .insert_resource(postmortem)
                .add_systems(RenderStartup, adopt_binding_messenger)
                .add_systems(
                    Render,
                    (
                        mark_pre_submit
                            .in_set(RenderSystems::Render)
                            .before(bevy::render::renderer::render_system),
                        track_gpu_progress.in_set(RenderSystems::Cleanup),
                    ),
                );
        }
    }
}

/// Runs whenever the render world gets a (new) render device: moves the messenger the device
/// callback registered into a guard that lives exactly as long as that device.
fn adopt_binding_messenger(
    mut commands: Commands,
    setup: Res<VulkanSetupHandle>,
    device: Res<RenderDevice>,
) {
    let mut outcome = setup.0.outcome();
    if let Some(messenger) = outcome.messenger.take() {
        commands.insert_resource(BindingMessengerGuard {
            messenger,
            _device: device.clone(),
        });
    }
    if let Some(capabilities) = outcome.capabilities.clone() {
        commands.insert_resource(capabilities);
    }
}

fn advance_capture_frame(reporter: Res<GpuCrashReporter>, mut frame: Local<u64>) {
    *frame += 1;
    reporter.indexer.frame_tick(*frame);
}

/// Puts our handler in front of whatever `RenderErrorHandler` the app has (also one it inserts later).
fn hook_render_errors(world: &mut World) {
    let ours = on_render_error
        as for<'a> fn(&'a RenderError, &'a mut World, &'a mut World) -> RenderErrorPolicy;
    let current = world
        .get_resource::<RenderErrorHandler>()
        .map(|h| h.0)
        .unwrap_or(RenderErrorHandler::default().0);
    if current as usize != ours as usize {
        world.insert_resource(PreviousRenderErrorHandler(current));
        world.insert_resource(RenderErrorHandler(ours));
    }
}

fn keep_error_hook(world: &mut World) {
    hook_render_errors(world);
}

fn on_render_error(error: &RenderError, main: &mut World, render: &mut World) -> RenderErrorPolicy {
    if error.ty == ErrorType::DeviceLost {
        report_device_lost(error, main);
    }
    let previous = main
        .get_resource::<PreviousRenderErrorHandler>()
        .map(|p| p.0)
        .unwrap_or(RenderErrorHandler::default().0);
    previous(error, main, render)
}

fn report_device_lost(error: &RenderError, main: &mut World) {
    let (Some(reporter), Some(postmortem), Some(device)) = (
        main.get_resource::<GpuCrashReporter>().cloned(),
        main.get_resource::<Postmortem>().cloned(),
        main.get_resource::<RenderDevice>().cloned(),
    ) else {
        return;
    };
    if postmortem
        .progress
        .loss_reported
        .swap(true, std::sync::atomic::Ordering::AcqRel)
    {
        return; // an earlier loss already reported this crash (a hang report does not count:
                // the loss comes with the driver's fault info)
    }
    let capabilities = main
        .get_resource::<GpuCrashCapabilities>()
        .cloned()
        .unwrap_or_default();
    let mut raw = query_fault_bounded(&device, &capabilities, Duration::ZERO, true);
    if raw.description.is_none() && !error.description.is_empty() {
        raw.notes.push(format!("wgpu: {}", error.description));
    }
    let as_of = postmortem
        .pre_submit_position
        .load(std::sync::atomic::Ordering::Acquire);
    write_crash_report(
        CrashKind::DeviceLost,
        raw,
        &reporter,
        &postmortem,
        &capabilities,
        &device,
        None,
        Some(as_of),
    );
}

/// Longest wait for wgpu or the driver while building a report (their locks may be held by a render
/// thread stuck on the GPU).
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// [`crate::vulkan::query_device_fault`] on its own thread, for at most [`QUERY_TIMEOUT`] plus the
/// KHR wait.
fn query_fault_bounded(
    device: &RenderDevice,
    capabilities: &GpuCrashCapabilities,
    khr_timeout: Duration,
    device_lost: bool,
) -> crate::vulkan::fault::RawFaultInfo {
    let (device, caps) = (device.clone(), capabilities.clone());
    postmortem::with_timeout(QUERY_TIMEOUT + khr_timeout, move || {
        crate::vulkan::query_device_fault(device.wgpu_device(), &caps, khr_timeout, device_lost)
    })
    .unwrap_or_else(|| crate::vulkan::fault::RawFaultInfo {
        notes: vec![format!(
            "the fault query did not return within {} s (driver or wgpu blocked)",
            (QUERY_TIMEOUT + khr_timeout).as_secs()
        )],
        ..Default::default()
    })
}

/// Builds, writes and announces a report; returns its path when it reached the disk.
#[allow(clippy::too_many_arguments)]
fn write_crash_report(
    kind: CrashKind,
    raw: crate::vulkan::fault::RawFaultInfo,
    reporter: &GpuCrashReporter,
    postmortem: &Postmortem,
    capabilities: &GpuCrashCapabilities,
    device: &RenderDevice,
    stall: Option<(u64, std::time::Instant, u64)>,
    as_of: Option<u64>,
) -> Option<PathBuf> {
    let watchdog_timeout = raw.watchdog_timeout;
    let allocator_device = device.clone();
    let allocator_blocks = postmortem::with_timeout(QUERY_TIMEOUT, move || {
        allocator_device
            .wgpu_device()
            .generate_allocator_report()
            .map(|r| allocator_names::blocks_of(&r))
    })
    .flatten();
    let ctx = CrashContext {
        capabilities,
        application: &postmortem.application,
        frame: reporter.indexer.ring().current_frame(),
        binding_events_dropped: reporter.binding_events_dropped(),
        allocator_blocks,
        progress: Some(&postmortem.progress),
        as_of,
    };
    let mut index = reporter.index();
    let (mut report, vendor_binary) = postmortem::build_report(kind, raw, &mut index, &ctx);
    if let Some(stall) = stall {
        postmortem::add_hang_info(
            &mut report,
            &index,
            stall,
            postmortem.hang_timeout,
            watchdog_timeout,
        );
    }
    drop(index);
    let path = postmortem::persist_and_announce(
        &postmortem.report_dir,
        &mut report,
        vendor_binary.as_deref(),
    );
    if let Some(path) = &path {
        postmortem
            .reports
            .paths
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path.clone());
    }
    deliver(&postmortem.outbox, &report, vendor_binary.as_deref());
    path
}

/// Queues the report for Sentry and uploads it within `upload_timeout`; what does not go out stays
/// in the outbox for the next launch. Called only once the report is on disk.
fn deliver(outbox: &Outbox, report: &crate::report::CrashReport, vendor_binary: Option<&[u8]>) {
    if outbox.dsn().is_none() {
        match outbox.dsn_error() {
            Some(err) => error!("GPU crash report not uploaded: bad Sentry DSN: {err}"),
            None => {
                info!("GPU crash report not uploaded: no Sentry DSN configured (set SENTRY_DSN)")
            }
        }
        return;
    }
    match outbox.enqueue(report, vendor_binary) {
        Ok(_) => {
            let summary = outbox.flush_at_crash();
            if summary.sent > 0 {
                info!("GPU crash report uploaded ({} envelope(s))", summary.sent);
                eprintln!("GPU crash report uploaded to Sentry (event {})", report.id);
            } else {
                warn!(
                    "GPU crash report not uploaded yet ({}); it stays in {} for the next launch",
                    summary
                        .last_error
                        .as_deref()
                        .or(summary.stopped.as_deref())
                        .unwrap_or("no attempt"),
                    outbox.dir().display()
                );
            }
        }
        Err(err) => error!(
            "GPU crash report could not be queued for upload in {}: {err}",
            outbox.dir().display()
        ),
    }
}

/// Render world: right before the frame's submit, remember how far the ring got.
fn mark_pre_submit(reporter: Res<GpuCrashReporter>, postmortem: Res<Postmortem>) {
    postmortem.pre_submit_position.store(
        reporter.indexer.ring().claimed(),
        std::sync::atomic::Ordering::Release,
    );
}

/// Render world: after each frame's submit, ask wgpu to tell us when that frame's GPU work is done.
fn track_gpu_progress(queue: Res<RenderQueue>, postmortem: Res<Postmortem>, mut frame: Local<u64>) {
    *frame += 1;
    let current = *frame;
    postmortem.progress.submitted(current);
    let progress = postmortem.progress.clone();
    queue.on_submitted_work_done(move || progress.completed(current));
}

/// Starts the hang watchdog once the render device exists in the main world.
fn start_watchdog(
    mut commands: Commands,
    started: Option<Res<WatchdogGuard>>,
    postmortem: Res<Postmortem>,
    reporter: Res<GpuCrashReporter>,
    device: Option<Res<RenderDevice>>,
    capabilities: Option<Res<GpuCrashCapabilities>>,
    mut failed: Local<bool>,
) {
    let Some(device) = device else { return };
    if started.is_some() || *failed {
        return;
    }
    let (postmortem_state, reporter, device) =
        ((*postmortem).clone(), reporter.clone(), device.clone());
    let capabilities = capabilities.map(|c| c.clone()).unwrap_or_default();
    let tick =
        (postmortem.hang_timeout / 20).clamp(Duration::from_millis(10), Duration::from_millis(250));
    let check = move || {
        // No wgpu call here: on a real fault the render thread is stuck inside wgpu, and polling
        // would block behind it (H200 validation). Completions arrive with later submits.
        let Some(stall) = postmortem_state
            .progress
            .is_hung(postmortem_state.hang_timeout)
        else {
            return false;
        };
        let progress = &postmortem_state.progress;
        if progress
            .loss_reported
            .load(std::sync::atomic::Ordering::Acquire)
            || progress
                .hang_reported
                .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return true;
        }
        let raw = query_fault_bounded(&device, &capabilities, Duration::from_millis(100), false);
        let path = write_crash_report(
            CrashKind::GpuHang,
            raw,
            &reporter,
            &postmortem_state,
            &capabilities,
            &device,
            Some(stall),
            None,
        );
        if let OnHang::Exit(code) = postmortem_state.on_hang {
            if path.is_none() {
                error!("GPU hang: exiting although the report could not be written");
            }
            postmortem::exit_now(code);
        }
        true
    };
    match Watchdog::spawn(tick, check) {
        Ok(watchdog) => commands.insert_resource(WatchdogGuard(watchdog)),
        Err(err) => {
            *failed = true;
            error!("GPU crash reporter: could not start the hang watchdog: {err}");
        }
    }
}
