//! What the broker tells the stage, in the first frame on the socket.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The method name of the first frame (a notification) carrying an [`ExecutorConfig`].
pub const SETUP_METHOD: &str = "setup";

/// In allowlist egress, the stage's fd (mapped by the broker at spawn) of the socket over
/// which pid 1 hands the proxy listener to the broker.
pub const EGRESS_CHANNEL_FD: i32 = 5;

/// Everything the stage needs to isolate itself and start the guest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutorConfig {
    /// What to run once isolated.
    pub mode: Mode,
    /// The run's work directory (host path; the only writable place).
    pub work_dir: PathBuf,
    /// The complete environment of the guest; nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// Kernel-enforced backstops.
    pub rlimits: RlimitSpec,
    /// Landlock file-system policy.
    pub fs: FsSpec,
    /// Hostname inside the uts namespace.
    pub hostname: String,
    /// Allowlist egress: pid 1 listens on `127.0.0.1:<port>` inside the sandbox's network
    /// namespace, hands the listener to the broker over [`EGRESS_CHANNEL_FD`], and the guest
    /// may open TCP client sockets and connect to that port only. `None`: no network at all.
    #[serde(default)]
    pub egress_proxy_port: Option<u16>,
}

/// The two workloads a stage can start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mode {
    /// CPython with the guest bootstrap; the program arrives later in an `execute` request.
    Python {
        /// Absolute path of the real interpreter binary.
        interpreter: PathBuf,
        /// The guest bootstrap compiled by that interpreter (`marshal`, hex); the source is run
        /// instead when absent.
        #[serde(default)]
        bootstrap: Option<String>,
    },
    /// A command, started after the broker answers `ready` with `start`.
    Command {
        /// Absolute path of the program to execve.
        program: PathBuf,
        /// argv, including argv[0].
        argv: Vec<String>,
    },
}

/// rlimits applied before the guest starts (`RLIMIT_CORE` is always 0).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RlimitSpec {
    /// `RLIMIT_AS` in bytes: a backstop under the broker's RSS watchdog.
    pub address_space: Option<u64>,
    /// `RLIMIT_FSIZE` in bytes.
    pub file_size: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: Option<u64>,
    /// `RLIMIT_NPROC`, counted inside the run's own user namespace.
    pub processes: Option<u64>,
}

/// Landlock rules: everything not listed is denied.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FsSpec {
    /// Readable, not executable.
    pub read_only: Vec<PathBuf>,
    /// Readable and executable (interpreter, shared libraries, commands).
    pub read_exec: Vec<PathBuf>,
    /// Readable and writable (the work dir).
    pub read_write: Vec<PathBuf>,
}
