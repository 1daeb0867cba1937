//! The `Backend` trait: a provider of sandboxes that declares what it can serve.

use std::fmt;
use std::sync::Arc;

use airlock_policy::{BackendDeclarations, DisposalFailure, Isolation, SandboxKey, SandboxSpec};
use async_trait::async_trait;
use thiserror::Error;

use crate::observe::ErrorKind;
use crate::sandbox::Sandbox;

/// A backend that could not hand out a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The backend's service could not be reached.
    #[error("backend unreachable: {0}")]
    Unreachable(String),
    /// The backend refused to create the sandbox.
    #[error("backend refused: {0}")]
    Refused(String),
    /// The backend's own bound expired.
    #[error("backend timed out: {0}")]
    Timeout(String),
    /// Anything else, in the backend's words.
    #[error("backend failure: {0}")]
    Other(String),
}

impl ErrorKind for BackendError {
    fn kind(&self) -> &'static str {
        match self {
            BackendError::Unreachable(_) => "BackendUnreachable",
            BackendError::Refused(_) => "BackendRefused",
            BackendError::Timeout(_) => "BackendTimeout",
            BackendError::Other(_) => "BackendFailure",
        }
    }
}

/// What a scope purge did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopePurge {
    /// How many sandboxes were disposed.
    pub disposed: usize,
    /// A disposal known not to have landed, if any.
    pub failure: Option<DisposalFailure>,
}

/// A sandbox provider.
///
/// Disposal is reported, never raised: `None` means nothing went wrong that the backend
/// knows of (a backend with no way to check answers `None` too); a `DisposalFailure` means the
/// delete is known not to have landed, and the router then refuses the key until one does.
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug {
    /// The backend's registered name.
    fn name(&self) -> &str;

    /// The rung it honestly declares.
    fn isolation(&self) -> Isolation;

    /// What it declares it can serve (each field's silence has its own meaning).
    fn declarations(&self) -> &BackendDeclarations;

    /// Gets or creates the sandbox for `key` (the router has already checked `spec` and
    /// serialises acquires of one key).
    async fn acquire(
        &self,
        key: &SandboxKey,
        spec: &SandboxSpec,
    ) -> Result<Arc<dyn Sandbox>, BackendError>;

    /// Disposes the sandbox for `key` (success when there is none).
    async fn dispose(&self, key: &SandboxKey) -> Option<DisposalFailure>;

    /// Disposes every sandbox of the conversation `(scope, thread_id)`.
    async fn dispose_scope(&self, scope: &str, thread_id: &str) -> ScopePurge;
}
