//! The crate's one error type: every failure names the operation and, where there is one, the fix.

use std::io;
use std::path::PathBuf;

/// Anything that can go wrong while building or probing the jail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JailError {
    /// A system call failed.
    #[error("{op} failed: {source}")]
    Sys {
        /// The operation, e.g. `"unshare"` or `"write /proc/self/uid_map"`.
        op: &'static str,
        /// The errno, as an [`io::Error`].
        #[source]
        source: io::Error,
    },
    /// The kernel or the machine does not offer something the jail needs.
    #[error("{what} is not available (fix: {fix})")]
    Unsupported {
        /// What is missing.
        what: String,
        /// How an administrator can make it available.
        fix: String,
    },
    /// Landlock did not enforce the full policy; the jail fails closed.
    #[error("landlock not fully enforced: {0}")]
    LandlockNotEnforced(String),
    /// A cgroup operation failed.
    #[error("cgroup {op} on {path} failed: {source}")]
    Cgroup {
        /// The operation, e.g. `"mkdir"` or `"write memory.limit_in_bytes"`.
        op: &'static str,
        /// The cgroup directory or file.
        path: PathBuf,
        /// The errno.
        #[source]
        source: io::Error,
    },
    /// The caller passed something the jail refuses to act on.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

impl JailError {
    /// Wraps the current `errno` as a [`JailError::Sys`] for `op`.
    pub(crate) fn last_os(op: &'static str) -> Self {
        JailError::Sys {
            op,
            source: io::Error::last_os_error(),
        }
    }

    /// Wraps an [`io::Error`] as a [`JailError::Sys`] for `op`.
    pub(crate) fn io(op: &'static str, source: io::Error) -> Self {
        JailError::Sys { op, source }
    }

    /// The raw errno of a [`JailError::Sys`], if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            JailError::Sys { source, .. } | JailError::Cgroup { source, .. } => {
                source.raw_os_error()
            }
            JailError::Unsupported { .. }
            | JailError::LandlockNotEnforced(_)
            | JailError::InvalidInput(_) => None,
        }
    }
}

/// The crate's result alias.
pub type Result<T> = std::result::Result<T, JailError>;
