//! Loss reports one at a time, in the order the losses came, each with its device's index kept
//! until it is built.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::index::indexer::IndexerHandle;

/// Turns of the loss reports: a recovered device can be lost again before the first report is
/// built, and each report must read its own device's index, which the indexer leaves for the next
/// device only when that report is done (see [`IndexOnLostDevice`]).
#[derive(Clone, Default)]
pub(crate) struct LossTurns(Arc<(Mutex<Turns>, Condvar)>);

#[derive(Default)]
struct Turns {
    issued: u64,
    /// Tickets below this are done.
    serving: u64,
}

impl LossTurns {
    fn lock(&self) -> std::sync::MutexGuard<'_, Turns> {
        self.0 .0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next ticket, in the order of the calls (the losses).
    pub(crate) fn ticket(&self) -> LossTurn {
        let mut turns = self.lock();
        let ticket = turns.issued;
        turns.issued += 1;
        LossTurn {
            turns: self.clone(),
            ticket,
        }
    }
}

/// One loss report's turn; dropping it (the report built, or its thread unwinding) passes the turn
/// on.
pub(crate) struct LossTurn {
    turns: LossTurns,
    ticket: u64,
}

impl LossTurn {
    /// Waits until the earlier reports are built, at most `limit` (each is bounded; past it this
    /// one goes ahead rather than wait behind a stuck one).
    pub(crate) fn wait(&self, limit: Duration) {
        let (_, turn_changed) = &*self.turns.0;
        let turns = self.turns.lock();
        let _ = turn_changed
            .wait_timeout_while(turns, limit, |t| t.serving < self.ticket)
            .unwrap_or_else(|p| p.into_inner());
    }
}

impl Drop for LossTurn {
    fn drop(&mut self) {
        let mut turns = self.turns.lock();
        turns.serving = turns.serving.max(self.ticket + 1);
        self.turns.0 .1.notify_all();
    }
}

/// What a loss report holds until it is built: its turn and its device's index. Dropped on every way
/// out of the report thread, a caught panic included.
pub(crate) struct LossClaim {
    pub turn: LossTurn,
    pub _index: IndexOnLostDevice,
}

/// Keeps the index on a lost device (pinned, unbinds held) until its report is built.
pub(crate) struct IndexOnLostDevice {
    indexer: Arc<IndexerHandle>,
    generation: u32,
}

impl IndexOnLostDevice {
    pub(crate) fn new(indexer: Arc<IndexerHandle>, generation: u32) -> Self {
        // What is torn down from now on (wgpu destroys everything after a loss) stays in the index,
        // and a recovered device's first events wait until the report has read it.
        indexer.hold_unbinds(generation);
        indexer.pin_device(generation);
        Self {
            indexer,
            generation,
        }
    }
}

impl Drop for IndexOnLostDevice {
    fn drop(&mut self) {
        self.indexer.release_hold(self.generation);
        self.indexer.unpin_device(self.generation);
    }
}
