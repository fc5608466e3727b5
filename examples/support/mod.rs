//! Set-up shared by the examples: a headless Bevy app rendering through Vulkan only.
//! (Not an example of its own: Cargo builds `examples/<dir>/` only when it holds a `main.rs`.)

use std::time::Duration;

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::settings::{Backends, RenderCreation, WgpuSettings};
use bevy::render::RenderPlugin;
use bevy::window::ExitCondition;

/// `DefaultPlugins` without a window, on the Vulkan backend, plus a loop runner: what a crash drill
/// in CI or on a headless GPU server needs. Add `GpuCrashReporterPlugin` before it.
pub fn headless_vulkan(app: &mut App) -> &mut App {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // Process-global, but set before any other thread exists.
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    app.add_plugins(
        DefaultPlugins
            .set(WindowPlugin {
                primary_window: None,
                exit_condition: ExitCondition::DontExit,
                ..default()
            })
            .set(RenderPlugin {
                render_creation: RenderCreation::Automatic(Box::new(WgpuSettings {
                    backends: Some(Backends::VULKAN),
                    ..default()
                })),
                ..default()
            }),
    )
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
}
