//! A clonable, level-triggered cancellation flag: once cancelled, every waiter (present and
//! future) wakes, so a run queued for a slot and a run in flight observe it the same way.
use std::sync::Arc;

use tokio::sync::watch;

/// Cancelled once, forever.
#[derive(Debug, Clone)]
pub struct CancelToken {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        let (tx, _) = watch::channel(false);
        Self { tx: Arc::new(tx) }
    }

    /// Cancel; idempotent.
    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once cancelled (immediately if already).
    pub async fn cancelled(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives in `self`, so `wait_for` can only return once the flag is set.
        let _ = rx.wait_for(|v| *v).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_before_and_after_cancel_all_wake() {
        let t = CancelToken::new();
        let early = tokio::spawn({
            let t = t.clone();
            async move { t.cancelled().await }
        });
        tokio::task::yield_now().await;
        assert!(!t.is_cancelled());
        t.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(1), early)
            .await
            .unwrap()
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(1), t.cancelled())
            .await
            .unwrap();
        assert!(t.is_cancelled());
    }
}
