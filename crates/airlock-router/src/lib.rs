//! airlock-router: the acting half of the policy layer.
//!
//! The object-safe async [`Backend`] and [`Sandbox`] traits; the [`Router`], which resolves a
//! backend per its selection mode, refuses before touching one, single-flights acquires of a
//! key, disposes with coded failures and refuses an unclean key; the [`Router::scope`] guard;
//! [`Router::call`], which reclaims a per-call guest path after every call; the observer
//! seam; the in-process fake backend `none` ([`fake`]); and the reusable [`conformance`]
//! suites that hold any backend to its declarations.

pub mod backend;
pub mod call;
pub mod conformance;
pub mod disposal;
pub mod fake;
pub mod host_tools;
mod ids;
pub mod names;
pub mod observe;
pub mod outputs;
mod reclaim_failure;
pub mod router;
pub mod sandbox;
pub mod scope_guard;
pub mod sinks;

pub use backend::{Backend, BackendError, Origin, ScopePurge};
pub use call::{CallError, CallSession, CALLS_DIR};
pub use disposal::ScopeRecord;
pub use observe::{
    EgressDecided, ErrorKind, HostToolCalled, HostToolOutcome, Observers, OutputsCollected,
    SandboxAcquired, SandboxDisposed, SandboxObserver, StoreFileRead, ToolCallEnded,
};
pub use reclaim_failure::{ReclaimDisposal, ReclaimFailure};
pub use router::{AcquireError, ReclaimHook, Router, RouterBuilder, RouterConfigError, Selection};
pub use sandbox::{
    DirEntry, EntryKind, ExecOptions, ExecResult, FileStat, RunOptions, RunResult, RunStatus,
    Sandbox, SandboxError,
};
pub use scope_guard::ScopeGuard;
