//! Why a snapshot could not be written, found, verified or restored.
use std::path::PathBuf;

use crate::id::{BadId, SnapshotId};

/// A failed snapshot operation. The read-side kinds are distinct so a caller can tell a
/// missing snapshot from a damaged, a foreign or a malformed one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// A file-system operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done (and to which path or entry).
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The store (a directory or its key) is not safe to use: not the caller's own, open to
    /// group or others, a symbolic link, or not the kind of file it should be.
    #[error(
        "{path}: {why}; a snapshot store must belong to uid {uid} and be closed to group and \
         others (directories 0700, files 0600), with no symbolic links"
    )]
    UnsafeStore {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
        /// The caller's effective uid.
        uid: u32,
    },
    /// A string that is not a snapshot id.
    #[error(transparent)]
    BadId(#[from] BadId),
    /// No snapshot has this id.
    #[error("snapshot {0} not found")]
    NotFound(SnapshotId),
    /// The stored body does not hash to the snapshot's id (or the file has bytes past it).
    #[error("snapshot {id} is damaged or was altered: {why}")]
    Tampered {
        /// The snapshot.
        id: SnapshotId,
        /// What did not match.
        why: String,
    },
    /// The file is shorter than its header says.
    #[error("snapshot {id} is truncated: {have} bytes of {want}")]
    Truncated {
        /// The snapshot.
        id: SnapshotId,
        /// Its size on disk.
        have: u64,
        /// The size its header declares.
        want: u64,
    },
    /// The snapshot was not made by this store: its MAC was made with another key, or the
    /// file is not the store's own (another owner, a mode other than 0600, not a regular file).
    #[error("snapshot {id} was not made by this store: {why}")]
    Foreign {
        /// The snapshot.
        id: SnapshotId,
        /// Why it is refused.
        why: String,
    },
    /// A bound was exceeded: nothing partial was kept.
    #[error("the snapshot exceeds its bound on {what} ({limit})")]
    TooLarge {
        /// Which bound.
        what: &'static str,
        /// Its value.
        limit: u64,
    },
    /// The body is not in the snapshot format (or breaks one of its rules).
    #[error("malformed snapshot: {0}")]
    Malformed(String),
}

/// This crate's result.
pub type Result<T, E = SnapshotError> = std::result::Result<T, E>;

impl SnapshotError {
    /// A closure wrapping an I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SnapshotError {
        let what = what.into();
        move |source| SnapshotError::Io { what, source }
    }

    /// A malformed-body error.
    pub(crate) fn malformed(why: impl Into<String>) -> SnapshotError {
        SnapshotError::Malformed(why.into())
    }
}
