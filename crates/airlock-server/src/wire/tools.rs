//! Tools the orchestrator answers, declared in a sandbox's spec and served through the
//! host-tool registry's door: every call is checked against the tool's JSON Schema, counted
//! against the per-run call cap, its response against the response caps, and a denial reaches
//! the guest sanitized — exactly as for a host tool registered in Rust. Only then is the call
//! relayed to the orchestrator (`call_tool`), over the connection that started the run.
use std::sync::Arc;

use airlock_broker::ToolHandler;
use airlock_local::RegistryTools;
use airlock_policy::SandboxKey;
use airlock_router::host_tools::{
    HostTool, HostToolRegistry, ToolBody, ToolBodyError, ToolCall, ToolDeclaration,
};
use airlock_router::Observers;
use async_trait::async_trait;
use serde_json::Value;

use crate::registry::request::ToolDecl;
use crate::wire::remote_tools::RemoteTools;

/// Most tools one spec declares.
pub const MAX_TOOLS: usize = 64;
/// Longest description.
const MAX_DESCRIPTION: usize = 4096;

/// Checks the declared tools as a registry would (names, schemas, identities), so a bad
/// declaration is refused at create, not at the first call.
pub fn check(tools: &[ToolDecl]) -> Result<(), String> {
    if tools.len() > MAX_TOOLS {
        return Err(format!("spec.tools declares more than {MAX_TOOLS} tools"));
    }
    if let Some(t) = tools.iter().find(|t| t.description.len() > MAX_DESCRIPTION) {
        return Err(format!(
            "spec.tools {:?}: description over {MAX_DESCRIPTION} bytes",
            t.name
        ));
    }
    registry(tools, None, Observers::default()).map(drop)
}

/// The tool body that relays to the orchestrator.
struct Relay {
    remote: Arc<RemoteTools>,
    name: String,
}

#[async_trait]
impl ToolBody for Relay {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolBodyError> {
        self.remote
            .call(&self.name, call.args)
            .await
            .map_err(|f| ToolBodyError {
                public_reason: f.message,
                retryable: false,
            })
    }
}

/// A body for checking declarations only (never called).
struct Unreachable;

#[async_trait]
impl ToolBody for Unreachable {
    async fn call(&self, _call: ToolCall) -> Result<Value, ToolBodyError> {
        Err(ToolBodyError {
            public_reason: "not served".into(),
            retryable: false,
        })
    }
}

fn registry(
    tools: &[ToolDecl],
    remote: Option<&Arc<RemoteTools>>,
    observers: Observers,
) -> Result<RegistryTools, String> {
    let mut reg = HostToolRegistry::new().observers(observers);
    for t in tools {
        let body: Arc<dyn ToolBody> = match remote {
            Some(r) => Arc::new(Relay {
                remote: Arc::clone(r),
                name: t.name.clone(),
            }),
            None => Arc::new(Unreachable),
        };
        reg.register(HostTool {
            name: t.name.clone(),
            description: t.description.clone(),
            schema: t.schema.0.clone(),
            declaration: ToolDeclaration::new(t.source.as_deref(), t.sink.as_deref(), t.identity),
            body,
        })
        .map_err(|e| format!("spec.tools: {e}"))?;
    }
    Ok(RegistryTools::new(reg.seal()))
}

/// One run's door over the declared tools, relaying to `remote`; every call is reported to
/// `observers` (`host_tool_called`).
pub fn door(
    tools: &[ToolDecl],
    remote: &Arc<RemoteTools>,
    key: &SandboxKey,
    observers: &Observers,
) -> Option<Box<dyn ToolHandler>> {
    registry(tools, Some(remote), observers.clone())
        .ok()
        .map(|r| Box::new(r.handler(Some(key.clone()))) as Box<dyn ToolHandler>)
}
