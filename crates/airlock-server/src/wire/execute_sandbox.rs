//! `execute`'s sandbox: a keyless, call-scoped sandbox made through the router for exactly one
//! run, so the policy layer decides an `execute` as it decides every other run (the same
//! floor, denied capabilities, observers and audit events), and disposed when the run ends.
//!
//! Nothing of it is addressable: its key lives in the keyless scope no orchestrator key may
//! name, and it is never held in the registry of live sandboxes (so it does not count against
//! `--max-sandboxes`). Its root is built by its one run's stage (`airlock_local`'s lazy root).
use std::sync::Arc;

use airlock_broker::Workload;
use airlock_local::LocalSandbox;
use airlock_policy::{Capability, IsolationScope, SandboxKey, SandboxSpec};
use airlock_protocol::{ErrorCode, ErrorObject};
use serde_json::json;

use crate::registry::sandboxes::Sandboxes;
use crate::wire::spec::KEYLESS_SCOPE;

/// The workload kind `execute`'s sandboxes are made for.
const KIND: &str = "execute";

/// A sandbox lent to one `execute` run; [`OneRun::end`] disposes of it.
#[derive(Debug)]
pub(crate) struct OneRun {
    pub(crate) sandbox: Arc<LocalSandbox>,
    key: SandboxKey,
}

/// What an `execute` of `workload` needs: running it, and host tools unless it said `tools: []`.
pub(crate) fn needs(workload: &Workload, uses_tools: bool) -> Vec<Capability> {
    let run = match workload {
        Workload::Python { .. } => Capability::RunCode,
        Workload::Command { .. } => Capability::Exec,
    };
    let mut caps = vec![run];
    if uses_tools {
        caps.push(Capability::HostTools);
    }
    caps
}

fn internal(e: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(ErrorCode::InternalError, e.to_string())
}

impl OneRun {
    /// A call-scoped sandbox for run `run_id`, decided by the router's policy.
    pub(crate) async fn acquire(
        sandboxes: &Sandboxes,
        run_id: &str,
        needs: Vec<Capability>,
    ) -> Result<OneRun, ErrorObject> {
        let spec = SandboxSpec::builder(KIND)
            .requires(needs)
            .isolation_scope(IsolationScope::Call)
            .build()
            .map_err(internal)?;
        let key = SandboxKey::new(KEYLESS_SCOPE, run_id, "wire")
            .and_then(|k| k.with_call_id(run_id))
            .map_err(internal)?;
        let made = sandboxes.router().acquire(&key, &spec).await;
        let sb = made.map_err(|e| {
            let kind = airlock_router::ErrorKind::kind(&e);
            ErrorObject::new(ErrorCode::SandboxRefused, e.to_string())
                .with_data(json!({ "kind": kind }))
        })?;
        let key = airlock_router::Sandbox::key(sb.as_ref()).clone();
        Ok(OneRun { sandbox: sb, key })
    }

    /// Dispose of the sandbox (its run is over: nothing of it is left to wait for).
    pub(crate) async fn end(self, sandboxes: &Sandboxes) {
        drop(self.sandbox);
        if let Err(f) = sandboxes.router().dispose(&self.key).await {
            tracing::warn!(key = %self.key, failure = %f, "disposing an execute sandbox");
        }
    }
}
