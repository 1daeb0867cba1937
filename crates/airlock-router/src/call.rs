//! One tool call: a per-call guest path reclaimed after every call, a call-scoped sandbox
//! disposed when the call returns, and an unclean sandbox disposed by default.

use std::future::Future;
use std::panic::{resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use airlock_policy::{
    CallerContext, FailedReclaimPolicy, GuestRelPath, IsolationScope, KeyError, SandboxKey,
    SandboxSpec,
};
use futures_util::FutureExt;
use thiserror::Error;

use crate::backend::Backend;
use crate::ids::fresh_id;
use crate::observe::{type_kind, ErrorKind, ToolCallEnded};
pub use crate::reclaim_failure::{ReclaimDisposal, ReclaimFailure};
use crate::router::{AcquireError, Router};
use crate::sandbox::{Sandbox, SandboxError};

/// The directory, under the work dir, that holds per-call guest paths.
pub const CALLS_DIR: &str = ".airlock-calls";

/// A call that did not complete.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CallError<E> {
    /// The caller context produced no valid key.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// No call id could be minted.
    #[error("could not mint a call id: {0}")]
    Entropy(std::io::Error),
    /// The sandbox could not be acquired.
    #[error(transparent)]
    Acquire(AcquireError),
    /// The per-call path could not be formed (never, for a well-formed call id).
    #[error(transparent)]
    Path(airlock_policy::GuestPathError),
    /// The body failed.
    #[error("{0}")]
    Body(E),
}

/// What a call body gets: its sandbox and its own guest path.
#[derive(Debug, Clone)]
pub struct CallSession {
    sandbox: Arc<dyn Sandbox>,
    key: SandboxKey,
    call_id: String,
    guest_call_path: GuestRelPath,
    work_dir: String,
}

impl CallSession {
    /// The sandbox serving this call.
    #[must_use]
    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }
    /// The sandbox's address.
    #[must_use]
    pub fn key(&self) -> &SandboxKey {
        &self.key
    }
    /// The host-minted call id.
    #[must_use]
    pub fn call_id(&self) -> &str {
        &self.call_id
    }
    /// A path under the work dir owned by this call (not yet created), removed with
    /// everything under it when the call returns.
    #[must_use]
    pub fn guest_call_path(&self) -> &GuestRelPath {
        &self.guest_call_path
    }
    /// The work dir the path is relative to.
    #[must_use]
    pub fn work_dir(&self) -> &str {
        &self.work_dir
    }
}

/// Runs the call's cleanup if the call future is dropped unfinished.
struct CallCleanup<B: Backend> {
    router: Router<B>,
    session: Option<CallSession>,
    scope: IsolationScope,
    tool: String,
    started: Instant,
}

impl<B: Backend> Drop for CallCleanup<B> {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let router = self.router.clone();
        let scope = self.scope;
        let tool = std::mem::take(&mut self.tool);
        let started = self.started;
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    router.finish_call(&session, scope).await;
                    router.call_ended(vec![session.key.clone()], &tool, started, Some("cancelled"));
                });
            }
            Err(_) => tracing::error!(
                "tool call dropped outside a tokio runtime; its guest path was not reclaimed"
            ),
        }
    }
}

impl<B: Backend> Router<B> {
    fn call_ended(
        &self,
        keys: Vec<SandboxKey>,
        tool: &str,
        started: Instant,
        failure: Option<&'static str>,
    ) {
        self.inner.observers.emit(
            || ToolCallEnded {
                keys,
                tool: tool.to_owned(),
                elapsed: started.elapsed(),
                failure,
            },
            |o, e| o.tool_call_ended(e),
        );
    }

    /// Runs one tool call of `tool` for `agent_dir` in the caller's conversation.
    ///
    /// The key is built from `ctx` now, with a fresh unguessable call id. After the body ends
    /// (value, error or panic; cancellation spawns the same cleanup) the call's guest path is
    /// reclaimed; a reclaim that failed disposes the sandbox unless the host opted down, and
    /// the host's `on_reclaim_failure` is told afterwards. A call-scoped sandbox is disposed
    /// when the call returns. `ToolCallEnded` records every way out.
    pub async fn call<T, E, F, Fut>(
        &self,
        ctx: &CallerContext,
        agent_dir: &str,
        tool: &str,
        spec: &SandboxSpec,
        body: F,
    ) -> Result<T, CallError<E>>
    where
        F: FnOnce(CallSession) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let started = Instant::now();
        let call_id = match fresh_id() {
            Ok(id) => id,
            Err(e) => {
                self.call_ended(Vec::new(), tool, started, Some("CallEntropy"));
                return Err(CallError::Entropy(e));
            }
        };
        let key = match ctx.call_key(agent_dir, &call_id) {
            Ok(k) => k,
            Err(e) => {
                self.call_ended(Vec::new(), tool, started, Some("SandboxKeyInvalid"));
                return Err(CallError::Key(e));
            }
        };
        let sandbox: Arc<dyn Sandbox> = match self.acquire(&key, spec).await {
            Ok(sb) => sb,
            Err(e) => {
                self.call_ended(vec![key], tool, started, Some(e.kind()));
                return Err(CallError::Acquire(e));
            }
        };
        let scope = self.inner.host.effective_scope(spec);
        let guest_call_path =
            GuestRelPath::parse(&format!("{CALLS_DIR}/{call_id}")).map_err(CallError::Path)?;
        let session = CallSession {
            key: sandbox.key().clone(),
            sandbox,
            call_id,
            guest_call_path,
            work_dir: spec.work_dir().to_owned(),
        };
        let mut cleanup = CallCleanup {
            router: self.clone(),
            session: Some(session.clone()),
            scope,
            tool: tool.to_owned(),
            started,
        };
        let outcome = AssertUnwindSafe(body(session.clone())).catch_unwind().await;
        cleanup.session = None;
        drop(cleanup);
        self.finish_call(&session, scope).await;
        let failure = match &outcome {
            Ok(Ok(_)) => None,
            Ok(Err(_)) => Some(type_kind::<E>()),
            Err(_) => Some("panic"),
        };
        self.call_ended(vec![session.key.clone()], tool, started, failure);
        match outcome {
            Ok(result) => result.map_err(CallError::Body),
            Err(panic) => resume_unwind(panic),
        }
    }

    /// Reclaims the call's path, acts on a failure, and disposes a call-scoped sandbox.
    pub(crate) async fn finish_call(&self, session: &CallSession, scope: IsolationScope) {
        let t = self.inner.reclaim_timeout;
        let reclaimed = match tokio::time::timeout(
            t,
            session
                .sandbox
                .reclaim(&session.work_dir, &session.guest_call_path, t),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(SandboxError::Timeout),
        };
        let mut disposed = false;
        if let Err(e) = reclaimed {
            let disposal = match self.inner.failed_reclaim {
                FailedReclaimPolicy::Keep => ReclaimDisposal::Kept,
                FailedReclaimPolicy::Dispose => {
                    disposed = true;
                    match self.dispose(&session.key).await {
                        Ok(()) => ReclaimDisposal::Disposed,
                        Err(f) => ReclaimDisposal::Failed(f.code()),
                    }
                }
            };
            let failure = ReclaimFailure {
                key: session.key.clone(),
                path: session.guest_call_path.clone(),
                failure: e.kind(),
                disposal,
            };
            tracing::warn!(key = %failure.key, path = %failure.path, kind = failure.failure, ?disposal, "per-call guest path was not reclaimed");
            if let Some(hook) = &self.inner.on_reclaim_failure {
                let hook = Arc::clone(hook);
                if std::panic::catch_unwind(AssertUnwindSafe(|| hook(&failure))).is_err() {
                    tracing::warn!("on_reclaim_failure panicked; the panic was contained");
                }
            }
        }
        if scope == IsolationScope::Call && !disposed {
            if let Err(f) = self.dispose(&session.key).await {
                tracing::warn!(key = %session.key, code = %f.code(), "call-scoped sandbox was not disposed");
            }
        }
    }
}
