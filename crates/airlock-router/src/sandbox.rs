//! The `Sandbox` trait: what one acquired sandbox can be asked to do.
//!
//! Every path is a [`GuestRelPath`] relative to a working directory, so a name that could
//! traverse never reaches a backend. The lexical check is half of confinement: a backend still
//! resolves beneath the working directory without following symlinks (for `local`: `openat2`
//! with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), and refuses a path landing on a symlink.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use airlock_policy::{Capability, GuestPathError, GuestRelPath, SandboxKey};
use async_trait::async_trait;
use thiserror::Error;

use crate::observe::ErrorKind;

/// Options for one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOptions {
    /// Wall-clock bound from the call (time spent queued counts).
    pub timeout: Duration,
    /// The complete environment (nothing is inherited).
    pub env: BTreeMap<String, String>,
    /// Absolute guest directory to run in; `None` is the spec's work dir.
    pub working_directory: Option<String>,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            timeout: Duration::from_secs(30),
            env: BTreeMap::new(),
            working_directory: None,
        }
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecResult {
    /// The exit status, `None` when the command was killed (timeout, signal).
    pub exit_code: Option<i32>,
    /// Captured standard output (lossy UTF-8), capped.
    pub stdout: String,
    /// Captured standard error (lossy UTF-8), capped.
    pub stderr: String,
    /// The exact bytes kept of standard output (`stdout` is them as text, invalid UTF-8
    /// replaced): a command's binary output survives byte for byte here.
    pub stdout_raw: Vec<u8>,
    /// The exact bytes kept of standard error.
    pub stderr_raw: Vec<u8>,
    /// Whether the bound expired.
    pub timed_out: bool,
    /// Whether either stream was truncated at its cap.
    pub truncated: bool,
}

/// Options for one program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// Wall-clock bound from the call (time spent queued counts).
    pub timeout: Duration,
    /// The complete environment (nothing is inherited).
    pub env: BTreeMap<String, String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            timeout: Duration::from_secs(30),
            env: BTreeMap::new(),
        }
    }
}

/// How a program's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunStatus {
    /// It ran to the end and exited zero.
    Completed,
    /// It exited non-zero or raised.
    Failed,
    /// Its bound expired and it was stopped.
    Timeout,
    /// It hit the memory ceiling.
    MemoryLimit,
    /// It exceeded the output cap.
    OutputLimit,
    /// It filled the sandbox's disk bound.
    DiskLimit,
}

/// What a program did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    /// How it ended.
    pub status: RunStatus,
    /// Its exit status, `None` when killed.
    pub exit_code: Option<i32>,
    /// Captured standard output, capped.
    pub stdout: String,
    /// Captured standard error, capped.
    pub stderr: String,
    /// Host-tool calls it made.
    pub tool_calls: u64,
}

/// What a stat found, lstat-like: a link is named as one, never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (whatever it points at).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl EntryKind {
    /// The wire spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Directory => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "other",
        }
    }
}

/// One entry of a stat or a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// Size in bytes (`None` when the backend could not say).
    pub size: Option<u64>,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// What it is (a caller tells an escape from a FIFO by this).
    pub kind: EntryKind,
    /// Its permission, set-id and sticky bits (`st_mode & 0o7777`), when the backend says.
    pub mode: Option<u32>,
    /// When it was last modified, milliseconds since the epoch, when the backend says.
    pub modified_ms: Option<u64>,
}

impl FileStat {
    /// A regular file of `size` bytes.
    #[must_use]
    pub fn file(size: u64) -> Self {
        FileStat {
            size: Some(size),
            is_dir: false,
            kind: EntryKind::File,
            mode: None,
            modified_ms: None,
        }
    }

    /// A directory.
    #[must_use]
    pub fn dir() -> Self {
        FileStat {
            size: None,
            is_dir: true,
            kind: EntryKind::Directory,
            mode: None,
            modified_ms: None,
        }
    }
}

/// A listed directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (one segment).
    pub name: String,
    /// Its stat.
    pub stat: FileStat,
}

/// Why a sandbox operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The backend does not declare the capability this method names.
    #[error("this sandbox does not support {0}")]
    NotSupported(Capability),
    /// The path was refused lexically.
    #[error(transparent)]
    Path(#[from] GuestPathError),
    /// The path was refused on resolution (escapes, passes a symlink, names the work dir).
    #[error("guest path {path:?} is not confined to the working directory")]
    NotConfined {
        /// The path.
        path: String,
    },
    /// Nothing at the path.
    #[error("no such guest file {path:?}")]
    NotFound {
        /// The path.
        path: String,
    },
    /// A read above its bound; never truncated silently.
    #[error("guest file {path:?} is {size} bytes, above the {max}-byte read bound")]
    TooLarge {
        /// The path.
        path: String,
        /// Its size.
        size: u64,
        /// The bound.
        max: u64,
    },
    /// The deadline expired before the work started (queued behind another call).
    #[error("the deadline expired while queued")]
    QueuedTimeout,
    /// The operation's bound expired.
    #[error("the operation timed out")]
    Timeout,
    /// Every run slot was busy and the run could not wait: the queue was full, or the
    /// run's deadline passed while it waited.
    #[error("over capacity: {detail}")]
    OverCapacity {
        /// Which bound, and the figures.
        detail: String,
    },
    /// The backend failed in its own terms.
    #[error("backend failure: {detail}")]
    Backend {
        /// The backend's sentence (for logs; may name an endpoint).
        detail: String,
    },
}

impl ErrorKind for SandboxError {
    fn kind(&self) -> &'static str {
        match self {
            SandboxError::NotSupported(_) => "SandboxNotSupported",
            SandboxError::Path(_) => "SandboxPathRefused",
            SandboxError::NotConfined { .. } => "SandboxPathNotConfined",
            SandboxError::NotFound { .. } => "SandboxFileNotFound",
            SandboxError::TooLarge { .. } => "SandboxFileTooLarge",
            SandboxError::QueuedTimeout => "SandboxQueuedTimeout",
            SandboxError::Timeout => "SandboxTimeout",
            SandboxError::OverCapacity { .. } => "SandboxOverCapacity",
            SandboxError::Backend { .. } => "SandboxBackendFailure",
        }
    }
}

/// One acquired sandbox.
///
/// A method whose capability the backend does not declare may answer
/// [`SandboxError::NotSupported`]; the router never routes a spec requiring it there.
/// [`Sandbox::reclaim`] has no capability behind it and must genuinely work.
#[async_trait]
pub trait Sandbox: Send + Sync + fmt::Debug {
    /// The key that addresses this sandbox.
    fn key(&self) -> &SandboxKey;

    /// Runs a command (`argv[0]` plus arguments, never through a shell) — [`Capability::Exec`].
    async fn exec(&self, argv: &[String], opts: &ExecOptions) -> Result<ExecResult, SandboxError>;

    /// Evaluates a program — [`Capability::RunCode`].
    async fn run_code(&self, code: &str, opts: &RunOptions) -> Result<RunResult, SandboxError>;

    /// Writes `data` at `path` beneath `working_directory`, creating parents, replacing a
    /// regular file; refuses a symlink at or above the destination — [`Capability::FilesIn`].
    async fn write_file(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        data: &[u8],
    ) -> Result<(), SandboxError>;

    /// Reads the file at `path`, refusing (never truncating) one above `max_bytes` —
    /// [`Capability::FilesOut`].
    async fn read_file(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        max_bytes: u64,
    ) -> Result<Vec<u8>, SandboxError>;

    /// What is at `path`, `None` when nothing is — [`Capability::FilesOut`].
    async fn stat(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<Option<FileStat>, SandboxError>;

    /// The entries of `dir` (`None` is the working directory itself), sorted by name —
    /// [`Capability::FilesList`].
    async fn list(
        &self,
        working_directory: &str,
        dir: Option<&GuestRelPath>,
    ) -> Result<Vec<DirEntry>, SandboxError>;

    /// Removes the file at `path` — [`Capability::FilesDelete`].
    async fn remove(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<(), SandboxError>;

    /// Removes `directory` beneath `working_directory` and everything under it. The caller
    /// created it with an unguessable name, so no confinement check on a model-chosen name is
    /// owed; a missing directory is success. Must be implemented by every backend.
    async fn reclaim(
        &self,
        working_directory: &str,
        directory: &GuestRelPath,
        timeout: Duration,
    ) -> Result<(), SandboxError>;
}
