//! What the framework does with a sandbox whose per-call cleanup did not land.

use crate::vocab::vocabulary;

/// The host's choice when a call's guest path could not be reclaimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FailedReclaimPolicy {
    /// Dispose the sandbox (the default): better a failed run than leaked data, because
    /// acquire is get-or-create and a warm sandbox hands the next call what this one left.
    #[default]
    Dispose,
    /// Keep it warm. An explicit opt-down, on the router, never per workload.
    Keep,
}

vocabulary!(FailedReclaimPolicy, "failed reclaim policy", {
    Dispose => "dispose",
    Keep => "keep",
});
