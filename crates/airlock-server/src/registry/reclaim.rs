//! Reclaim: every sandbox idle past its timeout, or past the end of its lifetime, is paused
//! (`idle_action: "pause"`) or disposed of, each on a task of its own, checked again that it is
//! still due and held.
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;
use crate::registry::error::ErrorKind;
use crate::registry::sandboxes::{lock, Held, Sandboxes};

/// How often idle sandboxes are looked for.
const REAP_PERIOD: Duration = Duration::from_secs(1);

impl Sandboxes {
    /// Dispose of every sandbox idle past its timeout, until `stop` is cancelled.
    pub async fn reap_idle(self: Arc<Self>, stop: CancelToken) {
        let mut tick = tokio::time::interval(REAP_PERIOD);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = Instant::now();
            let idle: Vec<Arc<Held>> = lock(&self.live)
                .values()
                .filter(|h| h.due(now))
                .cloned()
                .collect();
            for h in idle {
                // Each on its own task: one slow pause (a kernel's save) holds up no other
                // reclaim, and each checks again that its sandbox is still idle.
                let me = Arc::clone(&self);
                tokio::spawn(async move { me.reclaim(&h).await });
            }
        }
    }

    /// Reclaim `h` if it is still idle and held: pause it (`idle_action: "pause"`) or dispose
    /// of it. A pause refused for want of room or because a call came meanwhile leaves it
    /// live (its next idle timeout tries again); any other failed pause disposes of it.
    async fn reclaim(&self, h: &Arc<Held>) {
        let held = lock(&self.live).get(&h.id).cloned();
        let Some(held) = held.filter(|l| Arc::ptr_eq(l, h)) else {
            return;
        };
        if !held.due(Instant::now()) {
            return;
        }
        if held.idle_action == crate::registry::request::IdleAction::Pause {
            tracing::info!(sandbox = %held.id, "idle timeout or lifetime over; pausing");
            match self.pause(&held.id).await {
                Ok(_) => return,
                Err(e) if matches!(e.kind, ErrorKind::OverCapacity | ErrorKind::Busy) => {
                    tracing::warn!(sandbox = %held.id, error = %e.message, "pause refused; kept live");
                    held.touch();
                    if held.life.lived_out(Instant::now()) {
                        // Tried again after an idle timeout's length, not on every tick.
                        held.life.set_lifetime(held.life.idle_timeout());
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(sandbox = %held.id, error = %e.message, "pause failed; disposing")
                }
            }
            if !held.due(Instant::now()) {
                return;
            }
        } else {
            tracing::info!(sandbox = %held.id, "idle timeout or lifetime over; disposing");
        }
        let _ = self.dispose(&held.id).await;
    }
}
