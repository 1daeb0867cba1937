//! What a developer states about a host tool: its information-flow declaration, its argument
//! schema, and its body.

use std::fmt;
use std::sync::Arc;

use airlock_policy::{Identity, SandboxKey};
use async_trait::async_trait;
use serde_json::Value;

/// The three legs every host tool must answer, with no defaults. `None` is an answer: the
/// tool plays no part in that role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDeclaration {
    /// Where the data it returns comes from (e.g. `"crm"`, `"public-web"`).
    pub source: Option<String>,
    /// Where the data it is given goes (e.g. `"email"`, `"ticket-system"`).
    pub sink: Option<String>,
    /// The authority it acts with.
    pub identity: Option<Identity>,
}

impl ToolDeclaration {
    /// All three legs, stated. There is deliberately no `Default`.
    #[must_use]
    pub fn new(
        source: Option<&str>,
        sink: Option<&str>,
        identity: Option<Identity>,
    ) -> ToolDeclaration {
        ToolDeclaration {
            source: source.map(str::to_owned),
            sink: sink.map(str::to_owned),
            identity,
        }
    }
}

/// The authority a host minted for one run's user, handed to a `user` tool's body.
#[derive(Clone, PartialEq, Eq)]
pub struct UserIdentity(pub String);

impl fmt::Debug for UserIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UserIdentity(..)")
    }
}

/// One call, as a tool body receives it (arguments already validated against the schema).
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The validated arguments.
    pub args: Value,
    /// The run's minted user authority, for a tool declaring `identity = user`.
    pub user_identity: Option<UserIdentity>,
    /// The sandbox the call came from, when there is one.
    pub key: Option<SandboxKey>,
}

/// A tool body that failed, with what the guest may be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolBodyError {
    /// A sentence the model can act on (no secrets, no host paths).
    pub public_reason: String,
    /// Whether retrying the same call may succeed.
    pub retryable: bool,
}

/// The host-side function behind a tool.
#[async_trait]
pub trait ToolBody: Send + Sync {
    /// Runs one call.
    async fn call(&self, call: ToolCall) -> Result<Value, ToolBodyError>;
}

/// A tool as registered: name, description, argument schema, declaration, body.
#[derive(Clone)]
pub struct HostTool {
    /// The name the guest calls it by (`[A-Za-z0-9_.-]`, 1 to 64 bytes).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema its arguments must satisfy (checked host-side on every call).
    pub schema: Value,
    /// The information-flow declaration.
    pub declaration: ToolDeclaration,
    /// The body.
    pub body: Arc<dyn ToolBody>,
}

impl fmt::Debug for HostTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostTool")
            .field("name", &self.name)
            .field("declaration", &self.declaration)
            .finish_non_exhaustive()
    }
}
