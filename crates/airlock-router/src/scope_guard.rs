//! `Router::scope`: dispose a conversation however the block ends, never masking its outcome.

use std::future::Future;
use std::panic::{resume_unwind, AssertUnwindSafe};

use futures_util::FutureExt;

use crate::backend::Backend;
use crate::disposal::ScopeRecord;
use crate::router::Router;

/// Disposes its conversation if dropped unfinished (the block was cancelled): the disposal is
/// spawned on the current tokio runtime, since a destructor cannot await.
#[derive(Debug)]
pub struct ScopeGuard<B: Backend> {
    router: Router<B>,
    scope: String,
    thread_id: String,
    armed: bool,
}

impl<B: Backend> ScopeGuard<B> {
    /// A guard over `(scope, thread_id)`.
    #[must_use]
    pub fn new(router: &Router<B>, scope: &str, thread_id: &str) -> ScopeGuard<B> {
        ScopeGuard {
            router: router.clone(),
            scope: scope.to_owned(),
            thread_id: thread_id.to_owned(),
            armed: true,
        }
    }

    /// Disposes now and disarms.
    pub async fn close(mut self) -> ScopeRecord {
        self.armed = false;
        self.router
            .dispose_scope(&self.scope, &self.thread_id)
            .await
    }
}

impl<B: Backend> Drop for ScopeGuard<B> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let router = self.router.clone();
        let scope = std::mem::take(&mut self.scope);
        let thread_id = std::mem::take(&mut self.thread_id);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    let record = router.dispose_scope(&scope, &thread_id).await;
                    tracing::info!(
                        disposed = record.disposed,
                        "conversation disposed after its block was cancelled"
                    );
                });
            }
            Err(_) => tracing::error!(
                "sandbox scope dropped outside a tokio runtime; its sandboxes were not disposed"
            ),
        }
    }
}

impl<B: Backend> Router<B> {
    /// Runs `body`, then disposes every sandbox of `(scope, thread_id)` however it ended: a
    /// value (an `Err` included, returned untouched), a panic (disposed, then resumed), or a
    /// cancellation (disposal spawned). The record arrives after the block.
    pub async fn scope<T, F, Fut>(&self, scope: &str, thread_id: &str, body: F) -> (T, ScopeRecord)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = ScopeGuard::new(self, scope, thread_id);
        let outcome = AssertUnwindSafe(body()).catch_unwind().await;
        let record = guard.close().await;
        match outcome {
            Ok(value) => (value, record),
            Err(panic) => resume_unwind(panic),
        }
    }
}
