//! The run slots and the queue in front of them.
//!
//! At most `slots` runs execute at once. A run that finds every slot busy waits in a bounded
//! queue (at most `max_queued` waiting runs, server-wide) until a slot frees up, its own
//! deadline passes, or it is cancelled. The order is fair **per sandbox, then FIFO**: the
//! sandboxes with waiting runs take turns in the order they started waiting (a sandbox that
//! was served goes to the back of the rotation), and one sandbox's runs go in arrival order.
//! So a sandbox with many queued runs cannot starve another sandbox's single run.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

/// Why a run got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QueueRefusal {
    /// The queue already holds its bound of waiting runs.
    #[error("all {slots} run slots are busy and {queued} runs are already queued (the bound)")]
    Full {
        /// Run slots.
        slots: usize,
        /// Runs waiting.
        queued: usize,
    },
    /// The run's deadline passed while it waited.
    #[error("all {slots} run slots stayed busy until the run's deadline ({waited_ms} ms queued)")]
    Deadline {
        /// Run slots.
        slots: usize,
        /// How long it waited.
        waited_ms: u64,
    },
}

struct Waiter {
    id: u64,
    grant: oneshot::Sender<SlotPermit>,
}

#[derive(Default)]
struct State {
    free: usize,
    queued: usize,
    next_id: u64,
    /// Sandboxes with waiting runs, in turn order.
    turns: VecDeque<String>,
    waiting: HashMap<String, VecDeque<Waiter>>,
}

struct Inner {
    slots: usize,
    max_queued: usize,
    state: Mutex<State>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The run slots, shared by every caller of one [`Runner`](super::Runner).
#[derive(Clone)]
pub struct Slots(Arc<Inner>);

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0.lock();
        f.debug_struct("Slots")
            .field("slots", &self.0.slots)
            .field("free", &s.free)
            .field("queued", &s.queued)
            .finish()
    }
}

/// One slot, held for the length of a run; dropping it hands the slot to the next waiter.
#[must_use = "the slot is released when the permit is dropped"]
pub struct SlotPermit {
    slots: Option<Arc<Inner>>,
}

impl std::fmt::Debug for SlotPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SlotPermit")
    }
}

impl Drop for SlotPermit {
    fn drop(&mut self) {
        if let Some(inner) = self.slots.take() {
            release(&inner);
        }
    }
}

/// Give a freed slot to the next waiter in turn, or keep it free.
fn release(inner: &Arc<Inner>) {
    let mut s = inner.lock();
    while let Some(waiter) = next_in_turn(&mut s) {
        let permit = SlotPermit {
            slots: Some(Arc::clone(inner)),
        };
        match waiter.grant.send(permit) {
            Ok(()) => return,
            // The waiter gave up (deadline, cancel) between its last check and now: the permit
            // comes back unused and must not release again while the lock is held.
            Err(mut unused) => unused.slots = None,
        }
    }
    s.free += 1;
}

/// The next waiter: the front run of the sandbox whose turn it is; that sandbox goes to the
/// back of the rotation if it has more.
fn next_in_turn(s: &mut State) -> Option<Waiter> {
    while let Some(key) = s.turns.pop_front() {
        let Some(queue) = s.waiting.get_mut(&key) else {
            continue;
        };
        let waiter = queue.pop_front();
        if queue.is_empty() {
            s.waiting.remove(&key);
        } else {
            s.turns.push_back(key);
        }
        if let Some(w) = waiter {
            s.queued -= 1;
            return Some(w);
        }
    }
    None
}

impl Slots {
    /// `slots` run slots (at least 1) and room for `max_queued` waiting runs.
    #[must_use]
    pub fn new(slots: usize, max_queued: usize) -> Self {
        let slots = slots.max(1);
        Slots(Arc::new(Inner {
            slots,
            max_queued,
            state: Mutex::new(State {
                free: slots,
                ..State::default()
            }),
        }))
    }

    /// Run slots in all.
    #[must_use]
    pub fn slots(&self) -> usize {
        self.0.slots
    }

    /// The bound of the queue.
    #[must_use]
    pub fn max_queued(&self) -> usize {
        self.0.max_queued
    }

    /// Runs waiting now.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.0.lock().queued
    }

    /// Runs executing now.
    #[must_use]
    pub fn busy(&self) -> usize {
        self.0.slots - self.0.lock().free
    }

    /// A slot for a run of `sandbox`, waiting at most `deadline` in the queue. A run that
    /// finds a free slot and nobody waiting takes it at once.
    pub async fn acquire(
        &self,
        sandbox: &str,
        deadline: Duration,
    ) -> Result<SlotPermit, QueueRefusal> {
        let started = std::time::Instant::now();
        let (id, rx) = match self.enqueue(sandbox) {
            Ok(Ok(permit)) => return Ok(permit),
            Ok(Err(waiting)) => waiting,
            Err(full) => return Err(full),
        };
        let mut leave = Leave {
            inner: &self.0,
            sandbox,
            id,
            armed: true,
        };
        match tokio::time::timeout(deadline, rx).await {
            Ok(Ok(permit)) => {
                leave.armed = false;
                Ok(permit)
            }
            // The sender is never dropped without sending while the waiter is queued; treat
            // it like the deadline for safety.
            Ok(Err(_)) | Err(_) => Err(QueueRefusal::Deadline {
                slots: self.0.slots,
                waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// A free slot now, or a place in the queue, or the refusal of a full queue.
    #[allow(clippy::type_complexity, reason = "private: one of three outcomes")]
    fn enqueue(
        &self,
        sandbox: &str,
    ) -> Result<Result<SlotPermit, (u64, oneshot::Receiver<SlotPermit>)>, QueueRefusal> {
        let mut s = self.0.lock();
        if s.free > 0 && s.queued == 0 {
            s.free -= 1;
            return Ok(Ok(SlotPermit {
                slots: Some(Arc::clone(&self.0)),
            }));
        }
        if s.queued >= self.0.max_queued {
            return Err(QueueRefusal::Full {
                slots: self.0.slots,
                queued: s.queued,
            });
        }
        let (tx, rx) = oneshot::channel();
        s.next_id += 1;
        let id = s.next_id;
        s.queued += 1;
        if !s.waiting.contains_key(sandbox) {
            s.turns.push_back(sandbox.to_owned());
        }
        s.waiting
            .entry(sandbox.to_owned())
            .or_default()
            .push_back(Waiter { id, grant: tx });
        Ok(Err((id, rx)))
    }
}

/// Takes a waiter that gave up (deadline, cancel, its future dropped) out of the queue.
struct Leave<'a> {
    inner: &'a Arc<Inner>,
    sandbox: &'a str,
    id: u64,
    armed: bool,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut s = self.inner.lock();
        let Some(queue) = s.waiting.get_mut(self.sandbox) else {
            return;
        };
        let before = queue.len();
        queue.retain(|w| w.id != self.id);
        let removed = before - queue.len();
        if queue.is_empty() {
            s.waiting.remove(self.sandbox);
            s.turns.retain(|k| k != self.sandbox);
        }
        s.queued -= removed;
    }
}

#[cfg(test)]
mod tests;
