//! What a face asks the registry for when it makes a sandbox ([`NewSandbox`]), and the parts
//! of it the registry keeps on the held sandbox: what idle reclaim does, the outputs
//! `outputs.collect` reads, the tools the orchestrator answers.
use std::time::Duration;

use airlock_policy::{Identity, SandboxKey, SandboxSpec};
use serde::Deserialize;

use crate::ceilings::RequestedLimits;
use crate::json_doc::JsonDoc;
use crate::registry::life::Metadata;
use crate::tenancy::tenant::{tenant_scope, Tenant};

/// The scope of keyless sandboxes' keys; an orchestrator's key may not name it.
pub const KEYLESS_SCOPE: &str = "airlock-keyless";

/// What idle reclaim does to a sandbox idle past its timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdleAction {
    /// Dispose of it: nothing of it remains.
    #[default]
    Dispose,
    /// Pause it: its files and kernel state go to the snapshot store, its processes and
    /// memory are freed, and the next call on it resumes it.
    Pause,
}

/// What `outputs.collect` may read.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// Declared at create.
    pub declared: Vec<airlock_router::outputs::DeclaredOutput>,
    /// Whether a call may name others.
    pub at_call_time: bool,
}

/// A sandbox asked for: what any face's create request parses into.
#[derive(Debug, Clone)]
pub struct NewSandbox {
    /// The policy spec the router decides on.
    pub spec: SandboxSpec,
    /// Limits every run of the sandbox asks for (resolved against the ceilings).
    pub limits: RequestedLimits,
    /// Disposed after this long without a call.
    pub idle: Duration,
    /// The outputs `outputs.collect` reads.
    pub outputs: Outputs,
    /// The tools the orchestrator answers (served through the registry's door).
    pub tools: Vec<ToolDecl>,
    /// The orchestrator's key, when it gave one.
    pub key: Option<SandboxKey>,
    /// The orchestrator's labels (no part of spec equality).
    pub metadata: Metadata,
    /// What idle reclaim does.
    pub idle_action: IdleAction,
    /// Environment variables of every run, process and terminal (a call's own win).
    pub env: Vec<(String, String)>,
    /// An absolute life from create, whatever the activity (none: only the idle timeout).
    pub lifetime: Option<Duration>,
    /// The request as its face received it: what a paused sandbox or a branch is made again
    /// from (by that face: the registry never reads it).
    pub raw: JsonDoc,
    /// The tenant it is made for (the connection's; never from the wire).
    pub tenant: Tenant,
}

impl NewSandbox {
    /// These params made for `tenant`: its key moves into the tenant's own part of the key
    /// space (two tenants' equal keys address two sandboxes).
    pub fn for_tenant(mut self, tenant: &Tenant) -> Result<Self, String> {
        if let Some(k) = self.key.take() {
            let mut scoped =
                SandboxKey::new(tenant_scope(tenant, k.scope()), k.thread_id(), "wire")
                    .map_err(|e| format!("key: {e}"))?;
            if let Some(c) = k.call_id() {
                scoped = scoped
                    .with_call_id(c)
                    .map_err(|e| format!("key.call_id: {e}"))?;
            }
            self.key = Some(scoped);
        }
        self.tenant = tenant.clone();
        Ok(self)
    }
}

/// One tool as `sandbox.create` declares it. Every leg of the declaration must be stated
/// (`null` is an answer: the tool plays no part in that role).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDecl {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: String,
    pub(crate) schema: JsonDoc,
    pub(crate) source: Option<String>,
    pub(crate) sink: Option<String>,
    pub(crate) identity: Option<Identity>,
}
