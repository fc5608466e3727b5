//! Device loss arrives through Bevy's `RenderErrorHandler`: ours runs first and reports, then the
//! app's own handler decides the policy (exit, recover, ignore).

use std::cell::Cell;

use bevy::ecs::change_detection::Tick;
use bevy::prelude::*;
use bevy::render::error_handler::{ErrorType, RenderError, RenderErrorHandler, RenderErrorPolicy};

use crate::resources::GpuCrashReporter;

/// The handler that was installed before ours; it decides the app's policy after we report.
#[derive(Resource)]
struct PreviousRenderErrorHandler(
    for<'a> fn(&'a RenderError, &'a mut World, &'a mut World) -> RenderErrorPolicy,
);

/// Marks our installation of `RenderErrorHandler`: the change tick of our insert. A handler whose
/// last change is another tick was put there by the app (never compare function pointers: one
/// function can have several addresses, and two can share one).
///
/// Bevy calls the handler inside `World::resource_scope`, which takes the resource out and inserts
/// it again afterwards with a new change tick: our handler notes that tick in `reinserted_at`, so
/// the re-insert of our own handler is not taken for the app's.
#[derive(Resource)]
struct OurRenderErrorHook {
    installed_at: Tick,
    reinserted_at: Option<Tick>,
}

/// Puts our handler in front of whatever `RenderErrorHandler` the app has (also one it inserts later).
pub(crate) fn hook_render_errors(world: &mut World) {
    let ours_is_current = match (
        world.get_resource::<OurRenderErrorHook>(),
        world.get_resource_ref::<RenderErrorHandler>(),
    ) {
        (Some(hook), Some(current)) => {
            current.last_changed() == hook.installed_at
                || Some(current.last_changed()) == hook.reinserted_at
        }
        _ => false,
    };
    if ours_is_current {
        let current = world
            .get_resource_ref::<RenderErrorHandler>()
            .map(|h| h.last_changed());
        if let (Some(mut hook), Some(tick)) =
            (world.get_resource_mut::<OurRenderErrorHook>(), current)
        {
            hook.installed_at = tick;
            hook.reinserted_at = None;
        }
        return;
    }
    let previous = world
        .get_resource::<RenderErrorHandler>()
        .map(|h| h.0)
        .unwrap_or(RenderErrorHandler::default().0);
    world.insert_resource(PreviousRenderErrorHandler(previous));
    world.insert_resource(RenderErrorHandler(on_render_error));
    let installed_at = world
        .get_resource_ref::<RenderErrorHandler>()
        .map(|h| h.last_changed())
        .unwrap_or_default();
    world.insert_resource(OurRenderErrorHook {
        installed_at,
        reinserted_at: None,
    });
}

pub(crate) fn keep_error_hook(world: &mut World) {
    hook_render_errors(world);
}

thread_local! {
    /// Set while our handler runs on this thread: a handler chain that leads back to us (whatever
    /// went wrong in the bookkeeping) reports once and never recurses.
    static IN_OUR_HANDLER: Cell<bool> = const { Cell::new(false) };
}

/// Clears [`IN_OUR_HANDLER`] when our handler returns or unwinds (the app's own handler, called
/// from ours, may panic): later losses on this thread are reported again.
struct LeaveOurHandler;

impl Drop for LeaveOurHandler {
    fn drop(&mut self) {
        IN_OUR_HANDLER.with(|flag| flag.set(false));
    }
}

fn on_render_error(error: &RenderError, main: &mut World, render: &mut World) -> RenderErrorPolicy {
    let reentered = IN_OUR_HANDLER.with(|flag| flag.replace(true));
    if reentered {
        return RenderErrorHandler::default().0(error, main, render);
    }
    let _leave = LeaveOurHandler;
    // We run inside Bevy's `resource_scope`, which re-inserts our handler at this tick.
    let tick = main.change_tick();
    if let Some(mut hook) = main.get_resource_mut::<OurRenderErrorHook>() {
        hook.reinserted_at = Some(tick);
    }
    let crash = (error.ty == ErrorType::DeviceLost)
        .then(|| main.get_resource::<GpuCrashReporter>().cloned())
        .flatten();
    if let Some(crash) = &crash {
        crash.device_lost(&error.description);
    }
    let previous = main
        .get_resource::<PreviousRenderErrorHandler>()
        .map(|p| p.0)
        .unwrap_or(RenderErrorHandler::default().0);
    let policy = previous(error, main, render);
    // The app quits on this loss (Bevy's default handler does): the report and its upload, which
    // run on a thread of their own, get their bounded time now, whether or not the app's exit drops
    // the world.
    let exits = main.get_resource::<Messages<AppExit>>();
    let exiting = exits.is_some_and(|messages| !messages.is_empty());
    // The exit this handler chain asked for just now (the app's handler wrote it in this call).
    let exit_code = exits
        .and_then(|messages| messages.iter_current_update_messages().last().cloned())
        .map(|exit| match exit {
            AppExit::Success => 0,
            AppExit::Error(code) => i32::from(code.get()),
        });
    if let (Some(crash), true) = (&crash, exiting) {
        crash.wait_for_reports();
    }
    if let (Some(crash), Some(code)) = (&crash, exit_code) {
        if crash.end_process_after_loss() {
            // What the app's exit would have done for us (held-back crash-loop reports go out) is
            // done by `end_process` first.
            // Exit handlers and Bevy's teardown would tear the driver down under threads still
            // inside it (Bevy's pipeline compiler: SIGSEGV after the report on NVIDIA, see
            // docs/driver-facts.md): the player would see a second crash after ours.
            bevy::log::info!(
                "GPU crash reporter: the app quits on the device loss; ending the process now \
                 (exit code {code}), its report done"
            );
            crash.end_process(code);
        }
    }
    policy
}
