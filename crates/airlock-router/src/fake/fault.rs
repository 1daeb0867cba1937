//! The ways the fake backend can be told to misbehave.

/// A deliberate misbehaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// Every fetch succeeds, allowlisted or not.
    LeakEgress,
    /// Call keys share one sandbox per conversation (the call id is ignored).
    ShareCallScope,
    /// `remove` and `reclaim` report success and delete nothing.
    IgnoreRemove,
    /// `reclaim` fails.
    FailReclaim,
    /// `remove` of a missing path reports `NotFound` instead of success.
    StrictRemove,
    /// Standard error is written into standard output.
    MergeStderr,
    /// Output comes back as lossy text: bytes that are not UTF-8 are replaced.
    LossyOutput,
    /// Every command and program reports exit code 0.
    DropExitCode,
    /// Over-bound reads are silently truncated instead of refused.
    TruncateReads,
    /// Timeouts are ignored: work runs to its end.
    IgnoreTimeout,
    /// `acquire` fails.
    FailAcquire,
}
