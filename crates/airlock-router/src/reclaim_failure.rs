//! A per-call guest path that survived its call, and what became of its sandbox.
use airlock_policy::{DisposalCode, GuestRelPath, SandboxKey};

/// What became of a sandbox whose reclaim failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReclaimDisposal {
    /// It was disposed.
    Disposed,
    /// Disposal was attempted and did not land; the key is refused until one does.
    Failed(DisposalCode),
    /// The host opted down (`failed_reclaim = "keep"`); it stays warm.
    Kept,
}

/// A per-call guest path that could not be removed. A data-retention failure: acquire is
/// get-or-create, so a surviving path is readable by later calls in the same sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReclaimFailure {
    /// The sandbox's address.
    pub key: SandboxKey,
    /// The path that survived, relative to the work dir.
    pub path: GuestRelPath,
    /// The failure's kind.
    pub failure: &'static str,
    /// What the framework did about it, before telling the host.
    pub disposal: ReclaimDisposal,
}
