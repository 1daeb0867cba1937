//! Tools the orchestrator answers, declared in a sandbox's spec and served through the
//! host-tool registry's door: every call is checked against the tool's JSON Schema, counted
//! against the per-run call cap, its response against the response caps, and a denial reaches
//! the guest sanitized — exactly as for a host tool registered in Rust. Only then is the call
//! relayed to the orchestrator (`call_tool`), over the connection that started the run.
use std::sync::Arc;

use airlock_broker::ToolHandler;
use airlock_local::RegistryTools;
use airlock_policy::{Identity, SandboxKey};
use airlock_router::host_tools::{
    HostTool, HostToolRegistry, ToolBody, ToolBodyError, ToolCall, ToolDeclaration,
};
use airlock_router::Observers;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use crate::wire::remote_tools::RemoteTools;

/// Most tools one spec declares.
pub const MAX_TOOLS: usize = 64;
/// Longest description.
const MAX_DESCRIPTION: usize = 4096;

/// One tool as `sandbox.create` declares it. Every leg of the declaration must be stated
/// (`null` is an answer: the tool plays no part in that role).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireTool {
    name: String,
    #[serde(default)]
    description: String,
    schema: Value,
    source: Option<String>,
    sink: Option<String>,
    identity: Option<Identity>,
}

/// Checks the declared tools as a registry would (names, schemas, identities), so a bad
/// declaration is refused at create, not at the first call.
pub fn check(tools: &[WireTool]) -> Result<(), String> {
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
    tools: &[WireTool],
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
            schema: t.schema.clone(),
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
    tools: &[WireTool],
    remote: &Arc<RemoteTools>,
    key: &SandboxKey,
    observers: &Observers,
) -> Option<Box<dyn ToolHandler>> {
    registry(tools, Some(remote), observers.clone())
        .ok()
        .map(|r| Box::new(r.handler(Some(key.clone()))) as Box<dyn ToolHandler>)
}
