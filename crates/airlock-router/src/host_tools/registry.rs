//! Registration and sealing: the only place a declaration is read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use airlock_policy::{Identity, SandboxKey, TransferLimits};
use async_trait::async_trait;
use thiserror::Error;

use super::declaration::{HostTool, ToolBody, ToolDeclaration, UserIdentity};
use crate::observe::Observers;

/// Host-tool calls a run may make by default (refusals included).
pub const DEFAULT_MAX_HOST_TOOL_CALLS_PER_RUN: u32 = 64;

/// Longest tool name.
const MAX_TOOL_NAME_BYTES: usize = 64;

/// Per-run bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostToolLimits {
    /// Calls per run, refusals included.
    pub max_calls_per_run: u32,
    /// Response caps: bytes per response (`max_bytes_per_file`), bytes over the run
    /// (`max_total_bytes`), responses served over the run (`max_files`).
    pub responses: TransferLimits,
}

impl Default for HostToolLimits {
    fn default() -> Self {
        HostToolLimits {
            max_calls_per_run: DEFAULT_MAX_HOST_TOOL_CALLS_PER_RUN,
            responses: TransferLimits {
                max_bytes_per_file: 256 * 1024,
                max_total_bytes: 4 * 1024 * 1024,
                max_files: u64::from(DEFAULT_MAX_HOST_TOOL_CALLS_PER_RUN),
            },
        }
    }
}

/// Mints the authority a `user` tool acts with, once per run.
#[async_trait]
pub trait MintUser: Send + Sync {
    /// The user authority for the run in the sandbox addressed by `key`, or `None` when there
    /// is no user to act for.
    async fn mint(&self, key: Option<&SandboxKey>) -> Option<UserIdentity>;
}

/// A registration that was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The registry was sealed.
    #[error("the host-tool registry is sealed; nothing can be registered")]
    Sealed,
    /// The name is empty, too long, or has characters outside `[A-Za-z0-9_.-]`.
    #[error("host tool name {0:?} is invalid (1 to 64 of [A-Za-z0-9_.-])")]
    InvalidName(String),
    /// A tool of that name is already registered.
    #[error("a host tool named {0:?} is already registered")]
    Duplicate(String),
    /// The tool exercises an identity the registry does not allow.
    #[error("host tool {name:?} acts as {identity}, which this registry does not allow")]
    IdentityNotAllowed {
        /// The tool.
        name: String,
        /// Its identity.
        identity: Identity,
    },
    /// The schema is not a valid JSON Schema.
    #[error("host tool {name:?} has an invalid argument schema: {reason}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
}

/// One registered tool, with its declaration captured at registration.
pub(crate) struct Registered {
    pub(crate) description: String,
    pub(crate) declaration: ToolDeclaration,
    pub(crate) validator: jsonschema::Validator,
    pub(crate) body: Arc<dyn ToolBody>,
}

/// The registry while tools are being registered. Starts empty.
pub struct HostToolRegistry {
    tools: BTreeMap<String, Registered>,
    allowed_identities: BTreeSet<Identity>,
    limits: HostToolLimits,
    observers: Observers,
    mint_user: Option<Arc<dyn MintUser>>,
}

impl std::fmt::Debug for HostToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("allowed_identities", &self.allowed_identities)
            .finish_non_exhaustive()
    }
}

impl Default for HostToolRegistry {
    fn default() -> Self {
        HostToolRegistry::new()
    }
}

static WARNED: AtomicBool = AtomicBool::new(false);

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl HostToolRegistry {
    /// An empty registry allowing only `app` tools (and tools declaring no identity).
    #[must_use]
    pub fn new() -> HostToolRegistry {
        HostToolRegistry {
            tools: BTreeMap::new(),
            allowed_identities: BTreeSet::from([Identity::App]),
            limits: HostToolLimits::default(),
            observers: Observers::default(),
            mint_user: None,
        }
    }

    /// Replaces the allowed identities (user authority is opt-in: `{app, user}`).
    #[must_use]
    pub fn allowed_identities(mut self, ids: impl IntoIterator<Item = Identity>) -> Self {
        self.allowed_identities = ids.into_iter().collect();
        self
    }

    /// Sets the per-run bounds.
    #[must_use]
    pub fn limits(mut self, limits: HostToolLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Where `HostToolCalled` events go.
    #[must_use]
    pub fn observers(mut self, observers: Observers) -> Self {
        self.observers = observers;
        self
    }

    /// How a run's user authority is minted (without one, `user` tools are refused per call).
    #[must_use]
    pub fn mint_user(mut self, mint: Arc<dyn MintUser>) -> Self {
        self.mint_user = Some(mint);
        self
    }

    /// Registers `tool`, reading its declaration here and nowhere else.
    pub fn register(&mut self, tool: HostTool) -> Result<(), RegisterError> {
        if !valid_name(&tool.name) {
            return Err(RegisterError::InvalidName(
                tool.name.chars().take(80).collect(),
            ));
        }
        if self.tools.contains_key(&tool.name) {
            return Err(RegisterError::Duplicate(tool.name));
        }
        if let Some(identity) = tool.declaration.identity {
            if !self.allowed_identities.contains(&identity) {
                return Err(RegisterError::IdentityNotAllowed {
                    name: tool.name,
                    identity,
                });
            }
        }
        let validator =
            jsonschema::validator_for(&tool.schema).map_err(|e| RegisterError::InvalidSchema {
                name: tool.name.clone(),
                reason: e.to_string(),
            })?;
        if !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                tool = %tool.name,
                "a host tool was registered: model-written code can now call host functions \
                 with the host's authority"
            );
        }
        self.tools.insert(
            tool.name,
            Registered {
                description: tool.description,
                declaration: tool.declaration,
                validator,
                body: tool.body,
            },
        );
        Ok(())
    }

    /// Freezes the registry. Nothing can be registered, removed or redeclared afterwards.
    #[must_use]
    pub fn seal(self) -> SealedRegistry {
        SealedRegistry {
            inner: Arc::new(Sealed {
                tools: self.tools,
                limits: self.limits,
                observers: self.observers,
                mint_user: self.mint_user,
            }),
        }
    }
}

pub(crate) struct Sealed {
    pub(crate) tools: BTreeMap<String, Registered>,
    pub(crate) limits: HostToolLimits,
    pub(crate) observers: Observers,
    pub(crate) mint_user: Option<Arc<dyn MintUser>>,
}

/// A frozen registry: the policy derived from it, and a door per run.
#[derive(Clone)]
pub struct SealedRegistry {
    pub(crate) inner: Arc<Sealed>,
}

impl std::fmt::Debug for SealedRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedRegistry")
            .field("tools", &self.names())
            .finish_non_exhaustive()
    }
}

impl SealedRegistry {
    /// Registered tool names, sorted.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.inner.tools.keys().cloned().collect()
    }

    /// The declaration captured for `name` at registration.
    #[must_use]
    pub fn declaration(&self, name: &str) -> Option<&ToolDeclaration> {
        self.inner.tools.get(name).map(|t| &t.declaration)
    }

    /// A tool's description.
    #[must_use]
    pub fn description(&self, name: &str) -> Option<&str> {
        self.inner.tools.get(name).map(|t| t.description.as_str())
    }

    /// The identities the registered tools exercise: what a spec's `identities` must state,
    /// so the host's `denied_identities` is checked at acquire.
    #[must_use]
    pub fn identities(&self) -> BTreeSet<Identity> {
        self.inner
            .tools
            .values()
            .filter_map(|t| t.declaration.identity)
            .collect()
    }

    /// Whether anything is registered (an empty registry needs no `host_tools` capability).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.inner.tools.is_empty()
    }

    /// The per-run bounds.
    #[must_use]
    pub fn limits(&self) -> HostToolLimits {
        self.inner.limits
    }
}
