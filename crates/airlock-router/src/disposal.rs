//! Disposal: ask every registered backend, bound each, fold the failures, and refuse a key
//! whose disposal did not land until one does.

use std::sync::Arc;
use std::time::Duration;

use airlock_policy::{DisposalCode, DisposalFailure, SandboxKey};
use futures_util::future::join_all;

use crate::backend::{Backend, ScopePurge};
use crate::observe::SandboxDisposed;
use crate::router::{lock, Router};

/// What disposing a conversation did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopeRecord {
    /// Sandboxes disposed.
    pub disposed: usize,
    /// Every disposal known not to have landed, folded; `None` when none was reported.
    pub undisposed: Option<DisposalFailure>,
}

async fn bounded_dispose<B: Backend>(
    b: &Arc<B>,
    key: &SandboxKey,
    t: Duration,
) -> Option<DisposalFailure> {
    match tokio::time::timeout(t, b.dispose(key)).await {
        Ok(outcome) => outcome,
        Err(_) => Some(DisposalFailure::new(
            DisposalCode::Timeout,
            format!(
                "backend {:?} did not finish disposing {key} within {t:?}",
                b.name()
            ),
        )),
    }
}

impl<B: Backend> Router<B> {
    /// Drops the key's slot when nothing holds or waits on it and it is empty, so per-call keys
    /// do not accumulate. Under the map lock nobody can clone the handle meanwhile.
    pub(crate) fn forget_idle_slot(&self, key: &SandboxKey) {
        let mut slots = lock(&self.inner.slots);
        let idle = slots.get(key).is_some_and(|h| {
            Arc::strong_count(h) == 1 && h.try_lock().is_ok_and(|s| s.live.is_empty())
        });
        if idle {
            slots.remove(key);
        }
    }

    /// Disposes `key` on every registered backend. `Ok` when nothing reported a failure; the
    /// folded failure otherwise, after which the key is refused until a disposal lands.
    pub async fn dispose(&self, key: &SandboxKey) -> Result<(), DisposalFailure> {
        let handle = self.slot(key);
        let mut slot = handle.lock().await;
        let t = self.inner.dispose_timeout;
        let outcomes = join_all(
            self.inner
                .backends
                .iter()
                .map(|b| bounded_dispose(b, key, t)),
        )
        .await;
        let folded = DisposalFailure::fold(outcomes.into_iter().flatten());
        slot.live.clear();
        match &folded {
            Some(f) => {
                tracing::warn!(key = %key, code = %f.code(), "sandbox disposal did not land; key refused until one does");
                lock(&self.inner.unclean).insert(key.clone(), f.clone());
            }
            None => {
                lock(&self.inner.unclean).remove(key);
            }
        }
        drop(slot);
        drop(handle);
        self.forget_idle_slot(key);
        self.inner.observers.emit(
            || SandboxDisposed {
                key: key.clone(),
                failure: folded.as_ref().map(DisposalFailure::code),
            },
            |o, e| o.sandbox_disposed(e),
        );
        folded.map_or(Ok(()), Err)
    }

    /// Disposes every sandbox of the conversation `(scope, thread_id)`: each key this router
    /// holds, then each backend's own purge. Never fails; failures are in the record, and a
    /// failed backend purge refuses the whole conversation until a purge lands.
    pub async fn dispose_scope(&self, scope: &str, thread_id: &str) -> ScopeRecord {
        let keys: Vec<SandboxKey> = lock(&self.inner.slots)
            .keys()
            .filter(|k| k.in_conversation(scope, thread_id))
            .cloned()
            .collect();
        let mut record = ScopeRecord::default();
        let mut failures = Vec::new();
        for key in keys {
            let live = self.slot(&key).lock().await.live.len();
            match self.dispose(&key).await {
                Ok(()) => record.disposed += live,
                Err(f) => failures.push(f),
            }
        }
        let t = self.inner.dispose_timeout;
        let purges = join_all(self.inner.backends.iter().map(|b| async move {
            match tokio::time::timeout(t, b.dispose_scope(scope, thread_id)).await {
                Ok(p) => p,
                Err(_) => ScopePurge {
                    disposed: 0,
                    failure: Some(DisposalFailure::new(
                        DisposalCode::Timeout,
                        format!(
                            "backend {:?} did not finish purging {scope}/{thread_id} within {t:?}",
                            b.name()
                        ),
                    )),
                },
            }
        }))
        .await;
        let mut purge_failures = Vec::new();
        for p in purges {
            record.disposed += p.disposed;
            purge_failures.extend(p.failure);
        }
        let conv = (scope.to_owned(), thread_id.to_owned());
        match DisposalFailure::fold(purge_failures) {
            Some(f) => {
                lock(&self.inner.unclean_conversations).insert(conv, f.clone());
                failures.push(f);
            }
            None => {
                lock(&self.inner.unclean_conversations).remove(&conv);
            }
        }
        record.undisposed = DisposalFailure::fold(failures);
        record
    }
}
