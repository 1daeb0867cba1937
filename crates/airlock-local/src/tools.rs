//! The local sandbox's `call_tool` goes through the host-tool registry's one door.
//!
//! [`RegistryTools`] gives each run its own [`HostToolRun`](airlock_router::host_tools::HostToolRun)
//! (so the call cap starts at zero per run and counts refusals) and turns every
//! [`Denial`](airlock_router::host_tools::Denial) into a protocol error whose `data` is the
//! structured `{code, reason, retryable}` object the guest's `ToolError.data` carries.
//! [`CommandBody`] is a tool body backed by a host command (`sh -c CMD`, JSON arguments on
//! stdin, a JSON answer on stdout), what `airlock run --tool NAME=CMD` registers.

use std::sync::Arc;

use airlock_broker::{CommandTools, ToolFailure, ToolHandler};
use airlock_policy::SandboxKey;
use airlock_protocol::ErrorCode;
use airlock_router::host_tools::{
    DenialCode, HostToolRun, SealedRegistry, ToolBody, ToolBodyError, ToolCall,
};
use async_trait::async_trait;
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::sandbox::ToolsForRun;

/// Serves every run's tool calls through a sealed registry.
#[derive(Debug, Clone)]
pub struct RegistryTools {
    registry: SealedRegistry,
}

impl RegistryTools {
    /// Wraps a sealed registry.
    #[must_use]
    pub fn new(registry: SealedRegistry) -> RegistryTools {
        RegistryTools { registry }
    }

    /// A handler for one run outside any sandbox key (the CLI's single run).
    #[must_use]
    pub fn handler(&self, key: Option<SandboxKey>) -> RunDoor {
        RunDoor(self.registry.run(key))
    }
}

impl ToolsForRun for RegistryTools {
    fn for_run(&self, key: &SandboxKey) -> Box<dyn ToolHandler> {
        Box::new(self.handler(Some(key.clone())))
    }
}

/// One run's door, as a broker tool handler.
#[derive(Debug)]
pub struct RunDoor(HostToolRun);

/// A registry denial as the broker relays it into the sandbox: a protocol code the program's
/// `ToolError.code` carries, the sanitized reason, and the structured denial as data. One table
/// for every door (the local backend's, `airlock mcp`'s).
pub fn failure(d: &airlock_router::host_tools::Denial) -> ToolFailure {
    ToolFailure {
        code: code(d.code),
        message: d.reason.clone(),
        data: Some(d.to_json()),
    }
}

fn code(c: DenialCode) -> ErrorCode {
    match c {
        DenialCode::UnknownTool => ErrorCode::UnknownTool,
        DenialCode::CallCapExhausted => ErrorCode::ToolCallLimit,
        DenialCode::InvalidArguments => ErrorCode::InvalidParams,
        DenialCode::ToolFailed => ErrorCode::ToolError,
        DenialCode::IdentityUnavailable | DenialCode::ResponseTooLarge => ErrorCode::ToolDenied,
        _ => ErrorCode::ToolDenied,
    }
}

impl ToolHandler for RunDoor {
    fn call<'a>(&'a self, name: &'a str, args: Value) -> BoxFuture<'a, Result<Value, ToolFailure>> {
        Box::pin(async move { self.0.call(name, args).await.map_err(|d| failure(&d)) })
    }
}

/// A tool body that runs a host command.
pub struct CommandBody {
    name: String,
    tools: Arc<CommandTools>,
}

impl std::fmt::Debug for CommandBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandBody")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CommandBody {
    /// `sh -c command` with the broker's per-call time budget and output cap.
    #[must_use]
    pub fn new(name: &str, command: &str) -> CommandBody {
        let mut tools = CommandTools::new();
        tools.insert(name, command);
        CommandBody {
            name: name.to_owned(),
            tools: Arc::new(tools),
        }
    }
}

#[async_trait]
impl ToolBody for CommandBody {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolBodyError> {
        self.tools
            .call(&self.name, call.args)
            .await
            .map_err(|f| ToolBodyError {
                public_reason: f.message,
                retryable: false,
            })
    }
}
