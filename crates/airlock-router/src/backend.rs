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

/// Where a sandbox an acquire makes comes from.
#[derive(Debug)]
pub enum Origin<B> {
    /// Made new from its spec.
    Fresh,
    /// Made around a branch of another sandbox the backend handed out (a copy-on-write
    /// fork's: its root and its kernel), under a key never used before.
    Branch(B),
}

/// A sandbox provider.
///
/// Disposal is reported, never raised: `None` means nothing went wrong that the backend
/// knows of (a backend with no way to check answers `None` too); a `DisposalFailure` means the
/// delete is known not to have landed, and the router then refuses the key until one does.
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// The sandboxes it hands out.
    type Sandbox: Sandbox + 'static;
    /// What a branch of one of its sandboxes is ([`Origin::Branch`]); a backend that cannot
    /// fork names [`std::convert::Infallible`].
    type Branch: Send + 'static;

    /// The backend's registered name.
    fn name(&self) -> &str;

    /// The rung it honestly declares.
    fn isolation(&self) -> Isolation;

    /// What it declares it can serve (each field's silence has its own meaning).
    fn declarations(&self) -> &BackendDeclarations;

    /// Gets or creates the sandbox for `key`, made from `origin` when it is new (the router
    /// has already checked `spec`, serialises acquires of one key, and hands a branch only to
    /// a key with no live sandbox).
    async fn acquire(
        &self,
        key: &SandboxKey,
        spec: &SandboxSpec,
        origin: Origin<Self::Branch>,
    ) -> Result<Arc<Self::Sandbox>, BackendError>;

    /// Disposes the sandbox for `key` (success when there is none).
    async fn dispose(&self, key: &SandboxKey) -> Option<DisposalFailure>;

    /// Disposes every sandbox of the conversation `(scope, thread_id)`.
    async fn dispose_scope(&self, scope: &str, thread_id: &str) -> ScopePurge;
}
