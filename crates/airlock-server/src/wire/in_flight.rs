//! A connection's in-flight cap: at most [`MAX_IN_FLIGHT`] session methods whose answers are
//! not yet queued. A method takes its slot when the session reads it and gives it back the
//! moment its answer is queued for the peer, not when its task is reaped: a client that reads
//! an answer and sends its next request at once always finds the slot free. A connection's
//! place under `--max-connections` is a [`Slot`] too, given back before its close frame goes
//! out (the WebSocket listener's).
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Session methods one connection may have unanswered at once.
pub const MAX_IN_FLIGHT: usize = 16;

/// One connection's slots.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Semaphore>);

impl Default for InFlight {
    fn default() -> Self {
        InFlight(Arc::new(Semaphore::new(MAX_IN_FLIGHT)))
    }
}

impl InFlight {
    /// A slot for one more method, or `None` when every slot waits on an answer.
    pub(crate) fn take(&self) -> Option<Slot> {
        let permit = Arc::clone(&self.0).try_acquire_owned().ok()?;
        Some(Slot::holding(permit))
    }
}

/// A method's slot, shared by every clone of its connection handle; given back by
/// [`Slot::release`] once the answer is queued (or when the last clone goes, should the method
/// never answer).
#[derive(Clone, Debug, Default)]
pub(crate) struct Slot(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl Slot {
    /// A slot of another cap (a connection's place under `--max-connections`), given back the
    /// same way.
    pub(crate) fn holding(permit: OwnedSemaphorePermit) -> Self {
        Slot(Arc::new(Mutex::new(Some(permit))))
    }

    /// Gives the slot back (idempotent).
    pub(crate) fn release(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_slot_is_free_at_once_while_its_clones_live() {
        let cap = InFlight::default();
        let held: Vec<Slot> = (0..MAX_IN_FLIGHT).map(|_| cap.take().unwrap()).collect();
        assert!(cap.take().is_none(), "one past the cap");
        let clone = held[0].clone();
        held[0].release();
        let again = cap
            .take()
            .expect("the released slot is free although a clone lives");
        assert!(cap.take().is_none());
        clone.release(); // idempotent: releases nothing more
        assert!(cap.take().is_none());
        drop(again);
        assert!(cap.take().is_some(), "a dropped slot is free too");
    }
}
