//! The crash drill end to end through the public API alone: a game adds the plugin with its
//! settings, the drill layer turns a freed buffer's reuse into a device loss, and the report is read
//! back from disk with serde and found in a real Bugsink. Nothing here (or in the support modules it
//! includes) uses `gpu_crash_core::test_support`.

mod common;
#[path = "deliver_support/mod.rs"]
mod deliver_support;

use std::sync::OnceLock;
use std::time::Duration;

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages};
use bevy::render::renderer::RenderDevice;
use bevy_gpu_crash_reporter::report::{read_report, CrashKind, FaultVerdict, ObjectState};
use bevy_gpu_crash_reporter::ReporterSettings;
use bevy_gpu_crash_reporter::{
    DeliverySettings, Dsn, GpuCrashReporter, GpuCrashReporterPlugin, GpuCrashReports, OnHang,
    UploadConsent,
};

const DSN_ENV: &str = "PUBLIC_API_DSN";
const VICTIM: &str = "particle_pool";

#[test]
fn drill_through_the_public_api_lands_on_disk_and_in_bugsink() {
    let server = deliver_support::bugsink("public_api");
    let dir = common::scratch_dir("public_api");
    let reports_dir = dir.join("reports");
    let output = common::child_command(&reports_dir, Some(&format!("use-after-free:{VICTIM}")))
        .env(DSN_ENV, &server.dsn)
        .output()
        .expect("spawn child");
    let stderr = String::from_utf8_lossy(&output.stderr);

    let reports: Vec<_> = std::fs::read_dir(&reports_dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(reports.len(), 1, "one report; child stderr:\n{stderr}");
    let report = read_report(&reports[0]).expect("the report reads back with serde");
    assert_eq!(report.kind, CrashKind::DeviceLost, "{stderr}");
    let fault = report.faults.first().expect("a fault address");
    assert_eq!(
        fault.verdict,
        FaultVerdict::UseAfterFree,
        "{}",
        fault.summary
    );
    let culprit = fault.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.name.as_deref(), Some(VICTIM));
    assert_eq!(culprit.state, ObjectState::Freed);
    assert!(
        stderr.contains(&format!("GpuCrashReports: {}", reports[0].display())),
        "the GpuCrashReports resource lists the report:\n{stderr}"
    );
    assert!(
        server.event(&report.id).is_some(),
        "Bugsink has the event of report {}; child stderr:\n{stderr}",
        report.id
    );
}

/// The game: the plugin configured through its public settings and a buffer pool it frees. Not a
/// test on its own.
#[test]
#[ignore = "child process entry point: the test above starts it under the crash drill"]
fn child() {
    let dsn: Dsn = std::env::var(DSN_ENV)
        .expect("run by the test above")
        .parse()
        .expect("a valid DSN");
    common::use_runtime_dir();
    let exit = App::new()
        .add_plugins(GpuCrashReporterPlugin {
            settings: ReporterSettings {
                hang_timeout: Duration::from_secs(2),
                on_hang: OnHang::Exit(3),
                application_name: Some("public_api".into()),
                application_version: "1.0.0".into(),
                // This game reads `GpuCrashReports` after `run` returns: it takes the exit path back
                // (and the driver teardown risk that `end_process_after_loss` avoids).
                end_process_after_loss: false,
                delivery: DeliverySettings {
                    dsn_from_env: false,
                    upload_consent: UploadConsent::Granted,
                    ..DeliverySettings::new(
                        Some(dsn),
                        std::env::temp_dir().join("public_api_outbox"),
                    )
                },
                ..default()
            },
            ..default()
        })
        .add_plugins(common::headless_default_plugins())
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
        .add_systems(Startup, keep_reports_resource)
        .add_systems(Update, churn_pool)
        .run();
    for path in REPORTS
        .get()
        .map(GpuCrashReports::written)
        .unwrap_or_default()
    {
        eprintln!("GpuCrashReports: {}", path.display());
    }
    common::exit_process(exit);
}

/// Creates the pool, frees it ten frames later (the drill then reuses its freed address range).
fn churn_pool(
    device: Res<RenderDevice>,
    reporter: Res<GpuCrashReporter>,
    mut pool: Local<Option<Buffer>>,
    mut frame: Local<u32>,
    mut exit: MessageWriter<AppExit>,
) {
    *frame += 1;
    match *frame {
        1 => {
            *pool = Some(device.create_buffer(&BufferDescriptor {
                label: Some(VICTIM),
                size: 256 * 1024,
                usage: BufferUsages::STORAGE,
                mapped_at_creation: false,
            }))
        }
        10 => pool.take().unwrap().destroy(),
        600.. => {
            let stats = reporter.index_stats();
            eprintln!("public_api child: no fault after 600 frames; {stats:?}");
            exit.write(AppExit::Success);
        }
        _ => {}
    }
}

/// The app's `GpuCrashReports`, read after `run` returns.
static REPORTS: OnceLock<GpuCrashReports> = OnceLock::new();

fn keep_reports_resource(reports: Res<GpuCrashReports>) {
    let _ = REPORTS.set(reports.clone());
}
