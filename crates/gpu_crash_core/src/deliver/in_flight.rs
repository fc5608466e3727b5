//! The uploads a process has on the wire, so that its exit never cuts one short.
//!
//! A request the process dies in the middle of (a player quitting while the startup flush sends
//! what an earlier run left) may already have reached the server: with no answer read, no `sent/`
//! marker is written, and the next launch sends the event again. Seen in real launches against a
//! slow endpoint (tests/real_lifetime.rs): the same event arrived up to five times. At exit the
//! outbox [`InFlight::wind_down`]s: no flush starts another request, and the exit waits (bounded
//! by the upload timeout) for the one on the wire to be answered and recorded.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

#[derive(Debug, Default)]
pub(super) struct InFlight {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    requests: u32,
    winding_down: bool,
}

/// One request on the wire, from before it is sent until its outcome is recorded.
pub(super) struct Request<'a>(&'a InFlight);

impl InFlight {
    fn state(&self) -> MutexGuard<'_, State> {
        // Two plain fields: a panic while holding the lock leaves them whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request may start: `None` once the process winds down, unless this is the exit's own
    /// flush (`for_exit`).
    pub(super) fn begin(&self, for_exit: bool) -> Option<Request<'_>> {
        let mut state = self.state();
        if state.winding_down && !for_exit {
            return None;
        }
        state.requests += 1;
        Some(Request(self))
    }

    /// Whether the process winds down: a flush other than the exit's stops before it claims more.
    pub(super) fn winding_down(&self) -> bool {
        self.state().winding_down
    }

    /// The process is exiting: no flush but the exit's starts a request from now on, and this
    /// waits until `deadline` at most for those on the wire. Returns whether none is left.
    pub(super) fn wind_down(&self, deadline: Instant) -> bool {
        let mut state = self.state();
        state.winding_down = true;
        while state.requests > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.requests = state.requests.saturating_sub(1);
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_exit_waits_for_the_request_on_the_wire_and_no_other_starts() {
        let in_flight = Arc::new(InFlight::default());
        let sender = {
            let in_flight = in_flight.clone();
            std::thread::spawn(move || {
                let request = in_flight.begin(false).unwrap();
                std::thread::sleep(Duration::from_millis(300));
                drop(request);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        assert!(in_flight.wind_down(Instant::now() + Duration::from_secs(5)));
        assert!(started.elapsed() >= Duration::from_millis(200), "it waited");
        assert!(
            in_flight.begin(false).is_none(),
            "no new background request"
        );
        assert!(
            in_flight.begin(true).is_some(),
            "the exit's own flush goes on"
        );
        sender.join().unwrap();
        // Bounded: a request that never ends does not keep the exit.
        let stuck = InFlight::default();
        let _request = stuck.begin(false).unwrap();
        let started = Instant::now();
        assert!(!stuck.wind_down(Instant::now() + Duration::from_millis(100)));
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
